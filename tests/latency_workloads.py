"""A workload with a slow call now and then: its tail moves, its median does not."""
import time

import torch

from torchgate.workloads import Workload


def sleepy(*, device, dtype, compile, seed, size=32, sleep_every=0, sleep_s=0.02):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(size, size, generator=gen).to(device, dtype)
    fn = compile(lambda x: torch.relu(x @ x))
    calls = [0]

    def step():
        calls[0] += 1
        if sleep_every and calls[0] % sleep_every == 0:
            time.sleep(sleep_s)
        return fn(a)

    return Workload(step=step, items=size)
