"""The command lines of the stages, one spelling of each option: every stage takes `--params`
(the composed configuration); one that reads or writes a machine's reports takes `--reports`
(that machine's folder, default `reports/<machine.name>/`); a cell stage (bench, numerics)
takes `--device` and `--precision` and writes `<reports>/<stage>/<cell>.*`. Bad input fails
here, in one line, before anything is measured. Only argparse is imported up front: the env
stage runs on every `dvc repro` and loads no configuration."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

Option = tuple[str, dict[str, Any]]        # a flag and argparse's keywords for it
# The tools under the `torchgate` command (stages/torchgate.py): their usage says `torchgate
# <tool>`; the pipeline's stages keep `python -m torchgate.<name>` (dvc.yaml's).
TOOLS = ("compose", "lock", "selfcheck", "comment", "cache", "gate")


def prog(name: str) -> str:
    """How a user runs the tool or stage `name`."""
    return f"torchgate {name}" if name in TOOLS else f"python -m torchgate.{name}"


def old_spelling(argv: list[str]) -> None:
    """A process started by the old import name, `python -m stages.<name>` in a checkout
    (stages/__init__.py): the packages above the module are torchgate's own (the module runs
    as __main__), and one line on stderr says what to run instead."""
    import importlib
    import sys

    from torchgate.core.names import NAME, OLD, current
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None
    module = module if module and current(module) != module else None   # else an import
    parts = (module or OLD).split(".")
    for i in range(2, len(parts)):
        above = ".".join(parts[:i])
        sys.modules.setdefault(above, importlib.import_module(current(above)))
    what = f"`python -m {module}`" if module else f"the import name {OLD}"
    now = (f"import {NAME}" if module is None else NAME if module == OLD else
           prog(parts[-1]) if parts[-1] in TOOLS else f"python -m {current(module)}")
    print(f"{NAME}: {what} is the old spelling and stops working in the next release; "
          f"use `{now}`", file=sys.stderr)


def parse(kind: str, doc: str, argv: list[str] | None, *options: Option,
          params: bool = True, reports: bool = True, cell: bool = False) -> argparse.Namespace:
    """The stage's arguments: `--params` and `--reports` (unless told not), `--device` and
    `--precision` for a cell stage, then its own `options`."""
    parser = argparse.ArgumentParser(
        prog=prog(kind), description=doc,
        epilog="<reports>: --reports, by default reports/<machine>/ (machine.name in "
               "params.yaml)" if reports else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    if params:
        parser.add_argument("--params", default="params.yaml",
                            help="the composed configuration (python -m torchgate.compose)")
    if reports:
        parser.add_argument("--reports", type=Path,
                            help="this machine's reports folder (default reports/<machine>)")
    if cell:
        parser.add_argument("--device", required=True)
        parser.add_argument("--precision", required=True)
    for flag, keywords in options:
        parser.add_argument(flag, **keywords)
    args = parser.parse_args(argv)
    if kind not in TOOLS:
        own_code(kind)
    return args


def own_code(kind: str) -> None:
    """A stage run in a project (dvc.yaml beside a stages/ folder) runs that folder's code, or
    the same code: dvc.yaml's code deps track it, and another checkout's installed torchgate
    would measure with other code under this one's name."""
    here = Path("stages")
    if not (Path("dvc.yaml").is_file() and (here / "__init__.py").is_file()):
        return
    from torchgate.core.names import PACKAGE
    if here.resolve() != PACKAGE and _sources(here.resolve()) != _sources(PACKAGE):
        raise SystemExit(f"{prog(kind)}: error: this Python's torchgate is {PACKAGE}, not this "
                         "project's stages/: `pip install -e .` here, or run with the "
                         "Python of this project's environment")


def load(args: argparse.Namespace):
    """The stage's config; its reports are this machine's unless --reports says."""
    from torchgate.core import config
    cfg = config.load(args.params)
    if hasattr(args, "reports"):
        args.reports = args.reports or cfg.reports
    return cfg


def cell_stage(kind: str, doc: str, argv: list[str] | None):
    """(config, cell, the machine's reports folder). An unknown cell, a bad
    baseline.rev, a workload key that is a typo or a workload module that dvc.yaml does not
    track stops the stage before it measures."""
    from torchgate.core.baseline import git
    from torchgate.core.config.targets import check_tracked, check_workloads
    args = parse(kind, doc, argv, cell=True)
    cfg = load(args)
    cell = cfg.cell(args.device, args.precision)
    git.resolve_rev(cfg.baseline.rev)
    default = cfg.bench.timeout_s if kind == "bench" else cfg.numerics.timeout_s
    # Within the time limit a worker would have for the same import.
    limit_s = max((s.timeout_s or default for s in cfg.workloads.values()), default=default)
    for note in check_workloads(cfg.workloads.values(), limit_s):
        print(f"torchgate {kind}: {note}", flush=True)
    check_tracked(cfg.workloads, kind)
    return cfg, cell, args.reports


def _sources(folder: Path) -> dict[str, bytes]:
    """A package folder's Python sources by relative path (a copy of the same code passes)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.py")
            if "__pycache__" not in p.parts}
