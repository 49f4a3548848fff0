"""Stage `bench`: measure one cell (device x precision) of the matrix.

    python -m stages.bench --device cpu --precision fp32

K worker processes per workload, workloads shuffled within each round so that a slow moment
of the machine hits every workload alike. In A/B mode (`candidate.python`) each round runs one
process per interpreter at once, taking turns sample by sample (launcher.run_interleaved), so
that each pair saw the same machine and is compared as a pair; who goes first alternates.
With a baseline, cells whose timings come out INCONCLUSIVE get more processes within
`bench.adaptive_budget_s`.
Every sample of every process goes to reports/bench/<cell>.json; reports/bench/<cell>.md is
the diff against the baseline.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from stages.judge import comparison
from stages.core import config
from stages.render import markdown as render
from stages.judge import stats
from stages.core.baseline import resolve_rev
from stages.core.errors import one_line_errors
from stages.workloads import check_arguments
from stages.measure.launcher import ROOT, run_interleaved, run_worker
from stages.core.records import write_record, write_text

KIND = "bench"


def job_for(cfg: config.Config, cell: config.Cell, workload: config.WorkloadSpec,
            kind: str, modes: list[str] | None = None) -> dict:
    return {
        "kind": kind,
        "seed": cfg.bench.seed,
        "device": dataclasses.asdict(cell.device),
        "precision": dataclasses.asdict(cell.precision),
        "workload": {"name": workload.name, "target": workload.target, "kwargs": workload.kwargs},
        "modes": list(modes or cfg.modes),
        "timing": dataclasses.asdict(cfg.bench),
    }


def arms(cfg: config.Config) -> list[tuple[str, str | None]]:
    """(arm, interpreter): one arm normally; baseline and candidate in A/B mode."""
    if cfg.candidate_python:
        return [("baseline", None), ("candidate", cfg.candidate_python)]
    return [("now", None)]


def measured_arm(cfg: config.Config) -> str:
    """The arm whose results are "now": the candidate in A/B mode."""
    return arms(cfg)[-1][0]


def capture_env(python: str) -> dict:
    """The environment as another interpreter sees it (it needs only torch)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from stages.env import capture; print(json.dumps(capture()))")
    out = subprocess.run([python, "-c", code, str(ROOT)], capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"could not capture the environment of {python}: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


class CellRun:
    """The processes of one cell, arm by arm, as they are measured."""

    def __init__(self, cfg: config.Config, cell: config.Cell, kind: str, run: Callable,
                 log: Callable, fresh_compile_cache: bool = True,
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
        job = job_for(self.cfg, self.cell, spec, self.kind, modes)
        timeout_s = spec.timeout_s or self._timeout()
        if self.run_pair and len(order) == 2:
            ran = self.run_pair([(job, python) for _, python in order], timeout_s=timeout_s,
                                fresh_compile_cache=self.fresh)
        else:   # one by one; the iterator stops early when the device is missing
            ran = (self.run(job, timeout_s=timeout_s, python=python,
                            fresh_compile_cache=self.fresh) for _, python in order)
        for (arm, _), result in zip(order, ran):
            if result["status"] == "SKIPPED":
                self.skipped = result["error"]
                return
            result["round"] = round_
            self.torch[arm] = self.torch[arm] or result.get("torch")
            self.results[arm][name].append(result)
            for mode in modes:
                if result["status"] != "OK" or result["modes"].get(mode, {}).get("status") != "OK":
                    self.failed.add((name, mode))
            label = "" if arm == "now" else f" [{arm}]"
            self.log(f"torchgate {self.kind}: {self.cell.name} {name}{label} process "
                     f"{round_ + 1}: {_short(result)}")

    def _timeout(self) -> float:
        return self.cfg.bench.timeout_s if self.kind == KIND else self.cfg.numerics.timeout_s

    def rounds(self, count: int, start: int = 0) -> None:
        rng = random.Random(self.cfg.bench.seed + start)
        for round_ in range(start, start + count):
            order = list(self.cfg.workloads)
            rng.shuffle(order)
            for name in order:
                self.process(name, round_)
                if self.skipped:
                    return


def record_of(run: CellRun, extra: dict | None = None) -> dict:
    cell, cfg = run.cell, run.cfg
    base = {"cell": cell.name, "device": dataclasses.asdict(cell.device),
            "precision": dataclasses.asdict(cell.precision), "modes": list(cfg.modes)}
    if run.skipped:
        return {**base, "status": "SKIPPED", "reason": run.skipped, "workloads": {}}
    now = measured_arm(cfg)
    record = {**base, "status": "OK", "reason": None, "settings": dataclasses.asdict(cfg.bench),
              "workloads": {name: {"spec": dataclasses.asdict(cfg.workloads[name]),
                                   "processes": procs}
                            for name, procs in run.results[now].items()},
              **(extra or {})}
    if cfg.candidate_python:
        record["ab"] = {
            "baseline": {"python": sys.executable, "torch": run.torch["baseline"],
                         "workloads": {name: {"processes": procs}
                                       for name, procs in run.results["baseline"].items()}},
            "candidate": {"python": cfg.candidate_python, "torch": run.torch["candidate"]},
            "interleaved": run.run_pair is not None,   # rounds are lock-step pairs
        }
    return record


def pending_units(result: comparison.Comparison, max_processes: int) -> dict[str, set[str]]:
    """Workload -> modes worth more processes: timings that are INCONCLUSIVE but could be
    decided, and REGRESSED ones, confirmed with a fresh batch (a noisy, bimodal cell whose
    few processes happened to split between its modes does not survive one)."""
    pending: dict[str, set[str]] = {}
    for row in result.rows:
        if row.stage != KIND or row.metric not in comparison.TIMED or row.shift is None:
            continue
        undecided = row.verdict == stats.INCONCLUSIVE and row.needed is not None
        if (undecided or row.verdict == stats.REGRESSED) and row.shift.n_now < max_processes:
            pending.setdefault(row.workload, set()).add(row.mode)
    return pending


def extend(run: CellRun, compare: Callable[[dict], comparison.Comparison]) -> int:
    """Adaptive sampling: more rounds for INCONCLUSIVE (and REGRESSED) units until decided,
    out of budget or out of looks. Rounds go to the pending workloads in turn, so that the
    budget is shared rather than spent on the first. Returns the number of extra processes."""
    bench = run.cfg.bench
    deadline = time.perf_counter() + bench.adaptive_budget_s
    added, round_ = 0, bench.processes
    for _ in range(bench.max_looks - 1):
        pending = pending_units(compare(record_of(run)), bench.max_processes)
        if not pending:
            break
        for extra in range(bench.processes):
            for name in sorted(pending):
                walls = [p.get("wall_s", 0.0) for arm in run.results.values() for p in arm[name]]
                # Interleaved arms share their wall time; otherwise they run one after another.
                cost = (1 if run.run_pair else len(run.arms)) * (
                    sum(walls) / len(walls) if walls else 0.0)
                have = min(len(arm[name]) for arm in run.results.values())
                if have >= bench.max_processes or time.perf_counter() + cost > deadline:
                    continue
                run.process(name, round_ + extra, sorted(pending[name]))
                added += 1
        round_ += bench.processes
    return added


def run_cell(cfg: config.Config, cell: config.Cell, run=run_worker, log=print,
             compare: Callable[[dict], comparison.Comparison] | None = None,
             run_pair=run_interleaved) -> dict:
    started = time.perf_counter()
    cell_run = CellRun(cfg, cell, KIND, run, log, run_pair=run_pair)
    cell_run.rounds(cfg.bench.processes)
    extra = {"looks_planned": 1, "adaptive_processes": 0}
    if not cell_run.skipped and compare is not None and cfg.bench.adaptive_budget_s > 0:
        extra["looks_planned"] = cfg.bench.max_looks
        extra["adaptive_processes"] = extend(
            cell_run, lambda rec: compare({**rec, **extra}))
    if cfg.candidate_python and not cell_run.skipped:
        extra["env_candidate"] = capture_env(cfg.candidate_python)
    return {**record_of(cell_run, extra), "wall_s": time.perf_counter() - started}


def _short(result: dict) -> str:
    if result["status"] != "OK":
        return f"{result['status']}: {result.get('error')}"
    parts = []
    for mode, m in result.get("modes", {}).items():
        if m["status"] != "OK":
            parts.append(f"{mode} {m['status']}: {m.get('error')}")
        elif "steady_s" in m:
            parts.append(f"{mode} {stats.median(m['steady_s']) * 1e3:.3f} ms "
                         f"(first call {m['first_call_s']:.2f} s)")
        else:
            parts.append(f"{mode} OK")
    return "; ".join(parts)


def cell_stage(kind: str, doc: str, argv: list[str] | None):
    """The command line of a matrix-cell stage: its config, its cell and its report folder.
    Bad input (an unknown cell, a bad baseline.rev, a workload key that is a typo) fails here,
    before anything is measured."""
    parser = argparse.ArgumentParser(prog=f"python -m stages.{kind}", description=doc)
    parser.add_argument("--device", required=True)
    parser.add_argument("--precision", required=True)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", type=Path, default=Path("reports") / kind)
    args = parser.parse_args(argv)
    cfg = config.load(args.params)
    cell = cfg.cell(args.device, args.precision)
    resolve_rev(cfg.baseline_rev)
    for spec in cfg.workloads.values():
        check_arguments(spec.name, spec.target, spec.kwargs)
    return cfg, cell, args.out


def main(argv: list[str] | None = None) -> None:
    with one_line_errors(KIND):
        cfg, cell, out = cell_stage(KIND, __doc__, argv)
        record = run_cell(cfg, cell, compare=lambda rec: comparison.compare_cell(
            cfg, KIND, cell.name, rec))
        write_record(out / f"{cell.name}.json", KIND, record)
        result = comparison.compare_cell(cfg, KIND, cell.name, record)
        write_text(out / f"{cell.name}.md", render.cell_report(result, KIND, cell.name,
                                                               ab_env(record)))
        print(f"torchgate bench: wrote {out / cell.name}.json and .md")


def ab_env(record: dict) -> str:
    """In A/B mode: how the candidate's environment differs from this one's."""
    if not record.get("env_candidate"):
        return ""
    from stages.env import diff
    from stages.core.records import load_record
    cand = record["env_candidate"]
    if "error" in cand:
        return f"Candidate environment: {cand['error']}"
    here = load_record(comparison.REPORTS / "env" / "env.json", "env")["env"]
    changes = diff(here, cand)
    lines = ["## A/B environments (baseline → candidate)", ""]
    lines += [f"- `{k}`: `{a}` → `{b}`" for k, a, b in changes[:30]] or ["- identical"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
