"""What can change the environment, read in milliseconds: no torch, no package metadata, no
subprocess, nothing but the standard library (this module is the whole of a no-op `env` stage's
work, see stages/env.py). measure.probe reads the full environment and shares the helpers here.

The env stage runs on every `dvc repro`; when this fingerprint (with the contents of
params.yaml and of the project's files a worker imports: stages/env.py) equals the one recorded
in fingerprint.json beside env.json, the capture stands and torch is not imported: measured on the
shared 2-core VM, `python -m torchgate.env` 0.19 s before (it also read the baseline from git and
wrote env.md), 0.04 s now (`python -c pass` is 0.03 s); a full capture imports torch, 2 s.
Hence no pathlib or tempfile at import time either: they were a fifth of what is left.
"""
from __future__ import annotations

import os
import platform
import re
import sys

from torchgate.core.machine import cpu_model, portable, read, usable_cores

ENV_VAR_NAMES = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG",
    "NVIDIA_TF32_OVERRIDE", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING",
    "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
})
ENV_VAR_PREFIXES = ("TORCHINDUCTOR_", "TORCH_", "PYTORCH_")
# Names that identify a process or a run, or may hold a credential: never recorded.
_VOLATILE_NAME = re.compile(r"(_PID|_PORT|_RUN_ID|_RANK|_KEY)$|TOKEN|SECRET|PASSWORD")


def _is_temp_path(value: str) -> bool:
    import tempfile  # here: only a relevant variable needs it, and it costs 4 ms to import
    roots = {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm", "/private/var/folders"}
    return any(value == root or value.startswith(root.rstrip("/") + "/") for root in roots)


def env_vars(environ: dict[str, str] | None = None) -> dict:
    """Relevant variables, less those that vary per process, hold a temp path or a secret."""
    environ = os.environ if environ is None else environ
    kept = {}
    for name, value in environ.items():
        if name not in ENV_VAR_NAMES and not name.startswith(ENV_VAR_PREFIXES):
            continue
        if _VOLATILE_NAME.search(name) or _is_temp_path(value):
            continue
        kept[name] = value
    return dict(sorted(kept.items()))


def installed() -> list[str]:
    """Every installed distribution as its metadata folder name (name and version), without
    parsing any metadata: listing folders takes milliseconds."""
    found = set()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        found.update(n for n in names if n.endswith((".dist-info", ".egg-info")))
    return sorted(found)


def _libc() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return None


def _os_release() -> str | None:
    found = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', read("/etc/os-release") or "", re.M)
    return found.group(1) if found else None


def fingerprint() -> dict:
    """What can change the environment, as plain JSON data. Any field that fails is None.
    Stable while the environment is: a field that varied from one run to the next would
    capture again (seconds) on every `dvc repro`, though env.json, rewritten only when what it
    holds changed, would not measure again. For that reason no GPU is read here (/proc/driver/nvidia/gpus/*/
    information leaves fields out until a GPU is initialized): the driver's version stands for
    the GPUs, and every bench process records the GPU it used, which compare checks."""
    fields = {
        "python": lambda: sys.version,
        "executable": lambda: portable(sys.executable),     # no user's path in a report
        "cpu_model": lambda: cpu_model() or platform.processor(),
        "usable_cores": usable_cores,
        "driver": lambda: read("/proc/driver/nvidia/version"),
        "installed": installed,
        "env_vars": env_vars,
        "os_release": platform.release,
        "os_name": _os_release,
        "libc": _libc,
    }
    out = {}
    for name, fn in fields.items():
        try:
            out[name] = fn()
        except Exception:
            out[name] = None
    return out
