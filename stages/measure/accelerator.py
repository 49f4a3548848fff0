"""Any accelerator: a device type torchgate does not know by name, measured through PyTorch's
device-generic API.

An out-of-tree backend (AWS Trainium's, a vendor's PrivateUse1 device) registers itself with
torch, usually when its package is imported (`device.<name>.modules`, or torch's backend
autoloading). torchgate then asks `torch.accelerator` (or the backend's device module,
`torch.<type>`) what it asks CUDA by name: is the device there, how to wait for its work,
how to time it (device events where the backend has them), its peak memory (where it keeps
statistics). What a backend cannot provide is recorded as not measured, with the reason,
never filled in: a peak of 0 bytes from an allocator that keeps no statistics is not a
measurement.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Callable

import torch

from torchgate.measure.clocks import Clock, EventClock, SyncClock

KNOWN = ("cpu", "cuda", "mps", "xpu")     # timed and read by name (device.py)


class Unavailable(Exception):
    """The device of this cell is not present on this machine."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}".rstrip(": ")


def import_backends(name: str, modules) -> None:
    """Import the packages that register a device's backend; one that does not import means
    the device is not available here."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise Unavailable(f"device {name!r}: its backend module {module!r} could not be "
                              f"imported ({_first_line(exc)})") from None


def _current_type() -> str | None:
    """The accelerator torch was built for or a backend registered (PrivateUse1), if any."""
    try:
        found = torch.accelerator.current_accelerator()
    except (AttributeError, RuntimeError):   # torch before 2.6, or a broken registration
        return None
    return found.type if found is not None else None


def _module(device_type: str):
    return getattr(torch, device_type, None)


def resolve(name: str, device_type: str) -> torch.device:
    """The device of a type torchgate does not know by name, or Unavailable with the reason.
    It must be able to synchronize: timings of work still running would be launch times."""
    if _current_type() == device_type:
        if not torch.accelerator.is_available():
            raise Unavailable(f"device {name!r} ({device_type}): the backend is registered "
                              "but reports no device available")
    else:
        available = getattr(_module(device_type), "is_available", None)
        if available is None or not available():
            raise Unavailable(
                f"device {name!r} ({device_type}) is not available: no backend registered for "
                f"device type {device_type!r} with torch {torch.__version__} (install its "
                f"PyTorch backend, or name the module that registers it in "
                f"device.{name}.modules)")
    if synchronizer(device_type) is None:
        raise Unavailable(f"device {name!r} ({device_type}): the backend cannot synchronize "
                          "(neither torch.accelerator.synchronize nor "
                          f"torch.{device_type}.synchronize works), so its timings would "
                          "measure launches, not work")
    return torch.device(device_type)


@functools.cache
def synchronizer(device_type: str) -> Callable[[], None] | None:
    """A working way to wait for the device: torch.accelerator's, else the device module's;
    None when neither works."""
    found = []
    if _current_type() == device_type:
        found.append(torch.accelerator.synchronize)
    sync = getattr(_module(device_type), "synchronize", None)
    if callable(sync):
        found.append(sync)
    for candidate in found:
        try:
            candidate()
            return candidate
        except Exception:      # "Backend doesn't support synchronizing ..."
            continue
    return None


def generic_sync(device_type: str) -> Callable[[], None]:
    sync = synchronizer(device_type)
    if sync is None:
        raise Unavailable(f"device type {device_type!r} cannot synchronize")
    return sync


def _event_clock(device_type: str) -> EventClock:
    return EventClock(lambda: torch.Event(device=device_type, enable_timing=True))


@functools.cache
def has_timing_events(device_type: str) -> bool:
    """Whether the backend records, waits for and times events (one trial)."""
    try:
        clock = _event_clock(device_type)
        clock.start()
        return clock.stop() >= 0
    except Exception:          # "Backend doesn't support elapsedTime", no torch.Event ...
        return False


def generic_clock(device_type: str) -> Clock:
    if has_timing_events(device_type):
        return _event_clock(device_type)
    return SyncClock(generic_sync(device_type))


def _memory_stats(device_type: str) -> tuple[dict, str | None]:
    """The allocator's statistics, or why there are none."""
    generic = _current_type() == device_type
    asked = "torch.accelerator.memory_stats" if generic else f"torch.{device_type}.memory_stats"
    try:
        stats = torch.accelerator.memory_stats() if generic else getattr(
            _module(device_type), "memory_stats")()
    except Exception as exc:   # no DeviceAllocator, no memory_stats in the device module
        return {}, (f"the {device_type} backend keeps no memory statistics ({asked} raised "
                    f"{type(exc).__name__})")
    if not stats or "allocated_bytes.all.peak" not in stats:
        return {}, f"the {device_type} backend keeps no memory statistics"
    return stats, None


def reset_peak(device_type: str) -> None:
    if _memory_stats(device_type)[1] is None:
        try:
            if _current_type() == device_type:
                torch.accelerator.reset_peak_memory_stats()
            else:
                _module(device_type).reset_peak_memory_stats()
        except Exception:
            pass


def peak_bytes(device_type: str, which: str = "peak") -> int | None:
    """The allocator's peak since the reset, or ("current") what it holds now."""
    stats, _ = _memory_stats(device_type)
    value = stats.get(f"allocated_bytes.all.{which}") if stats else None
    return None if value is None else int(value)


@dataclass(frozen=True)
class Notes:
    """What a mode's record says of its device's backend: how its calls were timed (None: a
    device known by name) and what the backend could not provide (metric -> why)."""
    clock: str | None = None
    unmeasured: dict[str, str] = field(default_factory=dict)


def notes(device_type: str) -> Notes:
    """The notes of a generic device; none for a device known by name."""
    if device_type in KNOWN:
        return Notes()
    why = _memory_stats(device_type)[1]
    return Notes("events" if has_timing_events(device_type) else "synchronize",
                 {"peak_bytes": why} if why else {})
