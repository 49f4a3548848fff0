"""A workload whose work grows with one argument: `layers` matmul + tanh layers (21 layers do
5 % more work than 20)."""
import torch

from torchgate.workloads import Workload


def chain(*, device, dtype, compile, seed, layers=20, width=32):
    gen = torch.Generator().manual_seed(seed)
    ws = [(torch.randn(width, width, generator=gen) / width ** 0.5).to(device, dtype)
          for _ in range(layers)]
    x = torch.randn(16, width, generator=gen).to(device, dtype)

    def step():
        y = x
        for w in ws:
            y = torch.tanh(y @ w)
        return y
    return Workload(step=compile(step), items=16)
