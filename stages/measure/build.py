"""How a workload is built in a worker: threads and matmul precision for the job, the
`compile` its factory gets, autocast where the precision asks for it, and how a workload's
exception becomes a status."""
from __future__ import annotations

import traceback
from functools import partial

import torch

from stages.core.records.job import Job
from stages.core.vocabulary import Status
from stages.measure.extensions import missing_kernel
from stages.measure.pipeline import Pipeline


def unsupported(exc: BaseException) -> bool:
    """Whether a workload said it cannot run on this device or dtype by design (it raised
    stages.workloads.Unsupported, of whichever revision's workloads this worker imported:
    matched by name, not identity)."""
    return any(c.__name__ == "Unsupported" and c.__module__ == "stages.workloads"
               for c in type(exc).__mro__)


def failure(exc: BaseException) -> dict:
    """A status (OOM or ERROR; SKIPPED for a workload that is unsupported here), a one-line
    message and a short traceback for an exception raised by a workload."""
    if unsupported(exc):
        return {"status": Status.SKIPPED, "error": str(exc).strip()[:500]}
    text = str(exc).lower()
    oom = (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
           or "out of memory" in text or "can't allocate memory" in text
           or "not enough memory" in text)
    first = missing_kernel(exc) or (str(exc).strip().splitlines()[0] if str(exc).strip() else "")
    return {"status": Status.OOM if oom else Status.ERROR, "error": f"{type(exc).__name__}: {first}"[:500],
            "traceback": traceback.format_exc(limit=-3)[-2000:]}


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
          workload_index: int = 0, provided: dict | None = None):
    """The workload, built by its factory for this device, dtype and mode (under autocast
    when the precision asks for it); `provided`: more arguments from torchgate (a rank's
    `rank`, `world_size` and `ddp`, measure.rank). A workload with `batches` gets a
    measure.pipeline Pipeline as its step: fetch, copy, compute, called without arguments
    like any step."""
    spec = job.workloads[workload_index]
    workload = factory(device=device, dtype=dtype,
                       compile=compiler(mode, spec.dynamic, job.device.compile_backend),
                       seed=job.seed, **spec.kwargs, **(provided or {}))
    if job.precision.autocast and dtype != torch.float64:
        inner = workload.step
        amp = getattr(torch, job.precision.autocast_dtype)
        workload.step = lambda *batch: _autocast_call(inner, device.type, amp, *batch)
    batches = getattr(workload, "batches", None)    # another revision's may predate it
    if batches is not None:
        workload.step = Pipeline(batches, workload.step, device)
    return workload


def _autocast_call(fn, device_type: str, dtype: torch.dtype, *batch):
    with torch.autocast(device_type, dtype=dtype):
        return fn(*batch)
