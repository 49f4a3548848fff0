"""reports/<machine>/migration/<name>.md: one cell against another (core.records.migration),
one line per workload first, then the checklist, speed and cost, whether it runs there and
whether its results are right; and its picture. Every ratio is target / source. Pure."""
from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from torchgate.core.metrics import label as metric_label
from torchgate.core.records.migration import (
    BUSY_LEFT_OUT,
    RUNS,
    Cost,
    MigrationRecord,
    ModeMigration,
    Ratio,
    SideInfo,
    WorkloadMigration,
)
from torchgate.render.markdown import (
    markdown_table,
    nbytes,
    pictures_note,
    seconds,
    three,
    value,
)
from torchgate.render.plots import BASE, NOW, png

LABELS = {"per_item_s": "steady state per item", "first_call_s": "first call (cold)",
          "first_call_warm_s": "first call (warm)", "warmup_s": "warm-up",
          "latency_p50_s": "latency p50", "latency_p99_s": "latency p99",
          "peak_bytes": "peak memory"}
PICTURE = "throughput.png"


def num(x: float | None) -> str:
    """Three significant figures, thousands with separators (854,000), never an exponent
    above 1."""
    if x is None or not math.isfinite(x):
        return "not measured" if x is None else "NaN/Inf"
    return f"{float(f'{x:.3g}'):,.0f}" if abs(x) >= 1000 else three(x)


def times(r: float) -> str:
    return f"{three(r)}×"


def change(r: float) -> str:
    """A ratio as a change in percent, three significant figures: −44.0 %."""
    v = (r - 1) * 100
    return ("+" if v >= 0 else "−") + f"{three(abs(v))} %"


def usd(x: float | None) -> str:
    return "no price" if x is None else f"${three(x)}"


def _metric(metric: str, v: float | None) -> str:
    if v is None:
        return ""
    return nbytes(v) if metric == "peak_bytes" else seconds(v)


def throughput(r: Ratio) -> str:
    """The per-item time ratio as a throughput ratio: 1.80× [1.60, 2.10]; an interval that
    spans more than a hundredfold is said to decide nothing, not printed as if it did."""
    if not informative(r.low, r.high):
        return (f"{times(1 / r.ratio)} (its interval spans over {UNINFORMATIVE:.0f}x: "
                f"{r.n_source} / {r.n_target} processes decide nothing)")
    return f"{times(1 / r.ratio)} [{three(1 / r.high)}, {three(1 / r.low)}]"


def cost_change(c: Cost) -> str:
    if not informative(c.low, c.high):
        return f"{change(c.ratio)} (interval uninformative)"
    return f"{change(c.ratio)} [{change(c.low)}, {change(c.high)}]"


def break_even(c: Cost) -> str:
    if not informative(c.break_even_low, c.break_even_high):
        return f"${three(c.break_even)}/h (interval uninformative)"
    return (f"${three(c.break_even)}/h [{three(c.break_even_low)}, "
            f"{three(c.break_even_high)}]")


def mode_line(m: ModeMigration) -> str:
    """eager 1.80× [1.60, 2.10] the throughput, cost per item −44.0 % [...], cheaper below
    $3.10/h."""
    if m.target.status != RUNS or m.source.status != RUNS:
        side = "there" if m.target.status != RUNS else "on the source"
        return f"{m.mode} {m.target.status if side == 'there' else m.source.status} {side}"
    per_item = m.timing("per_item_s")
    if per_item is None or not per_item.tested:
        return f"{m.mode} runs, throughput not tested ({untested(m)})"
    parts = [f"{m.mode} {throughput(per_item)} the throughput"]
    if m.cost is not None and m.cost.ratio is not None:
        parts.append(f"cost per item {cost_change(m.cost)}")
    if m.cost is not None and m.cost.break_even is not None:
        parts.append(f"cheaper below ${three(m.cost.break_even)}/h")
    return ", ".join(parts)


def untested(m: ModeMigration) -> str:
    """Why a mode's throughput was not tested: each side's processes kept, and what left the
    others out (the busy rule, failures), with what to do."""
    said = []
    short = [(role, side) for role, side in (("source", m.source), ("target", m.target))
             if side.processes < 2]
    if len(short) == 2 and (m.source.processes, m.source.reason) == (m.target.processes,
                                                                      m.target.reason):
        short = [("either side", m.source)]         # one reason, said once
    for role, side in short:
        where = role if role == "either side" else f"the {role}"
        said.append(f"{side.processes} process{'es' * (side.processes != 1)} kept on "
                    f"{where}" + (f": {side.reason}" if side.reason else ""))
    return "; ".join(said) + ("; measure again on a quiet machine" if any(
        s.reason and BUSY_LEFT_OUT in s.reason for s in (m.source, m.target)) else
        "" if said else "fewer than 2 processes a side")


UNINFORMATIVE = 100.0     # an interval whose ends are this far apart decides nothing


def informative(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and low > 0 and high / low < UNINFORMATIVE


def overall(record: MigrationRecord) -> str:
    """The pair in one line: move, do not move (a workload that does not run or pass its
    numerics there, or is shown slower), or not decided (a mode whose throughput no test
    decided), each with the units that say so. Speed per item only: the cost is its own
    section, at prices the config gives."""
    broken, slower, faster, open_ = [], [], [], []
    for w in record.workloads:
        if w.verdict != RUNS:
            broken.append(f"{w.workload} ({w.verdict})")
            continue
        for m in w.modes:
            unit = f"{w.workload} {m.mode}"
            if m.target.numerics not in (None, "PASS"):
                broken.append(f"{unit} (numerics {m.target.numerics} there)")
                continue
            r = m.timing("per_item_s")
            if r is None or not r.tested or not informative(r.low, r.high):
                open_.append(unit)
            elif r.high < 1:
                faster.append(f"{unit} {times(1 / r.ratio)}")
            elif r.low > 1:
                slower.append(f"{unit} {times(1 / r.ratio)}")
            else:
                open_.append(unit)

    def said(units: list[str]) -> str:
        return ", ".join(units[:4]) + (f" and {len(units) - 4} more" if len(units) > 4 else "")
    if broken:
        return f"**Do not move yet**: {said(broken)}."
    if slower:
        return (f"**Do not move for speed**: slower there: {said(slower)}"
                + (f"; faster: {said(faster)}" if faster else "") + ".")
    if open_:
        return (f"**Not decided**: no test decided {said(open_)} (more processes, a quieter "
                f"machine)" + (f"; faster there: {said(faster)}" if faster else "") + ".")
    if not faster:
        return "**Not decided**: nothing was compared."
    return f"**Move**: every workload runs there, passes its numerics and is faster: " \
           f"{said(faster)}."


def one_line(w: WorkloadMigration) -> str:
    """"mlp_train: runs; eager 1.80× [...] the throughput, ...; compiled ..."."""
    if w.verdict != RUNS:
        return f"- **{w.workload}**: {w.verdict}" + (f": {w.reason}" if w.reason else "")
    lines = [(m.mode, mode_line(m)) for m in w.modes if m.target.status != "not measured"]
    whys = {line.removeprefix(mode) for mode, line in lines}
    if len(lines) > 1 and len(whys) == 1 and "not tested" in lines[0][1]:
        said = " and ".join(mode for mode, _ in lines) + whys.pop().replace(" runs,", " run,", 1)
    else:
        said = "; ".join(line for _, line in lines)
    return f"- **{w.workload}**: runs; {said}" + (f" ({w.reason})" if w.reason else "")


def side_line(role: str, s: SideInfo) -> str:
    facts = [s.where] + [f"torch {s.torch}"] * bool(s.torch) + [s.hardware] * bool(s.hardware)
    facts += [f"${three(s.price_per_hour)}/h" if s.price_per_hour else "no price_per_hour"]
    if s.status is None:
        facts.append("no bench record")
    elif s.status != "OK":
        facts.append(f"{s.status}: {s.reason}")
    if s.run_spread:
        facts.append(f"run-to-run variance from {s.run_spread}")
    return f"- {role}: **{s.label}** ({'; '.join(facts)})"


def checklist(workloads: tuple[WorkloadMigration, ...]) -> list[str]:
    if not workloads or not workloads[0].checklist:
        return []
    items = [c.item for c in workloads[0].checklist]
    rows = [[w.workload, *(c.mark for c in w.checklist)] for w in workloads]
    why = [f"- {w.workload}, {c.item}: {c.mark}" + (f" ({c.detail})" if c.detail else "")
           for w in workloads for c in w.checklist]
    return ["## The checklist", "", "On the target, per workload: ✓, ✗ with the reason, or "
            "not measured.", "", markdown_table(rows, ["workload", *items]), "",
            "<details><summary>Each item's reason</summary>", "", *why, "", "</details>", ""]


def speed_and_cost(workloads: tuple[WorkloadMigration, ...]) -> list[str]:
    rows = []
    for w in workloads:
        for m in w.modes:
            r = m.timing("per_item_s")
            if r is None:
                continue
            c = m.cost or Cost(None, None)
            rows.append([w.workload, m.mode, f"{num(m.source.items_per_s)} → "
                         f"{num(m.target.items_per_s)}", throughput(r) if r.tested else
                         f"not tested: {untested(m)}",
                         f"{usd(c.source_usd_per_million)} → {usd(c.target_usd_per_million)}"
                         if c.source_usd_per_million or c.target_usd_per_million else "",
                         cost_change(c) if c.ratio is not None else "",
                         break_even(c) if c.break_even is not None else ""])
    if not rows:
        return []
    return ["## Is it faster? Is it cheaper?", "",
            "Items per second and $ per million items (medians over the processes kept); "
            "throughput and cost per item as target / source with the interval; break-even: "
            "the target's price per hour at which its cost per item equals the source's "
            "(source price × throughput ratio).", "",
            markdown_table(rows, ["workload", "mode", "items/s", "throughput [CI]",
                                  "$ / M items", "cost per item [CI]",
                                  "break-even price [CI]"]), ""]


def timings(workloads: tuple[WorkloadMigration, ...]) -> list[str]:
    rows = [[w.workload, m.mode, LABELS.get(r.metric, r.metric), _metric(r.metric, r.source),
             _metric(r.metric, r.target),
             f"{times(r.ratio)} [{three(r.low)}, {three(r.high)}]" if r.tested else "",
             f"{r.n_source} / {r.n_target}", times(r.widened) if r.widened else ""]
            for w in workloads for m in w.modes for r in m.timings]
    if not rows:
        return []
    return ["## Timings, target / source", "",
            "Medians over each side's processes; the ratio of geometric means with its "
            "interval; widened: the interval's width over what the processes' spread alone "
            "gives (the run-to-run variance of sides measured apart).", "",
            markdown_table(rows, ["workload", "mode", "timing", "source", "target",
                                  "ratio [CI]", "processes", "widened"]), ""]


def _counts(m: ModeMigration, field: str) -> str:
    """"source / target" of a count, blank where neither side has one (eager)."""
    found = [getattr(s, field) for s in (m.source, m.target)]
    return "" if found == [None, None] else " / ".join("" if v is None else str(v)
                                                       for v in found)


def runs_there(workloads: tuple[WorkloadMigration, ...]) -> list[str]:
    rows, shapes, ops = [], [], []
    for w in workloads:
        for m in w.modes:
            rows.append([w.workload, m.mode, m.source.status + (f": {m.source.reason}"
                                                              if m.source.reason else ""),
                         m.target.status + (f": {m.target.reason}" if m.target.reason else ""),
                         _counts(m, "graph_breaks"), _counts(m, "recompiles"),
                         "; ".join(m.new_reasons[:3])])
            for role, s in (("source", m.source), ("target", m.target)):
                if s.shape_recompiles:
                    shapes.append(f"- {w.workload} {m.mode}, {role}: recompiles per shape "
                                  + ", ".join(f"{k} {r}" for k, r in s.shape_recompiles))
        for role, o in (("source", w.source_ops), ("target", w.target_ops)):
            if o.status is None:
                continue
            said = (f"{o.ops} op{'s' * (o.ops != 1)} on {o.device}" if o.status == "OK" else
                    f"{o.status}: {o.error}")
            said += "; off the device: " + ", ".join(o.fallbacks) if o.fallbacks else ""
            said += "; custom ops: " + ", ".join(o.extensions) if o.extensions else ""
            ops.append(f"- {w.workload}, {role}: {said}")
        if w.new_ops:
            ops.append(f"- {w.workload}, ops the target runs that the source did not: "
                       + ", ".join(f"`{op}`" for op in w.new_ops[:8])
                       + (f" and {len(w.new_ops) - 8} more" if len(w.new_ops) > 8 else ""))
    work = [line for w in workloads for m in w.modes if (line := work_line(w.workload, m))]
    return ["## Does it run there?", "",
            markdown_table(rows, ["workload", "mode", "source", "target",
                                  "graph breaks (source / target)", "recompiles",
                                  "new reasons on the target"]), "", *shapes,
            *([""] if shapes else []), *ops, *([""] if ops else []),
            *(["The work of one call, counted (source → target):", "", *work, ""]
              if work else [])]


def work_line(workload: str, m: ModeMigration) -> str:
    """ "- chain eager: aten ops per call 40 → 40; host instructions per call 4,065,270 →
    3,812,004 (−6.2 %)": what the move changes in the work, each count where a side has it."""
    said = []
    for name in dict.fromkeys([*m.source.work, *m.target.work]):
        a, b = m.source.work.get(name), m.target.work.get(name)
        moved = f" ({change(b / a)})" if a and b and a != b else ""
        said.append(f"{metric_label(name)} {value(name, a) or 'not counted'} → "
                    f"{value(name, b) or 'not counted'}{moved}")
    return f"- {workload} {m.mode}: " + "; ".join(said) if said else ""


def _error(v: float | None) -> str:
    return "" if v is None else f"{v:.3g}"


def results(workloads: tuple[WorkloadMigration, ...]) -> list[str]:
    rows = [[w.workload, m.mode, _error(m.source.rel_l2), _error(m.target.rel_l2),
             times(m.error_ratio) if m.error_ratio else "",
             f"{m.source.numerics or ''} / {m.target.numerics or ''}",
             _error(m.target.tolerance),
             f"{m.source.compiled_vs_eager or ''} / {m.target.compiled_vs_eager or ''}"
             if m.source.compiled_vs_eager or m.target.compiled_vs_eager else ""]
            for w in workloads for m in w.modes
            if m.source.numerics is not None or m.target.numerics is not None]
    if not rows:
        return []
    return ["## Are the results right?", "",
            "Each side's error against the float64 reference (rel. L2, the worst output), "
            "their ratio, each side's numerics check, the target precision's tolerance, and "
            "compiled against eager (dynamo's rule) on each side.", "",
            markdown_table(rows, ["workload", "mode", "error (source)", "error (target)",
                                  "ratio", "check (source / target)", "target tolerance",
                                  "compiled vs eager"]), ""]


def page(record: MigrationRecord, picture: str | None) -> str:
    """The page; `picture`: the path of its picture from the page, where one was drawn."""
    lines = [f"# Is it worth moving? `{record.name}`: {record.source.label} → "
             f"{record.target.label}", "", side_line("From", record.source),
             side_line("To", record.target), ""]
    lines += [one_line(w) for w in record.workloads] + ["", overall(record), ""]
    lines += [f"> {n}" for n in record.notes] + [""]
    lines += checklist(record.workloads)
    lines += speed_and_cost(record.workloads)
    if picture:
        lines += [pictures_note(f"migration@{record.name}"), "",
                  f"![Throughput and cost per item, source beside target]({picture})", ""]
    lines += timings(record.workloads)
    lines += runs_there(record.workloads)
    lines += results(record.workloads)
    retuned = [f"- {w.workload}: {w.retuned}" for w in record.workloads if w.retuned]
    if retuned:
        lines += ["## Re-tuned", "", "Each side at its own recommended sweep point "
                  "(source → target):", "", *retuned, ""]
    return "\n".join(lines)


def picture_rows(record: MigrationRecord) -> list[tuple[str, object, object, str | None]]:
    """(label, its per-item ratio, its cost, why it is not drawn) per workload and mode. One
    without both intervals keeps its row, saying why, so that the picture never reads as if
    only the drawn ones had been selected."""
    found = []
    for w in record.workloads:
        for m in w.modes or (None,):
            r = m.timing("per_item_s") if m is not None else None
            drawn = r is not None and r.source_low is not None and r.target_low is not None
            found.append((f"{w.workload} · {m.mode}" if m else w.workload, r,
                          m.cost if m else None,
                          None if drawn else w.verdict if w.verdict != RUNS else "not tested"))
    return found


def figure(record: MigrationRecord) -> bytes | None:
    """Per workload and mode, throughput and cost per item: the source (grey) beside the
    target (blue), each a point with its own interval."""
    found = picture_rows(record)
    if all(why for *_, why in found):
        return None
    priced = any(c is not None and c.source_price and c.target_price
                 for _, _, c, why in found if why is None)
    fig = Figure(figsize=(9 if priced else 5, 1.4 + 0.55 * len(found)))
    panels = [("items / s", lambda x, c, role: 1 / x)]
    if priced:
        panels.append(("$ per million items", lambda x, c, role: (
            (c.source_price if role == "source" else c.target_price) or math.nan)
            / 3600 * 1e6 * x))
    for i, (label, scale) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for y, (_, r, c, why) in enumerate(found):
            if why is not None:
                ax.annotate(why, (0.02, y), xycoords=("axes fraction", "data"), va="center",
                            fontsize=7, color="#888888", style="italic")
                continue
            for role, low, high, offset, colour in (
                    ("source", r.source_low, r.source_high, -0.15, BASE),
                    ("target", r.target_low, r.target_high, 0.15, NOW)):
                xs = sorted(scale(v, c, role) for v in (low, high))
                ax.plot(xs, [y + offset] * 2, color=colour, lw=2)
                # the geometric mean: the middle of its interval on the log scale
                ax.plot([scale(math.sqrt(low * high), c, role)], [y + offset], "o",
                        color=colour, ms=5)
        ax.set_xscale("log")
        ax.set_yticks(range(len(found)), [name for name, *_ in found], fontsize=8)
        ax.set_ylim(len(found) - 0.5, -0.5)
        ax.grid(axis="x", color="#eeeeee")
        ax.set_xlabel(label, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    fig.legend(handles=[Line2D([], [], marker="o", color=BASE, label=record.source.label),
                        Line2D([], [], marker="o", color=NOW, label=record.target.label)],
               loc="upper right", fontsize=7, frameon=False)
    fig.suptitle(f"{record.source.label} → {record.target.label}: each side's geometric mean "
                 "and interval", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return png(fig)
