"""Exact counts of work: the operators one eager call dispatches (`aten_ops`), counted in the
worker after its timings, equal in two processes of the same code, and judged exactly: more
is REGRESSED, with the operators that moved."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from stages.core.config import DeviceSpec, PrecisionSpec
from stages.core.config.settings import WorkloadSpec
from stages.core.records.job import Job, Timing
from stages.core.records.schema import BenchProcess
from stages.core.typed import from_data
from stages.core.vocabulary import Verdict
from stages.judge.summary import summarize
from stages.judge.timings import bench_rows
from stages.launch.local import run_worker
from stages.measure.ops import dispatched_ops
from stages.render.metrics import bench_metrics
from stages.workloads import mlp_train

from .records import BUSY, DELTA, bench, process

MM, RELU, TANH = "aten.mm.default", "aten.relu.default", "aten.tanh.default"


def test_one_call_dispatches_each_operator_it_runs_and_the_same_again():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    assert dispatched_ops(lambda: torch.relu(a @ b)) == {MM: 1, RELU: 1}
    assert dispatched_ops(lambda: torch.relu(a @ b).tanh()) == {MM: 1, RELU: 1, TANH: 1}
    step = mlp_train(device=torch.device("cpu"), dtype=torch.float32, compile=lambda f: f,
                     seed=0, batch=4).step
    # The optimizer's first step makes its state (zeros_like): the worker counts after every
    # timing, in the steady state, where one call does what the next does.
    made, first, again = (dispatched_ops(step) for _ in range(3))
    assert made["aten.zeros_like.default"] > first.get("aten.zeros_like.default", 0)
    assert first == again and sum(first.values()) > 10   # forward, backward, optimizer


def _units(base: dict[str, int], now: dict[str, int]):
    def side(ops):
        return bench({"w": [process(aten_ops=sum(ops.values()), aten_ops_by_op=ops)
                            for _ in range(4)]})
    return side(base), side(now)


def test_more_operators_per_call_is_regressed_with_the_operators_that_moved():
    base, now = _units({MM: 20, RELU: 20}, {MM: 22, RELU: 20, TANH: 2})
    rows = {r.metric: r for r in bench_rows("c", now, base, DELTA, busy_share=BUSY)}
    assert (rows["aten_ops"].verdict, rows["aten_ops"].base, rows["aten_ops"].now) == (
        Verdict.REGRESSED, 40, 44)
    assert rows["aten_ops"].note == f"{MM} 20 → 22, {TANH} new (2)"
    rows = {r.metric: r for r in bench_rows("c", base, base, DELTA, busy_share=BUSY)}
    assert (rows["aten_ops"].verdict, rows["aten_ops"].note) == (Verdict.EQUIVALENT, "")
    fewer = {r.metric: r for r in bench_rows("c", base, now, DELTA, busy_share=BUSY)}
    assert fewer["aten_ops"].verdict == Verdict.IMPROVED


def test_the_summary_and_metrics_json_carry_the_count():
    _, now = _units({}, {MM: 2, RELU: 1})
    summary = summarize("c", now, None, BUSY)
    unit = summary.unit("w", "eager")
    assert unit.aten_ops == unit.value("aten_ops") == 3
    assert bench_metrics(summary)["w"]["eager"]["aten_ops"] == 3


def test_a_record_without_counts_compares_its_timings_and_counts_nothing():
    """A baseline written before the count (bench 10): no row for it, nothing else lost."""
    base, now = _units({}, {MM: 2})
    base = dataclasses.replace(base, workloads={"w": dataclasses.replace(
        base.workloads["w"], processes=tuple(process() for _ in range(4)))})
    rows = {r.metric: r for r in bench_rows("c", now, base, DELTA, busy_share=BUSY)}
    assert "aten_ops" not in rows and rows["steady_s"].shift is not None   # tested


def _job(size: int) -> Job:
    spec = WorkloadSpec("matmul_relu", "stages.workloads.matmul_relu", {"size": size})
    return Job("bench", 0, DeviceSpec("cpu", "cpu"), PrecisionSpec("fp32", "float32"), (spec,),
               ("eager",), Timing(3, 0.005, 0.02, 3, 1.0))


@pytest.mark.slow     # real worker processes
def test_two_worker_processes_of_the_same_code_count_the_same_operators():
    """Deterministic before it gates: every process of a unit counts what the others do."""
    counted = []
    for _ in range(2):
        raw = run_worker(_job(32), timeout_s=120)
        assert raw["status"] == "OK", raw
        m = from_data(BenchProcess, raw, "result").modes["eager"]
        counted.append((m.aten_ops, m.aten_ops_by_op))
    assert counted[0] == counted[1] and counted[0][0] == sum(counted[0][1].values()) >= 2
    assert MM in counted[0][1] and RELU in counted[0][1]
