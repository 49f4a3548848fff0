"""Statistics of a comparison: pure functions from process-level summaries to verdicts.

The worker process is the unit of replication: a test on pooled iterations calls two runs of
identical code "different" most of the time. Each metric is reduced to one number per
process, compared on the log scale (so changes are ratios) with Welch's t-test, and a change
is a regression only when it is significant after Holm's step-down adjustment over the whole
run (the family-wise error rate: no unit that did not change is REGRESSED in more than α of
runs, however many others truly moved) AND its estimate is beyond the metric's minimum
effect δ.

In interleaved A/B runs the two arms' processes run in lock-step pairs, taking turns sample
by sample, so the machine's speed at the moment is common to both: there each pair gives one
log ratio and the test is a paired t-test on them (`paired_shift`), trimmed from 8 pairs on
(12 where a pair's processes share their cores, and slow pairs are rarer):
a process now and then runs 25-40 % slower for a stretch of samples or its whole life
while its partner, sampled in turn with it, does not, and one such pair of 8 took a +10 %
slowdown from REGRESSED to INCONCLUSIVE.

A test's variance is a sum of `Part`s: the sides' process variances (moderated across the
run's units in judge.moderation) and, against a recorded baseline, the variance of a run's
offset, which no number of processes shrinks (`with_parts`, Satterthwaite's degrees of
freedom). The planning figures printed beside a verdict (minimum detectable effect, processes
needed) are computed for the test as it is run, including the run-to-run wobble of its
estimated variances and degrees of freedom: at 5 processes a side the textbook formula's
"80 % power" is 62 %. tests/test_stats_simulation.py and tests/test_stats_run_level.py
measure the resulting error rates.
"""
from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize, special

from torchgate.core.vocabulary import Verdict


@dataclass(frozen=True)
class Part:
    """One source of a change's variance, on the log scale.

    side "base", "now" or "pair": a variance per process (per lock-step pair), divided by that
    side's number of processes; its estimate has n - 1 degrees of freedom plus `df`, the prior
    degrees of freedom variance moderation lends it. side "run": the variance of one run's
    offset (day, host, thermal state), which more processes do not shrink; `df` is then the
    estimate's own degrees of freedom (inf: a configured prior, taken as known). `trim_from`:
    the pair part of `paired_shift`'s test, trimmed from that many pairs on (0: never), whose
    own degrees of freedom at n pairs are `trimmed_df(n, trim_from)` (`own_df`), so that
    planning at another number of pairs plans the test that would run there."""
    side: str
    variance: float
    df: float = 0.0
    trim_from: int = 0


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
    trimmed: int = 0      # pairs left out at each end by the trimmed paired test
    parts: tuple[Part, ...] = ()   # what se is made of; () = equal variances from `spread`

    @property
    def ratio(self) -> float:
        return exp(self.log_ratio)

    def log_interval(self, alpha: float) -> tuple[float, float]:
        """The (1 - alpha) confidence interval of log(now/base)."""
        if self.se == 0:
            return self.log_ratio, self.log_ratio
        q = _t_quantile(self.df, 1 - alpha / 2)
        if not math.isfinite(q):    # a level beyond the quantile's reach: nothing bounded
            return -math.inf, math.inf
        return self.log_ratio - q * self.se, self.log_ratio + q * self.se

    def interval(self, alpha: float) -> tuple[float, float]:
        """The (1 - alpha) confidence interval of the ratio now/base (0 and inf included:
        two wild pairs at a Holm level of a long run bound nothing)."""
        low, high = self.log_interval(alpha)
        return exp(low), exp(high)

    @property
    def variance_parts(self) -> tuple[Part, ...]:
        if self.parts:
            return self.parts
        if self.paired:
            return (Part("pair", 2 * self.spread ** 2),)
        return Part("base", self.spread ** 2), Part("now", self.spread ** 2)


def exp(x: float) -> float:
    """math.exp that saturates: inf beyond the largest float, never OverflowError."""
    return math.inf if x >= 709.0 else math.exp(x)


def expm1(x: float) -> float:
    """math.expm1 that saturates as exp does; NaN stays NaN."""
    return math.inf if x >= 709.0 else math.expm1(x)


def shift(base: Sequence[float], now: Sequence[float]) -> Shift | None:
    """Welch's t-test on log values; None when either side has fewer than two processes or a
    value that is not a positive finite number (a time of 0 or inf has no log ratio)."""
    values = (*base, *now)
    if len(base) < 2 or len(now) < 2 or min(values) <= 0 or not math.isfinite(sum(values)):
        return None
    x = [math.log(v) for v in base]
    y = [math.log(v) for v in now]
    n1, n2 = len(x), len(y)
    (m1, ss1), (m2, ss2) = mean_and_squares(x), mean_and_squares(y)
    spread = math.sqrt((ss1 + ss2) / (n1 + n2 - 2))
    return with_parts(n1, n2, m2 - m1, spread, (Part("base", ss1 / (n1 - 1)),
                                                Part("now", ss2 / (n2 - 1))))


def paired_shift(base: Sequence[float], now: Sequence[float],
                 pinned: bool = False) -> Shift | None:
    """A paired test on log(now_i / base_i), pair i being two processes run in lock-step;
    None with fewer than two pairs or a value that is not positive and finite. `pinned`: each
    pair's two processes ran on the same cores (bench.pin_pairs).

    From 8 pairs on (12 pinned: `trim_from`) it is Yuen's trimmed test: the g = n // 8 highest and lowest log ratios
    are left out of the mean and winsorized in its variance (Yuen 1974; Wilcox, "Introduction
    to Robust Estimation", 5.9.5). A pair with one process in a slow state (25-40 %, about 3
    pairs in 100 on a 2-core VM) then moves the estimate by nothing instead of by 1/n of its
    offset, and its variance by little instead of most: at 8 pairs of 2 % spread a +10 %
    slowdown with one such pair was REGRESSED in 3 % of simulated runs by the t-test and in
    98 % trimmed (at a PR check's first Holm level), without one in 100 % and 99.8 %. Its
    price is on noisy units without a slow state: at 8 pairs of 3 % spread 91 % against
    100 %. Below 8 pairs trimming leaves too few (at 5, 3 pairs: 43 % against 99.8 %): the
    plain paired t-test. Yuen's own h - 1 degrees of freedom (h = n - 2g pairs kept) make
    too many false alarms in the tails a run's many tests need (1.2-1.45x the nominal rate
    at p = 0.001 for 8-24 pairs); `trimmed_df` is calibrated there
    (tests/test_stats_trimmed.py). Trimming pays where slow pairs are common enough to
    outweigh what it costs every run: pinned, a slow pair is 1 in 400 and at 8-10 pairs the
    plain test has more power, averaged over 1-3 % spreads and levels 0.05 to 0.05/66 (at 8
    pairs of 3 % spread and 0.05/66, 0.68 against 0.30); from 12 pairs trimming matches it
    or wins. Unpinned (3 in 100) it wins from 8 (tests/test_stats_trimmed.py).

    `spread` is the SD of a pair's log ratio over √2 (for the trimmed test, the one whose
    plain paired test would have the same standard error), the per-process spread that would
    give a Welch test the same standard error, so that planning treats both tests alike."""
    values = (*base, *now)
    if len(base) != len(now) or len(base) < 2 or min(values) <= 0 \
            or not math.isfinite(sum(values)):
        return None
    d = [math.log(b) - math.log(a) for a, b in zip(base, now)]
    n, first = len(d), trim_from(pinned)
    g = trimmed_pairs(n, first)
    if g == 0:
        mean, squares = mean_and_squares(d)
        variance = squares / (n - 1)
    else:
        d.sort()
        kept = n - 2 * g
        mean = mean_and_squares(d[g:n - g])[0]
        winsorized = [d[g]] * g + d[g:n - g] + [d[n - g - 1]] * g
        # n·se², se² being Yuen's (n - 1)·s_w² / (h·(h - 1)): a per-pair variance, as the
        # plain test's, that planning divides by another number of pairs.
        variance = n * mean_and_squares(winsorized)[1] / (kept * (kept - 1))
    return with_parts(n, n, mean, math.sqrt(variance / 2),
                      (Part("pair", variance, trim_from=first),), paired=True)


TRIM_FROM = 8            # pairs: from here the trimmed test leaves out one at each end per 8
TRIM_FROM_PINNED = 12    # where pairs are pinned to their cores and slow pairs are rare


def trim_from(pinned: bool) -> int:
    return TRIM_FROM_PINNED if pinned else TRIM_FROM


def trimmed_pairs(n: int, first: int = TRIM_FROM) -> int:
    """Pairs the trimmed paired test leaves out at each end of n, trimming from `first`."""
    return n // 8 if n >= first else 0


def trimmed_df(n: int, first: int = TRIM_FROM) -> float:
    """Degrees of freedom of the trimmed paired test at n pairs: h - 1 - g/2 (h = n - 2g
    kept), with which its two-sided false alarms stay within 0.85-1.1x nominal from 8 to
    60 pairs at levels 0.05 to 0.0003 (simulated, normal pairs); Yuen's h - 1 alone gives
    1.2-1.45x at 0.001. Below `first` the plain test's n - 1."""
    g = trimmed_pairs(n, first)
    return n - 2 * g - 1 - g / 2


def with_parts(n_base: int, n_now: int, log_ratio: float, spread: float,
               parts: tuple[Part, ...], paired: bool = False) -> Shift:
    """The t-test of `log_ratio` whose variance is the sum of `parts`, with Satterthwaite's
    degrees of freedom (Welch's when the parts are the two sides' sample variances)."""
    trimmed = max((trimmed_pairs(n_base, p.trim_from) for p in parts if p.trim_from),
                  default=0)
    se2, df = _se2_and_df(_terms(parts, n_base, n_now))
    se = math.sqrt(se2)
    if se == 0:
        return Shift(n_base, n_now, log_ratio, 0.0, df, spread,
                     1.0 if log_ratio == 0 else 0.0, paired, trimmed, parts)
    p = 2 * special.stdtr(df, -abs(log_ratio) / se)
    return Shift(n_base, n_now, log_ratio, se, df, spread, float(p), paired, trimmed, parts)


def _terms(parts: Sequence[Part], n_base: int, n_now: int) -> list[tuple[float, float]]:
    """(contribution to se², its degrees of freedom) of each part at these numbers."""
    terms = []
    for part in parts:
        if part.side == "run":
            terms.append((part.variance, part.df))
        else:
            n = n_now if part.side == "now" else n_base
            terms.append((part.variance / n, own_df(part, n) + part.df))
    return terms


def own_df(part: Part, n: int) -> float:
    """The degrees of freedom of a process part's own estimate at n processes (pairs)."""
    return trimmed_df(n, part.trim_from) if part.trim_from else n - 1


def _se2_and_df(terms: Sequence[tuple[float, float]]) -> tuple[float, float]:
    se2 = sum(t for t, _ in terms)
    denominator = sum(t * t / df for t, df in terms if t > 0 and math.isfinite(df))
    if se2 == 0:
        return 0.0, float(sum(df for _, df in terms if math.isfinite(df)) or math.inf)
    return se2, (se2 * se2 / denominator if denominator > 0 else math.inf)


def mean_and_squares(values: Sequence[float]) -> tuple[float, float]:
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


def verdict(s: Shift, p_adjusted: float, *, alpha: float, delta: float,
            equivalence_alpha: float | None = None) -> str:
    """REGRESSED/IMPROVED: significant at alpha after adjustment and beyond ±δ; EQUIVALENT:
    both one-sided tests of the equivalence (TOST) at equivalence_alpha (default alpha)
    reject, i.e. the (1 - 2·equivalence_alpha) interval lies inside ±δ; INCONCLUSIVE
    otherwise."""
    limit = math.log1p(delta)
    if p_adjusted <= alpha and s.log_ratio > limit:
        return Verdict.REGRESSED
    if p_adjusted <= alpha and s.log_ratio < -limit:
        return Verdict.IMPROVED
    low, high = s.log_interval(2 * (alpha if equivalence_alpha is None else equivalence_alpha))
    if low >= -limit and high <= limit:
        return Verdict.EQUIVALENT
    return Verdict.INCONCLUSIVE


def decided_interval(s: Shift, verdict_: str, alpha: float) -> tuple[float, float, float]:
    """(low, high, confidence) of the interval a verdict was decided on: the two-sided test's
    (1 - alpha) interval for a significant change, the equivalence test's (1 - 2·alpha) one
    otherwise, so that an interval shown inside ±δ is always EQUIVALENT."""
    level = alpha if verdict_ in (Verdict.REGRESSED, Verdict.IMPROVED) else 2 * alpha
    return (*s.interval(level), 1 - level)


def minimum_detectable_effect(s: Shift, *, alpha: float, power: float, delta: float,
                              tests: int) -> float:
    """The slowdown that would be REGRESSED with probability `power`, relative (0.05 = 5 %),
    at this unit's variances and numbers of processes.

    The level is alpha/tests: what Holm's step-down asks of the smallest p-value when one
    metric among `tests` truly moved (so does Benjamini-Hochberg). Both conditions of a
    regression must hold: significance and an estimate beyond δ. The power is that of the
    t-test as run (see "the power of the t-test as run" below): the textbook
    (q_alpha + q_power)·se assumes a fixed threshold and, at 5 processes a side and 60 tests,
    delivers 62 % power instead of 80 %. The variances
    are first made median-unbiased (_planned), so that the reported MDE is too small in half
    of the runs rather than in most.
    """
    if s.se == 0:
        return delta
    limit = math.log1p(delta)
    terms = _terms(_planned(s), s.n_base, s.n_now)
    se = math.sqrt(_se2_and_df(terms)[0])
    shift = _regression_shift(_law(terms), alpha / max(tests, 1), power, limit / se)
    mde = expm1(shift * se)
    return mde if mde == mde else math.inf      # NaN: no test at this level detects any


def processes_needed(s: Shift, *, alpha: float, power: float, delta: float,
                     tests: int, most: int = 100_000) -> int | None:
    """Processes per side that would decide an INCONCLUSIVE with probability `power`, if the
    observed change were the truth and the variances their median-unbiased values, rounded
    up to a readable number (_LADDER); None when no number up to `most` would (a change on
    the edge of ±δ, no spread to plan with, or a run-level variance that more processes
    cannot shrink).

    A change beyond δ is decided by a regression (or improvement) verdict, one within δ by
    equivalence (the (1 - 2·alpha) interval fits inside ±δ); both with the t-test's own power
    at n processes a side, which matters at small n.
    """
    if s.spread == 0:
        return None
    limit = math.log1p(delta)
    effect = abs(s.log_ratio)
    if abs(effect - limit) <= 1e-12:
        return None
    parts = _planned(s)
    z_power = float(special.ndtri(power))
    process_var = sum(p.variance for p in parts if p.side != "run") / 2   # spread²
    if effect > limit:
        level = alpha / max(tests, 1)
        z = float(special.ndtri(1 - level / 2)) + z_power
        guess = max(z * z * process_var / effect ** 2,
                    z_power ** 2 * process_var / (effect - limit) ** 2)

        def power_at(n: int) -> float:
            terms = _terms(parts, n, n)
            se = math.sqrt(_se2_and_df(terms)[0])
            return _regression_power(_critical_ratios(*_law(terms), level), effect / se,
                                     limit / se)
    else:
        z = float(special.ndtri(1 - alpha)) + z_power
        guess = z * z * process_var / (limit - effect) ** 2

        def power_at(n: int) -> float:
            terms = _terms(parts, n, n)
            se = math.sqrt(_se2_and_df(terms)[0])
            return _equivalence_power(effect, se, _law(terms), alpha=alpha, limit=limit)
    ladder = _LADDER[:bisect.bisect_right(_LADDER, most)]
    # The normal approximation (n = 2·guess) is a little low; search upward from it.
    found = _first(ladder, lambda n: power_at(n) >= power,
                   start=bisect.bisect_left(ladder, 2 * guess))
    return None if found is None else max(s.n_base, s.n_now, found)


def processes_to_catch(s: Shift, effect: float, *, alpha: float, power: float, delta: float,
                       tests: int, most: int = 1000) -> int | None:
    """Processes per side at which a true slowdown `effect` (0.10 = 10 %) is REGRESSED with
    probability `power`, at the shift's per-process variances (a run-level part stays as it
    is: more processes do not shrink it); None when none up to `most` would (an effect
    within δ is never REGRESSED, and a run-level variance bounds what processes can do)."""
    if effect <= delta or not s.variance_parts:
        return None

    def catches(n: int) -> bool:
        at_n = with_parts(n, n, s.log_ratio, s.spread, s.variance_parts, s.paired)
        return minimum_detectable_effect(at_n, alpha=alpha, power=power, delta=delta,
                                         tests=tests) <= effect
    return _first(_LADDER[:bisect.bisect_right(_LADDER, most)], catches, start=0)


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


def _planned(s: Shift) -> tuple[Part, ...]:
    """The variance parts planning assumes: the two sides' process variances pooled (the
    same code on the same machine: one true variance), then made median-unbiased. An
    estimate with ν degrees of freedom is σ²·χ²_ν/ν, whose median is below σ² (by 8 % at
    5 + 5 processes); the process parts are unbiased together, a run part on its own."""
    parts = s.variance_parts
    dfs = [_terms([p], s.n_base, s.n_now)[0][1] for p in parts]
    sides = [(p, df) for p, df in zip(parts, dfs) if p.side in ("base", "now")]
    if len(sides) == 2 and sum(df for _, df in sides) > 0:
        pooled = sum(p.variance * df for p, df in sides) / sum(df for _, df in sides)
        parts = tuple(dataclasses.replace(p, variance=pooled) if p.side in ("base", "now") else p
                      for p in parts)
    process_df = sum(df for p, df in zip(parts, dfs) if p.side != "run")
    planned = []
    for p in parts:
        df = p.df if p.side == "run" else process_df
        scale = _median_chi_ratio(round(df)) ** 2 if math.isfinite(df) and df >= 1 else 1.0
        planned.append(dataclasses.replace(p, variance=p.variance / scale))
    return tuple(planned)


@functools.lru_cache(maxsize=256)
def _median_chi_ratio(df: int) -> float:
    return math.sqrt(float(special.chdtri(df, 0.5)) / df)


# ---- the power of the t-test as run ---------------------------------------------------------
#
# With true variance parts whose shares of se² are π_i and a true log ratio θ, the estimate is
# d = θ + se·Z (Z standard normal) and the test rejects when d > q(df^)·se^, where each part's
# estimate is π_i·X_i·se² with X_i ~ χ²_ν/ν (ν its degrees of freedom; 1 for a known prior),
# independent of Z, and df^ is Satterthwaite's. In units of se the threshold is a random ratio
# R = q(df^)·sqrt(Σ π_i X_i) whose law depends only on the shares, the ν and the level: it is
# tabulated on a grid of quantiles of the X_i. A regression also needs d > log1p(δ), so
# P(REGRESSED) = P(Z > max(R, log1p(δ)/se) - θ/se). Welch's test is two parts (1/n1 : 1/n2 at
# equal variances), the paired test one, a recorded baseline's run-level variance one more.
# The df^ must vary as in the test: at the levels a run's many tests need, q(4) is 1.7 q(8),
# and a single "effective" ν would promise 80 % power where the test has 68 %.

_GRID = {1: 256, 2: 16, 3: 12}     # quantiles per estimated part, by the number of parts


def _law(terms: Sequence[tuple[float, float]]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(shares of se², degrees of freedom) of the terms, rounded so that the tables cache."""
    se2 = sum(t for t, _ in terms)
    kept = [(t / se2, df) for t, df in terms if t > 0] if se2 > 0 else [(1.0, math.inf)]
    return (tuple(round(share, 2) for share, _ in kept),
            tuple(df if not math.isfinite(df) or df < 2 else
                  math.inf if df > 1000 else round(df * 2) / 2 for _, df in kept))


@functools.lru_cache(maxsize=4096)
def _critical_ratios(shares: tuple[float, ...], dfs: tuple[float, ...],
                     two_sided_level: float) -> np.ndarray:
    """Equally weighted values of R = q(df^)·sqrt(Σ π_i X_i), sorted."""
    random_parts = [i for i, df in enumerate(dfs) if math.isfinite(df)]
    if not random_parts:
        return np.array([float(special.ndtri(1 - two_sided_level / 2)) * math.sqrt(sum(shares))])
    size = _GRID.get(len(random_parts), 8)
    u = (np.arange(size) + 0.5) / size
    grids = np.meshgrid(*[special.chdtri(dfs[i], u) / dfs[i] for i in random_parts],
                        indexing="ij")
    estimate = sum(shares[i] for i, df in enumerate(dfs) if not math.isfinite(df)) \
        + sum(shares[i] * g for i, g in zip(random_parts, grids))
    denominator = sum((shares[i] * g) ** 2 / dfs[i] for i, g in zip(random_parts, grids))
    with np.errstate(divide="ignore"):      # parts whose share rounds to 0 add nothing
        df = np.where(np.asarray(denominator) > 0, estimate ** 2 / denominator, np.inf)
    ratios = special.stdtrit(df, 1 - two_sided_level / 2) * np.sqrt(estimate)
    ratios = np.sort(ratios.ravel())
    ratios.flags.writeable = False
    return ratios


def _regression_power(ratios: np.ndarray, shift: float, floor: float) -> float:
    """P(Z > max(R, floor) - shift): a true shift (in se) is significant and beyond δ."""
    return float(special.ndtr(shift - np.maximum(ratios, floor)).sum()) / ratios.size


def _regression_shift(law: tuple, level: float, power: float, floor: float) -> float:
    """The true shift, in standard errors, that is REGRESSED with probability `power`."""
    ratios = _critical_ratios(*law, level)
    z = float(special.ndtri(power))
    if floor >= ratios[-1]:        # δ alone decides: the threshold never exceeds the floor
        return floor + z
    return optimize.brentq(lambda c: _regression_power(ratios, c, floor) - power,
                           max(floor, ratios[0]) + z - 1, ratios[-1] + z + 1, xtol=1e-7)


def _equivalence_power(effect: float, se: float, law: tuple, *, alpha: float,
                       limit: float) -> float:
    """Chance that the (1 - 2·alpha) interval of a true log ratio `effect` lies inside ±limit:
    |effect + se·Z| + R·se <= limit, R at two-sided level 2·alpha."""
    ratios = _critical_ratios(*law, 2 * alpha)
    inside = (special.ndtr((limit - effect) / se - ratios)
              - special.ndtr(ratios - (limit + effect) / se))
    return float(np.maximum(inside, 0.0).sum()) / ratios.size


# ---- multiplicity ------------------------------------------------------------
# Adjusting a run's p-values for the number of tests. Pure.
#
# A run tests every timing of every cell together; its verdicts that gate (REGRESSED /
# IMPROVED) are decided on Holm's step-down adjustment, which controls the family-wise error
# rate (`holm_adjust` says why not Benjamini-Hochberg's false discovery rate).

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
