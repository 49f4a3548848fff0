"""The GPU section of reports/bench/<cell>.md: per workload, mode and series (hot, cold,
graph), the time per call, how the series stopped, throttling, what NVML read, and the
achieved rates against the device's peak. Pure."""
from __future__ import annotations

from stages.judge.summary import CellSummary, GpuSeriesSummary
from stages.render.markdown import markdown_table, seconds


def _rate(value: float | None, peak: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.1f}" + (f" ({value / peak:.0%})" if peak else "")


def _row(workload: str, mode: str, s: GpuSeriesSummary, hot: float | None,
         peak_tflops: float | None, peak_gbps: float | None) -> list[str]:
    per_call = s.per_call_s
    return [workload, mode, s.name, seconds(per_call),
            f"{per_call / hot:.2f}x" if per_call and hot and s.name != "hot" else "",
            ", ".join(f"{stop} {n}" for stop, n in s.stops), f"{s.rel_sd or 0:.2%}",
            f"{s.redone}/{s.throttled}",
            f"{s.sm_clock_mhz:.0f}" if s.sm_clock_mhz is not None else "",
            _number(s.temperature_c, "°C"), _number(s.power_w, "W"),
            _rate(s.tflops, peak_tflops), _rate(s.gbps, peak_gbps),
            "IMPOSSIBLE: " + "; ".join(s.impossible) if s.impossible else ""]


def _number(value: float | None, unit: str) -> str:
    return "" if value is None else f"{value:.0f} {unit}"


def section(summary: CellSummary) -> str:
    """"" when no mode was timed with device.<name>.timing."""
    rows, facts, errors = [], set(), set()
    for key in summary.keys():
        g = summary.units[key].gpu
        if g is None:
            continue
        rows += [_row(key.workload, key.mode, s, g.hot_s, g.peak_tflops, g.peak_gbps)
                 for s in g.series]
        facts.add((g.math, g.peak_tflops, g.peak_gbps, g.peak_source,
                   g.reference_sm_clock_mhz, g.flush_bytes))
        errors |= set(g.graph_errors)
    if not rows:
        return ""
    lines = ["## GPU timing", "",
             "Per call, the median over processes. hot: back-to-back calls; cold: the L2 cache "
             "flushed before each call, outside the timed window; graph: CUDA-graph replays. "
             "stop: how each process's series ended (quiet: its relative SD fell under "
             "`timing.max_rel_sd`; timeout and max_samples: it did not). throttled: samples "
             "redone / kept and flagged. Rates at the series' median, with the share of the "
             "peak; an IMPOSSIBLE rate is a measurement error, and its timings are NOT "
             "COMPARABLE.", "",
             markdown_table(rows, ["workload", "mode", "series", "per call", "vs hot", "stop",
                                   "rel. SD", "throttled", "SM MHz", "max temp", "max power",
                                   "TFLOP/s", "GB/s", "note"]), ""]
    for kind, tflops, gbps, source, clock, flush in sorted(facts, key=str):
        lines.append(
            f"- {kind}: peak " + (f"{tflops:,.0f} TFLOP/s" if tflops else "unknown") +
            (f", {gbps:,.0f} GB/s" if gbps else "") + (f" ({source})" if source else
                                                      " (set device.<name>.timing.peak_tflops)")
            + (f"; throttling judged against {clock:.0f} MHz" if clock else
               "; NVML not read (install nvidia-ml-py): throttling not checked")
            + (f"; L2 flushed with {flush / 2 ** 20:.0f} MiB" if flush else ""))
    lines += [f"- CUDA graph not captured, {e}" for e in sorted(errors)]
    return "\n".join(lines)
