"""reports/bench/<cell>.md: what one cell measured, and how it differs from the baseline.

No verdicts here: a timing's verdict depends on every test of the run (Holm's step-down), so
it is decided once, in compare.md, which the gate uses. Adaptive sampling's interim looks are
shown as what they are. Its sections of GPU series and distributed units live here too (the
summary page shows the latter). Pure.
"""
from __future__ import annotations

from torchgate.core.metrics import BY_NAME, Family, names
from torchgate.core.numbers import median
from torchgate.core.records.rows import CompareRecord, Row
from torchgate.core.vocabulary import Status
from torchgate.judge.results import CellSummary, GpuSeriesSummary
from torchgate.render.environment import cell
from torchgate.render.markdown import markdown_table, nbytes, pvalue, seconds, value
from torchgate.render.numbers import per_second
from torchgate.render.steps import OWN, breakdown_section, usage_section
from torchgate.render.verdicts import change, ordered

# ---- ranks ------------------------------------------------------------
# Distributed units (`_ranks_`): a line per unit on the summary page, a table on the bench
# page; their numbers are judge.summary's (judge.summary.rank_summary). Pure.

ABOUT = ("Per distributed unit: its ranks and their threads each; the all-reduce time per step "
         "(that of the last rank to arrive: the others wait in theirs) and the bus bandwidth "
         "it gives (nccl-tests': bytes / time × 2(n-1)/n); the slowest rank by its time to "
         "the collective (its forward and backward passes, waits excluded), and how far it "
         "lags the fastest (nvidia-resiliency-ext's relative performance: fastest / its "
         "time). Medians over the processes.")


def rate(bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "not measured"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6)):
        if bytes_per_s >= size:
            return f"{bytes_per_s / size:.3g} {unit}"
    return f"{bytes_per_s / 1e3:.3g} kB/s"


def _moved(row: Row | None) -> str:
    """" (+3.1 % [-0.4, +6.7] EQUIVALENT)": the change against the baseline, where tested."""
    if row is None or row.change is None:
        return ""
    return f" ({change(row)} {row.verdict})"


def _slowed(r) -> str:
    return f" (rank {r.slowed} slowed {r.slow_factor:g}× on purpose: `_slow_rank_`)" \
        if r.slowed is not None else ""


def line(cell: str, workload: str, mode: str, r, rows: list[Row]) -> str:
    """One unit: ranks, all-reduce, bus bandwidth, the straggler, and their changes."""
    mine = {x.metric: x for x in rows if (x.stage, x.cell, x.workload, x.mode)
            == ("bench", cell, workload, mode)}
    said = [f"`{cell}` {workload} {mode}: {r.world_size} {r.backend} ranks × {r.threads} "
            f"thread{'s' * (r.threads != 1)}",
            f"all-reduce {seconds(r.comm_s)} a step{_moved(mine.get('comm_s'))}, bus bandwidth "
            f"{rate(r.busbw)} ({nbytes(r.bytes_per_step)} a step)"]
    if r.lag is not None and r.slowest is not None:
        said.append(f"slowest rank {r.slowest} ({r.slowest_in} of {r.processes} processes), "
                    f"{r.lag * 100:.1f} % behind the fastest{_moved(mine.get('straggler'))}")
    return "- " + "; ".join(said) + _slowed(r)


def ranks_section(bench: dict[str, CellSummary], rows: list[Row]) -> list[str]:
    """`## Distributed units` on the summary page: one line per unit; nothing without one."""
    found = [line(cell, key.workload, key.mode, n.ranks, rows)
             for cell, summary in sorted(bench.items()) if summary.status == Status.OK
             for key in summary.keys() if (n := summary.units[key]).ranks is not None]
    return ["## Distributed units", "", ABOUT, "", *found, ""] if found else []


def ranks_table(summary: CellSummary) -> str:
    """`## Distributed units` on the bench page: per unit, each rank's numbers too."""
    body = []
    for key in summary.keys():
        r = summary.units[key].ranks
        if r is None:
            continue
        body.append([key.workload, key.mode, f"{r.world_size} × {r.threads}", r.backend,
                     seconds(r.comm_s), rate(r.busbw), nbytes(r.bytes_per_step),
                     " / ".join(seconds(s) for s in r.ready_s),
                     " / ".join(seconds(s) for s in r.allreduce_s),
                     "" if r.lag is None else f"rank {r.slowest}, {r.lag * 100:.1f} %" + _slowed(r)])
    if not body:
        return ""
    return ("## Distributed units\n\n" + ABOUT + " Per rank, in rank order: its time to the "
            "collective, and its all-reduce time with its waits.\n\n" + markdown_table(
                body, ["workload", "mode", "ranks × threads", "backend", "all-reduce a step",
                       "bus bandwidth", "all-reduced a step", "to the collective, per rank",
                       "all-reduce, per rank", "slowest, lag"]))


# ---- gpu --------------------------------------------------------------------
# The GPU section of reports/bench/<cell>.md: per workload, mode and series (hot, cold,
# graph), the time per call, how the series stopped, throttling, what NVML read, and the
# achieved rates against the device's peak.

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


def gpu_section(summary: CellSummary) -> str:
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


def spread(values: tuple[float, ...]) -> str:
    """Process-to-process spread: the range of process medians around their median."""
    if len(values) < 2:
        return ""
    mid = median(values)
    return f"±{(max(values) - min(values)) / 2 / mid:.1%}" if mid else ""


def measured(summary: CellSummary) -> str:
    rows = []
    for key in summary.keys():
        n = summary.units[key]
        if not n.measured:
            why = n.failures[0] if n.failures else (
                f"{n.processes_busy} left out: busy machine" if n.processes_busy
                else "not measured")
            rows.append([key.workload, key.mode, "0", why, "", "", "", "", "", "", ""])
            continue
        rows.append([
            key.workload, key.mode, str(n.processes_kept) + (
                f" ({n.processes_busy} busy left out)" if n.processes_busy else ""),
            seconds(n.steady_s),
            spread(n.steady_per_process_s), _seconds(n.first_call_s),
            _seconds(n.first_call_warm_s), _seconds(n.warmup_s),
            f"{n.warmup_calls:g}" if n.warmup_calls is not None else "",
            per_second(n),
            value("peak_bytes", n.peak_bytes) if n.peak_bytes is not None else ""])
    return markdown_table(rows, ["workload", "mode", "processes", "steady state (median)",
                                 "spread", "first call (cold caches)", "first call (warm)",
                                 "warm-up", "warm-up calls", "items/s", "peak memory"])


def threads_line(summary: CellSummary) -> str:
    """Which threads the cell measured, and why."""
    if not summary.threads:
        return ""
    counts = " or ".join(map(str, summary.threads))
    said = f"Each worker process ran torch with {counts} thread{'s' * (counts != '1')}"
    why = {0: "torch's default (`threads: 0`)",
           "auto": "`threads: auto`: torch's default, less one core where it would take every "
                   "core the worker may use (the launcher's and the system's: a preempted "
                   "thread stalls the others)"}.get(summary.threads_setting)
    return f"{said}: {why}." if why else f"{said} (`threads: {summary.threads_setting}`)."


def _seconds(v: float | None) -> str:
    """A median over processes, or blank where none measured it."""
    return "" if v is None else seconds(v)


def latency(summary: CellSummary) -> str:
    """The units that timed single calls: medians over processes of each percentile."""
    rows = []
    for key in summary.keys():
        n = summary.units[key]
        calls = n.latency_calls
        if not calls or n.latency_p50_s is None:
            continue
        rows.append([key.workload, key.mode, str(len(calls)), f"{min(calls)}–{max(calls)}"
                     if min(calls) != max(calls) else str(calls[0]),
                     *(seconds(n.value(q)) for q in names(Family.LATENCY)),
                     f"{n.latency_p99_s / n.latency_p50_s:.2f}x" if n.latency_p50_s else ""])
    if not rows:
        return ""
    return ("## Tail latency\n\nSingle calls, each between two device synchronizations, after "
            "the steady state; percentiles per process (nearest rank), here their median over "
            "processes; their verdicts are compare.md's.\n\n" + markdown_table(
                rows, ["workload", "mode", "processes", "calls per process", "p50", "p90",
                       "p99", "p99 / p50"]))


def shape_changes(summary: CellSummary) -> str:
    """Per workload, compiled mode and shape after the first: what the change cost."""
    rows = []
    for key in summary.keys():
        for s in summary.units[key].shapes:
            rows.append([key.workload, key.mode, f"`{s.shape}`", seconds(s.first_call_s),
                         seconds(s.call_s), seconds(max(s.first_call_s - s.call_s, 0.0))
                         if s.call_s is not None else "", str(s.recompiles),
                         "<br>".join(s.reasons)])
    if not rows:
        return ""
    return ("## Shape changes\n\nCompiled modes of a workload that declares several input "
            "shapes run each after the first, after the steady state: its first call there "
            "(the change, recompile included), one more call at that shape, what the change "
            "cost beyond it, and the recompiles it caused with their reasons (the first call "
            "and the recompiles over the processes that compiled with empty caches, where any "
            "did; the next call over those with warm caches, where any ran: in a cold one it "
            "still pays one-time work); their verdicts are compare.md's.\n\n" + markdown_table(
                rows, ["workload", "mode", "shape", "first call", "next call", "cost",
                       "recompiles", "reasons"]))


def unmeasured(summary: CellSummary) -> str:
    """What the device's backend could not provide, and how its calls were timed (what the
    sections of render.steps say themselves aside)."""
    said: dict[str, None] = {}
    for key in summary.keys():
        n = summary.units[key]
        for clock in n.clocks:
            said[f"calls timed with {CLOCKS.get(clock, clock)}"] = None
        for metric, why in n.unmeasured:
            if metric not in OWN:
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
            for r in ordered(rows) if r.metric in BY_NAME or r.metric == "status"]
    return markdown_table(body, ["workload", "mode", "metric", "baseline", "now",
                                 "change [CI]", "p (this test)", "n", "note"])


def carried(summary: CellSummary) -> str:
    """What this run did not measure in full, per workload and arm, and where it came from."""
    if not summary.carried:
        return ""
    lines = ["## Not measured in full (results that are functions of unchanged inputs)", "",
             "| workload | arm | what | why, and from where |", "|---|---|---|---|"]
    lines += [f"| {name} | {arm} | {what} | {why} |" for name, arm, what, why in summary.carried]
    return "\n".join(lines)


def looks(summary: CellSummary) -> str:
    if not summary.looks:
        return ""
    lines = ["## Adaptive sampling (interim looks of this cell)", "",
             "Each look compared this cell alone with the baseline and named the units below "
             "undecided; each got the processes its look said would decide it where "
             "`bench.max_processes` and the budget covered them, and none where they did not "
             "(compare.md says what those would cost). These are interim readings, not "
             "verdicts.", ""]
    for i, look in enumerate(summary.looks, 1):
        units = "; ".join(f"{p.workload} {p.mode} {p.metric} {p.verdict} "
                          f"{(p.ratio - 1) * 100:+.1f} % [{(p.ci_low - 1) * 100:+.1f}, "
                          f"{(p.ci_high - 1) * 100:+.1f}]" for p in look.pending)
        lines.append(f"- look {i}, at {look.processes} processes per side: {units}")
        if look.funded:
            lines.append("  - funded: " + ", ".join(f"{w} {n} round{'s' * (n != 1)}"
                                                    for w, n in look.funded.items()))
        for unit, why in look.skipped:
            lines.append(f"  - not funded: {unit}: {why}")
    lines.append(f"\n{summary.adaptive_processes} processes added in all.")
    return "\n".join(lines)


# A waiting arm using more than this share of a core takes a measurable part of a 2-4 core
# machine from the arm being timed.
BUSY_WAITING_CORES = 0.05


def waiting(summary: CellSummary) -> str:
    """Lock-step: what each arm took from the machine while the other was timed."""
    if not summary.waiting:
        return ""
    lines = ["## Lock-step turns", "",
             "While one arm held the turn (a timed phase or sample), the other waited; its CPU "
             "use meanwhile, from /proc between turns:", ""]
    for arm, w in sorted(summary.waiting.items()):
        lines.append(f"- {arm}: {w.cores * 100:.1f} % of a core ({w.cpu_s:.2f} s of CPU in "
                     f"{w.seconds:.1f} s of {w.turns} waits)")
        if w.cores > BUSY_WAITING_CORES:
            lines.append("  - **not idle**: its threads kept running while the other arm was "
                         "timed (OpenMP threads that spin after their work: OMP_WAIT_POLICY, "
                         "KMP_BLOCKTIME, GOMP_SPINCOUNT), so the other's samples shared the "
                         "machine with it")
    return "\n".join(lines)


def page(summary: CellSummary, result: CompareRecord, ab_env: str = "") -> str:
    """`summary`: the cell's judge.summary; `result`: its rows (judge.run)."""
    lines = [f"# bench: {summary.cell}", ""]
    if summary.status != Status.OK:     # nothing measured: no notes on a baseline, as each rerun
        return "\n".join(lines + [f"**{summary.status}**: {summary.reason}", ""])
    lines += [f"> {note}" for note in result.notes] + ([""] if result.notes else [])
    gpu = gpu_section(summary)
    threads = threads_line(summary)
    lines += ["## Measured", "", measured(summary), "", *([threads, ""] if threads else []),
              *([gpu, ""] if gpu else []),
              "## Against the baseline", "",
              "The verdicts (REGRESSED, EQUIVALENT, ...) are decided once over the whole run, in "
              "[compare.md](../compare.md), with p-values adjusted over every tested metric; "
              "the gate uses those. Baseline and now: the geometric means of the values each "
              "test compared (in lock-step, the pairs it used), so that now / baseline is its "
              "change; the medians above take every kept process.", "", diff(result.rows), ""]
    for extra in (latency(summary), breakdown_section(summary), usage_section(summary),
                  shape_changes(summary), ranks_table(summary), unmeasured(summary),
                  looks(summary), carried(summary), waiting(summary), ab_env):
        if extra:
            lines += [extra, ""]
    return "\n".join(lines)


def ab_environments(changes: list | None, error: str | None = None) -> str:
    """In A/B mode: how the candidate's environment differs from this one's
    (judge.environment.diff; None: no candidate), or why it could not be captured."""
    if error is not None:
        return f"Candidate environment: {error}"
    if changes is None:
        return ""
    changes = sorted(changes,   # what explains timings first
                     key=lambda c: (not c[0].startswith(FIRST), c[0]))
    lines = ["## A/B environments (baseline → candidate)", ""]
    lines += [f"- `{k}`: `{cell(a)}` → `{cell(b)}`" for k, a, b in changes[:30]] or ["- identical"]
    if len(changes) > 30:
        lines.append(f"- and {len(changes) - 30} more")
    return "\n".join(lines)


FIRST = ("torch.", "python.", "packages.", "hardware.", "flags.")
