"""Numerics and portability findings between two runs, in pure Python (no torch, no files):
how far outputs moved (drift, from the fingerprints of accuracy.fingerprint), how a workload's
operator set changed (op coverage), which graph breaks are new, and the section of
reports/summary.md that shows all of it.

The worker records; this module compares. Records are JSON only: fingerprints hold plain
numbers or base64 of little-endian float64, decoded with `struct`, never unpickled.
"""
from __future__ import annotations

import base64
import binascii
import math
import re
import struct


# ---- drift across versions -------------------------------------------------------------------

# The fingerprint format (accuracy.fingerprint writes it): outputs of at most WHOLE_MAX values
# whole, larger ones as a CountSketch onto SKETCH_K coordinates. A record with another method
# is not compared for drift.
FINGERPRINT_METHOD = "countsketch-fmix32-k64-v1"
SKETCH_K = 64
WHOLE_MAX = 64

def decode_floats(text: str) -> list[float]:
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 8:
        raise ValueError("not a whole number of float64")
    return list(struct.unpack(f"<{len(raw) // 8}d", raw))


def _norm(values) -> float:
    return math.sqrt(math.fsum(v * v for v in values))


def fingerprint_distance(now: dict, base: dict) -> tuple[float | None, str | None]:
    """Relative distance ||now - base|| / ||base|| of one output between two runs (absolute
    when the baseline is all zeros); or None and why it cannot be measured.

    Whole values give the exact distance. Sketches give an estimate (~9 % spread at K = 64),
    raised to the exact lower bound |‖now‖ - ‖base‖| / ‖base‖ where that is larger."""
    if now.get("shape") != base.get("shape"):
        return None, f"shape changed from {base.get('shape')} to {now.get('shape')}"
    if now.get("nonfinite") or base.get("nonfinite"):
        return None, "NaN/Inf in " + ("this run" if now.get("nonfinite") else "the baseline")
    if "values" in now and "values" in base:
        a, b = now["values"], base["values"]
        if len(a) != len(b):
            return None, "recorded with different lengths"
        diff, ref = _norm([x - y for x, y in zip(a, b)]), _norm(b)
        return (diff / ref if ref > 0 else diff), None
    if "sketch" in now and "sketch" in base:
        try:
            a, b = decode_floats(now["sketch"]), decode_floats(base["sketch"])
        except (ValueError, binascii.Error, UnicodeEncodeError, struct.error) as exc:
            return None, f"unreadable sketch ({exc})"
        if len(a) != len(b):
            return None, "sketched with different sizes"
        diff, ref = _norm([x - y for x, y in zip(a, b)]), _norm(b)
        estimate = diff / ref if ref > 0 else diff
        norm_now, norm_base = now.get("norm"), base.get("norm")
        if isinstance(norm_now, (int, float)) and isinstance(norm_base, (int, float)):
            bound = abs(norm_now - norm_base)
            estimate = max(estimate, bound / norm_base if norm_base > 0 else bound)
        return estimate, None
    return None, "recorded differently (whole values against a sketch)"


def drift(now: dict, base: dict) -> dict:
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

def fallback_ops(coverage: dict) -> dict[str, str]:
    """Ops that ran (or had tensors) elsewhere than the requested device: op -> where."""
    found = {op: "tensors on " + "/".join(devs)
             for op, devs in (coverage.get("other_device") or {}).items()}
    for op in coverage.get("fallback_ops") or []:
        found.setdefault(op, "fallback warning")
    return found


def op_diff(now: dict, base: dict) -> dict:
    """New and removed operators, and ops newly running elsewhere than the device."""
    a, b = set(now.get("ops") or {}), set(base.get("ops") or {})
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


def new_reasons(now: list[str], base: list[str]) -> list[str]:
    known = {reason_key(r) for r in base}
    return [r for r in now if reason_key(r) not in known]


# ---- reports/summary.md ---------------------------------------------------------------------

CHECKS = (("numerics", "vs float64"), ("drift", "drift vs baseline"),
          ("determinism", "determinism"), ("compiled_vs_eager", "compiled vs eager"),
          ("ops", "ops"), ("fallback_ops", "ops off-device"), ("graph_breaks", "graph breaks"))
QUIET = ("EQUIVALENT", "NEW")


def summary_section(rows: list[dict]) -> list[str]:
    """`## Numerics and portability`: every numerics check of every cell, workload and mode
    at a glance, then each change against the baseline with its evidence (new graph breaks
    with their reasons, new and removed ops, drift, nondeterminism, error growth)."""
    rows = [r for r in rows if r.get("stage") == "numerics"]
    if not rows:
        return []
    metrics = dict(CHECKS)
    grid: dict[tuple, dict] = {}
    for r in rows:
        if r["workload"] == "*":
            continue
        grid.setdefault((r["cell"], r["workload"], r["mode"]), {})[r["metric"]] = r
    used = [m for m, _ in CHECKS if any(m in checks for checks in grid.values())]
    lines = ["## Numerics and portability", "",
             "Per cell, workload and mode: error against the float64 CPU reference, how far the "
             "outputs moved from the baseline's, the same inputs twice (in this process and a "
             "fresh one), compiled against eager, the operators one eager step runs, and graph "
             "breaks. Details: `reports/numerics/<cell>.md`.", ""]
    if grid:
        header = "| cell | workload | mode | " + " | ".join(metrics[m] for m in used) + " |"
        lines += [header, "|" + "---|" * (3 + len(used))]
        for (cell, workload, mode), checks in sorted(grid.items()):
            cells = [_grid_cell(checks.get(m)) for m in used]
            lines.append(f"| {cell} | {workload} | {mode} | " + " | ".join(cells) + " |")
        lines.append("")
    changes = [r for r in rows if r["verdict"] not in QUIET and r.get("note")]
    noted_new = [r for r in rows if r["verdict"] == "NEW" and r["metric"] == "determinism"
                 and str(r.get("now")) == "nondeterministic"]
    if changes or noted_new:
        lines += ["Findings (each against the baseline, where there is one):", ""]
        for r in sorted(changes + noted_new, key=lambda r: (r["cell"], r["workload"], r["mode"],
                                                         r["metric"])):
            lines.append(f"- **{r['verdict']}** `{r['cell']}` {r['workload']} {r['mode']} "
                         f"{metrics.get(r['metric'], r['metric'])}: {r['note']}")
    elif all(r["verdict"] == "NEW" for r in rows):
        lines.append("No baseline to compare with yet: these are this run's values.")
    else:
        lines.append("No numerics or portability change against the baseline.")
    lines.append("")
    return lines


def _grid_cell(row: dict | None) -> str:
    if row is None:
        return ""
    now = "" if row.get("now") is None else str(row["now"])
    if row.get("base") is not None and str(row["base"]) != now and row["metric"] in (
            "graph_breaks", "ops", "fallback_ops"):
        now = f"{row['base']} → {now}"
    if row["verdict"] in QUIET:
        return now
    return f"**{row['verdict']}** {now}".strip()
