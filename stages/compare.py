"""Stage `compare`: every cell and metric of this run against the baseline.

    python -m stages.compare

Writes <reports>/compare.md (every verdict, decided over the whole run: judge/__init__.py),
<reports>/compare.json (the same rows, for the report and gate stages) and <reports>/env/env.md
(the environment and its diff against the baseline's). It exits 0 whatever the verdicts: the
`gate` stage fails the run, after `report` has written this run's summary.
"""
from __future__ import annotations

from pathlib import Path

from stages.core import cli
from stages.core.baseline import load_env_pair, load_run
from stages.core.errors import one_line_errors
from stages.core.records import write_record, write_text
from stages.judge.environment import diff, hardware_changes, hardware_first
from stages.judge.run import compare_run
from stages.render.environment import render_md
from stages.render.markdown import tally
from stages.render.verdicts import page


def env_md(base: dict | None, now: dict, label: str, error: str | None = None) -> str:
    """env.md: the environment, and what changed against the baseline's (`label`), the
    hardware fields first; `error`: why the baseline's could not be read."""
    changes = None if base is None else hardware_first(diff(base, now))
    hardware = [] if base is None else hardware_changes(base, now)
    return render_md(now, label, changes, hardware, baseline_error=error)


def env_page(rev: str, reports: Path) -> str:
    """Write reports/env/env.md, this run's environment against the baseline's; say how they
    differ, in a few words. Here rather than in the env stage, which runs on every `dvc
    repro`: the baseline (`HEAD` by default) moves with each commit, and a page rewritten then
    would leave a committed tree dirty. Like compare.md, it is the comparison made at the run."""
    now, base, error = load_env_pair(rev, reports)
    env = now.env if now is not None else {}
    write_text(reports / "env" / "env.md",
               env_md(base.env if base is not None else None, env, rev, error))
    if error is not None:
        return f"baseline unreadable ({error})"
    if base is None:
        return "no baseline yet"
    if hardware_changes(base.env, env):
        return "hardware changed: timings not comparable"
    count = len(diff(base.env, env))
    return f"{count} field(s) changed against the baseline" if count else "no change"


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("compare", __doc__, argv)
    with one_line_errors("compare"):
        cfg = cli.load(args)
        inputs = load_run(cfg.baseline.rev, [c.name for c in cfg.cells()], reports=args.reports,
                          history_runs=cfg.stats.history_runs)
        result = compare_run(cfg, inputs)
        write_record(args.reports / "compare.json", result)
        write_text(args.reports / "compare.md", page(result, f"compare: matrix "
                                                              f"{cfg.matrix.name}"))
        found = result.findings()
        print(f"torchgate compare: {tally(r.verdict for r in found)}; environment: "
              f"{env_page(cfg.baseline.rev, args.reports)}")


if __name__ == "__main__":
    main()
