"""A cell's numerics judged against the precision's tolerances: each mode PASS, FAIL or
NONFINITE with the reasons, compiled against eager by dynamo's rule, and determinism across
processes. The numerics record keeps these judgments with the magnitudes behind them. Pure."""
from __future__ import annotations

import dataclasses

from torchgate.core.config import Cell, Config, PrecisionSpec
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.records.outputs import FINGERPRINT_METHOD, FreshOutputs, ModeOutputs
from torchgate.core.records.schema import (
    CompiledCheck,
    FreshProcess,
    ModeNumerics,
    NumericsAB,
    NumericsArm,
    NumericsProcess,
    NumericsRecord,
    NumericsRun,
    Tolerance,
)
from torchgate.core.vocabulary import FRESH, Check, Status
from torchgate.judge import portability


def own_tolerance(precision: PrecisionSpec, spec: WorkloadSpec | None) -> PrecisionSpec:
    """The precision as a workload is judged in it: its rel. L2 tolerance loosened to the
    workload's own (`_rel_l2_tol_`, for this precision or "*") where that is larger."""
    own = spec.rel_l2_tol.get(precision.name, spec.rel_l2_tol.get("*")) if spec else None
    if own is None or own <= precision.rel_l2_tol:
        return precision
    return dataclasses.replace(precision, rel_l2_tol=own)


def own_tolerances(cfg: Config, cell: str) -> dict[str, float]:
    """Workload -> its rel. L2 tolerance in the cell named `cell`, where it has its own."""
    cells = {c.name: c for c in cfg.cells()}
    if cell not in cells:
        return {}
    p = cells[cell].precision
    return {name: t for name, spec in cfg.workloads.items()
            if (t := own_tolerance(p, spec).rel_l2_tol) != p.rel_l2_tol}


def evaluate(result: ModeOutputs, precision: PrecisionSpec) -> ModeNumerics:
    """PASS / FAIL / NONFINITE (or the worker's failure status) with the reasons, for the
    errors against float64; compiled against eager is a check of its own."""
    if result.status != Status.OK:
        return ModeNumerics(result.status, problems=(result.error or "",))
    if not any(m.numel for m in result.outputs.values()):   # nothing would be compared
        return ModeNumerics(Check.NOT_MEASURED, problems=(
            "the step returned no tensor (None, or no tensor in what it returned): nothing to "
            "compare; return the step's output",), digest=result.digest,
                            fingerprint=result.fingerprint, dynamo=result.dynamo)
    problems, status = [], Check.PASS
    for name, m in sorted(result.outputs.items()):
        if m.ref_nonfinite:
            status = Check.NONFINITE
            problems.append(f"{name} has {m.nonfinite} NaN/Inf of {m.numel} values and its "
                            f"float64 reference {m.ref_nonfinite}: the workload produces them "
                            "at any precision")
        elif m.nonfinite:
            status = Check.NONFINITE
            problems.append(f"{name} has {m.nonfinite} NaN/Inf of {m.numel} values")
        elif m.rel_l2 is not None:   # None: an empty output, nothing to compare
            if m.rel_l2 > precision.rel_l2_tol:
                problems.append(f"{name} rel. L2 error {m.rel_l2:.2e} > tolerance "
                                f"{precision.rel_l2_tol:.0e}")
            if m.cosine < precision.cosine_min:
                problems.append(f"{name} cosine {m.cosine:.4f} < {precision.cosine_min}")
    if problems and status == Check.PASS:
        status = Check.FAIL
    nan = float("nan")   # NaN/Inf outputs: measured, and not finite

    def errors(field: str) -> dict:
        return {n: nan if m.nonfinite and getattr(m, field) is None else getattr(m, field)
                for n, m in result.outputs.items()}
    return ModeNumerics(
        status, tuple(problems), errors("rel_l2"), errors("max_abs"), errors("cosine"),
        rerun_max_abs=result.rerun_max_abs, digest=result.digest,
        fingerprint=result.fingerprint, dynamo=result.dynamo,
        compiled_vs_eager=None if result.dynamo is None else compiled_check(result, precision))


def compiled_check(result: ModeOutputs, precision: PrecisionSpec) -> CompiledCheck:
    """dynamo's accuracy rule (torch._dynamo.utils.same), per output and on relative L2
    errors: the compiled result's error against float64 may be at most `compiled_multiplier`
    x eager's error + tolerance/10 (at least 3x for outputs under 1000 values); plus the
    direct difference between compiled and eager, for the record."""
    if result.vs_eager is None:
        return CompiledCheck(Check.NOT_MEASURED,
                             (f"eager failed: {result.vs_eager_error or 'not run'}",))
    problems, measured = [], False
    for name, m in sorted(result.outputs.items()):
        eager = result.vs_eager.get(name)
        if m.rel_l2 is None or eager is None or eager.eager_rel_l2 is None:
            continue
        measured = True
        mult = precision.compiled_multiplier if m.numel >= 1000 else max(
            precision.compiled_multiplier, 3.0)   # dynamo: noise dominates small outputs
        if m.rel_l2 > mult * eager.eager_rel_l2 + precision.rel_l2_tol / 10:
            problems.append(f"{name} compiled error {m.rel_l2:.2e} > {mult:g}x "
                            f"eager's {eager.eager_rel_l2:.2e} + tolerance/10")
    vs = result.vs_eager
    status = Check.FAIL if problems else Check.PASS if measured else Check.NOT_MEASURED
    return CompiledCheck(status,
                         tuple(problems), {n: v.rel_l2 for n, v in vs.items()},
                         {n: v.max_abs for n, v in vs.items()},
                         {n: v.eager_rel_l2 for n, v in vs.items()})


def compare_fresh(ev: ModeNumerics, fresh: FreshOutputs | None) -> FreshProcess:
    """The eager outputs of this process against a fresh process's: bitwise, else how far."""
    if fresh is None or fresh.status != Status.OK:
        return FreshProcess(None, error=(fresh.error if fresh else None) or "not run")
    if fresh.digest == ev.digest:
        return FreshProcess(True)
    moved = portability.drift(fresh.fingerprint, ev.fingerprint)
    return FreshProcess(False, distance=moved["distance"], worst=moved["worst"])


def evaluate_modes(procs: list[NumericsProcess], precision: PrecisionSpec,
                   modes: tuple[str, ...]) -> dict[str, ModeNumerics]:
    """Each mode's verdict; a process that crashed fails every mode with its message."""
    if not procs:
        return {}
    proc = procs[0]
    if proc.status != Status.OK:
        return {m: ModeNumerics(proc.status, problems=(proc.error or "",)) for m in modes}
    return {mode: evaluate(r, precision) for mode, r in proc.modes.items()}


def numerics_record(cfg: Config, cell: Cell, run: NumericsRun, rebuilt: bool = False,
                    wall_s: float | None = None) -> NumericsRecord:
    """The record of one cell: every arm's modes evaluated, the fresh-process check folded
    into the reported arm's eager results, op coverage, the tolerances used; with two arms,
    the first as `ab.baseline`."""
    if run.skipped:
        return NumericsRecord(cell.name, Status.SKIPPED, reason=run.skipped)  # as each rerun
    evaluated = {a: {name: evaluate_modes(list(procs), own_tolerance(
        cell.precision, cfg.workloads.get(name)), cfg.modes) for name, procs in per_arm.items()}
        for a, per_arm in run.results.items()}
    for name, check in run.fresh.items():
        eager = evaluated[run.now].get(name, {}).get("eager")
        if eager is not None and eager.digest:
            evaluated[run.now][name]["eager"] = dataclasses.replace(
                eager, fresh_process=compare_fresh(eager, check))

    def coverage(a: str) -> dict:
        return {name: procs[0].coverage for name, procs in run.results[a].items()
                if procs and procs[0].coverage is not None}

    def hosts(a: str) -> dict:
        found = {name: procs[0].host for name, procs in run.results[a].items()
                 if procs and procs[0].host is not None}
        return {**found, FRESH: run.fresh_host} if a == run.now and run.fresh_host else found
    ab = None
    if len(run.arms) > 1:
        first = run.arms[0]
        ab = NumericsAB(NumericsArm(**vars(run.ids[first]),
                                    workloads={n: m for n, m in evaluated[first].items() if m},
                                    coverage=coverage(first), hosts=hosts(first)),
                        run.ids[run.arms[-1]], rebuilt)
    p = cell.precision
    return NumericsRecord(cell.name, Status.OK, workloads=evaluated[run.now],
                          coverage=coverage(run.now),
                          fingerprint_method=FINGERPRINT_METHOD,
                          tolerance=Tolerance(p.rel_l2_tol, p.cosine_min, p.compiled_multiplier),
                          wall_s=wall_s, ab=ab, hosts=hosts(run.now))
