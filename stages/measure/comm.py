"""A rank's all-reduce, timed: the DDP communication hook a distributed unit's ranks register
(measure.rank), and the step's timeline its marks are read on.

The hook all-reduces each gradient bucket as DDP's default hook does (the average over the
ranks) and marks when it was launched and when it completed. On the CPU (gloo) the marks are
host clocks: the launch when DDP hands the bucket over (the backward pass computed it
synchronously), the completion in the callback gloo runs as the collective ends. On CUDA
(nccl) they are CUDA events: the launch recorded on the current stream before the collective,
so it stamps when the gradients were ready; the completion recorded in the future's callback,
whose current stream waits for the collective (the CUDA semantics of torch.futures). Either is
read as seconds since the step's start once the step has ended and the device was synchronized.
A step's all-reduce time is the union of its buckets' spans: buckets in flight together count
once.
"""
from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist


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
