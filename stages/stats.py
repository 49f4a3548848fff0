"""Statistics of a comparison: pure functions from process-level summaries to verdicts.

The worker process is the unit of replication: a test on pooled iterations calls two runs of
identical code "different" most of the time (DESIGN.md §3). Each metric is reduced to one number
per process, compared on the log scale (so changes are ratios) with Welch's t-test, and a
change is a regression only when it is significant after Benjamini-Hochberg adjustment over the
whole run AND larger than the metric's minimum effect δ.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from scipy import stats as sps

REGRESSED = "REGRESSED"
IMPROVED = "IMPROVED"
EQUIVALENT = "EQUIVALENT"
INCONCLUSIVE = "INCONCLUSIVE"
NEW = "NEW"
MISSING = "MISSING"
FAILED = "FAILED"
SKIPPED = "SKIPPED"
NOT_COMPARABLE = "NOT COMPARABLE"
VERDICTS = (REGRESSED, FAILED, INCONCLUSIVE, NOT_COMPARABLE, IMPROVED, EQUIVALENT, NEW, MISSING,
            SKIPPED)


@dataclass(frozen=True)
class Shift:
    """The change of a metric between two sets of process summaries, on the log scale."""
    n_base: int
    n_now: int
    log_ratio: float      # mean log(now) - mean log(base)
    se: float             # standard error of log_ratio
    df: float             # Welch-Satterthwaite degrees of freedom
    spread: float         # pooled SD of log process summaries: process-to-process spread
    p_value: float        # two-sided, H0: no change

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    def interval(self, alpha: float) -> tuple[float, float]:
        """The (1 - alpha) confidence interval of the ratio now/base."""
        if self.se == 0:
            return self.ratio, self.ratio
        q = sps.t.ppf(1 - alpha / 2, self.df)
        return math.exp(self.log_ratio - q * self.se), math.exp(self.log_ratio + q * self.se)


def shift(base: Sequence[float], now: Sequence[float]) -> Shift | None:
    """Welch's t-test on log values; None when either side has fewer than two processes."""
    if len(base) < 2 or len(now) < 2 or min(*base, *now) <= 0:
        return None
    x = [math.log(v) for v in base]
    y = [math.log(v) for v in now]
    n1, n2 = len(x), len(y)
    v1, v2 = statistics.variance(x), statistics.variance(y)
    d = statistics.fmean(y) - statistics.fmean(x)
    se = math.sqrt(v1 / n1 + v2 / n2)
    spread = math.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2))
    if se == 0:
        return Shift(n1, n2, d, 0.0, float(n1 + n2 - 2), 0.0, 1.0 if d == 0 else 0.0)
    df = (v1 / n1 + v2 / n2) ** 2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    p = 2 * sps.t.sf(abs(d) / se, df)
    return Shift(n1, n2, d, se, df, spread, float(p))


def bh_adjust(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (step-up), in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        adjusted[i] = min(1.0, running)
    return adjusted


def verdict(s: Shift, p_adjusted: float, *, alpha: float, delta: float) -> str:
    """REGRESSED/IMPROVED: significant after adjustment and beyond ±δ; EQUIVALENT: the
    (1 - alpha) interval lies inside ±δ; INCONCLUSIVE otherwise."""
    limit = math.log1p(delta)
    if p_adjusted <= alpha and s.log_ratio > limit:
        return REGRESSED
    if p_adjusted <= alpha and s.log_ratio < -limit:
        return IMPROVED
    low, high = s.interval(alpha)
    if math.log(low) >= -limit and math.log(high) <= limit:
        return EQUIVALENT
    return INCONCLUSIVE


def minimum_detectable_effect(s: Shift, *, alpha: float, power: float, delta: float,
                              tests: int) -> float:
    """The slowdown that would be REGRESSED with probability `power`, relative (0.05 = 5 %).

    The level is alpha/tests: what Benjamini-Hochberg asks of the smallest p-value when one
    metric among `tests` truly moved. Both conditions of a regression must hold: significance
    and an estimate beyond δ.
    """
    if s.se == 0:
        return delta
    q_alpha = sps.t.ppf(1 - alpha / (2 * max(tests, 1)), s.df)
    q_power = sps.t.ppf(power, s.df)
    return math.expm1(max(math.log1p(delta) + q_power * s.se, (q_alpha + q_power) * s.se))


def processes_needed(s: Shift, *, alpha: float, power: float, delta: float,
                     tests: int) -> int | None:
    """Processes per side that would likely turn an INCONCLUSIVE into a decision."""
    if s.spread == 0:
        return None
    limit = math.log1p(delta)
    effect = abs(s.log_ratio)
    z_power = sps.norm.ppf(power)
    if effect > limit:   # decide by significance
        gap, z = effect, sps.norm.ppf(1 - alpha / (2 * max(tests, 1))) + z_power
    else:                # decide by equivalence: the interval must shrink inside ±δ
        gap, z = limit - effect, sps.norm.ppf(1 - alpha / 2)
    if gap <= 1e-12:
        return None
    return max(s.n_base, s.n_now, math.ceil(2 * (z * s.spread / gap) ** 2))


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
