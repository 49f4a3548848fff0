"""The Ray backend (launcher.backend: ray): each unit, a worker process or a lock-step pair as a
whole, is one Ray task placed by what the cell's device asks for (launch.ray_placement.request).

Inside the task the unit runs exactly as the local backend runs it (launch.local: a fresh
worker process with its time limit, every failure a status), so isolation, statuses and
records are the same; the task only adds which node ran it and when (its window). Each unit
holds a node of its own while it runs (launch.ray_placement): the cells of a fleet run
(launch.fleet) run at once, never two units on one node. The project's code travels as
Ray's runtime environment (`working_dir`); an arm's venv is built on the node from its spec
and an arm's checkout unpacked there, both cached on the node. A node lost mid-unit gets the
unit once more, on another node; a unit's own failure (an error, OOM, a time limit) is its
result and is never retried. Ray is imported here only, when this backend is chosen.
"""
from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from torchgate.core.config import Cell, Config
from torchgate.core.config.settings import RaySettings
from torchgate.core.errors import UserError, clip
from torchgate.core.names import NAME, importable
from torchgate.core.records.job import Arm, Job
from torchgate.core.typed import from_data, to_data
from torchgate.core.vocabulary import Status
from torchgate.launch.local import capture_env, run_interleaved, run_worker
from torchgate.launch.ray_placement import NodeLeases, describe, fits, offered, request

# Not code: history, DVC's cache, environments. Shipped, they would only slow every upload.
EXCLUDES = (".git", ".dvc", "reports", "__pycache__", "*.pyc", ".venv", "venv")
# Waiting for a unit's result: beyond its own time limit (per worker process), the time to
# start it on its node (a venv built there on first use, a checkout unpacked, a queue); in
# slices, between which the cluster is asked whether it is still there.
START_MARGIN_S = 1800.0
POLL_S = 30.0
WAKE_S = 1.0        # a thread waiting on a unit wakes this often to see whether the stage ends


class Overdue(Exception):
    """No result within a unit's time limit and the margin for its start."""


class Closed(Exception):
    """The stage is ending (an error, a signal): no more calls to the cluster."""


def ask_cluster(fn: Callable, address: str, wait_s: float):
    """fn() against the cluster (ray.nodes() and the like). A head that died raises, or
    leaves the call waiting for ever: either is one line."""
    out: list = []
    failed: list[BaseException] = []

    def call() -> None:
        try:
            out.append(fn())
        except BaseException as exc:    # noqa: BLE001  reported below, in one line
            failed.append(exc)
    asking = threading.Thread(target=call, daemon=True)
    asking.start()
    asking.join(wait_s)
    if out:
        return out[0]
    why = _line(failed[0]) if failed else f"no answer within {wait_s:g} s"
    raise UserError(f"the Ray cluster at {address} stopped answering ({why[:300]}): its head "
                    "may have died; restart it (`ray start --head`) and run the stage again, "
                    "or set launcher.backend=local")


def _import_ray():
    # Ray's core would catch SIGTERM itself and exit; the stage's own handler (one_line_errors)
    # must run, to cancel the unit and leave no half-written report.
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    except ImportError:
        raise UserError("launcher.backend is ray but ray is not installed here; "
                        "pip install -e '.[ray]', or set launcher.backend=local") from None
    return ray


def _head(address: str, ray) -> tuple[str, int] | None:
    """The head's host and port for an address, or None where Ray starts the cluster."""
    if address == "local":
        return None
    if address == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address_or_die
            address = canonicalize_bootstrap_address_or_die("auto")
        except ConnectionError:
            raise UserError("no Ray cluster found for launcher.ray.address=auto (nor in "
                            "RAY_ADDRESS); start one with `ray start --head` or give its "
                            "address") from None
        except (ImportError, AttributeError):     # a Ray without it: let ray.init look
            return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"launcher.ray.address {address!r} is not auto, local, host:port or "
                        "ray://host:port")
    return host, int(port)


def connect(settings: RaySettings, root: Path) -> str:
    """Join the cluster, shipping the project folder `root` and this torchgate to every
    task. One line when the cluster cannot be reached: Ray itself would
    wait for an unreachable head for ever."""
    ray = _import_ray()
    head = _head(settings.address, ray)
    if head is not None:
        try:
            socket.create_connection(head, timeout=settings.connect_timeout_s).close()
        except OSError as exc:
            raise UserError(f"the Ray cluster at {settings.address} is unreachable "
                            f"({exc.strerror or exc or 'no answer'}); start its head with "
                            "`ray start --head` there, or set launcher.ray.address (or "
                            "launcher.backend=local)") from None
    runtime_env: dict = {"working_dir": str(root),
                         "excludes": [*EXCLUDES, *settings.excludes]}
    # A task imports this torchgate, by its name (Ray names a module by its folder), before
    # any installed on the node.
    runtime_env["py_modules"] = [os.path.join(importable(), NAME)]
    failed: list[BaseException] = []

    def join() -> None:
        try:
            ray.init(address=None if settings.address == "local" else settings.address,
                     runtime_env=runtime_env, namespace="torchgate", log_to_driver=False,
                     logging_level=logging.ERROR)
        except BaseException as exc:
            failed.append(exc)
    # Ray retries a head that accepts connections but never answers for ever; a daemon
    # thread lets the stage give up and exit.
    joining = threading.Thread(target=join, daemon=True)
    joining.start()
    joining.join(settings.connect_timeout_s)
    if joining.is_alive() or failed:
        first = (str(failed[0]).strip().splitlines() or [type(failed[0]).__name__])[0] \
            if failed else f"no answer within {settings.connect_timeout_s:g} s"
        raise UserError(f"cannot join the Ray cluster at {settings.address}: {first} (raise "
                        "launcher.ray.connect_timeout_s for a large project folder)")
    return settings.address


def unavailable(ray, wanted: dict[str, float], lost: tuple[str, ...] = (),
                ask: Callable = lambda fn: fn()) -> str | None:
    """"no node offers {...}" when no live node (but those just lost) has the resources a
    unit asks for, so that it is not queued for ever. `ask` makes the cluster call
    (RayBackend's: a dead head is one line)."""
    if any(fits(node, wanted, lost) for node in ask(ray.nodes)):
        return None
    return f"no node offers {describe(wanted)}"


def _line(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def _lost_node(exc: Exception) -> str | None:
    found = re.search(r"node ID: ([0-9a-f]{16,})", str(exc))
    return found.group(1) if found else None


class RayCluster:
    """This stage's connection to the cluster and the nodes its units hold; the cells of a
    fleet run share one."""

    def __init__(self, settings: RaySettings):
        self.address = connect(settings, Path.cwd())
        self.wait_s = settings.connect_timeout_s
        self.ray = ray = _import_ray()
        self.leases = NodeLeases(lambda: self.ask(ray.nodes), settings.units_per_node)
        self.task = ray.remote(on_node)     # retries are RayBackend's: lost nodes only
        self.codes: dict[str, object] = {}  # an arm's checkout, packed and put once
        self.running: set = set()            # the units' tasks, to cancel on the way out
        self.closing = threading.Event()

    def ask(self, fn: Callable):
        if self.closing.is_set():   # a fleet's thread must not start Ray again once it is shut
            raise Closed
        return ask_cluster(fn, self.address, self.wait_s)

    def code(self, path: str):
        from torchgate.arms.checkout import pack
        if path not in self.codes:
            self.codes[path] = self.ray.put(pack(Path(path)))
        return self.codes[path]

    def pinned(self, node: str) -> dict:
        """A task's options that run it on `node` or nowhere."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}

    def cancel_all(self) -> None:
        """Not forced: each task kills its worker process on the way out."""
        self.closing.set()
        for ref in list(self.running):
            self.ray.cancel(ref)

    def close(self) -> None:
        self.ray.shutdown()


class RayBackend:
    """Runs a cell's units on the cluster: `run` and `run_pair` take what launch.local's
    functions take and give what they give."""

    def __init__(self, cluster: RayCluster, cfg: Config, cell: Cell, arms: tuple[Arm, ...],
                 log: Callable[[str], None] = lambda line: None):
        self.cluster, self.ray, self.address = cluster, cluster.ray, cluster.address
        self.device = device = cell.device
        self.asked = request(device.type, device.threads, device)
        self.wanted = offered(self.asked)
        self.cache_dir, self.max_gb = cfg.arms.cache_dir, cfg.arms.cache_max_gb
        self.venvs = {a.python: to_data(a.venv) for a in arms if a.venv is not None}
        self.codes = {a.code: cluster.code(a.code) for a in arms if a.code}
        alive = len([n for n in self._ask(self.ray.nodes) if n.get("Alive")])
        log(f"{cell.name}: each unit is a Ray task asking for {describe(self.wanted)} "
            f"({alive} nodes at {self.address})"
            + (f"; {why}" if (why := self._unavailable()) else ""))

    def _ask(self, fn: Callable):
        return self.cluster.ask(fn)

    def _unavailable(self, lost: tuple[str, ...] = ()) -> str | None:
        return unavailable(self.ray, self.wanted, lost, self._ask)

    def run(self, job: Job, *, timeout_s: float, python: str | None = None,
            fresh_compile_cache: bool = True) -> dict:
        return self._units([(job, python)], timeout_s, fresh_compile_cache)[0]

    def run_pair(self, jobs: list[tuple[Job, str | None]], *, timeout_s: float,
                 fresh_compile_cache: bool = True) -> list[dict]:
        """A lock-step pair as one task: both arms on one node, taking turns there."""
        return self._units(jobs, timeout_s, fresh_compile_cache)

    def capture_env(self, python: str) -> dict:
        missing = self._unavailable()
        if missing:
            return {"error": f"could not capture the environment of {python}: {missing}"}
        task = self.ray.remote(capture_on_node).options(max_retries=1, **self.asked)
        try:
            return self._get(task.remote(python, self.venvs.get(python), self.cache_dir,
                                         self.max_gb), START_MARGIN_S)
        except (self.ray.exceptions.RayError, UserError, Overdue) as exc:
            return {"error": f"could not capture the environment of {python}: "
                             f"{(str(exc).strip().splitlines() or ['?'])[0]}"}

    def _asked(self, jobs: list[tuple[Job, str | None]]) -> dict:
        """The cell's request, or a distributed unit's: its ranks' CPUs and GPUs."""
        ranks = max((job.workload.ranks or 1 for job, _ in jobs if isinstance(job, Job)),
                    default=1)
        return self.asked if ranks == 1 else request(self.device.type, self.device.threads,
                                                     self.device, ranks)

    def _units(self, jobs: list[tuple[Job, str | None]], timeout_s: float,
               fresh: bool) -> list[dict]:
        ray = self.ray
        units = [{"job": to_data(job), "python": python, "venv": self.venvs.get(python)}
                 for job, python in jobs]
        asked = self._asked(jobs)
        wanted = offered(asked)
        # Each process's limit counts its own time (a pair's take turns), then the start.
        deadline_s = len(jobs) * timeout_s + START_MARGIN_S
        lost, first = (), None
        while True:
            node = self.cluster.leases.take(wanted, lost)
            if node is None:
                return [{"status": Status.SKIPPED, "error": f"no node offers "
                         f"{describe(wanted)}" + (
                             f" (the node that ran it was lost: {first})" if first else "")}
                        for _ in jobs]
            try:
                results = self._on(node, units, asked, timeout_s, fresh, deadline_s)
            except Overdue:
                return [{"status": Status.TIMEOUT, "error": f"no result from the Ray cluster "
                         f"within {deadline_s:g} s (the unit's time limit, {timeout_s:g} s per "
                         f"process, and {START_MARGIN_S:g} s to start it on its node)"}
                        for _ in jobs]
            # A node that died before the task started there: unschedulable where pinned.
            except (ray.exceptions.NodeDiedError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.TaskUnschedulableError,
                    ray.exceptions.LocalRayletDiedError, ray.exceptions.ObjectLostError,
                    ray.exceptions.RaySystemError) as exc:
                reason = _line(exc)[:300]
                if first is not None:
                    return [{"status": Status.CRASHED, "error": f"lost twice on the cluster: "
                             f"{first}; then {reason}"} for _ in jobs]
                gone = _lost_node(exc) or node     # Ray < 2.52 does not name the node
                first = reason if gone in reason else f"{reason} (node {gone})"
                lost = (*lost, gone)
                continue
            except ray.exceptions.OutOfMemoryError as exc:   # Ray's memory monitor: its result
                return [{"status": Status.OOM, "error": clip(_line(exc))} for _ in jobs]
            except ray.exceptions.RayError as exc:      # the cluster cannot run it at all
                raise UserError(f"the Ray cluster could not run a unit of this cell: "
                                f"{_line(exc)}") from None
            if first is not None:
                for result in results:
                    result["host"]["retried"] = first
            return results

    def _on(self, node: str, units: list[dict], asked: dict, timeout_s: float, fresh: bool,
            deadline_s: float) -> list[dict]:
        """The units as one task pinned to `node`, which they hold until it ends."""
        try:
            task = self.cluster.task.options(max_retries=0, **asked,
                                             **self.cluster.pinned(node))
            return self._get(task.remote(units, timeout_s, fresh, self.cache_dir, self.codes,
                                         self.max_gb), deadline_s)
        finally:
            self.cluster.leases.give_back(node)

    def _get(self, ref, deadline_s: float):
        """The task's result, waited for in slices, asking the cluster between them whether
        it is still there (a dead head is one line); past `deadline_s` the task is cancelled
        and Overdue raised. This stage interrupted: the task too (its worker process is killed
        as locally). A failure of the task itself, not of its unit, is one line."""
        ray = self.ray
        end = time.monotonic() + deadline_s
        asked = time.monotonic()
        self.cluster.running.add(ref)
        try:
            while True:
                if self.cluster.closing.is_set():
                    raise Closed
                try:
                    return ray.get(ref, timeout=max(0.0, min(POLL_S, WAKE_S,
                                                             end - time.monotonic())))
                except ray.exceptions.GetTimeoutError:
                    if time.monotonic() - asked >= POLL_S:
                        self._ask(ray.nodes)
                        asked = time.monotonic()
                    if time.monotonic() >= end:
                        ray.cancel(ref, force=True)
                        raise Overdue from None
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None) or exc
            raise UserError(f"a task failed on the Ray cluster: "
                            f"{(str(cause).strip().splitlines() or ['?'])[-1]}") from None
        except (KeyboardInterrupt, SystemExit):
            ray.cancel(ref)     # not forced: the task kills its worker process on the way out
            raise
        except Exception as exc:
            if isinstance(exc, (ray.exceptions.RayError, UserError, Overdue, Closed)):
                raise           # the unit's fate: _units decides
            self._ask(ray.nodes)                     # a head that died: one line
            raise UserError(f"the Ray cluster at {self.address} failed while a unit ran: "
                            f"{_line(exc)[:300]}") from None
        finally:
            self.cluster.running.discard(ref)


# ---- on the node ------------------------------------------------------------------------
# What a Ray task runs on its node (RayBackend sends it): each arm's venv and checkout made
# ready there, then the unit run exactly as the local backend runs it, and each result told
# which node ran it and when (the window it held the node). Imported on the nodes; ray itself
# only inside the task.
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
    from torchgate.arms.cache import cache_at
    from torchgate.arms.venv import VenvSpec, materialise
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()}
    return materialise(VenvSpec(**fields), cache_at(cache_dir), max_gb=max_gb)


def on_node(units: list[dict], timeout_s: float, fresh: bool, cache_dir: str | None,
            codes: dict, max_gb: float | None = None) -> list[dict]:
    """The task, on its node: each arm's venv and checkout made ready (cached on the node,
    and held until the task ends), then the unit run as the local backend runs it, and each
    result told which node it is."""
    from torchgate.arms.cache import release
    try:
        return _on_node(units, timeout_s, fresh, cache_dir, codes, max_gb)
    finally:
        release()


def _on_node(units: list[dict], timeout_s: float, fresh: bool, cache_dir: str | None,
             codes: dict, max_gb: float | None) -> list[dict]:
    import ray

    from torchgate.arms.cache import cache_at
    from torchgate.arms.checkout import unpack
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
    from torchgate.arms.cache import release
    try:
        return capture_env(_ready_python(python, spec, cache_dir, max_gb))
    finally:
        release()
