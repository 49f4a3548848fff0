"""Error of an output against a reference: pure functions on tensors, no devices, no files."""
from __future__ import annotations

import hashlib
from typing import Any

import torch


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


def error_metrics(value: torch.Tensor, reference: torch.Tensor) -> dict:
    """Relative L2, max abs error, cosine similarity and NaN/Inf count of value vs reference."""
    x = value.detach().to("cpu", torch.float64).flatten()
    r = reference.detach().to("cpu", torch.float64).flatten()
    if x.shape != r.shape:
        raise ValueError(f"shape {tuple(value.shape)} differs from the reference's "
                         f"{tuple(reference.shape)}")
    bad = nonfinite_count(x)
    if bad or x.numel() == 0:
        return {"rel_l2": None, "max_abs": None, "cosine": None, "nonfinite": bad,
                "numel": x.numel()}
    diff = x - r
    ref_norm = float(r.norm())
    denom = float(x.norm()) * ref_norm
    return {
        "rel_l2": float(diff.norm()) / ref_norm if ref_norm > 0 else float(diff.norm()),
        "max_abs": float(diff.abs().max()),
        "cosine": float(x @ r) / denom if denom > 0 else (1.0 if float(diff.norm()) == 0 else 0.0),
        "nonfinite": 0,
        "numel": x.numel(),
    }


def max_abs_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest elementwise difference between two runs' outputs (0.0: bitwise equal)."""
    worst = 0.0
    for name, x in a.items():
        y = b[name]
        if torch.equal(x, y):
            continue
        worst = max(worst, float((x.double() - y.double()).abs().nan_to_num(float("inf")).max()))
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
