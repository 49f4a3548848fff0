"""Workloads that start processes of their own: children that must not outlive the run."""
import os
import subprocess
import time
from pathlib import Path

import torch

from stages.workloads import Workload


def _child(pid_file: str) -> None:
    """A child that would run for ten minutes; the worker's pid and the child's, one a line."""
    child = subprocess.Popen(["sleep", "600"])
    Path(pid_file).write_text(f"{os.getpid()}\n{child.pid}\n")


def leaves_a_child(*, device, dtype, compile, seed, pid_file):
    """Returns normally, its child still running: the worker exits, the child would not."""
    _child(pid_file)
    x = torch.ones(4, device=device, dtype=dtype)
    return Workload(step=lambda: x * 2, items=1)


def hangs_with_a_child(*, device, dtype, compile, seed, pid_file):
    _child(pid_file)
    time.sleep(3600)
