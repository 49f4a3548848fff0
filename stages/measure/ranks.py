"""A distributed unit (`_ranks_: N`): its worker process starts N ranks (measure.rank) per
mode and drives them in lock-step, so that the worker's own timing (measure.timing) times the
unit's step as it times any other.

Placement and threads: the ranks are the worker's children, in its process group, so they run
where the worker runs (one node, under the Ray backend too, which asks for their CPUs:
launch.ray_placement) and end with it. Each gets the unit's threads divided among the ranks
(core.config.rank_threads), so that N ranks fit the CPUs one process would use; on CUDA
rank r takes device r (a machine with fewer devices than ranks SKIPS the unit, saying so).

Rendezvous: the ranks join a FileStore in a folder of the worker's private scratch (no socket
for anyone else to join) and form the process group, gloo on the CPU and nccl on CUDA (their
sockets on the loopback device), with `bench.rank_timeout_s` as the timeout of the store, the
process group and each collective.

Each call of the unit's step sends "step" to every rank and returns when all have answered,
after their device finished: the step of the slowest rank, and the pipes' round trip. After the steady state each rank reports its steady steps: its step time and
its all-reduce time and its time to reach it per step (measure.rank), from which `reduce` makes
the record (core.records.schema.Ranks: the all-reduce of the last rank to arrive, bus bandwidth, each
rank's time to the collective, the straggler).

Nothing here waits for ever: a rank that fails answers its error and the mode fails with that
line; one that ends without a word (a crash) fails it with its exit status; one that does not
answer within `bench.rank_timeout_s` (hung, or a rendezvous that never completed) fails it
with "did not answer within ...". The ranks are then killed, and the worker goes on with its
next mode.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.distributed

from torchgate.core import machine, scratch
from torchgate.core.config import rank_threads
from torchgate.core.lifetime import killed_by
from torchgate.core.names import pythonpath
from torchgate.core.numbers import median
from torchgate.core.records.job import Job
from torchgate.core.records.outputs import Dynamo
from torchgate.core.records.schema import Ranks, RankTiming
from torchgate.core.typed import from_data, to_data
from torchgate.measure.accelerator import Unavailable

RANK = (sys.executable, "-m", "torchgate.measure.rank")
STOP_S = 5.0            # a rank told to stop is killed after this


class RankError(RuntimeError):
    """A rank failed, ended or hung: the mode's one-line error."""


def check_ranks(job: Job) -> None:
    """Before anything is measured: where the unit's ranks cannot run, the unit is SKIPPED."""
    n, kind = job.workload.ranks or 1, job.device.type
    if kind not in ("cpu", "cuda"):
        raise Unavailable(f"distributed units run on cpu (gloo) and cuda (nccl); device "
                          f"{job.device.name!r} is {kind}")
    if kind == "cuda" and torch.cuda.device_count() < n:
        raise Unavailable(f"workload {job.workload.name} runs {n} ranks, one per CUDA device; "
                          f"this machine has {torch.cuda.device_count()}")
    cores = machine.usable_cores() or 1     # each rank is a process with torch imported
    if kind == "cpu" and cores < n:
        raise Unavailable(f"workload {job.workload.name} runs {n} ranks, a core each at least; "
                          f"this process may use {cores}: lower its _ranks_")


@dataclass
class UnitStep:
    """What the worker's timing sees of a distributed unit: one step of every rank."""
    step: Callable[[], None]
    items: int
    flops: float | None = None
    bytes_moved: float | None = None
    shapes: dict | None = None


class RankGroup:
    """The N ranks of one mode of a distributed unit, started, joined and built."""

    def __init__(self, job: Job, mode: str, threads: int, command: tuple[str, ...] = RANK):
        self.n = job.workload.ranks or 1
        self.timeout_s = job.timing.rank_timeout_s
        self.threads = rank_threads(threads, self.n)
        self.backend = "nccl" if job.device.type == "cuda" else "gloo"
        self.slowed = (job.workload.slow_rank, job.workload.slow_factor)
        # The rendezvous: a file in a folder only this user can open (no socket anyone on
        # the network could join, as a TCPStore's, which listens on every interface).
        self.folder = tempfile.TemporaryDirectory(prefix="ranks-", dir=scratch.run_dir())
        self.store = os.path.join(self.folder.name, "store")
        env = {**os.environ, "PYTHONPATH": pythonpath()}    # this torchgate, in any venv
        if Path("/sys/class/net/lo").exists():   # the collectives' own sockets: loopback
            env.setdefault("GLOO_SOCKET_IFNAME" if self.backend == "gloo"
                           else "NCCL_SOCKET_IFNAME", "lo")
        self.procs: list[subprocess.Popen] = []
        self.send_fds: list[int] = []
        self.answer_fds: list[int] = []
        self.buffers: list[bytes] = []
        try:
            for rank in range(self.n):
                self._start(command, env, {
                    "job": to_data(job), "mode": mode, "rank": rank, "world_size": self.n,
                    "store": self.store, "threads": self.threads})
            ready = self._answers("join the process group and build the workload")
        except BaseException:
            self.close(kill=True)
            raise
        self.unit = UnitStep(self.step, sum(a.get("items") or 0 for a in ready))

    def _start(self, command: tuple[str, ...], env: dict, order: dict) -> None:
        commands_r, commands_w = os.pipe()
        answers_r, answers_w = os.pipe()
        proc = subprocess.Popen([*command, str(commands_r), str(answers_w)],
                                pass_fds=(commands_r, answers_w), env=env,
                                stdin=subprocess.DEVNULL)
        os.close(commands_r)
        os.close(answers_w)
        self.procs.append(proc)
        self.send_fds.append(commands_w)
        self.answer_fds.append(answers_r)
        self.buffers.append(b"")
        os.set_blocking(answers_r, False)
        self._send(len(self.procs) - 1, json.dumps(order))

    def _send(self, rank: int, line: str) -> None:
        try:
            os.write(self.send_fds[rank], (line + "\n").encode())
        except BrokenPipeError:
            pass                 # it ended: its end of file or exit status tells why

    def _answers(self, doing: str) -> list[dict]:
        """Every rank's next answer, within the timeout; RankError naming the first rank
        that failed, ended or did not answer."""
        found: dict[int, dict] = {}
        deadline = time.monotonic() + self.timeout_s
        while len(found) < self.n:
            waiting = {self.answer_fds[r]: r for r in range(self.n) if r not in found}
            left = deadline - time.monotonic()
            ready = select.select(list(waiting), [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                first = min(waiting.values())
                raise RankError(f"rank {first} of {self.n} did not {doing} within "
                                f"{self.timeout_s:g} s (bench.rank_timeout_s): hung, or its "
                                f"rendezvous never completed")
            for fd in ready:
                rank = waiting[fd]
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise RankError(f"rank {rank} of {self.n} ended before it could {doing} "
                                    f"({self._ended(rank)})")
                self.buffers[rank] += chunk
                line, newline, rest = self.buffers[rank].partition(b"\n")
                if newline:
                    self.buffers[rank] = rest
                    found[rank] = json.loads(line)
                    if "error" in found[rank]:
                        raise RankError(f"rank {rank} of {self.n}: {found[rank]['error']}")
        return [found[r] for r in range(self.n)]

    def _ended(self, rank: int) -> str:
        try:
            code = self.procs[rank].wait(timeout=1)
        except subprocess.TimeoutExpired:
            return "its pipe closed"
        return killed_by(code) or f"exit status {code}"

    def step(self) -> None:
        for rank in range(self.n):
            self._send(rank, "step")
        self._answers("finish a step")

    def report(self, steps: int) -> tuple[Ranks, int | None, Dynamo | None]:
        """The record of the last `steps` steps (the steady state), the largest rank's peak
        memory, and rank 0's graph breaks and recompiles (compiled modes)."""
        for rank in range(self.n):
            self._send(rank, f"report {steps}")
        answers = self._answers("report its steps")
        peaks = [a["peak_bytes"] for a in answers if a.get("peak_bytes") is not None]
        dynamo = answers[0].get("dynamo")
        return (reduce(answers, self.backend, self.threads, *self.slowed),
                max(peaks, default=None),
                None if dynamo is None else from_data(Dynamo, dynamo, "dynamo"))

    def close(self, kill: bool = False) -> None:
        """Stop the ranks; those that do not end within STOP_S are killed, and with `kill`
        (a rank failed or hung: the others may be stuck in a collective) all at once."""
        for rank in range(len(self.send_fds)):
            self._send(rank, "stop")
        for fd in self.send_fds + self.answer_fds:
            os.close(fd)
        self.send_fds, self.answer_fds = [], []
        deadline = time.monotonic() + (0 if kill else STOP_S)
        for proc in self.procs:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
        self.folder.cleanup()           # the store's file

    def __enter__(self) -> "RankGroup":
        return self

    def __exit__(self, kind, *exc) -> None:
        self.close(kill=kind is not None)


def reduce(answers: list[dict], backend: str, threads: int, slowed: int | None = None,
           slow_factor: float | None = None) -> Ranks:
    """Each rank's medians over its last steps, and per step the all-reduce of the last rank
    to arrive (the shortest: the others waited for it), whose median is the unit's."""
    k = min(len(a["step_s"]) for a in answers)
    reduces = [a["allreduce_s"][-k:] for a in answers]
    timings = tuple(
        RankTiming(rank, median(a["step_s"][-k:]), median(a["allreduce_s"][-k:]),
                   median(a["ready_s"][-k:]), a.get("peak_bytes"))
        for rank, a in enumerate(answers))
    last = median(min(step) for step in zip(*reduces))
    return Ranks(backend, len(answers), threads, k, int(answers[0]["bytes"]), last, timings,
                 slowed, slow_factor)
