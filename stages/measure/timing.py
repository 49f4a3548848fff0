"""Clocks and the phases of a measurement: first call, warm-up, steady state.

The only module that reads clocks or synchronizes devices. A clock is a seam: tests pass a
simulated one. Each steady-state sample times a batch of back-to-back calls between one pair
of clock reads, which on a GPU cuts process-to-process spread several-fold (DESIGN.md §3).
"""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
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


class CudaEventClock:
    """CUDA events recorded on the current stream: device time without host jitter."""

    def __init__(self, torch_module):
        self._torch = torch_module
        self._begin = torch_module.cuda.Event(enable_timing=True)
        self._end = torch_module.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._begin.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._begin.elapsed_time(self._end) * 1e-3


def device_sync(torch_module, device_type: str) -> Callable[[], None]:
    if device_type == "cuda":
        return torch_module.cuda.synchronize
    if device_type == "mps":
        return torch_module.mps.synchronize
    if device_type == "xpu":
        return torch_module.xpu.synchronize
    return lambda: None


def make_clock(torch_module, device_type: str) -> Clock:
    if device_type == "cuda":
        return CudaEventClock(torch_module)
    return SyncClock(device_sync(torch_module, device_type))


class BusyMachine:
    """How much CPU other programs used while this process's samples ran: the machine-wide
    busy time from /proc/stat minus this process's own CPU time, and the hypervisor's steal,
    each as a fraction of all CPUs over the sampled time. Linux only (elsewhere: None).

    Code-independent like the sentinel, but it sees what the sentinel cannot: on a 2-core
    machine one busy neighbour can stall every parallel region of a 2-thread workload."""

    def __init__(self):
        self.wall = self.busy = self.steal = self.own = 0.0
        self._at: tuple | None = None

    @staticmethod
    def _read() -> tuple[float, float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as fh:
                ticks = [int(x) for x in fh.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (ticks + [0] * 8)[:8]
        hz = os.sysconf("SC_CLK_TCK")
        return (time.perf_counter(), (user + nice + system + irq + softirq) / hz, steal / hz,
                time.process_time())

    def start(self) -> None:
        self._at = self._read()

    def stop(self) -> None:
        now = self._read()
        if self._at is None or now is None:
            return
        wall, busy, steal, own = (b - a for a, b in zip(self._at, now))
        self.wall, self.busy, self.steal, self.own = (
            self.wall + wall, self.busy + busy, self.steal + steal, self.own + own)

    def summary(self) -> dict | None:
        """{"other_cpu": fraction, "steal": fraction}, or None when nothing was read."""
        if self.wall <= 0:
            return None
        capacity = self.wall * (os.cpu_count() or 1)
        return {"other_cpu": min(max((self.busy - self.own) / capacity, 0.0), 1.0),
                "steal": min(max(self.steal / capacity, 0.0), 1.0)}


class _NoProbe:
    def start(self) -> None: ...
    def stop(self) -> None: ...


@dataclass
class Phases:
    first_call_s: float                      # compile time in compiled modes
    warmup_s: float                          # the warm-up calls after the first, together
    warmup_calls: int
    calls_per_sample: int
    steady_s: list[float] = field(default_factory=list)  # per call, one entry per sample
    first_output: Any = None


def measure(step: Callable[[], Any], clock: Clock, *, samples: int, sample_target_s: float,
            warmup_s: float, min_warmup_calls: int,
            after_first: Callable[[], None] = lambda: None,
            turn: Callable[[], None] = lambda: None, busy=_NoProbe()) -> Phases:
    """Time the first call, warm up, then take `samples` batched steady-state samples.

    `turn()` waits for this process's turn before the first call and before every sample:
    the two arms of an interleaved A/B pair alternate there, so each sample of one arm sits
    next to a sample of the other and both see the machine at the same speed. `busy` (a
    BusyMachine) reads the machine's load around each sample, outside the timed region."""
    turn()
    clock.start()
    first_output = step()
    first_call_s = clock.stop()
    after_first()

    warm_times: list[float] = []
    while sum(warm_times) < warmup_s or len(warm_times) < min_warmup_calls:
        clock.start()
        step()
        warm_times.append(clock.stop())
    # Calibrate from the later warm-up calls (the earliest may still be settling).
    recent = warm_times[len(warm_times) // 2:] or [first_call_s]
    per_call = max(statistics.median(recent), 1e-9)
    calls = max(1, round(sample_target_s / per_call))

    steady = []
    for _ in range(samples):
        turn()
        busy.start()
        clock.start()
        for _ in range(calls):
            step()
        steady.append(clock.stop() / calls)
        busy.stop()
    return Phases(first_call_s, sum(warm_times), len(warm_times), calls, steady, first_output)
