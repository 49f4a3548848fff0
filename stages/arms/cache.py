"""Where rebuilt arms are kept: one folder shared by every project of the user, so that a venv
or a checkout built once is reused by later runs. Entries are built beside their final name
and renamed into place, so an interrupted build leaves nothing half-made."""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from stages.core.config import Config
from stages.core.errors import UserError


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


def ready(path: Path) -> bool:
    """A complete entry: renamed into place, which happens last."""
    return path.is_dir()


@contextmanager
def building(path: Path) -> Iterator[Path]:
    """A fresh folder to build `path` in, renamed to `path` when the block succeeds and
    removed when it fails. If another run finished the same entry first, theirs is kept."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        try:
            os.rename(tmp, path)
        except OSError:
            if not ready(path):
                raise
    except OSError as exc:
        if exc.errno == 28:   # ENOSPC
            raise UserError(f"no space left on the device while building {path}; free space "
                            "or set arms.cache_dir to another disk") from None
        raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
