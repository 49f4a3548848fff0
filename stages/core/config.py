"""The composed configuration (params.yaml) as typed, frozen sections.

`dvc repro` does not run Hydra, so stages read the committed params.yaml. Every section is a
dataclass checked by `typed`: an unknown key, a wrong type (the string "no" for a boolean, a
string for a list) or a bad value is one line that names the key and what to put there.
Imports nothing beyond the standard library at load time: the worker of another interpreter
reads the specs below with torch alone.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.core.errors import UserError
from stages.core.launch import Launcher, Placement
from stages.core.rows import FAILED, REGRESSED, VERDICTS
from stages.core.typed import from_data

MODES = ("eager", "compiled", "reduce-overhead", "max-autotune")
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "xla", "hpu", "neuron")
DTYPES = ("float32", "bfloat16", "float16", "float64")
MATMUL_PRECISIONS = ("highest", "high", "medium")
TIMED = ("steady_s", "first_call_s", "warmup_s")   # tested statistically, higher is worse


@dataclass(frozen=True)
class DeviceSpec(Placement):     # Placement: what its cells ask of a cluster node
    name: str
    type: str
    threads: int = 0
    price_per_hour: float = 0.0


@dataclass(frozen=True)
class PrecisionSpec:
    name: str
    dtype: str
    matmul_precision: str = "highest"
    autocast: bool = False
    autocast_dtype: str = "bfloat16"
    rel_l2_tol: float = 1e-5
    cosine_min: float = 0.99
    compiled_multiplier: float = 2.0


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    target: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None


@dataclass(frozen=True)
class BenchSettings:
    processes: int = 4
    samples: int = 12
    sample_target_s: float = 0.02
    warmup_s: float = 0.2
    min_warmup_calls: int = 3
    timeout_s: float = 300.0
    seed: int = 0
    adaptive_budget_s: float = 60.0   # per cell: more processes for INCONCLUSIVE timings
    max_processes: int = 15           # per side, workload and mode, adaptive rounds included
    max_looks: int = 2                # looks per cell; every test then runs at alpha/max_looks


@dataclass(frozen=True)
class NumericsSettings:
    timeout_s: float = 300.0


@dataclass(frozen=True)
class Delta:
    """The minimum effect per metric: a smaller change is never REGRESSED or IMPROVED."""
    steady_s: float = 0.05
    first_call_s: float = 0.2
    warmup_s: float = 0.25
    peak_bytes: float = 0.05


@dataclass(frozen=True)
class StatsSettings:
    alpha: float = 0.05
    power: float = 0.8
    delta: Delta = field(default_factory=Delta)
    error_growth: float = 2.0           # numerics: flag an error that grew by this factor
    # Against a recorded baseline, two runs differ by more than their processes' spread: the
    # SD of a run's offset (relative), estimated from the committed history when it holds
    # enough runs of the same hardware and packages, else this prior.
    run_spread: float = 0.03
    history_runs: int = 20              # committed bench runs per cell read for that estimate


@dataclass(frozen=True)
class HistorySettings:
    """The `history` stage: the committed runs as series, and where a lasting shift began."""
    runs: int = 50              # committed bench runs per cell, newest first
    shown: int = 10             # points per table in history.md (the newest)
    max_pvalue: float = 0.001   # a change point's t-test, after Bonferroni over its splits
    min_change: float = 0.0     # a smaller shift (relative) is not reported
    min_points: int = 3         # runs on each side of a lasting shift


@dataclass(frozen=True)
class Matrix:
    modes: tuple[str, ...]
    name: str = "custom"


@dataclass(frozen=True)
class Cells:
    """What the DVC matrix stages iterate over: the selected groups' keys."""
    devices: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()


MEASURE = ("auto", "recorded", "rebuild")
INSTALLERS = ("auto", "uv", "pip")


@dataclass(frozen=True)
class Baseline:
    rev: str = "HEAD"
    # auto: measure the baseline again beside this run, in lock-step, when its packages or
    # workload code differ from this run's and it can be rebuilt; else its recorded numbers.
    measure: str = "auto"


@dataclass(frozen=True)
class Candidate:
    """A what-if arm, measured beside this environment instead of the baseline."""
    python: str | None = None   # another environment's interpreter
    pip: tuple[str, ...] = ()   # requirement overrides on top of this environment
    rev: str | None = None      # another revision's workload code

    @property
    def wanted(self) -> bool:
        return bool(self.python or self.pip or self.rev)


@dataclass(frozen=True)
class Arms:
    """Where rebuilt arms (venvs, checkouts of other revisions) are cached, and how venvs
    are built."""
    cache_dir: str | None = None    # default $TORCHGATE_CACHE, else ~/.cache/torchgate
    installer: str = "auto"         # auto: uv when it is on PATH, else pip


@dataclass(frozen=True)
class CompareSettings:
    allow_hardware_change: bool = False   # compare timings across different hardware anyway
    busy_share: float = 0.25              # leave out processes sampled on a busier machine


# The gate's own token: the run has a baseline and timings, and not one timing could be tested
# against it (every one NOT COMPARABLE, MISSING, SKIPPED, FAILED or untested).
NOTHING_COMPARABLE = "NOTHING_COMPARABLE"
GATE_CHOICES = (*VERDICTS, NOTHING_COMPARABLE)


@dataclass(frozen=True)
class Gate:
    """What fails the run (the `gate` stage, after the reports are written); [] turns it off."""
    fail_on: tuple[str, ...] = (REGRESSED, FAILED, NOTHING_COMPARABLE)


@dataclass(frozen=True)
class Cell:
    device: DeviceSpec
    precision: PrecisionSpec

    @property
    def name(self) -> str:  # matches the DVC stage name bench@<device>-<precision>
        return f"{self.device.name}-{self.precision.name}"


@dataclass(frozen=True)
class Config:
    devices: dict[str, DeviceSpec]
    precisions: dict[str, PrecisionSpec]
    workloads: dict[str, WorkloadSpec]
    matrix: Matrix
    bench: BenchSettings = field(default_factory=BenchSettings)
    numerics: NumericsSettings = field(default_factory=NumericsSettings)
    stats: StatsSettings = field(default_factory=StatsSettings)
    baseline: Baseline = field(default_factory=Baseline)
    candidate: Candidate = field(default_factory=Candidate)
    compare: CompareSettings = field(default_factory=CompareSettings)
    gate: Gate = field(default_factory=Gate)
    arms: Arms = field(default_factory=Arms)
    history: HistorySettings = field(default_factory=HistorySettings)
    launcher: Launcher = field(default_factory=Launcher)

    @property
    def modes(self) -> tuple[str, ...]:
        return self.matrix.modes

    def cells(self) -> list[Cell]:
        return [Cell(d, p) for d in self.devices.values() for p in self.precisions.values()]

    def cell(self, device: str, precision: str) -> Cell:
        if device not in self.devices:
            raise UserError(f"unknown device {device!r}; this matrix has {sorted(self.devices)}")
        if precision not in self.precisions:
            raise UserError(f"unknown precision {precision!r}; this matrix has "
                            f"{sorted(self.precisions)}")
        return Cell(self.devices[device], self.precisions[precision])


SECTIONS = {"bench": BenchSettings, "numerics": NumericsSettings, "stats": StatsSettings,
            "baseline": Baseline, "candidate": Candidate, "compare": CompareSettings,
            "gate": Gate, "matrix": Matrix, "cells": Cells, "arms": Arms,
            "history": HistorySettings, "launcher": Launcher}
GROUPS = ("device", "precision", "workload")
TOP_LEVEL = tuple(sorted((*SECTIONS, *GROUPS)))
RESERVED = ("_target_", "_timeout_s_")


def _choice(value: str, choices: tuple[str, ...], where: str) -> None:
    if value not in choices:
        raise UserError(f"{where} is {value!r}; valid choices: {', '.join(choices)}")


def _at_least(value: float, where: str, low: float = 0, *, inclusive: bool = False) -> None:
    if value < low or (value == low and not inclusive):
        raise UserError(f"{where} must be {'>=' if inclusive else '>'} {low:g}, got {value}")


def _group(raw: dict, key: str) -> dict:
    group = raw.get(key)
    if not isinstance(group, dict) or not group:
        raise UserError(f"params.yaml has no {key!r} selection; choose one with "
                        f"`dvc exp run -S {key}=<option>` (options: conf/{key}/*.yaml)")
    return group


def _named(cls, name: str, body: Any, where: str):
    if isinstance(body, dict) and "name" in body:
        raise UserError(f"unknown key {where}.name; the name is the entry's key ({name!r})")
    return from_data(cls, {**body, "name": name} if isinstance(body, dict) else body, where)


def _device(name: str, body: Any) -> DeviceSpec:
    where = f"device.{name}"
    spec = _named(DeviceSpec, name, body, where)
    _choice(spec.type, DEVICE_TYPES, f"{where}.type")
    _at_least(spec.threads, f"{where}.threads", inclusive=True)
    _at_least(spec.price_per_hour, f"{where}.price_per_hour", inclusive=True)
    return spec


def _precision(name: str, body: Any) -> PrecisionSpec:
    where = f"precision.{name}"
    spec = _named(PrecisionSpec, name, body, where)
    _choice(spec.dtype, DTYPES, f"{where}.dtype")
    _choice(spec.autocast_dtype, DTYPES, f"{where}.autocast_dtype")
    _choice(spec.matmul_precision, MATMUL_PRECISIONS, f"{where}.matmul_precision")
    _at_least(spec.rel_l2_tol, f"{where}.rel_l2_tol")
    _at_least(spec.compiled_multiplier, f"{where}.compiled_multiplier")
    if not 0 <= spec.cosine_min <= 1:
        raise UserError(f"{where}.cosine_min must be in [0, 1], got {spec.cosine_min}")
    return spec


def _workload(name: str, body: Any) -> WorkloadSpec:
    """Every key but the reserved `_target_` and `_timeout_s_` is the function's argument."""
    where = f"workload.{name}"
    if not isinstance(body, dict) or not isinstance(body.get("_target_"), str):
        raise UserError(f"{where} needs `_target_: package.module.function` "
                        "(see conf/workload/matmul_relu.yaml)")
    kwargs = {k: v for k, v in body.items() if not (k.startswith("_") and k.endswith("_"))}
    reserved = sorted(set(body) - set(kwargs) - set(RESERVED))
    if reserved:
        raise UserError(f"unknown key {where}.{reserved[0]}; reserved keys are "
                        f"{' and '.join(RESERVED)}")
    timeout = body.get("_timeout_s_")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise UserError(f"{where}._timeout_s_ must be a number > 0, got {timeout!r}")
    return WorkloadSpec(name, body["_target_"], kwargs,
                        None if timeout is None else float(timeout))


def parse_workloads(section: dict) -> dict[str, WorkloadSpec]:
    """The `workload` section: name -> spec."""
    if not isinstance(section, dict):
        raise UserError(f"workload must be a mapping of workloads, got {section!r}")
    return {str(n): _workload(str(n), b) for n, b in section.items()}


def _check_bench(bench: BenchSettings) -> None:
    for key in ("processes", "samples", "sample_target_s", "timeout_s", "max_processes",
                "max_looks"):
        _at_least(getattr(bench, key), f"bench.{key}")
    for key in ("warmup_s", "adaptive_budget_s", "min_warmup_calls"):
        _at_least(getattr(bench, key), f"bench.{key}", inclusive=True)


def _check_stats(stats: StatsSettings) -> None:
    if not 0 < stats.alpha < 0.5:
        raise UserError(f"stats.alpha must be in (0, 0.5), got {stats.alpha}")
    if not 0.5 <= stats.power < 1:
        raise UserError(f"stats.power must be in [0.5, 1), got {stats.power}")
    for key, value in vars(stats.delta).items():
        _at_least(value, f"stats.delta.{key}", inclusive=True)
    _at_least(stats.error_growth, "stats.error_growth", 1, inclusive=True)
    _at_least(stats.run_spread, "stats.run_spread", inclusive=True)
    _at_least(stats.history_runs, "stats.history_runs", inclusive=True)


def _check_history(history: HistorySettings) -> None:
    _at_least(history.runs, "history.runs", inclusive=True)
    _at_least(history.shown, "history.shown")
    _at_least(history.min_points, "history.min_points")
    _at_least(history.min_change, "history.min_change", inclusive=True)
    if not 0 < history.max_pvalue < 1:
        raise UserError(f"history.max_pvalue must be in (0, 1), got {history.max_pvalue}")


def _check_candidate(candidate: Candidate) -> Candidate:
    if candidate.python is not None and candidate.pip:
        raise UserError("set candidate.python or candidate.pip, not both: candidate.pip builds "
                        "the candidate's environment from this one")
    for i, requirement in enumerate(candidate.pip):
        if not requirement.strip() or requirement.lstrip().startswith("-"):
            raise UserError(f"candidate.pip[{i}] is {requirement!r}; give a requirement such as "
                            "torch==2.14.1")
    if candidate.python is None:
        return candidate
    path = Path(candidate.python).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UserError(f"candidate.python {candidate.python!r} is not an executable file; point "
                        "it at the other environment's interpreter, e.g. /path/to/venv/bin/python")
    return dataclasses.replace(candidate, python=str(path))


def _check_gate(raw_gate: Any) -> None:
    """Before typing: the replaced key gets its own message, not "unknown key"."""
    if isinstance(raw_gate, dict) and "fail_on_regression" in raw_gate:
        raise UserError("gate.fail_on_regression was replaced by gate.fail_on, the list of "
                        "verdicts that fail the run, e.g. "
                        f"gate.fail_on=[{','.join(Gate().fail_on)}] ([] turns the gate off)")


def parse(raw: Any) -> Config:
    if not isinstance(raw, dict):
        raise UserError("params.yaml must be a mapping; recompose it with `dvc exp run`")
    unknown = sorted(set(raw) - set(TOP_LEVEL))
    if unknown:
        raise UserError(f"unknown top-level key {unknown[0]!r} in params.yaml; valid keys: "
                        f"{', '.join(TOP_LEVEL)}")
    _check_gate(raw.get("gate"))
    sections = {key: from_data(cls, {} if raw.get(key) is None else raw[key], key)
                for key, cls in SECTIONS.items() if key != "matrix"}
    matrix = raw.get("matrix") or {}
    if isinstance(matrix, dict) and not matrix.get("modes"):
        raise UserError("matrix.modes is empty; list at least one of " + ", ".join(MODES))
    matrix = from_data(Matrix, matrix, "matrix")
    for i, mode in enumerate(matrix.modes):
        _choice(mode, MODES, f"matrix.modes[{i}]")
    devices = {str(n): _device(str(n), b) for n, b in _group(raw, "device").items()}
    precisions = {str(n): _precision(str(n), b) for n, b in _group(raw, "precision").items()}
    workloads = parse_workloads(_group(raw, "workload"))
    cells = sections.pop("cells")
    for key, chosen in (("devices", devices), ("precisions", precisions)):
        listed = getattr(cells, key)
        if listed and list(listed) != list(chosen):
            raise UserError(f"cells.{key} is {list(listed)} but the selection is {list(chosen)}; "
                            "recompose params.yaml with `python -m stages.compose` "
                            "(cells is derived, do not edit it)")
    _check_bench(sections["bench"])
    _check_stats(sections["stats"])
    _check_history(sections["history"])
    if not 0 < sections["compare"].busy_share <= 1:
        raise UserError("compare.busy_share must be in (0, 1], got "
                        f"{sections['compare'].busy_share}")
    _at_least(sections["numerics"].timeout_s, "numerics.timeout_s")
    _choice(sections["baseline"].measure, MEASURE, "baseline.measure")
    _choice(sections["arms"].installer, INSTALLERS, "arms.installer")
    for i, value in enumerate(sections["gate"].fail_on):
        _choice(value, GATE_CHOICES, f"gate.fail_on[{i}]")
    sections["candidate"] = _check_candidate(sections["candidate"])
    return Config(devices, precisions, workloads, matrix, **sections)


def load(path: str | Path = "params.yaml") -> Config:
    import yaml  # here: the worker of a torch-only interpreter imports this module too
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} is missing; compose it with `dvc exp run` or restore it "
                        "from git") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    return parse(raw)
