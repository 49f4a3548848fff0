"""The `torchgate` command: the tools around the pipeline under one name.

    torchgate compose [OVERRIDE ...]      params.yaml from conf/ (python -m torchgate.compose)
    torchgate lock                        this machine's lock, conf/env/<machine>.txt
    torchgate selfcheck                   false alarms and power of this machine's timings
    torchgate comment                     the pull-request comment of this machine's run
    torchgate cache [--evict ...]         the rebuilt arms' cache (python -m torchgate.arms.cache)
    torchgate gate                        pass or fail this run on gate.fail_on
    torchgate compare BASE NOW            two runs' verdicts: two commits of this machine's
                                          reports, or two record files
    torchgate exps [DVC EXP SHOW ...]     `dvc exp show` with the columns that say what each
                                          experiment asked and what it decided

`dvc repro` runs the stages themselves; each tool here is also `python -m torchgate.<name>`, and
`torchgate <tool> --help` says its options; `torchgate --version` the installed version.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from torchgate.core import cli

TOOLS = {"compose": "torchgate.compose", "lock": "torchgate.lock",
         "selfcheck": "torchgate.selfcheck", "comment": "torchgate.comment",
         "cache": "torchgate.arms.cache", "gate": "torchgate.gate"}
assert tuple(TOOLS) == cli.TOOLS, "a tool's usage line names it (core.cli.TOOLS)"


# What `torchgate exps` shows of `dvc exp show`'s 120-180 columns (every params leaf and
# metric): what an experiment changed that users change, and what its run decided. DVC has
# no setting for its default columns; `dvc exp show` itself still shows every one.
EXP_COLUMNS = ("Experiment", "Created", "gate_failed", r"verdicts\.(regressed|improved|failed|"
               r"inconclusive|not_comparable)", r"matrix\.(name|modes)", r"cells\..*",
               r"candidate\.(pip|python|rev)", r"baseline\.rev", r"bench\.processes")


def exps(argv: list[str]) -> None:
    """`torchgate exps`: `dvc exp show` narrowed to EXP_COLUMNS; any of its options after."""
    import subprocess
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: torchgate exps [DVC EXP SHOW OPTION ...]\n\n`dvc exp show` with only "
              "the columns that say what each experiment asked (matrix, cells, candidate, "
              "baseline.rev, bench.processes) and decided (gate_failed, verdict counts); "
              "options such as -A, --md, --json, --keep REGEX pass through to it.")
        return
    keep = "^(" + "|".join(EXP_COLUMNS) + ")$"
    raise SystemExit(subprocess.call(["dvc", "exp", "show", "--drop", ".*", "--keep", keep,
                                      *argv]))


def compare(argv: list[str]) -> None:
    """`torchgate compare BASE NOW`: NOW's verdicts against BASE on stdout, a line a unit (or
    compare.md's page, or compare.json); exit 1 with --gate when gate.fail_on fails it."""
    parser = argparse.ArgumentParser(
        prog="torchgate compare", description=(
            "Compare two runs as the pipeline's compare stage does and print a line a unit "
            "(--md: the page compare.md holds). BASE and NOW: two revisions of this machine's "
            "reports (a branch, tag or commit that brought a run: `git log -- "
            "reports/<machine>/`), or two record files (reports/<machine>/bench/<cell>.json "
            "or numerics/<cell>.json, of one cell; the env/env.json beside each is read)."))
    parser.add_argument("base", metavar="BASE")
    parser.add_argument("now", metavar="NOW")
    parser.add_argument("--params",
                        help="the statistics and settings to judge and gate with (default: "
                             "NOW's params.yaml, as committed where NOW is a revision)")
    parser.add_argument("--reports", type=Path,
                        help="the reports folder, for two revisions, as the stages take it "
                             "(default reports/<machine.name of --params>)")
    parser.add_argument("--gate", action="store_true",
                        help="exit 1 when the verdicts hold what gate.fail_on lists")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--only-changed", action="store_true",
                       help="only the units a reviewer must look at (REGRESSED, IMPROVED, "
                            "FAILED, NEW, MISSING, NOT COMPARABLE)")
    shown.add_argument("--json", action="store_true", help="the comparison as compare.json")
    shown.add_argument("--md", action="store_true", help="the page compare.md would hold")
    args = parser.parse_args(argv)
    from torchgate.compare import compare_two, same_run
    from torchgate.core.errors import one_line_errors
    from torchgate.core.records import dumps, record_data
    from torchgate.judge.gate import gate_failures
    from torchgate.render.verdicts import page, terse
    with one_line_errors("compare"):
        cfg = _params_of(args.now, args.params)
        same = None if args.json else same_run(args.base, args.now, args.reports or cfg.reports)
        if same:
            print(f"Nothing changed: {same}.")
            return
        result = compare_two(cfg, args.base, args.now, args.reports or cfg.reports)
        title = f"torchgate compare {args.base} {args.now}"
        print(dumps(record_data(result)) if args.json else page(result, title) if args.md
              else terse(result, args.only_changed))
        failures = gate_failures(result, cfg.gate.fail_on) if args.gate else []
        for reason in failures:
            print(f"torchgate compare: failed: {reason}", file=sys.stderr)
    if failures:
        raise SystemExit(1)


def _params_of(now: str, given: str | None):
    """The config a comparison judges with: --params, else the params.yaml NOW's run was
    measured with (committed at that revision), else the working tree's."""
    import yaml

    from torchgate.core import config
    from torchgate.core.baseline import git
    if given is None and not Path(now).is_file():
        text = git.read_file(git.resolve_rev(now, setting="NOW"), "params.yaml")
        if text is not None:
            return config.parse(yaml.safe_load(text))
    return cli.load(argparse.Namespace(params=given or "params.yaml"))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    if argv[0] == "--version":
        from importlib.metadata import PackageNotFoundError, version
        try:
            print(f"torchgate {version('torchgate')}")
        except PackageNotFoundError:     # run from a checkout that was never installed
            print("torchgate (not installed: pip install -e .)")
        return None
    tool, rest = argv[0], argv[1:]
    if tool == "compare":
        return compare(rest)
    if tool == "exps":
        return exps(rest)
    if tool not in TOOLS:
        print(f"torchgate: error: no tool {tool!r}; the tools: "
              f"{', '.join([*TOOLS, 'compare', 'exps'])} (torchgate --help)", file=sys.stderr)
        raise SystemExit(2)
    importlib.import_module(TOOLS[tool]).main(rest)


if __name__ == "__main__":
    main()
