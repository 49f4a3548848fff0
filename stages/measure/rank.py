"""One rank of a distributed unit: a process its unit's worker starts (measure.ranks), in the
worker's process group, ending with it.

Run as `python -m torchgate.measure.rank COMMANDS_FD ANSWERS_FD`; it reads JSON lines from the
first pipe and answers each on the second. The first line is its order (the job, the mode, its
rank, the world size, the worker's rendezvous port, its threads); the rank then joins the
process group (gloo on the CPU, nccl on CUDA) through the worker's FileStore, a private file,
within `bench.rank_timeout_s`, builds the workload with `rank`, `world_size` and `ddp`
(DistributedDataParallel with the timed all-reduce hook below), and answers "ready".
Then each "step" runs one step and answers once the device finished it; "report K" answers its
last K steps' times; "stop", or the end of the pipe, ends it. A failure is its one-line answer
(`error`), and it exits. Imports torch and the measure and core rooms only.
"""
from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from datetime import timedelta
from typing import Any

from torchgate.core.lifetime import parent_death_signal

if __name__ == "__main__":
    parent_death_signal(signal.SIGKILL)   # first: never outlive the worker

import torch
import torch.distributed as dist

from torchgate.core.config.targets import load_target
from torchgate.core.errors import clip
from torchgate.core.numbers import median
from torchgate.core.records.job import Job
from torchgate.core.typed import from_data, to_data
from torchgate.measure.build import build, configure, use_code
from torchgate.measure.device import peak_memory_bytes, peak_memory_reset
from torchgate.measure.dynamo import DynamoLog, reset_dynamo

WINDOW = 16          # the slowed rank's own time: the median of its last steps
SPIN_S = 2e-4        # ... and the end of its hold, spun rather than slept


# ---- the timed all-reduce ---------------------------------------------------------------
# The DDP communication hook a rank registers, and the step's timeline its marks are read on.
# The hook all-reduces each gradient bucket as DDP's default hook does (the average over the
# ranks) and marks when it was launched and when it completed. On the CPU (gloo) the marks are
# host clocks: the launch when DDP hands the bucket over (the backward pass computed it
# synchronously), the completion in the callback gloo runs as the collective ends. On CUDA
# (nccl) they are CUDA events: the launch recorded on the current stream before the
# collective, so it stamps when the gradients were ready; the completion recorded in the
# future's callback, whose current stream waits for the collective (the CUDA semantics of
# torch.futures). Either is read as seconds since the step's start once the step has ended
# and the device was synchronized. A step's all-reduce time is the union of its buckets'
# spans: buckets in flight together count once.
class Timeline:
    """Marks within one step: host clocks on the CPU, CUDA events on a GPU, each read as
    seconds since the step's start."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.origin: Any = None

    def mark(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def start(self) -> None:
        self.origin = self.mark()

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def seconds(self, mark: Any) -> float:
        """After `synchronize`: the mark's time since the step's start."""
        if self.cuda:
            return self.origin.elapsed_time(mark) * 1e-3
        return mark - self.origin


class TimedAllReduce:
    """DDP's all-reduce (the mean of the ranks' gradients), each bucket's launch and completion
    marked on the timeline: `ddp.register_comm_hook(None, timed.allreduce)`."""

    def __init__(self, timeline: Timeline):
        self.timeline = timeline
        self.spans: list[list[Any]] = []     # [launch, completion] per bucket of this step
        self.bytes = 0                       # all-reduced in this step

    def begin_step(self) -> None:
        self.spans, self.bytes = [], 0

    def allreduce(self, state, bucket):    # unannotated: DDP checks annotations as types
        tensor = bucket.buffer()
        span = [self.timeline.mark(), None]
        self.spans.append(span)
        self.bytes += tensor.numel() * tensor.element_size()
        tensor.div_(dist.get_world_size())
        future = dist.all_reduce(tensor, async_op=True).get_future()

        def done(fut):
            span[1] = self.timeline.mark()   # gloo: its thread, as the collective ends
            return fut.value()[0]

        return future.then(done)

    def seconds(self) -> float:
        """This step's all-reduce time, once the step has ended and been synchronized."""
        return union([(self.timeline.seconds(a), self.timeline.seconds(b))
                      for a, b in self.spans if b is not None])

    def ready(self) -> float | None:
        """When this step's last bucket was launched: the rank's backward pass done (None:
        nothing was all-reduced)."""
        return self.timeline.seconds(self.spans[-1][0]) if self.spans else None


def union(spans: list[tuple[float, float]]) -> float:
    """The length of the union of intervals: overlapping spans count once."""
    total, end = 0.0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def one_line(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return clip(f"{type(exc).__name__}: {first}")


def device_for(job: Job, rank: int) -> torch.device:
    """Rank r's device: the CPU, or CUDA device r (measure.ranks checked there are enough)."""
    return torch.device("cuda", rank) if job.device.type == "cuda" else torch.device("cpu")


class Rank:
    """A rank, joined and built: its steps, timed."""

    def __init__(self, order: dict[str, Any]):
        job = from_data(Job, order["job"], "job")
        if job.code:
            use_code(job.code)
        configure(job)
        torch.set_num_threads(order["threads"])
        random.seed(job.seed)
        torch.manual_seed(job.seed)
        self.rank, world = order["rank"], order["world_size"]
        self.device = device = device_for(job, self.rank)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        timeout = timedelta(seconds=job.timing.rank_timeout_s)
        store = dist.FileStore(order["store"], world)
        store.set_timeout(timeout)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", store=store,
                                rank=self.rank, world_size=world, timeout=timeout)
        self.timeline = Timeline(device)
        self.hook = TimedAllReduce(self.timeline)
        self.compiled = order["mode"] != "eager"
        self.dynamo = DynamoLog() if self.compiled and self.rank == 0 else None
        if self.dynamo is not None:
            reset_dynamo()
            self.dynamo.__enter__()
        peak_memory_reset(device)
        self.workload = build(job, load_target(job.workload.target), device,
                              getattr(torch, job.precision.dtype), order["mode"],
                              provided={"rank": self.rank, "world_size": world,
                                        "ddp": self.ddp})
        spec = job.workload
        self.slow = spec.slow_factor if spec.slow_rank == self.rank else None
        self.step_s: list[float] = []
        self.allreduce_s: list[float] = []
        self.ready_s: list[float] = []     # from its start to its last bucket's launch
        self.own_s: list[float] = []       # ... without the knob's hold
        self.bytes = 0

    def ddp(self, module: torch.nn.Module) -> torch.nn.Module:
        """DistributedDataParallel, all-reducing through the timed hook: what a distributed
        workload wraps its model with."""
        ids = [self.device.index] if self.device.type == "cuda" else None
        wrapped = torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)
        wrapped.register_comm_hook(None, self.hook.allreduce)
        return wrapped

    def step(self) -> None:
        self.hook.begin_step()
        self.timeline.start()
        spun = self._lag() if self.slow else 0.0
        self.workload.step()
        end = self.timeline.mark()
        self.timeline.synchronize()
        step_s, ready_s = self.timeline.seconds(end), self.hook.ready()
        ready_s = step_s if ready_s is None else ready_s
        self.step_s.append(step_s)
        self.allreduce_s.append(self.hook.seconds())
        self.ready_s.append(ready_s)
        self.own_s.append(ready_s - spun)
        self.bytes = self.hook.bytes
        if self.dynamo is not None and len(self.step_s) == 1:
            self.dynamo.mark_first()

    def _lag(self) -> float:
        """`_slow_rank_`: hold this rank's step back by (factor - 1) times its own
        recent time to the all-reduce (a straggler's compute), so that it arrives `factor`
        times as late; the first steps, with nothing to go by, are not held."""
        recent = self.own_s[-WINDOW:]
        hold = (self.slow - 1) * max(median(recent), 0.0) if recent else 0.0
        start = time.perf_counter()
        # Asleep, leaving the CPU to the other ranks as a slow node would, then spinning the
        # last moment, which a sleep would overshoot.
        time.sleep(max(hold - SPIN_S, 0.0))
        while time.perf_counter() - start < hold:
            pass
        # As long as it really took: a hold the scheduler stretched must not feed the next.
        return time.perf_counter() - start

    def report(self, last: int) -> dict[str, Any]:
        return {"step_s": self.step_s[-last:], "allreduce_s": self.allreduce_s[-last:],
                "ready_s": self.ready_s[-last:],
                "bytes": self.bytes, "peak_bytes": peak_memory_bytes(self.device),
                "items": self.workload.items,
                "dynamo": to_data(self.dynamo.summary()) if self.dynamo else None}

    def close(self) -> None:
        if self.dynamo is not None:
            self.dynamo.__exit__(None, None, None)
        if dist.is_initialized():
            dist.destroy_process_group()


def serve(commands, answer) -> int:
    """Read the order, then commands, until "stop" or the end of the pipe."""
    rank = None
    try:
        rank = Rank(json.loads(commands.readline()))
        answer({"ready": True, "items": rank.workload.items})
        for line in commands:
            word, _, arg = line.strip().partition(" ")
            if word == "step":
                rank.step()
                answer({})
            elif word == "report":
                answer(rank.report(int(arg)))
            else:
                break
        return 0
    except Exception as exc:
        answer({"error": one_line(exc)})
        return 1
    finally:
        if rank is not None:
            rank.close()


def main(argv: list[str]) -> int:
    commands, answers = (int(fd) for fd in argv)

    def answer(message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        try:
            while data:
                data = data[os.write(answers, data):]
        except BrokenPipeError:   # the worker is gone (it ended the mode): nobody to tell
            pass

    with os.fdopen(commands, "r", encoding="utf-8") as inbox:
        return serve(inbox, answer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
