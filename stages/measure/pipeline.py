"""Where the step goes, for a workload with an input pipeline (`Workload.batches`).

The harness makes the step: the next host batch from the workload's iterable (a new epoch
when it runs out), its tensors copied to the device, then the workload's step on them.
Every other phase times that whole step. After the steady state, `measure_breakdown` times
single steps part by part, the device idle at each step's start:

- input wait: the host clock around fetching the next batch (a DataLoader's workers may
  have it ready; with none, this is the decode itself);
- copy: the tensors to the device, timed by the device's clock (CUDA events; elsewhere the
  host clock around a synchronize), with the bytes moved; none on the CPU, which is the host;
- compute: the workload's step, by the same clock, to its end on the device.

Per process the record keeps each part's mean per step and the bytes per step; the shares
and the diagnosis are the judge's (judge.steps).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

from torchgate.core.machine import usable_cores
from torchgate.core.records.schema import Busy
from torchgate.measure.clocks import Clock
from torchgate.measure.timing import BusyMachine, latency_calls

NO_COPY = "the device is the host: batches are not copied"


def to_device(batch: Any, device: Any) -> Any:
    """The batch with every tensor in it (in tuples, lists and dicts) on `device`;
    `non_blocking`, so that a pinned batch is copied asynchronously."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        moved = [to_device(b, device) for b in batch]
        return type(batch)(*moved) if hasattr(batch, "_fields") else type(batch)(moved)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def batch_bytes(batch: Any) -> int:
    """The bytes of every tensor in the batch."""
    if isinstance(batch, torch.Tensor):
        return batch.nbytes
    if isinstance(batch, (list, tuple)):
        return sum(batch_bytes(b) for b in batch)
    if isinstance(batch, dict):
        return sum(batch_bytes(v) for v in batch.values())
    return 0


class Pipeline:
    """The step a workload with `batches` is timed as: called without arguments like any
    other workload's step."""

    def __init__(self, batches: Iterable, compute: Callable[[Any], Any], device: Any):
        self.batches, self.compute, self.device = batches, compute, device
        self._it = None

    def next_batch(self) -> Any:
        if self._it is not None:
            try:
                return next(self._it)
            except StopIteration:
                pass
        self._it = iter(self.batches)           # the next epoch
        try:
            return next(self._it)
        except StopIteration:
            raise ValueError("the workload's batches gave no batch: give an iterable that "
                             "iter() starts again (a DataLoader, a list), not a spent "
                             "generator") from None

    def __call__(self) -> Any:
        return self.compute(to_device(self.next_batch(), self.device))


@dataclass(frozen=True)
class Breakdown:
    """The breakdown phase of a mode: over `calls` single steps, each part's mean per step
    (`copy_s`, `copy_bytes` None: nothing was copied), what else took the CPU meanwhile, and
    what contends for the cores: the loader's worker processes (None: no DataLoader), torch's
    threads, the CPUs the process may use. `unmeasured`: part -> why it was not timed.
    Empty: the phase did not run (the workload has no input pipeline)."""
    calls: int | None = None
    input_wait_s: float | None = None
    copy_s: float | None = None
    copy_bytes: float | None = None
    compute_s: float | None = None
    busy: Busy | None = None
    loader_workers: int | None = None
    torch_threads: int | None = None
    cores: int | None = None
    unmeasured: dict[str, str] = field(default_factory=dict)


def time_breakdown(pipeline: Pipeline, copy: Clock | None, compute: Clock, calls: int,
                   turn: Callable[[], None] = lambda: None, busy: Any = None,
                   wall: Callable[[], float] = time.perf_counter) -> Breakdown:
    """`calls` steps, each part timed (`copy` None: nothing is copied, the CPU), as their
    means per step. One turn of a lock-step pair covers all."""
    turn()
    if busy is not None:
        busy.start()
    waited = copied = computed = 0.0
    moved = 0
    for _ in range(calls):
        t0 = wall()
        batch = pipeline.next_batch()
        waited += wall() - t0
        if copy is not None:
            copy.start()
            on_device = to_device(batch, pipeline.device)
            copied += copy.stop()
            moved += batch_bytes(batch)
        else:
            on_device = to_device(batch, pipeline.device)
        compute.start()
        pipeline.compute(on_device)
        computed += compute.stop()      # the step has ended on the device: the next starts idle
    if busy is not None:
        busy.stop()
    workers = getattr(pipeline.batches, "num_workers", None)
    return Breakdown(calls, waited / calls,
                     copied / calls if copy is not None else None,
                     moved / calls if copy is not None else None, computed / calls,
                     busy=busy.summary() if busy is not None else None,
                     loader_workers=workers if isinstance(workers, int) else None,
                     torch_threads=torch.get_num_threads(), cores=usable_cores())


def measure_breakdown(pipeline: Pipeline, device_type: str, clock: Callable[[], Clock],
                      per_call_s: float, *, min_calls: int, target_s: float,
                      turn: Callable[[], None] = lambda: None) -> Breakdown:
    """The breakdown phase of a mode whose steady state ran at `per_call_s` per step;
    `clock` makes the device's clock (device.clock_for)."""
    calls = latency_calls(per_call_s, min_calls, target_s)
    found = time_breakdown(pipeline, None if device_type == "cpu" else clock(), clock(), calls,
                           turn, BusyMachine())
    if device_type == "cpu":
        return dataclasses.replace(found, unmeasured={"copy_s": NO_COPY})
    return found
