"""Sweeps in the summary: per cell, each swept workload and mode as a curve (throughput, latency,
peak memory and cost against the swept values), the recommended point under the documented
rule, and how the recommendation moved against the baseline. Table and PNG. Pure."""
from __future__ import annotations

from dataclasses import dataclass

from matplotlib.figure import Figure

from stages.core.config.settings import Recommend
from stages.judge.summary import BASELINE, NOW, CellSummary, UnitSummary
from stages.render.markdown import markdown_table, nbytes, seconds
from stages.render.plots import png


@dataclass(frozen=True)
class Point:
    unit: str
    values: tuple[tuple, ...]         # (("batch", 64), ("threads", 2))
    numbers: UnitSummary              # its judge.summary (not measured: failed)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values)


def curves(summary: CellSummary, arm: str = NOW) -> dict[tuple[str, str], list[Point]]:
    """(workload, mode) -> its sweep's points in one arm, in the order of their values."""
    found: dict[tuple[str, str], list[Point]] = {}
    for key in summary.keys(arm):
        n = summary.units[key]
        if n.family is not None:
            found.setdefault((n.family, key.mode), []).append(Point(key.workload, n.point, n))
    return {key: sorted(points, key=lambda p: [(k, _order(v)) for k, v in p.values])
            for key, points in found.items()}


def _order(v) -> tuple:
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


def why_not(p: Point, rule: Recommend) -> str | None:
    """Why a point cannot be recommended, or None."""
    n = p.numbers
    if not n.measured:
        return "not measured"
    if rule.max_peak_mib is not None and (n.peak_bytes or 0) > rule.max_peak_mib * 2 ** 20:
        return f"over {rule.max_peak_mib:g} MiB"
    if rule.max_latency_ms is not None and n.steady_s * 1e3 > rule.max_latency_ms:
        return f"over {rule.max_latency_ms:g} ms"
    return None


def recommended(points: list[Point], rule: Recommend) -> Point | None:
    """The lowest cost per million items within the limits (the highest throughput where the
    device has no price: the same order)."""
    fit = [p for p in points if why_not(p, rule) is None and p.numbers.items_per_s]
    return max(fit, key=lambda p: p.numbers.items_per_s, default=None)


def recommendation_line(cell: str, workload: str, mode: str, now: Point | None,
                        base: Point | None, had_base: bool) -> str:
    """"best on cpu-fp32 mlp_train eager: batch=64 → batch=128 ($0.02 per M items)"."""
    where = f"`{cell}` {workload} {mode}"
    if now is None:
        return f"- {where}: no point fits the limits (`recommend`)."
    cost = now.numbers.usd_per_million
    price = f" (${cost:.3g} per M items)" if cost else \
        f" ({now.numbers.items_per_s:,.0f} items/s)"
    if not had_base:
        return f"- {where}: **{now.label}**{price}."
    if base is None:
        return f"- {where}: **{now.label}**{price}; the baseline had no point within the limits."
    if base.label == now.label:
        return f"- {where}: **{now.label}**{price}, as in the baseline."
    return f"- {where}: {base.label} → **{now.label}**{price}."


def curve_table(points: list[Point], best: Point | None, rule: Recommend) -> str:
    rows = []
    for p in points:
        n = p.numbers
        cost = n.usd_per_million
        rows.append([p.label + (" ◀" if p is best else ""),
                     seconds(n.steady_s) if n.measured else "not measured",
                     f"{n.items_per_s:,.0f}" if n.items_per_s else "",
                     nbytes(n.peak_bytes) if n.peak_bytes is not None else "",
                     f"${cost:.3g}" if cost else "", why_not(p, rule) or ""])
    return markdown_table(rows, ["point", "steady state (one call)", "items/s",
                                 "peak memory", "$ / M items", "outside the limits"])


def sweep_figure(cell: str, found: dict[tuple[str, str], list[Point]],
                 best: dict[tuple[str, str], Point | None]) -> bytes | None:
    """Items/s against the first swept parameter, one line per value of the others; the
    recommended point circled."""
    panels = [(key, points) for key, points in found.items()
              if any(p.numbers.measured for p in points)]
    if not panels:
        return None
    fig = Figure(figsize=(4.6 * len(panels), 3.6))
    for i, ((workload, mode), points) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        axis = points[0].values[0][0]
        lines: dict[tuple, list[Point]] = {}
        for p in points:
            lines.setdefault(tuple(kv for kv in p.values if kv[0] != axis), []).append(p)
        numeric = all(isinstance(dict(p.values)[axis], (int, float)) for p in points)
        for rest, mine in lines.items():
            xs = [dict(p.values)[axis] for p in mine if p.numbers.measured]
            ys = [p.numbers.items_per_s for p in mine if p.numbers.measured]
            label = ", ".join(f"{k}={v}" for k, v in rest) or None
            ax.plot(xs if numeric else list(map(str, xs)), ys, "o-", ms=4, label=label)
        pick = best.get((workload, mode))
        if pick is not None:
            x = dict(pick.values)[axis]
            ax.plot([x if numeric else str(x)], [pick.numbers.items_per_s], "o", ms=12,
                    mfc="none", mec="#c62828", mew=2, label="recommended")
        if numeric and min(dict(p.values)[axis] for p in points) > 0:
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({dict(p.values)[axis] for p in points}),
                          [str(v) for v in sorted({dict(p.values)[axis] for p in points})])
        ax.set_xlabel(axis, fontsize=8)
        ax.set_ylabel("items/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_title(f"{workload} · {mode}", fontsize=9)
        ax.legend(fontsize=7, frameon=False)
        ax.grid(color="#eeeeee")
    fig.suptitle(f"{cell}: throughput across the sweep", fontsize=10)
    fig.tight_layout()
    return png(fig)


def sweeps_section(bench: dict[str, CellSummary], rule: Recommend,
                   images: dict[str, str]) -> list[str]:
    """`## Sweeps` of the summary; `bench`: each cell's judge.summary, the baseline's arm
    included; `images`: cell -> path of its sweep picture."""
    lines = []
    for cell, summary in sorted(bench.items()):
        found = curves(summary)
        if not found:
            continue
        before = curves(summary, BASELINE)
        lines += [f"### `{cell}`", ""]
        for (workload, mode), points in found.items():
            best = recommended(points, rule)
            old = before.get((workload, mode))
            lines += [recommendation_line(cell, workload, mode, best,
                                          recommended(old, rule) if old else None,
                                          old is not None), "",
                      curve_table(points, best, rule), ""]
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
            "Each swept value is its own unit (compared and judged above). Recommended (◀): the "
            "lowest cost per million items, the highest throughput where the device has no "
            "price, " + (f"within {' and '.join(limits)}" if limits else
                         "with no limits set (`recommend.max_peak_mib`, "
                         "`recommend.max_latency_ms`)") + "; the arrow shows how it moved "
            "against the baseline.", ""] + lines


def sweep_pictures(bench: dict[str, CellSummary], rule: Recommend) -> dict[str, bytes]:
    """cell -> its sweep picture, for the cells that swept something."""
    out = {}
    for cell, summary in sorted(bench.items()):
        found = curves(summary)
        drawn = sweep_figure(cell, found, {k: recommended(p, rule) for k, p in found.items()})
        if drawn is not None:
            out[cell] = drawn
    return out
