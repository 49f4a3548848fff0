"""The run's pictures, as PNG bytes, and the same data as CSV for `dvc plots`. Pure.

matplotlib's object API with the Agg canvas: no display, no global pyplot state. PNGs carry no
software or date stamp, so a run that drew the same data writes the same bytes.
"""
from __future__ import annotations

import csv
import io
import math

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from torchgate.core.metrics import label
from torchgate.core.numbers import median
from torchgate.core.records.rows import Row
from torchgate.core.vocabulary import BASELINE, Verdict
from torchgate.judge.results import CellSummary
from torchgate.render.verdicts import MOVED, by_effect

COLOURS = {Verdict.REGRESSED: "#c62828", Verdict.IMPROVED: "#2e7d32", Verdict.EQUIVALENT: "#607d8b",
           Verdict.INCONCLUSIVE: "#ef6c00"}
BASE, NOW = "#90a4ae", "#1565c0"
MOST_ROWS = 60          # a forest plot past this is unreadable: the largest changes are kept


def png(fig: Figure) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, metadata={"Software": None})
    return out.getvalue()


RATIO_TICKS = (0.25, 1 / 3, 0.5, 2 / 3, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0)
WIDEST = 4.0            # the forest's axis stops at ÷4 and ×4: wider intervals get an arrow


def ratio_ticks(half_width: float) -> list[float]:
    """Round ratios inside ÷half_width..×half_width, outward from 1, none crowding the last
    (at least a fifth of the half-width apart on the log scale)."""
    gap = math.log(half_width) / 5
    kept = [1.0]
    for side in (sorted(t for t in RATIO_TICKS if t > 1), sorted(
            (t for t in RATIO_TICKS if t < 1), reverse=True)):
        last = 1.0
        for t in side:
            if abs(math.log(t)) <= math.log(half_width) * 1.001 and \
                    abs(math.log(t / last)) >= gap:
                kept.append(t)
                last = t
    return sorted(kept)


def _percent_axis(ax, half_width: float) -> None:
    """A log ratio axis, symmetric about no change, labelled as percent changes."""
    ax.set_xscale("log")
    ax.set_xlim(1 / half_width, half_width)
    ax.xaxis.set_major_locator(FixedLocator(ratio_ticks(half_width)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{(x - 1) * 100:+.0f} %"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelsize=7)


def tested(rows) -> list[Row]:
    """The timings a test decided on: a ratio with its interval."""
    return [r for r in rows if r.change is not None and r.verdict != Verdict.NOT_COMPARABLE]


def unit_label(r: Row, cell: bool = True) -> str:
    parts = [r.cell] if cell else []
    return " · ".join(parts + [r.workload, r.mode, label(r.metric)])


def forest(rows) -> bytes | None:
    """Every tested change: the ratio now/baseline with the interval decided on, against the
    metric's ±δ band (shaded), coloured by verdict; the largest changes at the top."""
    found = sorted(tested(rows), key=lambda r: abs(math.log(r.change.ratio)))[-MOST_ROWS:]
    if not found:
        return None
    fig = Figure(figsize=(9, 1.2 + 0.3 * len(found)))
    ax = fig.add_subplot()
    reach = max(max(r.change.ci_high, 1 / r.change.ci_low, 1 + (r.delta or 0)) for r in found)
    half = min(WIDEST, max(1.25, reach * 1.05))
    for y, r in enumerate(found):
        c = r.change
        if r.delta is not None:
            ax.fill_betweenx([y - 0.4, y + 0.4], 1 / (1 + r.delta), 1 + r.delta,
                             color="#e0e0e0", lw=0)
        colour = COLOURS.get(r.verdict, "#000000")
        low, high = max(c.ci_low, 1 / half), min(c.ci_high, half)
        ax.plot([low, high], [y, y], color=colour, lw=2)
        ax.plot([min(max(c.ratio, 1 / half), half)], [y], "o", color=colour, ms=5)
        for end, edge, arrow in ((c.ci_low, 1 / half, "<"), (c.ci_high, half, ">")):
            if (end < edge) if arrow == "<" else (end > edge):
                ax.plot([edge], [y], arrow, color=colour, ms=6, clip_on=False)
    ax.axvline(1.0, color="#424242", lw=0.8)
    _percent_axis(ax, half)
    ax.set_yticks(range(len(found)), [unit_label(r) for r in found], fontsize=8)
    ax.set_ylim(-0.7, len(found) - 0.3)
    ax.set_xlabel("change against the baseline (interval decided on; grey: ±δ)")
    for verdict, colour in COLOURS.items():
        ax.plot([], [], "o-", color=colour, label=verdict)
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    ax.set_title("Every tested change", fontsize=10)
    fig.tight_layout()
    return png(fig)


def short_time(x: float) -> str:
    scale, unit = time_unit(x)
    return f"{x / scale:.3g} {unit}"


def time_unit(largest: float) -> tuple[float, str]:
    """The unit a value reads in: 1 or more of it."""
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if largest >= scale:
            return scale, unit
    return 1e-9, "ns"


def nice_ticks(low: float, high: float, most: int = 7) -> list[float]:
    """Round ticks between low and high (1-2-5, else decades, else finer steps): at least
    three and at most `most` where the range allows."""
    found = {}
    for steps in ((1, 2, 5), (1,), (1, 1.5, 2, 3, 5, 7),
                  (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        found[steps] = [m * 10 ** e for e in range(math.floor(math.log10(low)) - 1,
                                                   math.ceil(math.log10(high)) + 1)
                        for m in steps if low <= m * 10 ** e <= high]
        if 3 <= len(found[steps]) <= most:
            return found[steps]
    return found[(1,)] if len(found[(1,)]) > most else [low, high]


def _time_axis(ax) -> None:
    """Log scale (workloads differ a hundredfold) labelled in plain units."""
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    ax.xaxis.set_major_locator(FixedLocator(nice_ticks(low, high)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: short_time(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelsize=7)


def medians(bench: dict[str, CellSummary]) -> bytes | None:
    """Per cell, each workload and mode: every worker process's median steady state, the
    baseline's (grey, above) beside this run's (blue, below); a bar marks each side's
    median. The spread shows how far one process can be from the next."""
    panels = {}
    for cell, summary in sorted(bench.items()):
        units = {}
        for key in summary.keys():
            now = summary.units[key].steady_per_process_s
            base = summary.unit(key.workload, key.mode, BASELINE)
            old = base.steady_per_process_s if base is not None else ()
            if now or old:
                units[key.workload, key.mode] = (old, now)
        if units:
            panels[cell] = units
    if not panels:
        return None
    tall = max(len(units) for units in panels.values())
    # A panel as wide as its longest label needs beside an axis of its own; the x label in two
    # lines, which no narrow axis lets run past the figure's edge.
    longest = max(len(f"{w} · {m}") for units in panels.values() for w, m in units)
    fig = Figure(figsize=(max(4.4, 2.6 + 0.06 * longest) * len(panels), 1.9 + 0.5 * tall))
    for i, (cell, units) in enumerate(panels.items()):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for y, (old, now) in enumerate(units.values()):
            for values, offset, colour in ((old, -0.17, BASE), (now, 0.17, NOW)):
                if values:
                    ax.plot(values, [y + offset] * len(values), "o", color=colour, ms=4,
                            alpha=0.8)
                    ax.plot([median(values)] * 2, [y + offset - 0.14, y + offset + 0.14],
                            color=colour, lw=2)
        _time_axis(ax)
        ax.set_yticks(range(len(units)), [f"{w} · {m}" for w, m in units], fontsize=8)
        ax.set_ylim(len(units) - 0.5, -0.5)
        ax.grid(axis="x", color="#eeeeee")
        ax.set_title(cell, fontsize=10)
        ax.set_xlabel("steady state per call\n(one dot per process)", fontsize=8)
    handles = [Line2D([], [], marker="o", ls="", color=NOW, label="this run")]
    if any(old for units in panels.values() for old, _ in units.values()):   # one was drawn
        handles.insert(0, Line2D([], [], marker="o", ls="", color=BASE, label="baseline"))
    fig.legend(handles=handles, loc="upper right", fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return png(fig)


def speedups(bench: dict[str, CellSummary], compiled: str = "compiled",
             eager: str = "eager") -> dict[tuple[str, str], float]:
    """(cell, workload) -> eager steady state over compiled: above 1, compiling pays."""
    out = {}
    for cell, summary in sorted(bench.items()):
        for workload in sorted({key.workload for key in summary.keys()}):
            a, b = summary.unit(workload, eager), summary.unit(workload, compiled)
            if a and b and a.measured and b.measured and b.steady_s > 0:
                out[cell, workload] = a.steady_s / b.steady_s
    return out


def speedup(bench: dict[str, CellSummary]) -> bytes | None:
    """Compiled over eager across the matrix: one group per workload, a bar per cell."""
    found = speedups(bench)
    if not found:
        return None
    cells = sorted({c for c, _ in found})
    workloads = sorted({w for _, w in found})
    width = 0.8 / len(cells)
    fig = Figure(figsize=(max(5.0, 1.2 * len(workloads) * max(1, len(cells) / 2)), 3.6))
    ax = fig.add_subplot()
    for i, cell in enumerate(cells):
        xs = [j + (i - (len(cells) - 1) / 2) * width for j, w in enumerate(workloads)
              if (cell, w) in found]
        ax.bar(xs, [found[cell, w] for w in workloads if (cell, w) in found], width * 0.95,
               label=cell)
    ax.axhline(1.0, color="#424242", lw=0.8, ls="--")
    ax.set_ylim(0, max(1.15, 1.1 * max(found.values())))   # the line at 1 clear of the frame
    ax.set_xticks(range(len(workloads)), workloads, fontsize=8)
    ax.set_ylabel("eager / compiled steady state (×)")
    one = f" ({cells[0]})" if len(cells) == 1 else ""     # a legend of one bar hides it
    ax.set_title(f"What compiling buys, per cell{one} (above 1: compiled is faster)", fontsize=10)
    if not one:
        ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return png(fig)


def csv_text(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


WHERE_PANELS, WHERE_BARS = 6, 6


def where(rows) -> bytes | None:
    """For each moved unit with an attribution (the largest changes first), a diverging bar
    per part: its share of the unit's change, added work or time right, removed left."""
    found = [r for r in by_effect(rows) if r.verdict in MOVED and r.attribution
             and isinstance(r.now, (int, float)) and isinstance(r.base, (int, float))
             and r.now != r.base][:WHERE_PANELS]
    if not found:
        return None
    fig = Figure(figsize=(9, 1.0 + 1.6 * len(found)))
    for i, r in enumerate(found):
        total = r.now - r.base
        parts = [c for c in r.attribution if c.kind != "library"][:WHERE_BARS][::-1]
        ax = fig.add_subplot(len(found), 1, i + 1)
        shares = [c.change / total for c in parts]
        ax.barh(range(len(parts)), shares, color=[COLOURS.get(r.verdict, "#000000")
                                                  if s > 0 else "#9e9e9e" for s in shares])
        ax.axvline(0, color="#424242", lw=0.8)
        ax.set_yticks(range(len(parts)), [_short(c.what) for c in parts], fontsize=7)
        ax.xaxis.set_major_formatter(lambda x, _: f"{x:.0%}")
        ax.set_title(f"{unit_label(r)}: {r.verdict}, where ({parts[0].kind}s)", fontsize=8)
    fig.supxlabel("share of the unit's change (grey: against it)", fontsize=8)
    fig.tight_layout()
    return png(fig)


def _short(name: str, most: int = 48) -> str:
    return name if len(name) <= most else name[:most - 1] + "…"


def plot_data(bench: dict[str, CellSummary], rows) -> dict[str, str]:
    """The pictures' data as CSV files, for `dvc plots diff` (the `plots:` of dvc.yaml)."""
    changes = csv_text(["unit", "ratio", "ci_low", "ci_high", "delta", "verdict"], [
        [unit_label(r), f"{r.change.ratio:.4f}", f"{r.change.ci_low:.4f}",
         f"{r.change.ci_high:.4f}", r.delta, r.verdict] for r in tested(rows)])
    gains = csv_text(["unit", "speedup"], [[f"{c} · {w}", f"{v:.4f}"]
                                           for (c, w), v in speedups(bench).items()])
    # No steady state per call: two revisions' medians side by side were measured apart, and
    # read as a change (+11.5 % beside a lock-step +70.5 %); the changes are the decided ones.
    return {"changes.csv": changes, "speedup.csv": gains}


def pictures(bench: dict[str, CellSummary], rows) -> dict[str, bytes | None]:
    """file name -> PNG bytes, None where there is nothing to draw (no baseline, one mode);
    `bench`: each cell's judge.summary, this run's arm and the baseline's."""
    return {"changes.png": forest(rows), "steady.png": medians(bench),
            "speedup.png": speedup(bench), "where.png": where(rows)}


CAPTIONS = {"changes.png": "Every tested change against the baseline, with its interval",
            "steady.png": "Steady state per call, every worker process: baseline and this run",
            "speedup.png": "Compiled over eager, per cell",
            "where.png": "Where each moved unit's change went: its parts' shares"}
