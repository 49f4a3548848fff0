"""A ResNet-style convolutional network: what a vision model exercises that a matmul does not
(convolutions in channels_last, batch norm, residual additions, pooling), as a training step
or as inference.

The net is a ResNet with basic blocks: a 3x3 stem, four stages of `blocks` residual blocks
(two 3x3 convolutions with batch norm each, a 1x1 projection where the shape changes; the
widths double and the resolution halves from one stage to the next), global average pooling
and a linear classifier. `blocks=(2, 2, 2, 2)`, `width=64` at 224x224 with a strided 7x7 stem
is ResNet-18; the defaults are a CIFAR-sized ResNet-10 that a CPU runs in a fraction of a
second per step.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from torchgate.workloads import Workload, _positive, _random


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.project = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.project is None else self.project(x)))


class ResNet(nn.Module):
    def __init__(self, width: int, blocks: tuple[int, ...], classes: int, stem: int):
        super().__init__()
        # A large stem (7x7, stride 2, then max pooling) for ImageNet-sized images; 3x3 else.
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, stem, 2 if stem > 3 else 1, stem // 2, bias=False),
            nn.BatchNorm2d(width), nn.ReLU(),
            *([nn.MaxPool2d(3, 2, 1)] if stem > 3 else []))
        layers, cin = [], width
        for i, n in enumerate(blocks):
            cout = width << i
            for j in range(n):
                layers.append(BasicBlock(cin, cout, 2 if j == 0 and i > 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def forward_flops(model: nn.Module, x: torch.Tensor) -> tuple[float, float]:
    """The multiply-adds of every convolution and linear layer in one forward pass (2 FLOPs
    each), read from the shapes a pass through `model` produces; and the first layer's share,
    whose input needs no gradient in training."""
    found: list[float] = []

    def conv(m, args, out):
        per_output = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
        found.append(2.0 * out.numel() * per_output)

    def linear(m, args, out):
        found.append(2.0 * out.numel() * m.in_features)

    hooks = [m.register_forward_hook(conv if isinstance(m, nn.Conv2d) else linear)
             for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return sum(found), found[0]


def resnet(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
           train: bool = False, batch: int = 32, image: int = 32, width: int = 32,
           blocks: tuple[int, ...] | list[int] = (1, 1, 1, 1), classes: int = 10,
           stem: int = 3, channels_last: bool = True, lr: float = 0.05,
           train_steps: int = 3) -> Workload:
    """Inference (`train: false`: eval mode, batch norm from running statistics that two
    calibration batches set) or one SGD step with momentum (`train: true`: cross-entropy on
    random labels, batch norm from the batch's statistics)."""
    blocks = tuple(blocks)
    _positive("resnet", batch=batch, image=image, width=width, classes=classes, stem=stem,
              train_steps=train_steps, **{f"blocks[{i}]": b for i, b in enumerate(blocks)})
    torch.manual_seed(seed)
    model = ResNet(width, blocks, classes, stem)
    gen = torch.Generator().manual_seed(seed + 1)
    x = _random(batch, 3, image, image, seed_gen=gen)
    # Running statistics from two small calibration batches (on the CPU in float32, so every
    # precision and device starts from the same ones): eval mode normalises as a trained net.
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in norms:
        m.momentum = None         # a cumulative average over the calibration batches
    with torch.no_grad():
        for _ in range(2):
            model(_random(min(batch, 8), 3, image, image, seed_gen=gen))
    for m in norms:
        m.momentum = 0.1
    flops, first = forward_flops(model.eval(), x[:1])
    flops *= batch
    y = torch.randint(0, classes, (batch,), generator=gen).to(device)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(device, dtype, memory_format=fmt).train(train)
    x = x.to(device, dtype, memory_format=fmt)
    forward = compile(model)
    if not train:
        def infer():
            with torch.inference_mode():
                return forward(x)
        return Workload(step=infer, items=batch, flops=flops)

    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        logits = forward(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return {"loss": loss.detach(), "logits": logits.detach()}

    # Backward: every layer's weight gradient and input gradient, but the stem's input's.
    # Numerics compares the loss and the logits of the last of `train_steps` steps, which the
    # updates before it shaped, not the parameters one by one: batch norm's shifts start at
    # zero and move by sums over batch and image with heavy cancellation, so their relative
    # error is far beyond any bfloat16 (or channels_last float32) tolerance by construction.
    return Workload(step=step, items=batch, flops=3 * flops - first * batch,
                    train_steps=train_steps)
