"""The GPU section of reports/bench/<cell>.md: per workload, mode and series (hot, cold,
graph), the time per call, how the series stopped, throttling, what NVML read, and the
achieved rates against the device's peak. Pure."""
from __future__ import annotations

from stages.core.records.gpu import GpuMode
from stages.core.records.schema import BenchRecord, ModeTiming
from stages.core.vocabulary import Status
from stages.judge import stats
from stages.render.markdown import markdown_table, seconds

METRIC = {"hot": "steady_s", "cold": "cold_s", "graph": "graph_s"}


def _modes(record: BenchRecord, workload: str, mode: str) -> list[ModeTiming]:
    run = record.workloads.get(workload)
    return [m for p in (run.processes if run else ()) if p.status == Status.OK
            for m in [p.modes.get(mode)] if m is not None and m.status == Status.OK and m.gpu]


def _median(values) -> float | None:
    known = [v for v in values if v is not None]
    return stats.median(known) if known else None


def _rate(value: float | None, peak: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.1f}" + (f" ({value / peak:.0%})" if peak else "")


def _stops(series) -> str:
    found: dict[str, int] = {}
    for s in series:
        found[s.stop] = found.get(s.stop, 0) + 1
    return ", ".join(f"{stop} {n}" for stop, n in sorted(found.items()))


def _row(workload: str, mode: str, name: str, modes: list[ModeTiming], hot: float | None):
    series = [m.gpu.series[name] for m in modes if name in m.gpu.series]
    per_call = _median(stats.median(getattr(m, METRIC[name])) for m in modes
                       if getattr(m, METRIC[name]))
    gpu: GpuMode = modes[0].gpu
    clocks = [c for s in series for c in s.sm_clock_mhz if c is not None]
    notes = sorted({s.impossible for s in series if s.impossible})
    return [workload, mode, name, seconds(per_call),
            f"{per_call / hot:.2f}x" if per_call and hot and name != "hot" else "",
            _stops(series), f"{_median(s.rel_sd for s in series) or 0:.2%}",
            f"{sum(s.redone for s in series)}/{sum(len(s.throttled) for s in series)}",
            f"{_median(clocks):.0f}" if clocks else "",
            _number(max((s.temperature_c for s in series if s.temperature_c is not None),
                        default=None), "°C"),
            _number(max((s.power_w for s in series if s.power_w is not None), default=None),
                    "W"),
            _rate(_median(s.tflops for s in series), gpu.peak_tflops),
            _rate(_median(s.gbps for s in series), gpu.peak_gbps),
            "IMPOSSIBLE: " + "; ".join(notes) if notes else ""]


def _number(value: float | None, unit: str) -> str:
    return "" if value is None else f"{value:.0f} {unit}"


def section(record: BenchRecord) -> str:
    """"" when no mode was timed with device.<name>.timing."""
    rows, facts, errors = [], set(), set()
    for workload in sorted(record.workloads):
        for mode in record.modes:
            modes = _modes(record, workload, mode)
            if not modes:
                continue
            hot = _median(stats.median(m.steady_s) for m in modes if m.steady_s)
            for name in METRIC:
                if any(name in m.gpu.series for m in modes):
                    rows.append(_row(workload, mode, name, modes, hot))
            g = modes[0].gpu
            facts.add((g.math, g.peak_tflops, g.peak_gbps, g.peak_source,
                       g.reference_sm_clock_mhz, g.flush_bytes))
            errors |= {f"{workload} {mode}: {m.gpu.graph_error}" for m in modes
                       if m.gpu.graph_error}
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
