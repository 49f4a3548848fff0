"""What the environment is: Python, torch and its build, devices, OS, packages, backend flags
and relevant environment variables, read in-process. Stable fields only, so that an unchanged
environment gives byte-identical output. Every probe that fails records None: a missing tool
or an odd platform must never stop the pipeline. Needs torch alone (another interpreter of an
A/B run calls `capture` too).
"""
from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
import warnings
from typing import Any, Callable, Iterable

from torchgate.core.machine import cpu_model, read, usable_cores
from torchgate.core.records.schema import Hardware, Host
from torchgate.measure import distributions as dists
from torchgate.measure.fingerprint import env_vars
from torchgate.measure.nvml import clocks as nvml_clocks

SECTIONS = ("python", "torch", "hardware", "os", "packages", "distributions", "flags",
            "env_vars")

PACKAGE_NAMES = frozenset({
    "torch", "triton", "numpy", "scipy", "pytorch-triton", "pytorch-triton-rocm",
    "pytorch-triton-xpu", "mkl", "intel-openmp", "onednn",
})
PACKAGE_PREFIXES = ("nvidia-", "intel-", "neuron", "libneuron", "torch-neuron", "torch-xla")

def _probe(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a probe; any failure is recorded as None rather than stopping the stage."""
    try:
        return fn(*args)
    except Exception:
        return None


def _cpu_model() -> str | None:
    """/proc/cpuinfo names the model on Linux; macOS needs sysctl; else platform.processor()."""
    found = cpu_model()
    if found:
        return found
    if platform.system() == "Darwin":
        brand = _probe(lambda: subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
            timeout=5).stdout.strip())
        if brand:
            return brand
    return platform.processor() or None


# The CPU's instruction-set features that decide how fast torch's kernels run a precision
# (oneDNN and ATen pick their kernels by them): x86's flags and Arm's Features in /proc/cpuinfo.
CPU_FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16",
                "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16", "amx_int8",
                "asimd", "asimdhp", "bf16", "i8mm", "sve", "sve2", "sme")


def cpu_features() -> list[str] | None:
    """Which of CPU_FEATURES the CPU has (Linux; None where /proc/cpuinfo lists none)."""
    for line in (read("/proc/cpuinfo") or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            have = set(value.split())
            return [f for f in CPU_FEATURES if f in have]
    return None


def _nvidia_driver() -> str | None:
    """The kernel module's version from /proc, else NVML, else nvidia-smi."""
    text = read("/proc/driver/nvidia/version")
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", text or "")
    if found:
        return found.group(1)
    try:
        import pynvml  # nvidia-ml-py, when installed
        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    smi = _probe(lambda: subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        capture_output=True, text=True, timeout=10))
    if smi is not None and smi.returncode == 0 and smi.stdout.strip():
        return smi.stdout.split()[0]
    return None


def _os_name() -> str | None:
    text = read("/etc/os-release") or ""
    found = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.MULTILINE)
    if found:
        return found.group(1)
    if platform.system() == "Darwin":
        return f"macOS {platform.mac_ver()[0]}"
    return None


def _glibc() -> str | None:
    lib, version = platform.libc_ver()
    return f"{lib} {version}" if lib else None


def _python() -> dict:
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "compiler": _probe(platform.python_compiler),
        "bits": _probe(lambda: platform.architecture()[0]),
    }


def _packages(matter: dict[str, str]) -> dict:
    """Versions of the packages that change kernels or timings, among those that matter."""
    return {name: version for name, version in matter.items()
            if name in PACKAGE_NAMES or name.startswith(PACKAGE_PREFIXES)}


def that_matter(modules: Iterable[str] | None = None) -> dict[str, str]:
    """name -> version of the distributions that matter (measure.distributions): torch's
    closure and those of `modules`, a worker's imports; by default this process's (another
    interpreter of an A/B run, which imported torch and nothing of the workloads'). Only
    what an index can serve again, as arms.venv rebuilds from it."""
    found = dists.installed()
    names = dists.that_matter(list(sys.modules) if modules is None else modules, found)
    return {name: version for name, version in dists.versions(found).items() if name in names}


def distributions() -> dict[str, str]:
    """Every installed distribution that an index can serve again, as normalized name ->
    version (with its local label: torch 2.13.0+cpu); installed from a path or in editable
    mode: left out, no index has it (measure.distributions.versions)."""
    return dists.versions(dists.installed())


def _gpus(torch: Any) -> dict:
    """Accelerator devices: CUDA or ROCm (both via torch.cuda), else XPU."""
    cuda = bool(_probe(torch.cuda.is_available))
    out: dict[str, Any] = {"cuda_available": cuda, "gpu_count": 0, "gpu_names": [],
                           "gpu_uuids": [], "gpu_capabilities": [], "nvidia_driver": None}
    if cuda:
        count = _probe(torch.cuda.device_count) or 0
        props = [_probe(torch.cuda.get_device_properties, i) for i in range(count)]
        out["gpu_count"] = count
        out["gpu_names"] = [_probe(torch.cuda.get_device_name, i) for i in range(count)]
        out["gpu_uuids"] = [_probe(lambda p=p: str(p.uuid)) for p in props]
        out["gpu_capabilities"] = [_probe(lambda p=p: f"{p.major}.{p.minor}") for p in props]
        out["gpu_memory_bytes"] = [_probe(lambda p=p: int(p.total_memory)) for p in props]
        if getattr(torch.version, "hip", None):
            out["gpu_archs"] = [_probe(lambda p=p: p.gcnArchName) for p in props]
        else:
            out["nvidia_driver"] = _probe(_nvidia_driver)
            # Max/default/applications SM clocks, memory clock, power limit (NVML; None
            # without nvidia-ml-py): a locked or lowered clock changes every timing.
            out["gpu_clocks"] = _probe(nvml_clocks, torch, count) or [None] * count
    xpu = bool(_probe(lambda: torch.xpu.is_available()))
    out["xpu_available"] = xpu
    if xpu and not cuda:
        count = _probe(torch.xpu.device_count) or 0
        out["gpu_count"] = count
        out["gpu_names"] = [_probe(torch.xpu.get_device_name, i) for i in range(count)]
    out["mps_available"] = bool(_probe(torch.backends.mps.is_available))
    return out


def process_host(torch: Any, device_type: str) -> Host:
    """Where this worker process ran, read by itself once it has measured: the machine, and
    the hardware key of its timings (the CPU, the accelerator it used, torch's threads). A GPU
    is named only when the process already uses it, so that no GPU context is started
    beside a CPU cell."""
    backend = {"cuda": torch.cuda, "xpu": getattr(torch, "xpu", None)}.get(device_type)
    gpus: tuple[str, ...] = ()
    if backend is not None and _probe(backend.is_initialized):
        name = _probe(lambda: backend.get_device_name(backend.current_device()))
        gpus = (name,) if name else ()
    return Host(_probe(socket.gethostname), None,
                Hardware(_probe(_cpu_model), gpus, _probe(torch.get_num_threads)))


def _torch(torch: Any) -> dict:
    version = torch.version
    return {
        "version": torch.__version__,
        "git_version": getattr(version, "git_version", None),
        "debug": getattr(version, "debug", None),
        "cuda": getattr(version, "cuda", None),
        "hip": getattr(version, "hip", None),
        "cudnn": _probe(torch.backends.cudnn.version),
        "cpu_capability": _probe(torch.backends.cpu.get_cpu_capability),
        "mkldnn": _probe(torch.backends.mkldnn.is_available),
        "openmp": _probe(torch.backends.openmp.is_available),
        "num_threads": _probe(torch.get_num_threads),
        "num_interop_threads": _probe(torch.get_num_interop_threads),
    }


def _flags(torch: Any) -> dict:
    """Numerics switches that change both results and speed (TF32, determinism)."""
    backends = torch.backends
    flags = {
        "cuda_matmul_allow_tf32": _probe(lambda: backends.cuda.matmul.allow_tf32),
        "cuda_matmul_allow_fp16_reduced_precision":
            _probe(lambda: backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
        "cuda_matmul_allow_bf16_reduced_precision":
            _probe(lambda: backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
        "cudnn_allow_tf32": _probe(lambda: backends.cudnn.allow_tf32),
        "cudnn_benchmark": _probe(lambda: backends.cudnn.benchmark),
        "cudnn_deterministic": _probe(lambda: backends.cudnn.deterministic),
        "float32_matmul_precision": _probe(torch.get_float32_matmul_precision),
        "deterministic_algorithms": _probe(torch.are_deterministic_algorithms_enabled),
        "deterministic_warn_only": _probe(torch.is_deterministic_algorithms_warn_only_enabled),
    }
    precisions = {
        "fp32_precision": lambda: backends.fp32_precision,
        "cuda_matmul_fp32_precision": lambda: backends.cuda.matmul.fp32_precision,
        "cudnn_fp32_precision": lambda: backends.cudnn.fp32_precision,
        "cudnn_conv_fp32_precision": lambda: backends.cudnn.conv.fp32_precision,
        "cudnn_rnn_fp32_precision": lambda: backends.cudnn.rnn.fp32_precision,
        "mkldnn_fp32_precision": lambda: backends.mkldnn.fp32_precision,
    }
    for name, getter in precisions.items():
        value = _probe(getter)
        if value is not None:  # older torch has no fp32_precision API: leave the key out
            flags[name] = value
    return flags


def capture(modules: Iterable[str] | None = None, every: bool = False) -> dict:
    """The stable environment, as a nested dict with the sections in SECTIONS; its
    `distributions` are those that matter (`that_matter(modules)`): a package installed
    beside them changes nothing here. Every installed one is the env stage's packages.json;
    `every`: also listed here, as `installed` (another interpreter's capture, which imported
    none of the workloads: compared on the names that matter here, core.records.packages)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading legacy TF32 flags warns on new torch
        try:
            import torch
        except Exception:
            torch = None
        gpus = _gpus(torch) if torch is not None else {}
        matter = _probe(that_matter, modules) or {}
        hardware = {
            "cpu_model": _probe(_cpu_model),
            "cpu_features": _probe(cpu_features),
            "logical_cores": os.cpu_count(),
            "usable_cores": _probe(usable_cores),
            "machine": platform.machine() or None,
            "gpu_names": None,
            **gpus,
        }
        found = {
            "python": _probe(_python),
            "torch": _probe(_torch, torch) if torch is not None else None,
            "hardware": hardware,
            "os": {
                "system": platform.system() or None,
                "release": platform.release() or None,
                "name": _probe(_os_name),
                "glibc": _probe(_glibc),
            },
            "packages": _probe(_packages, matter),
            "distributions": matter,
            "flags": _probe(_flags, torch) if torch is not None else None,
            "env_vars": _probe(env_vars),
        }
        if every:
            found["installed"] = _probe(distributions) or {}
        return found
