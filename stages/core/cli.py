"""The command lines of the stages: a matrix-cell stage (bench, numerics) and a whole-run stage
(compare, report). Bad input fails here, in one line, before anything is measured."""
from __future__ import annotations

import argparse
from pathlib import Path

from stages.core import config
from stages.core.baseline import git
from stages.core.config.targets import check_tracked, check_workloads


def cell_stage(kind: str, doc: str, argv: list[str] | None):
    """(config, cell, report folder). An unknown cell, a bad baseline.rev, a workload key
    that is a typo or a workload module that dvc.yaml does not track stops the stage before
    it measures."""
    parser = argparse.ArgumentParser(prog=f"python -m stages.{kind}", description=doc)
    parser.add_argument("--device", required=True)
    parser.add_argument("--precision", required=True)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", type=Path, help=f"default reports/<machine>/{kind}")
    args = parser.parse_args(argv)
    cfg = config.load(args.params)
    args.out = args.out or cfg.reports / kind
    cell = cfg.cell(args.device, args.precision)
    git.resolve_rev(cfg.baseline.rev)
    default = cfg.bench.timeout_s if kind == "bench" else cfg.numerics.timeout_s
    # Within the time limit a worker would have for the same import.
    limit_s = max((s.timeout_s or default for s in cfg.workloads.values()), default=default)
    for note in check_workloads(cfg.workloads.values(), limit_s):
        print(f"torchgate {kind}: {note}", flush=True)
    check_tracked(cfg.workloads, kind)
    return cfg, cell, args.out


def run_stage(kind: str, doc: str, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m stages.{kind}", description=doc)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--reports", type=Path, help="default reports/<machine>")
    return parser.parse_args(argv)


def load(args: argparse.Namespace) -> config.Config:
    """A whole-run stage's config; its reports are this machine's unless --reports says."""
    cfg = config.load(args.params)
    args.reports = args.reports or cfg.reports
    return cfg
