"""A worker's job as a cell builds it, a worker's result as its process record, and
processes run side by side where nothing is timed (counts, numerics)."""
from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

from torchgate.core.config import Cell, Config
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.errors import UserError, clip
from torchgate.core.machine import usable_cores
from torchgate.core.records.job import NOW_ARM, Arm, Job, Timing
from torchgate.core.records.schema import BenchProcess, NumericsProcess, RecordedWorkload
from torchgate.core.typed import from_data, to_data
from torchgate.core.vocabulary import Status

PROCESS = {"bench": BenchProcess, "numerics": NumericsProcess, "fresh": NumericsProcess,
           "instructions": BenchProcess}


def job_for(cfg: Config, cell: Cell, workloads: list[WorkloadSpec], kind: str,
            modes: list[str] | None = None, arm: Arm = NOW_ARM) -> Job:
    b = cfg.bench
    return Job(kind, b.seed, cell.device, cell.precision, tuple(workloads),
               tuple(modes or cfg.modes),
               Timing(b.samples, b.sample_target_s, b.warmup_s, b.min_warmup_calls,
                      b.warmup_max_s, latency_calls=b.latency_calls,
                      latency_s=b.latency_s, rank_timeout_s=b.rank_timeout_s,
                      breakdown_calls=b.breakdown_calls, breakdown_s=b.breakdown_s,
                      instruction_calls=b.instruction_calls,
                      instructions_compile=b.instructions_compile,
                      profile_calls=b.profile_calls,
                      # a counts process imports what its unit's timed processes imported
                      import_timeout_s=None if kind == "instructions" else b.import_timeout_s,
                      pin_pairs=b.pin_pairs),
               code=arm.code)


def recorded(spec: WorkloadSpec | None) -> RecordedWorkload | None:
    """The record's snapshot of a workload: a setting the snapshot lacks fails here loudly
    rather than being dropped (a new one with a default is a field of RecordedWorkload, no
    schema version: core.records.upgrades)."""
    if spec is None:
        return None
    # Its numerics tolerance is the numerics record's business, not the bench record's.
    return from_data(RecordedWorkload, to_data(dataclasses.replace(spec, rel_l2_tol={})),
                     "workload")


def parsed(kind: str, raw: dict, where: str, round_: int | None = None):
    """A worker's result as its process record, of the lock-step round `round_`; a result
    that does not parse is the process's failure, not the stage's (and of no round)."""
    try:
        found = from_data(PROCESS[kind], raw, where)
    except UserError as exc:
        return PROCESS[kind](Status.ERROR, error=clip(f"unreadable worker result: {exc}"))
    return found if round_ is None else dataclasses.replace(found, round=round_)


def cores_for(jobs: list) -> int:
    """How many of `jobs` run at once where nothing is timed: one a core."""
    return min(usable_cores() or 1, len(jobs))


def side_by_side(run_one: Callable, jobs: list) -> Iterator:
    """`run_one` of each job, `cores_for` them at once (counts, numerics: nothing timed),
    each result in the jobs' order as soon as it and those before it are in."""
    with ThreadPoolExecutor(max_workers=cores_for(jobs)) as pool:
        yield from pool.map(run_one, jobs)
