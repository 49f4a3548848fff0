"""Your zoo's models as workloads: torchvision and Hugging Face transformers models built from a
config and random-initialised, so nothing is downloaded (no weights, no hub). torchgate does not
depend on either package: a workload that names one runs where it is installed and fails, with
the line to run, where it is not.

    my_vit:
      _target_: torchgate.workloads.adapters.torchvision_model
      name: vit_b_16            # any torchvision.models.get_model name
      image: 224
    my_llm:
      _target_: torchgate.workloads.adapters.transformers_model
      model_type: llama         # AutoConfig.for_model's model types
      config: {hidden_size: 256, num_hidden_layers: 2, num_attention_heads: 4,
               intermediate_size: 512, vocab_size: 4096}
      seq: 128

Inference by default; `train: true` is one SGD step on random labels (the next token, for a
causal language model). Their FLOPs are counted only where exact: the convolutions and linear
layers of a torchvision model (as vision.forward_flops counts them); none for transformers
(attention's cost depends on the kernel chosen).
"""
from __future__ import annotations

import importlib
from typing import Callable

import torch
from torch import nn

from torchgate.workloads import Workload, _positive, _random
from torchgate.workloads.vision import forward_flops


def _package(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        raise RuntimeError(f"{name} is not installed in the measured environment: pip install "
                           f"{name} (torchgate does not depend on it)") from None


def _workload(model: nn.Module, inputs: dict, loss: Callable, *, train: bool, items: int,
              compile: Callable, lr: float, flops: float | None = None,
              train_steps: int = 3) -> Workload:
    forward = compile(model)
    if not train:
        model.eval()

        def infer():
            with torch.inference_mode():
                return forward(**inputs)
        return Workload(step=infer, items=items, flops=flops)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def step():
        opt.zero_grad(set_to_none=True)
        out = forward(**inputs)
        value = loss(out)
        value.backward()
        opt.step()
        return {"loss": value.detach()}
    return Workload(step=step, items=items, flops=None if flops is None else 3 * flops,
                    train_steps=train_steps)


def torchvision_model(*, device: torch.device, dtype: torch.dtype, compile: Callable,
                      seed: int, name: str, train: bool = False, batch: int = 8,
                      image: int = 224, classes: int = 1000, channels_last: bool = True,
                      lr: float = 0.01, options: dict | None = None) -> Workload:
    """`torchvision.models.get_model(name, weights=None, num_classes=classes, **options)`
    on a batch of random images."""
    _positive(name, batch=batch, image=image, classes=classes)
    models = _package("torchvision").models
    torch.manual_seed(seed)
    model = models.get_model(name, weights=None, num_classes=classes, **(options or {}))
    gen = torch.Generator().manual_seed(seed + 1)
    x = _random(batch, 3, image, image, seed_gen=gen)
    flops = forward_flops(model.eval(), x[:1])[0] * batch
    y = torch.randint(0, classes, (batch,), generator=gen).to(device)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(device, dtype, memory_format=fmt)
    x = x.to(device, dtype, memory_format=fmt)

    class Images(nn.Module):      # keyword inputs, as _workload passes them
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, images):
            out = self.net(images)
            return out.logits if hasattr(out, "logits") else out   # inception's aux tuple
    return _workload(Images(model), {"images": x},
                     lambda logits: nn.functional.cross_entropy(logits, y), train=train,
                     items=batch, compile=compile, lr=lr, flops=flops)


def transformers_model(*, device: torch.device, dtype: torch.dtype, compile: Callable,
                       seed: int, model_type: str, config: dict | None = None,
                       causal_lm: bool = True, train: bool = False, batch: int = 4,
                       seq: int = 128, lr: float = 1e-3) -> Workload:
    """`AutoConfig.for_model(model_type, **config)`, then AutoModelForCausalLM (or AutoModel,
    `causal_lm: false`) from that config, on random token ids; items are tokens."""
    _positive(model_type, batch=batch, seq=seq)
    hf = _package("transformers")
    cfg = hf.AutoConfig.for_model(model_type, **(config or {}))
    torch.manual_seed(seed)
    auto = hf.AutoModelForCausalLM if causal_lm else hf.AutoModel
    model = auto.from_config(cfg).to(device, dtype)
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=gen).to(device)

    def loss(out):
        if causal_lm:
            logits = out.logits[:, :-1].float()
            return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                               ids[:, 1:].reshape(-1))
        return out.last_hidden_state.float().pow(2).mean()

    class Tokens(nn.Module):      # the tensor numerics compares, not the output object
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, input_ids):
            out = self.net(input_ids=input_ids)
            return out if train else (out.logits if causal_lm else out.last_hidden_state)
    return _workload(Tokens(model), {"input_ids": ids}, loss, train=train,
                     items=batch * seq, compile=compile, lr=lr)
