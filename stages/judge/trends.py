"""The baseline history as series, and where each lasting shift began. Pure.

Each cell's committed runs and this run (committed or not) become one series per
workload, mode and timing: one point per run, the median over its worker processes of their
medians (the number `compare` tests, one per process). Timings on other hardware are not
comparable, so a change of the hardware key starts a new series. What changed in the
environment at each step (torch, the GPU driver, the workload's settings) travels with the
point, so that a shift can be read against it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stages.core.config.settings import TIMED, HistorySettings
from stages.core.records.schema import BenchRecord, EnvRecord
from stages.judge import stats
from stages.judge.changepoints import Shift, change_points
from stages.judge.environment import get, hardware_key
from stages.judge.timings import process_values

KEY_METRICS = ("steady_s", "first_call_s")   # a table each; every timed metric is searched


@dataclass(frozen=True)
class Run:
    commit: str | None          # None: this run, the workspace's (committed yet or not)
    date: str | None
    bench: BenchRecord
    env: EnvRecord | None


@dataclass(frozen=True)
class Point:
    run: int                    # the run's place in its cell's history, oldest first
    commit: str | None
    date: str | None
    value: float
    processes: int
    torch: str | None = None
    driver: str | None = None
    changes: tuple[str, ...] = ()   # what changed since the series' previous point


@dataclass(frozen=True)
class Series:
    cell: str
    workload: str
    mode: str
    metric: str
    hardware: tuple[tuple[str, str], ...]
    era: int                    # the cell's hardware eras, oldest first
    points: tuple[Point, ...]
    shifts: tuple[Shift, ...] = field(default=())

    def started(self, shift: Shift) -> Point:
        return self.points[shift.index]


def hardware(env: EnvRecord | None) -> tuple[tuple[str, str], ...]:
    key = hardware_key(env.env) if env is not None else {}
    return tuple((k, "" if v is None else str(v)) for k, v in key.items())


def _changes(before: tuple[str | None, str | None, Any], after: tuple,
             workload: str) -> tuple[str, ...]:
    found = []
    for what, old, new in zip(("torch", "driver"), before[:2], after[:2]):
        if old != new:
            found.append(f"{what} {old or '(none)'} → {new or '(none)'}")
    if before[2] != after[2]:
        found.append(f"{workload}'s settings")
    return tuple(found)


def _usable(run: Run) -> bool:
    # A what-if A/B record holds the candidate's processes, not this environment's.
    what_if = run.bench.ab is not None and not run.bench.ab.rebuilt
    return run.bench.status == "OK" and not what_if


def series(runs: dict[str, list[Run]], settings: HistorySettings) -> list[Series]:
    """Every series of every cell, with its lasting shifts; `runs` are oldest first."""
    found = []
    for cell, cell_runs in runs.items():
        usable = [(i, r) for i, r in enumerate(cell_runs) if _usable(r)]
        eras: list[list[tuple[int, Run]]] = []
        for i, run in usable:
            if not eras or hardware(eras[-1][-1][1].env) != hardware(run.env):
                eras.append([])
            eras[-1].append((i, run))
        for era, era_runs in enumerate(eras):
            found += _era_series(cell, era, era_runs, settings)
    return found


def _era_series(cell: str, era: int, runs: list[tuple[int, Run]],
                settings: HistorySettings) -> list[Series]:
    units: dict[tuple[str, str, str], list[Point]] = {}
    last: dict[tuple[str, str, str], tuple] = {}
    for index, run in runs:
        env = run.env.env if run.env is not None else None
        torch, driver = get(env, "torch.version"), get(env, "hardware.nvidia_driver")
        for name, result in run.bench.workloads.items():
            for mode in run.bench.modes:
                for metric in TIMED:
                    values = process_values(run.bench, name, mode, metric)
                    if not values or min(values) <= 0:
                        continue
                    key = (name, mode, metric)
                    now = (torch, driver, result.spec)
                    changes = _changes(last[key], now, name) if key in last else ()
                    last[key] = now
                    units.setdefault(key, []).append(Point(
                        index, run.commit, run.date, stats.median(values), len(values),
                        torch, driver, changes))
    hw = hardware(runs[0][1].env)
    return [Series(cell, name, mode, metric, hw, era, tuple(points), tuple(change_points(
                [p.value for p in points], max_pvalue=settings.max_pvalue,
                min_change=settings.min_change, min_points=settings.min_points)))
            for (name, mode, metric), points in units.items()]
