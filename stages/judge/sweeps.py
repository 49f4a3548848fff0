"""Which point of a sweep to recommend, decided like any timing. Pure.

A point's cost per item is, per kept worker process, its steady-state call over the items of
a call (the cell's price per hour is the same for every point, so cost per item and
throughput order the points alike). Two points are compared as two sides of a timing are:
Welch's t-test on the log per-process values (judge.stats), the processes the busy rule
kept (judge.summary), and δ the steady state's.

Point j **beats** point i when j's cost per item is lower, significantly at one-sided level
α/(k − 1) (k the points within the limits; each point faces k − 1 rivals: Bonferroni) and
by an estimate beyond δ. The recommendation is the **cheapest setting that no point
beats**; the others no point beats **tie** with it, and are named with their interval.
"Cheaper" is the setting that holds less of the machine: fewer threads, then the smaller
values of the other swept parameters in the order the sweep lists them (a smaller batch
needs less memory and returns each call sooner), then the smaller peak memory.

The point with the lowest estimated cost is never beaten, so the recommendation is it or a
cheaper setting it does not beat. A tie is a recommendation only where the data decide it: when
a point that ties is estimated more than δ faster than the cheapest unbeaten one, nothing is
recommended (`Choice.open`, with the processes a point that would decide it), since the
interval that left them tied says only that too few processes were run. When every point costs
the same, the cheapest setting is beaten only when one of its k − 1 rivals beats it: at most α
(simulated with tests/test_sweep_choice.py, beside the old rule, which took the highest median
throughput and so picked the cheapest of two equal points half the time).
"""
from __future__ import annotations

import dataclasses
import math

from scipy import special

from torchgate.core.config.settings import Recommend, StatsSettings
from torchgate.core.vocabulary import BASELINE, NOW
from torchgate.judge import stats
from torchgate.judge.results import CellSummary, Choice, Sweep, SweepPoint, Versus


def curves(summary: CellSummary, rule: Recommend = Recommend(), arm: str = NOW, *,
           alpha: float = StatsSettings.alpha) -> dict[tuple[str, str], list[SweepPoint]]:
    """(workload, mode) -> its sweep's points in one arm, in the order of their values, each
    with what the recommendation reads of it under `rule` (its throughput's interval at
    `alpha`)."""
    found: dict[tuple[str, str], list[SweepPoint]] = {}
    for key in summary.keys(arm):
        n = summary.units[key]
        if n.family is not None:
            found.setdefault((n.family, key.mode), []).append(
                read(SweepPoint(key.workload, n.point, n), rule, alpha))
    return {key: sorted(points, key=lambda p: [(k, _order(v)) for k, v in p.values])
            for key, points in found.items()}


def read(p: SweepPoint, rule: Recommend, alpha: float) -> SweepPoint:
    """The point with what the recommendation reads of it under `rule`."""
    throughput = geometric_throughput(p)
    return dataclasses.replace(p, outside=why_not(p, rule), throughput=throughput,
                               interval=throughput_interval(p, alpha),
                               usd_per_million=_cost(p, throughput))


def decide(summary: CellSummary, rule: Recommend, *, alpha: float = StatsSettings.alpha,
           delta: float = 0.05, power: float = StatsSettings.power) -> tuple[Sweep, ...]:
    """Every sweep of a cell with its recommendation, and the baseline arm's beside it."""
    before = curves(summary, rule, BASELINE, alpha=alpha)
    return tuple(
        Sweep(summary.cell, workload, mode, tuple(points),
              recommend(points, rule, alpha=alpha, delta=delta, power=power),
              recommend(before[workload, mode], rule, alpha=alpha, delta=delta, power=power)
              if (workload, mode) in before else None, (workload, mode) in before)
        for (workload, mode), points in curves(summary, rule, alpha=alpha).items())


def _cost(p: SweepPoint, throughput: float | None) -> float | None:
    """$ per M items at the geometric mean throughput (the summary's cost is per median)."""
    n = p.numbers
    if not n.usd_per_million or not n.items_per_s or not throughput:
        return None
    return n.usd_per_million * n.items_per_s / throughput


def _order(v) -> tuple:
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


def why_not(p: SweepPoint, rule: Recommend) -> str | None:
    """Why a point cannot be recommended, or None."""
    n = p.numbers
    if not n.measured or not per_item(p):
        return "not measured"
    if rule.max_peak_mib is not None and (n.peak_bytes or 0) > rule.max_peak_mib * 2 ** 20:
        return f"over {rule.max_peak_mib:g} MiB"
    if rule.max_latency_ms is not None and n.steady_s * 1e3 > rule.max_latency_ms:
        return f"over {rule.max_latency_ms:g} ms"
    return None


def per_item(p: SweepPoint) -> tuple[float, ...]:
    """The point's cost per item in each kept process: its steady-state call over the items
    of a call (a time per item, in seconds)."""
    items = p.numbers.items
    if not items:
        return ()
    return tuple(s / items for s in p.numbers.steady_per_process_s if s > 0)


def cheapness(p: SweepPoint) -> tuple:
    """The order of "cheaper" (the module's docstring): fewer threads, then the smaller
    values of the other swept parameters, then the smaller peak memory."""
    values = dict(p.values)
    rest = [_order(v) for k, v in p.values if k != "threads"]
    return (values.get("threads", 0), rest, p.numbers.peak_bytes or 0.0)


def geometric_throughput(p: SweepPoint) -> float | None:
    """Items per second as the test sees the point: items over the geometric mean of its
    processes' calls (the ratio of two points' is exactly the change the test estimates)."""
    costs = per_item(p)
    if not costs:
        return None
    return 1 / math.exp(sum(map(math.log, costs)) / len(costs))


def throughput_interval(p: SweepPoint, alpha: float) -> tuple[float, float] | None:
    """The (1 - alpha) interval of the point's throughput (a t-interval on its log
    per-process costs); None with fewer than two processes."""
    costs = per_item(p)
    if len(costs) < 2:
        return None
    logs = [math.log(c) for c in costs]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    half = float(special.stdtrit(len(logs) - 1, 1 - alpha / 2)) * sd / math.sqrt(len(logs))
    return math.exp(-mean - half), math.exp(-mean + half)


def recommend(points: list[SweepPoint], rule: Recommend, *, alpha: float = StatsSettings.alpha,
              delta: float = 0.05, power: float = StatsSettings.power) -> Choice:
    """The recommended point of one sweep (the module's docstring), with every other point
    within the limits against it."""
    fit = [p for p in points if why_not(p, rule) is None]
    if not fit:
        return Choice(None, None)
    level = alpha / max(len(fit) - 1, 1)
    limit = math.log1p(delta)

    def compared(i: SweepPoint, j: SweepPoint) -> stats.Shift | None:
        """j's cost per item against i's (log ratio < 0: j is cheaper per item)."""
        return stats.shift(per_item(i), per_item(j))

    def beats(j: SweepPoint, i: SweepPoint) -> bool:
        s = compared(i, j)
        return s is not None and s.log_ratio < -limit and s.interval(2 * level)[1] < 1

    unbeaten = [i for i in fit if not any(beats(j, i) for j in fit if j is not i)]
    chosen = min(unbeaten, key=cheapness)
    best = max(fit, key=geometric_throughput)
    versus = []
    for p in fit:
        if p is chosen:
            continue
        s = compared(chosen, p)
        n = (len(per_item(chosen)), len(per_item(p)))
        tie = any(p is u for u in unbeaten)
        if s is None:        # a side with one process: no interval, never decided
            versus.append(Versus(p, geometric_throughput(p) / geometric_throughput(chosen),
                                 math.nan, math.nan, 1 - 2 * level, tie, n))
            continue
        low, high = s.interval(2 * level)
        versus.append(Versus(p, 1 / s.ratio, 1 / high, 1 / low, 1 - 2 * level, tie, n))
    open_ = max((v for v in versus if v.tie and v.ratio > 1 + delta), key=lambda v: v.ratio,
                default=None)
    needed = None
    if open_ is not None and (s := compared(chosen, open_.point)) is not None:
        needed = stats.processes_needed(s, alpha=2 * level, power=power, delta=delta, tests=1)
    return Choice(chosen, best, tuple(versus), open_, needed)
