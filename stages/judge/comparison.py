"""Compare this run's records with the baseline's: rows of (cell, workload, mode, metric, verdict).

Pure apart from `load_*`, which read the current records from reports/ and the baseline's
from git. Timing metrics go through stats (process-level tests, FDR over the run); memory,
compile counters, statuses and numerics have rules of their own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from stages.judge import portability as coverage
from stages.judge import stats
from stages.core.baseline import load_baseline, resolve_rev
from stages.core.config import BUSY_SHARE, Config
from stages.env import hardware_key
from stages.core.errors import UserError
from stages.core.records import load_record

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

def process_values(record: dict, workload: str, mode: str, metric: str,
                   busy_share: float | None = None) -> list[float]:
    """One number per successful process: the median steady sample, or the phase's value.
    With busy_share: only processes whose samples ran while other programs used at most that
    share of the CPU."""
    return [v for _, m, v in _summaries(record, workload, mode, metric)
            if not busy(m, busy_share)]


def paired_values(base: dict, now: dict, workload: str, mode: str, metric: str,
                  busy_share: float | None = None) -> tuple[list[float], list[float]]:
    """Interleaved A/B: the two arms' values in the rounds where both processes succeeded
    (and neither ran on a busy machine), round by round: a round's two processes ran in
    lock-step."""
    b, n = ({proc["round"]: v for proc, m, v in _summaries(r, workload, mode, metric)
             if "round" in proc and not busy(m, busy_share)} for r in (base, now))
    rounds = sorted(b.keys() & n.keys())
    return [b[r] for r in rounds], [n[r] for r in rounds]


def _summaries(record: dict, workload: str, mode: str, metric: str):
    """(process, its mode's result, its value) for every process where the mode succeeded."""
    for proc in record.get("workloads", {}).get(workload, {}).get("processes", []):
        m = proc.get("modes", {}).get(mode) if proc.get("status") == "OK" else None
        if m and m.get("status") == "OK" and m.get(metric) is not None:
            v = m[metric]
            yield proc, m, stats.median(v) if isinstance(v, list) else v


def busy(mode_result: dict, share: float | None) -> bool:
    """Other programs used more than `share` of the CPU while this mode's samples ran."""
    other = _other_cpu(mode_result)
    return share is not None and other is not None and other > share


def _other_cpu(mode_result: dict) -> float | None:
    return (mode_result.get("busy_machine") or {}).get("other_cpu")


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


def busy_note(label: str, record: dict | None, share: float = BUSY_SHARE) -> str | None:
    """A warning when other programs used the CPU while this record's samples were taken."""
    shares = [_other_cpu(m)
              for w in (record or {}).get("workloads", {}).values()
              for p in w.get("processes", []) if p.get("status") == "OK"
              for m in p.get("modes", {}).values() if _other_cpu(m) is not None]
    found = [x for x in shares if x > share]
    if not found:
        return None
    return (f"Machine busy in {label}: in {len(found)} of {len(shares)} measured modes other "
            f"programs used more than {share:.0%} of the CPU while samples were taken (up to "
            f"{max(found):.0%}); their timings are left out of the tests "
            f"(`compare.busy_share`). Measure on a quiet machine for tighter verdicts.")


# ---- rows --------------------------------------------------------------------------------

def bench_rows(cell: str, now: dict | None, base: dict | None, deltas: dict,
               not_comparable: str | None = None, busy_share: float = BUSY_SHARE) -> list[Row]:
    if now is None:
        return [Row("bench", cell, "*", "*", "cell", stats.MISSING,
                    note="measured in the baseline, not in this run")] if base else []
    if now.get("status") == "SKIPPED":
        return [Row("bench", cell, "*", "*", "cell", stats.SKIPPED, note=now.get("reason", ""))]
    usable_base = base if base and base.get("status") == "OK" else None
    # A/B arms ran interleaved on one machine; their sentinels differ by interpreter, not time.
    same_run = bool(usable_base and usable_base.get("ab_arm"))
    reason = not_comparable or (None if same_run else machine_moved(usable_base, now))
    rows = []
    for workload, mode in sorted(units(now) | (units(usable_base) if usable_base else set())):
        rows.extend(_unit_rows(cell, workload, mode, now, usable_base, deltas, reason,
                               busy_share))
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


def _unit_rows(cell, workload, mode, now, base, deltas, not_comparable,
               busy_share=BUSY_SHARE) -> list[Row]:
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
        # Processes sampled while other programs took the CPU say nothing about the code.
        b, n = (process_values(r, workload, mode, metric, busy_share) for r in (base, now))
        everyone = (process_values(r, workload, mode, metric) for r in (base, now))
        left_out = sum(map(len, everyone)) - len(b) - len(n)
        shift = (stats.paired_shift(*paired_values(base, now, workload, mode, metric,
                                                   busy_share))
                 if base.get("paired") else stats.shift(b, n))
        row = Row(**key, metric=metric, verdict=stats.INCONCLUSIVE, base=_middle(b),
                  now=_middle(n), shift=shift, delta=deltas.get(metric, 0.05))
        if left_out:
            row.note = (f"{left_out} process(es) left out: other programs used more than "
                        f"{busy_share:.0%} of the CPU while they ran")
        if row.shift is None:
            row.note = "fewer than 2 processes on a side: no test" + (
                f" ({row.note})" if left_out else "")
            if left_out:
                row.verdict = stats.NOT_COMPARABLE
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
            row = _count_rule(key, metric, max(b), max(n))
            if metric == "graph_breaks" and row.verdict == stats.REGRESSED:
                new = sorted(set(_reasons(now, workload, mode)) - set(_reasons(base, workload,
                                                                             mode)))
                row.note = "new: " + "; ".join(new[:3]) if new else ""
            rows.append(row)
    return rows


def _reasons(record: dict, workload: str, mode: str) -> list[str]:
    for proc in record.get("workloads", {}).get(workload, {}).get("processes", []):
        m = proc.get("modes", {}).get(mode) or {}
        if m.get("status") == "OK" and "graph_break_reasons" in m:
            return m["graph_break_reasons"]
    return []


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
    """Per workload and mode: the error against float64 first (`numerics`), then compiled vs
    eager, determinism, drift of the outputs against the baseline's, graph breaks and
    recompiles; per workload: its operator set and the ops that ran off the device."""
    if now is None:
        return [Row("numerics", cell, "*", "*", "cell", stats.MISSING)] if base else []
    if now.get("status") == "SKIPPED":
        return [Row("numerics", cell, "*", "*", "cell", stats.SKIPPED, note=now.get("reason", ""))]
    rows = []
    base_units = (base or {}).get("workloads", {})
    tolerance = (now.get("tolerance") or {}).get("rel_l2")
    method = (now.get("fingerprint_method"), (base or {}).get("fingerprint_method"))
    base_coverage = (base or {}).get("coverage") or {}
    if base is not None and now.get("ab") and base.get("ab") is None:  # ab_baseline(now)
        base_coverage = now["ab"]["baseline"].get("coverage") or {}
    for workload, modes in sorted(now.get("workloads", {}).items()):
        for mode, ev in sorted(modes.items()):
            key = dict(stage="numerics", cell=cell, workload=workload, mode=mode)
            prev = base_units.get(workload, {}).get(mode) if base else None
            rows.append(_numerics_row(key, ev, prev, growth_factor))
            if ev.get("status") in ("PASS", "FAIL", "NONFINITE"):  # the worker ran this mode
                rows.extend(portability_rows(key, ev, prev, tolerance, method))
        cov = (now.get("coverage") or {}).get(workload)
        ran = any(ev.get("status") in ("PASS", "FAIL", "NONFINITE") for ev in modes.values())
        if cov is not None and ran:  # a workload that failed outright is reported once
            prev_cov = base_coverage.get(workload) if base else None
            rows.extend(coverage_rows(dict(stage="numerics", cell=cell, workload=workload,
                                           mode="eager"), cov, prev_cov))
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


def _prev_ok(prev: dict | None) -> dict | None:
    return prev if prev and prev.get("status") in ("PASS", "FAIL", "NONFINITE") else None


def portability_rows(key: dict, ev: dict, prev: dict | None, tolerance: float | None,
                     method: tuple) -> list[Row]:
    prev = _prev_ok(prev)
    rows = []
    finite = ev.get("status") != "NONFINITE"  # NaN/Inf: FAILED already; nothing to measure
    if "compiled_vs_eager" in ev and finite:
        rows.extend(_compiled_row(key, ev, prev))
    if "rerun_max_abs" in ev and finite:
        rows.append(_determinism_row(key, ev, prev))
    if ev.get("fingerprint") and prev is not None and finite:
        rows.append(_drift_row(key, ev, prev, tolerance, method))
    if "dynamo" in ev:
        rows.extend(_dynamo_rows(key, ev["dynamo"], (prev or {}).get("dynamo") if prev else None))
    return rows


def _compiled_row(key: dict, ev: dict, prev: dict | None) -> list[Row]:
    """dynamo's accuracy rule as a check of its own: FAILED when the compiled error exceeds
    the multiplier times eager's."""
    check = ev["compiled_vs_eager"]
    if check["status"] == "NOT MEASURED":
        return []
    before = ((prev or {}).get("compiled_vs_eager") or {}).get("status")
    row = Row(**key, metric="compiled_vs_eager", verdict=stats.EQUIVALENT, now=check["status"],
              base=before)
    ratios = [err / eager for name, err in ev.get("rel_l2", {}).items()
              if err is not None and (eager := check.get("eager_rel_l2", {}).get(name))]
    direct = [v for v in check.get("rel_l2", {}).values() if v is not None]
    summary = ((f"compiled error {max(ratios):.2f}x eager's" if ratios else "")
               + (f"; compiled vs eager rel. L2 {max(direct):.1e}" if direct else ""))
    if check["status"] == "FAIL":
        row.verdict = stats.FAILED
        row.note = ("was PASS, now " if before == "PASS" else "") + "; ".join(check["problems"])
    elif before is None:
        row.verdict, row.note = stats.NEW, summary
    elif before == "FAIL":
        row.verdict, row.note = stats.IMPROVED, "now passes; " + summary
    else:
        row.note = summary
    return [row]


def _nondeterminism(ev: dict) -> tuple[bool, float, float | None, str]:
    """(nondeterministic?, same-process max abs, fresh-process distance, description)."""
    same = ev.get("rerun_max_abs") or 0.0
    fresh = ev.get("fresh_process") or {}
    moved = fresh.get("distance") if fresh.get("equal") is False else None
    parts = []
    if same:
        parts.append(f"the same inputs twice in one process differ by max abs {same:.2e}")
    if fresh.get("equal") is False:
        parts.append("a fresh process's outputs differ" + (
            f": moved {moved:.2e} (rel.), most in {fresh.get('worst')}" if moved is not None
            else " (bitwise)"))
    elif fresh.get("equal") is None and fresh.get("error"):
        parts.append(f"fresh process not measured ({fresh['error']})")
    return bool(same) or fresh.get("equal") is False, same, moved, "; ".join(parts)


def _determinism_row(key: dict, ev: dict, prev: dict | None) -> Row:
    """Deterministic -> nondeterministic is REGRESSED (the reverse IMPROVED), with the
    magnitudes: within one process (max abs) and against a fresh process (rel. distance)."""
    nondet, same, moved, text = _nondeterminism(ev)
    row = Row(**key, metric="determinism", verdict=stats.EQUIVALENT,
              now="nondeterministic" if nondet else "deterministic", note=text)
    if prev is None or "rerun_max_abs" not in prev:
        row.verdict = stats.NEW
        return row
    was, was_same, was_moved, was_text = _nondeterminism(prev)
    row.base = "nondeterministic" if was else "deterministic"
    if nondet and not was:
        row.verdict, row.note = stats.REGRESSED, "was deterministic; now " + text
    elif was and not nondet:
        row.verdict, row.note = stats.IMPROVED, "now deterministic; was: " + was_text
    elif nondet:  # in both: the size of run-to-run noise is itself noisy, so no verdict on it
        row.note = f"{text} (baseline: {was_text})"
    return row


def _drift_row(key: dict, ev: dict, prev: dict, tolerance: float | None,
               method: tuple) -> Row:
    """How far this run's outputs moved from the baseline's, against the precision's
    tolerance (rel. L2): a torch upgrade that changes results beyond it is REGRESSED."""
    row = Row(**key, metric="drift", verdict=stats.EQUIVALENT)
    if not prev.get("fingerprint"):
        row.verdict, row.note = stats.NEW, "the baseline kept no outputs: drift is measured " \
            "from the next run on"
        return row
    if method[0] != method[1]:
        row.verdict = stats.NOT_COMPARABLE
        row.note = f"outputs recorded as {method[1]} in the baseline, {method[0]} now"
        return row
    found = coverage.drift(ev["fingerprint"], prev["fingerprint"])
    distance, worst = found["distance"], found["worst"]
    reshaped = {n: why for n, why in found["unmeasured"].items() if why.startswith("shape")}
    others = {n: why for n, why in found["unmeasured"].items() if n not in reshaped}
    extra = "; ".join(f"{n}: {why}" for n, why in sorted(others.items())[:3])
    if reshaped:
        row.verdict = stats.REGRESSED
        row.note = "; ".join(f"{n} {why}" for n, why in sorted(reshaped.items())[:3])
        return row
    if distance is None:
        row.verdict, row.note = stats.NOT_COMPARABLE, extra or "nothing to compare"
        return row
    row.base, row.now = "0", f"{distance:.1e}"   # the baseline is where it started
    tol = f" (tolerance {tolerance:.0e})" if tolerance is not None else ""
    row.note = (f"outputs moved {distance:.2e} from the baseline{tol}"
                + (f", most in {worst}" if distance > 0 else "") + (f"; {extra}" if extra else ""))
    if tolerance is not None and distance > tolerance:
        row.verdict = stats.REGRESSED
    noise = [m for e in (ev, prev) if (m := _nondeterminism(e)[2]) is not None]
    if noise:  # context, not an excuse: the tolerance is the contract
        row.note += f" (nondeterministic: a fresh process alone moves it {max(noise):.1e})"
    return row


def _dynamo_rows(key: dict, now: dict, base: dict | None) -> list[Row]:
    """New graph breaks with their reasons (compared by reason, not line number); recompiles."""
    n = int(now.get("graph_breaks") or 0)
    reasons = now.get("graph_break_reasons") or []
    row = Row(**key, metric="graph_breaks", verdict=stats.EQUIVALENT, now=n)
    rows = [row]
    if base is None:
        row.verdict = stats.NEW
        row.note = "; ".join(reasons[:5])
    else:
        b = int(base.get("graph_breaks") or 0)
        row.base = b
        new = coverage.new_reasons(reasons, base.get("graph_break_reasons") or [])
        gone = coverage.new_reasons(base.get("graph_break_reasons") or [], reasons)
        if n > b or new:
            row.verdict = stats.REGRESSED
            row.note = f"graph breaks {b} → {n}" + (
                "; new: " + "; ".join(new[:5]) if new else "")
        elif n < b:
            row.verdict = stats.IMPROVED
            row.note = f"graph breaks {b} → {n}" + ("; gone: " + "; ".join(gone[:5])
                                                    if gone else "")
        elif reasons:
            row.note = "; ".join(reasons[:5])
    r_now, r_base = int(now.get("recompiles") or 0), int((base or {}).get("recompiles") or 0)
    if r_now or r_base:
        why = "; ".join((now.get("recompile_reasons") or [])[:3])
        rec = Row(**key, metric="recompiles", now=r_now, base=r_base if base else None,
                  verdict=(stats.NEW if base is None else stats.REGRESSED if r_now > r_base
                           else stats.IMPROVED if r_now < r_base else stats.EQUIVALENT),
                  note=why)
        rows.append(rec)
    return rows


def coverage_rows(key: dict, now: dict, base: dict | None) -> list[Row]:
    """The operator set of one eager step against the baseline's (new / removed ops), and
    the ops that ran elsewhere than the requested device (CPU fallbacks)."""
    if "ops" not in now:
        return [Row(**key, metric="ops", verdict=stats.FAILED, now=now.get("status"),
                    note=f"op coverage not measured: {now.get('error')}")]
    if base is not None and "ops" not in base:
        base = None
    ops = now["ops"]
    off = coverage.fallback_ops(now)
    row = Row(**key, metric="ops", verdict=stats.EQUIVALENT, now=len(ops),
              base=len(base["ops"]) if base else None)
    rows = [row]
    if base is None:
        row.verdict = stats.NEW
    else:
        diff = coverage.op_diff(now, base)
        if diff["added"] or diff["removed"]:
            row.verdict = stats.INCONCLUSIVE
            row.note = "; ".join(filter(None, [
                "new: " + coverage.short_list(diff["added"]) if diff["added"] else "",
                "removed: " + coverage.short_list(diff["removed"]) if diff["removed"] else "",
                "the operators changed: review (not a regression by itself)"]))
    fell_base = coverage.fallback_ops(base) if base else {}
    if off or fell_base or now.get("device") not in (None, "cpu"):
        fb = Row(**key, metric="fallback_ops", verdict=stats.EQUIVALENT, now=len(off),
                 base=len(fell_base) if base else None,
                 note="; ".join(f"`{op}` ({why})" for op, why in sorted(off.items())[:8]))
        if base is None:
            fb.verdict = stats.NEW
        else:
            diff = coverage.op_diff(now, base)
            if diff["new_fallbacks"]:
                fb.verdict = stats.REGRESSED
                fb.note = (f"now off {now.get('device')}: "
                           + coverage.short_list(diff["new_fallbacks"]) + "; all: " + fb.note)
            elif diff["gone_fallbacks"]:
                fb.verdict = stats.IMPROVED
                fb.note = "back on the device: " + coverage.short_list(diff["gone_fallbacks"])
        rows.append(fb)
    return rows


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
    interleaved with this one on the same machine (`paired`: in lock-step pairs)."""
    if not record or not record.get("ab"):
        return None
    return {**record, "workloads": record["ab"]["baseline"]["workloads"], "ab": None,
            "ab_arm": True, "paired": bool(record["ab"].get("interleaved"))}


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
                        + ("worker processes in lock-step pairs taking turns sample by sample; "
                           "timings are tested pair by pair (paired t-test on log ratios)."
                           if ab.get("interleaved") else
                           "worker processes alternating on this machine."))
                result.notes.append(note)
            else:
                from_git += now is not None
                base = _baseline(commit, path.as_posix(), stage, result.notes)
                if commit is not None and base is None and now is not None:
                    missing.append(path.as_posix())
            if stage == "bench":
                for label, record in ((f"this run's {cell}", now),
                                      (f"the baseline's {cell}", base)):
                    result.notes.append(busy_note(label, record, cfg.busy_share))
                same_machine = now is not None and now.get("ab")
                result.rows.extend(bench_rows(cell, now, base, cfg.stats.delta,
                                              None if same_machine else hardware,
                                              cfg.busy_share))
            else:
                result.rows.extend(numerics_rows(cell, now, base, cfg.stats.error_growth))
    result.notes = [n for n in result.notes if n]
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
