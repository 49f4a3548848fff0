"""Stage `compare`: every cell and metric of this run against the baseline.

    python -m stages.compare

Writes reports/compare.md (every verdict, FDR-adjusted over the whole run) and
reports/compare.json (the same rows, for the report stage). With gate.fail_on_regression=true
it exits 1 when anything REGRESSED or FAILED, so CI can gate on it.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from stages.judge import comparison
from stages.core import config
from stages.render import markdown as render
from stages.core.errors import one_line_errors
from stages.core.records import write_record, write_text

KIND = "compare"


def row_record(row: comparison.Row, alpha: float) -> dict:
    body = dataclasses.asdict(row)
    body.pop("shift")
    if row.shift is not None:
        low, high = row.shift.interval(alpha)
        body.update(ratio=row.shift.ratio, ci_low=low, ci_high=high, p=row.shift.p_value,
                    n_base=row.shift.n_base, n_now=row.shift.n_now, spread=row.shift.spread,
                    test="paired t" if row.shift.paired else "Welch t")
    return body


def run_arguments(kind: str, doc: str, argv: list[str] | None) -> argparse.Namespace:
    """The command line of a stage over the whole run (compare, report)."""
    parser = argparse.ArgumentParser(prog=f"python -m stages.{kind}", description=doc)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--reports", type=Path, default=comparison.REPORTS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = run_arguments(KIND, __doc__, argv)
    with one_line_errors("compare"):
        cfg = config.load(args.params)
        cells = [c.name for c in cfg.cells()]
        result = comparison.compare_cells(cfg, cells, root=args.reports)
        write_record(args.reports / "compare.json", KIND, {
            "baseline": result.baseline, "has_baseline": result.has_baseline,
            "alpha": result.alpha, "tests": result.tests, "notes": result.notes,
            "rows": [row_record(r, result.alpha) for r in result.rows]})
        text = render.cell_report(result, "compare", f"matrix {cfg.matrix_name}")
        write_text(args.reports / "compare.md", text)
        tally = render.counts(r.verdict for r in result.rows)
        print("torchgate compare: " + (", ".join(f"{n} {v}" for v, n in tally.items())
                                       or "nothing compared"))
        bad = sum(tally.get(v, 0) for v in render.BAD)
        if cfg.fail_on_regression and bad:
            print(f"torchgate compare: gate failed: {bad} regressed or failed "
                  "(see reports/compare.md)", file=sys.stderr)
            raise SystemExit(1)


if __name__ == "__main__":
    main()
