"""How a CUDA device is timed: `device.<name>.timing` in params.yaml (conf/device/cuda.yaml).

The series each mode measures (hot, cold, graph), the noise-based stopping rule, throttle
handling and the roofline check's peaks. Without a `timing` section a CUDA device is timed as
any other: `bench.samples` batched samples between CUDA events. Imports the standard library
only (the worker of another interpreter reads it with torch alone).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from stages.core.errors import UserError

SERIES = ("hot", "cold", "graph")
MATHS = ("fp64", "fp32", "tf32", "bf16", "fp16")   # the arithmetic a peak is quoted for


@dataclass(frozen=True)
class CudaTiming:
    # hot: back-to-back calls between one event pair (steady_s); cold: the L2 cache flushed
    # before each call, one call per event pair (cold_s); graph: the step captured as a CUDA
    # graph and replayed back to back (graph_s).
    series: tuple[str, ...] = ("hot", "cold")
    flush_mib: int = 256            # zeroed before each cold call, outside the timed window
    # A series stops once it has bench.samples samples whose relative SD is at most
    # max_rel_sd (0: exactly bench.samples), else at max_samples or after timeout_s.
    max_rel_sd: float = 0.005
    max_samples: int = 100
    timeout_s: float = 1.0
    # A sample window whose SM clock is under throttle_clock x the reference clock, or that
    # a thermal or hardware slowdown hit, is taken again up to throttle_redos times per
    # series; beyond that it is kept and flagged.
    throttle_clock: float = 0.75
    throttle_redos: int = 3
    # Achieved TFLOP/s (GB/s) beyond the peak x (1 + roofline_margin) is a measurement error.
    # Peaks per arithmetic (fp32, tf32, bf16, fp16, fp64) and the memory bandwidth; unset:
    # the datasheet's, for the GPUs torchgate knows (stages/measure/gpu_rules.py).
    roofline_margin: float = 0.05
    peak_tflops: dict[str, float] = field(default_factory=dict)
    peak_gbps: float | None = None


def check_timing(spec, where: str):
    """The device spec, its `timing` checked; a bad value is one line naming the key."""
    timing: CudaTiming | None = spec.timing
    if timing is None:
        return spec
    where = f"{where}.timing"
    if spec.type != "cuda":
        raise UserError(f"{where} applies to CUDA devices only (this device's type is "
                        f"{spec.type!r}); remove it")
    for i, name in enumerate(timing.series):
        if name not in SERIES:
            raise UserError(f"{where}.series[{i}] is {name!r}; valid choices: "
                            f"{', '.join(SERIES)}")
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
        if kind not in MATHS:
            raise UserError(f"unknown key {where}.peak_tflops.{kind}; valid keys: "
                            f"{', '.join(MATHS)}")
        if peak <= 0:
            raise UserError(f"{where}.peak_tflops.{kind} must be > 0, got {peak}")
    if timing.peak_gbps is not None and timing.peak_gbps <= 0:
        raise UserError(f"{where}.peak_gbps must be > 0, got {timing.peak_gbps}")
    return dataclasses.replace(spec, timing=dataclasses.replace(
        timing, series=tuple(dict.fromkeys(timing.series))))
