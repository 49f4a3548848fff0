"""The self-check's arithmetic: A/A splits of one run's processes, injected slowdowns, and the
false-alarm and detection rates the real comparison gives on them (within the run, and as
against a recorded baseline), and the rules of other tools (`rules`) on the very same splits,
each at its own sampling design, per unit, and at matched false-alarm rates. Pure."""
from __future__ import annotations

import dataclasses
import math
import random

from torchgate.core.config import Config
from torchgate.core.metrics import INJECTED
from torchgate.core.numbers import median
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import BenchRecord
from torchgate.core.vocabulary import Verdict
from torchgate.judge import stats
from torchgate.judge.rules import RULES, unit_samples
from torchgate.judge.run_to_run import prior
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish


def split(record: BenchRecord, rng: random.Random, size: int) -> tuple[BenchRecord, BenchRecord]:
    """Two records from one: each unit's processes shuffled into halves of `size`."""
    halves: tuple[dict, dict] = ({}, {})
    for name, run in record.workloads.items():
        procs = list(run.processes)
        rng.shuffle(procs)
        halves[0][name] = dataclasses.replace(run, processes=tuple(procs[:size]))
        halves[1][name] = dataclasses.replace(run, processes=tuple(procs[size:2 * size]))
    return tuple(dataclasses.replace(record, workloads=h) for h in halves)


def slow_down(record: BenchRecord, workload: str, mode: str, factor: float) -> BenchRecord:
    run = record.workloads[workload]
    procs = []
    for proc in run.processes:
        m = proc.modes.get(mode)
        if m is not None and m.steady_s:
            m = dataclasses.replace(m, steady_s=tuple(s * (1 + factor) for s in m.steady_s))
            proc = dataclasses.replace(proc, modes={**proc.modes, mode: m})
        procs.append(proc)
    return dataclasses.replace(record, workloads={
        **record.workloads, workload: dataclasses.replace(run, processes=tuple(procs))})


def verdicts(pairs: dict, cfg: Config, *, apart: bool = False) -> CompareRecord:
    """The real comparison over every cell of one simulated run: {cell: (base, now)}. Halves
    of one run were measured at the same moment: no sentinel, no run-to-run variance. Runs
    measured `apart` (--repeat) face both, as a recorded baseline does (with the prior)."""
    drafts = []
    for cell, (base, now) in pairs.items():
        rows = bench_rows(cell, now, base, cfg.stats.delta, None, cfg.compare.busy_share,
                          alpha=cfg.stats.alpha,
                          same_run=not apart)
        drafts += [dataclasses.replace(row, run=prior(cfg.stats.run_spread))
                   if apart and row.shift is not None else row for row in rows]
    return finish(drafts, alpha=cfg.stats.alpha, power=cfg.stats.power)


def steady_units(record: BenchRecord) -> list[tuple[str, str]]:
    return sorted((u.workload, u.mode) for u in record.units() if len(u.values(INJECTED)) >= 4)


def take(record: BenchRecord, size: int) -> BenchRecord:
    """The record with each workload's first `size` processes (a half is shuffled already)."""
    return dataclasses.replace(record, workloads={
        name: dataclasses.replace(run, processes=run.processes[:size])
        for name, run in record.workloads.items()})


@dataclasses.dataclass(frozen=True)
class Rates:
    """One row of the table of peers: a rule at its own sampling design."""
    name: str
    design: str                     # processes and values a side
    rule: str                       # when it calls a change a regression
    false_alarm: float              # unchanged units called slower, mean over the units
    worst: float                    # ... the unit called slower most often
    detection: float | None         # injected slowdowns called slower
    matched: float | None           # ... with its statistic's threshold set where it falsely
    #                                 alarms in `SelfCheck.matched_rate` of unchanged units
    short: str = ""                 # why it ran below its design, if it did


@dataclasses.dataclass(frozen=True)
class SelfCheck:
    false_rate: float               # torchgate: splits with any REGRESSED verdict, any metric
    detect_rate: float | None
    mdes: dict
    steady_false_rate: float        # torchgate's steady-state verdicts only, any unit
    rows: tuple[Rates, ...] = ()    # torchgate within the run, against a recorded baseline,
    #                                 then each rule of `rules.RULES`
    matched_rate: float = 0.01
    pool: int = 0                   # processes a side each split draws from
    # (cell, workload, mode) -> processes a side that would catch the injected slowdown with
    # the configured power (None: none up to 1,000 would); what to change, per unit
    needed: dict = dataclasses.field(default_factory=dict)

    @property
    def rules(self) -> tuple[Rates, ...]:
        return self.rows[2:]


def _samples(pairs: dict, cell: str, workload: str, mode: str):
    return tuple(unit_samples(r, workload, mode) for r in pairs[cell])


def _score(row) -> float:
    """torchgate's statistic: the test's two-sided p (as run: moderated, with any run-level
    variance) as -log p, signed by the direction of the change."""
    c = row.change
    if c is None:
        return -math.inf
    return math.copysign(-math.log(max(c.p, 1e-300)), c.ratio - 1)


class _Tally:
    """Per rule: unchanged units called slower (per unit), slowdowns called slower, and the
    statistic on both, for the matched comparison."""

    def __init__(self):
        self.hits: dict = {}
        self.null: list[float] = []
        self.found: list[bool] = []
        self.slowed: list[float] = []

    def unchanged(self, unit, regressed: bool, score: float) -> None:
        self.hits[unit] = self.hits.get(unit, 0) + regressed
        self.null.append(score)

    def slowdown(self, regressed: bool, score: float) -> None:
        self.found.append(regressed)
        self.slowed.append(score)

    def rates(self, name, design, rule, splits, matched, short="") -> Rates:
        per_unit = [n / splits for n in self.hits.values()] or [0.0]
        null = sorted(self.null)
        cut = null[min(len(null) - 1, math.ceil((1 - matched) * len(null)) - 1)] if null \
            else math.inf
        return Rates(name, design, rule, sum(per_unit) / len(per_unit), max(per_unit),
                     sum(self.found) / len(self.found) if self.found else None,
                     sum(s > cut for s in self.slowed) / len(self.slowed) if self.slowed
                     else None, short)


def check(records: dict, cfg: Config, splits: int, slowdown: float, seed: int = 0,
          matched: float = 0.01) -> SelfCheck:
    """torchgate's false-alarm and detection rates and median MDE per unit over `splits` A/A
    splits, within the run and as against a recorded baseline, and each rule's of
    `rules.RULES` on the same splits at its own sampling design: each unit's processes are
    shuffled into two halves, torchgate takes bench.processes of each, a rule its design's
    processes and values. A rule's false alarms are per unit (none claims control over a
    run); detection: one random unit of a split slowed by `slowdown`; matched: each rule's
    statistic thresholded where it calls `matched` of the unchanged units slower."""
    rng = random.Random(seed)
    size = cfg.bench.processes
    pool = min((len(run.processes) for rec in records.values()
                for run in rec.workloads.values()), default=0) // 2
    false_runs, steady_false, detected, trials, mdes = 0, 0, 0, 0, {}
    tally = {name: _Tally() for name in ("within", "recorded", *(r.name for r in RULES))}

    def rules_on(pools, cell, workload, mode, slowed: bool) -> None:
        base, now = _samples(pools, cell, workload, mode)
        if not base or not now:
            return
        for rule in RULES:
            b, n = rule.design.take(base), rule.design.take(now)
            if slowed:
                tally[rule.name].slowdown(rule.regressed(b, n), rule.score(b, n))
            else:
                tally[rule.name].unchanged((cell, workload, mode), rule.regressed(b, n),
                                           rule.score(b, n))
    for _ in range(splits):
        pools = {cell: split(rec, rng, pool) for cell, rec in records.items()}
        pairs = {cell: (take(b, size), take(n, size)) for cell, (b, n) in pools.items()}
        null = verdicts(pairs, cfg)
        false_runs += any(r.verdict == Verdict.REGRESSED for r in null.rows)
        steady_false += any(r.verdict == Verdict.REGRESSED and r.metric == INJECTED.name
                            for r in null.rows)
        for name, result in (("within", null), ("recorded", verdicts(pairs, cfg, apart=True))):
            for r in result.rows:
                if r.metric == INJECTED.name and r.change is not None:
                    tally[name].unchanged((r.cell, r.workload, r.mode),
                                          r.verdict == Verdict.REGRESSED, _score(r))
        for cell in sorted(pools):
            for workload, mode in sorted((u.workload, u.mode) for u in pools[cell][1].units()):
                rules_on(pools, cell, workload, mode, slowed=False)
        for r in null.rows:
            if r.metric == INJECTED.name and r.change is not None \
                    and r.change.mde is not None:
                mdes.setdefault((r.cell, r.workload, r.mode), []).append(r.change.mde)
        cell = rng.choice(sorted(pools))
        candidates = steady_units(records[cell])
        if not candidates:
            continue
        workload, mode = rng.choice(candidates)
        base, now = pools[cell]
        pools[cell] = (base, slow_down(now, workload, mode, slowdown))
        pairs[cell] = (take(base, size), take(pools[cell][1], size))
        trials += 1
        for name, result in (("within", verdicts(pairs, cfg)),
                             ("recorded", verdicts(pairs, cfg, apart=True))):
            [row] = [r for r in result.rows if (r.cell, r.workload, r.mode, r.metric)
                     == (cell, workload, mode, INJECTED.name)]
            tally[name].slowdown(row.verdict == Verdict.REGRESSED, _score(row))
            detected += name == "within" and row.verdict == Verdict.REGRESSED
        rules_on(pools, cell, workload, mode, slowed=True)
    tests = null.tests if splits else 1
    ours = f"{size} processes × every sample (their medians)"
    delta = cfg.stats.delta.steady_s
    rule = (f"the change of the process medians significant after Holm's step-down over the "
            f"run (family-wise error rate {cfg.stats.alpha}) and its estimate beyond δ "
            f"{delta:.0%}")
    rows = [tally["within"].rates("torchgate, within the run", ours, rule, splits, matched),
            tally["recorded"].rates(
                "torchgate, against a recorded baseline",
                ours + f" + a run's offset (prior {cfg.stats.run_spread:.0%})",
                rule + ", the run-to-run variance added", splits, matched)]
    for r in RULES:
        short = "" if pool >= r.design.processes else (
            f"at {pool} of its {r.design.processes} processes a side: measure with "
            f"--pool {2 * r.design.processes}")
        rows.append(tally[r.name].rates(r.name, r.design.text(), r.description, splits,
                                        matched, short))
    return SelfCheck(false_runs / splits, detected / trials if trials else None,
                     {k: median(v) for k, v in mdes.items()}, steady_false / splits,
                     tuple(rows), matched, pool, needed(records, cfg, slowdown, tests))


def needed(records: dict, cfg: Config, slowdown: float, tests: int) -> dict:
    """Per unit, the processes a side at which `slowdown` would be REGRESSED with
    `stats.power`, at the spread of all its measured processes (two halves' variances) and
    the run's number of tests."""
    found = {}
    for cell, record in records.items():
        for workload, mode in steady_units(record):
            values = record.unit(workload, mode).values(INJECTED, cfg.compare.busy_share)
            half = len(values) // 2
            s = stats.shift(values[:half], values[half:2 * half])
            if s is not None:
                found[cell, workload, mode] = stats.processes_to_catch(
                    s, slowdown, alpha=cfg.stats.alpha, power=cfg.stats.power,
                    delta=cfg.stats.delta.steady_s, tests=tests)
    return found
