"""The GPU part of a bench record: how each timing series of a mode ended, what NVML read
while it ran, and the roofline check. Imports the standard library only."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuSeries:
    """One timing series of a mode in one process: hot, cold or graph."""
    stop: str                              # quiet, timeout, max_samples or fixed
    rel_sd: float | None = None            # of the kept samples
    elapsed_s: float | None = None         # time spent sampling (turns of the other arm aside)
    redone: int = 0                        # throttled samples taken again
    throttled: tuple[int, ...] = ()        # kept samples still throttled (their indices)
    sm_clock_mhz: tuple[float | None, ...] = ()   # per kept sample; () without NVML
    temperature_c: float | None = None     # the hottest sample window
    power_w: float | None = None           # the highest power drawn in a sample window
    reasons: tuple[str, ...] = ()          # every clock-event reason NVML gave, idle aside
    tflops: float | None = None            # achieved, at the series' median
    gbps: float | None = None
    impossible: str | None = None          # achieved beyond the device's peak: why


@dataclass(frozen=True)
class GpuMode:
    """How a mode was timed on a CUDA device (device.<name>.timing)."""
    series: dict[str, GpuSeries] = field(default_factory=dict)
    reference_sm_clock_mhz: float | None = None   # what throttling is judged against
    flush_bytes: int | None = None         # the cold series' L2 flush
    math: str | None = None                # fp32, tf32, bf16, fp16 or fp64
    peak_tflops: float | None = None       # the roofline check's peaks; None: not known
    peak_gbps: float | None = None
    peak_source: str | None = None         # the datasheet entry, or "device.<name>.timing"
    graph_error: str | None = None         # the step could not be captured as a CUDA graph

    @property
    def impossible(self) -> list[str]:
        return [f"{name}: {s.impossible}" for name, s in self.series.items() if s.impossible]
