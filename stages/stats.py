"""Statistics of a comparison: pure functions from process-level summaries to verdicts.

The worker process is the unit of replication: a test on pooled iterations calls two runs of
identical code "different" most of the time (DESIGN.md §3). Each metric is reduced to one number
per process, compared on the log scale (so changes are ratios) with Welch's t-test, and a
change is a regression only when it is significant after Benjamini-Hochberg adjustment over the
whole run AND larger than the metric's minimum effect δ.
"""
from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize, special

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
        q = _t_quantile(self.df, 1 - alpha / 2)
        return math.exp(self.log_ratio - q * self.se), math.exp(self.log_ratio + q * self.se)


def shift(base: Sequence[float], now: Sequence[float]) -> Shift | None:
    """Welch's t-test on log values; None when either side has fewer than two processes or a
    value that is not a positive finite number (a time of 0 or inf has no log ratio)."""
    if len(base) < 2 or len(now) < 2 or not all(0 < v < math.inf for v in (*base, *now)):
        return None
    x = [math.log(v) for v in base]
    y = [math.log(v) for v in now]
    n1, n2 = len(x), len(y)
    v1, v2 = _variance(x), _variance(y)
    d = math.fsum(y) / n2 - math.fsum(x) / n1
    se = math.sqrt(v1 / n1 + v2 / n2)
    spread = math.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2))
    if se == 0:
        return Shift(n1, n2, d, 0.0, float(n1 + n2 - 2), 0.0, 1.0 if d == 0 else 0.0)
    df = (v1 / n1 + v2 / n2) ** 2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    p = 2 * special.stdtr(df, -abs(d) / se)
    return Shift(n1, n2, d, se, df, spread, float(p))


def _variance(values: Sequence[float]) -> float:
    """Sample variance (n - 1), two-pass in floats: statistics.variance is exact but slow."""
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


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
    if the process-to-process spread were the one observed (equal on both sides).

    The level is alpha/tests: what Benjamini-Hochberg asks of the smallest p-value when one
    metric among `tests` truly moved. Both conditions of a regression must hold: significance
    and an estimate beyond δ. The power is that of the Welch test as run, whose threshold
    moves with the estimated variances and degrees of freedom; the textbook
    (q_alpha + q_power)·se assumes a fixed threshold and, at 5 processes a side and ~60 tests,
    delivers ~68 % power instead of 80 %.
    """
    if s.se == 0:
        return delta
    return math.expm1(_detectable_log(s.spread, s.n_base, s.n_now, alpha=alpha, power=power,
                                      limit=math.log1p(delta), tests=tests))


def processes_needed(s: Shift, *, alpha: float, power: float, delta: float,
                     tests: int, most: int = 100_000) -> int | None:
    """Processes per side that would decide an INCONCLUSIVE with probability `power`, if the
    observed change and spread were the truth; None when no number up to `most` would (a change
    on the edge of ±δ, or no spread to plan with).

    A change beyond δ is decided by significance (the minimum detectable effect at n processes
    a side reaches it); one within δ by equivalence (the (1 - alpha) interval fits inside ±δ).
    Both use the Welch test's own power at n processes a side, which matters at small n.
    """
    if s.spread == 0:
        return None
    limit = math.log1p(delta)
    effect = abs(s.log_ratio)
    if abs(effect - limit) <= 1e-12:
        return None
    z_power = float(special.ndtri(power))
    if effect > limit:
        z = float(special.ndtri(1 - alpha / (2 * max(tests, 1)))) + z_power
        guess = max((z * s.spread / effect) ** 2, (z_power * s.spread / (effect - limit)) ** 2)

        def decides(n: int) -> bool:
            return _detectable_log(s.spread, n, n, alpha=alpha, power=power, limit=limit,
                                   tests=tests) <= effect
    else:
        z = float(special.ndtri(1 - alpha / 2)) + z_power
        guess = (z * s.spread / (limit - effect)) ** 2

        def decides(n: int) -> bool:
            return _equivalence_power(effect, s.spread, n, alpha=alpha, limit=limit) >= power
    # The normal approximation is only a starting point for the search.
    n = _smallest(decides, start=math.ceil(2 * guess), most=most)
    return None if n is None else max(s.n_base, s.n_now, n)


# ---- the power of the Welch test as run ---------------------------------------------------
#
# With true spread σ on both sides, the estimate is d = θ + se·Z (se = σ·sqrt(1/n1 + 1/n2)) and
# the test rejects when d > q(df^)·se^: both the estimated se^ and the Welch df^ vary from run
# to run. In units of se the threshold is a random ratio R = q(df^)·se^/se whose law depends
# only on (n1, n2, level); it is tabulated once on a grid of variance quantiles.

_GRID = 32


@functools.lru_cache(maxsize=512)
def _critical_ratios(n1: int, n2: int, two_sided_level: float) -> np.ndarray:
    """Equally weighted values of R = q(df^)·se^/se (equal true variances)."""
    u = (np.arange(_GRID) + 0.5) / _GRID
    a = special.chdtri(n1 - 1, u) / (n1 - 1)       # v1/σ² at its quantiles
    b = special.chdtri(n2 - 1, u) / (n2 - 1)
    w1, w2 = np.meshgrid(a / n1, b / n2)
    se2 = w1 + w2
    df = se2 ** 2 / (w1 ** 2 / (n1 - 1) + w2 ** 2 / (n2 - 1))
    q = special.stdtrit(df, 1 - two_sided_level / 2)
    ratios = (q * np.sqrt(se2 / (1 / n1 + 1 / n2))).ravel()
    ratios.sort()
    ratios.flags.writeable = False
    return ratios


def _detectable_log(spread: float, n1: int, n2: int, *, alpha: float, power: float,
                    limit: float, tests: int) -> float:
    """The smallest true log ratio θ that is REGRESSED with probability `power`: significant
    at alpha/tests (two-sided) and estimated beyond `limit`, i.e. Z > max(R, limit/se) - θ/se."""
    se = spread * math.sqrt(1 / n1 + 1 / n2)
    level = alpha / max(tests, 1)
    ratios = _critical_ratios(n1, n2, level)
    floor = limit / se
    if floor >= ratios[-1]:        # δ alone decides
        return limit + float(special.ndtri(power)) * se
    if floor <= ratios[0]:         # significance alone decides: one number per (n1, n2, level)
        return _significance_shift(n1, n2, level, power) * se
    return _shift_for_power(np.maximum(ratios, floor), power) * se


@functools.lru_cache(maxsize=512)
def _significance_shift(n1: int, n2: int, level: float, power: float) -> float:
    return _shift_for_power(_critical_ratios(n1, n2, level), power)


def _shift_for_power(thresholds: np.ndarray, power: float) -> float:
    """c with mean(Φ(c - thresholds)) = power: the shift, in standard errors, that clears a
    random threshold with probability `power`."""
    def shortfall(c: float) -> float:
        return float(np.mean(special.ndtr(c - thresholds))) - power
    z = float(special.ndtri(power))
    return optimize.brentq(shortfall, thresholds[0] + z - 1, thresholds[-1] + z + 1,
                           xtol=1e-6)


def _equivalence_power(effect: float, spread: float, n: int, *, alpha: float,
                       limit: float) -> float:
    """Chance that the (1 - alpha) interval of a true log ratio `effect` lies inside ±limit,
    with n processes a side: |effect + se·Z| + R·se <= limit, R at level alpha."""
    se = spread * math.sqrt(2 / n)
    ratios = _critical_ratios(n, n, alpha)
    high = special.ndtr(limit / se - ratios - effect / se)
    low = special.ndtr(-limit / se + ratios - effect / se)
    return float(np.mean(np.maximum(high - low, 0.0)))


def _smallest(decides, *, start: int, most: int) -> int | None:
    """The smallest n in [2, most] with decides(n), for a decides that is monotone in n:
    gallop from `start` to bracket the answer, then bisect."""
    n = min(max(start, 2), most)
    step = 1
    if decides(n):
        high = n
        while high > 2:
            low = max(high - step, 2)
            if not decides(low):
                break
            high, step = low, 2 * step
        else:
            return 2
    else:
        low = n
        while True:
            if low >= most:
                return None
            high = min(low + step, most)
            if decides(high):
                break
            low, step = high, 2 * step
    while high - low > 1:        # decides(high), not decides(low)
        middle = (low + high) // 2
        low, high = (low, middle) if decides(middle) else (middle, high)
    return high


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
