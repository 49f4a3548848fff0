"""This run's records and the baseline's: the one place that reads reports for a comparison.

The baseline is `reports/` as committed at `baseline.rev` (read from git, relative to the
project folder, which may be a subdirectory of the repository), or, in A/B mode, the other
arm that this run's record carries. An unreadable baseline is a note, not a failure: the
comparison goes on as if it were absent and says why.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from stages.core.baseline import git
from stages.core.errors import UserError
from stages.core.records import load_record, parse_record
from stages.core.records.inputs import RunInputs, needs_recorded, pair
from stages.core.records.schema import BenchRecord, EnvRecord, NumericsRecord

KINDS = {"bench": BenchRecord, "numerics": NumericsRecord}
REPORTS = Path("reports")


def load_baseline(commit: str | None, path: Path, cls: type, root: Path = Path(".")) -> Any:
    """The record committed at `path` (relative to the project folder `root`), None if
    absent there; UserError if unreadable."""
    text = git.read_file(commit, Path(path).as_posix(), root)
    if text is None:
        return None
    return parse_record(text, cls, f"baseline {Path(path).as_posix()} at {commit[:10]}")


def load_current(path: Path, cls: type) -> Any:
    return load_record(path, cls) if Path(path).exists() else None


def _baseline_or_note(commit, path: Path, cls, notes: list[str], root: Path) -> Any:
    try:
        return load_baseline(commit, path, cls, root)
    except UserError as exc:
        notes.append(f"Baseline unreadable, compared as if absent: {exc}")
        return None


def load_run(rev: str, cells: list[str], stages: tuple[str, ...] = ("bench", "numerics"),
             given: dict | None = None, reports: Path = REPORTS, root: Path = Path("."),
             current: bool = True, history_runs: int = 0) -> RunInputs:
    """Read the named cells of the named stages; `given` maps (stage, cell) to a record not
    yet on disk (a stage renders its own diff before writing); current=False reads only the
    baseline (a stage about to measure: the file on disk is the previous run's);
    history_runs: how many committed bench runs per cell to read for the run-to-run
    variance."""
    given = given or {}
    commit = git.resolve_rev(rev, root)
    found = RunInputs(rev, commit)
    env_path = reports / "env" / "env.json"
    found.env_now = load_current(env_path, EnvRecord)
    found.env_base = _baseline_or_note(commit, env_path, EnvRecord, found.notes, root)
    for stage in stages:
        for cell in cells:
            path = reports / stage / f"{cell}.json"
            now = given.get((stage, cell)) or (load_current(path, KINDS[stage]) if current
                                               else None)
            base = None
            if needs_recorded(now):
                base = _baseline_or_note(commit, path, KINDS[stage], found.notes, root)
            found.pairs[stage, cell] = pair(now, base)
    if "bench" in stages and any(not p.ab for (s, _), p in found.pairs.items() if s == "bench"):
        found.history = load_history(commit, cells, history_runs, root, reports)
    return found


def load_history(commit: str | None, cells: list[str], runs: int, root: Path = Path("."),
                 reports: Path = REPORTS) -> dict[str, list[tuple[BenchRecord, EnvRecord]]]:
    """Per cell, the bench records committed up to `commit` (the baseline first) with the
    environment committed beside each: the baseline history the run-to-run variance is
    estimated from. Unreadable or older runs are skipped: history is evidence, not input."""
    found: dict[str, list[tuple[BenchRecord, EnvRecord]]] = {}
    env_path = reports / "env" / "env.json"
    for cell in cells:
        path = reports / "bench" / f"{cell}.json"
        for past in git.commits_touching(commit, path.as_posix(), runs, root):
            try:
                bench = load_baseline(past, path, BenchRecord, root)
                env = load_baseline(past, env_path, EnvRecord, root)
            except UserError:
                continue
            if bench is not None and env is not None:
                found.setdefault(cell, []).append((bench, env))
    return found


def load_timeline(commit: str | None, cells: list[str], runs: int, root: Path = Path("."),
                  reports: Path = REPORTS) -> dict[str, list[tuple]]:
    """Per cell, (commit, date, bench record, environment or None) of its newest `runs` runs
    up to `commit`, oldest first. The last is this run, the workspace's record (commit and date
    None), whether it is committed at `commit` yet or not: once committed it is the same run,
    not a new one, so that committing it changes nothing here (a page drawn from this would
    otherwise change after every commit and leave the committed tree dirty)."""
    found: dict[str, list[tuple]] = {}
    envs: dict[str, EnvRecord | None] = {}
    env_path = reports / "env" / "env.json"

    def env_at(past: str) -> EnvRecord | None:
        if past not in envs:
            try:
                envs[past] = load_baseline(past, env_path, EnvRecord, root)
            except UserError:
                envs[past] = None
        return envs[past]

    for cell in cells:
        path = reports / "bench" / f"{cell}.json"
        committed = git.log_touching(commit, path.as_posix(), runs, root)   # newest first
        this = None
        if path.exists():
            try:
                this = (None, None, load_record(path, BenchRecord),
                        load_current(env_path, EnvRecord))
            except UserError:
                this = None     # history is evidence, not input
            if committed and path.read_text(encoding="utf-8") == git.read_file(
                    commit, path.as_posix(), root):
                committed = committed[1:]       # this run, committed already
            committed = committed[:max(runs - 1, 0)]
        for past, date in reversed(committed):
            try:
                bench = load_baseline(past, path, BenchRecord, root)
            except UserError:
                continue   # history is evidence, not input
            if bench is not None:
                found.setdefault(cell, []).append((past, date, bench, env_at(past)))
        if this is not None:
            found.setdefault(cell, []).append(this)
    return found


def load_env_pair(rev: str, reports: Path = REPORTS,
                  root: Path = Path(".")) -> tuple[EnvRecord | None, EnvRecord | None, str | None]:
    """(this run's environment, the baseline's, why the baseline's could not be read)."""
    path = reports / "env" / "env.json"
    now = load_current(path, EnvRecord)
    try:
        return now, load_baseline(git.resolve_rev(rev, root), path, EnvRecord, root), None
    except UserError as exc:
        return now, None, str(exc)
