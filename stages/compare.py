"""Stage `compare`: every cell and metric of this run against the baseline.

    python -m torchgate.compare

Writes <reports>/compare.md (every verdict, decided over the whole run: judge/__init__.py),
<reports>/compare.json (the same rows, for the report and gate stages) and <reports>/env/env.md
(the environment and its diff against the baseline's). It exits 0 whatever the verdicts: the
`gate` stage fails the run, after `report` has written this run's summary.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from torchgate.core import cli
from torchgate.core.baseline import KINDS, git, load_current, load_env_pair, load_run, run_stamp
from torchgate.core.errors import UserError, one_line_errors
from torchgate.core.records import load_record, write_record, write_text
from torchgate.core.records.inputs import RunInputs, own_arm, pair
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import EnvRecord
from torchgate.judge.environment import diff, hardware_changes, hardware_first
from torchgate.judge.run import compare_run
from torchgate.render.environment import render_md
from torchgate.render.markdown import tally
from torchgate.render.verdicts import page


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


def _record_file(path: Path) -> tuple[str, object, EnvRecord | None]:
    """(stage, record, the environment recorded beside it): a bench or numerics record, and
    `<machine folder>/env/env.json` where it lies in a machine's reports."""
    if not path.is_file():
        raise UserError(f"{path} is not a file, nor a revision of this repository")
    try:            # its kind only: load_record reads it whole, with its own messages
        kind = json.loads(path.read_bytes()).get("kind")
    except (ValueError, AttributeError):        # not JSON, not UTF-8, not an object
        kind = None
    if kind not in KINDS:
        raise UserError(f"{path} is not a torchgate bench or numerics record (a "
                        "reports/<machine>/bench/<cell>.json or numerics/<cell>.json)")
    env = path.parent.parent / "env" / "env.json"
    return kind, load_record(path, KINDS[kind]), load_current(env, EnvRecord)


def same_run(base: str, now: str, reports: Path) -> str | None:
    """Where BASE and NOW hold one run (one record file's bytes, or one tree of this
    machine's records at two revisions), what it is: there is nothing to compare, and
    testing a sample against itself would read its noise as "undecided"."""
    if Path(base).is_file() or Path(now).is_file():
        same = Path(base).is_file() and Path(now).is_file() and \
            Path(base).read_bytes() == Path(now).read_bytes()
        return f"{now} holds the same bytes as {base}" if same else None
    commits = [git.resolve_rev(rev, setting=name) for rev, name in ((base, "BASE"),
                                                                     (now, "NOW"))]
    trees = [tuple(git.object_id(c, reports / stage) for stage in KINDS) for c in commits]
    if commits[1] is not None and trees[0] == trees[1] and any(trees[1]):
        return f"{base} and {now} hold the same records in {reports}/"
    return None


def compare_two(cfg, base: str, now: str, reports: Path) -> CompareRecord:
    """Two runs compared as the compare stage compares a run with its baseline, with `cfg`'s
    statistics: two record files (bench or numerics, of one cell; each with the
    environment recorded beside it), or two revisions of this machine's `reports` (every
    cell `now` holds, against `base`'s, its history included)."""
    if Path(base).is_file() or Path(now).is_file():
        (stage, b, env_b), (stage_n, n, env_n) = map(_record_file, map(Path, (base, now)))
        if (stage, b.cell) != (stage_n, n.cell):
            raise UserError(f"{base} is {stage} {b.cell}, {now} is {stage_n} {n.cell}: compare "
                            "one stage's record of one cell")
        inputs = RunInputs(base, base, {(stage, n.cell): pair(own_arm(n), b)}, env_n, env_b)
        return compare_run(cfg, inputs)
    commits = [git.resolve_rev(rev, setting=name) for rev, name in ((base, "BASE"),
                                                                     (now, "NOW"))]
    cells = sorted({name.removesuffix(".json") for stage in KINDS
                    for name in git.names_in(commits[1], reports / stage)
                    if name.endswith(".json")})
    if not cells:
        raise UserError(f"{now} holds no records in {reports}/: name a commit that brought a "
                        "run of this machine (git log -- reports/), or --reports another")
    return compare_run(cfg, load_run(commits[0], cells, reports=reports, now_rev=commits[1],
                                     history_runs=cfg.stats.history_runs))


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("compare", __doc__, argv)
    with one_line_errors("compare"):
        cfg = cli.load(args)
        cells = [c.name for c in cfg.cells()]
        inputs = load_run(cfg.baseline.rev, cells, reports=args.reports,
                          history_runs=cfg.stats.history_runs)
        result = dataclasses.replace(compare_run(cfg, inputs), inputs=run_stamp(
            cfg.baseline.rev, cells, args.reports))
        write_record(args.reports / "compare.json", result)
        write_text(args.reports / "compare.md", page(result, f"compare: matrix "
                                                              f"{cfg.matrix.name}"))
        found = result.findings()
        print(f"torchgate compare: {tally(r.verdict for r in found)}; environment: "
              f"{env_page(cfg.baseline.rev, args.reports)}")


if __name__ == "__main__":
    main()
