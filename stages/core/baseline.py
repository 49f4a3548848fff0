"""This run's records and the baseline's: the one place that reads reports for a comparison.

The baseline is `reports/` as committed at `baseline.rev` (read from git, relative to the
project folder, which may be a subdirectory of the repository), or, in A/B mode, the other
arm that this run's record carries. An unreadable baseline is a note, not a failure: the
comparison goes on as if it were absent and says why.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.core import git
from stages.core.errors import UserError
from stages.core.records import load_record, parse_record
from stages.core.schema import BenchRecord, EnvRecord, NumericsRecord

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


def ab_baseline(record: Any) -> Any:
    """In A/B mode a record carries its own baseline: the other interpreter's arm, measured
    beside this one on the same machine. As a record of the same kind, or None."""
    if record is None or record.ab is None:
        return None
    arm = record.ab.baseline
    if isinstance(record, BenchRecord):
        return dataclasses.replace(record, workloads=arm.workloads, ab=None)
    return dataclasses.replace(record, workloads=arm.workloads, coverage=arm.coverage, ab=None)


@dataclass
class Pair:
    now: Any
    base: Any
    ab: bool = False          # base is the other arm of this run (A/B mode)
    paired: bool = False      # ... measured in lock-step pairs


@dataclass
class RunInputs:
    """Everything a comparison reads: per (stage, cell) this run's record and the baseline's."""
    rev: str
    commit: str | None
    pairs: dict[tuple[str, str], Pair] = field(default_factory=dict)
    env_now: EnvRecord | None = None
    env_base: EnvRecord | None = None
    notes: list[str] = field(default_factory=list)


def _baseline_or_note(commit, path: Path, cls, notes: list[str], root: Path) -> Any:
    try:
        return load_baseline(commit, path, cls, root)
    except UserError as exc:
        notes.append(f"Baseline unreadable, compared as if absent: {exc}")
        return None


def load_run(rev: str, cells: list[str], stages: tuple[str, ...] = ("bench", "numerics"),
             given: dict | None = None, reports: Path = REPORTS, root: Path = Path("."),
             current: bool = True) -> RunInputs:
    """Read the named cells of the named stages; `given` maps (stage, cell) to a record not
    yet on disk (a stage renders its own diff before writing); current=False reads only the
    baseline (a stage about to measure: the file on disk is the previous run's)."""
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
            if now is None or now.ab is None:
                base = _baseline_or_note(commit, path, KINDS[stage], found.notes, root)
            found.pairs[stage, cell] = pair(now, base)
    return found


def pair(now: Any, base: Any) -> Pair:
    """This run's record and its baseline: the committed one, or the other arm it carries."""
    if now is not None and now.ab is not None:
        return Pair(now, ab_baseline(now), True, getattr(now.ab, "interleaved", False))
    return Pair(now, base)


def with_record(inputs: RunInputs, stage: str, cell: str, record: Any) -> RunInputs:
    """The same inputs with this run's record of (stage, cell) replaced: adaptive sampling
    looks again without reading the baseline again."""
    old = inputs.pairs.get((stage, cell))
    return dataclasses.replace(inputs, pairs={**inputs.pairs, (stage, cell): pair(
        record, old.base if old is not None and not old.ab else None)})


def load_env_pair(rev: str, reports: Path = REPORTS,
                  root: Path = Path(".")) -> tuple[EnvRecord | None, EnvRecord | None, str | None]:
    """(this run's environment, the baseline's, why the baseline's could not be read)."""
    path = reports / "env" / "env.json"
    now = load_current(path, EnvRecord)
    try:
        return now, load_baseline(git.resolve_rev(rev, root), path, EnvRecord, root), None
    except UserError as exc:
        return now, None, str(exc)
