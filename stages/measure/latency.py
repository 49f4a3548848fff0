"""Tail latency: single synchronized calls, as a caller waiting for each result sees them.

The steady state times batches of calls, which is what throughput needs but hides the slow
call among many. For workloads that ask for it (`_latency_: true`), after the steady state a
process times single calls between two device synchronizations (host clock: the caller's
wait, launch overhead included) and keeps their 50th, 90th and 99th percentiles: one summary
per process per percentile, compared across processes like the steady state.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from stages.measure.clocks import Clock, SyncClock
from stages.measure.timing import BusyMachine

QUANTILES = {"latency_p50_s": 0.50, "latency_p90_s": 0.90, "latency_p99_s": 0.99}


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of sorted values: the smallest value with at least a
    share q of all values at or below it (no interpolation: a reported p99 is a call that
    happened)."""
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def latency_calls(per_call_s: float, min_calls: int, target_s: float) -> int:
    """At least `min_calls`, and as many as fill about `target_s` at the steady speed."""
    return max(min_calls, math.ceil(target_s / max(per_call_s, 1e-9)))


def time_latency(step: Callable[[], Any], clock: Clock, calls: int,
                 turn: Callable[[], None] = lambda: None, busy=None) -> dict:
    """Time `calls` single calls; the ModeTiming fields of their percentiles. `clock` must
    synchronize the device around each call (a SyncClock); `busy` reads what else took the
    CPU meanwhile. One turn of a lock-step pair covers all calls."""
    turn()
    if busy is not None:
        busy.start()
    times = []
    for _ in range(calls):
        clock.start()
        step()
        times.append(clock.stop())
    if busy is not None:
        busy.stop()
    times.sort()
    return {"latency_calls": calls,
            **{name: percentile(times, q) for name, q in QUANTILES.items()},
            "busy_latency": busy.summary() if busy is not None else None}


def measure_latency(step: Callable[[], Any], sync: Callable[[], None], per_call_s: float, *,
                    min_calls: int, target_s: float,
                    turn: Callable[[], None] = lambda: None) -> dict:
    """The latency phase of a mode whose steady state ran at `per_call_s` per call."""
    return time_latency(step, SyncClock(sync), latency_calls(per_call_s, min_calls, target_s),
                        turn, BusyMachine())
