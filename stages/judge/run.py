"""A whole comparison: every (stage, cell) of this run against its baseline, decided together.

This is the one family of tests the gate uses: the per-cell pages, adaptive sampling's interim
looks and compare.md all take their verdicts from here, over the same rows. Pure: the inputs
come from core.baseline.
"""
from __future__ import annotations

import dataclasses

from torchgate.core.config import Config
from torchgate.core.metrics import BY_NAME, HEADLINE
from torchgate.core.records.dotted import changed
from torchgate.core.records.inputs import RunInputs
from torchgate.core.records.rows import CompareRecord, Row
from torchgate.core.records.schema import BenchRecord
from torchgate.core.vocabulary import Status, Verdict, cell_key
from torchgate.judge.adaptive import cost_notes
from torchgate.judge.environment import hardware_changes, python_change
from torchgate.judge.numerics import numerics_rows
from torchgate.judge.run_to_run import like_reference, prior, spreads_of_run
from torchgate.judge.summary import carried
from torchgate.judge.timings import (
    bench_rows,
    busy_shares,
    fresh_since_last_look,
    read_time_by_work,
)
from torchgate.judge.tolerance import own_tolerances
from torchgate.judge.verdicts import MISSING_CELL, Draft, finish, judging_failed, unusable_row


def hardware_change(inputs: RunInputs) -> str | None:
    """Why timings cannot be compared with the baseline's: another CPU/GPU model or thread
    count."""
    if inputs.env_now is None or inputs.env_base is None:
        return None
    changed = hardware_changes(inputs.env_base.env, inputs.env_now.env)
    if not changed:
        return None
    return "hardware changed (" + "; ".join(f"{k}: {a} -> {b}" for k, a, b in changed) + ")"


def busy_note(label: str, record: BenchRecord | None, share: float) -> str | None:
    """A warning when other programs used the CPU while this record's samples were taken."""
    shares = busy_shares(record)
    found = [x for x in shares if x > share]
    if not found:
        return None
    return (f"Machine busy in {label}: in {len(found)} of {len(shares)} measured modes other "
            f"programs used more than {share:.0%} of the CPU while samples were taken (up to "
            f"{max(found):.0%}); their timings are left out of the tests "
            f"(`compare.busy_share`). Measure on a quiet machine for tighter verdicts.")


def _ab_note(stage: str, cell: str, record) -> str:
    ab = record.ab
    how = ("worker processes in lock-step pairs taking turns sample by sample; timings are "
           "tested pair by pair (paired t-test on log ratios, trimmed from 8 pairs on, 12 pinned)."
           if getattr(ab, "interleaved", False) else
           "worker processes alternating on this machine.")
    base = (f"`{ab.baseline.python}` (torch {ab.baseline.torch}"
            + (f", workloads at {ab.baseline.rev[:10]}" if ab.baseline.rev else "") + ")")
    if ab.rebuilt:
        return (f"{stage} {cell}: this run (torch {ab.candidate.torch}, this working tree) "
                f"against the baseline measured again beside it, {base}, {how}")
    return (f"A/B: {stage} {cell} compares the candidate `{ab.candidate.python}` (torch "
            f"{ab.candidate.torch}" + (f", workloads at {ab.candidate.rev[:10]}"
                                       if ab.candidate.rev else "")
            + f") with the baseline {base}, {how}")


def _run_level(rows: list[Draft], cfg: Config, spreads: dict, cell: str, now, ab: bool,
               runs: dict[str, int]) -> list[Draft]:
    """Every timing row with the run-to-run variance of its unit when it faces a recorded
    baseline (the mean of its workload's `runs` like runs, else one), and marked where
    adaptive sampling had already looked at it."""
    found = []
    for row in rows:
        if row.shift is not None and BY_NAME[row.metric].timed:   # memory: no interim look
            run = None if ab else spreads.get((cell, row.workload, row.mode, row.metric)) \
                or prior(cfg.stats.run_spread)                     # tests it, no history
            row = dataclasses.replace(
                row, confirmed=fresh_since_last_look(now, row.key),
                run=run, reference_runs=runs.get(row.workload, 1) if run is not None else 1)
        found.append(row)
    return found


def run_level_note(rows: list[Row], power: float) -> str | None:
    """What the run-to-run term cost this run: its sources and sizes, and the smallest
    steady-state slowdown any unit would have been found with (on a machine whose runs drift
    15 % apart a user learns why everything is INCONCLUSIVE, and what to do instead)."""
    carried = [r for r in rows if r.change is not None and r.change.run_source]
    if not carried:
        return None
    parts = []
    for source in sorted({r.change.run_source for r in carried}):
        sizes = sorted(r.change.run_spread for r in carried if r.change.run_source == source)
        size = f"{sizes[0]:.1%}" if sizes[-1] - sizes[0] < 5e-4 else \
            f"{sizes[0]:.1%} to {sizes[-1]:.1%}"
        parts.append(f"{len(sizes)} timing(s) from the prior stats.run_spread = {size}"
                     if source == "prior" else f"{len(sizes)} timing(s) from the {source}, "
                     f"{size}")
    steady = [r for r in carried if r.metric == HEADLINE.name and r.change.mde is not None]
    least = min(steady, key=lambda r: r.change.mde, default=None)
    found = "" if least is None else (
        f" At that size, the smallest steady-state slowdown this run would find with "
        f"{power:.0%} power was " + (f"+{least.change.mde:.0%}" if least.change.mde <= 10
                                     else "over 1000 %")
        + f" ({least.cell} {least.workload} {least.mode}).")
    return ("Against the recorded baseline, every timing's standard error includes the "
            "run-to-run variance of two runs measured apart (" + "; ".join(parts) + ")."
            + found + " Measured in lock-step beside this run (`baseline.measure=auto`), the "
            "baseline would need none.")


def carried_notes(cell: str, record: BenchRecord) -> list[str]:
    """What a record did not measure in full, said once per kind: workloads run as the A/A
    control, and host instructions carried or shared, each with where from."""
    found = carried(record) if record.status == Status.OK else ()
    control = [name for name, _, what, _ in found if what == "timings"]
    untouched = [name for name, _, what, _ in found if what == "not measured"]
    counts: dict[str, list[str]] = {}
    for name, arm, what, why in found:
        if what == "host instructions":
            counts.setdefault(why.split(":")[0], []).append(f"{name} ({arm})")
    return ([f"{cell}: the same inputs in both arms, so measured as the A/A control only "
             f"(bench.unchanged_processes rounds, one cold compile, no adaptive rounds): "
             f"{', '.join(control)}."] if control else []) + (
        [f"{cell}: the same inputs in both arms, not measured (bench.unchanged_controls): "
         f"{', '.join(untouched)}."] if untouched else []) + [
        f"{cell}: host instructions {why}, not counted again: {', '.join(names)}."
        for why, names in counts.items()]


# Bench settings that change what a process measures; the others say how many processes, how
# long to wait or what to fund, and leave each measurement as it was.
MEASURED_SETTINGS = ("samples", "sample_target_s", "warmup_s", "min_warmup_calls",
                     "warmup_max_s", "latency_calls", "latency_s", "breakdown_calls",
                     "breakdown_s", "pin_pairs", "seed", "instruction_calls",
                     "instructions_compile", "profile_calls")


def configuration_moved(base: BenchRecord, now: BenchRecord) -> list[str]:
    """What this cell was measured with that the baseline's was not: its device and precision
    settings (threads, dtype), its modes and the bench settings that change a measurement, as
    "device.threads 1 → 2"."""
    def measured(record: BenchRecord) -> dict:
        settings = record.settings or {}
        return {"device": record.device or {}, "precision": record.precision or {},
                "modes": list(record.modes), "bench": {k: settings.get(k)
                                                       for k in MEASURED_SETTINGS}}
    return [f"{field} {old!r} → {new!r}".replace("'", "")
            for field, old, new in changed(measured(base), measured(now))]


def compare_run(cfg: Config, inputs: RunInputs) -> CompareRecord:
    hardware = None if cfg.compare.allow_hardware_change else hardware_change(inputs)
    notes, drafts, looks, from_git, missing = list(inputs.notes), [], 1, 0, []
    moved: list[str] = []
    spreads, slopes = spreads_of_run({cell: (inputs.history.get(cell, []), pair.base)
                              for (stage, cell), pair in inputs.pairs.items()
                              if stage == "bench" and not pair.ab and pair.base is not None},
                             inputs.env_base, cfg.stats.run_spread)
    for (stage, cell), pair in inputs.pairs.items():
        now, base = pair.now, pair.base
        unreadable = None if pair.ab else inputs.unusable.get((stage, cell))
        if unreadable and now is not None and now.status != Status.SKIPPED:
            drafts.append(unusable_row(stage, cell, unreadable))
        if pair.ab:
            notes.append(_ab_note(stage, cell, now))
        elif now is not None:
            from_git += 1
            # A cell this machine cannot run is never committed: no baseline to miss.
            if inputs.commit is not None and base is None and not unreadable \
                    and now.status != Status.SKIPPED:
                missing.append(f"{stage}/{cell}.json")
        if stage == "bench":
            if now is not None and now.arms_note:
                notes.insert(0, now.arms_note)
            if now is not None:
                notes.extend(carried_notes(cell, now))
            if not pair.ab and now is not None and base is not None \
                    and now.status == base.status == Status.OK:
                moved += [f"{cell} {c}" for c in configuration_moved(base, now)]
            looks = max(looks, now.looks_planned if now is not None else 1)
            for label, record in ((f"this run's {cell}", now), (f"the baseline's {cell}", base)):
                notes.append(busy_note(label, record, cfg.compare.busy_share))
            reference, runs = (base, {}) if pair.ab or base is None else like_reference(
                inputs.history.get(cell, []), base, inputs.env_base, cfg.stats.reference_runs)
            if runs:
                most = max(runs.values())
                fewer = sorted(f"{name} {n}" for name, n in runs.items() if n < most)
                notes.append(f"The recorded baseline of {cell} is the mean of {most} committed "
                             "runs of the same code and packages (their processes together; "
                             f"the run-to-run variance of the reference is then τ²/{most})"
                             + (f"; of fewer where a workload's settings changed: "
                                f"{', '.join(fewer)}" if fewer else "") + ".")
            try:        # the records stay whatever the arithmetic does; the cell says why
                rows = bench_rows(
                    cell, now, reference, cfg.stats.delta, None if pair.ab else hardware,
                    cfg.compare.busy_share, paired=pair.paired, alpha=cfg.stats.alpha,
                    python=python_change(inputs.env_base and inputs.env_base.env,
                                         inputs.env_now and inputs.env_now.env),
                    allow_hardware_change=cfg.compare.allow_hardware_change,
                    slopes={key[1:]: s for key, s in slopes.items() if key[0] == cell})
                drafts += _run_level(rows, cfg, spreads, cell, now, pair.ab, runs)
            except (ArithmeticError, ValueError) as exc:
                drafts.append(judging_failed(stage, cell, exc))
        else:
            own = own_tolerances(cfg, cell)
            try:
                drafts += numerics_rows(cell, now, base, cfg.stats.error_growth, own)
                if pair.rebuilt is not None:
                    drafts += [dataclasses.replace(d, key=dataclasses.replace(
                        d.key, stage="numerics vs rebuilt")) for d in
                        numerics_rows(cell, now, pair.rebuilt, cfg.stats.error_growth, own)]
            except (ArithmeticError, ValueError) as exc:
                drafts.append(judging_failed(stage, cell, exc))
    if inputs.commit is None and from_git:
        notes.insert(0, "No baseline yet: this repository has no commit. Commit `reports/` to "
                        "make this run the baseline.")
    if missing:
        notes.append(f"No baseline at {inputs.rev} for {', '.join(missing)}: compared as NEW. "
                     "Commit `reports/` to make this run the baseline.")
    measured = {cell for (stage, cell), p in inputs.pairs.items()
                if stage == "bench" and p.now is not None and not p.ab}
    compared = {cell for stage, cell in inputs.pairs if stage == "bench"}
    if compared & set(inputs.base_cells):    # a cell the baseline has and this run does not
        drafts += [Draft(cell_key("bench", cell), Verdict.MISSING, note=MISSING_CELL)
                   for cell in sorted(set(inputs.base_cells) - compared)]
    if moved:
        notes.append("Measured otherwise than the baseline: " + "; ".join(moved[:4]) + (
            f" and {len(moved) - 4} more" if len(moved) > 4 else "") + ".")
    if measured and inputs.base_cells and not measured & set(inputs.base_cells):
        drafts.append(unusable_row("bench", "*", (
            f"it holds bench cells {', '.join(inputs.base_cells)} of this machine and none of "
            f"this run's ({', '.join(sorted(measured))}): a renamed cell or precision is not a "
            "first run; compare with the old name, or commit this run as the new baseline")))
    benches = [p.now for (stage, _), p in inputs.pairs.items()
               if stage == "bench" and p.now is not None and p.now.status == Status.OK]
    result = finish(drafts, alpha=cfg.stats.alpha, power=cfg.stats.power, looks=looks,
                    notes=list(dict.fromkeys(notes)), baseline=inputs.rev,
                    has_baseline=inputs.commit is not None)
    benched = {cell: p.now for (stage, cell), p in inputs.pairs.items()
               if stage == "bench" and p.now is not None}
    return dataclasses.replace(
        result, notes=result.notes + tuple(filter(None, [run_level_note(result.rows,
                                                                         result.power)])),
        unchanged=bool(benches) and all(b.unchanged for b in benches) and not moved,
        rows=read_time_by_work(cost_notes(result.rows, benched, cfg.bench)))
