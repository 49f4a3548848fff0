"""Error of an output against a reference, and a compact fingerprint of an output for drift
across versions: pure functions on tensors, no devices, no files."""
from __future__ import annotations

import base64
import hashlib
import struct
from typing import Any

import torch

from torchgate.core.records.outputs import SKETCH_K, WHOLE_MAX, Fingerprint, OutputError


def flatten(value: Any, prefix: str = "out") -> dict[str, torch.Tensor]:
    """Name every tensor in a nested output: out, out.0, out.logits, state.fc.weight ..."""
    if isinstance(value, torch.Tensor):
        return {prefix: value}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return {}
    named: dict[str, torch.Tensor] = {}
    for key, item in items:
        named.update(flatten(item, f"{prefix}.{key}"))
    return named


def nonfinite_count(t: torch.Tensor) -> int:
    if not (t.is_floating_point() or t.is_complex()):
        return 0
    return int((~torch.isfinite(t)).sum())


def error_metrics(value: torch.Tensor, reference: torch.Tensor) -> OutputError:
    """Relative L2, max abs error, cosine similarity and NaN/Inf count of value vs reference;
    the errors are None (not measured) when either side has NaN/Inf or no values."""
    x = value.detach().to("cpu", torch.float64).flatten()
    r = reference.detach().to("cpu", torch.float64).flatten()
    if x.shape != r.shape:
        raise ValueError(f"shape {tuple(value.shape)} differs from the reference's "
                         f"{tuple(reference.shape)}")
    bad, ref_bad = nonfinite_count(x), nonfinite_count(r)
    if bad or ref_bad or x.numel() == 0:
        return OutputError(None, None, None, nonfinite=bad, numel=x.numel(), ref_nonfinite=ref_bad)
    diff = x - r
    ref_norm = float(r.norm())
    denom = float(x.norm()) * ref_norm
    return OutputError(
        rel_l2=float(diff.norm()) / ref_norm if ref_norm > 0 else float(diff.norm()),
        max_abs=float(diff.abs().max()),
        cosine=float(x @ r) / denom if denom > 0 else (1.0 if float(diff.norm()) == 0 else 0.0),
        nonfinite=0, numel=x.numel())


def max_abs_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest elementwise difference between two runs' outputs (0.0: bitwise equal)."""
    worst = 0.0
    for name, x in a.items():
        y = b[name]
        if torch.equal(x, y) or x.numel() == 0:
            continue
        xd, yd = x.double(), y.double()
        same = (xd == yd) | (torch.isnan(xd) & torch.isnan(yd))  # NaN in both is reproducible
        diff = (xd - yd).abs().masked_fill(same, 0.0).nan_to_num(float("inf"))
        worst = max(worst, float(diff.max()))
    return worst


def digest(named: dict[str, torch.Tensor]) -> str:
    """A content hash of outputs, to compare runs in different processes bit for bit."""
    h = hashlib.sha256()
    for name in sorted(named):
        t = named[name].detach().to("cpu").contiguous().reshape(-1)
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


# ---- fingerprints: a compact, safe record of an output, for drift across versions ----------
#
# Small outputs (at most WHOLE_MAX values) are kept whole, as JSON numbers. Larger ones keep
# their exact norm, mean and std and a CountSketch: a fixed sparse random projection onto
# SKETCH_K coordinates (each element is added, with a sign, to one of K buckets chosen by a
# hash of its flat index). Like a Gaussian projection it preserves distances in expectation
# (Johnson-Lindenstrauss; ~9 % relative spread of a distance estimate at K = 64), but it costs
# O(n) and uses integer arithmetic instead of torch's random number generator, so the same
# projection is applied by every torch version: the very upgrades torchgate measures cannot
# move it. The sketch is stored as base64 of K little-endian float64 (684 characters).

_MASK32 = 0xFFFFFFFF
_SEED = 0x9E3779B9
_CHUNK = 1 << 20


def _hash32(index: torch.Tensor) -> torch.Tensor:
    """A fixed 32-bit integer hash (murmur3-style finalizer) of int64 indices. Multipliers are
    below 2**31 and operands masked to 32 bits, so no int64 product overflows."""
    h = (index ^ _SEED) & _MASK32
    h = h ^ (h >> 16)
    h = (h * 0x7FEB352D) & _MASK32
    h = h ^ (h >> 15)
    h = (h * 0x2C1B3C6D) & _MASK32
    return h ^ (h >> 16)


def count_sketch(flat: torch.Tensor, k: int = SKETCH_K) -> list[float]:
    """Project a flat float64 tensor onto k coordinates with a fixed hash: bucket and sign of
    element i depend on i alone."""
    out = torch.zeros(k, dtype=torch.float64)
    for start in range(0, flat.numel(), _CHUNK):
        part = flat[start:start + _CHUNK]
        h = _hash32(torch.arange(start, start + part.numel(), dtype=torch.int64))
        sign = ((h >> 31) & 1).to(torch.float64).mul_(-2).add_(1)
        out.index_add_(0, h % k, part * sign)
    return out.tolist()


def encode_floats(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}d", *values)).decode("ascii")


def fingerprint(value: torch.Tensor) -> Fingerprint:
    """A JSON-safe summary of one output from which a later run can measure how far it moved."""
    x = value.detach().to("cpu", torch.float64).reshape(-1)
    shape = tuple(value.shape)
    bad = nonfinite_count(x)
    if bad:
        return Fingerprint(shape, nonfinite=bad)
    if x.numel() <= WHOLE_MAX:
        return Fingerprint(shape, values=tuple(x.tolist()))
    return Fingerprint(shape, norm=float(x.norm()), mean=float(x.mean()), std=float(x.std()),
                       sketch=encode_floats(count_sketch(x)))
