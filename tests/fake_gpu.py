"""A simulated CUDA device for GPU timing tests, as triton tests its timer: one stream whose
work runs in order on a device timeline, a host that launches it, and events that stamp the
stream's time when the stream reaches them.

A kernel cannot start before the host has launched it (launch cost + latency), so host
overhead shows up inside a timed window exactly as it does on a real device. A call costs
`hot` seconds when its data sits in L2, `hot + miss` right after a flush; the flush costs
`flush_s`. Every flush and every timed window is kept, to check that they never overlap.
"""
from __future__ import annotations

import random


class FakeEvent:
    def __init__(self, gpu: "FakeGpu"):
        self.gpu, self.stamp = gpu, None

    def record(self) -> None:
        g = self.gpu
        g.host += g.launch_s
        self.stamp = g.device = max(g.device, g.host + g.latency_s)

    def synchronize(self) -> None:
        self.gpu.host = max(self.gpu.host, self.stamp)

    def elapsed_time(self, end: "FakeEvent") -> float:
        self.gpu.windows.append((self.stamp, end.stamp))
        return (end.stamp - self.stamp) * 1e3          # milliseconds, as CUDA says


class FakeBuffer:
    def __init__(self, gpu: "FakeGpu", nbytes: int):
        self.gpu, self.nbytes = gpu, nbytes

    def numel(self) -> int:
        return self.nbytes

    def zero_(self) -> None:
        g = self.gpu
        start = g.launch()
        g.device = start + g.flush_s
        g.flushes.append((start, g.device))
        g.l2_warm = False


class FakeGraph:
    def __init__(self, gpu: "FakeGpu"):
        self.gpu = gpu

    def replay(self) -> None:
        self.gpu.kernel(graph=True)


class FakeGpu:
    """The device a GpuProcess drives (CudaOps' methods), and `kernel()`, one step's work."""

    def __init__(self, *, hot: float, miss: float = 0.0, flush_s: float = 100e-6,
                 launch_s: float = 4e-6, latency_s: float = 3e-6, graph_launch_s: float = 1e-6,
                 noise: float = 0.0, seed: int = 0, spikes: float = 0.0):
        self.hot, self.miss, self.flush_s, self.noise = hot, miss, flush_s, noise
        self.launch_s, self.latency_s, self.graph_launch_s = launch_s, latency_s, graph_launch_s
        self.spikes = spikes                 # share of calls that take 3x as long
        self.rng = random.Random(seed)
        self.host = self.device = 0.0
        self.l2_warm = False
        self.flushes: list[tuple[float, float]] = []
        self.windows: list[tuple[float, float]] = []
        self.allocations = 0
        self._buffer = None
        self.captured = 0

    # -- what CudaOps offers --------------------------------------------------------------
    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def flush_buffer(self, nbytes: int) -> FakeBuffer:
        if self._buffer is None:
            self.allocations += 1
            self._buffer = FakeBuffer(self, nbytes)
        return self._buffer

    @property
    def flush_bytes(self) -> int:
        return 0 if self._buffer is None else self._buffer.nbytes

    def capture(self, step) -> FakeGraph:
        self.captured += 1
        return FakeGraph(self)

    # -- the simulated work ---------------------------------------------------------------
    def launch(self, cost: float | None = None) -> float:
        """The host launches one kernel; when the device starts it."""
        self.host += self.launch_s if cost is None else cost
        return max(self.device, self.host + self.latency_s)

    def kernel(self, graph: bool = False) -> None:
        start = self.launch(self.graph_launch_s if graph else None)
        cost = self.hot + (0.0 if self.l2_warm else self.miss)
        cost *= 1 + self.noise * self.rng.gauss(0, 1)
        if self.spikes and self.rng.random() < self.spikes:
            cost *= 3
        self.device = start + cost
        self.l2_warm = True

    def wall(self) -> float:
        return self.host


class EventClock:
    """measure()'s clock on the fake device (timing.EventClock's behaviour)."""

    def __init__(self, gpu: FakeGpu):
        self.begin, self.end = gpu.event(), gpu.event()

    def start(self) -> None:
        self.begin.record()

    def stop(self) -> float:
        self.end.record()
        self.end.synchronize()
        return self.begin.elapsed_time(self.end) * 1e-3


class FakeSensor:
    """NVML's readings, scripted per sample window: `script(i)` gives the i-th Window. The
    energy counter adds `power_w` for every second the device works (its timeline, which
    moves only while it has work); utilization is `rates` (None: NVML gives none)."""

    available = True

    def __init__(self, script=None, reference_mhz: float | None = 1980.0, gpu=None,
                 read_s: float = 30e-6, power_w: float | None = 500.0,
                 rates: tuple[float, float] | None = (0.9, 0.4)):
        from torchgate.measure.gpu_rules import Window
        self.script = script or (lambda i: Window(1980.0, 60.0, 500.0, 0))
        self.reference, self.gpu, self.read_s, self.reads = reference_mhz, gpu, read_s, 0
        self.power_w, self.rates = power_w, rates

    def energy_j(self):
        if self.power_w is None or self.gpu is None:
            return None
        return 1e4 + self.power_w * self.gpu.device     # a counter never starts at zero

    def utilization(self):
        return self.rates

    def window(self):
        if self.gpu is not None:
            self.gpu.host += self.read_s       # reading NVML costs the host time
        found = self.script(self.reads)
        self.reads += 1
        return found

    def reference_sm_clock_mhz(self):
        return self.reference
