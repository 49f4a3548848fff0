"""Stage `numerics`: errors of one cell's workloads against a float64 CPU reference.

    python -m torchgate.numerics --device cpu --precision bf16

Per workload and mode, in a worker process: relative L2, max abs error, cosine similarity and
NaN/Inf count of every output (for training: the loss and parameters after N steps), the
same inputs run twice and once more in a fresh process (determinism), compiled against eager
by the dynamo rule, op coverage and graph breaks (measure.worker); judged against the
precision's tolerances (judge.tolerance) and the baseline (judge.numerics).
"""
from __future__ import annotations

import time

from torchgate.arms.plan import Plan, plan
from torchgate.core import cli
from torchgate.core.baseline import load_run
from torchgate.core.config import Cell, Config
from torchgate.core.errors import one_line_errors
from torchgate.core.records import out_of_git, write_record, write_text
from torchgate.core.records.parts import from_parts
from torchgate.core.records.schema import NumericsRecord
from torchgate.core.vocabulary import Status
from torchgate.judge.run import compare_run
from torchgate.judge.tolerance import numerics_record, own_tolerances
from torchgate.launch.backends import backend
from torchgate.launch.cells import ALONE, measure_numerics
from torchgate.launch.local import run_worker
from torchgate.render import numerics as page
from torchgate.render.progress import numerics_line, numerics_process_line


def run_cell(cfg: Config, cell: Cell, arms: Plan = ALONE, *, run=run_worker,
             log=lambda *line: None) -> NumericsRecord:
    started = time.perf_counter()
    measured = measure_numerics(cfg, cell, arms, run=run, log=log)
    return numerics_record(cfg, cell, measured, arms.rebuilt, time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    with one_line_errors("numerics"):
        cfg, cell, reports = cli.cell_stage("numerics", __doc__, argv)
        out = reports / "numerics"

        def say(line: str) -> None:
            print(f"torchgate numerics: {line}", flush=True)
        if cfg.launcher.parts:
            say(f"{cell.name}: joined from {len(cfg.launcher.parts)} jobs' parts "
                "(launcher.parts), not measured here")
            record = from_parts(cfg.launcher.parts, "numerics", cell.name, set(cfg.workloads))
        else:
            arms = plan(cfg, log=say)
            with backend(cfg, cell, arms.arms, log=say) as where:
                record = run_cell(cfg, cell, arms, run=where.run, log=lambda *line: print(
                    numerics_process_line(*line), flush=True))
        for name, modes in record.workloads.items():
            for mode, ev in modes.items():
                print(numerics_line(cell.name, name, mode, ev))
        if record.reason:
            print(f"torchgate numerics: {cell.name} skipped: {record.reason}")
        write_record(out / f"{cell.name}.json", record)
        result = compare_run(cfg, load_run(cfg.baseline.rev, [cell.name], ("numerics",),
                                           reports=reports,
                                           given={("numerics", cell.name): record}))
        write_text(out / f"{cell.name}.md",
                   page.page(record, result, own_tolerances(cfg, cell.name)))
        out_of_git(out, [f"{cell.name}.json", f"{cell.name}.md"],
                   record.status == Status.SKIPPED)
        print(f"torchgate numerics: wrote {out / cell.name}.json and .md")


if __name__ == "__main__":
    main()
