"""Typed records built from a few numbers, for tests of the rules and the statistics."""
from __future__ import annotations

import dataclasses
import random

from torchgate.core.config.settings import CompareSettings, Delta
from torchgate.core.records.schema import (
    ArmId,
    BenchAB,
    BenchArm,
    BenchProcess,
    BenchRecord,
    Busy,
    ModeNumerics,
    ModeTiming,
    NumericsRecord,
    Sentinel,
    WorkloadRun,
)

DELTA = Delta()
BUSY = CompareSettings().busy_share      # compare.busy_share, as configured by default


def mode(steady=(1e-3,), first=0.5, warm=0.1, peak=1000, busy=None, **extra) -> ModeTiming:
    return ModeTiming("OK", first_call_s=first, warmup_s=warm, steady_s=tuple(steady),
                      peak_bytes=peak, items=1,
                      busy_machine=None if busy is None else Busy(busy, 0.0), **extra)


def process(steady=1e-3, sentinel=0.02, status="OK", error=None, breaks=None, rng=None,
            round_=None, peak=1000, copy=0.004, **extra) -> BenchProcess:
    """A process whose 8 samples, and its sentinel's loop and copy, lie within ±1 % of
    `steady`, `sentinel` and `copy`."""
    rng = rng or random.Random(0)
    if status != "OK":
        return BenchProcess(status, error=error, round=round_)
    counts = {} if breaks is None else {"graph_breaks": breaks, "recompiles": 0}
    m = mode([steady * rng.uniform(0.99, 1.01) for _ in range(8)],
             first=0.5 * rng.uniform(0.98, 1.02), warm=0.1 * rng.uniform(0.98, 1.02),
             peak=peak, **counts, **extra)
    return BenchProcess("OK", sentinel=Sentinel(sentinel * rng.uniform(0.99, 1.01),
                                                copy * rng.uniform(0.99, 1.01)),
                        modes={"eager": m}, round=round_)


def bench(processes: dict[str, list[BenchProcess]], modes=("eager",), **extra) -> BenchRecord:
    return BenchRecord("c", "OK", modes=tuple(modes),
                       workloads={w: WorkloadRun(tuple(p)) for w, p in processes.items()},
                       **extra)


def record(n=5, seed=0, **kw) -> BenchRecord:
    rng = random.Random(seed)
    return bench({"w": [process(rng=rng, **kw) for _ in range(n)]})


def with_ab(now: BenchRecord, base: BenchRecord, interleaved=False) -> BenchRecord:
    """`now` as the candidate arm of an A/B run whose baseline arm is `base`."""
    return dataclasses.replace(now, ab=BenchAB(
        BenchArm("/a/python", "2.13", workloads=base.workloads), ArmId("/b/python", "2.14"),
        interleaved))


def numerics(units: dict[str, dict[str, ModeNumerics]], **extra) -> NumericsRecord:
    return NumericsRecord("c", "OK", workloads=units, **extra)
