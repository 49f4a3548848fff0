"""This run's records and the baseline's: the one place that reads reports for a comparison.

The baseline is this machine's `reports/<machine>/` as committed at `baseline.rev` (read from
git, relative to the project folder, which may be a subdirectory of the repository), or, in A/B mode, the other
arm that this run's record carries. An unreadable baseline environment is a note: the
comparison goes on without it and says why. An unreadable baseline record of a cell is
carried as that cell's reason (RunInputs.unusable): a baseline present but unusable, which
the gate fails on, never a first run.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from torchgate.core import machine
from torchgate.core.baseline import git
from torchgate.core.errors import UserError
from torchgate.core.records import load_record, parse_record
from torchgate.core.records.inputs import RunInputs, needs_recorded, own_arm, pair
from torchgate.core.records.schema import BenchRecord, EnvRecord, NumericsRecord
from torchgate.core.vocabulary import short

KINDS = {"bench": BenchRecord, "numerics": NumericsRecord}


def run_stamp(rev: str | None, cells: list[str], reports: Path) -> str:
    """What a comparison of this run is a function of: the baseline as named, the cells, and
    the bytes of each cell's bench and numerics record in `reports` (absent ones too), as a
    sha256. The compare stage keeps it; the gate recomputes it and refuses a compare.json
    made from anything else (a stage run by hand since, a selection DVC did not see move)."""
    digest = hashlib.sha256(f"{rev}\n".encode())
    for stage in KINDS:
        for cell in cells:
            path = reports / stage / f"{cell}.json"
            digest.update(f"{stage}/{cell}\n".encode())
            digest.update(path.read_bytes() if path.is_file() else b"\0absent")
    return digest.hexdigest()


def load_baseline(commit: str | None, path: Path, cls: type, root: Path = Path(".")) -> Any:
    """The record committed at `path` (relative to the project folder `root`), or where it lay
    before reports were kept per machine (core.machine.legacy); None if absent there;
    UserError if unreadable."""
    text = git.read_file(commit, Path(path).as_posix(), root)
    if text is None and machine.legacy(path) is not None:
        path = machine.legacy(path)
        text = git.read_file(commit, path.as_posix(), root)
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


def load_run(rev: str | None, cells: list[str], stages: tuple[str, ...] = ("bench", "numerics"),
             given: dict | None = None, *, reports: Path, root: Path = Path("."),
             current: bool = True, history_runs: int = 0, now_rev: str | None = None
             ) -> RunInputs:
    """Read the named cells of the named stages; `given` maps (stage, cell) to a record not
    yet on disk (a stage renders its own diff before writing); current=False reads only the
    baseline (a stage about to measure: the file on disk is the previous run's);
    history_runs: how many committed bench runs per cell to read for the run-to-run
    variance; rev None: no baseline (compared_commit); now_rev: this run as committed there,
    not the workspace's (two committed runs compared)."""
    given = given or {}
    commit = git.resolve_rev(rev, root) if rev is not None else None
    now_commit = git.resolve_rev(now_rev, root, "the run to compare") if now_rev else None

    def now_record(path: Path, cls: type) -> Any:
        return (own_arm(load_baseline(now_commit, path, cls, root)) if now_rev else
                load_current(path, cls))
    found = RunInputs(rev, commit)
    env_path = reports / "env" / "env.json"
    found.env_now = now_record(env_path, EnvRecord)
    found.env_base = _baseline_or_note(commit, env_path, EnvRecord, found.notes, root)
    found.base_cells = tuple(n.removesuffix(".json") for n in git.names_in(
        commit, reports / "bench", root) if n.endswith(".json"))
    for stage in stages:
        for cell in cells:
            path = reports / stage / f"{cell}.json"
            now = given.get((stage, cell)) or (now_record(path, KINDS[stage]) if current
                                               else None)
            base = None
            if needs_recorded(now):
                try:
                    base = load_baseline(commit, path, KINDS[stage], root)
                except UserError as exc:       # present but unreadable: not a first run
                    found.unusable[stage, cell] = f"unreadable: {exc}"
            found.pairs[stage, cell] = pair(now, base)
    if "bench" in stages and any(not p.ab for (s, _), p in found.pairs.items() if s == "bench"):
        found.history = load_history(commit, cells, history_runs, root, reports=reports,
                                     notes=found.notes)
    return found


def _with_legacy(path: Path) -> list[Path]:
    """A report's path, and where it lay before reports were kept per machine."""
    return [path, *filter(None, [machine.legacy(path)])]


def shallow_note(notes: list[str] | None, commit: str | None, runs: int, root: Path) -> None:
    """A shallow clone holds the newest commits only: the history shrinks without a word."""
    if notes is not None and commit is not None and runs > 0 and git.is_shallow(root):
        notes.append("History: this clone is shallow, so the runs committed before its oldest "
                     f"commit are missing; {git.UNSHALLOW}")


def skipped_run(notes: list[str] | None, past: str, path: Path, exc: Exception) -> None:
    """One line for a committed run the history leaves out: which, and why."""
    if notes is not None:
        why = exc if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        first = (str(why).strip().splitlines() or [""])[0][:300]
        notes.append(f"History: the run committed at {short(past)} is skipped, "
                     f"{Path(path).as_posix()} is unreadable there ({first})")


def _committed_text(commit: str | None, path: Path, root: Path) -> str | None:
    """The file as committed, None where it is absent or not UTF-8 (history is evidence)."""
    try:
        return git.read_file(commit, path.as_posix(), root)
    except UserError:
        return None


def load_history(commit: str | None, cells: list[str], runs: int, root: Path = Path("."), *,
                 reports: Path, notes: list[str] | None = None
                 ) -> dict[str, list[tuple[BenchRecord, EnvRecord]]]:
    """Per cell, the bench records committed up to `commit` (the baseline first) with the
    environment committed beside each: the baseline history the run-to-run variance is
    estimated from. Unreadable runs are skipped, whatever fails in reading one (a malformed
    record of an old schema), each with a line in `notes`: history is evidence, not input."""
    found: dict[str, list[tuple[BenchRecord, EnvRecord]]] = {}
    env_path = reports / "env" / "env.json"
    shallow_note(notes, commit, runs, root)
    for cell in cells:
        path = reports / "bench" / f"{cell}.json"
        for past in git.commits_touching(commit, _with_legacy(path), runs, root):
            try:
                bench = load_baseline(past, path, BenchRecord, root)
                env = load_baseline(past, env_path, EnvRecord, root)
            except Exception as exc:   # noqa: BLE001  one bad old record must not stop a run
                skipped_run(notes, past, path, exc)
                continue
            if bench is not None and env is not None:
                found.setdefault(cell, []).append((bench, env))
    return found


def load_timeline(commit: str | None, cells: list[str], runs: int, root: Path = Path("."), *,
                  reports: Path, notes: list[str] | None = None
                  ) -> dict[str, list[tuple]]:
    """Per cell, (commit, date, bench record, environment or None) of its newest `runs` runs
    up to `commit`, oldest first. The last is this run, the workspace's record (commit and date
    None), whether it is committed at `commit` yet or not: once committed it is the same run,
    not a new one, so that committing it changes nothing here (a page drawn from this would
    otherwise change after every commit and leave the committed tree dirty). A run that
    cannot be read, whatever fails, is skipped with a line in `notes`."""
    found: dict[str, list[tuple]] = {}
    envs: dict[str, EnvRecord | None] = {}
    env_path = reports / "env" / "env.json"
    shallow_note(notes, commit, runs, root)

    def env_at(past: str) -> EnvRecord | None:
        if past not in envs:
            try:
                envs[past] = load_baseline(past, env_path, EnvRecord, root)
            except Exception:   # noqa: BLE001  a run without its environment is still a run
                envs[past] = None
        return envs[past]

    for cell in cells:
        path = reports / "bench" / f"{cell}.json"
        committed = git.log_touching(commit, _with_legacy(path), runs, root)   # newest first
        this = None
        if path.exists():
            try:
                this = (None, None, load_record(path, BenchRecord),
                        load_current(env_path, EnvRecord))
            except UserError:
                this = None     # history is evidence, not input
            if this is not None and committed and path.read_text(encoding="utf-8") == \
                    _committed_text(commit, path, root):
                committed = committed[1:]       # this run, committed already
            committed = committed[:max(runs - 1, 0)]
        for past, date in reversed(committed):
            try:
                bench = load_baseline(past, path, BenchRecord, root)
            except Exception as exc:   # noqa: BLE001  history is evidence, not input
                skipped_run(notes, past, path, exc)
                continue
            if bench is not None:
                found.setdefault(cell, []).append((past, date, bench, env_at(past)))
        if this is not None:
            found.setdefault(cell, []).append(this)
    return found


def load_env_pair(rev: str | None, reports: Path,
                  root: Path = Path(".")) -> tuple[EnvRecord | None, EnvRecord | None, str | None]:
    """(this run's environment, the baseline's, why the baseline's could not be read); rev
    None: no baseline (compared_commit)."""
    path = reports / "env" / "env.json"
    now = load_current(path, EnvRecord)
    try:
        commit = git.resolve_rev(rev, root) if rev is not None else None
        return now, load_baseline(commit, path, EnvRecord, root), None
    except UserError as exc:
        return now, None, str(exc)


def compared_commit(rev: str, cells: list[str], *, reports: Path,
                    root: Path = Path(".")) -> str | None:
    """The commit whose reports this run was compared with, for a stage that reads the run
    after it was measured (report): `rev`'s, unless this run is committed there already (the
    stage runs again after the commit: its pictures missing in a fresh clone, a setting of
    its own changed); then the commit before the one that brought this run, where `rev` stood
    when the run was compared. None: no baseline. The first cell on disk decides."""
    commit = git.resolve_rev(rev, root)
    for cell in cells:
        path = reports / "bench" / f"{cell}.json"
        if not path.exists():
            continue
        if git.read_file(commit, path.as_posix(), root) != path.read_text(encoding="utf-8"):
            return commit
        brought = git.log_touching(commit, path.as_posix(), 1, root)
        return git.parent(brought[0][0], root) if brought else commit
    return commit
