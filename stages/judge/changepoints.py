"""Where a lasting shift began in a series of runs: change-point detection. Pure.

The method is Apache Otava's (formerly Hunter: Fleming et al., "Hunter: Using Change Point
Detection to Hunt for Performance Regressions", ICPE 2023, doi:10.1145/3578244.3583719),
which refines MongoDB's (Daly et al., ICPE 2020):

1. **Split.** Within sliding windows of `window` points (half a window apart), E-divisive
   means (Matteson & James 2014, doi:10.1080/01621459.2013.849605) proposes the split that
   maximizes the energy distance between the points before it and those after; a two-sample
   t-test of the two sides keeps it at a lenient level (10 × `max_pvalue`), and the window is
   split again until a proposal fails. These are the "weak" change points.
2. **Merge.** Every weak point is tested against its neighbours' segments; the weakest (the
   largest p-value, or, when all pass, the smallest change) is removed and its neighbours
   tested again, until every remaining point is significant at `max_pvalue` and its change
   exceeds `min_change`.

It is written here on numpy and scipy, following Otava's source (`otava/analysis.py`,
`otava/change_point_divisive/`), because the `apache-otava` package pins numpy, scipy and
ruamel.yaml below what this project runs with and pulls in cloud and chat clients. The
departures suit a short, noisy history of runs, and each was needed in simulation
(tests/test_history.py; AR(1) noise of 2 %, ρ = 0.3):

- The series is the log of the values: a shift is a ratio, the same up as down.
- A single outlying run (a noisy neighbour, a cold cache) is a spike, not a shift: Hampel's
  identifier replaces a run more than 5 robust SDs from the median of the 7 runs around it by
  that median, and a point that leaves fewer than `min_points` runs on either side is removed
  first in the merge. So the newest `min_points - 1` runs cannot start a shift yet. (Otava's
  proposals isolate a spike, and a failed proposal ends its window's search.)
- The p-value is honest about the search. The t-test's p of the best split of a segment is
  not the p of one planned split: on series without a step, Otava's test at 0.001 put a
  change point in 13 % of 200-point series once their spike was removed. Each p is multiplied
  by the number of splits it was chosen from (Bonferroni), and the t-test allows for serial
  correlation: runs measured close together share machine state, so the lag-1 autocorrelation
  ρ of the residuals about the current segments' means (clipped to [0, 0.8]) shrinks each
  side's sample size to its effective size n(1 − ρ)/(1 + ρ). The lenient split step keeps
  Otava's plain test (ρ = 0). On a short series ρ̂ is biased low, E[ρ̂] ≈ ρ − (1 + 3ρ)/n
  (Marriott & Pope 1954, Kendall 1954): at 12 runs a true 0.3 reads 0.14. It is corrected,
  ρ̃ = (n·ρ̂ + 1)/(n − 3), before the clip (issue 22): simulated at ρ = 0.5, series with a
  false shift 2.0 → 1.7 % at 12 runs and 3.3 → 2.3 % at 20, at a price in power for a 10 %
  step (0.62 → 0.46, 0.66 → 0.52; tests/test_history_chance.py). What keeps false shifts
  rare is `min_change` (by default the metric's δ): at 5 % they fell to 0-0.3 %, the power
  unchanged.
- Each point that survives is placed, between its neighbours, at the split that best
  separates the two sides' means (least squares): a window's proposal is placed by the
  window's points alone.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from torchgate.judge.results import LastingShift
from torchgate.judge.stats import exp as saturating_exp

WINDOW = 50
MAX_PVALUE = 0.001
MIN_POINTS = 3
MAX_RHO = 0.8
SPIKE_HALF = 3      # Hampel's window: the 3 runs on each side
SPIKE_K = 5.0       # and how many scaled MADs from their median make a spike


def _energy_split(x: np.ndarray) -> tuple[int, float]:
    """(τ, q̂): E-divisive means' proposal within x, the split x[:τ] | x[τ:κ] that maximizes
    q̂(X, Y) = 2/(n+m) Σ|X−Y| − 2m/((n+m)(n−1)) Σ_{i<k}|Xi−Xk| − 2n/((n+m)(m−1)) Σ_{j<l}|Yj−Yl|
    over 0 < τ < κ ≤ len(x) (n = τ, m = κ − τ; a sum over fewer than two points is 0)."""
    size = len(x)
    dist = np.abs(x[:, None] - x[None, :])
    pre = np.zeros((size + 1, size + 1))
    pre[1:, 1:] = dist.cumsum(0).cumsum(1)

    def rect(r0, r1, c0, c1):
        return pre[r1, c1] - pre[r0, c1] - pre[r1, c0] + pre[r0, c0]

    tau, kappa = np.meshgrid(np.arange(1, size + 1), np.arange(1, size + 1), indexing="ij")
    valid = tau < kappa
    tau, kappa = tau[valid], kappa[valid]
    n, m = tau.astype(float), (kappa - tau).astype(float)
    between = rect(0, tau, tau, kappa)
    within_x = rect(0, tau, 0, tau) / 2
    within_y = rect(tau, kappa, tau, kappa) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (2 / (n + m) * between
             - np.where(n > 1, 2 * m / ((n + m) * (n - 1)) * within_x, 0.0)
             - np.where(m > 1, 2 * n / ((n + m) * (m - 1)) * within_y, 0.0))
    best = int(np.argmax(q))   # the first of equals, tau-major, as Otava's argmax
    return int(tau[best]), float(q[best])


def _segments(x_len: int, points: list[int]) -> list[tuple[int, int]]:
    edges = [0, *points, x_len]
    return [(a, b) for a, b in zip(edges, edges[1:]) if a < b]


def _rho(x: np.ndarray, points: list[int]) -> float:
    """Lag-1 autocorrelation of the residuals about the segments' means, within segments."""
    resid = np.empty_like(x)
    for a, b in _segments(len(x), points):
        resid[a:b] = x[a:b] - x[a:b].mean()
    pairs = [(resid[i], resid[i + 1]) for a, b in _segments(len(x), points)
             for i in range(a, b - 1)]
    denom = float(np.sum(resid ** 2))
    if len(pairs) < 3 or denom <= 0:
        return 0.0
    n = len(x)
    rho = (n * sum(p * q for p, q in pairs) / denom + 1) / (n - 3)   # Marriott-Pope
    return float(min(MAX_RHO, max(0.0, rho)))


def noise(values, points: list[int]) -> tuple[float, float]:
    """(SD, lag-1 autocorrelation) of a series' log values about its segments' means."""
    x = np.log(np.asarray(values, dtype=float))
    resid = np.concatenate([x[a:b] - x[a:b].mean() for a, b in _segments(len(x), points)])
    dof = max(1, len(x) - len(points) - 1)
    return math.sqrt(float(resid @ resid) / dof), _rho(x, points)


def _ttest(left: np.ndarray, right: np.ndarray, rho: float) -> float:
    """Two-sided p of Student's two-sample t-test on effective sample sizes."""
    n1, n2 = len(left), len(right)
    if n1 + n2 <= 2:
        return 1.0
    shrink = (1 - rho) / (1 + rho)
    e1, e2 = max(1.0, n1 * shrink), max(1.0, n2 * shrink)
    ss = float(np.sum((left - left.mean()) ** 2) + np.sum((right - right.mean()) ** 2))
    dof = max(1.0, e1 + e2 - 2)
    var = ss / max(1, n1 + n2 - 2)
    diff = float(right.mean() - left.mean())
    if var <= 0:
        return 0.0 if diff else 1.0
    t = diff / math.sqrt(var * (1 / e1 + 1 / e2))
    return float(2 * stats.t.sf(abs(t), dof))


def _shift(x: np.ndarray, points: list[int], i: int, rho: float) -> LastingShift:
    """The i-th point tested against its neighbouring segments."""
    edges = [0, *points, len(x)]
    left, right = x[edges[i]:edges[i + 1]], x[edges[i + 1]:edges[i + 2]]
    # Bonferroni over the splits the point was chosen from: the best of many splits is
    # not one planned split.
    positions = len(left) + len(right) - 1
    return LastingShift(points[i], saturating_exp(float(right.mean() - left.mean())),
                 min(1.0, _ttest(left, right, rho) * positions))


def _divide(x: np.ndarray, max_pvalue: float, rho: float) -> list[int]:
    """E-divisive within one window: split the segment whose proposal has the largest q̂
    while that proposal is significant."""
    points: list[int] = []
    while True:
        proposals = []
        for a, b in _segments(len(x), points):
            if b - a > 1:
                tau, q = _energy_split(x[a:b])
                proposals.append((q, a + tau))
        if not proposals:
            return points
        _, at = max(proposals, key=lambda p: p[0])
        trial = sorted([*points, at])
        if at in points or _shift(x, trial, trial.index(at), rho).pvalue > max_pvalue:
            return points
        points = trial


def _split(x: np.ndarray, window: int, max_pvalue: float) -> list[int]:
    step = max(1, window // 2)
    found: set[int] = set()
    start = 0
    while start < len(x):
        end = min(start + window, len(x))
        part = x[start:end]
        new = [start + p for p in _divide(part, max_pvalue, 0.0)]
        found.update(new)
        start = max(new[-1] if new else 0, start + step)
    return sorted(found)


def _merge(x: np.ndarray, points: list[int], max_pvalue: float, min_change: float,
           min_points: int) -> list[LastingShift]:
    while points:
        rho = _rho(x, points)
        shifts = [_shift(x, points, i, rho) for i in range(len(points))]
        edges = [0, *points, len(x)]
        short = [i for i in range(len(points))
                 if min(edges[i + 1] - edges[i], edges[i + 2] - edges[i + 1]) < min_points]
        if short:
            weakest = max(short, key=lambda i: shifts[i].pvalue)
        else:
            weakest = max(range(len(points)), key=lambda i: shifts[i].pvalue)
            if shifts[weakest].pvalue <= max_pvalue:
                weakest = min(range(len(points)), key=lambda i: shifts[i].magnitude)
                if shifts[weakest].magnitude > min_change:
                    return shifts
        points = points[:weakest] + points[weakest + 1:]
    return []


def spikes(x: np.ndarray, half: int = SPIKE_HALF, k: float = SPIKE_K) -> list[int]:
    """Hampel's identifier: the points farther than k robust SDs from the median of the
    2·half + 1 points around them, a lone run rather than a level (a level has half + 1
    points alike). The SD is the series' own (1.4826 × the median distance from those local
    medians): a 7-point scale would flag a few ordinary runs in every series."""
    if len(x) < 2 * half + 1:
        return []
    local = np.array([np.median(x[max(0, i - half):i + half + 1]) for i in range(len(x))])
    scale = 1.4826 * float(np.median(np.abs(x - local)))
    if scale <= 0:
        return [i for i in range(len(x)) if x[i] != local[i]]
    return [i for i in range(len(x)) if abs(x[i] - local[i]) > k * scale]


def _refine(x: np.ndarray, shifts: list[LastingShift], min_points: int) -> list[int]:
    """Each point moved, between its neighbours, to the split that best separates the two
    sides' means (least squares)."""
    points = [s.index for s in shifts]
    for i in range(len(points)):
        a = points[i - 1] if i else 0
        b = points[i + 1] if i + 1 < len(points) else len(x)
        taus = np.arange(a + min_points, b - min_points + 1)
        if len(taus) == 0:
            continue
        seg = x[a:b]
        csum = np.cumsum(seg)
        n1 = (taus - a).astype(float)
        n2 = (b - taus).astype(float)
        m1 = csum[taus - a - 1] / n1
        m2 = (csum[-1] - csum[taus - a - 1]) / n2
        points[i] = int(taus[int(np.argmax(n1 * n2 / (n1 + n2) * (m2 - m1) ** 2))])
    return points


def change_points(values, *, window: int = WINDOW, max_pvalue: float = MAX_PVALUE,
                  min_change: float = 0.0, min_points: int = MIN_POINTS) -> list[LastingShift]:
    """The lasting shifts of a series of positive values, oldest first."""
    x = np.log(np.asarray(values, dtype=float))
    if len(x) < 2 * min_points or not np.all(np.isfinite(x)):
        return []
    x = x.copy()
    for i in spikes(x):
        x[i] = float(np.median(x[max(0, i - SPIKE_HALF):i + SPIKE_HALF + 1]))
    # Otava's first pass: ten times the final p-value (twice it from 0.05 on).
    lenient = max_pvalue * 10 if max_pvalue < 0.05 else min(1.0, max_pvalue * 2)
    weak = _split(x, max(2, window), lenient)
    found = _merge(x, weak, max_pvalue, min_change, min_points)
    if not found:
        return []
    # Placed anew, each point is tested again (its neighbours' segments moved too).
    return _merge(x, _refine(x, found, min_points), max_pvalue, min_change, min_points)
