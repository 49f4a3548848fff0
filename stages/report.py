"""Stage `report`: <reports>/summary.md, the page a reviewer reads first (with what the gate stage
will decide), <reports>/metrics.json, what the run decided, for `dvc metrics diff`, and
<reports>/numbers.json, the medians the pages show.

    python -m torchgate.report

Its pictures go to pictures/summary/ beside the page, never committed (their data is, in
plots/): in a fresh clone the folder is missing, so `dvc repro` runs this stage again to draw
them, measuring nothing, against the baseline the run was compared with
(core.baseline.compared_commit), and the page it writes is the committed one.
"""
from __future__ import annotations

from pathlib import Path

from torchgate.core import cli
from torchgate.core.baseline import compared_commit, load_current, load_env_pair, load_run
from torchgate.core.errors import one_line_errors
from torchgate.core.records import (
    drop_pictures,
    dumps,
    load_record,
    replace_pictures,
    write_text,
)
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import BenchRecord, NumericsRecord
from torchgate.core.vocabulary import PICTURES
from torchgate.judge.environment import diff, hardware_key
from torchgate.judge.gate import gate_failures
from torchgate.judge.summary import summarize
from torchgate.judge.sweeps import decide
from torchgate.render.metrics import decisions, numbers
from torchgate.render.plots import CAPTIONS, pictures, plot_data
from torchgate.render.summary import summary
from torchgate.render.sweeps import sweep_pictures, sweeps_section

PAGE = "summary"        # this page's pictures: <reports>/pictures/summary/


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("report", __doc__, argv)
    with one_line_errors("report"):
        cfg = cli.load(args)
        compare = load_record(args.reports / "compare.json", CompareRecord)
        bench, numerics, prices = {}, {}, {}
        for cell in cfg.cells():
            found = load_current(args.reports / "bench" / f"{cell.name}.json", BenchRecord)
            if found is not None:
                bench[cell.name] = found
                prices[cell.name] = cell.device.price_per_hour
            found = load_current(args.reports / "numerics" / f"{cell.name}.json", NumericsRecord)
            if found is not None:
                numerics[cell.name] = found
        # The baseline compare used, also when this stage runs again after the run was
        # committed (to draw its pictures in a fresh clone): the same page again.
        base_commit = compared_commit(cfg.baseline.rev, list(bench), reports=args.reports)
        now, base, why = load_env_pair(base_commit, args.reports)
        recorded = load_run(base_commit, list(bench), ("bench",), reports=args.reports)
        # Each unit's numbers, once: the summary, numbers.json, the pictures and the sweeps
        # read these, never the records.
        summaries = {cell: summarize(cell, record, prices[cell], cfg.compare.busy_share,
                                     recorded.pairs["bench", cell].base)
                     for cell, record in bench.items()}
        env = now.env if now is not None else None
        write_text(args.reports / "numbers.json", dumps(numbers(
            summaries, numerics, compare, hardware_key(env) if env else None)))
        write_text(args.reports / "metrics.json", dumps(decisions(
            compare, gate_failures(compare, cfg.gate.fail_on))))
        # Each sweep's recommendation, decided once, like any timing.
        decided = dict(alpha=cfg.stats.alpha, delta=cfg.stats.delta.steady_s)
        sweeps = {cell: decide(s, cfg.recommend, power=cfg.stats.power, **decided)
                  for cell, s in summaries.items()}
        images, curves = write_plots(args.reports, summaries, compare, sweeps, cfg.stats.alpha)
        if why is None and base is None:
            why = "no baseline environment"
        changes = diff(base.env, now.env) if now is not None and base is not None else []
        # A what-if's timings compare the candidate with this environment, not the baseline.
        candidate = next((cell for cell, r in bench.items()
                          if r.env_candidate and "error" not in r.env_candidate), None)
        if candidate and now is not None:
            changes, why = diff(now.env, bench[candidate].env_candidate), None
        write_text(args.reports / "summary.md", summary(cfg.matrix.name, compare, changes, why,
                                                        [c.name for c in cfg.cells()],
                                                        cfg.gate.fail_on, summaries, images, env,
                                                        sweeps_section(sweeps, cfg.recommend,
                                                                       curves, **decided),
                                                        candidate and f"bench/{candidate}.md"))
        print(f"torchgate report: wrote {args.reports / 'summary.md'}, metrics.json, numbers.json "
              f"and {len(images) + len(curves)} picture(s) in {args.reports / PICTURES / PAGE}")


def write_plots(reports: Path, summaries: dict, compare: CompareRecord, sweeps: dict,
                alpha: float) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The pictures' data (plots/, committed) and the pictures (pictures/summary/, never
    committed), from each cell's judge.summary and sweeps (judge.sweeps.decide; their
    intervals at `alpha`). Returns (caption, path from the reports folder) of each picture
    drawn, and each swept cell's curve (cell -> path)."""
    for name, text in plot_data(summaries, compare.rows).items():
        write_text(reports / "plots" / name, text)
    drop_pictures(reports / "plots")        # where an older torchgate drew them
    folder = reports / PICTURES / PAGE
    drawn = {name: data for name, data in pictures(summaries, compare.rows).items()
             if data is not None}      # nothing to draw this run: no picture
    curves = {f"sweep-{cell}.png": (cell, data)
              for cell, data in sweep_pictures(sweeps, alpha=alpha).items()}
    replace_pictures(folder, {**drawn, **{name: data for name, (_, data) in curves.items()}})
    where = f"{PICTURES}/{PAGE}"
    return ([(CAPTIONS[name], f"{where}/{name}") for name in drawn],
            {cell: f"{where}/{name}" for name, (cell, _) in curves.items()})


if __name__ == "__main__":
    main()
