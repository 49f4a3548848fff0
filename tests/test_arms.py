"""Arms: which arms a run measures and why, checkouts of other revisions, rebuilt venvs, and a
worker running another revision's workloads with this harness."""
import json
import os
import sys
from importlib import metadata
from pathlib import Path

import pytest

from torchgate.arms import checkout, venv
from torchgate.arms.plan import plan, workload_paths
from torchgate.core import config, names
from torchgate.core.errors import UserError
from torchgate.core.records import write_record
from torchgate.core.records.job import Arm
from torchgate.core.records.schema import EnvRecord
from torchgate.launch.jobs import job_for
from torchgate.launch.local import run_worker

from .projects import git, make_project

WORKLOAD = '''
import torch
from torchgate.workloads import Workload


def tagged(*, device, dtype, compile, seed, size=8):
    x = torch.ones(size)
    return Workload(step=lambda: x * 2, items={items})
'''


def raw(**extra):
    return {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
            "workload": {"t": {"_target_": "torchgate.workloads.tagged.tagged", "size": 8}},
            "matrix": {"modes": ["eager"]}, "arms": {"cache_dir": extra.pop("cache")}, **extra}


def commit_all(root: Path, message: str) -> None:
    git("add", "-A", cwd=root)
    git("commit", "-qm", message, cwd=root)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A project whose workload module `tagged` reports items=1, committed with its env."""
    root = make_project(tmp_path / "repo", tmp_path / "repo")
    (root / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=1))
    (root / "params.yaml").write_text(json.dumps(raw(cache=str(tmp_path / "cache"))))
    env = {"python": {"version": "3.11.7"}, "distributions": {"torch": "2.13.0+cpu"}}
    write_record(root / "reports" / "test-box" / "env" / "env.json", EnvRecord(env))
    commit_all(root, "baseline")
    monkeypatch.chdir(root)
    return root


def cfg_of(repo: Path, **extra):
    data = json.loads((repo / "params.yaml").read_text())
    data["baseline"] = {**data.get("baseline", {}), **extra}
    return config.parse(data)


def test_same_code_and_packages_compare_with_the_recorded_numbers(repo):
    found = plan(cfg_of(repo))
    assert [a.name for a in found.arms] == ["now"] and not found.rebuilt and found.unchanged
    assert "recorded numbers: its packages and workload code are this run's" in found.note
    recorded = plan(cfg_of(repo, measure="recorded"))
    assert "(baseline.measure=recorded)" in recorded.note
    assert recorded.unchanged and not recorded.rebuilt    # it may join the mean of like runs
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    edited = plan(cfg_of(repo, measure="recorded"))
    assert not edited.unchanged and [a.name for a in edited.arms] == ["now"]   # nothing built


def test_a_sweep_committed_and_run_again_is_unchanged(repo):
    """The baseline's workloads are swept as this run's: the same sweep is the same code."""
    data = json.loads((repo / "params.yaml").read_text())
    data["sweep"] = {"size": [4, 8]}
    (repo / "params.yaml").write_text(json.dumps(data))
    commit_all(repo, "a sweep")
    found = plan(config.parse(data))
    assert found.unchanged and [a.name for a in found.arms] == ["now"]


def test_a_workload_selected_or_dropped_or_its_time_limit_is_no_change_of_code(repo):
    """The baseline selected `t`; this run adds `u`, then drops `t`, then gives `t` a tighter
    limit: the code of what both select is the same, so the recorded numbers decide (`u` is
    NEW there), and the limit is this run's in any arm."""
    data = json.loads((repo / "params.yaml").read_text())
    other = {"_target_": "torchgate.workloads.tagged.tagged", "size": 4}
    for workload in ({**data["workload"], "u": other}, {"u": other},
                     {"t": {**data["workload"]["t"], "_timeout_s_": 1}}):
        found = plan(config.parse({**data, "workload": workload}))
        assert [a.name for a in found.arms] == ["now"] and found.unchanged, found.note
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    limited = plan(config.parse({**data, "workload": {"t": {**data["workload"]["t"],
                                                              "_timeout_s_": 1}}}))
    assert limited.rebuilt and limited.arms[0].workloads["t"].timeout_s == 1
    assert "torch 2.13.0+cpu" in limited.note


def test_edited_workload_code_measures_the_baseline_again_beside_this_run(repo):
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    found = plan(cfg_of(repo))
    base, now = found.arms
    assert found.rebuilt and (base.name, now.name) == ("baseline", "now")
    assert base.python is None                       # same packages: this interpreter
    assert "workload code differs" in found.note
    exported = Path(base.code) / "stages" / "workloads" / "tagged.py"
    assert "items=1" in exported.read_text() and not exported.stat().st_mode & 0o222
    assert base.workloads["t"].target == "torchgate.workloads.tagged.tagged"
    again = plan(cfg_of(repo))                       # the checkout is reused
    assert again.arms[0].code == base.code


def test_code_committed_before_its_run_is_measured_beside_the_code_the_reports_measured(repo):
    """A commit, then `dvc repro`: `baseline.rev` (HEAD) holds the new code and the old
    reports; the baseline is the code of the commit that wrote them."""
    bench = repo / "reports" / "test-box" / "bench"
    bench.mkdir()
    (bench / "cpu-fp32.json").write_text("{}")
    commit_all(repo, "a run")
    measured = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    commit_all(repo, "the change, committed before its run")
    found = plan(cfg_of(repo))
    base, _ = found.arms
    assert found.rebuilt and not found.unchanged and "workload code differs" in found.note
    assert base.rev == measured and f"the workloads at {measured[:10]}" in found.note
    assert "items=1" in (Path(base.code) / "stages" / "workloads" / "tagged.py").read_text()


def main_moved_after_its_run(repo: Path) -> tuple[str, str]:
    """Main commits a run (items=1, size 8), then changes its workload code and configuration
    (items=2, size 16) without a run of its own: (the run's commit, the base's)."""
    bench = repo / "reports" / "test-box" / "bench"
    bench.mkdir()
    (bench / "cpu-fp32.json").write_text("{}")
    commit_all(repo, "a run")
    ran = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    data = json.loads((repo / "params.yaml").read_text())
    data["workload"]["t"]["size"] = 16
    (repo / "params.yaml").write_text(json.dumps(data))
    commit_all(repo, "main moves on, no run")
    return ran, git("rev-parse", "HEAD", cwd=repo).stdout.strip()


def test_a_merge_base_newer_than_its_reports_is_the_code_the_baseline_arm_runs(repo):
    """The README's merge-base line on a main that moved since its last run: the baseline arm
    runs the base's code and configuration, so nothing main changed is blamed on the branch."""
    ran, base = main_moved_after_its_run(repo)
    git("checkout", "-qb", "branch", cwd=repo)
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=3))
    commit_all(repo, "the branch's change")
    found = plan(cfg_of(repo, rev=base))
    arm = found.arms[0]
    assert found.rebuilt and arm.rev == base and f"the workloads at {base[:10]}" in found.note
    assert "items=2" in (Path(arm.code) / "stages" / "workloads" / "tagged.py").read_text()
    assert arm.workloads["t"].kwargs["size"] == 16
    # The hosted check: its reports from the run's commit, its code the base's.
    hosted = plan(cfg_of(repo, rev=ran, code=base, measure="rebuild"))
    assert hosted.arms[0].rev == base and hosted.arms[0].workloads["t"].kwargs["size"] == 16
    # The default (HEAD): a change committed before its run is the run's change.
    assert plan(cfg_of(repo)).arms[0].rev == ran


def test_a_branch_that_leaves_the_workloads_alone_is_an_a_a_of_the_bases_code(repo):
    """A docs-only branch on a main that moved since its run: its recorded numbers measured
    other code, so the base is measured again, with the branch's (= the base's) workloads."""
    ran, base = main_moved_after_its_run(repo)
    git("checkout", "-qb", "docs", cwd=repo)
    (repo / "NOTES.md").write_text("docs only\n")
    commit_all(repo, "docs")
    found = plan(cfg_of(repo, rev=base))
    arm = found.arms[0]
    assert found.rebuilt and not found.unchanged and arm.code is None
    assert f"its recorded numbers measured other code ({ran[:10]})" in found.note
    assert plan(cfg_of(repo, rev=ran)).arms[0].rev == ran      # against the run: the change


@pytest.mark.slow
def test_the_other_arm_runs_its_revisions_workload_with_this_harness(repo, monkeypatch):
    """The worker imports torchgate from this harness and the workload from the checkout."""
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    # The harness is the project's own, as where torchgate is installed from the project.
    monkeypatch.setattr(names, "PACKAGE", repo / "stages")
    cfg = cfg_of(repo)
    base, now = plan(cfg).arms
    cell = cfg.cells()[0]
    results = {}
    for arm in (base, now):
        job = job_for(cfg, cell, [cfg.workloads["t"]], "bench", arm=arm)
        results[arm.name] = run_worker(job, timeout_s=120)
    assert results["baseline"]["modes"]["eager"]["items"] == 1, results["baseline"]
    assert results["now"]["modes"]["eager"]["items"] == 2


def test_a_baseline_that_cannot_be_rebuilt_says_why(repo):
    write_record(repo / "reports" / "test-box" / "env" / "env.json",
                 EnvRecord({"python": {"version": "3.11.7"}}))
    commit_all(repo, "an env.json without its package list")
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    found = plan(cfg_of(repo))
    assert found.arms == (Arm("now"),)
    assert "could not be measured again (the baseline's env.json does not list its installed " \
           "packages" in found.note
    with pytest.raises(UserError, match="does not list its installed packages"):
        plan(cfg_of(repo, measure="rebuild"))


def test_a_baseline_revision_without_an_environment_is_the_first_run(repo):
    (repo / "reports" / "test-box" / "env" / "env.json").unlink()
    commit_all(repo, "no env.json yet")
    found = plan(cfg_of(repo))
    assert found.arms == (Arm("now"),) and "No baseline at HEAD yet" in found.note


def test_a_run_whose_environment_is_not_recorded_says_what_to_run(repo):
    (repo / "reports" / "test-box" / "env" / "env.json").unlink()
    assert "not recorded by the env stage" in plan(cfg_of(repo)).note
    with pytest.raises(UserError, match=r"run `python -m torchgate.env` \(or dvc repro\) first"):
        plan(cfg_of(repo, measure="rebuild"))


def test_workload_paths_are_the_workloads_room_and_the_projects_own_modules(repo):
    (repo / "mine.py").write_text("")
    specs = config.parse_workloads({"a": {"_target_": "mine.fn"},
                                    "b": {"_target_": "numpy.linalg.norm"}})
    assert workload_paths(specs, repo) == ["mine.py", "stages/workloads"]
    assert not checkout.differs(git("rev-parse", "HEAD", cwd=repo).stdout.strip(),
                                ["stages/workloads"], repo)
    (repo / "stages" / "workloads" / "new.py").write_text("")    # untracked counts
    assert checkout.differs("HEAD", ["stages/workloads"], repo)


def test_a_project_in_a_subdirectory_is_exported_alone(tmp_path):
    outer = tmp_path / "mono"
    (outer / "proj" / "stages").mkdir(parents=True)
    (outer / "proj" / "stages" / "x.py").write_text("x = 1\n")
    (outer / "other.txt").write_text("not the project\n")
    git("init", "-q", cwd=outer)
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A", cwd=outer)
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "m", cwd=outer)
    commit = git("rev-parse", "HEAD", cwd=outer).stdout.strip()
    code = checkout.export(commit, tmp_path / "cache", outer / "proj")
    assert (code / "stages" / "x.py").read_text() == "x = 1\n"
    assert not (code / "other.txt").exists()


# ---- venvs ------------------------------------------------------------------------------------

def test_a_spec_pins_the_recorded_set_but_what_overrides_replace():
    spec = venv.spec_from({"torch": "2.13.0+cpu", "numpy": "2.4.6", "pip": "23.2",
                           "torchgate": "0.1.0", "typing-extensions": "4"}, "3.11.7",
                          overrides=["Torch>=2.14"], installer="pip")
    assert spec.pins == ("numpy==2.4.6", "typing-extensions==4")
    assert venv.requirement_name("typing.extensions[x]>=4") == "typing-extensions"
    assert spec.key != venv.spec_from({}, "3.11.7", installer="pip").key


def test_a_python_that_is_not_installed_is_one_line():
    with pytest.raises(UserError, match=r"Python 2\.6 \(the recorded environment's\) is not "
                                        r"installed here; install python2\.6"):
        venv.interpreter("2.6.9")


def small_spec(installer: str, version: str | None = None, **extra) -> venv.VenvSpec:
    tabulate = version or metadata.version("tabulate")
    python = ".".join(map(str, sys.version_info[:3]))
    return venv.VenvSpec(python, (f"tabulate=={tabulate}",), installer=installer, **extra)


@pytest.mark.parametrize("installer", ["uv", pytest.param("pip", marks=pytest.mark.slow)])
def test_a_venv_is_built_once_checked_and_reused(tmp_path, installer):
    lines = []
    python = venv.materialise(small_spec(installer), tmp_path, lines.append)
    assert Path(python).exists() and "building a venv with 1 pinned packages" in lines[0]
    assert venv.materialise(small_spec(installer), tmp_path, lines.append) == python
    assert lines[-1].startswith("reusing the venv")
    assert [p.name for p in (tmp_path / "venvs").iterdir() if not p.name.endswith(".lock")] \
        == [Path(python).parents[1].name]


def test_a_failed_build_is_one_line_and_leaves_nothing(tmp_path):
    with pytest.raises(UserError) as err:
        venv.materialise(small_spec("uv", version="0.0.0.999"), tmp_path)
    assert "uv pip install failed:" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError, match="got torch None, not the recorded 9.9.9"):
        venv.materialise(small_spec("uv", torch="9.9.9"), tmp_path)
    assert not [p for p in (tmp_path / "venvs").iterdir() if not p.name.endswith(".lock")]


def test_pips_index_settings_reach_uv(monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels/torch-cpu")
    args = venv.uv_index_args()
    assert "--find-links" in args and "/wheels/torch-cpu" in args
    assert args[-2:] == ["--index-strategy", "unsafe-best-match"]


def test_a_full_disk_during_a_build_is_one_line_and_leaves_nothing(tmp_path):
    from torchgate.arms.cache import ensure

    def build(folder):
        folder.mkdir()
        (folder / "half-written").write_text("x")
        raise OSError(28, "No space left on device")
    with pytest.raises(UserError, match="no space left on the device while building .*; free "
                                        "space or set arms.cache_dir to another disk"):
        ensure(tmp_path / "venvs" / "x", build)
    assert not (tmp_path / "venvs" / "x").exists()


def test_a_candidate_revision_that_does_not_exist_is_one_line(repo):
    data = json.loads((repo / "params.yaml").read_text())
    data["candidate"] = {"rev": "no-such-branch"}
    with pytest.raises(UserError, match="candidate.rev 'no-such-branch' is not a commit in this "
                                        "repository; set candidate.rev to a branch, tag or commit"):
        plan(config.parse(data))


def test_a_requirement_no_index_serves_is_one_line(repo, tmp_path):
    data = json.loads((repo / "params.yaml").read_text())
    data["candidate"] = {"pip": ["torch==0.0.1"]}
    here = {"python": {"version": ".".join(map(str, sys.version_info[:3]))},
            "distributions": {"tabulate": metadata.version("tabulate")}}
    write_record(repo / "reports" / "test-box" / "env" / "env.json", EnvRecord(here))
    with pytest.raises(UserError) as err:
        plan(config.parse(data))
    message = str(err.value)
    assert message.startswith("uv pip install failed: ") and "torch" in message, message
    assert "\n" not in message


def test_a_rebuilt_environment_must_hold_the_recorded_versions(tmp_path, monkeypatch):
    real = venv.installed
    monkeypatch.setattr(venv, "installed", lambda python: {**real(python), "tabulate": "0.1"})
    with pytest.raises(UserError, match=r"the rebuilt environment differs from the recorded one "
                                        r"in 1 package\(s\), e.g. tabulate==.* \(got 0.1\)"):
        venv.materialise(small_spec("uv"), tmp_path)
    assert not [p for p in (tmp_path / "venvs").iterdir() if not p.name.endswith(".lock")]



# ---- what stops a rebuild: one line, and under auto the recorded numbers -------------------

def test_a_committed_link_out_of_the_project_falls_back_to_the_recorded_numbers(repo, tmp_path):
    os.symlink("/etc", repo / "outside")                   # an absolute link, committed
    commit_all(repo, "a link to an absolute path")
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    head = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    with pytest.raises(UserError) as err:
        checkout.export(head, tmp_path / "export", repo)
    message = str(err.value)
    assert message.startswith(f"cannot export the project at {head[:10]}: 'outside' is a link "
                              "to an absolute path"), message
    assert "\n" not in message
    leftovers = [p for p in (tmp_path / "export" / "code").iterdir() if p.suffix != ".lock"]
    assert not leftovers                                   # nothing half-made is kept
    found = plan(cfg_of(repo))
    assert found.arms == (Arm("now"),)
    assert "the baseline could not be measured again (cannot export the project at" in found.note
    with pytest.raises(UserError, match="'outside' is a link to an absolute path"):
        plan(cfg_of(repo, measure="rebuild"))


def test_a_baseline_env_without_a_python_section_is_one_line(repo):
    write_record(repo / "reports" / "test-box" / "env" / "env.json",
                 EnvRecord({"distributions": {"torch": "2.12.0+cpu"}}))
    commit_all(repo, "an env.json without its python section")
    write_record(repo / "reports" / "test-box" / "env" / "env.json", EnvRecord(
        {"python": {"version": "3.11.7"}, "distributions": {"torch": "2.13.0+cpu"}}))
    found = plan(cfg_of(repo))                             # packages differ: a rebuild is due
    assert found.arms == (Arm("now"),)
    assert ("the baseline's env.json lists its packages but not its Python version (no python "
            "section)") in found.note
    with pytest.raises(UserError, match="not its Python version"):
        plan(cfg_of(repo, measure="rebuild"))


def test_a_run_whose_environment_moved_is_not_unchanged(repo):
    """Packages and code the baseline's, but a variable inductor reads (or a flag, a driver,
    the kernel) changed: a timing can move, so the gate may not call the run unchanged."""
    env = {"python": {"version": "3.11.7"}, "distributions": {"torch": "2.13.0+cpu"},
           "env_vars": {"TORCHINDUCTOR_MAX_AUTOTUNE": "1"}}
    write_record(repo / "reports" / "test-box" / "env" / "env.json", EnvRecord(env))
    found = plan(cfg_of(repo))
    assert not found.unchanged and [a.name for a in found.arms] == ["now"]
    assert found.note.endswith("its environment is not: env_vars.TORCHINDUCTOR_MAX_AUTOTUNE "
                               "changed, which can move a timing.")
    assert not plan(cfg_of(repo, measure="recorded")).unchanged


def test_a_record_names_an_interpreter_without_the_users_absolute_paths(tmp_path,
                                                                        monkeypatch):
    """Inside the project, relative to it; in the home folder (a rebuilt arm's venv in
    ~/.cache/torchgate), from `~`; elsewhere as given."""
    from torchgate.core.machine import portable
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    monkeypatch.chdir(home / "proj")                  # a project in the home folder
    monkeypatch.setenv("HOME", str(home))
    assert portable(str(home / "proj/.venv/bin/python")) == ".venv/bin/python"
    assert portable(str(home / ".cache/torchgate/venvs/ab12/bin/python")) == \
        "~/.cache/torchgate/venvs/ab12/bin/python"
    assert portable("/opt/py/bin/python") == "/opt/py/bin/python"
