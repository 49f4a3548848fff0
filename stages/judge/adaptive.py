"""Adaptive sampling's interim decision: which timings of a cell deserve more processes.

An interim reading of one cell, not a verdict: the run's verdicts are decided once, over the
whole run, in compare (`judge.run`). Every look is tested at alpha / max_looks, so stopping
early on a lucky look cannot inflate the false-alarm rate.
"""
from __future__ import annotations

from stages.core.config.settings import TIMED
from stages.core.records.schema import Pending
from stages.core.vocabulary import Verdict
from stages.judge.verdicts import Comparison


def pending_units(result: Comparison, max_processes: int) -> list[Pending]:
    """Timings that are INCONCLUSIVE but could be decided, and REGRESSED ones, confirmed with
    a fresh batch (a noisy, bimodal cell whose few processes happened to split between its
    modes does not survive one)."""
    found = []
    for row in result.rows:
        if row.stage != "bench" or row.metric not in TIMED or row.change is None:
            continue
        undecided = row.verdict == Verdict.INCONCLUSIVE and row.change.needed is not None
        if (undecided or row.verdict == Verdict.REGRESSED) and row.change.n_now < max_processes:
            c = row.change
            found.append(Pending(row.workload, row.mode, row.metric, row.verdict, c.ratio,
                                 c.ci_low, c.ci_high))
    return found
