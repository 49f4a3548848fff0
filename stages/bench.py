"""Stage `bench`: measure one cell (device x precision) of the matrix.

    python -m stages.bench --device cpu --precision fp32

K worker processes per workload, workloads interleaved in a shuffled order within each round
so that a slow moment of the machine hits every workload alike. Every sample of every process
goes to reports/bench/<cell>.json; reports/bench/<cell>.md is the diff against the baseline.
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import time
from pathlib import Path

from . import comparison, config, render
from .errors import one_line_errors
from .launcher import run_worker
from .records import write_record, write_text

KIND = "bench"


def job_for(cfg: config.Config, cell: config.Cell, workload: config.WorkloadSpec,
            kind: str) -> dict:
    return {
        "kind": kind,
        "seed": cfg.bench.seed,
        "device": dataclasses.asdict(cell.device),
        "precision": dataclasses.asdict(cell.precision),
        "workload": {"name": workload.name, "target": workload.target, "kwargs": workload.kwargs},
        "modes": list(cfg.modes),
        "timing": dataclasses.asdict(cfg.bench),
    }


def run_cell(cfg: config.Config, cell: config.Cell, run=run_worker, log=print) -> dict:
    """All processes of one cell; a cell whose device is absent is SKIPPED with the reason."""
    started = time.perf_counter()
    workloads = {name: {"spec": dataclasses.asdict(spec), "processes": []}
                 for name, spec in cfg.workloads.items()}
    rng = random.Random(cfg.bench.seed)
    for round_ in range(cfg.bench.processes):
        order = list(cfg.workloads)
        rng.shuffle(order)
        for name in order:
            spec = cfg.workloads[name]
            result = run(job_for(cfg, cell, spec, KIND),
                         timeout_s=spec.timeout_s or cfg.bench.timeout_s)
            if result["status"] == "SKIPPED":
                log(f"torchgate bench: {cell.name} skipped: {result['error']}")
                return {"cell": cell.name, "status": "SKIPPED", "reason": result["error"],
                        "device": dataclasses.asdict(cell.device),
                        "precision": dataclasses.asdict(cell.precision), "workloads": {}}
            result["round"] = round_
            workloads[name]["processes"].append(result)
            log(f"torchgate bench: {cell.name} {name} process {round_ + 1}/"
                f"{cfg.bench.processes}: {_short(result)}")
    return {"cell": cell.name, "status": "OK", "reason": None,
            "device": dataclasses.asdict(cell.device),
            "precision": dataclasses.asdict(cell.precision),
            "modes": list(cfg.modes), "settings": dataclasses.asdict(cfg.bench),
            "workloads": workloads, "wall_s": time.perf_counter() - started}


def _short(result: dict) -> str:
    if result["status"] != "OK":
        return f"{result['status']}: {result.get('error')}"
    parts = []
    for mode, m in result.get("modes", {}).items():
        if m["status"] == "OK":
            steady = sorted(m["steady_s"])[len(m["steady_s"]) // 2]
            parts.append(f"{mode} {steady * 1e3:.3f} ms (first call {m['first_call_s']:.2f} s)")
        else:
            parts.append(f"{mode} {m['status']}: {m.get('error')}")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.bench", description=__doc__)
    parser.add_argument("--device", required=True)
    parser.add_argument("--precision", required=True)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", type=Path, default=Path("reports/bench"))
    args = parser.parse_args(argv)
    with one_line_errors("bench"):
        cfg = config.load(args.params)
        cell = cfg.cell(args.device, args.precision)
        record = run_cell(cfg, cell)
        write_record(args.out / f"{cell.name}.json", KIND, record)
        result = comparison.compare_cell(cfg, KIND, cell.name, record)
        write_text(args.out / f"{cell.name}.md", render.cell_report(result, "bench", cell.name))
        print(f"torchgate bench: wrote {args.out / cell.name}.json and .md")


if __name__ == "__main__":
    main()
