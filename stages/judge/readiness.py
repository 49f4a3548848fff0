"""Does it run there? One side of a migration read from its records: per workload and mode
whether it ran (bench), its errors against float64 and compiled against eager (numerics),
graph breaks and recompiles with their reasons, per input shape; per workload its op coverage
(ops off the device, missing kernels, custom-op namespaces); and the target's checklist.
Pure (judge.migration puts the sides together)."""
from __future__ import annotations

import math
import re

from torchgate.core.metrics import BY_NAME, Rule, names
from torchgate.core.records.migration import (
    BUSY_LEFT_OUT,
    FAIL_MARK,
    FAILS,
    NOT_MEASURED,
    PASS_MARK,
    RUNS,
    SKIPPED,
    ChecklistItem,
    ModeMigration,
    SideMode,
    SideOps,
)
from torchgate.core.records.outputs import TORCH_NAMESPACES, extensions, fallback_ops
from torchgate.core.records.schema import NumericsRecord
from torchgate.core.vocabulary import FAILURES, Status
from torchgate.core.vocabulary import Check as Result
from torchgate.judge import portability
from torchgate.judge.summary import unit_summary

_NO_KERNEL = re.compile(r"operator (\S+) has no kernel for the (\S+) backend")
_OPERATOR = re.compile(r"operator (\w+)::")
EAGER = "eager"
CRASHES = tuple(str(s) for s in FAILURES if s != Status.NONFINITE)


def no_kernel(text: str | None) -> str | None:
    """"aten::x has no kernel for the device (tgaccel)" where a failure says so, else the
    failure's own line."""
    if not text:
        return text
    found = _NO_KERNEL.search(text)
    return f"{found.group(1)} has no kernel for the device ({found.group(2)})" if found else text


def _numerics(side, unit: str, mode: str) -> dict:
    record: NumericsRecord | None = side.numerics
    found = record.workloads.get(unit, {}).get(mode) if record is not None else None
    if found is None:
        return {}
    errors = [v for v in found.rel_l2.values() if v is not None]
    check = found.compiled_vs_eager
    measured = check is not None and check.status != Result.NOT_MEASURED
    versus = [v for v in (check.rel_l2.values() if measured else ()) if v is not None]
    return dict(numerics=str(found.status), problems=tuple(found.problems),
                rel_l2=max(errors) if errors else None,
                tolerance=record.tolerance.rel_l2 if record.tolerance else None,
                compiled_vs_eager=str(check.status) if measured else None,
                compiled_vs_eager_rel_l2=max(versus) if versus else None)


# The counts of a call's work a side shows (graph breaks and recompiles are shown apart, with
# their reasons).
WORK = tuple(n for n in (*names(rule=Rule.COUNTED), *names(rule=Rule.BANDED))
             if n not in ("graph_breaks", "recompiles"))


def side_mode(side, unit: str | None, mode: str, busy_share: float) -> SideMode:
    """Whether the unit ran in this mode on this side, and what it did there."""
    record = side.bench
    extra = _numerics(side, unit, mode) if unit else {}
    if record is None or unit is None or unit not in record.workloads \
            or mode not in record.modes:
        why = ("no bench record" if record is None else f"{unit or 'the workload'} {mode} is "
               f"not in {side.label}'s record")
        if extra.get("numerics") in CRASHES:      # numerics ran it, and it failed
            return SideMode(FAILS, no_kernel(extra["problems"][0] if extra["problems"]
                                             else extra["numerics"]), unit, **extra)
        return SideMode(NOT_MEASURED, why, unit, **extra)
    if record.status != Status.OK:
        return SideMode(SKIPPED, record.reason, unit, **extra)
    found = record.unit(unit, mode)
    failed, ran, why = found.failures(), found.ran(), found.skipped()
    if why is not None and not failed:
        return SideMode(SKIPPED, why, unit, **extra)
    if failed and not ran:
        return SideMode(FAILS, no_kernel(str(failed[0])), unit, **extra)
    n = unit_summary(found, None, busy_share)
    said = [f"{len(failed)} of {len(failed) + ran} processes failed, the first: {failed[0]}"
            ] if failed else []
    if n.processes_busy:
        said.append(f"{n.processes_busy} of {ran} processes {BUSY_LEFT_OUT}: left out")
    return SideMode(
        RUNS, "; ".join(said) or None, unit, n.processes_kept, n.items_per_s, n.graph_breaks,
        n.recompiles, tuple(dict.fromkeys(found.detail(BY_NAME["graph_breaks"])
                                          + found.detail(BY_NAME["recompiles"]))),
        tuple((s.shape, s.recompiles) for s in n.shapes),
        work={m: n.value(m) for m in WORK if n.value(m) is not None}, **extra)


def side_ops(side, unit: str | None) -> SideOps:
    coverage = side.numerics.coverage.get(unit) if side.numerics and unit else None
    if coverage is None:
        return SideOps()
    return SideOps(str(coverage.status), no_kernel(coverage.error), coverage.device,
                   len(coverage.ops), tuple(f"{op} ({where})" for op, where
                                            in fallback_ops(coverage).items()),
                   tuple(extensions(coverage)))


def new_ops(source: NumericsRecord | None, target: NumericsRecord | None,
            source_unit: str | None, target_unit: str | None) -> list[str]:
    """Ops the target's step runs that the source's did not (a cast, another kernel)."""
    a = source.coverage.get(source_unit) if source and source_unit else None
    b = target.coverage.get(target_unit) if target and target_unit else None
    if a is None or b is None or a.status != Status.OK or b.status != Status.OK:
        return []
    return portability.op_diff(b, a)["added"]


def verdict(modes: tuple[ModeMigration, ...]) -> tuple[str, str | None]:
    """The workload in a few words: runs, does not run there (and why), not measured."""
    target = [m for m in modes if m.target.status != NOT_MEASURED]
    source_ran = [m for m in modes if m.source.status == RUNS]
    if not target:
        return "not measured on the target", next((m.target.reason for m in modes), None)
    runs = [m for m in target if m.target.status == RUNS]
    failed = [m for m in target if m.target.status == FAILS]
    if not source_ran:
        first = next((m.source for m in modes if m.source.reason), None)
        return "does not run on the source", first.reason if first else None
    if failed and not runs:
        return "does not run there", failed[0].target.reason
    if not runs:
        return "skipped there", target[0].target.reason
    if failed:
        return RUNS, "; ".join(f"{m.mode} does not run there: {m.target.reason}" for m in failed)
    return RUNS, None


def retuned(workload: str, modes: tuple[str, ...], source: dict, target: dict) -> str | None:
    """Each side's own recommended sweep point, named; None where the target did not sweep."""
    def setting(points: dict, mode: str) -> str:
        unit = points.get((workload, mode))
        return unit[len(workload):].strip("[]") if unit else "as configured (not swept)"
    found = [f"{mode}: {setting(source, mode)} → {setting(target, mode)}" for mode in modes
             if (workload, mode) in target]
    return "; ".join(found) or None


def _environment(side) -> ChecklistItem:
    env = side.env.env if side.env is not None else None
    torch = (env.get("torch") or {}).get("version") if env else None
    item = "environment pinned"
    if torch is None:
        return ChecklistItem(item, NOT_MEASURED, "no environment record")
    if side.lock is None:
        return ChecklistItem(item, FAIL_MARK, f"recorded (torch {torch}), not pinned: no lock "
                                              "declared (`torchgate lock` writes one)")
    path, pinned = side.lock
    if pinned is not None and pinned != torch:
        return ChecklistItem(item, FAIL_MARK,
                             f"{path} declares torch {pinned}, the record says {torch}")
    return ChecklistItem(item, PASS_MARK, f"recorded and declared in {path}: torch {torch}")


def _ops(ops: SideOps) -> tuple[ChecklistItem, ChecklistItem]:
    covered, custom = "every op covered", "custom ops load"
    if ops.status is None:
        gone = ChecklistItem(covered, NOT_MEASURED, "no op coverage (numerics)")
        return gone, ChecklistItem(custom, NOT_MEASURED, "no op coverage (numerics)")
    if ops.status != Status.OK:
        failed = ChecklistItem(covered, FAIL_MARK, ops.error or ops.status)
        found = _OPERATOR.search(ops.error or "")
        if found and found.group(1) not in TORCH_NAMESPACES:
            return failed, ChecklistItem(custom, FAIL_MARK, ops.error or "")
        return failed, ChecklistItem(custom, NOT_MEASURED, "the step failed before")
    covered_check = ChecklistItem(covered, FAIL_MARK, f"{len(ops.fallbacks)} off the device: "
                          + ", ".join(ops.fallbacks[:4])) if ops.fallbacks else \
        ChecklistItem(covered, PASS_MARK, f"{ops.ops} op{'s' * (ops.ops != 1)}, all on "
              f"{ops.device or 'the device'}")
    return covered_check, ChecklistItem(custom, PASS_MARK, "namespaces " + ", ".join(ops.extensions)
                                if ops.extensions else "none used")


def _shapes(modes: tuple[ModeMigration, ...]) -> ChecklistItem:
    item = "dynamic shapes without unbounded recompiles"
    shaped = [m for m in modes if m.target.shape_recompiles]
    if not shaped:
        return ChecklistItem(item, NOT_MEASURED, "one input shape, or no compiled mode ran")
    for m in shaped:
        counts = m.target.shape_recompiles
        if len(counts) >= 2 and all(r > 0 for _, r in counts[1:]):
            return ChecklistItem(item, FAIL_MARK, f"{m.mode} recompiles at every new shape ("
                         + ", ".join(f"{s}: {r}" for s, r in counts) + ")")
    return ChecklistItem(item, PASS_MARK, "; ".join(
        f"{m.mode}: {sum(r for _, r in m.target.shape_recompiles)} recompiles over "
        f"{len(m.target.shape_recompiles) + 1} shapes" for m in shaped))


def _numerics_check(modes: tuple[ModeMigration, ...]) -> ChecklistItem:
    item = "numerics within the target's tolerances"
    judged = [m for m in modes if m.target.numerics is not None]
    if not judged:
        return ChecklistItem(item, NOT_MEASURED, "no numerics record")
    for m in judged:
        if m.target.numerics != Result.PASS:
            return ChecklistItem(item, FAIL_MARK, f"{m.mode}: " + (m.target.problems[0]
                                                           if m.target.problems
                                                           else m.target.numerics))
    worst = max((m.target.rel_l2 for m in judged if m.target.rel_l2 is not None), default=None)
    tolerance = judged[0].target.tolerance
    return ChecklistItem(item, PASS_MARK, "every mode PASS" + (
        f": worst rel. L2 {worst:.2e}" + (f", tolerance {tolerance:.0e}" if tolerance else "")
        if worst is not None and math.isfinite(worst) else ""))


def _compile_cost(modes: tuple[ModeMigration, ...]) -> ChecklistItem:
    item = "compile cost recorded"
    compiled = [m for m in modes if m.mode != EAGER]
    if not compiled:
        return ChecklistItem(item, NOT_MEASURED, "no compiled mode compared")
    found = []
    for m in compiled:
        cold, warm = m.timing("first_call_s"), m.timing("first_call_warm_s")
        if cold is not None and cold.target is not None:
            found.append(f"{m.mode}: first call {cold.target:.3g} s cold"
                         + (f", {warm.target:.3g} s warm" if warm and warm.target else ""))
    if found:
        return ChecklistItem(item, PASS_MARK, "; ".join(found))
    failed = [m for m in compiled if m.target.status == FAILS]
    if failed:
        return ChecklistItem(item, FAIL_MARK, f"{failed[0].mode} does not run there")
    busy = [m for m in compiled if m.target.status == RUNS and m.target.reason
            and BUSY_LEFT_OUT in m.target.reason]
    if busy:      # it was measured, and the busy rule left its first calls out
        return ChecklistItem(item, NOT_MEASURED, f"{busy[0].mode} timed on a busy machine: "
                                                 "left out (measure again on a quiet one)")
    return ChecklistItem(item, NOT_MEASURED, "no compiled first call on both sides")


def checklist(modes: tuple[ModeMigration, ...], ops: SideOps, target,
              retuned_text: str | None) -> tuple[ChecklistItem, ...]:
    """The target's row: ✓, ✗ with the reason, or not measured, per item."""
    return (_environment(target), *_ops(ops), _shapes(modes), _numerics_check(modes),
            _compile_cost(modes),
            ChecklistItem("batch re-tuned", PASS_MARK, retuned_text) if retuned_text else
            ChecklistItem("batch re-tuned", NOT_MEASURED, "no sweep on the target (sweep.batch)"))
