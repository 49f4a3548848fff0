"""Numerics and portability findings between two runs, in pure Python (no torch, no files):
how far outputs moved (drift, from the fingerprints of measure.accuracy), how a workload's
operator set changed (op coverage), and which graph breaks are new.

The worker records; this module compares. Fingerprints hold plain numbers or base64 of
little-endian float64, decoded with `struct`, never unpickled.
"""
from __future__ import annotations

import base64
import binascii
import math
import re
import struct

from torchgate.core.records.outputs import Coverage, Fingerprint, fallback_ops

# ---- drift across versions -------------------------------------------------------------------

def decode_floats(text: str) -> list[float]:
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 8:
        raise ValueError("not a whole number of float64")
    return list(struct.unpack(f"<{len(raw) // 8}d", raw))


def _norm(values) -> float:
    return math.sqrt(math.fsum(v * v for v in values))


def fingerprint_distance(now: Fingerprint, base: Fingerprint) -> tuple[float | None, str | None]:
    """Relative distance ||now - base|| / ||base|| of one output between two runs (absolute
    when the baseline is all zeros); or None and why it cannot be measured.

    Whole values give the exact distance. Sketches give an estimate (~9 % spread at K = 64),
    raised to the exact lower bound |‖now‖ - ‖base‖| / ‖base‖ where that is larger."""
    if now.shape != base.shape:
        return None, f"shape changed from {list(base.shape)} to {list(now.shape)}"
    if now.nonfinite or base.nonfinite:
        return None, "NaN/Inf in " + ("this run" if now.nonfinite else "the baseline")
    if now.values is not None and base.values is not None:
        a, b = now.values, base.values
        if len(a) != len(b):
            return None, "recorded with different lengths"
        diff, ref = _norm([x - y for x, y in zip(a, b)]), _norm(b)
        return (diff / ref if ref > 0 else diff), None
    if now.sketch is not None and base.sketch is not None:
        try:
            a, b = decode_floats(now.sketch), decode_floats(base.sketch)
        except (ValueError, binascii.Error, UnicodeEncodeError, struct.error) as exc:
            return None, f"unreadable sketch ({exc})"
        if len(a) != len(b):
            return None, "sketched with different sizes"
        diff, ref = _norm([x - y for x, y in zip(a, b)]), _norm(b)
        estimate = diff / ref if ref > 0 else diff
        norm_now, norm_base = now.norm, base.norm
        if norm_now is not None and norm_base is not None:
            bound = abs(norm_now - norm_base)
            estimate = max(estimate, bound / norm_base if norm_base > 0 else bound)
        return estimate, None
    return None, "recorded differently (whole values against a sketch)"


def drift(now: dict[str, Fingerprint], base: dict[str, Fingerprint]) -> dict:
    """The largest distance over the outputs both runs recorded, and what could not be
    measured: {'distance', 'worst', 'per_output', 'unmeasured': {name: why}}."""
    per_output, unmeasured = {}, {}
    for name in sorted(set(now) | set(base)):
        if name not in base:
            unmeasured[name] = "new output"
            continue
        if name not in now:
            unmeasured[name] = "output gone"
            continue
        d, why = fingerprint_distance(now[name], base[name])
        if d is None:
            unmeasured[name] = why
        else:
            per_output[name] = d
    worst = max(per_output, key=per_output.get) if per_output else None
    return {"distance": per_output[worst] if worst else None, "worst": worst,
            "per_output": per_output, "unmeasured": unmeasured}


# ---- op coverage ------------------------------------------------------------------------------

def op_diff(now: Coverage, base: Coverage) -> dict:
    """New and removed operators, and ops newly running elsewhere than the device."""
    a, b = set(now.ops), set(base.ops)
    fell_now, fell_base = fallback_ops(now), fallback_ops(base)
    return {"added": sorted(a - b), "removed": sorted(b - a),
            "new_fallbacks": sorted(set(fell_now) - set(fell_base)),
            "gone_fallbacks": sorted(set(fell_base) - set(fell_now))}


def short_list(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# ---- graph breaks -----------------------------------------------------------------------------

_AT = re.compile(r" \(at [^()]*\)$")


def reason_key(reason: str) -> str:
    """A graph-break reason without its location, so an edit that moves a line is not new."""
    return _AT.sub("", reason)


def new_reasons(now, base) -> list[str]:
    known = {reason_key(r) for r in base}
    return [r for r in now if reason_key(r) not in known]


def moved_counts(base: dict[str, int], now: dict[str, int], shown: int = 5) -> str:
    """Which names a count by name moved on, most moved first: "aten.mm 20 → 22, aten.tanh
    new (2)"; "" where none did."""
    names = sorted(set(base) | set(now), key=lambda n: (-abs(now.get(n, 0) - base.get(n, 0)), n))
    moved = []
    for name in names:
        b, n = base.get(name), now.get(name)
        if b == n:
            continue
        moved.append(f"{name} new ({n})" if b is None else f"{name} gone (was {b})"
                     if n is None else f"{name} {b} → {n}")
    more = f" and {len(moved) - shown} more" if len(moved) > shown else ""
    return ", ".join(moved[:shown]) + more
