"""Data-dependent control flow at variable lengths: what a compiler cannot capture in one
graph, and what a new torch version may capture differently.

A stack of transformer-style blocks with adaptive computation: each block's gate looks at
its input and the block runs its MLP only where the gate's mean is positive, a Python `if` on
a tensor's value (a graph break for torch.compile: the branch taken depends on the data).
With `clip` > 0, each block also clamps its output to +-clip where its largest magnitude,
read into Python (`.item()`), exceeds it (a guard against outliers): another kind of
data-dependent code, so another break reason; the default inputs never reach a clip of 100,
so only the breaks change, not the work. Longer sequences (`lengths`, the shapes) take a
chunked attention path past `chunk` tokens, a branch on the length (a guard, and a
recompile where a length crosses it) beside the dynamic sequence length itself.

Graph breaks and recompiles are expected here; each is counted and its reason kept (measure/
dynamo.py), and the judge calls a new reason REGRESSED: turning `clip` on is such a
change.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from torchgate.workloads import Workload, _positive, _random


class GatedBlock(nn.Module):
    def __init__(self, width: int, heads: int, chunk: int, clip: float):
        super().__init__()
        self.heads, self.chunk, self.clip = heads, chunk, clip
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.gate = nn.Linear(width, 1)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def attend(self, x):
        b, t, w = x.shape
        q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(w, dim=2))
        if t <= self.chunk:                   # a branch on the length: a guard on t
            y = F.scaled_dot_product_attention(q, k, v)
        else:                                 # long inputs: attention within chunks
            pad = -t % self.chunk
            q, k, v = (F.pad(z, (0, 0, 0, pad)).unflatten(2, (-1, self.chunk))
                       for z in (q, k, v))
            real = (torch.arange(t + pad, device=x.device) < t).view(-1, self.chunk)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=real[:, None, :])
            y = y.flatten(2, 3)[:, :, :t]
        return self.proj(y.transpose(1, 2).reshape(b, t, w))

    def forward(self, x):
        x = x + self.attend(self.ln1(x))
        h = self.ln2(x)
        if self.gate(h).mean() > 0:           # data-dependent: a graph break
            x = x + self.mlp(h)
        if self.clip and x.abs().amax().item() > self.clip:   # another, where clip > 0
            x = x.clamp(-self.clip, self.clip)
        return x


class Adaptive(nn.Module):
    def __init__(self, width: int, heads: int, layers: int, chunk: int, clip: float):
        super().__init__()
        self.blocks = nn.ModuleList(GatedBlock(width, heads, chunk, clip)
                                    for _ in range(layers))
        # Gates far from their boundary, alternately open and shut on random inputs: every
        # precision takes the same path (a branch that flipped would be no rounding error).
        for i, block in enumerate(self.blocks):
            nn.init.constant_(block.gate.bias, 0.5 if i % 2 == 0 else -0.5)
        self.ln = nn.LayerNorm(width)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.ln(x)


def branchy(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
            batch: int = 8, width: int = 128, heads: int = 4, layers: int = 4,
            lengths: tuple[int, ...] | list[int] = (64, 96, 128, 256), chunk: int = 128,
            clip: float = 0.0) -> Workload:
    """Inference at each length in `lengths` (the first is the step's own; the others are
    shapes, run in the compiled modes after the steady state)."""
    lengths = tuple(dict.fromkeys(lengths))
    _positive("branchy", batch=batch, width=width, heads=heads, layers=layers, chunk=chunk,
              **{f"lengths[{i}]": n for i, n in enumerate(lengths)})
    if not lengths or width % heads:
        raise ValueError("workload branchy: give at least one length, and a width that is a "
                         f"multiple of heads (width {width}, heads {heads})")
    torch.manual_seed(seed)
    model = Adaptive(width, heads, layers, chunk, clip).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    # Made as inference tensors, like every tensor the step makes: a frame that a graph
    # break leaves then sees the same kind of tensor from the input and from a block before.
    with torch.inference_mode():
        inputs = {n: _random(batch, n, width, seed_gen=gen).to(device, dtype) for n in lengths}
    model = model.to(device, dtype)
    forward = compile(model)

    def at(n: int):
        def step():
            with torch.inference_mode():
                return forward(inputs[n])
        return step

    steps = {f"seq={n}": at(n) for n in lengths}
    return Workload(step=steps[f"seq={lengths[0]}"], items=batch * lengths[0],
                    shapes=steps if len(steps) > 1 else None)
