"""reports/metrics.json: small and flat, for `dvc metrics diff` (numbers only, rounded so that
files diff cleanly). Pure."""
from __future__ import annotations

from stages.core.records.rows import CompareRecord
from stages.core.records.schema import BenchRecord, NumericsRecord
from stages.judge import stats
from stages.judge.environment import hardware_key
from stages.judge.timings import process_values
from stages.judge.verdicts import findings
from stages.render.markdown import counts, short_number
from stages.render.numbers import unit_numbers


def bench_metrics(record: BenchRecord, price_per_hour: float) -> dict:
    """Medians over processes: what `dvc metrics diff` shows between revisions."""
    out: dict = {}
    for workload in sorted(record.workloads):
        for mode in record.modes:
            n = unit_numbers(record, workload, mode, price_per_hour)
            if n is None:
                continue
            m = {"steady_ms": n["steady_s"] * 1e3, "first_call_s": n["first_call_s"],
                 "first_call_warm_s": n["first_call_warm_s"],
                 "warmup_s": n["warmup_s"], "items_per_s": n["items_per_s"],
                 "peak_mib": n["peak_bytes"] / 2 ** 20 if n["peak_bytes"] is not None
                 else None, "usd_per_million_items": n["usd_per_million"],
                 **{f"{k[:-2]}_ms": n[k] * 1e3 for k in ("latency_p50_s", "latency_p99_s")
                    if n[k] is not None}}
            m = {k: v for k, v in m.items() if v is not None}
            for metric, name in (("cold_s", "cold_ms"), ("graph_s", "graph_ms")):
                found = process_values(record, workload, mode, metric)   # CUDA series
                if found:
                    m[name] = stats.median(found) * 1e3
            for counted in ("graph_breaks", "recompiles"):
                found = process_values(record, workload, mode, counted)
                if found:
                    m[counted] = max(found)
            out.setdefault(workload, {})[mode] = {k: short_number(v) for k, v in m.items()}
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


def sentinel_ms(record: BenchRecord) -> float | None:
    """The machine-speed sentinel's median over the run's processes: a trend of the machine,
    not of the code, to read the timings' trends against."""
    loops = [p.sentinel.python_loop_s for run in record.workloads.values()
             for p in run.processes if p.sentinel is not None]
    return short_number(stats.median(loops) * 1e3) if loops else None


def verdict_counts(compare: CompareRecord) -> dict[str, int]:
    return {v.lower().replace(" ", "_"): n
            for v, n in counts(r.verdict for r in findings(compare.rows)).items()}


def metrics(bench: dict[str, tuple[BenchRecord, float]], numerics: dict[str, NumericsRecord],
            compare: CompareRecord, env: dict | None = None) -> dict:
    """bench: cell -> (record, price per device-hour); numerics: cell -> record; env: this
    run's environment, whose hardware key says which series a trend belongs to."""
    out = {"bench": {cell: bench_metrics(r, price) for cell, (r, price) in bench.items()},
           "numerics": {cell: numerics_metrics(r) for cell, r in numerics.items()},
           "verdicts": verdict_counts(compare)}
    for cell, (record, _) in bench.items():
        found = sentinel_ms(record)
        if found is not None:
            out["bench"][cell]["sentinel_loop_ms"] = found
    if env:
        out["hardware"] = {k: ", ".join(map(str, v)) if isinstance(v, list) else v
                           for k, v in hardware_key(env).items()}
    return out


def verdicts(compare: CompareRecord, gate_failures: list[str]) -> dict:
    """reports/verdicts.json, for `dvc metrics diff --targets reports/verdicts.json`: what the
    gate decides, the verdict counts and each tested steady state's change in percent."""
    changes: dict = {}
    for r in compare.rows:
        if r.stage == "bench" and r.metric == "steady_s" and r.change is not None:
            changes.setdefault(r.cell, {}).setdefault(r.workload, {})[r.mode] = short_number(
                (r.change.ratio - 1) * 100)
    return {"gate_failed": int(bool(gate_failures)), "verdicts": verdict_counts(compare),
            "steady_change_pct": changes}
