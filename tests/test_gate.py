"""The gate: its decision on compare records built by the real rules, the summary that says the
same, the gate stage's exit status and messages, and, end to end, a red gate that leaves this
run's summary behind."""
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from torchgate.compose import compose
from torchgate.core import config
from torchgate.core.baseline import run_stamp
from torchgate.core.config.settings import NOTHING_COMPARABLE, Gate
from torchgate.core.errors import UserError
from torchgate.core.records import write_record
from torchgate.core.records.rows import Change, CompareRecord, Row
from torchgate.core.records.schema import BenchRecord
from torchgate.judge.gate import gate_failures, nothing_comparable
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import MISSING_CELL, finish, possible_slowdown
from torchgate.render.summary import summary

from .projects import ROOT, commit_baseline_from_another_cpu, dvc, git, run_module
from .records import DELTA, bench, process, record

DEFAULT = Gate().fail_on
HARDWARE = "hardware changed (cpu_model: Old CPU -> New CPU)"


def compared(*cells, has_baseline=True) -> CompareRecord:
    """The compare record of a run: each cell is (now, base, not_comparable)."""
    drafts = [d for i, (now, base, why) in enumerate(cells)
              for d in bench_rows(f"cell{i}", now, base, DELTA, why)]
    result = finish(drafts, alpha=0.05, power=0.8, has_baseline=has_baseline)
    return CompareRecord("HEAD", has_baseline, 0.05, result.tests, rows=tuple(result.rows))


def skipped() -> BenchRecord:
    return BenchRecord("cuda-fp32", "SKIPPED", reason="cuda is not available here")


def test_the_default_fails_on_regressed_and_failed_and_counts_them_in_one_line():
    slower = compared((record(seed=1, steady=1.2e-3), record(seed=2), None),
                      (record(status="CRASHED", error="worker killed by signal SIGSEGV: x"),
                       record(), None))
    assert gate_failures(slower, DEFAULT) == ["1 REGRESSED (slower: 1), 1 FAILED"]
    assert gate_failures(slower, ("FAILED",)) == ["1 FAILED"]
    # Which budget each regression spends: the code's work, the machine's time, memory.
    rows = tuple(Row("bench", "cpu-fp32", "w", mode, metric, "REGRESSED") for mode, metric in (
        ("eager", "instructions"), ("compiled", "instructions"), ("eager", "steady_s"),
        ("eager", "peak_bytes")))
    assert gate_failures(CompareRecord("HEAD", True, 0.05, 1, rows=rows), ("REGRESSED",)) == [
        "4 REGRESSED (more memory: 1, more work: 2, slower: 1)"]
    assert gate_failures(slower, ()) == []


def test_every_timing_not_comparable_is_nothing_comparable_with_the_reason():
    moved = compared((record(seed=1), record(seed=2), HARDWARE))
    assert {r.verdict for r in moved.rows if r.metric == "steady_s"} == {"NOT COMPARABLE"}
    assert nothing_comparable(moved) == HARDWARE
    failures = gate_failures(moved, DEFAULT)
    assert len(failures) == 1 and failures[0].startswith(f"Nothing could be compared: {HARDWARE}")
    assert gate_failures(moved, ("REGRESSED", "FAILED")) == []      # the old gate passed this
    # One cell compared is enough: the other's reason is in its rows, not a failure.
    one = compared((record(seed=1), record(seed=2), HARDWARE), (record(seed=3), record(seed=4),
                                                                None))
    assert nothing_comparable(one) is None and gate_failures(one, DEFAULT) == []


def test_a_run_that_changed_nothing_has_nothing_to_gate():
    """Packages and workload code the baseline's (a docs-only pull request, a rerun): on a
    noisy machine its timings may all be NOT COMPARABLE, and that is no reason to fail."""
    moved = dataclasses.replace(compared((record(seed=1), record(seed=2), HARDWARE)),
                                unchanged=True)
    assert nothing_comparable(moved) is None and gate_failures(moved, DEFAULT) == []
    page = summary("cpu", moved, [], None, ["cell0"], DEFAULT)
    assert f"**Timings not compared:** {HARDWARE}" in page
    assert "packages, workload code and environment are the baseline's" in page
    assert "No regressions" not in page and "Gate (fails on" in page and "passed" in page


def test_a_first_run_passes_and_a_wholly_skipped_matrix_with_a_baseline_does_not():
    first = compared((record(seed=1), None, None), (skipped(), None, None))
    assert {r.verdict for r in first.rows} == {"NEW", "SKIPPED"}
    assert gate_failures(first, DEFAULT) == []
    assert gate_failures(compared((record(seed=1), None, None), has_baseline=False), DEFAULT) == []
    # A cell the baseline ran, lost now (an upgrade that loses the device): FAILED, and gates.
    nothing_ran = compared((skipped(), record(seed=2), None))
    [row] = nothing_ran.rows
    assert (row.verdict, row.note) == ("FAILED", "was OK, now SKIPPED: cuda is not available here")
    assert gate_failures(nothing_ran, DEFAULT)[0] == "1 FAILED"
    # Skipped on both sides: nothing lost.
    assert [r.verdict for r in compared((skipped(), skipped(), None)).rows] == ["SKIPPED"]
    gone = compared((None, record(seed=2), None))
    assert gate_failures(gone, DEFAULT) == [
        "1 MISSING", f"Nothing could be compared: {MISSING_CELL}; no timing was tested against "
        "the baseline"]
    assert gate_failures(gone, tuple(v for v in DEFAULT if v != "MISSING"))[0].startswith(
        "Nothing could be compared")


def test_a_timing_tested_is_compared_whatever_its_verdict():
    noisy = compared((record(seed=1, n=2), record(seed=2, n=2, steady=1.04e-3), None))
    steady = next(r for r in noisy.rows if r.metric == "steady_s")
    assert steady.change is not None and nothing_comparable(noisy) is None


def timing(verdict: str, ratio: float, low: float, high: float, workload="w") -> Row:
    change = Change(ratio, low, high, 0.95, 0.2, 4, 4, 0.03, "Welch t", 0.4, 0.08, 9)
    return Row("bench", "cpu-fp32", workload, "eager", "steady_s", verdict, 1e-3, ratio * 1e-3,
               0.05, change, possible_slowdown=possible_slowdown(verdict, change, 0.05))


def test_the_summary_lists_possible_slowdowns_largest_estimate_first():
    rows = (timing("INCONCLUSIVE", 1.06, 1.01, 1.11, "small"),
            timing("INCONCLUSIVE", 1.105, 1.054, 1.158, "large"),
            timing("INCONCLUSIVE", 1.03, 0.99, 1.07, "reaches"),     # only the interval
            timing("INCONCLUSIVE", 1.02, 0.99, 1.04, "within"),      # cannot reach +δ
            timing("EQUIVALENT", 1.0, 0.98, 1.02, "same"),
            timing("INCONCLUSIVE", 1.30, 0.70, 2.41, "noisy"),      # could be 30 % faster
            timing("INCONCLUSIVE", 1.06, 0.97, 1.16, "leaning"))   # could be unchanged
    page = summary("test", CompareRecord("HEAD", True, 0.05, 4, rows=rows), [], None, [],
                   DEFAULT)
    section = page.split("## Possible slowdowns")[1].split("##")[0]
    assert "+10.5 % [+5.4, +15.8]" in section and "+6.0 % [+1.0, +11.0]" in section
    assert section.index("large") < section.index("small")
    assert "within" not in section and "same" not in section and "reaches" not in section
    assert "noisy" not in section and "leaning" not in section
    assert "**No regressions.**" in page
    assert ("Gate (fails on `REGRESSED`, `FAILED`, `FLAKY`, `MISSING`, `NOTHING_COMPARABLE`): "
            "passed") in page


@pytest.mark.parametrize("spread", [0.025, 0.05, 0.15, 0.5])
def test_possible_slowdowns_of_unchanged_units_are_rare_at_any_spread(spread):
    """Simulated undecided rows (log estimate ~ N(log truth, spread), the 90 % interval an
    INCONCLUSIVE row shows), δ 5 %: how often an unchanged unit is listed, by the estimate
    alone (the rule before) and with the interval's lower end (now), and a +10 % one."""
    rng = np.random.default_rng(7)
    delta, z = 0.05, 1.645

    def listed(truth, rule):
        est = rng.normal(np.log(truth), spread, 20_000)
        rows = [timing("INCONCLUSIVE", *np.exp([e, e - z * spread, e + z * spread]))
                for e in est]
        return np.mean([rule(r) for r in rows])
    before = listed(1.0, lambda r: r.change.ratio > 1 + delta)
    now, caught = (listed(truth, lambda r: r.possible_slowdown) for truth in (1.0, 1.10))
    print(f"spread {spread:.1%}: unchanged listed {before:.3f} -> {now:.3f}; +10 % {caught:.3f}")
    assert now <= 0.055 and now <= before + 0.005
    if spread >= 0.15:                   # a drifting machine: the estimate alone lists ~40 %
        assert before > 0.35
    if spread <= 0.025:                  # a quiet one: a +10 % change is still listed
        assert caught > 0.95


def test_the_summary_never_says_no_regressions_when_nothing_was_compared():
    moved = compared((record(seed=1), record(seed=2), HARDWARE))
    page = summary("test", moved, [], None, [], DEFAULT)
    assert f"**Nothing could be compared:** {HARDWARE}" in page
    assert "No regressions" not in page and "**failed**: Nothing could be compared" in page
    first = summary("test", compared((record(seed=1), None, None)), [], None, [], DEFAULT)
    assert "No regressions" not in first and "**Nothing compared yet:**" in first
    assert "Gate: off" in summary("test", moved, [], None, [], ())


# ---- the gate stage ----------------------------------------------------------------------

def gate_stage(tmp_path, fail_on, rows, *extra_gate, stale=False, env=None):
    """The gate stage on a compare.json of `rows`, made from this run's records (none here) or,
    `stale`, from others."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["gate"] = {"fail_on": fail_on, **dict(extra_gate)}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    reports = tmp_path / "reports/test-box"
    try:
        cfg = config.parse(raw)
        stamp = run_stamp(cfg.baseline.rev, [c.name for c in cfg.cells()], reports)
    except UserError:           # the gate says what is wrong with its configuration first
        stamp = ""
    write_record(reports / "compare.json", CompareRecord("HEAD", True, 0.05, 1, rows=tuple(rows),
                                                         inputs="0" * 64 if stale else stamp))
    return subprocess.run([sys.executable, "-m", "torchgate.gate", "--params",
                           str(tmp_path / "params.yaml"), "--reports", str(tmp_path / "reports/test-box")],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def test_the_gate_refuses_a_comparison_of_other_records_than_the_runs(tmp_path):
    """A compare.json left from another run (a stage rerun by hand since, a selection DVC did
    not see move) is never judged: one line, what to run."""
    stale = gate_stage(tmp_path, list(DEFAULT), [], stale=True)
    assert stale.returncode == 2 and stale.stderr.strip() == (
        f"torchgate gate: error: {tmp_path}/reports/test-box/compare.json is not this run's "
        "comparison: it was made from other records, cells or baseline than this run's; run "
        "`dvc repro` (or `python -m torchgate.compare`) before the gate")
    assert gate_stage(tmp_path, list(DEFAULT), []).returncode == 0


def test_the_gate_stage_exits_1_with_one_line_per_reason_and_0_when_off(tmp_path):
    rows = [timing("REGRESSED", 1.2, 1.1, 1.3), timing("REGRESSED", 1.3, 1.2, 1.4, "x")]
    red = gate_stage(tmp_path, list(DEFAULT), rows)
    assert red.returncode == 1, red.stderr
    assert red.stderr.strip().splitlines() == [
        f"torchgate gate: failed: 2 REGRESSED (slower: 2) (see {tmp_path}/reports/test-box/summary.md)"]
    off = gate_stage(tmp_path, [], rows)
    assert off.returncode == 0 and "torchgate gate: passed: gate.fail_on is empty" in off.stdout
    green = gate_stage(tmp_path, ["FAILED", NOTHING_COMPARABLE], rows)
    assert green.returncode == 0, green.stderr
    assert "no FAILED among 2 verdicts; 2 timing(s) tested against the baseline" in green.stdout


def test_a_what_if_whose_gate_fails_is_kept_as_an_experiment_and_says_so(tmp_path):
    """Under `dvc exp run` DVC keeps no experiment whose stage failed: the gate says it failed
    and exits 0, so the what-if that found a regression is the one `dvc exp show` lists."""
    rows = [timing("REGRESSED", 1.2, 1.1, 1.3)]
    kept = gate_stage(tmp_path, list(DEFAULT), rows, env={"DVC_EXP_NAME": "torch-2.15"})
    assert kept.returncode == 0, kept.stderr
    lines = kept.stderr.strip().splitlines()
    assert lines[0].startswith("torchgate gate: failed: 1 REGRESSED")
    assert lines[1].startswith("torchgate gate: experiment torch-2.15 kept with the gate failed")
    assert "passed" not in kept.stdout, kept.stdout       # one answer, not both


@pytest.mark.parametrize("fail_on, extra, message", [
    (["REGRESSED", "REGRESSION"], (), "gate.fail_on[1] is 'REGRESSION'; valid choices: "
                                     "REGRESSED, FAILED, FLAKY, INCONCLUSIVE, NOT COMPARABLE, "
                                     "IMPROVED, EQUIVALENT, NEW, MISSING, SKIPPED, "
                                     "NOTHING_COMPARABLE"),
    ("REGRESSED", (), "gate.fail_on must be a list of strings, got 'REGRESSED'"),
    ([], (("fail_on_regression", True),), "gate.fail_on_regression was replaced by "
                                          "gate.fail_on"),
])
def test_a_bad_fail_on_is_one_line(tmp_path, fail_on, extra, message):
    run = gate_stage(tmp_path, fail_on, [], *extra)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith(f"torchgate gate: error: {message}"), lines[0]


# ---- end to end ----------------------------------------------------------------------------

MODULE = '''
import torch
from torchgate.workloads import Workload


def scaled(*, device, dtype, compile, seed, scale=1.0):
    a = torch.randn(16, 16, generator=torch.Generator().manual_seed(seed)).to(device, dtype)
    fn = compile(lambda x: (x @ x) * scale)
    return Workload(step=lambda: fn(a), items=16)
'''


def select(project, scale):
    (project / "conf/workload/scaled.yaml").write_text(
        f"scaled:\n  _target_: torchgate.workloads.my_workloads.scaled\n  scale: {scale}\n")
    compose(project / "params.yaml", ["matrix=smoke", "workload=[scaled]", "bench.processes=2",
                                      "bench.samples=3", "bench.adaptive_budget_s=0",
                                      "baseline.measure=recorded"], conf=project / "conf")


@pytest.mark.slow
def test_a_red_gate_leaves_this_runs_summary_and_nothing_comparable_fails(project):
    (project / "stages/workloads/my_workloads.py").write_text(MODULE)
    select(project, 1.0)
    first = dvc("repro", check=False)                      # no baseline yet: passes
    assert first.returncode == 0, first.stdout + first.stderr
    assert "torchgate gate: passed" in first.stdout
    git("add", "-A", cwd=project)
    git("commit", "-qm", "baseline", cwd=project)

    select(project, 2.0)                                   # the outputs move: drift REGRESSED
    red = dvc("repro", "gate", check=False)                # the gate and its inputs
    assert red.returncode == 255                           # DVC's code for a failed stage
    assert re.search(r"torchgate gate: failed: (\d+ REGRESSED)", red.stderr), red.stderr
    order = [m.group(1) for m in re.finditer(r"Running stage '([\w@-]+)'", red.stdout)]
    assert order[-3:] == ["report", "history", "gate"], order     # the gate last
    page = (project / "reports/test-box/summary.md").read_text()    # this run's, not the baseline's
    assert "**REGRESSED** `cpu-fp32` scaled eager drift vs baseline" in page
    assert re.search(r"\): \*\*failed\*\*: \d+ REGRESSED", page), page
    again = dvc("repro", check=False)                      # red until something changes
    assert again.returncode == 255 and "Running stage 'gate'" in again.stdout
    assert "Running stage 'report'" not in again.stdout

    # Accept that run: `torchgate compare` of the two committed runs gives compare.md's verdicts.
    git("add", "-A", cwd=project)
    git("commit", "-qm", "scale 2", cwd=project)
    both = subprocess.run([Path(sys.executable).with_name("torchgate"), "compare", "HEAD~1",
                           "HEAD", "--md"], capture_output=True, text=True, cwd=project,
                          check=True)
    def verdicts(page):
        return [line for line in page.splitlines() if line.startswith(("| ", "**"))]
    committed = verdicts((project / "reports/test-box/compare.md").read_text())
    assert verdicts(both.stdout) == committed and any("REGRESSED" in v for v in committed)

    # Then pretend its baseline came from another CPU.
    commit_baseline_from_another_cpu(project)
    for name in ("compare", "report"):
        run_module(f"torchgate.{name}")
    gate = run_module("torchgate.gate", check=False)
    assert gate.returncode == 1
    assert "torchgate gate: failed: Nothing could be compared: hardware changed" in gate.stderr
    assert "Some Other CPU 9000" in gate.stderr
    headline = next(line for line in (project / "reports/test-box/summary.md").read_text().splitlines()
                    if line.startswith("**"))
    assert headline.startswith("**Nothing could be compared:** hardware changed"), headline


def test_what_the_baseline_had_and_this_run_lacks_fails_the_gate_and_says_why():
    """A workload renamed, a mode or a cell dropped: MISSING rows, which fail the gate with
    the likely cause; a cell measured with other settings (threads 1 → 2) is no unchanged run,
    so not one timing tested is a failure, not a pass."""
    from torchgate.core import config
    from torchgate.core.records.inputs import RecordPair, RunInputs
    from torchgate.judge.run import compare_run
    cfg = config.parse({"device": {"cpu": {"type": "cpu"}}, "precision": {
        "fp32": {"dtype": "float32"}}, "workload": {"w": {"_target_": "x.w"}},
        "matrix": {"modes": ["eager"]}})
    cell = cfg.cells()[0].name

    def run(now, base, base_cells=(cell,)):
        now, base = (dataclasses.replace(r, cell=cell) for r in (now, base))
        return compare_run(cfg, RunInputs("HEAD", "0" * 40, {("bench", cell): RecordPair(
            now, base)}, base_cells=base_cells))
    renamed = run(bench({"v": [process()] * 4}), bench({"w": [process()] * 4}))
    [gone] = [r for r in renamed.rows if r.verdict == "MISSING"]
    assert gone.workload == "w" and "the workload renamed, or dropped from the matrix?" in gone.note
    assert gate_failures(renamed, DEFAULT)[0] == "1 MISSING"
    dropped = run(record(seed=1), record(seed=2), base_cells=(cell, "cpu-bf16"))
    [lost] = [r for r in dropped.rows if r.verdict == "MISSING"]
    assert (lost.cell, lost.note) == ("cpu-bf16", MISSING_CELL)
    assert gate_failures(dropped, ("REGRESSED",)) == []     # MISSING left out: accepted
    # Threads 1 → 2: every timing NOT COMPARABLE, and the run is not called unchanged.
    one, two = ({"name": "cpu", "type": "cpu", "threads": n} for n in (1, 2))
    base = dataclasses.replace(record(seed=2), device=one, unchanged=True)
    now = dataclasses.replace(record(seed=1), device=two, unchanged=True)
    same = run(dataclasses.replace(now, device=one), base)
    assert same.unchanged
    moved = run(now, base)
    assert not moved.unchanged
    assert any("Measured otherwise than the baseline: cpu-fp32 device.threads 1 → 2" in n
               for n in moved.notes), moved.notes
