"""A run's numbers as flat files (numbers only, rounded so that files diff cleanly). Pure.

- metrics.json, DVC's metric: what the run decided (the gate, the verdict counts, each
  unit's tested change with its interval, its counted work's change), a few numbers a unit,
  what `dvc metrics diff` and `dvc exp show` show readably;
- numbers.json: the medians per unit that every page shows, for scripts and `git diff`."""
from __future__ import annotations

from torchgate.core.metrics import BY_NAME, HEADLINE, METRICS
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import NumericsRecord
from torchgate.core.vocabulary import VERDICTS, Verdict
from torchgate.judge.results import CellSummary
from torchgate.render.markdown import counts, short_number

# The metrics a unit's summary holds that numbers.json carries: name -> (key, scale).
EXPORTED = {m.name: m.exported for m in METRICS if m.exported}


def bench_metrics(summary: CellSummary) -> dict:
    """Medians over processes (judge.summary): what `dvc metrics diff` shows between
    revisions."""
    out: dict = {}
    for key in summary.keys():
        n = summary.units[key]
        if not n.measured:
            continue
        m = {**{flat: n.value(name) * scale for name, (flat, scale) in EXPORTED.items()
                if n.value(name) is not None},
             "items_per_s": n.items_per_s, "usd_per_million_items": n.usd_per_million,
             **({"input_wait_share": n.breakdown.input_wait_share,
                 "compute_ms": n.breakdown.compute_s * 1e3} if n.breakdown else {}),
             **({"cpu_busy": n.usage.cpu_busy, "joules_per_item": n.usage.joules_per_item}
                if n.usage else {})}
        r = n.ranks                 # a distributed unit
        if r is not None:
            m.update(allreduce_ms=r.comm_s and r.comm_s * 1e3,
                     busbw_gbps=r.busbw and r.busbw / 1e9,
                     straggler_lag_pct=r.lag and r.lag * 100)
        # Counts stay exact: a count's change is its verdict.
        out.setdefault(key.workload, {})[key.mode] = {
            k: v if isinstance(v, int) else short_number(v) for k, v in m.items()
            if v is not None}
    return out


def numerics_metrics(record: NumericsRecord) -> dict:
    """The largest error against float64 per workload and mode (finite errors only)."""
    out: dict = {}
    for workload, modes in sorted(record.workloads.items()):
        for mode, ev in sorted(modes.items()):
            errors = [v for v in ev.rel_l2.values() if v is not None and v == v
                      and abs(v) != float("inf")]
            if errors:
                out.setdefault(workload, {})[mode] = {"max_rel_l2": short_number(max(errors))}
    return out


def verdict_counts(compare: CompareRecord) -> dict[str, int]:
    """Every verdict's count, zeros too: `dvc metrics diff` then shows `regressed 0 → 6`."""
    found = counts(r.verdict for r in compare.findings())
    return {v.lower().replace(" ", "_"): found.get(v, 0) for v in VERDICTS}


def numbers(bench: dict[str, CellSummary], numerics: dict[str, NumericsRecord],
            compare: CompareRecord, hardware: dict | None = None) -> dict:
    """bench: cell -> its judge.summary; numerics: cell -> record; hardware: this run's
    environment's hardware key (judge.environment), which says which series a trend belongs
    to. The machine-speed sentinel's median, per cell: a trend of the machine, not of the
    code, to read the timings' trends against."""
    out = {"bench": {cell: bench_metrics(s) for cell, s in bench.items()},
           "numerics": {cell: numerics_metrics(r) for cell, r in numerics.items()},
           "verdicts": verdict_counts(compare)}
    for cell, s in bench.items():
        if s.sentinel_loop_s is not None:
            out["bench"][cell]["sentinel_loop_ms"] = short_number(s.sentinel_loop_s * 1e3)
    if hardware:
        out["hardware"] = {k: ", ".join(map(str, v)) if isinstance(v, list) else v
                           for k, v in hardware.items()}
    return out


# The verdicts that decide a change: an INCONCLUSIVE or NOT COMPARABLE row's estimate is no
# decision (against another baseline, or within the noise), and is left out.
DECIDED = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.EQUIVALENT)


def change_key(metric: str) -> str:
    """steady_s -> steady_change_pct; peak_bytes -> peak_bytes_change_pct."""
    return f"{metric.removesuffix('_s')}_change_pct"


def decisions(compare: CompareRecord, gate_failures: list[str]) -> dict:
    """metrics.json: whether the gate fails, every verdict's count, and per cell, workload and
    mode each decided change in percent (REGRESSED, IMPROVED or EQUIVALENT), the unit's own
    against its baseline: a tested metric's estimate (`<metric>_change_pct`; the steady
    state's with its interval, `steady_low_pct`, `steady_high_pct`), a count's ratio (host
    instructions, aten ops, FLOPs, kernels). An undecided change has no key: two revisions'
    files then never diff an estimate the run did not decide."""
    changes: dict = {}
    for r in compare.rows:
        if r.stage != "bench" or r.mode is None or r.verdict not in DECIDED \
                or r.metric not in BY_NAME:
            continue
        unit = {}
        if r.change is not None:
            unit = {change_key(r.metric): r.change.ratio}
            if r.metric == HEADLINE.name:
                unit.update(steady_low_pct=r.change.ci_low, steady_high_pct=r.change.ci_high)
        elif isinstance(r.base, (int, float)) and r.base > 0 and isinstance(r.now, (int, float)):
            unit = {change_key(r.metric): r.now / r.base}
        if unit:
            changes.setdefault(r.cell, {}).setdefault(r.workload, {}).setdefault(
                r.mode, {}).update({k: short_number((v - 1) * 100) for k, v in unit.items()})
    return {"gate_failed": int(bool(gate_failures)), "verdicts": verdict_counts(compare),
            "changes": changes}
