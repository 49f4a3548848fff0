"""Workloads that fail in every way a real one can: the fault-injection matrix."""
import ctypes
import os
import time
from pathlib import Path

import torch

from torchgate.workloads import Workload, matmul_relu


def good(*, device, dtype, compile, seed, size=32):
    return matmul_relu(device=device, dtype=dtype, compile=compile, seed=seed, size=size)


def abort(*, device, dtype, compile, seed):
    os.abort()                                    # SIGABRT, as a failed C++ assertion does


def segfault(*, device, dtype, compile, seed):
    ctypes.string_at(0)                           # SIGSEGV, as a bad kernel does


def out_of_memory(*, device, dtype, compile, seed):
    torch.empty(1 << 52, dtype=torch.uint8, device=device)  # a real allocator failure


def memory_error(*, device, dtype, compile, seed):
    raise MemoryError("simulated: the host ran out of memory")


def hang(*, device, dtype, compile, seed, pid_file=""):
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
    time.sleep(3600)


def raises(*, device, dtype, compile, seed):
    def step():
        raise RuntimeError("shape mismatch in layer 3 (on purpose)")
    return Workload(step=step, items=1)


def returns_nan(*, device, dtype, compile, seed):
    x = torch.ones(8, device=device, dtype=dtype)
    return Workload(step=lambda: torch.log(x - 2), items=8)   # log of negatives: NaN


def flaky(*, device, dtype, compile, seed, fail_in_process=2, counter=""):
    """Fails in the `fail_in_process`-th worker process that builds it (1-based, counted in
    the file `counter` by process id) and runs in every other: a flaky unit."""
    seen = Path(counter).read_text().split() if Path(counter).exists() else []
    if str(os.getpid()) not in seen:
        seen.append(str(os.getpid()))
        Path(counter).write_text(" ".join(seen))
    if seen.index(str(os.getpid())) + 1 == fail_in_process:
        raise RuntimeError(f"failed in process {fail_in_process} (on purpose)")
    return good(device=device, dtype=dtype, compile=compile, seed=seed)
