"""No process outlives the run: a worker's group is killed also after the worker exited, a
worker ends with its launcher however the launcher ends (SIGKILL included), a stage ends on
SIGHUP as on SIGTERM and with DVC when DVC ends."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchgate.compose import compose
from torchgate.core import config
from torchgate.launch.jobs import job_for
from torchgate.launch.local import run_worker

from .projects import ROOT

HERE = Path(__file__).resolve().parent


def alive(pid: int) -> bool:
    """Running: a zombie has ended (its parent, init here, has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def group_of(pid: int) -> list[int]:
    listed = subprocess.run(["ps", "-o", "pid=", "-g", str(pid)], capture_output=True,
                            text=True).stdout.split()
    return [int(p) for p in listed]


def wait_gone(pids, limit_s: float = 5.0) -> float:
    """Seconds until none of `pids` runs; fails past `limit_s`."""
    started = time.perf_counter()
    while any(alive(p) for p in pids):
        assert time.perf_counter() - started < limit_s, \
            f"still running after {limit_s} s: {[p for p in pids if alive(p)]}"
        time.sleep(0.02)
    return time.perf_counter() - started


def pids_in(path: Path, count: int = 2, limit_s: float = 120) -> list[int]:
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        if path.exists() and len(path.read_text().split()) == count:
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"no pids in {path} within {limit_s} s")


@pytest.mark.parametrize("own_session,clear_env", [(False, False), (True, False), (True, True)],
                         ids=["its group", "its own session", "env -i setsid"])
def test_a_workers_child_that_outlives_the_worker_is_killed(tmp_path, own_session, clear_env):
    """With the worker's group; a child in a session of its own (a daemon) by the variable
    only that worker's environment holds; one that cleared its environment too, reparented to
    the launcher (its subreaper), never to init."""
    pid_file = tmp_path / "pids"
    raw = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
           "workload": {"w": {"_target_": "tests.process_workloads.leaves_a_child",
                              "pid_file": str(pid_file), "own_session": own_session,
                              "clear_env": clear_env}},
           "matrix": {"modes": ["eager"]},
           "bench": {"samples": 2, "sample_target_s": 0.001, "warmup_s": 0.0}}
    cfg = config.parse(raw)
    result = run_worker(job_for(cfg, cfg.cells()[0], [cfg.workloads["w"]], "bench"),
                        timeout_s=120)
    assert result["status"] == "OK", result
    worker, child = pids_in(pid_file)
    # Killed with its group when the worker ends; reaping by init may lag a loaded machine.
    wait_gone([worker, child], limit_s=5.0)


LAUNCHER = """
import os, subprocess, sys, time
from torchgate.core.lifetime import lifeline
line, entry = lifeline()
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], pass_fds=(line,),
                 env={**os.environ, **entry}, start_new_session=True)
time.sleep(3600)
"""
WORKER = """
import os, subprocess, sys, time
from torchgate.core.lifetime import hold_launcher
hold_launcher()
child = subprocess.Popen(["sleep", "600"])
open(sys.argv[1], "w").write(f"{os.getpid()} {child.pid}")
time.sleep(3600)
"""


@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_worker_and_its_children_end_with_a_launcher_killed_outright(tmp_path, kill):
    """core.lifetime alone (no torch): the watcher kills the worker's group."""
    pid_file = tmp_path / "pids"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, WORKER, str(pid_file)],
                                cwd=ROOT)
    try:
        worker, child = pids_in(pid_file)
        group = group_of(worker)
        assert {worker, child} < set(group)        # and the watcher
        launcher.send_signal(kill)
        wait_gone(group)
    finally:
        launcher.kill()
        launcher.wait()


def bench_project(project: Path, pid_file: Path) -> None:
    """One workload that starts a child and hangs, in a tiny project."""
    (project / "stages/workloads/process_workloads.py").write_text(
        (HERE / "process_workloads.py").read_text())     # where the bench stage tracks it
    (project / "conf/workload/hangs.yaml").write_text(
        "hangs:\n  _target_: torchgate.workloads.process_workloads.hangs_with_a_child\n"
        f"  pid_file: {pid_file}\n")
    compose(project / "params.yaml", ["matrix=smoke", "workload=[hangs]", "bench.processes=2"],
            conf=project / "conf")


BENCH = [sys.executable, "-m", "torchgate.bench", "--device", "cpu", "--precision", "fp32"]
# DVC runs a stage through the shell, which gives way to it; it forwards no signal to it.
AS_DVC = ("import os, subprocess, sys\n"
          "subprocess.Popen(sys.argv[1:], env={**os.environ, 'DVC_STAGE': 'bench@cpu-fp32'})"
          ".wait()\n")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL to the stage", "SIGHUP to the stage",
                                 "SIGTERM to dvc"])
def test_a_stage_that_is_killed_takes_its_workers_and_their_children(project, tmp_path, how):
    pid_file = tmp_path / "pids"
    bench_project(project, pid_file)
    previous = project / "reports/test-box/bench/cpu-fp32.json"
    previous.parent.mkdir(parents=True)
    previous.write_text('{"previous": true}\n')
    # A suite run under nohup would hand the stage an ignored SIGHUP, which it keeps ignored
    # on purpose (stages/core/errors.py); the user who closes a terminal has not.
    top = subprocess.Popen([sys.executable, "-c", AS_DVC, *BENCH] if "dvc" in how else BENCH,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        worker, child = pids_in(pid_file)
        stage = parent_of(worker)
        group = group_of(worker)
        assert child in group
        top.send_signal({"SIGKILL": signal.SIGKILL, "SIGHUP": signal.SIGHUP,
                         "SIGTERM": signal.SIGTERM}[how.split()[0]])
        wait_gone([stage, *group])
        code = top.wait(timeout=30)
    finally:
        top.kill()
        top.wait()
    if how == "SIGHUP to the stage":
        assert code == 128 + signal.SIGHUP, top.stderr.read()
    assert previous.read_text() == '{"previous": true}\n'
    assert [p.name for p in previous.parent.iterdir()] == ["cpu-fp32.json"]  # no temp files


@pytest.mark.slow
@pytest.mark.skipif(not Path("/bin/sh").exists(), reason="a POSIX shell at /bin/sh")
@pytest.mark.parametrize("kill", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_stage_dies_with_dvc_under_a_plain_sh(project, tmp_path, monkeypatch, kill):
    """DVC runs each `cmd` as `$SHELL -c`, /bin/sh where SHELL is unset (containers,
    services); a shell that does not exec a lone command (dash) stays between dvc and the
    stage, so the stage's parent-death signal must not watch the shell."""
    pid_file = tmp_path / "pids"
    bench_project(project, pid_file)
    monkeypatch.setenv("SHELL", "/bin/sh")
    dvc = subprocess.Popen([sys.executable, "-m", "dvc", "repro", "bench@cpu-fp32"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        worker, child = pids_in(pid_file)
        stage = parent_of(worker)
        group = group_of(worker)
        dvc.send_signal(kill)
        dvc.wait(timeout=30)
        wait_gone([stage, *group])
    finally:
        dvc.kill()
        dvc.wait()
    assert not (project / "reports/test-box/bench/cpu-fp32.json").exists()


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rpartition(")")[2].split()[1])


INSTALLER = """
import sys
from torchgate.core.lifetime import run_bound
run_bound(["sh", "-c", "sleep 600 & echo $$ $! > " + sys.argv[1] + "; wait"])
"""


def test_a_command_run_bound_ends_with_a_stage_killed_outright(tmp_path):
    """An installer building a venv (arms.venv) dies with the stage that started it."""
    pid_file = tmp_path / "pids"
    stage = subprocess.Popen([sys.executable, "-c", INSTALLER, str(pid_file)], cwd=ROOT)
    try:
        shell, sleep = pids_in(pid_file)
        group = group_of(shell)
        assert {shell, sleep} < set(group)
        stage.send_signal(signal.SIGKILL)
        wait_gone(group)
    finally:
        stage.kill()
        stage.wait()
