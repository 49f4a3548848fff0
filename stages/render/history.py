"""reports/history.md: the baseline history, its trends and where each lasting shift began. Pure."""
from __future__ import annotations

import math

from matplotlib.figure import Figure

from torchgate.core.config.settings import HistorySettings
from torchgate.core.metrics import BY_NAME, Unit
from torchgate.core.numbers import median
from torchgate.core.vocabulary import PICTURES, short
from torchgate.judge.results import KEY_METRICS, Chance, FailureRate, LastingShift, RunPoint, Trend
from torchgate.render.markdown import markdown_table, percent, pictures_note, pvalue, value
from torchgate.render.plots import png, time_unit

# ---- trends ------------------------------------------------------------
# Trend pictures of the baseline history: per cell, hardware and key timing, one panel per
# workload and mode, each lasting shift marked where it began. PNG bytes. Pure.

SHIFT, LINE = "#c62828", "#1565c0"
COLUMNS = 3


THIS_RUN = "this run"    # committed or not: a page must not change when its run is committed


def _label(point) -> str:
    return THIS_RUN if point.commit is None else short(point.commit)


BUSY_POINT = "hollow: processes left out (busy machine)"


def trend(found: list[Trend], title: str) -> bytes | None:
    """Small multiples, one per series (own y scale: workloads differ a hundredfold), the runs
    oldest first; a dashed line where a lasting shift began, the level either side drawn."""
    if not found:
        return None
    columns = min(COLUMNS, len(found))
    rows = math.ceil(len(found) / columns)
    fig = Figure(figsize=(max(6.0, 4.0 * columns), 0.6 + 2.5 * rows))
    for i, s in enumerate(found):
        ax = fig.add_subplot(rows, columns, i + 1)
        xs = list(range(len(s.points)))
        scale, unit = _scale(s.metric, max(p.value for p in s.points))
        values = [p.value / scale for p in s.points]
        ax.plot(xs, values, "-", color=LINE, lw=1)
        busy = [p.busy > 0 for p in s.points]
        for hollow in (False, True):    # a point some busy processes were left out of: hollow
            at = [i for i in xs if busy[i] == hollow]
            ax.plot(at, [values[i] for i in at], "o", ms=3.5 if hollow else 3, color=LINE,
                    mfc="white" if hollow else LINE, ls="none",
                    label=BUSY_POINT if hollow and at else None)
        if any(busy):
            ax.legend(fontsize=6, frameon=False, loc="best")
        cuts = [0, *(shift.index for shift in s.shifts), len(values)]
        for start, stop in zip(cuts, cuts[1:]):
            level = median(values[start:stop])
            ax.plot([start - 0.3, stop - 0.7], [level, level], color="#9e9e9e", lw=1.5)
        for shift in s.shifts:
            ax.axvline(shift.index - 0.5, color=SHIFT, ls="--", lw=1)
            ax.annotate(f"{(shift.ratio - 1) * 100:+.0f} %", (shift.index - 0.5, max(values)),
                        color=SHIFT, fontsize=7, ha="left", va="top")
        ax.set_ylim(*y_range(values))
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        step = max(1, math.ceil(len(xs) / 8))
        ax.set_xticks(xs[::step], [_label(p) for p in s.points[::step]], fontsize=6,
                      rotation=45, ha="right")
        ax.set_title(f"{s.workload} · {s.mode}", fontsize=9)
        ax.grid(axis="y", color="#eeeeee")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 / fig.get_figheight()))   # room for the title
    return png(fig)


MIN_SPAN = 0.2      # a panel's y range spans at least ±10 % of the series' median


def y_range(values: list[float]) -> tuple[float, float]:
    """A panel's y limits: the values with a margin, and never narrower than MIN_SPAN of the
    median, so that a 1 % wobble on a wide-open scale does not read as a trend."""
    low, high, middle = min(values), max(values), median(values)
    half = max((high - low) * 0.575, middle * MIN_SPAN / 2)
    centre = (low + high) / 2
    return max(0.0, centre - half), centre + half


def _timed(metric: str) -> bool:
    return BY_NAME[metric].unit == Unit.SECONDS


def _scale(metric: str, top: float) -> tuple[float, str]:
    """A series' axis: a time in its unit, a count in millions where it runs to them."""
    if _timed(metric):
        return time_unit(top)
    return (1e6, "million") if top >= 1e6 else (1.0, "count")


def image_name(cell: str, metric: str, era: int) -> str:
    return f"{cell}-{metric}-hw{era + 1}.png"


def trend_images(found: list[Trend], key_metrics: tuple[str, ...]) -> dict[str, bytes]:
    """file name -> PNG, one per cell, hardware era and key timing that has a series."""
    out = {}
    for cell, era in sorted({(s.cell, s.era) for s in found}):
        for metric in key_metrics:
            mine = [s for s in found if s.cell == cell and s.era == era and s.metric == metric]
            drawn = trend(mine, f"{cell}: {heading(metric)}, per run")
            if drawn is not None:
                out[image_name(cell, metric, era)] = drawn
    return out


def heading(metric: str) -> str:
    found = BY_NAME.get(metric)
    return found.heading if found is not None else metric


BARS = "▁▂▃▄▅▆▇█"


def run_name(point: RunPoint) -> str:
    return THIS_RUN if point.commit is None else f"`{short(point.commit)}`"


def day(point: RunPoint) -> str:
    return (point.date or "")[:10]


def direction(shift: LastingShift, metric: str) -> str:
    """Every series here is higher-is-worse: a time slower, a count more work."""
    more, less = ("slower", "faster") if _timed(metric) else ("more", "fewer")
    return f"▲ {percent(shift.ratio - 1)} {more}" if shift.ratio > 1 else \
        f"▼ {percent(shift.ratio - 1)} {less}"


def sparkline(values: list[float]) -> str:
    low, high = min(values), max(values)
    if high <= low:
        return BARS[0] * len(values)
    return "".join(BARS[min(len(BARS) - 1, int((v - low) / (high - low) * len(BARS)))]
                   for v in values)


def _levels(series: Trend, shift: LastingShift) -> str:
    points = list(series.points)
    i = series.shifts.index(shift)
    start = series.shifts[i - 1].index if i else 0
    stop = series.shifts[i + 1].index if i + 1 < len(series.shifts) else len(points)
    before = sorted(p.value for p in points[start:shift.index])
    after = sorted(p.value for p in points[shift.index:stop])
    return (f"{value(series.metric, before[len(before) // 2])} → "
            f"{value(series.metric, after[len(after) // 2])}")


def shifts_table(found: list[Trend]) -> str:
    rows = []
    for s in found:
        for shift in s.shifts:
            p = s.started(shift)
            rows.append([s.cell, s.workload, s.mode, heading(s.metric).split(" (")[0],
                         run_name(p), day(p), direction(shift, s.metric), _levels(s, shift),
                         pvalue(shift.pvalue), "; ".join(p.changes) or "no recorded change"])
    return markdown_table(rows, ["cell", "workload", "mode", "metric", "began at", "date",
                                 "change", "level before → after", "p",
                                 "environment at that run"])


def _unit(s: Trend) -> str:
    return f"{s.workload} · {s.mode}"


def metric_section(metric: str, found: list[Trend], shown: int, level: str,
                   image: str | None = None) -> list[str]:
    found = [s for s in found if s.metric == metric]
    if not found:
        return []
    lines = [f"{level} {heading(metric)}", ""]
    if image:
        lines += [f"![{heading(metric)}: trend per workload and mode]({image})", ""]
    for s in found:
        values = [p.value for p in s.points]
        lines.append(f"- {_unit(s)}: `{sparkline(values)}` {value(metric, values[0])} → "
                     f"{value(metric, values[-1])} over {len(values)} run(s), oldest to "
                     f"newest (from {value(metric, min(values))} to "
                     f"{value(metric, max(values))})" + (
                         f"; {len(s.busy_runs)} run(s) without a point, every process timed "
                         f"on a busy machine: " + ", ".join(
                             THIS_RUN if c is None else short(c) for c in s.busy_runs)
                         if s.busy_runs else ""))
    shown_runs = sorted({p.run for s in found for p in s.points})[-shown:]
    # The table: the series with a point among the runs shown, not every one ever run.
    gone = [s for s in found if not any(p.run in shown_runs for p in s.points)]
    found = [s for s in found if s not in gone]
    runs: dict[int, RunPoint] = {}
    cells: dict[tuple[int, int], str] = {}
    for col, s in enumerate(found):
        starts = {shift.index: shift for shift in s.shifts}
        for i, p in enumerate(s.points):
            runs.setdefault(p.run, p)
            text = value(s.metric, p.value)
            if i in starts:
                text = f"**{text}** {direction(starts[i], s.metric)}"
            cells[p.run, col] = text
    order = sorted(runs)
    hidden = len(order) - shown
    rows = []
    for index in order[-shown:]:
        p = runs[index]
        changes = sorted({c for s in found for q in s.points if q.run == index
                          for c in q.changes})
        torch = p.torch or ""
        if any(c.startswith("torch ") for c in changes):
            torch = f"**{torch}**"    # a torch upgrade, marked
        rows.append([run_name(p), day(p), torch, *[cells.get((index, col), "")
                                                   for col in range(len(found))],
                     "; ".join(changes)])
    lines += ["", markdown_table(rows, ["run", "date", "torch", *map(_unit, found),
                                        "environment change"])]
    if hidden > 0:
        lines += ["", f"{hidden} older run(s) not shown (`history.shown` = {shown})."]
    if gone:
        lines += ["", f"{len(gone)} series with no point among these runs left out of the "
                      f"table: {', '.join(map(_unit, gone[:6]))}"
                  + (f" and {len(gone) - 6} more" if len(gone) > 6 else "") + "."]
    return lines + [""]


def _hardware(s: Trend) -> str:
    """The series' hardware key; its threads are the env stage's (torch's default in the
    process that ran `dvc repro`), which each unit's bench page may not share."""
    return ", ".join(f"{'torch threads of the env stage' if k == 'torch_threads' else k} "
                     f"{v or '(none)'}" for k, v in s.hardware)


def chance_line(odds: Chance | None, series: int) -> str:
    """The page-level false-shift rate, in one line."""
    if odds is None:
        return ""
    return (f"By chance: with nothing changed, series like these ({odds.runs} runs, "
            f"{percent(odds.spread).lstrip('+')} spread about their levels, lag-1 "
            f"autocorrelation {odds.rho:.2f}) showed a lasting shift in {odds.rate:.1%} of "
            f"{odds.trials} simulated series; over the {series} series here, about "
            f"{odds.expected:.1f} false shift(s) are to be expected.")


def failures_section(failed: list[FailureRate]) -> list[str]:
    """The units that failed in any run of the history, the flakiest first."""
    if not failed:
        return []
    rows = [[f.cell, f.workload, f.mode, f"{f.failed} of {f.processes} ({f.rate:.0%})"
             + (f"; **every process of the newest {f.broken_runs} run(s)**: broken, not flaky"
                if f.broken_runs else ""),
             f"{f.runs} of {f.of_runs}", short(f.last) if f.last else THIS_RUN, f.message]
            for f in sorted(failed, key=lambda f: (-f.broken_runs, -f.rate, f.cell,
                                                   f.workload, f.mode))]
    return ["## Failure rate", "",
            "Units whose worker processes failed in any run shown (an error, a crash, OOM, a "
            "time limit, a non-finite output); SKIPPED processes do not count. A unit that "
            "fails now and then is FLAKY in the run where it does: its rate over the history "
            "says how often.", "",
            markdown_table(rows, ["cell", "workload", "mode", "processes failed",
                                  "runs with a failure", "last", "its first failure"]), ""]


def history(found: list[Trend], cells: list[str], settings: HistorySettings,
            images: tuple[str, ...] = (), folder: str = f"{PICTURES}/history",
            odds: Chance | None = None, failed: list[FailureRate] = ()) -> str:
    """`images`: the trend pictures written beside the page (file names in `folder`);
    `odds`: how many shifts chance alone would show (judge.trends.chance); `failed`: the
    units' failure rates (judge.trends.failure_rates)."""
    lines = ["# Baseline history", "",
             f"Each cell's newest `history.runs` = {settings.runs} runs, oldest first: the "
             "committed ones (`git log reports/<machine>/bench/<cell>.json`), then this "
             f"run, named \"{THIS_RUN}\" whether it is committed yet or not. One point per "
             "run: the median over its worker processes of their medians (drawn hollow where "
             "the busy rule left some of them out). A change of hardware starts "
             "a new series. A lasting shift is where a series' level changed and stayed "
             f"changed for at least {settings.min_points} runs: Apache Otava's method "
             f"(E-divisive means, then a t-test at p ≤ {settings.max_pvalue:g}, Bonferroni over "
             "the splits it was chosen from, allowing for serially correlated runs), no smaller "
             "than " + (f"{settings.min_change:.1%}" if settings.min_change is not None else
                        "the metric's δ (`stats.delta`)")
             + "; a single slow run is a spike, not a shift.", ""]
    shifted = [s for s in found if s.shifts]
    lines += ["## Lasting shifts", ""]
    if odds is not None:
        lines += [chance_line(odds, sum(len(s.points) >= 2 * settings.min_points
                                        for s in found)), ""]
    if shifted:
        lines += [shifts_table(shifted), ""]
    elif found:
        lines += [f"No lasting shift in {len(found)} series.", ""]
    else:
        lines += ["No committed run to show yet: commit `reports/` after a run (the "
                  "baseline history is `git log reports/<machine>/`).", ""]
    lines += failures_section(list(failed))
    if images:
        lines += [pictures_note("history"), ""]
    for cell in cells:
        mine = [s for s in found if s.cell == cell]
        if not mine:
            continue
        lines += [f"## {cell}", ""]
        eras = sorted({s.era for s in mine})
        for era in eras:
            in_era = [s for s in mine if s.era == era]
            if len(eras) > 1:
                lines += [f"### Hardware {era + 1} of {len(eras)}", ""]
            lines += [f"Hardware: {_hardware(in_era[0])}.", ""]
            level = "####" if len(eras) > 1 else "###"
            for metric in KEY_METRICS:
                name = image_name(cell, metric, era)
                lines += metric_section(metric, in_era, settings.shown, level,
                                        f"{folder}/{name}" if name in images else None)
    return "\n".join(lines).rstrip() + "\n"
