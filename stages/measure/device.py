"""The device side of a worker: which device, how a workload is built and compiled there, its
peak memory, and how a workload's exception becomes a status."""
from __future__ import annotations

import resource
import sys
import traceback
from functools import partial

import torch

from stages.core.config import DeviceSpec
from stages.core.schema import Job
from stages.measure import accelerator
from stages.measure.accelerator import Unavailable  # noqa: F401  (the worker's SKIPPED)
from stages.measure.extensions import missing_kernel


def failure(exc: BaseException) -> dict:
    """A status (OOM or ERROR), a one-line message and a short traceback for an exception
    raised by a workload."""
    text = str(exc).lower()
    oom = (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
           or "out of memory" in text or "can't allocate memory" in text
           or "not enough memory" in text)
    first = missing_kernel(exc) or (str(exc).strip().splitlines()[0] if str(exc).strip() else "")
    return {"status": "OOM" if oom else "ERROR", "error": f"{type(exc).__name__}: {first}"[:500],
            "traceback": traceback.format_exc(limit=-3)[-2000:]}


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


def configure(job: Job) -> None:
    threads = job.workload.threads or job.device.threads    # a sweep's unit sets its own
    if threads:
        torch.set_num_threads(threads)
    torch.set_float32_matmul_precision(job.precision.matmul_precision)


def compiler(mode: str, dynamic: bool | None = None, backend: str | None = None):
    """The `compile` a factory gets; `dynamic` as the workload's `_dynamic_` sets it (None:
    torch.compile's automatic dynamic shapes, after a first recompile), `backend` as the
    device's `compile_backend` (None: inductor)."""
    if mode == "eager":
        return lambda fn: fn
    chosen = {"dynamic": dynamic, **({"backend": backend} if backend else {})}
    if mode == "compiled":
        return partial(torch.compile, **chosen)
    return partial(torch.compile, mode=mode, **chosen)


def build(job: Job, factory, device: torch.device, dtype: torch.dtype, mode: str,
          workload_index: int = 0):
    """The workload, built by its factory for this device, dtype and mode (under autocast
    when the precision asks for it)."""
    spec = job.workloads[workload_index]
    workload = factory(device=device, dtype=dtype,
                       compile=compiler(mode, spec.dynamic, job.device.compile_backend),
                       seed=job.seed, **spec.kwargs)
    if job.precision.autocast and dtype != torch.float64:
        inner = workload.step
        amp = getattr(torch, job.precision.autocast_dtype)
        workload.step = lambda: _autocast_call(inner, device.type, amp)
    return workload


def _autocast_call(fn, device_type: str, dtype: torch.dtype):
    with torch.autocast(device_type, dtype=dtype):
        return fn()


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
    if device.type not in accelerator.KNOWN:
        return accelerator.peak_bytes(device.type)
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated())
    if device.type == "xpu":
        return int(torch.xpu.max_memory_allocated())
    if device.type == "mps":
        return int(torch.mps.driver_allocated_memory())
    return resident_peak_bytes()


def resident_peak_bytes() -> int:
    """This process's resident high-water mark. Linux: VmHWM of its own memory map.
    getrusage's ru_maxrss is no substitute there: it keeps the high-water of the memory the
    process had before exec, a copy of its parent's (measured: 611 MiB for a child of a
    600 MiB parent whose own peak was 11 MiB)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024   # bytes on macOS
