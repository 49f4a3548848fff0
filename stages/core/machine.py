"""Which machine a run belongs to: its name, and the folder its reports live in.

Every record, environment, history and trend is kept per machine, under reports/<name>/, so
that two machines (a laptop and a CI runner, a CPU runner and a GPU box) each keep a baseline
and a history of their own, and a comparison stays within one machine. The name comes from
`machine.name` (config), else the TORCHGATE_MACHINE variable (CI runners), else it is derived
from the hardware by `python -m torchgate.compose`: the CPU model, its usable cores and the
NVIDIA GPUs, e.g. `amd-epyc-7b13-2c`, so that a user with one machine never names it.
Standard library only, read in milliseconds (the env stage checks the name on every run).
"""
from __future__ import annotations

import os
import platform
import re
from pathlib import Path

ENV_VAR = "TORCHGATE_MACHINE"
REPORTS = Path("reports")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_NOISE = {"intel", "nvidia", "core", "with", "radeon", "graphics"}   # words every model says
_RESERVED = {"none", "null", "env", "plots", "trends", "bench", "numerics"}


def read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def cpu_model() -> str | None:
    """The model /proc/cpuinfo names (Linux); None elsewhere (probe then asks sysctl)."""
    for line in (read("/proc/cpuinfo") or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return " ".join(value.split())
    return None


def usable_cores() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def nvidia_gpus() -> list[str]:
    """The NVIDIA GPUs' models as the driver lists them, without initialising a GPU."""
    root = "/proc/driver/nvidia/gpus"
    try:
        slots = sorted(os.listdir(root))
    except OSError:
        return []
    models = []
    for slot in slots:
        for line in (read(f"{root}/{slot}/information") or "").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model" and value.strip():
                models.append(value.strip())
    return models


def _slug(text: str) -> str:
    text = re.sub(r"\((?:r|tm)\)|\bcpu\b|\bprocessor\b|@.*$|\d+-core", " ", text.lower())
    words = [w.strip(".") for w in re.split(r"[^a-z0-9.]+", text)]
    return "-".join(w for w in words if w and w not in _NOISE)


def derived_name() -> str:
    """A name for this machine from its hardware: CPU model, usable cores, NVIDIA GPUs
    (e.g. `amd-epyc-7b13-2c`, `xeon-platinum-8480-16c-8xh100-80gb-hbm3`)."""
    cpu = _slug(cpu_model() or platform.processor() or platform.machine() or "cpu") or "cpu"
    name = f"{cpu}-{usable_cores() or 1}c"
    gpus = nvidia_gpus()
    if gpus:
        name += f"-{len(gpus)}x{_slug(gpus[0])}"
    return name[:64].strip(".-")


def unnamed() -> str:
    """The name of a machine that config does not name: TORCHGATE_MACHINE, else derived."""
    return os.environ.get(ENV_VAR) or derived_name()


def check_name(name: object) -> str | None:
    """Why `name` cannot name a machine's folder, or None when it can."""
    if not isinstance(name, str) or not name:
        return (f"machine.name is not set: run `python -m torchgate.compose` (it names this "
                f"machine after its hardware), or set {ENV_VAR} or machine.name")
    if not _NAME.fullmatch(name) or name.lower() in _RESERVED:   # fullmatch: no newline after
        return (f"machine.name {name!r} cannot name a folder of reports/: use letters, digits, "
                "'.', '_' and '-' (at most 64, not starting with '.' or '-'), not one of "
                + ", ".join(sorted(_RESERVED)))
    return None


def reports_of(name: str) -> Path:
    """The folder of one machine's reports."""
    return REPORTS / name


def legacy(path: Path | str) -> Path | None:
    """Where a machine's report lay before reports were kept per machine: reports/<name>/<rest>
    was reports/<rest>. Older commits are read there, as the default machine's (their
    environment's hardware key still decides whether their timings compare)."""
    parts = Path(path).parts
    if len(parts) > 2 and parts[0] == REPORTS.name:
        return Path(REPORTS.name, *parts[2:])
    return None


def portable(path: str) -> str:
    """An interpreter as a committed record names it: relative to the project where it lies
    inside it (`.venv/bin/python`), from `~` where it lies in the home folder (a rebuilt arm in
    ~/.cache/torchgate), so that no report carries a user's absolute paths; else as given."""
    found = Path(path)
    for root, shown in sorted(((Path.cwd(), ""), (Path.home(), "~/")),
                              key=lambda r: -len(r[0].parts)):       # the nearer one first
        if found.is_relative_to(root):
            return shown + found.relative_to(root).as_posix()
    return path
