"""A pull-request check's cost follows the change: a workload whose inputs are the same in both
arms runs bench.unchanged_processes rounds (one cold compile, no adaptive rounds) as the check's
A/A control, and host instructions, a function of their inputs, are counted once per set of
inputs: shared between arms with the same inputs, carried from a committed record that
counted them, never across a changed input."""
from __future__ import annotations

import dataclasses
import threading

import pytest

from torchgate.arms.plan import Plan
from torchgate.core import config
from torchgate.core.records.job import NOW_ARM, Arm
from torchgate.core.records.schema import WorkloadRun
from torchgate.judge.summary import summarize
from torchgate.launch import jobs as launch_jobs
from torchgate.launch import reuse
from torchgate.launch.cells import measure_bench, measure_numerics
from torchgate.launch.reuse import could_have_changed, counts_key
from torchgate.render import bench as page

RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"a": {"_target_": "torchgate.workloads.matmul_relu", "size": 8},
                    "b": {"_target_": "torchgate.workloads.elementwise", "size": 8}},
       "matrix": {"modes": ["eager", "compiled"]},
       "bench": {"processes": 4, "adaptive_budget_s": 0, "cold_compile_processes": 2,
                 "instructions": "always", "unchanged_processes": 2}}


class Worker:
    """A stand-in worker: every job it ran, and results a record can hold."""

    def __init__(self):
        self.jobs = []

    def __call__(self, job, timeout_s, python=None, fresh_compile_cache=True):
        self.jobs.append(job)
        if job.kind == "instructions":
            return {"status": "OK", "counter": {"tool": "callgrind", "calls": 2},
                    "modes": {m: {"status": "OK", "instructions": 1000} for m in job.modes}}
        return {"status": "OK", "modes": {m: {"status": "OK", "steady_s": [1e-3],
                                              "first_call_s": 1.0} for m in job.modes}}

    def of(self, kind: str, workload: str) -> list:
        return [j for j in self.jobs if j.kind == kind and j.workload.name == workload]


def arms_where_a_changed(cfg) -> tuple[Arm, Arm]:
    """The baseline arm runs `a` at another size (a changed input), `b` as this run does."""
    base = {**cfg.workloads, "a": dataclasses.replace(cfg.workloads["a"],
                                                      kwargs={"size": 4})}
    return Arm("baseline", workloads=base), NOW_ARM


def test_an_unchanged_workload_is_the_a_a_control_and_is_counted_once(counting):
    cfg = config.parse(RAW)
    worker = Worker()
    arms = arms_where_a_changed(cfg)
    record = measure_bench(cfg, cfg.cells()[0], Plan(arms, ""), run=worker, run_pair=None)
    # a changed: every round in both arms; b did not: 2 rounds, the first alone cold.
    assert len(worker.of("bench", "a")) == 8 and len(worker.of("bench", "b")) == 4
    assert [j.compile_cache_cold for j in worker.of("bench", "b")] == [True, True, False, False]
    assert [j.compile_cache_cold for j in worker.of("bench", "a")][:6] == [True] * 4 + [False] * 2
    # a is counted in each arm; b once, for both (the same inputs: the same count).
    assert len(worker.of("instructions", "a")) == 2 and len(worker.of("instructions", "b")) == 1
    now, base = record.workloads, record.ab.baseline.workloads
    assert now["b"].counts == base["b"].counts and now["b"].counts_key == base["b"].counts_key
    assert "counted once for both arms" in (now["b"].counts_from or base["b"].counts_from)
    assert now["a"].counts_key != base["a"].counts_key and not now["a"].counts_from
    assert now["b"].unchanged and not now["a"].unchanged
    shown = page.carried(summarize("cpu-fp32", record, None, 0.25))
    assert "| b | both | timings | the same inputs in both arms" in shown
    assert "| b |" in shown and "host instructions | counted once for both arms" in shown
    assert "| b | both | numerics | computed once, each arm's" in shown


def test_counts_a_committed_record_took_with_the_same_inputs_are_carried(counting):
    cfg = config.parse(RAW)
    first = Worker()
    committed = measure_bench(cfg, cfg.cells()[0], run=first, run_pair=None)   # main's run
    assert committed.workloads["a"].counts_key and len(first.of("instructions", "a")) == 1
    worker = Worker()
    record = measure_bench(cfg, cfg.cells()[0], Plan(arms_where_a_changed(cfg), ""),
                           run=worker, run_pair=None, baseline=committed,
                           baseline_at="abc1234567")
    # Now's a and both arms' b have main's inputs: carried; the baseline arm's a is counted.
    counted = [(j.workload.name, j.workload.kwargs["size"]) for j in worker.jobs
               if j.kind == "instructions"]
    assert counted == [("a", 4)]
    assert record.workloads["a"].counts == committed.workloads["a"].counts
    assert record.workloads["a"].counts_from.startswith(
        "carried from the reports at abc1234567: counted there with the same inputs")
    assert record.ab.baseline.workloads["a"].counts_from is None


def test_no_count_is_carried_across_a_changed_input(counting, monkeypatch):
    """The key moves with the configuration, the counter's settings, the environment and the
    harness's files; a foreign interpreter named by path has none (nothing is carried)."""
    cfg = config.parse(RAW)
    cell = cfg.cells()[0]

    def key_of(arm=NOW_ARM, name="a", modes=("eager",), cfg=cfg):
        return counts_key(cfg, cell, arm, name, list(modes))
    key = key_of()
    assert key == key_of() and key != key_of(modes=("eager", "compiled"))
    assert key != key_of(name="b")
    assert key != key_of(cfg=config.parse({**RAW, "bench": {**RAW["bench"],
                                                             "instruction_calls": 3}}))
    assert key_of(Arm("candidate", python="/elsewhere/bin/python")) is None
    monkeypatch.setattr(reuse, "_read_bytes", lambda path: b'{"env": "another machine"}')
    assert key != key_of()
    monkeypatch.setattr(reuse, "_harness", lambda: [("stages/measure/x.py", b"changed")])
    assert key != key_of()


def test_a_module_a_workload_does_not_import_leaves_it_unchanged(tmp_path, monkeypatch):
    """What can have moved a workload is its own module closure: a module beside it that it
    does not import (another workload's file) is no change of it."""
    root = tmp_path / "tree"
    (root / "stages" / "workloads").mkdir(parents=True)
    (root / "stages" / "__init__.py").write_text("")
    (root / "stages" / "workloads" / "__init__.py").write_text("from . import helper\n")
    (root / "stages" / "workloads" / "helper.py").write_text("X = 1\n")
    (root / "stages" / "workloads" / "mine.py").write_text("def mine(): pass\n")
    other = tmp_path / "other"
    import shutil
    shutil.copytree(root, other)
    (other / "stages" / "workloads" / "mine.py").write_text("def mine(): return 2\n")
    raw = {**RAW, "workload": {"a": {"_target_": "torchgate.workloads.matmul_relu"},
                               "m": {"_target_": "torchgate.workloads.mine.mine"}}}
    cfg = config.parse(raw)
    arms = (Arm("baseline", code=str(root)), Arm("now", code=str(other)))
    assert could_have_changed(cfg, arms) == {"m"}
    (root / "stages" / "workloads" / "mine.py").write_text(
        "# a comment, and the layout of the code: not what runs\n\n\ndef mine():\n"
        "    return 2   # the same code\n")
    assert could_have_changed(cfg, arms) == set()
    (other / "stages" / "workloads" / "helper.py").write_text("X = 2\n")   # imported by both
    assert could_have_changed(cfg, arms) == {"a", "m"}


def test_a_record_names_no_workload_unchanged_without_two_arms(counting):
    cfg = config.parse(RAW)
    record = measure_bench(cfg, cfg.cells()[0], run=Worker(), run_pair=None)
    assert all(r.unchanged is None for r in record.workloads.values())
    assert isinstance(record.workloads["a"], WorkloadRun) and record.workloads["a"].counts_key


def test_unchanged_processes_below_two_is_one_line():
    with pytest.raises(config.UserError, match="bench.unchanged_processes must be >= 2"):
        config.parse({**RAW, "bench": {**RAW["bench"], "unchanged_processes": 1}})


def test_beyond_the_controls_an_unchanged_workload_is_not_measured_and_says_so(counting):
    """Three workloads, one changed: the cheapest unchanged one is the A/A control, the other
    is not measured in either arm; compare says EQUIVALENT with why, and every page renders."""
    from torchgate.core.records.inputs import RunInputs, with_record
    from torchgate.judge.run import compare_run
    from torchgate.render import summary as summary_page
    raw = {**RAW, "workload": {**RAW["workload"],
                               "c": {"_target_": "torchgate.workloads.elementwise", "size": 16}},
           "bench": {**RAW["bench"], "unchanged_controls": 1}}
    cfg = config.parse(raw)
    worker = Worker()
    record = measure_bench(cfg, cfg.cells()[0], Plan(arms_where_a_changed(cfg), ""),
                           run=worker, run_pair=None)
    assert len(worker.of("bench", "b")) == 4 and worker.of("bench", "c") == []
    assert worker.of("instructions", "c") == []         # nothing counted to carry
    assert record.workloads["c"].processes == () and "not measured, the check's A/A " \
        "control is b" in record.workloads["c"].unchanged
    inputs = RunInputs("HEAD", None)
    result = compare_run(cfg, with_record(inputs, "bench", "cpu-fp32", record))
    rows = [r for r in result.rows if r.workload == "c"]
    assert [(r.metric, r.verdict) for r in rows] == [(m, "EQUIVALENT") for m in ["status"] * 2]
    assert any("not measured (bench.unchanged_controls): c." in n for n in result.notes)
    summary = summarize("cpu-fp32", record, 0.1, 0.25)
    assert "| c | both | not measured |" in page.carried(summary)
    assert summary_page is not None and page.page(summary, result)


def test_numerics_of_an_unchanged_workload_run_once_and_the_arms_of_a_changed_one_at_once(
        monkeypatch):
    """Nothing is timed in numerics: a changed workload's two arms run side by side (every
    core), and an unchanged one's outputs are computed once, for both arms."""
    monkeypatch.setattr(launch_jobs, "usable_cores", lambda: 2)
    cfg = config.parse(RAW)
    together = threading.Barrier(2, timeout=30)     # broken unless two run at once
    jobs = []

    def worker(job, timeout_s, python=None, fresh_compile_cache=True):
        jobs.append(job)
        if job.workload.name == "a":
            together.wait()
        return {"status": "OK", "modes": {}}
    run = measure_numerics(cfg, cfg.cells()[0], Plan(arms_where_a_changed(cfg), ""), run=worker)
    assert sorted(j.workload.name for j in jobs) == ["a", "a", "b"]
    assert not together.broken
    assert run.results["baseline"]["b"] == run.results["now"]["b"]
    assert len(run.results["baseline"]["a"]) == len(run.results["now"]["a"]) == 1
