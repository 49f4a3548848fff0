"""The shape of every record torchgate writes, in one place, as frozen dataclasses.

A job goes from the launcher to a worker; the worker's result comes back as a BenchProcess or
a NumericsProcess; the stages write a BenchRecord, a NumericsRecord, an EnvRecord and a
CompareRecord (`rows`). `records` reads and writes them (with schema versions and
upgrades); `typed` checks them field by field.

Values: None is "not measured" (or not applicable), a float NaN or infinity is a measured
non-finite value, and an absent optional field takes its default. Renderers show each
differently. Imports the standard library only (the worker runs with torch alone).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stages.core.config import BenchSettings, DeviceSpec, PrecisionSpec, WorkloadSpec
from stages.core.launch import Hardware, Host  # noqa: F401
from stages.core.rows import (BAD, EQUIVALENT, FAILED, IMPROVED, INCONCLUSIVE,  # noqa: F401
                              MISSING, NEW, NOT_COMPARABLE, REGRESSED, SKIPPED, VERDICTS,
                              Change, CompareRecord, Row)

# Statuses of a worker process or of one mode in it. OK ran; the rest say why not.
OK = "OK"
FAILURES = ("ERROR", "OOM", "CRASHED", "TIMEOUT", "NONFINITE")

# ---- the job: what the launcher asks of one worker process ----------------------------------


@dataclass(frozen=True)
class Timing:
    samples: int
    sample_target_s: float
    warmup_s: float
    min_warmup_calls: int


@dataclass(frozen=True)
class Arm:
    """One side of a comparison measured in this run: an interpreter and a revision of the
    workload code. The measuring harness (stages/ outside workloads/) is always this one."""
    name: str                          # "baseline", "candidate" or "now"
    python: str | None = None          # None: this interpreter
    code: str | None = None            # the project folder at `rev`; None: this working tree
    rev: str | None = None
    workloads: dict[str, WorkloadSpec] | None = None   # that revision's; None: this config's
    venv: Any = None                   # arms.venv.VenvSpec `python` was built from, if any


@dataclass(frozen=True)
class Job:
    kind: str                          # "bench", "numerics" or "fresh" (determinism check)
    seed: int
    device: DeviceSpec
    precision: PrecisionSpec
    workloads: tuple[WorkloadSpec, ...]   # one; several for the fresh-process check
    modes: tuple[str, ...]
    timing: Timing
    baton: tuple[int, ...] | None = None  # the two pipe ends of a lock-step pair
    code: str | None = None            # import workloads from this folder (another revision)

    @property
    def workload(self) -> WorkloadSpec:
        return self.workloads[0]


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
class ModeTiming:
    """One mode (eager, compiled ...) in one bench process."""
    status: str
    error: str | None = None
    traceback: str | None = None
    first_call_s: float | None = None     # compile time in compiled modes
    warmup_s: float | None = None
    warmup_calls: int | None = None
    calls_per_sample: int | None = None
    steady_s: tuple[float, ...] = ()      # per call, one entry per sample
    peak_bytes: int | None = None
    items: int | None = None
    flops: float | None = None
    busy_machine: Busy | None = None       # over the steady-state samples
    busy_first_call: Busy | None = None
    busy_warmup: Busy | None = None
    graph_breaks: int | None = None       # compiled modes only
    graph_break_reasons: tuple[str, ...] = ()
    recompiles: int | None = None
    recompile_reasons: tuple[str, ...] = ()
    unique_graphs: int | None = None


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
class BenchProcess(Process):
    sentinel: Sentinel | None = None
    modes: dict[str, ModeTiming] = field(default_factory=dict)


# ---- what one numerics worker process computed ----------------------------------------------


@dataclass(frozen=True)
class OutputError:
    """One output against its float64 reference; None: not measured (empty output, or the
    values are not finite)."""
    rel_l2: float | None
    max_abs: float | None
    cosine: float | None
    nonfinite: int
    numel: int
    ref_nonfinite: int = 0


# How outputs are kept for drift (measure.accuracy writes them): at most WHOLE_MAX values
# whole, larger ones as a CountSketch onto SKETCH_K coordinates. A record with another method
# is not compared for drift.
FINGERPRINT_METHOD = "countsketch-fmix32-k64-v1"
SKETCH_K = 64
WHOLE_MAX = 64


@dataclass(frozen=True)
class Fingerprint:
    """An output kept for drift: whole when small, else norm, mean, std and a sketch."""
    shape: tuple[int, ...]
    nonfinite: int = 0
    values: tuple[float, ...] | None = None
    norm: float | None = None
    mean: float | None = None
    std: float | None = None
    sketch: str | None = None            # base64 of little-endian float64


@dataclass(frozen=True)
class Dynamo:
    graph_breaks: int = 0
    graph_break_reasons: tuple[str, ...] = ()
    recompiles: int = 0
    recompile_reasons: tuple[str, ...] = ()
    unique_graphs: int = 0


@dataclass(frozen=True)
class VersusEager:
    """A compiled output against the eager one, and eager's own error against float64."""
    rel_l2: float | None
    max_abs: float | None
    eager_rel_l2: float | None


@dataclass(frozen=True)
class ModeOutputs:
    """One mode in one numerics process: errors, determinism, fingerprints."""
    status: str
    error: str | None = None
    traceback: str | None = None
    outputs: dict[str, OutputError] = field(default_factory=dict)
    rerun_max_abs: float | None = None
    digest: str | None = None
    fingerprint: dict[str, Fingerprint] = field(default_factory=dict)
    dynamo: Dynamo | None = None
    vs_eager: dict[str, VersusEager] | None = None
    vs_eager_error: str | None = None     # eager failed: compiled vs eager not measured


@dataclass(frozen=True)
class Coverage:
    """The operators one eager step ran, and those that ran off the device."""
    status: str = OK
    error: str | None = None
    traceback: str | None = None
    device: str | None = None
    calls: int = 0
    ops: dict[str, str] = field(default_factory=dict)            # op -> "fwd", "bwd", "fwd+bwd"
    other_device: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fallback_ops: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class FreshOutputs:
    status: str
    error: str | None = None
    traceback: str | None = None
    digest: str | None = None
    fingerprint: dict[str, Fingerprint] = field(default_factory=dict)


@dataclass(frozen=True)
class NumericsProcess(Process):
    modes: dict[str, ModeOutputs] = field(default_factory=dict)
    coverage: Coverage | None = None
    fresh: dict[str, FreshOutputs] = field(default_factory=dict)   # the fresh-process check


# ---- the bench record: every sample of every process of one cell ----------------------------


@dataclass(frozen=True)
class WorkloadRun:
    processes: tuple[BenchProcess, ...] = ()
    spec: WorkloadSpec | None = None


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


@dataclass(frozen=True)
class BenchRecord:
    cell: str
    status: str                        # OK or SKIPPED
    modes: tuple[str, ...] = ()
    reason: str | None = None
    device: DeviceSpec | None = None
    precision: PrecisionSpec | None = None
    settings: BenchSettings | None = None
    workloads: dict[str, WorkloadRun] = field(default_factory=dict)
    looks_planned: int = 1
    adaptive_processes: int = 0
    looks: tuple[Look, ...] = ()
    env_candidate: dict[str, Any] | None = None
    ab: BenchAB | None = None
    arms_note: str | None = None       # how timings are compared, and why (one line)
    unchanged: bool = False            # packages and workload code were the baseline's
    wall_s: float | None = None


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
        return self.status in ("PASS", "FAIL", "NONFINITE")


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
    env: dict[str, Any]                # sections: python, torch, hardware, os, packages, ...
    fingerprint: dict[str, Any] = field(default_factory=dict)
    digest: str | None = None


KINDS = {"bench": BenchRecord, "numerics": NumericsRecord, "env": EnvRecord,
         "compare": CompareRecord}
