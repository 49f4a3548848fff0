"""Distributed units (`_ranks_`): the configuration, the all-reduce timing and the straggler
arithmetic, the verdicts and the pages, what a unit asks of Ray, and ranks that fail, end or
hang; one unit of two gloo ranks for real, one of them slowed on purpose."""
import dataclasses
import os
import random
import re
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from torchgate.core import config, records
from torchgate.core.config import DeviceSpec, rank_threads
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.errors import UserError
from torchgate.core.records.job import Job
from torchgate.core.records.schema import BenchRecord, Ranks, RankTiming
from torchgate.core.vocabulary import Verdict
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish
from torchgate.launch import ray_placement
from torchgate.launch.ray_backend import RayBackend
from torchgate.measure.accelerator import Unavailable
from torchgate.measure.build import build
from torchgate.measure.rank import union
from torchgate.measure.ranks import RankError, RankGroup, check_ranks, reduce
from torchgate.render.bench import page, ranks_section
from torchgate.render.metrics import bench_metrics
from torchgate.workloads import ddp_mlp

from .jobs import job, quick
from .projects import ROOT
from .records import BUSY, DELTA, bench, process

TARGET = "torchgate.workloads.ddp_mlp"


def ddp_job(ranks=2, slow=None, timeout_s=60.0, device="cpu", threads=2) -> Job:
    """A small ddp_mlp of `ranks` ranks; `slow`: (rank, factor), the `_slow_rank_` knob."""
    return job(TARGET, {"batch": 16, "width": 32}, name="ddp", ranks=ranks,
               slow_rank=slow and slow[0], slow_factor=slow and slow[1],
               device=DeviceSpec(device, device, threads=threads),
               timing=quick(samples=5, sample_target_s=0.01, min_warmup_calls=3,
                            warmup_max_s=2.0, rank_timeout_s=timeout_s))


# ---- configuration ----------------------------------------------------------------------

def _workload(**keys):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["workload"] = {"ddp": {"_target_": TARGET, **keys}}
    return config.parse(raw).workloads["ddp"]


def test_ranks_and_the_slow_rank_knob_are_workload_keys():
    spec = _workload(_ranks_=2, _slow_rank_={"rank": 1, "factor": 1.5})
    assert (spec.ranks, spec.slow_rank, spec.slow_factor) == (2, 1, 1.5)
    assert _workload().ranks is None
    shipped = yaml.safe_load((ROOT / "conf/workload/ddp_mlp.yaml").read_text())["ddp_mlp"]
    assert shipped["_ranks_"] == 2 and "_slow_rank_" not in shipped


@pytest.mark.parametrize("keys, message", [
    ({"_ranks_": 0}, "workload.ddp._ranks_ must be a whole number >= 1"),
    ({"_ranks_": "2"}, "workload.ddp._ranks_ must be a whole number >= 1"),
    ({"_slow_rank_": {"rank": 0, "factor": 2}}, "workload.ddp._slow_rank_ needs workload.ddp"),
    ({"_ranks_": 2, "_slow_rank_": {"rank": 2, "factor": 2}},
     "_slow_rank_.rank must be a rank from 0 to 1, got 2"),
    ({"_ranks_": 2, "_slow_rank_": {"rank": 1, "factor": 0.5}},
     "_slow_rank_.factor must be a number >= 1, got 0.5"),
    ({"_ranks_": 2, "_slow_rank_": [1, 2]}, "_slow_rank_ must be {rank: R, factor: F}"),
    ({"_rank_": 2}, "unknown key workload.ddp._rank_; reserved keys are"),
])
def test_a_bad_ranks_key_is_one_line(keys, message):
    with pytest.raises(UserError) as err:
        _workload(**keys)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_ranks_share_the_units_threads():
    assert [rank_threads(t, n) for t, n in ((2, 2), (0, 2), (4, 2), (1, 3), (5, 1))] == \
        [1, 1, 2, 1, 5]


# ---- what a rank and a process record ----------------------------------------------------

def test_buckets_in_flight_together_count_once():
    assert union([(0.0, 1.0), (0.5, 2.0), (3.0, 4.0)]) == pytest.approx(3.0)
    assert union([(1.0, 2.0), (1.2, 1.5)]) == pytest.approx(1.0) and union([]) == 0


def ranks(ready=(1e-3, 1.5e-3), comm=1e-3, nbytes=1 << 20, **extra) -> Ranks:
    timings = tuple(RankTiming(r, 4e-3, 3e-3 - c, c) for r, c in enumerate(ready))
    return Ranks("gloo", len(ready), 1, 10, nbytes, comm, timings, **extra)


def test_bus_bandwidth_is_nccl_tests_and_the_straggler_is_relative_to_the_fastest():
    r = ranks(ready=(2e-3, 1e-3, 1.5e-3, 1e-3), comm=2e-3, nbytes=8_000_000)
    assert r.algbw == pytest.approx(4e9)
    assert r.busbw == pytest.approx(4e9 * 2 * 3 / 4)        # algbw × 2(n-1)/n
    assert r.slowest.rank == 0 and r.fastest.rank == 1
    assert r.straggler == pytest.approx(2.0) and r.score(r.ranks[2]) == pytest.approx(2 / 3)
    alone = ranks(ready=(1e-3,))
    assert alone.busbw == 0 and alone.straggler is None


def test_the_collective_is_the_all_reduce_of_the_last_rank_to_arrive():
    """Rank 1 arrives late every step: rank 0 waits in its all-reduce; per step the shorter
    of the two is the collective itself."""
    answers = [{"step_s": [9.0, 5.0, 5.0, 5.0], "allreduce_s": [1.0, 3.0, 3.2, 2.8],
                "ready_s": [8.0, 1.0, 1.2, 0.8], "bytes": 4096, "peak_bytes": 10},
               {"step_s": [5.0, 5.1, 4.9], "allreduce_s": [1.0, 0.9, 1.1],
                "ready_s": [2.0, 2.1, 1.9], "bytes": 4096, "peak_bytes": 12}]
    r = reduce(answers, "gloo", 1, 1, 1.5)
    assert r.steps == 3 and r.comm_s == pytest.approx(1.0)    # min of 3.0|1.0, 3.2|0.9, 2.8|1.1
    assert r.ranks[0].allreduce_s == pytest.approx(3.0) and r.ranks[0].step_s == 5.0
    assert r.ranks[0].ready_s == pytest.approx(1.0) and r.ranks[1].ready_s == 2.0
    assert r.slowest.rank == 1 and r.straggler == pytest.approx(2.0)
    assert (r.bytes_per_step, r.slowed, r.slow_factor) == (4096, 1, 1.5)


def test_a_distributed_workload_runs_alone_without_ddp_as_numerics_runs_it():
    workload = build(ddp_job(), ddp_mlp, torch.device("cpu"), torch.float32, "eager")
    assert workload.step().shape == () and workload.items == 16


def test_a_record_with_ranks_survives_a_round_trip(tmp_path):
    written = record(1e-3, 0.5, seed=4, n=2)
    records.write_record(tmp_path / "c.json", written)
    read = records.load_record(tmp_path / "c.json", BenchRecord)
    before, after = (r.workloads["ddp"].processes[1].modes["eager"].ranks for r in (written, read))
    assert after.ranks[1].rank == 1 and after.world_size == 2
    assert after.straggler == pytest.approx(before.straggler, rel=1e-5)
    assert after.busbw == pytest.approx(before.busbw, rel=1e-5)


# ---- verdicts and pages -----------------------------------------------------------------

def record(comm: float, lag: float, seed: int, n: int = 6):
    rng = random.Random(seed)
    return bench({"ddp": [process(rng=rng, ranks=ranks(
        ready=(1e-3 * rng.uniform(0.99, 1.01), 1e-3 * (1 + lag) * rng.uniform(0.99, 1.01)),
        comm=comm * rng.uniform(0.98, 1.02))) for _ in range(n)]})


def test_all_reduce_time_and_straggler_are_compared_like_every_timing():
    base, now = record(1e-3, 0.02, seed=1), record(2e-3, 0.5, seed=2)
    rows = {r.metric: r for r in finish(bench_rows("c", now, base, DELTA), alpha=0.05,
                                        power=0.8).rows}
    assert rows["comm_s"].verdict == Verdict.REGRESSED and rows["comm_s"].delta == 0.1
    assert rows["comm_s"].change.ratio == pytest.approx(2.0, rel=0.03)
    assert rows["straggler"].verdict == Verdict.REGRESSED
    assert rows["straggler"].change.ratio == pytest.approx(1.5 / 1.02, rel=0.03)
    same = {r.metric: r for r in finish(bench_rows("c", record(1e-3, 0.02, seed=3), base,
                                                   DELTA), alpha=0.05, power=0.8).rows}
    assert same["comm_s"].verdict == same["straggler"].verdict == Verdict.EQUIVALENT
    plain = finish(bench_rows("c", bench({"w": [process() for _ in range(3)]}),
                              bench({"w": [process() for _ in range(3)]}), DELTA),
                   alpha=0.05, power=0.8).rows
    assert not [r for r in plain if r.metric in ("comm_s", "straggler")]


def test_the_pages_name_the_straggler_its_lag_and_the_bus_bandwidth():
    base = record(1e-3, 0.02, seed=1)
    now = bench({"ddp": [process(rng=random.Random(i), ranks=ranks(
        ready=(1e-3, 1.5e-3), comm=2e-3, nbytes=1_000_000, slowed=1, slow_factor=1.5))
        for i in range(4)]})
    result = finish(bench_rows("cpu-fp32", now, base, DELTA), alpha=0.05, power=0.8)
    cell = summarize("cpu-fp32", now, None, BUSY)
    lines = ranks_section({"cpu-fp32": cell}, result.rows)
    assert lines[0] == "## Distributed units" and len([x for x in lines if x.startswith("- ")]) == 1
    text = "\n".join(lines)
    assert "`cpu-fp32` ddp eager: 2 gloo ranks × 1 thread" in text
    assert re.search(r"all-reduce 2.00 ms a step \(\+\d+\.\d % \[.+\] REGRESSED\)", text)
    assert "bus bandwidth 500 MB/s" in text                 # 1 MB / 2 ms × 2(2-1)/2
    assert "slowest rank 1 (4 of 4 processes), 50.0 % behind the fastest (+" in text
    assert "(rank 1 slowed 1.5× on purpose: `_slow_rank_`)" in text
    bench_page = page(cell, result)
    assert "## Distributed units" in bench_page and "1.00 ms / 1.50 ms" in bench_page
    assert ranks_section({"c": summarize("c", base, None, BUSY)}, []) != []
    flat = bench_metrics(cell)["ddp"]["eager"]
    assert (flat["allreduce_ms"], flat["busbw_gbps"], flat["straggler_lag_pct"]) == (2, 0.5, 50)
    assert ranks_section({"c": summarize("c", bench({"w": [process()]}), None, BUSY)}, []) == []


# ---- where a unit runs -------------------------------------------------------------------

def test_a_distributed_unit_asks_ray_for_every_ranks_threads_and_gpu():
    cpu = DeviceSpec("cpu", "cpu", threads=4)
    assert ray_placement.request("cpu", 4, cpu)["num_cpus"] == 4
    assert ray_placement.request("cpu", 4, cpu, ranks=2)["num_cpus"] == 4     # 2 × 2
    assert ray_placement.request("cpu", 1, cpu, ranks=2)["num_cpus"] == 2     # at least 1 each
    assert ray_placement.request("cpu", 0, cpu, ranks=3)["num_cpus"] == 3
    gpu = DeviceSpec("cuda", "cuda", accelerator_type="H100")
    assert ray_placement.request("cuda", 0, gpu, ranks=2) == {
        "num_cpus": 2, "num_gpus": 2, "accelerator_type": "H100"}
    backend = RayBackend.__new__(RayBackend)        # what __init__ sets, without a cluster
    backend.device = cpu
    backend.asked = ray_placement.request("cpu", 4, cpu)
    assert backend._asked([(ddp_job(threads=4), None)])["num_cpus"] == 4
    assert backend._asked([(ddp_job(ranks=4, threads=1), None)])["num_cpus"] == 4
    assert backend._asked([(dataclasses.replace(ddp_job(), workloads=(
        WorkloadSpec("w", "m.f"),)), None)]) is backend.asked


def test_a_cuda_unit_needs_a_device_per_rank():
    check_ranks(ddp_job())
    if torch.cuda.device_count() < 2:
        with pytest.raises(Unavailable, match="runs 2 ranks, one per CUDA device; this machine"):
            check_ranks(ddp_job(device="cuda"))
    with pytest.raises(Unavailable, match="distributed units run on cpu"):
        check_ranks(ddp_job(device="mps"))


def test_a_cpu_unit_needs_a_core_per_rank(monkeypatch):
    """200 ranks on 2 cores would start 200 processes that each import torch: SKIPPED first."""
    monkeypatch.setattr("torchgate.core.machine.usable_cores", lambda: 2)
    check_ranks(ddp_job(ranks=2))
    with pytest.raises(Unavailable, match="runs 3 ranks, a core each at least; this process "
                                          "may use 2: lower its _ranks_"):
        check_ranks(ddp_job(ranks=3))


# ---- ranks that fail, end or hang: stand-in ranks, without torch -------------------------

FAKE = """
import json, os, sys, time
commands, answers = (int(fd) for fd in sys.argv[-2:])
order = json.loads(os.fdopen(commands).readline())
how = sys.argv[1] if order["rank"] == 1 else "ready"
if how == "exit":
    sys.exit(3)
if how == "error":
    os.write(answers, b'{"error": "DistNetworkError: connection refused"}\\n')
    sys.exit(1)
if how == "ready":
    os.write(answers, b'{"ready": true, "items": 4}\\n')
time.sleep(600)
"""


@pytest.mark.parametrize("how, message", [
    ("exit", "rank 1 of 2 ended before it could join the process group and build the "
             "workload (exit status 3)"),
    ("error", "rank 1 of 2: DistNetworkError: connection refused"),
    ("hang", "rank 1 of 2 did not join the process group and build the workload within 2 s "
             "(bench.rank_timeout_s): hung, or its rendezvous never completed"),
])
def test_a_rank_that_fails_ends_or_hangs_fails_its_mode_in_one_line(how, message):
    with pytest.raises(RankError) as err:
        RankGroup(ddp_job(timeout_s=2), "eager", 2, command=(sys.executable, "-c", FAKE, how))
    assert str(err.value) == message


def test_a_hung_step_fails_within_the_timeout_and_its_ranks_are_killed():
    with pytest.raises(RankError, match="rank 0 of 2 did not finish a step within 3 s"):
        with RankGroup(ddp_job(timeout_s=3), "eager", 2,
                       command=(sys.executable, "-c", FAKE, "ready")) as group:
            assert group.unit.items == 8
            started = time.monotonic()
            group.unit.step()                  # the stand-ins never answer a step
    assert time.monotonic() - started < 4 and all(p.returncode == -9 for p in group.procs)


# ---- for real: two gloo ranks, rank 1 held back --------------------------------------------

def test_two_gloo_ranks_time_their_all_reduce_and_name_the_rank_held_back():
    from torchgate.measure.worker import run_bench
    m = run_bench(ddp_job(slow=(1, 3.0))).modes["eager"]
    assert m.status == "OK", m
    r = m.ranks
    assert (r.backend, r.world_size, r.threads) == ("gloo", 2, 1)
    params = (128 * 32 + 32) + (32 * 32 + 32) + (32 * 10 + 10)   # the MLP, in one bucket
    assert r.bytes_per_step == 4 * params
    assert r.steps == m.calls_per_sample * len(m.steady_s)
    assert 0 < r.comm_s <= min(x.allreduce_s for x in r.ranks)      # the others waited
    assert r.busbw == pytest.approx(r.bytes_per_step / r.comm_s)    # × 2(2-1)/2
    assert r.slowest.rank == 1 and r.straggler > 1.3, r
    assert m.items == 32 and m.peak_bytes == max(x.peak_bytes for x in r.ranks)


@pytest.mark.gpu
def test_a_cuda_rank_times_its_nccl_all_reduce_with_events():
    """One rank per device; a machine with one GPU runs a unit of one (nccl, world size 1)."""
    from torchgate.measure.worker import run_bench
    n = min(torch.cuda.device_count(), 2)
    m = run_bench(ddp_job(ranks=n, device="cuda")).modes["eager"]
    assert m.status == "OK", m
    r = m.ranks
    assert (r.backend, r.world_size) == ("nccl", n) and r.bytes_per_step > 0
    assert 0 < r.comm_s <= min(x.allreduce_s for x in r.ranks)
    assert all(0 < x.ready_s < x.step_s for x in r.ranks)


def _listening(pids: list[int]) -> list[str]:
    """The local addresses of the TCP sockets these processes listen on (Linux /proc)."""
    inodes = set()
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:          # LISTEN
                found.append(fields[1])
    return found


@pytest.mark.slow       # two ranks meet (up to bench.rank_timeout_s, 60 s, under load)
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
def test_the_ranks_listen_on_loopback_only():
    """The rendezvous is a private file (no store on a port anyone can reach) and the ranks'
    collectives bind the loopback device: nothing beyond this machine can join the group."""
    loopback = ("0100007F:", "00000000000000000000000001000000:")   # 127.0.0.1, ::1
    with RankGroup(ddp_job(), "eager", 2) as group:
        group.step()
        pids = [os.getpid(), *(p.pid for p in group.procs)]
        assert Path(group.store).parent.stat().st_mode & 0o077 == 0     # this user's alone
        listening = _listening(pids)
    assert all(a.startswith(loopback) for a in listening), listening
