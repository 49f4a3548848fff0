"""Where rebuilt arms are kept: one folder shared by every project of the user, so that a venv
or a checkout built once is reused by later runs (`venvs/<key>`, `code/<commit>`).

An entry is built in place, at its final path (a venv's scripts and bin/activate name the
folder they were made in: a venv renamed into place runs its temporary path), by one builder
at a time (flock on `<entry>.build.lock`: a second builder of the same entry waits, then reuses
it), and is complete once its marker, written last, is there: a build that was killed leaves
an entry without it, which the next builder removes and builds again. A process that uses an
entry holds `<entry>.use.lock` shared until it ends, so that no eviction or rebuild removes
it under a running worker. Before use an entry is checked: it must be the user's own (another
user's would be executed as this one), and pass the caller's check (a venv: its spec, and its
interpreter runs). Unlocked incomplete entries and temporaries of older versions
(`.<name>.*.tmp`) older than STALE_S are removed whenever the cache is used; complete entries
beyond `arms.cache_max_gb` are evicted, least recently used first, after a build, or by hand:

    python -m torchgate.arms.cache                      # what it holds
    python -m torchgate.arms.cache --evict --keep-gb 20
"""
from __future__ import annotations

import argparse
import errno
import fcntl
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from torchgate.core import cli
from torchgate.core.config import Config
from torchgate.core.errors import UserError, one_line_errors

MARKER = ".torchgate-complete"   # written last: the entry is complete; its mtime: last use
KINDS = ("venvs", "code")
STALE_S = 3 * 3600     # a build takes a minute (5.5 GB venv: 22 s with uv, 70 s with pip)
_held: dict[Path, int] = {}    # entry -> this process's shared use lock on it
Log = Callable[[str], None]


def cache_root(cfg: Config) -> Path:
    return cache_at(cfg.arms.cache_dir)


def cache_at(cache_dir: str | None) -> Path:
    """`arms.cache_dir`, else $TORCHGATE_CACHE, else the user's cache folder (on a cluster
    node: that node's)."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    if os.environ.get("TORCHGATE_CACHE"):
        return Path(os.environ["TORCHGATE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "torchgate"


def complete(path: Path) -> bool:
    return (path / MARKER).is_file()


def ensure(path: Path, build: Callable[[Path], None],
           check: Callable[[Path], str | None] = lambda path: None,
           log: Log = lambda line: None) -> bool:
    """`path` complete, checked and held for use until this process ends (or `release()`):
    reused, or made by `build(path)`, which creates `path`. True when built now."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep(path.parent)
    use = _use_lock(path)
    try:
        return _ensure(path, build, check, log, use)
    except BaseException:
        _held.pop(path, None)     # a failed build holds nothing: other runs must not wait
        os.close(use)
        raise


def _ensure(path: Path, build: Callable[[Path], None], check: Callable[[Path], str | None],
            log: Log, use: int) -> bool:
    _flock(use, fcntl.LOCK_SH, path, log)      # waits only while an entry is being removed
    if complete(path) and _problem(path, check) is None:
        return _using(path, use, built=False)
    fcntl.flock(use, fcntl.LOCK_UN)
    with _build_lock(path, log):
        problem = _problem(path, check) if complete(path) else None
        if complete(path) and problem is None:         # another run built it meanwhile
            fcntl.flock(use, fcntl.LOCK_SH)
            return _using(path, use, built=False)
        if problem:
            log(f"building {path} again: {problem}")
        if path.exists() or path.is_symlink():
            _owned(path)
            _flock(use, fcntl.LOCK_EX, path, log)     # no run may be using what is removed
            _remove(path)
        try:
            build(path)
            (path / MARKER).write_text("")
        except BaseException as exc:
            _remove(path)
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise UserError(f"no space left on the device while building {path}; free "
                                "space or set arms.cache_dir to another disk") from None
            raise
        fcntl.flock(use, fcntl.LOCK_SH)    # before the build lock goes: no eviction between
    return _using(path, use, built=True)


def release() -> None:
    """Let go of every entry this process uses (a Ray task's, at its end)."""
    for fd in _held.values():
        os.close(fd)
    _held.clear()


def _using(path: Path, use: int, built: bool) -> bool:
    _held[path] = use
    os.utime(path / MARKER)                 # its last use, for eviction
    return built


def _problem(path: Path, check: Callable[[Path], str | None]) -> str | None:
    _owned(path)
    return check(path)


def _owned(path: Path) -> None:
    owner = path.lstat().st_uid
    if owner != os.getuid():
        raise UserError(f"{path} in the arms cache belongs to another user (uid {owner}) and "
                        "would run as you; set arms.cache_dir to a folder of your own")


def _lock_file(path: Path, kind: str) -> int:
    lock = path.parent / f"{path.name}.{kind}.lock"
    try:
        return os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except PermissionError:
        raise UserError(f"{lock} in the arms cache belongs to another user; set "
                        "arms.cache_dir to a folder of your own") from None


def _use_lock(path: Path) -> int:
    return _held[path] if path in _held else _lock_file(path, "use")


@contextmanager
def _build_lock(path: Path, log: Log) -> Iterator[None]:
    fd = _lock_file(path, "build")
    try:
        _flock(fd, fcntl.LOCK_EX, path, log)
        yield
    finally:
        os.close(fd)


def _flock(fd: int, how: int, path: Path, log: Log) -> None:
    """flock, saying so when it has to wait for another run."""
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"waiting for another run that builds or uses {path}")
        fcntl.flock(fd, how)


@contextmanager
def _free(path: Path) -> Iterator[bool]:
    """Both locks of an entry, if nobody holds either now: then it may be removed."""
    fds = [_lock_file(path, "build"), _lock_file(path, "use")]
    try:
        try:
            for fd in fds:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            free = True
        except BlockingIOError:
            free = False
        yield free
    finally:
        for fd in fds:
            os.close(fd)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        (path / MARKER).unlink(missing_ok=True)      # incomplete first, whatever follows
        shutil.rmtree(path, ignore_errors=True)


def sweep(folder: Path, now: float | None = None) -> list[Path]:
    """Remove the litter of killed builds in `folder` (venvs/ or code/): this user's entries
    without their marker whose build lock is free, and older versions' `.*.tmp` folders, when
    older than STALE_S. Returns what it removed."""
    now = time.time() if now is None else now
    removed = []
    for path in folder.iterdir():
        try:
            found = path.lstat()
        except FileNotFoundError:
            continue
        if path.name.endswith(".lock") or found.st_uid != os.getuid() \
                or now - found.st_mtime < STALE_S or complete(path):
            continue
        if path.name.startswith(".") and path.name.endswith(".tmp"):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
            continue
        with _free(path) as free:
            if free:
                _remove(path)
                removed.append(path)
    return removed


def tidy(root: Path) -> list[Path]:
    """sweep() both kinds of entries of the cache at `root`."""
    return [p for kind in KINDS if (root / kind).is_dir() for p in sweep(root / kind)]


def size_of(path: Path) -> int:
    """Bytes on disk under `path`."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                pass
    return total


def entries(root: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, path) of every complete entry, least recently used first."""
    found = []
    for kind in KINDS:
        if (root / kind).is_dir():
            for path in (root / kind).iterdir():
                try:
                    used = (path / MARKER).stat().st_mtime
                except OSError:             # incomplete, or a lock file
                    continue
                found.append((used, size_of(path), path))
    return sorted(found)


def evict(root: Path, keep_gb: float, log: Log = lambda line: None) -> list[Path]:
    """Remove complete entries, least recently used first, until the rest take at most
    `keep_gb`; entries in use or being built stay (and count)."""
    listed = entries(root)
    total = sum(size for _, size, _ in listed)
    removed = []
    for _, size, path in listed:
        if total <= keep_gb * 2**30:
            break
        with _free(path) as free:
            if free and path.lstat().st_uid == os.getuid():
                _remove(path)
                total -= size
                removed.append(path)
                log(f"evicted {path} ({size / 2**30:.1f} GB, least recently used)")
    return removed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=cli.prog("cache"),
        description="The cache of rebuilt arms (venvs, checkouts): list it, or evict the "
                    "least recently used entries that no run is using.")
    parser.add_argument("--cache-dir", help="default: $TORCHGATE_CACHE, else "
                                            "~/.cache/torchgate (arms.cache_dir)")
    parser.add_argument("--evict", action="store_true", help="remove entries beyond --keep-gb")
    parser.add_argument("--keep-gb", type=float, default=0.0)
    args = parser.parse_args(argv)
    with one_line_errors("cache"):
        root = cache_at(args.cache_dir)
        if args.keep_gb < 0:
            raise UserError(f"--keep-gb must be 0 or more, got {args.keep_gb:g}")
        for path in tidy(root):
            print(f"removed {path} (left by a build that was killed)")
        if args.evict:
            evict(root, args.keep_gb, print)
        listed = entries(root)
        for used, size, path in reversed(listed):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(used))
            print(f"{size / 2**30:7.2f} GB  last used {when}  {path}")
        print(f"{sum(s for _, s, _ in listed) / 2**30:.2f} GB in {len(listed)} entries "
              f"under {root}")


if __name__ == "__main__":
    main()
