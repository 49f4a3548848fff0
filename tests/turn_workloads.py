"""Workloads that leave a trace of when they ran: each call appends its tag to a file."""
import hashlib
import threading
import time

import torch

from torchgate.workloads import Workload


def logged(*, device, dtype, compile, seed, path, tag, hang_on_call=0, spin=False):
    """`spin`: a thread that never rests, as OpenMP threads that spin after their work do
    (hashing a megabyte at a time, which releases the GIL: the step's own turns stay fast)."""
    x = torch.ones(4, device=device, dtype=dtype)
    calls = 0
    if spin:
        block = bytes(1 << 20)
        threading.Thread(target=lambda: [hashlib.sha256(block) for _ in iter(int, 1)],
                         daemon=True).start()

    def step():
        nonlocal calls
        calls += 1
        if calls == hang_on_call:
            time.sleep(3600)
        with open(path, "a") as fh:
            fh.write(tag)
        return x * 2

    return Workload(step=step, items=1)
