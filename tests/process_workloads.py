"""Workloads that start processes of their own (children that must not outlive the run), or
write down what their worker process was given."""
import os
import shutil
import subprocess
import time
from pathlib import Path

import torch

from torchgate.workloads import Workload


def _child(pid_file: str, own_session: bool = False, clear_env: bool = False) -> None:
    """A child that would run for ten minutes (in a session of its own: outside the worker's
    process group; with an empty environment: as `env -i setsid` starts a daemon); the
    worker's pid and the child's, one a line."""
    child = subprocess.Popen([shutil.which("sleep"), "600"], start_new_session=own_session,
                             env={} if clear_env else None)
    Path(pid_file).write_text(f"{os.getpid()}\n{child.pid}\n")


def leaves_a_child(*, device, dtype, compile, seed, pid_file, own_session=False,
                   clear_env=False):
    """Returns normally, its child still running: the worker exits, the child would not."""
    _child(pid_file, own_session, clear_env)
    x = torch.ones(4, device=device, dtype=dtype)
    return Workload(step=lambda: x * 2, items=1)


def hangs_with_a_child(*, device, dtype, compile, seed, pid_file):
    _child(pid_file)
    time.sleep(3600)


def notes_its_inductor_cache(*, device, dtype, compile, seed, path):
    Path(path).write_text(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    x = torch.ones(4, device=device, dtype=dtype)
    return Workload(step=lambda: x * 2, items=1)


def writes_affinity(*, device, dtype, compile, seed, path, tag):
    """Writes the cores its process may run on (`tag: 0 1`), then runs as any workload."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{tag}: {' '.join(map(str, sorted(os.sched_getaffinity(0))))}\n")
    x = torch.ones(4, device=device, dtype=dtype)
    return Workload(step=lambda: x * 2, items=1)
