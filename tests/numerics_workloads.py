"""A tiny workload whose numerics a test can "edit" through its keyword arguments, as a user
edits the math of their own workload between the baseline run and this one."""
import os

import torch

from torchgate.workloads import Workload

_calls = [0]


def tiny(*, device, dtype, compile, seed, size=16, scale=1.0, error=0.0, act="relu",
         nan=False, process_noise=0.0, call_noise=0.0, graph_break="none"):
    """relu(x @ w) * scale, and its sum.

    error: a relative error added only below float64, so the error against the float64
        reference is about `error` while the outputs barely move;
    scale: changes the outputs (and the reference alike): drift, not error;
    act: "relu", "clamp" (same values, another operator) or "gelu";
    nan: one NaN below float64;
    process_noise / call_noise: nondeterminism across processes / between calls;
    graph_break: "none", "print", "branch" (data-dependent) or "both", inside the compiled
        function."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(size, size, generator=gen).to(device, dtype)
    w = torch.randn(size, size, generator=gen).to(device, dtype)
    low = dtype != torch.float64
    pid_shift = process_noise * (os.getpid() % 97 + 1)

    def forward(a, b):
        y = a @ b
        if graph_break in ("print", "both"):
            print("tiny: forward")
        if graph_break in ("branch", "both") and y.sum() > -1e30:
            y = y + 0
        if act == "clamp":                        # the same values as relu, another op
            return torch.clamp(y, min=0)
        return torch.relu(y) if act == "relu" else torch.nn.functional.gelu(y)

    fn = compile(forward)

    def step():
        _calls[0] += 1
        y = fn(x, w) * scale
        if low and error:
            y = y * (1 + error)
        if pid_shift or call_noise:
            y = y + (pid_shift + call_noise * _calls[0])
        if low and nan:
            y[0, 0] = float("nan")
        return {"y": y, "total": y.sum()}

    return Workload(step=step, items=size)
