"""Stage `report`: reports/summary.md, the page a reviewer reads first (with what the gate stage
will decide), and reports/metrics.json, a small flat file for `dvc metrics diff`.

    python -m stages.report
"""
from __future__ import annotations

from stages.core import cli, config
from stages.core.baseline import load_current, load_env_pair
from stages.core.errors import one_line_errors
from stages.core.records import dumps, load_record, write_text
from stages.core.schema import BenchRecord, CompareRecord, NumericsRecord
from stages.judge.environment import diff
from stages.render.metrics import metrics
from stages.render.summary import summary


def main(argv: list[str] | None = None) -> None:
    args = cli.run_stage("report", __doc__, argv)
    with one_line_errors("report"):
        cfg = config.load(args.params)
        compare = load_record(args.reports / "compare.json", CompareRecord)
        bench, numerics = {}, {}
        for cell in cfg.cells():
            found = load_current(args.reports / "bench" / f"{cell.name}.json", BenchRecord)
            if found is not None:
                bench[cell.name] = (found, cell.device.price_per_hour)
            found = load_current(args.reports / "numerics" / f"{cell.name}.json", NumericsRecord)
            if found is not None:
                numerics[cell.name] = found
        write_text(args.reports / "metrics.json", dumps(metrics(bench, numerics, compare)))
        now, base, why = load_env_pair(cfg.baseline.rev, args.reports)
        if why is None and base is None:
            why = "no baseline environment"
        changes = diff(base.env, now.env) if now is not None and base is not None else []
        write_text(args.reports / "summary.md", summary(cfg.matrix.name, compare, changes, why,
                                                        [c.name for c in cfg.cells()],
                                                        cfg.gate.fail_on))
        print(f"torchgate report: wrote {args.reports / 'summary.md'} and metrics.json")


if __name__ == "__main__":
    main()
