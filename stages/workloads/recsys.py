"""A DLRM-style recommender: what ranking models exercise that dense nets do not (embedding
bags over large tables with sparse gradients, an optimizer for sparse gradients, a pairwise
feature interaction).

Each sample has `dense` continuous features and, per table, a bag of `bag` ids; the ids are
drawn with a Zipf-like skew (a few hot rows, a long tail), as real categorical features are.
The dense features pass a bottom MLP; each table's bag is summed (nn.EmbeddingBag,
`sparse=True`); the pairwise dot products of all these vectors, beside the bottom MLP's
output, feed a top MLP to one logit; binary cross-entropy against random clicks. The
embeddings' gradients are sparse (only the rows a batch touched) and their optimizer is
SparseAdam (`optimizer: sparse_adam`, the dense layers Adam) or plain SGD for both
(`optimizer: sgd`), the two torch optimizers that take sparse gradients.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from torchgate.workloads import Workload, _positive, _random

OPTIMIZERS = ("sparse_adam", "sgd")


def mlp(widths: list[int], last_relu: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, tables: int, rows: int, dim: int, dense: int, bottom: list[int],
                 top: list[int]):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
                                        for _ in range(tables))
        self.bottom = mlp([dense, *bottom, dim], last_relu=True)
        pairs = (tables + 1) * tables // 2
        self.top = mlp([dim + pairs, *top, 1], last_relu=False)
        upper = torch.triu_indices(tables + 1, tables + 1, offset=1)
        self.register_buffer("upper", upper, persistent=False)

    def forward(self, dense, ids, offsets):
        x = self.bottom(dense)
        vectors = torch.stack([x, *(e(i, o) for e, i, o in zip(self.embeddings, ids, offsets))],
                              1)
        dots = vectors @ vectors.transpose(1, 2)          # every pair's dot product
        return self.top(torch.cat((x, dots[:, self.upper[0], self.upper[1]]), 1)).squeeze(1)


def skewed_ids(count: int, rows: int, gen: torch.Generator) -> torch.Tensor:
    """Ids with P(rank r) ~ 1/r (log-uniform ranks), the hot ranks scattered over the
    table by a fixed permutation."""
    ranks = (torch.rand(count, generator=gen, dtype=torch.float64) * torch.log(
        torch.tensor(float(rows), dtype=torch.float64))).exp().long().clamp(max=rows) - 1
    return torch.randperm(rows, generator=gen)[ranks]


def dlrm(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
         batch: int = 512, tables: int = 8, rows: int = 100_000, dim: int = 32, bag: int = 8,
         dense: int = 13, bottom: tuple[int, ...] | list[int] = (128, 64),
         top: tuple[int, ...] | list[int] = (256, 128), optimizer: str = "sparse_adam",
         lr: float = 1e-3, train_steps: int = 3) -> Workload:
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"workload dlrm: optimizer must be one of {', '.join(OPTIMIZERS)}, "
                         f"got {optimizer!r}")
    bottom, top = list(bottom), list(top)
    _positive("dlrm", batch=batch, tables=tables, rows=rows, dim=dim, bag=bag, dense=dense,
              train_steps=train_steps, **{f"bottom[{i}]": w for i, w in enumerate(bottom)},
              **{f"top[{i}]": w for i, w in enumerate(top)})
    torch.manual_seed(seed)
    model = DLRM(tables, rows, dim, dense, bottom, top)
    gen = torch.Generator().manual_seed(seed + 1)
    x = _random(batch, dense, seed_gen=gen).to(device, dtype)
    ids = [skewed_ids(batch * bag, rows, gen).to(device) for _ in range(tables)]
    offsets = torch.arange(0, batch * bag, bag).to(device)
    clicks = (torch.rand(batch, generator=gen) < 0.25).to(device, dtype)
    model = model.to(device, dtype)
    sparse = [p for e in model.embeddings for p in e.parameters()]
    dense_params = [*model.bottom.parameters(), *model.top.parameters()]
    if optimizer == "sgd":
        opts = [torch.optim.SGD([*sparse, *dense_params], lr=lr)]
    else:
        opts = [torch.optim.SparseAdam(sparse, lr=lr), torch.optim.Adam(dense_params, lr=lr)]
    forward = compile(model)

    def step():
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        loss = nn.functional.binary_cross_entropy_with_logits(
            forward(x, ids, [offsets] * tables), clicks)
        loss.backward()
        for opt in opts:
            opt.step()
        return loss.detach()

    # The MLPs' matmuls: forward, every weight gradient, every input gradient but the bottom
    # MLP's first (the dense features need none); the interaction and the bags are not
    # counted.
    widths = [(a, b) for ws in ([dense, *bottom, dim], [dim + tables * (tables + 1) // 2,
                                                          *top, 1])
              for a, b in zip(ws, ws[1:])]
    per_sample = sum(2 * a * b for a, b in widths)
    flops = batch * (3 * per_sample - 2 * dense * widths[0][1])

    def state():
        # The rows this batch touched (a table's other rows never change), and the MLPs.
        touched = {f"embeddings.{t}": model.embeddings[t].weight.detach()[ids[t].unique()]
                   for t in range(tables)}
        return {**touched, **{n: p.detach() for n, p in model.named_parameters()
                              if not n.startswith("embeddings.")}}

    return Workload(step=step, items=batch, flops=float(flops), train_steps=train_steps,
                    state=state)
