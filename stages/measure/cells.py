"""The worker processes of one cell (device x precision), arm by arm, as they are measured.

K processes per workload, workloads shuffled within each round so that a slow moment of the
machine hits every workload alike. In A/B mode (`candidate.python`) each round runs one process
per interpreter, in lock-step when a pair runner is given (launcher.run_interleaved); who goes
first alternates. With a `pending` judgment, adaptive sampling adds rounds to undecided units.
Results are parsed into the schema's process records here, once.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from typing import Callable

from stages.core.config import Cell, Config, WorkloadSpec
from stages.core.errors import UserError
from stages.core.schema import (OK, ArmId, BenchAB, BenchArm, BenchProcess, BenchRecord, Job, Look,
                                FreshOutputs, NumericsProcess, Pending, Timing, WorkloadRun)
from stages.core.typed import from_data
from stages.measure.launcher import ROOT, run_interleaved, run_worker

PROCESS = {"bench": BenchProcess, "numerics": NumericsProcess, "fresh": NumericsProcess}


def job_for(cfg: Config, cell: Cell, workloads: list[WorkloadSpec], kind: str,
            modes: list[str] | None = None) -> Job:
    b = cfg.bench
    return Job(kind, b.seed, cell.device, cell.precision, tuple(workloads),
               tuple(modes or cfg.modes),
               Timing(b.samples, b.sample_target_s, b.warmup_s, b.min_warmup_calls))


def arms(cfg: Config) -> list[tuple[str, str | None]]:
    """(arm, interpreter): one arm normally; baseline and candidate in A/B mode."""
    if cfg.candidate.python:
        return [("baseline", None), ("candidate", cfg.candidate.python)]
    return [("now", None)]


def measured_arm(cfg: Config) -> str:
    """The arm whose results are "now": the candidate in A/B mode."""
    return arms(cfg)[-1][0]


def parsed(kind: str, raw: dict, where: str):
    """A worker's result as its process record; a result that does not parse is the
    process's failure, not the stage's."""
    try:
        return from_data(PROCESS[kind], raw, where)
    except UserError as exc:
        return PROCESS[kind]("ERROR", error=f"unreadable worker result: {exc}"[:500])


class CellRun:
    """The processes of one cell, arm by arm, as they are measured."""

    def __init__(self, cfg: Config, cell: Cell, kind: str, run: Callable = run_worker,
                 log: Callable = lambda *line: None, fresh_compile_cache: bool = True,
                 run_pair: Callable | None = None):
        self.cfg, self.cell, self.kind, self.run, self.log = cfg, cell, kind, run, log
        self.fresh = fresh_compile_cache
        self.run_pair = run_pair    # A/B: both arms' processes at once, taking turns
        self.arms = arms(cfg)
        self.results: dict[str, dict[str, list]] = {
            arm: {name: [] for name in cfg.workloads} for arm, _ in self.arms}
        self.skipped: str | None = None
        self.failed: set[tuple[str, str]] = set()
        self.torch: dict[str, str | None] = {arm: None for arm, _ in self.arms}

    def process(self, name: str, round_: int, modes: list[str] | None = None) -> None:
        """One worker process per arm, alternating the arms' order from round to round.

        A mode that failed is not tried again in later rounds, and a workload whose every
        mode failed is not started again: a hang would otherwise cost its time limit K times.
        """
        spec = self.cfg.workloads[name]
        modes = [m for m in (modes or self.cfg.modes) if (name, m) not in self.failed]
        if not modes:
            return
        order = self.arms if round_ % 2 == 0 else self.arms[::-1]
        job = job_for(self.cfg, self.cell, [spec], self.kind, modes)
        timeout_s = spec.timeout_s or (self.cfg.bench.timeout_s if self.kind == "bench"
                                       else self.cfg.numerics.timeout_s)
        if self.run_pair and len(order) == 2:
            ran = self.run_pair([(job, python) for _, python in order], timeout_s=timeout_s,
                                fresh_compile_cache=self.fresh)
        else:   # one by one; the iterator stops early when the device is missing
            ran = (self.run(job, timeout_s=timeout_s, python=python,
                            fresh_compile_cache=self.fresh) for _, python in order)
        for (arm, _), raw in zip(order, ran):
            if raw.get("status") == "SKIPPED":
                self.skipped = str(raw.get("error"))
                return
            result = parsed(self.kind, {**raw, "round": round_},
                            f"{self.cell.name} {name} process {round_ + 1}")
            self.torch[arm] = self.torch[arm] or result.torch
            self.results[arm][name].append(result)
            for mode in modes:
                if result.status != OK or result.modes.get(mode) is None \
                        or result.modes[mode].status != OK:
                    self.failed.add((name, mode))
            self.log(self.cell.name, name, arm, round_, result)

    def rounds(self, count: int, start: int = 0) -> None:
        rng = random.Random(self.cfg.bench.seed + start)
        for round_ in range(start, start + count):
            order = list(self.cfg.workloads)
            rng.shuffle(order)
            for name in order:
                self.process(name, round_)
                if self.skipped:
                    return


def bench_record(run: CellRun, **extra) -> BenchRecord:
    cell, cfg = run.cell, run.cfg
    base = dict(cell=cell.name, device=cell.device, precision=cell.precision, modes=cfg.modes)
    if run.skipped:
        return BenchRecord(status="SKIPPED", reason=run.skipped, **base)
    now = measured_arm(cfg)
    ab = None
    if cfg.candidate.python:
        ab = BenchAB(
            BenchArm(sys.executable, run.torch["baseline"],
                     {name: WorkloadRun(tuple(procs))
                      for name, procs in run.results["baseline"].items()}),
            ArmId(cfg.candidate.python, run.torch["candidate"]),
            interleaved=run.run_pair is not None)
    return BenchRecord(
        status=OK, settings=cfg.bench, ab=ab, **base,
        workloads={name: WorkloadRun(tuple(procs), cfg.workloads[name])
                   for name, procs in run.results[now].items()}, **extra)


def extend(run: CellRun, pending: Callable[[BenchRecord], list[Pending]]) -> list[Look]:
    """Adaptive sampling: more rounds for the units `pending` names until decided, out of
    budget or out of looks. Rounds go to the pending workloads in turn, so that the budget is
    shared rather than spent on the first. Returns the looks that added processes."""
    bench = run.cfg.bench
    deadline = time.perf_counter() + bench.adaptive_budget_s
    looks, round_ = [], bench.processes
    for _ in range(bench.max_looks - 1):
        units = pending(bench_record(run, looks_planned=bench.max_looks))
        if not units:
            break
        looks.append(Look(min(len(arm[u.workload]) for arm in run.results.values()
                              for u in units), tuple(units)))
        modes: dict[str, set[str]] = {}
        for u in units:
            modes.setdefault(u.workload, set()).add(u.mode)
        for extra in range(bench.processes):
            for name in sorted(modes):
                walls = [p.wall_s or 0.0 for arm in run.results.values() for p in arm[name]]
                # Interleaved arms share their wall time; otherwise they run one after another.
                cost = (1 if run.run_pair else len(run.arms)) * (
                    sum(walls) / len(walls) if walls else 0.0)
                have = min(len(arm[name]) for arm in run.results.values())
                if have >= bench.max_processes or time.perf_counter() + cost > deadline:
                    continue
                run.process(name, round_ + extra, sorted(modes[name]))
        round_ += bench.processes
    return looks


def measure_bench(cfg: Config, cell: Cell, *, run=run_worker, log=lambda *line: None,
                  pending: Callable[[BenchRecord], list[Pending]] | None = None,
                  run_pair=run_interleaved) -> BenchRecord:
    """Every process of one bench cell; with `pending`, adaptive sampling."""
    started = time.perf_counter()
    cell_run = CellRun(cfg, cell, "bench", run, log, run_pair=run_pair)
    cell_run.rounds(cfg.bench.processes)
    extra: dict = {}
    if not cell_run.skipped and pending is not None and cfg.bench.adaptive_budget_s > 0:
        extra["looks_planned"] = cfg.bench.max_looks
        before = sum(map(len, cell_run.results[measured_arm(cfg)].values()))
        extra["looks"] = tuple(extend(cell_run, pending))
        extra["adaptive_processes"] = sum(map(len, cell_run.results[measured_arm(cfg)].values())
                                          ) - before
    if cfg.candidate.python and not cell_run.skipped:
        extra["env_candidate"] = capture_env(cfg.candidate.python)
    return bench_record(cell_run, wall_s=time.perf_counter() - started, **extra)


def measure_numerics(cfg: Config, cell: Cell, *, run=run_worker,
                     log=lambda *line: None) -> tuple[CellRun, dict[str, FreshOutputs]]:
    """One numerics process per workload and arm, then one more for the cell: the eager
    outputs of the workloads that ran cleanly, computed first thing in a fresh process
    (determinism across processes)."""
    cell_run = CellRun(cfg, cell, "numerics", run, log, fresh_compile_cache=False)
    cell_run.rounds(1)
    if cell_run.skipped:
        return cell_run, {}
    now = cell_run.results[measured_arm(cfg)]
    ran = [name for name, procs in now.items() if procs and procs[0].status == OK
           and procs[0].modes.get("eager") is not None and procs[0].modes["eager"].status == OK]
    if not ran:  # only what ran cleanly: a crash or a hang is reported once, not twice
        return cell_run, {}
    walls = sum(p.wall_s or 0.0 for name in ran for p in now[name])
    job = job_for(cfg, cell, [cfg.workloads[n] for n in ran], "fresh", ["eager"])
    raw = run(job, timeout_s=30 + 2 * walls, python=cfg.candidate.python,
              fresh_compile_cache=False)
    result = parsed("fresh", raw, f"{cell.name} fresh process")
    if result.status != OK:
        failed = FreshOutputs(result.status, error=result.error or "")
        return cell_run, {name: failed for name in ran}
    return cell_run, result.fresh


def capture_env(python: str) -> dict:
    """The environment as another interpreter sees it (it needs only torch)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from stages.measure.probe import capture; print(json.dumps(capture()))")
    out = subprocess.run([python, "-c", code, str(ROOT)], capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"could not capture the environment of {python}: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])
