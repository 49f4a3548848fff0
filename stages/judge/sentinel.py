"""The machine-speed sentinel: a guard against blaming the code for the machine, and a
covariate that takes the machine's speed out of a timing. Pure.

Every worker process times a pure-Python loop and a 32 MiB copy, code no torch upgrade
touches (stages/measure). Against a recorded baseline:

- As a covariate (issue 22, item 4; DESIGN.md §16). Across the committed runs of the cell, a
  unit's run mean (log) follows the sentinel's: y_r = a + β·x_r + residual. Where the history
  holds enough runs (`LEAST_RUNS`) whose sentinel varied, β̂ is fitted per unit by least
  squares (H - 2 degrees of freedom), the run-to-run variance left after it is estimated
  from the history with the sentinel's part taken out (judge.moderation.run_spreads on the
  adjusted runs), and the unit's log ratio becomes d - β̂·d_s, d_s the sentinel's log ratio
  over the cell's processes, with β̂²·se(d_s)² and d_s²·var(β̂) added to its variance
  (`adjusted`). The veto then remains only for a machine that moved beyond ±δ
  (`machine_moved`), where a straight line fitted on smaller moves is not to be trusted.
  Simulated (8 committed runs, machine drift τ_M 1 / 3 / 6 % between runs, 12 units
  following it with β 0.6-1.4, 12 sentinel readings a side; tests/test_stats_sentinel.py):
  cells compared 100 / 87 / 54 % (the rest moved beyond ±δ) against 34 / 20 / 5 % under the
  guard alone, cells with a false REGRESSED at most 0.3 %, a +10 % unit caught in 70-77 % of
  the cells compared (the guard's: 70 / 13 / 0 %).
- Where β̂ cannot be estimated (a new unit, a history shorter than `LEAST_RUNS`), the
  timing is compared unadjusted, with the run-to-run variance of the history (or the prior),
  which holds the machine's drift between runs, and the same veto beyond ±δ; its note says
  so. Requiring the sentinel shown steady within ±δ/2 instead tested the sentinel's own
  precision: at 3 committed runs it compared 29 / 10 % of cells at machine drifts of 1 / 3 %,
  unadjusted 100 / 89 %, false REGRESSED within α (tests/test_stats_sentinel.py).
- As a guard (`machine_unchanged`), with another Python (the loop then times the
  interpreter): the timings are compared only when the copy is shown steady within ±δ/2,
  and otherwise are NOT COMPARABLE with the reason.

The sentinel's readings also spread within a run, so d_s carries noise of its own, which the
adjustment propagates. Its noise in the history's run means (errors in x) shrinks β̂ towards
0 by var(M) / (var(M) + var(noise)): 0.66 at τ_M = 1 % with 12 readings of 2.5 % spread, 0.95
at 3 %. What it leaves of the machine stays in the residual run variance, which the history
measures, so the shrinkage costs power, not the error rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from torchgate.core.records.schema import BenchRecord
from torchgate.core.vocabulary import Status
from torchgate.judge import stats

LEAST_RUNS = 5       # committed runs with a sentinel before β̂ is fitted (3 residual df)


@dataclass(frozen=True)
class Slope:
    """How a unit's run means follow the sentinel's over the committed runs (log scale)."""
    beta: float
    variance: float          # of β̂
    df: float                # H - 2
    runs: int


def fit_slope(sentinel: Sequence[float], unit: Sequence[float],
              least_runs: int = LEAST_RUNS) -> Slope | None:
    """β̂ of the unit's run means (log) on the sentinel's, by least squares; None with fewer
    than `least_runs` runs or a sentinel that did not vary (β cannot be estimated)."""
    x, y = np.asarray(sentinel, dtype=float), np.asarray(unit, dtype=float)
    if x.size < max(least_runs, 3) or x.size != y.size:
        return None
    x, y = x - x.mean(), y - y.mean()
    sxx = float(x @ x)
    if not sxx > 1e-12 * x.size:
        return None
    beta = float(x @ y) / sxx
    residual = float(((y - beta * x) ** 2).sum()) / (x.size - 2)
    return Slope(beta, residual / sxx, x.size - 2, x.size)


def run_mean(record: BenchRecord) -> float | None:
    """The sentinel's mean log loop time over a record's processes (None: fewer than 2)."""
    values = sentinel_values(record)
    return float(np.mean(np.log(values))) if len(values) >= 2 and min(values) > 0 else None


def adjust(shift: stats.Shift, slope: Slope, sentinel: stats.Shift) -> stats.Shift:
    """The unit's change with the machine's taken out: d - β̂·d_s, its variance the unit's
    parts plus β̂²·se(d_s)² (the sentinel's own noise, with its Welch degrees of freedom)
    and d_s²·var(β̂) (the slope's, with H - 2)."""
    extra = (stats.Part("run", slope.beta ** 2 * sentinel.se ** 2, sentinel.df),
             stats.Part("run", sentinel.log_ratio ** 2 * slope.variance, slope.df))
    return stats.with_parts(shift.n_base, shift.n_now,
                            shift.log_ratio - slope.beta * sentinel.log_ratio, shift.spread,
                            (*shift.variance_parts, *extra), shift.paired)


# A unit compared with a recorded baseline whose slope could not be fitted: not adjusted.
UNFITTED = Slope(0.0, 0.0, 0.0, 0)


def adjusted(shift: stats.Shift | None, slope: Slope | None, base: BenchRecord,
             now: BenchRecord) -> tuple[stats.Shift | None, str]:
    """(the shift adjusted for the sentinel, the note that says by how much, or why not)."""
    sentinel = stats.shift(sentinel_values(base), sentinel_values(now))
    if shift is None or slope is None or sentinel is None:
        return shift, ""
    if slope is UNFITTED:
        return shift, (f"not adjusted for the machine (sentinel {sentinel.ratio:.3f}x): no "
                       f"slope before {LEAST_RUNS} committed runs")
    return adjust(shift, slope, sentinel), (
        f"adjusted for the machine: the sentinel's loop ran {sentinel.ratio:.3f}x the "
        f"baseline's, this unit follows it with β {slope.beta:.2f} ± "
        f"{math.sqrt(slope.variance):.2f} ({slope.runs} committed runs); the baseline and "
        "now shown as measured, the change adjusted")


def machine_moved(base: BenchRecord | None, now: BenchRecord, *, alpha: float,
                  delta: float) -> str | None:
    """The veto that remains where the sentinel is a covariate: None unless the loop or the
    copy moved beyond ±δ (its (1 - 2 alpha) interval wholly outside), the loop has fewer than
    two readings on a side, or the baseline's sentinel was taken another way."""
    if base is None:
        return None
    if sentinel_methods(base) != sentinel_methods(now):
        return machine_unchanged(base, now, alpha=alpha, delta=delta)
    limit, level = math.log1p(delta), 1 - 2 * alpha
    problems = []
    for field, label in SENTINELS:
        s = stats.shift(sentinel_values(base, field), sentinel_values(now, field))
        if s is None:
            if field == "python_loop_s":
                return (f"machine speed not shown: the sentinel's {label} has fewer than 2 "
                        "readings on a side")
            continue
        low, high = (math.log(x) for x in s.interval(2 * alpha))
        if low > limit or high < -limit:
            problems.append(f"the sentinel's {label} runs {s.ratio:.2f}x the baseline's time "
                            f"({level:.0%} interval {math.exp(low):.3f}-{math.exp(high):.3f}, "
                            f"beyond ±{delta:.1%}: too far to adjust for)")
    return "machine speed changed: " + "; ".join(problems) if problems else None


SENTINELS = (("python_loop_s", "Python loop"), ("copy_32mib_s", "32 MiB copy"))


def sentinel_values(record: BenchRecord, field: str = "python_loop_s") -> list[float]:
    return [v for run in record.workloads.values() for p in run.processes
            if p.status == Status.OK and p.sentinel is not None
            and (v := getattr(p.sentinel, field)) is not None]


def sentinel_methods(record: BenchRecord) -> set[str | None]:
    return {p.sentinel.method for run in record.workloads.values() for p in run.processes
            if p.status == Status.OK and p.sentinel is not None}


def machine_unchanged(base: BenchRecord | None, now: BenchRecord, *, alpha: float,
                      delta: float, python: str | None = None) -> str | None:
    """None when the sentinel shows the machine as fast as the baseline's; otherwise why the
    cell's timings cannot blame the code. Each sentinel's ratio now/base is judged by its
    (1 - 2 alpha) interval against ±delta/2 (two one-sided tests at alpha).

    Fails closed on the loop: its interval must lie within ±delta/2, so a sentinel that
    cannot be shown steady (too few readings, too wide) voids the timings as surely as one
    that moved. The 32 MiB copy can only veto: memory bandwidth on a shared host wanders with
    the neighbours (8-10 % from process to process on a 2-core VM, against 2-4 % for the loop),
    too much to be shown within ±delta/2 at any affordable number of processes, so it voids
    the timings when its interval lies wholly beyond ±delta/2. With another Python
    (`python`, in words) the loop times the interpreter, not the machine: the copy alone
    decides, and then it too must be shown steady."""
    if base is None:
        return None
    if sentinel_methods(base) != sentinel_methods(now):
        return ("machine speed not shown steady: the baseline's sentinel was taken another "
                "way (by an older torchgate); measure the baseline again beside this run "
                "(`baseline.measure=rebuild`)")
    limit, level = math.log1p(delta / 2), 1 - 2 * alpha
    decides = "copy_32mib_s" if python else "python_loop_s"
    problems, unsteady = [], False
    for field, label in SENTINELS[1:] if python else SENTINELS:
        s = stats.shift(sentinel_values(base, field), sentinel_values(now, field))
        if s is None:
            if field == decides:
                problems.append(f"the sentinel's {label} has fewer than 2 readings on a side")
                unsteady = True
            continue
        low, high = (math.log(x) for x in s.interval(2 * alpha))
        moved = low > limit or high < -limit
        if moved or (field == decides and not -limit <= low <= high <= limit):
            unsteady |= not moved
            problems.append(
                f"the sentinel's {label} runs {s.ratio:.2f}x the baseline's time "
                f"({level:.0%} interval {math.exp(low):.3f}-{math.exp(high):.3f}, " + (
                    f"beyond ±{delta / 2:.1%})" if moved else
                    f"not within ±{delta / 2:.1%}; {s.spread:.1%} spread between processes)"))
    if not problems:
        return None
    head = "machine speed not shown steady" if unsteady else "machine speed changed"
    tail = (f" ({python}: the loop times the interpreter, so the copy alone decides)"
            if python else "")
    return f"{head}: " + "; ".join(problems) + tail
