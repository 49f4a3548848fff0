"""The regression rules of other benchmark tools, applied to torchgate's raw samples, so that
the self-check can show their error rates on this machine beside torchgate's.

Each rule takes one unit's steady-state samples, base and now, as one tuple per worker
process, and says whether that tool would call the change a regression. asv and pyperf pool
the samples of all their processes into one set per side. Each tool has its own sampling
design (`Design`: worker processes a side and values per process, as it runs by default),
and the self-check gives it that design; each also has a statistic (`score`, larger: more
slower) that its rule thresholds, for a comparison at matched false-alarm rates. Pure.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

from scipy import stats as sps

from torchgate.core.numbers import median
from torchgate.core.records.schema import BenchRecord
from torchgate.core.vocabulary import Status

Samples = Sequence[Sequence[float]]     # one tuple of steady-state samples per process


def unit_samples(record: BenchRecord, workload: str, mode: str) -> list[tuple[float, ...]]:
    """Every successful process's steady-state samples of one unit (no busy-machine rule:
    the other tools have none)."""
    run = record.workloads.get(workload)
    found = []
    for proc in run.processes if run else ():
        m = proc.modes.get(mode) if proc.status == Status.OK else None
        if m is not None and m.status == Status.OK and m.steady_s:
            found.append(m.steady_s)
    return found


def _pooled(processes: Samples) -> list[float]:
    return [s for samples in processes for s in samples]


# ---- TorchBench --------------------------------------------------------------------------
# pytorch/benchmark userbenchmark/test_bench/run.py: a model's latency is numpy.median of the
# latencies timed in one isolated subprocess; regression_detector.py signals a change when
# (treatment - control) / control exceeds DEFAULT_REGRESSION_DELTA_THRESHOLD = 0.07.
# TorchBench measures one process per side (its Design).

TORCHBENCH_THRESHOLD = 0.07


def torchbench(base: Samples, now: Samples) -> bool:
    return torchbench_score(base, now) > TORCHBENCH_THRESHOLD


def torchbench_score(base: Samples, now: Samples) -> float:
    b, n = median(_pooled(base)), median(_pooled(now))
    return (n - b) / b


# ---- asv ---------------------------------------------------------------------------------
# airspeed-velocity/asv asv/commands/compare.py `_is_result_better` and asv/_stats.py
# `is_different`; the value and its interval from asv_runner/statistics.py `compute_stats`.
# A benchmark's samples from all its processes ("rounds") are pooled; its value is their
# median. Worse when now > factor * base and, unless a side has a single sample, the samples
# differ: Mann-Whitney U p < 0.002 when the sample sizes let the test reach that (asv's own
# U, as scipy computes it: exact up to 20 a side, else normal without continuity correction),
# else (few samples) when the 99 % intervals of the medians do not overlap.

ASV_FACTOR = 1.1
ASV_P = 0.002


def asv(base: Samples, now: Samples, factor: float = ASV_FACTOR) -> bool:
    a, b = _pooled(base), _pooled(now)
    if not median(a) < median(b) / factor:
        return False            # decided without the test (the cheaper half of asv's "and")
    if len(a) == 1 or len(b) == 1:
        return True
    return _asv_different([x for x in a if not math.isnan(x)],
                          [x for x in b if not math.isnan(x)])


def asv_score(base: Samples, now: Samples) -> float:
    """The ratio of the pooled medians, which asv's factor thresholds."""
    return median(_pooled(now)) / median(_pooled(base))


def _asv_different(a: list[float], b: list[float]) -> bool:
    if 1 / math.comb(len(a) + len(b), min(len(a), len(b))) < ASV_P:
        exact = max(len(a), len(b)) <= 20
        p = sps.mannwhitneyu(a, b, alternative="two-sided",
                             method="exact" if exact else "asymptotic",
                             use_continuity=False).pvalue
        return bool(p < ASV_P)
    (a0, a1), (b0, b1) = _asv_median_ci(a), _asv_median_ci(b)
    return not (a1 >= b0 and a0 <= b1)


def _asv_median_ci(values: list[float]) -> tuple[float, float]:
    """asv_runner's 99 % interval of the median: order statistics where they reach 99 %
    coverage, else widened by a Laplace posterior for the location."""
    y = sorted(values)
    n = len(y)
    low, high, cdf = -math.inf, math.inf, 0.0
    for k, v in enumerate(y):
        cdf += math.comb(n, k) / 2 ** n
        if cdf <= 0.005:
            low = v
        if cdf >= 0.995:
            high = v
            break
    if (math.isinf(low) or math.isinf(high)) and n > 1:
        if math.isinf(low):
            low = min(_laplace_ppf(y, 0.005), y[0])
        if math.isinf(high):
            high = max(_laplace_ppf(y, 0.995), y[-1])
    return low, high


def _laplace_ppf(y: list[float], q: float) -> float:
    """LaplacePosterior(y).ppf(q) of asv_runner: the posterior of the location under Laplace
    noise, p(beta) ~ (sum |y - beta|) ** -(nu + 1), nu = n - 1, integrated piecewise."""
    n, nu = len(y), len(y) - 1
    mle = median(y)
    scale = sum(abs(v - mle) for v in y) * nu ** (1 / (nu + 1))
    if scale == 0:
        return mle
    y = [(v - mle) / scale for v in y]

    def piece(k):       # on (y[k-1], y[k]): sum |y - beta| = c * beta + s
        return 2 * k - n, sum(y[k:]) - sum(y[:k])

    below = []          # the unnormalised integral up to y[k]; below[n]: the whole
    total = 0.0
    for k in range(n + 1):
        c, s = piece(k)
        a = -math.inf if k == 0 else y[k - 1]
        b = math.inf if k == n else y[k]
        term = ((b - a) / s ** (nu + 1) if c == 0 else
                1 / (nu * c) * ((a * c + s) ** (-nu) - (b * c + s) ** (-nu)))
        total += max(0.0, term)
        below.append(total)
    target = min(q * total, total)
    k = next(k for k in range(n + 1) if target <= below[k])
    c, s = piece(k)
    if k == 0:
        z = -nu * c * target
        beta = (z ** (-1 / nu) - s) / c if z > 0 else -math.inf
    elif c == 0:
        beta = y[k - 1] + (target - below[k - 1]) * s ** (nu + 1)
    else:
        z = (y[k - 1] * c + s) ** (-nu) - nu * c * (target - below[k - 1])
        beta = (z ** (-1 / nu) - s) / c if z > 0 else math.inf
    if k < n:
        beta = min(beta, y[k])
    return beta * scale + mle


# ---- pyperf ------------------------------------------------------------------------------
# psf/pyperf pyperf/_compare.py `is_significant_benchs` and `CompareResult`, with
# pyperf/_utils.py `is_significant`: Student's two-sample t-test (pooled variance) on all
# values of all processes, against pyperf's table of 95 % two-sided critical values.
# compare_to prints "Not significant!" unless |t| reaches it, else "N.NNx slower" when the
# mean grew. Its own quirks are kept: one value a side, unequal numbers of values or a zero
# variance count as significant (its t-score raises, and the error is read as significant).

_T95 = (0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
        2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
        2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def _t95(df: float) -> float:
    """pyperf's tdist95conf_level."""
    df = int(round(df))
    for floor, value in ((200, 1.960), (100, 1.984), (80, 1.990), (60, 2.000),
                         (50, 2.009), (40, 2.021)):
        if df >= floor:
            return value
    return _T95[min(df, len(_T95) - 1)]


def pyperf(base: Samples, now: Samples) -> bool:
    a, b = _pooled(base), _pooled(now)
    return statistics.fmean(b) > statistics.fmean(a) and _pyperf_significant(a, b)


def pyperf_score(base: Samples, now: Samples) -> float:
    """Student's t of the pooled values (mean now over mean base; Welch's standard error for
    unequal sizes), which pyperf thresholds at its 95 % table."""
    a, b = _pooled(base), _pooled(now)
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va = math.fsum((x - ma) ** 2 for x in a) / max(len(a) - 1, 1)
    vb = math.fsum((x - mb) ** 2 for x in b) / max(len(b) - 1, 1)
    se = math.sqrt(va / len(a) + vb / len(b))
    return (mb - ma) / se if se > 0 else math.copysign(math.inf, mb - ma) if mb != ma else 0.0


def _pyperf_significant(a: list[float], b: list[float]) -> bool:
    if len(a) != len(b) or len(a) == 1:
        return True
    # pyperf's tscore: Student's t with the pooled variance (scipy's ttest_ind with
    # equal_var, for equal sizes), in plain Python as pyperf has it; far cheaper than scipy's
    # call, which the self-check would make thousands of times.
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    pooled = (math.fsum((x - ma) ** 2 for x in a) + math.fsum((x - mb) ** 2 for x in b)) \
        / (len(a) + len(b) - 2)
    if pooled == 0:
        return True
    return abs(ma - mb) / math.sqrt(2 * pooled / len(a)) >= _t95(len(a) + len(b) - 2)


# ---- the table ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Design:
    """How a tool samples a benchmark by default: worker processes a side, values kept per
    process (None: every sample the process took)."""
    processes: int
    values: int | None = None

    def take(self, processes: Samples) -> list[tuple[float, ...]]:
        """This design's share of one side: its first `processes`, their first `values`."""
        return [tuple(p[:self.values]) for p in processes[:self.processes]]

    def text(self) -> str:
        per = "every sample" if self.values is None else f"{self.values} values"
        return f"{self.processes} process{'es' * (self.processes > 1)} × {per}"


@dataclass(frozen=True)
class PeerRule:
    name: str
    description: str
    regressed: Callable[[Samples, Samples], bool]
    score: Callable[[Samples, Samples], float]
    design: Design


RULES = (
    # test_bench runs a model in one subprocess and takes the median of its iterations.
    PeerRule("TorchBench", f"median of the samples more than {TORCHBENCH_THRESHOLD * 100:g} % "
         "slower", torchbench, torchbench_score, Design(1)),
    # asv's defaults for a timing benchmark: 2 rounds (processes), and with more than one
    # round repeat = (1, 5, 10.0): at most 5 samples a round.
    PeerRule("asv compare", f"median more than {ASV_FACTOR:g}× slower and Mann–Whitney U "
         f"p < {ASV_P} on the samples", asv, asv_score, Design(2, 5)),
    # pyperf's defaults: 20 worker processes, 3 values each (after a warm-up value).
    PeerRule("pyperf compare_to", "Student's t-test on all samples significant at 95 %, and the "
         "mean slower", pyperf, pyperf_score, Design(20, 3)),
)
