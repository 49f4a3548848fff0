"""A worker process: measures one workload on one cell, or computes its numerics.

Run as `python -m stages.worker JOB.json RESULT.json` by the launcher; the process is the
unit of replication and of isolation. Imports only torch and the standard library, so that
the candidate interpreter of an A/B run needs nothing but torch.
"""
from __future__ import annotations

import importlib
import json
import os
import random
import resource
import sys
import time
import traceback
from functools import partial
from typing import Any

import torch

from .accuracy import digest, error_metrics, flatten, max_abs_difference, nonfinite_count
from .records import dumps, write_text
from .timing import device_sync, make_clock, measure


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


def load_target(target: str):
    module_name, _, attr = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImportError(f"cannot import workload _target_ {target!r}: {exc}") from exc


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


def bench_mode(job: dict, factory, device: torch.device, mode: str) -> dict:
    timing = job["timing"]
    dtype = getattr(torch, job["precision"]["dtype"])
    if mode != "eager":
        reset_dynamo()
    peak_memory_reset(device)
    workload = build(job, factory, device, dtype, mode)
    clock = make_clock(torch, device.type)
    after_first: dict = {}
    phases = measure(workload.step, clock, samples=timing["samples"],
                     sample_target_s=timing["sample_target_s"], warmup_s=timing["warmup_s"],
                     min_warmup_calls=timing["min_warmup_calls"],
                     after_first=lambda: after_first.update(dynamo_counts()))
    bad = sum(nonfinite_count(t) for t in flatten(phases.first_output).values())
    if bad:
        return {"status": "NONFINITE", "error": f"first call returned {bad} NaN/Inf values"}
    result = {"status": "OK", "first_call_s": phases.first_call_s, "warmup_s": phases.warmup_s,
              "warmup_calls": phases.warmup_calls, "calls_per_sample": phases.calls_per_sample,
              "steady_s": phases.steady_s, "peak_bytes": peak_memory_bytes(device),
              "items": workload.items, "flops": workload.flops}
    if mode != "eager":
        final = dynamo_counts()
        result.update({k: final[k] for k in ("graph_breaks", "graph_break_reasons",
                                             "unique_graphs")})
        # Frames compiled after the first call: recompiles (shapes, guards) during the run.
        result["recompiles"] = max(0, final["frames"] - after_first["frames"])
    return result


def run_bench(job: dict) -> dict:
    device = resolve_device(job["device"])
    factory = load_target(job["workload"]["target"])
    out = {"sentinel": sentinel(device), "modes": {}}
    for mode in job["modes"]:
        try:
            out["modes"][mode] = bench_mode(job, factory, device, mode)
        except Exception as exc:  # one mode failing must not hide the others
            out["modes"][mode] = failure(exc)
    return out


def outputs_after_steps(job: dict, factory, device, dtype, mode) -> dict[str, torch.Tensor]:
    workload = build(job, factory, device, dtype, mode)
    out = None
    for _ in range(max(1, workload.train_steps)):
        out = workload.step()
    named = flatten(out)
    if workload.state is not None:
        named.update(flatten(workload.state(), "state"))
    return {k: v.detach().to("cpu").clone() for k, v in named.items()}


def run_numerics(job: dict) -> dict:
    device = resolve_device(job["device"])
    factory = load_target(job["workload"]["target"])
    dtype = getattr(torch, job["precision"]["dtype"])
    reference = outputs_after_steps(job, factory, torch.device("cpu"), torch.float64, "eager")
    out = {"modes": {}}
    for mode in job["modes"]:
        try:
            if mode != "eager":
                reset_dynamo()
            first = outputs_after_steps(job, factory, device, dtype, mode)
            again = outputs_after_steps(job, factory, device, dtype, mode)
            out["modes"][mode] = {
                "status": "OK",
                "outputs": {name: error_metrics(t, reference[name]) for name, t in first.items()},
                "rerun_max_abs": max_abs_difference(first, again),
                "digest": digest(first),
            }
        except Exception as exc:
            out["modes"][mode] = failure(exc)
    return out


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
