"""End to end, as a user runs it: `dvc repro` twice in a project kept in a subdirectory of its
git repository, with a workload from the user's own module, one that raises, and a device that
is not present."""
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from torchgate.compose import compose
from torchgate.core import machine
from torchgate.core.metrics import BY_NAME
from torchgate.core.records import kept
from torchgate.judge.counts import prior_spread

from .projects import (
    commit_baseline_from_another_cpu,
    dvc,
    enter_project,
    git,
    make_project,
    read,
    run_module,
)
from .test_env_packages import dist
from .test_readme import readme_commands
from .venvs import child_venv

USER_MODULE = '''
import torch
from torchgate.workloads import Workload


def scaled_matmul(*, device, dtype, compile, seed, size=32, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(size, size, generator=gen).to(device, dtype)
    fn = compile(lambda x: (x @ x) * scale)
    return Workload(step=lambda: fn(a), items=size)


def broken(*, device, dtype, compile, seed):
    raise RuntimeError("this workload is broken on purpose")
'''


@pytest.fixture
def nested(tmp_path, monkeypatch):
    """A project kept in a subdirectory (with a space) of a larger repository: (project, its
    repository)."""
    outer = tmp_path / "monorepo"
    project = make_project(outer / "ml" / "perf gate", outer)
    (outer / "README.md").write_text("a larger repository\n")
    return enter_project(project, monkeypatch), outer


@pytest.mark.slow
def test_dvc_repro_twice_with_a_baseline(nested, monkeypatch):
    project, repository = nested
    (project / "stages/workloads/my_workloads.py").write_text(USER_MODULE)
    (project / "conf/workload/mine.yaml").write_text(
        "mine:\n  _target_: torchgate.workloads.my_workloads.scaled_matmul\n  size: 32\n")
    (project / "conf/workload/broken.yaml").write_text(
        "broken:\n  _target_: torchgate.workloads.my_workloads.broken\n")
    # gate.fail_on=[]: a workload broken on purpose must not stop `dvc repro` at the gate (the
    # gate itself is tested in test_gate.py). compare.busy_share=1: this test checks the
    # pipeline's files, which must hold numbers even when it runs beside other work (a busy
    # process's numbers are otherwise left out; tests/test_summary.py tests that rule).
    compose(project / "params.yaml", ["matrix=smoke", "device=[cpu,cuda]",
                                      "workload=[mine,broken]",
                                      "bench.processes=2", "bench.samples=3",
                                      "bench.adaptive_budget_s=0", "gate.fail_on=[]",
                                      "compare.busy_share=1"],
            conf=project / "conf")

    first = dvc("repro")
    assert "bench@cpu-fp32" in first.stdout and "bench@cuda-fp32" in first.stdout
    for path in ["env/env.json", "env/env.md", "bench/cpu-fp32.json", "bench/cpu-fp32.md",
                 "bench/cuda-fp32.json", "numerics/cpu-fp32.json", "numerics/cpu-fp32.md",
                 "compare.md", "compare.json", "summary.md", "metrics.json", "numbers.json"]:
        assert (project / "reports/test-box" / path).stat().st_size > 0, path
    summary = read("reports/test-box/summary.md")
    assert "No baseline yet" in summary and "Commit `reports/`" in summary
    assert "this workload is broken on purpose" in summary          # FAILED, with its error
    cuda = json.loads(read("reports/test-box/bench/cuda-fp32.json"))
    assert cuda["status"] == "SKIPPED" and "not available" in cuda["reason"]
    bench = json.loads(read("reports/test-box/bench/cpu-fp32.json"))
    good = bench["workloads"]["mine"]["processes"]
    assert len(good) == 2 and all(len(p["modes"]["eager"]["steady_s"]) == 3 for p in good)
    samples = [s for p in good for s in p["modes"]["eager"]["steady_s"]]
    assert samples == list(kept(samples))       # 6 significant digits: what git keeps
    medians = json.loads(read("reports/test-box/numbers.json"))
    assert medians["bench"]["cpu-fp32"]["mine"]["eager"]["steady_ms"] > 0

    again = dvc("repro")   # nothing changed: only the cheap env check runs
    assert "Running stage 'bench" not in again.stdout and "Running stage 'compare" not in again.stdout
    assert_an_unrelated_install_measures_nothing_again(project, monkeypatch)

    # Code is a dependency: editing the statistics makes every stage that runs them stale.
    stats_py = project / "stages/judge/stats.py"
    original = stats_py.read_text()
    stats_py.write_text(original + "\n# edited\n")
    stale = json.loads(dvc("status", "--json").stdout)
    assert {"bench@cpu-fp32", "numerics@cpu-fp32", "compare", "report"} <= set(stale)
    stats_py.write_text(original)
    assert "bench@cpu-fp32" not in json.loads(dvc("status", "--json").stdout)

    git("add", "-A", cwd=project)
    git("commit", "-qm", "baseline", cwd=project)
    committed = git("ls-files", "reports", cwd=project).stdout
    assert "bench/cpu-fp32.json" in committed and "cuda-fp32" not in committed  # no device here
    assert (project / "reports/test-box/bench/cuda-fp32.json").is_file()        # DVC's output
    assert_a_no_op(repository)
    assert_a_clone_only_draws(repository, project.relative_to(repository))

    dvc("repro", "-f")
    assert "No environment change against the baseline." in read("reports/test-box/env/env.md")
    compare = read("reports/test-box/compare.md")
    rows = json.loads(read("reports/test-box/compare.json"))["rows"]
    assert not [r for r in rows if r["verdict"] in ("NEW", "MISSING")], rows
    verdicts = {(r["stage"], r["cell"], r["workload"], r["metric"]): r["verdict"] for r in rows}
    assert verdicts[("bench", "cuda-fp32", "*", "cell")] == "SKIPPED"
    assert verdicts[("bench", "cpu-fp32", "broken", "status")] == "FAILED"
    for metric in ("steady_s", "first_call_s", "warmup_s"):
        assert verdicts[("bench", "cpu-fp32", "mine", metric)] in (
            "EQUIVALENT", "INCONCLUSIVE", "IMPROVED", "REGRESSED", "NOT COMPARABLE")
    assert verdicts[("numerics", "cpu-fp32", "mine", "numerics")] == "EQUIVALENT"
    assert "No baseline" not in compare
    diff = dvc("metrics", "diff", "HEAD", "--md", "--all")   # what the two runs decided
    assert "| Path" in diff.stdout and "verdicts.failed" in diff.stdout, diff.stdout

    # A corrupt baseline is a message in the report, not a traceback.
    record = project / "reports/test-box/bench/cpu-fp32.json"
    good = record.read_text()
    record.write_text('{"schema_version": 1, "kind": "ben')
    git("commit", "-qam", "corrupt", cwd=project)
    record.write_text(good)                 # this run's record; the baseline's is corrupt
    run_module("torchgate.compare")
    compare = read("reports/test-box/compare.md")
    assert "baseline present but unusable: unreadable" in compare and "is not valid JSON" in compare

    # A baseline from another CPU model: timings NOT COMPARABLE, numerics still compared.
    git("checkout", "HEAD~1", "--", "reports/test-box/bench/cpu-fp32.json", cwd=project)
    commit_baseline_from_another_cpu(project)
    run_module("torchgate.compare")
    rows = json.loads(read("reports/test-box/compare.json"))["rows"]
    steady = [r for r in rows if r["metric"] == "steady_s"]
    assert steady and all(r["verdict"] == "NOT COMPARABLE" for r in steady)
    assert "Some Other CPU 9000" in steady[0]["note"]
    assert any(r["stage"] == "numerics" and r["verdict"] == "EQUIVALENT" for r in rows)


def assert_an_unrelated_install_measures_nothing_again(project: Path, monkeypatch) -> None:
    """`pip install pytest-fake`, as it were: packages.json lists it, env.json stays byte for
    byte, and nothing is stale; a torch that changed would make every cell stale."""
    env_json = project / "reports/test-box/env/env.json"
    before = env_json.read_bytes()
    site = project.parent / "site"
    dist(site, "pytest-fake", "1.0")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ["PYTHONPATH"]]))
    env_stage = dvc("repro", "reports/env/dvc.yaml")
    assert "captured: unchanged" in env_stage.stdout, env_stage.stdout + env_stage.stderr
    assert env_json.read_bytes() == before
    assert "pytest-fake" in (env_json.parent / "packages.json").read_text()
    status = dvc("status").stdout
    assert "bench@" not in status and "numerics@" not in status, status
    env_json.write_text(before.decode().replace('"torch": "', '"torch": "0.0.1+'))
    status = dvc("status").stdout
    assert "bench@" in status and "numerics@" in status           # what it would show
    env_json.write_bytes(before)


def assert_a_no_op(repository: Path) -> None:
    """After a commit, `dvc repro` runs only the env check (its fingerprint unchanged) and
    rewrites nothing, neither a report nor a lock file."""
    again = dvc("repro")
    ran = [line for line in again.stdout.splitlines() if line.startswith("Running stage")]
    assert ran == ["Running stage 'reports/env/dvc.yaml:env':"], again.stdout
    assert "stands" in again.stdout
    assert git("status", "--porcelain", cwd=repository).stdout == ""


def assert_a_clone_only_draws(repository: Path, project: Path) -> None:
    """A fresh clone has no pictures (never committed): `dvc repro` draws them by running the
    two stages that draw, measuring nothing, and the pages and the lock stay the committed.
    A cell this machine cannot run (no CUDA) is found so again: its record, never committed,
    comes out byte for byte the lock's, and nothing after it runs."""
    assert not [f for f in git("ls-files", cwd=repository).stdout.split() if f.endswith(".png")]
    clone = repository.parent / f"{repository.name}-clone"
    git("clone", "-q", str(repository), str(clone), cwd=repository.parent)
    drawn = dvc("repro", cwd=clone / project, check=False)
    ran = [line for line in drawn.stdout.splitlines() if line.startswith("Running stage")]
    assert ran == ["Running stage 'reports/env/dvc.yaml:env':",
                   "Running stage 'bench@cuda-fp32':", "Running stage 'numerics@cuda-fp32':",
                   "Running stage 'report':", "Running stage 'history':"], \
        drawn.stdout + drawn.stderr
    drawn_here, drawn_there = (
        sorted(p.name for p in (where / "reports/test-box/pictures").rglob("*.png"))
        for where in (repository / project, clone / project))
    assert drawn_here and drawn_there == drawn_here
    assert git("status", "--porcelain", cwd=clone).stdout == ""


CHAIN = '''
import torch
from torchgate.workloads import Workload


def chain(*, device, dtype, compile, seed, width=64):
    layers = {layers}
    gen = torch.Generator().manual_seed(seed)
    ws = [torch.randn(width, width, generator=gen) / width ** 0.5 for _ in range(layers)]
    x = torch.randn(32, width, generator=gen)

    def step():
        y = x
        for w in ws:
            y = torch.tanh(y @ w)
        return y
    return Workload(step=step, items=layers)
'''


@pytest.mark.slow
def test_a_pull_request_is_measured_beside_its_baseline_in_lock_step(project):
    """A user's workload module doing twice the work on a branch: `dvc repro` measures the
    baseline's code again, beside this run's, and tests them pair by pair."""
    module = project / "stages/workloads/chain.py"
    module.write_text(CHAIN.format(layers=8))
    (project / "conf/workload/chain.yaml").write_text(
        "chain:\n  _target_: torchgate.workloads.chain.chain\n")
    # One workload: an unchanged one's lock-step pairs are tested in test_ab.py (an A/A).
    compose(project / "params.yaml", ["matrix=smoke", "workload=[chain]",
                                      # 6 pairs: twice the work is a paired t of ~12 on
                                      # a quiet machine; in CI's loaded suite 4 pairs read a
                                      # pair spread of 23 % once (t 6, p 0.07 after Holm)
                                      "bench.processes=6", "bench.samples=4",
                                      "bench.adaptive_budget_s=0", "gate.fail_on=[]",
                                      # the pairing is tested here, not the busy rule: a
                                      # neighbour's load must not leave the pairs out
                                      "compare.busy_share=1",
                                      # one thread a worker: the two arms' workers are alive
                                      # at once, and two threads each fight for 2 cores
                                      "device.cpu.threads=1",
                                      # both arms' host instructions (test_instructions.py)
                                      "bench.instructions=always",
                                      f"arms.cache_dir={project / 'cache'}"],
            conf=project / "conf")
    (project / ".gitignore").write_text("__pycache__/\ncache/\n")
    dvc("repro")
    git("add", "-A", cwd=project)
    git("commit", "-qm", "baseline", cwd=project)
    [first] = json.loads(read("reports/test-box/bench/cpu-fp32.json"))["workloads"]["chain"][
        "counts"]
    module.write_text(CHAIN.format(layers=16))
    run = dvc("repro")
    assert "the baseline measured again beside this run" in run.stdout
    record = json.loads(read("reports/test-box/bench/cpu-fp32.json"))
    assert record["ab"]["rebuilt"] and record["ab"]["interleaved"]
    base = record["ab"]["baseline"]["workloads"]["chain"]["processes"]
    assert {p["modes"]["eager"]["items"] for p in base} == {8}       # the baseline's code
    assert {p["modes"]["eager"]["items"]
            for p in record["workloads"]["chain"]["processes"]} == {16}
    rows = {(r["stage"], r["workload"], r["metric"]): r
            for r in json.loads(read("reports/test-box/compare.json"))["rows"]}
    steady = rows["bench", "chain", "steady_s"]
    assert steady["verdict"] == "REGRESSED" and steady["change"]["test"] == "paired t"
    assert 1.5 < steady["change"]["ratio"] < 2.6
    assert rows["numerics vs rebuilt", "chain", "drift"]["verdict"] == "REGRESSED"
    counted = rows["bench", "chain", "instructions"]
    assert counted["verdict"] == "REGRESSED" and 1.8 < counted["now"] / counted["base"] < 2.2
    [again] = record["ab"]["baseline"]["workloads"]["chain"]["counts"]
    assert len(record["workloads"]["chain"]["counts"]) == 1
    # the baseline's code counted again, in another process, arm and drawn layout: within
    # 4 SDs of two counts' difference (0.31 % seen on a CI runner for this small count)
    a, b = (c["modes"]["eager"]["instructions"] for c in (first, again))
    spread = prior_spread(BY_NAME["instructions"], min(a, b))
    assert abs(math.log(b / a)) < 4 * math.sqrt(2) * spread, (a, b)
    counter = again["counter"]       # how it was counted, in the record
    assert counter["tool"] == "callgrind" and counter["threads"] == 1 and counter["calls"] == 2
    assert "ASLR off" in counter["settings"] and counter["version"]
    summary = read("reports/test-box/summary.md")
    assert "measured again" in summary
    assert "**REGRESSED** host instructions per call" in summary


@pytest.mark.slow
def test_the_readme_upgrade_workflow_line_by_line_where_no_variable_names_the_machine(
        project, monkeypatch, tmp_path_factory):
    """The README's upgrade workflow as a new user types it, without TORCHGATE_MACHINE: for
    `dvc exp run -S` DVC composes params.yaml from conf/ itself, and names the machine as
    `torchgate compose` does (the resolver DVC loads from .dvc/config's hydra.plugins_path).
    Replaced, and only that, what cannot run here: the what-if's candidate is another venv of
    this torch (an A/A: nothing downloaded), and the upgrade's `pip install` is left out."""
    monkeypatch.delenv("TORCHGATE_MACHINE")
    derived = machine.derived_name()
    small = ["matrix=smoke", "bench.processes=2", "bench.samples=3", "bench.adaptive_budget_s=0",
             # the mechanics, not the busy rule or the gate: A/A pairs may read either way
             "compare.busy_share=1", "gate.fail_on=[]"]
    # The quick start's first look and its commit, as written (the smoke line with the small
    # settings appended: a tiny matrix where the block allows); the default matrix's line is
    # the same command at 12 minutes.
    first, default, commit = readme_commands("## Quick start", block=1)
    assert first.startswith("torchgate compose matrix=smoke && dvc repro")
    assert default == "torchgate compose && dvc repro" and commit.startswith("git add reports ")
    git("add", "-A", cwd=project)
    git("commit", "-qm", "the clone", cwd=project)
    for line in (first.replace("matrix=smoke", " ".join(small)), commit):
        done = subprocess.run(["bash", "-c", line], cwd=project, capture_output=True, text=True)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    assert git("status", "--porcelain", cwd=project).stdout == ""      # the baseline, whole
    committed = read("params.yaml")
    assert yaml.safe_load(committed)["machine"] == {"name": derived, "derived": True}
    python_b = child_venv(tmp_path_factory.mktemp("arm") / "venv-b")    # outside the project
    bench_json, compare_md = (f"reports/{derived}/bench/cpu-fp32.json",
                              f"reports/{derived}/compare.md")
    steps = readme_commands("## The upgrade workflow")
    for line in steps:
        if line.startswith("dvc exp run -S 'candidate.pip="):
            dvc("exp", "run", *[a for o in small for a in ("-S", o)],
                "-S", f"candidate.python={python_b}")
            assert yaml.safe_load(read("params.yaml"))["candidate"]["python"] == str(python_b)
            record = json.loads(read(bench_json))
            base = record["ab"]["baseline"]["workloads"]["matmul_relu"]["processes"]
            cand = record["workloads"]["matmul_relu"]["processes"]
            assert record["ab"]["candidate"]["python"] == str(python_b)
            assert record["env_candidate"]["python"]["version"]   # the candidate's environment
            # the arms in lock-step pairs, tested pair by pair
            assert record["ab"]["interleaved"] and [p["round"] for p in base] == [
                p["round"] for p in cand] == [0, 1]
            rows = json.loads(read(f"reports/{derived}/compare.json"))["rows"]
            steady = next(r for r in rows if r["metric"] == "steady_s")
            assert steady["change"]["test"] == "paired t"
            compare = read(compare_md)
            assert f"candidate `{python_b}`" in compare and "lock-step pairs" in compare
            assert "A/B environments" in read(f"reports/{derived}/bench/cpu-fp32.md")
        elif line == "git checkout params.yaml":
            git("checkout", "params.yaml", cwd=project)
            assert read("params.yaml") == committed
        elif line.startswith("pip install ") and line.endswith(" && dvc repro"):
            run = dvc("repro")                  # the same torch: the recorded numbers again
            assert "Running stage 'bench@cpu-fp32'" in run.stdout
            assert json.loads(read(bench_json)).get("ab") is None, "the what-if measured again"
        elif line.startswith("dvc exp run -S baseline.rev="):
            continue       # a pull request's: test_a_pull_request_is_measured_beside_...
        elif line.startswith("git add reports dvc.lock && git commit "):
            subprocess.run(["bash", "-c", line], cwd=project, check=True, capture_output=True)
            assert git("status", "--porcelain", cwd=project).stdout == ""   # nothing left over
        else:
            pytest.fail(f"the README's upgrade workflow has a line this test does not follow: "
                        f"{line!r}")
    assert len(steps) == 5 and not (project / "reports" / "None").exists()
