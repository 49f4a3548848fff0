"""Trend pictures of the baseline history: per cell, hardware and key timing, one panel per
workload and mode, each lasting shift marked where it began. PNG bytes. Pure."""
from __future__ import annotations

import math

from matplotlib.figure import Figure

from stages.core.vocabulary import short
from stages.judge.summary import Series
from stages.render.plots import png, time_unit

SHIFT, LINE = "#c62828", "#1565c0"
COLUMNS = 3
NAMES = {"steady_s": "steady state per call", "first_call_s": "first call (cold compile)",
         "first_call_warm_s": "first call (warm caches)",
         "warmup_s": "warm-up"}


THIS_RUN = "this run"    # committed or not: a page must not change when its run is committed


def _label(point) -> str:
    return THIS_RUN if point.commit is None else short(point.commit)


def trend(found: list[Series], title: str) -> bytes | None:
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
        scale, unit = time_unit(max(p.value for p in s.points))
        values = [p.value / scale for p in s.points]
        ax.plot(xs, values, "o-", color=LINE, ms=3, lw=1)
        cuts = [0, *(shift.index for shift in s.shifts), len(values)]
        for start, stop in zip(cuts, cuts[1:]):
            level = sorted(values[start:stop])[(stop - start) // 2]
            ax.plot([start - 0.3, stop - 0.7], [level, level], color="#9e9e9e", lw=1.5)
        for shift in s.shifts:
            ax.axvline(shift.index - 0.5, color=SHIFT, ls="--", lw=1)
            ax.annotate(f"{(shift.ratio - 1) * 100:+.0f} %", (shift.index - 0.5, max(values)),
                        color=SHIFT, fontsize=7, ha="left", va="top")
        low, high = min(values), max(values)
        pad = (high - low) * 0.15 or high * 0.05
        ax.set_ylim(max(0.0, low - pad), high + pad)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        step = max(1, math.ceil(len(xs) / 8))
        ax.set_xticks(xs[::step], [_label(p) for p in s.points[::step]], fontsize=6,
                      rotation=45, ha="right")
        ax.set_title(f"{s.workload} · {s.mode}", fontsize=9)
        ax.grid(axis="y", color="#eeeeee")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return png(fig)


def image_name(cell: str, metric: str, era: int) -> str:
    return f"{cell}-{metric}-hw{era + 1}.png"


def trend_images(found: list[Series], key_metrics: tuple[str, ...]) -> dict[str, bytes]:
    """file name -> PNG, one per cell, hardware era and key timing that has a series."""
    out = {}
    for cell, era in sorted({(s.cell, s.era) for s in found}):
        for metric in key_metrics:
            mine = [s for s in found if s.cell == cell and s.era == era and s.metric == metric]
            drawn = trend(mine, f"{cell}: {NAMES.get(metric, metric)}, per run")
            if drawn is not None:
                out[image_name(cell, metric, era)] = drawn
    return out
