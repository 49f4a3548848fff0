"""Git access for the baseline: resolve `baseline.rev` and read files committed there.

The torchgate project (the folder holding dvc.yaml) may be a subdirectory of a larger git
repository, and `dvc exp run --temp` / `--queue` run it in a throwaway copy of the
repository that holds only the experiment's own refs; both are handled here.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from torchgate.core.errors import UserError

# DVC's temporary and queued executors live in <original project>/.dvc/tmp/exps/...
_EXECUTOR_DIR = (".dvc", "tmp", "exps")
UNSHALLOW = ("fetch the history with `git fetch --unshallow` (or actions/checkout with "
             "fetch-depth: 0)")


def _git(*args: str, root: Path, raw: bool = False) -> subprocess.CompletedProcess:
    """git's answer as text (undecodable bytes replaced), or as bytes with `raw`."""
    # `-C` rather than cwd=: a missing folder is then git's error, not "git is not installed".
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              **({} if raw else {"encoding": "utf-8", "errors": "replace"}))
    except FileNotFoundError:
        raise UserError("git is not installed; torchgate keeps its baseline history in git") from None


def is_shallow(root: Path = Path(".")) -> bool:
    """Whether this clone holds only part of its history (`git clone --depth`, GitHub's
    actions/checkout by default): older commits, and the runs committed in them, are absent."""
    found = _git("rev-parse", "--is-shallow-repository", root=root)
    return found.returncode == 0 and found.stdout.strip() == "true"


def _not_a_repository(root: Path, stderr: str) -> UserError:
    """Why git will not work in `root`: not a repository, or one git refuses to trust."""
    if "dubious ownership" in stderr:
        found = re.search(r"dubious ownership in repository at '([^']+)'", stderr)
        where = found.group(1) if found else str(Path(root).resolve())
        return UserError(f"git refuses the repository at {where}: it is owned by another user "
                         "(\"dubious ownership\"); if you trust it, run `git config --global "
                         f"--add safe.directory {where}`")
    return UserError(f"{Path(root).resolve()} is not a git repository; run `git init` "
                     "(torchgate keeps its baseline history in git)")


def _commit(rev: str, root: Path) -> str | None:
    """The full hash of the commit `rev` names in the repository at `root`, else None."""
    found = _git("rev-parse", "--verify", "-q", f"{rev}^{{commit}}", root=root)
    return found.stdout.strip() if found.returncode == 0 else None


def _original_project(root: Path) -> Path | None:
    """The project a DVC temp/queue executor was copied from; None outside an executor."""
    parts = Path(root).resolve().parts
    for i in range(len(parts) - len(_EXECUTOR_DIR), 0, -1):  # innermost first
        if parts[i:i + len(_EXECUTOR_DIR)] == _EXECUTOR_DIR:
            return Path(*parts[:i])
    return None


def resolve_rev(rev: str, root: Path = Path("."), setting: str = "baseline.rev") -> str | None:
    """The full hash of the commit `rev` (branch, tag, commit, HEAD~1...) names.

    None when the repository has no commits yet (first run: there is no baseline).
    `root` is the project folder; it may be a subdirectory of the git repository.
    Inside `dvc exp run --temp` / `--queue`, whose repository holds only the experiment's
    refs, a name such as `main` is resolved in the original repository instead.
    Raises UserError (one line) when `root` is not in a git repository, git is missing,
    or `rev` is not a commit.
    """
    inside = _git("rev-parse", "--is-inside-work-tree", root=root)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        raise _not_a_repository(root, inside.stderr)
    if _commit("HEAD", root) is None:
        return None  # no commits yet: there is no baseline
    commit = _commit(rev, root)
    if commit is not None:
        return commit
    original = _original_project(root)
    commit = _commit(rev, original) if original is not None else None
    if commit is None and is_shallow(root):
        raise UserError(f"{setting} {rev!r} is not a commit in this clone, and this clone is "
                        f"shallow: {UNSHALLOW}")
    if commit is None:
        raise UserError(f"{setting} {rev!r} is not a commit in this repository; "
                        f"set {setting} to a branch, tag or commit")
    # The executor received only the experiment's history: an ancestor of the experiment's
    # commit is there, a commit on another line of history is not (and cannot be read).
    if _git("cat-file", "-e", f"{commit}^{{commit}}", root=root).returncode == 0:
        return commit
    raise UserError(f"{setting} {rev!r} (commit {commit[:10]}) is not in the history of "
                    "this queued or temporary DVC experiment, which holds only its own commits; "
                    f"set {setting} to an ancestor of the experiment's commit, "
                    "or run the experiment in the workspace (dvc exp run without --temp/--queue)")


def parent(commit: str, root: Path = Path(".")) -> str | None:
    """The first parent of `commit`; None for a root commit."""
    return _commit(f"{commit}^", root)


def read_file(commit: str | None, path: str, root: Path = Path(".")) -> str | None:
    """The text of file `path` (relative to `root`) as committed at `commit`; None if absent.

    `root` is the project folder, the repository root or a subdirectory of it: `REV:./path`
    is resolved relative to the folder git runs in. None also for a directory or no commit.
    """
    if commit is None:
        return None
    # `cat-file blob` rather than `show`: no textconv, and a directory is an error, not a listing.
    # Bytes, decoded strictly: a committed record is read as the workspace's reader reads it.
    shown = _git("cat-file", "blob", f"{commit}:./{Path(path).as_posix()}", root=root, raw=True)
    if shown.returncode != 0:
        return None
    try:
        return shown.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} at {commit[:10]} is not UTF-8 text (byte {exc.start}); "
                        "restore it from an earlier commit") from None


def _paths(path: str | Path | list) -> list[str]:
    return [Path(p).as_posix() for p in (path if isinstance(path, list) else [path])]


def commits_touching(commit: str | None, path: str | Path | list, limit: int,
                     root: Path = Path(".")) -> list[str]:
    """The newest `limit` commits up to `commit` that changed `path` (relative to `root`; or
    any of a list of paths), newest first: the committed runs of one report file."""
    if commit is None or limit <= 0:
        return []
    found = _git("log", "--format=%H", f"-n{limit}", commit, "--", *_paths(path), root=root)
    return found.stdout.split() if found.returncode == 0 else []


def log_touching(commit: str | None, path: str | Path | list, limit: int,
                 root: Path = Path(".")) -> list[tuple[str, str]]:
    """commits_touching with each commit's date (committer's, ISO 8601), newest first."""
    if commit is None or limit <= 0:
        return []
    found = _git("log", "--format=%H %cI", f"-n{limit}", commit, "--", *_paths(path),
                 root=root)
    if found.returncode != 0:
        return []
    return [tuple(line.split(" ", 1)) for line in found.stdout.splitlines() if " " in line]


def names_in(commit: str | None, path: str | Path, root: Path = Path(".")) -> list[str]:
    """The names in folder `path` (relative to `root`) as committed at `commit`, sorted; []
    where it is absent: which machines, which cells a commit holds."""
    if commit is None:
        return []
    found = _git("ls-tree", "--name-only", f"{commit}:./{Path(path).as_posix()}", root=root)
    return sorted(found.stdout.splitlines()) if found.returncode == 0 else []


def object_id(commit: str | None, path: str | Path, root: Path = Path(".")) -> str | None:
    """The id of `path`'s tree or blob at `commit`: equal ids, equal contents."""
    if commit is None:
        return None
    found = _git("rev-parse", "-q", "--verify", f"{commit}:./{Path(path).as_posix()}",
                 root=root)
    return found.stdout.strip() or None if found.returncode == 0 else None
