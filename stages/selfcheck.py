"""Self-check: this machine's real false-alarm rate and detection rate for the selected matrix.

    python -m stages.selfcheck [--processes 10] [--splits 200] [--slowdown 0.10] [--repeat 0]

Measures every cell with twice `bench.processes` worker processes, then, many times over,
splits each unit's processes at random into two halves of `bench.processes` and runs the real
comparison on them: an A/A comparison of identical code on this machine. The share of splits
with any REGRESSED verdict is the false-alarm rate; the same splits with every sample of one
random unit slowed by `--slowdown` give the detection rate. With `--repeat N` it also
measures the matrix N more times in sequence and compares each run with the first, which
adds the drift of the machine between runs (what a committed baseline faces).
Writes reports/selfcheck.md.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import random
import statistics
import time
from pathlib import Path

from stages import bench
from stages.judge import comparison
from stages.core import config
from stages.render import markdown as render
from stages.judge import stats
from stages.core.errors import one_line_errors
from stages.core.records import write_text


def split(record: dict, rng: random.Random, size: int) -> tuple[dict, dict]:
    """Two records from one: each unit's processes shuffled into halves of `size`."""
    a, b = copy.deepcopy(record), copy.deepcopy(record)
    for name, unit in record["workloads"].items():
        procs = list(unit["processes"])
        rng.shuffle(procs)
        a["workloads"][name]["processes"] = procs[:size]
        b["workloads"][name]["processes"] = procs[size:2 * size]
    return a, b


def slow_down(record: dict, workload: str, mode: str, factor: float) -> dict:
    slowed = copy.deepcopy(record)
    for proc in slowed["workloads"][workload]["processes"]:
        m = proc.get("modes", {}).get(mode)
        if m and m.get("steady_s"):
            m["steady_s"] = [s * (1 + factor) for s in m["steady_s"]]
    return slowed


def verdicts(pairs: dict, cfg: config.Config) -> comparison.Comparison:
    """The real comparison over every cell of one simulated run: {cell: (base, now)}."""
    result = comparison.Comparison()
    for cell, (base, now) in pairs.items():
        result.rows.extend(comparison.bench_rows(cell, now, base, cfg.stats.delta))
    return comparison.finish(result, cfg.stats.alpha, cfg.stats.power)


def steady_units(record: dict) -> list[tuple[str, str]]:
    return [(w, m) for w, m in sorted(comparison.units(record))
            if len(comparison.process_values(record, w, m, "steady_s")) >= 4]


def check(records: dict, cfg: config.Config, splits: int, slowdown: float, seed: int = 0):
    rng = random.Random(seed)
    size = cfg.bench.processes
    false_runs, detected, trials, mdes = 0, 0, 0, {}
    for _ in range(splits):
        pairs = {cell: split(rec, rng, size) for cell, rec in records.items()}
        null = verdicts(pairs, cfg)
        false_runs += any(r.verdict == stats.REGRESSED for r in null.rows)
        for r in null.rows:
            if r.metric == "steady_s" and r.mde is not None:
                mdes.setdefault((r.cell, r.workload, r.mode), []).append(r.mde)
        cell = rng.choice(sorted(pairs))
        units = steady_units(records[cell])
        if not units:
            continue
        workload, mode = rng.choice(units)
        base, now = pairs[cell]
        pairs[cell] = (base, slow_down(now, workload, mode, slowdown))
        hit = verdicts(pairs, cfg)
        trials += 1
        detected += any(r.verdict == stats.REGRESSED and (r.cell, r.workload, r.mode, r.metric)
                        == (cell, workload, mode, "steady_s") for r in hit.rows)
    return false_runs / splits, (detected / trials if trials else None), {
        k: statistics.median(v) for k, v in mdes.items()}


def repeat_check(cfg: config.Config, first: dict, runs: int, log) -> list[int]:
    """Fresh runs in sequence against the first: REGRESSED verdicts per run."""
    counts = []
    for i in range(runs):
        again = {cell.name: bench.run_cell(cfg, cell, log=log) for cell in cfg.cells()}
        result = verdicts({c: (first[c], again[c]) for c in again}, cfg)
        counts.append(sum(r.verdict == stats.REGRESSED for r in result.rows))
        log(f"torchgate selfcheck: repeat {i + 1}/{runs}: {counts[-1]} REGRESSED")
    return counts


def report(cfg, false_rate, detect_rate, mdes, slowdown, splits, repeats, wall_s) -> str:
    lines = ["# torchgate self-check", "",
             f"Matrix `{cfg.matrix_name}`, {cfg.bench.processes} processes per side (measured "
             f"{2 * cfg.bench.processes} per unit), {splits} random A/A splits, "
             f"false discovery rate {cfg.stats.alpha}, δ steady state "
             f"{cfg.stats.delta.get('steady_s', 0.05):.0%}. Wall time {wall_s:.0f} s.", "",
             f"- **False-alarm rate**: {false_rate:.1%} of A/A comparisons had any REGRESSED "
             f"verdict (bound: {cfg.stats.alpha:.0%}).",
             f"- **Detection rate**: a {slowdown:.0%} steady-state slowdown injected into one "
             f"random unit was REGRESSED in "
             + (f"{detect_rate:.1%}" if detect_rate is not None else "n/a") + " of comparisons.",
             ]
    if repeats is not None:
        bad = sum(1 for c in repeats if c)
        lines.append(f"- **Repeated runs**: {bad} of {len(repeats)} fresh runs compared with the "
                     f"first had a REGRESSED verdict ({repeats}).")
    lines += ["", "Minimum detectable steady-state effect per unit (80 % power, median over "
              "splits):", "", "| cell | workload | mode | MDE |", "|---|---|---|---|"]
    lines += [f"| {c} | {w} | {m} | {render.mde(v)} |" for (c, w, m), v in sorted(mdes.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.selfcheck", description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--splits", type=int, default=200)
    parser.add_argument("--slowdown", type=float, default=0.10)
    parser.add_argument("--repeat", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("reports/selfcheck.md"))
    args = parser.parse_args(argv)
    with one_line_errors("selfcheck"):
        cfg = config.load(args.params)
        started = time.perf_counter()
        doubled = dataclasses.replace(cfg, bench=dataclasses.replace(
            cfg.bench, processes=2 * cfg.bench.processes, adaptive_budget_s=0.0))
        records = {cell.name: bench.run_cell(doubled, cell) for cell in cfg.cells()}
        records = {c: r for c, r in records.items() if r["status"] == "OK"}
        false_rate, detect_rate, mdes = check(records, cfg, args.splits, args.slowdown)
        repeats = None
        if args.repeat:
            once = dataclasses.replace(cfg, bench=dataclasses.replace(cfg.bench,
                                                                      adaptive_budget_s=0.0))
            first = {c: split(r, random.Random(1), cfg.bench.processes)[0]
                     for c, r in records.items()}
            repeats = repeat_check(once, first, args.repeat, print)
        text = report(cfg, false_rate, detect_rate, mdes, args.slowdown, args.splits, repeats,
                      time.perf_counter() - started)
        write_text(args.out, text)
        print(text)


if __name__ == "__main__":
    main()
