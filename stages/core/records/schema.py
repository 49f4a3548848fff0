"""The shape of every record torchgate writes, in one place, as frozen dataclasses.

A job goes from the launcher to a worker; the worker's result comes back as a BenchProcess or
a NumericsProcess; the stages write a BenchRecord, a NumericsRecord, an EnvRecord and a
CompareRecord (`rows`). `records` reads and writes them (with schema versions and
upgrades); `typed` checks them field by field.

Values: None is "not measured" (or not applicable), a float NaN or infinity is a measured
non-finite value, and an absent optional field takes its default. Renderers show each
differently. Imports the standard library only (the worker runs with torch alone).

A new field takes a default that says what a record without it measured (None: not measured),
and needs nothing else: no schema version, upgrade or fixture. A change a reader would misread
(a field's meaning, unit, type or default; a field removed, renamed or made required) needs a
version: `upgrades` states the rule and what each version changed.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from torchgate.core.names import current
from torchgate.core.records.migration import MigrationRecord
from torchgate.core.records.outputs import Coverage, Dynamo, Fingerprint, FreshOutputs, ModeOutputs
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.unit import BenchUnit
from torchgate.core.vocabulary import Check

# ---- ranks ------------------------------------------------------------
# What a distributed unit (`_ranks_`) measured in one worker process: each rank's steady
# state, and the numbers the judge tests, which the record answers itself.
#
# Every rank runs the same steps in lock-step (measure.ranks). Per step, a rank's all-reduce time
# runs from the launch of its first gradient bucket to the completion of its last; a rank that
# arrives early waits there for the others, so the all-reduce of the last rank to arrive is the
# collective itself (`comm_s`: its median over the steps). A rank's time to the collective
# (`ready_s`: from its step's start to the launch of its last bucket, its forward and backward
# passes) is its own work, waits excluded: the straggler, the rank the others wait for, shows
# there, not in the step time, which every rank shares. Not the time outside all-reduce: a rank
# that waited resumes late (a thread woken, a VM's idle CPU), and that would count as its
# work (in a run on a 2-core VM a rank held back 1.5× read as 1.2× so). Standard library only.

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


# ---- host -------------------------------------------------------------------
# Where a worker process ran and on what hardware: part of every process record.

@dataclass(frozen=True)
class Hardware:
    """What a worker process's timings ran on: the fields of the environment's hardware key
    (judge.environment), read by the process itself. gpu_names: the accelerators the
    process used (none for a CPU cell: naming them would start a GPU context)."""
    cpu_model: str | None
    gpu_names: tuple[str, ...]
    torch_threads: int | None


@dataclass(frozen=True)
class Host:
    """Where a worker process ran: the machine's name, the Ray node (None: started here by
    the local backend) and its hardware (None when the process died before reading it)."""
    name: str | None
    node: str | None
    hardware: Hardware | None
    retried: str | None = None           # the system failure of a first try on another node
    # On a Ray node: when the unit started and ended there (milliseconds since the epoch,
    # the node's clock; whole numbers, which records keep exact), the window no other unit
    # held that node.
    window_ms: tuple[int, int] | None = None


# ---- gpu --------------------------------------------------------------------
# The GPU part of a bench record: how each timing series of a mode ended, what NVML read
# while it ran, and the roofline check.

@dataclass(frozen=True)
class GpuSeries:
    """One timing series of a mode in one process: hot, cold or graph."""
    stop: str                              # quiet, timeout, max_samples or fixed
    rel_sd: float | None = None            # of the kept samples
    elapsed_s: float | None = None         # time spent sampling (turns of the other arm aside)
    redone: int = 0                        # throttled samples taken again
    throttled: tuple[int, ...] = ()        # kept samples still throttled (their indices)
    sm_clock_mhz: tuple[float | None, ...] = ()   # per kept sample; () without NVML
    temperature_c: float | None = None     # the hottest sample window
    power_w: float | None = None           # the highest power drawn in a sample window
    reasons: tuple[str, ...] = ()          # every clock-event reason NVML gave, idle aside
    tflops: float | None = None            # achieved, at the series' median
    gbps: float | None = None
    impossible: str | None = None          # achieved beyond the device's peak: why


@dataclass(frozen=True)
class GpuMode:
    """How a mode was timed on a CUDA device (device.<name>.timing)."""
    series: dict[str, GpuSeries] = field(default_factory=dict)
    reference_sm_clock_mhz: float | None = None   # what throttling is judged against
    flush_bytes: int | None = None         # the cold series' L2 flush
    math: str | None = None                # fp32, tf32, bf16, fp16 or fp64
    peak_tflops: float | None = None       # the roofline check's peaks; None: not known
    peak_gbps: float | None = None
    peak_source: str | None = None         # the datasheet entry, or "device.<name>.timing"
    graph_error: str | None = None         # the step could not be captured as a CUDA graph

    @property
    def impossible(self) -> list[str]:
        return [f"{name}: {s.impossible}" for name, s in self.series.items() if s.impossible]


# ---- what one bench worker process measured -------------------------------------------------

@dataclass(frozen=True)
class Busy:
    """What else took the CPU while one phase of a mode was timed, as shares of the CPU time
    the worker could use (`cpus`: the CPUs it may run on, or its cgroup's quota if lower)."""
    other_cpu: float                   # other programs, the worker's own descendants not counted
    steal: float                       # the hypervisor's steal on those CPUs
    run_queue: float | None = None     # the worker's threads waiting for a CPU, s per s of wall
    cpus: float | None = None


@dataclass(frozen=True)
class Spent:
    """One function's own host instructions per counted call (measure.callgrind.spent)."""
    function: str                          # as users search it: no parameters, templates cut
    library: str                           # its shared object's file name
    instructions: int


@dataclass(frozen=True)
class ShapeRun:
    """One input shape after the first, in a compiled mode: its first call (the shape change,
    with any recompile), a second call at that shape, and the recompiles the change caused."""
    shape: str
    first_call_s: float
    call_s: float | None = None
    recompiles: int = 0
    recompile_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModeTiming:
    """One mode (eager, compiled ...) in one bench process."""
    status: str
    error: str | None = None
    traceback: str | None = None
    first_call_s: float | None = None     # compile time in compiled modes
    # The calls after the first until the first at steady-state speed, their number, and
    # what they cost beyond that speed; settled False: not steady by bench.warmup_max_s.
    warmup_s: float | None = None
    warmup_calls: int | None = None
    warmup_excess_s: float | None = None
    warmup_settled: bool | None = None
    # The inductor caches the first call found: "cold" (empty: a first start) or "warm" (as
    # an earlier process of the same unit left them: a second start); None in eager modes.
    compile_cache: str | None = None
    # Where the time goes, in seconds: the first call by the compile's phases
    # (measure.dynamo.compile_phases), a call by operator (self time; measure.ops.operator_times)
    compile_phases: dict[str, float] = field(default_factory=dict)
    operator_s: dict[str, float] = field(default_factory=dict)
    profile_s: float | None = None        # the wall time of the profiling pass: its cost
    calls_per_sample: int | None = None
    steady_s: tuple[float, ...] = ()      # per call, one entry per sample (on a GPU: hot)
    cold_s: tuple[float, ...] = ()        # CUDA: L2 flushed before each call, one per sample
    graph_s: tuple[float, ...] = ()       # CUDA: per call, the step replayed as a CUDA graph
    peak_bytes: int | None = None
    # What the process held as the mode began (resident size; a GPU: allocated), from
    # which its peak is counted: peak_bytes - start_bytes is the mode's own increment.
    start_bytes: int | None = None
    items: int | None = None
    flops: float | None = None
    bytes_moved: float | None = None      # device memory read and written per step
    gpu: GpuMode | None = None            # CUDA: how each series ended, clocks, roofline
    busy_machine: Busy | None = None       # over the steady-state samples
    busy_first_call: Busy | None = None
    busy_warmup: Busy | None = None
    graph_breaks: int | None = None       # compiled modes only
    graph_break_reasons: tuple[str, ...] = ()
    recompiles: int | None = None
    recompile_reasons: tuple[str, ...] = ()
    unique_graphs: int | None = None
    # The work of one call after the timings, counted exactly (measure.ops, measure.dynamo).
    # Eager modes: the operators it dispatches, in all and by overload name, and the FLOPs of
    # torch's flop formulas, in all and by operator; compiled modes: the kernels inductor
    # generated and, where it counts them, the bytes they access; CUDA: kernels launched.
    aten_ops: int | None = None
    aten_ops_by_op: dict[str, int] = field(default_factory=dict)
    flops_per_call: int | None = None
    flops_by_op: dict[str, int] = field(default_factory=dict)
    inductor_kernels: int | None = None
    inductor_bytes: int | None = None
    kernel_launches: int | None = None
    # A counts process's (WorkloadRun.counts): the host instructions of one call, counted
    # under callgrind (measure.callgrind), averaged over Counter.calls calls.
    instructions: int | None = None
    compile_instructions: int | None = None   # its first call, with bench.instructions_compile
    instructions_by: tuple[Spent, ...] = ()   # the largest functions of those calls
    # Tail latency (workloads with `_latency_`): percentiles of single synchronized calls
    # after the steady state, and what else took the CPU meanwhile.
    latency_calls: int | None = None
    latency_p50_s: float | None = None
    latency_p90_s: float | None = None
    latency_p99_s: float | None = None
    busy_latency: Busy | None = None
    shapes: tuple[ShapeRun, ...] = ()     # compiled modes of a workload with several shapes
    # Where the step goes (workloads with an input pipeline): single steps after the steady
    # state, each part's mean per step: the wait for the next host batch, its copy to the
    # device (None on the CPU: nothing is copied) with its bytes, and the compute.
    breakdown_calls: int | None = None
    input_wait_s: float | None = None
    copy_s: float | None = None
    copy_bytes: float | None = None
    compute_s: float | None = None
    busy_breakdown: Busy | None = None
    # What contends for the cores meanwhile: the loader's worker processes (a DataLoader's
    # num_workers; None: no such loader), torch's threads, and the CPUs the process may use.
    loader_workers: int | None = None
    torch_threads: int | None = None
    cores: int | None = None
    # Utilization and energy over the steady-state samples (measure.energy): the process's
    # CPU time per second and torch thread, NVML's SM and memory utilization (shares), the
    # energy counter's joules per item and mean power.
    cpu_busy: float | None = None
    sm_util: float | None = None
    mem_util: float | None = None
    joules_per_item: float | None = None
    watts: float | None = None
    # What the device's backend could not provide: metric -> why (a generic accelerator
    # without memory statistics, say); and how the calls were timed there.
    unmeasured: dict[str, str] = field(default_factory=dict)
    clock: str | None = None
    ranks: Ranks | None = None            # a distributed unit: per rank, all-reduce, straggler


@dataclass(frozen=True)
class Sentinel:
    """Machine speed, independent of the code under test; `method` says how it was taken
    (None: one burst at the start, the copy by torch, as schema 2 did)."""
    python_loop_s: float
    copy_32mib_s: float | None = None
    method: str | None = None


@dataclass(frozen=True)
class Process:
    """How a worker process ended (OK, SKIPPED or one of FAILURES, with the error), where it
    ran and how long it took."""
    status: str
    error: str | None = None
    traceback: str | None = None
    stderr_tail: str | None = None
    torch: str | None = None
    pid: int | None = None
    wall_s: float | None = None
    round: int | None = None              # A/B: the lock-step pair it belongs to
    host: Host | None = None              # where it ran (None: recorded by an older torchgate)


@dataclass(frozen=True)
class Waiting:
    """A lock-step worker's waits while the other arm held the turn (each a timed phase or
    sample of the other's): their wall seconds, and the CPU seconds this worker used meanwhile
    (threads spinning after their work, a compile pool), read from /proc between turns in
    clock ticks: what it took from the machine the other arm was timed on."""
    seconds: float
    cpu_s: float
    turns: int

    @property
    def cores(self) -> float:
        """Its CPU use while waiting, in cores (0: idle; 1: one core busy all along)."""
        return self.cpu_s / self.seconds if self.seconds > 0 else 0.0


# A counts process's setting that says which compile cache state a mode was counted in.
COMPILE_STATE = " compile: "


@dataclass(frozen=True)
class Counter:
    """How a counts process counted host instructions: counts compare only with counts taken
    the same way (`key`)."""
    tool: str                              # "callgrind"
    version: str | None = None             # valgrind's
    capability: str | None = None          # ATen's CPU capability the counted code ran with
    settings: tuple[str, ...] = ()         # the options and pinned variables
    calls: int = 0                         # counted calls per mode (after its warm-up)
    threads: int | None = None

    @property
    def key(self) -> tuple:
        return (self.tool, self.version, self.capability, self.settings, self.calls,
                self.threads)

    def of_mode(self, mode: str) -> "Counter":
        """This counter as one mode's count was taken: less the other modes' compile cache
        states (a `<mode> compile: …` setting, measure.worker.count_instructions)."""
        return dataclasses.replace(self, settings=tuple(
            s for s in self.settings if COMPILE_STATE not in s or s.startswith(f"{mode} ")))


@dataclass(frozen=True)
class BenchProcess(Process):
    sentinel: Sentinel | None = None
    modes: dict[str, ModeTiming] = field(default_factory=dict)
    counter: Counter | None = None         # a counts process (WorkloadRun.counts)
    waiting: Waiting | None = None         # a lock-step pair's: its waits for the other's turns


# ---- what one numerics worker process computed ----------------------------------------------


@dataclass(frozen=True)
class NumericsProcess(Process):
    modes: dict[str, ModeOutputs] = field(default_factory=dict)
    coverage: Coverage | None = None
    fresh: dict[str, FreshOutputs] = field(default_factory=dict)   # the fresh-process check


@dataclass(frozen=True)
class NumericsRun:
    """What one cell's numerics worker processes returned, arm by arm, in the order the arms
    were measured (the last is this run's), before judge.tolerance evaluates it into the
    cell's NumericsRecord. Not written: the record is."""
    arms: tuple[str, ...] = ()
    ids: dict[str, ArmId] = field(default_factory=dict)            # arm -> what it ran
    results: dict[str, dict[str, tuple[NumericsProcess, ...]]] = field(default_factory=dict)
    fresh: dict[str, FreshOutputs] = field(default_factory=dict)   # the fresh-process check
    fresh_host: Host | None = None
    skipped: str | None = None

    @property
    def now(self) -> str:
        return self.arms[-1]


# ---- the bench record: every sample of every process of one cell ----------------------------


@dataclass(frozen=True)
class RecordedWorkload:
    """A workload as the record's arm ran it: the record's own type, not the configuration's,
    so that a change of conf/workload/ never changes what an old record reads as. Sweeps and
    the history read it (which unit of a sweep, whether a point is like the baseline's)."""
    name: str
    target: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    latency: bool = False
    dynamic: bool | None = None
    threads: int | None = None
    family: str | None = None
    point: tuple[tuple[Any, ...], ...] = ()
    ranks: int | None = None
    slow_rank: int | None = None
    item: str | None = None            # `_item_`: what one item is ("token"); None: an item
    slow_factor: float | None = None

    def __post_init__(self):   # an older record's `stages.workloads.x` is torchgate's
        object.__setattr__(self, "target", current(self.target))


@dataclass(frozen=True)
class WorkloadRun:
    processes: tuple[BenchProcess, ...] = ()
    spec: RecordedWorkload | None = None
    # After the timed processes: one counts process (host instructions per call) per arm.
    counts: tuple[BenchProcess, ...] = ()
    counts_key: str | None = None      # a hash of every input of the counts (launch.reuse)
    counts_from: str | None = None     # where counts not this arm's own process's came from
    unchanged: str | None = None       # why this workload ran fewer rounds: its inputs are
    #                                    the same in both arms of a lock-step run


@dataclass(frozen=True)
class ArmId:
    python: str
    torch: str | None = None
    rev: str | None = None             # the workload code's commit; None: the working tree


@dataclass(frozen=True)
class BenchArm(ArmId):
    workloads: dict[str, WorkloadRun] = field(default_factory=dict)


@dataclass(frozen=True)
class BenchAB:
    """The baseline arm measured beside this record's arm: a candidate's (what-if) or, with
    `rebuilt`, this run's against the baseline rebuilt from its revision and environment."""
    baseline: BenchArm
    candidate: ArmId
    interleaved: bool = False          # rounds are lock-step pairs
    rebuilt: bool = False


@dataclass(frozen=True)
class Pending:
    """A timing an interim look left undecided (or REGRESSED, to be confirmed)."""
    workload: str
    mode: str
    metric: str
    verdict: str
    ratio: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Look:
    """One interim look of adaptive sampling: which units got more processes, and why. An
    interim decision within this cell only; the verdicts are the run's, in compare."""
    processes: int                     # per side, before the look's extra rounds
    pending: tuple[Pending, ...] = ()
    # What the budget did with them: the rounds each workload was given, and each pending
    # unit it gave none, with why (launch.cells.fund): spent first where a change can be.
    funded: dict[str, int] = field(default_factory=dict)
    skipped: tuple[tuple[str, str], ...] = ()    # ("w eager steady_s", why)


@dataclass(frozen=True)
class BenchRecord:
    cell: str
    status: str                        # OK or SKIPPED
    modes: tuple[str, ...] = ()
    reason: str | None = None
    # The device, precision and bench sections as they were configured, as plain data: read
    # by people, never interpreted, so that removing or adding a setting leaves every
    # record readable (removing bench.control once made a month of records unreadable).
    device: dict[str, Any] | None = None
    precision: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    workloads: dict[str, WorkloadRun] = field(default_factory=dict)
    looks_planned: int = 1
    adaptive_processes: int = 0
    looks: tuple[Look, ...] = ()
    env_candidate: dict[str, Any] | None = None
    ab: BenchAB | None = None
    arms_note: str | None = None       # how timings are compared, and why (one line)
    unchanged: bool = False            # packages and workload code were the baseline's
    wall_s: float | None = None
    instructions: str | None = None    # why no host instructions were counted here

    def unit(self, workload: str, mode: str) -> BenchUnit:
        """One workload's mode, and what the rules and pages ask of it (core.records.unit)."""
        return BenchUnit(self, workload, mode)

    def units(self) -> list[BenchUnit]:
        """Every unit the record measured: workloads by name, modes in the record's order."""
        return [BenchUnit(self, w, m) for w in sorted(self.workloads) for m in self.modes]


# ---- the numerics record: one cell's errors, judged against tolerances ----------------------


@dataclass(frozen=True)
class CompiledCheck:
    """dynamo's accuracy rule: compiled error <= multiplier x eager's + tolerance/10."""
    status: str                        # PASS, FAIL or NOT MEASURED
    problems: tuple[str, ...] = ()
    rel_l2: dict[str, float | None] = field(default_factory=dict)      # compiled vs eager
    max_abs: dict[str, float | None] = field(default_factory=dict)
    eager_rel_l2: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class FreshProcess:
    """The eager outputs of this process against a fresh process's."""
    equal: bool | None                 # None: not measured
    error: str | None = None
    distance: float | None = None
    worst: str | None = None


@dataclass(frozen=True)
class ModeNumerics:
    status: str                        # PASS, FAIL, NONFINITE, or the worker's failure
    problems: tuple[str, ...] = ()
    rel_l2: dict[str, float | None] = field(default_factory=dict)
    max_abs: dict[str, float | None] = field(default_factory=dict)
    cosine: dict[str, float | None] = field(default_factory=dict)
    rerun_max_abs: float | None = None
    digest: str | None = None
    fingerprint: dict[str, Fingerprint] = field(default_factory=dict)
    compiled_vs_eager: CompiledCheck | None = None    # compiled modes only
    dynamo: Dynamo | None = None                      # compiled modes only
    fresh_process: FreshProcess | None = None         # eager only

    @property
    def ran(self) -> bool:
        return self.status in (Check.PASS, Check.FAIL, Check.NONFINITE)


@dataclass(frozen=True)
class Tolerance:
    rel_l2: float
    cosine_min: float
    compiled_multiplier: float


@dataclass(frozen=True)
class NumericsArm(ArmId):
    workloads: dict[str, dict[str, ModeNumerics]] = field(default_factory=dict)
    coverage: dict[str, Coverage] = field(default_factory=dict)
    hosts: dict[str, Host] = field(default_factory=dict)


@dataclass(frozen=True)
class NumericsAB:
    baseline: NumericsArm
    candidate: ArmId
    rebuilt: bool = False


@dataclass(frozen=True)
class NumericsRecord:
    cell: str
    status: str
    reason: str | None = None
    workloads: dict[str, dict[str, ModeNumerics]] = field(default_factory=dict)
    coverage: dict[str, Coverage] = field(default_factory=dict)
    fingerprint_method: str | None = None
    tolerance: Tolerance | None = None
    wall_s: float | None = None
    ab: NumericsAB | None = None
    hosts: dict[str, Host] = field(default_factory=dict)   # per workload, and the fresh process


# ---- the environment --------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvRecord:
    """The environment (stages/env.py): what it holds is what every bench and numerics stage
    depends on. Its `distributions` are the packages that matter; every installed one is in
    packages.json beside it, and the fingerprint in fingerprint.json."""
    env: dict[str, Any]                # sections: python, torch, hardware, os, packages, ...


KINDS = {"bench": BenchRecord, "numerics": NumericsRecord, "env": EnvRecord,
         "compare": CompareRecord, "migration": MigrationRecord}
