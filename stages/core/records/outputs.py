"""What a numerics worker process computes for one mode: its outputs' errors against float64,
the fingerprints kept for drift, what torch.compile did, op coverage and the fresh-process
outputs, and an op coverage read by namespace. Part of `schema`, which re-exports every name. Standard library only."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class OutputError:
    """One output against its float64 reference; None: not measured (empty output, or the
    values are not finite)."""
    rel_l2: float | None
    max_abs: float | None
    cosine: float | None
    nonfinite: int
    numel: int
    ref_nonfinite: int = 0


# How outputs are kept for drift (measure.accuracy writes them): at most WHOLE_MAX values
# whole, larger ones as a CountSketch onto SKETCH_K coordinates. A record with another method
# is not compared for drift.
FINGERPRINT_METHOD = "countsketch-fmix32-k64-v1"
SKETCH_K = 64
WHOLE_MAX = 64


@dataclass(frozen=True)
class Fingerprint:
    """An output kept for drift: whole when small, else norm, mean, std and a sketch."""
    shape: tuple[int, ...]
    nonfinite: int = 0
    values: tuple[float, ...] | None = None
    norm: float | None = None
    mean: float | None = None
    std: float | None = None
    sketch: str | None = None            # base64 of little-endian float64


@dataclass(frozen=True)
class Dynamo:
    graph_breaks: int = 0
    graph_break_reasons: tuple[str, ...] = ()
    recompiles: int = 0
    recompile_reasons: tuple[str, ...] = ()
    unique_graphs: int = 0


@dataclass(frozen=True)
class VersusEager:
    """A compiled output against the eager one, and eager's own error against float64."""
    rel_l2: float | None
    max_abs: float | None
    eager_rel_l2: float | None


@dataclass(frozen=True)
class ModeOutputs:
    """One mode in one numerics process: errors, determinism, fingerprints."""
    status: str
    error: str | None = None
    traceback: str | None = None
    outputs: dict[str, OutputError] = field(default_factory=dict)
    rerun_max_abs: float | None = None
    digest: str | None = None
    fingerprint: dict[str, Fingerprint] = field(default_factory=dict)
    dynamo: Dynamo | None = None
    vs_eager: dict[str, VersusEager] | None = None
    vs_eager_error: str | None = None     # eager failed: compiled vs eager not measured


@dataclass(frozen=True)
class Coverage:
    """The operators one eager step ran, and those that ran off the device."""
    status: str = "OK"
    error: str | None = None
    traceback: str | None = None
    device: str | None = None
    calls: int = 0
    ops: dict[str, str] = field(default_factory=dict)            # op -> "fwd", "bwd", "fwd+bwd"
    other_device: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fallback_ops: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class FreshOutputs:
    status: str
    error: str | None = None
    traceback: str | None = None
    digest: str | None = None
    fingerprint: dict[str, Fingerprint] = field(default_factory=dict)


# ---- ops ------------------------------------------------------------
# An op coverage read as it stands: its operators by namespace (PyTorch's own, then the
# extensions') and those that ran off the requested device. How it changed against the
# baseline's is the judge's (judge.portability).

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
