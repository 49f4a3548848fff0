"""The numbers a page shows of each unit (a workload's mode in one cell), computed once per run
from a bench record: the steady state, throughput, cost, first call, warm-up, memory, tail
latency, shape changes, GPU series and a distributed unit's ranks, with how many
processes were kept and left out.

This is the one place that decides whose numbers are shown: the processes the tests use
(judge.timings): a process that failed, or whose mode failed, is left out of everything; a
timing also leaves out the processes whose phase of it ran while other programs and steal
took more than `compare.busy_share` of the CPU. Memory, items and the counted metrics (graph
breaks, recompiles) keep every process that measured them, as their rules do. Each number is
the median over its processes of one number per process (a series' median sample, or the
phase's value). The history (judge.trends) is a series of these per unit, one point per
committed run, with the lasting shifts found in it (judge.changepoints). Render reads these
types and never the record. Pure.
"""
from __future__ import annotations

from torchgate.core.metrics import HEADLINE, METRICS, WHOLE_MODE, Family, Reduce
from torchgate.core.numbers import median
from torchgate.core.records.inputs import ab_baseline
from torchgate.core.records.schema import BenchRecord, ModeTiming, Ranks, Waiting
from torchgate.core.records.unit import BenchUnit, busy
from torchgate.core.vocabulary import BASELINE, NOW, Status, UnitKey
from torchgate.judge.results import (
    SUMMARIZED,
    CellSummary,
    GpuSeriesSummary,
    GpuSummary,
    RankSummary,
    ShapeChange,
    UnitSummary,
)
from torchgate.judge.steps import breakdown, step_total, usage

# The busy readings a summary's numbers beyond the metrics keep to: a latency's calls, an
# input pipeline's breakdown (each phase's metrics share one reading).
LATENCY = next(m for m in METRICS if m.family == Family.LATENCY)
BREAKDOWN = next(m for m in METRICS if m.family == Family.BREAKDOWN)

# ---- ranks ------------------------------------------------------------
# A distributed unit's ranks over its processes: what a page shows of them (judge.summary
# holds it per unit). Each number is the median over the processes the tests use (judge.timings:
# the mode ran, and the machine was quiet during its steady state) of one number per process,
# which the process's record answers (core.records.schema.Ranks). Pure.


def rank_summary(unit: BenchUnit, busy_share: float | None) -> RankSummary | None:
    """None for a unit that is not distributed, or that no kept process measured."""
    kept: list[Ranks] = [m.ranks for m in unit.modes()
                         if m.ranks is not None and not busy(m, busy_share)]
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


def summarize(cell: str, record: BenchRecord, price_per_hour: float | None, busy_share: float,
              recorded: BenchRecord | None = None) -> CellSummary:
    """Every unit's summary of `record`, each built once; the baseline arm from the record's
    own (A/B) or, for a record without one, from `recorded` (the committed baseline's record).
    `price_per_hour`: the cell's device (None: no cost); `busy_share`: compare.busy_share."""
    base = ab_baseline(record) if record.ab is not None else recorded
    units, waiting = {}, {}
    for arm, found in ((NOW, record), (BASELINE, base)):
        if found is None or found.status != Status.OK:
            continue
        if record.ab is not None and (waits := waits_of(found)) is not None:
            waiting[arm] = waits
        for unit in found.units():
            key = UnitKey("bench", cell, unit.workload, unit.mode, arm=arm)
            units[key] = unit_summary(unit, price_per_hour, busy_share)
    loops = [p.sentinel.python_loop_s for run in record.workloads.values()
             for p in run.processes if p.sentinel is not None]
    threads = sorted({p.host.hardware.torch_threads for run in record.workloads.values()
                      for p in run.processes if p.host and p.host.hardware
                      and p.host.hardware.torch_threads})
    return CellSummary(cell, record.status, record.reason, units, base is not None,
                       median(loops), record.looks, record.adaptive_processes, waiting,
                       tuple(threads), (record.device or {}).get("threads"), carried(record))


def carried(record: BenchRecord) -> tuple[tuple[str, str, str, str], ...]:
    """(workload, arm, what, why) for each workload an arm did not measure in full: fewer
    rounds for inputs the same in both arms, counts carried or shared."""
    arms = [(NOW, record.workloads)] + ([(BASELINE, record.ab.baseline.workloads)]
                                        if record.ab is not None else [])
    found = []
    for arm, workloads in arms:
        for name, run in sorted(workloads.items()):
            if run.unchanged and arm == NOW:     # said once: both arms ran the same rounds
                found.append((name, "both", "timings" if run.processes else "not measured",
                              run.unchanged))
                found.append((name, "both", "numerics", "computed once, each arm's (the "
                              "numerics stage): the same inputs give the same outputs"))
            if run.counts_from:
                found.append((name, arm, "host instructions", run.counts_from))
    return tuple(found)


def waits_of(record: BenchRecord) -> Waiting | None:
    """An arm's waits for the other's turns, over all its processes; None: none recorded."""
    found = [p.waiting for run in record.workloads.values() for p in run.processes
             if p.waiting is not None]
    if not found:
        return None
    return Waiting(sum(w.seconds for w in found), sum(w.cpu_s for w in found),
                   sum(w.turns for w in found))


def unit_summary(unit: BenchUnit, price_per_hour: float | None,
                 busy_share: float) -> UnitSummary:
    """One unit of one arm, from the processes the tests use (see the module's docstring)."""
    reduce = {Reduce.MEDIAN: median, Reduce.MAX: lambda v: max(v, default=None)}
    values = {m.name: reduce[m.reduce](unit.values(m, busy_share)) for m in METRICS
              if m.name in SUMMARIZED}
    steady = unit.values(HEADLINE, busy_share)
    per_call = values[HEADLINE.name]
    items = unit.field("items")
    per_s = items[0] / per_call if items and per_call else None
    failed = unit.failures()
    modes = unit.modes()
    spec = unit.run.spec if unit.run is not None else None
    return UnitSummary(
        values=values, steady_per_process_s=tuple(steady), items_per_s=per_s,
        usd_per_million=price_per_hour / 3600 * 1e6 / per_s if per_s and price_per_hour
        else None,
        warmup_calls=median(unit.field("warmup_calls")),
        latency_calls=tuple(m.latency_calls for m in modes if m.latency_calls
                            and not busy(m, busy_share, LATENCY)),
        processes_kept=len(steady),
        processes_busy=len(unit.values(WHOLE_MODE)) - len(unit.values(WHOLE_MODE, busy_share)),
        processes_failed=len(failed), failures=tuple(map(str, failed)),
        family=spec.family if spec is not None and spec.point else None,
        point=tuple(map(tuple, spec.point)) if spec is not None and spec.point else (),
        shapes=_shapes(modes), gpu=_gpu(unit.workload, unit.mode, [m for m in modes if m.gpu]),
        clocks=tuple(dict.fromkeys(m.clock for m in modes if m.clock)),
        unmeasured=tuple(dict.fromkeys(kv for m in modes for kv in sorted(m.unmeasured.items()))),
        items=int(items[0]) if items else None, item=spec.item if spec is not None else None,
        ranks=rank_summary(unit, busy_share),
        breakdown=breakdown([m for m in modes if not busy(m, busy_share, BREAKDOWN)]),
        breakdown_busy=sum(step_total(m) is not None and busy(m, busy_share, BREAKDOWN)
                           for m in modes),
        usage=usage(modes, [m for m in modes if not busy(m, busy_share)]))


def _shapes(modes: list[ModeTiming]) -> tuple[ShapeChange, ...]:
    """Per shape after the first: what the change cost. Its first call and recompiles from
    the processes that compiled cold where there are (a warm cache holds the recompiles); the
    next call from those with warm caches where there are: in a cold one, the call after a
    recompile still pays one-time work (measured: `gpt_decode` at kv=512 229 ms there, 3-5 ms
    in warm processes), and the cost beyond the next call would be understated by it."""
    measured = [m for m in modes if m.shapes]
    cold = [m.shapes for m in measured if m.compile_cache != "warm"]
    runs = cold or [m.shapes for m in measured]
    settled = [m.shapes for m in measured if m.compile_cache == "warm"] or runs

    def at(found: list, i: int, shape: str) -> list:
        return [r[i] for r in found if len(r) > i and r[i].shape == shape]
    found = []
    for i, shape in enumerate(runs[0] if runs else ()):
        same = at(runs, i, shape.shape)
        found.append(ShapeChange(
            shape.shape, median(s.first_call_s for s in same),
            median(s.call_s for s in at(settled, i, shape.shape) if s.call_s is not None),
            max(s.recompiles for s in same),
            tuple(dict.fromkeys(r for s in same for r in s.recompile_reasons))))
    return tuple(found)


def _gpu(workload: str, mode: str, modes: list[ModeTiming]) -> GpuSummary | None:
    """The CUDA series of the processes that timed the unit with device.<name>.timing."""
    if not modes:
        return None
    series = []
    for metric, name in ((x.name, x.series) for x in METRICS if x.series):
        found = [m.gpu.series[name] for m in modes if name in m.gpu.series]
        if not found:
            continue
        stops: dict[str, int] = {}
        for s in found:
            stops[s.stop] = stops.get(s.stop, 0) + 1
        series.append(GpuSeriesSummary(
            name, median(median(getattr(m, metric)) for m in modes if getattr(m, metric)),
            tuple(sorted(stops.items())), median(s.rel_sd for s in found if s.rel_sd is not None),
            sum(s.redone for s in found), sum(len(s.throttled) for s in found),
            median(c for s in found for c in s.sm_clock_mhz if c is not None),
            max((s.temperature_c for s in found if s.temperature_c is not None), default=None),
            max((s.power_w for s in found if s.power_w is not None), default=None),
            median(s.tflops for s in found if s.tflops is not None),
            median(s.gbps for s in found if s.gbps is not None),
            tuple(sorted({s.impossible for s in found if s.impossible}))))
    g = modes[0].gpu
    return GpuSummary(tuple(series), median(median(m.steady_s) for m in modes if m.steady_s),
                      g.math, g.peak_tflops, g.peak_gbps, g.peak_source, g.reference_sm_clock_mhz,
                      g.flush_bytes, tuple(f"{workload} {mode}: {m.gpu.graph_error}"
                                           for m in modes if m.gpu.graph_error))


# ---- the history: a unit's summaries over the committed runs -------------------------------


