"""Measurement Jobs, what the launcher asks of one worker process, for the tests that run a
worker or a part of one: a single workload on the CPU in float32, timed briefly; a test states
only what differs."""
from __future__ import annotations

import dataclasses
from typing import Any

from torchgate.core.config import DeviceSpec, PrecisionSpec
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.records.job import Job, Timing

CPU = DeviceSpec("cpu", "cpu")
FP32 = PrecisionSpec("fp32", "float32")
# 3 samples of about 5 ms, after a warm-up of at least 20 ms and 2 calls that stops at 1 s.
QUICK = Timing(3, 0.005, 0.02, 2, 1.0)
# Briefer: 2 samples of about 2 ms after 10 ms of warm-up, for a test that runs a workload
# rather than times it.
BRIEF = Timing(2, 0.002, 0.01, 2, 1.0)


def quick(**changes: Any) -> Timing:
    """QUICK with `changes` (Timing's fields by name)."""
    return dataclasses.replace(QUICK, **changes)


def job(target: str, args: dict[str, Any] | None = None, *, name: str = "w",
        kind: str = "bench", modes: tuple[str, ...] = ("eager",), device: DeviceSpec = CPU,
        precision: PrecisionSpec = FP32, timing: Timing = QUICK, **spec: Any) -> Job:
    """A Job of one workload `name`, built by `target` with `args`; `spec` sets the workload's
    other fields (latency=True, ranks=2, ...). Seed 0."""
    workload = WorkloadSpec(name, target, dict(args or {}), **spec)
    return Job(kind, 0, device, precision, (workload,), tuple(modes), timing)
