"""What one more worker process of a unit costs in wall time, estimated from the processes
already measured: adaptive sampling spends its budget by it (launch.cells), and a unit left
undecided says what deciding it would cost (judge.adaptive). Pure.

A process's wall time is its start (importing torch, building the workload) plus its modes';
a process that runs some modes only costs its wall time less the others' time. A mode's time
is read from what it measured: the first call (a compile), the warm-up, the steady state's
samples, the single calls of its tail and its shape changes. The median over the processes
stands for the next one, over those that compiled with warm caches where any did: the next
ones find the caches warm too (the first processes of a cell compile cold, at 2-3 times the
wall time of the rest: over them the estimate kept a compiled mode's rounds out of the budget
they fitted in).
"""
from __future__ import annotations

from typing import Iterable

from torchgate.core.numbers import median
from torchgate.core.records.schema import BenchProcess, ModeTiming


def mode_seconds(m: ModeTiming) -> float:
    """Roughly the wall time a mode took in its process."""
    per_sample = m.calls_per_sample or 1
    timed = sum(m.steady_s) + sum(m.cold_s) + sum(m.graph_s)
    tail = (m.latency_calls or 0) * (m.latency_p50_s or 0.0)
    shapes = sum(s.first_call_s + (s.call_s or 0.0) for s in m.shapes)
    return (m.first_call_s or 0.0) + (m.warmup_s or 0.0) + timed * per_sample + tail + shapes


def process_seconds(processes: Iterable[BenchProcess], modes: Iterable[str]) -> float | None:
    """The wall time of one more process that runs `modes` only: the median, over the
    processes that report a wall time (those whose `modes` found warm compile caches, where
    any did), of it less the time of their other modes. None: no process reported one."""
    keep = set(modes)
    timed = [p for p in processes if p.wall_s]
    warm = [p for p in timed if not any(m.compile_cache == "cold" for name, m in p.modes.items()
                                        if name in keep)]
    found = [max(0.0, p.wall_s - sum(mode_seconds(m) for name, m in p.modes.items()
                                     if name not in keep))
             for p in warm or timed]
    return median(found)
