"""NVML through nvidia-ml-py (`pynvml`): the SM clock, temperature, power and clock-event
reasons of a sample window, the energy counter and utilization rates (measure.energy), and
the GPU's stable clocks for the environment record.

Optional and imported lazily (`pip install 'torchgate[gpu]'`): without it, without an NVIDIA
driver, or where a reading is not supported, the reading is None, never a guess.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from torchgate.measure.gpu_rules import Window

CLOCK_SM, CLOCK_MEM, TEMPERATURE_GPU = 1, 2, 0     # NVML's enum values, stable across releases


def _read(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def library() -> Any | None:
    """pynvml, initialized; None when it is not installed or NVML cannot start."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml


def _handle(nvml: Any, torch_module: Any, index: int) -> Any | None:
    """The NVML handle of torch's CUDA device `index`: by UUID (CUDA_VISIBLE_DEVICES may
    renumber devices), else by the index CUDA_VISIBLE_DEVICES maps it to."""
    uuid = _read(lambda: str(torch_module.cuda.get_device_properties(index).uuid))
    if uuid:
        found = _read(nvml.nvmlDeviceGetHandleByUUID,
                      uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
        if found is not None:
            return found
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if index >= len(entries) or not entries[index].isdigit():
            return None
        index = int(entries[index])
    return _read(nvml.nvmlDeviceGetHandleByIndex, index)


class Sensor:
    """Reads one GPU; `window()` is called once per sample, while the device still works."""

    def __init__(self, nvml: Any | None = None, handle: Any | None = None):
        self._nvml, self._handle = nvml, handle

    @classmethod
    def open(cls, torch_module: Any, index: int | None = None) -> "Sensor":
        nvml = library()
        if nvml is None:
            return cls()
        index = torch_module.cuda.current_device() if index is None else index
        handle = _handle(nvml, torch_module, index)
        return cls(nvml, handle) if handle is not None else cls()

    @property
    def available(self) -> bool:
        return self._handle is not None

    def window(self) -> Window:
        if self._handle is None:
            return Window()
        nvml, h = self._nvml, self._handle
        power = _read(nvml.nvmlDeviceGetPowerUsage, h)
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)   # before NVML 12.5
        return Window(sm_clock_mhz=_number(_read(nvml.nvmlDeviceGetClockInfo, h, CLOCK_SM)),
                      temperature_c=_number(_read(nvml.nvmlDeviceGetTemperature, h,
                                                  TEMPERATURE_GPU)),
                      power_w=None if power is None else power / 1000,
                      reasons=_read(lambda: int(reasons(h))))

    def energy_j(self) -> float | None:
        """The GPU's energy counter in joules (NVML counts millijoules since the driver
        loaded; Volta and newer)."""
        if self._handle is None:
            return None
        found = _read(self._nvml.nvmlDeviceGetTotalEnergyConsumption, self._handle)
        return None if found is None else found / 1000

    def utilization(self) -> tuple[float, float] | None:
        """(SM, memory) as shares: the time a kernel ran, and the time device memory was
        read or written, over NVML's own sampling period."""
        if self._handle is None:
            return None
        rates = _read(self._nvml.nvmlDeviceGetUtilizationRates, self._handle)
        return None if rates is None else (rates.gpu / 100, rates.memory / 100)

    def reference_sm_clock_mhz(self) -> float | None:
        """What throttling is judged against: the default applications clock (NVBench's
        "default SM clock"), else the maximum SM clock."""
        if self._handle is None:
            return None
        nvml, h = self._nvml, self._handle
        default = _read(nvml.nvmlDeviceGetDefaultApplicationsClock, h, CLOCK_SM)
        return _number(default or _read(nvml.nvmlDeviceGetMaxClockInfo, h, CLOCK_SM))


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def clocks(torch_module: Any, count: int) -> list[dict | None]:
    """Per CUDA device, what stays put until an administrator changes it: NVML's UUID, the
    maximum and default SM clocks, the applications clock now set, the maximum memory clock
    and the enforced power limit. None for a device NVML cannot read."""
    nvml = library()
    if nvml is None:
        return [None] * count
    found = []
    try:
        for index in range(count):
            h = _handle(nvml, torch_module, index)
            if h is None:
                found.append(None)
                continue
            limit = _read(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
            found.append({
                "uuid": _text(_read(nvml.nvmlDeviceGetUUID, h)),
                "sm_max_mhz": _read(nvml.nvmlDeviceGetMaxClockInfo, h, CLOCK_SM),
                "sm_default_mhz": _read(nvml.nvmlDeviceGetDefaultApplicationsClock, h, CLOCK_SM),
                "sm_applications_mhz": _read(nvml.nvmlDeviceGetApplicationsClock, h, CLOCK_SM),
                "mem_max_mhz": _read(nvml.nvmlDeviceGetMaxClockInfo, h, CLOCK_MEM),
                "power_limit_w": None if limit is None else limit / 1000,
            })
    finally:
        _read(nvml.nvmlShutdown)
    return found
