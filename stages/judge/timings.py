"""The bench rules: one cell's bench record against the baseline's, as draft rows.

Each timing is reduced to one number per worker process (its median sample, or the phase's
value) and tested in `stats`; memory compares medians against δ; graph breaks and recompiles
compare exactly; statuses say FAILED, IMPROVED, NEW, MISSING or SKIPPED. Pure.
"""
from __future__ import annotations

import math
from typing import Iterator

from stages.core.config import TIMED, Delta
from stages.core.schema import OK, BenchProcess, BenchRecord, Busy, ModeTiming
from stages.judge import portability, stats
from stages.judge.verdicts import Draft

COUNTED = ("graph_breaks", "recompiles")           # exact: more is worse
SENTINEL_DELTA = 0.10                              # machine-speed change that voids timings


# ---- reducing a bench record to process-level summaries ----------------------------------

def _summaries(record: BenchRecord, workload: str, mode: str,
               metric: str) -> Iterator[tuple[BenchProcess, ModeTiming, float]]:
    """(process, its mode's result, its value) for every process where the mode succeeded."""
    run = record.workloads.get(workload)
    for proc in run.processes if run else ():
        m = proc.modes.get(mode) if proc.status == OK else None
        if m is None or m.status != OK:
            continue
        value = getattr(m, metric)
        if isinstance(value, tuple):
            if value:
                yield proc, m, stats.median(value)
        elif value is not None:
            yield proc, m, value


def process_values(record: BenchRecord, workload: str, mode: str, metric: str,
                   busy_share: float | None = None) -> list[float]:
    """One number per successful process. With busy_share: only processes whose phase of
    this metric ran while other programs and steal took at most that share of the CPU."""
    return [v for _, m, v in _summaries(record, workload, mode, metric)
            if not busy(m, busy_share, metric)]


def paired_values(base: BenchRecord, now: BenchRecord, workload: str, mode: str, metric: str,
                  busy_share: float | None = None) -> tuple[list[float], list[float]]:
    """Interleaved A/B: the two arms' values in the rounds where both processes succeeded
    (and neither ran on a busy machine), round by round."""
    b, n = ({proc.round: v for proc, m, v in _summaries(r, workload, mode, metric)
             if proc.round is not None and not busy(m, busy_share, metric)} for r in (base, now))
    rounds = sorted(b.keys() & n.keys())
    return [b[r] for r in rounds], [n[r] for r in rounds]


def reading(mode: ModeTiming, metric: str) -> Busy | None:
    """What else took the CPU during the phase a metric times. A record that read the
    steady-state samples only (schema 2) is judged by that reading in every phase."""
    phase = {"first_call_s": mode.busy_first_call, "warmup_s": mode.busy_warmup}.get(metric)
    return phase or mode.busy_machine


def taken(b: Busy) -> float:
    """The CPU share this process could not have: other programs' and the hypervisor's
    (steal takes time from the worker's own CPUs as surely as a neighbour does)."""
    return b.other_cpu + b.steal


def busy(mode: ModeTiming, share: float | None, metric: str = "steady_s") -> bool:
    """Other programs and steal took more than `share` of the CPU while this phase ran."""
    b = reading(mode, metric)
    return share is not None and b is not None and taken(b) > share


def busy_shares(record: BenchRecord | None) -> list[float]:
    """The most CPU that others and steal took in any timed phase, per measured mode of
    every process."""
    return [max(taken(b) for b in readings)
            for run in (record.workloads.values() if record else ())
            for p in run.processes if p.status == OK
            for m in p.modes.values()
            if (readings := [b for b in (m.busy_machine, m.busy_first_call, m.busy_warmup)
                             if b is not None])]


def failures(record: BenchRecord, workload: str, mode: str) -> list[str]:
    found = []
    run = record.workloads.get(workload)
    for proc in run.processes if run else ():
        if proc.status != OK:
            found.append(f"{proc.status}: {proc.error}")
            continue
        m = proc.modes.get(mode)
        if m is not None and m.status != OK:
            found.append(f"{m.status}: {m.error}")
    return found


def units(record: BenchRecord) -> set[tuple[str, str]]:
    return {(w, m) for w in record.workloads for m in record.modes}


def sentinel_values(record: BenchRecord) -> list[float]:
    return [p.sentinel.python_loop_s for run in record.workloads.values()
            for p in run.processes if p.status == OK and p.sentinel is not None]


def machine_moved(base: BenchRecord | None, now: BenchRecord) -> str | None:
    """A reason when the machine-speed sentinel moved: then timings cannot blame the code."""
    if base is None:
        return None
    s = stats.shift(sentinel_values(base), sentinel_values(now))
    if s and s.p_value < 0.01 and abs(s.log_ratio) > math.log1p(SENTINEL_DELTA):
        return (f"machine speed changed: the sentinel (a fixed Python loop) runs "
                f"{s.ratio:.2f}x the baseline's time")
    return None


# ---- rows --------------------------------------------------------------------------------

def bench_rows(cell: str, now: BenchRecord | None, base: BenchRecord | None, delta: Delta,
               not_comparable: str | None = None, busy_share: float = 0.25, *,
               paired: bool = False) -> list[Draft]:
    """`paired`: base is the other arm of an interleaved A/B run, measured in lock-step
    pairs with this one (the sentinel then compares interpreters, not moments)."""
    if now is None:
        return [Draft("bench", cell, "*", "*", "cell", stats.MISSING,
                      note="measured in the baseline, not in this run")] if base else []
    if now.status == stats.SKIPPED:
        return [Draft("bench", cell, "*", "*", "cell", stats.SKIPPED, note=now.reason or "")]
    usable = base if base is not None and base.status == OK else None
    same_run = usable is not None and now.ab is not None
    reason = not_comparable or (None if same_run else machine_moved(usable, now))
    rows = []
    for workload, mode in sorted(units(now) | (units(usable) if usable else set())):
        rows.extend(_unit_rows(cell, workload, mode, now, usable, delta, reason, busy_share,
                               paired))
    return rows


def _unit_rows(cell, workload, mode, now: BenchRecord, base: BenchRecord | None, delta: Delta,
               not_comparable, busy_share, paired) -> list[Draft]:
    key = dict(stage="bench", cell=cell, workload=workload, mode=mode)
    in_now = (workload, mode) in units(now)
    in_base = base is not None and (workload, mode) in units(base)
    if not in_now:
        return [Draft(**key, metric="status", verdict=stats.MISSING,
                      note="in the baseline, not selected in this run")]
    failed_now = failures(now, workload, mode)
    failed_base = failures(base, workload, mode) if in_base else []
    if failed_now:
        was = ("was OK, now " if in_base and not failed_base else "") + failed_now[0]
        return [Draft(**key, metric="status", verdict=stats.FAILED,
                      base="OK" if in_base and not failed_base else None,
                      now=failed_now[0].split(":")[0], note=was)]
    if not in_base:
        return [Draft(**key, metric=m, verdict=stats.NEW,
                      now=_middle(process_values(now, workload, mode, m))) for m in TIMED]
    if failed_base:
        return [Draft(**key, metric="status", verdict=stats.IMPROVED, base="FAILED", now="OK",
                      note=f"now runs; was {failed_base[0]}")]
    rows = [_timing_row(key, metric, now, base, getattr(delta, metric), not_comparable,
                        busy_share, paired) for metric in TIMED]
    b, n = (process_values(r, workload, mode, "peak_bytes") for r in (base, now))
    if b and n:
        rows.append(_ratio_rule(key, "peak_bytes", _middle(b), _middle(n), delta.peak_bytes))
    for metric in COUNTED:
        b, n = (process_values(r, workload, mode, metric) for r in (base, now))
        if b and n:
            row = _count_rule(key, metric, max(b), max(n))
            if metric == "graph_breaks" and row.verdict == stats.REGRESSED:
                new = portability.new_reasons(_reasons(now, workload, mode),
                                              _reasons(base, workload, mode))
                row.note = "new: " + "; ".join(new[:3]) if new else ""
            rows.append(row)
    return rows


def _timing_row(key: dict, metric: str, now: BenchRecord, base: BenchRecord, delta: float,
                not_comparable: str | None, busy_share: float, paired: bool) -> Draft:
    workload, mode = key["workload"], key["mode"]
    # Processes sampled while other programs took the CPU say nothing about the code.
    b, n = (process_values(r, workload, mode, metric, busy_share) for r in (base, now))
    everyone = sum(len(process_values(r, workload, mode, metric)) for r in (base, now))
    left_out = everyone - len(b) - len(n)
    shift = (stats.paired_shift(*paired_values(base, now, workload, mode, metric, busy_share))
             if paired else stats.shift(b, n))
    row = Draft(**key, metric=metric, verdict=stats.INCONCLUSIVE, base=_middle(b),
                now=_middle(n), shift=shift, delta=delta)
    if left_out:
        row.note = (f"{left_out} process(es) left out: other programs and hypervisor steal "
                    f"took more than {busy_share:.0%} of the CPU while they ran")
    if shift is None:
        row.note = "fewer than 2 processes on a side: no test" + (
            f" ({row.note})" if left_out else "")
        if left_out:
            row.verdict = stats.NOT_COMPARABLE
    if not_comparable:
        row.verdict, row.note = stats.NOT_COMPARABLE, not_comparable
    return row


def _reasons(record: BenchRecord, workload: str, mode: str) -> tuple[str, ...]:
    for _, m, _ in _summaries(record, workload, mode, "graph_breaks"):
        return m.graph_break_reasons
    return ()


def _middle(values: list[float]) -> float | None:
    return stats.median(values) if values else None


def _ratio_rule(key: dict, metric: str, base: float, now: float, delta: float) -> Draft:
    """Nearly deterministic metrics (memory): the ratio of medians against δ."""
    ratio = now / base if base else math.inf
    verdict = (stats.REGRESSED if ratio > 1 + delta else
               stats.IMPROVED if ratio < 1 / (1 + delta) else stats.EQUIVALENT)
    return Draft(**key, metric=metric, verdict=verdict, base=base, now=now, delta=delta)


def _count_rule(key: dict, metric: str, base: int, now: int) -> Draft:
    verdict = (stats.REGRESSED if now > base else
               stats.IMPROVED if now < base else stats.EQUIVALENT)
    return Draft(**key, metric=metric, verdict=verdict, base=base, now=now)
