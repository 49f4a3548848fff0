"""The project folder at another revision: what the other arm's workloads are. Exported once
per commit (`git archive`) into the arms cache, read-only, and reused; the measuring harness is
never taken from it (measure.worker imports only the workloads from it)."""
from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import tarfile
from pathlib import Path

from torchgate.arms.cache import ensure
from torchgate.core.errors import UserError
from torchgate.core.vocabulary import short


def _git(*args: str, root: Path, text: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=text)


def export(commit: str, cache: Path, root: Path = Path(".")) -> Path:
    """The project folder (`root`, which may be a subdirectory of the repository) as it was
    committed at `commit`, under `cache`/code/<commit>."""
    prefix = _git("rev-parse", "--show-prefix", root=root).stdout.strip()
    key = commit + (f"-{hashlib.sha256(prefix.encode()).hexdigest()[:8]}" if prefix else "")
    target = cache / "code" / key

    def build(folder: Path) -> None:
        # From the project folder, `.` is that folder, and the paths come relative to it.
        archive = _git("archive", "--format=tar", commit, "--", ".", root=Path(root),
                       text=False)
        if archive.returncode != 0:
            tail = (archive.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            raise UserError(f"cannot export the project at {short(commit)}: {tail}")
        _extract(archive.stdout, folder, f"the project at {short(commit)}")
    ensure(target, build)
    return target


def unpack(archive: bytes, target: Path, what: str = "the checkout") -> Path:
    """A checkout from its tar archive, read-only, unless `target` holds it already."""
    ensure(target, lambda folder: _extract(archive, folder, what))
    return target


def _extract(archive: bytes, folder: Path, what: str) -> None:
    """A member the "data" filter refuses (a committed symbolic link to an absolute path or
    out of the project, a device file) or a broken archive is a UserError, so that
    baseline.measure=auto falls back to the recorded numbers."""
    folder.mkdir()
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            # "data": no links out of the folder, no device files (Python >= 3.10.12)
            tar.extractall(folder, **({"filter": "data"} if hasattr(tarfile, "data_filter")
                                      else {}))
    except tarfile.TarError as exc:
        raise UserError(f"cannot export {what}: {exc} (a committed link must stay inside "
                        "the project folder)") from None
    _read_only(folder)


def pack(folder: Path) -> bytes:
    """A checkout as a tar archive, to be unpacked on a cluster node (`unpack`)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(folder, arcname=".")
    return out.getvalue()


def _read_only(folder: Path) -> None:
    """A checkout is a record of a revision: edits to it would silently change an arm."""
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = Path(dirpath) / name
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def differs(commit: str, paths: list[str], root: Path = Path(".")) -> bool:
    """Whether any of `paths` (relative to the project folder) differs between `commit` and
    the working tree, uncommitted and untracked files included."""
    if not paths:
        return False
    changed = _git("diff", "--quiet", commit, "--", *paths, root=root)
    if changed.returncode not in (0, 1):
        raise UserError(f"git diff against {short(commit)} failed: "
                        f"{(changed.stderr.strip().splitlines() or ['?'])[-1]}")
    untracked = _git("ls-files", "--others", "--exclude-standard", "--", *paths, root=root)
    return changed.returncode == 1 or bool(untracked.stdout.strip())
