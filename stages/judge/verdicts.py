"""Verdicts of a whole run: rows drafted per cell by the rules of each stage, then every tested
row adjusted together (Holm's step-down over the run, family-wise) and decided. Pure: records
in, rows out."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

from torchgate.core.records.rows import Change, CompareRecord, Contribution, Prior, Row
from torchgate.core.vocabulary import Status, UnitKey, Verdict, cell_key
from torchgate.judge import stats
from torchgate.judge.moderation import RunSpread, squeeze


@dataclass(frozen=True)
class Draft:
    """A row before the run-wide decision: a timing carries its Shift until `finish`. Rules
    return new drafts (`dataclasses.replace`), never change one."""
    key: UnitKey
    verdict: str
    base: float | int | str | None = None
    now: float | int | str | None = None
    shift: stats.Shift | None = None
    delta: float | None = None
    note: str = ""
    run: RunSpread | None = None   # a recorded baseline's run-to-run variance
    reference_runs: int = 1        # the recorded baseline is the mean of this many like runs
    confirmed: bool = True         # fresh processes since adaptive sampling's last look at it
    looks: int | None = None       # its own looks, each at α/looks (judge.counts); None: the run's
    attribution: tuple[Contribution, ...] = ()

    stage = property(lambda self: self.key.stage)
    cell = property(lambda self: self.key.cell)
    workload = property(lambda self: self.key.workload)
    mode = property(lambda self: self.key.mode)
    metric = property(lambda self: self.key.metric)


# A committed baseline cell that cannot be used: unreadable, or SKIPPED where this run measured
# it. One row stands for the cell (metric "cell", NOT COMPARABLE); the gate fails on it.
UNUSABLE = "baseline present but unusable"


MISSING_WHY = "what the baseline measured and this run did not compare"
MISSING_CELL = ("measured in the baseline, not in this run: the device or precision dropped "
                f"from the matrix, or renamed? ({MISSING_WHY} fails the gate unless "
                "gate.fail_on leaves MISSING out)")


def missing_unit(workload_ran: bool) -> str:
    """Why a unit of the baseline has no counterpart now, as a MISSING row's note."""
    return ("in the baseline, not selected in this run: " + (
        "its mode dropped from matrix.modes?" if workload_ran else
        "the workload renamed, or dropped from the matrix?") + f" ({MISSING_WHY} fails the "
        "gate unless gate.fail_on leaves MISSING out)")


def unusable_row(stage: str, cell: str, why: str) -> Draft:
    return Draft(cell_key(stage, cell), Verdict.NOT_COMPARABLE, note=f"{UNUSABLE}: {why}")


def judging_failed(stage: str, cell: str, exc: Exception) -> Draft:
    """A cell whose judging raised: FAILED with the reason (so the gate fails), the run's other
    cells judged, its records kept as measured."""
    return Draft(cell_key(stage, cell), Verdict.FAILED,
                 note=f"judging this cell failed ({type(exc).__name__}: {exc}); its records "
                      "are kept as measured: please report this to torchgate")


def lost_or_skipped(key: UnitKey, reason: str | None, ran_in_baseline: bool) -> Draft:
    """A cell (workload "*") or unit SKIPPED in this run: FAILED where the baseline ran it (an
    upgrade that loses a device or a mode loses what the matrix asks for: "was OK, now
    SKIPPED: no CUDA device"), else SKIPPED, with the reason."""
    key = key.with_metric("cell" if key.workload == "*" else "status")
    why = reason or "no reason given"
    if ran_in_baseline:
        return Draft(key, Verdict.FAILED, base=Status.OK, now=Status.SKIPPED,
                     note=f"was OK, now SKIPPED: {why}")
    return Draft(key, Verdict.SKIPPED, now=Status.SKIPPED if key.metric == "status" else None,
                 note=reason or "")


def skipped_baseline(base, now) -> str | None:
    """Why a committed baseline record cannot stand for a cell this run measured: it was
    SKIPPED there (a run on a machine without the device, committed)."""
    if base is None or now is None or base.status != Verdict.SKIPPED \
            or now.status == Verdict.SKIPPED:
        return None
    return ("the baseline's record of it is SKIPPED (" + (base.reason or "no reason given")
            + "); commit a run measured where the cell runs")


def finish(drafts: list[Draft], *, alpha: float, power: float, looks: int = 1,
           notes: list[str] | None = None, baseline: str = "HEAD",
           has_baseline: bool = False,
           plan: Callable[[Draft], bool] = lambda draft: True) -> CompareRecord:
    """Moderate the tested rows' variances together, adjust their p-values together
    (Holm's step-down over the run: the one family the gate uses; `stats.holm_adjust` says
    why not Benjamini-Hochberg), then decide.

    The error budget with adaptive sampling (up to `looks` looks per cell): an interim
    REGRESSED is always confirmed on a fresh batch, so a regression decided on data no look
    has seen is tested at the full alpha; one decided on data an interim look already saw
    (no fresh batch: out of budget or processes) at alpha/looks, and its note says so.
    Stopping early is only ever for an equivalence, so EQUIVALENT is decided at alpha/looks,
    on the two one-sided tests' (1 - 2·alpha/looks) interval. `plan`: which rows get the
    planning figures (MDE, processes needed), which do not change a verdict."""
    tested = [d for d in drafts if d.shift is not None and d.verdict == Verdict.INCONCLUSIVE]
    shifts, priors = _moderate(tested)
    adjusted = dict(zip(map(id, tested),
                        stats.holm_adjust([shifts[id(d)].p_value for d in tested])))
    rows = [_decided(d, shifts.get(id(d), d.shift), adjusted.get(id(d)), alpha=alpha,
                     power=power, looks=looks, tests=len(tested), plan=plan(d))
            for d in drafts]
    return CompareRecord(baseline, has_baseline, alpha, len(tested), looks, power,
                         tuple(n for n in (notes or []) if n), tuple(rows), priors=priors)


def _decided(d: Draft, shift: stats.Shift | None, p_adj: float | None, *, alpha: float,
             power: float, looks: int, tests: int, plan: bool) -> Row:
    """A draft's row: a tested one decided at its adjusted p-value, with its interval."""
    key = d.key.parts()
    if shift is None:
        return Row(*key, d.verdict, d.base, d.now, d.delta, None, d.note,
                   attribution=d.attribution)
    if d.looks is not None:         # a design of its own (judge.counts)
        significance = equivalence = alpha / d.looks
    else:
        significance = alpha if d.confirmed else alpha / looks
        equivalence = alpha / looks
    verdict, note, mde, needed = d.verdict, d.note, None, None
    if p_adj is not None:
        verdict = stats.verdict(shift, p_adj, alpha=significance, delta=d.delta,
                                equivalence_alpha=equivalence)
        if verdict in (Verdict.REGRESSED, Verdict.IMPROVED) and not d.confirmed:
            note = "; ".join(filter(None, [
                f"tested at α/{looks}: no fresh processes since an interim look", note]))
        if plan:
            mde = stats.minimum_detectable_effect(shift, alpha=significance, power=power,
                                                  delta=d.delta, tests=tests)
            if verdict == Verdict.INCONCLUSIVE:
                needed = stats.processes_needed(shift, alpha=equivalence, power=power,
                                                delta=d.delta, tests=tests)
    significant = verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
    low, high, confidence = stats.decided_interval(
        shift, verdict, significance if significant else equivalence)
    change = Change(ratio=shift.ratio, ci_low=low, ci_high=high, confidence=confidence,
                    p=shift.p_value, n_base=shift.n_base, n_now=shift.n_now,
                    spread=shift.spread, test=test_name(shift),
                    p_adjusted=p_adj, mde=mde, needed=needed,
                    df=shift.df if math.isfinite(shift.df) else None,
                    run_spread=math.expm1(d.run.spread) if d.run else None,
                    run_source=d.run.source if d.run else None)
    return Row(*key, verdict, d.base, d.now, d.delta, change, note,
               possible_slowdown(verdict, change, d.delta), d.attribution)


def test_name(shift: stats.Shift) -> str:
    """The test a change was decided by, as compare.json and the pages name it."""
    if not shift.paired:
        return "Welch t"
    return f"paired t trimmed {shift.trimmed}/{shift.n_base}" if shift.trimmed else "paired t"


def possible_slowdown(verdict: str, change: Change, delta: float | None) -> bool:
    """An undecided change beyond +δ that its own interval shows to be a slowdown (its lower
    end above no change): significant alone, not once the run's tests were taken together.
    An interval that merely reaches beyond +δ says too little to list: every unit too noisy
    to decide has one, changed or not. Nor does an estimate alone: on a machine whose runs
    drift 15 % apart, a third of an unchanged run's estimates lie beyond +δ, and the list
    named them all. With the lower end, an unchanged unit is listed in at most ~5 % of runs
    at any spread (tests/test_gate.py)."""
    return (verdict == Verdict.INCONCLUSIVE and delta is not None
            and change.ratio > 1 + delta and change.ci_low > 1)


def _moderate(tested: list[Draft]) -> tuple[dict[int, stats.Shift], dict[str, Prior]]:
    """Each tested draft's shift (by id) with its process variances moderated across the
    run's units of the same metric and test (and side), plus its run-level variance; and the
    priors fitted, per metric."""
    priors = {}
    groups: dict[tuple, list[Draft]] = {}
    for d in tested:
        if d.looks is None:         # a count's variance is pooled with its own prior
            groups.setdefault((d.metric, d.shift.paired), []).append(d)
    parts = {id(d): list(d.shift.variance_parts) for d in tested}
    for (metric, paired), members in groups.items():
        for side in ("pair",) if paired else ("base", "now"):
            index = [(d, i) for d in members for i, p in enumerate(parts[id(d)])
                     if p.side == side]
            dfs = [stats.own_df(parts[id(d)][i],
                                d.shift.n_now if side == "now" else d.shift.n_base)
                   for d, i in index]
            moderated, prior = squeeze([parts[id(d)][i].variance for d, i in index], dfs)
            for (d, i), m in zip(index, moderated):
                parts[id(d)][i] = dataclasses.replace(parts[id(d)][i], variance=m.variance,
                                                      df=m.prior_df)
            if prior is not None and side in ("now", "pair"):
                priors[metric] = prior
    shifts = {}
    for d in tested:
        # This run's offset and the reference's, the mean of `reference_runs` runs' offsets.
        extra = [stats.Part("run", (1 + 1 / d.reference_runs) * d.run.variance, d.run.df)] \
            if d.run is not None else []
        shifts[id(d)] = stats.with_parts(d.shift.n_base, d.shift.n_now, d.shift.log_ratio,
                                         d.shift.spread, tuple(parts[id(d)] + extra),
                                         d.shift.paired)
    return shifts, priors
