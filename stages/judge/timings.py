"""The bench rules: one cell's bench record against the baseline's, as draft rows.

Each timing is reduced to one number per worker process (its median sample, or the phase's
value) and tested in `stats`; so is a mode's own memory where its processes differ; graph
breaks and recompiles compare exactly; statuses say FAILED, IMPROVED, NEW, MISSING or SKIPPED.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterator

from scipy import stats as sps

from stages.core.config.settings import CompareSettings, StatsSettings
from stages.core.metrics import BY_NAME, METRICS, Delta, Family, Metric, Rule
from stages.core.numbers import geometric_mean, median
from stages.core.records.rows import Row
from stages.core.records.schema import BenchProcess, BenchRecord, Busy, ModeTiming
from stages.core.vocabulary import Failure, Status, Verdict
from stages.judge import counts, environment, portability, stats, steps
from stages.judge.sentinel import UNFITTED, Slope, adjusted, machine_moved, machine_unchanged
from stages.judge.verdicts import (
    MISSING_CELL,
    Draft,
    draft,
    lost_or_skipped,
    missing_unit,
    skipped_baseline,
    unusable_row,
)

# Tested as timings are (memory is tested on its own increment), and counted exactly.
TESTED = tuple(m for m in METRICS if m.rule == Rule.TESTED and m.family != Family.MEMORY)
COUNTED = tuple(m for m in METRICS if m.rule == Rule.COUNTED)
BANDED = tuple(m for m in METRICS if m.rule == Rule.BANDED)


# ---- reducing a bench record to process-level summaries ----------------------------------

def _summaries(record: BenchRecord, workload: str, mode: str,
               metric: str) -> Iterator[tuple[BenchProcess, ModeTiming, float]]:
    """(process, its mode's result, its value) for every process where the mode succeeded
    (the counts processes, for a metric counted apart)."""
    run = record.workloads.get(workload)
    found = BY_NAME.get(metric)
    apart = found is not None and found.counted_apart
    for proc in (run.counts if apart else run.processes) if run else ():
        m = proc.modes.get(mode) if proc.status == Status.OK else None
        if m is None or m.status != Status.OK:
            continue
        value = metric_value(m, metric)
        if isinstance(value, tuple):
            if value:
                yield proc, m, median(value)
        elif value is not None:
            yield proc, m, value


def metric_value(m: ModeTiming, metric: str):
    """A mode's value of a metric (core.metrics), or of any other field of its record."""
    found = BY_NAME.get(metric)
    return found.read(m) if found is not None else getattr(m, metric)


def process_values(record: BenchRecord, workload: str, mode: str, metric: str,
                   busy_share: float | None = None) -> list[float]:
    """One number per successful process. With busy_share: only processes whose phase of
    this metric ran while other programs and steal took at most that share of the CPU."""
    return [v for _, m, v in _summaries(record, workload, mode, metric)
            if not busy(m, busy_share, metric)]


def measured_modes(record: BenchRecord, workload: str, mode: str,
                   metric: str) -> list[ModeTiming]:
    """The mode's result in every process that measured the metric."""
    return [m for _, m, _ in _summaries(record, workload, mode, metric)]


def paired_values(base: BenchRecord, now: BenchRecord, workload: str, mode: str, metric: str,
                  busy_share: float | None = None) -> tuple[list[float], list[float]]:
    """Interleaved A/B: the two arms' values in the rounds where both processes succeeded
    (and neither ran on a busy machine), round by round."""
    b, n = ({proc.round: v for proc, m, v in _summaries(r, workload, mode, metric)
             if proc.round is not None and not busy(m, busy_share, metric)} for r in (base, now))
    rounds = sorted(b.keys() & n.keys())
    return [b[r] for r in rounds], [n[r] for r in rounds]


def reading(mode: ModeTiming, metric: str) -> Busy | None:
    """What else took the CPU during the phase a metric times. A record that read the
    steady-state samples only (schema 2) is judged by that reading in every phase."""
    found = BY_NAME.get(metric)
    phase = getattr(mode, found.phase) if found is not None and found.phase else None
    return phase or mode.busy_machine


def taken(b: Busy) -> float:
    """The CPU share this process could not have: others' and the hypervisor's steal."""
    return b.other_cpu + b.steal


def busy(mode: ModeTiming, share: float | None, metric: str = "steady_s") -> bool:
    """Other programs and steal took more than `share` of the CPU while this phase ran."""
    b = reading(mode, metric)
    return share is not None and b is not None and taken(b) > share


def busy_shares(record: BenchRecord | None) -> list[float]:
    """The most CPU that others and steal took in any timed phase, per measured mode of
    every process."""
    return [max(taken(b) for b in readings)
            for run in (record.workloads.values() if record else ())
            for p in run.processes if p.status == Status.OK
            for m in p.modes.values()
            if (readings := [b for b in (m.busy_machine, m.busy_first_call, m.busy_warmup)
                             if b is not None])]


def failures(record: BenchRecord, workload: str, mode: str) -> list[Failure]:
    """How each process that failed the mode failed: the process, or the mode in it."""
    found = []
    run = record.workloads.get(workload)
    for proc in run.processes if run else ():
        if proc.status != Status.OK:
            found.append(Failure(proc.status, proc.error))
            continue
        m = proc.modes.get(mode)
        if m is not None and m.status not in (Status.OK, Status.SKIPPED):
            found.append(Failure(m.status, m.error))
    return found


def ran_in(record: BenchRecord, workload: str, mode: str) -> int:
    """In how many processes the mode ran to the end."""
    run = record.workloads.get(workload)
    return sum(p.status == Status.OK and (m := p.modes.get(mode)) is not None
               and m.status == Status.OK for p in (run.processes if run else ()))


def skipped(record: BenchRecord, workload: str, mode: str) -> str | None:
    """Why the workload said it cannot run in this mode here (stages.workloads.Unsupported),
    where no process ran the mode; else None."""
    run = record.workloads.get(workload)
    modes = [p.modes.get(mode) for p in (run.processes if run else ()) if p.status == Status.OK]
    reasons = [m.error or "" for m in modes if m is not None and m.status == Status.SKIPPED]
    ran = any(m is not None and m.status == Status.OK for m in modes)
    return reasons[0] if reasons and not ran else None


def units(record: BenchRecord) -> set[tuple[str, str]]:
    return {(w, m) for w in record.workloads for m in record.modes}


def fresh_since_last_look(record: BenchRecord | None, workload: str, mode: str,
                          metric: str) -> bool:
    """Whether this unit's processes include some that no interim look of adaptive sampling
    has seen: then its final test is its first on that data. True without adaptive looks."""
    if record is None or record.looks_planned <= 1:
        return True
    seen = [look.processes for look in record.looks for p in look.pending
            if (p.workload, p.mode, p.metric) == (workload, mode, metric)]
    if not seen:
        return False                    # decided at an interim look, and no more processes
    return len(process_values(record, workload, mode, metric)) > seen[-1]


# ---- rows --------------------------------------------------------------------------------

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
        return [draft("bench", cell, "*", "*", "cell", Verdict.MISSING,
                      note=MISSING_CELL)] if base else []
    if now.status == Verdict.SKIPPED:
        return [lost_or_skipped("bench", cell, "*", "*", now.reason,
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

    def sentinel(workload: str, mode: str, metric: str) -> tuple[str | None, Slope | None]:
        slope = (slopes or {}).get((workload, mode, metric)) if modelled else None
        return veto, UNFITTED if modelled and slope is None else slope
    skipped = skipped_baseline(base, now)
    rows = [unusable_row("bench", cell, skipped)] if skipped else []
    for workload, mode in sorted(units(now) | (units(usable) if usable else set())):
        hardware = environment.unit_reason(now, usable, workload, env_reason=not_comparable,
                                         allow_change=allow_hardware_change, same_run=same_run)
        try:
            rows.extend(_unit_rows(cell, workload, mode, now, usable, delta, hardware,
                                   sentinel, busy_share, paired))
        except (ArithmeticError, ValueError) as exc:   # never the stage's death, nor a pass
            rows.append(draft("bench", cell, workload, mode, "status", Verdict.FAILED,
                              note=f"the judge could not compare this unit "
                                   f"({type(exc).__name__}: {exc}); its processes are kept "
                                   "in the record"))
    return rows


def _unit_rows(cell, workload, mode, now: BenchRecord, base: BenchRecord | None, delta: Delta,
               hardware, sentinel, busy_share, paired) -> list[Draft]:
    key = dict(stage="bench", cell=cell, workload=workload, mode=mode)
    in_now = (workload, mode) in units(now)
    in_base = base is not None and (workload, mode) in units(base)
    if not in_now:
        return [draft(**key, metric="status", verdict=Verdict.MISSING, note=missing_unit(
            workload in now.workloads))]
    run = now.workloads.get(workload)
    if run is not None and run.unchanged and not run.processes:
        # Not measured: the change cannot have moved it (launch.reuse), said, never a pass
        # of a unit that ran: the same inputs in both arms are the same unit.
        return [draft(**key, metric="status", verdict=Verdict.EQUIVALENT, note=run.unchanged)]
    failed_now = failures(now, workload, mode)
    failed_base = failures(base, workload, mode) if in_base else []
    why = skipped(now, workload, mode)
    if why is not None and not failed_now:
        return [lost_or_skipped("bench", cell, workload, mode, why, in_base and not failed_base
                                and skipped(base, workload, mode) is None)]
    if failed_now:
        was = ("was OK, now " if in_base and not failed_base else "") + str(failed_now[0])
        ran = ran_in(now, workload, mode)
        if ran:     # the same code failed in some processes and ran in the others
            was = (f"{len(failed_now)} of {len(failed_now) + ran} processes failed, the "
                   f"first: {failed_now[0]}" + (" (was OK)" if in_base and not failed_base
                                                 else ""))
        return [draft(**key, metric="status", verdict=Verdict.FLAKY if ran else Verdict.FAILED,
                      base=Status.OK if in_base and not failed_base else None,
                      now=failed_now[0].status, note=was)]
    measured = [m.name for m in (*TESTED, *BANDED) if process_values(now, workload, mode, m.name)]
    if not in_base:
        return [draft(**key, metric=m, verdict=Verdict.NEW,
                      now=median(process_values(now, workload, mode, m))) for m in measured]
    if failed_base:
        return [draft(**key, metric="status", verdict=Verdict.IMPROVED, base=Verdict.FAILED,
                      now=Status.OK, note=f"now runs; was {failed_base[0]}")]
    rows = []
    for found in TESTED:
        metric = found.name
        if not process_values(base, workload, mode, metric):
            if metric in measured:    # e.g. an older record, which measured it otherwise
                rows.append(draft(**key, metric=metric, verdict=Verdict.NEW,
                                  now=median(process_values(now, workload, mode, metric)),
                                  note="the baseline's record has no value of it"))
            continue
        if not found.per_process and steps.negligible(
                *(measured_modes(r, workload, mode, metric) for r in (base, now)), metric,
                delta.steady_s):
            rows.append(draft(**key, metric=metric, verdict=Verdict.EQUIVALENT,
                              base=median(process_values(base, workload, mode, metric)),
                              now=median(process_values(now, workload, mode, metric)),
                              note=f"under {delta.steady_s:.0%} of the step on both sides: it "
                                   "cannot move the step by more than that (not tested)"))
            continue
        veto, slope = sentinel(workload, mode, metric)
        rows.append(_timing_row(key, metric, now, base, delta.of(metric),
                                hardware or veto or impossible(now, base, workload, mode,
                                                               found),
                                busy_share, paired, slope))
    if (memory := own_memory(base, now, workload, mode)) is not None:
        rows.append(_memory_row(key, *memory[:2], delta.peak_bytes, memory[2]))
    for found in COUNTED:
        b, n = (process_values(r, workload, mode, found.name) for r in (base, now))
        if b and n:
            row = _counted_row(key, found, max(b), max(n), detail(now, workload, mode, found),
                               detail(base, workload, mode, found))
            unequal = _unequal(b, n)
            rows.append(dataclasses.replace(row, verdict=Verdict.NOT_COMPARABLE, note=unequal)
                        if unequal else row)
    for found in BANDED:
        row = _banded_row(key, found, base, now, delta.of(found.name))
        if row is not None:
            rows.append(row)
    return rows


def _counts(record: BenchRecord, workload: str) -> tuple[BenchProcess, ...]:
    run = record.workloads.get(workload)
    return run.counts if run is not None else ()


def _banded_row(key: dict, found: Metric, base: BenchRecord, now: BenchRecord,
                delta: float) -> Draft | None:
    """A count that repeats closely (host instructions): the counts processes of each side,
    tested where both were counted the same way (judge.counts); a count the baseline
    has and this run lost is FAILED (a counts process that failed) or NOT COMPARABLE (not
    counted here: the record says why). A counts process that failed where the baseline has
    no count is NOT COMPARABLE with its error, once (on the first banded metric, which stands
    for the process). None: neither side counted it."""
    workload, mode = key["workload"], key["mode"]
    b, n = (process_values(r, workload, mode, found.name) for r in (base, now))
    lost = next((f"{p.status}: {p.error}" if p.status != Status.OK else
                 f"{p.modes[mode].status}: {p.modes[mode].error}"
                 for p in _counts(now, workload) if p.status != Status.OK
                 or (mode in p.modes and p.modes[mode].status != Status.OK)), None)
    if not b:
        if n:
            return draft(**key, metric=found.name, verdict=Verdict.NEW, now=max(n))
        return None if lost is None or found != BANDED[0] else draft(
            **key, metric=found.name, verdict=Verdict.NOT_COMPARABLE,
            note=f"not counted: the counts process: {lost}")
    if not n:
        if lost is not None:
            return draft(**key, metric=found.name, verdict=Verdict.FAILED, base=max(b),
                         note=f"counted in the baseline; the counts process: {lost}")
        return draft(**key, metric=found.name, verdict=Verdict.NOT_COMPARABLE, base=max(b),
                     note=f"counted in the baseline, not in this run: "
                          f"{now.instructions or 'no counts process ran for it'}")
    ways = [next((p.counter.of_mode(mode) for p in _counts(r, workload)
                  if p.counter is not None), None) for r in (base, now)]
    if ways[0] is not None and ways[1] is not None and ways[0].key != ways[1].key:
        return draft(**key, metric=found.name, verdict=Verdict.NOT_COMPARABLE, base=max(b),
                     now=max(n), note="counted another way: " + counter_change(*ways))
    processes = (now.settings or {}).get("instruction_processes", 1)
    return counts.count_draft(key, found, b, n, delta, processes,
                              same=_counts(base, workload) == _counts(now, workload))


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


def _counted_row(key: dict, found: Metric, base: int, now: int, detail_now, detail_base
                 ) -> Draft:
    """An exact count: more than the baseline's is REGRESSED, fewer IMPROVED, with what moved
    (core.metrics: its `detail`). Reasons (graph breaks, recompiles) a metric whose new
    reasons regress did not have in the baseline make it REGRESSED too (a guard a new version
    adds, even where another went away), with the new reasons (compared without their line
    numbers); counts by name say which names moved."""
    row = _count_rule(key, found.name, base, now)
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


def _timing_row(key: dict, metric: str, now: BenchRecord, base: BenchRecord, delta: float,
                not_comparable: str | None, busy_share: float, paired: bool,
                slope: Slope | None = None) -> Draft:
    workload, mode = key["workload"], key["mode"]
    # Processes sampled while other programs took the CPU say nothing about the code.
    b, n = (process_values(r, workload, mode, metric, busy_share) for r in (base, now))
    everyone = [len(process_values(r, workload, mode, metric)) for r in (base, now)]
    left_out = sum(everyone) - len(b) - len(n)
    tested = paired_values(base, now, workload, mode, metric, busy_share) if paired else (b, n)
    shift = stats.paired_shift(*tested, pinned=pinned(base, now)) if paired else \
        stats.shift(*tested)
    shift, machine = adjusted(shift, None if paired else slope, base, now)
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
    return draft(**key, metric=metric, verdict=verdict, shift=shift, delta=delta, note=note,
                 **numbers)


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


def impossible(now: BenchRecord, base: BenchRecord, workload: str, mode: str,
               metric: Metric) -> str | None:
    """Why a GPU series cannot be trusted: some process of either side measured it faster
    than the hardware's peak (a measurement error, never a speed-up)."""
    series = metric.series
    for side, record in (("now", now), ("baseline", base)):
        for _, m, _ in _summaries(record, workload, mode, metric.name) if series else ():
            found = m.gpu.series.get(series) if m.gpu is not None else None
            if found is not None and found.impossible:
                return f"{side}: {found.impossible}"
    return None


def detail(record: BenchRecord, workload: str, mode: str, metric: Metric):
    """What a counted metric's `detail` says over every process that measured it: its
    reasons, in order; or its counts by name, the most any process counted of each."""
    found = [metric.detail_of(m) for _, m, _ in _summaries(record, workload, mode, metric.name)]
    if any(isinstance(d, dict) for d in found):
        most: dict = {}
        for d in found:
            for name, count in (d or {}).items():
                most[name] = max(most.get(name, 0), count)
        return dict(sorted(most.items()))
    return tuple(dict.fromkeys(r for d in found for r in d or ()))


OWN_MEMORY = "the mode's own memory: its peak less what the process held as the mode began"
WHOLE_PEAK = "the whole peak: some process did not record what it held as the mode began"


def own_memory(base: BenchRecord, now: BenchRecord, workload: str,
               mode: str) -> tuple[list[float], list[float], str] | None:
    """Each side's values for the memory row, and what they are: the mode's own increments
    where every process recorded its start (bench 10; a CPU process's ~300 MiB of libraries
    would hide a doubling of a workload's own 10 MiB inside δ = 5 %), else whole peaks."""
    sides = [[(m.peak_bytes, m.start_bytes) for _, m, _ in
              _summaries(record, workload, mode, "peak_bytes")] for record in (base, now)]
    if not all(sides):
        return None
    own = all(start is not None and peak > start for side in sides for peak, start in side)
    b, n = ([float(peak - start if own else peak) for peak, start in side] for side in sides)
    return b, n, OWN_MEMORY if own else WHOLE_PEAK


def _memory_row(key: dict, base: list[float], now: list[float], delta: float,
                note: str = "") -> Draft:
    """Memory, one value per process (own_memory; `note` says which), tested as a timing is
    (Welch on the logs, in the run's Holm family, REGRESSED only with the estimate beyond δ),
    not a ratio of medians: that called 8 % of unchanged units REGRESSED at process spreads
    of 2-8 %; tested, 0.07 % (tests/test_stats_memory.py). Where both sides' processes all
    agree (se 0) or a side has one process, the ratio decides, outside the family. No
    run-to-run variance against a recorded baseline (judge.run): no history of memory."""
    s = stats.shift(base, now)
    if s is None or s.se == 0:
        rule = _ratio_rule(key, "peak_bytes", median(base), median(now), delta)
        return dataclasses.replace(rule, note=note)
    return draft(**key, metric="peak_bytes", verdict=Verdict.INCONCLUSIVE, shift=s, delta=delta,
                 note=note, **shown((base, now)))


def _ratio_rule(key: dict, metric: str, base: float, now: float, delta: float) -> Draft:
    """A metric every process agrees on: the ratio of medians against δ."""
    ratio = now / base if base else math.inf
    verdict = (Verdict.REGRESSED if ratio > 1 + delta else
               Verdict.IMPROVED if ratio < 1 / (1 + delta) else Verdict.EQUIVALENT)
    return draft(**key, metric=metric, verdict=verdict, base=base, now=now, delta=delta)


def _count_rule(key: dict, metric: str, base: int, now: int) -> Draft:
    verdict = (Verdict.REGRESSED if now > base else
               Verdict.IMPROVED if now < base else Verdict.EQUIVALENT)
    return draft(**key, metric=metric, verdict=verdict, base=base, now=now)


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
        steady = next((r for r in mine if r.metric == "steady_s"), None)
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

