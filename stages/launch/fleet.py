"""A fleet run (launcher.backend: ray, launcher.ray.fleet: true): the cells of the bench matrix
measured at once, each on the nodes its device names, so that the matrix takes the time of
its slowest cell rather than the sum.

DVC runs a matrix stage's cells one after another and has no parallel stages. So the first
bench stage of a `dvc repro` measures every cell of the matrix, one thread per cell sharing
one cluster connection and one lease on each node (launch.ray_placement: two units never share
a node), writes its own cell's record and leaves the others' in this user's scratch folder;
each later bench stage of the same `dvc repro` takes its cell's record from there instead of
measuring again. dvc.yaml is the same for every backend, and a record is only ever taken by
the `dvc repro` that measured it (the invocation: the dvc process's id and start time, with
the project and params.yaml's digest), so a later run never reads an old one.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path
from typing import Callable

from torchgate.core import scratch
from torchgate.core.config import Cell, Config
from torchgate.core.errors import UserError
from torchgate.core.records import load_record, write_record
from torchgate.core.records.schema import BenchRecord

SHELLS = {"sh", "bash", "dash", "zsh", "fish", "ksh"}


def _stat(pid: int) -> tuple[str, int, str] | None:
    """(command name, parent pid, start time in clock ticks) from /proc; None elsewhere."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:]
    fields = rest.split()
    return name, int(fields[1]), fields[19]


def invocation() -> str | None:
    """The `dvc repro` running this stage, as "<pid>-<start time>": the first ancestor that
    is not the shell DVC runs a command with. None outside DVC (no DVC_STAGE) or without
    /proc: then there is no fleet to share, and a stage measures its own cell."""
    if "DVC_STAGE" not in os.environ:
        return None
    pid = os.getppid()
    while pid > 1:
        found = _stat(pid)
        if found is None:
            return None
        name, parent, started = found
        if name not in SHELLS:
            return f"{pid}-{started}"
        pid = parent
    return None


def _alive(key: str) -> bool:
    pid, _, started = key.partition("-")
    found = _stat(int(pid)) if pid.isdigit() else None
    return found is not None and found[2] == started


class Staging:
    """The records a fleet run measured for this invocation's other bench stages."""

    def __init__(self, run: str):
        digest = hashlib.sha256(f"{Path.cwd().resolve()}\n".encode()
                                + Path("params.yaml").read_bytes()).hexdigest()[:16]
        root = scratch.private(scratch.user_dir() / "fleet")
        for old in root.iterdir():       # the folders of invocations that have ended
            if not _alive(old.name.partition("_")[0]):
                shutil.rmtree(old, ignore_errors=True)
        self.folder = scratch.private(root / f"{run}_{digest}")

    def path(self, cell: Cell) -> Path:
        return self.folder / f"{cell.name}.json"

    def take(self, cell: Cell) -> BenchRecord | None:
        """This cell's record, measured by an earlier stage of this invocation (once)."""
        path = self.path(cell)
        if not path.exists():
            return None
        record = load_record(path, BenchRecord)
        path.unlink()
        if record.cell != cell.name:    # a file that is not what this folder was left
            raise UserError(f"{path} holds cell {record.cell!r}, not {cell.name!r}: the fleet's "
                            "staged records were changed; run `dvc repro` again")
        return record

    def leave(self, cell: Cell, record: BenchRecord) -> None:
        write_record(self.path(cell), record)


def staging(cfg: Config) -> Staging | None:
    """Where this invocation's fleet keeps its records; None when there is no fleet."""
    if cfg.launcher.backend != "ray" or not cfg.launcher.ray.fleet:
        return None
    run = invocation()
    return Staging(run) if run else None


def measure_all(cells: list[Cell], measure: Callable[[Cell], BenchRecord]
                ) -> dict[str, BenchRecord | BaseException]:
    """measure(cell) for every cell at once, one thread each; a cell's error is its result.
    The threads are daemons: an interrupt of the stage ends it at once, its units cancelled by
    the cluster connection it leaves, without waiting for threads blocked on the cluster."""
    results: dict[str, BenchRecord | BaseException] = {}
    done = threading.Event()

    def one(cell: Cell) -> None:
        try:
            results[cell.name] = measure(cell)
        except Exception as exc:        # noqa: BLE001  the cell's own stage will say it
            results[cell.name] = exc
        if len(results) == len(cells):
            done.set()
    for cell in cells:
        threading.Thread(target=one, args=(cell,), name=f"fleet-{cell.name}",
                         daemon=True).start()
    while not done.wait(0.5):      # in slices: a signal handler runs between them
        pass
    return results
