"""A cell's committed bench runs as evidence of how much two runs differ. Pure.

A recorded baseline was measured in another run: besides its processes' spread, the two runs
differ by a run-level offset (machine state, memory layout, a noisy neighbour) that no number
of processes shrinks. Its variance is estimated per unit from the runs committed before, on
the baseline's hardware with the baseline's torch and the same workload settings, so that a
real change of the code or packages in the history is not mistaken for noise. The same runs
give each unit's slope on the machine-speed sentinel (judge.sentinel), where they can.
"""
from __future__ import annotations

import dataclasses
import math

from torchgate.core.metrics import BY_NAME, TIMINGS
from torchgate.core.records.dotted import get
from torchgate.core.records.schema import BenchRecord, EnvRecord
from torchgate.core.vocabulary import Status
from torchgate.judge.environment import hardware_key, hardware_of
from torchgate.judge.moderation import RunSpread, run_spreads
from torchgate.judge.sentinel import Slope, fit_slope, run_mean, sentinel_methods


def like_the_baseline(env: EnvRecord, base_env: EnvRecord | None) -> bool:
    return base_env is not None and hardware_key(env.env) == hardware_key(base_env.env) \
        and get(env.env, "torch.version") == get(base_env.env, "torch.version")


def same_hardware(record: BenchRecord, base: BenchRecord, workload: str) -> bool:
    """Whether the workload's processes in `record` ran on the hardware of the baseline's:
    the threads a device runs with are its processes' (device.<name>.threads), which the
    environment record, torch's default in the env stage, does not show. Records without the
    key (an older torchgate's) leave it to the environments."""
    ours, theirs = set(hardware_of(record, workload)), set(hardware_of(base, workload))
    return not ours or not theirs or ours == theirs


def _like_runs(history: list[tuple[BenchRecord, EnvRecord]], base: BenchRecord,
               base_env: EnvRecord | None):
    """(record, (workload, mode, metric), process values) of every committed run like the
    baseline's (its own included)."""
    for record, env in history:
        # A what-if A/B record holds the candidate's processes, not this environment's.
        what_if = record.ab is not None and not record.ab.rebuilt
        if record.status != Status.OK or what_if or not like_the_baseline(env, base_env):
            continue
        for name, run in record.workloads.items():
            wanted = base.workloads.get(name)
            if wanted is None or run.spec != wanted.spec or not same_hardware(
                    record, base, name):
                continue
            for mode in record.modes:
                for metric in TIMINGS:
                    values = record.unit(name, mode).values(BY_NAME[metric])
                    if values:
                        yield record, (name, mode, metric), values


def unit_runs(history: list[tuple[BenchRecord, EnvRecord]], base: BenchRecord,
              base_env: EnvRecord | None) -> dict[tuple[str, str, str], list[list[float]]]:
    """(workload, mode, metric) -> one list of process values per committed run like the
    baseline's (its own included)."""
    found: dict[tuple[str, str, str], list[list[float]]] = {}
    for _, key, values in _like_runs(history, base, base_env):
        found.setdefault(key, []).append(values)
    return found


def slopes_and_runs(history: list[tuple[BenchRecord, EnvRecord]], base: BenchRecord,
                    base_env: EnvRecord | None) -> tuple[dict[tuple, Slope], dict[tuple, list]]:
    """Each unit's slope on the machine-speed sentinel over the committed runs whose sentinel
    was taken as the baseline's (judge.sentinel), and those runs with the sentinel's part
    taken out (values / exp(β̂·(x_r - x̄))), for the run-to-run variance left after it. A
    unit whose slope cannot be fitted is in neither."""
    method = sentinel_methods(base)
    runs: dict[tuple, list[tuple[float, list[float]]]] = {}
    for record, key, values in _like_runs(history, base, base_env):
        x = run_mean(record) if sentinel_methods(record) == method else None
        if x is not None and min(values) > 0:
            runs.setdefault(key, []).append((x, values))
    slopes, adjusted = {}, {}
    for key, pairs in runs.items():
        x = [p[0] for p in pairs]
        slope = fit_slope(x, [sum(map(math.log, v)) / len(v) for _, v in pairs])
        if slope is None:
            continue
        centre = sum(x) / len(x)
        slopes[key] = slope
        adjusted[key] = [[v * math.exp(-slope.beta * (xr - centre)) for v in values]
                         for xr, values in pairs]
    return slopes, adjusted


def like_reference(history: list[tuple[BenchRecord, EnvRecord]], base: BenchRecord,
                   base_env: EnvRecord | None, most: int) -> tuple[BenchRecord, dict[str, int]]:
    """The baseline as the mean of its like runs: (a record holding the processes of the
    baseline's run and of the committed runs before it of the same code and packages, how
    many runs each workload's holds; none: the baseline's alone). A run is like the
    baseline's while each newer run in the chain says it changed neither packages nor
    workload code against it (BenchRecord.unchanged), on the baseline's hardware (its
    processes' too: same_hardware) and torch, with its sentinel taken the same way; a
    workload whose settings changed holds, and counts, only the runs of the baseline's
    settings. With H runs the reference's
    run-to-run variance is τ²/H, the comparison's (1 + 1/H)·τ² instead of 2·τ²
    (verdicts.Draft.reference_runs). Simulated at τ = 3 %, 2 % process spread, 4 processes:
    the median MDE 20.9 % -> 16.6 % at H = 5 (the audit: 15.8 %, DESIGN.md §16), 22.3 % ->
    18.1 % at H = 3; a +15 % unit caught in 0.69 of runs instead of 0.44; A/A runs with a
    false REGRESSED 1.7 % (tests/test_stats_reference.py)."""
    chain = [base]
    for (newer, _), (record, env) in zip(history, history[1:]):
        what_if = record.ab is not None and not record.ab.rebuilt
        if len(chain) >= most or not newer.unchanged or record.status != Status.OK \
                or what_if or not like_the_baseline(env, base_env) \
                or sentinel_methods(record) != sentinel_methods(base) \
                or not all(same_hardware(record, base, name) for name in base.workloads):
            break
        chain.append(record)
    if len(chain) < 2:
        return base, {}
    workloads, runs = {}, {}
    for name, run in base.workloads.items():
        like = [other for record in chain if (other := record.workloads.get(name)) is not None
                and other.spec == run.spec]
        workloads[name] = dataclasses.replace(run, processes=tuple(
            p for other in like for p in other.processes))
        runs[name] = len(like)
    return dataclasses.replace(base, workloads=workloads), runs


def prior(run_spread: float) -> RunSpread:
    return RunSpread(math.log1p(run_spread) ** 2, math.inf, "prior")


def spreads_of_run(cells: dict[str, tuple[list, BenchRecord]], base_env: EnvRecord | None,
                   run_spread: float) -> tuple[dict[tuple[str, str, str, str], RunSpread],
                                               dict[tuple[str, str, str, str], Slope]]:
    """(cell, workload, mode, metric) -> its run-level variance, moderated across the run's
    units of each metric, and its slope on the sentinel where one can be fitted; `cells`
    maps a cell to (its committed history, its baseline). A unit with a slope has the
    variance left after the sentinel, pooled with the other such units only (the fitted
    slope takes one of its runs' degrees of freedom, which the pooling does not count)."""
    raw, residual, slopes = {}, {}, {}
    for cell, (past, base) in cells.items():
        fitted, adjusted = slopes_and_runs(past, base, base_env)
        slopes.update({(cell, *key): s for key, s in fitted.items()})
        residual.update({(cell, *key): runs for key, runs in adjusted.items()})
        raw.update({(cell, *key): runs for key, runs in unit_runs(past, base, base_env).items()
                    if key not in fitted})
    return {**run_spreads(raw, run_spread), **run_spreads(residual, run_spread)}, slopes
