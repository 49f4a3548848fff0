"""The sections of the configuration that tune a run (bench, numerics, stats, history, the
arms, the launcher, the migrations, the gate): typed, frozen, with their defaults. `config`
parses them; they are re-exported in the settings module only (no defaults elsewhere; the δ of
each metric is core.metrics'). A section whose values bound one another checks itself when it
is built (Launcher, Placement); the migration pairs, whose keys `from` and `to` are Python
keywords, are read here by hand (parse_pairs). Standard library only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from torchgate.core import machine
from torchgate.core.errors import UserError
from torchgate.core.metrics import Delta as Delta  # stats.delta: one field per tested metric
from torchgate.core.names import current
from torchgate.core.vocabulary import VERDICTS, Verdict


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    target: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    latency: bool = False              # `_latency_`: also time single calls (tail latency)
    dynamic: bool | None = None        # `_dynamic_`: torch.compile's dynamic (None: automatic)
    # `_rel_l2_tol_`: the workload's own numerics tolerance where its error is larger by
    # nature than a precision's (quantization; a deep net in bfloat16), per precision name,
    # "*" for every precision; it only ever loosens the precision's.
    rel_l2_tol: dict[str, float] = field(default_factory=dict)
    # A sweep's unit (core.config.expand): torch threads for it, the workload it was made
    # from and its swept values, e.g. (("batch", 64), ("threads", 2)).
    threads: int | None = None
    family: str | None = None
    point: tuple[tuple[Any, ...], ...] = ()
    # `_ranks_`: data-parallel ranks per unit (core.config.parse_ranks); `_slow_rank_`: one of
    # them slowed on purpose by a factor (a test knob for the straggler report).
    ranks: int | None = None
    slow_rank: int | None = None
    slow_factor: float | None = None
    item: str | None = None            # `_item_`: what one item is ("token": pages say tokens/s)

    def __post_init__(self):   # an older revision's `stages.workloads.x` is torchgate's
        object.__setattr__(self, "target", current(self.target))


@dataclass(frozen=True)
class Recommend:
    """Which point of a sweep may be recommended: the points within both limits; among them
    judge.sweeps takes the cheapest setting no other point is shown to beat on cost per
    item."""
    max_peak_mib: float | None = None     # peak memory limit per process
    max_latency_ms: float | None = None   # a call's steady-state time (a batch's latency)


@dataclass(frozen=True)
class BenchSettings:
    processes: int = 4
    samples: int = 12
    sample_target_s: float = 0.02
    warmup_s: float = 0.2             # at least this long, then until calls stop speeding up
    min_warmup_calls: int = 3
    warmup_max_s: float = 10.0        # ... but no longer: the mode is then marked unsettled
    # Per unit, the first processes compile with empty inductor caches (a first start); the
    # rest find the caches those left (a second start): two metrics, first_call_s and
    # first_call_warm_s.
    cold_compile_processes: int = 2
    # Tail latency (workloads with `_latency_: true`): after the steady state, single
    # synchronized calls, at least latency_calls of them and about latency_s long.
    latency_calls: int = 200
    latency_s: float = 0.5
    # Where the step goes (workloads with an input pipeline): after the steady state, single
    # steps timed part by part, at least breakdown_calls of them and about breakdown_s long.
    breakdown_calls: int = 30
    breakdown_s: float = 0.3
    timeout_s: float = 300.0
    # A worker that has not imported its workload modules by then is stopped: a module that
    # waits at import (a lock, the network, input) says so in a minute or two, not at timeout_s.
    import_timeout_s: float = 120.0
    # Both arms of a lock-step pair on the same cores (its threads' worth, chosen at random per
    # pair): a core slowed for a while (another tenant of the host, no steal shown) then slows
    # both arms' turns, where on cores of their own it slowed one (launch.local.pair_cores).
    pin_pairs: bool = True
    rank_timeout_s: float = 60.0      # a distributed unit's rendezvous, and each of its steps
    seed: int = 0
    adaptive_budget_s: float = 60.0   # per cell: more processes for INCONCLUSIVE timings
    max_processes: int = 15           # per side, workload and mode, adaptive rounds included
    max_looks: int = 2                # looks per cell; every test then runs at alpha/max_looks
    # The timings adaptive rounds may fund (core.metrics.TIMINGS); None: every one.
    adaptive_metrics: tuple[str, ...] | None = None
    # In a lock-step run, a workload whose inputs are the same in both arms (configuration,
    # module files, interpreter) runs this many rounds (one cold compile, no adaptive ones):
    # the check's A/A control; None: as many as any other.
    unchanged_processes: int | None = None
    # ... and only this many such workloads (the cheapest) are measured so; the others are not
    # measured at all, said on the page; None: every one.
    unchanged_controls: int | None = None
    # Host instructions per call (measure.callgrind): after the timings, one counts process
    # per workload and arm on CPU cells. auto: where valgrind is installed (else said once);
    # always: a missing valgrind is an error; never: not counted.
    instructions: str = "auto"
    # A count the first process a side leaves undecided is counted again, in drawn layouts,
    # up to this many processes a side (judge.counts): a size fixed in advance.
    instruction_processes: int = 4
    instruction_calls: int = 2        # counted calls per mode, after its warm-up
    # Calls per process profiled by operator after its timed samples (the steady state's
    # change traced to operators; measure.ops.operator_times); 0: none profiled.
    profile_calls: int = 10
    instructions_compile: bool = False   # also a compiled mode's first call (warm caches)
    instructions_timeout_s: float = 900.0   # per counts process (valgrind runs ~5-50x slower)


# How a CUDA device is timed: `device.<name>.timing` in params.yaml (conf/device/cuda.yaml),
# checked by core.config. The series each mode measures (hot, cold, graph), the noise-based
# stopping rule, throttle handling and the roofline check's peaks. Without a `timing` section
# a CUDA device is timed as any other: `bench.samples` batched samples between CUDA events.
CUDA_SERIES = ("hot", "cold", "graph")
PEAK_MATHS = ("fp64", "fp32", "tf32", "bf16", "fp16")   # the arithmetic a peak is quoted for


@dataclass(frozen=True)
class CudaTiming:
    # hot: back-to-back calls between one event pair (steady_s); cold: the L2 cache flushed
    # before each call, one call per event pair (cold_s); graph: the step captured as a CUDA
    # graph and replayed back to back (graph_s).
    series: tuple[str, ...] = ("hot", "cold")
    flush_mib: int = 256            # zeroed before each cold call, outside the timed window
    # A series stops once it has bench.samples samples whose relative SD is at most
    # max_rel_sd (0: exactly bench.samples), else at max_samples or after timeout_s.
    max_rel_sd: float = 0.005
    max_samples: int = 100
    timeout_s: float = 1.0
    # A sample window whose SM clock is under throttle_clock x the reference clock, or that
    # a thermal or hardware slowdown hit, is taken again up to throttle_redos times per
    # series; beyond that it is kept and flagged.
    throttle_clock: float = 0.75
    throttle_redos: int = 3
    # Achieved TFLOP/s (GB/s) beyond the peak x (1 + roofline_margin) is a measurement error.
    # Peaks per arithmetic (fp32, tf32, bf16, fp16, fp64) and the memory bandwidth; unset:
    # the datasheet's, for the GPUs torchgate knows (stages/measure/gpu_rules.py).
    roofline_margin: float = 0.05
    peak_tflops: dict[str, float] = field(default_factory=dict)
    peak_gbps: float | None = None


@dataclass(frozen=True)
class NumericsSettings:
    timeout_s: float = 300.0


@dataclass(frozen=True)
class StatsSettings:
    alpha: float = 0.05
    power: float = 0.8
    delta: Delta = field(default_factory=Delta)
    error_growth: float = 2.0           # numerics: flag an error that grew by this factor
    # Against a recorded baseline, two runs differ by more than their processes' spread: the
    # SD of a run's offset (relative), estimated from the committed history when it holds
    # enough runs of the same hardware and packages, else this prior.
    run_spread: float = 0.03
    history_runs: int = 20              # committed bench runs per cell read for that estimate
    # Against a recorded baseline, the reference is the mean of up to this many committed
    # runs of the same code and packages (1: the baseline's run alone).
    reference_runs: int = 5


@dataclass(frozen=True)
class HistorySettings:
    """The `history` stage: the committed runs as series, and where a lasting shift began."""
    runs: int = 50              # committed bench runs per cell, newest first
    shown: int = 10             # points per table in history.md (the newest)
    max_pvalue: float = 0.001   # a change point's t-test, after Bonferroni over its splits
    # A smaller shift (relative) is not reported; None: the metric's δ (stats.delta).
    min_change: float | None = None
    min_points: int = 3         # runs on each side of a lasting shift


@dataclass(frozen=True)
class Matrix:
    modes: tuple[str, ...]
    name: str = "custom"


@dataclass(frozen=True)
class Cells:
    """What the DVC matrix stages iterate over: the selected groups' keys."""
    devices: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()


MEASURE = ("auto", "recorded", "rebuild")
INSTALLERS = ("auto", "uv", "pip")


@dataclass(frozen=True)
class MigrationSettings:
    """Cells compared with each other, device against device or machine against machine
    (stages/migration.py): pair name -> MigrationPair, read from
    {from: [machine/]cell, to: [machine/]cell, modes: [...]} by parse_pairs."""
    pairs: dict[str, Any] = field(default_factory=dict)


# ---- migration pairs ------------------------------------------------------------------
# The migrations a run reports on: named pairs `from -> to`, each side a cell of a machine.
#
#     migration:
#       pairs:
#         fp32_to_bf16: {from: cpu-fp32, to: cpu-bf16}
#         to_box_b: {from: box-a/cpu-fp32, to: box-b/cpu-fp32, modes: [eager]}
#
# A side is `[machine/]cell`: the cell as in reports/<machine>/bench/<cell>.json, the machine
# omitted for this run's. Each pair is one `migration@<name>` stage (dvc.yaml's `foreach`), so
# that no pair declared is no stage.

PAIR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
PAIR_CELL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*-[A-Za-z0-9_.]+$")
PAIR_KEYS = ("from", "to", "modes")


@dataclass(frozen=True)
class Side:
    """One side of a migration: a cell, on a machine (None: this run's)."""
    cell: str
    machine: str | None = None

    def label(self, here: str | None = None) -> str:
        """`cell` on this run's machine (`here`), else `machine/cell`."""
        return self.cell if self.machine in (None, here) else f"{self.machine}/{self.cell}"

    def on(self, here: str) -> Side:
        """The side with its machine named (this run's where it was omitted)."""
        return Side(self.cell, self.machine or here)


@dataclass(frozen=True)
class MigrationPair:
    name: str
    source: Side
    target: Side
    modes: tuple[str, ...] = ()        # () : every mode both sides measured


def side(text: Any, where: str) -> Side:
    if not isinstance(text, str) or text.count("/") > 1:
        raise UserError(f"{where} must be a cell, `[machine/]cell` (e.g. cpu-fp32 or "
                        f"box-b/cpu-fp32), got {text!r}")
    host, _, cell = text.rpartition("/")
    if host:
        why = machine.check_name(host)
        if why:
            raise UserError(f"{where}: {why.replace('machine.name', 'the machine')}")
    if not PAIR_CELL.match(cell):
        raise UserError(f"{where} names the cell {cell!r}; a cell is <device>-<precision> as in "
                        "reports/<machine>/bench/<cell>.json (e.g. cpu-fp32)")
    return Side(cell, host or None)


def parse_pairs(pairs: Any, modes: tuple[str, ...]) -> dict[str, MigrationPair]:
    """`migration.pairs` as Pairs; one line naming the key for anything malformed. `modes`:
    the valid mode names."""
    if pairs is None:
        return {}
    if not isinstance(pairs, dict):
        raise UserError(f"migration.pairs must map a name to {{from: <cell>, to: <cell>}}, "
                        f"got {pairs!r}")
    found = {}
    for name, body in pairs.items():
        where = f"migration.pairs.{name}"
        if not isinstance(name, str) or not PAIR_NAME.match(name):
            raise UserError(f"{where}: a pair's name names its stage and files; use letters, "
                            "digits, '.', '_' and '-' (at most 64)")
        if not isinstance(body, dict):
            raise UserError(f"{where} must be {{from: <cell>, to: <cell>}}, got {body!r}")
        unknown = sorted(set(body) - set(PAIR_KEYS))
        if unknown:
            raise UserError(f"unknown key {where}.{unknown[0]}; valid keys: "
                            f"{', '.join(PAIR_KEYS)}")
        for key in ("from", "to"):
            if key not in body:
                raise UserError(f"{where}.{key} is missing; give a cell such as cpu-fp32")
        chosen = body.get("modes") or ()
        if not isinstance(chosen, (list, tuple)) or any(m not in modes for m in chosen):
            raise UserError(f"{where}.modes must list modes among {', '.join(modes)}, "
                            f"got {chosen!r}")
        source, target = side(body["from"], f"{where}.from"), side(body["to"], f"{where}.to")
        if source == target:
            raise UserError(f"{where} goes from {body['from']} to itself; name two cells")
        found[name] = MigrationPair(name, source, target, tuple(chosen))
    return found


@dataclass(frozen=True)
class MachineSettings:
    """The machine this run's reports belong to: reports/<name>/ (core.machine)."""
    name: str | None = None
    derived: bool = False       # the name was derived from this hardware (torchgate.compose)


@dataclass(frozen=True)
class Baseline:
    rev: str = "HEAD"
    # auto: measure the baseline again beside this run, in lock-step, when its packages or
    # workload code differ from this run's and it can be rebuilt; else its recorded numbers.
    measure: str = "auto"
    # The revision whose workload code a rebuilt baseline arm runs (arms.plan.baseline_code);
    # None: rev's own, or, where rev is the commit checked out, the code its reports measured.
    code: str | None = None


@dataclass(frozen=True)
class Candidate:
    """A what-if arm, measured beside this environment instead of the baseline."""
    python: str | None = None   # another environment's interpreter
    pip: tuple[str, ...] = ()   # requirement overrides on top of this environment
    rev: str | None = None      # another revision's workload code

    @property
    def wanted(self) -> bool:
        return bool(self.python or self.pip or self.rev)


@dataclass(frozen=True)
class Arms:
    """Where rebuilt arms (venvs, checkouts of other revisions) are cached, and how venvs
    are built."""
    cache_dir: str | None = None    # default $TORCHGATE_CACHE, else ~/.cache/torchgate
    installer: str = "auto"         # auto: uv when it is on PATH, else pip
    cache_max_gb: float | None = 40.0   # after a build, evict least recently used; None: keep


# ---- the launcher ---------------------------------------------------------------------
# Where worker processes run, and what a device asks of a cluster node (its Placement); how
# that becomes a Ray request is launch.ray_backend's. `launcher.backend: local` starts every
# worker process on this machine. `ray` sends each unit (one worker process, or a lock-step
# pair as a whole) to a node of a Ray cluster as one task, whose resource request comes from
# the cell's device: `num_cpus` from its thread count, `num_gpus`, `accelerator_type` and
# custom `resources` naming the hardware. The worker of a torch-only interpreter reads device
# specs, Placement among them, through core.config.

BACKENDS = ("local", "ray")
SHARD = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """What a device's cells ask of a cluster node (ignored by the local backend).

    num_gpus: whole GPUs per unit; None: 1 for cuda and xpu, else 0. accelerator_type: the
    node's accelerator type as Ray names it (H100, A100, ...). resources: custom resources that
    the nodes offering this hardware were started with (`ray start --resources`)."""
    num_gpus: float | None = None
    accelerator_type: str | None = None
    resources: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Whole GPUs only: two units given shares of one GPU would time each other."""
        where = f"device.{getattr(self, 'name', '?')}"
        gpus = self.num_gpus
        if gpus is not None and (gpus < 0 or not float(gpus).is_integer()):
            raise UserError(f"{where}.num_gpus must be a whole number >= 0, got {gpus:g}: "
                            "units sharing a GPU would time each other")
        for name, amount in self.resources.items():
            if amount <= 0 or not math.isfinite(amount):
                raise UserError(f"{where}.resources.{name} must be a number > 0, got {amount}")


@dataclass(frozen=True)
class RaySettings:
    # auto: the cluster this machine has joined (RAY_ADDRESS, or `ray start` here);
    # ray://host:port: Ray Client; host:port: the head's GCS; local: a one-node cluster
    # started for this stage.
    address: str = "auto"
    excludes: tuple[str, ...] = ()       # more paths not shipped with the code (gitignore style)
    connect_timeout_s: float = 60.0      # to join, the project folder's upload included
    # The first bench stage measures every cell of the matrix at once (launch.fleet).
    fleet: bool = True
    # Units a node runs at once: 1 unless its devices are independent of each other.
    units_per_node: int = 1


@dataclass(frozen=True)
class Launcher:
    backend: str = "local"
    ray: RaySettings = field(default_factory=RaySettings)
    # "i/n": this job measures the i-th of n parts of every cell's workloads (a check split
    # across runners by a CI job matrix; `launcher.parts` joins them). None: all.
    shard: str | None = None
    # The reports folders (reports/<machine>/ as each job left them) of a split check's n
    # jobs: the bench and numerics stages join them (core.records.parts) instead of measuring.
    parts: tuple[str, ...] = ()

    @property
    def part(self) -> tuple[int, int] | None:
        """(i, n) of `shard`; None: every workload is this job's."""
        if self.shard is None:
            return None
        i, n = map(int, self.shard.split("/"))
        return i, n

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UserError(f"launcher.backend is {self.backend!r}; set it to local (worker "
                            "processes on this machine) or ray (units on a Ray cluster at "
                            "launcher.ray.address)")
        if self.ray.connect_timeout_s <= 0:
            raise UserError("launcher.ray.connect_timeout_s must be > 0, got "
                            f"{self.ray.connect_timeout_s}")
        if self.ray.units_per_node < 1:
            raise UserError("launcher.ray.units_per_node must be >= 1, got "
                            f"{self.ray.units_per_node}")
        if self.shard is not None and not (
                (found := SHARD.fullmatch(str(self.shard)))
                and 1 <= int(found[1]) <= int(found[2])):
            raise UserError(f"launcher.shard is {self.shard!r}; give i/n, this job's part of n "
                            "(1 <= i <= n, e.g. 2/3), or null for every workload")
        if self.shard is not None and self.parts:
            raise UserError("launcher.shard and launcher.parts are both set: a job measures "
                            "its part (shard) or joins the parts (parts), not both")
        if not self.ray.address.strip():
            raise UserError("launcher.ray.address is empty; give auto, ray://host:port, "
                            "host:port or local")


@dataclass(frozen=True)
class CompareSettings:
    allow_hardware_change: bool = False   # compare timings across different hardware anyway
    busy_share: float = 0.25              # leave out processes sampled on a busier machine


# The gate's own token: the run has a baseline and timings, and not one timing could be tested
# against it (every one NOT COMPARABLE, MISSING, SKIPPED, FAILED or untested); or a cell's
# committed baseline is there but unusable (unreadable, or SKIPPED where this run measured it).
NOTHING_COMPARABLE = "NOTHING_COMPARABLE"
GATE_CHOICES = (*(v.value for v in VERDICTS), NOTHING_COMPARABLE)


@dataclass(frozen=True)
class Gate:
    """What fails the run (the `gate` stage, after the reports are written); [] turns it off."""
    fail_on: tuple[str, ...] = (Verdict.REGRESSED.value, Verdict.FAILED.value,
                                Verdict.FLAKY.value, Verdict.MISSING.value,
                                NOTHING_COMPARABLE)
