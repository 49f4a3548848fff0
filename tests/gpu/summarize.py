"""The GPU run in numbers, as markdown (tests/gpu/run_on_gpu.sh writes it to gpu-summary.md).

    python tests/gpu/summarize.py PROJECT      # the folder the stages ran in

- the 8192^3 matmul's achieved TFLOP/s per cell and mode, against the fastest sample measured
  and the datasheet's peak;
- the minimum detectable effect of the compute-bound unit (that matmul) when two runs like
  this one are compared at bench.processes processes a side;
- the gap between the cold and the hot series of the 16 MiB elementwise op;
- where loader_train's step goes (input wait, pinned copy and its GB/s, compute) and every
  unit's SM and memory utilization and energy per item;
- how every series stopped, what was throttled, what was impossible, what would not capture.
"""
from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

from torchgate.core import config, records
from torchgate.core.metrics import BY_NAME
from torchgate.core.numbers import median
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import BenchRecord
from torchgate.core.vocabulary import Status
from torchgate.judge import stats
from torchgate.judge.steps import breakdown
from torchgate.render.markdown import markdown_table, mde, seconds

MATMUL, ELEMENTWISE = "matmul_relu_xl", "elementwise"
SERIES = {"steady_s": "hot", "cold_s": "cold", "graph_s": "graph"}


def modes_of(record: BenchRecord, workload: str, mode: str) -> list:
    return record.unit(workload, mode).modes()


def _median(record, workload, mode, metric) -> float | None:
    values = record.unit(workload, mode).values(BY_NAME[metric])
    return median(values)


def matmul_rates(bench: dict[str, BenchRecord]) -> str:
    rows = []
    for cell, record in bench.items():
        for mode in record.modes:
            found = modes_of(record, MATMUL, mode)
            if not found or not found[0].flops:
                continue
            flops, gpu = found[0].flops, found[0].gpu
            rate = {metric: flops / t / 1e12 for metric in SERIES
                    if (t := _median(record, MATMUL, mode, metric))}
            best = flops / min(min(m.steady_s) for m in found) / 1e12
            peak = gpu.peak_tflops if gpu else None
            hot = rate.get("steady_s")
            rows.append([cell, mode, f"{hot:,.1f}" if hot else "", f"{best:,.1f}",
                         f"{hot / best:.0%}" if hot else "",
                         f"{peak:,.0f}" if peak else "unknown",
                         f"{hot / peak:.0%}" if hot and peak else "",
                         f"{rate['cold_s']:,.1f}" if "cold_s" in rate else "",
                         f"{rate['graph_s']:,.1f}" if "graph_s" in rate else ""])
    return markdown_table(rows, ["cell", "mode", "hot TFLOP/s (median)", "fastest sample",
                                 "of fastest", "spec peak", "of spec", "cold TFLOP/s",
                                 "graph TFLOP/s"])


def detectable(cfg, bench: dict[str, BenchRecord], tests: int) -> str:
    """The slowdown a comparison of two such runs would detect with the configured power, at
    bench.processes processes a side and this run's process-to-process spread: its t-test
    alone (the δ of a verdict aside), and Benjamini-Hochberg over the run's timing tests."""
    k, rows = cfg.bench.processes, []
    for cell, record in bench.items():
        for mode in record.modes:
            for metric, series in SERIES.items():
                values = record.unit(MATMUL, mode).values(BY_NAME[metric])
                if len(values) < 2:
                    continue
                spread = statistics.stdev(math.log(v) for v in values)
                shift = stats.with_parts(k, k, 0.0, spread, (stats.Part("base", spread ** 2),
                                                             stats.Part("now", spread ** 2)))
                one, run = (stats.minimum_detectable_effect(
                    shift, alpha=cfg.stats.alpha, power=cfg.stats.power, delta=0.0, tests=n)
                    for n in (1, tests))
                rows.append([cell, mode, series, str(len(values)), f"{spread:.2%}", mde(one),
                             mde(run)])
    return markdown_table(rows, ["cell", "mode", "series", "processes", "spread (log SD)",
                                 "MDE, one test", f"MDE, BH over {tests} tests"])


def cold_hot(bench: dict[str, BenchRecord]) -> str:
    rows = []
    for cell, record in bench.items():
        for mode in record.modes:
            hot, cold = (_median(record, ELEMENTWISE, mode, m) for m in ("steady_s", "cold_s"))
            found = modes_of(record, ELEMENTWISE, mode)
            if not (hot and cold and found):
                continue
            nbytes, gpu = found[0].bytes_moved, found[0].gpu
            peak = gpu.peak_gbps if gpu else None
            rows.append([cell, mode, seconds(hot), seconds(cold), f"{cold / hot:.2f}x",
                         f"{nbytes / hot / 1e9:,.0f}" if nbytes else "",
                         f"{nbytes / cold / 1e9:,.0f}" if nbytes else "",
                         f"{peak:,.0f}" if peak else "unknown"])
    return markdown_table(rows, ["cell", "mode", "hot per call", "cold per call", "cold / hot",
                                 "hot GB/s", "cold GB/s", "HBM peak GB/s"])


def steps_and_energy(bench: dict[str, BenchRecord]) -> str:
    rows = []
    for cell, record in bench.items():
        for workload in sorted(record.workloads):
            for mode in record.modes:
                found = modes_of(record, workload, mode)
                if not found:
                    continue
                b = breakdown(found)
                reasons = sorted({f"{k}: {v}" for m in found for k, v in m.unmeasured.items()})
                rows.append([cell, workload, mode,
                             f"{b.input_wait_share:.0%}" if b else "",
                             seconds(b.copy_s) if b and b.copy_s else "",
                             f"{b.copy_gbps:.3g}" if b and b.copy_gbps else "",
                             f"{b.compute_share:.0%}" if b else "", b.bound if b else "",
                             *(_share(median(getattr(m, k) for m in found
                                             if getattr(m, k) is not None))
                               for k in ("sm_util", "mem_util")),
                             _mj(median(m.joules_per_item for m in found
                                        if m.joules_per_item is not None)),
                             "; ".join(reasons)])
    return markdown_table(rows, ["cell", "workload", "mode", "input wait", "copy", "copy GB/s",
                                 "compute", "diagnosis", "SM", "memory", "energy per item",
                                 "not measured"])


def _share(v: float | None) -> str:
    return "" if v is None else f"{v:.0%}"


def _mj(v: float | None) -> str:
    return "" if v is None else f"{v * 1e3:.4g} mJ"


def health(bench: dict[str, BenchRecord]) -> list[str]:
    lines = []
    for cell, record in bench.items():
        if record.status != Status.OK:
            lines.append(f"- {cell}: {record.status}: {record.reason}")
            continue
        stops: dict[str, int] = {}
        redone = flagged = 0
        problems = set()
        clock = None
        for workload in record.workloads:
            for mode in record.modes:
                for m in modes_of(record, workload, mode):
                    if m.gpu is None:
                        continue
                    clock = clock or m.gpu.reference_sm_clock_mhz
                    for name, s in m.gpu.series.items():
                        stops[f"{name} {s.stop}"] = stops.get(f"{name} {s.stop}", 0) + 1
                        redone += s.redone
                        flagged += len(s.throttled)
                    problems |= {f"{workload} {mode}: IMPOSSIBLE {x}" for x in m.gpu.impossible}
                    if m.gpu.graph_error:
                        problems.add(f"{workload} {mode}: graph not captured: {m.gpu.graph_error}")
        lines.append(f"- {cell}: series stopped " + ", ".join(
            f"{k} x{n}" for k, n in sorted(stops.items())) + f"; throttled samples redone "
            f"{redone}, kept and flagged {flagged}; reference SM clock "
            + (f"{clock:.0f} MHz" if clock else "not read (no NVML)"))
        lines += [f"  - {p}" for p in sorted(problems)]
    return lines


def main(project: Path) -> None:
    cfg = config.load(project / "params.yaml")
    bench = {}
    for cell in cfg.cells():
        path = project / cfg.reports / "bench" / f"{cell.name}.json"
        if path.exists():
            bench[cell.name] = records.load_record(path, BenchRecord)
    compare = project / cfg.reports / "compare.json"
    rows = records.load_record(compare, CompareRecord).rows if compare.exists() else []
    tests = max(1, sum(r.stage == "bench" and r.metric.endswith("_s") for r in rows))
    print("\n".join([
        "# torchgate on a GPU", "",
        f"Cells: {', '.join(bench) or 'none measured'}; {cfg.bench.processes} processes per "
        "workload; modes " + ", ".join(cfg.modes) + ".", "",
        "## The 8192³ matmul: achieved TFLOP/s", "", matmul_rates(bench), "",
        "## Minimum detectable effect of the compute-bound unit at "
        f"{cfg.bench.processes} processes a side", "", detectable(cfg, bench, tests), "",
        "## Cold vs hot: the 16 MiB elementwise op", "", cold_hot(bench), "",
        "## Where the step goes; utilization and energy", "", steps_and_energy(bench), "",
        "## How the series ran", "", *health(bench), "",
        f"The stage reports are in {cfg.reports}/ (summary.md first).", ""]))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
