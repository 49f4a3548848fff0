"""Op coverage: the operators one eager step really runs (aten's and any extension's, by
namespace), and which ran off the device; and the work one call does, counted: operators
dispatched, FLOPs, kernels launched on a CUDA device."""
from __future__ import annotations

import random
import re
import time
import warnings
from dataclasses import dataclass, field

import torch

from torchgate.core.records.job import Job
from torchgate.core.records.outputs import Coverage
from torchgate.measure.build import build
from torchgate.measure.callgrind import without_keys
from torchgate.measure.device import sync_for

_PHASES = ("fwd", "bwd")
_FALLBACK_WARNING = re.compile(r"operator '([\w:.]+)'[^.]*?(?:fall ?back|not (?:currently )?"
                               r"(?:supported|implemented|lowered))", re.I | re.S)


def op_coverage(job: Job, factory, device: torch.device, dtype: torch.dtype) -> Coverage:
    """The operators one eager step really runs, forward and backward (and optimizer), as
    overload names (`aten.mm.default`; a user's custom op under its own namespace,
    `mylib.scale.default`), logged by a TorchDispatchMode; the ops whose tensors
    were on another device than requested (0-dim scalars aside, which live on the CPU by
    design, e.g. optimizer step counts); and fallback warnings (MPS: "... will fall back to
    run on the CPU"), which come from below the dispatcher and are the only trace of a
    fallback there. Runs first on the device: such warnings are emitted once per process."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    in_backward = getattr(torch._C, "_current_autograd_node", lambda: None)
    ops: dict[str, set] = {}
    elsewhere: dict[str, set] = {}
    calls = 0

    class OpLog(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # eager only: do not import dynamo (2 s)
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            nonlocal calls
            out = func(*args, **(kwargs or {}))
            name = str(func)
            if name.startswith("profiler."):  # record_function markers, not computation
                return out
            calls += 1
            ops.setdefault(name, set()).add("bwd" if in_backward() is not None else "fwd")
            other = {t.device.type for t in tree_leaves((args, kwargs, out))
                     if isinstance(t, torch.Tensor) and t.dim() > 0
                     and t.device.type != device.type}
            if other:
                elsewhere.setdefault(name, set()).update(other)
            return out

    random.seed(job.seed)
    torch.manual_seed(job.seed)
    workload = build(job, factory, device, dtype, "eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with OpLog():
            workload.step()
        sync_for(device.type)()
    messages = list(dict.fromkeys(
        f"{w.category.__name__}: {str(w.message).strip().splitlines()[0][:300]}"
        for w in caught if str(w.message).strip()))
    fallback = sorted({m.group(1) for w in caught
                       if (m := _FALLBACK_WARNING.search(str(w.message)))})
    return Coverage(device=device.type, calls=calls,
                    ops={name: "+".join(p for p in _PHASES if p in phases)
                         for name, phases in sorted(ops.items())},
                    other_device={name: tuple(sorted(devs))
                                  for name, devs in sorted(elsewhere.items())},
                    fallback_ops=tuple(fallback), warnings=tuple(messages[:10]))


@dataclass(frozen=True)
class Work:
    """What one call did, counted exactly: the operators it dispatched, by overload name
    (`aten.mm.default`; an extension's under its own namespace), and the floating-point
    operations of those torch's flop formulas know (torch.utils.flop_counter: matmuls,
    convolutions, attention; elementwise ops count none), by operator."""
    ops: dict[str, int]
    flops: dict[str, int]


@dataclass(frozen=True)
class WorkCounts:
    """The exact counts of one call's work as a mode's record keeps them: eager, the
    operators it dispatches and their FLOPs, in all and by name; compiled, the kernels
    inductor generated and the bytes they access; on CUDA, the kernels a call launches.
    `unmeasured`: count -> why it is not given."""
    aten_ops: int | None = None
    aten_ops_by_op: dict[str, int] = field(default_factory=dict)
    flops_per_call: int | None = None
    flops_by_op: dict[str, int] = field(default_factory=dict)
    inductor_kernels: int | None = None
    inductor_bytes: int | None = None
    kernel_launches: int | None = None
    unmeasured: dict[str, str] = field(default_factory=dict)


def eager_counts(work: Work) -> WorkCounts:
    return WorkCounts(aten_ops=sum(work.ops.values()), aten_ops_by_op=work.ops,
                      flops_per_call=sum(work.flops.values()), flops_by_op=work.flops)


def count_work(step) -> Work:
    """One call of `step` under a TorchDispatchMode: the host's share of its work that a change
    of the code (one more matmul, a wider layer) or of PyTorch (a decomposition) moves
    exactly. Called after the timings, in the steady state (an optimizer's first step makes
    its state, and counts more). Eager calls only: under a dispatch mode a compiled function
    runs eagerly, so its count would be eager's."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    ops: dict[str, int] = {}
    flops: dict[str, int] = {}

    class WorkCount(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # eager only: do not import dynamo (2 s)
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = str(func)
            if name.startswith("profiler."):  # record_function markers, not computation
                return out
            ops[name] = ops.get(name, 0) + 1
            formula = flop_registry.get(func.overloadpacket)
            if formula is not None:
                packet = str(func.overloadpacket)
                flops[packet] = flops.get(packet, 0) + int(
                    formula(*args, **(kwargs or {}), out_val=out))
            return out

    with WorkCount():
        step()
    return Work(dict(sorted(ops.items())), dict(sorted(flops.items())))


# The CUDA runtime and driver calls that start work on the device; a CUDA graph's replay is
# one launch of many kernels.
_LAUNCHES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                       "cuLaunchKernelEx", "cudaLaunchCooperativeKernel", "cudaGraphLaunch"})


# The largest operators a process keeps, of at least this share of the pass's self time
# each, to 4 significant digits: at 40 and 0.2 % the default run's bench records doubled.
OPERATORS_KEPT, OPERATOR_SHARE = 20, 0.005


def operator_times(step, sync, calls: int, cuda: bool = False) -> dict[str, float]:
    """Self time per call by operator, in seconds, over `calls` calls of `step` under
    torch.profiler: what each operator itself took, its callees apart, so that the unit's
    change can be traced to operators (judge.timings.by_operator). On a CUDA device each
    kernel's device time too ("cuda: <kernel>"). After the timed samples, never during
    them: the profiler adds its own cost to every operator it records (a few µs each), which
    both arms pay alike."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            step()
        sync()
    found: dict[str, float] = {}
    for event in prof.key_averages():
        name = operator_name(event.key)
        if event.self_cpu_time_total > 0:
            found[name] = found.get(name, 0.0) + event.self_cpu_time_total
        device = getattr(event, "self_device_time_total", 0) or 0
        if cuda and device > 0:
            found[f"cuda: {name}"] = found.get(f"cuda: {name}", 0.0) + device
    total = sum(found.values())
    kept = sorted(((us, name) for name, us in found.items() if us >= OPERATOR_SHARE * total),
                  reverse=True)[:OPERATORS_KEPT]
    return {name: float(f"{us * 1e-6 / calls:.4g}") for us, name in kept}


@dataclass(frozen=True)
class Profiled:
    """A profiling pass: self seconds per call by operator, why there are none, what it cost."""
    operator_s: dict[str, float] = field(default_factory=dict)
    unmeasured: dict[str, str] = field(default_factory=dict)
    wall_s: float | None = None


def profiled(step, sync, calls: int, cuda: bool = False) -> Profiled:
    """`operator_times`, its wall time, and why there are none where the profiler failed (an
    accelerator it does not support): the pass's loss, said in the record, never the mode's
    failure."""
    started = time.perf_counter()
    try:
        found = operator_times(step, sync, calls, cuda)
    except Exception as exc:  # the timings before it stand
        return Profiled(unmeasured={
            "operator_s": f"the profiler failed: {type(exc).__name__}: {exc}"[:300]})
    return Profiled(found, wall_s=float(f"{time.perf_counter() - started:.3g}"))


def operator_name(key: str) -> str:
    """An event's name as both sides call it: a compiled graph's call ("## Call
    CompiledFxGraph fydtdus… ##") without its cache key, which differs wherever the code does."""
    return without_keys(key).strip(" #") or key


def kernel_launches(step, sync) -> int:
    """The kernels one call of `step` launches on a CUDA device, from the profiler's record of
    the runtime calls (CUPTI): the launch overhead a fusion removes and a decomposition adds,
    counted, not timed. After the timings: the profiler slows the call it watches."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        sync()
    return sum(1 for event in prof.events() if event.name in _LAUNCHES)
