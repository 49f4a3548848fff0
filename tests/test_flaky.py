"""Flakiness is a result: a unit whose mode failed in some worker processes and ran in the
others is FLAKY (k of n failed, with the first failure's message), gated like FAILED; one
that failed in its first process is FAILED and not started again, and a hang is never
retried."""
from __future__ import annotations

import json
import random

import pytest

from tests.test_adaptive import RAW, fake_worker
from tests.test_faults import write_workloads
from torchgate.compose import compose
from torchgate.core import config
from torchgate.core.records.inputs import RecordPair, RunInputs
from torchgate.core.records.rows import CompareRecord
from torchgate.core.vocabulary import BAD, Verdict
from torchgate.judge.gate import gate_failures
from torchgate.judge.run import compare_run
from torchgate.launch.cells import measure_bench

from .projects import run_module

CFG = config.parse({**RAW, "bench": {"processes": 4, "adaptive_budget_s": 0}})


def failing(rounds: set[int], status: str = "ERROR"):
    """The fake worker, but the workload `noisy` fails in the given rounds (0-based)."""
    run, calls = fake_worker({"quiet": 0.001, "noisy": 0.001}, random.Random(0)), []

    def worker(job, **kwargs):
        if job.workload.name != "noisy":
            return run(job, **kwargs)
        calls.append(1)
        if len(calls) - 1 in rounds:
            return {"status": status, "error": f"RuntimeError: boom {len(calls)}", "wall_s": 1.0}
        return run(job, **kwargs)
    return worker


def judged(record):
    cell = CFG.cells()[0].name
    result = compare_run(CFG, RunInputs("HEAD", None, {("bench", cell): RecordPair(record, None)}))
    [row] = [r for r in result.rows if r.workload == "noisy"
             and r.verdict in (Verdict.FLAKY, Verdict.FAILED)] or [None]
    return row, result


def test_one_of_four_processes_failing_is_flaky_with_the_first_message_and_fails_the_gate():
    record = measure_bench(CFG, CFG.cells()[0], run=failing({1}))
    assert len(record.workloads["noisy"].processes) == 4         # tried in every round
    row, result = judged(record)
    assert row.verdict == Verdict.FLAKY and Verdict.FLAKY in BAD
    assert row.note == "1 of 4 processes failed, the first: ERROR: RuntimeError: boom 2"
    assert "FLAKY" in CFG.gate.fail_on
    compared = CompareRecord("HEAD", False, 0.05, result.tests, rows=tuple(result.rows))
    assert gate_failures(compared, CFG.gate.fail_on) == ["1 FLAKY"]
    assert gate_failures(compared, ("REGRESSED", "FAILED")) == []


def test_a_unit_that_fails_in_its_first_process_is_failed_and_not_started_again():
    record = measure_bench(CFG, CFG.cells()[0], run=failing({0, 2}))
    assert len(record.workloads["noisy"].processes) == 1
    row, _ = judged(record)
    assert row.verdict == Verdict.FAILED and row.note == "ERROR: RuntimeError: boom 1"


def test_a_hang_after_a_success_is_flaky_and_not_tried_again():
    record = measure_bench(CFG, CFG.cells()[0], run=failing({1}, status="TIMEOUT"))
    assert len(record.workloads["noisy"].processes) == 2
    row, _ = judged(record)
    assert row.verdict == Verdict.FLAKY and row.note.startswith("1 of 2 processes failed")


@pytest.mark.slow
def test_the_knob_makes_a_real_workload_flaky_through_the_stages(project):
    write_workloads(project)
    (project / "conf/workload/flaky.yaml").write_text(
        "flaky:\n  _target_: torchgate.workloads.fault_workloads.flaky\n  fail_in_process: 2\n"
        f"  counter: {project / 'processes.txt'}\n")
    compose(project / "params.yaml", ["matrix=smoke", "workload=[flaky]", "bench.processes=4",
                                      "bench.samples=3", "bench.adaptive_budget_s=0"],
            conf=project / "conf")
    run_module("torchgate.env")
    run_module("torchgate.bench", "--device", "cpu", "--precision", "fp32")
    run_module("torchgate.compare")
    run_module("torchgate.report")
    gate = run_module("torchgate.gate", check=False)
    bench = json.loads((project / "reports/test-box/bench/cpu-fp32.json").read_text())
    assert [p["status"] for p in bench["workloads"]["flaky"]["processes"]] == ["OK"] * 4
    compare = json.loads((project / "reports/test-box/compare.json").read_text())
    [row] = [r for r in compare["rows"] if r["verdict"] == "FLAKY"]
    assert row["note"].startswith("1 of 4 processes failed, the first: ERROR: RuntimeError: "
                                  "failed in process 2 (on purpose)")
    assert gate.returncode == 1 and "1 FLAKY" in gate.stdout + gate.stderr
    assert "FLAKY" in (project / "reports/test-box/summary.md").read_text()


def test_the_failure_rate_over_the_history_counts_failed_processes_and_runs():
    from tests.records import bench, process
    from torchgate.core.config.settings import HistorySettings
    from torchgate.judge.trends import Run, failure_rates
    from torchgate.render.history import history

    def run(commit, failed, skipped=0):
        procs = [process(status="CRASHED", error=f"killed by signal SIGSEGV ({commit})")] * \
            failed + [process(status="SKIPPED")] * skipped + [process()] * (4 - failed)
        return Run(commit, None, bench({"noisy": procs, "quiet": [process()] * 4}), None)
    runs = {"cpu-fp32": [run("a" * 40, 1), run("b" * 40, 0, skipped=2), run("c" * 40, 2),
                         run(None, 0)]}
    (noisy,) = failure_rates(runs)                 # `quiet` never failed: no row
    assert (noisy.workload, noisy.mode, noisy.failed, noisy.processes) == (
        "noisy", "eager", 3, 16)
    assert (noisy.runs, noisy.of_runs, noisy.last) == (2, 4, "c" * 40)
    assert noisy.message == f"CRASHED: killed by signal SIGSEGV ({'c' * 40})"
    page = history([], ["cpu-fp32"], HistorySettings(), failed=[noisy])
    row = next(line for line in page.splitlines() if "3 of 16 (19%)" in line)
    assert [c.strip() for c in row.split("|")][1:-1] == [
        "cpu-fp32", "noisy", "eager", "3 of 16 (19%)", "2 of 4", "c" * 10, noisy.message]
    assert failure_rates({"cpu-fp32": [run("a" * 40, 0)]}) == []
