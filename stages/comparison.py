"""Compare this run's records with the baseline's: rows of (cell, workload, mode, metric, verdict).

Pure apart from `load_*`, which read the current records from reports/ and the baseline's
from git. Timing metrics go through stats (process-level tests, FDR over the run); memory,
compile counters, statuses and numerics have rules of their own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from . import stats
from .baseline import load_baseline, resolve_rev
from .config import Config
from .env import hardware_key
from .errors import UserError
from .records import load_record

REPORTS = Path("reports")
TIMED = ("steady_s", "first_call_s", "warmup_s")   # tested statistically, higher is worse
COUNTED = ("graph_breaks", "recompiles")           # exact: more is worse
SENTINEL_DELTA = 0.10                              # machine-speed change that voids timings


@dataclass
class Row:
    stage: str
    cell: str
    workload: str
    mode: str
    metric: str
    verdict: str
    base: float | int | str | None = None
    now: float | int | str | None = None
    shift: stats.Shift | None = None
    delta: float | None = None
    p_adjusted: float | None = None
    mde: float | None = None
    needed: int | None = None
    note: str = ""


@dataclass
class Comparison:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # shown above the tables
    baseline: str = "HEAD"
    has_baseline: bool = False
    alpha: float = 0.05
    tests: int = 0
    looks: int = 1          # adaptive sampling: looks per cell planned, alpha is split over them


# ---- reducing a bench record to process-level summaries ----------------------------------

def process_values(record: dict, workload: str, mode: str, metric: str) -> list[float]:
    """One number per successful process: the median steady sample, or the phase's value."""
    values = []
    for proc in record.get("workloads", {}).get(workload, {}).get("processes", []):
        m = proc.get("modes", {}).get(mode) if proc.get("status") == "OK" else None
        if not m or m.get("status") != "OK" or m.get(metric) is None:
            continue
        v = m[metric]
        values.append(stats.median(v) if isinstance(v, list) else v)
    return values


def failures(record: dict, workload: str, mode: str) -> list[str]:
    found = []
    for proc in record.get("workloads", {}).get(workload, {}).get("processes", []):
        if proc.get("status") != "OK":
            found.append(f"{proc['status']}: {proc.get('error')}")
            continue
        m = proc.get("modes", {}).get(mode)
        if m is not None and m.get("status") != "OK":
            found.append(f"{m['status']}: {m.get('error')}")
    return found


def units(record: dict) -> set[tuple[str, str]]:
    modes = record.get("modes", [])
    return {(w, m) for w in record.get("workloads", {}) for m in modes}


def sentinel_values(record: dict) -> list[float]:
    return [p["sentinel"]["python_loop_s"] for w in record.get("workloads", {}).values()
            for p in w.get("processes", []) if p.get("status") == "OK" and p.get("sentinel")]


# ---- rows --------------------------------------------------------------------------------

def bench_rows(cell: str, now: dict | None, base: dict | None, deltas: dict,
               not_comparable: str | None = None) -> list[Row]:
    if now is None:
        return [Row("bench", cell, "*", "*", "cell", stats.MISSING,
                    note="measured in the baseline, not in this run")] if base else []
    if now.get("status") == "SKIPPED":
        return [Row("bench", cell, "*", "*", "cell", stats.SKIPPED, note=now.get("reason", ""))]
    usable_base = base if base and base.get("status") == "OK" else None
    reason = not_comparable or machine_moved(usable_base, now)
    rows = []
    for workload, mode in sorted(units(now) | (units(usable_base) if usable_base else set())):
        rows.extend(_unit_rows(cell, workload, mode, now, usable_base, deltas, reason))
    return rows


def machine_moved(base: dict | None, now: dict) -> str | None:
    """A reason when the machine-speed sentinel moved: then timings cannot blame the code."""
    if base is None:
        return None
    s = stats.shift(sentinel_values(base), sentinel_values(now))
    if s and s.p_value < 0.01 and abs(s.log_ratio) > math.log1p(SENTINEL_DELTA):
        return (f"machine speed changed: the sentinel (a fixed Python loop) runs "
                f"{s.ratio:.2f}x the baseline's time")
    return None


def _unit_rows(cell, workload, mode, now, base, deltas, not_comparable) -> list[Row]:
    key = dict(stage="bench", cell=cell, workload=workload, mode=mode)
    in_now = (workload, mode) in units(now)
    in_base = base is not None and (workload, mode) in units(base)
    if not in_now:
        return [Row(**key, metric="status", verdict=stats.MISSING,
                    note="in the baseline, not selected in this run")]
    failed_now = failures(now, workload, mode)
    failed_base = failures(base, workload, mode) if in_base else []
    if failed_now:
        was = ("was OK, now " if in_base and not failed_base else "") + failed_now[0]
        return [Row(**key, metric="status", verdict=stats.FAILED, base="OK" if in_base and not
                    failed_base else None, now=failed_now[0].split(":")[0], note=was)]
    if not in_base:
        return [Row(**key, metric=m, verdict=stats.NEW, now=_middle(process_values(now, workload,
                    mode, m))) for m in TIMED]
    rows = []
    if failed_base:
        rows.append(Row(**key, metric="status", verdict=stats.IMPROVED, base="FAILED", now="OK",
                        note=f"now runs; was {failed_base[0]}"))
        return rows
    for metric in TIMED:
        b, n = process_values(base, workload, mode, metric), process_values(now, workload, mode,
                                                                             metric)
        row = Row(**key, metric=metric, verdict=stats.INCONCLUSIVE, base=_middle(b),
                  now=_middle(n), shift=stats.shift(b, n), delta=deltas.get(metric, 0.05))
        if row.shift is None:
            row.note = "fewer than 2 processes on a side: no test"
        if not_comparable:
            row.verdict, row.note = stats.NOT_COMPARABLE, not_comparable
        rows.append(row)
    b, n = process_values(base, workload, mode, "peak_bytes"), process_values(now, workload,
                                                                             mode, "peak_bytes")
    if b and n:
        rows.append(_ratio_rule(key, "peak_bytes", _middle(b), _middle(n),
                                deltas.get("peak_bytes", 0.05)))
    for metric in COUNTED:
        b, n = process_values(base, workload, mode, metric), process_values(now, workload,
                                                                           mode, metric)
        if b and n:
            rows.append(_count_rule(key, metric, max(b), max(n)))
    return rows


def _middle(values: list[float]) -> float | None:
    return stats.median(values) if values else None


def _ratio_rule(key: dict, metric: str, base: float, now: float, delta: float) -> Row:
    """Nearly deterministic metrics (memory): the ratio of medians against δ."""
    ratio = now / base if base else math.inf
    verdict = (stats.REGRESSED if ratio > 1 + delta else
               stats.IMPROVED if ratio < 1 / (1 + delta) else stats.EQUIVALENT)
    return Row(**key, metric=metric, verdict=verdict, base=base, now=now, delta=delta)


def _count_rule(key: dict, metric: str, base: int, now: int) -> Row:
    verdict = (stats.REGRESSED if now > base else
               stats.IMPROVED if now < base else stats.EQUIVALENT)
    return Row(**key, metric=metric, verdict=verdict, base=base, now=now)


def numerics_rows(cell: str, now: dict | None, base: dict | None,
                  growth_factor: float = 2.0) -> list[Row]:
    if now is None:
        return [Row("numerics", cell, "*", "*", "cell", stats.MISSING)] if base else []
    if now.get("status") == "SKIPPED":
        return [Row("numerics", cell, "*", "*", "cell", stats.SKIPPED, note=now.get("reason", ""))]
    rows = []
    base_units = (base or {}).get("workloads", {})
    for workload, modes in sorted(now.get("workloads", {}).items()):
        for mode, ev in sorted(modes.items()):
            key = dict(stage="numerics", cell=cell, workload=workload, mode=mode)
            prev = base_units.get(workload, {}).get(mode) if base else None
            rows.append(_numerics_row(key, ev, prev, growth_factor))
    return rows


def _numerics_row(key: dict, ev: dict, prev: dict | None, growth_factor: float) -> Row:
    row = Row(**key, metric="numerics", verdict=stats.EQUIVALENT, now=ev["status"],
              base=prev["status"] if prev else None)
    problems = "; ".join(ev.get("problems", []))
    if prev is None:
        row.verdict = stats.FAILED if ev["status"] != "PASS" else stats.NEW
        row.note = problems
    elif ev["status"] != "PASS":
        row.verdict = stats.FAILED
        row.note = ("was PASS, now " if prev["status"] == "PASS" else "") + problems
    elif prev["status"] != "PASS":
        row.verdict, row.note = stats.IMPROVED, "now passes; was " + "; ".join(
            prev.get("problems", []))
    else:
        grown = [f"{name} error {err / old:.1f}x the baseline's ({old:.2e} -> {err:.2e})"
                 for name, err in ev.get("rel_l2", {}).items()
                 if (old := prev.get("rel_l2", {}).get(name)) and err and err > growth_factor * old
                 and err > 1e-12]
        if grown:
            row.verdict = stats.REGRESSED
            row.note = "; ".join(grown[:3]) + " (still within tolerance)"
    return row


# ---- finishing: FDR over every tested row of the run -----------------------------------

def finish(result: Comparison, alpha: float, power: float, looks: int = 1) -> Comparison:
    """Adjust every tested row together, then decide. With adaptive sampling a cell may be
    looked at up to `looks` times; testing every look at alpha/looks keeps the error rate at
    alpha (Bonferroni over looks: any look could have stopped on a false alarm)."""
    tested = [r for r in result.rows if r.shift is not None and r.verdict == stats.INCONCLUSIVE]
    result.alpha, result.tests, result.looks = alpha, len(tested), looks
    alpha = alpha / looks
    adjusted = stats.bh_adjust([r.shift.p_value for r in tested])
    for row, p_adj in zip(tested, adjusted):
        row.p_adjusted = p_adj
        row.verdict = stats.verdict(row.shift, p_adj, alpha=alpha, delta=row.delta)
        row.mde = stats.minimum_detectable_effect(row.shift, alpha=alpha, power=power,
                                                  delta=row.delta, tests=len(tested))
        if row.verdict == stats.INCONCLUSIVE:
            row.needed = stats.processes_needed(row.shift, alpha=alpha, power=power,
                                                delta=row.delta, tests=len(tested))
    return result


# ---- loading -------------------------------------------------------------------------------

def _current(path: Path, kind: str) -> dict | None:
    return load_record(path, kind) if path.exists() else None


def _baseline(commit, relpath: str, kind: str, notes: list[str]) -> dict | None:
    try:
        return load_baseline(commit, relpath, kind)
    except UserError as exc:
        notes.append(f"Baseline unreadable, compared as if absent: {exc}")
        return None


def hardware_change(commit, notes: list[str], root: Path = REPORTS) -> str | None:
    now = _current(root / "env" / "env.json", "env")
    base = _baseline(commit, (root / "env" / "env.json").as_posix(), "env", notes)
    if not now or not base:
        return None
    a, b = hardware_key(base.get("env", {})), hardware_key(now.get("env", {}))
    changed = [f"{k}: {a.get(k)} -> {b.get(k)}" for k in sorted(b) if a.get(k) != b.get(k)]
    return "hardware changed (" + "; ".join(changed) + ")" if changed else None


def ab_baseline(record: dict | None) -> dict | None:
    """In A/B mode a record carries its own baseline: the other interpreter's arm, measured
    interleaved with this one on the same machine."""
    if not record or not record.get("ab"):
        return None
    return {**record, "workloads": record["ab"]["baseline"]["workloads"], "ab": None}


def compare_cells(cfg: Config, cells: list[str], stages_: tuple[str, ...] = ("bench", "numerics"),
                  given: dict | None = None, root: Path = REPORTS) -> Comparison:
    """Compare the named cells of the named stages; `given` maps (stage, cell) to a record
    not yet on disk (a stage renders its own diff before compare runs)."""
    given = given or {}
    result = Comparison(baseline=cfg.baseline_rev)
    commit = resolve_rev(cfg.baseline_rev)
    result.has_baseline = commit is not None
    from_git = 0
    hardware = None if cfg.allow_hardware_change else hardware_change(commit, result.notes,
                                                                            root)
    missing, looks = [], 1
    for stage in stages_:
        for cell in cells:
            path = root / stage / f"{cell}.json"
            now = given.get((stage, cell)) or _current(path, stage)
            looks = max(looks, (now or {}).get("looks_planned", 1))
            base = ab_baseline(now)
            if base is not None:
                ab = now["ab"]
                note = (f"A/B: {stage} {cell} compares the candidate `{ab['candidate']['python']}`"
                        f" (torch {ab['candidate'].get('torch')}) with the baseline "
                        f"`{ab['baseline']['python']}` (torch {ab['baseline'].get('torch')}), "
                        "worker processes alternating on this machine.")
                result.notes.append(note)
            else:
                from_git += now is not None
                base = _baseline(commit, path.as_posix(), stage, result.notes)
                if commit is not None and base is None and now is not None:
                    missing.append(path.as_posix())
            if stage == "bench":
                same_machine = now is not None and now.get("ab")
                result.rows.extend(bench_rows(cell, now, base, cfg.stats.delta,
                                              None if same_machine else hardware))
            else:
                result.rows.extend(numerics_rows(cell, now, base, cfg.stats.error_growth))
    if commit is None and from_git:
        result.notes.insert(0, "No baseline yet: this repository has no commit. Commit "
                            "`reports/` to make this run the baseline.")
    if missing:
        result.notes.append(f"No baseline at {cfg.baseline_rev} for {', '.join(missing)}: "
                            "compared as NEW. Commit `reports/` to make this run the baseline.")
    return finish(result, cfg.stats.alpha, cfg.stats.power, looks)


def compare_cell(cfg: Config, stage: str, cell: str, record: dict,
                 root: Path = REPORTS) -> Comparison:
    return compare_cells(cfg, [cell], (stage,), {(stage, cell): record}, root)
