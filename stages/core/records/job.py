"""The job: what the launcher asks of one worker process, and the arms a run measures.
Standard library only (the worker runs with torch alone)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchgate.core.config import DeviceSpec, PrecisionSpec
from torchgate.core.config.settings import BenchSettings, WorkloadSpec


@dataclass(frozen=True)
class Timing:
    samples: int
    sample_target_s: float
    warmup_s: float
    min_warmup_calls: int
    warmup_max_s: float = BenchSettings.warmup_max_s
    latency_calls: int = BenchSettings.latency_calls
    latency_s: float = BenchSettings.latency_s
    rank_timeout_s: float = BenchSettings.rank_timeout_s
    breakdown_calls: int = BenchSettings.breakdown_calls
    breakdown_s: float = BenchSettings.breakdown_s
    instruction_calls: int = BenchSettings.instruction_calls
    instructions_compile: bool = BenchSettings.instructions_compile
    profile_calls: int = BenchSettings.profile_calls
    import_timeout_s: float | None = None   # None: within the unit's time limit alone
    pin_pairs: bool = BenchSettings.pin_pairs


@dataclass(frozen=True)
class Arm:
    """One side of a comparison measured in this run: an interpreter and a revision of the
    workload code. The measuring harness (stages/ outside workloads/) is always this one."""
    name: str                          # "baseline", "candidate" or "now"
    python: str | None = None          # None: this interpreter
    code: str | None = None            # the project folder at `rev`; None: this working tree
    rev: str | None = None
    workloads: dict[str, WorkloadSpec] | None = None   # that revision's; None: this config's
    venv: Any = None                   # arms.venv.VenvSpec `python` was built from, if any


NOW_ARM = Arm("now")      # a run that measures only itself
# The file a worker creates once it has imported its workload modules (measure.worker), named
# by the launcher in this variable.
IMPORTED = "TORCHGATE_IMPORTED"


@dataclass(frozen=True)
class Job:
    kind: str                          # "bench", "numerics", "fresh" (determinism check) or
    #                                    "instructions" (a counts process, under callgrind)
    seed: int
    device: DeviceSpec
    precision: PrecisionSpec
    workloads: tuple[WorkloadSpec, ...]   # one; several for the fresh-process check
    modes: tuple[str, ...]
    timing: Timing
    baton: tuple[int, ...] | None = None  # the two pipe ends of a lock-step pair
    code: str | None = None            # import workloads from this folder (another revision)
    # The inductor cache of this unit and arm, by name: a folder of the private scratch of the
    # machine that runs the worker (core.scratch.compile_cache), emptied first where
    # `compile_cache_cold` (a cold compile); None: the launcher's (a fresh private folder for
    # bench, a shared one for numerics).
    compile_cache: str | None = None
    compile_cache_cold: bool = False
    # A lock-step pair's cores, in the order its processes take them: each arm runs on the
    # first `threads` of them (measure.build.pin), both on the same (launch.local.pair_cores).
    cores: tuple[int, ...] | None = None

    @property
    def workload(self) -> WorkloadSpec:
        return self.workloads[0]
