"""What the judge decided and summarized, as the pages read it: a unit's numbers (its summary
per cell and arm), the history's series with their lasting shifts, and a sweep's
recommendation. Types only, frozen; render imports them and no other judge module but the
gate, so that every decision a page shows is taken here, in judge, and render formats it.
Pure.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from torchgate.core.metrics import METRICS, Role, with_role
from torchgate.core.records.schema import Look, Waiting
from torchgate.core.vocabulary import NOW, UnitKey

# ---- a unit's numbers (judge.summary) ---------------------------------------------------------

@dataclass(frozen=True)
class RankSummary:
    """A distributed unit's ranks over its kept processes (judge.summary.rank_summary)."""
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


# The metrics a unit's summary reduces itself (the others have summaries of their own: ranks,
# the step's breakdown, usage).
SUMMARIZED = frozenset(m.name for m in METRICS if m.reduce is not None)


@dataclass(frozen=True)
class ShapeChange:
    """A compiled mode at a shape after the first (medians over the processes that compiled
    with empty caches, where any did)."""
    shape: str
    first_call_s: float                    # the change, recompile included
    call_s: float | None                   # one more call at that shape
    recompiles: int                        # the most in any process
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class GpuSeriesSummary:
    """One CUDA timing series of a unit (hot, cold or graph) over its processes."""
    name: str
    per_call_s: float | None
    stops: tuple[tuple[str, int], ...]     # how the processes' series ended, and how often
    rel_sd: float | None
    redone: int                            # throttled samples taken again, all processes
    throttled: int                         # kept samples still throttled
    sm_clock_mhz: float | None
    temperature_c: float | None            # the hottest window of any process
    power_w: float | None
    tflops: float | None
    gbps: float | None
    impossible: tuple[str, ...]            # rates beyond the device's peak: why


@dataclass(frozen=True)
class GpuSummary:
    """How a unit was timed on a CUDA device: its series, the peaks the rates are against
    and the CUDA graphs that could not be captured."""
    series: tuple[GpuSeriesSummary, ...]
    hot_s: float | None
    math: str | None
    peak_tflops: float | None
    peak_gbps: float | None
    peak_source: str | None
    reference_sm_clock_mhz: float | None
    flush_bytes: int | None
    graph_errors: tuple[str, ...]


@dataclass(frozen=True)
class UnitSummary:
    """A unit's numbers: medians over the processes kept for each (None: none measured it).
    Every metric of core.metrics that has a reduction is one of `values`, by name, and an
    attribute of the summary (`summary.steady_s`, `summary.graph_breaks`)."""
    values: dict[str, float | int | None]  # metric -> its reduction over the processes
    steady_per_process_s: tuple[float, ...]   # the kept processes' own, in process order
    items_per_s: float | None
    usd_per_million: float | None          # the device's price_per_hour over the throughput
    warmup_calls: float | None
    latency_calls: tuple[int, ...]         # calls per process that timed single calls
    processes_kept: int                    # measured the steady state, on a quiet machine
    processes_busy: int                    # measured it while others took the CPU: left out
    processes_failed: int                  # the process, or this mode in it, failed
    failures: tuple[str, ...] = ()         # "STATUS: error", one per failed process
    family: str | None = None              # a sweep: the workload it is a point of
    point: tuple[tuple[str, Any], ...] = ()   # ... and its values (("batch", 64),)
    shapes: tuple[ShapeChange, ...] = ()
    gpu: GpuSummary | None = None
    clocks: tuple[str, ...] = ()           # how its calls were timed (the device's clock)
    unmeasured: tuple[tuple[str, str], ...] = ()   # (metric, why the backend could not)
    items: int | None = None               # per call (a batch), as the workload reported
    item: str | None = None                # what one item is (`_item_`: "token"); None: item
    ranks: RankSummary | None = None       # a distributed unit (`_ranks_`)
    breakdown: Breakdown | None = None     # an input pipeline's step, part by part
    breakdown_busy: int = 0                # ... timed on a busy machine: left out
    usage: Usage | None = None             # utilization and energy of the steady state

    def __getattr__(self, name: str):
        if name in SUMMARIZED:
            return self.values.get(name)
        raise AttributeError(name)

    @property
    def measured(self) -> bool:
        return self.steady_s is not None

    @property
    def too_busy(self) -> bool:
        """Fewer than two processes left once the busy ones are out: one process's number
        would be shown as the unit's, with nothing to say how far it is from the next one."""
        return self.processes_busy > 0 and self.processes_kept < 2

    def value(self, metric: str) -> float | int | None:
        """A metric's number by its name (core.metrics)."""
        return self.values.get(metric)


@dataclass(frozen=True)
class CellSummary:
    """Every unit of one cell's record, this run's arm and the baseline's where there is one
    (the other arm of an A/B record, or the recorded baseline)."""
    cell: str
    status: str
    reason: str | None
    units: dict[UnitKey, UnitSummary] = field(default_factory=dict)
    has_baseline: bool = False
    sentinel_loop_s: float | None = None   # the machine-speed sentinel, all processes
    looks: tuple[Look, ...] = ()           # adaptive sampling's interim looks
    adaptive_processes: int = 0
    # Lock-step: per arm, its processes' waits for the other's turns, summed
    waiting: dict[str, Waiting] = field(default_factory=dict)
    threads: tuple[int, ...] = ()          # torch's threads this run's processes ran with
    threads_setting: Any = None            # the device's `threads`, as configured
    # What this run did not measure in full, and why: (workload, arm, what, why), e.g. an
    # unchanged workload's fewer rounds, counts carried from a committed record
    carried: tuple[tuple[str, str, str, str], ...] = ()

    def unit(self, workload: str, mode: str, arm: str = NOW) -> UnitSummary | None:
        return self.units.get(UnitKey("bench", self.cell, workload, mode, arm=arm))

    def keys(self, arm: str = NOW) -> list[UnitKey]:
        """The arm's units, workloads by name, modes in the record's order."""
        return [k for k in self.units if k.arm == arm]


# ---- the history: a unit's summaries over the committed runs (judge.trends) -----------------

# A table each in history.md; every series is searched for shifts.
KEY_METRICS = tuple(m.name for m in with_role(Role.HISTORY))


@dataclass(frozen=True)
class LastingShift:
    """A lasting shift in a series of runs (judge.changepoints)."""
    index: int          # the first point of the new level
    ratio: float        # geometric mean after / before, over the neighbouring segments
    pvalue: float

    @property
    def magnitude(self) -> float:
        """Otava's size of a change: the larger of the relative changes up and down."""
        return math.exp(abs(math.log(self.ratio))) - 1


@dataclass(frozen=True)
class RunPoint:
    """One run of a series: the unit's summary of that timing in that run."""
    run: int                    # the run's place in its cell's history, oldest first
    commit: str | None
    date: str | None
    value: float
    torch: str | None = None
    driver: str | None = None
    changes: tuple[str, ...] = ()   # what changed since the series' previous point
    busy: int = 0               # processes the busy rule left out: the point is the others'


@dataclass(frozen=True)
class FailureRate:
    """How often a unit failed over a cell's history: a flaky unit is a rate, not one run."""
    cell: str
    workload: str
    mode: str
    failed: int                 # processes that failed, over every run shown
    processes: int              # processes that ran or failed (SKIPPED ones not counted)
    runs: int                   # runs with at least one failure
    of_runs: int                # runs that had the unit
    last: str | None            # the newest failing run's commit (None: this run)
    message: str                # its first failure's message
    # The newest runs in a row in which every process that ran failed: a unit broken since
    # then, not a flaky one (0: its newest run had a process that did not fail).
    broken_runs: int = 0

    @property
    def rate(self) -> float:
        return self.failed / self.processes


@dataclass(frozen=True)
class Chance:
    """How many of a page's lasting shifts chance alone would put there."""
    rate: float          # share of simulated unchanged series with a shift
    expected: float      # rate × the page's series
    runs: int            # the typical series: its number of runs,
    spread: float        # the SD of its log values about its levels,
    rho: float           # and their lag-1 autocorrelation (bias-corrected)
    trials: int


@dataclass(frozen=True)
class Trend:
    cell: str
    workload: str
    mode: str
    metric: str
    hardware: tuple[tuple[str, str], ...]
    era: int                    # the cell's hardware eras, oldest first
    points: tuple[RunPoint, ...]
    shifts: tuple[LastingShift, ...] = field(default=())
    # The runs that have no point because every process was timed on a busy machine (the
    # busy rule left them all out): their commits, None for this run.
    busy_runs: tuple[str | None, ...] = ()

    def started(self, shift: LastingShift) -> RunPoint:
        return self.points[shift.index]


# ---- where the step goes (judge.steps) ------------------------------------------------------

BOUND_SHARE = 0.25
NEAR_BAND = (0.20, 0.30)   # a larger share in [low, high) is near the bound, either way


@dataclass(frozen=True)
class Breakdown:
    """An input pipeline's step, part by part: medians over the processes kept."""
    processes: int
    steps: float                       # single steps timed per process
    input_wait_s: float
    copy_s: float | None               # None: nothing copied (the CPU)
    compute_s: float
    input_wait_share: float
    copy_share: float | None
    compute_share: float
    copy_gbps: float | None            # bytes copied per second of copy
    bound: str                         # INPUT, TRANSFER or COMPUTE, or near one (judge.steps)
    # Loader workers + torch threads beyond the cores: (workers, threads, cores); None: within
    # them, or not recorded (a record before bench 15).
    oversubscribed: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Usage:
    """Utilization and energy over the steady state: medians over processes (None: not
    measured; the unit's `unmeasured` says why)."""
    cpu_busy: float | None             # CPU time per second and torch thread
    sm_util: float | None              # NVML: the share of time a kernel ran
    mem_util: float | None             # NVML: the share of time memory was read or written
    joules_per_item: float | None      # the processes not on a busy machine
    watts: float | None


# ---- a sweep's recommendation (judge.sweeps) -------------------------------------------------

@dataclass(frozen=True)
class SweepPoint:
    """One swept value of a workload and mode, as judge.sweeps sees it: its numbers, and what
    the recommendation reads of them (None where a point was made by hand: computed then)."""
    unit: str
    values: tuple[tuple[str, Any], ...]     # (("batch", 64), ("threads", 2))
    numbers: UnitSummary                    # its judge.summary (not measured: failed)
    outside: str | None = None              # why it cannot be recommended under the limits
    throughput: float | None = None         # items over the geometric mean of its calls
    interval: tuple[float, float] | None = None   # that throughput's (1 - α) interval
    usd_per_million: float | None = None    # at that throughput

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values)


@dataclass(frozen=True)
class Versus:
    """A point's throughput against the recommended one's: ratio (> 1: more items/s) with
    its interval at the level the decision was taken, and whether it was decided."""
    point: SweepPoint
    ratio: float
    low: float
    high: float
    confidence: float
    tie: bool              # no point beats it: it ties with the recommended one
    n: tuple[int, int]     # processes: the recommended point's, this point's


@dataclass(frozen=True)
class Choice:
    chosen: SweepPoint | None         # the recommendation (None: no point within the limits)
    best: SweepPoint | None           # the lowest estimated cost per item
    versus: tuple[Versus, ...] = ()   # every other point within the limits, against `chosen`
    # A point that ties with `chosen` while estimated more than δ faster: the data do not
    # decide between them, and `chosen` is then no recommendation (judge.sweeps).
    open: Versus | None = None
    needed: int | None = None         # processes a point that would decide it (None: unknown)

    @property
    def decided(self) -> bool:
        return self.chosen is not None and self.open is None

    @property
    def ties(self) -> tuple[Versus, ...]:
        """The other points no point beats, the largest throughput first."""
        return tuple(sorted((v for v in self.versus if v.tie), key=lambda v: -v.ratio))


@dataclass(frozen=True)
class Sweep:
    """One swept workload and mode of a cell: its points in the order of their values, the
    recommendation, and the baseline arm's where the baseline swept it too."""
    cell: str
    workload: str
    mode: str
    points: tuple[SweepPoint, ...]
    choice: Choice
    before: Choice | None = None
    had_baseline: bool = False
