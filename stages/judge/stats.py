"""Statistics of a comparison: pure functions from process-level summaries to verdicts.

The worker process is the unit of replication: a test on pooled iterations calls two runs of
identical code "different" most of the time (DESIGN.md §3). Each metric is reduced to one number
per process, compared on the log scale (so changes are ratios) with Welch's t-test, and a
change is a regression only when it is significant after Benjamini-Hochberg adjustment over the
whole run AND larger than the metric's minimum effect δ.

In interleaved A/B runs the two arms' processes run in lock-step pairs, taking turns sample
by sample, so the machine's speed at the moment is common to both: there each pair gives one
log ratio and the test is a paired t-test on them (`paired_shift`).

The planning figures printed beside a verdict (minimum detectable effect, processes needed)
are computed for the Welch test as it is run, including the run-to-run wobble of its estimated
variance and degrees of freedom: at 5 processes a side the textbook formula's "80 % power" is
62 %. tests/test_stats_simulation.py measures the resulting error rates.
"""
from __future__ import annotations

import bisect
import functools
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize, special

from stages.core.schema import (EQUIVALENT, FAILED, IMPROVED, INCONCLUSIVE,  # noqa: F401
                                MISSING, NEW, NOT_COMPARABLE, REGRESSED, SKIPPED, VERDICTS)


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
    paired: bool = False  # n_base = n_now pairs; spread is the SD of a pair's log ratio / √2

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    def interval(self, alpha: float) -> tuple[float, float]:
        """The (1 - alpha) confidence interval of the ratio now/base."""
        if self.se == 0:
            return self.ratio, self.ratio
        q = _t_quantile(self.df, 1 - alpha / 2)
        return math.exp(self.log_ratio - q * self.se), math.exp(self.log_ratio + q * self.se)


def shift(base: Sequence[float], now: Sequence[float]) -> Shift | None:
    """Welch's t-test on log values; None when either side has fewer than two processes or a
    value that is not a positive finite number (a time of 0 or inf has no log ratio)."""
    values = (*base, *now)
    if len(base) < 2 or len(now) < 2 or min(values) <= 0 or not math.isfinite(sum(values)):
        return None
    x = [math.log(v) for v in base]
    y = [math.log(v) for v in now]
    n1, n2 = len(x), len(y)
    (m1, ss1), (m2, ss2) = _mean_and_squares(x), _mean_and_squares(y)
    v1, v2 = ss1 / (n1 - 1), ss2 / (n2 - 1)
    d = m2 - m1
    se = math.sqrt(v1 / n1 + v2 / n2)
    spread = math.sqrt((ss1 + ss2) / (n1 + n2 - 2))
    if se == 0:
        return Shift(n1, n2, d, 0.0, float(n1 + n2 - 2), 0.0, 1.0 if d == 0 else 0.0)
    df = (v1 / n1 + v2 / n2) ** 2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    p = 2 * special.stdtr(df, -abs(d) / se)
    return Shift(n1, n2, d, se, df, spread, float(p))


def paired_shift(base: Sequence[float], now: Sequence[float]) -> Shift | None:
    """A paired t-test on log(now_i / base_i), pair i being two processes run in lock-step;
    None with fewer than two pairs or a value that is not positive and finite.

    `spread` is the SD of a pair's log ratio over √2, the per-process spread that would give
    a Welch test the same standard error, so that planning treats both tests alike."""
    values = (*base, *now)
    if len(base) != len(now) or len(base) < 2 or min(values) <= 0 \
            or not math.isfinite(sum(values)):
        return None
    d = [math.log(b) - math.log(a) for a, b in zip(base, now)]
    n = len(d)
    mean, squares = _mean_and_squares(d)
    sd = math.sqrt(squares / (n - 1))
    se = sd / math.sqrt(n)
    if se == 0:
        return Shift(n, n, mean, 0.0, float(n - 1), 0.0, 1.0 if mean == 0 else 0.0, True)
    p = 2 * special.stdtr(n - 1, -abs(mean) / se)
    return Shift(n, n, mean, se, float(n - 1), sd / math.sqrt(2), float(p), True)


def _mean_and_squares(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sum of squared deviations, computed around the first value so that equal
    values give exactly zero spread (a rounding-level spread would give p ~ 1e-60)."""
    first = values[0]
    deviations = [v - first for v in values]
    total = sum(deviations)
    squares = sum(e * e for e in deviations) - total * total / len(values)
    return first + total / len(values), max(squares, 0.0)


def _t_quantile(df: float, q: float) -> float:
    # scipy.special, not scipy.stats: the same numbers, ~50x less overhead per call.
    return float(special.stdtrit(df, q))


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
    """The slowdown that would be REGRESSED with probability `power`, relative (0.05 = 5 %),
    at this cell's process-to-process spread and numbers of processes.

    The level is alpha/tests: what Benjamini-Hochberg asks of the smallest p-value when one
    metric among `tests` truly moved. Both conditions of a regression must hold: significance
    and an estimate beyond δ. The power is that of the Welch test as run (see "the power of
    the Welch test as run" below): the textbook (q_alpha + q_power)·se assumes a fixed
    threshold and, at 5 processes a side and 60 tests, delivers 62 % power instead of 80 %.
    The spread is first made median-unbiased (_planning_spread), so that the reported MDE is
    too small in half of the runs rather than in most.
    """
    if s.se == 0:
        return delta
    limit = math.log1p(delta)
    se = _planning_spread(s) * math.sqrt(1 / s.n_base + 1 / s.n_now)
    shift = _regression_shift(s.n_base, s.n_now, alpha / max(tests, 1), power, limit / se,
                              s.paired)
    return math.expm1(shift * se)


def processes_needed(s: Shift, *, alpha: float, power: float, delta: float,
                     tests: int, most: int = 100_000) -> int | None:
    """Processes per side that would decide an INCONCLUSIVE with probability `power`, if the
    observed change were the truth and the spread its median-unbiased value, rounded up to a
    readable number (_LADDER); None when no number up to `most` would (a change on the edge
    of ±δ, or no spread to plan with).

    A change beyond δ is decided by a regression (or improvement) verdict, one within δ by
    equivalence (the (1 - alpha) interval fits inside ±δ); both with the Welch test's own
    power at n processes a side, which matters at small n.
    """
    if s.spread == 0:
        return None
    limit = math.log1p(delta)
    effect = abs(s.log_ratio)
    if abs(effect - limit) <= 1e-12:
        return None
    spread = _planning_spread(s)
    z_power = float(special.ndtri(power))
    if effect > limit:
        level = alpha / max(tests, 1)
        z = float(special.ndtri(1 - level / 2)) + z_power
        guess = max((z * spread / effect) ** 2, (z_power * spread / (effect - limit)) ** 2)

        def power_at(n: int) -> float:
            se = spread * math.sqrt(2 / n)
            return _regression_power(_critical_ratios(n, n, level, s.paired), effect / se,
                                     limit / se)
    else:
        z = float(special.ndtri(1 - alpha / 2)) + z_power
        guess = (z * spread / (limit - effect)) ** 2

        def power_at(n: int) -> float:
            return _equivalence_power(effect, spread * math.sqrt(2 / n), n, alpha=alpha,
                                      limit=limit, paired=s.paired)
    ladder = _LADDER[:bisect.bisect_right(_LADDER, most)]
    # The normal approximation (n = 2·guess) is a little low; search upward from it.
    found = _first(ladder, lambda n: power_at(n) >= power,
                   start=bisect.bisect_left(ladder, 2 * guess))
    return None if found is None else max(s.n_base, s.n_now, found)


def _first(items: Sequence[int], decides, *, start: int) -> int | None:
    """The first item with decides(item), for a decides that is monotone along `items`:
    gallop from index `start` to bracket it, then bisect."""
    low, high, step = -1, min(start, len(items) - 1), 1
    while not decides(items[high]):                 # gallop up
        if high == len(items) - 1:
            return None
        low, high, step = high, min(high + step, len(items) - 1), 2 * step
    step = 1
    while high - low > 1 and high - step > low and decides(items[high - step]):   # and down
        high, step = high - step, 2 * step
    low = max(low, high - step)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if decides(items[middle]) else (middle, high)
    return items[high]


# Readable process counts: every n up to 20, then steps of at most 25 % (25, 30, 35, ... 90,
# 100, 120, 150, 200, 250, ...).
_LADDER = tuple(sorted({*range(2, 21), *(round(m * 10 ** k) for k in range(1, 6) for m in
                                       (1, 1.2, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9))}))


def _planning_spread(s: Shift) -> float:
    """The pooled spread made median-unbiased: with ν degrees of freedom its square is
    σ²·χ²_ν/ν, whose median is below σ² (by 8 % at 5 + 5 processes)."""
    return s.spread / _median_chi_ratio(s.n_base - 1 if s.paired else s.n_base + s.n_now - 2)


@functools.lru_cache(maxsize=256)
def _median_chi_ratio(df: int) -> float:
    return math.sqrt(float(special.chdtri(df, 0.5)) / df)


# ---- the power of the Welch test as run -----------------------------------------------------
#
# With a true spread σ on both sides and a true log ratio θ, the estimate is
# d = θ + se·Z (se = σ·sqrt(1/n1 + 1/n2), Z standard normal) and the test rejects when
# d > q(df^)·se^, where the estimated se^ and the Welch df^ vary from run to run, independently
# of Z. In units of se the threshold is a random ratio R = q(df^)·se^/se whose law depends only
# on (n1, n2, level): it is tabulated once, on a grid of quantiles of the two sample variances.
# A regression also needs d > log1p(δ), so P(REGRESSED) = P(Z > max(R, log1p(δ)/se) - θ/se).
# The paired test is the same with R = q(n-1)·sqrt(χ²_{n-1}/(n-1)), n pairs.

_GRID = 16


@functools.lru_cache(maxsize=1024)
def _critical_ratios(n1: int, n2: int, two_sided_level: float,
                     paired: bool = False) -> np.ndarray:
    """Equally weighted values of R = q(df^)·se^/se, sorted (equal true variances)."""
    if paired:
        u = (np.arange(_GRID ** 2) + 0.5) / _GRID ** 2
        ratios = (special.stdtrit(n1 - 1, 1 - two_sided_level / 2)
                  * np.sqrt(special.chdtri(n1 - 1, u) / (n1 - 1)))
        ratios = np.sort(ratios)
        ratios.flags.writeable = False
        return ratios
    u = (np.arange(_GRID) + 0.5) / _GRID
    v1 = special.chdtri(n1 - 1, u) / (n1 - 1)       # sample variance / σ², at its quantiles
    v2 = special.chdtri(n2 - 1, u) / (n2 - 1)
    w1, w2 = np.meshgrid(v1 / n1, v2 / n2)
    se2 = w1 + w2
    df = se2 ** 2 / (w1 ** 2 / (n1 - 1) + w2 ** 2 / (n2 - 1))
    ratios = special.stdtrit(df, 1 - two_sided_level / 2) * np.sqrt(se2 / (1 / n1 + 1 / n2))
    ratios = np.sort(ratios.ravel())
    ratios.flags.writeable = False
    return ratios


def _regression_power(ratios: np.ndarray, shift: float, floor: float) -> float:
    """P(Z > max(R, floor) - shift): a true shift (in se) is significant and beyond δ."""
    return float(special.ndtr(shift - np.maximum(ratios, floor)).sum()) / ratios.size


def _regression_shift(n1: int, n2: int, level: float, power: float, floor: float,
                      paired: bool = False) -> float:
    """The true shift, in standard errors, that is REGRESSED with probability `power`."""
    floors, shifts = _shift_table(n1, n2, level, power, paired)
    if floor >= floors[-1]:        # δ alone decides: the threshold never exceeds the floor
        return floor + float(special.ndtri(power))
    return float(np.interp(floor, floors, shifts))    # constant below floors[0]


@functools.lru_cache(maxsize=256)
def _shift_table(n1: int, n2: int, level: float, power: float, paired: bool):
    """_regression_shift on a grid of floors spanning the law of R (smooth in the floor)."""
    ratios = _critical_ratios(n1, n2, level, paired)
    floors = np.linspace(ratios[0], ratios[-1], 65)
    z = float(special.ndtri(power))
    shifts = np.array([optimize.brentq(
        lambda c, f=f: _regression_power(ratios, c, f) - power,
        max(f, ratios[0]) + z - 1, ratios[-1] + z + 1, xtol=1e-7) for f in floors])
    return floors, shifts


def _equivalence_power(effect: float, se: float, n: int, *, alpha: float,
                       limit: float, paired: bool = False) -> float:
    """Chance that the (1 - alpha) interval of a true log ratio `effect` lies inside ±limit,
    with n processes a side: |effect + se·Z| + R·se <= limit, R at level alpha."""
    ratios = _critical_ratios(n, n, alpha, paired)
    inside = (special.ndtr((limit - effect) / se - ratios)
              - special.ndtr(ratios - (limit + effect) / se))
    return float(np.maximum(inside, 0.0).sum()) / ratios.size


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
