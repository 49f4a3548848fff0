"""The launcher backend a stage measures with: `local` (worker processes on this machine) or
`ray` (launch.ray_backend, imported only when chosen). Either gives the same three calls,
so cells and statistics never see which ran them."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from torchgate.core.config import Cell, Config
from torchgate.core.records.job import Arm
from torchgate.launch.local import capture_env, run_interleaved, run_worker


# ---- environment ------------------------------------------------------------
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
    from torchgate.launch.ray_backend import RayCluster
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
    from torchgate.launch.ray_backend import RayBackend
    one = RayBackend(cluster, cfg, cell, arms, log)
    return Backend(one.run, one.run_pair, one.capture_env)


@contextmanager
def backend(cfg: Config, cell: Cell, arms: tuple[Arm, ...],
            log: Callable[[str], None] = lambda line: None) -> Iterator[Backend]:
    with connection(cfg) as cluster:
        yield on(cluster, cfg, cell, arms, log)
