"""The shape of a migration report (reports/<machine>/migration/<name>.json): one cell against
another, workload by workload and mode by mode. judge.migration builds it, render.migration
shows it, the stage writes it. Every ratio is target / source. Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

RUNS, FAILS, SKIPPED, NOT_MEASURED = "runs", "fails", "skipped", "not measured"
# A side's reason where the busy rule left processes out (judge.readiness writes it, the
# checklist and the page read it).
BUSY_LEFT_OUT = "timed while other programs took more than compare.busy_share of the CPU"
PASS_MARK, FAIL_MARK = "✓", "✗"


@dataclass(frozen=True)
class Ratio:
    """One number on both sides (medians over the processes kept) and target / source of it,
    from Welch's t-test on the log process values, with its interval."""
    metric: str
    source: float | None = None
    target: float | None = None
    ratio: float | None = None          # exp(mean log target - mean log source)
    low: float | None = None
    high: float | None = None
    n_source: int = 0
    n_target: int = 0
    df: float | None = None
    # The interval's width (log scale) and its standard error over what the processes' spread
    # alone would give: the run-to-run variance of sides measured apart (None: in one run).
    # The width can come out below 1 at few processes: a nearly known variance added to the
    # processes' also adds degrees of freedom (Satterthwaite), lowering the t quantile.
    widened: float | None = None
    se_widened: float | None = None
    # Each side's own interval of its geometric mean (its run-to-run variance included where
    # the sides were measured apart), for the pictures.
    source_low: float | None = None
    source_high: float | None = None
    target_low: float | None = None
    target_high: float | None = None

    @property
    def tested(self) -> bool:
        return self.ratio is not None and self.low is not None


@dataclass(frozen=True)
class Cost:
    """$ per million items on each side (its device's price_per_hour over its throughput),
    target / source with its interval, and the break-even price: the target's hourly price
    at which its cost per item equals the source's."""
    source_price: float | None
    target_price: float | None
    source_usd_per_million: float | None = None
    target_usd_per_million: float | None = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    break_even: float | None = None
    break_even_low: float | None = None
    break_even_high: float | None = None


@dataclass(frozen=True)
class SideMode:
    """One side of a workload's mode: whether it ran, and what it did there."""
    status: str                          # runs, fails, skipped, not measured
    reason: str | None = None
    unit: str | None = None              # the record's unit (a sweep's point)
    processes: int = 0                   # kept for the steady state
    items_per_s: float | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    reasons: tuple[str, ...] = ()        # graph-break and recompile reasons
    shape_recompiles: tuple[tuple[str, int], ...] = ()   # per shape after the first
    numerics: str | None = None          # PASS, FAIL, NONFINITE, ...
    problems: tuple[str, ...] = ()
    rel_l2: float | None = None          # the worst output's error against float64
    tolerance: float | None = None       # the precision's rel. L2 tolerance
    compiled_vs_eager: str | None = None   # compiled modes: dynamo's accuracy rule
    compiled_vs_eager_rel_l2: float | None = None
    # The counts of its work there (core.metrics: operators, FLOPs, graphs, kernels, kernel
    # launches, host instructions), metric -> count: what the move changes in the work a call
    # does, beside what it changes in its time.
    work: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ModeMigration:
    mode: str
    source: SideMode
    target: SideMode
    timings: tuple[Ratio, ...] = ()      # per_item_s first, then the others measured
    cost: Cost | None = None
    new_reasons: tuple[str, ...] = ()    # graph-break/recompile reasons the source lacks
    error_ratio: float | None = None     # target's rel. L2 error over the source's

    def timing(self, metric: str) -> Ratio | None:
        return next((r for r in self.timings if r.metric == metric), None)


@dataclass(frozen=True)
class SideOps:
    """A workload's op coverage on one side (the numerics stage's eager step)."""
    status: str | None = None            # OK, ERROR, ...; None: not measured
    error: str | None = None
    device: str | None = None
    ops: int = 0
    fallbacks: tuple[str, ...] = ()      # "op (where)": ran or had tensors off the device
    extensions: tuple[str, ...] = ()     # custom-op namespaces (not PyTorch's own)


@dataclass(frozen=True)
class ChecklistItem:
    item: str
    mark: str                            # ✓, ✗ or "not measured"
    detail: str = ""


@dataclass(frozen=True)
class WorkloadMigration:
    workload: str
    verdict: str                         # runs, does not run there, ...
    reason: str | None = None
    modes: tuple[ModeMigration, ...] = ()
    source_ops: SideOps = field(default_factory=SideOps)
    target_ops: SideOps = field(default_factory=SideOps)
    new_ops: tuple[str, ...] = ()        # ops the target's step runs that the source's did not
    retuned: str | None = None           # each side's own recommended sweep point, named
    checklist: tuple[ChecklistItem, ...] = ()


@dataclass(frozen=True)
class SideInfo:
    label: str                           # cpu-fp32, or box-b/cpu-fp32
    machine: str
    cell: str
    where: str                           # "this run", or "committed at <commit>"
    status: str | None = None            # the bench record's status; None: no record
    reason: str | None = None
    price_per_hour: float | None = None
    torch: str | None = None
    hardware: str | None = None
    run_spread: str | None = None        # where its run-to-run variance came from


@dataclass(frozen=True)
class MigrationRecord:
    name: str
    source: SideInfo
    target: SideInfo
    same_run: bool                       # both sides measured in one run
    alpha: float
    workloads: tuple[WorkloadMigration, ...] = ()
    notes: tuple[str, ...] = ()
