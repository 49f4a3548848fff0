"""Exact counts of work: the operators one eager call dispatches (`aten_ops`) and their FLOPs,
the graphs and kernels a compiled mode made, counted in the worker after its timings, equal in
two processes of the same code (a compile from empty caches and one from the caches it left),
and judged exactly: more is REGRESSED, with what moved; a count the processes disagree on is
not judged."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from torchgate.core.records.schema import BenchProcess
from torchgate.core.scratch import private
from torchgate.core.typed import from_data
from torchgate.core.vocabulary import Verdict
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.launch import local
from torchgate.measure.ops import count_work
from torchgate.render.metrics import bench_metrics
from torchgate.workloads import mlp_train

from .jobs import job, quick
from .records import BUSY, DELTA, bench, process

MM, RELU, TANH = "aten.mm.default", "aten.relu.default", "aten.tanh.default"


def test_one_call_dispatches_each_operator_it_runs_and_the_same_again():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    assert count_work(lambda: torch.relu(a @ b)).ops == {MM: 1, RELU: 1}
    assert count_work(lambda: torch.relu(a @ b).tanh()).ops == {MM: 1, RELU: 1, TANH: 1}
    step = mlp_train(device=torch.device("cpu"), dtype=torch.float32, compile=lambda f: f,
                     seed=0, batch=4).step
    # The optimizer's first step makes its state (zeros_like): the worker counts after every
    # timing, in the steady state, where one call does what the next does.
    made, first, again = (count_work(step) for _ in range(3))
    assert made.ops["aten.zeros_like.default"] > first.ops.get("aten.zeros_like.default", 0)
    assert first == again and sum(first.ops.values()) > 10   # forward, backward, optimizer


def test_the_flops_of_a_call_are_its_matmuls_and_grow_with_its_work():
    """2·m·n·k a matmul, none for elementwise ops; a tenth more rows, a tenth more FLOPs."""
    a, b = torch.randn(40, 64), torch.randn(64, 32)
    assert count_work(lambda: torch.relu(a @ b)).flops == {"aten.mm": 2 * 40 * 64 * 32}
    more = torch.randn(44, 64)
    assert count_work(lambda: torch.relu(more @ b)).flops == {"aten.mm": 2 * 44 * 64 * 32}
    step = mlp_train(device=torch.device("cpu"), dtype=torch.float32, compile=lambda f: f,
                     seed=0, batch=4).step
    step()
    flops = count_work(step).flops
    assert set(flops) >= {"aten.mm"} and sum(flops.values()) > 0   # backward's matmuls too


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


def test_a_count_its_processes_disagree_on_is_reported_not_judged():
    """A count that moves between processes of the same code depends on something besides the
    code (timing, threads, a cache): its change would be noise called exact."""
    base = bench({"w": [process(flops_per_call=100) for _ in range(4)]})
    now = bench({"w": [process(flops_per_call=f) for f in (100, 100, 120, 100)]})
    [row] = [r for r in bench_rows("c", now, base, DELTA, busy_share=BUSY)
             if r.metric == "flops_per_call"]
    assert row.verdict == Verdict.NOT_COMPARABLE
    assert row.note == ("not the same in every process (this run 100, 120): not an exact "
                        "count here, not judged")
    more = bench({"w": [process(flops_per_call=110, flops_by_op={"aten.mm": 110})] * 4})
    base = bench({"w": [process(flops_per_call=100, flops_by_op={"aten.mm": 100})] * 4})
    [row] = [r for r in bench_rows("c", more, base, DELTA, busy_share=BUSY)
             if r.metric == "flops_per_call"]
    assert (row.verdict, row.note) == (Verdict.REGRESSED, "aten.mm 100 → 110")


def test_the_summary_and_numbers_json_carry_the_count():
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


COUNTS = ("aten_ops", "aten_ops_by_op", "flops_per_call", "flops_by_op", "unique_graphs",
          "graph_breaks", "recompiles", "inductor_kernels", "inductor_bytes")


@pytest.mark.slow     # real worker processes, one compiling
def test_two_worker_processes_of_the_same_code_count_the_same_work(tmp_path, monkeypatch):
    """Deterministic before it gates: every process of a unit counts what the others do, the
    second compiling from the caches the first left (more work counting more FLOPs:
    test_the_flops_of_a_call_are_its_matmuls_and_grow_with_its_work)."""
    cache = private(tmp_path / "inductor")
    monkeypatch.setattr(local.scratch, "inductor_cache", lambda: cache)
    matmul = job("torchgate.workloads.matmul_relu", {"size": 32}, name="matmul_relu",
                 modes=("eager", "compiled"), timing=quick(min_warmup_calls=3))
    records = []
    for _ in range(2):
        raw = local.run_worker(matmul, timeout_s=300, fresh_compile_cache=False)
        assert raw["status"] == "OK", raw
        records.append(from_data(BenchProcess, raw, "result"))
    assert [r.modes["compiled"].compile_cache for r in records] == ["cold", "warm"]
    counted = [{(mode, name): getattr(m, name) for mode, m in r.modes.items() for name in COUNTS}
               for r in records]
    assert counted[0] == counted[1]
    eager, compiled = records[0].modes["eager"], records[0].modes["compiled"]
    assert eager.aten_ops == sum(eager.aten_ops_by_op.values()) >= 2
    assert MM in eager.aten_ops_by_op and RELU in eager.aten_ops_by_op
    assert eager.flops_by_op == {"aten.mm": 2 * 32 ** 3} == {"aten.mm": eager.flops_per_call}
    assert compiled.unique_graphs == 1 and compiled.inductor_kernels >= 1
    assert compiled.aten_ops is None and eager.inductor_kernels is None
    assert "inductor_bytes" in compiled.unmeasured      # the CPU backend counts none


def _rows(steady: str, flops: str, ops: str = Verdict.EQUIVALENT):
    from torchgate.core.records.rows import Row
    return tuple(Row("bench", "c", "w", "eager", metric, verdict, note=note) for metric, verdict, note
                 in (("steady_s", steady, ""), ("flops_per_call", flops, "aten.mm 100 → 110"),
                     ("aten_ops", ops, ""), ("warmup_s", Verdict.INCONCLUSIVE, "")))


def test_where_time_and_counts_disagree_the_row_says_what_it_means():
    from torchgate.judge.timings import read_time_by_work
    notes = {r.metric: r.note for r in read_time_by_work(_rows(Verdict.REGRESSED,
                                                                Verdict.EQUIVALENT))}
    assert notes["steady_s"] == ("the same work counted (FLOPs per call, aten ops per call): the "
                                 "time moved, not the amount of work the code asks for; the "
                                 "machine, a library's kernels or memory behaviour")
    assert notes["flops_per_call"] == "aten.mm 100 → 110"
    notes = {r.metric: r.note for r in read_time_by_work(_rows(Verdict.INCONCLUSIVE,
                                                                Verdict.REGRESSED))}
    assert notes["flops_per_call"] == ("aten.mm 100 → 110; the code does more work; the steady "
                                       "state is INCONCLUSIVE: at this machine's noise the time "
                                       "cannot tell")
    assert notes["steady_s"] == "" and notes["aten_ops"] == ""
    # More work counted under valgrind, faster natively: a native kernel valgrind's CPU lacks.
    notes = {r.metric: r.note for r in read_time_by_work(_rows(Verdict.IMPROVED,
                                                                Verdict.REGRESSED))}
    assert notes["flops_per_call"].endswith(
        "the code does more work; the steady state is IMPROVED: faster on this machine for "
        "more work counted under valgrind, which runs other kernels than this host's "
        "(AVX2; MKL's SSE4); read both before accepting either")
    # They agree: nothing to add.
    for steady, flops in ((Verdict.REGRESSED, Verdict.REGRESSED),
                          (Verdict.INCONCLUSIVE, Verdict.EQUIVALENT)):
        rows = _rows(steady, flops)
        assert read_time_by_work(rows) == rows


def test_a_compiled_mode_left_with_no_graph_is_regressed_not_improved():
    """A graph break inside a loop makes dynamo give up on the frame: 1 graph and 20 kernels
    become none (measured), which "fewer is better" would call IMPROVED."""
    def side(graphs, kernels):
        return bench({"w": [process(unique_graphs=graphs, inductor_kernels=kernels)] * 4})
    rows = {r.metric: r for r in bench_rows("c", side(0, 0), side(1, 20), DELTA, busy_share=BUSY)}
    assert rows["unique_graphs"].verdict == rows["inductor_kernels"].verdict == Verdict.REGRESSED
    assert rows["unique_graphs"].note == ("none, where the baseline had 1: nothing was compiled "
                                          "(dynamo ran the step eagerly; its graph breaks say why)")
    rows = {r.metric: r for r in bench_rows("c", side(1, 18), side(2, 20), DELTA, busy_share=BUSY)}
    assert rows["unique_graphs"].verdict == rows["inductor_kernels"].verdict == Verdict.IMPROVED
