"""An op coverage read as it stands: its operators by namespace (PyTorch's own, then the
extensions') and those that ran off the requested device. How it changed against the
baseline's is the judge's (judge.portability)."""
from __future__ import annotations

from stages.core.records.outputs import Coverage

# PyTorch's own operator namespaces; any other an op coverage sees is an extension's (a
# `torch.library` custom op, a loaded C++ operator library: `torch.ops.<namespace>`).
TORCH_NAMESPACES = frozenset({"aten", "prims", "prim", "quantized", "_quantized", "profiler",
                              "c10d", "_c10d_functional", "c10d_functional", "_dtensor",
                              "inductor", "higher_order", "debugprims", "rngprims"})


def fallback_ops(coverage: Coverage) -> dict[str, str]:
    """Ops that ran (or had tensors) elsewhere than the requested device: op -> where."""
    found = {op: "tensors on " + "/".join(devs) for op, devs in coverage.other_device.items()}
    for op in coverage.fallback_ops:
        found.setdefault(op, "fallback warning")
    return found


def namespaces(coverage: Coverage) -> dict[str, list[str]]:
    """The ops of one coverage by namespace (`aten.mm.default` -> aten), PyTorch's first."""
    found: dict[str, list[str]] = {}
    for op in coverage.ops:
        found.setdefault(op.split(".", 1)[0], []).append(op)
    return dict(sorted(found.items(), key=lambda kv: (kv[0] not in TORCH_NAMESPACES, kv[0])))


def extensions(coverage: Coverage) -> dict[str, list[str]]:
    """The ops of namespaces beyond PyTorch's own: a user's extensions."""
    return {ns: ops for ns, ops in namespaces(coverage).items() if ns not in TORCH_NAMESPACES}
