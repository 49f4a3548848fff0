"""Stage `compare`: every cell and metric of this run against the baseline.

    python -m stages.compare

Writes reports/compare.md (every verdict, FDR-adjusted over the whole run) and
reports/compare.json (the same rows, for the report stage). With gate.fail_on_regression=true
it exits 1 when anything REGRESSED or FAILED, so CI can gate on it.
"""
from __future__ import annotations

import sys

from stages.core import cli, config
from stages.core.baseline import load_run
from stages.core.errors import one_line_errors
from stages.core.records import write_record, write_text
from stages.core.rows import BAD, CompareRecord
from stages.judge.run import compare_run
from stages.render.markdown import counts, tally
from stages.render.verdicts import page


def main(argv: list[str] | None = None) -> None:
    args = cli.run_stage("compare", __doc__, argv)
    with one_line_errors("compare"):
        cfg = config.load(args.params)
        inputs = load_run(cfg.baseline.rev, [c.name for c in cfg.cells()], reports=args.reports)
        result = compare_run(cfg, inputs)
        write_record(args.reports / "compare.json", CompareRecord(
            result.baseline, result.has_baseline, result.alpha, result.tests, result.looks,
            result.power, tuple(result.notes), tuple(result.rows)))
        write_text(args.reports / "compare.md", page(result, f"compare: matrix "
                                                              f"{cfg.matrix.name}"))
        print(f"torchgate compare: {tally(r.verdict for r in result.rows)}")
        bad = sum(n for v, n in counts(r.verdict for r in result.rows).items() if v in BAD)
        if cfg.gate.fail_on_regression and bad:
            print(f"torchgate compare: gate failed: {bad} regressed or failed "
                  "(see reports/compare.md)", file=sys.stderr)
            raise SystemExit(1)


if __name__ == "__main__":
    main()
