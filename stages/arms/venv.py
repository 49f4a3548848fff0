"""Python environments rebuilt from a recorded package set: the baseline's, or this one's with
a candidate's overrides. The set is every distribution the environment had installed (the env
stage's packages.json), not only the packages that matter (env.json): it is pinned exactly and
installed without dependency resolution, so it must be complete. Built once per spec and
platform (cached by their hash; arms.cache), with uv when it is on PATH (much faster) or venv +
pip, and checked: the torch that got installed must be the recorded build, local label included
(2.13.0+cpu is not 2.13.0+cu130). A cached venv is checked before use: the spec it carries is
the spec, its interpreter runs."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from torchgate.arms.cache import ensure, evict
from torchgate.core.errors import UserError
from torchgate.core.lifetime import INTERPRETER_TIMEOUT_S, run_bound

# The installer itself, and this harness (it runs from the working tree). setuptools stays
# pinned: torch.compile's C++ builder imports it, and a venv made by uv has none of its own.
NOT_PINNED = ("pip", "torchgate")


@dataclass(frozen=True)
class VenvSpec:
    python: str                        # version to build with, e.g. 3.11.7 (major.minor used)
    pins: tuple[str, ...] = ()         # name==version: the exact set, installed without deps
    overrides: tuple[str, ...] = ()    # requirements installed after, with their dependencies
    torch: str | None = None           # the torch version that must come out, if known
    installer: str = "pip"
    index: str | None = None           # an extra index the pins come from (a lock's torch index)
    # uv hardlinks files from its cache by default; a shared library already in the page cache
    # then maps more resident pages on import (measured: torch 2.13 imported at 278 MiB RSS
    # against 218 MiB copied), which would read as a memory change between the arms.
    link_mode: str = "copy"

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(carried(self), sort_keys=True).encode()).hexdigest()[:16]


def carried(spec: VenvSpec) -> dict:
    """The spec and the platform it is built on (a home shared over NFS by x86 and aarch64
    nodes holds both builds): what the key hashes and the venv's spec file holds."""
    spec_data = {k: v for k, v in asdict(spec).items() if k != "index" or v is not None}
    return {**spec_data, "platform": sys.platform, "machine": platform.machine(),
            "implementation": platform.python_implementation()}


def requirement_name(requirement: str) -> str:
    """The normalized project name of a requirement: "Torch>=2.14" -> "torch"."""
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", found.group(1)).lower() if found else requirement


def spec_from(distributions: dict[str, str], python: str, *, overrides=(), torch=None,
              installer: str = "auto", index: str | None = None) -> VenvSpec:
    """The recorded set pinned exactly, less what the overrides replace."""
    replaced = {requirement_name(r) for r in overrides}
    pins = tuple(f"{name}=={version}" for name, version in sorted(distributions.items())
                 if name not in NOT_PINNED and name not in replaced and version)
    return VenvSpec(python, pins, tuple(overrides), torch, choose_installer(installer),
                    index=index)


def uv_binary() -> str | None:
    """uv from its Python package (a dependency of torchgate), else from PATH."""
    try:
        from uv import find_uv_bin
        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def choose_installer(wanted: str) -> str:
    if wanted == "auto":
        return "uv" if uv_binary() else "pip"
    if wanted == "uv" and not uv_binary():
        raise UserError("arms.installer is uv but uv is not installed; pip install uv, or set "
                        "arms.installer=pip")
    return wanted


def interpreter(version: str) -> str:
    """A base interpreter of the recorded major.minor version: this one's, else pythonX.Y
    on PATH."""
    major_minor = ".".join(version.split(".")[:2])
    if f"{sys.version_info.major}.{sys.version_info.minor}" == major_minor:
        return getattr(sys, "_base_executable", None) or sys.executable
    found = shutil.which(f"python{major_minor}")
    if found is None:
        raise UserError(f"Python {major_minor} (the recorded environment's) is not installed "
                        f"here; install python{major_minor} or compare with the recorded numbers "
                        "(baseline.measure=recorded)")
    return found


def python_of(spec: VenvSpec, cache: Path) -> Path:
    """Where the venv built to `spec` keeps its python, built or not."""
    return cache / "venvs" / spec.key / "bin" / "python"


def materialise(spec: VenvSpec, cache: Path, log: Callable[[str], None] = lambda line: None,
                max_gb: float | None = None) -> str:
    """The python of a venv built to `spec`, built now unless the cache holds it; after a
    build, the cache is trimmed to `max_gb` (arms.cache_max_gb)."""
    python = python_of(spec, cache)
    target = python.parent.parent
    if not ensure(target, lambda folder: _build(spec, folder, log), lambda f: _check(spec, f),
                  log):
        log(f"reusing the venv {target}")
    elif max_gb is not None:
        evict(cache, max_gb, log)
    return str(python)


SPEC_FILE = "torchgate-spec.json"


def _build(spec: VenvSpec, folder: Path, log: Callable[[str], None]) -> None:
    base = interpreter(spec.python)
    started = time.perf_counter()
    log(f"building a venv with {len(spec.pins)} pinned packages"
        + (f" and {', '.join(spec.overrides)}" if spec.overrides else "")
        + f" ({spec.installer}) in {folder}")
    _create(spec.installer, base, folder)
    if spec.pins:
        index = ["--extra-index-url", spec.index] if spec.index else []
        _install(spec.installer, folder, ["--no-deps", *index, *spec.pins])
    if spec.overrides:
        _install(spec.installer, folder, list(spec.overrides))
    got = installed(str(folder / "bin" / "python"))
    if spec.torch and got.get("torch") != spec.torch:
        raise UserError(f"the rebuilt environment got torch {got.get('torch')}, not the "
                        f"recorded {spec.torch}; make that build installable (e.g. pip's "
                        "index-url or find-links for it) or set baseline.measure=recorded")
    if not spec.overrides:   # with overrides, their dependencies may move other pins
        differs = [p for p in spec.pins if got.get(requirement_name(p)) != p.split("==")[1]]
        if differs:
            raise UserError(f"the rebuilt environment differs from the recorded one in "
                            f"{len(differs)} package(s), e.g. {differs[0]} (got "
                            f"{got.get(requirement_name(differs[0]))})")
    (folder / SPEC_FILE).write_text(json.dumps(carried(spec), indent=1))
    log(f"built the venv in {time.perf_counter() - started:.1f} s (torch {got.get('torch')})")


def _check(spec: VenvSpec, folder: Path) -> str | None:
    """Why a cached venv cannot be used as `spec`'s, or None."""
    try:
        held = json.loads((folder / SPEC_FILE).read_text())
    except (OSError, ValueError):
        return f"its {SPEC_FILE} is missing or unreadable"
    if held != json.loads(json.dumps(carried(spec))):
        return f"its {SPEC_FILE} is not this spec's"
    try:
        ran = subprocess.run([str(folder / "bin" / "python"), "-c", ""], capture_output=True,
                             timeout=INTERPRETER_TIMEOUT_S).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ran = False
    return None if ran else "its python does not run (its base interpreter was removed?)"


LIST = ("import importlib.metadata as m, json, re; print(json.dumps({re.sub(r'[-_.]+', '-', "
        "d.metadata['Name']).lower(): d.version for d in m.distributions()}))")


def installed(python: str) -> dict[str, str]:
    """Normalized name -> version of every distribution the interpreter sees."""
    found = subprocess.run([python, "-c", LIST], capture_output=True, text=True)
    return json.loads(found.stdout) if found.returncode == 0 else {}


def _run(args: list[str], what: str) -> None:
    done = run_bound(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     env=_quiet_env())
    if done.returncode != 0:
        raise UserError(f"{what} failed: {_reason(done.stderr or done.stdout)}")


def _create(installer: str, base: str, folder: Path) -> None:
    if installer == "uv":
        _run([uv_binary(), "venv", "--quiet", "--python", base, str(folder)], "uv venv")
    else:
        _run([base, "-m", "venv", str(folder)], "python -m venv")


def _install(installer: str, folder: Path, args: list[str]) -> None:
    python = str(folder / "bin" / "python")
    if installer == "uv":
        _run([uv_binary(), "pip", "install", "--quiet", "--link-mode", "copy", "--python", python,
              *uv_index_args(), *args], "uv pip install")
    else:
        _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
             "pip install")


def uv_index_args() -> list[str]:
    """pip's index settings (pip.conf, PIP_* variables) as uv arguments: uv reads neither, and
    a torch build such as +cpu comes from an index or folder of its own."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                            capture_output=True, text=True).stdout
    flags = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
             "find-links": "--find-links", "constraint": "--constraint"}
    args = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        option = flags.get(key.split(".")[-1])
        if option:
            for item in value.strip().strip("'\"").split():
                args += [option, item]
    return args + ["--index-strategy", "unsafe-best-match"] if args else args


def _quiet_env() -> dict:
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _reason(output: str) -> str:
    """What went wrong, from an installer's output, in one line: its first error and the
    cause it gives (uv: "cause: ...", "╰─▶ ..."), shortened."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        if line.lower().startswith(("error:", "×")):
            found = re.sub(r"^(error:|×)\s*", "", line, flags=re.I).rstrip(":")
            cause = next((c for c in lines[i + 1:i + 3]
                          if c.lower().startswith(("cause:", "╰─▶"))), None)
            if cause:
                found += ": " + re.sub(r"^(cause:|╰─▶)\s*", "", cause, flags=re.I)
            return found[:300]
    return (lines[-1] if lines else "no output")[:300]
