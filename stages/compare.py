"""Stage `compare`: every cell and metric of this run against the baseline.

    python -m stages.compare

Writes reports/compare.md (every verdict, FDR-adjusted over the whole run) and
reports/compare.json (the same rows, for the report and gate stages). It exits 0 whatever the
verdicts: the `gate` stage fails the run, after `report` has written this run's summary.
"""
from __future__ import annotations

from stages.core import cli, config
from stages.core.baseline import load_run
from stages.core.errors import one_line_errors
from stages.core.records import write_record, write_text
from stages.core.records.rows import CompareRecord
from stages.judge.run import compare_run
from stages.judge.verdicts import findings
from stages.render.markdown import tally
from stages.render.verdicts import page


def main(argv: list[str] | None = None) -> None:
    args = cli.run_stage("compare", __doc__, argv)
    with one_line_errors("compare"):
        cfg = config.load(args.params)
        inputs = load_run(cfg.baseline.rev, [c.name for c in cfg.cells()], reports=args.reports)
        result = compare_run(cfg, inputs)
        write_record(args.reports / "compare.json", CompareRecord(
            result.baseline, result.has_baseline, result.alpha, result.tests, result.looks,
            result.power, tuple(result.notes), tuple(result.rows), result.unchanged))
        write_text(args.reports / "compare.md", page(result, f"compare: matrix "
                                                              f"{cfg.matrix.name}"))
        print(f"torchgate compare: {tally(r.verdict for r in findings(result.rows))}")


if __name__ == "__main__":
    main()
