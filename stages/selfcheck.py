"""Self-check: this machine's real false-alarm rate and detection rate for the selected matrix.

    python -m torchgate.selfcheck [--splits 200] [--slowdown 0.10] [--repeat 0] [--pool N]

Measures every cell with `--pool` worker processes per unit (by default 40: twice the 20 a
side of pyperf's design, the largest of the peers'), then, many times over, splits each
unit's processes at random into two halves and runs the real comparison on
`bench.processes` of each: an A/A comparison of identical code on this machine. The share of
splits with any REGRESSED verdict is the false-alarm rate; the same splits with every sample
of one random unit slowed by `--slowdown` give the detection rate; both also as against a
recorded baseline (the run-to-run variance added). The rules of other tools (TorchBench, asv,
pyperf) judge the same halves at their own sampling designs, per unit and at matched
false-alarm rates, for a table beside torchgate's rates (judge.selfcheck). A smaller pool is
quicker (--pool 8: torchgate's design, the peers' below theirs, which the table says). With
`--repeat N` it also measures the matrix N more times in sequence and compares each run with
the first, which adds the drift of the machine between runs (what a committed baseline
faces).
Writes reports/<machine>/selfcheck.md (--reports: another folder).
"""
from __future__ import annotations

import dataclasses
import random
import time

from torchgate.core import cli
from torchgate.core.errors import UserError, one_line_errors
from torchgate.core.records import write_text
from torchgate.core.vocabulary import Status, Verdict
from torchgate.judge.rules import RULES
from torchgate.judge.selfcheck import check, split, take, verdicts
from torchgate.launch.cells import measure_bench
from torchgate.render.progress import bench_line
from torchgate.render.selfcheck import report


def _log(*line) -> None:
    print(bench_line(*line), flush=True)


def main(argv: list[str] | None = None) -> None:
    args = cli.parse(
        "selfcheck", __doc__, argv, ("--splits", dict(type=int, default=200)),
        ("--slowdown", dict(type=float, default=0.10)), ("--repeat", dict(type=int, default=0)),
        ("--pool", dict(type=int, help="processes per unit; default twice the most a side of "
                                       "bench.processes and the peers' designs")))
    with one_line_errors("selfcheck"):
        cfg = cli.load(args)
        started = time.perf_counter()
        once = dataclasses.replace(cfg, bench=dataclasses.replace(cfg.bench,
                                                                  adaptive_budget_s=0.0))
        pool = args.pool or 2 * max(cfg.bench.processes,
                                    *(r.design.processes for r in RULES))
        if pool < 2 * cfg.bench.processes:
            raise UserError(f"--pool {pool} is under twice bench.processes "
                            f"({cfg.bench.processes}): each half must hold a side")
        doubled = dataclasses.replace(once, bench=dataclasses.replace(once.bench,
                                                                      processes=pool))
        records = {cell.name: measure_bench(doubled, cell, log=_log) for cell in cfg.cells()}
        records = {c: r for c, r in records.items() if r.status == Status.OK}
        checked = check(records, cfg, args.splits, args.slowdown)
        repeats = None
        if args.repeat:
            first = {c: take(split(r, random.Random(1), cfg.bench.processes)[0],
                             cfg.bench.processes) for c, r in records.items()}
            repeats = []
            for i in range(args.repeat):
                again = {cell.name: measure_bench(once, cell, log=_log) for cell in cfg.cells()}
                result = verdicts({c: (first[c], again[c]) for c in first}, cfg, apart=True)
                repeats.append(sum(r.verdict == Verdict.REGRESSED for r in result.rows))
                print(f"torchgate selfcheck: repeat {i + 1}/{args.repeat}: {repeats[-1]} "
                      "REGRESSED")
        text = report(cfg, checked, args.slowdown, args.splits, repeats,
                      time.perf_counter() - started)
        write_text(args.reports / "selfcheck.md", text)
        print(text)


if __name__ == "__main__":
    main()
