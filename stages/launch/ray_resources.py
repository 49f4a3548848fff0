"""What a unit asks of a Ray cluster: its resource request from the cell's device (threads,
GPUs, accelerator type, custom resources), in the names nodes offer, and how reports name it.
Pure: the Ray backend uses it; tests check it without Ray."""
from __future__ import annotations

from stages.core.config.launcher import Placement
from stages.core.config.ranks import rank_threads

# Device types whose cells need a GPU of the node (Ray hides the GPUs from a task that asks
# for none).
GPU_TYPES = ("cuda", "xpu")


def request(device_type: str, threads: int, spec: Placement, ranks: int = 1) -> dict:
    """A unit's Ray resource request. The CPUs are the device's threads (1 when torch picks
    its own count); a lock-step pair takes turns, so it asks for no more than one unit. A
    distributed unit's ranks run in its one task, so on one node: it asks for each rank's
    threads (measure.ranks: the unit's shared among them, at least one) and GPU."""
    gpus = spec.num_gpus if spec.num_gpus is not None else (
        1 if device_type in GPU_TYPES else 0)
    cpus = max(threads, 1) if ranks <= 1 else ranks * rank_threads(threads, ranks)
    found: dict = {"num_cpus": cpus, "num_gpus": int(gpus) * max(ranks, 1)}
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
