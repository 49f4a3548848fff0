"""A cell's committed bench runs as evidence of how much two runs differ. Pure.

A recorded baseline was measured in another run: besides its processes' spread, the two runs
differ by a run-level offset (machine state, memory layout, a noisy neighbour) that no number
of processes shrinks. Its variance is estimated per unit from the runs committed before, on
the baseline's hardware with the baseline's torch and the same workload settings, so that a
real change of the code or packages in the history is not mistaken for noise.
"""
from __future__ import annotations

import math

from stages.core.config.settings import TIMED
from stages.core.records.dotted import get
from stages.core.records.schema import BenchRecord, EnvRecord
from stages.core.vocabulary import Status
from stages.judge.environment import hardware_key
from stages.judge.moderation import RunSpread, run_spreads
from stages.judge.timings import process_values


def like_the_baseline(env: EnvRecord, base_env: EnvRecord | None) -> bool:
    return base_env is not None and hardware_key(env.env) == hardware_key(base_env.env) \
        and get(env.env, "torch.version") == get(base_env.env, "torch.version")


def unit_runs(history: list[tuple[BenchRecord, EnvRecord]], base: BenchRecord,
              base_env: EnvRecord | None) -> dict[tuple[str, str, str], list[list[float]]]:
    """(workload, mode, metric) -> one list of process values per committed run like the
    baseline's (its own included)."""
    found: dict[tuple[str, str, str], list[list[float]]] = {}
    for record, env in history:
        # A what-if A/B record holds the candidate's processes, not this environment's.
        what_if = record.ab is not None and not record.ab.rebuilt
        if record.status != Status.OK or what_if or not like_the_baseline(env, base_env):
            continue
        for name, run in record.workloads.items():
            wanted = base.workloads.get(name)
            if wanted is None or run.spec != wanted.spec:
                continue
            for mode in record.modes:
                for metric in TIMED:
                    values = process_values(record, name, mode, metric)
                    if values:
                        found.setdefault((name, mode, metric), []).append(values)
    return found


def prior(run_spread: float) -> RunSpread:
    return RunSpread(math.log1p(run_spread) ** 2, math.inf, "prior")


def spreads_of_run(cells: dict[str, tuple[list, BenchRecord]], base_env: EnvRecord | None,
                   run_spread: float) -> dict[tuple[str, str, str, str], RunSpread]:
    """(cell, workload, mode, metric) -> its run-level variance, moderated across the run's
    units of each metric; `cells` maps a cell to (its committed history, its baseline)."""
    history = {(cell, *key): runs for cell, (past, base) in cells.items()
               for key, runs in unit_runs(past, base, base_env).items()}
    return run_spreads(history, run_spread)
