"""The env stage: record the environment that timings were taken in, and what changed.

`env.json` holds stable fields only, so an unchanged environment rewrites it byte-identical and
`dvc repro` can skip everything downstream. Every probe that fails records None: a missing tool
or an odd platform must never stop the pipeline.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, Callable


from stages.core.baseline import load_baseline, resolve_rev
from stages.core.errors import UserError, one_line_errors
from stages.core.records import dumps, write_record, write_text

SECTIONS = ("python", "torch", "hardware", "os", "packages", "flags", "env_vars")

ENV_VAR_NAMES = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG",
    "NVIDIA_TF32_OVERRIDE", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING",
    "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
})
ENV_VAR_PREFIXES = ("TORCHINDUCTOR_", "TORCH_", "PYTORCH_")
# Names that identify a process or a run, or may hold a credential: never recorded.
_VOLATILE_NAME = re.compile(r"(_PID|_PORT|_RUN_ID|_RANK|_KEY)$|TOKEN|SECRET|PASSWORD")

PACKAGE_NAMES = frozenset({
    "torch", "triton", "numpy", "scipy", "pytorch-triton", "pytorch-triton-rocm",
    "pytorch-triton-xpu", "mkl", "intel-openmp", "onednn",
})
PACKAGE_PREFIXES = ("nvidia-", "intel-", "neuron", "libneuron", "torch-neuron", "torch-xla")

# The fields whose change makes timings incomparable, as (dotted field, hardware_key name).
HARDWARE_FIELDS = (
    ("hardware.cpu_model", "cpu_model"),
    ("hardware.gpu_names", "gpu_names"),
    ("torch.num_threads", "torch_threads"),
)

# The rows of the summary table, in order: (label, dotted field).
MAIN_FIELDS = (
    ("Python", "python.version"),
    ("torch", "torch.version"),
    ("torch git", "torch.git_version"),
    ("CUDA build", "torch.cuda"),
    ("ROCm build", "torch.hip"),
    ("cuDNN", "torch.cudnn"),
    ("CPU", "hardware.cpu_model"),
    ("CPU capability", "torch.cpu_capability"),
    ("logical cores", "hardware.logical_cores"),
    ("torch threads", "torch.num_threads"),
    ("GPUs", "hardware.gpu_names"),
    ("NVIDIA driver", "hardware.nvidia_driver"),
    ("MPS", "hardware.mps_available"),
    ("XPU", "hardware.xpu_available"),
    ("OS", "os.system"),
    ("OS release", "os.release"),
    ("glibc", "os.glibc"),
    ("float32 matmul precision", "flags.float32_matmul_precision"),
    ("deterministic algorithms", "flags.deterministic_algorithms"),
)


class _Missing:
    """A field absent on one side of a diff (distinct from a recorded None)."""

    def __repr__(self) -> str:
        return "(absent)"


MISSING = _Missing()


def _probe(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a probe; any failure is recorded as None rather than stopping the stage."""
    try:
        return fn(*args)
    except Exception:
        return None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _cpu_model() -> str | None:
    """/proc/cpuinfo names the model on Linux; macOS needs sysctl; else platform.processor()."""
    cpuinfo = _read("/proc/cpuinfo") or ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return " ".join(value.split())
    if platform.system() == "Darwin":
        brand = _probe(lambda: subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
            timeout=5).stdout.strip())
        if brand:
            return brand
    return platform.processor() or None


def _usable_cores() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _nvidia_driver() -> str | None:
    """The kernel module's version from /proc, else NVML, else nvidia-smi."""
    text = _read("/proc/driver/nvidia/version")
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
    text = _read("/etc/os-release") or ""
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


def _packages() -> dict:
    """Versions of the packages that change kernels or timings, by normalized name."""
    found: dict[str, str] = {}
    for dist in _probe(lambda: list(metadata.distributions())) or []:
        name = _probe(lambda: re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower())
        if not name or name in found:
            continue  # the first on sys.path is the one that imports
        if name in PACKAGE_NAMES or name.startswith(PACKAGE_PREFIXES):
            found[name] = _probe(lambda: dist.version)
    return dict(sorted(found.items()))


def _is_temp_path(value: str) -> bool:
    roots = {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm", "/private/var/folders"}
    return any(value == root or value.startswith(root.rstrip("/") + "/") for root in roots)


def _env_vars(environ: dict[str, str] | None = None) -> dict:
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
    xpu = bool(_probe(lambda: torch.xpu.is_available()))
    out["xpu_available"] = xpu
    if xpu and not cuda:
        count = _probe(torch.xpu.device_count) or 0
        out["gpu_count"] = count
        out["gpu_names"] = [_probe(torch.xpu.get_device_name, i) for i in range(count)]
    out["mps_available"] = bool(_probe(torch.backends.mps.is_available))
    return out


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
    for name, read in precisions.items():
        value = _probe(read)
        if value is not None:  # older torch has no fp32_precision API: leave the key out
            flags[name] = value
    return flags


def fingerprint() -> dict:
    """What can change the environment, read without importing torch (milliseconds).

    The env stage runs on every `dvc repro`; when this is unchanged it reuses the full
    capture, so a no-op repro does not pay torch's import.
    """
    return {
        "python": sys.version,
        "executable": sys.executable,
        "cpu_model": _probe(_cpu_model),
        "usable_cores": _probe(_usable_cores),
        "driver": _read("/proc/driver/nvidia/version"),
        "installed": _probe(_installed),
        "env_vars": _probe(_env_vars),
        "os_release": platform.release(),
    }


def _installed() -> list[str]:
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


def capture() -> dict:
    """The stable environment, as a nested dict with the sections in SECTIONS."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading legacy TF32 flags warns on new torch
        try:
            import torch
        except Exception:
            torch = None
        gpus = _gpus(torch) if torch is not None else {}
        hardware = {
            "cpu_model": _probe(_cpu_model),
            "logical_cores": os.cpu_count(),
            "usable_cores": _probe(_usable_cores),
            "machine": platform.machine() or None,
            "gpu_names": None,
            **gpus,
        }
        return {
            "python": _probe(_python),
            "torch": _probe(_torch, torch) if torch is not None else None,
            "hardware": hardware,
            "os": {
                "system": platform.system() or None,
                "release": platform.release() or None,
                "name": _probe(_os_name),
                "glibc": _probe(_glibc),
            },
            "packages": _probe(_packages),
            "flags": _probe(_flags, torch) if torch is not None else None,
            "env_vars": _probe(_env_vars),
        }


def _get(env: dict | None, dotted: str) -> Any:
    node: Any = env
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def hardware_key(env: dict) -> dict:
    """What must match for two timings to be comparable: CPU, GPUs, torch threads."""
    return {name: _get(env, dotted) for dotted, name in HARDWARE_FIELDS}


def flatten(env: dict, prefix: str = "") -> dict[str, object]:
    """Nested dict to dotted keys ("torch.version"); lists and scalars are leaves.

    An empty dict contributes no keys, so setting the first env var reads as one added field.
    """
    flat: dict[str, object] = {}
    for key, value in env.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def diff(base: dict | None, now: dict) -> list[tuple[str, object, object]]:
    """Changed, added and removed dotted fields, sorted; an absent side is MISSING."""
    old, new = flatten(base or {}), flatten(now)
    changes = []
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key, MISSING), new.get(key, MISSING)
        if before != after:
            changes.append((key, before, after))
    return changes


def _cell(value: object) -> str:
    """A value as one markdown table cell."""
    if value is MISSING:
        text = "(absent)"
    elif value is None:
        text = "(none)"
    elif isinstance(value, (list, tuple)):
        text = ", ".join(_cell(v) for v in value) if value else "(none)"
    else:
        text = str(value)
    return " ".join(text.split()).replace("|", "\\|")


def _hardware_changes(base: dict, now: dict) -> list[str]:
    old, new = hardware_key(base), hardware_key(now)
    return [f"{name}: {_cell(old[name])} → {_cell(new[name])}"
            for name in old if old[name] != new[name]]


def render_md(base: dict | None, now: dict, baseline_label: str,
              baseline_error: str | None = None) -> str:
    """The env report: the current environment, then what changed against the baseline."""
    rows = [(label, _cell(_get(now, dotted))) for label, dotted in MAIN_FIELDS]
    lines = ["# Environment", "",
             _table(rows, headers=["field", "value"], tablefmt="github", disable_numparse=True),
             "", f"## Change against the baseline ({baseline_label})", ""]
    if baseline_error is not None:
        lines.append(f"Baseline env.json unreadable: {baseline_error}")
    elif base is None:
        lines.append("No baseline yet: commit `reports/` to make this run the baseline.")
    else:
        changes = diff(base, now)
        if not changes:
            lines.append("No environment change against the baseline.")
        else:
            hardware = _hardware_changes(base, now)
            if hardware:
                lines += ["**Hardware changed: timings are not comparable with the baseline** ("
                          + "; ".join(hardware) + ").", ""]
            first = {dotted for dotted, _ in HARDWARE_FIELDS}
            changes.sort(key=lambda c: (c[0] not in first, c[0]))
            table = [(key, _cell(before), _cell(after)) for key, before, after in changes]
            lines.append(_table(table, headers=["field", "baseline", "now"],
                                  tablefmt="github", disable_numparse=True))
    return "\n".join(lines) + "\n"


def _table(rows, **kwargs) -> str:
    from tabulate import tabulate
    return tabulate(rows, **kwargs)


def _baseline_rev(params: Path) -> str:
    """`baseline.rev` from the params file; HEAD when the file or the key is absent."""
    import yaml  # here, not at the top: capture() runs in interpreters that have only torch
    try:
        text = params.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "HEAD"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"{params} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        return "HEAD"
    if not isinstance(data, dict):
        raise UserError(f"{params} must be a mapping of settings")
    baseline = data.get("baseline") or {}
    if not isinstance(baseline, dict):
        raise UserError(f"{params}: `baseline` must be a mapping (with `rev`)")
    rev = baseline.get("rev")
    return "HEAD" if rev is None else str(rev)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m stages.env",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", type=Path,
                        help="params file; baseline.rev names the baseline (default HEAD)")
    parser.add_argument("--out", default="reports/env", type=Path,
                        help="folder for env.json and env.md")
    return parser.parse_args(argv)


def _reuse(json_path: Path, print_: dict) -> dict:
    """The previous capture when the fingerprint still matches, else a fresh one, written."""
    try:
        previous = json.loads(json_path.read_text(encoding="utf-8"))
        env = previous.get("env")
        if (previous.get("fingerprint") == json.loads(dumps(print_))
                and previous.get("digest") == _digest(env)):  # an edited record is recaptured
            return env
    except (OSError, ValueError, AttributeError):
        pass
    now = json.loads(dumps(capture()))
    write_record(json_path, "env", {"env": now, "fingerprint": print_, "digest": _digest(now)})
    return now


def _digest(env: object) -> str:
    return hashlib.sha256(dumps(env).encode()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    with one_line_errors("env"):
        args = _parse_args(argv)
        rev = _baseline_rev(args.params)
        json_path = args.out / "env.json"
        now = _reuse(json_path, fingerprint())
        commit = resolve_rev(rev)
        label = rev
        base, error = None, None
        try:
            record = load_baseline(commit, Path(os.path.relpath(json_path)).as_posix(), "env")
            if record is not None:
                base = record.get("env")
                if not isinstance(base, dict):
                    raise UserError(f"baseline {json_path} has no `env` section")
        except UserError as exc:
            base, error = None, str(exc)
        write_text(args.out / "env.md", render_md(base, now, label, baseline_error=error))
        if error is not None:
            summary = f"baseline unreadable ({error})"
        elif base is None:
            summary = "no baseline yet"
        elif _hardware_changes(base, now):
            summary = "hardware changed: timings not comparable"
        else:
            count = len(diff(base, now))
            summary = f"{count} field(s) changed against the baseline" if count else "no change"
        print(f"torchgate env: wrote {json_path} and {args.out / 'env.md'}; {summary}")


if __name__ == "__main__":
    main()
