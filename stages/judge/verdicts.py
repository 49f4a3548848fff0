"""Verdicts of a whole run: rows drafted per cell by the rules of each stage, then every tested
row adjusted together (Holm's step-down over the run, family-wise) and decided. Pure: records
in, rows out."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

from stages.core.records.rows import Change, Row
from stages.core.vocabulary import VERDICTS, UnitKey, Verdict
from stages.judge import stats
from stages.judge.moderation import Prior, RunSpread, squeeze


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
    run: RunSpread | None = None   # a recorded baseline's run-to-run variance
    reference_runs: int = 1        # the recorded baseline is the mean of this many like runs
    confirmed: bool = True         # fresh processes since adaptive sampling's last look at it

    @property
    def key(self) -> UnitKey:
        return UnitKey(self.stage, self.cell, self.workload, self.mode, self.metric)


# A committed baseline cell that cannot be used: unreadable, or SKIPPED where this run measured
# it. One row stands for the cell (metric "cell", NOT COMPARABLE); the gate fails on it.
UNUSABLE = "baseline present but unusable"


def unusable_row(stage: str, cell: str, why: str) -> Draft:
    return Draft(stage, cell, "*", "*", "cell", Verdict.NOT_COMPARABLE,
                 note=f"{UNUSABLE}: {why}")


def skipped_baseline(base, now) -> str | None:
    """Why a committed baseline record cannot stand for a cell this run measured: it was
    SKIPPED there (a run on a machine without the device, committed)."""
    if base is None or now is None or base.status != Verdict.SKIPPED \
            or now.status == Verdict.SKIPPED:
        return None
    return ("the baseline's record of it is SKIPPED (" + (base.reason or "no reason given")
            + "); commit a run measured where the cell runs")


@dataclass
class Comparison:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # shown above the tables
    baseline: str = "HEAD"
    has_baseline: bool = False
    alpha: float = 0.05
    power: float = 0.8
    tests: int = 0
    looks: int = 1          # adaptive sampling: looks per cell planned
    priors: dict[str, Prior] = field(default_factory=dict)   # variance moderation, per metric
    unchanged: bool = False   # this run's packages and workload code were the baseline's


def finish(drafts: list[Draft], *, alpha: float, power: float, looks: int = 1,
           notes: list[str] | None = None, baseline: str = "HEAD",
           has_baseline: bool = False,
           plan: Callable[[Draft], bool] = lambda draft: True) -> Comparison:
    """Moderate the tested rows' variances together, adjust their p-values together
    (Holm's step-down over the run: the one family the gate uses; `stats.holm_adjust`
    says why not Benjamini-Hochberg), then decide.

    The error budget with adaptive sampling (up to `looks` looks per cell): an interim
    REGRESSED is always confirmed on a fresh batch, so a regression decided on data no look
    has seen is tested at the full alpha; one decided on data an interim look already saw
    (no fresh batch: out of budget or processes) at alpha/looks, and its note says so.
    Stopping early is only ever for an equivalence, so EQUIVALENT is decided at alpha/looks,
    on the two one-sided tests' (1 - 2·alpha/looks) interval. `plan`: which rows get the
    planning figures (MDE, processes needed), which do not change a verdict."""
    tested = [d for d in drafts if d.shift is not None and d.verdict == Verdict.INCONCLUSIVE]
    priors = _moderate(tested)
    adjusted = dict(zip(map(id, tested),
                        stats.holm_adjust([d.shift.p_value for d in tested])))
    rows = []
    for d in drafts:
        change = None
        if d.shift is not None:
            significance = alpha if d.confirmed else alpha / looks
            equivalence = alpha / looks
            p_adj = adjusted.get(id(d))
            verdict, mde, needed = d.verdict, None, None
            if p_adj is not None:
                verdict = stats.verdict(d.shift, p_adj, alpha=significance, delta=d.delta,
                                        equivalence_alpha=equivalence)
                if verdict in (Verdict.REGRESSED, Verdict.IMPROVED) and not d.confirmed:
                    d.note = "; ".join(filter(None, [
                        f"tested at α/{looks}: no fresh processes since an interim look", d.note]))
            if p_adj is not None and plan(d):
                mde = stats.minimum_detectable_effect(d.shift, alpha=significance, power=power,
                                                      delta=d.delta, tests=len(tested))
                if verdict == Verdict.INCONCLUSIVE:
                    needed = stats.processes_needed(d.shift, alpha=equivalence, power=power,
                                                    delta=d.delta, tests=len(tested))
            d.verdict = verdict
            significant = verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
            low, high, confidence = stats.decided_interval(
                d.shift, verdict, significance if significant else equivalence)
            change = Change(ratio=d.shift.ratio, ci_low=low, ci_high=high,
                            confidence=confidence, p=d.shift.p_value, n_base=d.shift.n_base,
                            n_now=d.shift.n_now, spread=d.shift.spread,
                            test="paired t" if d.shift.paired else "Welch t",
                            p_adjusted=p_adj, mde=mde, needed=needed,
                            df=d.shift.df if math.isfinite(d.shift.df) else None,
                            run_spread=math.expm1(d.run.spread) if d.run else None,
                            run_source=d.run.source if d.run else None)
        rows.append(Row(d.stage, d.cell, d.workload, d.mode, d.metric, d.verdict, d.base, d.now,
                        d.delta, change, d.note))
    return Comparison(rows, [n for n in (notes or []) if n], baseline, has_baseline, alpha,
                      power, len(tested), looks, priors)


SEVERITY = {v: i for i, v in enumerate(VERDICTS)}


def findings(rows: Iterable[Row]) -> list[Row]:
    """One row per finding: the same metric of the same unit judged by several stages (a new
    graph break seen by bench, by numerics and by numerics against the rebuilt baseline) is
    one finding, counted once. Its most serious row stands for it (the first stage's on a
    tie); its stage names every source, and a source that decided otherwise is noted."""
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        groups.setdefault(dataclasses.astuple(r.key)[1:], []).append(r)   # its stage aside
    found = []
    for members in groups.values():
        if len(members) == 1:
            found.append(members[0])
            continue
        worst = min(members, key=lambda r: SEVERITY.get(r.verdict, len(SEVERITY)))
        sources = list(dict.fromkeys(r.stage for r in members))
        others = [f"{r.stage}: {r.verdict}" for r in members if r.verdict != worst.verdict]
        note = "; ".join(filter(None, [worst.note, *others]))
        found.append(dataclasses.replace(worst, stage=" + ".join(sources), note=note))
    return found


def _moderate(tested: list[Draft]) -> dict[str, Prior]:
    """Replace each tested shift by one whose process variances are moderated across the
    run's units of the same metric and test (and side), plus its run-level variance."""
    priors = {}
    groups: dict[tuple, list[Draft]] = {}
    for d in tested:
        groups.setdefault((d.metric, d.shift.paired), []).append(d)
    parts = {id(d): list(d.shift.variance_parts) for d in tested}
    for (metric, paired), members in groups.items():
        for side in ("pair",) if paired else ("base", "now"):
            index = [(d, i) for d in members for i, p in enumerate(parts[id(d)])
                     if p.side == side]
            dfs = [(d.shift.n_now if side == "now" else d.shift.n_base) - 1 for d, _ in index]
            moderated, prior = squeeze([parts[id(d)][i].variance for d, i in index], dfs)
            for (d, i), m in zip(index, moderated):
                parts[id(d)][i] = stats.Part(side, m.variance, m.prior_df)
            if prior is not None and side in ("now", "pair"):
                priors[metric] = prior
    for d in tested:
        # This run's offset and the reference's, the mean of `reference_runs` runs' offsets.
        extra = [stats.Part("run", (1 + 1 / d.reference_runs) * d.run.variance, d.run.df)] \
            if d.run is not None else []
        d.shift = stats.with_parts(d.shift.n_base, d.shift.n_now, d.shift.log_ratio,
                                   d.shift.spread, tuple(parts[id(d)] + extra), d.shift.paired)
    return priors
