"""Utilization and energy over a mode's steady-state samples (on CUDA, energy and utilization
over its hot series alone).

- CPU busy share: the CPU time of the worker and its descendants (loader workers, compile
  workers) while the samples ran, per second of wall time and per torch thread: 1.0 is every
  thread busy throughout; loader workers can take it beyond 1. From the busy probe's own
  reading (timing.BusyMachine), so nothing more is read.
- Energy: a counter read before and after every sample, the differences summed: on the CPU
  RAPL's package counters (/sys/class/powercap/intel-rapl:N/energy_uj: every socket of the
  host, other programs' draw included), on CUDA NVML's total energy of the GPU. Joules per
  item are that energy over the items the samples processed; the mean power, over their wall
  time. A counter that did not advance over all the samples is no reading.
- CUDA utilization: NVML's rates read at the end of every sample, SM (the share of time a
  kernel ran) and memory (the share of time device memory was read or written), each over
  NVML's own sampling period (1/6 s to 1 s by product); the median over the samples.

Where a reading cannot be had, the mode's record says why (`unmeasured`), never a guess.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from torchgate.core.numbers import median
from torchgate.measure.nvml import Sensor
from torchgate.measure.proc import hz
from torchgate.measure.timing import MAX_ROUNDING, BusyMachine

POWERCAP = "/sys/class/powercap"
SHORT_FOR_TICKS = ("the steady state was too short for /proc's clock ticks to tell (more "
                   "bench.samples or a longer bench.sample_target_s)")
NO_NVML = "NVML is not available (install nvidia-ml-py, `pip install -e '.[gpu]'`, and an " \
          "NVIDIA driver)"


def _number(path: Path) -> float | None:
    try:
        return float(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


class Rapl:
    """The RAPL package zones of this host, and why there are none where there are none."""

    def __init__(self, root: str = POWERCAP):
        self.zones: list[Path] = []
        self.spans: tuple[float | None, ...] = ()
        self.why: str | None = None
        base = Path(root)
        if not base.is_dir():
            self.why = f"no {root}: RAPL is not exposed here (a VM, or not Linux)"
            return
        # Top-level zones only (a subzone's energy is inside its package's); psys, where a
        # platform has it, holds the packages too.
        zones = sorted(d for d in base.glob("intel-rapl:*") if d.name.count(":") == 1
                       and not _name(d).startswith("psys"))
        if not zones:
            self.why = f"no RAPL zone under {root} (a VM, or a CPU without RAPL)"
            return
        self.zones = [z for z in zones if _number(z / "energy_uj") is not None]
        if not self.zones:
            self.why = (f"{zones[0] / 'energy_uj'} is not readable by this user (root only "
                        "since Linux 5.10)")
        self.spans = tuple((_number(z / "max_energy_range_uj") or 0) * 1e-6 or None
                           for z in self.zones)

    def read(self) -> tuple[float, ...] | None:
        found = [_number(z / "energy_uj") for z in self.zones]
        return None if None in found else tuple(v * 1e-6 for v in found)


def _name(zone: Path) -> str:
    try:
        return (zone / "name").read_text(encoding="ascii").strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class Energy:
    """A mode's steady state as a meter read it: joules per item and mean power (the energy
    counter), NVML's median SM and memory utilization (shares), and metric -> why for what
    could not be read."""
    joules_per_item: float | None = None
    watts: float | None = None
    sm_util: float | None = None
    mem_util: float | None = None
    unmeasured: dict[str, str] = field(default_factory=dict)


class Meter:
    """A probe (start/stop around each sample) that sums an energy counter's differences
    and keeps a utilization reading per sample. `read`: the counters, in joules (None: no
    reading); `spans`: where each wraps to 0 (None: never)."""

    def __init__(self, read: Callable[[], tuple[float, ...] | None] | None = None,
                 spans: tuple[float | None, ...] = (), *,
                 utilization: Callable[[], tuple[float, float] | None] | None = None,
                 unmeasured: dict[str, str] | None = None,
                 wall: Callable[[], float] = time.perf_counter):
        self._read, self._spans, self._utilization, self._wall = read, spans, utilization, wall
        self.unmeasured = dict(unmeasured or {})
        self.joules, self.seconds, self.intervals, self.failed = 0.0, 0.0, 0, False
        self.utilizations: list[tuple[float, float]] = []
        self._at: tuple | None = None

    def start(self) -> None:
        self._at = (self._read() if self._read else None, self._wall())

    def stop(self) -> None:
        if self._at is None:
            return
        (before, t0), self._at = self._at, None
        after = self._read() if self._read else None
        self.seconds += self._wall() - t0
        self.intervals += 1
        if before is None or after is None:
            self.failed = True
        else:
            spans = self._spans or (None,) * len(after)
            self.joules += sum((b - a) % span if span else b - a
                               for a, b, span in zip(before, after, spans))
        found = self._utilization() if self._utilization else None
        if found is not None:
            self.utilizations.append(found)

    def record(self, items_per_interval: float | None) -> Energy:
        """What the meter read, with the reasons of what it could not give."""
        unmeasured = dict(self.unmeasured)
        joules_per_item = watts = sm_util = mem_util = None
        if self._read is not None:
            if self.failed or not self.intervals:
                unmeasured["joules_per_item"] = "an energy counter reading failed"
            elif self.joules <= 0:
                unmeasured["joules_per_item"] = (
                    f"the energy counter did not advance over {self.seconds:.3g} s of samples")
            else:
                items = self.intervals * (items_per_interval or 0)
                joules_per_item = self.joules / items if items else None
                watts = self.joules / self.seconds if self.seconds > 0 else None
        if self.utilizations:
            sm_util = median(u[0] for u in self.utilizations)
            mem_util = median(u[1] for u in self.utilizations)
        elif self._utilization is not None:
            unmeasured["sm_util"] = "NVML gave no utilization rates for this GPU"
        return Energy(joules_per_item, watts, sm_util, mem_util, unmeasured)


def open_meter(device_type: str, sensor: Sensor | None = None, torch_module: Any = None,
               powercap: str = POWERCAP) -> Meter:
    """The meter for a device type: RAPL on the CPU, NVML on CUDA (`sensor`, else opened
    here), none elsewhere; each with the reasons of what it cannot read."""
    if device_type == "cpu":
        rapl = Rapl(powercap)
        if not rapl.zones:
            return Meter(unmeasured={"joules_per_item": rapl.why or "no RAPL zone"})
        return Meter(rapl.read, rapl.spans)
    if device_type != "cuda":
        return Meter(unmeasured={"joules_per_item": f"no energy counter is read on "
                                                    f"{device_type} devices"})
    sensor = sensor if sensor is not None else Sensor.open(torch_module)
    if not sensor.available:
        return Meter(unmeasured={"joules_per_item": NO_NVML, "sm_util": NO_NVML})
    if sensor.energy_j() is None:
        return Meter(utilization=sensor.utilization, unmeasured={
            "joules_per_item": "NVML gives no energy counter for this GPU (one before Volta)"})
    return Meter(lambda: _one(sensor.energy_j()), utilization=sensor.utilization)


def _one(value: float | None) -> tuple[float, ...] | None:
    return None if value is None else (value,)


def busy_share(busy: BusyMachine, threads: int) -> float | None:
    """The CPU busy share of the process over what `busy` timed (see the module's
    docstring); None when /proc's clock ticks are too coarse for that time."""
    own = busy.totals["own"]
    if own is None or busy.wall <= 0 or threads <= 0:
        return None
    # Each interval's own CPU time is a difference of two whole-tick counts (SD 0.41 tick).
    if 0.41 * math.sqrt(2 * busy.intervals) / (hz() * busy.wall * threads) > MAX_ROUNDING:
        return None
    return own / busy.wall / threads
