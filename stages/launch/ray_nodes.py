"""Which Ray node runs a unit, so that two units never share a node while they are timed.

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
