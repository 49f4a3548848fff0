"""A worker process: measures one workload on one cell, or computes its numerics.

Run as `python -m stages.measure.worker JOB.json RESULT.json` by the launcher; the process is the
unit of replication and of isolation. Imports only torch and the standard library, so that
the candidate interpreter of an A/B run needs nothing but torch.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import resource
import sys
import time
import traceback
import warnings
from functools import partial

import torch

from stages.measure.accuracy import (digest, error_metrics, fingerprint, flatten, max_abs_difference,
                       nonfinite_count)
from stages.core.records import dumps, write_text
from stages.measure.timing import BusyMachine, device_sync, make_clock, measure
from stages.workloads import load_target


class Unavailable(Exception):
    """The device of this cell is not present on this machine."""


def failure(exc: BaseException) -> dict:
    """A status and a one-line message for an exception raised by a workload."""
    text = str(exc).lower()
    oom = (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
           or "out of memory" in text or "can't allocate memory" in text
           or "not enough memory" in text)
    message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return {"status": "OOM" if oom else "ERROR", "error": message[:500],
            "traceback": traceback.format_exc(limit=-3)[-2000:]}


def resolve_device(spec: dict) -> torch.device:
    kind = spec["type"]
    if kind == "cpu":
        return torch.device("cpu")
    module = getattr(torch, kind, None)
    available = getattr(module, "is_available", None)
    if available is None or not available():
        raise Unavailable(f"device {spec['name']!r} ({kind}) is not available on this machine "
                          f"with torch {torch.__version__}")
    return torch.device(kind)


def configure(job: dict) -> None:
    threads = job["device"].get("threads", 0)
    if threads:
        torch.set_num_threads(threads)
    torch.set_float32_matmul_precision(job["precision"]["matmul_precision"])


def compiler(mode: str):
    if mode == "eager":
        return lambda fn: fn
    if mode == "compiled":
        return torch.compile
    return partial(torch.compile, mode=mode)


def build(job: dict, factory, device: torch.device, dtype: torch.dtype, mode: str):
    precision = job["precision"]
    workload = factory(device=device, dtype=dtype, compile=compiler(mode), seed=job["seed"],
                       **job["workload"]["kwargs"])
    if precision.get("autocast") and dtype != torch.float64:
        inner = workload.step
        amp = getattr(torch, precision["autocast_dtype"])
        workload.step = lambda: _autocast_call(inner, device.type, amp)
    return workload


def _autocast_call(fn, device_type: str, dtype: torch.dtype):
    with torch.autocast(device_type, dtype=dtype):
        return fn()


def peak_memory_reset(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    elif device.type == "xpu":
        torch.xpu.reset_peak_memory_stats()


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated())
    if device.type == "xpu":
        return int(torch.xpu.max_memory_allocated())
    if device.type == "mps":
        return int(torch.mps.driver_allocated_memory())
    # CPU: the process's resident high-water mark (Linux reports KiB).
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def sentinel(device: torch.device) -> dict:
    """Machine speed, independent of the code under test: a Python loop and a memory copy."""
    loop = []
    for _ in range(3):
        t0 = time.perf_counter()
        sum(i * i for i in range(200_000))
        loop.append(time.perf_counter() - t0)
    src = torch.ones(8 * 1024 * 1024)  # 32 MiB, on the CPU: host memory bandwidth
    dst = torch.empty_like(src)
    copy = []
    for _ in range(5):
        t0 = time.perf_counter()
        dst.copy_(src)
        copy.append(time.perf_counter() - t0)
    return {"python_loop_s": min(loop), "copy_32mib_s": min(copy)}


def dynamo_counts() -> dict:
    from torch._dynamo.utils import counters
    breaks = counters.get("graph_break", {})
    return {
        "graph_breaks": int(sum(breaks.values())),
        "graph_break_reasons": sorted({str(r).strip().splitlines()[0][:200] for r in breaks}),
        "unique_graphs": int(counters.get("stats", {}).get("unique_graphs", 0)),
        "frames": int(counters.get("frames", {}).get("total", 0)),
    }


def reset_dynamo() -> None:
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()


class Baton:
    """Turn-taking with the other arm of an interleaved A/B pair, through two pipes from the
    launcher: hand the turn back, then block until it comes again. Without pipes, a no-op."""

    def __init__(self, fds: list[int] | None):
        self.fds = fds
        for fd in fds or ():
            os.set_inheritable(fd, False)   # compiler subprocesses must not hold the pipes

    def __call__(self) -> None:
        if not self.fds:
            return
        receive, send = self.fds
        os.write(send, b"y")
        if os.read(receive, 1) != b"g":     # the launcher is gone: nothing to report to
            os._exit(3)


def bench_mode(job: dict, factory, device: torch.device, mode: str, turn=lambda: None) -> dict:
    timing = job["timing"]
    dtype = getattr(torch, job["precision"]["dtype"])
    compiled = mode != "eager"
    if compiled:
        reset_dynamo()
    peak_memory_reset(device)
    workload = build(job, factory, device, dtype, mode)
    clock = make_clock(torch, device.type)
    busy = BusyMachine()
    # Graph breaks and recompiles with their reasons; logging fires only while compiling.
    with (DynamoLog() if compiled else contextlib.nullcontext()) as dynamo:
        phases = measure(workload.step, clock, samples=timing["samples"],
                         sample_target_s=timing["sample_target_s"],
                         warmup_s=timing["warmup_s"], min_warmup_calls=timing["min_warmup_calls"],
                         after_first=dynamo.mark_first if compiled else lambda: None,
                         turn=turn, busy=busy)
    bad = sum(nonfinite_count(t) for t in flatten(phases.first_output).values())
    if bad:
        return {"status": "NONFINITE", "error": f"first call returned {bad} NaN/Inf values"}
    result = {"status": "OK", "first_call_s": phases.first_call_s, "warmup_s": phases.warmup_s,
              "warmup_calls": phases.warmup_calls, "calls_per_sample": phases.calls_per_sample,
              "steady_s": phases.steady_s, "peak_bytes": peak_memory_bytes(device),
              "items": workload.items, "flops": workload.flops,
              "busy_machine": busy.summary()}
    if compiled:
        result.update(dynamo.summary())
    return result


def run_bench(job: dict) -> dict:
    device = resolve_device(job["device"])
    factory = load_target(job["workload"]["target"])
    turn = Baton(job.get("baton"))
    turn()
    out = {"sentinel": sentinel(device), "modes": {}}
    for mode in job["modes"]:
        try:
            out["modes"][mode] = bench_mode(job, factory, device, mode, turn)
        except Exception as exc:  # one mode failing must not hide the others
            out["modes"][mode] = failure(exc)
    return out


def outputs_after_steps(job: dict, factory, device, dtype, mode,
                        after_first=None) -> dict[str, torch.Tensor]:
    # The global generators restart from the seed for every build, so a workload that draws
    # from them sees the same numbers in the reference, every mode and every process.
    random.seed(job["seed"])
    torch.manual_seed(job["seed"])
    workload = build(job, factory, device, dtype, mode)
    out = None
    for i in range(max(1, workload.train_steps)):
        out = workload.step()
        if i == 0 and after_first is not None:
            after_first()
    named = flatten(out)
    if workload.state is not None:
        named.update(flatten(workload.state(), "state"))
    return {k: v.detach().to("cpu").clone() for k, v in named.items()}


_PHASES = ("fwd", "bwd")
_FALLBACK_WARNING = re.compile(r"operator '([\w:.]+)'[^.]*?(?:fall ?back|not (?:currently )?"
                               r"(?:supported|implemented|lowered))", re.I | re.S)


def op_coverage(job: dict, factory, device: torch.device, dtype: torch.dtype) -> dict:
    """The operators one eager step really runs, forward and backward (and optimizer), as
    overload names (`aten.mm.default`), logged by a TorchDispatchMode; the ops whose tensors
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

    random.seed(job["seed"])
    torch.manual_seed(job["seed"])
    workload = build(job, factory, device, dtype, "eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with OpLog():
            workload.step()
        device_sync(torch, device.type)()
    messages = list(dict.fromkeys(
        f"{w.category.__name__}: {str(w.message).strip().splitlines()[0][:300]}"
        for w in caught if str(w.message).strip()))
    fallback = sorted({m.group(1) for w in caught
                       if (m := _FALLBACK_WARNING.search(str(w.message)))})
    return {"device": device.type, "calls": calls,
            "ops": {name: "+".join(p for p in _PHASES if p in phases)
                    for name, phases in sorted(ops.items())},
            "other_device": {name: sorted(devs) for name, devs in sorted(elsewhere.items())},
            "fallback_ops": fallback, "warnings": messages[:10]}


class DynamoLog(logging.Handler):
    """Graph breaks and recompiles of one compiled run, with their reasons, read from dynamo's
    `graph_breaks` and `recompiles` log artifacts (the TORCH_LOGS names). Dynamo's counters
    miss some graph breaks (a data-dependent branch lands in counters["unimplemented"], not
    counters["graph_break"], in torch 2.13), the log does not; the counters remain a
    fallback should a torch version rename the artifacts."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.breaks: list[str] = []
        self.recompiles: list[str] = []
        self.frames_after_first: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.name.endswith("__graph_breaks"):
                self.breaks.append(_graph_break_reason(record.getMessage()))
            elif record.name.endswith("__recompiles"):
                self.recompiles.append(_recompile_reason(record.getMessage()))
        except Exception:  # a log format we do not know must not fail the run
            pass

    def __enter__(self) -> "DynamoLog":
        try:
            torch._logging.set_logs(graph_breaks=True, recompiles=True)
        except (AttributeError, TypeError, ValueError):
            pass
        # Attach to the artifact loggers themselves: torch's own loggers do not propagate.
        names = [n for n in list(logging.root.manager.loggerDict)
                 if n.startswith("torch.") and n.endswith(("__graph_breaks", "__recompiles"))]
        self._loggers = [logging.getLogger(n) for n in names] or [logging.getLogger("torch")]
        for logger in self._loggers:
            logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        for logger in self._loggers:
            logger.removeHandler(self)
        try:
            torch._logging.set_logs()
        except (AttributeError, TypeError, ValueError):
            pass

    def mark_first(self) -> None:
        self.frames_after_first = dynamo_counts()["frames"]

    def summary(self) -> dict:
        counted = dynamo_counts()
        reasons = list(dict.fromkeys(self.breaks)) or counted["graph_break_reasons"]
        recompiles = len(self.recompiles)
        if not self.recompiles and self.frames_after_first is not None:
            recompiles = max(0, counted["frames"] - self.frames_after_first)
        return {"graph_breaks": max(len(reasons), counted["graph_breaks"]),
                "graph_break_reasons": reasons,
                "recompiles": recompiles,
                "recompile_reasons": list(dict.fromkeys(self.recompiles))[:10],
                "unique_graphs": counted["unique_graphs"]}


def _where(path: str, line: str) -> str:
    return f"{os.path.basename(path)}:{line}"


def _graph_break_reason(message: str) -> str:
    """`Failed to trace builtin operator: Dynamo does not know how to trace ... (at f.py:12)`"""
    at = re.search(r"Graph break in user code at (.+):(\d+)", message)
    body = message.split("Graph Break Reason:", 1)[-1]
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    head = next((ln for ln in lines if not ln.startswith("Encountered graph break")),
                lines[0] if lines else "unknown")
    explanation = next((ln.split(":", 1)[1].strip() for ln in lines
                        if ln.startswith("Explanation:")), "")
    text = head.rstrip(":") + (f": {explanation}" if explanation else "")
    return text[:300] + (f" (at {_where(*at.groups())})" if at else "")


def _recompile_reason(message: str) -> str:
    """`h: n == 2 (at f.py:24)`: the function and the first guard that failed."""
    at = re.search(r"Recompiling function (\S+) in (.+):(\d+)", message)
    failures = [ln.strip()[1:].strip() for ln in message.splitlines()
                if ln.strip().startswith("- ") and "User stack" not in ln]
    first = re.sub(r"^\d+/\d+:\s*", "", failures[0]).split("  #")[0].strip() if failures else ""
    if not at:
        return first[:300] or message.strip().splitlines()[0][:300]
    return f"{at.group(1)}: {first[:300]} (at {_where(at.group(2), at.group(3))})"


def fresh_process_outputs(job: dict) -> dict:
    """Determinism across processes: every workload's eager outputs, computed first thing in
    a fresh process (allocator and caches untouched), as a digest and fingerprints."""
    device = resolve_device(job["device"])
    dtype = getattr(torch, job["precision"]["dtype"])
    found = {}
    for spec in job["workloads"]:
        try:
            named = outputs_after_steps({**job, "workload": spec}, load_target(spec["target"]),
                                        device, dtype, "eager")
            found[spec["name"]] = {"status": "OK", "digest": digest(named),
                                   "fingerprint": {n: fingerprint(t) for n, t in named.items()}}
        except Exception as exc:
            found[spec["name"]] = failure(exc)
    return {"workloads": found}


def run_numerics(job: dict) -> dict:
    if job.get("fresh_process_check"):
        return fresh_process_outputs(job)
    device = resolve_device(job["device"])
    factory = load_target(job["workload"]["target"])
    dtype = getattr(torch, job["precision"]["dtype"])
    out: dict = {"modes": {}}
    try:  # first: fallback warnings are emitted once per process
        out["coverage"] = op_coverage(job, factory, device, dtype)
    except Exception as exc:
        out["coverage"] = failure(exc)
    reference = outputs_after_steps(job, factory, torch.device("cpu"), torch.float64, "eager")
    eager: dict = {}

    def eager_outputs() -> dict[str, torch.Tensor]:
        if not eager:
            eager.update(outputs_after_steps(job, factory, device, dtype, "eager"))
        return eager

    for mode in job["modes"]:
        try:
            dynamo = None
            if mode == "eager":
                first = eager_outputs()
            else:
                reset_dynamo()
                with DynamoLog() as log:
                    first = outputs_after_steps(job, factory, device, dtype, mode,
                                                after_first=log.mark_first)
                    dynamo = log.summary()
            again = outputs_after_steps(job, factory, device, dtype, mode)
            result = {
                "status": "OK",
                "outputs": {name: error_metrics(t, reference[name]) for name, t in first.items()},
                "rerun_max_abs": max_abs_difference(first, again),
                "digest": digest(first),
                "fingerprint": {name: fingerprint(t) for name, t in first.items()},
            }
            if dynamo is not None:
                result["dynamo"] = dynamo
                result["vs_eager"] = compiled_vs_eager(first, eager_outputs, reference)
            out["modes"][mode] = result
        except Exception as exc:
            out["modes"][mode] = failure(exc)
    return out


def compiled_vs_eager(compiled: dict, eager_outputs, reference: dict) -> dict:
    """Per output: compiled against eager directly, and eager's own error against float64
    (the dynamo accuracy rule compares the two errors)."""
    try:
        eager = eager_outputs()
    except Exception as exc:
        return {"error": failure(exc)["error"]}
    found = {}
    for name, t in compiled.items():
        if name not in eager or name not in reference:
            continue
        direct = error_metrics(t, eager[name])
        found[name] = {"rel_l2": direct["rel_l2"], "max_abs": direct["max_abs"],
                       "eager_rel_l2": error_metrics(eager[name], reference[name])["rel_l2"]}
    return found


def main(argv: list[str]) -> int:
    job_path, result_path = argv
    with open(job_path, encoding="utf-8") as fh:
        job = json.load(fh)
    random.seed(job["seed"])
    torch.manual_seed(job["seed"])
    configure(job)
    started = time.perf_counter()
    try:
        body = run_bench(job) if job["kind"] == "bench" else run_numerics(job)
        body["status"] = "OK"
    except Unavailable as exc:
        body = {"status": "SKIPPED", "error": str(exc)}
    except Exception as exc:
        body = failure(exc)
    body["torch"] = torch.__version__
    body["pid"] = os.getpid()
    body["wall_s"] = time.perf_counter() - started
    write_text(result_path, dumps(body))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
