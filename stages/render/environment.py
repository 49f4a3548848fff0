"""reports/env/env.md: the environment, then what changed against the baseline."""
from __future__ import annotations

from stages.judge.environment import HARDWARE_FIELDS, MISSING, diff, get, hardware_changes
from stages.render.markdown import markdown_table

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


def render_md(base: dict | None, now: dict, baseline_label: str,
              baseline_error: str | None = None) -> str:
    """The env report: the current environment, then what changed against the baseline."""
    rows = [(label, cell(get(now, dotted))) for label, dotted in MAIN_FIELDS]
    lines = ["# Environment", "", markdown_table(rows, ["field", "value"]),
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
            hardware = hardware_changes(base, now)
            if hardware:
                lines += ["**Hardware changed: timings are not comparable with the baseline** ("
                          + "; ".join(f"{name}: {cell(a)} → {cell(b)}" for name, a, b in hardware)
                          + ").", ""]
            first = {dotted for dotted, _ in HARDWARE_FIELDS}
            changes.sort(key=lambda c: (c[0] not in first, c[0]))
            table = [(key, cell(before), cell(after)) for key, before, after in changes]
            lines.append(markdown_table(table, ["field", "baseline", "now"]))
    return "\n".join(lines) + "\n"
