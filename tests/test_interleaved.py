"""Interleaved A/B: two worker processes take turns, sample by sample, through the launcher."""
import dataclasses
import itertools
import os
import time

import pytest

from torchgate.core import config
from torchgate.core.records.schema import Waiting
from torchgate.launch.jobs import job_for
from torchgate.launch.local import pair_cores, run_interleaved

pytestmark = pytest.mark.slow     # pairs of real worker processes taking turns

SAMPLES = 4


def jobs(trace, hang_on_call=(0, 0), spin=(False, False), sample_target_s=0.001):
    raw = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
           "workload": {"w": {"_target_": "tests.turn_workloads.logged", "path": "x",
                              "tag": "x"}},
           "matrix": {"modes": ["eager"]},
           "bench": {"samples": SAMPLES, "sample_target_s": sample_target_s, "warmup_s": 0.0,
                     "min_warmup_calls": 2}}
    cfg = config.parse(raw)
    spec = cfg.workloads["w"]
    made = []
    for tag, hang, spins in zip("AB", hang_on_call, spin):
        spec = dataclasses.replace(spec, kwargs={"path": str(trace), "tag": tag,
                                                 "hang_on_call": hang, "spin": spins})
        made.append((job_for(cfg, cfg.cells()[0], [spec], "bench"), None))
    return made


def test_the_two_processes_alternate_phase_by_phase_and_sample_by_sample(tmp_path):
    trace = tmp_path / "trace"
    results = run_interleaved(jobs(trace), timeout_s=120)
    assert [r["status"] for r in results] == ["OK", "OK"]
    assert all(r["modes"]["eager"]["status"] == "OK" for r in results)
    turns = [tag for tag, _ in itertools.groupby(trace.read_text())]
    # First call and warm-up as one turn each, then one turn per sample, A first.
    assert turns == ["A", "B"] * (1 + SAMPLES)


def test_a_process_that_hangs_times_out_and_the_other_finishes(tmp_path):
    trace = tmp_path / "trace"
    started = time.perf_counter()
    results = run_interleaved(jobs(trace, hang_on_call=(4, 0)), timeout_s=8)
    assert time.perf_counter() - started < 60
    assert results[0]["status"] == "TIMEOUT" and "8 s time limit" in results[0]["error"]
    assert results[1]["status"] == "OK"
    assert len(results[1]["modes"]["eager"]["steady_s"]) == SAMPLES


def test_the_cpu_an_arm_uses_while_the_other_is_timed_is_measured(tmp_path):
    """A's thread never rests (as spinning OpenMP threads): while B is timed, A uses about a
    core; B, blocked on its turn, none. Read from /proc between turns, in clock ticks."""
    results = run_interleaved(jobs(tmp_path / "trace", spin=(True, False),
                                   sample_target_s=0.05), timeout_s=120)
    spinning, resting = (Waiting(**r["waiting"]) for r in results)
    assert spinning.turns >= SAMPLES and resting.turns >= SAMPLES
    assert spinning.seconds > 0.15 and resting.seconds > 0.15
    assert spinning.cores > 0.3, spinning
    assert resting.cores < 0.1, resting


AFFINITY = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs a system with affinity and two cores")


@AFFINITY
@pytest.mark.parametrize("pin", [True, False])
def test_both_arms_of_a_pair_run_on_the_pairs_core(tmp_path, pin):
    """At one thread both arms take the pair's first core (bench.pin_pairs); unpinned, each
    arm may run anywhere."""
    raw = {"device": {"cpu": {"type": "cpu", "threads": 1}},
           "precision": {"fp32": {"dtype": "float32"}},
           "workload": {"w": {"_target_": "tests.process_workloads.writes_affinity",
                              "path": "x", "tag": "x"}},
           "matrix": {"modes": ["eager"]},
           "bench": {"samples": 1, "sample_target_s": 0.001, "warmup_s": 0.0,
                     "min_warmup_calls": 1, "pin_pairs": pin}}
    cfg = config.parse(raw)
    record = tmp_path / "cores"
    pairs = [(job_for(cfg, cfg.cells()[0], [dataclasses.replace(
        cfg.workloads["w"], kwargs={"path": str(record), "tag": tag})], "bench"), None)
        for tag in "AB"]
    assert [r["status"] for r in run_interleaved(pairs, timeout_s=120)] == ["OK", "OK"]
    a, b = (line.split(": ")[1] for line in record.read_text().splitlines())
    everyone = " ".join(map(str, sorted(os.sched_getaffinity(0))))
    assert a == b and (len(a.split()) == 1 if pin else a == everyone)


@AFFINITY
def test_each_pair_draws_its_cores_at_random():
    """A random order of every core, per pair: over 40 draws a core, every core comes first."""
    everyone = sorted(os.sched_getaffinity(0))
    drawn = [pair_cores() for _ in range(40 * len(everyone))]
    assert all(sorted(d) == everyone for d in drawn)
    assert {d[0] for d in drawn} == set(everyone)
