"""Progress while a stage runs: one line per worker process with [k/N], the time so far and
what is left at the pace so far, N growing with adaptive rounds and shrinking with processes
not started; plain text, no terminal control codes. Timed by a fake clock."""
from __future__ import annotations

import random
import re

from tests.test_adaptive import RAW, fake_worker
from torchgate.core import config
from torchgate.core.records.inputs import RecordPair, RunInputs
from torchgate.core.vocabulary import FRESH, Tick
from torchgate.judge.adaptive import pending_units
from torchgate.judge.run import compare_run
from torchgate.launch.cells import measure_bench, measure_numerics
from torchgate.launch.progress import Progress
from torchgate.render.progress import bench_line, clock, counter, numerics_process_line

CONTROL = re.compile(r"[\x00-\x1f\x7f]")       # escape sequences, carriage returns, ...
COUNTER = re.compile(r"\[(\d+)/(\d+) ([\d:]+)(?:, ~([\d:]+) left)?\] ")


class FakeClock:
    """Seconds that pass only when a worker runs."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def timed(run, clock: FakeClock, seconds: float = 2.0):
    def worker(job, **kwargs):
        clock.now += seconds
        return run(job, **kwargs)
    return worker


def counters(lines: list[str]) -> list[tuple[int, int, str, str | None]]:
    found = [COUNTER.search(line) for line in lines]
    assert all(found), lines
    return [(int(m[1]), int(m[2]), m[3], m[4]) for m in found]


def test_the_estimate_is_the_pace_so_far_times_what_is_left():
    fake = FakeClock()
    progress = Progress(clock=fake)
    progress.plan(4)
    fake.now += 10
    assert progress.tick() == Tick(1, 4, 10.0, 30.0)
    fake.now += 30
    assert progress.tick() == Tick(2, 4, 40.0, 40.0)
    progress.plan(-1)                           # one unit will not run after all
    fake.now += 5
    assert progress.tick() == Tick(3, 3, 45.0, 0.0)
    progress.plan(-5)                           # never below what is done
    assert progress.planned == {"process": 3}


def test_each_kind_of_unit_is_paced_by_its_own():
    """4 timed processes of 10 s, then 2 counts processes of 100 s: after the first count,
    what is left is one count's 100 s, not the mean of every unit's 30 s."""
    fake = FakeClock()
    progress = Progress(clock=fake)
    progress.plan(4)
    progress.plan(2, "counts")
    for _ in range(4):
        fake.now += 10
        tick = progress.tick()
    assert tick == Tick(4, 6, 40.0, 2 * 10.0)   # no count done yet: the pace so far
    fake.now += 100
    assert progress.tick("counts") == Tick(5, 6, 140.0, 100.0)


def test_the_counter_reads_as_a_clock():
    assert counter(Tick(3, 12, 42.0, 84.4)) == "[3/12 0:42, ~1:24 left] "
    assert counter(Tick(12, 12, 151.0, 0.0)) == "[12/12 2:31] "
    assert counter(Tick(1, 40, 3723.0, 140_000.0)) == "[1/40 1:02:03, ~38:53:20 left] "
    assert counter(None) == ""
    assert clock(59.6) == "1:00" and clock(-1) == "0:00"


def test_a_bench_cell_counts_its_processes_and_adaptive_rounds_add_to_them():
    cfg = config.parse(RAW)                     # 2 workloads x 4 processes, adaptive to 12
    cell = cfg.cells()[0]
    rng = random.Random(5)
    spreads = {"quiet": 0.001, "noisy": 0.03}
    base = measure_bench(cfg, cell, run=fake_worker(spreads, rng))

    def pending(record):
        result = compare_run(cfg, RunInputs("HEAD", "0" * 40,
                                            {("bench", cell.name): RecordPair(record, base)}))
        return pending_units(result, cfg.bench.max_processes)
    fake, lines = FakeClock(), []
    record = measure_bench(cfg, cell, run=timed(fake_worker(spreads, rng), fake),
                           log=lambda *line: lines.append(bench_line(*line)),
                           pending=pending, progress=Progress(clock=fake))
    seen = counters(lines)
    total = sum(len(w.processes) for w in record.workloads.values())
    assert total == 16, "the noisy workload had rounds up to max_processes (12)"
    assert [k for k, *_ in seen] == list(range(1, 17))
    assert [n for _, n, *_ in seen] == [8] * 8 + [16] * 8      # planned when the look decides
    for k, n, elapsed, left in seen:            # 2 s a process: the pace is exact
        assert elapsed == clock(2 * k) and left == (clock(2 * (n - k)) if k < n else None)
    assert lines[0].startswith("torchgate bench: [1/8 0:02, ~0:14 left] cpu-fp32 ")
    assert not any(CONTROL.search(line) for line in lines)


def broken_worker(run):
    """The workload `noisy` fails in every process."""
    def worker(job, **kwargs):
        if job.workload.name == "noisy":
            return {"status": "ERROR", "error": "RuntimeError: boom", "wall_s": 1.0}
        return run(job, **kwargs)
    return worker


def test_processes_not_started_leave_the_plan():
    """A workload whose every mode failed is not started again: N shrinks, the run ends at
    k = N."""
    cfg = config.parse({**RAW, "bench": {**RAW["bench"], "processes": 3,
                                         "adaptive_budget_s": 0}})
    fake, lines = FakeClock(), []
    measure_bench(cfg, cfg.cells()[0], log=lambda *line: lines.append(bench_line(*line)),
                  run=timed(broken_worker(fake_worker({"quiet": 0.01}, random.Random(0))),
                            fake), progress=Progress(clock=fake))
    seen = counters(lines)
    assert [k for k, *_ in seen] == [1, 2, 3, 4]
    assert seen[-1][:2] == (4, 4) and seen[-1][3] is None
    assert any("noisy process 1: ERROR: RuntimeError: boom" in line for line in lines)


def numerics_worker(job, **kwargs):
    if job.kind == "fresh":
        return {"status": "OK", "wall_s": 1.0, "fresh": {}}
    return {"status": "OK", "wall_s": 1.0, "modes": {m: {"status": "OK"} for m in job.modes}}


def test_a_numerics_cell_counts_the_fresh_process_too():
    cfg = config.parse(RAW)
    fake, lines = FakeClock(), []
    measure_numerics(cfg, cfg.cells()[0], run=timed(numerics_worker, fake, 3.0),
                     log=lambda *line: lines.append(numerics_process_line(*line)),
                     progress=Progress(clock=fake))
    assert [c[:2] for c in counters(lines)] == [(1, 3), (2, 3), (3, 3)]
    assert lines[0].startswith("torchgate numerics: [1/3 0:03, ~0:06 left] cpu-fp32 ")
    assert lines[-1] == f"torchgate numerics: [3/3 0:09] cpu-fp32 {FRESH}: ran [1.0 s]"
    assert not any(CONTROL.search(line) for line in lines)


def test_a_process_line_says_what_its_profiling_pass_cost():
    from torchgate.core.records.schema import BenchProcess, ModeTiming
    modes = {"eager": ModeTiming("OK", first_call_s=0.1, steady_s=(1e-3,), profile_s=0.25),
             "compiled": ModeTiming("OK", first_call_s=9.0, steady_s=(1e-3,), profile_s=0.5)}
    line = bench_line("cpu-fp32", "w", "now", 0, BenchProcess("OK", modes=modes, wall_s=12.0))
    assert line.endswith("[12.0 s, 0.8 s of it profiling]")
    off = {mode: ModeTiming("OK", first_call_s=0.1, steady_s=(1e-3,)) for mode in modes}
    assert bench_line("cpu-fp32", "w", "now", 0,
                      BenchProcess("OK", modes=off, wall_s=12.0)).endswith("[12.0 s]")


def test_another_run_is_one_warning_however_many_of_its_processes_measure():
    from torchgate.render.progress import others_measuring
    line = others_measuring([(101, "python -m torchgate.bench --device cpu --precision fp32"),
                             (102, "python -m torchgate.measure.worker job.json result.json")])
    assert "\n" not in line and "pids 101, 102" in line
    assert line.startswith("another torchgate run is measuring on this machine (python -m "
                           "torchgate.bench --device cpu --precision fp32; pids 101, 102)")
