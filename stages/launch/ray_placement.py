"""Which Ray node runs a unit, so that two units never share a node while they are timed, and
what a unit asks of the cluster (its resource request, in the names nodes offer).

Ray's scheduler packs tasks onto a node as long as its CPUs and GPUs last: two one-thread
units would run side by side on a 16-core node and time each other. Here the stage leases
nodes itself: a unit takes a node that offers what it asks for and that no other unit of
this run holds, waits while every such node is busy, and gives it back when it ends; the
task is then pinned to that node. `launcher.ray.units_per_node` (default 1) lets a node
hold more units at once, for nodes whose devices the user knows to be independent.
Pure apart from the clock: `nodes` is a function giving Ray's node list (ray.nodes()).
"""
from __future__ import annotations

import threading
from typing import Callable

from torchgate.core.config import rank_threads
from torchgate.core.config.settings import Placement


def fits(node: dict, wanted: dict[str, float], lost: tuple[str, ...] = ()) -> bool:
    """A live node, not one just lost, with every resource the unit asks for."""
    have = node.get("Resources") or {}
    return bool(node.get("Alive")) and node.get("NodeID") not in lost \
        and all(have.get(k, 0) >= v for k, v in wanted.items())


class NodeLeases:
    """The nodes this run's units hold. Thread-safe: the cells of a fleet run share one."""

    def __init__(self, nodes: Callable[[], list[dict]], units_per_node: int = 1,
                 poll_s: float = 5.0):
        self.nodes, self.per_node, self.poll_s = nodes, units_per_node, poll_s
        self.held: dict[str, int] = {}
        self.changed = threading.Condition()

    def take(self, wanted: dict[str, float], lost: tuple[str, ...] = ()) -> str | None:
        """A node for one unit, held until `give_back`; None when no live node offers what
        it asks for (the unit cannot run anywhere). Among free nodes, the one holding fewest
        units, then the first Ray lists, so that a unit lands where it landed before."""
        with self.changed:
            while True:
                able = [n["NodeID"] for n in self.nodes() if fits(n, wanted, lost)]
                if not able:
                    return None
                free = [n for n in able if self.held.get(n, 0) < self.per_node]
                if free:
                    node = min(free, key=lambda n: self.held.get(n, 0))
                    self.held[node] = self.held.get(node, 0) + 1
                    return node
                # Woken when a unit gives its node back; polled too, for a node that died.
                self.changed.wait(self.poll_s)

    def give_back(self, node: str) -> None:
        with self.changed:
            self.held[node] -= 1
            if not self.held[node]:
                del self.held[node]
            self.changed.notify_all()


# ---- ray resources ------------------------------------------------------------
# What a unit asks of a Ray cluster: its resource request from the cell's device (threads,
# GPUs, accelerator type, custom resources), in the names nodes offer, and how reports name it.
# Pure: the Ray backend uses it; tests check it without Ray.

# Device types whose cells need a GPU of the node (Ray hides the GPUs from a task that asks
# for none).
GPU_TYPES = ("cuda", "xpu")


def request(device_type: str, threads: int | str, spec: Placement, ranks: int = 1) -> dict:
    """A unit's Ray resource request. The CPUs are the device's threads (1 when torch picks
    its own count); a lock-step pair takes turns, so it asks for no more than one unit. A
    distributed unit's ranks run in its one task, so on one node: it asks for each rank's
    threads (measure.ranks: the unit's shared among them, at least one) and GPU."""
    gpus = spec.num_gpus if spec.num_gpus is not None else (
        1 if device_type in GPU_TYPES else 0)
    threads = 0 if threads == "auto" else threads     # the node's own count (measure.build)
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
