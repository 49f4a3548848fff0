"""What torch.compile did in a compiled run: graph breaks and recompiles with their reasons,
the graphs it made and the kernels inductor generated for them."""
from __future__ import annotations

import logging
import os
import re

import torch

from torchgate.core.records.outputs import Dynamo
from torchgate.measure.ops import WorkCounts


def dynamo_counts() -> dict:
    from torch._dynamo.utils import counters
    breaks = counters.get("graph_break", {})
    return {
        "graph_breaks": int(sum(breaks.values())),
        "graph_break_reasons": sorted({str(r).strip().splitlines()[0][:200] for r in breaks}),
        "unique_graphs": int(counters.get("stats", {}).get("unique_graphs", 0)),
        "frames": int(counters.get("frames", {}).get("total", 0)),
    }


def reset_dynamo() -> None:
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    try:
        from torch._inductor import metrics
    except ImportError:
        return
    metrics.reset()


def compile_source() -> str:
    """How the graphs compiled since `reset_dynamo` came to be, by the compile caches'
    counters: "loaded from the compile cache" (hits only), "compiled in this process"
    (misses only), "partly loaded" (both), "not cached" (the caches bypassed or off)."""
    from torch._dynamo.utils import counters
    hits = counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"][
        "autograd_cache_hit"]
    misses = counters["inductor"]["fxgraph_cache_miss"] + counters["aot_autograd"][
        "autograd_cache_miss"]
    if hits and misses:
        return "partly loaded"
    return ("loaded from the compile cache" if hits else
            "compiled in this process" if misses else "not cached")


def inductor_counts() -> WorkCounts:
    """The kernels inductor generated since `reset_dynamo`, and the bytes they access by its
    own count. Exact and the same in every process: a compile cache's hit replays the counts
    of the compile it saved (inductor's CachedMetricsDeltas). The CPU backend counts no
    bytes: said in `unmeasured`, not recorded as 0."""
    try:
        from torch._inductor import metrics
    except ImportError:
        return WorkCounts(unmeasured={"inductor_kernels": "this torch has no inductor"})
    kernels = int(getattr(metrics, "generated_kernel_count", 0))
    accessed = int(getattr(metrics, "num_bytes_accessed", 0))
    if accessed:
        return WorkCounts(inductor_kernels=kernels, inductor_bytes=accessed)
    return WorkCounts(inductor_kernels=kernels, unmeasured={
        "inductor_bytes": "inductor counts no bytes accessed for this backend's kernels "
                          "(its CPU code)"})


# The compile's phases, from the regions dynamo and inductor time (torch._dynamo.utils.
# compilation_time_metrics: seconds per named region, nested): each phase its regions less
# the regions inside them that are phases of their own; "rest" is the first call less them
# (dynamo's other work, cache lookups, running the call). A region a torch version does not
# time is 0: the rest then holds it.
COMPILE_PHASES = (
    ("tracing", ("bytecode_tracing",), ()),
    ("AOT autograd", ("create_aot_dispatcher_function",), ("fx_codegen_and_compile",)),
    ("lowering", ("fx_codegen_and_compile",), ("GraphLowering.codegen",
                                               "PyCodeCache.load_by_key_path")),
    ("codegen", ("GraphLowering.codegen",), ()),
    ("build and load", ("PyCodeCache.load_by_key_path",), ()),
    ("guards", ("build_guards",), ()),
)


def compile_times() -> dict[str, float]:
    """Seconds per timed region of the compiles so far in this process."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
        return {name: float(sum(times)) for name, times in compilation_time_metrics.items()}
    except (ImportError, TypeError, AttributeError):   # a torch that keeps them otherwise
        return {}


def compile_phases(before: dict[str, float], after: dict[str, float],
                   first_call_s: float) -> dict[str, float]:
    """The first call's seconds per phase (COMPILE_PHASES), from the region times before and
    after it; {} where no region was timed (nothing compiled, or a torch that times none)."""
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    if not any(v > 0 for v in spent.values()):
        return {}

    def of(names: tuple[str, ...]) -> float:
        return sum(spent.get(n, 0.0) for n in names)
    found = {phase: max(0.0, of(regions) - of(inside)) for phase, regions, inside
             in COMPILE_PHASES}
    found["rest"] = max(0.0, first_call_s - sum(found.values()))
    return found


class DynamoLog(logging.Handler):
    """Graph breaks and recompiles of one compiled run, with their reasons, read from dynamo's
    `graph_breaks` and `recompiles` log artifacts (the TORCH_LOGS names). Dynamo's counters
    miss some graph breaks (a data-dependent branch lands in counters["unimplemented"], not
    counters["graph_break"], in torch 2.13), the log does not; the counters remain a
    fallback should a torch version rename the artifacts."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.breaks: list[str] = []
        self.recompiles: list[str] = []
        self.frames_after_first: int | None = None
        self.times_before: dict[str, float] = {}
        self.times_after_first: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.name.endswith("__graph_breaks"):
                self.breaks.append(_graph_break_reason(record.getMessage()))
            elif record.name.endswith("__recompiles"):
                self.recompiles.append(_recompile_reason(record.getMessage()))
        except Exception:  # a log format we do not know must not fail the run
            pass

    def __enter__(self) -> "DynamoLog":
        try:
            torch._logging.set_logs(graph_breaks=True, recompiles=True)
        except (AttributeError, TypeError, ValueError):
            pass
        # Attach to the artifact loggers themselves: torch's own loggers do not propagate.
        names = [n for n in list(logging.root.manager.loggerDict)
                 if n.startswith("torch.") and n.endswith(("__graph_breaks", "__recompiles"))]
        self._loggers = [logging.getLogger(n) for n in names] or [logging.getLogger("torch")]
        for logger in self._loggers:
            logger.addHandler(self)
        self.times_before = compile_times()
        return self

    def __exit__(self, *exc) -> None:
        for logger in self._loggers:
            logger.removeHandler(self)
        try:
            torch._logging.set_logs()
        except (AttributeError, TypeError, ValueError):
            pass

    def mark_first(self) -> None:
        self.frames_after_first = dynamo_counts()["frames"]
        self.times_after_first = compile_times()

    def phases(self, first_call_s: float) -> dict[str, float]:
        """The first call's compile by phase (compile_phases)."""
        return compile_phases(self.times_before, self.times_after_first, first_call_s)

    def summary(self) -> Dynamo:
        counted = dynamo_counts()
        reasons = list(dict.fromkeys(self.breaks)) or counted["graph_break_reasons"]
        recompiles = len(self.recompiles)
        if not self.recompiles and self.frames_after_first is not None:
            recompiles = max(0, counted["frames"] - self.frames_after_first)
        return Dynamo(graph_breaks=max(len(reasons), counted["graph_breaks"]),
                      graph_break_reasons=tuple(reasons), recompiles=recompiles,
                      recompile_reasons=tuple(dict.fromkeys(self.recompiles))[:10],
                      unique_graphs=counted["unique_graphs"])


def _where(path: str, line: str) -> str:
    return f"{os.path.basename(path)}:{line}"


def _graph_break_reason(message: str) -> str:
    """`Failed to trace builtin operator: Dynamo does not know how to trace ... (at f.py:12)`"""
    at = re.search(r"Graph break in user code at (.+):(\d+)", message)
    body = message.split("Graph Break Reason:", 1)[-1]
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    head = next((ln for ln in lines if not ln.startswith("Encountered graph break")),
                lines[0] if lines else "unknown")
    explanation = next((ln.split(":", 1)[1].strip() for ln in lines
                        if ln.startswith("Explanation:")), "")
    text = head.rstrip(":") + (f": {explanation}" if explanation else "")
    return text[:300] + (f" (at {_where(*at.groups())})" if at else "")


def _recompile_reason(message: str) -> str:
    """`h: n == 2 (at f.py:24)`: the function and the first guard that failed."""
    at = re.search(r"Recompiling function (\S+) in (.+):(\d+)", message)
    failures = [ln.strip()[1:].strip() for ln in message.splitlines()
                if ln.strip().startswith("- ") and "User stack" not in ln]
    first = re.sub(r"^\d+/\d+:\s*", "", failures[0]).split("  #")[0].strip() if failures else ""
    if not at:
        return first[:300] or message.strip().splitlines()[0][:300]
    return f"{at.group(1)}: {first[:300]} (at {_where(at.group(2), at.group(3))})"
