"""The baseline: report files as committed at a git revision (`baseline.rev`)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from stages.core.errors import UserError
from stages.core.records import parse_record


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise UserError("git is not installed; torchgate keeps its baseline in git") from None


def resolve_rev(rev: str, root: Path = Path(".")) -> str | None:
    """The commit for `rev`, or None when the repository has no commits yet (first run)."""
    inside = _git("rev-parse", "--is-inside-work-tree", cwd=root)
    if inside.returncode != 0:
        raise UserError(f"{root.resolve()} is not a git repository; run `git init` "
                        "(torchgate keeps its baseline history in git)")
    if _git("rev-parse", "--verify", "-q", "HEAD", cwd=root).returncode != 0:
        return None  # no commits yet: there is no baseline
    found = _git("rev-parse", "--verify", "-q", f"{rev}^{{commit}}", cwd=root)
    if found.returncode != 0:
        raise UserError(f"baseline.rev {rev!r} is not a commit in this repository; "
                        "set baseline.rev to a branch, tag or commit (default HEAD)")
    return found.stdout.strip()


def read_file(commit: str | None, relpath: str, root: Path = Path(".")) -> str | None:
    """The file's text at `commit`, or None when it was not committed there."""
    if commit is None:
        return None
    shown = _git("show", f"{commit}:{relpath}", cwd=root)
    return shown.stdout if shown.returncode == 0 else None


def load_baseline(commit: str | None, relpath: str, kind: str,
                  root: Path = Path(".")) -> dict | None:
    """The baseline record at `relpath`, None if absent; UserError if corrupt."""
    text = read_file(commit, relpath, root)
    if text is None:
        return None
    return parse_record(text, kind, f"baseline {relpath} at {commit[:10]}")
