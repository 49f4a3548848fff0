"""A GPT-style decoder (pre-norm blocks: causal self-attention through
scaled_dot_product_attention, a GELU MLP, learned positions, the embedding tied to the output
projection), in the three phases of serving it:

- `prefill`: the prompt in one pass, filling the KV cache, to the first token's logits. Its
  step is the time to first token (TTFT); with `_latency_`, TTFT's p50/p99 over single calls.
- `decode`: one generated token per sequence against a KV cache of `prompt` tokens, which
  the step reads and leaves as it was (so every call is the same call). Its step is the
  per-token latency, its items/s the tokens per second; with `_latency_`, the per-token p50
  and p99. `cache_lengths` adds shapes: the same step against longer caches, as generation
  grows it, whose recompiles the compiled modes record with their reasons; `mark_dynamic`
  marks the cache's length dynamic up front (torch._dynamo.mark_dynamic), which should leave
  none.
- `generate`: prefill, then `new_tokens` tokens one by one, the cache growing by one
  position a token (torch.cat, as an eager serving loop does): the end-to-end tokens per
  second, with the growth's recompiles inside the first call. The tokens fed back are drawn
  up front (teacher forcing), not the argmax, so that a rounding difference between
  precisions changes numbers, never the path.

Numerics compares the logits: of the last prompt position (prefill), of the new token
(decode), or of every generated token (generate).
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from torchgate.workloads import Workload, _positive

PHASES = ("prefill", "decode", "generate")


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x, cache):
        b, t, w = x.shape
        q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(w, dim=2))
        if cache is not None:                 # the positions before these tokens
            k, v = torch.cat((cache[0], k), 2), torch.cat((cache[1], v), 2)
        # A prompt attends causally; a single new token attends to everything before it.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None and t > 1)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, w))
        return x + self.down(F.gelu(self.up(self.ln2(x)))), (k, v)


class GPT(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int, heads: int, max_len: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        for name, p in self.named_parameters():   # GPT-2's initialisation
            if name.endswith("weight") and p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight",
                                                                     "down.weight")) else 0.02
                nn.init.normal_(p, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens, positions, caches=None):
        x = self.wte(tokens) + self.wpe(positions)
        grown = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if caches is None else caches[i])
            grown.append(kv)
        return self.ln(x[:, -1:]) @ self.wte.weight.t(), grown   # the last position's logits


def step_flops(batch: int, new: int, context: int, width: int, layers: int,
               vocab: int) -> float:
    """Matmul FLOPs of `new` tokens per sequence, the last of `context` positions (the new
    ones included), each attending to the positions up to its own (the causal triangle, the
    work the model defines; a kernel that computes the masked half too does more), logits of
    the last position only."""
    per_token = layers * 2 * (12 * width * width)              # qkv, proj, the MLP
    pairs = new * context - new * (new - 1) // 2               # (query, key) pairs attended
    attention = layers * 2 * 2 * pairs * width                 # q @ k^T and p @ v
    return float(batch * (new * per_token + attention + 2 * width * vocab))


def gpt(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
        phase: str = "decode", batch: int = 4, prompt: int = 128, vocab: int = 8192,
        width: int = 256, layers: int = 4, heads: int = 4, new_tokens: int = 16,
        cache_lengths: tuple[int, ...] | list[int] = (), mark_dynamic: bool = False,
        max_len: int = 1024) -> Workload:
    """`max_len`: the positions the model knows (its position table), which every prompt,
    cache and generation must fit; the weights and the token stream depend on it and on the
    model's widths only, so every phase and length of one model sees the same ones."""
    if phase not in PHASES:
        raise ValueError(f"workload gpt: phase must be one of {', '.join(PHASES)}, "
                         f"got {phase!r}")
    cache_lengths = tuple(cache_lengths)
    _positive("gpt", batch=batch, prompt=prompt, vocab=vocab, width=width, layers=layers,
              heads=heads, new_tokens=new_tokens, max_len=max_len,
              **{f"cache_lengths[{i}]": n for i, n in enumerate(cache_lengths)})
    if width % heads:
        raise ValueError(f"workload gpt: width ({width}) must be a multiple of heads ({heads})")
    cached = max((prompt, *cache_lengths))          # the longest cache a step reads
    if cached + new_tokens > max_len:
        raise ValueError(f"workload gpt: max_len ({max_len}) must hold the longest cache "
                         f"({cached}) and new_tokens ({new_tokens})")
    torch.manual_seed(seed)
    model = GPT(vocab, width, layers, heads, max_len).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, vocab, (batch, max_len), generator=gen).to(device)
    model = model.to(device, dtype)
    forward = compile(model)

    def at(start: int, count: int) -> torch.Tensor:
        return torch.arange(start, start + count, device=device).expand(batch, count)

    if phase == "prefill":
        def prefill():
            with torch.inference_mode():
                return forward(tokens[:, :prompt], at(0, prompt))[0]
        return Workload(step=prefill, items=batch * prompt,
                        flops=step_flops(batch, prompt, prompt, width, layers, vocab))

    # The caches, by the eager model in this dtype on this device: the state a prefill left.
    with torch.inference_mode():
        full = model(tokens[:, :cached], at(0, cached))[1]

    def cache_of(length: int):
        caches = [(k[:, :, :length].clone(), v[:, :, :length].clone()) for k, v in full]
        if mark_dynamic:
            for kv in caches:
                for t in kv:
                    torch._dynamo.mark_dynamic(t, 2)
        return caches

    if phase == "generate":
        cache = cache_of(prompt)

        def generate():
            with torch.inference_mode():
                caches, out = cache, []
                for i in range(new_tokens):
                    logits, caches = forward(tokens[:, prompt + i:prompt + i + 1],
                                             at(prompt + i, 1), caches)
                    out.append(logits)
                return torch.cat(out, 1)
        flops = sum(step_flops(batch, 1, prompt + i + 1, width, layers, vocab)
                    for i in range(new_tokens))
        return Workload(step=generate, items=batch * new_tokens, flops=flops)

    def decode_at(length: int):
        caches, token, position = cache_of(length), tokens[:, length:length + 1], at(length, 1)

        def decode():
            with torch.inference_mode():
                return forward(token, position, caches)[0]
        return decode

    lengths = tuple(dict.fromkeys((prompt, *cache_lengths)))
    steps = {f"kv={n}": decode_at(n) for n in lengths}
    return Workload(step=steps[f"kv={prompt}"], items=batch,
                    flops=step_flops(batch, 1, prompt + 1, width, layers, vocab),
                    shapes=steps if len(steps) > 1 else None)
