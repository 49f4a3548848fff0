"""Stage `migration@<name>`: is it worth moving? One declared pair of cells (config
`migration.pairs`), compared workload by workload: reports/<machine>/migration/<name>.md and
.json, and its picture in pictures/migration-<name>/ (never committed).

    python -m torchgate.migration --pair fp32_to_bf16

A side on this machine is this run's record; a side on another machine (`box-b/cpu-fp32`)
is that machine's record as committed at HEAD, with the environment committed beside it.
Sides measured apart carry each machine's run-to-run variance, from its committed history
(judge.migration). A swept workload is compared at each side's own recommended point.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from torchgate.arms import locks
from torchgate.core import cli, config, machine
from torchgate.core.baseline import git, load_baseline, load_current, load_history
from torchgate.core.config.settings import MigrationPair, Side
from torchgate.core.errors import UserError, one_line_errors
from torchgate.core.records import replace_pictures, write_record, write_text
from torchgate.core.records.schema import BenchRecord, EnvRecord, NumericsRecord
from torchgate.core.vocabulary import PICTURES, short
from torchgate.judge.migration import SideInput, migrate
from torchgate.judge.moderation import run_spreads
from torchgate.judge.run_to_run import unit_runs
from torchgate.judge.summary import summarize
from torchgate.judge.sweeps import decide
from torchgate.render.migration import PICTURE, figure, page


def pair_of(cfg: config.Config, name: str) -> MigrationPair:
    pairs = cfg.migration.pairs
    if name not in pairs:
        raise UserError(f"no migration pair {name!r}; declared: "
                        f"{', '.join(sorted(pairs)) or 'none'} (migration.pairs)")
    return pairs[name]


def _this_run(cfg: config.Config, side: Side, where: str) -> SideInput:
    cells = {c.name: c for c in cfg.cells()}
    if side.cell not in cells:
        raise UserError(f"{where} names the cell {side.cell!r}, which this run does not "
                        f"measure; this run's cells: {', '.join(cells)} (another machine's: "
                        "<machine>/<cell>)")
    reports = cfg.reports
    lock = locks.read(reports.name)
    return SideInput(
        side.cell, reports.name, side.cell, "this run",
        load_current(reports / "bench" / f"{side.cell}.json", BenchRecord),
        load_current(reports / "numerics" / f"{side.cell}.json", NumericsRecord),
        load_current(reports / "env" / "env.json", EnvRecord),
        cells[side.cell].device.price_per_hour,
        lock=(locks.path_of(reports.name).as_posix(), lock.pins.get("torch")) if lock else None)


def _committed(side: Side, where: str, head: str | None) -> tuple[SideInput, str | None]:
    """Another machine's side as committed at HEAD, and the commit that brought its record."""
    reports = machine.reports_of(side.machine)
    path = reports / "bench" / f"{side.cell}.json"
    bench = load_baseline(head, path, BenchRecord) if head else None
    if bench is None:
        machines = git.names_in(head, machine.REPORTS)
        cells = [n.removesuffix(".json") for n in git.names_in(head, reports / "bench")
                 if n.endswith(".json")]
        raise UserError(
            f"{where}: machine {side.machine!r} has no committed cell {side.cell!r} at HEAD; "
            + (f"its cells: {', '.join(cells)}" if cells else
               "committed machines: " + (", ".join(
                   m for m in machines if m != "README.md" and machine.check_name(m) is None)
                   or "none")
               + f" (commit {reports}/ of that machine first)"))
    brought = git.commits_touching(head, path, 1)
    price = (bench.device or {}).get("price_per_hour")
    lock = locks.read_at(head, side.machine)
    return SideInput(
        side.label(), side.machine, side.cell,
        f"committed at {short(brought[0]) if brought else short(head)}", bench,
        load_baseline(head, reports / "numerics" / f"{side.cell}.json", NumericsRecord),
        load_baseline(head, reports / "env" / "env.json", EnvRecord),
        price if isinstance(price, (int, float)) else None,
        lock=(locks.path_of(side.machine).as_posix(), lock.pins.get("torch")) if lock else None
    ), brought[0] if brought else None


def spreads(side: SideInput, head: str | None, runs: int, prior: float) -> dict:
    """(unit, mode, metric) -> the run-to-run variance of the side's machine, from its runs
    committed up to HEAD on the side's hardware and torch (judge.run_to_run.unit_runs)."""
    if side.bench is None:
        return {}
    history = load_history(head, [side.cell], runs, reports=machine.reports_of(side.machine))
    return run_spreads(unit_runs(history.get(side.cell, []), side.bench, side.env), prior)


def points(side: SideInput, cfg: config.Config) -> dict[tuple[str, str], str]:
    """(workload, mode) -> the unit its sweep recommends on this side, as the summary's
    (judge.sweeps.decide)."""
    if side.bench is None or side.bench.status != "OK":
        return {}
    summary = summarize(side.cell, side.bench, side.price_per_hour, cfg.compare.busy_share)
    return {(s.workload, s.mode): s.choice.chosen.unit
            for s in decide(summary, cfg.recommend, alpha=cfg.stats.alpha,
                            delta=cfg.stats.delta.steady_s, power=cfg.stats.power)
            if s.choice.chosen is not None}


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("migration", __doc__, argv,
                     ("--pair", dict(required=True, help="a name under migration.pairs")))
    with one_line_errors("migration"):
        cfg = cli.load(args)
        pair, here = pair_of(cfg, args.pair), cfg.reports.name
        head = git.resolve_rev("HEAD")
        sides, brought = [], []
        for side, key in ((pair.source, "from"), (pair.target, "to")):
            where = f"migration.pairs.{pair.name}.{key}"
            if side.machine in (None, here):
                sides.append(_this_run(cfg, side, where))
                brought.append("this run")
            else:
                found, commit = _committed(side, where, head)
                sides.append(found)
                brought.append(commit)
        if pair.source.on(here) == pair.target.on(here):
            raise UserError(f"migration.pairs.{pair.name} compares {sides[0].label} with "
                            "itself; name two cells")
        same_run = brought[0] == brought[1] and brought[0] is not None
        sides = [dataclasses.replace(
            s, points=points(s, cfg),
            spreads={} if same_run else spreads(s, head, cfg.stats.history_runs,
                                                cfg.stats.run_spread)) for s in sides]
        record = migrate(pair.name, *sides, same_run=same_run, modes=pair.modes,
                         alpha=cfg.stats.alpha, busy_share=cfg.compare.busy_share,
                         run_spread=cfg.stats.run_spread)
        folder = args.reports / PICTURES / f"migration-{pair.name}"
        drawn = figure(record)
        replace_pictures(folder, {PICTURE: drawn} if drawn else {})
        out = args.reports / "migration"
        write_record(out / f"{pair.name}.json", record)
        link = Path("..", PICTURES, folder.name, PICTURE).as_posix() if drawn else None
        write_text(out / f"{pair.name}.md", page(record, link))
        print(f"torchgate migration: wrote {out / pair.name}.md: {record.source.label} → "
              f"{record.target.label}, {len(record.workloads)} workload(s)")


if __name__ == "__main__":
    main()
