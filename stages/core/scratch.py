"""This user's scratch space: `<temp dir>/torchgate-<uid>`, private (created 0700, checked to be
the user's own and writable by nobody else, or refused), so that on a shared host no other
user can plant an inductor cache entry that a worker would unpickle, nor find their own
compiled numerics failing on a folder the first user created.

It holds the inductor cache that numerics workers share, and one folder per running process
(`runs/<pid>-*`: worker files and compile caches), locked (flock) while that process lives. A
stage that was killed cannot remove its folder; the next run removes every folder whose lock
is free.
"""
from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from torchgate.core.errors import UserError

_run: tuple[Path, int, int] | None = None     # (folder, lock fd, the pid that made it)
YOUNG_S = 5      # a folder just made, not yet locked by its process
UNLOCKED_S = 24 * 3600


def private(path: Path) -> Path:
    """`path` as a folder only this user may write, made if missing."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    found = os.lstat(path)
    problem = ("is not a folder" if not stat.S_ISDIR(found.st_mode)
               else f"belongs to another user (uid {found.st_uid})"
               if found.st_uid != os.getuid()
               else "is writable by other users" if found.st_mode & 0o022 else None)
    if problem:
        raise UserError(f"{path} {problem}; torchgate keeps compiled code there and will not "
                        "trust it: remove it, or set TMPDIR to a folder of your own")
    return path


def user_dir() -> Path:
    return private(Path(tempfile.gettempdir()) / f"torchgate-{os.getuid()}")


def compile_cache(name: str, cold: bool) -> Path:
    """The inductor cache `name` (`<run>/<unit>`) in this machine's own scratch, whoever named
    it (a Ray driver names it; the node resolves it under its user's private folder, never a
    path another user may own); emptied first when `cold`. A run's caches untouched for a day
    are removed (a node never hears that the run ended)."""
    run, _, unit = name.partition("/")
    if not run or not unit or {run, unit} & {".", ".."} or "/" in unit:
        raise ValueError(f"not a compile cache name: {name!r}")
    root = private(user_dir() / "compile")
    folder = root / run
    if not folder.exists():
        for old in root.iterdir():
            if time.time() - old.stat().st_mtime > UNLOCKED_S:
                shutil.rmtree(old, ignore_errors=True)
    cache = private(private(folder) / unit)
    if cold:
        shutil.rmtree(cache)
        cache = private(cache)
    return cache


def inductor_cache() -> Path:
    """The inductor cache that numerics and fresh-process workers share (compiled once)."""
    return private(user_dir() / "inductor")


def run_dir() -> Path:
    """This process's folder: made on first use, locked while the process lives, removed at
    its exit; the folders of processes that are gone are removed first."""
    global _run
    if _run is None or _run[2] != os.getpid():
        runs = private(user_dir() / "runs")
        sweep(runs)
        folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=runs))
        fd = os.open(folder / "lock", os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        _run = (folder, fd, os.getpid())
        atexit.register(shutil.rmtree, folder, True)
    return _run[0]


def sweep(runs: Path) -> list[Path]:
    """Remove the folders of processes that ended without removing their own: their lock is
    free (a process locks its folder within microseconds of making it). A folder without a
    lock (on a Ray node: the compile caches a driver named) goes after a day. Returns them."""
    removed = []
    for folder in runs.iterdir():
        lock = folder / "lock"
        try:
            if lock.exists():
                if time.time() - lock.lstat().st_mtime < YOUNG_S or _locked(lock):
                    continue
            elif time.time() - folder.lstat().st_mtime < UNLOCKED_S:
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _locked(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
