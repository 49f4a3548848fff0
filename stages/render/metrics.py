"""reports/metrics.json: small and flat, for `dvc metrics diff` (numbers only, rounded so that
files diff cleanly). Pure."""
from __future__ import annotations

from stages.core.rows import CompareRecord
from stages.core.schema import BenchRecord, NumericsRecord
from stages.judge import stats
from stages.judge.timings import process_values
from stages.render.markdown import counts, short_number


def bench_metrics(record: BenchRecord, price_per_hour: float) -> dict:
    """Medians over processes: what `dvc metrics diff` shows between revisions."""
    out: dict = {}
    for workload in sorted(record.workloads):
        for mode in record.modes:
            steady = process_values(record, workload, mode, "steady_s")
            if not steady:
                continue
            per_call = stats.median(steady)

            def middle(metric: str) -> float:
                return stats.median(process_values(record, workload, mode, metric))
            items = process_values(record, workload, mode, "items")[0]
            m = {"steady_ms": per_call * 1e3, "first_call_s": middle("first_call_s"),
                 "warmup_s": middle("warmup_s"), "items_per_s": items / per_call,
                 "peak_mib": middle("peak_bytes") / 2 ** 20}
            for metric, name in (("cold_s", "cold_ms"), ("graph_s", "graph_ms")):
                if process_values(record, workload, mode, metric):   # CUDA series
                    m[name] = middle(metric) * 1e3
            if price_per_hour:
                m["usd_per_million_items"] = price_per_hour / 3600 * 1e6 / m["items_per_s"]
            breaks = process_values(record, workload, mode, "graph_breaks")
            if breaks:
                m["graph_breaks"] = max(breaks)
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


def metrics(bench: dict[str, tuple[BenchRecord, float]], numerics: dict[str, NumericsRecord],
            compare: CompareRecord) -> dict:
    """bench: cell -> (record, price per device-hour); numerics: cell -> record."""
    return {"bench": {cell: bench_metrics(r, price) for cell, (r, price) in bench.items()},
            "numerics": {cell: numerics_metrics(r) for cell, r in numerics.items()},
            "verdicts": {v.lower().replace(" ", "_"): n
                         for v, n in counts(r.verdict for r in compare.rows).items()}}
