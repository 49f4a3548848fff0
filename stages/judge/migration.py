"""Is it worth moving? One cell against another, workload by workload and mode by mode: does it
run there, are its results right, is it faster, is it cheaper. Pure: records in, a
core.records.migration.MigrationRecord out.

Every timing is one number per worker process (the processes the tests use: judge.timings,
the busy rule included), compared as target / source by Welch's t-test on the logs, as
compare does. The steady state is compared per item (a call's time over its items), so that
two sides at different batch sizes (each re-tuned by its own sweep) compare as throughput.

Sides measured in one run are tested on their processes alone. Sides measured apart (another
machine's committed run, or this run against another run) differ also by each run's offset,
which no number of processes shrinks: the standard error then adds each side's run-to-run
variance τ² of that unit, estimated from its own machine's committed history
(judge.run_to_run, judge.moderation; stats.run_spread where a history is too short), with
Satterthwaite's degrees of freedom (stats.with_parts).

Cost: $ per million items is the device's price_per_hour over the throughput; the cost ratio
is the price ratio times the per-item time ratio (prices are given, not measured), and the
break-even price, the target's hourly price at which its cost per item equals the source's,
is source price × target throughput / source throughput, its interval from the same test.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from torchgate.core.metrics import BY_NAME, HEADLINE, Role, with_role
from torchgate.core.numbers import median
from torchgate.core.records.migration import (
    RUNS,
    Cost,
    MigrationRecord,
    ModeMigration,
    Ratio,
    SideInfo,
    WorkloadMigration,
)
from torchgate.core.records.schema import BenchRecord, EnvRecord, NumericsRecord
from torchgate.judge import environment, portability, readiness, stats
from torchgate.judge.moderation import RunSpread
from torchgate.judge.run_to_run import prior

PER_ITEM = "per_item_s"      # the steady state per item: 1 / throughput
# Compared where both sides measured them, in this order; a timing's run-to-run variance is
# its history's (the per-item time's: the steady state's, its logs differing by a constant).
def timed(metric: str) -> bool:
    """A timing (the steady state per item too): its processes sampled on a busy machine are
    left out, and it has a history of runs (memory has neither, as in compare)."""
    return metric == PER_ITEM or BY_NAME[metric].timed


COMPARED = (PER_ITEM, *(m.name for m in with_role(Role.MIGRATED)))


@dataclass(frozen=True)
class SideInput:
    """One side as the stage read it."""
    label: str
    machine: str
    cell: str
    where: str                       # "this run", or "committed at <commit>"
    bench: BenchRecord | None
    numerics: NumericsRecord | None = None
    env: EnvRecord | None = None
    price_per_hour: float | None = None
    # (unit, mode, metric) -> its run-to-run variance, from this machine's history
    spreads: dict[tuple[str, str, str], RunSpread] = field(default_factory=dict)
    # (workload, mode) -> the unit its sweep recommends, where it swept that workload
    points: dict[tuple[str, str], str] = field(default_factory=dict)
    lock: tuple[str, str | None] | None = None   # (its lock file, the torch it pins)


def values(record: BenchRecord, unit: str, mode: str, metric: str,
           busy_share: float) -> list[float]:
    """One number per process that the tests use."""
    found = record.unit(unit, mode)
    if metric == PER_ITEM:
        items = found.field("items")
        steady = found.values(HEADLINE, busy_share)
        return [s / items[0] for s in steady] if items and items[0] else []
    return found.values(BY_NAME[metric], busy_share)


def ratio(metric: str, source: list[float], target: list[float], runs: list[RunSpread],
          alpha: float) -> Ratio:
    """target / source with its (1 - alpha) interval; `runs`: the sides' run-to-run
    variances where they were measured apart ([] in one run)."""
    plain = stats.shift(source, target)
    found = Ratio(metric, median(source), median(target), n_source=len(source),
                  n_target=len(target))
    if plain is None:
        return found
    parts = plain.variance_parts + tuple(stats.Part("run", r.variance, r.df) for r in runs)
    tested = stats.with_parts(plain.n_base, plain.n_now, plain.log_ratio, plain.spread, parts) \
        if runs else plain
    low, high = tested.interval(alpha)
    alone = plain.interval(alpha)
    apart = runs and alone[1] > alone[0]
    widened = math.log(high / low) / math.log(alone[1] / alone[0]) if apart else None
    return Ratio(metric, found.source, found.target, tested.ratio, low, high, len(source),
                 len(target), tested.df, widened, tested.se / plain.se if apart else None,
                 *own_interval(source, runs[0] if runs else None, alpha),
                 *own_interval(target, runs[1] if runs else None, alpha))


def own_interval(found: list[float], run: RunSpread | None,
                 alpha: float) -> tuple[float | None, float | None]:
    """The (1 - alpha) interval of one side's geometric mean: its processes' spread, and its
    run-to-run variance where the sides were measured apart."""
    if len(found) < 2 or min(found) <= 0:
        return None, None
    logs = [math.log(v) for v in found]
    mean = sum(logs) / len(logs)
    var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
    parts = (stats.Part("now", var),) + ((stats.Part("run", run.variance, run.df),)
                                        if run else ())
    return stats.with_parts(len(logs), len(logs), mean, math.sqrt(var), parts).interval(alpha)


def cost(source_price: float | None, target_price: float | None,
         per_item: Ratio | None) -> Cost | None:
    """$ per million items on each side, target / source, and the break-even price."""
    if not (source_price or target_price) or per_item is None:
        return None

    def usd(price, seconds):
        return price / 3600 * 1e6 * seconds if price and seconds else None
    found = dict(source_usd_per_million=usd(source_price, per_item.source),
                 target_usd_per_million=usd(target_price, per_item.target))
    if per_item.tested and source_price:
        # cost_t / cost_s = (P_t / P_s) · r, r = per-item time t/s; equal where P_t = P_s / r.
        found.update(break_even=source_price / per_item.ratio,
                     break_even_low=source_price / per_item.high,
                     break_even_high=source_price / per_item.low)
        if target_price:
            k = target_price / source_price
            found.update(ratio=k * per_item.ratio, low=k * per_item.low, high=k * per_item.high)
    return Cost(source_price, target_price, **found)


def shown(side: SideInput) -> list[str]:
    """The workloads a side measured, a sweep's units as the workload they are points of."""
    found = []
    for name, run in (side.bench.workloads.items() if side.bench else ()):
        spec = run.spec
        found.append(spec.family if spec is not None and spec.point and spec.family else name)
    held = side.bench.workloads if side.bench else {}
    found += [name.partition("[")[0] for name in (side.numerics.workloads if side.numerics
                                                  else ()) if name not in held]
    return list(dict.fromkeys(found))


def unit_of(side: SideInput, workload: str, mode: str) -> str | None:
    """The unit a workload is compared at: its sweep's recommended point, else itself."""
    if (workload, mode) in side.points:
        return side.points[workload, mode]
    held = (side.bench.workloads if side.bench else {}).keys() | (
        side.numerics.workloads.keys() if side.numerics else set())
    return workload if workload in held else None


def _spread(side: SideInput, unit: str, mode: str, metric: str, run_spread: float) -> RunSpread:
    key = (unit, mode, HEADLINE.name if metric == PER_ITEM else metric)
    return side.spreads.get(key) or prior(run_spread)


def compare_mode(workload: str, mode: str, source: SideInput, target: SideInput, *,
                 same_run: bool, alpha: float, busy_share: float,
                 run_spread: float) -> ModeMigration:
    units = unit_of(source, workload, mode), unit_of(target, workload, mode)
    sides = [readiness.side_mode(side, unit, mode, busy_share)
             for side, unit in zip((source, target), units)]
    found = ModeMigration(mode, *sides)
    if not all(s.status == RUNS for s in sides) or source.bench is None or target.bench is None:
        return found
    timings = []
    for metric in COMPARED:
        a, b = (values(side.bench, unit, mode, metric, busy_share)
                for side, unit in zip((source, target), units))
        if not (a and b):
            continue
        runs = [] if same_run or not timed(metric) else [
            _spread(side, unit, mode, metric, run_spread)
            for side, unit in zip((source, target), units)]
        timings.append(ratio(metric, a, b, runs, alpha))
    per_item = next((r for r in timings if r.metric == PER_ITEM), None)
    errors = sides[0].rel_l2, sides[1].rel_l2
    return ModeMigration(
        mode, *sides, tuple(timings), cost(source.price_per_hour, target.price_per_hour,
                                           per_item),
        tuple(portability.new_reasons(sides[1].reasons, sides[0].reasons)),
        errors[1] / errors[0] if errors[0] and errors[1] is not None else None)


def compare_workload(workload: str, modes: tuple[str, ...], source: SideInput,
                     target: SideInput, **how) -> WorkloadMigration:
    found = tuple(compare_mode(workload, mode, source, target, **how) for mode in modes)
    verdict, reason = readiness.verdict(found)
    # op coverage is the eager step's, one per unit: the first mode's unit on each side
    units = [unit_of(side, workload, modes[0]) if modes else None for side in (source, target)]
    ops = [readiness.side_ops(side, unit) for side, unit in zip((source, target), units)]
    retuned = readiness.retuned(workload, modes, source.points, target.points)
    return WorkloadMigration(
        workload, verdict, reason, found, *ops,
        tuple(readiness.new_ops(source.numerics, target.numerics, *units)),
        retuned, readiness.checklist(found, ops[1], target, retuned))


def hardware(side: SideInput) -> str | None:
    """What the side's processes ran on (their own hardware keys: a cell's threads may be
    its own), else its environment's."""
    keys = {k for w in (side.bench.workloads if side.bench else {})
            for k in environment.hardware_of(side.bench, w)}
    env = side.env.env if side.env is not None else {}
    cpus = sorted({k.cpu_model for k in keys if k.cpu_model}) or [
        (env.get("hardware") or {}).get("cpu_model")]
    gpus = sorted({g for k in keys for g in k.gpu_names}) if keys else \
        (env.get("hardware") or {}).get("gpu_names") or []
    threads = sorted({k.torch_threads for k in keys if k.torch_threads}) or [
        (env.get("torch") or {}).get("num_threads")]
    parts = [*filter(None, cpus), ", ".join(gpus) or None,
             "threads " + "/".join(map(str, threads)) if any(threads) else None]
    return ", ".join(p for p in parts if p) or None


# What runs a precision's matmuls on a CPU, fastest first: (cpu feature, the unit's name, the
# architecture that has it). oneDNN and ATen choose kernels by these, so two CPUs, or one CPU
# at two precisions, can differ in speed by what their units are before anything in torch.
MATRIX_UNITS = {
    "bfloat16": (("amx_bf16", "AMX-BF16 tiles", "x86"), ("avx512_bf16", "AVX-512 BF16", "x86"),
                 ("bf16", "Arm BF16 (BFMMLA)", "arm")),
    "float16": (("amx_fp16", "AMX-FP16 tiles", "x86"), ("avx512_fp16", "AVX-512 FP16", "x86"),
                ("asimdhp", "Arm half-precision SIMD", "arm")),
    "float32": (("avx512f", "AVX-512", "x86"), ("avx2", "AVX2", "x86"), ("sve", "SVE", "arm"),
                ("asimd", "Arm NEON", "arm")),
}


def _arch(env: dict) -> str | None:
    machine_ = ((env.get("hardware") or {}).get("machine") or "").lower()
    return "x86" if machine_ in ("x86_64", "amd64", "i686") else \
        "arm" if machine_.startswith(("aarch64", "arm")) else None


def cpu_units(side: SideInput) -> str | None:
    """"bfloat16 on AVX-512 BF16 (no AMX-BF16 tiles)": what runs the side's matmuls on its CPU,
    from the features its environment recorded; None for an accelerator's cell or a precision
    without a table."""
    device = (side.bench.device or {}) if side.bench else {}
    dtype = ((side.bench.precision or {}) if side.bench else {}).get("dtype")
    if device.get("type") != "cpu" or dtype not in MATRIX_UNITS:
        return None
    env = side.env.env if side.env is not None else {}
    features = (env.get("hardware") or {}).get("cpu_features")
    if features is None:
        return f"{dtype} on a CPU whose features its environment does not record"
    arch = _arch(env)
    units = [(flag, name) for flag, name, on in MATRIX_UNITS[dtype] if arch in (None, on)]
    have = [name for flag, name in units if flag in features]
    if not have:
        return (f"{dtype} with no unit for it: its matmuls convert to float32 (often slower "
                "than float32 itself)" if dtype != "float32" else f"{dtype} on no vector unit "
                "torchgate knows")
    fastest = units[0]
    return f"{dtype} on {have[0]}" + (f" (no {fastest[1]})" if fastest[1] != have[0] else "")


def units_note(source: SideInput, target: SideInput) -> str | None:
    """The CPU units each side's matmuls run on, and whether they differ: the hardware feature
    that explains a result before the code does (AMX against AVX-512, say)."""
    said = [cpu_units(s) for s in (source, target)]
    if not any(said):
        return None
    if said[0] == said[1]:
        return f"The matmuls run {said[0]} on both sides' CPUs."
    parts = [f"the {role} {what}" for role, what in zip(("source", "target"), said) if what]
    return ("What runs the matmuls: " + "; ".join(parts) + ". A speed difference between "
            "them is the CPU units' before it is the code's.") if all(said) else \
        "What runs the matmuls: " + "; ".join(parts) + "."


def side_info(side: SideInput, spread: str | None) -> SideInfo:
    env = side.env.env if side.env is not None else {}
    return SideInfo(side.label, side.machine, side.cell, side.where,
                    side.bench.status if side.bench else None,
                    side.bench.reason if side.bench else None, side.price_per_hour,
                    (env.get("torch") or {}).get("version"), hardware(side), spread)


def _source_of(side: SideInput, run_spread: float) -> str:
    found = sorted({s.source for s in side.spreads.values() if s.source != "prior"})
    prior_ = f"the prior stats.run_spread = {run_spread:.1%}"
    return (f"{'; '.join(found)} ({prior_} for units without)" if found else
            f"{prior_} (no history of its hardware and torch)")


def migrate(name: str, source: SideInput, target: SideInput, *, same_run: bool,
            modes: tuple[str, ...], alpha: float, busy_share: float,
            run_spread: float) -> MigrationRecord:
    """The whole report of one pair; `modes`: the pair's (() : every mode either side has)."""
    recorded = [m for side in (source, target) for m in (side.bench.modes if side.bench else ())]
    chosen = modes or tuple(dict.fromkeys(recorded))
    how = dict(same_run=same_run, alpha=alpha, busy_share=busy_share, run_spread=run_spread)
    workloads = tuple(compare_workload(w, chosen, source, target, **how)
                      for w in sorted(set(shown(source)) | set(shown(target))))
    spreads = [None, None] if same_run else [_source_of(s, run_spread) for s in (source, target)]
    said = [*notes(workloads, same_run, alpha), units_note(source, target)]
    return MigrationRecord(name, side_info(source, spreads[0]), side_info(target, spreads[1]),
                           same_run, alpha, workloads, tuple(n for n in said if n))


def widening(workloads: tuple[WorkloadMigration, ...], field: str = "widened") -> float | None:
    """The median factor by which the run-to-run variance changed the per-item intervals'
    width (or, `se_widened`, their standard errors)."""
    return median([getattr(r, field) for w in workloads for m in w.modes
                   for r in m.timings if r.metric == PER_ITEM and getattr(r, field)])


def notes(workloads: tuple[WorkloadMigration, ...], same_run: bool, alpha: float) -> list[str]:
    """What the intervals are: per number, and how the two sides were measured."""
    found = [f"Each interval is a {(1 - alpha) * 100:.0f} % interval of its own number (Welch's t-test "
             "on the log process values), not a simultaneous one over the page."]
    if same_run:
        found.append("Both sides were measured in this run: their processes are compared "
                     "as they are, with no run-to-run variance added.")
        return found
    wider, se = widening(workloads), widening(workloads, "se_widened")
    found.append("The sides were measured apart: each ratio's standard error adds both "
                 "sides' run-to-run variance, each from its own machine's committed history"
                 + (f"; over the processes' spread alone it made the steady-state standard "
                    f"errors ×{se:.2f} and the intervals ×{wider:.2f} as wide (median)"
                    + (" (with few processes, a nearly known variance also adds degrees of "
                       "freedom, lowering the t quantile)" if wider < 1 else "") + "."
                    if wider and se else "."))
    return found
