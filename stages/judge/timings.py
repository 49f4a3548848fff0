"""The bench rules: one cell's bench record against the baseline's, as draft rows.

Each timing is reduced to one number per worker process (its median sample, or the phase's
value) and tested in `stats`; so is a mode's own memory where its processes differ; graph
breaks and recompiles compare exactly; statuses say FAILED, IMPROVED, NEW, MISSING or SKIPPED.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

from scipy import stats as sps

from torchgate.core.config.settings import CompareSettings, StatsSettings
from torchgate.core.metrics import BY_NAME, HEADLINE, METRICS, Delta, Family, Metric, Parts, Rule
from torchgate.core.numbers import geometric_mean, median
from torchgate.core.records.rows import Contribution, Row
from torchgate.core.records.schema import BenchRecord, ModeTiming
from torchgate.core.records.unit import BenchUnit, taken
from torchgate.core.vocabulary import Status, UnitKey, Verdict, cell_key
from torchgate.judge import counts, environment, portability, stats, steps
from torchgate.judge.sentinel import UNFITTED, Slope, adjusted, machine_moved, machine_unchanged
from torchgate.judge.verdicts import (
    MISSING_CELL,
    Draft,
    lost_or_skipped,
    missing_unit,
    skipped_baseline,
    unusable_row,
)

# Tested as timings are (memory is tested on its own increment), and counted exactly.
TESTED = tuple(m for m in METRICS if m.rule == Rule.TESTED and m.family != Family.MEMORY)
COUNTED = tuple(m for m in METRICS if m.rule == Rule.COUNTED)
BANDED = tuple(m for m in METRICS if m.rule == Rule.BANDED)
MEMORY = next(m for m in METRICS if m.family == Family.MEMORY)


# ---- a record's units (core.records.unit reduces each) ------------------------------------

def busy_shares(record: BenchRecord | None) -> list[float]:
    """The most CPU that others and steal took in any timed phase, per measured mode of
    every process."""
    return [max(taken(b) for b in readings)
            for run in (record.workloads.values() if record else ())
            for p in run.processes if p.status == Status.OK
            for m in p.modes.values()
            if (readings := [b for b in (m.busy_machine, m.busy_first_call, m.busy_warmup)
                             if b is not None])]


def fresh_since_last_look(record: BenchRecord | None, key: UnitKey) -> bool:
    """Whether this unit's processes include some that no interim look of adaptive sampling
    has seen: then its final test is its first on that data. True without adaptive looks."""
    if record is None or record.looks_planned <= 1:
        return True
    seen = [look.processes for look in record.looks for p in look.pending
            if (p.workload, p.mode, p.metric) == (key.workload, key.mode, key.metric)]
    if not seen:
        return False                    # decided at an interim look, and no more processes
    return len(record.unit(key.workload, key.mode).values(BY_NAME[key.metric])) > seen[-1]


# ---- rows --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judging:
    """How a cell's units are judged: the same for every unit of the cell."""
    delta: Delta
    busy_share: float
    paired: bool                       # the baseline is the other arm, in lock-step pairs
    # A timing's machine-speed veto and sentinel slope: (veto, slope) for a unit's metric
    sentinel: Callable[[UnitKey], tuple[str | None, Slope | None]]
    instruction_processes: int         # the counts processes a side may have (judge.counts)


def bench_rows(cell: str, now: BenchRecord | None, base: BenchRecord | None, delta: Delta,
               not_comparable: str | None = None,
               busy_share: float = CompareSettings.busy_share, *,
               paired: bool = False, alpha: float = StatsSettings.alpha, python: str | None = None,
               same_run: bool = False, allow_hardware_change: bool = False,
               slopes: dict[tuple[str, str, str], Slope] | None = None) -> list[Draft]:
    """`paired`: base is the other arm of an interleaved A/B run, measured in lock-step
    pairs with this one. A base that is another arm of this run (or, `same_run`, part of
    this run's processes) was measured at the same moment, so the sentinel (which would
    compare interpreters, not moments) is not used;
    against a recorded baseline a timing whose unit has a slope on the sentinel fitted from
    the history (`slopes`, (workload, mode, metric) -> judge.sentinel.Slope) is adjusted for
    the machine's speed, any other compared unadjusted, and both voided only when the
    machine moved beyond ±δ (`machine_moved`); with another Python (`python`, in words) the
    copy must show the machine unchanged (`machine_unchanged`, at `alpha`). Hardware is
    judged unit by unit from the processes' own keys (judge.environment.unit_reason);
    `not_comparable`, the environments' hardware change, stands for records that carry
    none."""
    if now is None:
        return [Draft(cell_key("bench", cell), Verdict.MISSING, note=MISSING_CELL)] \
            if base else []
    if now.status == Verdict.SKIPPED:
        return [lost_or_skipped(cell_key("bench", cell), now.reason,
                                base is not None and base.status == Status.OK)]
    usable = base if base is not None and base.status == Status.OK else None
    same_run = same_run or (usable is not None and now.ab is not None)
    # Another Python: the loop times the interpreter, so it cannot stand for the machine.
    modelled = not (same_run or python or usable is None)
    if same_run:
        veto = None
    elif modelled:
        veto = machine_moved(usable, now, alpha=alpha, delta=delta.steady_s)
    else:
        veto = machine_unchanged(usable, now, alpha=alpha, delta=delta.steady_s, python=python)

    def sentinel(key: UnitKey) -> tuple[str | None, Slope | None]:
        slope = (slopes or {}).get((key.workload, key.mode, key.metric)) if modelled else None
        return veto, UNFITTED if modelled and slope is None else slope
    judging = Judging(delta, busy_share, paired, sentinel,
                      (now.settings or {}).get("instruction_processes", 1))
    skipped = skipped_baseline(base, now)
    rows = [unusable_row("bench", cell, skipped)] if skipped else []
    pairs = {(u.workload, u.mode) for r in (now, usable) if r is not None for u in r.units()}
    for workload, mode in sorted(pairs):
        key = UnitKey("bench", cell, workload, mode)
        hardware = environment.unit_reason(now, usable, workload, env_reason=not_comparable,
                                           allow_change=allow_hardware_change,
                                           same_run=same_run)
        try:
            rows.extend(_unit_rows(key, now.unit(workload, mode),
                                   usable.unit(workload, mode) if usable else None,
                                   hardware, judging))
        except (ArithmeticError, ValueError) as exc:   # never the stage's death, nor a pass
            rows.append(Draft(key.with_metric("status"), Verdict.FAILED,
                              note=f"the judge could not compare this unit "
                                   f"({type(exc).__name__}: {exc}); its processes are kept "
                                   "in the record"))
    return rows


def _unit_rows(key: UnitKey, now: BenchUnit, base: BenchUnit | None, hardware: str | None,
               judging: Judging) -> list[Draft]:
    status = key.with_metric("status")
    in_base = base is not None and base.exists
    if not now.exists:
        return [Draft(status, Verdict.MISSING, note=missing_unit(
            key.workload in now.record.workloads))]
    if now.run is not None and now.run.unchanged and not now.run.processes:
        # Not measured: the change cannot have moved it (launch.reuse), said, never a pass
        # of a unit that ran: the same inputs in both arms are the same unit.
        return [Draft(status, Verdict.EQUIVALENT, note=now.run.unchanged)]
    failed_now = now.failures()
    failed_base = base.failures() if in_base else []
    why = now.skipped()
    if why is not None and not failed_now:
        return [lost_or_skipped(key, why, in_base and not failed_base
                                and base.skipped() is None)]
    if failed_now:
        was = ("was OK, now " if in_base and not failed_base else "") + str(failed_now[0])
        ran = now.ran()
        if ran:     # the same code failed in some processes and ran in the others
            was = (f"{len(failed_now)} of {len(failed_now) + ran} processes failed, the "
                   f"first: {failed_now[0]}" + (" (was OK)" if in_base and not failed_base
                                                 else ""))
        return [Draft(status, Verdict.FLAKY if ran else Verdict.FAILED,
                      base=Status.OK if in_base and not failed_base else None,
                      now=failed_now[0].status, note=was)]
    measured = [m for m in (*TESTED, *BANDED) if now.values(m)]
    if not in_base:
        return [Draft(key.with_metric(m.name), Verdict.NEW, now=median(now.values(m)))
                for m in measured]
    if failed_base:
        return [Draft(status, Verdict.IMPROVED, base=Verdict.FAILED, now=Status.OK,
                      note=f"now runs; was {failed_base[0]}")]
    delta = judging.delta
    rows = []
    for found in TESTED:
        mine = key.with_metric(found.name)
        if not base.values(found):
            if found in measured:    # e.g. an older record, which measured it otherwise
                rows.append(Draft(mine, Verdict.NEW, now=median(now.values(found)),
                                  note="the baseline's record has no value of it"))
            continue
        if not found.per_process and steps.negligible(base.modes(found), now.modes(found),
                                                      found.name, delta.steady_s):
            rows.append(Draft(mine, Verdict.EQUIVALENT, base=median(base.values(found)),
                              now=median(now.values(found)),
                              note=f"under {delta.steady_s:.0%} of the step on both sides: it "
                                   "cannot move the step by more than that (not tested)"))
            continue
        veto, slope = judging.sentinel(mine)
        rows.append(_timing_row(mine, found, now, base, delta.of(found.name),
                                hardware or veto or impossible(now, base, found),
                                judging, slope))
    if (memory := own_memory(base, now)) is not None:
        rows.append(_memory_row(key.with_metric(MEMORY.name), *memory[:2], delta.peak_bytes,
                                memory[2]))
    for found in COUNTED:
        b, n = base.values(found), now.values(found)
        if b and n:
            row = _counted_row(key.with_metric(found.name), found, max(b), max(n),
                               now.detail(found), base.detail(found))
            unequal = _unequal(b, n)
            rows.append(dataclasses.replace(row, verdict=Verdict.NOT_COMPARABLE, note=unequal)
                        if unequal else row)
    for found in BANDED:
        row = _banded_row(key.with_metric(found.name), found, base, now,
                          delta.of(found.name), judging.instruction_processes)
        if row is not None:
            rows.append(row)
    return rows


def _banded_row(key: UnitKey, found: Metric, base: BenchUnit, now: BenchUnit, delta: float,
                processes: int) -> Draft | None:
    """A count that repeats closely (host instructions): the counts processes of each side,
    tested where both were counted the same way (judge.counts); a count the baseline
    has and this run lost is FAILED (a counts process that failed) or NOT COMPARABLE (not
    counted here: the record says why). A counts process that failed where the baseline has
    no count is NOT COMPARABLE with its error, once (on the first banded metric, which stands
    for the process). None: neither side counted it."""
    b, n = base.values(found), now.values(found)
    lost = now.counts_lost()
    if not b:
        if n:
            return Draft(key, Verdict.NEW, now=max(n))
        return None if lost is None or found != BANDED[0] else Draft(
            key, Verdict.NOT_COMPARABLE, note=f"not counted: the counts process: {lost}")
    if not n:
        if lost is not None:
            return Draft(key, Verdict.FAILED, base=max(b),
                         note=f"counted in the baseline; the counts process: {lost}")
        return Draft(key, Verdict.NOT_COMPARABLE, base=max(b),
                     note=f"counted in the baseline, not in this run: "
                          f"{now.record.instructions or 'no counts process ran for it'}")
    ways = base.counter(), now.counter()
    if ways[0] is not None and ways[1] is not None and ways[0].key != ways[1].key:
        return Draft(key, Verdict.NOT_COMPARABLE, base=max(b), now=max(n),
                     note="counted another way: " + counter_change(*ways))
    same = base.counts == now.counts
    return counts.count_draft(key, found, b, n, delta, processes, same=same, attribution=() if
                              same or found.parts != Parts.FUNCTIONS else counts.where_it_went(
                                  *([m.instructions_by for m in u.modes(found)]
                                    for u in (base, now))))


def counter_change(base, now) -> str:
    """What differs between two ways of counting (schema.Counter), in words."""
    said = [f"{name} {getattr(base, name)} → {getattr(now, name)}"
            for name in ("tool", "version", "capability", "calls", "threads")
            if getattr(base, name) != getattr(now, name)]
    if base.settings != now.settings:
        said.append("settings " + ", ".join(sorted(set(base.settings) ^ set(now.settings))))
    return "; ".join(said) + " (counts compare only with counts taken the same way)"


def _unequal(base: list[int], now: list[int]) -> str | None:
    """Why a count is not exact here: its processes disagree (a count that depends on timing,
    threads or what a cache held), so its change says nothing of the code; None: exact."""
    sides = [f"{name} {', '.join(map(str, sorted(set(v))))}" for name, v in
             (("baseline", base), ("this run", now)) if len(set(v)) > 1]
    return ("not the same in every process (" + "; ".join(sides) + "): not an exact count "
            "here, not judged") if sides else None


def _counted_row(key: UnitKey, found: Metric, base: int, now: int, detail_now, detail_base
                 ) -> Draft:
    """An exact count: more than the baseline's is REGRESSED, fewer IMPROVED, with what moved
    (core.metrics: its `detail`). Reasons (graph breaks, recompiles) a metric whose new
    reasons regress did not have in the baseline make it REGRESSED too (a guard a new version
    adds, even where another went away), with the new reasons (compared without their line
    numbers); counts by name say which names moved."""
    row = _count_rule(key, base, now)
    if found.zero_regresses and base > 0 and now == 0:
        return dataclasses.replace(row, verdict=Verdict.REGRESSED, note=(
            f"none, where the baseline had {base}: nothing was compiled (dynamo ran the step "
            "eagerly; its graph breaks say why)"))
    if isinstance(detail_now, dict):
        return dataclasses.replace(row, note=portability.moved_counts(detail_base, detail_now))
    new = portability.new_reasons(detail_now, detail_base)
    if new and found.new_detail_regresses:
        return dataclasses.replace(row, verdict=Verdict.REGRESSED,
                                   note="new: " + "; ".join(new[:3]))
    return row


def _timing_row(key: UnitKey, metric: Metric, now: BenchUnit, base: BenchUnit, delta: float,
                not_comparable: str | None, judging: Judging,
                slope: Slope | None = None) -> Draft:
    busy_share, paired = judging.busy_share, judging.paired
    # Processes sampled while other programs took the CPU say nothing about the code.
    b, n = base.values(metric, busy_share), now.values(metric, busy_share)
    everyone = [len(base.values(metric)), len(now.values(metric))]
    left_out = sum(everyone) - len(b) - len(n)
    tested = base.pairs(now, metric, busy_share) if paired else (b, n)
    shift = stats.paired_shift(*tested, pinned=pinned(base.record, now.record)) if paired \
        else stats.shift(*tested)
    shift, machine = adjusted(shift, None if paired else slope, base.record, now.record)
    numbers = shown(tested) if shift is not None else shown((b, n), median)
    verdict, note = Verdict.INCONCLUSIVE, machine
    if left_out:
        note = "; ".join(filter(None, [
            f"{left_out} process(es) left out: other programs and hypervisor steal took more "
            f"than {busy_share:.0%} of the CPU while they ran", _left_out_by_arm(
                (everyone[0] - len(b), everyone[0]), (everyone[1] - len(n), everyone[1])),
            machine]))
    if shift is None:
        note = "fewer than 2 processes on a side: no test" + (f" ({note})" if left_out else "")
        if left_out:
            verdict = Verdict.NOT_COMPARABLE
    if not_comparable:
        verdict, note = Verdict.NOT_COMPARABLE, not_comparable
    attribution = traced(metric, *base.paired_modes(now, metric, busy_share), paired=True) \
        if paired else traced(metric, base.modes(metric, busy_share),
                              now.modes(metric, busy_share))
    return Draft(key, verdict, shift=shift, delta=delta, note=note, attribution=attribution,
                 **numbers)


def traced(metric: Metric, base: list[ModeTiming], now: list[ModeTiming],
           paired: bool = False) -> tuple[Contribution, ...]:
    """A timing's change by its parts, where the table names them (core.metrics.Parts);
    `paired`: the sides' modes are lock-step pairs, round by round."""
    if metric.parts == Parts.PHASES:
        return by_phase(base, now)
    if metric.parts == Parts.OPERATORS:
        return by_operator(base, now, paired)
    return ()


OPERATORS_SHOWN = 8


def by_operator(base: list[ModeTiming], now: list[ModeTiming], paired: bool = False
                ) -> tuple[Contribution, ...]:
    """A steady state's change by operator: each process's self time per call of each
    operator in its profiling pass after the timed samples (measure.ops.operator_times), each
    side's median, the largest change first; each operator tested like a timing (Welch on
    the logs of its processes; `paired`, lock-step pairs: the paired test on each pair's log
    ratio), Holm-adjusted over the unit's operators (`p`). An operator one side never ran is
    new or gone, untested. Empty where a side profiled none."""
    if paired:      # a pair counts where both of its processes profiled
        kept = [(b, n) for b, n in zip(base, now) if b.operator_s and n.operator_s]
        base, now = [b for b, _ in kept], [n for _, n in kept]
    sides = [[m.operator_s for m in modes if m.operator_s] for modes in (base, now)]
    if not all(sides):
        return ()
    names = dict.fromkeys(op for side in sides for found in side for op in found)
    values = {op: [[found.get(op, 0.0) for found in side] for side in sides] for op in names}
    test = stats.paired_shift if paired else stats.shift
    tests = {op: s for op, (b, n) in values.items() if (s := test(b, n)) is not None}
    adjusted = dict(zip(tests, stats.holm_adjust([s.p_value for s in tests.values()])))
    found = [Contribution(op, Parts.OPERATORS, median(b), median(n), p=adjusted.get(op))
             for op, (b, n) in values.items()]
    found.sort(key=lambda c: -abs(c.change))
    return tuple(found[:OPERATORS_SHOWN])


def by_phase(base: list[ModeTiming], now: list[ModeTiming]) -> tuple[Contribution, ...]:
    """A first call's change by the compile's phases (measure.dynamo.compile_phases), the
    largest first: each side's median over its kept processes that recorded phases (a phase a
    process did not reach is 0 there). Empty where a side recorded none (an eager first
    call, an older record)."""
    sides = [[m.compile_phases for m in modes if m.compile_phases] for modes in (base, now)]
    if not all(sides):
        return ()
    names = dict.fromkeys(name for side in sides for phases in side for name in phases)
    found = [Contribution(name, Parts.PHASES, *(median([p.get(name, 0.0) for p in side])
                                           for side in sides)) for name in names]
    return tuple(sorted(found, key=lambda c: -abs(c.change)))


def pinned(base: BenchRecord, now: BenchRecord) -> bool:
    """Both sides' processes ran with a lock-step pair's two processes on the same cores."""
    return all((r.settings or {}).get("pin_pairs", False) for r in (base, now))


def _left_out_by_arm(base: tuple[int, int], now: tuple[int, int]) -> str:
    """Each side's left-out share, and a warning where the shares differ beyond chance
    (Fisher's exact test, two-sided, at 0.05): the rule then keeps processes unlike on the
    two sides, as when the change itself starts work that reads as other programs' (a helper
    process, threads beyond the cell's), and the kept processes compare unlike things."""
    said = f"baseline {base[0]} of {base[1]}, this run {now[0]} of {now[1]}"
    table = [[base[0], base[1] - base[0]], [now[0], now[1] - now[0]]]
    p = sps.fisher_exact(table)[1] if min(base[1], now[1]) else 1.0
    if p < 0.05:
        return (f"{said}: the sides lose processes at different rates (Fisher p "
                f"{p:.2g}), so the rule may keep unlike processes: "
                "does the change itself start work that reads as other programs' CPU?")
    return said


def shown(sides: tuple[list[float], list[float]], centre=geometric_mean) -> dict:
    """The baseline's and this run's numbers beside a tested change: the geometric means of
    the very values the test compared (in lock-step, the pairs it used), so that now / base
    is the change it reports. Medians of every kept process, each side apart, said +12 %
    beside a paired +2.2 % (issue 22)."""
    return dict(base=centre(sides[0]), now=centre(sides[1]))


def impossible(now: BenchUnit, base: BenchUnit, metric: Metric) -> str | None:
    """Why a GPU series cannot be trusted: some process of either side measured it faster
    than the hardware's peak (a measurement error, never a speed-up)."""
    series = metric.series
    for side, unit in (("now", now), ("baseline", base)):
        for m in unit.modes(metric) if series else ():
            found = m.gpu.series.get(series) if m.gpu is not None else None
            if found is not None and found.impossible:
                return f"{side}: {found.impossible}"
    return None


OWN_MEMORY = "the mode's own memory: its peak less what the process held as the mode began"
WHOLE_PEAK = "the whole peak: some process did not record what it held as the mode began"


def own_memory(base: BenchUnit, now: BenchUnit) -> tuple[list[float], list[float], str] | None:
    """Each side's values for the memory row, and what they are: the mode's own increments
    where every process recorded its start (bench 10; a CPU process's ~300 MiB of libraries
    would hide a doubling of a workload's own 10 MiB inside δ = 5 %), else whole peaks."""
    sides = [[(m.peak_bytes, m.start_bytes) for m in unit.modes(MEMORY)] for unit in (base, now)]
    if not all(sides):
        return None
    own = all(start is not None and peak > start for side in sides for peak, start in side)
    b, n = ([float(peak - start if own else peak) for peak, start in side] for side in sides)
    return b, n, OWN_MEMORY if own else WHOLE_PEAK


def _memory_row(key: UnitKey, base: list[float], now: list[float], delta: float,
                note: str = "") -> Draft:
    """Memory, one value per process (own_memory; `note` says which), tested as a timing is
    (Welch on the logs, in the run's Holm family, REGRESSED only with the estimate beyond δ),
    not a ratio of medians: that called 8 % of unchanged units REGRESSED at process spreads
    of 2-8 %; tested, 0.07 % (tests/test_stats_memory.py). Where both sides' processes all
    agree (se 0) or a side has one process, the ratio decides, outside the family. No
    run-to-run variance against a recorded baseline (judge.run): no history of memory."""
    s = stats.shift(base, now)
    if s is None or s.se == 0:
        rule = _ratio_rule(key, median(base), median(now), delta)
        return dataclasses.replace(rule, note=note)
    return Draft(key, Verdict.INCONCLUSIVE, shift=s, delta=delta, note=note,
                 **shown((base, now)))


def _ratio_rule(key: UnitKey, base: float, now: float, delta: float) -> Draft:
    """A metric every process agrees on: the ratio of medians against δ."""
    ratio = now / base if base else math.inf
    verdict = (Verdict.REGRESSED if ratio > 1 + delta else
               Verdict.IMPROVED if ratio < 1 / (1 + delta) else Verdict.EQUIVALENT)
    return Draft(key, verdict, base=base, now=now, delta=delta)


def _count_rule(key: UnitKey, base: int, now: int) -> Draft:
    verdict = (Verdict.REGRESSED if now > base else
               Verdict.IMPROVED if now < base else Verdict.EQUIVALENT)
    return Draft(key, verdict, base=base, now=now)


WORK = tuple(m.name for m in (*COUNTED, *BANDED) if m.family == Family.WORK)
COMPARED = (Verdict.EQUIVALENT, Verdict.REGRESSED, Verdict.IMPROVED)
_TIME_SAYS = {Verdict.EQUIVALENT: "moved by less than δ",
              Verdict.INCONCLUSIVE: "is INCONCLUSIVE: at this machine's noise the time cannot "
                                    "tell",
              Verdict.NOT_COMPARABLE: "could not be compared (its row says why)",
              # Counts run the kernels valgrind can (measure.callgrind), the time the host's
              # own: more counted work can be a native kernel that runs faster here.
              Verdict.IMPROVED: "is IMPROVED: faster on this machine for more work counted "
                                "under valgrind, which runs other kernels than this host's "
                                "(AVX2; MKL's SSE4); read both before accepting either"}


def read_time_by_work(rows: tuple[Row, ...]) -> tuple[Row, ...]:
    """What a unit's time means beside its counts of work, where the two disagree, said on the
    row a page shows (a decided row's note):
    - the time REGRESSED and every count of work EQUIVALENT: the same work takes longer; the
      machine, a library's kernels or memory behaviour moved, not the amount of work the
      code asks for;
    - a count of work REGRESSED and the time not: the code does more work, which the time
      could not tell from this machine's noise (INCONCLUSIVE, NOT COMPARABLE) or which
      moved it by less than δ (EQUIVALENT)."""
    units: dict[tuple, list[Row]] = {}
    for row in rows:
        if row.stage == "bench":
            units.setdefault((row.cell, row.workload, row.mode), []).append(row)
    said: dict[int, str] = {}
    for mine in units.values():
        steady = next((r for r in mine if r.metric == HEADLINE.name), None)
        work = [r for r in mine if r.metric in WORK and r.verdict in COMPARED]
        if steady is None or not work:
            continue
        if steady.verdict == Verdict.REGRESSED and all(
                r.verdict == Verdict.EQUIVALENT for r in work):
            said[id(steady)] = (
                "the same work counted (" + ", ".join(BY_NAME[r.metric].label for r in work)
                + "): the time moved, not the amount of work the code asks for; the machine, "
                  "a library's kernels or memory behaviour")
        for r in work:
            if r.verdict == Verdict.REGRESSED and steady.verdict in _TIME_SAYS:
                said[id(r)] = "the code does more work; the steady state " + _TIME_SAYS[
                    steady.verdict]
    return tuple(dataclasses.replace(r, note="; ".join(filter(None, [r.note, said[id(r)]])))
                 if id(r) in said else r for r in rows)

