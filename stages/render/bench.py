"""reports/bench/<cell>.md: what one cell measured, and how it differs from the baseline.

No verdicts here: a timing's verdict depends on every test of the run (Benjamini-Hochberg), so
it is decided once, in compare.md, which the gate uses. Adaptive sampling's interim looks are
shown as what they are. Pure.
"""
from __future__ import annotations

from stages.core.config.settings import LATENCY, TIMED
from stages.core.records.rows import Row
from stages.core.records.schema import BenchRecord
from stages.core.vocabulary import Status
from stages.judge import stats
from stages.judge.environment import diff as env_diff
from stages.judge.timings import GPU_TIMED, failures, process_values
from stages.judge.verdicts import Comparison
from stages.render.environment import cell
from stages.render.gpu import section as gpu_section
from stages.render.markdown import markdown_table, pvalue, seconds, value
from stages.render.verdicts import change, ordered


def spread(values: list[float]) -> str:
    """Process-to-process spread: the range of process medians around their median."""
    if len(values) < 2:
        return ""
    mid = stats.median(values)
    return f"±{(max(values) - min(values)) / 2 / mid:.1%}" if mid else ""


def measured(record: BenchRecord) -> str:
    rows = []
    for workload in sorted(record.workloads):
        for mode in record.modes:
            steady = process_values(record, workload, mode, "steady_s")
            failed = failures(record, workload, mode)
            if not steady:
                rows.append([workload, mode, "0", failed[0] if failed else "not measured",
                             "", "", "", "", "", "", ""])
                continue
            middle = stats.median(steady)
            items = process_values(record, workload, mode, "items")
            peak = process_values(record, workload, mode, "peak_bytes")
            rows.append([
                workload, mode, str(len(steady)), seconds(middle), spread(steady),
                _middle(record, workload, mode, "first_call_s"),
                _middle(record, workload, mode, "first_call_warm_s"),
                _middle(record, workload, mode, "warmup_s"),
                _middle(record, workload, mode, "warmup_calls", as_time=False),
                f"{items[0] / middle:,.0f}" if items else "",
                value("peak_bytes", stats.median(peak)) if peak else ""])
    return markdown_table(rows, ["workload", "mode", "processes", "steady state (median)",
                                 "spread", "first call (cold caches)", "first call (warm)",
                                 "warm-up", "warm-up calls", "items/s", "peak memory"])


def _middle(record: BenchRecord, workload: str, mode: str, metric: str,
            as_time: bool = True) -> str:
    """The median over processes, or blank where none measured it."""
    found = process_values(record, workload, mode, metric)
    if not found:
        return ""
    middle = stats.median(found)
    return seconds(middle) if as_time else f"{middle:g}"


def _modes(record: BenchRecord, workload: str, mode: str):
    """This unit's results in the processes where it ran."""
    run = record.workloads.get(workload)
    for proc in run.processes if run else ():
        m = proc.modes.get(mode) if proc.status == Status.OK else None
        if m is not None and m.status == Status.OK:
            yield m


def latency(record: BenchRecord) -> str:
    """The units that timed single calls: medians over processes of each percentile."""
    rows = []
    for workload in sorted(record.workloads):
        for mode in record.modes:
            calls = [m.latency_calls for m in _modes(record, workload, mode) if m.latency_calls]
            if not calls:
                continue
            middle = {q: stats.median(process_values(record, workload, mode, q))
                      for q in LATENCY}
            rows.append([workload, mode, str(len(calls)), f"{min(calls)}–{max(calls)}"
                         if min(calls) != max(calls) else str(calls[0]),
                         *(seconds(middle[q]) for q in LATENCY),
                         f"{middle['latency_p99_s'] / middle['latency_p50_s']:.2f}x"
                         if middle["latency_p50_s"] else ""])
    if not rows:
        return ""
    return ("## Tail latency\n\nSingle calls, each between two device synchronizations, after "
            "the steady state; percentiles per process (nearest rank), here their median over "
            "processes. Each percentile is compared with the baseline's like the steady "
            "state, with its own δ.\n\n" + markdown_table(
                rows, ["workload", "mode", "processes", "calls per process", "p50", "p90",
                       "p99", "p99 / p50"]))


def shape_changes(record: BenchRecord) -> str:
    """Per workload, compiled mode and shape after the first: what the change cost."""
    rows = []
    for workload in sorted(record.workloads):
        for mode in record.modes:
            # Processes that compiled cold, where there are: a warm cache holds the recompiles.
            measured = [m for m in _modes(record, workload, mode) if m.shapes]
            runs = [m.shapes for m in measured if m.compile_cache != "warm"] or [
                m.shapes for m in measured]
            for i, shape in enumerate(runs[0] if runs else ()):
                same = [r[i] for r in runs if len(r) > i and r[i].shape == shape.shape]
                first = stats.median([s.first_call_s for s in same])
                again = [s.call_s for s in same if s.call_s is not None]
                call = stats.median(again) if again else None
                reasons = dict.fromkeys(r for s in same for r in s.recompile_reasons)
                rows.append([workload, mode, f"`{shape.shape}`", seconds(first), seconds(call),
                             seconds(max(first - call, 0.0)) if call is not None else "",
                             str(max(s.recompiles for s in same)), "<br>".join(reasons)])
    if not rows:
        return ""
    return ("## Shape changes\n\nCompiled modes of a workload that declares several input "
            "shapes run each after the first, after the steady state: its first call there "
            "(the change, recompile included), one more call at that shape, what the change "
            "cost beyond it, and the recompiles it caused with their reasons (medians and the "
            "largest count over the processes that compiled with empty caches, where any did). "
            "Recompiles are compared with the baseline's exactly: more, or one for a new "
            "reason, is REGRESSED.\n\n" + markdown_table(
                rows, ["workload", "mode", "shape", "first call", "next call", "cost",
                       "recompiles", "reasons"]))


def unmeasured(record: BenchRecord) -> str:
    """What the device's backend could not provide, and how its calls were timed."""
    said: dict[str, None] = {}
    for workload in sorted(record.workloads):
        for mode in record.modes:
            for m in _modes(record, workload, mode):
                if m.clock:
                    said[f"calls timed with {CLOCKS.get(m.clock, m.clock)}"] = None
                for metric, why in sorted(m.unmeasured.items()):
                    said[f"{metric} not measured: {why}"] = None
    if not said:
        return ""
    return "## What this device provides\n\n" + "\n".join(f"- {line}" for line in said)


CLOCKS = {"events": "the device's timing events (torch.Event)",
          "synchronize": "the host clock between device synchronizations (the backend has no "
                         "timing events)"}


def diff(rows: list[Row]) -> str:
    body = [[r.workload, r.mode, r.metric, value(r.metric, r.base), value(r.metric, r.now),
             change(r), pvalue(r.change.p if r.change else None),
             f"{r.change.n_base}/{r.change.n_now}" if r.change else "", r.note]
            for r in ordered(rows) if r.metric in (*TIMED, *GPU_TIMED, "peak_bytes",
                                                   "graph_breaks", "recompiles", "status")]
    return markdown_table(body, ["workload", "mode", "metric", "baseline", "now",
                                 "change [CI]", "p (this test)", "n", "note"])


def looks(record: BenchRecord) -> str:
    if not record.looks:
        return ""
    lines = ["## Adaptive sampling (interim looks of this cell)", "",
             "Each look compared this cell alone with the baseline and gave the units below "
             "more processes; these are interim readings, not verdicts.", ""]
    for i, look in enumerate(record.looks, 1):
        units = "; ".join(f"{p.workload} {p.mode} {p.metric} {p.verdict} "
                          f"{(p.ratio - 1) * 100:+.1f} % [{(p.ci_low - 1) * 100:+.1f}, "
                          f"{(p.ci_high - 1) * 100:+.1f}]" for p in look.pending)
        lines.append(f"- look {i}, at {look.processes} processes per side: {units}")
    lines.append(f"\n{record.adaptive_processes} processes added in all.")
    return "\n".join(lines)


def page(record: BenchRecord, result: Comparison, ab_env: str = "") -> str:
    lines = [f"# bench: {record.cell}", ""]
    lines += [f"> {note}" for note in result.notes] + ([""] if result.notes else [])
    if record.status != Status.OK:
        return "\n".join(lines + [f"**{record.status}**: {record.reason}", ""])
    gpu = gpu_section(record)
    lines += ["## Measured", "", measured(record), "", *([gpu, ""] if gpu else []),
              "## Against the baseline", "",
              "The verdicts (REGRESSED, EQUIVALENT, ...) are decided once over the whole run, in "
              "[compare.md](../compare.md), with p-values adjusted over every tested metric; "
              "the gate uses those.", "", diff(result.rows), ""]
    for extra in (latency(record), shape_changes(record), unmeasured(record), looks(record),
                  ab_env):
        if extra:
            lines += [extra, ""]
    return "\n".join(lines)


def ab_environments(here: dict | None, candidate: dict | None) -> str:
    """In A/B mode: how the candidate's environment differs from this one's."""
    if not candidate:
        return ""
    if "error" in candidate:
        return f"Candidate environment: {candidate['error']}"
    changes = sorted(env_diff(here or {}, candidate),   # what explains timings first
                     key=lambda c: (not c[0].startswith(FIRST), c[0]))
    lines = ["## A/B environments (baseline → candidate)", ""]
    lines += [f"- `{k}`: `{cell(a)}` → `{cell(b)}`" for k, a, b in changes[:30]] or ["- identical"]
    if len(changes) > 30:
        lines.append(f"- and {len(changes) - 30} more")
    return "\n".join(lines)


FIRST = ("torch.", "python.", "packages.", "hardware.", "flags.")
