"""The measurement phases, driven by a simulated clock: exact and fast; and the probe of
what else the machine was doing."""
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from torchgate.core.records.schema import Sentinel
from torchgate.measure.proc import tree_cpu_s
from torchgate.measure.timing import (
    BusyMachine,
    SentinelProbe,
    measure,
    steady_start,
    still_falling,
)


class FakeClock:
    """Each call of the step advances simulated time by the next duration."""

    def __init__(self):
        self.now = 0.0
        self.t0 = 0.0

    def start(self):
        self.t0 = self.now

    def stop(self):
        return self.now - self.t0


def test_first_call_warmup_and_batched_steady_state_are_separate():
    clock = FakeClock()
    durations = iter([5.0] + [0.004] * 2 + [0.001] * 10_000)  # compile, settling, steady

    def step():
        clock.now += next(durations)
        return "out"

    seen = []
    phases = measure(step, clock, samples=4, sample_target_s=0.02, warmup_s=0.0095,
                     min_warmup_calls=3, after_first=lambda: seen.append(clock.now))
    assert phases.first_call_s == 5.0
    assert seen == [5.0]
    # Warm-up: the two settling calls and the first at steady speed; 6 ms beyond it.
    assert phases.warmup_calls == 3 and phases.warmup_s == pytest.approx(0.009)
    assert phases.warmup_excess_s == pytest.approx(0.006) and phases.warmup_settled
    assert phases.calls_per_sample == 20          # calibrated on the steady warm-up calls
    assert len(phases.steady_s) == 4
    assert all(abs(s - 0.001) < 1e-12 for s in phases.steady_s)
    assert phases.first_output == "out"


def stepping(clock, durations):
    durations = iter(durations)

    def step():
        clock.now += next(durations)
    return step


def test_a_workload_that_warms_up_slowly_shows_it_with_the_calls_it_took():
    """The first 50 calls sleep 2 ms, then a call takes 0.1 ms: the warm-up is those 49
    calls after the first and one at steady speed, whatever bench.warmup_s says."""
    clock = FakeClock()
    slow = measure(stepping(clock, [0.002] * 50 + [1e-4] * 100_000), clock, samples=3,
                   sample_target_s=0.002, warmup_s=0.2, min_warmup_calls=3)
    assert slow.warmup_calls == 50 and slow.warmup_s == pytest.approx(49 * 0.002 + 1e-4)
    assert slow.warmup_excess_s == pytest.approx(49 * (0.002 - 1e-4))
    clock = FakeClock()
    quick = measure(stepping(clock, [0.002] * 5 + [1e-4] * 100_000), clock, samples=3,
                    sample_target_s=0.002, warmup_s=0.2, min_warmup_calls=3)
    assert quick.warmup_calls == 5 and slow.warmup_s > 10 * quick.warmup_s


def test_one_slow_call_in_the_steady_state_is_not_warm_up():
    times = [1e-3] * 40
    times[25] = 5e-3                         # a noisy neighbour, once
    assert steady_start(times) == (0, 1e-3)
    assert steady_start([3e-3, 2e-3] + times)[0] == 2


def test_a_slow_patch_late_in_the_warm_up_is_not_warm_up():
    """The steady state starts where the calls first reach steady speed: a noisy neighbour
    that slows six calls a hundred calls later does not move it."""
    times = [3e-3, 2e-3] + [1e-3] * 100 + [2e-3] * 6 + [1e-3] * 30
    assert steady_start(times) == (2, 1e-3)


def test_a_warm_up_that_never_settles_stops_at_its_limit_and_says_so():
    clock = FakeClock()
    ever_faster = [1e-3 * 0.97 ** i for i in range(100_000)]
    phases = measure(stepping(clock, [1.0] + ever_faster), clock, samples=2,
                     sample_target_s=1e-3, warmup_s=0.01, min_warmup_calls=3,
                     warmup_max_s=0.02)
    assert not phases.warmup_settled
    assert phases.warmup_s == pytest.approx(sum(ever_faster[:phases.warmup_calls]))
    assert still_falling(ever_faster[:20]) and not still_falling([1e-3] * 20)


def test_a_slow_step_gets_one_call_per_sample():
    clock = FakeClock()

    def step():
        clock.now += 0.5

    phases = measure(step, clock, samples=2, sample_target_s=0.02, warmup_s=0.0,
                     min_warmup_calls=1)
    assert phases.calls_per_sample == 1
    assert phases.steady_s == [0.5, 0.5]


SPIN = [sys.executable, "-c", "while True: pass"]


def spinners(n: int, detached: bool) -> list[int]:
    """`n` busy processes: children of this one, or orphans (another program's)."""
    if not detached:
        return [subprocess.Popen(SPIN).pid for _ in range(n)]
    line = shlex.join(SPIN) + " >/dev/null 2>&1 & echo $!"
    return [int(subprocess.run(["sh", "-c", line], capture_output=True, text=True,
                               check=True).stdout) for _ in range(n)]


def stop(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def test_busy_machine_sees_other_programs_but_not_this_one():
    if not os.path.exists("/proc/stat"):
        pytest.skip("reads Linux /proc")
    ncpu = BusyMachine().cpus

    def probe_while(*busy_self: bool) -> list[dict]:
        """One probe per entry, taking turns in 0.1 s windows, spinning or sleeping."""
        probes = [BusyMachine() for _ in busy_self]
        for _ in range(5):
            for probe, spin in zip(probes, busy_self):
                probe.start()
                end = time.perf_counter() + 0.1
                while spin and time.perf_counter() < end:
                    pass
                time.sleep(max(0.0, end - time.perf_counter()))
                probe.stop()
        return [probe.summary() for probe in probes]

    others = spinners(ncpu, detached=True)
    try:
        time.sleep(0.3)
        loaded, = probe_while(False)
    finally:
        stop(others)
    assert loaded.other_cpu > 0.6            # every CPU was taken by someone else
    # Its own work is not "other": spinning reads no more than sleeping beside it (counted as
    # other, one busy thread would add 1/ncpu).
    alone, idle = probe_while(True, False)
    assert alone.other_cpu < idle.other_cpu + 0.5 / ncpu
    assert 0 <= alone.steal <= 1 and alone.run_queue >= 0 and alone.cpus <= ncpu
    assert BusyMachine().summary() is None


def test_children_count_as_the_process_itself_and_orphans_do_not():
    """torch.compile's compile workers are children of the worker: their CPU time is its own.
    A process that is not its descendant is another program."""
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("reads Linux /proc")
    child, orphan = spinners(1, detached=False), spinners(1, detached=True)
    try:
        before = tree_cpu_s()
        time.sleep(0.5)
        after = tree_cpu_s()
    finally:
        stop(child + orphan)
    assert os.getpid() in after and child[0] in after and orphan[0] not in after
    assert after[child[0]] - before.get(child[0], 0.0) > 0.05


@pytest.mark.slow
def test_cpu_peak_memory_is_the_workers_own_not_its_parents():
    """A child of a fat parent: getrusage would report the parent's resident size."""
    import subprocess
    import sys
    fat = bytearray(2 ** 30)
    fat[::4096] = b"\x01" * len(fat[::4096])
    code = ("import torch; from torchgate.measure.device import peak_memory_bytes, "
            "peak_memory_reset; d = torch.device('cpu'); peak_memory_reset(d); "
            "print(peak_memory_bytes(d))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert int(out) < 2 ** 30, int(out) >> 20
    del fat


def test_the_sentinel_is_the_fastest_of_every_burst():
    probe = SentinelProbe()
    probe.burst()
    probe.burst()
    reading = probe.reading()
    assert len(probe.loop) == 2 * probe.LOOP_REPS and len(probe.copy) == 2 * probe.COPY_REPS
    assert reading == Sentinel(min(probe.loop), min(probe.copy), SentinelProbe.METHOD)
    assert 0 < reading.python_loop_s < 1 and 0 < reading.copy_32mib_s < 1
