"""Sweeps: a workload parameter given several values, each value its own unit of the matrix.

`sweep.batch: [16, 32, 64]` makes every selected workload that takes a `batch` three units,
`mlp_train[batch=16]`, `mlp_train[batch=32]`, ...; `sweep.threads: [1, 2]` sets torch's thread
count per unit (every workload). Several sweeps multiply. Each unit is measured, compared with
the baseline's unit of the same name and judged like any other; the report draws the units of
one workload as a curve and recommends one. Standard library only.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

from stages.core.config.settings import WorkloadSpec
from stages.core.errors import UserError

THREADS = "threads"       # not a workload argument: torch.set_num_threads in the worker
# Parameters that count something: each value must be a whole number > 0.
COUNTS = (THREADS, "batch")


def _values(key: str, values: Any) -> list:
    if not isinstance(values, list) or not values:
        raise UserError(f"sweep.{key} must be a non-empty list of values, e.g. [16, 32, 64], "
                        f"got {values!r}")
    for v in values:
        if isinstance(v, (list, dict)) or v is None:
            raise UserError(f"sweep.{key} holds {v!r}; each value must be a number or a string")
        if isinstance(v, float) and not math.isfinite(v):
            raise UserError(f"sweep.{key} holds {v!r}; each number must be finite")
    if key in COUNTS and not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                 for v in values):
        raise UserError(f"sweep.{key} must list whole numbers > 0, got {values!r}")
    if len(set(map(str, values))) != len(values):
        raise UserError(f"sweep.{key} lists a value twice: {values!r}")
    return values


def unit_name(name: str, point: tuple[tuple[str, Any], ...]) -> str:
    return f"{name}[{','.join(f'{k}={v}' for k, v in point)}]" if point else name


def expand(workloads: dict[str, WorkloadSpec], sweep: dict | None,
           strict: bool = True) -> dict[str, WorkloadSpec]:
    """Every workload times every combination of the swept values that apply to it; strict:
    a sweep that applies to no workload is an error (this run's), else it is let be (another
    revision's workloads)."""
    axes = {key: _values(key, values) for key, values in (sweep or {}).items()
            if values is not None}
    if not axes:
        return workloads
    out: dict[str, WorkloadSpec] = {}
    for name, spec in workloads.items():
        mine = [(k, v) for k, v in axes.items() if k == THREADS or k in spec.kwargs]
        if not mine:
            out[name] = spec
            continue
        for combo in itertools.product(*(v for _, v in mine)):
            point = tuple((k, value) for (k, _), value in zip(mine, combo))
            kwargs = {**spec.kwargs, **{k: v for k, v in point if k != THREADS}}
            threads = dict(point).get(THREADS)
            out[unit_name(name, point)] = dataclasses.replace(
                spec, name=unit_name(name, point), kwargs=kwargs, threads=threads,
                family=name, point=point)
    if strict and all(spec.point == () for spec in out.values()):
        raise UserError(f"no selected workload takes {', '.join(axes)}; sweep a parameter "
                        "that a workload's config lists (e.g. batch), or threads")
    return out
