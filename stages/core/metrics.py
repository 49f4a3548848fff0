"""Every metric torchgate judges, defined once: what it is, where a mode's record keeps it, how
its processes are reduced, how it is judged against the baseline, and how pages and
`numbers.json` name and show it.

The rooms derive what they need from this table and name no metric themselves: the default δ
of each tested metric (`stats.delta`, core.config.settings.Delta), which metrics the judge
tests and which it counts (judge.timings), the busy-machine rule's phase, the numbers of a
unit's summary (judge.summary), labels and number formats (render), the flat
`numbers.json` (render.metrics). A new metric is one `Metric` here and the field of the
record that holds it.

Rules (judge.timings):
- TESTED: one value per worker process (a series' median sample, or the phase's value),
  compared on the log scale by the run's t-test (judge.stats), REGRESSED only beyond δ.
- COUNTED: exact; every process of a unit agrees, or the count is NOT COMPARABLE (it
  depends on something besides the code, and is reported, not judged): more than the
  baseline's is REGRESSED, fewer IMPROVED. Its `detail` (reasons, or counts by name) says
  what moved; with `new_detail_regresses`, a detail the baseline lacked is REGRESSED too (a
  graph break for a new reason, even where another went away).
- BANDED: a count that repeats closely but not exactly (host instructions: the same code
  counted in another layout, where its stack and heap start, moves by 0.1-0.5 %): read from
  the unit's counts processes, each in a drawn layout, and tested like a timing against a
  prior spread for a count of its size (`layout_noise`; judge.counts), beyond δ
  (`stats.delta.<name>`); counts taken another way (another valgrind, ATen CPU capability or
  setting) are NOT COMPARABLE.
Standard library only (the worker imports it).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, make_dataclass
from typing import Any

from torchgate.core.vocabulary import Word


class Rule(Word):
    TESTED = "tested"
    COUNTED = "counted"
    BANDED = "banded"


class Family(Word):
    """What a metric answers; a page's section, and a query of the rooms."""
    TIME = "time"              # the phases of every unit: first call, warm-up, steady state
    LATENCY = "latency"        # single calls (workloads with `_latency_`)
    GPU = "gpu"                # the CUDA series beside the steady state (cold, graph replay)
    RANKS = "ranks"            # a distributed unit's (`_ranks_`)
    BREAKDOWN = "breakdown"    # where an input pipeline's step goes
    ENERGY = "energy"
    MEMORY = "memory"
    COMPILER = "compiler"      # what torch.compile did
    WORK = "work"              # how much work a call does, counted


class Unit(Word):
    SECONDS = "s"
    BYTES = "bytes"
    JOULES = "J"
    RATIO = "ratio"            # slowest over fastest: shown as its lag
    COUNT = "count"


class Role(Word):
    """A part a metric plays beyond its rule, named here so that no room names the metric."""
    HEADLINE = "headline"      # a unit's main number: a page's main column, the time counts
    #                            are read beside, the migration's per-item time
    INJECTED = "injected"      # the self-check slows it on purpose to show it would be found
    WHOLE_MODE = "whole mode"  # its busy reading stands for the mode's (ranks, usage); a
    #                            process left out of it is a busy process
    CALLS = "calls"            # made of calls whose work a count counts (judge.adaptive)
    HISTORY = "history"        # a table and pictures of its own in history.md
    MIGRATED = "migrated"      # compared by the migration stage, where both sides measured it


class Parts(Word):
    """What a metric's change is traced to (judge.timings, judge.counts; core.records.rows.
    Contribution): the record holds each process's parts."""
    FUNCTIONS = "function"     # host instructions by function and library (callgrind)
    OPERATORS = "operator"     # self time by operator, in a profiling pass (measure.profile)
    PHASES = "phase"           # a first call by the compile's phases (measure.dynamo)


class Reduce(Word):
    """How a unit's processes give the number its summary shows."""
    MEDIAN = "median"
    MAX = "max"                # a count: the most in any process


@dataclass(frozen=True)
class Metric:
    name: str                          # its name in rows and configuration (`stats.delta.<name>`)
    family: Family
    rule: Rule
    unit: Unit
    label: str                         # how pages name it
    delta: float | None = None         # a tested metric's own default δ; None: steady_s's
    source: str | None = None          # the mode's field (dotted: "ranks.comm_s"); default: name
    cache: str | None = None           # only processes whose first call found this compile cache
    phase: str | None = None           # the mode's busy reading of the phase that timed it; None:
    #                                    not a timing (a busy machine leaves no process out)
    reduce: Reduce | None = Reduce.MEDIAN   # for the unit's summary; None: summarized apart
    detail: str | None = None          # the mode's field that says what moved
    new_detail_regresses: bool = False
    exported: tuple[str, float] | None = None   # numbers.json: its key and scale
    series: str | None = None          # its series in the record's `gpu` block
    per_process: bool = True           # False: a per-step value that is negligible below δ
    #                                    of the step (an input pipeline's part; judge.steps)
    counted_apart: bool = False        # its values are the counts processes' (a BANDED one)
    zero_regresses: bool = False       # COUNTED: falling to 0 is REGRESSED (nothing compiled)
    layout_noise: tuple[float, float] = (0.0, 0.0)   # BANDED: one count's relative SD over
    #                                    layouts: (relative, per √count), judge.counts
    roles: frozenset[Role] = frozenset()
    title: str | None = None           # a section's heading (history.md); default: its label
    parts: Parts | None = None         # what its change is traced to

    @property
    def heading(self) -> str:
        return self.title or self.label[:1].upper() + self.label[1:]

    @property
    def timed(self) -> bool:
        """A timing: its processes sampled on a busy machine are left out."""
        return self.phase is not None

    @functools.cached_property
    def path(self) -> tuple[str, ...]:
        """The mode's fields that lead to its value (read for every process of every unit)."""
        return tuple((self.source or self.name).split("."))

    def read(self, mode: Any) -> Any:
        """Its value in one mode's record (None: not measured there); a tuple for a series."""
        if self.cache is not None and (getattr(mode, "compile_cache", None) == "warm") != (
                self.cache == "warm"):
            return None
        value = mode
        for part in self.path:
            value = getattr(value, part, None)
            if value is None:
                return None
        return value

    def detail_of(self, mode: Any) -> Any:
        return getattr(mode, self.detail) if self.detail else None


def _timing(name: str, label: str, delta: float | None, phase: str = "busy_machine", *,
            family: Family = Family.TIME, unit: Unit = Unit.SECONDS, **more) -> Metric:
    return Metric(name, family, Rule.TESTED, unit, label, delta, phase=phase, **more)


def _counted(name: str, label: str, family: Family, **more) -> Metric:
    return Metric(name, family, Rule.COUNTED, Unit.COUNT, label, reduce=Reduce.MAX,
                  exported=(name, 1), **more)


# In the order pages list them.
METRICS: tuple[Metric, ...] = (
    _timing("steady_s", "steady", 0.05, series="hot", exported=("steady_ms", 1e3),
            roles=frozenset({Role.HEADLINE, Role.INJECTED, Role.WHOLE_MODE, Role.CALLS,
                             Role.HISTORY}), title="Steady state (per call)",
            parts=Parts.OPERATORS),
    # The first call with empty compile caches (a first start; every eager first call), and
    # with the caches an earlier process of the unit left (a second start).
    _timing("first_call_s", "first call", 0.2, "busy_first_call", cache="cold",
            exported=("first_call_s", 1), roles=frozenset({Role.HISTORY, Role.MIGRATED}),
            parts=Parts.PHASES,
            title="First call (the compile in compiled modes, cold caches)"),
    _timing("first_call_warm_s", "first call (warm caches)", 0.2, "busy_first_call",
            source="first_call_s", cache="warm", exported=("first_call_warm_s", 1),
            roles=frozenset({Role.MIGRATED}), parts=Parts.PHASES,
            title="First call with warm compile caches (a second start)"),
    _timing("warmup_s", "warm-up", 0.25, "busy_warmup", exported=("warmup_s", 1),
            roles=frozenset({Role.CALLS, Role.MIGRATED})),
    _timing("latency_p50_s", "latency p50", 0.05, "busy_latency", family=Family.LATENCY,
            exported=("latency_p50_ms", 1e3), roles=frozenset({Role.MIGRATED})),
    _timing("latency_p90_s", "latency p90", 0.1, "busy_latency", family=Family.LATENCY),
    _timing("latency_p99_s", "latency p99", 0.2, "busy_latency", family=Family.LATENCY,
            exported=("latency_p99_ms", 1e3),        # a tail is noisier than a median
            roles=frozenset({Role.MIGRATED})),
    _timing("cold_s", "cold", None, family=Family.GPU, series="cold",
            exported=("cold_ms", 1e3)),
    _timing("graph_s", "graph replay", None, family=Family.GPU, series="graph",
            exported=("graph_ms", 1e3)),
    _timing("comm_s", "all-reduce", 0.1, family=Family.RANKS, source="ranks.comm_s",
            reduce=None),
    _timing("straggler", "straggler", 0.1, family=Family.RANKS, unit=Unit.RATIO,
            source="ranks.straggler", reduce=None),
    _timing("input_wait_s", "input wait", None, "busy_breakdown", family=Family.BREAKDOWN,
            reduce=None, per_process=False),
    _timing("copy_s", "copy", None, "busy_breakdown", family=Family.BREAKDOWN, reduce=None,
            per_process=False),
    _timing("compute_s", "compute", None, "busy_breakdown", family=Family.BREAKDOWN,
            reduce=None, per_process=False),
    _timing("joules_per_item", "energy per item", None, family=Family.ENERGY,
            unit=Unit.JOULES, reduce=None),
    # Tested per process as its own increment (judge.timings.own_memory), never left out.
    Metric("peak_bytes", Family.MEMORY, Rule.TESTED, Unit.BYTES, "memory", 0.05,
           exported=("peak_mib", 2 ** -20), roles=frozenset({Role.MIGRATED}),
           title="Peak memory"),
    _counted("graph_breaks", "graph breaks", Family.COMPILER, detail="graph_break_reasons",
             new_detail_regresses=True),
    _counted("recompiles", "recompiles", Family.COMPILER, detail="recompile_reasons",
             new_detail_regresses=True),
    # Fewer is IMPROVED, except none at all: dynamo gave up on the step and ran it eagerly.
    _counted("unique_graphs", "compiled graphs", Family.COMPILER, zero_regresses=True),
    _counted("inductor_kernels", "generated kernels", Family.COMPILER, zero_regresses=True),
    # The work of one call (measure.ops): more is more work, whatever the clock says.
    # Eager modes: operators dispatched (host work) and FLOPs (the math).
    _counted("aten_ops", "aten ops per call", Family.WORK, detail="aten_ops_by_op"),
    _counted("flops_per_call", "FLOPs per call", Family.WORK, detail="flops_by_op"),
    _counted("inductor_bytes", "bytes accessed (inductor)", Family.WORK),
    _counted("kernel_launches", "kernel launches per call", Family.WORK),
    # The host's instructions for one call under callgrind (measure.callgrind), eager and
    # compiled: more is more work, a slower kernel for the same work too. The same code
    # counted in other layouts (paths, variables, the stack's start) spread with SDs of 0.52 %
    # at 66 k a call, 0.23 % at 640 k and 0.10 % at 11.4 M, compiled alike or less
    # (reports/README.md), fitted by 0.1 % + 1.1 / √count (0.53, 0.24, 0.13 %); the prior
    # is 1.3 times that, as an SD from 8 processes may be 25 % short.
    Metric("instructions", Family.WORK, Rule.BANDED, Unit.COUNT, "host instructions per call",
           0.005, reduce=Reduce.MAX, exported=("instructions", 1), counted_apart=True,
           layout_noise=(0.0013, 1.43), roles=frozenset({Role.HISTORY}),
           parts=Parts.FUNCTIONS,
           title="Host instructions per call (callgrind)"),
    # A compiled mode's first call in the counts process, with the counts' kept caches: the
    # host work of a second start's compile (bench.instructions_compile), which its time
    # (first_call_warm_s, δ 20 %) cannot resolve. Band: see reports/README.md.
    Metric("compile_instructions", Family.COMPILER, Rule.BANDED, Unit.COUNT,
           "host instructions of the compile (warm caches)", 0.02, reduce=Reduce.MAX,
           exported=("compile_instructions", 1), counted_apart=True,
           layout_noise=(0.0013, 1.43)),
)
BY_NAME = {m.name: m for m in METRICS}
assert len(BY_NAME) == len(METRICS), "two metrics of one name"


def metric(name: str) -> Metric | None:
    return BY_NAME.get(name)


def names(*families: Family, rule: Rule | None = None) -> tuple[str, ...]:
    """The metrics of these families (every family without any), of one rule if given."""
    return tuple(m.name for m in METRICS if (not families or m.family in families)
                 and (rule is None or m.rule == rule))


def with_role(role: Role) -> tuple[Metric, ...]:
    """The metrics that play a role, in the table's order."""
    return tuple(m for m in METRICS if role in m.roles)


def playing(role: Role) -> Metric:
    """The one metric that plays a role (HEADLINE, INJECTED, WHOLE_MODE)."""
    found = with_role(role)
    assert len(found) == 1, f"{role}: {len(found)} metrics, one expected"
    return found[0]


def label(name: str) -> str:
    found = BY_NAME.get(name)
    return found.label if found else name


# The timings every unit has, compared run to run and drawn as the history's series.
TIMINGS = names(Family.TIME, Family.LATENCY)
# A mode's timed phases, as the worker's busy readings name them (measure.timing): the metrics
# of the time family read from a field of their own name.
PHASES = tuple(m.name for m in METRICS if m.family == Family.TIME and m.source is None)
HEADLINE = playing(Role.HEADLINE)
INJECTED = playing(Role.INJECTED)
WHOLE_MODE = playing(Role.WHOLE_MODE)
# The history's series: the timings, and the counts that repeat closely but not exactly (an
# exact count's change is its own row's verdict).
SERIES = (*TIMINGS, *names(rule=Rule.BANDED))


def _delta_of(self, name: str) -> float:
    """The minimum effect of a metric: its own, else the steady state's."""
    return getattr(self, name) if name in self.__dataclass_fields__ else self.steady_s


# `stats.delta`: a field per tested metric with a δ of its own, at its default.
Delta = make_dataclass(
    "Delta", [(m.name, float, field(default=m.delta)) for m in METRICS
              if m.rule in (Rule.TESTED, Rule.BANDED) and m.delta is not None],
    namespace={"of": _delta_of, "__doc__": (
        "The minimum effect per metric (core.metrics): an estimate within ±δ is never "
        "REGRESSED or IMPROVED. It bounds the estimate, not the truth: a true change a "
        "little under δ sometimes is.")},
    frozen=True)
Delta.__module__ = __name__
