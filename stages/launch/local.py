"""Starts worker processes: the one seam between measurement and where it runs.

Local subprocesses; the Ray backend (launch.ray_backend) runs these same functions inside a
task on a cluster node, so measurement and statistics never see where a unit ran. Every
failure mode of a worker (exception, crash, hard abort, timeout, missing result) comes back
as a status with a message, and where it ran (`host`). No worker outlives its unit: its
process group is killed when it ends, with what it started in a session of its own, and it ends with this process however this process
ends (core.lifetime). Its files are in this user's private scratch folder (core.scratch).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from torchgate.core import lifetime, names, scratch
from torchgate.core.errors import clip
from torchgate.core.lifetime import INTERPRETER_TIMEOUT_S, killed_by
from torchgate.core.records.job import IMPORTED, Job
from torchgate.core.typed import to_data
from torchgate.core.vocabulary import Status
from torchgate.measure import callgrind
from torchgate.measure.proc import carrying, orphans, process_cpu_s, started_at


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _describe_exit(code: int) -> str:
    return killed_by(code) or f"exited with status {code} before writing its result"


class _Worker:
    """A started worker process and the files it reads and writes."""

    def __init__(self, job: Job, tmp: Path, python: str | None, fresh_compile_cache: bool,
                 pass_fds: tuple[int, ...] = ()):
        self.result_path, self.stderr_path = tmp / "result.json", tmp / "stderr.txt"
        self.imported_path, self.imported, self.import_hung = tmp / "imported", False, False
        self.import_limit_s = job.timing.import_timeout_s
        self.targets = ", ".join(dict.fromkeys(spec.target for spec in job.workloads))
        job_path = tmp / "job.json"
        job_path.write_text(json.dumps(to_data(job)), encoding="utf-8")
        env = dict(os.environ)
        # This torchgate (the arm's venv has torch alone), then the stage's folder, so that a
        # workload in the user's own module imports by name.
        env["PYTHONPATH"] = names.pythonpath(os.getcwd(), env=env)
        env["TORCHINDUCTOR_CACHE_DIR"] = str(
            scratch.compile_cache(job.compile_cache, job.compile_cache_cold) if job.compile_cache
            else tmp / "inductor" if fresh_compile_cache else scratch.inductor_cache())
        line, entry = lifetime.lifeline()       # it ends with this process (core.lifetime)
        env.update(entry)
        env[IMPORTED] = str(self.imported_path)
        argv = [python or sys.executable, "-m", "torchgate.measure.worker", str(job_path),
                str(self.result_path)]
        if job.kind == "instructions":          # a counts process (measure.callgrind)
            client = argv
            argv, pins = callgrind.command(argv, tmp / "callgrind")
            env = callgrind.drawn_layout(client, {**env, **pins})
        self.started = time.perf_counter()
        self.ended, self.born = False, None
        with open(self.stderr_path, "wb") as err, open(os.devnull, "wb") as out:
            try:
                self.proc = lifetime.launched(lambda: subprocess.Popen(
                    argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    pass_fds=(*pass_fds, line),
                    start_new_session=True))  # its own group: a timeout kills compilers too
                self.born = started_at(self.proc.pid)
            except OSError as exc:   # the interpreter is gone (a venv removed mid-run)
                self.proc = _NotStarted()
                self.result_path.write_text(json.dumps({
                    "status": Status.ERROR, "wall_s": 0.0,
                    "error": f"cannot start a worker with {python or sys.executable}: "
                             f"{exc.strerror or exc}; was its venv removed while this run "
                             "used it? Run again (a removed arm's venv is built again)",
                    "host": {"name": socket.gethostname(), "node": None, "hardware": None}}),
                    encoding="utf-8")

    def still_importing(self) -> bool:
        """Whether the worker has yet to import its workload modules (measure.worker)."""
        self.imported = self.imported or self.imported_path.exists()
        return not self.imported

    def import_overdue(self) -> bool:
        """Still importing past the import limit: the worker is stopped as a module that
        hangs at import, a minute or two in, not at the unit's time limit."""
        overdue = (self.import_limit_s is not None and self.still_importing()
                   and time.perf_counter() - self.started > self.import_limit_s)
        self.import_hung = self.import_hung or overdue
        return overdue

    def wait(self, timeout_s: float) -> bool:
        """Wait for the worker to end; True when it ran out of time (or import time)."""
        deadline = self.started + timeout_s
        while (left := deadline - time.perf_counter()) > 0:
            watching = self.import_limit_s is not None and self.still_importing()
            try:
                self.proc.wait(timeout=min(left, 0.5) if watching else left)
                return False
            except subprocess.TimeoutExpired:
                if self.import_overdue():
                    return True
        return True

    def kill(self) -> None:
        """Kill the worker's process group: the worker, if it still runs (a timeout, or this
        stage was interrupted), and whatever it started, also once the worker has exited;
        then what it started outside the group (a process in a session of its own), known by
        the variable only this worker's environment holds, or, with that cleared too (`env
        -i setsid`), once reparented to this process."""
        if self.ended or self.proc.pid is None:
            self.ended = True
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):   # the group has ended
            pass
        self.proc.wait()
        for pid in carrying(IMPORTED, str(self.imported_path)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if self.born is not None:
            lifetime.orphans_left(lambda own: orphans(own, self.born))
        lifetime.ended(self.proc.pid)
        self.ended = True

    def outcome(self, timeout_s: float, timed_out: bool) -> dict:
        """The result the worker wrote, or a status and message for how it failed."""
        self.kill()
        wall_s = time.perf_counter() - self.started
        here = {"name": socket.gethostname(), "node": None, "hardware": None}
        if timed_out:
            if self.import_hung:
                error = (f"importing {self.targets} did not finish within the "
                         f"{self.import_limit_s:g} s import limit: does the module wait at "
                         "import (a lock, the network, input)? Else raise "
                         "bench.import_timeout_s")
            else:
                error = (f"no result within the {timeout_s:g} s time limit"
                         + (f", still importing {self.targets}" if self.still_importing()
                            else "") + " (raise bench.timeout_s or the workload's _timeout_s_)")
            return {"status": Status.TIMEOUT, "wall_s": wall_s, "host": here, "error": error,
                    "stderr_tail": _tail(self.stderr_path)}
        if self.result_path.exists():
            return json.loads(self.result_path.read_text(encoding="utf-8"))
        code = self.proc.returncode
        tail = _tail(self.stderr_path)
        status = Status.OOM if code == -signal.SIGKILL else Status.CRASHED
        reason = _describe_exit(code) + (" (likely the out-of-memory killer)"
                                         if status == Status.OOM else "")
        last = tail.splitlines()[-1] if tail else "no output on stderr"
        return {"status": status, "wall_s": wall_s, "error": clip(f"worker {reason}: {last}"),
                "stderr_tail": tail, "host": here}


def run_worker(job: Job, *, timeout_s: float, python: str | None = None,
               fresh_compile_cache: bool = True) -> dict:
    """Run one job in a fresh process; always returns a dict with `status`.

    A fresh inductor cache per process makes the first compiled call a real cold compile.
    """
    with tempfile.TemporaryDirectory(dir=scratch.run_dir()) as tmp:
        worker = _Worker(job, Path(tmp), python, fresh_compile_cache)
        try:
            timed_out = worker.wait(timeout_s)
        finally:
            worker.kill()
        return worker.outcome(timeout_s, timed_out)


def pair_cores() -> tuple[int, ...] | None:
    """The cores this process may use, in a random order: a lock-step pair's, whose arms
    both run on the first of them their threads need. A host core slowed for a while (another
    tenant; no steal counter shows it) then slows both arms' turns: on a shared 2-core VM, with
    each arm on a core of its own, a stretch of samples 25-40 % slow hit one arm in 62-84 %
    of cases and moved that pair's ratio by as much. Random per pair: no core's state is
    frozen into every pair (randomize across pairs, equalize within one). None where the
    system has no affinity (macOS)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    random.SystemRandom().shuffle(cores)
    return tuple(cores)


def run_interleaved(jobs: list[tuple[Job, str | None]], *, timeout_s: float,
                    fresh_compile_cache: bool = True) -> list[dict]:
    """Run jobs (one per interpreter) in lock-step: one process at a time holds the turn and
    hands it on where `torchgate.measure.worker.Baton` is called (before each timed phase and
    sample), so that their samples alternate A B A B ... and share the machine's moment.

    The next process starts once the previous one has handed on its first turn, so imports
    do not overlap anything timed either. Each process's time limit counts only the time it
    held the turn; a process that fails or runs past it drops out and the others go on.
    """
    cores = pair_cores() if jobs and jobs[0][0].timing.pin_pairs else None
    with contextlib.ExitStack() as stack:
        turns: list[_Turns] = []
        try:
            for job, python in jobs:
                job = dataclasses.replace(job, cores=cores)
                tmp = Path(stack.enter_context(
                    tempfile.TemporaryDirectory(dir=scratch.run_dir())))
                turns.append(_Turns(job, tmp, python, fresh_compile_cache, timeout_s))
                turns[-1].hold()        # up to its first turn, alone
            while any(t.alive for t in turns):
                for t in turns:
                    if t.alive:
                        others = [o for o in turns if o is not t and o.alive]
                        before = [o.cpu_s() for o in others]
                        started = time.perf_counter()
                        t.give()
                        t.hold()
                        waited = time.perf_counter() - started
                        for o, cpu in zip(others, before * t.alive):   # not its exit
                            o.waited(waited, cpu)
            return [{**t.worker.outcome(timeout_s, t.timed_out), "waiting": t.waiting()}
                    for t in turns]
        finally:
            for t in turns:
                t.close()


class _NotStarted:
    """The process a worker that could not start stands in for: ended, with no group."""
    pid = None
    returncode = None

    def wait(self, timeout=None) -> None:
        return None

    def poll(self) -> int:
        return 0


class _Turns:
    """One worker of an interleaved run and the two pipes of its turns."""

    def __init__(self, job: Job, tmp: Path, python: str | None, fresh: bool, limit_s: float):
        go_read, self.go = os.pipe()          # launcher -> worker: "your turn"
        self.done, done_write = os.pipe()     # worker -> launcher: "turn handed back"
        try:
            self.worker = _Worker(dataclasses.replace(job, baton=(go_read, done_write)), tmp,
                                  python, fresh, pass_fds=(go_read, done_write))
        finally:
            os.close(go_read)
            os.close(done_write)
        self.limit_s, self.held_s = limit_s, 0.0
        self.alive, self.timed_out = True, False
        self.waited_s, self.waited_cpu_s, self.waits = 0.0, 0.0, 0

    def cpu_s(self) -> float | None:
        return process_cpu_s(self.worker.proc.pid) if self.worker.proc.pid else None

    def waited(self, seconds: float, cpu_before: float | None) -> None:
        """Count a wait for another worker's turn, and the CPU this worker used meanwhile."""
        cpu_after = self.cpu_s()
        if cpu_before is None or cpu_after is None:
            return
        self.waited_s += seconds
        self.waited_cpu_s += max(0.0, cpu_after - cpu_before)
        self.waits += 1

    def waiting(self) -> dict | None:
        """measure's Waiting, as the record keeps it; None before any timed wait."""
        if not self.waits:
            return None
        return {"seconds": round(self.waited_s, 6), "cpu_s": round(self.waited_cpu_s, 6),
                "turns": self.waits}

    def give(self) -> None:
        try:
            os.write(self.go, b"g")
        except BrokenPipeError:
            self.alive = False

    def hold(self) -> None:
        """Wait while the worker holds the turn: until it hands it back, exits or runs out of
        time."""
        started = time.perf_counter()
        ended = False
        while self.alive:
            left = self.limit_s - self.held_s - (time.perf_counter() - started)
            if left <= 0 or self.worker.import_overdue():
                self.timed_out, self.alive = True, False
                self.worker.kill()
            elif ended or self.worker.proc.poll() is not None:
                try:
                    self.worker.proc.wait(timeout=left)
                    self.alive = False
                except subprocess.TimeoutExpired:
                    pass
            elif select.select([self.done], [], [], min(left, 0.5))[0]:
                if os.read(self.done, 1) == b"y":
                    break
                ended = True                  # end of file: the worker is exiting
        self.held_s += time.perf_counter() - started

    def close(self) -> None:
        self.worker.kill()
        os.close(self.go)
        os.close(self.done)


# Environment capture: the environment as an arm's interpreter sees it, read by running
# measure.probe there (it needs only torch), on whichever machine runs that arm's units.

def capture_env(python: str) -> dict:
    """The environment as another interpreter sees it (it needs only torch), with every
    distribution installed there: it imports none of the workloads, so which of them matter
    is this run's to say (core.records.packages.comparable)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from torchgate.measure.probe import capture; print(json.dumps(capture(every=True)))")
    out = subprocess.run([python, "-c", code, names.importable()], capture_output=True, text=True,
                         timeout=INTERPRETER_TIMEOUT_S)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"could not capture the environment of {python}: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])
