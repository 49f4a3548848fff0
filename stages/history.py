"""Stage `history`: <reports>/history.md, the committed runs of each cell as series (one per
workload, mode and timing, one hardware per series) and the commit where each lasting shift
began, with the environment change at each step.

    python -m torchgate.history

It reads git as well as this run's files, yet DVC runs it only when those files change, not
after every commit: this run is the last point whether it is committed yet or not
(baseline.load_timeline), and is named "this run", so committing it changes neither the page
nor its trend pictures (pictures/history/ beside the page, byte-deterministic and never
committed: a fresh clone misses them, and `dvc repro` runs this stage again to draw them),
and the committed tree stays clean. Before, it ran on every `dvc repro` (1.5 s of imports:
scipy, matplotlib) and renamed this run from "workspace" to its commit after a commit,
rewriting history.md and the pictures.
Commits that bring other runs without changing this run's files (a merge that kept them, a
rebase) show on the next run, or now with `dvc repro -s -f history` (this stage alone: a bare
-f would measure again). The page and the pictures are rewritten only when they changed.
"""
from __future__ import annotations

from torchgate.core import cli
from torchgate.core.baseline import git, load_timeline
from torchgate.core.errors import one_line_errors
from torchgate.core.records import drop_pictures, replace_pictures, write_text
from torchgate.core.vocabulary import PICTURES
from torchgate.judge.results import KEY_METRICS
from torchgate.judge.trends import Run, chance, failure_rates, series
from torchgate.render.history import history, trend_images


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("history", __doc__, argv)
    with one_line_errors("history"):
        cfg = cli.load(args)
        cells = [c.name for c in cfg.cells()]
        head = git.resolve_rev("HEAD")
        skipped: list[str] = []
        runs = {cell: [Run(*found) for found in timeline]
                for cell, timeline in load_timeline(head, cells, cfg.history.runs,
                                                    reports=args.reports, notes=skipped).items()}
        for note in skipped:
            print(f"torchgate history: {note.removeprefix('History: ')}")
        found = series(runs, cfg.history, cfg.compare.busy_share, cfg.stats.delta)
        images = trend_images(found, KEY_METRICS)
        folder = args.reports / PICTURES / "history"
        replace_pictures(folder, images)    # a series that is gone leaves no picture behind
        drop_pictures(args.reports / "trends")      # where an older torchgate drew them
        text = history(found, cells, cfg.history, tuple(images), f"{PICTURES}/history",
                       chance(found, cfg.history, cfg.stats.delta), failure_rates(runs))
        path = args.reports / "history.md"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            write_text(path, text)
        shifts = sum(len(s.shifts) for s in found)
        print(f"torchgate history: wrote {path}: {len(found)} series, "
              f"{shifts} lasting shift(s)")


if __name__ == "__main__":
    main()
