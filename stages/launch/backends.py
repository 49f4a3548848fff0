"""The launcher backend a stage measures with: `local` (worker processes on this machine) or
`ray` (launch.ray_backend, imported only when chosen). Either gives the same three calls,
so cells and statistics never see which ran them."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from stages.core.config import Cell, Config
from stages.core.records.job import Arm
from stages.launch.environment import capture_env
from stages.launch.local import run_interleaved, run_worker


@dataclass(frozen=True)
class Backend:
    run: Callable            # one unit: launch.local.run_worker's signature and result
    run_pair: Callable       # a lock-step pair: run_interleaved's
    capture_env: Callable    # an interpreter's environment, where its units run


LOCAL = Backend(run_worker, run_interleaved, capture_env)


@contextmanager
def backend(cfg: Config, cell: Cell, arms: tuple[Arm, ...],
            log: Callable[[str], None] = lambda line: None) -> Iterator[Backend]:
    if cfg.launcher.backend == "local":
        yield LOCAL
        return
    from stages.launch.ray_backend import RayBackend
    cluster = RayBackend(cfg, cell, arms, log)
    try:
        yield Backend(cluster.run, cluster.run_pair, cluster.capture_env)
    finally:
        cluster.close()
