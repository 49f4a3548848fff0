"""Dynamic shapes: a workload's further input shapes, run in turn by compiled modes, their
recompiles with reasons and what each shape change cost; a new recompile is REGRESSED."""
import dataclasses
import random

import pytest
import torch

from torchgate.core.config import DeviceSpec, PrecisionSpec
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.records.job import Job, Timing
from torchgate.core.records.outputs import Dynamo
from torchgate.core.records.schema import ModeNumerics, ModeTiming, ShapeRun
from torchgate.core.typed import from_data, to_data
from torchgate.core.vocabulary import Verdict
from torchgate.judge.numerics import numerics_rows
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish
from torchgate.measure.timing import declared, run_shapes
from torchgate.measure.worker import bench_mode
from torchgate.render.bench import shape_changes
from torchgate.render.numbers import cell_table

from .records import BUSY, DELTA, bench, numerics, process
from .shape_workloads import varlen
from .test_timing import FakeClock

SIZE = ("forward: tensor 'x' size mismatch at index 1. expected 8, actual 16 "
        "(at shape_workloads.py:17)")
BRANCH = "forward: 2 <= x.size()[1] <= 20 (at shape_workloads.py:17)"


def test_each_shape_after_the_first_is_timed_with_the_recompiles_its_change_caused():
    clock, log, turns = FakeClock(), [], []

    def step_at(cost_s, reasons):
        def step():
            clock.now += cost_s
            log.extend(reasons)
            reasons.clear()           # only the first call at a shape recompiles
        return step

    shapes = {"seq=8": step_at(1e-3, []), "seq=16": step_at(0.5, ["size"]),
              "seq=24": step_at(1e-3, [])}
    found = run_shapes(shapes, clock, lambda: log, turn=lambda: turns.append(1))
    assert [s.shape for s in found] == ["seq=16", "seq=24"] and len(turns) == 2
    assert found[0] == ShapeRun("seq=16", 0.5, 0.5, 1, ("size",))
    assert (found[1].recompiles, found[1].first_call_s) == (0, pytest.approx(1e-3))


def test_bad_shapes_say_what_a_workload_must_give():
    assert declared(None) == [] and declared({}) == []
    with pytest.raises(TypeError, match="must map a label to a step per input shape"):
        declared([(8, 16), (8, 32)])


def test_a_shape_that_fails_names_itself():
    def broken():
        raise RuntimeError("no kernel")
    with pytest.raises(RuntimeError, match="at shape seq=16: no kernel"):
        run_shapes({"seq=8": lambda: None, "seq=16": broken}, FakeClock(), lambda: [])


def shaped(reasons: tuple[str, ...], seed: int):
    rng = random.Random(seed)
    runs = (ShapeRun("seq=16", 0.1, 1e-4, 1, reasons[:1]), ShapeRun("seq=24", 1e-4, 1e-4, 0),
            ShapeRun("seq=32", 0.08 if len(reasons) > 1 else 1e-4, 1e-4, len(reasons) - 1,
                     reasons[1:]))
    return bench({"varlen": [process(rng=rng, breaks=0) for _ in range(4)]},
                 modes=("compiled",)), runs


def with_shapes(record, runs, reasons):
    """The record's compiled mode, with these shape changes and recompiles."""
    run = record.workloads["varlen"]
    procs = [dataclasses.replace(p, modes={"compiled": dataclasses.replace(
        p.modes["eager"], shapes=runs, recompiles=len(reasons), recompile_reasons=reasons)})
        for p in run.processes]
    return dataclasses.replace(record, workloads={"varlen": dataclasses.replace(
        run, processes=tuple(procs))})


def test_a_new_recompile_is_regressed_with_its_reason_and_the_summary_says_it():
    base = with_shapes(*shaped((SIZE,), 1), (SIZE,))
    now = with_shapes(*shaped((SIZE, BRANCH), 2), (SIZE, BRANCH))
    rows = finish(bench_rows("cpu-fp32", now, base, DELTA), alpha=0.05, power=0.8).rows
    recompiles = next(r for r in rows if r.metric == "recompiles")
    assert recompiles.verdict == Verdict.REGRESSED and (recompiles.base, recompiles.now) == (1, 2)
    assert recompiles.note == "new: " + BRANCH
    assert "**REGRESSED** recompiles 1 → 2 (new: forward: 2 <= x.size()[1] <= 20" in \
        cell_table(summarize("cpu-fp32", now, 0.0, BUSY), rows)
    # Another guard for the same count is a new reason too, and a moved line is not.
    other = with_shapes(*shaped((BRANCH,), 3), (BRANCH,))
    verdict = {r.metric: r for r in bench_rows("c", other, base, DELTA)}["recompiles"]
    assert verdict.verdict == Verdict.REGRESSED and BRANCH in verdict.note
    moved = with_shapes(*shaped((SIZE.replace(":17", ":40"),), 4), (SIZE.replace(":17", ":40"),))
    assert {r.metric: r for r in bench_rows("c", moved, base, DELTA)}[
        "recompiles"].verdict == Verdict.EQUIVALENT
    page = shape_changes(summarize("cpu-fp32", now, 0.0, BUSY))
    row = next(line for line in page.splitlines() if "`seq=32`" in line)
    assert "| 1 " in row and "2 <= x.size()[1] <= 20" in row


def test_numerics_flags_a_new_recompile_reason_too():
    def unit(reasons):
        return numerics({"w": {"compiled": ModeNumerics(
            "PASS", dynamo=Dynamo(recompiles=len(reasons), recompile_reasons=reasons))}})
    rows = {r.metric: r for r in numerics_rows("c", unit((BRANCH,)), unit((SIZE,)))}
    assert rows["recompiles"].verdict == Verdict.REGRESSED
    assert rows["recompiles"].note == "new: " + BRANCH


def job(**kwargs) -> Job:
    spec = WorkloadSpec("varlen", "tests.shape_workloads.varlen", kwargs)
    return Job("bench", 0, DeviceSpec("cpu", "cpu"), PrecisionSpec("fp32", "float32"), (spec,),
               ("compiled",), Timing(2, 0.002, 0.01, 2, 1.0))


@pytest.mark.slow
def test_a_varying_length_recompiles_once_and_a_branch_on_it_adds_one_with_its_reason():
    """Compiled for real: four lengths under automatic dynamic shapes recompile once (the
    second length makes the dimension dynamic); a branch on the length adds a guard, and
    crossing it recompiles again."""
    plain = bench_mode(job(), varlen, torch.device("cpu"), "compiled")
    assert plain.status == "OK", plain.error
    assert [s.shape for s in plain.shapes] == ["seq=16", "seq=24", "seq=32"]
    assert [s.recompiles for s in plain.shapes] == [1, 0, 0] and plain.recompiles == 1
    assert "size mismatch at index 1. expected 8, actual 16" in plain.shapes[0].recompile_reasons[0]
    assert plain.shapes[0].first_call_s > plain.shapes[0].call_s     # the change cost time

    branched = bench_mode(job(branch_at=20), varlen, torch.device("cpu"), "compiled")
    assert [s.recompiles for s in branched.shapes] == [1, 1, 0] and branched.recompiles == 2
    assert "x.size()[1] <= 20" in branched.shapes[1].recompile_reasons[0]

    def record(m):       # as the worker's result file brings it back
        m = from_data(ModeTiming, to_data(m), "mode")
        return bench({"varlen": [dataclasses.replace(process(breaks=0), modes={"compiled": m})
                                 for _ in range(3)]}, modes=("compiled",))
    rows = {r.metric: r for r in bench_rows("cpu-fp32", record(branched), record(plain), DELTA)}
    assert rows["recompiles"].verdict == Verdict.REGRESSED
    assert "x.size()[1] <= 20" in rows["recompiles"].note


def test_the_next_call_after_a_shape_change_is_read_from_warm_processes():
    """The cold process pays one-time work in the call after its recompile (gpt_decode at
    kv=512: 229 ms there, 3-5 ms warm): the first call and recompiles are the cold one's, the
    next call the warm ones', and the cost the difference."""
    record, _ = shaped((SIZE,), 5)
    run = record.workloads["varlen"]
    procs = []
    for i, p in enumerate(run.processes):
        cold = i == 0
        shape = ShapeRun("kv=512", 1.5 if cold else 0.3, 0.229 if cold else 0.004, 1, (SIZE,))
        procs.append(dataclasses.replace(p, modes={"compiled": dataclasses.replace(
            p.modes["eager"], shapes=(shape,), compile_cache="cold" if cold else "warm")}))
    record = dataclasses.replace(record, workloads={"varlen": dataclasses.replace(
        run, processes=tuple(procs))})
    (change,) = summarize("cpu-fp32", record, 0.0, BUSY).unit("varlen", "compiled").shapes
    assert (change.first_call_s, change.call_s, change.recompiles) == (1.5, 0.004, 1)
    row = next(line for line in shape_changes(summarize("cpu-fp32", record, 0.0, BUSY))
               .splitlines() if "kv=512" in line)
    assert row.count("| 1.50 s ") == 2 and "| 4.00 ms " in row, row   # first call, cost
