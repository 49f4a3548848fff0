"""The baseline history as series, and where each lasting shift began. Pure.

Each cell's committed runs and this run (committed or not) become one series per workload,
mode and timing: one point per run, its summary of the unit (judge.summary: the median over
the worker processes `compare` tests of their medians, one per process). Timings on other
hardware are not comparable, so a change of the hardware key starts a new series. What
changed in the environment at each step (torch, the GPU driver, the workload's settings)
travels with the point, so that a shift can be read against it.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchgate.core.config.settings import Delta, HistorySettings
from torchgate.core.metrics import SERIES, WHOLE_MODE
from torchgate.core.records.dotted import get
from torchgate.core.records.schema import BenchRecord, EnvRecord
from torchgate.core.vocabulary import FAILURES, Status
from torchgate.judge.changepoints import change_points, noise
from torchgate.judge.environment import hardware_key
from torchgate.judge.results import Chance, FailureRate, RunPoint, Trend
from torchgate.judge.summary import summarize


@dataclass(frozen=True)
class Run:
    commit: str | None          # None: this run, the workspace's (committed yet or not)
    date: str | None
    bench: BenchRecord
    env: EnvRecord | None


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
    return run.bench.status == Status.OK and not what_if


def min_change(settings: HistorySettings, delta: Delta, metric: str) -> float:
    """The smallest shift reported: `history.min_change`, else the metric's δ."""
    return settings.min_change if settings.min_change is not None else \
        delta.of(metric)


def series(runs: dict[str, list[Run]], settings: HistorySettings, busy_share: float,
           delta: Delta) -> list[Trend]:
    """Every series of every cell, with its lasting shifts; `runs` are oldest first;
    `busy_share`: compare.busy_share, which processes' timings count (judge.summary);
    `delta`: stats.delta, the smallest shift reported unless `history.min_change` is set."""
    found = []
    for cell, cell_runs in runs.items():
        usable = [(i, r) for i, r in enumerate(cell_runs) if _usable(r)]
        eras: list[list[tuple[int, Run]]] = []
        for i, run in usable:
            if not eras or hardware(eras[-1][-1][1].env) != hardware(run.env):
                eras.append([])
            eras[-1].append((i, run))
        for era, era_runs in enumerate(eras):
            found += _era_series(cell, era, era_runs, settings, busy_share, delta)
    return found


def _era_series(cell: str, era: int, runs: list[tuple[int, Run]], settings: HistorySettings,
                busy_share: float, delta: Delta) -> list[Trend]:
    units: dict[tuple[str, str, str], list[RunPoint]] = {}
    busy: dict[tuple[str, str, str], list[str | None]] = {}
    last: dict[tuple[str, str, str], tuple] = {}
    for index, run in runs:
        env = run.env.env if run.env is not None else None
        torch, driver = get(env, "torch.version"), get(env, "hardware.nvidia_driver")
        summary = summarize(cell, run.bench, None, busy_share)
        for name, result in run.bench.workloads.items():
            for mode in run.bench.modes:
                unit = summary.unit(name, mode)
                for metric in SERIES:
                    value = unit.value(metric)
                    key = (name, mode, metric)
                    if (value is None and metric == WHOLE_MODE.name and unit.processes_busy
                            and not unit.processes_kept):
                        busy.setdefault(key, []).append(run.commit)
                    if value is None or value <= 0:
                        continue
                    now = (torch, driver, result.spec)
                    changes = _changes(last[key], now, name) if key in last else ()
                    last[key] = now
                    units.setdefault(key, []).append(RunPoint(
                        index, run.commit, run.date, value, torch, driver, changes,
                        unit.processes_busy))
    hw = hardware(runs[0][1].env)
    return [Trend(cell, name, mode, metric, hw, era, tuple(points), tuple(change_points(
                [p.value for p in points], max_pvalue=settings.max_pvalue,
                min_change=min_change(settings, delta, metric),
                min_points=settings.min_points)), tuple(busy.get((name, mode, metric), ())))
            for (name, mode, metric), points in units.items()]


def chance(found: list[Trend], settings: HistorySettings, delta: Delta,
           trials: int = 200) -> Chance | None:
    """The page-level false-shift rate: series like the page's typical one (median length,
    noise and autocorrelation about its found levels) simulated with nothing changed, as
    AR(1) noise, and run through the same change-point search at each metric's
    `min_change`; seeded, so a page is the same twice. None without a series long enough to
    hold a shift."""
    long = [s for s in found if len(s.points) >= 2 * settings.min_points]
    if not long:
        return None
    shape = [(len(s.points), *noise([p.value for p in s.points], [x.index for x in s.shifts]))
             for s in long]
    runs = round(statistics.median(n for n, _, _ in shape))
    spread = statistics.median(sd for _, sd, _ in shape)
    rho = statistics.median(r for _, _, r in shape)
    rng = np.random.default_rng(runs)
    hits = 0
    metrics = sorted({s.metric for s in long})
    for i in range(trials):
        z = rng.standard_normal(runs)
        x = np.empty(runs)
        x[0] = z[0]
        for t in range(1, runs):
            x[t] = rho * x[t - 1] + np.sqrt(1 - rho ** 2) * z[t]
        metric = metrics[i % len(metrics)]
        hits += bool(change_points(np.exp(spread * x), max_pvalue=settings.max_pvalue,
                                   min_change=min_change(settings, delta, metric),
                                   min_points=settings.min_points))
    rate = hits / trials
    return Chance(rate, rate * len(long), runs, spread, rho, trials)


def _failure(process, mode: str) -> str | None:
    """The process's failure for `mode` (its own, or the mode's), None when it ran."""
    if process.status in FAILURES:
        return f"{process.status}: {process.error or ''}".strip()
    found = process.modes.get(mode) if process.status == Status.OK else None
    if found is not None and found.status in FAILURES:
        return f"{found.status}: {found.error or ''}".strip()
    return None


def failure_rates(runs: dict[str, list[Run]]) -> list[FailureRate]:
    """Per cell, workload and mode that failed in any of `runs` (oldest first): processes
    failed of those that ran, and in how many runs. SKIPPED processes (absent device, a
    workload unsupported there) are not failures and do not count."""
    found = []
    for cell, cell_runs in runs.items():
        counts: dict[tuple[str, str], list] = {}
        for run in cell_runs:
            if run.bench.status != Status.OK:
                continue
            for name, result in run.bench.workloads.items():
                for mode in run.bench.modes:
                    c = counts.setdefault((name, mode), [0, 0, 0, 0, None, "", 0])
                    ran = [p for p in result.processes if p.status != Status.SKIPPED]
                    failures = [f for f in (_failure(p, mode) for p in ran) if f]
                    c[0] += len(failures)
                    c[1] += len(ran)
                    c[3] += bool(ran)
                    if failures:
                        c[2] += 1
                        c[4], c[5] = run.commit, failures[0]
                    if ran:       # every process failed: the streak goes on, else it ends
                        c[6] = c[6] + 1 if len(failures) == len(ran) else 0
        found += [FailureRate(cell, name, mode, *c[:4], c[4], c[5][:200], c[6])
                  for (name, mode), c in counts.items() if c[0]]
    return found
