"""Where a worker process ran and on what hardware: part of every process record."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    """What a worker process's timings ran on: the fields of the environment's hardware key
    (judge.environment), read by the process itself. gpu_names: the accelerators the
    process used (none for a CPU cell: naming them would start a GPU context)."""
    cpu_model: str | None
    gpu_names: tuple[str, ...]
    torch_threads: int | None


@dataclass(frozen=True)
class Host:
    """Where a worker process ran: the machine's name, the Ray node (None: started here by
    the local backend) and its hardware (None when the process died before reading it)."""
    name: str | None
    node: str | None
    hardware: Hardware | None
    retried: str | None = None           # the system failure of a first try on another node
    # On a Ray node: when the unit started and ended there (milliseconds since the epoch,
    # the node's clock; whole numbers, which records keep exact), the window no other unit
    # held that node.
    window_ms: tuple[int, int] | None = None
