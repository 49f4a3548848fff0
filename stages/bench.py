"""Stage `bench`: measure one cell (device x precision) of the matrix.

    python -m torchgate.bench --device cpu --precision fp32

Every sample of every worker process goes to <reports>/bench/<cell>.json; <reports>/bench/<cell>.md
shows what was measured and how it differs from the baseline (the verdicts are compare's).
The arms measured (this run alone, or beside the baseline measured again, or beside a
candidate) are arms.plan's choice. With a baseline, timings an interim look leaves undecided
get more processes within `bench.adaptive_budget_s` (launch.cells, judge.adaptive). On a Ray
cluster, the first bench stage of a `dvc repro` measures every cell at once (launch.fleet).
"""
from __future__ import annotations

from torchgate.arms.plan import plan
from torchgate.core import cli
from torchgate.core.baseline import load_env_pair, load_run
from torchgate.core.errors import one_line_errors
from torchgate.core.records import out_of_git, write_record, write_text
from torchgate.core.records.inputs import with_record
from torchgate.core.records.parts import from_parts
from torchgate.core.records.schema import BenchRecord
from torchgate.core.vocabulary import Status, short
from torchgate.judge.adaptive import pending_units, undecided_counts
from torchgate.judge.environment import diff
from torchgate.judge.run import compare_run
from torchgate.judge.summary import summarize
from torchgate.launch.backends import connection, on
from torchgate.launch.cells import measure_bench
from torchgate.launch.fleet import measure_all, staging
from torchgate.launch.progress import Progress
from torchgate.measure.proc import sibling_runs
from torchgate.render import bench as page
from torchgate.render.progress import bench_line, others_measuring


def say(line: str) -> None:
    print(f"torchgate bench: {line}", flush=True)


def candidate_env(here: dict | None, candidate: dict | None) -> str:
    """In A/B mode, the page's section on how the candidate's environment differs from this
    one's (or why it was not captured)."""
    if not candidate:
        return ""
    if "error" in candidate:
        return page.ab_environments(None, candidate["error"])
    return page.ab_environments(diff(here or {}, candidate))


def baseline_of(cfg, cell, reports):
    """What a cell's record is judged against: its baseline and history, read once."""
    return load_run(cfg.baseline.rev, [cell.name], ("bench",), reports=reports, current=False,
                    history_runs=cfg.stats.history_runs)


def measure(cfg, cell, arms, where, inputs, progress: Progress | None = None):
    """One cell's record on `where` (a backend), adaptive rounds included: each interim look
    judges the record so far against `inputs` (baseline_of), whose committed record lends
    its counts to workloads counted with the same inputs."""
    def judged(record):
        return compare_run(cfg, with_record(inputs, "bench", cell.name, record))

    def looked(read):
        """An interim look that fails says so and asks for nothing: the measurements so far
        are never lost to the arithmetic that judges them."""
        def look(record):
            try:
                return read(judged(record))
            except (ArithmeticError, ValueError) as exc:
                say(f"{cell.name}: the interim look failed ({type(exc).__name__}: {exc}): "
                    "nothing more measured; the record keeps every process")
                return []
        return look
    committed = inputs.pairs.get(("bench", cell.name))
    return measure_bench(
        cfg, cell, arms, run=where.run, run_pair=where.run_pair, capture=where.capture_env,
        log=lambda *line: print(bench_line(*line), flush=True), say=say, progress=progress,
        pending=looked(lambda result: pending_units(result, cfg.bench.max_processes,
                                                     cfg.bench.adaptive_metrics)),
        undecided_counts=looked(undecided_counts),
        baseline=committed.base if committed is not None else None,
        baseline_at=short(inputs.commit) if inputs.commit else None)


def measured(cfg, cell, arms, inputs, reports):
    """This cell's record: measured now, alone, or with every cell of the matrix at once
    (a fleet run, launch.fleet), or taken from the fleet run an earlier stage started."""
    staged = staging(cfg)
    if staged is not None and (record := staged.take(cell)) is not None:
        say(f"{cell.name}: measured with the matrix's other cells by an earlier bench stage")
        return record
    with connection(cfg) as cluster:
        if staged is None:
            return measure(cfg, cell, arms, on(cluster, cfg, cell, arms.arms, log=say), inputs)
        cells = [cell] + [c for c in cfg.cells() if c.name != cell.name]
        say(f"a fleet run: {len(cells)} cells at once, each on nodes of its own")
        progress = Progress()       # one count and one ETA for the whole matrix
        found = measure_all(cells, lambda c: measure(
            cfg, c, arms, on(cluster, cfg, c, arms.arms, log=say),
            inputs if c.name == cell.name else baseline_of(cfg, c, reports), progress))
    for other in cells[1:]:
        if isinstance(found[other.name], BenchRecord):
            staged.leave(other, found[other.name])
    if isinstance(found[cell.name], BaseException):
        raise found[cell.name]
    return found[cell.name]


def main(argv: list[str] | None = None) -> None:
    """Plan the arms, measure, write the record, judge it once, write its page."""
    with one_line_errors("bench"):
        cfg, cell, reports = cli.cell_stage("bench", __doc__, argv)
        if others := sibling_runs():
            say(others_measuring(others))
        inputs = baseline_of(cfg, cell, reports)
        if cfg.launcher.parts:      # a split check's last job: the parts its jobs measured
            say(f"{cell.name}: joined from {len(cfg.launcher.parts)} jobs' parts "
                "(launcher.parts), not measured here")
            record = from_parts(cfg.launcher.parts, "bench", cell.name, set(cfg.workloads))
        else:
            arms = plan(cfg, log=say)
            say(arms.note)
            record = measured(cfg, cell, arms, inputs, reports)
        if record.instructions:
            say(f"host instructions {record.instructions}")
        out = reports / "bench"
        write_record(out / f"{cell.name}.json", record)
        here = load_env_pair(cfg.baseline.rev, reports)[0]
        summary = summarize(cell.name, record, cell.device.price_per_hour,
                            cfg.compare.busy_share)
        write_text(out / f"{cell.name}.md", page.page(
            summary, compare_run(cfg, with_record(inputs, "bench", cell.name, record)),
            candidate_env(here.env if here else None, record.env_candidate)))
        out_of_git(out, [f"{cell.name}.json", f"{cell.name}.md"],
                   record.status == Status.SKIPPED)
        print(f"torchgate bench: wrote {out / cell.name}.json and .md")


if __name__ == "__main__":
    main()
