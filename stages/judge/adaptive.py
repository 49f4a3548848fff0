"""Adaptive sampling's interim decision: which timings of a cell deserve more processes, and
how many; and, for a timing the run leaves undecided, what deciding it would cost.

An interim reading of one cell, not a verdict: the run's verdicts are decided once, over the
whole run, in compare (`judge.run`). Every look is tested at alpha / max_looks, so stopping
early on a lucky look cannot inflate the false-alarm rate. The launcher (launch.cells.fund)
gives an undecided timing rounds up to bench.max_processes, a size fixed in advance rather
than the processes its look says would decide it (sized from the look's own estimate, the
final pooled test's false alarms rose above α with δ near 0), the units those can decide
first, within the budget.

A steady state or warm-up whose host instructions per call moved beyond their margin, the way
its time leans, is decided by its counts (a count of work repeats where a shared machine's
time does not): more time would not change what the run says of it, so the rounds go to units
the counts cannot tell (a time that moved while the work did not, or against it). Counts are
therefore taken before the adaptive rounds (launch.cells).
"""
from __future__ import annotations

import dataclasses

from torchgate.core.config.settings import BenchSettings
from torchgate.core.metrics import TIMINGS, Role, Rule, names, with_role
from torchgate.core.records.cost import process_seconds
from torchgate.core.records.rows import CompareRecord, Row
from torchgate.core.records.schema import BenchRecord, Pending
from torchgate.core.vocabulary import Verdict

CALLS = tuple(m.name for m in with_role(Role.CALLS))   # timings made of calls a count counts


def pending_units(result: CompareRecord, max_processes: int,
                  metrics: tuple[str, ...] | None = None) -> list[tuple[Pending, int | None]]:
    """Timings that are INCONCLUSIVE but could be decided, each with the processes per side
    (lock-step pairs) that would decide it, and REGRESSED ones (None), to be confirmed with a
    fresh batch (a noisy, bimodal cell whose few processes happened to split between its
    modes does not survive one); of `metrics` only (bench.adaptive_metrics; None: every
    timing). How many the launcher adds is its `fund`'s choice."""
    found, counted = [], decided_by_counts(result.rows)
    for row in result.rows:
        if row.stage != "bench" or row.metric not in (metrics or TIMINGS) or row.change is None:
            continue
        if _agrees(counted.get((row.cell, row.workload, row.mode)), row):
            continue
        undecided = row.verdict == Verdict.INCONCLUSIVE and row.change.needed is not None
        if (undecided or row.verdict == Verdict.REGRESSED) and row.change.n_now < max_processes:
            c = row.change
            found.append((Pending(row.workload, row.mode, row.metric, row.verdict, c.ratio,
                                  c.ci_low, c.ci_high), c.needed if undecided else None))
    return found


def undecided_counts(result: CompareRecord) -> list[str]:
    """Workloads with a count the test left undecided (judge.counts): counted again."""
    return sorted({r.workload for r in result.rows
                   if r.stage == "bench" and r.metric in names(rule=Rule.BANDED)
                   and r.change is not None
                   and r.verdict == Verdict.INCONCLUSIVE})


def decided_by_counts(rows) -> dict[tuple[str, str, str], Row]:
    """(cell, workload, mode) -> its host instructions row, where they moved beyond their
    margin (REGRESSED or IMPROVED)."""
    return {(r.cell, r.workload, r.mode): r for r in rows
            if r.stage == "bench" and r.metric == "instructions"
            and r.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)}


def _agrees(counted: Row | None, timing: Row) -> bool:
    """Whether a steady state or warm-up, timings of calls, leans the way its unit's decisive
    counts of a call moved (a first call's compile is not what they count)."""
    if counted is None or timing.change is None or timing.metric not in CALLS:
        return False
    return (timing.change.ratio > 1) == (counted.verdict == Verdict.REGRESSED)


def cost_note(row: Row, record: BenchRecord | None, bench: BenchSettings,
              counted: Row | None = None) -> str | None:
    """For a timing left INCONCLUSIVE whose test says how many processes would decide it:
    how many more, what they would take in wall time (from this run's processes), and which
    of adaptive sampling's limits kept them out (`counted`: its unit's decisive host
    instructions row, if any); None for any other row."""
    c = row.change
    if (row.stage != "bench" or row.metric not in TIMINGS or row.verdict != Verdict.INCONCLUSIVE
            or c is None or c.needed is None or record is None
            or row.workload not in record.workloads):
        return None
    have = max(c.n_base, c.n_now)
    more = c.needed - have
    if more <= 0:
        return None
    unit = ("A/B pair" + "s" * (more > 1)) if c.paired else ("process" + "es" * (more > 1))
    processes = record.workloads[row.workload].processes
    if row.metric == "first_call_s" and any(
            p.modes[row.mode].compile_cache for p in processes if row.mode in p.modes):
        return (f"{more} more cold compiles would decide it; adaptive rounds compile with "
                f"warm caches: bench.cold_compile_processes is {bench.cold_compile_processes}")
    ab = record.ab
    one = (process_seconds(processes, {row.mode}) or 0.0) * (
        2 if ab is not None and not ab.interleaved else 1)
    total = more * one
    limits = []
    if _agrees(counted, row):
        limits.append(f"its host instructions moved {_percent(counted)} and decide it: "
                      "adaptive rounds go to units the counts cannot tell")
    if bench.adaptive_metrics is not None and row.metric not in bench.adaptive_metrics:
        limits.append(f"adaptive rounds fund {', '.join(bench.adaptive_metrics) or 'none'} "
                      "only (bench.adaptive_metrics)")
    if c.needed > bench.max_processes:
        limits.append(f"bench.max_processes is {bench.max_processes}")
    if bench.adaptive_budget_s <= 0:
        limits.append("adaptive sampling is off (bench.adaptive_budget_s = 0)")
    elif total > bench.adaptive_budget_s:
        limits.append(f"bench.adaptive_budget_s is {bench.adaptive_budget_s:g} s a cell")
    said = f"{more} more {unit} (~{_duration(total)}, {_duration(one)} each) would decide it"
    return said + (": " + "; ".join(limits) if limits else "")


def cost_notes(rows: tuple[Row, ...], records: dict[str, BenchRecord],
               bench: BenchSettings) -> tuple[Row, ...]:
    """The rows with `cost_note` added where it applies; `records`: cell -> this run's bench
    record."""
    counted = decided_by_counts(rows)
    return tuple(dataclasses.replace(row, note="; ".join(filter(None, [row.note, note])))
                 if (note := cost_note(row, records.get(row.cell), bench,
                                       counted.get((row.cell, row.workload, row.mode))))
                 else row for row in rows)


def _percent(row: Row) -> str:
    return (f"{(row.now / row.base - 1) * 100:+.1f} %" if row.base and row.now is not None
            else row.verdict)


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 100 else f"{seconds:.0f} s"
