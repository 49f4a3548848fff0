"""Tail latency: single synchronized calls, their percentiles per process, and their
comparison with the baseline's, process by process like the steady state."""
import random

import pytest
import torch

from torchgate.core.vocabulary import Verdict
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish
from torchgate.measure.timing import latency_calls, percentile, time_latency
from torchgate.measure.worker import bench_mode
from torchgate.render.bench import latency as latency_table
from torchgate.render.numbers import cell_table

from .jobs import job, quick
from .latency_workloads import sleepy
from .records import BUSY, DELTA, bench, process
from .test_timing import FakeClock


def test_a_percentile_is_a_call_that_happened_and_p99_needs_enough_calls():
    calls = sorted([1e-3] * 196 + [0.02] * 4)
    assert percentile(calls, 0.50) == 1e-3 and percentile(calls, 0.90) == 1e-3
    assert percentile(calls, 0.99) == 0.02            # rank 198 of 200: among the slow four
    assert percentile(sorted([1e-3] * 198 + [0.02] * 2), 0.99) == 1e-3
    assert latency_calls(1e-3, min_calls=200, target_s=0.5) == 500
    assert latency_calls(1.0, min_calls=200, target_s=0.5) == 200


def test_single_calls_are_timed_one_by_one():
    clock = FakeClock()
    durations = iter(([1e-3] * 49 + [0.02]) * 4)

    def step():
        clock.now += next(durations)

    turns = []
    found = time_latency(step, clock, 200, turn=lambda: turns.append(1))
    assert found.calls == 200 and turns == [1]
    assert found.p50_s == pytest.approx(1e-3)
    assert found.p90_s == pytest.approx(1e-3)
    assert found.p99_s == pytest.approx(0.02)


def test_a_workload_that_sleeps_on_one_call_in_fifty_has_a_slow_p99_and_a_fast_median():
    """For real, in this process (eager: nothing to compile)."""
    sleeps = job("tests.latency_workloads.sleepy", {"sleep_every": 50, "sleep_s": 0.02},
                 name="sleepy", latency=True,
                 timing=quick(sample_target_s=0.002, warmup_s=0.01, min_warmup_calls=3,
                              latency_calls=200, latency_s=0.01))
    m = bench_mode(sleeps, sleepy, torch.device("cpu"), "eager")
    assert m.status == "OK" and m.latency_calls == 200
    assert m.latency_p99_s >= 0.02                   # 4 of the 200 calls slept
    # A call takes microseconds (milliseconds when a shared machine throttles this process).
    assert m.latency_p50_s < m.latency_p99_s / 2
    assert m.latency_p50_s <= m.latency_p90_s <= m.latency_p99_s


def latency_record(p50: float, p99: float, seed: int, n: int = 6):
    rng = random.Random(seed)
    return bench({"sleepy": [process(rng=rng, latency_calls=200,
                                     latency_p50_s=p50 * rng.uniform(0.98, 1.02),
                                     latency_p90_s=p50 * rng.uniform(1.0, 1.04),
                                     latency_p99_s=p99 * rng.uniform(0.97, 1.03))
                             for _ in range(n)]})


def test_the_p99_regresses_with_its_own_delta_while_the_median_is_equivalent():
    base = latency_record(1e-4, 1.3e-4, seed=1)
    now = latency_record(1e-4, 0.02, seed=2)
    rows = {r.metric: r for r in finish(bench_rows("cpu-fp32", now, base, DELTA), alpha=0.05,
                                        power=0.8).rows}
    assert rows["latency_p99_s"].verdict == Verdict.REGRESSED
    assert rows["latency_p99_s"].delta == DELTA.latency_p99_s == 0.2
    assert rows["latency_p50_s"].verdict == Verdict.EQUIVALENT
    assert rows["latency_p90_s"].verdict == Verdict.EQUIVALENT
    assert rows["steady_s"].verdict == Verdict.EQUIVALENT
    # A record without latency (an older baseline): the percentiles are NEW, not failures.
    older = {r.metric: r.verdict for r in bench_rows("c", now, bench({"sleepy": [
        process(rng=random.Random(i)) for i in range(6)]}), DELTA)}
    assert older["latency_p99_s"] == Verdict.NEW


def test_the_reports_show_the_percentiles():
    now = latency_record(1e-4, 0.02, seed=2)
    page = latency_table(summarize("c", now, 0.0, BUSY))
    row = next(line.split("|") for line in page.splitlines() if "sleepy" in line)
    assert [c.strip() for c in row[1:5]] == ["sleepy", "eager", "6", "200"]
    assert row[7].strip().endswith(" ms") and row[5].strip().endswith(" µs")   # p99, p50
    table = cell_table(summarize("c", now, 0.0, BUSY), [])
    assert "latency p50 / p99" in table
