"""What a distributed unit (`_ranks_`) measured in one worker process: each rank's steady
state, and the numbers the judge tests, which the record answers itself.

Every rank runs the same steps in lock-step (measure.ranks). Per step, a rank's all-reduce time
runs from the launch of its first gradient bucket to the completion of its last; a rank that
arrives early waits there for the others, so the all-reduce of the last rank to arrive is the
collective itself (`comm_s`: its median over the steps). A rank's time to the collective
(`ready_s`: from its step's start to the launch of its last bucket, its forward and backward
passes) is its own work, waits excluded: the straggler, the rank the others wait for, shows
there, not in the step time, which every rank shares. Not the time outside all-reduce: a rank
that waited resumes late (a thread woken, a VM's idle CPU), and that would count as its
work (in a run on a 2-core VM a rank held back 1.5× read as 1.2× so). Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankTiming:
    """One rank's medians over the steady-state steps."""
    rank: int
    step_s: float                      # its whole step (about the same on every rank)
    allreduce_s: float                 # launch to completion, waits for the others included
    ready_s: float                     # to its last bucket's launch: its own work
    peak_bytes: int | None = None


@dataclass(frozen=True)
class Ranks:
    backend: str                       # gloo (CPU) or nccl (CUDA)
    world_size: int
    threads: int                       # torch threads per rank
    steps: int                         # steady-state steps the medians are over
    bytes_per_step: int                # gradients all-reduced per step, per rank
    comm_s: float                      # per step, the last rank's all-reduce (median)
    ranks: tuple[RankTiming, ...] = ()
    slowed: int | None = None          # `_slow_rank_`: the rank slowed on purpose ...
    slow_factor: float | None = None   # ... and by how much

    @property
    def algbw(self) -> float | None:
        """Bytes per second of one all-reduce (nccl-tests' algorithm bandwidth)."""
        return self.bytes_per_step / self.comm_s if self.comm_s > 0 else None

    @property
    def busbw(self) -> float | None:
        """nccl-tests' bus bandwidth of an all-reduce: algbw × 2(n-1)/n, the rate each link
        carries, comparable across rank counts (0 with one rank: nothing crosses a link)."""
        algbw = self.algbw
        n = self.world_size
        return None if algbw is None else algbw * 2 * (n - 1) / n

    @property
    def fastest(self) -> RankTiming | None:
        return min(self.ranks, key=lambda r: r.ready_s, default=None)

    @property
    def slowest(self) -> RankTiming | None:
        return max(self.ranks, key=lambda r: r.ready_s, default=None)

    def score(self, rank: RankTiming) -> float | None:
        """nvidia-resiliency-ext's relative performance score: the fastest rank's time over
        this rank's, 1.0 for the fastest, 0.5 for a rank twice as slow."""
        fastest = self.fastest
        return fastest.ready_s / rank.ready_s if fastest and rank.ready_s > 0 else None

    @property
    def straggler(self) -> float | None:
        """The slowest rank's time to the collective over the fastest's (1.5: it lags by
        50 %); None with fewer than two ranks."""
        slowest = self.slowest
        if len(self.ranks) < 2 or slowest is None:
            return None
        score = self.score(slowest)
        return 1 / score if score else None
