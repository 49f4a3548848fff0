"""The composed configuration (params.yaml) as frozen, validated dataclasses.

`dvc repro` does not run Hydra, so stages read the committed params.yaml; every check here
turns a mistake into one line that names the key and what to put there.
"""
from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stages.core.errors import UserError

MODES = ("eager", "compiled", "reduce-overhead", "max-autotune")
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "xla", "hpu", "neuron")
DTYPES = ("float32", "bfloat16", "float16", "float64")
MATMUL_PRECISIONS = ("highest", "high", "medium")


@dataclass(frozen=True)
class DeviceSpec:
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
    kwargs: dict = field(default_factory=dict)
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
class StatsSettings:
    alpha: float = 0.05
    power: float = 0.8
    delta: dict = field(default_factory=lambda: {"steady_s": 0.05, "first_call_s": 0.2,
                                                 "warmup_s": 0.25, "peak_bytes": 0.05})
    error_growth: float = 2.0           # numerics: flag an error that grew by this factor


@dataclass(frozen=True)
class Cell:
    device: DeviceSpec
    precision: PrecisionSpec

    @property
    def name(self) -> str:  # matches the DVC stage name bench@<device>-<precision>
        return f"{self.device.name}-{self.precision.name}"


BUSY_SHARE = 0.25   # other programs' CPU share beyond which a process's timings are left out


@dataclass(frozen=True)
class Config:
    devices: dict[str, DeviceSpec]
    precisions: dict[str, PrecisionSpec]
    workloads: dict[str, WorkloadSpec]
    modes: tuple[str, ...]
    matrix_name: str
    bench: BenchSettings
    numerics: NumericsSettings
    stats: StatsSettings
    baseline_rev: str
    fail_on_regression: bool
    candidate_python: str | None = None   # A/B mode: the other environment's interpreter
    allow_hardware_change: bool = False   # compare timings across different hardware anyway
    busy_share: float = BUSY_SHARE        # leave out processes sampled on a busier machine

    def cells(self) -> list[Cell]:
        return [Cell(d, p) for d in self.devices.values() for p in self.precisions.values()]

    def cell(self, device: str, precision: str) -> Cell:
        if device not in self.devices:
            raise UserError(f"unknown device {device!r}; this matrix has {sorted(self.devices)}")
        if precision not in self.precisions:
            raise UserError(f"unknown precision {precision!r}; this matrix has "
                            f"{sorted(self.precisions)}")
        return Cell(self.devices[device], self.precisions[precision])


def _typed(cls, data: Any, where: str, **extra):
    """Build dataclass `cls` from a mapping, rejecting unknown keys and wrong types."""
    if not isinstance(data, dict):
        raise UserError(f"{where} must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)} - set(extra)
    unknown = sorted(set(data) - names)
    if unknown:
        raise UserError(f"unknown key {where}.{unknown[0]}; valid keys: {sorted(names)}")
    values = {}
    for key, value in data.items():
        expected = hints[key]
        allowed = typing.get_args(expected) if isinstance(expected, types.UnionType) else (expected,)
        allowed = tuple(typing.get_origin(a) or a for a in allowed)
        if float in allowed and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            names_ = "/".join("null" if a is type(None) else a.__name__ for a in allowed)
            raise UserError(f"{where}.{key} must be {names_}, got {value!r}")
        values[key] = value
    return cls(**values, **extra)


def _choice(value: str, choices: tuple[str, ...], where: str) -> None:
    if value not in choices:
        raise UserError(f"{where} is {value!r}; valid choices: {', '.join(choices)}")


def _positive(value: float, where: str, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise UserError(f"{where} must be {'>= 0' if allow_zero else '> 0'}, got {value}")


def _group(raw: dict, key: str) -> dict:
    group = raw.get(key)
    if not isinstance(group, dict) or not group:
        raise UserError(f"params.yaml has no {key!r} selection; choose one with "
                        f"`dvc exp run -S {key}=<option>` (options: conf/{key}/*.yaml)")
    return group


TOP_LEVEL = ("baseline", "bench", "candidate", "cells", "compare", "device", "gate", "matrix",
             "numerics", "precision", "stats", "workload")


def parse(raw: dict) -> Config:
    if not isinstance(raw, dict):
        raise UserError("params.yaml must be a mapping; recompose it with `dvc exp run`")
    unknown = sorted(set(raw) - set(TOP_LEVEL))
    if unknown:
        raise UserError(f"unknown top-level key {unknown[0]!r} in params.yaml; valid keys: "
                        f"{', '.join(TOP_LEVEL)}")
    devices = {}
    for name, body in _group(raw, "device").items():
        spec = _typed(DeviceSpec, body, f"device.{name}", name=name)
        _choice(spec.type, DEVICE_TYPES, f"device.{name}.type")
        _positive(spec.threads, f"device.{name}.threads", allow_zero=True)
        _positive(spec.price_per_hour, f"device.{name}.price_per_hour", allow_zero=True)
        devices[name] = spec
    precisions = {}
    for name, body in _group(raw, "precision").items():
        spec = _typed(PrecisionSpec, body, f"precision.{name}", name=name)
        _choice(spec.dtype, DTYPES, f"precision.{name}.dtype")
        _choice(spec.autocast_dtype, DTYPES, f"precision.{name}.autocast_dtype")
        _choice(spec.matmul_precision, MATMUL_PRECISIONS, f"precision.{name}.matmul_precision")
        _positive(spec.rel_l2_tol, f"precision.{name}.rel_l2_tol")
        _positive(spec.compiled_multiplier, f"precision.{name}.compiled_multiplier")
        precisions[name] = spec
    workloads = {}
    for name, body in _group(raw, "workload").items():
        if not isinstance(body, dict) or not isinstance(body.get("_target_"), str):
            raise UserError(f"workload.{name} needs `_target_: package.module.function` "
                            "(see conf/workload/matmul_relu.yaml)")
        kwargs = {k: v for k, v in body.items() if not (k.startswith("_") and k.endswith("_"))}
        reserved = set(body) - set(kwargs) - {"_target_", "_timeout_s_"}
        if reserved:
            raise UserError(f"unknown key workload.{name}.{sorted(reserved)[0]}; "
                            "reserved keys are _target_ and _timeout_s_")
        timeout = body.get("_timeout_s_")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise UserError(f"workload.{name}._timeout_s_ must be a number > 0, got {timeout!r}")
        workloads[name] = WorkloadSpec(name, body["_target_"], kwargs, timeout)
    matrix = raw.get("matrix") or {}
    modes = tuple(matrix.get("modes") or ())
    if not modes:
        raise UserError("matrix.modes is empty; list at least one of " + ", ".join(MODES))
    for i, mode in enumerate(modes):
        _choice(mode, MODES, f"matrix.modes[{i}]")
    bench = _typed(BenchSettings, raw.get("bench") or {}, "bench")
    for key in ("processes", "samples", "sample_target_s", "timeout_s"):
        _positive(getattr(bench, key), f"bench.{key}")
    _positive(bench.warmup_s, "bench.warmup_s", allow_zero=True)
    _positive(bench.adaptive_budget_s, "bench.adaptive_budget_s", allow_zero=True)
    for key in ("max_processes", "max_looks"):
        _positive(getattr(bench, key), f"bench.{key}")
    _positive(bench.min_warmup_calls, "bench.min_warmup_calls", allow_zero=True)
    numerics = _typed(NumericsSettings, raw.get("numerics") or {}, "numerics")
    stats = _typed(StatsSettings, raw.get("stats") or {}, "stats")
    if not 0 < stats.alpha < 0.5:
        raise UserError(f"stats.alpha must be in (0, 0.5), got {stats.alpha}")
    if not 0.5 <= stats.power < 1:
        raise UserError(f"stats.power must be in [0.5, 1), got {stats.power}")
    for key, value in stats.delta.items():
        if not isinstance(value, (int, float)) or value < 0:
            raise UserError(f"stats.delta.{key} must be a number >= 0, got {value!r}")
    baseline = raw.get("baseline") or {}
    gate = raw.get("gate") or {}
    candidate = (raw.get("candidate") or {}).get("python")
    if candidate is not None:
        path = Path(str(candidate)).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UserError(f"candidate.python {candidate!r} is not an executable file; point it "
                            "at the other environment's interpreter, e.g. /path/to/venv/bin/python")
        candidate = str(path)
    compare = raw.get("compare") or {}
    unknown = sorted(set(compare) - {"allow_hardware_change", "busy_share"})
    if unknown:
        raise UserError(f"unknown key compare.{unknown[0]}; valid keys: "
                        "['allow_hardware_change', 'busy_share']")
    busy_share = compare.get("busy_share", BUSY_SHARE)
    if isinstance(busy_share, bool) or not isinstance(busy_share, (int, float)) \
            or not 0 < busy_share <= 1:
        raise UserError(f"compare.busy_share must be a number in (0, 1], got {busy_share!r}")
    return Config(devices, precisions, workloads, modes, str(matrix.get("name", "custom")),
                  bench, numerics, stats, str(baseline.get("rev", "HEAD")),
                  bool(gate.get("fail_on_regression", False)), candidate,
                  bool(compare.get("allow_hardware_change", False)), float(busy_share))


def load(path: str | Path = "params.yaml") -> Config:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} is missing; compose it with `dvc exp run` or restore it "
                        "from git") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    return parse(raw)
