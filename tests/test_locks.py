"""Declared environments: a lock per machine (conf/env/<machine>.txt). A change that leaves it
alone is a code-only comparison in one interpreter; one that edits it rebuilds the baseline
from its own lock and names what moved; packages that do not matter never count."""
import dataclasses
import re

import pytest

from torchgate import lock
from torchgate.arms import locks
from torchgate.arms.plan import plan
from torchgate.core.errors import UserError

from . import test_arms
from .test_arms import WORKLOAD, cfg_of, commit_all

repo = test_arms.repo          # the fixture: a committed project with its env

LOCK = locks.Lock("3.11.7", {"torch": "2.13.0+cpu", "numpy": "2.1.0", "rich": "13.0.0"})


def _write(repo, pins, python="3.11.7"):
    path = repo / locks.path_of("test-box")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(locks.text_of(locks.Lock(python, pins), "test-box"))


def test_a_lock_round_trips_and_installs_torch_from_its_index():
    text = locks.text_of(LOCK, "box")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text
    assert locks.parse(text, "x") == dataclasses.replace(LOCK, index=locks.TORCH_INDEX + "cpu")
    # Any other pip option would change what `pip install -r` installs behind torchgate's
    # back (its view of the lock is the pins): refused, with the line.
    for option in ("-r other.txt", "--requirement other.txt", "-e .", "--index-url https://x",
                   "--find-links /wheels", "--extra-index-url https://elsewhere.invalid/simple"):
        with pytest.raises(UserError, match=rf"x line 2 is a pip option torchgate does not "
                                            rf"read: '{re.escape(option)}'"):
            locks.parse(f"# python 3.11.7\n{option}\ntorch==2.13.0\n", "x")
    # pip reads `===` as arbitrary equality and joins a line ending in `\` with the next: no
    # pin as torchgate reads one, so refused, not read as version "=2.1.0" or "2.1.0\".
    for line in ("torch>=2", "numpy===2.1.0", "numpy==2.1.0\\", "numpy==2.1.0 \\"):
        with pytest.raises(UserError, match=rf"x line 2 is not `name==version`: "
                                            rf"{re.escape(repr(line))}"):
            locks.parse(f"# python 3.11.7\n{line}\n", "x")
    assert locks.parse("# python 3.11\ntorch==2.13.0+cu130\nx==1!2.0.post1\n", "x").pins == {
        "torch": "2.13.0+cu130", "x": "1!2.0.post1"}
    with pytest.raises(UserError, match="does not say its Python version"):
        locks.parse("torch==2.13.0\n", "x")


def test_changes_name_torch_first_and_only_what_matters():
    after = {"torch": "2.14.1+cpu", "numpy": "2.1.0", "rich": "14.0.0", "idna": "3.0"}
    assert locks.changes(LOCK.pins, after) == [
        "torch 2.13.0+cpu -> 2.14.1+cpu", "+idna 3.0", "rich 13.0.0 -> 14.0.0"]
    assert locks.changes(LOCK.pins, after, {"torch", "numpy"}) == [
        "torch 2.13.0+cpu -> 2.14.1+cpu"]


def test_an_unchanged_lock_is_a_code_only_comparison_in_this_interpreter(repo):
    _write(repo, {"torch": "2.13.0+cpu", "rich": "13.0.0"})
    commit_all(repo, "the lock")
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    base, now = plan(cfg_of(repo, measure="rebuild")).arms
    assert base.python is None and base.code is not None     # one interpreter, its code


def test_a_lock_that_bumps_a_package_that_does_not_matter_rebuilds_nothing(repo):
    _write(repo, {"torch": "2.13.0+cpu", "rich": "13.0.0"})
    commit_all(repo, "the lock")
    _write(repo, {"torch": "2.13.0+cpu", "rich": "14.0.0"})   # env.json does not list rich
    found = plan(cfg_of(repo))
    assert found.unchanged and [a.name for a in found.arms] == ["now"]


def test_a_lock_that_moves_torch_rebuilds_the_baseline_from_its_lock_and_says_so(repo, monkeypatch):
    _write(repo, {"torch": "2.13.0+cpu", "rich": "13.0.0"})
    commit_all(repo, "the lock")
    _write(repo, {"torch": "2.14.1+cpu", "rich": "13.0.0"})
    built = []
    monkeypatch.setattr("torchgate.arms.plan._materialise",
                        lambda cfg, spec, cache, log: built.append(spec) or "/venv/bin/python")
    found = plan(cfg_of(repo))
    base, now = found.arms
    assert found.rebuilt and base.python == "/venv/bin/python" and now.python is None
    assert built[0].pins == ("rich==13.0.0", "torch==2.13.0+cpu") and built[0].python == "3.11.7"
    assert built[0].index == locks.TORCH_INDEX + "cpu"        # the baseline lock's torch index
    assert "packages differ from this run's (torch 2.13.0+cpu -> 2.14.1+cpu)" in found.note
    # this interpreter (env.json: torch 2.13.0+cpu) is not the PR's lock: said, with the fix
    assert "This environment differs from its lock conf/env/test-box.txt (torch 2.14.1+cpu " \
           "-> 2.13.0+cpu): install it" in found.note


def test_the_lock_command_writes_and_checks_this_environment(repo, monkeypatch, capsys):
    monkeypatch.setattr(lock, "distributions",
                        lambda: {"torch": "2.13.0+cpu", "torchgate": "0.1", "pip": "24"})
    lock.main(["--params", "params.yaml"])
    written = locks.read("test-box")
    assert written.pins == {"torch": "2.13.0+cpu"}             # not the harness, not pip
    with pytest.raises(SystemExit) as ok:
        lock.main(["--check"])
    assert ok.value.code == 0
    monkeypatch.setattr(lock, "distributions", lambda: {"torch": "2.14.1+cpu"})
    with pytest.raises(SystemExit) as moved:
        lock.main(["--check"])
    assert moved.value.code == 1
    assert "differs from conf/env/test-box.txt: torch 2.13.0+cpu -> 2.14.1+cpu" in \
        capsys.readouterr().out


UV_OUT = """--index-url https://download.pytorch.org/whl/cpu
dvc==3.66.1
    # via torchgate (pyproject.toml)
numpy==2.3.4
pip==25.3
torch==2.14.1+cpu
Torch_Audio_X==0.1
"""


def test_a_lock_for_a_machine_you_cannot_log_in_to_is_resolved_by_uv(repo, monkeypatch,
                                                                     tmp_path, capsys):
    """A hosted runner's lock, written here: uv resolves torchgate's dependencies for its
    platform and Python; the lock pins what uv printed (less pip), names the Python as given
    and torch's index for its +cpu build, and a Python given with its patch (or with no
    platform) is one line."""
    calls = tmp_path / "calls"
    uv = tmp_path / "uv"
    uv.write_text(f"#!/bin/sh\necho \"$@\" > {calls}\ncat <<'OUT'\n{UV_OUT}OUT\n")
    uv.chmod(0o755)
    monkeypatch.setattr(lock.venv, "uv_binary", lambda: str(uv))
    lock.main(["--python-platform", "x86_64-manylinux_2_28", "--python-version", "3.11",
               "--torch-backend", "cpu"])
    argv = calls.read_text().split()
    assert argv[:2] == ["pip", "compile"] and argv[2].endswith("pyproject.toml")
    for flag, value in (("--python-platform", "x86_64-manylinux_2_28"),
                        ("--python-version", "3.11"), ("--torch-backend", "cpu")):
        assert argv[argv.index(flag) + 1] == value
    written = locks.read("test-box")
    assert written.python == "3.11" and written.index == locks.TORCH_INDEX + "cpu"
    assert written.pins == {"dvc": "3.66.1", "numpy": "2.3.4", "torch": "2.14.1+cpu",
                            "torch-audio-x": "0.1"}
    # the runner's 3.11.x is the lock's Python: only major.minor count
    assert locks.minor("3.11.9") == locks.minor(written.python)
    # the machine it names, whatever params.yaml's (or TORCHGATE_MACHINE) says
    assert locks.read("ci-cpu") is None
    lock.main(["--machine", "ci-cpu", "--python-platform", "x86_64-manylinux_2_28",
               "--python-version", "3.11", "--torch-backend", "cpu"])
    assert locks.read("ci-cpu").pins == written.pins
    monkeypatch.setenv("TORCHGATE_MACHINE", "gpu-box")
    lock.main(["--python-platform", "x86_64-manylinux_2_28", "--python-version", "3.11"])
    assert locks.read("gpu-box") is not None
    with pytest.raises(SystemExit):
        lock.main(["--machine", "../up", "--python-platform", "linux", "--python-version",
                   "3.11"])
    with pytest.raises(UserError, match="give major.minor, e.g. 3.11"):
        lock.another_platform("linux", "3.11.7", None)
    with pytest.raises(SystemExit):
        lock.main(["--python-platform", "linux"])
    assert "needs --python-version" in capsys.readouterr().err
