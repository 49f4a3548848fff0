"""Data-parallel training: the workload a distributed unit runs on each of its ranks.

A distributed workload takes three more arguments, which torchgate passes to each rank of a
unit whose YAML sets `_ranks_: N`: `rank`, `world_size` and `ddp`, the wrapper to put around
its model (DistributedDataParallel, all-reducing the gradients through torchgate's timed hook).
Give them the defaults below (rank 0 of 1, `ddp` the identity), so that the workload also runs
as one process: the numerics stage runs it so, against its float64 reference.

Every rank builds the same weights from `seed` (DDP also broadcasts rank 0's) and trains on a
shard of its own: its inputs drawn from `seed` and its rank.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from stages.workloads import Workload, _positive, _random, classifier_step


def _alone(module: nn.Module) -> nn.Module:
    return module


def ddp_mlp(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
            rank: int = 0, world_size: int = 1, ddp: Callable[[nn.Module], nn.Module] = _alone,
            batch: int = 64, features: int = 128, width: int = 256, layers: int = 2,
            lr: float = 1e-3, train_steps: int = 5) -> Workload:
    """One AdamW step of an MLP (`layers` hidden layers of `width`, GELU) on this rank's
    batch, its gradients averaged over the ranks."""
    _positive("ddp_mlp", batch=batch, features=features, width=width, layers=layers,
              train_steps=train_steps)
    torch.manual_seed(seed)
    dims = [features] + [width] * layers + [10]
    blocks: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        blocks += [nn.Linear(a, b)] + ([nn.GELU()] if i < len(dims) - 2 else [])
    model = nn.Sequential(*blocks)
    gen = torch.Generator().manual_seed(seed + 1 + rank)      # this rank's shard
    x = _random(batch, features, seed_gen=gen).to(device, dtype)
    y = torch.randint(0, 10, (batch,), generator=gen).to(device)
    model = ddp(model.to(device, dtype))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    forward = compile(model)

    step = classifier_step(forward, opt, x, y)

    # The matmuls: forward, every layer's weight gradient, and the input gradient of every
    # layer but the first (its input needs none).
    pairs = [a * b for a, b in zip(dims, dims[1:])]
    flops = 2.0 * batch * (2 * sum(pairs) + sum(pairs[1:]))
    return Workload(step=step, items=batch, flops=flops, train_steps=train_steps,
                    state=lambda: {n: p.detach() for n, p in model.named_parameters()})
