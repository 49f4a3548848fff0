"""The sweep's recommendation decided like any timing (issue 24, item 2: "re-tuned").

Simulated points of known truth: K worker processes a point, each process's call log-normal
about the point's true time with spread σ. The new rule is judge.sweeps.recommend; the old
took the highest median throughput. A true 20 % gap must be recommended with high power; when
the points cost the same (A/A), the cheaper setting must be chosen in at least 1 - α of the
sweeps. `pytest -s` prints the table.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from torchgate.core.config.settings import Recommend
from torchgate.core.numbers import median
from torchgate.judge.results import Sweep, SweepPoint, UnitSummary
from torchgate.judge.sweeps import cheapness, read, recommend
from torchgate.render import sweeps as render

from .test_stats_unit_drift import margin

ALPHA, DELTA, TRIALS = 0.05, 0.05, 400


def unit(calls, items: int = 64, peak: float | None = None) -> UnitSummary:
    """A unit's summary as judge.summary makes it, from its kept processes' calls."""
    per_call = median(calls)
    return UnitSummary(values={"steady_s": per_call, "peak_bytes": peak},
                       steady_per_process_s=tuple(calls),
                       items_per_s=items / per_call if per_call else None,
                       usd_per_million=None, warmup_calls=None, latency_calls=(),
                       processes_kept=len(calls), processes_busy=0, processes_failed=0,
                       items=items)


def point(name: str, values: tuple, calls, **kw) -> SweepPoint:
    return SweepPoint(name, values, unit(calls, **kw))


def sweep(rng, gains: list[float], sigma: float, k: int, key: str = "threads") -> list[SweepPoint]:
    """One point per gain (throughput over the first point's), in order of cheapness."""
    return [point(f"w[{key}={i + 1}]", ((key, i + 1),),
                  list(1e-3 / g * np.exp(rng.normal(0, sigma, k))))
            for i, g in enumerate(gains)]


def old_rule(points: list[SweepPoint]) -> SweepPoint:
    return max(points, key=lambda p: p.numbers.items_per_s)


@functools.cache
def rates(gains: tuple[float, ...], sigma: float, k: int, delta: float = DELTA,
          trials: int = TRIALS) -> tuple[float, float]:
    """(old, new): the share of sweeps whose recommendation is the truly right point: the
    highest true throughput, or with ties the cheapest of them."""
    rng = np.random.default_rng([len(gains), round(sigma * 1000), k, round(max(gains) * 100)])
    top = max(gains)
    right = gains.index(top)        # the first (cheapest) of the best
    hits = [0, 0]
    for _ in range(trials):
        points = sweep(rng, list(gains), sigma, k)
        hits[0] += old_rule(points) is points[right]
        hits[1] += recommend(points, Recommend(), alpha=ALPHA, delta=delta).chosen \
            is points[right]
    return hits[0] / trials, hits[1] / trials


CASES = [  # (label, true throughputs, σ, processes)
    ("A/A, 2 points", (1.0, 1.0), 0.05, 4),
    ("A/A, 2 points, noisy", (1.0, 1.0), 0.10, 4),
    ("A/A, 5 points", (1.0,) * 5, 0.05, 4),
    ("+20 %, 2 points", (1.0, 1.2), 0.05, 4),
    ("+20 %, 2 points, 3 processes", (1.0, 1.2), 0.05, 3),
    ("+10 %, 2 points", (1.0, 1.1), 0.05, 4),
    ("+20 % over 4 equal points", (1.0, 1.0, 1.2, 1.0, 1.0), 0.05, 4),
    ("5 points, +14 % over the next cheaper", (1.0, 1.05, 1.2, 1.1, 0.9), 0.05, 4),
]


def test_the_table():
    """Measured (400 sweeps each, old / new): A/A, the cheaper setting chosen 0.49-0.51 /
    0.96 of two points, 0.20 / 0.98 of five; a true +20 % gap recommended 1.00 / 0.94-0.99
    (0.90 among five points); +10 % 0.99 / 0.72; a best point 14 % over the next cheaper
    one 0.98 / 0.66: an undecided gap goes to the cheaper setting."""
    print(f"\n{'case':38} {'σ':>5} {'K':>2}  old   new  (share right)")
    for label, gains, sigma, k in CASES:
        old, new = rates(gains, sigma, k)
        print(f"{label:38} {sigma:5.0%} {k:2}  {old:.2f}  {new:.2f}")
        assert new >= 0.9 or "+10 %" in label or "next cheaper" in label


@pytest.mark.parametrize("gains, sigma", [((1.0, 1.0), 0.05), ((1.0, 1.0), 0.10),
                                          ((1.0,) * 5, 0.05)])
def test_an_a_a_tie_goes_to_the_cheaper_setting(gains, sigma):
    """At least 1 - α in truth; measured, within the binomial allowance of 400 sweeps (at
    σ = 5 % and 4 processes the test's threshold lies beyond δ, so δ does not help)."""
    old, new = rates(gains, sigma, 4)
    assert 1 - new <= margin(ALPHA, TRIALS)
    assert old <= 0.5 + 3 * math.sqrt(0.25 / TRIALS)     # a coin toss, or worse


def test_without_delta_the_test_alone_keeps_alpha():
    """δ = 0: only the one-sided test at α/(k − 1) decides; the cheapest of equal points is
    beaten in at most α of the sweeps (plus the binomial allowance)."""
    for gains in ((1.0, 1.0), (1.0,) * 4):
        assert 1 - rates(gains, 0.05, 4, delta=0.0)[1] <= margin(ALPHA, TRIALS)


@pytest.mark.parametrize("gains, k", [((1.0, 1.2), 4), ((1.0, 1.2), 3),
                                      ((1.0, 1.0, 1.2, 1.0, 1.0), 4)])
def test_a_true_20_percent_gap_is_recommended(gains, k):
    assert rates(gains, 0.05, k)[1] >= 0.9


def test_cheaper_is_fewer_threads_then_smaller_values_then_memory():
    def p(values, peak=1.0):
        return point("w", values, [1e-3, 1e-3], peak=peak)
    order = sorted([p((("batch", 64), ("threads", 1))), p((("batch", 16), ("threads", 2))),
                    p((("batch", 16), ("threads", 1)), peak=2.0),
                    p((("batch", 16), ("threads", 1)))], key=cheapness)
    assert [(p.label, p.numbers.peak_bytes) for p in order] == [
        ("batch=16, threads=1", 1.0), ("batch=16, threads=1", 2.0),
        ("batch=64, threads=1", 1.0), ("batch=16, threads=2", 1.0)]


def test_a_tie_is_named_with_its_interval_and_the_picture_starts_at_zero(monkeypatch):
    """The case of the issue: threads=1 at 84,056 items/s over threads=2 at 67,423, with
    spreads that cannot tell them apart (4 processes a point)."""
    rng = np.random.default_rng(3)
    one = point("mlp[threads=1]", (("threads", 1),),
                list(64 / 84056 * np.exp(rng.normal(0, 0.25, 4))))
    two = point("mlp[threads=2]", (("threads", 2),),
                list(64 / 67423 * np.exp(rng.normal(0, 0.25, 4))))
    choice = recommend([one, two], Recommend())
    assert choice.chosen is one and [v.point for v in choice.ties] == [two]
    one, two = (read(p, Recommend(), ALPHA) for p in (one, two))
    choice = recommend([one, two], Recommend())
    sweep = Sweep("cpu-fp32", "mlp", "eager", (one, two), choice)
    line = render.recommendation_line(sweep)
    assert "threads=1 and threads=2 " in line and " tie (throughput against it, 90 % " \
        "interval): the cheaper setting" in line
    assert "[" in line.split("threads=2 ", 1)[1]
    table = render.curve_table(sweep)
    assert "items/s against ◀ [CI]" in table and " tie " in table
    drawn = []
    monkeypatch.setattr(render, "png", lambda fig: drawn.append(fig) or b"png")
    render.sweep_figure("cpu-fp32", (sweep,), ALPHA)
    ax = drawn[0].axes[0]
    assert ax.get_ylim()[0] == 0 and ax.containers     # from zero, with error bars
    # Decided: 20 % apart at 1 % spread, the more threads win, and the line says so.
    fast = point("mlp[threads=2]", (("threads", 2),), [64 / 100800 * x for x in
                                                       (0.99, 1.0, 1.01, 1.0)])
    slow = point("mlp[threads=1]", (("threads", 1),), [64 / 84000 * x for x in
                                                       (1.0, 1.01, 0.99, 1.0)])
    decided = recommend([slow, fast], Recommend())
    assert decided.chosen is fast and not decided.ties
    slow, fast = (read(p, Recommend(), ALPHA) for p in (slow, fast))
    decided = recommend([slow, fast], Recommend())
    assert "every other point is shown to cost more per item" in render.recommendation_line(
        Sweep("cpu-fp32", "mlp", "eager", (slow, fast), decided))


@functools.cache
def wrongly_decided(gains: tuple[float, ...], sigma: float, k: int,
                    trials: int = TRIALS) -> tuple[float, float]:
    """(decided and wrong, decided): shares of sweeps whose recommendation is decided (no
    tying point estimated more than δ faster) and is not the truly right point."""
    rng = np.random.default_rng(11)
    right = gains.index(max(gains))
    wrong = decided = 0
    for _ in range(trials):
        points = sweep(rng, list(gains), sigma, k)
        choice = recommend(points, Recommend(), alpha=ALPHA, delta=DELTA)
        decided += choice.decided
        wrong += choice.decided and choice.chosen is not points[right]
    return wrong / trials, decided / trials


@pytest.mark.slow
def test_a_sweep_recommends_only_what_its_data_decide():
    """Measured (400 sweeps each, wrong / decided): A/A 0.028 / 0.95, noisy 0.035 / 0.80,
    five points 0.020 / 0.79; +20 % 0.000 / 0.94-0.99; +14 % over the next cheaper of five
    0.003 / 0.66, where the rule alone chose wrong in 0.34; +10 % (twice δ) 0.102 / 0.86: an
    estimate within δ still reads as a tie there (0.28 wrong before)."""
    for label, gains, sigma, k in CASES:
        wrong, decided = wrongly_decided(gains, sigma, k)
        print(f"{label:38} wrong {wrong:.3f}  decided {decided:.2f}")
        assert wrong <= 0.15, (label, wrong)
        if len(set(gains)) == 1:
            assert decided >= 0.7, (label, decided)


def test_a_faster_point_that_ties_is_no_recommendation_and_the_line_says_what_would_decide():
    """The case of the issue: num_workers=2 64 % faster by estimate, 2 processes a point,
    tied at [-47 %, +409 %]: nothing recommended; the table shows the processes kept."""
    zero = point("loader[num_workers=0]", (("num_workers", 0),), [0.7e-3, 1.4e-3])
    two = point("loader[num_workers=2]", (("num_workers", 2),), [1e-3 / 1.64 * x
                                                                 for x in (0.5, 2.0)])
    zero, two = (read(p, Recommend(), ALPHA) for p in (zero, two))
    choice = recommend([zero, two], Recommend())
    assert choice.chosen is zero and choice.open is not None and not choice.decided
    line = render.recommendation_line(Sweep("cpu-fp32", "loader", "compiled", (zero, two),
                                            choice))
    assert "**not decided**: num_workers=2 is estimated +" in line, line
    assert "against num_workers=0, the cheaper setting, with 2 and 2 processes kept" in line
    assert "processes a point would" in line and "(`bench.processes`)" in line
    table = render.curve_table(Sweep("cpu-fp32", "loader", "compiled", (zero, two), choice))
    assert "| processes kept " in table and "| 2 of 2 " in table
