"""The rules of GPU timing, as pure functions of what was measured: when a series of samples
may stop, whether a sample window was throttled, which peak a cell can reach, and whether an
achieved rate is possible at all. No torch, no clocks: tests drive them with simulated data.

The rules follow NVBench (stop at a relative SD of 0.5 % with enough samples, or at a
timeout that is reported; a sample under 75 % of the SM clock is throttled) and the rule of
thumb that an achieved TFLOP/s or GB/s beyond the hardware's peak is a measurement error, not
a speed-up.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

QUIET, TIMEOUT, MAX_SAMPLES, FIXED = "quiet", "timeout", "max_samples", "fixed"


def rel_sd(values: list[float]) -> float | None:
    """Sample standard deviation over the mean; None for fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    if mean <= 0:
        return None
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) / mean


@dataclass(frozen=True)
class StopRule:
    """Sample until `min_samples` samples agree within `max_rel_sd` (quiet); a series that
    stays noisy stops at `max_samples` or `timeout_s`, and says so. `max_rel_sd` 0 takes
    exactly `min_samples` (fixed). The minimum always comes first: a timeout never leaves a
    process with fewer samples than it would have had without the rule."""
    min_samples: int
    max_rel_sd: float
    max_samples: int
    timeout_s: float

    def stop(self, samples: list[float], elapsed_s: float) -> str | None:
        n = len(samples)
        if n < self.min_samples:
            return None
        if self.max_rel_sd <= 0:
            return FIXED
        spread = rel_sd(samples)
        if spread is not None and spread <= self.max_rel_sd:
            return QUIET
        if n >= self.max_samples:
            return MAX_SAMPLES
        if elapsed_s >= self.timeout_s:
            return TIMEOUT
        return None


# NVML's clock-event ("throttle") reasons, a bit mask (nvmlClocksEventReason*).
REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
           0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
           0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
           0x100: "display_clock_setting"}
# The reasons that make a sample unrepresentative: the chip slowed down for heat or a
# hardware signal. The software power cap is left out: a large matmul runs at the power cap
# as a matter of course, and that is its real speed, not a disturbance to redo.
SLOWDOWNS = 0x8 | 0x20 | 0x40 | 0x80


@dataclass(frozen=True)
class Window:
    """What NVML read while one sample ran; None where it could not read."""
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    reasons: int | None = None


def reason_names(mask: int | None, *, idle: bool = False) -> tuple[str, ...]:
    if not mask:
        return ()
    return tuple(name for bit, name in REASONS.items() if mask & bit and (idle or bit != 0x1))


def throttled(window: Window, reference_mhz: float | None, share: float) -> str | None:
    """Why a sample window was throttled, or None: an SM clock under `share` of the
    reference clock (NVBench: 75 % of the default), or a thermal/hardware slowdown."""
    clock = window.sm_clock_mhz
    if clock is not None and reference_mhz and clock < share * reference_mhz:
        return f"SM clock {clock:.0f} MHz under {share:.0%} of {reference_mhz:.0f} MHz"
    slow = reason_names((window.reasons or 0) & SLOWDOWNS)
    return ", ".join(slow) if slow else None


def math_of(dtype: str, matmul_precision: str, autocast: bool, autocast_dtype: str) -> str:
    """The arithmetic whose peak bounds a cell: under autocast, the autocast dtype; float32
    matmuls at "high" precision run on TF32 tensor cores, at "medium" possibly on bf16 ones
    (the higher peak is the bound)."""
    if autocast and dtype != "float64":
        dtype = autocast_dtype
    named = {"bfloat16": "bf16", "float16": "fp16", "float64": "fp64"}.get(dtype)
    if named:
        return named
    return {"highest": "fp32", "high": "tf32"}.get(matmul_precision, "bf16")


# Datasheet peaks of the SXM parts: dense tensor-core TFLOP/s per arithmetic (fp32 without
# tensor cores), HBM GB/s. Matched on torch's device name; NVL and PCIe parts have lower
# peaks and are not matched. Other GPUs: set device.<name>.timing.peak_tflops / peak_gbps.
_HOPPER = {"fp64": 67.0, "fp32": 67.0, "tf32": 495.0, "bf16": 989.0, "fp16": 989.0}
SPEC = (
    (("H200",), ("NVL", "PCIe"), "NVIDIA H200 SXM datasheet", _HOPPER, 4800.0),
    (("H100", "HBM3"), ("NVL", "PCIe"), "NVIDIA H100 SXM datasheet", _HOPPER, 3350.0),
)


@dataclass(frozen=True)
class Peak:
    tflops: float | None
    gbps: float | None
    source: str | None


def peak(gpu_name: str | None, kind: str, tflops: dict[str, float] | None = None,
         gbps: float | None = None, configured: str = "configured") -> Peak:
    """The peak a cell of arithmetic `kind` can reach: configured values first, else the
    datasheet of a GPU named in SPEC; None where neither knows."""
    spec = next(((source, rates, bandwidth)
                 for needs, excludes, source, rates, bandwidth in SPEC
                 if gpu_name and all(n in gpu_name for n in needs)
                 and not any(x in gpu_name for x in excludes)), None)
    rate = (tflops or {}).get(kind)
    sources = []
    if rate is not None or gbps is not None:
        sources.append(configured)
    if spec and (rate is None or gbps is None):
        sources.append(spec[0])
        rate = spec[1].get(kind) if rate is None else rate
        gbps = spec[2] if gbps is None else gbps
    return Peak(rate, gbps, " + ".join(sources) or None)


@dataclass(frozen=True)
class Achieved:
    tflops: float | None
    gbps: float | None
    impossible: str | None


def roofline(seconds: float, flops: float | None, bytes_moved: float | None, limit: Peak,
             margin: float, *, check_bandwidth: bool) -> Achieved:
    """Achieved TFLOP/s and GB/s at `seconds` per step, and why they are impossible (beyond
    the peak by more than `margin`), if they are. Bandwidth is checked only where the data
    must come from device memory (the cold series): a hot step may be served by the L2 cache,
    which is faster than HBM."""
    if not seconds or seconds <= 0 or not math.isfinite(seconds):
        return Achieved(None, None, None)
    tflops = flops / seconds / 1e12 if flops else None
    gbps = bytes_moved / seconds / 1e9 if bytes_moved else None
    problems = []
    if tflops is not None and limit.tflops and tflops > limit.tflops * (1 + margin):
        problems.append(f"{tflops:,.0f} TFLOP/s is beyond the peak of {limit.tflops:,.0f}")
    if check_bandwidth and gbps is not None and limit.gbps and gbps > limit.gbps * (1 + margin):
        problems.append(f"{gbps:,.0f} GB/s is beyond the peak of {limit.gbps:,.0f}")
    why = None
    if problems:
        why = "; ".join(problems) + f" ({limit.source}): a measurement error, not a speed-up"
    return Achieved(tflops, gbps, why)
