"""One cell's record from the parts a split check measured (launcher.shard i/n, a CI job
matrix; launcher.parts names their reports folders): each part holds the same cell, settings
and arms, and its own workloads.

Joined, they are the record one job would have written: the workloads of every part, in both
arms; the adaptive looks side by side (each part spent its own budget on its own units); the
wall time of the slowest part (they ran at once). Anything the parts should share and do not
(another cell, other settings, another arm) is an error naming the field: a part of another
check must not be joined into this one.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from torchgate.core.errors import UserError
from torchgate.core.records import load_record
from torchgate.core.records.schema import BenchRecord, Look, NumericsRecord
from torchgate.core.vocabulary import Status


def from_parts(folders: tuple[str, ...], kind: str, cell: str, expected: set[str]) -> Any:
    """The `kind` record (bench or numerics) of `cell` joined from each folder's
    <kind>/<cell>.json (a job's reports/<machine>/)."""
    files = [Path(folder) / kind / f"{cell}.json" for folder in folders]
    absent = [str(f) for f in files if not f.is_file()]
    if absent:
        raise UserError(f"launcher.parts: no {', '.join(absent)}: give each job's "
                        "reports/<machine>/ folder, whole (was its measurement cut short?)")
    cls = BenchRecord if kind == "bench" else NumericsRecord
    return joined([load_record(f, cls) for f in files], list(folders), expected)


def joined(parts: list[Any], names: list[str], expected: set[str]) -> Any:
    """The record of one cell from its parts (BenchRecord or NumericsRecord, `names` saying
    where each came from), covering `expected` workloads, each in exactly one part."""
    if not parts:
        raise UserError("no part to join")
    kind = type(parts[0])
    if any(type(p) is not kind for p in parts):
        raise UserError(f"{', '.join(names)}: records of different kinds")
    skipped = [p for p in parts if p.status == Status.SKIPPED]
    if skipped:         # the device is missing: every part found it so
        return skipped[0]
    owner: dict[str, str] = {}
    for part, name in zip(parts, names):
        for workload in part.workloads:
            if workload in owner:
                raise UserError(f"workload {workload} is in two parts ({owner[workload]}, "
                                f"{name}): were they split with the same launcher.shard n?")
            owner[workload] = name
    missing = expected - set(owner)
    if missing:
        raise UserError(f"cell {parts[0].cell}: no part measured {', '.join(sorted(missing))}; "
                        f"give every job's reports ({len(parts)} given)")
    join = _bench if kind is BenchRecord else _numerics
    return join(parts, names)


def _shared(parts: list, names: list[str], fields: tuple[str, ...], where: str = "") -> dict:
    """Each field's value, which the parts share: a part that left it unset (None: e.g. the
    torch version of an arm that ran no process in that part) takes the others'."""
    found = {}
    for field in fields:
        set_ = [(getattr(p, field), name) for p, name in zip(parts, names)
                if getattr(p, field) is not None]
        for value, name in set_[1:]:
            if value != set_[0][0]:
                raise UserError(f"{name}: {where}{field} differs from {set_[0][1]}'s: the "
                                "parts of one check share it (commit, configuration, arms)")
        found[field] = set_[0][0] if set_ else None
    return found


def _union(dicts: list[dict]) -> dict:
    return {k: v for d in dicts for k, v in d.items()}


def _arms(parts: list, names: list[str], fields: tuple[str, ...],
          each: Callable[[list], dict]) -> Any:
    """The joined A/B section: its identity shared, its per-workload fields united."""
    abs_ = [p.ab for p in parts]
    if any(ab is None for ab in abs_):
        if any(ab is not None for ab in abs_):
            raise UserError(f"{', '.join(names)}: some parts measured a baseline arm, some not")
        return None
    arms = [ab.baseline for ab in abs_]
    candidates = [ab.candidate for ab in abs_]
    return dataclasses.replace(
        abs_[0], **_shared(abs_, names, _names(abs_[0], ("baseline", "candidate")), "ab."),
        candidate=dataclasses.replace(candidates[0], **_shared(
            candidates, names, _names(candidates[0]), "ab.candidate.")),
        baseline=dataclasses.replace(arms[0], **_shared(
            arms, names, _names(arms[0], fields), "ab.baseline."), **each(arms)))


def _names(obj: Any, leave: tuple[str, ...] = ()) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(obj) if f.name not in leave)


def _bench(parts: list[BenchRecord], names: list[str]) -> BenchRecord:
    per_workload = ("workloads",)
    shared = _shared(parts, names, ("cell", "modes", "device", "precision", "settings",
                                    "looks_planned", "arms_note", "unchanged", "env_candidate",
                                    "instructions"))
    looks = []
    for index in range(max(len(p.looks) for p in parts)):
        these = [p.looks[index] for p in parts if len(p.looks) > index]
        looks.append(Look(min(look.processes for look in these),
                          tuple(u for look in these for u in look.pending),
                          _union([look.funded for look in these]),
                          tuple(s for look in these for s in look.skipped)))
    return dataclasses.replace(
        parts[0], **shared, workloads=_union([p.workloads for p in parts]), looks=tuple(looks),
        adaptive_processes=sum(p.adaptive_processes for p in parts),
        wall_s=max((p.wall_s for p in parts if p.wall_s is not None), default=None),
        ab=_arms(parts, names, per_workload,
                 lambda arms: {"workloads": _union([a.workloads for a in arms])}))


def _numerics(parts: list[NumericsRecord], names: list[str]) -> NumericsRecord:
    per_workload = ("workloads", "coverage", "hosts")
    return dataclasses.replace(
        parts[0], **_shared(parts, names, ("cell", "fingerprint_method", "tolerance")),
        **{f: _union([getattr(p, f) for p in reversed(parts)]) for f in per_workload},
        wall_s=max((p.wall_s for p in parts if p.wall_s is not None), default=None),
        ab=_arms(parts, names, per_workload, lambda arms: {
            f: _union([getattr(a, f) for a in reversed(arms)]) for f in per_workload}))
