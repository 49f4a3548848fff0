"""The sections of the configuration that tune a run (bench, numerics, stats, history, the
arms, the gate): typed, frozen, with their defaults. `config` parses them; they are re-exported
in the settings module only (no defaults elsewhere; the δ of each metric is core.metrics').
Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stages.core.metrics import Delta as Delta  # stats.delta: one field per tested metric
from stages.core.vocabulary import VERDICTS, Verdict


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
    # A sweep's unit (core.sweeps): torch threads for it, the workload it was made from and
    # its swept values, e.g. (("batch", 64), ("threads", 2)).
    threads: int | None = None
    family: str | None = None
    point: tuple[tuple[Any, ...], ...] = ()
    # `_ranks_`: data-parallel ranks per unit (core.config.ranks); `_slow_rank_`: one of them
    # slowed on purpose by a factor (a test knob for the straggler report).
    ranks: int | None = None
    slow_rank: int | None = None
    slow_factor: float | None = None
    item: str | None = None            # `_item_`: what one item is ("token": pages say tokens/s)


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
    instructions_compile: bool = False   # also a compiled mode's first call (warm caches)
    instructions_timeout_s: float = 900.0   # per counts process (valgrind runs ~5-50x slower)


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
    (stages/migration.py): pair name -> core.config.migration.MigrationPair, read from
    {from: [machine/]cell, to: [machine/]cell, modes: [...]}."""
    pairs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MachineSettings:
    """The machine this run's reports belong to: reports/<name>/ (core.machine)."""
    name: str | None = None
    derived: bool = False       # the name was derived from this hardware (stages.compose)


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
