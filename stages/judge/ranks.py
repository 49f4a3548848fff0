"""A distributed unit's ranks over its processes: what a page shows of them (judge.summary
holds it per unit). Each number is the median over the processes the tests use (judge.timings:
the mode ran, and the machine was quiet during its steady state) of one number per process,
which the process's record answers (core.records.ranks). Pure.
"""
from __future__ import annotations

from dataclasses import dataclass

from stages.core.numbers import median
from stages.core.records.ranks import Ranks
from stages.core.records.schema import BenchRecord
from stages.core.vocabulary import Status
from stages.judge.timings import busy


@dataclass(frozen=True)
class RankSummary:
    backend: str
    world_size: int
    threads: int                           # per rank
    processes: int                         # kept
    comm_s: float | None                   # the all-reduce per step (the last rank's)
    bytes_per_step: int
    busbw: float | None                    # bytes per second (nccl-tests' bus bandwidth)
    straggler: float | None                # slowest over fastest time to the collective
    slowest: int | None                    # the rank slowest in the most processes ...
    slowest_in: int                        # ... in how many
    ready_s: tuple[float, ...]             # per rank: time to the collective
    allreduce_s: tuple[float, ...]         # per rank: all-reduce, its waits included
    slowed: int | None = None              # `_slow_rank_`: slowed on purpose, by this factor
    slow_factor: float | None = None

    @property
    def lag(self) -> float | None:
        """How far the slowest rank lags the fastest (0.5: by 50 %)."""
        return None if self.straggler is None else self.straggler - 1


def rank_summary(record: BenchRecord, workload: str, mode: str,
                 busy_share: float | None) -> RankSummary | None:
    """None for a unit that is not distributed, or that no kept process measured."""
    run = record.workloads.get(workload)
    kept: list[Ranks] = [m.ranks for p in (run.processes if run else ())
                         if p.status == Status.OK
                         for m in [p.modes.get(mode)]
                         if m is not None and m.status == Status.OK and m.ranks is not None
                         and not busy(m, busy_share)]
    if not kept:
        return None
    first = kept[0]
    slowest = [r.slowest.rank for r in kept if r.slowest is not None and r.straggler]
    top = max(sorted(set(slowest)), key=slowest.count, default=None)
    return RankSummary(
        first.backend, first.world_size, first.threads, len(kept),
        median(r.comm_s for r in kept), first.bytes_per_step,
        median(r.busbw for r in kept if r.busbw is not None),
        median(r.straggler for r in kept if r.straggler is not None), top,
        slowest.count(top) if top is not None else 0,
        _per_rank(kept, "ready_s"), _per_rank(kept, "allreduce_s"),
        first.slowed, first.slow_factor)


def _per_rank(kept: list[Ranks], field: str) -> tuple[float, ...]:
    n = min(len(r.ranks) for r in kept)
    return tuple(median(getattr(r.ranks[i], field) for r in kept) for i in range(n))
