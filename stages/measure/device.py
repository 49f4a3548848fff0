"""Device dispatch, in one place: by device type, which device a cell names, how to wait for
its work (sync_for), how to time it (clock_for) and how to read its peak memory. Types
torchgate knows by name (cpu, cuda, mps, xpu) are handled here; any other goes through
measure.accelerator (torch.accelerator and the backend's device module)."""
from __future__ import annotations

import resource
import sys
from typing import Callable

import torch

from torchgate.core.config import DeviceSpec
from torchgate.measure import accelerator
from torchgate.measure.accelerator import Unavailable
from torchgate.measure.clocks import Clock, EventClock, SyncClock


def sync_for(device_type: str) -> Callable[[], None]:
    if device_type == "cuda":
        return torch.cuda.synchronize
    if device_type == "mps":
        return torch.mps.synchronize
    if device_type == "xpu":
        return torch.xpu.synchronize
    if device_type != "cpu":    # a backend known by type only: through torch.accelerator
        return accelerator.generic_sync(device_type)
    return lambda: None


def clock_for(device_type: str) -> Clock:
    if device_type == "cuda":
        return EventClock(lambda: torch.cuda.Event(enable_timing=True))
    if device_type not in ("cpu", "mps", "xpu"):
        return accelerator.generic_clock(device_type)
    return SyncClock(sync_for(device_type))


def resolve_device(spec: DeviceSpec) -> torch.device:
    accelerator.import_backends(spec.name, spec.modules)
    if spec.type == "cpu":
        return torch.device("cpu")
    if spec.type not in accelerator.KNOWN:
        return accelerator.resolve(spec.name, spec.type)
    module = getattr(torch, spec.type, None)
    available = getattr(module, "is_available", None)
    if available is None or not available():
        raise Unavailable(f"device {spec.name!r} ({spec.type}) is not available on this machine "
                          f"with torch {torch.__version__}")
    return torch.device(spec.type)


def peak_memory_reset(device: torch.device) -> None:
    """Start a mode's peak afresh. On the CPU (Linux) writing 5 to /proc/self/clear_refs
    resets the resident high-water mark to the current RSS, so a mode does not inherit the
    peak of the one before it."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    elif device.type == "xpu":
        torch.xpu.reset_peak_memory_stats()
    elif device.type not in accelerator.KNOWN:
        accelerator.reset_peak(device.type)
    elif device.type == "cpu":
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
                fh.write("5")
        except OSError:
            pass


def peak_memory_bytes(device: torch.device) -> int | None:
    """None where the backend keeps no statistics (see accelerator.notes)."""
    return _memory_bytes(device, peak=True)


def memory_in_use_bytes(device: torch.device) -> int | None:
    """What the process holds now, as `peak_memory_bytes` counts it: read right after
    `peak_memory_reset`, the floor the mode's own increment is measured from. None where
    the backend keeps no memory statistics (accelerator.notes), or off Linux on the CPU."""
    return _memory_bytes(device, peak=False)


def _memory_bytes(device: torch.device, *, peak: bool) -> int | None:
    """The device's allocated bytes (peak since the reset, or now); on the CPU, resident."""
    if device.type not in accelerator.KNOWN:
        return accelerator.peak_bytes(device.type, "peak" if peak else "current")
    if device.type in ("cuda", "xpu"):
        module = getattr(torch, device.type)
        return int(module.max_memory_allocated() if peak else module.memory_allocated())
    if device.type == "mps":
        return int(torch.mps.driver_allocated_memory())
    return resident_peak_bytes() if peak else _status_bytes("VmRSS:")


def _status_bytes(field: str) -> int | None:
    """A size from Linux's /proc/self/status; None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def resident_peak_bytes() -> int:
    """This process's resident high-water mark. Linux: VmHWM of its own memory map.
    getrusage's ru_maxrss is no substitute there: it keeps the high-water of the memory the
    process had before exec, a copy of its parent's (measured: 611 MiB for a child of a
    600 MiB parent whose own peak was 11 MiB)."""
    peak = _status_bytes("VmHWM:")
    if peak is not None:
        return peak
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024   # bytes on macOS
