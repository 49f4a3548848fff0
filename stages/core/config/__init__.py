"""The composed configuration (params.yaml) as typed, frozen sections.

`dvc repro` does not run Hydra, so stages read the committed params.yaml. Every section is a
dataclass checked by `typed`: an unknown key, a wrong type (the string "no" for a boolean, a
string for a list) or a bad value is one line that names the key and what to put there.
Imports nothing beyond the standard library at load time: the worker of another interpreter
reads the specs below with torch alone.

Two workload keys make more than one process of a workload. `sweep.<parameter>: [values]`
makes each value its own unit of the matrix (expand); `_ranks_: N` runs each of a workload's
units as N data-parallel ranks inside its one worker process (parse_ranks).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchgate.core import machine
from torchgate.core.config.settings import (
    CUDA_SERIES,
    GATE_CHOICES,
    INSTALLERS,
    MEASURE,
    PEAK_MATHS,
    Arms,
    Baseline,
    BenchSettings,
    Candidate,
    Cells,
    CompareSettings,
    CudaTiming,
    Gate,
    HistorySettings,
    Launcher,
    MachineSettings,
    Matrix,
    MigrationSettings,
    NumericsSettings,
    Placement,
    Recommend,
    StatsSettings,
    WorkloadSpec,
    parse_pairs,
)
from torchgate.core.errors import UserError
from torchgate.core.metrics import TIMINGS
from torchgate.core.typed import from_data

MODES = ("eager", "compiled", "reduce-overhead", "max-autotune")
# Device types timed and read by name; any other type (an out-of-tree backend such as AWS
# Trainium's) goes through PyTorch's device-generic torch.accelerator API.
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu")
DEVICE_TYPE = re.compile(r"^[a-z][a-z0-9_]*$")
DTYPES = ("float32", "bfloat16", "float16", "float64")
MATMUL_PRECISIONS = ("highest", "high", "medium")


@dataclass(frozen=True)
class DeviceSpec(Placement):     # Placement: what its cells ask of a cluster node
    name: str
    type: str
    threads: int | str = 0     # 0: torch's default; "auto": that, leaving a core (measure.build)
    price_per_hour: float = 0.0
    timing: CudaTiming | None = None    # CUDA only: hot/cold/graph series, stopping, throttling
    # Imported by the worker before it looks for the device: the package of an out-of-tree
    # backend that does not register itself when torch is imported.
    modules: tuple[str, ...] = ()
    compile_backend: str | None = None   # torch.compile's backend there (None: inductor)


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
    recommend: Recommend = field(default_factory=Recommend)
    sweep: dict[str, Any] = field(default_factory=dict)   # parameter -> values (expand)
    launcher: Launcher = field(default_factory=Launcher)
    machine: MachineSettings = field(default_factory=MachineSettings)
    migration: MigrationSettings = field(default_factory=MigrationSettings)

    @property
    def reports(self) -> Path:
        """This machine's folder of reports (core.machine). A config that names no machine (one
        built in code; params.yaml always names one) is this machine's, as compose names it."""
        name = self.machine.name or machine.unnamed()
        why = machine.check_name(name)
        if why:
            raise UserError(why)
        return machine.reports_of(name)

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
            "history": HistorySettings, "recommend": Recommend, "launcher": Launcher,
            "machine": MachineSettings, "migration": MigrationSettings}
GROUPS = ("device", "precision", "workload")
TOP_LEVEL = tuple(sorted((*SECTIONS, *GROUPS, "sweep")))
RESERVED = ("_target_", "_timeout_s_", "_latency_", "_dynamic_", "_rel_l2_tol_", "_ranks_",
            "_slow_rank_", "_item_")


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
    return from_data(cls, {**body, "name": name} if isinstance(body, dict) else body, where,
                     finite=True)


def _device(name: str, body: Any) -> DeviceSpec:
    where = f"device.{name}"
    spec = _named(DeviceSpec, name, body, where)
    if not DEVICE_TYPE.match(spec.type):
        raise UserError(f"{where}.type is {spec.type!r}; give a torch device type: "
                        f"{', '.join(DEVICE_TYPES)}, or an out-of-tree backend's (e.g. neuron)")
    for i, module in enumerate(spec.modules):
        if not re.match(r"^[A-Za-z_][\w.]*$", module):
            raise UserError(f"{where}.modules[{i}] is {module!r}; give an importable module "
                            "name such as torch_neuronx")
    if spec.compile_backend is not None and not DEVICE_TYPE.match(spec.compile_backend):
        raise UserError(f"{where}.compile_backend is {spec.compile_backend!r}; give a "
                        "torch.compile backend name (e.g. neuron), or null for inductor")
    if isinstance(spec.threads, str):
        if spec.threads != "auto":
            raise UserError(f"{where}.threads is {spec.threads!r}; give a number of threads, 0 "
                            "(torch's default) or auto (torch's default, less a core where it "
                            "would take every core)")
    else:
        _at_least(spec.threads, f"{where}.threads", inclusive=True)
    _at_least(spec.price_per_hour, f"{where}.price_per_hour", inclusive=True)
    return _check_timing(spec, where)



def _check_timing(spec: DeviceSpec, where: str) -> DeviceSpec:
    """The device spec, its `timing` (a CUDA device's series, stopping rule, throttling and
    peaks) checked; a bad value is one line naming the key."""
    timing: CudaTiming | None = spec.timing
    if timing is None:
        return spec
    where = f"{where}.timing"
    if spec.type != "cuda":
        raise UserError(f"{where} applies to CUDA devices only (this device's type is "
                        f"{spec.type!r}); remove it")
    for i, name in enumerate(timing.series):
        if name not in CUDA_SERIES:
            raise UserError(f"{where}.series[{i}] is {name!r}; valid choices: "
                            f"{', '.join(CUDA_SERIES)}")
    if "hot" not in timing.series:
        raise UserError(f"{where}.series must include hot (steady_s is the hot series), got "
                        f"{list(timing.series)}")
    for key in ("flush_mib", "max_samples", "timeout_s"):
        if getattr(timing, key) <= 0:
            raise UserError(f"{where}.{key} must be > 0, got {getattr(timing, key)}")
    for key in ("max_rel_sd", "throttle_redos", "roofline_margin"):
        if getattr(timing, key) < 0:
            raise UserError(f"{where}.{key} must be >= 0, got {getattr(timing, key)}")
    if not 0 <= timing.throttle_clock < 1:
        raise UserError(f"{where}.throttle_clock must be in [0, 1), got "
                        f"{timing.throttle_clock}")
    for kind, peak in timing.peak_tflops.items():
        if kind not in PEAK_MATHS:
            raise UserError(f"unknown key {where}.peak_tflops.{kind}; valid keys: "
                            f"{', '.join(PEAK_MATHS)}")
        if peak <= 0:
            raise UserError(f"{where}.peak_tflops.{kind} must be > 0, got {peak}")
    if timing.peak_gbps is not None and timing.peak_gbps <= 0:
        raise UserError(f"{where}.peak_gbps must be > 0, got {timing.peak_gbps}")
    return dataclasses.replace(spec, timing=dataclasses.replace(
        timing, series=tuple(dict.fromkeys(timing.series))))

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
                        f"{', '.join(RESERVED)}")
    timeout = body.get("_timeout_s_")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not 0 < timeout < math.inf):
        raise UserError(f"{where}._timeout_s_ must be a number > 0, got {timeout!r}")
    latency, dynamic = body.get("_latency_", False), body.get("_dynamic_")
    if not isinstance(latency, bool):
        raise UserError(f"{where}._latency_ must be true or false, got {latency!r}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise UserError(f"{where}._dynamic_ must be true, false or null (torch.compile's "
                        f"automatic dynamic shapes), got {dynamic!r}")
    item = body.get("_item_")
    if item is not None and not (isinstance(item, str) and re.fullmatch(r"[a-z][a-z -]{0,30}",
                                                                       item)):
        raise UserError(f"{where}._item_ must name one item in lower case (token, image, "
                        f"sample), got {item!r}")
    return WorkloadSpec(name, body["_target_"], kwargs,
                        None if timeout is None else float(timeout), latency, dynamic,
                        _own_tolerance(body.get("_rel_l2_tol_"), where),
                        **parse_ranks(body, where), item=item)


def _own_tolerance(value: Any, where: str) -> dict[str, float]:
    """`_rel_l2_tol_`: a number (every precision) or precision name -> number, as
    precision name (or "*") -> tolerance."""
    if value is None:
        return {}
    found = value if isinstance(value, dict) else {"*": value}
    for name, tol in found.items():
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < math.inf:
            raise UserError(f"{where}._rel_l2_tol_ must be a number > 0 or a mapping of "
                            f"precision names to numbers > 0 (e.g. {{bf16: 4.0e-2}}), "
                            f"got {value!r}")
    return {str(name): float(tol) for name, tol in found.items()}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_ranks(body: dict, where: str) -> dict[str, Any]:
    """The WorkloadSpec fields of `_ranks_` and `_slow_rank_: {rank: R, factor: F}`.

    Distributed units: `_ranks_: N` in a workload's YAML runs each of its units as N
    data-parallel ranks (processes) inside the unit's one worker process, and `_slow_rank_`
    slows one of them on purpose, a test knob for the straggler report (measure.ranks)."""
    ranks, slow = body.get("_ranks_"), body.get("_slow_rank_")
    if ranks is not None and (not _whole(ranks) or ranks < 1):
        raise UserError(f"{where}._ranks_ must be a whole number >= 1 (data-parallel ranks "
                        f"per unit), got {ranks!r}")
    if slow is None:
        return {"ranks": ranks}
    if ranks is None:
        raise UserError(f"{where}._slow_rank_ needs {where}._ranks_: it slows one of them")
    if not isinstance(slow, dict) or set(slow) != {"rank", "factor"}:
        raise UserError(f"{where}._slow_rank_ must be {{rank: R, factor: F}} (rank R's steps "
                        f"made F times as long), got {slow!r}")
    rank, factor = slow["rank"], slow["factor"]
    if not _whole(rank) or not 0 <= rank < ranks:
        raise UserError(f"{where}._slow_rank_.rank must be a rank from 0 to {ranks - 1}, "
                        f"got {rank!r}")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) \
            or not 1 <= factor < math.inf:
        raise UserError(f"{where}._slow_rank_.factor must be a number >= 1, got {factor!r}")
    return {"ranks": ranks, "slow_rank": rank, "slow_factor": float(factor)}


def rank_threads(threads: int, ranks: int) -> int:
    """Torch threads per rank: the unit's threads shared among its ranks, at least one each,
    so that N ranks fit the CPUs one process would have used."""
    return max(1, threads // max(ranks, 1))


def parse_workloads(section: dict) -> dict[str, WorkloadSpec]:
    """The `workload` section: name -> spec."""
    if not isinstance(section, dict):
        raise UserError(f"workload must be a mapping of workloads, got {section!r}")
    return {str(n): _workload(str(n), b) for n, b in section.items()}


# ---- sweeps ---------------------------------------------------------------------------
# A workload parameter given several values, each value its own unit of the matrix.
# `sweep.batch: [16, 32, 64]` makes every selected workload that takes a `batch` three units,
# `mlp_train[batch=16]`, `mlp_train[batch=32]`, ...; `sweep.threads: [1, 2]` sets torch's
# thread count per unit (every workload). Several sweeps multiply. Each unit is measured,
# compared with the baseline's unit of the same name and judged like any other; the report
# draws the units of one workload as a curve and recommends one.

THREADS = "threads"       # not a workload argument: torch.set_num_threads in the worker
# Swept parameters that count something: each value must be a whole number > 0.
SWEPT_COUNTS = (THREADS, "batch")


def _swept_values(key: str, values: Any) -> list:
    if not isinstance(values, list) or not values:
        raise UserError(f"sweep.{key} must be a non-empty list of values, e.g. [16, 32, 64], "
                        f"got {values!r}")
    for v in values:
        if isinstance(v, (list, dict)) or v is None:
            raise UserError(f"sweep.{key} holds {v!r}; each value must be a number or a string")
        if isinstance(v, float) and not math.isfinite(v):
            raise UserError(f"sweep.{key} holds {v!r}; each number must be finite")
    if key in SWEPT_COUNTS and not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                       for v in values):
        raise UserError(f"sweep.{key} must list whole numbers > 0, got {values!r}")
    if len(set(map(str, values))) != len(values):
        raise UserError(f"sweep.{key} lists a value twice: {values!r}")
    return values


def unit_name(name: str, point: tuple[tuple[str, Any], ...]) -> str:
    return f"{name}[{','.join(f'{k}={v}' for k, v in point)}]" if point else name


def expand(workloads: dict[str, WorkloadSpec], sweep: dict | None,
           strict: bool = True) -> dict[str, WorkloadSpec]:
    """Every workload times every combination of the swept values that apply to it; strict:
    a sweep that applies to no workload is an error (this run's), else it is let be (another
    revision's workloads)."""
    axes = {key: _swept_values(key, values) for key, values in (sweep or {}).items()
            if values is not None}
    if not axes:
        return workloads
    out: dict[str, WorkloadSpec] = {}
    for name, spec in workloads.items():
        mine = [(k, v) for k, v in axes.items() if k == THREADS or k in spec.kwargs]
        if not mine:
            out[name] = spec
            continue
        for combo in itertools.product(*(v for _, v in mine)):
            point = tuple((k, value) for (k, _), value in zip(mine, combo))
            kwargs = {**spec.kwargs, **{k: v for k, v in point if k != THREADS}}
            threads = dict(point).get(THREADS)
            out[unit_name(name, point)] = dataclasses.replace(
                spec, name=unit_name(name, point), kwargs=kwargs, threads=threads,
                family=name, point=point)
    if strict and all(spec.point == () for spec in out.values()):
        raise UserError(f"no selected workload takes {', '.join(axes)}; sweep a parameter "
                        "that a workload's config lists (e.g. batch), or threads")
    return out


INSTRUCTIONS = ("auto", "always", "never")     # bench.instructions
LEAST_LATENCY_CALLS = 100      # bench.latency_calls: below it a p99 is the calls' maximum


def _check_bench(bench: BenchSettings) -> None:
    for key in ("processes", "samples", "sample_target_s", "timeout_s", "max_processes",
                "max_looks", "warmup_max_s", "rank_timeout_s", "breakdown_calls",
                "instruction_calls", "instruction_processes", "instructions_timeout_s"):
        _at_least(getattr(bench, key), f"bench.{key}")
    for key in ("warmup_s", "adaptive_budget_s", "min_warmup_calls", "cold_compile_processes",
                "latency_s", "breakdown_s", "profile_calls"):
        _at_least(getattr(bench, key), f"bench.{key}", inclusive=True)
    _choice(bench.instructions, INSTRUCTIONS, "bench.instructions")
    for metric in bench.adaptive_metrics or ():
        _choice(metric, TIMINGS, "bench.adaptive_metrics")
    if bench.unchanged_processes is not None and bench.unchanged_processes < 2:
        raise UserError(f"bench.unchanged_processes must be >= 2 (a paired test needs two "
                        f"pairs) or null, got {bench.unchanged_processes}")
    if bench.unchanged_controls is not None and bench.unchanged_controls < 0:
        raise UserError(f"bench.unchanged_controls must be >= 0 or null, got "
                        f"{bench.unchanged_controls}")
    if bench.latency_calls < LEAST_LATENCY_CALLS:
        raise UserError(f"bench.latency_calls must be >= {LEAST_LATENCY_CALLS} (a p99 of fewer "
                        f"calls is their maximum), got {bench.latency_calls}")
    if bench.max_processes < bench.processes:
        raise UserError(f"bench.max_processes ({bench.max_processes}) is below bench.processes "
                        f"({bench.processes}); raise bench.max_processes to at least "
                        "bench.processes (it caps them, adaptive rounds included)")
    if bench.warmup_max_s < bench.warmup_s:
        raise UserError(f"bench.warmup_max_s ({bench.warmup_max_s:g}) is below bench.warmup_s "
                        f"({bench.warmup_s:g}); raise bench.warmup_max_s to at least "
                        "bench.warmup_s (the warm-up's cap)")
    if bench.cold_compile_processes > bench.processes:
        raise UserError(f"bench.cold_compile_processes ({bench.cold_compile_processes}) is more "
                        f"than bench.processes ({bench.processes}): no process would measure "
                        "first_call_warm_s; lower it to at most bench.processes")


MAX_DELTA = 10.0


def _check_stats(stats: StatsSettings) -> None:
    if not 0 < stats.alpha < 0.5:
        raise UserError(f"stats.alpha must be in (0, 0.5), got {stats.alpha}")
    if not 0.5 <= stats.power < 1:
        raise UserError(f"stats.power must be in [0.5, 1), got {stats.power}")
    for key, value in vars(stats.delta).items():
        _at_least(value, f"stats.delta.{key}", inclusive=True)
        if value > MAX_DELTA:       # relative: beyond 10x, no change could ever be REGRESSED
            raise UserError(f"stats.delta.{key} must be at most {MAX_DELTA:g} (a relative "
                            f"change: 0.05 is 5 %), got {value}")
    _at_least(stats.error_growth, "stats.error_growth", 1, inclusive=True)
    _at_least(stats.run_spread, "stats.run_spread", inclusive=True)
    _at_least(stats.history_runs, "stats.history_runs", inclusive=True)
    _at_least(stats.reference_runs, "stats.reference_runs", 1, inclusive=True)


def _check_history(history: HistorySettings) -> None:
    _at_least(history.runs, "history.runs", inclusive=True)
    _at_least(history.shown, "history.shown")
    _at_least(history.min_points, "history.min_points")
    if history.min_change is not None:
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
    sections = {key: from_data(cls, {} if raw.get(key) is None else raw[key], key, finite=True)
                for key, cls in SECTIONS.items() if key != "matrix"}
    matrix = raw.get("matrix") or {}
    if isinstance(matrix, dict) and not matrix.get("modes"):
        raise UserError("matrix.modes is empty; list at least one of " + ", ".join(MODES))
    matrix = from_data(Matrix, matrix, "matrix", finite=True)
    for i, mode in enumerate(matrix.modes):
        _choice(mode, MODES, f"matrix.modes[{i}]")
        if mode in matrix.modes[:i]:
            raise UserError(f"matrix.modes lists {mode} twice; list each mode once, e.g. "
                            f"{list(dict.fromkeys(matrix.modes))}")
    devices = {str(n): _device(str(n), b) for n, b in _group(raw, "device").items()}
    precisions = {str(n): _precision(str(n), b) for n, b in _group(raw, "precision").items()}
    sweep = raw.get("sweep") or {}
    if not isinstance(sweep, dict):
        raise UserError(f"sweep must map a parameter to its values, e.g. batch: [16, 32], "
                        f"got {sweep!r}")
    workloads = expand(parse_workloads(_group(raw, "workload")), sweep)
    cells = sections.pop("cells")
    for key, chosen in (("devices", devices), ("precisions", precisions)):
        listed = getattr(cells, key)
        if listed and list(listed) != list(chosen):
            raise UserError(f"cells.{key} is {list(listed)} but the selection is {list(chosen)}; "
                            "recompose params.yaml with `python -m torchgate.compose` "
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
    if sections["arms"].cache_max_gb is not None:
        _at_least(sections["arms"].cache_max_gb, "arms.cache_max_gb", inclusive=True)
    for i, value in enumerate(sections["gate"].fail_on):
        _choice(value, GATE_CHOICES, f"gate.fail_on[{i}]")
    sections["candidate"] = _check_candidate(sections["candidate"])
    sections["migration"] = MigrationSettings(parse_pairs(sections["migration"].pairs, MODES))
    for key in ("max_peak_mib", "max_latency_ms"):
        if getattr(sections["recommend"], key) is not None:
            _at_least(getattr(sections["recommend"], key), f"recommend.{key}")
    return Config(devices, precisions, workloads, matrix, **sections,
                  sweep={k: v for k, v in sweep.items() if v is not None})


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
