"""torchgate.core.baseline.git: baseline revisions and files, from a subdirectory project and inside
the throwaway repositories of `dvc exp run --temp` / `--queue`."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchgate.core.baseline.git import read_file, resolve_rev
from torchgate.core.errors import UserError

from .projects import ROOT, dvc


def git(*args, cwd) -> str:
    """Run git with an identity of its own: CI machines have no global git config."""
    done = subprocess.run(["git", "-c", "user.email=test@torchgate.invalid",
                           "-c", "user.name=torchgate test", *args],
                          cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=path)
    git("symbolic-ref", "HEAD", "refs/heads/main", cwd=path)  # whatever init.defaultBranch says
    return path


@pytest.fixture(autouse=True)
def no_outer_repository(tmp_path, monkeypatch):
    # tmp_path must not be taken for part of a repository that happens to enclose it.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)


def one_line(exc_info) -> str:
    message = str(exc_info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("sub", ["sub", "sub dir"])
def test_project_in_a_subdirectory(tmp_path, sub):
    repo = new_repo(tmp_path / "repo")
    (repo / sub / "reports" / "a b").mkdir(parents=True)
    (repo / sub / "reports" / "x.json").write_text('{"v": 1}\n')
    (repo / sub / "reports" / "a b" / "y z.json").write_text('{"v": 2}\n')
    sha = commit_all(repo, "one")

    project = repo / sub
    assert resolve_rev("main", project) == sha
    assert resolve_rev("HEAD", project) == sha
    assert read_file(sha, "reports/x.json", project) == '{"v": 1}\n'
    assert read_file(sha, "reports/a b/y z.json", project) == '{"v": 2}\n'
    assert read_file(sha, f"{sub}/reports/x.json", repo) == '{"v": 1}\n'  # from the repo root
    assert read_file(sha, "reports/x.json", repo) is None  # a repo-root path is not found
    assert read_file(sha, "reports/missing.json", project) is None
    assert read_file(sha, "reports", project) is None  # a directory is not a file
    assert read_file(None, "reports/x.json", project) is None


def test_first_run_without_commits(tmp_path):
    repo = new_repo(tmp_path / "repo")
    assert resolve_rev("HEAD", repo) is None
    assert resolve_rev("main", repo) is None


def test_bad_rev_is_a_one_line_error(tmp_path):
    repo = new_repo(tmp_path / "repo")
    (repo / "f").write_text("x")
    commit_all(repo, "one")
    with pytest.raises(UserError) as caught:
        resolve_rev("v9", repo)
    assert one_line(caught).startswith("baseline.rev 'v9' is not a commit in this repository")
    with pytest.raises(UserError):
        resolve_rev("--all", repo)  # never taken for an option


def test_not_a_repository_is_a_one_line_error(tmp_path):
    for folder in (tmp_path, tmp_path / "missing"):
        with pytest.raises(UserError) as caught:
            resolve_rev("HEAD", folder)
        assert "is not a git repository; run `git init`" in one_line(caught)


def test_git_missing_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on it
    with pytest.raises(UserError) as caught:
        resolve_rev("HEAD", tmp_path)
    assert one_line(caught).startswith("git is not installed")


@pytest.mark.parametrize("executor", ["standalone/tmpa1", "tmpb2"])  # --temp, --queue
def test_inside_a_dvc_executor_copy(tmp_path, executor):
    """The layout DVC's TempDirExecutor makes, without running DVC: a repository under
    <project>/.dvc/tmp/exps/ holding only the experiment's refs, HEAD detached."""
    original = new_repo(tmp_path / "orig")
    (original / "f").write_text("1")
    main = commit_all(original, "main")
    git("checkout", "-q", "-b", "other", cwd=original)
    (original / "g").write_text("1")
    other = commit_all(original, "other")
    git("checkout", "-q", "-b", "feature", "main", cwd=original)
    (original / "h").write_text("1")
    head = commit_all(original, "feature")
    git("tag", "v1", main, cwd=original)

    copy = new_repo(original / ".dvc" / "tmp" / "exps" / executor)
    git("fetch", "-q", str(original), f"{head}:refs/exps/exec/EXEC_HEAD", cwd=copy)
    git("checkout", "-q", "--detach", "refs/exps/exec/EXEC_HEAD", cwd=copy)

    assert resolve_rev("HEAD", copy) == head
    assert resolve_rev(main, copy) == main  # an ancestor's hash resolves locally
    assert resolve_rev("main", copy) == main  # a name is looked up in the original
    assert resolve_rev("v1", copy) == main
    with pytest.raises(UserError) as caught:
        resolve_rev("other", copy)  # not an ancestor: its commit was never copied
    assert f"'other' (commit {other[:10]}) is not in the history" in one_line(caught)
    with pytest.raises(UserError) as caught:
        resolve_rev("v9", copy)
    assert "is not a commit in this repository" in one_line(caught)


@pytest.mark.slow
@pytest.mark.parametrize("sub", ["", "proj dir"])
def test_dvc_exp_run_temp_resolves_a_branch(tmp_path, monkeypatch, sub):
    """End to end: a stage run by `dvc exp run --temp` resolves `main` from a feature branch."""
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    repo = new_repo(tmp_path / "repo")
    project = repo / sub
    project.mkdir(exist_ok=True)
    dvc("init", "-q", *(["--subdir"] if sub else []), cwd=project)
    (project / "reports").mkdir()
    (project / "reports" / "x.json").write_text('{"v": 1}\n')
    main = commit_all(repo, "main")
    git("checkout", "-q", "-b", "feature", cwd=repo)
    (project / "probe.py").write_text(
        "from torchgate.core.baseline.git import read_file, resolve_rev\n"
        "rev = resolve_rev('main')\n"
        "open('rev.txt', 'w').write(rev + ' ' + read_file(rev, 'reports/x.json'))\n")
    stage = {"cmd": f'"{sys.executable}" probe.py', "outs": [{"rev.txt": {"cache": False}}]}
    (project / "dvc.yaml").write_text(json.dumps({"stages": {"probe": stage}}))  # JSON is YAML
    commit_all(repo, "feature")

    dvc("exp", "run", "--temp", cwd=project)
    refs = git("for-each-ref", "--format=%(refname)", "refs/exps", cwd=repo).split()
    [exp] = [ref for ref in refs if not ref.startswith("refs/exps/exec/")]
    assert git("show", f"{exp}:./rev.txt", cwd=project) == f'{main} {{"v": 1}}'
