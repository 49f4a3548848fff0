"""The worker processes of one cell (device x precision), arm by arm, as they are measured.

K processes per workload, workloads shuffled within each round so that a slow moment of the
machine hits every workload alike. With two arms (a candidate, or the baseline measured again:
arms.plan decides) each round runs one process per arm, in lock-step when a pair runner is
given (launcher.run_interleaved); who goes first alternates. With a `pending` judgment,
adaptive sampling adds rounds to undecided units. Results are parsed into the schema's
process records here, once; Progress counts the units as they end.
"""
from __future__ import annotations

import dataclasses
import random
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from torchgate.arms.plan import Plan
from torchgate.core import scratch
from torchgate.core.config import Cell, Config
from torchgate.core.errors import UserError
from torchgate.core.machine import portable
from torchgate.core.metrics import HEADLINE
from torchgate.core.records.cost import process_seconds
from torchgate.core.records.job import NOW_ARM, Arm
from torchgate.core.records.outputs import FreshOutputs
from torchgate.core.records.schema import (
    ArmId,
    BenchAB,
    BenchArm,
    BenchRecord,
    Look,
    NumericsRun,
    Pending,
    WorkloadRun,
)
from torchgate.core.typed import to_data
from torchgate.core.vocabulary import FRESH, Status
from torchgate.launch import counting
from torchgate.launch.jobs import job_for, parsed, recorded, side_by_side
from torchgate.launch.local import capture_env, run_interleaved, run_worker
from torchgate.launch.progress import Progress
from torchgate.launch.reuse import (
    could_have_changed,
    plan_lines,
    recorded_counts,
    same_inputs,
    shard_of,
    spec_for,
    unchanged_note,
    unchanged_plan,
)
from torchgate.measure import callgrind

NOW = (NOW_ARM,)
ALONE = Plan(NOW, "")       # this run's arm alone, compared with the baseline's record
# The fresh-process check reruns every workload a cell ran: twice the time its processes
# took, plus a worker's start (importing torch).
FRESH_START_S = 30


class CellRun:
    """The processes of one cell, arm by arm, as they are measured."""

    def __init__(self, cfg: Config, cell: Cell, kind: str, run: Callable = run_worker,
                 log: Callable = lambda *line: None, fresh_compile_cache: bool = True,
                 run_pair: Callable | None = None, arms: tuple[Arm, ...] = NOW,
                 progress: Progress | None = None, say: Callable[[str], None] = lambda line: None):
        self.cfg, self.cell, self.kind, self.run, self.log = cfg, cell, kind, run, log
        self.say = say      # a line before a long wait that no process line would break
        self.progress = progress or Progress()     # `log` gets a Tick after each process
        self.fresh = fresh_compile_cache
        self.run_pair = run_pair    # two arms: both arms' processes at once, taking turns
        self.arms = arms
        self.results: dict[str, dict[str, list]] = {
            arm.name: {name: [] for name in cfg.workloads} for arm in arms}
        self.skipped: str | None = None
        self.failed: set[tuple[str, str]] = set()
        self.ran: set[tuple[str, str, str]] = set()     # (arm, workload, mode) that ran once
        self.counts: dict[str, dict[str, tuple]] = {arm.name: {} for arm in arms}
        # Per arm and workload: the counts' key (counts_key) and, where the counts were not
        # this arm's own process's, where they came from.
        self.counts_keys: dict[str, dict[str, str | None]] = {arm.name: {} for arm in arms}
        self.counts_from: dict[str, dict[str, str]] = {arm.name: {} for arm in arms}
        # Workloads whose inputs are the same in both arms (could_have_changed), measured with
        # bench.unchanged_processes rounds: the check's A/A control, not a unit to decide;
        # beyond bench.unchanged_controls of them, not measured at all (`carried`).
        self.unchanged: set[str] = set()
        self.carried: set[str] = set()
        self.mine: set[str] = set(cfg.workloads)    # this job's part (launcher.shard)
        self.torch: dict[str, str | None] = {arm.name: None for arm in arms}
        self.fresh_host = None      # numerics: where the fresh-process check ran
        # Bench: per unit and arm, the inductor cache its processes share. The first
        # bench.cold_compile_processes rounds empty it first (a cold compile, as on a first
        # start), later rounds find it as the cold ones left it (a warm one, a second start).
        # By name: the machine that runs a worker keeps the folder (core.scratch.compile_cache).
        self.caches = f"caches-{uuid.uuid4().hex[:12]}" \
            if kind == "bench" and fresh_compile_cache else None

    def compile_cache(self, arm: Arm, name: str, round_: int) -> dict:
        """The Job fields of a unit's inductor cache in this round."""
        if self.caches is None:
            return {}
        cold = 1 if name in self.unchanged else self.cfg.bench.cold_compile_processes
        return {"compile_cache": f"{self.caches}/{arm.name}-{name}",
                "compile_cache_cold": round_ < cold}

    def close(self) -> None:
        if self.caches is not None:     # this machine's; a Ray node's go a day later
            shutil.rmtree(scratch.user_dir() / "compile" / self.caches, ignore_errors=True)

    @property
    def now(self) -> str:
        """The arm reported as this run's: the last."""
        return self.arms[-1].name

    def arms_of(self, name: str) -> int:
        """How many worker processes a round of this workload starts: one per arm that has it
        (one for all where they share it)."""
        return 1 if self.shares(name) else sum(
            spec_for(a, self.cfg, name) is not None for a in self.arms)

    def shares(self, name: str) -> bool:
        """Numerics of a workload whose inputs are the same in both arms (configuration,
        module files, interpreter: `could_have_changed`) are computed once, for both: the
        same code on the same inputs gives the same outputs, and a second process would
        only repeat the first's (the fresh-process check covers determinism)."""
        return self.kind == "numerics" and name in self.unchanged

    def process(self, name: str, round_: int, modes: list[str] | None = None) -> None:
        """One worker process per arm, alternating the arms' order from round to round.

        A mode that failed before it ever ran is not tried again in later rounds, and a
        workload whose every mode failed so is not started again: a hang would otherwise cost
        its time limit K times. A mode that ran in an earlier process and then failed is
        flaky: it is tried in every round, so that the judge can tell k of n failed (FLAKY),
        but after a time limit (a hang is not tried again).
        """
        # Always in the configured order: a mode's peak memory starts from what the modes
        # before it left resident, so a process must not run them in another order.
        wanted = set(modes or self.cfg.modes)
        modes = [m for m in self.cfg.modes if m in wanted and (name, m) not in self.failed]
        if not modes:
            self.progress.plan(-self.arms_of(name))
            return
        order = self.arms if round_ % 2 == 0 else self.arms[::-1]
        order = [a for a in order if spec_for(a, self.cfg, name) is not None]
        shared = self.shares(name)
        if shared:          # one process, its result each arm's (`shares`)
            order = [a for a in order if a.name == self.now]
        jobs = [(dataclasses.replace(
            job_for(self.cfg, self.cell, [spec_for(a, self.cfg, name)], self.kind, modes, a),
            **self.compile_cache(a, name, round_)), a.python) for a in order]
        spec = self.cfg.workloads[name]
        timeout_s = spec.timeout_s or (self.cfg.bench.timeout_s if self.kind == "bench"
                                       else self.cfg.numerics.timeout_s)
        if self.run_pair and len(jobs) == 2:
            ran = self.run_pair(jobs, timeout_s=timeout_s, fresh_compile_cache=self.fresh)
        elif self.kind == "numerics" and len(jobs) > 1:     # nothing timed: every core
            ran = side_by_side(lambda item: self.run(
                item[0], timeout_s=timeout_s, python=item[1],
                fresh_compile_cache=self.fresh), jobs)
        else:   # one by one; the iterator stops early when the device is missing
            ran = (self.run(job, timeout_s=timeout_s, python=python,
                            fresh_compile_cache=self.fresh) for job, python in jobs)
        for arm, raw in zip(order, ran):
            result = parsed(self.kind, raw, f"{self.cell.name} {name} process {round_ + 1}",
                            round_)
            if result.status == Status.SKIPPED:
                self.skipped = str(result.error)
                return
            for each in (self.arms if shared else (arm,)):
                self.torch[each.name] = self.torch[each.name] or result.torch
                self.results[each.name][name].append(result)
            for mode in modes:
                if result.status == Status.OK and result.modes.get(mode) is not None \
                        and result.modes[mode].status == Status.OK:
                    self.ran.add((arm.name, name, mode))
                elif (arm.name, name, mode) not in self.ran or result.status == Status.TIMEOUT:
                    self.failed.add((name, mode))
            self.log(self.cell.name, name, "now" if len(self.arms) == 1 else
                     "both arms: the same inputs" if shared else arm.name,
                     round_, result, self.progress.tick())

    def rounds_of(self, name: str, count: int, start: int = 0) -> int:
        """How many of the rounds start..start+count run a workload: an unchanged one's
        first bench.unchanged_processes only."""
        if name not in self.mine:
            return 0
        most = 0 if name in self.carried else self.cfg.bench.unchanged_processes
        if name not in self.unchanged or most is None:
            return count
        return max(0, min(start + count, most) - start)

    def rounds(self, count: int, start: int = 0) -> None:
        rng = random.Random(self.cfg.bench.seed + start)
        self.progress.plan(sum(self.arms_of(name) * self.rounds_of(name, count, start)
                               for name in self.cfg.workloads))
        for round_ in range(start, start + count):
            order = list(self.cfg.workloads)
            rng.shuffle(order)
            for name in order:
                if not self.rounds_of(name, 1, round_):
                    continue
                self.process(name, round_)
                if self.skipped:
                    return

    def arm_id(self, arm: Arm) -> ArmId:
        return ArmId(portable(arm.python or sys.executable), self.torch[arm.name], arm.rev)


@dataclass(frozen=True)
class Sampling:
    """What adaptive sampling did in a cell: the looks it planned, the interim looks that
    named units, and the processes their rounds added to the reported arm."""
    looks_planned: int = 1
    looks: tuple[Look, ...] = ()
    adaptive_processes: int = 0


def bench_record(run: CellRun, plan: Plan, *, instructions: str | None = None,
                 sampling: Sampling = Sampling(), env_candidate: dict | None = None,
                 wall_s: float | None = None) -> BenchRecord:
    """The cell's record as measured so far; a skipped cell's names why, and nothing else
    that was asked."""
    cell, cfg = run.cell, run.cfg
    note = plan.note or None        # a plan without one (a test's, selfcheck's): no empty note
    if run.skipped:     # no arms note: nothing was measured, and it would vary by baseline
        return BenchRecord(cell.name, Status.SKIPPED, cfg.modes, run.skipped,
                           to_data(cell.device), to_data(cell.precision))
    return BenchRecord(
        cell.name, Status.OK, cfg.modes, device=to_data(cell.device),
        precision=to_data(cell.precision), settings=to_data(cfg.bench),
        workloads=workload_runs(run, run.arms[-1]), looks_planned=sampling.looks_planned,
        adaptive_processes=sampling.adaptive_processes, looks=sampling.looks,
        env_candidate=env_candidate, ab=bench_ab(run, plan.rebuilt), arms_note=note,
        unchanged=plan.unchanged, wall_s=wall_s, instructions=instructions)


def bench_ab(run: CellRun, rebuilt: bool) -> BenchAB | None:
    """With two arms, the first (the baseline, or this environment beside a candidate)."""
    if len(run.arms) < 2:
        return None
    first = run.arm_id(run.arms[0])
    return BenchAB(BenchArm(first.python, first.torch, first.rev,
                            workloads=workload_runs(run, run.arms[0])),
                   run.arm_id(run.arms[-1]), interleaved=run.run_pair is not None,
                   rebuilt=rebuilt)


def workload_runs(run: CellRun, arm: Arm) -> dict[str, WorkloadRun]:
    """An arm's workloads as the record keeps them: processes, configuration, counts (with
    their key and, where not counted by this arm's own process, where they came from), and
    why an unchanged workload ran fewer rounds."""
    return {name: WorkloadRun(tuple(procs), recorded(spec_for(arm, run.cfg, name)),
                              run.counts[arm.name].get(name, ()),
                              run.counts_keys[arm.name].get(name),
                              run.counts_from[arm.name].get(name),
                              unchanged_note(name, run.unchanged, run.carried,
                                             run.cfg.bench.unchanged_processes))
            for name, procs in run.results[arm.name].items() if name in run.mine}


def have_of(run: CellRun, name: str) -> int:
    """Processes of a workload so far, in the arm that has fewest."""
    return min(len(arm[name]) for arm in run.results.values())


Wanted = tuple[Pending, int | None]    # a pending timing, and the processes that decide it


def extend(run: CellRun, pending: Callable[[BenchRecord], list[Wanted]],
           record: Callable[[], BenchRecord]) -> list[Look]:
    """Adaptive sampling: at each look, the rounds `fund` grants the units `pending` names
    (each with the processes per side its interim look says would decide it) in the record
    so far, until decided, out of budget or out of looks. Rounds go to the funded workloads
    in turn. Returns the looks that named units."""
    bench = run.cfg.bench
    deadline = time.perf_counter() + bench.adaptive_budget_s
    looks, round_ = [], bench.processes
    for _ in range(bench.max_looks - 1):
        wanted = pending(record())
        if not wanted:
            break
        have = min((len(arm[u.workload]) for arm in run.results.values() for u, _ in wanted
                    if u.workload not in run.unchanged), default=bench.processes)
        plan, skipped = fund(run, wanted, deadline - time.perf_counter())
        if plan:
            run.progress.plan(sum(run.arms_of(name) * n for name, (n, _) in plan.items()))
        most = max((n for n, _ in plan.values()), default=0)
        for extra in range(most):
            for name in sorted(plan):
                n, modes = plan[name]
                if extra >= n:
                    continue
                if time.perf_counter() + process_cost(run, name, modes) > deadline:
                    run.progress.plan(-run.arms_of(name) * (n - extra))   # not started
                    skipped.append((name, f"the budget ran out after {extra} of its {n} "
                                          "rounds"))
                    plan[name] = (extra, modes)
                    continue
                run.process(name, round_ + extra, sorted(modes))
        looks.append(Look(have, tuple(u for u, _ in wanted),
                          {name: n for name, (n, _) in sorted(plan.items()) if n},
                          tuple(skipped)))
        if not plan:
            break
        round_ += most
    return looks


def process_cost(run: CellRun, name: str, modes) -> float:
    """Seconds one more round of a workload running `modes` takes (core.records.cost):
    interleaved arms share their wall time, others run one after another."""
    one = process_seconds(run.results[run.now][name], modes) or 0.0
    return one * (1 if run.run_pair else run.arms_of(name))


def wanted_more(have: int, needed: int | None, batch: int, most: int) -> int:
    """Processes per side to add to a unit with `have`: a regression's confirmation
    (`needed` None) a fresh batch; an undecided unit up to `most` (bench.max_processes), a
    size fixed in advance whatever its look estimated (`needed` orders the units, it does
    not size them): sized from the look's own estimate, the pooled final test's false
    alarms rose with δ near 0 (0.048 to 0.059 of units, tests/test_adaptive.py)."""
    return max(0, min(have + batch if needed is None else most, most) - have)


def fund(run: CellRun, wanted: list[Wanted], left_s: float
         ) -> tuple[dict[str, tuple[int, set]], list[tuple[str, str]]]:
    """(workload -> (rounds to add, the modes they run), within `left_s` of wall time; each
    pending unit given none, with why). First
    the workloads the arms' difference can have moved (`could_have_changed`), then the rest;
    within each, regressions' confirmations, then the undecided units that
    bench.max_processes lets decide, then the others; within those the steady state before
    first call and warm-up, each the cheapest first (`wanted_more` each; as many as the
    budget left affords). So the budget goes first where a change can be and more processes
    can decide, and the judge says what deciding the rest would cost (judge.adaptive)."""
    bench = run.cfg.bench
    changed = could_have_changed(run.cfg, run.arms)
    asks, skipped = [], []
    for unit, needed in wanted:
        name = f"{unit.workload} {unit.mode} {unit.metric}"
        if unit.workload in run.unchanged:
            skipped.append((name, "the same inputs in both arms: the check's A/A control, "
                                  "never funded (bench.unchanged_processes)"))
            continue
        if unit.metric == "first_call_s" and any(
                p.modes[unit.mode].compile_cache for p in run.results[run.now][unit.workload]
                if unit.mode in p.modes):
            skipped.append((name, "its rounds would compile with warm caches: no cold first "
                                  "call to add"))
            continue
        more = wanted_more(have_of(run, unit.workload), needed, bench.processes,
                           bench.max_processes)
        group = 0 if needed is None else 1 if needed <= bench.max_processes else 2
        if more:
            asks.append(((changed is not None and unit.workload not in changed, group,
                          unit.metric != HEADLINE.name,
                          more * process_cost(run, unit.workload, {unit.mode})), unit, more))
        else:
            skipped.append((name, f"at bench.max_processes ({bench.max_processes}) already"))
    plan: dict[str, tuple[int, set]] = {}
    spent = 0.0
    for _, unit, more in sorted(asks, key=lambda a: a[0]):
        n, modes = plan.get(unit.workload, (0, set()))
        before = n * process_cost(run, unit.workload, modes)
        modes = modes | {unit.mode}
        each = process_cost(run, unit.workload, modes)
        rounds = max(n, more)
        if each > 0:        # what the budget left affords, this workload's granted rounds too
            rounds = min(rounds, int((left_s - spent + before) // each))
        # A mode may join its workload's rounds at one round fewer: a cheap mode (eager beside
        # compiled) is then measured too, for one round of the mode funded before it.
        if rounds > 0 and rounds >= n - (n > 1):
            plan[unit.workload] = (rounds, modes)
            spent += rounds * each - before
        elif unit.mode not in plan.get(unit.workload, (0, ()))[1]:
            unchanged = changed is not None and unit.workload not in changed
            # A round runs its workload's modes together: this mode joins them, or none.
            what = (f"it in none of the {n} rounds of {', '.join(sorted(modes - {unit.mode}))} "
                    f"(about {each:.0f} s each with it)" if n else
                    f"no round of it (about {each:.0f} s each)")
            skipped.append((f"{unit.workload} {unit.mode} {unit.metric}",
                            f"the budget left ({max(left_s - spent, 0):.0f} s) afforded {what}"
                            + ("; funded after the workloads the change can have moved"
                               if unchanged else "")))
    return plan, skipped


def measure_bench(cfg: Config, cell: Cell, plan: Plan = ALONE, *, run=run_worker,
                  run_pair=run_interleaved, capture: Callable[[str], dict] | None = None,
                  log=lambda *line: None, say: Callable[[str], None] = lambda line: None,
                  progress: Progress | None = None,
                  pending: Callable[[BenchRecord], list[Wanted]] | None = None,
                  undecided_counts: Callable[[BenchRecord], list[str]] | None = None,
                  baseline: BenchRecord | None = None, baseline_at: str | None = None
                  ) -> BenchRecord:
    """Every process of one bench cell, the arms `plan` names; with `pending`, adaptive
    sampling. `capture` describes the candidate's environment where its processes ran
    (default: here). `baseline`: the committed record (from the reports at `baseline_at`)
    whose counts a workload with the same inputs takes instead of counting again.
    `undecided_counts`: the workloads whose counts an interim look leaves undecided, counted
    again (launch.counting.recount)."""
    started = time.perf_counter()
    cell_run = CellRun(cfg, cell, "bench", run, log, run_pair=run_pair, arms=plan.arms,
                       progress=progress, say=say)
    try:
        why_not = not_counted(cfg, cell)      # first: `always` fails before measuring
        first_rounds(cell_run, baseline)
        if not cell_run.skipped and why_not is None:
            # Before the adaptive rounds, whose looks leave to the counts the units they
            # decide (judge.adaptive); a counts process never runs beside a timed one.
            counting.count(cell_run, recorded_counts(baseline), baseline_at)
            if undecided_counts is not None and cfg.bench.instruction_processes > 1:
                counting.recount(cell_run, undecided_counts(bench_record(cell_run, plan)))
        sampling = more_rounds(cell_run, plan, pending)
        python = plan.arms[-1].python if len(plan.arms) > 1 else None
        candidate = (capture or capture_env)(python) \
            if not plan.rebuilt and python and not cell_run.skipped else None
        return bench_record(cell_run, plan, instructions=why_not, sampling=sampling,
                            env_candidate=candidate, wall_s=time.perf_counter() - started)
    finally:
        cell_run.close()


def first_rounds(cell_run: CellRun, baseline: BenchRecord | None) -> None:
    """The bench.processes rounds every cell runs: of the workloads this job measures
    (launcher.shard), an unchanged one's fewer, a carried one's none (launch.reuse)."""
    cfg = cell_run.cfg
    cell_run.unchanged, cell_run.carried = unchanged_plan(cfg, cell_run.arms, baseline)
    cell_run.mine = shard_of(cfg, cell_run.arms, baseline)
    for line in plan_lines(cfg, cell_run.unchanged, cell_run.carried, cell_run.mine):
        cell_run.say(f"{cell_run.cell.name}: {line}")
    cell_run.rounds(cfg.bench.processes)


def more_rounds(cell_run: CellRun, plan: Plan,
                pending: Callable[[BenchRecord], list[Wanted]] | None) -> Sampling:
    """Adaptive sampling, where it is asked for and has a budget (`extend`)."""
    bench = cell_run.cfg.bench
    if cell_run.skipped or pending is None or bench.adaptive_budget_s <= 0:
        return Sampling()
    interim = Sampling(looks_planned=bench.max_looks)
    before = sum(map(len, cell_run.results[cell_run.now].values()))
    looks = extend(cell_run, pending, lambda: bench_record(cell_run, plan, sampling=interim))
    return Sampling(bench.max_looks, tuple(looks),
                    sum(map(len, cell_run.results[cell_run.now].values())) - before)


def not_counted(cfg: Config, cell: Cell) -> str | None:
    """Why this cell's host instructions are not counted (bench.instructions), in one line;
    None: they are. `always` makes a missing valgrind the stage's error."""
    if cfg.bench.instructions == "never":
        return "not counted (bench.instructions=never)"
    if cell.device.type != "cpu":
        return f"counted on CPU cells only: valgrind cannot run the {cell.device.type} driver"
    why = callgrind.missing()
    if why and cfg.bench.instructions == "always":
        raise UserError(f"bench.instructions is always, but {why}")
    return f"not counted: {why}" if why else None


def measure_numerics(cfg: Config, cell: Cell, plan: Plan = ALONE, *, run=run_worker,
                     log=lambda *line: None, progress: Progress | None = None) -> NumericsRun:
    """One numerics process per workload and arm `plan` names, then one more for the cell:
    the eager outputs of the workloads that ran cleanly in the reported arm, computed first
    thing in a fresh process (determinism across processes)."""
    arms = plan.arms
    cell_run = CellRun(cfg, cell, "numerics", run, log, fresh_compile_cache=False, arms=arms,
                       progress=progress)
    cell_run.unchanged = same_inputs(cfg, arms)
    cell_run.mine = shard_of(cfg, arms, None)
    cell_run.progress.plan(1)                   # the fresh process
    cell_run.rounds(1)
    if cell_run.skipped:
        return numerics_run(cell_run)
    now = cell_run.results[cell_run.now]
    ran = [name for name, procs in now.items() if procs and procs[0].status == Status.OK
           and procs[0].modes.get("eager") is not None
           and procs[0].modes["eager"].status == Status.OK]
    if not ran:  # only what ran cleanly: a crash or a hang is reported once, not twice
        cell_run.progress.plan(-1)
        return numerics_run(cell_run)
    walls = sum(p.wall_s or 0.0 for name in ran for p in now[name])
    arm = arms[-1]
    job = job_for(cfg, cell, [spec_for(arm, cfg, n) for n in ran], "fresh", ["eager"], arm)
    raw = run(job, timeout_s=FRESH_START_S + 2 * walls, python=arm.python,
              fresh_compile_cache=False)
    result = parsed("fresh", raw, f"{cell.name} fresh process")
    cell_run.fresh_host = result.host
    log(cell.name, FRESH, "now" if len(arms) == 1 else arm.name, 0, result,
        cell_run.progress.tick())
    if result.status != Status.OK:
        failed = FreshOutputs(result.status, error=result.error or "")
        return numerics_run(cell_run, {name: failed for name in ran})
    return numerics_run(cell_run, result.fresh)


def numerics_run(run: CellRun, fresh: dict[str, FreshOutputs] | None = None) -> NumericsRun:
    return NumericsRun(tuple(a.name for a in run.arms), {a.name: run.arm_id(a) for a in run.arms},
                       {a: {name: tuple(procs) for name, procs in per.items()
                            if name in run.mine}
                        for a, per in run.results.items()}, fresh or {}, run.fresh_host,
                       run.skipped)
