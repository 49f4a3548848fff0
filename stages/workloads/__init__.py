"""Built-in workloads, and the contract a user's own workload follows.

A workload is any importable callable named by `_target_` in conf/workload/<name>.yaml; a
module in this folder (stages/workloads/) is what the bench and numerics stages depend on, so
`dvc repro` measures again when it changes:

    def my_workload(*, device, dtype, compile, seed, **kwargs) -> Workload

It builds its weights and inputs on the CPU in float32 from `seed` (so every precision and
device starts from the same numbers), moves them to `device`/`dtype`, wraps whatever should
be compiled with `compile` (identity in eager mode, torch.compile otherwise) and returns a
Workload whose `step()` does one unit of work and returns its outputs.

A workload whose input shapes vary (sequence lengths, batch sizes) declares them in `shapes`:
a label and a step per shape, in the order to run, the first being `step`'s own. Compiled
modes run each further shape after the steady state and record the recompiles and the time
each shape change cost (see reports/README.md, "Dynamic shapes").

A workload with an input pipeline gives `batches`, an iterable of host batches (a DataLoader,
a list: anything `iter()` takes again for the next epoch), and a `step(batch)` that takes one
batch already on the device. The harness then makes each step: wait for the next batch, copy
its tensors to the device (`non_blocking`: pinned memory overlaps), call `step`; and times
the three parts apart (the measure room's docstring, "Where the step goes").

A distributed workload takes three more arguments, which torchgate passes to each rank of a
unit whose YAML sets `_ranks_: N`: `rank`, `world_size` and `ddp`, the wrapper to put around
its model (DistributedDataParallel, all-reducing the gradients through torchgate's timed hook).
Give them the defaults of `ddp_mlp` below (rank 0 of 1, `ddp` the identity), so that the
workload also runs as one process: the numerics stage runs it so, against its float64
reference.

A workload that cannot run on this device or dtype by design (float8 on a GPU without float8
tensor cores) raises `Unsupported` from its factory: its modes are SKIPPED with the message,
not failed. Anything else it raises is a failure.

Beyond the built-ins below: vision.py (a ResNet), decoder.py (a GPT decoder: prefill and
generation with a KV cache), recsys.py (embedding bags with sparse gradients), control.py
(data-dependent control flow at several lengths), lowp.py (int8 and float8), loader.py (a
training step fed by a DataLoader with a CPU-side decode cost).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
from torch import nn


class Unsupported(Exception):
    """This workload cannot run on this device or dtype by design; the message says why."""


@dataclass
class Workload:
    step: Callable[..., Any]         # one unit of work; returns its outputs (tensor/tuple/dict)
    items: int                       # items processed per step (samples, tokens): throughput
    flops: float | None = None       # floating-point operations per step, when known
    state: Callable[[], dict] | None = None  # what training changes (parameters), for numerics
    train_steps: int = 1             # steps before numerics compares outputs and state
    bytes_moved: float | None = None  # device memory read + written per step, when known
    shapes: dict[str, Callable[[], Any]] | None = None  # label -> step, per input shape
    batches: Iterable | None = None  # host batches (a DataLoader); `step` then takes one


def _positive(workload: str, **values: int) -> None:
    for key, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"workload {workload}: {key} must be a positive integer, "
                             f"got {value!r}")


def _random(*shape: int, seed_gen: torch.Generator) -> torch.Tensor:
    # Never time zeros: data-dependent power and sparsity paths make them unrepresentative.
    return torch.randn(*shape, generator=seed_gen, dtype=torch.float32)


def classifier_step(forward: Callable, opt: torch.optim.Optimizer, x: torch.Tensor,
                    y: torch.Tensor) -> Callable[[], torch.Tensor]:
    """One optimizer step of cross-entropy on fixed inputs and labels; returns the loss."""
    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def matmul_relu(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
                size: int = 256) -> Workload:
    _positive("matmul_relu", size=size)
    gen = torch.Generator().manual_seed(seed)
    a = _random(size, size, seed_gen=gen).to(device, dtype)
    b = _random(size, size, seed_gen=gen).to(device, dtype)
    fn = compile(lambda x, y: torch.relu(x @ y))
    return Workload(step=lambda: fn(a, b), items=size, flops=2.0 * size ** 3)


def mlp_train(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
              batch: int = 64, lr: float = 1e-3, train_steps: int = 5) -> Workload:
    _positive("mlp_train", batch=batch, train_steps=train_steps)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 10))
    gen = torch.Generator().manual_seed(seed + 1)
    x = _random(batch, 128, seed_gen=gen).to(device, dtype)
    y = torch.randint(0, 10, (batch,), generator=gen).to(device)
    model = model.to(device, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    forward = compile(model)

    step = classifier_step(forward, opt, x, y)

    # The matmuls: forward, and backward's weight gradients of both layers and the input
    # gradient of the second (the first layer's input needs none).
    flops = 2.0 * batch * (2 * 128 * 256 + 3 * 256 * 10)
    return Workload(step=step, items=batch, flops=flops, train_steps=train_steps,
                    state=lambda: {n: p.detach() for n, p in model.named_parameters()})


def _alone(module: nn.Module) -> nn.Module:
    return module


def ddp_mlp(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
            rank: int = 0, world_size: int = 1, ddp: Callable[[nn.Module], nn.Module] = _alone,
            batch: int = 64, features: int = 128, width: int = 256, layers: int = 2,
            lr: float = 1e-3, train_steps: int = 5) -> Workload:
    """Data-parallel training: one AdamW step of an MLP (`layers` hidden layers of `width`,
    GELU) on this rank's batch, its gradients averaged over the ranks. Every rank builds the
    same weights from `seed` (DDP also broadcasts rank 0's) and trains on a shard of its own:
    its inputs drawn from `seed` and its rank."""
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


def transformer_block(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
                      batch: int = 8, seq: int = 64, width: int = 128,
                      heads: int = 4) -> Workload:
    _positive("transformer_block", batch=batch, seq=seq, width=width, heads=heads)
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width, dropout=0.0,
                                       batch_first=True).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    x = _random(batch, seq, width, seed_gen=gen).to(device, dtype)
    layer = layer.to(device, dtype)
    forward = compile(layer)

    def step():
        with torch.inference_mode():
            return forward(x)

    per_token = 2.0 * (4 * width * width + 2 * 4 * width * width) + 4.0 * seq * width
    return Workload(step=step, items=batch * seq, flops=batch * seq * per_token)


def elementwise(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
                mib: int = 16) -> Workload:
    """x * 1.5 over a tensor of `mib` MiB: memory-bound, one read and one write per element,
    so its bytes are exact. Small enough to stay in a GPU's L2 cache between calls: the gap
    between the cold and the hot series is the cache's."""
    _positive("elementwise", mib=mib)
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = (mib << 20) // itemsize
    gen = torch.Generator().manual_seed(seed)
    x = _random(numel, seed_gen=gen).to(device, dtype)
    fn = compile(lambda t: t * 1.5)
    return Workload(step=lambda: fn(x), items=numel, flops=float(numel),
                    bytes_moved=2.0 * numel * itemsize)
