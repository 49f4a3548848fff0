"""Verdicts of a whole run: rows drafted per cell by the rules of each stage, then every tested
row adjusted together (Benjamini-Hochberg over the run) and decided. Pure: records in, rows
out."""
from __future__ import annotations

from dataclasses import dataclass, field

from stages.core.schema import Change, Row
from stages.judge import stats


@dataclass
class Draft:
    """A row before the run-wide decision: a timing carries its Shift until `finish`."""
    stage: str
    cell: str
    workload: str
    mode: str
    metric: str
    verdict: str
    base: float | int | str | None = None
    now: float | int | str | None = None
    shift: stats.Shift | None = None
    delta: float | None = None
    note: str = ""


@dataclass
class Comparison:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # shown above the tables
    baseline: str = "HEAD"
    has_baseline: bool = False
    alpha: float = 0.05
    power: float = 0.8
    tests: int = 0
    looks: int = 1          # adaptive sampling: looks per cell planned, alpha is split over them


def finish(drafts: list[Draft], *, alpha: float, power: float, looks: int = 1,
           notes: list[str] | None = None, baseline: str = "HEAD",
           has_baseline: bool = False) -> Comparison:
    """Adjust every tested row together, then decide. With adaptive sampling a cell may be
    looked at up to `looks` times; testing every look at alpha/looks keeps the error rate at
    alpha (Bonferroni over looks: any look could have stopped on a false alarm)."""
    tested = [d for d in drafts if d.shift is not None and d.verdict == stats.INCONCLUSIVE]
    level = alpha / looks
    adjusted = dict(zip(map(id, tested), stats.bh_adjust([d.shift.p_value for d in tested])))
    rows = []
    for d in drafts:
        change = None
        if d.shift is not None:
            p_adj = adjusted.get(id(d))
            verdict, mde, needed = d.verdict, None, None
            if p_adj is not None:
                verdict = stats.verdict(d.shift, p_adj, alpha=level, delta=d.delta)
                mde = stats.minimum_detectable_effect(d.shift, alpha=level, power=power,
                                                      delta=d.delta, tests=len(tested))
                if verdict == stats.INCONCLUSIVE:
                    needed = stats.processes_needed(d.shift, alpha=level, power=power,
                                                    delta=d.delta, tests=len(tested))
            d.verdict = verdict
            low, high = d.shift.interval(level)
            change = Change(ratio=d.shift.ratio, ci_low=low, ci_high=high,
                            confidence=1 - level, p=d.shift.p_value, n_base=d.shift.n_base,
                            n_now=d.shift.n_now, spread=d.shift.spread,
                            test="paired t" if d.shift.paired else "Welch t",
                            p_adjusted=p_adj, mde=mde, needed=needed)
        rows.append(Row(d.stage, d.cell, d.workload, d.mode, d.metric, d.verdict, d.base, d.now,
                        d.delta, change, d.note))
    return Comparison(rows, [n for n in (notes or []) if n], baseline, has_baseline, alpha,
                      power, len(tested), looks)
