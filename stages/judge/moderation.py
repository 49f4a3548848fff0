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


@dataclass(frozen=True)
class Prior:
    """The fitted distribution of the units' variances: s0² with d0 degrees of freedom."""
    variance: float
    df: float
    units: int


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
    excess = float(e.var(ddof=1) - special.polygamma(1, d / 2).mean())
    # The units' variances vary more than their noise explains by `excess`; none left: they
    # share one variance, known up to the pooled degrees of freedom.
    df = 2 * _trigamma_inverse(excess) if excess > 0 else math.inf
    df = min(df, float(d.sum()))
    variance = math.exp(mean + special.digamma(df / 2) - math.log(df / 2))
    return Prior(variance, df, len(usable))


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x, by Newton's method on 1/trigamma (Smyth's limma)."""
    if x > 1e7:
        return 1 / math.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1 - tri / x) / float(special.polygamma(2, y))
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

    One-way random effects: the variance of a run's mean log value is τ² + σ²/n. Per unit,
    t = (variance of its run means) - (mean within-run σ²/n) is an unbiased estimate of τ²
    with variance about 2·(τ² + σ²/n)²/(runs - 1). With 3 runs a unit's own estimate has 2
    degrees of freedom, and a t-test that carries it is hopeless at a run's levels; so τ² is
    pooled over the run's units of each metric, each weighted by the inverse of that variance
    (computed from the within-run part, which has many degrees of freedom, not from the noisy
    t), with Satterthwaite's degrees of freedom. Units with fewer than `least_runs` runs, and
    metrics whose units have none, get the prior (a relative SD, taken as known)."""
    found = {}
    for metric in sorted({key[-1] for key in history}):
        units = []
        for key, runs in history.items():
            runs = [np.log(r) for r in runs if len(r) >= 2 and min(r) > 0]
            if key[-1] != metric or len(runs) < least_runs:
                continue
            means = np.array([x.mean() for x in runs])
            within = float(np.mean([x.var(ddof=1) / x.size for x in runs]))
            units.append((key, len(runs), float(means.var(ddof=1)) - within, within))
        if not units:
            continue
        tau2 = math.log1p(prior) ** 2           # a first guess for the weights
        for _ in range(2):
            weights = [(n - 1) / (2 * (tau2 + w) ** 2) for _, n, _, w in units]
            tau2 = max(sum(wt * t for wt, (_, _, t, _) in zip(weights, units)) / sum(weights),
                       0.0)
        df = max(2 * tau2 ** 2 * sum(weights), 1.0)
        runs = max(n for _, n, _, _ in units)
        for key, *_ in units:
            found[key] = RunSpread(tau2, df, f"history of {runs} runs")
    return {key: found.get(key, RunSpread(math.log1p(prior) ** 2, math.inf, "prior"))
            for key in history}
