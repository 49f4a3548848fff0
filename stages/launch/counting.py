"""A cell's counts processes (measure.callgrind): host instructions per call, per workload and
arm, after the first timed rounds and before any adaptive one, never beside a timed process
(whose machine they would load), as many at once as the machine has cores (each runs one
thread).

Counts are a function of their inputs (launch.reuse.counts_key): a workload whose key a
committed record holds takes that record's counts, and one whose key another arm has is
counted once for both. Each counts process draws its own layout, so a count the first
process a side leaves undecided is counted again, up to bench.instruction_processes a side
(`recount`; judge.counts tests them). Every counts process compiles into an empty inductor
cache of its own: one compile-cache state (measure.worker.count_instructions).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from torchgate.core.records.job import Arm, Job
from torchgate.core.records.schema import WorkloadRun
from torchgate.launch.jobs import cores_for, job_for, parsed, side_by_side
from torchgate.launch.reuse import counts_key, spec_for

if TYPE_CHECKING:
    from torchgate.launch.cells import CellRun


def count(run: CellRun, recorded: dict[str, WorkloadRun] | None = None,
          recorded_at: str | None = None) -> None:
    """One counts process per workload and arm, for the modes that ran; counts with a
    committed record's inputs (`recorded`, by key; from the reports at `recorded_at`) taken
    from it, and inputs two arms share counted once."""
    recorded = recorded or {}
    jobs, first, shares = [], {}, []
    for arm in run.arms:
        for name in [n for n in run.cfg.workloads if n in run.mine]:
            spec = spec_for(arm, run.cfg, name)
            modes = list(run.cfg.modes) if name in run.carried else [
                m for m in run.cfg.modes if (arm.name, name, m) in run.ran]
            if spec is None or not modes or spec.ranks is not None:
                continue
            key = counts_key(run.cfg, run.cell, arm, name, modes)
            run.counts_keys[arm.name][name] = key
            if name in run.carried and key not in recorded:
                continue        # not measured, and nothing counted to carry
            if key in recorded:
                run.counts[arm.name][name] = recorded[key].counts
                run.counts_from[arm.name][name] = (
                    f"carried from the reports at {recorded_at}: counted there with the "
                    "same inputs (code, configuration, environment, counter)")
            elif key is not None and key in first:
                shares.append((arm.name, name, first[key]))
                run.counts_from[arm.name][name] = (
                    f"counted once for both arms, in the {first[key]} arm: the same "
                    "inputs (code, configuration, environment, counter)")
            else:
                if key is not None:
                    first[key] = arm.name
                jobs.append((arm, name, job_for(run.cfg, run.cell, [spec], "instructions",
                                                modes, arm)))
    carried = sum(map(len, run.counts_from.values()))
    if carried:
        run.say(f"{run.cell.name}: host instructions of {carried} workload-arm(s) carried "
                "or shared: their inputs were counted already")
    if jobs:
        _count(run, jobs)
    for arm, name, source in shares:
        run.counts[arm][name] = run.counts[source].get(name, ())


def recount(run: CellRun, names: list[str]) -> None:
    """More counts processes for the workloads `names`, whose count is undecided, up to
    bench.instruction_processes a side, in each arm that counted them itself (counts
    carried or shared are one count of the same inputs on both sides, never undecided)."""
    most = run.cfg.bench.instruction_processes
    jobs: list[tuple[Arm, str, Job]] = []
    for arm in run.arms:
        for name in names:
            have = run.counts[arm.name].get(name, ())
            spec = spec_for(arm, run.cfg, name)
            if name in run.counts_from[arm.name] or not have or spec is None:
                continue
            modes = sorted(have[0].modes)
            jobs += [(arm, name, job_for(run.cfg, run.cell, [spec], "instructions", modes,
                                         arm))] * (most - len(have))
    if jobs:
        run.say(f"{run.cell.name}: host instructions of {', '.join(names)} undecided by one "
                f"counts process a side: counting up to {most} a side, each in a layout of "
                "its own (bench.instruction_processes)")
        _count(run, jobs)


def _count(run: CellRun, jobs: list[tuple[Arm, str, Job]]) -> None:
    run.progress.plan(len(jobs), "counts")
    at_once = cores_for(jobs)
    run.say(f"{run.cell.name}: counting host instructions under valgrind: {len(jobs)} "
            f"process{'es' if len(jobs) > 1 else ''}, {at_once} at once, seconds to "
            "minutes each (valgrind runs a call many times slower; "
            "bench.instructions=never skips the counts)")

    def counted(item):      # an empty compile cache: one state (count_instructions)
        arm, name, job = item
        return run.run(job, timeout_s=run.cfg.bench.instructions_timeout_s,
                       python=arm.python, fresh_compile_cache=True)
    for (arm, name, _), raw in zip(jobs, side_by_side(counted, jobs)):
        result = parsed("instructions", raw, f"{run.cell.name} {name} counts process")
        run.counts[arm.name][name] = (*run.counts[arm.name].get(name, ()), result)
        run.log(run.cell.name, name, "now" if len(run.arms) == 1 else arm.name, -1,
                result, run.progress.tick("counts"))
