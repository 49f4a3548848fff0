"""Clocks: the ground floor of measure. A clock times one region of work, after the device
finished it. SyncClock reads the host's perf_counter around a device synchronize; EventClock
reads device events (no host jitter). Which one a device gets is device.clock_for's choice;
tests pass a simulated clock instead. Standard library only.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Protocol


class Clock(Protocol):
    def start(self) -> None: ...
    def stop(self) -> float: ...  # seconds since start(), after the device finished the work


class SyncClock:
    """perf_counter around the region, with a device synchronize before each read."""

    def __init__(self, sync: Callable[[], None] = lambda: None):
        self._sync = sync
        self._t0 = 0

    def start(self) -> None:
        self._sync()
        self._t0 = time.perf_counter_ns()

    def stop(self) -> float:
        self._sync()
        return (time.perf_counter_ns() - self._t0) * 1e-9


class EventClock:
    """Device events recorded around the region on the current stream (CUDA events, or
    torch.Event on another accelerator): device time without host jitter."""

    def __init__(self, make_event: Callable[[], Any]):
        self._begin, self._end = make_event(), make_event()

    def start(self) -> None:
        self._begin.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._begin.elapsed_time(self._end) * 1e-3
