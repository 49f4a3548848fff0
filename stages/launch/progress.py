"""Where a stage is while it runs: units done of those planned, the time so far, and what is
left at the pace of the run so far. The counting and the clock live here; render.progress
writes the line."""
from __future__ import annotations

import time
from typing import Callable

from stages.core.vocabulary import Tick


class Progress:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()
        self.done = self.planned = 0

    def plan(self, units: int) -> None:
        """More units to come (adaptive rounds), or fewer (negative: a unit not started after
        all, because its modes had failed or the budget ran out)."""
        self.planned = max(self.done, self.planned + units)

    def tick(self) -> Tick:
        """One unit done."""
        self.done += 1
        self.planned = max(self.planned, self.done)
        elapsed = self.clock() - self.started
        return Tick(self.done, self.planned, elapsed,
                    elapsed / self.done * (self.planned - self.done))
