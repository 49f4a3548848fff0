"""The numerics rules: one cell's numerics record against the baseline's, as draft rows (error
growth, compiled vs eager, determinism, drift, graph breaks, recompiles, op coverage). Pure."""
from __future__ import annotations

from torchgate.core.records.outputs import Coverage, Dynamo, extensions, fallback_ops
from torchgate.core.records.schema import CompiledCheck, ModeNumerics, NumericsRecord
from torchgate.core.vocabulary import Check, Status, UnitKey, Verdict, cell_key
from torchgate.judge import portability
from torchgate.judge.verdicts import (
    MISSING_CELL,
    Draft,
    lost_or_skipped,
    skipped_baseline,
    unusable_row,
)

# ---- a cell against the baseline ------------------------------------------------------------

def numerics_rows(cell: str, now: NumericsRecord | None, base: NumericsRecord | None,
                  growth_factor: float = 2.0,
                  own: dict[str, float] | None = None) -> list[Draft]:
    """Per workload and mode: the error against float64 first (`numerics`), then compiled vs
    eager, determinism, drift of the outputs against the baseline's, graph breaks and
    recompiles; per workload: its operator set and the ops that ran off the device. `own`:
    the tolerance of each workload that has its own (judge.tolerance.own_tolerances)."""
    if now is None:
        return [Draft(cell_key("numerics", cell), Verdict.MISSING, note=MISSING_CELL)] \
            if base else []
    if now.status == Verdict.SKIPPED:
        return [lost_or_skipped(cell_key("numerics", cell), now.reason,
                                base is not None and base.status == Status.OK)]
    skipped = skipped_baseline(base, now)
    rows = [unusable_row("numerics", cell, skipped)] if skipped else []
    tolerance = now.tolerance.rel_l2 if now.tolerance else None
    same_method = now.fingerprint_method, base.fingerprint_method if base else None
    for workload, modes in sorted(now.workloads.items()):
        for mode, ev in sorted(modes.items()):
            key = UnitKey("numerics", cell, workload, mode)
            prev = base.workloads.get(workload, {}).get(mode) if base else None
            rows.append(_numerics_row(key, ev, prev, growth_factor))
            if ev.ran:
                rows.extend(portability_rows(key, ev, prev, (own or {}).get(workload, tolerance),
                                             same_method))
        cov = now.coverage.get(workload)
        if cov is not None and any(ev.ran for ev in modes.values()):
            # a workload that failed outright is reported once, not twice
            rows.extend(coverage_rows(UnitKey("numerics", cell, workload, "eager"), cov,
                                      base.coverage.get(workload) if base else None))
    return rows


def _numerics_row(key: UnitKey, ev: ModeNumerics, prev: ModeNumerics | None,
                  growth_factor: float) -> Draft:
    problems = "; ".join(ev.problems)
    verdict, note = Verdict.EQUIVALENT, ""
    if ev.status == Status.SKIPPED:     # the workload cannot run here by design
        verdict, note = Verdict.SKIPPED, problems
    elif prev is None:
        verdict = Verdict.FAILED if ev.status != Check.PASS else Verdict.NEW
        note = problems
    elif ev.status != Check.PASS:
        verdict = Verdict.FAILED
        note = ("was PASS, now " if prev.status == Check.PASS else "") + problems
    elif prev.status != Check.PASS:
        verdict, note = Verdict.IMPROVED, "now passes; was " + "; ".join(prev.problems)
    else:
        grown = [f"{name} error {err / old:.1f}x the baseline's ({old:.2e} -> {err:.2e})"
                 for name, err in ev.rel_l2.items()
                 if (old := prev.rel_l2.get(name)) and err and err > growth_factor * old
                 and err > 1e-12]
        if grown:
            verdict, note = Verdict.REGRESSED, "; ".join(grown[:3]) + " (still within tolerance)"
    return Draft(key.with_metric("numerics"), verdict, now=ev.status,
                 base=prev.status if prev else None, note=note)


def portability_rows(key: UnitKey, ev: ModeNumerics, prev: ModeNumerics | None,
                     tolerance: float | None, method: tuple) -> list[Draft]:
    prev = prev if prev is not None and prev.ran else None
    rows = []
    finite = ev.status != Check.NONFINITE  # NaN/Inf: FAILED already; nothing to measure
    if ev.compiled_vs_eager is not None and finite:
        rows.extend(_compiled_row(key, ev.compiled_vs_eager, ev, prev))
    if ev.rerun_max_abs is not None and finite:
        rows.append(_determinism_row(key, ev, prev))
    if ev.fingerprint and prev is not None and finite:
        rows.append(_drift_row(key, ev, prev, tolerance, method))
    if ev.dynamo is not None:
        rows.extend(_dynamo_rows(key, ev.dynamo, prev.dynamo if prev else None))
    return rows


def _compiled_row(key: UnitKey, check: CompiledCheck, ev: ModeNumerics,
                  prev: ModeNumerics | None) -> list[Draft]:
    """dynamo's accuracy rule as a check of its own: FAILED when the compiled error exceeds
    the multiplier times eager's."""
    if check.status == Check.NOT_MEASURED:
        return []
    before = prev.compiled_vs_eager.status if prev and prev.compiled_vs_eager else None
    ratios = [err / eager for name, err in ev.rel_l2.items()
              if err is not None and (eager := check.eager_rel_l2.get(name))]
    direct = [v for v in check.rel_l2.values() if v is not None]
    summary = ((f"compiled error {max(ratios):.2f}x eager's" if ratios else "")
               + (f"; compiled vs eager rel. L2 {max(direct):.1e}" if direct else ""))
    verdict, note = Verdict.EQUIVALENT, summary
    if check.status == Check.FAIL:
        verdict = Verdict.FAILED
        note = ("was PASS, now " if before == Check.PASS else "") + "; ".join(check.problems)
    elif before is None:
        verdict = Verdict.NEW
    elif before == Check.FAIL:
        verdict, note = Verdict.IMPROVED, "now passes; " + summary
    return [Draft(key.with_metric("compiled_vs_eager"), verdict, now=check.status,
                  base=before, note=note)]


def nondeterminism(ev: ModeNumerics) -> tuple[bool, float | None, str]:
    """(nondeterministic?, fresh-process distance, description)."""
    same = ev.rerun_max_abs or 0.0
    fresh = ev.fresh_process
    moved = fresh.distance if fresh is not None and fresh.equal is False else None
    parts = []
    if same:
        parts.append(f"the same inputs twice in one process differ by max abs {same:.2e}")
    if fresh is not None and fresh.equal is False:
        parts.append("a fresh process's outputs differ" + (
            f": moved {moved:.2e} (rel.), most in {fresh.worst}" if moved is not None
            else " (bitwise)"))
    elif fresh is not None and fresh.equal is None and fresh.error:
        parts.append(f"fresh process not measured ({fresh.error})")
    return (bool(same) or (fresh is not None and fresh.equal is False)), moved, "; ".join(parts)


def _determinism_row(key: UnitKey, ev: ModeNumerics, prev: ModeNumerics | None) -> Draft:
    """Deterministic -> nondeterministic is REGRESSED (the reverse IMPROVED), with the
    magnitudes: within one process (max abs) and against a fresh process (rel. distance)."""
    nondet, _, text = nondeterminism(ev)
    now = "nondeterministic" if nondet else "deterministic"
    if prev is None or prev.rerun_max_abs is None:
        return Draft(key.with_metric("determinism"), Verdict.NEW, now=now, note=text)
    was, _, was_text = nondeterminism(prev)
    verdict, note = Verdict.EQUIVALENT, text
    if nondet and not was:
        verdict, note = Verdict.REGRESSED, "was deterministic; now " + text
    elif was and not nondet:
        verdict, note = Verdict.IMPROVED, "now deterministic; was: " + was_text
    elif nondet:  # in both: the size of run-to-run noise is itself noisy, so no verdict on it
        note = f"{text} (baseline: {was_text})"
    return Draft(key.with_metric("determinism"), verdict, now=now,
                 base="nondeterministic" if was else "deterministic", note=note)


def _drift_row(key: UnitKey, ev: ModeNumerics, prev: ModeNumerics, tolerance: float | None,
               method: tuple) -> Draft:
    """How far this run's outputs moved from the baseline's, against the precision's
    tolerance (rel. L2): a torch upgrade that changes results beyond it is REGRESSED."""
    def row(verdict: str, note: str, **numbers) -> Draft:
        return Draft(key.with_metric("drift"), verdict, note=note, **numbers)
    if not prev.fingerprint:
        return row(Verdict.NEW, "the baseline kept no outputs: drift is measured from the next "
                                "run on")
    if method[0] != method[1]:
        return row(Verdict.NOT_COMPARABLE,
                   f"outputs recorded as {method[1]} in the baseline, {method[0]} now")
    found = portability.drift(ev.fingerprint, prev.fingerprint)
    distance, worst = found["distance"], found["worst"]
    reshaped = {n: why for n, why in found["unmeasured"].items() if why.startswith("shape")}
    others = {n: why for n, why in found["unmeasured"].items() if n not in reshaped}
    extra = "; ".join(f"{n}: {why}" for n, why in sorted(others.items())[:3])
    if reshaped:
        return row(Verdict.REGRESSED,
                   "; ".join(f"{n} {why}" for n, why in sorted(reshaped.items())[:3]))
    if distance is None:
        return row(Verdict.NOT_COMPARABLE, extra or "nothing to compare")
    tol = f" (tolerance {tolerance:.0e})" if tolerance is not None else ""
    note = (f"outputs moved {distance:.2e} from the baseline{tol}"
            + (f", most in {worst}" if distance > 0 else "") + (f"; {extra}" if extra else ""))
    noise = [m for e in (ev, prev) if (m := nondeterminism(e)[1]) is not None]
    if noise:  # context, not an excuse: the tolerance is the contract
        note += f" (nondeterministic: a fresh process alone moves it {max(noise):.1e})"
    # The baseline is where it started.
    return row(Verdict.REGRESSED if tolerance is not None and distance > tolerance
               else Verdict.EQUIVALENT, note, base=0.0, now=distance)


def _dynamo_rows(key: UnitKey, now: Dynamo, base: Dynamo | None) -> list[Draft]:
    """New graph breaks with their reasons (compared by reason, not line number); recompiles."""
    reasons = now.graph_break_reasons
    verdict, note, was = Verdict.EQUIVALENT, "; ".join(reasons[:5]), None
    if base is None:
        verdict = Verdict.NEW
    else:
        n, was = now.graph_breaks, base.graph_breaks
        new = portability.new_reasons(reasons, base.graph_break_reasons)
        gone = portability.new_reasons(base.graph_break_reasons, reasons)
        if n > was or new:
            verdict = Verdict.REGRESSED
            note = f"graph breaks {was} → {n}" + ("; new: " + "; ".join(new[:5]) if new else "")
        elif n < was:
            verdict = Verdict.IMPROVED
            note = f"graph breaks {was} → {n}" + ("; gone: " + "; ".join(gone[:5])
                                                  if gone else "")
    rows = [Draft(key.with_metric("graph_breaks"), verdict, now=now.graph_breaks,
                  base=was, note=note)]
    r_now, r_base = now.recompiles, base.recompiles if base else 0
    if r_now or r_base:
        new = portability.new_reasons(now.recompile_reasons,
                                      base.recompile_reasons if base else ())
        verdict = (Verdict.NEW if base is None else Verdict.REGRESSED if r_now > r_base or new
                   else Verdict.IMPROVED if r_now < r_base else Verdict.EQUIVALENT)
        rows.append(Draft(key.with_metric("recompiles"), now=r_now, base=r_base if base else None,
                          verdict=verdict, note=("new: " + "; ".join(new[:3]) if new and base
                                                 else "; ".join(now.recompile_reasons[:3]))))
    return rows


def coverage_rows(key: UnitKey, now: Coverage, base: Coverage | None) -> list[Draft]:
    """The operator set of one eager step against the baseline's (new / removed ops), and
    the ops that ran elsewhere than the requested device (CPU fallbacks)."""
    if now.status != Status.OK:
        return [Draft(key.with_metric("ops"), Verdict.FAILED, now=now.status,
                      note=f"op coverage not measured: {now.error}")]
    base = base if base is not None and base.status == Status.OK else None
    off = fallback_ops(now)
    diff = portability.op_diff(now, base) if base else None
    ext = extensions(now)
    said = "extensions: " + "; ".join(f"{ns} {portability.short_list(ops, 4)}"
                                      for ns, ops in ext.items()) if ext else ""
    verdict, note = Verdict.EQUIVALENT, said
    if diff is None:
        verdict = Verdict.NEW
    elif diff["added"] or diff["removed"]:
        verdict = Verdict.INCONCLUSIVE
        note = "; ".join(filter(None, [
            "new: " + portability.short_list(diff["added"]) if diff["added"] else "",
            "removed: " + portability.short_list(diff["removed"]) if diff["removed"] else "",
            "the operators changed: review (not a regression by itself)", said]))
    rows = [Draft(key.with_metric("ops"), verdict, now=len(now.ops),
                  base=len(base.ops) if base else None, note=note)]
    fell_base = fallback_ops(base) if base else {}
    if off or fell_base or now.device not in (None, "cpu"):
        verdict = Verdict.EQUIVALENT
        note = "; ".join(f"`{op}` ({why})" for op, why in sorted(off.items())[:8])
        if diff is None:
            verdict = Verdict.NEW
        elif diff["new_fallbacks"]:
            verdict = Verdict.REGRESSED
            note = (f"now off {now.device}: " + portability.short_list(diff["new_fallbacks"])
                    + "; all: " + note)
        elif diff["gone_fallbacks"]:
            verdict = Verdict.IMPROVED
            note = "back on the device: " + portability.short_list(diff["gone_fallbacks"])
        rows.append(Draft(key.with_metric("fallback_ops"), verdict, now=len(off),
                          base=len(fell_base) if base else None, note=note))
    return rows
