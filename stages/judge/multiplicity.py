"""Adjusting a run's p-values for the number of tests. Pure.

A run tests every timing of every cell together; its verdicts that gate (REGRESSED /
IMPROVED) are decided on Holm's step-down adjustment, which controls the family-wise error
rate (`holm_adjust` says why not Benjamini-Hochberg's false discovery rate).
"""
from __future__ import annotations

from typing import Sequence


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input order: the i-th smallest
    p times (m - i + 1), made monotone. A p-value at or below alpha after it controls the
    family-wise error rate at alpha whatever the other tests' truth.

    Why not Benjamini-Hochberg, which controls the false discovery rate: an upgrade moves many
    units a little, and each true discovery lifts the others' level. With 30 of 60 units truly
    +2 % (under δ) and the rest unchanged, BH took some unchanged unit to REGRESSED in
    5.3-5.5 % of runs, Holm in 0.47 % (the turn-3 audit, DESIGN.md §16); with the unchanged
    half noisier (4 % spread, 8 processes) BH in 15 %, Holm in 1.3 % (tests/test_stats_holm.py).
    Its price: a unit truly +10 % in that noisy half was caught in 76 % of runs, not 98 %."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, pvalues[i] * (m - rank)))
        adjusted[i] = running
    return adjusted


def bh_adjust(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (step-up), in the input order: for what is only
    reported, never for a verdict that gates (`holm_adjust`)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        adjusted[i] = min(1.0, running)
    return adjusted
