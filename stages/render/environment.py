"""reports/env/env.md: the environment, then what changed against the baseline."""
from __future__ import annotations

from torchgate.core.records.dotted import MISSING, get
from torchgate.render.markdown import markdown_table

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


def cell(value: object) -> str:
    """A value as one markdown table cell."""
    if value is MISSING:
        text = "(absent)"
    elif value is None:
        text = "(none)"
    elif isinstance(value, (list, tuple)):
        text = ", ".join(cell(v) for v in value) if value else "(none)"
    else:
        text = str(value)
    return " ".join(text.split()).replace("|", "\\|")


def render_md(now: dict, baseline_label: str, changes: list | None, hardware: list,
              baseline_error: str | None = None) -> str:
    """The env report: the current environment, then what changed against the baseline:
    `changes` (judge.environment.diff, the hardware fields first; None: no baseline) and
    `hardware`, the hardware fields among them (judge.environment.hardware_changes)."""
    rows = [(label, cell(get(now, dotted))) for label, dotted in MAIN_FIELDS]
    lines = ["# Environment", "", markdown_table(rows, ["field", "value"]),
             "", f"## Change against the baseline ({baseline_label})", ""]
    if baseline_error is not None:
        lines.append(f"Baseline env.json unreadable: {baseline_error}")
    elif changes is None:
        lines.append("No baseline yet: commit `reports/` to make this run the baseline.")
    elif not changes:
        lines.append("No environment change against the baseline.")
    else:
        if hardware:
            lines += ["**Hardware changed: timings are not comparable with the baseline** ("
                      + "; ".join(f"{name}: {cell(a)} → {cell(b)}" for name, a, b in hardware)
                      + ").", ""]
        table = [(key, cell(before), cell(after)) for key, before, after in changes]
        lines.append(markdown_table(table, ["field", "baseline", "now"]))
    return "\n".join(lines) + "\n"
