"""The self-check's arithmetic: A/A splits of one run's processes, injected slowdowns, and the
false-alarm and detection rates the real comparison gives on them, and the rules of other
tools (`rules`) on the very same splits. Pure."""
from __future__ import annotations

import dataclasses
import random

from stages.core.config import Config
from stages.core.numbers import median
from stages.core.records.schema import BenchRecord
from stages.core.vocabulary import Verdict
from stages.judge.history import prior
from stages.judge.rules import RULES, Rule, unit_samples
from stages.judge.timings import bench_rows, process_values, units
from stages.judge.verdicts import Comparison, finish


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


def verdicts(pairs: dict, cfg: Config, *, apart: bool = False) -> Comparison:
    """The real comparison over every cell of one simulated run: {cell: (base, now)}. Halves
    of one run were measured at the same moment: no sentinel, no run-to-run variance. Runs
    measured `apart` (--repeat) face both, as a recorded baseline does (with the prior)."""
    drafts = []
    for cell, (base, now) in pairs.items():
        rows = bench_rows(cell, now, base, cfg.stats.delta, None, cfg.compare.busy_share,
                          alpha=cfg.stats.alpha,
                          same_run=not apart)
        for row in rows if apart else ():
            row.run = prior(cfg.stats.run_spread) if row.shift is not None else None
        drafts += rows
    return finish(drafts, alpha=cfg.stats.alpha, power=cfg.stats.power)


def steady_units(record: BenchRecord) -> list[tuple[str, str]]:
    return [(w, m) for w, m in sorted(units(record))
            if len(process_values(record, w, m, "steady_s")) >= 4]


@dataclasses.dataclass(frozen=True)
class RuleRates:
    rule: Rule
    false_alarm: float              # share of splits with any unit of the run called slower
    detection: float | None         # share of injected slowdowns it called slower


@dataclasses.dataclass(frozen=True)
class SelfCheck:
    false_rate: float               # torchgate: splits with any REGRESSED verdict, any metric
    detect_rate: float | None
    mdes: dict
    steady_false_rate: float        # torchgate's steady-state verdicts only, as the rules see
    rules: tuple[RuleRates, ...]


def _samples(pairs: dict, cell: str, workload: str, mode: str):
    return tuple(unit_samples(r, workload, mode) for r in pairs[cell])


def _rule_alarms(pairs: dict) -> list[bool]:
    """Per rule: whether it called any unit of this simulated run slower."""
    sides = [_samples(pairs, cell, w, m) for cell in sorted(pairs)
             for w, m in sorted(units(pairs[cell][1]))]
    sides = [(b, n) for b, n in sides if b and n]
    return [any(rule.regressed(b, n) for b, n in sides) for rule in RULES]


def check(records: dict, cfg: Config, splits: int, slowdown: float, seed: int = 0) -> SelfCheck:
    """torchgate's false-alarm and detection rates and median MDE per unit over `splits` A/A
    splits, and each rule's of `rules.RULES` on the same splits and slowdowns."""
    rng = random.Random(seed)
    size = cfg.bench.processes
    false_runs, steady_false, detected, trials, mdes = 0, 0, 0, 0, {}
    rule_false, rule_hits = [0] * len(RULES), [0] * len(RULES)
    for _ in range(splits):
        pairs = {cell: split(rec, rng, size) for cell, rec in records.items()}
        null = verdicts(pairs, cfg)
        false_runs += any(r.verdict == Verdict.REGRESSED for r in null.rows)
        steady_false += any(r.verdict == Verdict.REGRESSED and r.metric == "steady_s"
                            for r in null.rows)
        rule_false = [n + hit for n, hit in zip(rule_false, _rule_alarms(pairs))]
        for r in null.rows:
            if r.metric == "steady_s" and r.change is not None and r.change.mde is not None:
                mdes.setdefault((r.cell, r.workload, r.mode), []).append(r.change.mde)
        cell = rng.choice(sorted(pairs))
        candidates = steady_units(records[cell])
        if not candidates:
            continue
        workload, mode = rng.choice(candidates)
        base, now = pairs[cell]
        pairs[cell] = (base, slow_down(now, workload, mode, slowdown))
        hit = verdicts(pairs, cfg)
        trials += 1
        detected += any(r.verdict == Verdict.REGRESSED and (r.cell, r.workload, r.mode, r.metric)
                        == (cell, workload, mode, "steady_s") for r in hit.rows)
        slowed = _samples(pairs, cell, workload, mode)
        rule_hits = [n + rule.regressed(*slowed) for n, rule in zip(rule_hits, RULES)]
    rates = tuple(RuleRates(rule, n / splits, hits / trials if trials else None)
                  for rule, n, hits in zip(RULES, rule_false, rule_hits))
    return SelfCheck(false_runs / splits, detected / trials if trials else None,
                     {k: median(v) for k, v in mdes.items()},
                     steady_false / splits, rates)
