"""The readers of /proc and the cgroup tree, on fake trees: per-CPU busy and steal, the CPUs
and quota a process may use (cgroup v1 and v2, inside and outside a container), run-queue delay
per thread, descendants' CPU time; and the busy probe built on them. Where a file is missing
the reading is None, never an exception."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchgate.measure import proc
from torchgate.measure.timing import BusyMachine

HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
STAT = """cpu  300 0 100 1000 0 0 0 40 0 0
cpu0 100 0 50 500 0 0 0 10 0 0
cpu1 200 0 50 500 0 0 0 30 0 0
cpu2 400 0 0 0 0 0 0 0 0 0
intr 1 2 3
"""


def write(root: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def stat_line(pid: int, ppid: int, ticks: tuple[int, int, int, int], name="python") -> str:
    utime, stime, cutime, cstime = ticks
    return (f"{pid} ({name}) S {ppid} {pid} {pid} 0 -1 4194304 1 0 0 0 "
            f"{utime} {stime} {cutime} {cstime} 20 0 1 0 100 0 0\n")


def test_cpu_times_sum_the_allowed_cpus_or_every_cpu(tmp_path):
    root = write(tmp_path, {"stat": STAT})
    assert proc.cpu_times({0, 1}, root) == (400 / HZ, 40 / HZ)
    assert proc.cpu_times({1}, root) == (250 / HZ, 30 / HZ)
    assert proc.cpu_times(None, root) == (400 / HZ, 40 / HZ)      # the "cpu" line
    # No per-CPU lines (some containers): the total line.
    only_total = write(tmp_path / "t", {"stat": STAT.splitlines()[0] + "\n"})
    assert proc.cpu_times({0}, only_total) == (400 / HZ, 40 / HZ)
    assert proc.cpu_times(None, str(tmp_path / "absent")) is None


def test_allowed_cpus_read_the_affinity_list(tmp_path):
    root = write(tmp_path, {"self/status": "Name:\tpython\nCpus_allowed:\t4f\n"
                                           "Cpus_allowed_list:\t0-3,6\n"})
    assert proc.allowed_cpus(root) == {0, 1, 2, 3, 6}
    assert proc.allowed_cpus(str(tmp_path / "absent")) is None
    if Path("/proc/self/status").exists() and hasattr(os, "sched_getaffinity"):
        assert proc.allowed_cpus() == os.sched_getaffinity(0)


def test_cgroup_v2_quota_is_the_tightest_along_the_path(tmp_path):
    procfs = write(tmp_path / "proc", {"self/cgroup": "0::/kubepods/pod1/box\n"})
    cg = tmp_path / "cg"
    write(cg, {"kubepods/cpu.max": "max 100000\n", "kubepods/pod1/cpu.max": "250000 100000\n",
               "kubepods/pod1/box/cpu.max": "400000 100000\n"})
    assert proc.cpu_quota(procfs, str(cg)) == 2.5
    # In a container the mount is the container's own cgroup and the path is not under it.
    inside = write(tmp_path / "c", {"cpu.max": "150000 100000\n"})
    assert proc.cpu_quota(procfs, inside) == 1.5
    unlimited = write(tmp_path / "u", {"cpu.max": "max 100000\n"})
    assert proc.cpu_quota(procfs, unlimited) is None


def test_cgroup_v1_quota_and_a_hybrid_layout(tmp_path):
    procfs = write(tmp_path / "proc", {"self/cgroup": "4:memory:/x\n3:cpu,cpuacct:/docker/ab\n"
                                                      "0::/\n"})
    cg = write(tmp_path / "cg", {"cpu,cpuacct/docker/ab/cpu.cfs_quota_us": "50000\n",
                                 "cpu,cpuacct/docker/ab/cpu.cfs_period_us": "100000\n",
                                 "unified/cgroup.procs": "1\n"})
    assert proc.cpu_quota(procfs, cg) == 0.5
    no_limit = write(tmp_path / "n", {"cpu/cpu.cfs_quota_us": "-1\n",
                                      "cpu/cpu.cfs_period_us": "100000\n"})
    assert proc.cpu_quota(write(tmp_path / "p2", {"self/cgroup": "1:cpu:/\n"}), no_limit) is None
    assert proc.cpu_quota(str(tmp_path / "absent"), cg) is None


def test_run_queue_delay_per_thread(tmp_path):
    root = write(tmp_path, {"self/task/10/schedstat": "5000 2500000 7\n",
                            "self/task/11/schedstat": "100 500000 2\n",
                            "self/task/12/schedstat": "garbled\n"})
    assert proc.run_queue_ns(root) == {"10": 2_500_000, "11": 500_000}
    assert proc.run_queue_ns(str(tmp_path / "absent")) is None


def test_descendants_count_as_the_process_itself(tmp_path):
    """torch.compile's compile workers are the worker's children: their CPU time is its own,
    not other programs'. A neighbour's is not, nor is its parent's."""
    root = write(tmp_path, {
        "100/stat": stat_line(100, 1, (50, 10, 5, 5)),
        "101/stat": stat_line(101, 100, (200, 0, 0, 0), name="compile worker (pool) 1"),
        "102/stat": stat_line(102, 101, (30, 0, 0, 0)),
        "200/stat": stat_line(200, 1, (900, 0, 0, 0)),                  # a neighbour
        "1/stat": stat_line(1, 0, (7, 0, 0, 0)),
        "self/status": "",
    })
    tree = proc.tree_cpu_s(root, pid=100)
    assert set(tree) == {100, 101, 102}
    assert sum(tree.values()) == pytest.approx((70 + 200 + 30) / HZ)
    assert proc.tree_cpu_s(root, pid=999) is None
    assert proc.tree_cpu_s(str(tmp_path / "absent"), pid=100) is None


def fake_machine(root: Path, busy: int, steal: int, own: int, queue_ns: int) -> None:
    """A 4-CPU host; this process may use CPUs 0-1 with a 1-CPU quota."""
    per_cpu = busy // 2
    write(root, {
        "stat": f"cpu  {busy} 0 0 0 0 0 0 {steal}\ncpu0 {per_cpu} 0 0 0 0 0 0 {steal // 2}\n"
                f"cpu1 {per_cpu} 0 0 0 0 0 0 {steal // 2}\ncpu2 999 0 0 0 0 0 0 0\n",
        "self/status": "Cpus_allowed_list:\t0-1\n",
        "self/cgroup": "0::/\n",
        f"{os.getpid()}/stat": stat_line(os.getpid(), 1, (own, 0, 0, 0)),
        "self/task/1/schedstat": f"0 {queue_ns} 0\n",
    })


def test_the_probe_reads_shares_of_the_cpus_it_may_use(tmp_path):
    cg = write(tmp_path / "cg", {"cpu.max": "100000 100000\n"})
    fake_machine(tmp_path / "p", 0, 0, 0, 0)
    clock = iter([0.0, 10.0])
    probe = BusyMachine(str(tmp_path / "p"), cg, wall=lambda: next(clock))
    assert (probe.cpus, probe.limit) == (2, 1.0)
    probe.start()
    # 10 s: the two CPUs were busy 16 s, 3 of them this process's; 2 s stolen; 5 s queued.
    fake_machine(tmp_path / "p", 16 * HZ, 2 * HZ, 3 * HZ, 5 * 10**9)
    probe.stop()
    got = probe.summary()
    # Others took 13 CPU-s; the quota leaves them 1 CPU (10 s), so 3 s ate into this
    # process's 1-CPU quota: 30 %.
    assert got.other_cpu == pytest.approx(0.3)
    assert got.steal == pytest.approx(2 / 20)
    assert got.run_queue == pytest.approx(0.5)
    assert got.cpus == 1.0


def test_the_probe_is_none_where_nothing_can_be_read(tmp_path):
    probe = BusyMachine(str(tmp_path / "absent"), str(tmp_path / "absent"))
    probe.start()
    probe.stop()
    assert probe.summary() is None
    assert BusyMachine().summary() is None


def test_a_phase_too_short_for_clock_ticks_is_not_read(tmp_path):
    """5 ms on 2 CPUs is one tick of capacity: a single tick of rounding reads as 100 %."""
    fake_machine(tmp_path / "p", 0, 0, 0, 0)
    clock = iter([0.0, 0.005])
    probe = BusyMachine(str(tmp_path / "p"), str(tmp_path / "cg"), wall=lambda: next(clock))
    probe.start()
    fake_machine(tmp_path / "p", 1, 0, 0, 0)
    probe.stop()
    assert probe.wall == 0.005 and probe.summary() is None


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads Linux's /proc")
def test_another_torchgate_run_is_found_and_this_ones_own_processes_are_not():
    """A second measurement on the machine (a neighbour `dvc repro`, `dvc queue start -j 2`)
    is named; this process's own workers and the stage above it are not."""
    wait = "import sys, time; time.sleep(30)"
    other = subprocess.Popen([sys.executable, "-c", wait, "-m", "torchgate.measure.worker", "job"])
    older = subprocess.Popen([sys.executable, "-c", wait, "-m", "stages.bench"])  # older torchgate
    mine = subprocess.Popen([sys.executable, "-c", wait, "-m", "torchgate.bench"])
    try:
        for started in (other, older):
            for _ in range(100):
                if b"-m" in Path(f"/proc/{started.pid}/cmdline").read_bytes():
                    break
                time.sleep(0.02)
        # Seen from `mine`: `other` is a sibling; `mine` itself, and this test process above
        # it, are its own.
        found = dict(proc.sibling_runs(pid=mine.pid))
        assert other.pid in found and "torchgate.measure.worker" in found[other.pid]
        assert older.pid in found and "stages.bench" in found[older.pid]
        assert mine.pid not in found and os.getpid() not in found
        assert other.pid not in dict(proc.sibling_runs(pid=os.getpid()))   # a child: ours
    finally:
        for p in (other, older, mine):
            p.kill()
            p.wait()
