"""Clones that CI makes: a shallow one (GitHub's actions/checkout by default) says so, with the
fix, instead of "not a commit" and a history that silently shrinks to one point; a repository
git refuses to trust (another user's) says so, with the fix, instead of "run git init"."""
import subprocess

import pytest

from torchgate.core.baseline import git as baseline_git
from torchgate.core.baseline import load_history, load_timeline
from torchgate.core.errors import UserError
from torchgate.core.records import write_record
from torchgate.core.records.schema import EnvRecord

from .projects import REPORTS, git
from .records import bench, process

FIX = "fetch the history with `git fetch --unshallow` (or actions/checkout with fetch-depth: 0)"


@pytest.fixture
def origin(tmp_path):
    """A repository with three committed runs of one cell."""
    root = tmp_path / "origin"
    root.mkdir()
    git("init", "-q", cwd=root)
    git("config", "user.email", "t@t.invalid", cwd=root)
    git("config", "user.name", "t", cwd=root)
    for i in range(3):
        write_record(root / "reports" / "test-box" / "bench" / "cpu-fp32.json", bench({"w": [process(steady=1e-3 * (1 + i / 100))]}))
        write_record(root / "reports" / "test-box" / "env" / "env.json", EnvRecord({"run": i}))
        (root / "run.txt").write_text(f"{i}\n")
        git("add", "-A", cwd=root)
        git("commit", "-qm", f"run {i}", cwd=root)
    return root


def test_a_shallow_clone_says_so_with_the_fix(origin, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(clone)],
                   check=True, capture_output=True)
    assert baseline_git.is_shallow(clone) and not baseline_git.is_shallow(origin)
    with pytest.raises(UserError) as err:
        baseline_git.resolve_rev("HEAD~1", clone)
    assert str(err.value) == (f"baseline.rev 'HEAD~1' is not a commit in this clone, and this "
                              f"clone is shallow: {FIX}")
    with pytest.raises(UserError, match="is not a commit in this repository; set baseline.rev"):
        baseline_git.resolve_rev("no-such-branch", origin)     # a full clone: as before

    head = baseline_git.resolve_rev("HEAD", clone)
    notes = []
    assert len(load_history(head, ["cpu-fp32"], 20, clone, reports=REPORTS, notes=notes)["cpu-fp32"]) == 1
    assert notes == ["History: this clone is shallow, so the runs committed before its oldest "
                     f"commit are missing; {FIX}"]
    timeline_notes = []
    load_timeline(head, ["cpu-fp32"], 50, clone, reports=REPORTS, notes=timeline_notes)
    assert timeline_notes == notes
    full = []
    assert len(load_history(baseline_git.resolve_rev("HEAD", origin), ["cpu-fp32"], 20, origin,
                            reports=REPORTS, notes=full)["cpu-fp32"]) == 3
    assert full == []


def test_a_repository_git_does_not_trust_names_the_safe_directory_fix(origin, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")       # no safe.directory of the user's
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")  # git's own switch for its tests
    with pytest.raises(UserError) as err:
        baseline_git.resolve_rev("HEAD", origin)
    assert str(err.value) == (f"git refuses the repository at {origin}: it is owned by another "
                              "user (\"dubious ownership\"); if you trust it, run `git config "
                              f"--global --add safe.directory {origin}`")
    assert "git init" not in str(err.value)


def test_a_folder_outside_any_repository_still_says_git_init(tmp_path):
    with pytest.raises(UserError, match="is not a git repository; run `git init`"):
        baseline_git.resolve_rev("HEAD", tmp_path)
