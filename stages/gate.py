"""Stage `gate`: the run's pass or fail, for CI. It runs last, after `report`, so that a red
gate always leaves this run's <reports>/summary.md behind.

    python -m stages.gate

Reads <reports>/compare.json and exits 1 when it holds any verdict that `gate.fail_on` lists,
or, with NOTHING_COMPARABLE listed, when the run had a baseline but not one timing could be
tested against it. Each reason is one line on stderr.
"""
from __future__ import annotations

import sys

from stages.core import cli
from stages.core.errors import one_line_errors
from stages.core.records import load_record
from stages.core.records.rows import CompareRecord
from stages.judge.gate import gate_checked, gate_failures


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("gate", __doc__, argv)
    with one_line_errors("gate"):
        cfg = cli.load(args)
        compare = load_record(args.reports / "compare.json", CompareRecord)
        failures = gate_failures(compare, cfg.gate.fail_on)
        for reason in failures:
            print(f"torchgate gate: failed: {reason} (see {args.reports / 'summary.md'})",
                  file=sys.stderr)
        if failures:
            raise SystemExit(1)
        print(f"torchgate gate: passed: {gate_checked(compare, cfg.gate.fail_on)}")


if __name__ == "__main__":
    main()
