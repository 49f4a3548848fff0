"""Stage `gate`: the run's pass or fail, for CI. It runs last, after `report`, so that a red
gate always leaves this run's <reports>/summary.md behind.

    python -m torchgate.gate

Reads <reports>/compare.json and exits 1 when it holds any verdict that `gate.fail_on` lists,
or, with NOTHING_COMPARABLE listed, when the run had a baseline but not one timing could be
tested against it. Each reason is one line on stderr.

Under `dvc exp run` (DVC names the experiment in DVC_EXP_NAME) a failed gate says so and exits
0: DVC keeps no experiment whose stage failed, so a what-if that found a regression would be
the one left out of `dvc exp show`; there its `gate_failed` metric (metrics.json) says it.
"""
from __future__ import annotations

import os
import sys

from torchgate.core import cli
from torchgate.core.baseline import run_stamp
from torchgate.core.errors import UserError, one_line_errors
from torchgate.core.records import load_record
from torchgate.core.records.rows import CompareRecord
from torchgate.judge.gate import gate_checked, gate_failures

EXPERIMENT = "DVC_EXP_NAME"     # set by `dvc exp run` in its stages' environment


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("gate", __doc__, argv)
    with one_line_errors("gate"):
        cfg = cli.load(args)
        path = args.reports / "compare.json"
        compare = load_record(path, CompareRecord)
        if compare.inputs != run_stamp(cfg.baseline.rev, [c.name for c in cfg.cells()],
                                       args.reports):
            raise UserError(f"{path} is not this run's comparison: it was made from other "
                            "records, cells or baseline than this run's; run `dvc repro` (or "
                            "`python -m torchgate.compare`) before the gate")
        failures = gate_failures(compare, cfg.gate.fail_on)
        for reason in failures:
            print(f"torchgate gate: failed: {reason} (see {args.reports / 'summary.md'})",
                  file=sys.stderr)
        if not failures:
            print(f"torchgate gate: passed: {gate_checked(compare, cfg.gate.fail_on)}")
        elif os.environ.get(EXPERIMENT):
            print(f"torchgate gate: experiment {os.environ[EXPERIMENT]} kept with the gate "
                  "failed (gate_failed: 1 in `dvc exp show`): DVC keeps no experiment whose "
                  "stage failed", file=sys.stderr)
        else:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
