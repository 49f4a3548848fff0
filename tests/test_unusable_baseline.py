"""A committed baseline cell that is there but cannot be used (unreadable, or SKIPPED where this
run measured the cell) is not a first run: the gate fails, naming the cell and why."""
import dataclasses
import random

from torchgate.core import config
from torchgate.core.baseline import load_run
from torchgate.core.config.settings import Gate
from torchgate.core.records import write_record
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import BenchRecord, EnvRecord
from torchgate.judge.gate import gate_checked, gate_failures
from torchgate.judge.run import compare_run
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish
from torchgate.render.summary import headline

from .projects import REPORTS, git, init_repo
from .records import DELTA, bench, process, record

DEFAULT = Gate().fail_on


def _record(drafts) -> CompareRecord:
    result = finish(drafts, alpha=0.05, power=0.8, has_baseline=True)
    return CompareRecord("HEAD", True, 0.05, result.tests, rows=tuple(result.rows))


def test_a_committed_skipped_baseline_cell_fails_the_gate_naming_it():
    base = BenchRecord("cuda-fp32", "SKIPPED", reason="cuda is not available here")
    compare = _record(bench_rows("cuda-fp32", record(seed=1), base, DELTA))
    failures = gate_failures(compare, DEFAULT)
    assert failures == [
        "Baseline present but unusable: bench cuda-fp32: the baseline's record of it is "
        "SKIPPED (cuda is not available here); commit a run measured where the cell runs"]
    # Whatever else was compared, and even in a run that changed nothing.
    other = bench_rows("cpu-fp32", record(seed=2), record(seed=3), DELTA)
    mixed = dataclasses.replace(_record(bench_rows("cuda-fp32", record(seed=1), base, DELTA)
                                        + other), unchanged=True)
    assert gate_failures(mixed, DEFAULT) == failures
    assert headline(mixed, []).startswith("**Baseline present but unusable:** bench cuda-fp32")
    assert "No regressions" not in headline(mixed, [])
    # Off with NOTHING_COMPARABLE; both sides SKIPPED is not this reason (a wholly skipped
    # matrix is NOTHING_COMPARABLE's own).
    assert gate_failures(compare, ("REGRESSED", "FAILED")) == []
    both = _record(bench_rows("cuda-fp32", BenchRecord("cuda-fp32", "SKIPPED", reason="x"),
                              base, DELTA))
    assert not any("unusable" in f for f in gate_failures(both, DEFAULT))


def test_a_first_run_still_passes():
    first = _record(bench_rows("cpu-fp32", record(seed=1), None, DELTA))
    assert gate_failures(first, DEFAULT) == []
    assert gate_checked(first, DEFAULT).endswith("no baseline to test timings against yet")


RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"w": {"_target_": "x.w"}}, "matrix": {"modes": ["eager"]},
       "bench": {"adaptive_budget_s": 0}}


def test_a_committed_unreadable_baseline_cell_fails_the_gate_with_the_loaders_message(
        tmp_path, monkeypatch):
    init_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "reports" / "test-box" / "bench" / "cpu-fp32.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 1, "kind": "ben')
    write_record(tmp_path / "reports" / "test-box" / "env" / "env.json", EnvRecord({}))
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "corrupt baseline", cwd=tmp_path)
    write_record(path, dataclasses.replace(
        bench({"w": [process(rng=random.Random(i)) for i in range(4)]}), cell="cpu-fp32"))
    inputs = load_run("HEAD", ["cpu-fp32"], ("bench",), reports=REPORTS)
    assert list(inputs.unusable) == [("bench", "cpu-fp32")]
    result = compare_run(config.parse(RAW), inputs)
    compare = CompareRecord("HEAD", True, 0.05, result.tests, rows=tuple(result.rows))
    [failure] = gate_failures(compare, DEFAULT)
    assert failure.startswith("Baseline present but unusable: bench cpu-fp32: unreadable: "
                              "baseline reports/test-box/bench/cpu-fp32.json at ")
    assert "is not valid JSON" in failure
    assert not any("compared as NEW" in n for n in result.notes)
