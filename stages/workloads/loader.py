"""A training step fed by a DataLoader: what the input pipeline costs beside the model.

Each sample is "decoded" on the host before it can be batched: drawn from its own seed (the
same sample whichever loader worker decodes it, in whatever order) and passed `decode_rounds`
times through a fixed random transform (a scale, a shift and a tanh per feature), as an image
decode or a tokenizer costs the CPU per sample. With `num_workers: 0` the decode runs in the
training process between steps; with more, worker processes decode ahead while it computes.
`pin_memory` pins the batches for an asynchronous copy to an accelerator (ignored on the CPU,
where nothing is copied). The model is an MLP (features -> hidden -> classes) trained with
AdamW on cross-entropy, as mlp_train.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from torchgate.workloads import Workload, _positive


class DecodedSamples(Dataset):
    """`length` samples of `features` floats and a class each, decoded on every access."""

    def __init__(self, *, length: int, features: int, classes: int, decode_rounds: int,
                 seed: int):
        self.length, self.features, self.classes = length, features, classes
        self.decode_rounds, self.seed = decode_rounds, seed
        gen = torch.Generator().manual_seed(seed)
        # Per round a scale and a shift per feature: elementwise work, which torch runs on one
        # thread at these sizes (a matrix product would take every thread of the process).
        self.scale = 1 + torch.rand(decode_rounds, features, generator=gen)
        self.shift = torch.randn(decode_rounds, features, generator=gen)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        x = torch.randn(self.features, generator=gen)
        for r in range(self.decode_rounds):
            x = torch.tanh(torch.addcmul(self.shift[r], x, self.scale[r]))
        return x, torch.randint(self.classes, (), generator=gen)


def loader_train(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
                 batch: int = 256, features: int = 256, hidden: int = 2048, classes: int = 10,
                 decode_rounds: int = 8, num_workers: int = 0, pin_memory: bool = False,
                 batches: int = 16, lr: float = 1e-3, eps: float = 1e-6,
                 train_steps: int = 3) -> Workload:
    _positive("loader_train", batch=batch, features=features, hidden=hidden, classes=classes,
              batches=batches, train_steps=train_steps)
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
        raise ValueError(f"workload loader_train: num_workers must be a whole number >= 0, "
                         f"got {num_workers!r}")
    if not isinstance(decode_rounds, int) or isinstance(decode_rounds, bool) or decode_rounds < 0:
        raise ValueError(f"workload loader_train: decode_rounds must be a whole number >= 0, "
                         f"got {decode_rounds!r}")
    if not isinstance(pin_memory, bool):
        raise ValueError(f"workload loader_train: pin_memory must be true or false, "
                         f"got {pin_memory!r}")
    samples = DecodedSamples(length=batch * batches, features=features, classes=classes,
                             decode_rounds=decode_rounds, seed=seed + 1)
    # Every batch whole (drop_last): one input shape, so a compiled step never recompiles;
    # workers kept across epochs, as a training loop keeps them.
    loader = DataLoader(samples, batch_size=batch, shuffle=False, drop_last=True,
                        num_workers=num_workers, persistent_workers=num_workers > 0,
                        pin_memory=pin_memory and device.type != "cpu")
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(features, hidden), nn.GELU(),
                          nn.Linear(hidden, classes)).to(device, dtype)
    # eps 1e-6, not AdamW's 1e-8: an update is about ±lr wherever a gradient is far below eps
    # (the GELU's flat side), so at 1e-8 float32's rounding of those gradients moves the
    # second layer's weights by 3e-5 of float64's after one step, beyond float32's tolerance
    # (1e-5); at 1e-6 by 1e-6. A step that measures the input pipeline needs stable numerics.
    opt = torch.optim.AdamW(model.parameters(), lr=lr, eps=eps)
    forward = compile(model)

    def step(on_device: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = on_device
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(forward(x.to(dtype)), y)
        loss.backward()
        opt.step()
        return loss.detach()

    # The matmuls, as mlp_train counts them: forward, both weight gradients and the second
    # layer's input gradient.
    flops = 2.0 * batch * (2 * features * hidden + 3 * hidden * classes)
    return Workload(step=step, items=batch, flops=flops, train_steps=train_steps,
                    batches=loader,
                    state=lambda: {n: p.detach() for n, p in model.named_parameters()})
