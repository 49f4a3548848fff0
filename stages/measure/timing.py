"""The phases of a measurement: first call, warm-up, steady state; and what else took the CPU
meanwhile (BusyMachine) and how fast the machine itself was (SentinelProbe); after the steady
state, the tail latency of single calls and the shape changes of a compiled mode.

Phases are timed through a Clock (measure.clocks), which device.clock_for picks per device
type; tests pass a simulated one. Each steady-state sample times a batch of back-to-back calls
between one pair of clock reads, which on a GPU cuts process-to-process spread several-fold.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from torchgate.core.config.settings import BenchSettings
from torchgate.core.metrics import PHASES  # the timed phases, as metrics
from torchgate.core.numbers import median
from torchgate.core.records.schema import Busy, Sentinel, ShapeRun
from torchgate.measure.clocks import Clock, SyncClock
from torchgate.measure.proc import (
    CGROUP,
    PROC,
    allowed_cpus,
    cpu_quota,
    cpu_times,
    hz,
    run_queue_ns,
    tree_cpu_s,
)


class BusyMachine:
    """What else took the CPU while this process was timed: other programs' busy time on the
    CPUs it may run on (/proc/stat per CPU, minus the CPU time of this process and its
    descendants), hypervisor steal, and how long its threads waited on a run queue. Linux
    only; a reading the system cannot give is None.

    Code-independent like the sentinel, but it sees what the sentinel cannot: on a 2-core
    machine one busy neighbour can stall every parallel region of a 2-thread workload.

    Capacity: the CPUs this process may run on (its affinity mask), and of them only its
    cgroup's quota (docker --cpus): other programs' time counts only where it ate into that
    quota, i.e. beyond the CPUs the quota leaves to others. So a container limited to 2 CPUs
    on a busy 64-CPU host is not read as busy, and one pinned to 2 CPUs sees those 2."""

    def __init__(self, proc: str = PROC, cgroup: str = CGROUP,
                 wall: Callable[[], float] = time.perf_counter):
        self._proc, self._wall = proc, wall
        self._cpus = allowed_cpus(proc)
        self.cpus = len(self._cpus) if self._cpus else (os.cpu_count() or 1)
        quota = cpu_quota(proc, cgroup)
        self.limit = min(self.cpus, quota) if quota else float(self.cpus)
        self.wall, self.intervals = 0.0, 0
        self.totals: dict[str, float | None] = {"busy": 0.0, "steal": 0.0, "own": 0.0,
                                                "queue": 0.0}
        self._at: dict | None = None

    def _read(self) -> dict:
        times = cpu_times(self._cpus, self._proc)
        return {"wall": self._wall(), "times": times,
                "tree": tree_cpu_s(self._proc), "self": time.process_time(),
                "queue": run_queue_ns(self._proc)}

    def start(self) -> None:
        self._at = self._read()

    def stop(self) -> None:
        if self._at is None:
            return
        a, b = self._at, self._read()
        self._at = None
        self.wall += b["wall"] - a["wall"]
        self.intervals += 1
        parts = {"busy": None, "steal": None, "own": None, "queue": None}
        if a["times"] and b["times"]:
            parts["busy"], parts["steal"] = (y - x for x, y in zip(a["times"], b["times"]))
        if a["tree"] is not None and b["tree"] is not None:
            parts["own"] = max(sum(b["tree"].values()) - sum(a["tree"].values()), 0.0)
        else:                           # no /proc/<pid>/stat: this process alone
            parts["own"] = b["self"] - a["self"]
        if a["queue"] is not None and b["queue"] is not None:
            # Threads that exited in between take their delay with them (a small undercount).
            parts["queue"] = sum(ns - a["queue"].get(tid, 0)
                                 for tid, ns in b["queue"].items()) * 1e-9
        for key, value in parts.items():
            total = self.totals[key]
            self.totals[key] = None if total is None or value is None else total + value

    def summary(self) -> Busy | None:
        """Shares of the CPU time this process could use while it was timed: other programs',
        the hypervisor's steal, its threads' waiting time per second (summed over threads)
        and the capacity the shares are of; None when nothing was read, or too little time
        for /proc's clock ticks to tell (then the judge goes by the steady samples')."""
        t = self.totals
        if self.wall <= 0 or t["busy"] is None or self._rounding() > MAX_ROUNDING:
            return None
        others = max(t["busy"] - t["own"], 0.0) - (self.cpus - self.limit) * self.wall
        return Busy(other_cpu=_share(others, self.limit * self.wall),
                    steal=_share(t["steal"], self.cpus * self.wall),
                    run_queue=None if t["queue"] is None else max(t["queue"], 0.0) / self.wall,
                    cpus=self.limit)

    def _rounding(self) -> float:
        """The SD of other_cpu that /proc's whole clock ticks alone cause: over every interval
        each CPU's busy time and this process's CPU time is a difference of two rounded
        counts (SD 0.41 tick). An eager first call of a few milliseconds cannot be read."""
        reads = self.intervals * (self.cpus + 1)
        return 0.41 * math.sqrt(reads) / (hz() * self.limit * self.wall)


MAX_ROUNDING = 0.1         # coarser than this, a reading is no reading (None)


def _share(part: float, whole: float) -> float:
    return min(max(part / whole, 0.0), 1.0)


class SentinelProbe:
    """Machine speed, independent of the code under test: a pure-Python loop and a 32 MiB
    memory copy (the standard library's memmove, so that no torch upgrade moves it), timed in
    short bursts spread over the process's life (before its first mode and after each); the
    process's reading is its fastest repetition of each.

    Why bursts: on a shared 2-core VM the fastest of one burst's loops varied 6 % from process
    to process, the fastest over three bursts 2-4 %; a machine's slow moments pass, its speed
    does not. The copy stays noisier (8-10 %): memory bandwidth is shared with the host's other
    tenants."""

    METHOD = "bursts-v2"          # a reading taken another way is not compared with this one
    LOOP_N, LOOP_REPS, COPY_BYTES, COPY_REPS = 20_000, 20, 32 << 20, 6

    def __init__(self):
        self.loop: list[float] = []
        self.copy: list[float] = []

    def burst(self) -> None:
        for _ in range(self.LOOP_REPS):
            t0 = time.perf_counter()
            sum(i * i for i in range(self.LOOP_N))
            self.loop.append(time.perf_counter() - t0)
        src, dst = bytearray(b"\x01") * self.COPY_BYTES, bytearray(self.COPY_BYTES)
        for _ in range(self.COPY_REPS):
            t0 = time.perf_counter()
            dst[:] = src
            self.copy.append(time.perf_counter() - t0)
        del src, dst              # freed before the next mode: its peak memory is its own

    def reading(self) -> Sentinel:
        return Sentinel(min(self.loop), min(self.copy), self.METHOD)




class _NoProbe:
    def start(self) -> None: ...
    def stop(self) -> None: ...


class Probes:
    """Several probes read around the same windows: started in order, stopped in reverse
    (None: no probe)."""

    def __init__(self, *probes: Any):
        self.probes = [p for p in probes if p is not None]

    def start(self) -> None:
        for p in self.probes:
            p.start()

    def stop(self) -> None:
        for p in reversed(self.probes):
            p.stop()


WINDOW = 5           # calls per window when telling warm-up from steady state
SETTLED = 0.10       # a window within 10 % of the steady level is at that level


@dataclass
class Phases:
    first_call_s: float                      # compile time in compiled modes
    warmup_s: float                          # the calls after the first until steady state
    warmup_calls: int                        # ... how many they were
    calls_per_sample: int
    steady_s: list[float] = field(default_factory=list)  # per call, one entry per sample
    first_output: Any = None
    warmup_excess_s: float = 0.0             # what those calls cost beyond steady-state speed
    warmup_settled: bool = True              # False: still not steady at bench.warmup_max_s


def still_falling(times: list[float], window: int = WINDOW, tolerance: float = SETTLED) -> bool:
    """Whether the newest calls are still getting faster: the last window's median more than
    `tolerance` below the window before it."""
    if len(times) < 2 * window:
        return True
    return median(times[-window:]) < (1 - tolerance) * median(times[-2 * window:-window])


def steady_start(times: list[float], window: int = WINDOW,
                 tolerance: float = SETTLED) -> tuple[int, float]:
    """(k, level): the steady level is the median of the last window, and the steady state
    starts at call k, the first at that level (within `tolerance`) in the first window whose
    median is too: where the calls first reach steady-state speed. Windows, not single calls,
    and the first arrival, not the last: a slow call, or a slow patch later on, is noise, not
    warm-up."""
    level = median(times[-window:])
    limit = (1 + tolerance) * level
    k = next((i for i in range(max(1, len(times) - window + 1))
              if median(times[i:i + window]) <= limit), len(times) - 1)
    # A window's median hides its first slow calls: those are warm-up still.
    while k < len(times) - 1 and times[k] > limit:
        k += 1
    return k, level


def warm_up(step: Callable[[], Any], clock: Clock, *, warmup_s: float, min_calls: int,
            max_s: float) -> tuple[list[float], bool]:
    """Time calls one by one for at least `warmup_s` and `min_calls`, then until they stop
    getting faster, or until `max_s`: (the call times, whether they settled)."""
    times: list[float] = []
    spent = 0.0
    while True:
        clock.start()
        step()
        times.append(clock.stop())
        spent += times[-1]
        if spent >= warmup_s and len(times) >= max(min_calls, 2 * WINDOW) \
                and not still_falling(times):
            return times, True
        if spent >= max_s:
            return times, False


# A device's own steady-state sampling (measure.gpu_timing): (step, calls per sample, turn,
# busy probe) -> seconds per call, one entry per sample.
Sampler = Callable[[Callable[[], Any], int, Callable[[], None], Any], list[float]]


def measure(step: Callable[[], Any], clock: Clock, *, samples: int, sample_target_s: float,
            warmup_s: float, min_warmup_calls: int,
            warmup_max_s: float = BenchSettings.warmup_max_s,
            after_first: Callable[[], None] = lambda: None,
            turn: Callable[[], None] = lambda: None, busy: dict | None = None,
            sampler: Sampler | None = None, meter: Any = None) -> Phases:
    """Time the first call, warm up, then take `samples` batched steady-state samples (or
    leave the steady state to `sampler`, with the calibrated calls per sample).

    Warm-up is what it costs to get from the first call to steady-state speed: the calls
    after the first up to and including the first that runs at the steady level (found from
    the call times themselves, see `steady_start`), and their excess over that level.

    `turn()` waits for this process's turn before the first call and before every sample:
    the two arms of an interleaved A/B pair alternate there, so each sample of one arm sits
    next to a sample of the other and both see the machine at the same speed. `busy` maps
    "first_call_s", "warmup_s" and "steady_s" to a BusyMachine each, which reads what else
    took the CPU during that phase (every sample of it), outside the waits for a turn.
    `meter` (measure.energy) is read around every steady-state sample too; a `sampler`
    reads its own."""
    probe = {phase: (busy or {}).get(phase) or _NoProbe() for phase in PHASES}
    turn()
    probe["first_call_s"].start()
    clock.start()
    first_output = step()
    first_call_s = clock.stop()
    probe["first_call_s"].stop()
    after_first()

    probe["warmup_s"].start()
    warm_times, settled = warm_up(step, clock, warmup_s=warmup_s, min_calls=min_warmup_calls,
                                  max_s=warmup_max_s)
    probe["warmup_s"].stop()
    k, level = steady_start(warm_times)
    if not settled:
        k = len(warm_times) - 1
    per_call = max(level, 1e-9)
    calls = max(1, round(sample_target_s / per_call))

    if sampler is not None:
        steady = sampler(step, calls, turn, probe["steady_s"])
    else:
        steady = batched_samples(step, clock, calls, samples, turn, probe["steady_s"]
                                 if meter is None else Probes(probe["steady_s"], meter))
    return Phases(first_call_s, sum(warm_times[:k + 1]), k + 1, calls, steady, first_output,
                  max(0.0, sum(warm_times[:k]) - k * level), settled)


def batched_samples(step: Callable[[], Any], clock: Clock, calls: int, samples: int,
                    turn: Callable[[], None], probe: Any) -> list[float]:
    """`samples` samples, each timing `calls` back-to-back calls: seconds per call."""
    steady = []
    for _ in range(samples):
        turn()
        probe.start()
        clock.start()
        for _ in range(calls):
            step()
        steady.append(clock.stop() / calls)
        probe.stop()
    return steady


# ---- latency ------------------------------------------------------------
# Tail latency: single synchronized calls, as a caller waiting for each result sees them.
#
# The steady state times batches of calls, which is what throughput needs but hides the slow
# call among many. For workloads that ask for it (`_latency_: true`), after the steady state a
# process times single calls between two device synchronizations (host clock: the caller's
# wait, launch overhead included) and keeps their 50th, 90th and 99th percentiles: one summary
# per process per percentile, compared across processes like the steady state.

QUANTILES = (0.50, 0.90, 0.99)


@dataclass(frozen=True)
class Latency:
    """The latency phase of a mode: how many single calls, their 50th, 90th and 99th
    percentiles, and what else took the CPU meanwhile. Empty: the phase did not run (the
    workload asks for no `_latency_`)."""
    calls: int | None = None
    p50_s: float | None = None
    p90_s: float | None = None
    p99_s: float | None = None
    busy: Busy | None = None


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of sorted values: the smallest value with at least a
    share q of all values at or below it (no interpolation: a reported p99 is a call that
    happened)."""
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def latency_calls(per_call_s: float, min_calls: int, target_s: float) -> int:
    """At least `min_calls`, and as many as fill about `target_s` at the steady speed."""
    return max(min_calls, math.ceil(target_s / max(per_call_s, 1e-9)))


def time_latency(step: Callable[[], Any], clock: Clock, calls: int,
                 turn: Callable[[], None] = lambda: None, busy=None) -> Latency:
    """Time `calls` single calls. `clock` must synchronize the device around each call (a
    SyncClock); `busy` reads what else took the CPU meanwhile. One turn of a lock-step pair
    covers all calls."""
    turn()
    if busy is not None:
        busy.start()
    times = []
    for _ in range(calls):
        clock.start()
        step()
        times.append(clock.stop())
    if busy is not None:
        busy.stop()
    times.sort()
    return Latency(calls, *(percentile(times, q) for q in QUANTILES),
                   busy=busy.summary() if busy is not None else None)


def measure_latency(step: Callable[[], Any], sync: Callable[[], None], per_call_s: float, *,
                    min_calls: int, target_s: float,
                    turn: Callable[[], None] = lambda: None) -> Latency:
    """The latency phase of a mode whose steady state ran at `per_call_s` per call."""
    return time_latency(step, SyncClock(sync), latency_calls(per_call_s, min_calls, target_s),
                        turn, BusyMachine())


# ---- shapes ------------------------------------------------------------
# Shape changes: a workload that declares several input shapes runs each in turn, in
# compiled modes, after its steady state (which stays the first shape's).
#
# Dynamic shapes are what breaks first on a new backend or compiler version: a recompile on
# every new shape (a recompile storm) or a guard that a new version adds. Per shape after the
# first this records the first call there (the shape change, recompile included), one more
# call at that shape (what a call costs once it is compiled), and the recompiles the change
# caused, with their reasons from dynamo's log.

def declared(shapes) -> list[tuple[str, Callable[[], Any]]]:
    """A workload's `shapes` (label -> step, in the order to run) as a checked list."""
    if not shapes:
        return []
    if not isinstance(shapes, dict) or not all(callable(s) for s in shapes.values()):
        raise TypeError("Workload.shapes must map a label to a step per input shape "
                        "(e.g. {'seq=16': step16, 'seq=32': step32}), first the step's own")
    return [(str(label), step) for label, step in shapes.items()]


def run_shapes(shapes, clock: Clock, recompiles: Callable[[], list[str]],
               turn: Callable[[], None] = lambda: None) -> tuple[ShapeRun, ...]:
    """Every shape after the first, in order. `recompiles()` gives the reasons dynamo has
    logged so far in this mode; a shape's are those its first call added."""
    found = []
    for label, step in declared(shapes)[1:]:
        turn()
        before = len(recompiles())
        try:
            clock.start()
            step()
            first = clock.stop()
            clock.start()
            step()
            again = clock.stop()
        except Exception as exc:   # the shape's failure is the mode's, named by its shape
            raise _at_shape(exc, label) from exc
        reasons = recompiles()[before:]
        found.append(ShapeRun(label, first, again, len(reasons),
                              tuple(dict.fromkeys(reasons))[:5]))
    return tuple(found)


def _at_shape(exc: Exception, label: str) -> Exception:
    try:
        return type(exc)(f"at shape {label}: {exc}")
    except Exception:             # an exception type that takes other arguments
        return RuntimeError(f"at shape {label}: {type(exc).__name__}: {exc}")
