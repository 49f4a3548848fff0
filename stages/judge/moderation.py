"""Borrowing strength across a run's units: empirical-Bayes variance moderation, and the
run-to-run variance of a unit estimated from its committed history. Pure.

At 4 processes a side a unit's variance has 3 degrees of freedom and the t-test's critical
value at the run's level is about 6; worse, a unit whose few processes happen to agree gets
a variance far too small. The units of one run (every workload and mode of every cell, one
metric at a time) tell what variances look like on this machine: Smyth's model (2004,
limma's `squeezeVar`) takes s²_g ~ s0²·F(d_g, d0), fits d0 and s0² by the moments of log s²_g,
and moderates s²_g to (d0·s0² + d_g·s²_g) / (d0 + d_g) with d0 + d_g degrees of freedom.

Only upwards. A run's units are not exchangeable: a compiled training step is noisier than
an eager matmul on every run. Pulling a truly noisy unit's variance down towards the others'
is anti-conservative exactly where a run's many tests decide, far in the tail: simulated with
process spreads from 1 % to 15 % across 20 cells, two-sided moderation gave the noisiest cells
p < 0.001 six times as often as nominal, and 8-10 % of A/A matrices a false REGRESSED or
IMPROVED. A unit at or above the prior's variance keeps its own variance and degrees of
freedom (the plain test); one below it is raised, and gains the prior's degrees of freedom.
A bimodal unit whose few processes all landed in one mode is raised with them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special

from torchgate.core.records.rows import Prior
from torchgate.judge.stats import mean_and_squares


@dataclass(frozen=True)
class Moderated:
    variance: float
    prior_df: float            # degrees of freedom lent by the prior (0: the unit's own)


def squeeze(variances: Sequence[float], dfs: Sequence[float]) -> tuple[list[Moderated],
                                                                        Prior | None]:
    """Each unit's variance moderated upwards towards the run's (see the module's
    docstring); unchanged, and no prior, when fewer than three units have a variance."""
    prior = _fit([(v, d) for v, d in zip(variances, dfs)
                  if v > 0 and d > 0 and math.isfinite(v)])
    if prior is None:
        return [Moderated(v, 0.0) for v in variances], None
    found = []
    for v, d in zip(variances, dfs):
        if not (d > 0 and math.isfinite(v)) or v >= prior.variance:
            found.append(Moderated(v, 0.0))
        elif math.isinf(prior.df):
            found.append(Moderated(prior.variance, prior.df))
        else:
            found.append(Moderated((prior.df * prior.variance + d * v) / (prior.df + d),
                                   prior.df))
    return found, prior


def _fit(usable: list[tuple[float, float]]) -> Prior | None:
    if len(usable) < 3:
        return None
    v = np.array([x for x, _ in usable])
    d = np.array([y for _, y in usable])
    # log s² - E[log χ²_d/d] is log σ²_g + noise of variance trigamma(d/2).
    e = np.log(v) - special.digamma(d / 2) + np.log(d / 2)
    mean = float(e.mean())
    excess = float(e.var(ddof=1) - _trigamma(d / 2).mean())
    # The units' variances vary more than their noise explains by `excess`; none left: they
    # share one variance, known up to the pooled degrees of freedom.
    df = 2 * _trigamma_inverse(excess) if excess > 0 else math.inf
    df = min(df, float(d.sum()))
    variance = math.exp(mean + special.digamma(df / 2) - math.log(df / 2))
    return Prior(variance, df, len(usable))


def _trigamma(x):
    """ψ'(x) as the Hurwitz zeta ζ(2, x): scipy's polygamma is a Python wrapper over it, most
    of a moderation's time."""
    return special.zeta(2, x)


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x, by Newton's method on 1/trigamma (Smyth's limma)."""
    if x > 1e7:
        return 1 / math.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(_trigamma(y))
        step = tri * (1 - tri / x) / float(-2 * special.zeta(3, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


# ---- run-to-run variance from the committed history ----------------------------------------

@dataclass(frozen=True)
class RunSpread:
    """The variance of a run's offset of one unit, on the log scale, and where it came from."""
    variance: float
    df: float                  # inf: a configured prior, taken as known
    source: str                # "history of N runs" or "prior"

    @property
    def spread(self) -> float:
        return math.sqrt(self.variance)


def run_spreads(history: dict[tuple, list[list[float]]], prior: float,
                least_runs: int = 3) -> dict[tuple, RunSpread]:
    """Each unit's run-level variance from the committed runs, `history` mapping a unit (a
    tuple whose last item is its metric) to one list of process values per run (hardware and
    package set the same as the baseline's).

    One-way random effects: the variance S of a unit's H run means (log scale, H - 1 degrees
    of freedom) estimates τ² + σ²/n, so t = S - W, W the mean within-run σ²/n, is unbiased
    for τ² (variance about 2·(τ² + σ²/n)²/(H - 1)). Three rules (issue 22, DESIGN.md §16):

    - Pooled: τ² pooled over the run's units of the metric, each t weighted by the inverse of
      its variance, with Satterthwaite's degrees of freedom (2·τ̂⁴·Σw): a unit's own t at
      H = 3 has 2, hopeless at a run's levels.
    - A floor instead of zero: the pooled τ̂² is 0 in 6-32 % of short histories, and a test
      that adds nothing for the run then takes every run offset for a change. The floor is
      the pooled estimate's own standard error at that point (1/√Σw): the run variance this
      history cannot tell from none.
    - Upwards per unit: units drift differently (one workload's memory layout, another's
      frequency scaling), and pooled over units whose run spreads range over 0.5-6 % the
      drifting ones took 10-20 % of A/A runs to a false REGRESSED. A unit whose own t is
      larger than the pooled τ̂² keeps it, never the reverse (as `squeeze` moderates the
      process variances). Its degrees of freedom: the H - 1 of its run means, plus the d0
      that Smyth's prior fitted to the units' ratios S / (τ̂² + W) lends (`_fit`): where the
      units scatter no more than H - 1 degrees of freedom explain, an own t above τ̂² is
      noise and its variance, larger than τ̂², is taken as known; where they scatter, d0 is
      small and the unit has about its own H - 1. Simulated at H = 3 (20 units, K = 4): with
      H - 1 alone a +15 % slowdown at τ = 2 % was REGRESSED in 0.55 of runs against the
      pooled rule's 0.83, with the lent d0 in 0.72; A/A runs with a false REGRESSED stayed
      within α either way (tests/test_stats_unit_drift.py). Lending d0 to a variance moved
      towards the prior (limma's two-sided squeeze) took 9 % of A/A runs to a false
      REGRESSED under the heterogeneous drift at H = 3 (own: 3.7 %). Satterthwaite's degrees
      of freedom for t alone (t² / (S²/(H - 1) + W²/(within df))) fall towards 0 where t is
      small beside S, and took a test's interval to overflow.

    Units with fewer than `least_runs` runs, and metrics whose units have none, get the prior
    (a relative SD, taken as known)."""
    found = {}
    for metric in sorted({key[-1] for key in history}):
        units = [u for key, runs in history.items()
                 if key[-1] == metric and (u := _unit(key, runs, least_runs)) is not None]
        if not units:
            continue
        pooled = _pooled(units, prior)
        lent = _scatter(units, pooled)
        for u in units:
            found[u.key] = RunSpread(u.excess, u.runs - 1 + lent,
                                     f"unit's own history of {u.runs} runs") \
                if u.excess > pooled.variance else pooled
    return {key: found.get(key, RunSpread(math.log1p(prior) ** 2, math.inf, "prior"))
            for key in history}


@dataclass(frozen=True)
class _History:
    """One unit's committed runs: between = S (variance of the run means), within = W."""
    key: tuple
    runs: int
    between: float
    within: float

    @property
    def excess(self) -> float:
        return self.between - self.within


def _scatter(units: list[_History], pooled: RunSpread) -> float:
    """The prior degrees of freedom d0 of the units' run variances around the pooled one:
    Smyth's fit to S / (τ̂² + W), each with H - 1 (inf: they scatter as chance does; 0:
    fewer than three units to tell)."""
    fit = _fit([(r, u.runs - 1) for u in units
                if (r := u.between / (pooled.variance + u.within)) > 0])
    return 0.0 if fit is None else fit.df


def _unit(key: tuple, runs: list[list[float]], least_runs: int) -> _History | None:
    # Plain floats: a few runs of a few processes each, where numpy's per-call cost is most
    # of the time of a compare (and of the simulations that test it).
    logs = [[math.log(v) for v in r] for r in runs if len(r) >= 2 and min(r) > 0]
    if len(logs) < max(least_runs, 2):
        return None
    means, within = [], 0.0
    for x in logs:
        mean, squares = mean_and_squares(x)
        means.append(mean)
        within += squares / (len(x) - 1) / len(x)
    between = mean_and_squares(means)[1] / (len(means) - 1)
    return _History(key, len(logs), between, within / len(logs))


def _pooled(units: list[_History], prior: float) -> RunSpread:
    """τ² pooled by inverse-variance weights, at least its standard error (see run_spreads)."""
    def weights(tau2: float) -> list[float]:
        return [(u.runs - 1) / (2 * max(tau2 + u.within, 1e-150) ** 2) for u in units]
    tau2 = math.log1p(prior) ** 2           # a first guess for the weights
    for _ in range(3):
        w = weights(tau2)
        tau2 = max(sum(wt * u.excess for wt, u in zip(w, units)) / sum(w), 0.0)
    # The estimate's variance, 1/Σw, at the estimate; the floor is its square root, and
    # the degrees of freedom 2·τ̂⁴·Σw are then at least 2.
    total = sum(weights(tau2))
    tau2 = max(tau2, 1 / math.sqrt(total))
    runs = max(u.runs for u in units)
    return RunSpread(tau2, 2 * tau2 ** 2 * total, f"history of {runs} runs")
