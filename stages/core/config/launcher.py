"""Where worker processes run: the `launcher` section, and what a device asks of a cluster
node (its Placement). How that becomes a Ray request is launch.ray_backend's.

`launcher.backend: local` starts every worker process on this machine. `ray` sends each unit
(one worker process, or a lock-step pair as a whole) to a node of a Ray cluster as one task,
whose resource request comes from the cell's device: `num_cpus` from its thread count,
`num_gpus`, `accelerator_type` and custom `resources` naming the hardware. Standard library
only: the worker of a torch-only interpreter reads device specs through core.config.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from stages.core.errors import UserError

BACKENDS = ("local", "ray")
SHARD = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """What a device's cells ask of a cluster node (ignored by the local backend).

    num_gpus: whole GPUs per unit; None: 1 for cuda and xpu, else 0. accelerator_type: the
    node's accelerator type as Ray names it (H100, A100, ...). resources: custom resources that
    the nodes offering this hardware were started with (`ray start --resources`)."""
    num_gpus: float | None = None
    accelerator_type: str | None = None
    resources: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Whole GPUs only: two units given shares of one GPU would time each other."""
        where = f"device.{getattr(self, 'name', '?')}"
        gpus = self.num_gpus
        if gpus is not None and (gpus < 0 or not float(gpus).is_integer()):
            raise UserError(f"{where}.num_gpus must be a whole number >= 0, got {gpus:g}: "
                            "units sharing a GPU would time each other")
        for name, amount in self.resources.items():
            if amount <= 0 or not math.isfinite(amount):
                raise UserError(f"{where}.resources.{name} must be a number > 0, got {amount}")


@dataclass(frozen=True)
class RaySettings:
    # auto: the cluster this machine has joined (RAY_ADDRESS, or `ray start` here);
    # ray://host:port: Ray Client; host:port: the head's GCS; local: a one-node cluster
    # started for this stage.
    address: str = "auto"
    excludes: tuple[str, ...] = ()       # more paths not shipped with the code (gitignore style)
    connect_timeout_s: float = 60.0      # to join, the project folder's upload included
    # The first bench stage measures every cell of the matrix at once (launch.fleet).
    fleet: bool = True
    # Units a node runs at once: 1 unless its devices are independent of each other.
    units_per_node: int = 1


@dataclass(frozen=True)
class Launcher:
    backend: str = "local"
    ray: RaySettings = field(default_factory=RaySettings)
    # "i/n": this job measures the i-th of n parts of every cell's workloads (a check split
    # across runners by a CI job matrix; `python -m stages.merge` joins the parts). None: all.
    shard: str | None = None
    # The reports folders (reports/<machine>/ as each job left them) of a split check's n
    # jobs: the bench and numerics stages join them (core.records.parts) instead of measuring.
    parts: tuple[str, ...] = ()

    @property
    def part(self) -> tuple[int, int] | None:
        """(i, n) of `shard`; None: every workload is this job's."""
        if self.shard is None:
            return None
        i, n = map(int, self.shard.split("/"))
        return i, n

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UserError(f"launcher.backend is {self.backend!r}; set it to local (worker "
                            "processes on this machine) or ray (units on a Ray cluster at "
                            "launcher.ray.address)")
        if self.ray.connect_timeout_s <= 0:
            raise UserError("launcher.ray.connect_timeout_s must be > 0, got "
                            f"{self.ray.connect_timeout_s}")
        if self.ray.units_per_node < 1:
            raise UserError("launcher.ray.units_per_node must be >= 1, got "
                            f"{self.ray.units_per_node}")
        if self.shard is not None and not (
                (found := SHARD.fullmatch(str(self.shard)))
                and 1 <= int(found[1]) <= int(found[2])):
            raise UserError(f"launcher.shard is {self.shard!r}; give i/n, this job's part of n "
                            "(1 <= i <= n, e.g. 2/3), or null for every workload")
        if self.shard is not None and self.parts:
            raise UserError("launcher.shard and launcher.parts are both set: a job measures "
                            "its part (shard) or joins the parts (parts), not both")
        if not self.ray.address.strip():
            raise UserError("launcher.ray.address is empty; give auto, ray://host:port, "
                            "host:port or local")
