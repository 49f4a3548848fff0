"""The launcher backend a stage measures with: `local` (worker processes on this machine) or
`ray` (launch.ray_backend, imported only when chosen). Either gives the same three calls,
so cells and statistics never see which ran them."""
from __future__ import annotations

import json
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from stages.core.config import Cell, Config
from stages.core.lifetime import INTERPRETER_TIMEOUT_S
from stages.core.records.job import Arm
from stages.launch.local import ROOT, run_interleaved, run_worker

# ---- environment ------------------------------------------------------------
# Environment capture: the environment as an arm's interpreter sees it, read by running
# measure.probe there (it needs only torch), on whichever machine runs that arm's units.

def capture_env(python: str) -> dict:
    """The environment as another interpreter sees it (it needs only torch), with every
    distribution installed there: it imports none of the workloads, so which of them matter
    is this run's to say (core.records.packages.comparable)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from stages.measure.probe import capture; print(json.dumps(capture(every=True)))")
    out = subprocess.run([python, "-c", code, str(ROOT)], capture_output=True, text=True,
                         timeout=INTERPRETER_TIMEOUT_S)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"could not capture the environment of {python}: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Backend:
    run: Callable            # one unit: launch.local.run_worker's signature and result
    run_pair: Callable       # a lock-step pair: run_interleaved's
    capture_env: Callable    # an interpreter's environment, where its units run


LOCAL = Backend(run_worker, run_interleaved, capture_env)


@contextmanager
def connection(cfg: Config) -> Iterator[object | None]:
    """The Ray cluster the cells of this stage share (None: the local backend). Leaving it,
    by an error or a signal, cancels every unit still running there."""
    if cfg.launcher.backend == "local":
        yield None
        return
    from stages.launch.ray_backend import RayCluster
    cluster = RayCluster(cfg.launcher.ray)
    try:
        yield cluster
    except BaseException:
        cluster.cancel_all()
        raise
    finally:
        cluster.close()


def on(cluster, cfg: Config, cell: Cell, arms: tuple[Arm, ...],
       log: Callable[[str], None] = lambda line: None) -> Backend:
    """The three calls for one cell, on `cluster` (None: here)."""
    if cluster is None:
        return LOCAL
    from stages.launch.ray_backend import RayBackend
    one = RayBackend(cluster, cfg, cell, arms, log)
    return Backend(one.run, one.run_pair, one.capture_env)


@contextmanager
def backend(cfg: Config, cell: Cell, arms: tuple[Arm, ...],
            log: Callable[[str], None] = lambda line: None) -> Iterator[Backend]:
    with connection(cfg) as cluster:
        yield on(cluster, cfg, cell, arms, log)
