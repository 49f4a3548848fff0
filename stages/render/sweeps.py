"""Sweeps in the summary: per cell, each swept workload and mode as a curve (throughput, latency,
peak memory and cost against the swept values), the recommended point under the documented
rule (judge.sweeps: decided like any timing, a tie going to the cheaper setting), and how the
recommendation moved against the baseline. Table and PNG. Pure."""
from __future__ import annotations

import math

from matplotlib.figure import Figure

from torchgate.core.config.settings import Recommend
from torchgate.judge.results import Choice, Sweep, SweepPoint, Versus
from torchgate.render.markdown import markdown_table, nbytes, percent, ratio_change, seconds
from torchgate.render.plots import png


def _versus(v: Versus) -> str:
    """"+3.0 % [-8.0, +15.0]": the point's throughput against the recommended one's."""
    if math.isnan(v.low):
        return f"{percent(v.ratio - 1)} (one process: no test)"
    return ratio_change(v.ratio, v.low, v.high)


def _why(choice: Choice) -> str:
    """Why the recommended point: it ties with the points named, or beats every other."""
    ties = choice.ties
    if not choice.versus:
        return "the only point within the limits"
    if not ties:
        return "every other point is shown to cost more per item"
    level = f"{ties[0].confidence * 100:.3g} % interval"
    named = ", ".join(f"{v.point.label} {_versus(v)}" for v in ties[:3])
    more = f" and {len(ties) - 3} more" if len(ties) > 3 else ""
    return (f"{choice.chosen.label} and {named}{more} tie (throughput against it, "
            f"{level}): the cheaper setting")


def recommendation_line(sweep: Sweep) -> str:
    """"`cpu-fp32` mlp_train eager: batch=64 → **batch=128** ($0.02 per M items); batch=128
    and batch=256 +3.0 % [-8.0, +15.0] tie ...: the cheaper setting"."""
    where = f"`{sweep.cell}` {sweep.workload} {sweep.mode}"
    pick, open_ = sweep.choice.chosen, sweep.choice.open
    if pick is None:
        return f"- {where}: no point fits the limits (`recommend`)."
    if open_ is not None:
        needed = sweep.choice.needed
        more = (f"about {needed} processes a point would decide it (`bench.processes`)"
                if needed else "more processes a point would narrow it (`bench.processes`)")
        return (f"- {where}: **not decided**: {open_.point.label} is estimated "
                f"{_versus(open_)} against {pick.label}, the cheaper setting, with "
                f"{open_.n[1]} and {open_.n[0]} processes kept; {more}.")
    price = f" (${pick.usd_per_million:.3g} per M items)" if pick.usd_per_million else \
        f" ({pick.throughput:,.0f} items/s)"
    why = f"; {_why(sweep.choice)}."
    if not sweep.had_baseline:
        return f"- {where}: **{pick.label}**{price}{why}"
    was = sweep.before.chosen if sweep.before is not None else None
    if was is None:
        return (f"- {where}: **{pick.label}**{price}; the baseline had no point within the "
                f"limits{why}")
    if was.label == pick.label:
        return f"- {where}: **{pick.label}**{price}, as in the baseline{why}"
    return f"- {where}: {was.label} → **{pick.label}**{price}{why}"


def curve_table(sweep: Sweep) -> str:
    choice = sweep.choice
    against = {id(v.point): v for v in choice.versus}
    rows = []
    for p in sweep.points:
        n, geo, cost, v = p.numbers, p.throughput, p.usd_per_million, against.get(id(p))
        kept = f"{n.processes_kept} of {n.processes_kept + n.processes_busy + n.processes_failed}"
        rows.append([p.label + (" ◀" if p is choice.chosen else ""), kept,
                     seconds(n.items / geo) if geo and n.items else
                     seconds(n.steady_s) if n.measured else "not measured",
                     f"{geo:,.0f}" if geo else "",
                     (_versus(v) + (" tie" if v.tie else "")) if v is not None else "",
                     nbytes(n.peak_bytes) if n.peak_bytes is not None else "",
                     f"${cost:.3g}" if cost else "", p.outside or ""])
    return markdown_table(rows, ["point", "processes kept", "steady state (one call)", "items/s",
                                 "items/s against ◀ [CI]", "peak memory", "$ / M items",
                                 "outside the limits"])


def sweep_figure(cell: str, sweeps: tuple[Sweep, ...], alpha: float) -> bytes | None:
    """Items/s against the first swept parameter, one line per value of the others, each
    point with its (1 - alpha) interval, on an axis from zero; the recommended point circled
    and the points that tie with it ringed."""
    panels = [s for s in sweeps if any(p.throughput for p in s.points)]
    if not panels:
        return None
    fig = Figure(figsize=(4.6 * len(panels), 3.6))
    for i, sweep in enumerate(panels):
        points = sweep.points
        ax = fig.add_subplot(1, len(panels), i + 1)
        axis = points[0].values[0][0]
        lines: dict[tuple, list[SweepPoint]] = {}
        for p in points:
            lines.setdefault(tuple(kv for kv in p.values if kv[0] != axis), []).append(p)
        numeric = all(isinstance(dict(p.values)[axis], (int, float)) for p in points)

        def x_of(p: SweepPoint):
            x = dict(p.values)[axis]
            return x if numeric else str(x)
        for rest, mine in lines.items():
            mine = [p for p in mine if p.throughput]
            ys = [p.throughput for p in mine]
            bars = [p.interval or (y, y) for p, y in zip(mine, ys)]
            label = ", ".join(f"{k}={v}" for k, v in rest) or None
            ax.errorbar([x_of(p) for p in mine], ys,
                        yerr=[[max(0.0, y - lo) for y, (lo, _) in zip(ys, bars)],
                              [max(0.0, hi - y) for y, (_, hi) in zip(ys, bars)]],
                        fmt="o-", ms=4, capsize=3, label=label)
        choice = sweep.choice
        if choice.chosen is not None:
            ax.plot([x_of(choice.chosen)], [choice.chosen.throughput], "o", ms=12,
                    mfc="none", mec="#c62828", mew=2, ls="",
                    label="recommended" if choice.decided else "cheapest, not decided")
            if choice.ties:
                ax.plot([x_of(v.point) for v in choice.ties],
                        [v.point.throughput for v in choice.ties], "o", ms=10,
                        mfc="none", mec="#ef6c00", mew=1.5, label="ties with it")
        if numeric:                  # ticks at the swept values alone (no 0.25 workers)
            values = sorted({dict(p.values)[axis] for p in points})
            if values[0] > 0:
                ax.set_xscale("log", base=2)
            ax.set_xticks(values, [str(v) for v in values])
            ax.minorticks_off()
        # From zero, gaps drawn to scale; an interval running past 2.5x the best estimate
        # (two processes a point) runs off the top rather than flattening every point.
        best = max((p.throughput for p in points if p.throughput), default=0.0)
        top = max((p.interval[1] for p in points if p.interval), default=best)
        ax.set_ylim(0, min(top, 2.5 * best) * 1.08 or None)
        ax.set_xlabel(axis, fontsize=8)
        ax.set_ylabel(f"items/s ({1 - alpha:.0%} interval)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_title(f"{sweep.workload} · {sweep.mode}", fontsize=9)
        ax.legend(fontsize=7, frameon=False)
        ax.grid(color="#eeeeee")
    fig.suptitle(f"{cell}: throughput across the sweep", fontsize=10)
    fig.tight_layout()
    return png(fig)


def sweeps_section(sweeps: dict[str, tuple[Sweep, ...]], rule: Recommend,
                   images: dict[str, str], *, alpha: float, delta: float) -> list[str]:
    """`## Sweeps` of the summary; `sweeps`: each cell's, as judge.sweeps.decide made them;
    `images`: cell -> path of its sweep picture; `alpha`, `delta`: stats.alpha and the steady
    state's δ, which decided the recommendations."""
    lines = []
    for cell, found in sorted(sweeps.items()):
        if not found:
            continue
        lines += [f"### `{cell}`", ""]
        for sweep in found:
            lines += [recommendation_line(sweep), "", curve_table(sweep), ""]
        if cell in images:
            lines += [f"![{cell}: throughput across the sweep]({images[cell]})", ""]
    if not lines:
        return []
    limits = []
    if rule.max_peak_mib is not None:
        limits.append(f"peak memory ≤ {rule.max_peak_mib:g} MiB")
    if rule.max_latency_ms is not None:
        limits.append(f"a call ≤ {rule.max_latency_ms:g} ms")
    return ["## Sweeps", "",
            "Each swept value is its own unit (compared and judged above). Recommended (◀): "
            "among the points " + (f"within {' and '.join(limits)}" if limits else
                                   "(no limits set: `recommend.max_peak_mib`, "
                                   "`recommend.max_latency_ms`)") +
            ", the cheapest setting that no other point is shown to beat on cost per item "
            "(the same order as throughput): a point beats another when its cost per item is "
            "lower by Welch's test on the log per-process values, one-sided at α/(k − 1) for "
            f"k points (α = {alpha:g}), and by more than δ = {delta:.0%}. Points no point "
            "beats tie with it (marked tie); one that ties while estimated more than δ faster "
            "leaves the sweep **not decided**: too few processes to choose. Cheaper: fewer "
            "threads, then the smaller values "
            "of the other swept parameters, then less peak memory. Steady state and items/s: "
            "the geometric mean over the kept processes, as the test compares them; the "
            "interval is the decision's. The arrow shows how the recommendation moved "
            "against the baseline.", ""] + lines


def sweep_pictures(sweeps: dict[str, tuple[Sweep, ...]], *, alpha: float) -> dict[str, bytes]:
    """cell -> its sweep picture, for the cells that swept something."""
    out = {}
    for cell, found in sorted(sweeps.items()):
        drawn = sweep_figure(cell, found, alpha)
        if drawn is not None:
            out[cell] = drawn
    return out
