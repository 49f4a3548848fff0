"""GPU timing as the best harnesses do it, for a CUDA device with `device.<name>.timing`.

After the first call and the warm-up (measure.timing), each mode takes up to three series of
samples, each between one pair of CUDA events:

- hot: back-to-back calls (today's batches; steady_s), the caches warm from the call before;
- cold: the L2 cache flushed by zeroing a buffer (allocated once per process) before each
  call, queued before the start event so that the flush is never inside the timed window,
  one call per event pair (cold_s; triton's do_bench and NVBench's cold measurement);
- graph: the step captured once as a CUDA graph and replayed back to back (graph_s): launch
  overhead gone, what the kernels alone cost.

Each series stops by the noise rule (gpu_rules.StopRule), and NVML reads the SM clock,
temperature, power and clock-event reasons of every sample window while the device still
works (after the end event is queued, so no host time lands inside the window). A throttled
window is taken again, a few times, then kept and flagged. The device is a seam: tests pass
a simulated one whose timeline they control.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from torchgate.core.config.settings import CudaTiming
from torchgate.core.numbers import median
from torchgate.core.records.schema import GpuMode, GpuSeries
from torchgate.measure.gpu_rules import (
    Peak,
    StopRule,
    Window,
    math_of,
    peak,
    reason_names,
    rel_sd,
    roofline,
    throttled,
)
from torchgate.measure.nvml import Sensor
from torchgate.measure.pipeline import Pipeline
from torchgate.measure.timing import Probes

Sample = Callable[[], tuple[float, Window]]   # seconds per call, and what NVML read


class CudaOps:
    """What GPU timing asks of torch.cuda."""

    def __init__(self, torch_module: Any):
        self._torch = torch_module
        self._flush = None

    def event(self) -> Any:
        return self._torch.cuda.Event(enable_timing=True)

    def flush_buffer(self, nbytes: int) -> Any:
        """One buffer per process, allocated before the first mode, so that every mode's
        peak memory holds it alike (and the worker subtracts it)."""
        if self._flush is None:
            self._flush = self._torch.empty(nbytes, dtype=self._torch.int8, device="cuda")
        return self._flush

    @property
    def flush_bytes(self) -> int:
        return 0 if self._flush is None else self._flush.numel()

    def capture(self, step: Callable[[], Any]) -> Any:
        """The step as a CUDA graph: warmed up on a side stream, as capture requires."""
        cuda = self._torch.cuda
        side = cuda.Stream()
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            for _ in range(3):
                step()
        cuda.current_stream().wait_stream(side)
        graph = cuda.CUDAGraph()
        with cuda.graph(graph):
            step()
        graph.replay()               # the first replay uploads the graph: not a sample's cost
        cuda.synchronize()
        return graph


def _timed(ops: Any, sensor: Sensor, launch: Callable[[], None], calls: int) -> Sample:
    start, end = ops.event(), ops.event()

    def sample() -> tuple[float, Window]:
        start.record()
        launch()
        end.record()
        window = sensor.window()     # the device still runs the sample's work
        end.synchronize()
        return start.elapsed_time(end) * 1e-3 / calls, window
    return sample


def hot_sample(ops: Any, sensor: Sensor, step: Callable[[], Any], calls: int) -> Sample:
    def launch() -> None:
        for _ in range(calls):
            step()
    return _timed(ops, sensor, launch, calls)


def cold_sample(ops: Any, sensor: Sensor, step: Callable[[], Any], flush: Any) -> Sample:
    start_sample = _timed(ops, sensor, step, 1)

    def sample() -> tuple[float, Window]:
        flush.zero_()                # queued before the start event: outside the window
        return start_sample()
    return sample


def graph_sample(ops: Any, sensor: Sensor, graph: Any, calls: int) -> Sample:
    def launch() -> None:
        for _ in range(calls):
            graph.replay()
    return _timed(ops, sensor, launch, calls)


@dataclass
class TakenSeries:
    samples: list[float]
    windows: list[Window]
    stop: str
    elapsed_s: float
    redone: int = 0
    throttled: list[int] = field(default_factory=list)


def take_series(sample: Sample, rule: StopRule, why_throttled: Callable[[Window], str | None],
                redos: int, *, turn: Callable[[], None] = lambda: None, probe: Any = None,
                wall: Callable[[], float] = time.perf_counter) -> TakenSeries:
    """Samples until the rule stops; a throttled sample is taken again while redos are left,
    else kept and flagged. `elapsed_s` counts sampling only, not the waits for a turn."""
    kept: list[float] = []
    windows: list[Window] = []
    flagged: list[int] = []
    redone, elapsed = 0, 0.0
    while True:
        turn()
        if probe is not None:
            probe.start()
        t0 = wall()
        seconds, window = sample()
        elapsed += wall() - t0
        if probe is not None:
            probe.stop()
        if why_throttled(window):
            if redone < redos:
                redone += 1
                continue
            flagged.append(len(kept))
        kept.append(seconds)
        windows.append(window)
        stop = rule.stop(kept, elapsed)
        if stop:
            return TakenSeries(kept, windows, stop, elapsed, redone, flagged)


class GpuProcess:
    """What a bench worker on a CUDA device with `timing` holds for all its modes: the
    device, NVML, the flush buffer and the peaks of the roofline check."""

    def __init__(self, ops: Any, sensor: Sensor, spec: CudaTiming, *, min_samples: int,
                 kind: str, limit: Peak, wall: Callable[[], float] = time.perf_counter):
        self.ops, self.sensor, self.spec = ops, sensor, spec
        self.min_samples, self.kind, self.limit, self.wall = min_samples, kind, limit, wall
        self.reference_mhz = sensor.reference_sm_clock_mhz()
        if "cold" in spec.series:
            ops.flush_buffer(spec.flush_mib << 20)

    @classmethod
    def open(cls, torch_module: Any, job: Any) -> "GpuProcess":
        spec, p = job.device.timing, job.precision
        kind = math_of(p.dtype, p.matmul_precision, p.autocast, p.autocast_dtype)
        name = torch_module.cuda.get_device_name()
        limit = peak(name, kind, spec.peak_tflops, spec.peak_gbps,
                     configured=f"device.{job.device.name}.timing")
        return cls(CudaOps(torch_module), Sensor.open(torch_module), spec,
                   min_samples=job.timing.samples, kind=kind, limit=limit)

    @property
    def held_bytes(self) -> int:
        """Device memory the harness holds through every mode (the flush buffer)."""
        return self.ops.flush_bytes

    def sampler(self, flops: float | None, bytes_moved: float | None,
                meter: Any = None) -> "GpuSampler":
        return GpuSampler(self, flops, bytes_moved, meter)


@dataclass(frozen=True)
class GpuTimes:
    """A mode's series beside the hot one (steady_s): per call, the cold and graph samples
    (empty where not taken), and how every series ended. Empty: not timed by series (a
    device other than CUDA, or without `timing`)."""
    cold_s: tuple[float, ...] = ()
    graph_s: tuple[float, ...] = ()
    gpu: GpuMode | None = None


class GpuSampler:
    """measure()'s steady-state hook for one mode: the hot series (returned, as steady_s),
    then cold and graph as configured; `record()` gives the mode's GPU fields. `meter`
    (measure.energy) reads energy and utilization around the hot samples alone: the cold
    series' flushes and the graph replays are other work."""

    def __init__(self, process: GpuProcess, flops: float | None, bytes_moved: float | None,
                 meter: Any = None):
        self.process, self.flops, self.bytes_moved = process, flops, bytes_moved
        self.meter = meter
        self.series: dict[str, TakenSeries] = {}
        self.graph_error: str | None = None

    def __call__(self, step: Callable[[], Any], calls: int, turn: Callable[[], None],
                 probe: Any) -> list[float]:
        p, spec = self.process, self.process.spec
        rule = StopRule(p.min_samples, spec.max_rel_sd, max(spec.max_samples, p.min_samples),
                        spec.timeout_s)

        def run(sample: Sample, probe: Any = probe) -> TakenSeries:
            return take_series(sample, rule, lambda w: throttled(w, p.reference_mhz,
                                                                 spec.throttle_clock),
                               spec.throttle_redos, turn=turn, probe=probe, wall=p.wall)

        self.series["hot"] = run(hot_sample(p.ops, p.sensor, step, calls),
                                 probe if self.meter is None else Probes(probe, self.meter))
        if "cold" in spec.series:
            flush = p.ops.flush_buffer(spec.flush_mib << 20)
            self.series["cold"] = run(cold_sample(p.ops, p.sensor, step, flush))
        if "graph" in spec.series and isinstance(step, Pipeline):
            self.graph_error = ("a step with an input pipeline is not captured: each step "
                                "takes a new batch from the host")
        elif "graph" in spec.series:
            try:
                graph = p.ops.capture(step)
            except Exception as exc:   # some steps cannot be captured; hot and cold stand
                self.graph_error = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            else:
                self.series["graph"] = run(graph_sample(p.ops, p.sensor, graph, calls))
        return self.series["hot"].samples

    def record(self) -> GpuTimes:
        p = self.process
        found = {name: self._series(name, s) for name, s in self.series.items()}
        return GpuTimes(
            tuple(self.series["cold"].samples) if "cold" in self.series else (),
            tuple(self.series["graph"].samples) if "graph" in self.series else (),
            GpuMode(found, p.reference_mhz,
                    p.ops.flush_bytes if "cold" in p.spec.series else None, p.kind,
                    p.limit.tflops, p.limit.gbps, p.limit.source, self.graph_error))

    def _series(self, name: str, s: TakenSeries) -> GpuSeries:
        p = self.process
        achieved = roofline(median(s.samples), self.flops, self.bytes_moved,
                            p.limit, p.spec.roofline_margin, check_bandwidth=name == "cold")
        clocks = tuple(w.sm_clock_mhz for w in s.windows)
        mask = 0
        for w in s.windows:
            mask |= w.reasons or 0
        return GpuSeries(
            stop=s.stop, rel_sd=rel_sd(s.samples), elapsed_s=s.elapsed_s, redone=s.redone,
            throttled=tuple(s.throttled),
            sm_clock_mhz=clocks if any(c is not None for c in clocks) else (),
            temperature_c=_most(w.temperature_c for w in s.windows),
            power_w=_most(w.power_w for w in s.windows), reasons=reason_names(mask),
            tflops=achieved.tflops, gbps=achieved.gbps, impossible=achieved.impossible)


def _most(values) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
