"""What a unit's results are a function of, so that a run measures only what its change can
move. A pull request's check compares two arms; a workload whose configuration and module
files (the target's module and the project modules it imports, read as syntax trees: comments
and layout are no change) are the same in both, in one interpreter, cannot have been moved by
the change (`could_have_changed`), and host instructions, exact to the instruction for the same
inputs, are keyed by every input (`counts_key`): counted once, carried from a committed record
that counted them (`recorded_counts`), never across a changed input."""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from pathlib import Path

from torchgate.core.config import Cell, Config
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.config.targets import module_closure
from torchgate.core.records.cost import process_seconds
from torchgate.core.records.job import Arm
from torchgate.core.records.schema import BenchRecord, WorkloadRun
from torchgate.core.typed import to_data
from torchgate.core.vocabulary import Status
from torchgate.measure import callgrind

# The harness a counts worker runs (both arms run this one's): its files are inputs of a count.
HARNESS = ("stages/measure", "stages/core")


def spec_for(arm: Arm, cfg: Config, name: str) -> WorkloadSpec | None:
    """The workload as the arm runs it: its revision's config; None when it has none."""
    return cfg.workloads[name] if arm.workloads is None else arm.workloads.get(name)


def could_have_changed(cfg: Config, arms: tuple[Arm, ...]) -> set[str] | None:
    """The workloads whose timings the arms' difference can have moved: those whose
    configuration or module files differ between the arms' revisions; None (every one) where
    the arms' interpreters differ (an upgrade) or one arm is measured."""
    if len(arms) < 2 or len({arm.python for arm in arms}) > 1:
        return None
    base, now = arms[0], arms[-1]
    return {name for name in cfg.workloads
            if (a := spec_for(base, cfg, name)) is None or (b := spec_for(now, cfg, name)) is None
            or to_data(a) != to_data(b) or _source(base, a) != _source(now, b)}


def same_inputs(cfg: Config, arms: tuple[Arm, ...]) -> set[str]:
    """The workloads the arms' difference cannot have moved (`could_have_changed`'s others)."""
    changed = could_have_changed(cfg, arms)
    return set() if changed is None else set(cfg.workloads) - changed


def counts_key(cfg: Config, cell: Cell, arm: Arm, name: str, modes: list[str]) -> str | None:
    """Everything a counts process's result is a function of, hashed: the workload's
    configuration and module files in the arm's tree, the harness that runs it, the
    environment (this run's env.json, a rebuilt arm's venv), the cell's device and precision,
    the modes, the counter's settings and valgrind's version. Counts of equal keys are equal
    (to the instruction, measured), so they are counted once and carried, never across a
    changed input. None: not knowable (another interpreter named by path, no env.json)."""
    spec = spec_for(arm, cfg, name)
    env = _read_bytes(cfg.reports / "env" / "env.json")
    if spec is None or env is None or (arm.python is not None and arm.venv is None):
        return None
    b = cfg.bench
    described = {"workload": to_data(dataclasses.replace(spec, timeout_s=None)),
                 "device": to_data(cell.device), "precision": to_data(cell.precision),
                 "modes": sorted(modes), "seed": b.seed, "calls": b.instruction_calls,
                 "compile": b.instructions_compile, "valgrind": callgrind.version(),
                 "venv": to_data(arm.venv) if arm.venv is not None else None}
    digest = hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode())
    digest.update(env)
    for path, text in _source(arm, spec) + _harness():
        digest.update(f"\0{path}\0{len(text)}\0".encode())
        digest.update(text)
    return digest.hexdigest()[:16]


def recorded_counts(record: BenchRecord | None) -> dict[str, WorkloadRun]:
    """A committed record's counted workloads by their counts' key, in either arm."""
    if record is None:
        return {}
    runs = [*record.workloads.values(), *(record.ab.baseline.workloads.values()
                                          if record.ab is not None else ())]
    return {run.counts_key: run for run in runs if run.counts_key and run.counts
            and all(p.status == Status.OK for p in run.counts)}


def controls_of(unchanged: set[str], baseline: BenchRecord | None,
                most: int | None) -> set[str]:
    """The unchanged workloads measured as the check's A/A control: all (most None), else the
    `most` cheapest by the committed record's processes (by name where it has none)."""
    if most is None:
        return set(unchanged)

    def cost(name: str) -> tuple[float, str]:
        run = baseline.workloads.get(name) if baseline is not None else None
        return (process_seconds(run.processes, baseline.modes) or 0.0) if run else 0.0, name
    return set(sorted(unchanged, key=cost)[:most])


def unchanged_plan(cfg: Config, arms: tuple[Arm, ...], baseline: BenchRecord | None
                   ) -> tuple[set[str], set[str]]:
    """(the workloads with the same inputs in both arms, those of them not measured at all):
    with bench.unchanged_processes set, the rest of the unchanged are the A/A control."""
    if cfg.bench.unchanged_processes is None:
        return set(), set()
    unchanged = same_inputs(cfg, arms)
    return unchanged, unchanged - controls_of(unchanged, baseline, cfg.bench.unchanged_controls)


def shard_of(cfg: Config, arms: tuple[Arm, ...], baseline: BenchRecord | None) -> set[str]:
    """The workloads this job measures (launcher.shard i/n): the i-th of n parts, each
    workload's cost its rounds times the baseline record's seconds a process (1 where it has
    none), the costliest first into the part with least so far. Every job of a check plans
    alike from the same inputs (tree, configuration, committed record), so the parts are
    disjoint and cover every workload, and the A/A control is one for the whole check."""
    part = cfg.launcher.part
    if part is None:
        return set(cfg.workloads)
    unchanged, carried = unchanged_plan(cfg, arms, baseline)

    def cost(name: str) -> float:
        if name in carried:
            return 0.0
        run = baseline.workloads.get(name) if baseline is not None else None
        each = process_seconds(run.processes, baseline.modes) if run is not None else None
        rounds = cfg.bench.unchanged_processes if name in unchanged else cfg.bench.processes
        return (each or 1.0) * rounds
    parts: list[tuple[float, int, list[str]]] = [(0.0, i, []) for i in range(part[1])]
    for name in sorted(cfg.workloads, key=lambda name: (-cost(name), name)):
        load, i, names = min(parts)
        parts[i] = (load + cost(name), i, names + [name])
    return set(parts[part[0] - 1][2])


def plan_lines(cfg: Config, unchanged: set[str], carried: set[str], mine: set[str]
               ) -> list[str]:
    """What a cell measures less than in full, and this job's part of it, as log lines."""
    lines = [f"this job's part ({cfg.launcher.shard}, launcher.shard): "
             f"{', '.join(sorted(mine)) or 'none'}"] if cfg.launcher.shard else []
    if controls := (unchanged - carried) & mine:
        lines.append("the same inputs in both arms, measured as the check's A/A control "
                     f"({cfg.bench.unchanged_processes} rounds): {', '.join(sorted(controls))}")
    if carried & mine:
        lines.append(f"the same inputs in both arms, not measured: "
                     f"{', '.join(sorted(carried & mine))}")
    return lines


def unchanged_note(name: str, unchanged: set[str], carried: set[str],
                   rounds: int | None) -> str | None:
    """Why a workload was measured less than the others: its inputs are the same in both arms
    (configuration, module files, interpreter), so the change cannot have moved it."""
    if name not in unchanged:
        return None
    same = "the same inputs in both arms (configuration, module files, interpreter)"
    if name in carried:
        return (f"{same}: not measured, the check's A/A control is "
                f"{', '.join(sorted(unchanged - carried))} (bench.unchanged_controls)")
    return (f"{same}: the check's A/A control, {rounds} rounds, one "
            "cold compile, no adaptive rounds (bench.unchanged_processes)")


def _source(arm: Arm, spec: WorkloadSpec) -> list[tuple[str, bytes]]:
    """A workload's module files as the interpreter runs them: their syntax trees, so that a
    change of comments or layout alone is no change of the workload."""
    root = Path(arm.code) if arm.code else Path(".")
    return [(path, _as_run((root / path).read_bytes()))
            for path in module_closure(spec.target, root)]


def _as_run(text: bytes) -> bytes:
    try:
        return ast.dump(ast.parse(text)).encode()
    except (SyntaxError, ValueError):
        return text


def _harness() -> list[tuple[str, bytes]]:
    return [(p.as_posix(), p.read_bytes()) for folder in HARNESS
            for p in sorted(Path(folder).rglob("*.py"))]


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
