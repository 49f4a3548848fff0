"""How a workload is built in a worker: threads and matmul precision for the job, the
`compile` its factory gets, autocast where the precision asks for it, and how a workload's
exception becomes a status (a custom operator without a kernel for the device in one line);
and, for the other arm of a lock-step pair, its revision's workload code run with this
harness (`use_code`)."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import traceback
from functools import partial
from pathlib import Path
from typing import NamedTuple

import torch

import torchgate
from torchgate.core.errors import TRACEBACK_CHARS, clip
from torchgate.core.machine import usable_cores
from torchgate.core.names import FOLDER, NAME, alias_old_names, current
from torchgate.core.records.job import Job
from torchgate.core.vocabulary import Status
from torchgate.measure.pipeline import Pipeline
from torchgate.measure.proc import cpu_quota

WORKLOADS = f"{NAME}.workloads"

# ---- extensions ------------------------------------------------------------
# Custom operators: a user's `torch.ops.<lib>` extensions, as failures see them.
#
# Op coverage logs every operator by its overload name, `<namespace>.<op>.<overload>`, a user's
# extensions under their own namespace (judge.portability tells them from PyTorch's). An
# extension that has no kernel for the device fails with a dispatcher message of some 5,000
# characters; `missing_kernel` says the same in one line.

_COULD_NOT_RUN = re.compile(r"Could not run '([\w:.]+)' with arguments from the '(\w+)' backend")
_KERNEL = re.compile(r"^(\w+): registered at .*\[kernel\]", re.M)


def missing_kernel(exc: BaseException) -> str | None:
    """One line for an operator with no kernel for the device it was called on, naming the
    devices it has kernels for; None for any other exception."""
    text = str(exc)
    found = _COULD_NOT_RUN.search(text)
    if not isinstance(exc, NotImplementedError) or found is None:
        return None
    op, backend = found.groups()
    kernels = [k for k in dict.fromkeys(_KERNEL.findall(text)) if k != "Meta"]
    has = (f"it has kernels for {', '.join(kernels)} only" if kernels
           else "it has no device kernel at all")
    return (f"operator {op} has no kernel for the {backend} backend ({has}): the extension "
            f"does not support this device, or its {backend} kernel was not registered")


def unsupported(exc: BaseException) -> bool:
    """Whether a workload said it cannot run on this device or dtype by design (it raised
    torchgate.workloads.Unsupported, of whichever revision's workloads this worker imported:
    matched by name, not identity)."""
    return any(c.__name__ == "Unsupported" and current(c.__module__) == WORKLOADS
               for c in type(exc).__mro__)


class Failed(NamedTuple):
    """A failure as every record of a process or a mode begins: its status, its one-line
    message, a short traceback (`ModeTiming(*failure(exc))`)."""
    status: str
    error: str
    traceback: str | None = None


def failure(exc: BaseException) -> Failed:
    """A status (OOM or ERROR; SKIPPED for a workload that is unsupported here), a one-line
    message and a short traceback for an exception raised by a workload."""
    if unsupported(exc):
        return Failed(Status.SKIPPED, clip(str(exc).strip()))
    text = str(exc).lower()
    oom = (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
           or "out of memory" in text or "can't allocate memory" in text
           or "not enough memory" in text)
    first = missing_kernel(exc) or (str(exc).strip().splitlines()[0] if str(exc).strip() else "")
    return Failed(Status.OOM if oom else Status.ERROR, clip(f"{type(exc).__name__}: {first}"),
                  traceback.format_exc(limit=-3)[-TRACEBACK_CHARS:])


def auto_threads(default: int, cores: int | None, quota: float | None) -> int:
    """`threads: auto`: torch's default (its physical cores), less one where that would take
    every core this process may use (its affinity, its cgroup's CPU quota), so that the
    launcher, the system and a lock-step pair's other arm do not preempt one thread of a
    parallel region, which then waits for it: on 2 cores, 2 threads spread 19-23 % between
    processes of matmul_relu, 1 thread 1-3 % (reports/README.md, *Threads*)."""
    usable = min(filter(None, [cores, int(quota) if quota else None]), default=None)
    if usable is None:
        return default
    return max(1, min(default, usable - 1))


def configure(job: Job) -> None:
    threads = job.workload.threads or job.device.threads    # a sweep's unit sets its own
    if threads == "auto":
        threads = auto_threads(torch.get_num_threads(), usable_cores(), cpu_quota())
    if threads:
        torch.set_num_threads(threads)
    pin(job.cores, threads)
    torch.set_float32_matmul_precision(job.precision.matmul_precision)


def pin(cores: tuple[int, ...] | None, threads: int | None) -> None:
    """A lock-step arm onto its pair's first `threads` cores (launch.local.pair_cores), every
    thread of this process and those it starts (inductor's compile workers too). Not at
    threads 0 (torch's default: every core), nor where the system has no affinity."""
    if not cores or not threads or not hasattr(os, "sched_setaffinity"):
        return
    chosen = set(cores[:threads])
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else [0]:
        with contextlib.suppress(OSError):     # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), chosen)


def compiler(mode: str, dynamic: bool | None = None, backend: str | None = None):
    """The `compile` a factory gets; `dynamic` as the workload's `_dynamic_` sets it (None:
    torch.compile's automatic dynamic shapes, after a first recompile), `backend` as the
    device's `compile_backend` (None: inductor)."""
    if mode == "eager":
        return lambda fn: fn
    chosen = {"dynamic": dynamic, **({"backend": backend} if backend else {})}
    if mode == "compiled":
        return partial(torch.compile, **chosen)
    return partial(torch.compile, mode=mode, **chosen)


def build(job: Job, factory, device: torch.device, dtype: torch.dtype, mode: str,
          workload_index: int = 0, provided: dict | None = None):
    """The workload, built by its factory for this device, dtype and mode (under autocast
    when the precision asks for it); `provided`: more arguments from torchgate (a rank's
    `rank`, `world_size` and `ddp`, measure.rank). A workload with `batches` gets a
    measure.pipeline Pipeline as its step: fetch, copy, compute, called without arguments
    like any step."""
    spec = job.workloads[workload_index]
    workload = factory(device=device, dtype=dtype,
                       compile=compiler(mode, spec.dynamic, job.device.compile_backend),
                       seed=job.seed, **spec.kwargs, **(provided or {}))
    if job.precision.autocast and dtype != torch.float64:
        inner = workload.step
        amp = getattr(torch, job.precision.autocast_dtype)
        workload.step = lambda *batch: _autocast_call(inner, device.type, amp, *batch)
    batches = getattr(workload, "batches", None)    # another revision's may predate it
    if batches is not None:
        workload.step = Pipeline(batches, workload.step, device)
    return workload


def _autocast_call(fn, device_type: str, dtype: torch.dtype, *batch):
    with torch.autocast(device_type, dtype=dtype):
        return fn(*batch)


# ---- code ------------------------------------------------------------
# Run another revision's workloads with this harness: a worker of the other arm imports
# `torchgate.workloads` and the project's own modules from that revision's folder, while
# torchgate itself (measure, core: how things are measured) stays this one. An older
# revision's workloads import by the old name, `stages.workloads` (core.names).

def use_code(root: str) -> None:
    """Import workloads from the project folder `root` (another revision) from now on."""
    harness = Path(torchgate.__file__).resolve().parent.parent
    here = {os.path.realpath(p) for p in (os.getcwd(), harness)}
    # The other revision's top-level modules first; this working tree's not at all.
    sys.path[:] = [root] + [p for p in sys.path if os.path.realpath(p or os.getcwd()) not in here]
    package = Path(root) / FOLDER / "workloads"
    spec = importlib.util.spec_from_file_location(
        WORKLOADS, package / "__init__.py", submodule_search_locations=[str(package)])
    module = importlib.util.module_from_spec(spec)
    for name in [n for n in sys.modules if current(n) == WORKLOADS
                 or current(n).startswith(WORKLOADS + ".")]:
        del sys.modules[name]
    sys.modules[WORKLOADS] = module
    alias_old_names()
    spec.loader.exec_module(module)
    torchgate.workloads = module
