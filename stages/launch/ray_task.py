"""What a Ray task runs on its node (launch.ray_backend sends it): each arm's venv and
checkout made ready there, then the unit run exactly as the local backend runs it, and each
result told which node ran it and when (the window it held the node). Imported on the nodes;
ray itself only inside the task."""
from __future__ import annotations

import os
import socket
import time
from dataclasses import replace
from pathlib import Path

from stages.core.records.job import Job
from stages.core.typed import from_data
from stages.launch.local import capture_env, run_interleaved, run_worker


def _started_by_ray(name: str) -> bool:
    """Whether Ray set `name` for this task rather than the node's own environment (Ray sets
    OMP_NUM_THREADS to the task's CPUs; the device's `threads` decides here, as locally)."""
    try:
        initial = Path("/proc/self/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return name in os.environ and not any(v.startswith(name.encode() + b"=") for v in initial)


def _ready_python(python: str | None, spec: dict | None, cache_dir: str | None,
                  max_gb: float | None = None) -> str | None:
    if not spec:
        return python
    from stages.arms.cache import cache_at
    from stages.arms.venv import VenvSpec, materialise
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()}
    return materialise(VenvSpec(**fields), cache_at(cache_dir), max_gb=max_gb)


def on_node(units: list[dict], timeout_s: float, fresh: bool, cache_dir: str | None,
            codes: dict, max_gb: float | None = None) -> list[dict]:
    """The task, on its node: each arm's venv and checkout made ready (cached on the node,
    and held until the task ends), then the unit run as the local backend runs it, and each
    result told which node it is."""
    from stages.arms.cache import release
    try:
        return _on_node(units, timeout_s, fresh, cache_dir, codes, max_gb)
    finally:
        release()


def _on_node(units: list[dict], timeout_s: float, fresh: bool, cache_dir: str | None,
             codes: dict, max_gb: float | None) -> list[dict]:
    import ray

    from stages.arms.cache import cache_at
    from stages.arms.checkout import unpack
    jobs = []
    for unit in units:
        job = from_data(Job, unit["job"], "job")
        if job.code:
            target = cache_at(cache_dir) / "code" / Path(job.code).name
            job = replace(job, code=str(unpack(ray.get(codes[job.code]), target)))
        jobs.append((job, _ready_python(unit["python"], unit["venv"], cache_dir, max_gb)))
    threads = os.environ.pop("OMP_NUM_THREADS") if _started_by_ray("OMP_NUM_THREADS") else None
    started = time.time()
    try:
        if len(jobs) == 1:
            (job, python), = jobs
            results = [run_worker(job, timeout_s=timeout_s, python=python,
                                  fresh_compile_cache=fresh)]
        else:
            results = run_interleaved(jobs, timeout_s=timeout_s, fresh_compile_cache=fresh)
    finally:
        if threads is not None:       # Ray takes back what it set, after the task
            os.environ["OMP_NUM_THREADS"] = threads
    node = ray.get_runtime_context().get_node_id()
    window = [round(started * 1e3), round(time.time() * 1e3)]
    for result in results:
        host = result.setdefault("host", {"name": socket.gethostname(), "hardware": None})
        host.update(node=node, window_ms=window)
    return results


def capture_on_node(python: str | None, spec: dict | None, cache_dir: str | None,
                    max_gb: float | None = None) -> dict:
    from stages.arms.cache import release
    try:
        return capture_env(_ready_python(python, spec, cache_dir, max_gb))
    finally:
        release()
