"""Where worker processes run: the `launcher` section, and what a cell asks of a cluster node.

`launcher.backend: local` starts every worker process on this machine. `ray` sends each unit
(one worker process, or a lock-step pair as a whole) to a node of a Ray cluster as one task,
whose resource request comes from the cell's device: `num_cpus` from its thread count,
`num_gpus`, `accelerator_type` and custom `resources` naming the hardware. Standard library
only: the worker of a torch-only interpreter reads device specs through core.config.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from stages.core.errors import UserError

BACKENDS = ("local", "ray")
# Device types whose cells need a GPU of the node (Ray hides the GPUs from a task that asks
# for none).
GPU_TYPES = ("cuda", "xpu")


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


@dataclass(frozen=True)
class Launcher:
    backend: str = "local"
    ray: RaySettings = field(default_factory=RaySettings)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UserError(f"launcher.backend is {self.backend!r}; set it to local (worker "
                            "processes on this machine) or ray (units on a Ray cluster at "
                            "launcher.ray.address)")
        if self.ray.connect_timeout_s <= 0:
            raise UserError("launcher.ray.connect_timeout_s must be > 0, got "
                            f"{self.ray.connect_timeout_s}")
        if not self.ray.address.strip():
            raise UserError("launcher.ray.address is empty; give auto, ray://host:port, "
                            "host:port or local")


def request(device_type: str, threads: int, spec: Placement) -> dict:
    """A unit's Ray resource request. The CPUs are the device's threads (1 when torch picks
    its own count); a lock-step pair takes turns, so it asks for no more than one unit."""
    gpus = spec.num_gpus if spec.num_gpus is not None else (
        1 if device_type in GPU_TYPES else 0)
    found: dict = {"num_cpus": max(threads, 1), "num_gpus": int(gpus)}
    if spec.resources:
        found["resources"] = dict(sorted(spec.resources.items()))
    if spec.accelerator_type:
        found["accelerator_type"] = spec.accelerator_type
    return found


def offered(request_: dict) -> dict[str, float]:
    """The request in the names a node lists its resources by (CPU, GPU, custom, and
    accelerator_type:<name>, which Ray gives a node of that type)."""
    found = {"CPU": float(request_["num_cpus"])}
    if request_.get("num_gpus"):
        found["GPU"] = float(request_["num_gpus"])
    found.update({k: float(v) for k, v in request_.get("resources", {}).items()})
    if request_.get("accelerator_type"):
        found[f"accelerator_type:{request_['accelerator_type']}"] = 0.001
    return found


def describe(resources: dict[str, float]) -> str:
    """{CPU: 1, host_c: 1}: how the reports name a request."""
    def amount(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else f"{v:g}"
    return "{" + ", ".join(f"{k}: {amount(v)}" if not k.startswith("accelerator_type:") else k
                           for k, v in resources.items()) + "}"


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
