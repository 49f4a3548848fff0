"""A sequence model whose input length varies, with and without a branch on that length."""
import torch
from torch import nn

from torchgate.workloads import Workload


class Block(nn.Module):
    def __init__(self, width: int, branch_at: int):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.branch_at = branch_at

    def forward(self, x):
        y = self.lin(x)
        if self.branch_at and x.shape[1] > self.branch_at:   # control flow on the length
            y = y * 2
        return torch.relu(y)


def varlen(*, device, dtype, compile, seed, batch=2, width=16, lengths=(8, 16, 24, 32),
           branch_at=0):
    torch.manual_seed(seed)
    model = Block(width, branch_at).eval().to(device, dtype)
    gen = torch.Generator().manual_seed(seed + 1)
    inputs = {n: torch.randn(batch, n, width, generator=gen).to(device, dtype) for n in lengths}
    forward = compile(model)

    def at(n):
        def step():
            with torch.inference_mode():
                return forward(inputs[n])
        return step

    steps = {f"seq={n}": at(n) for n in lengths}
    return Workload(step=steps[f"seq={lengths[0]}"], items=batch * lengths[0], shapes=steps)
