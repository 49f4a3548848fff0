"""Where a stage is while it runs: units done of those planned, the time so far, and what is
left at the pace of the run so far. The counting and the clock live here; render.progress
writes the line."""
from __future__ import annotations

import time
from typing import Callable

from torchgate.core.vocabulary import Tick


class Progress:
    """Units by kind (timed processes, counts processes), each kind's pace its own: a counts
    process under valgrind takes minutes where a timed one takes seconds, and one pace for
    both read "~0:35 left" a minute before the end."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = self.last = clock()
        self.planned: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.spent: dict[str, float] = {}

    def plan(self, units: int, kind: str = "process") -> None:
        """More units to come (adaptive rounds), or fewer (negative: a unit not started after
        all, because its modes had failed or the budget ran out)."""
        self.planned[kind] = max(self.done.get(kind, 0), self.planned.get(kind, 0) + units)

    def tick(self, kind: str = "process") -> Tick:
        """One unit of `kind` done; the time since the last one is its."""
        now = self.clock()
        self.done[kind] = self.done.get(kind, 0) + 1
        self.planned[kind] = max(self.planned.get(kind, 0), self.done[kind])
        self.spent[kind] = self.spent.get(kind, 0.0) + now - self.last
        self.last = now
        done, planned = sum(self.done.values()), sum(self.planned.values())
        elapsed = now - self.started
        overall = elapsed / done
        left = sum((self.spent[k] / self.done[k] if self.done.get(k) else overall)
                   * (n - self.done.get(k, 0)) for k, n in self.planned.items())
        return Tick(done, planned, elapsed, left)
