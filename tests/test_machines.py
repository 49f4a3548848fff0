"""Machines: each keeps its own reports, history and baseline in one repository; reports
committed before machines were named are read as the machine's past; the env stage refuses a
params.yaml composed for another machine."""
import dataclasses
import random
from pathlib import Path

import pytest

from torchgate import env
from torchgate.core import machine
from torchgate.core.baseline import load_baseline, load_history, load_run
from torchgate.core.errors import UserError
from torchgate.core.records import write_record
from torchgate.core.records.schema import BenchRecord, EnvRecord

from .projects import git, init_repo
from .records import bench, process

CELL = "cpu-fp32"
ENV = {"hardware": {"cpu_model": "cpu"}, "torch": {"version": "2.13.0", "num_threads": 2}}


def _run(root: Path, reports: Path, seed: int, message: str) -> None:
    rec = dataclasses.replace(
        bench({"w": [process(rng=random.Random(seed * 10 + i)) for i in range(4)]}), cell=CELL)
    write_record(root / reports / "bench" / f"{CELL}.json", rec)
    write_record(root / reports / "env" / "env.json", EnvRecord({**ENV, "seed": seed}))
    git("add", "-A", cwd=root)
    git("commit", "-qm", message, cwd=root)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    init_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _seeds(found) -> list[int]:
    return [env.env["seed"] for _, env in found[CELL]]


def test_two_machines_keep_a_history_each_in_one_repository(repo):
    for seed in range(3):
        _run(repo, Path("reports/laptop"), seed, f"laptop {seed}")
        _run(repo, Path("reports/runner"), 10 + seed, f"runner {seed}")
    head = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    assert _seeds(load_history(head, [CELL], 20, reports=Path("reports/laptop"))) == [2, 1, 0]
    assert _seeds(load_history(head, [CELL], 20, reports=Path("reports/runner"))) == [12, 11, 10]
    inputs = load_run("HEAD", [CELL], ("bench",), reports=Path("reports/runner"))
    assert inputs.env_base.env["seed"] == 12        # the runner's own baseline, committed last


def test_reports_committed_before_machines_are_the_machines_past(repo):
    _run(repo, Path("reports"), 0, "before machines")
    before = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    git("rm", "-rq", "reports", cwd=repo)
    _run(repo, Path("reports/box"), 1, "the first run per machine")
    head = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    assert _seeds(load_history(head, [CELL], 20, reports=Path("reports/box"))) == [1, 0]
    old = load_baseline(before, Path("reports/box/bench/cpu-fp32.json"), BenchRecord)
    assert old is not None and old.cell == CELL


def test_the_env_stage_refuses_params_composed_for_another_machine(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(machine.ENV_VAR, "runner")
    with pytest.raises(UserError, match="TORCHGATE_MACHINE=runner but params.yaml names "
                                        "machine 'laptop'"):
        env.check_machine("laptop", derived=False)
    monkeypatch.delenv(machine.ENV_VAR)
    monkeypatch.setattr(machine, "derived_name", lambda: "this-cpu-2c")
    with pytest.raises(UserError, match="composed on other hardware"):
        env.check_machine("other-cpu-8c", derived=True)
    env.check_machine("this-cpu-2c", derived=True)
    env.check_machine("laptop", derived=False)      # a declared name stands anywhere
    for unset in ("None", "null"):                  # what DVC makes of a null name
        with pytest.raises(UserError, match="machine.name is not set"):
            env.check_machine(unset, derived=False)


@pytest.mark.parametrize("name", ["box\n", "box\nb", ".gitkeep", "env", "-box", "a" * 65, ""])
def test_a_name_that_cannot_be_a_reports_folder_is_refused(name):
    """A trailing newline too (it would split the env stage's command line), and what
    reports/ holds besides machines (.gitkeep, env) is never listed as one."""
    assert machine.check_name(name)
    assert machine.check_name("box-b.2") is None
