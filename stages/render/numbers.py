"""The numbers a reader wants first: per cell, every workload and mode with its steady state,
throughput, cost, first call, warm-up and peak memory (its judge.summary), and the change
against the baseline. Regressions, failures and possible slowdowns first, then by effect.
Pure."""
from __future__ import annotations

from torchgate.core.metrics import HEADLINE, Rule, names
from torchgate.core.metrics import label as metric_label
from torchgate.core.records.dotted import MISSING, get
from torchgate.core.records.rows import Row
from torchgate.core.vocabulary import BAD, Status, Verdict
from torchgate.judge.results import CellSummary, UnitSummary
from torchgate.render.markdown import markdown_table, nbytes, seconds
from torchgate.render.steps import cell_lines
from torchgate.render.verdicts import attributed, change
from torchgate.render.verdicts import effect as row_effect

# The environment fields a reader recognises, in the order they matter for an upgrade.
HEADLINE_FIELDS = (("torch.version", "torch"), ("torch.cuda", "CUDA"),
                   ("torch.cudnn", "cuDNN"), ("hardware.nvidia_driver", "driver"),
                   ("python.version", "Python"), ("hardware.gpu_names", "GPU"),
                   ("hardware.cpu_model", "CPU"), ("torch.num_threads", "threads"))
COUNTED = names(rule=Rule.COUNTED)
def environment_change(changes: list, note: str | None, now: dict | None = None,
                       sides: str | None = None, see: str = "[env/env.md](env/env.md)") -> str:
    """One line: "torch 2.13.0+cpu → 2.14.1; Python 3.11.7 → 3.12.1 (and 12 more fields)",
    against the baseline, or between the `sides` a what-if measured ("this environment → the
    candidate"); with nothing to diff against (`note` says why), this run's own versions."""
    if note:
        mine = [f"{label} {_shown(get(now, key))}" for key, label in HEADLINE_FIELDS
                if now and get(now, key) not in (None, [], "")]
        return f"Environment: {', '.join(mine)} ({note})." if mine else f"Environment: {note}."
    if not changes:
        return f"Environment: no field differs ({sides})." if sides else \
            "Environment: unchanged against the baseline."
    found = {key: (a, b) for key, a, b in changes}
    named = [f"{label} {_shown(found[key][0])} → {_shown(found[key][1])}"
             for key, label in HEADLINE_FIELDS if key in found]
    rest = len(changes) - len(named)
    said = [sides] if sides else []
    if rest:
        said.append(f"{'and ' if named else ''}{rest} more field{'s' * (rest != 1)}, see {see}")
    return f"Environment: {'; '.join(named) or 'changed'}" + \
        (f" ({'; '.join(said)})." if said else ".")


def _shown(v) -> str:
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v)) or "none"
    return "none" if v is None or v is MISSING else str(v)


def _rank(rows: list[Row]) -> int:
    """0: regressed or failed, 1: a possible slowdown, 2: anything else."""
    if any(r.verdict in BAD for r in rows):
        return 0
    return 1 if any(r.possible_slowdown for r in rows) else 2


def left_out(n: UnitSummary) -> str:
    """ "2 of 4 processes left out (busy)": the row's numbers are the others'."""
    total = n.processes_kept + n.processes_busy
    return f"{n.processes_busy} of {total} processes left out (busy)" if n.processes_busy else ""


def effect(rows: list[Row]) -> float:
    """The largest tested change of a unit, as |log ratio| (0 when none was tested)."""
    return max(map(row_effect, rows), default=0.0)


def _flags(rows: list[Row]) -> str:
    """What a unit's verdicts say beyond the steady state's own column."""
    said = []
    for r in sorted(rows, key=lambda r: r.metric):
        if r.metric == HEADLINE.name or not (r.verdict in (*BAD, Verdict.IMPROVED)
                                          or r.possible_slowdown):
            continue    # the rest is in compare.md; this column is what needs a look
        label = metric_label(r.metric)
        moved = change(r)
        text = f"{label} {moved}" if moved and r.metric != "status" else r.note or label
        if r.metric in COUNTED and r.note:   # with what moved
            text = f"{label} {moved}".strip() + f" ({r.note})"
        if where := attributed(r):
            text += f" ({where})"
        verdict = "possible slowdown" if r.possible_slowdown else r.verdict
        said.append(f"**{verdict}** {text}" if r.verdict in BAD else f"{verdict}: {text}")
    return "; ".join(said)


def cell_table(summary: CellSummary, rows: list[Row]) -> str:
    """One row per workload and mode of the cell, the units that need a look first."""
    units = []
    for key in summary.keys():
        mine = [r for r in rows if r.cell == key.cell and r.workload == key.workload
                and r.mode == key.mode and r.stage == "bench"]
        units.append((_rank(mine), -effect(mine), key.workload, key.mode, mine))
    body = []
    tails = any(summary.units[key].latency_p50_s for key in summary.keys())
    counted = any(summary.units[key].value("instructions") for key in summary.keys())
    for _, _, workload, mode, mine in sorted(units):
        n = summary.unit(workload, mode)
        steady = next((r for r in mine if r.metric == HEADLINE.name), None)
        verdict = "" if steady is None else (
            "possible slowdown" if steady.possible_slowdown else steady.verdict)
        moved = change(steady) if steady is not None else ""
        also = "; ".join(filter(None, [attributed(steady) if steady is not None else "",
                                       _flags(mine), left_out(n)]))
        if not n.measured or n.too_busy:
            skipped = next((r for r in mine if r.verdict == Verdict.SKIPPED), None)
            why = "FAILED" if n.failures else "busy machine" if n.processes_busy else \
                "SKIPPED" if skipped else "not measured"
            body.append([workload, mode, why, "", "", "", "", "", *[""] * tails,
                         *[""] * counted, "", also or (n.failures[0] if n.failures else "")
                         or (skipped.note if skipped else "")])
            continue
        body.append([
            workload, mode, seconds(n.steady_s),
            f"{moved} {verdict}".strip() if moved else verdict,
            per_second(n), _dollars(n.usd_per_million),
            _first_call(n), seconds(n.warmup_s), *[_tail(n)] * tails,
            *[_instructions(n, mine)] * counted,
            nbytes(n.peak_bytes) if n.peak_bytes is not None else "", also])
    return markdown_table(body, cell_columns(tails, counted))


def cell_columns(tails: bool, counted: bool) -> list[str]:
    """The columns of a cell's table: tail latency where a unit measured it, host
    instructions where a unit was counted."""
    return ["workload", "mode", "steady state", "change [CI]", "items/s", "$ / M items",
            "first call (cold / warm)", "warm-up", *["latency p50 / p99"] * tails,
            *["host instructions (change)"] * counted, "peak memory", "also"]


def _instructions(n: UnitSummary, rows: list[Row]) -> str:
    """A call's host instructions, with their change where the baseline counted them too."""
    count = n.value("instructions")
    found = next((r for r in rows if r.metric == "instructions"), None)
    moved = change(found) if found is not None and found.base is not None else ""
    return "" if count is None else f"{count:,}" + (f" ({moved})" if moved else "")


def _tail(n: UnitSummary) -> str:
    p50, p99 = n.latency_p50_s, n.latency_p99_s
    return "" if p50 is None else f"{seconds(p50)} / {seconds(p99)}"


def _first_call(n: UnitSummary) -> str:
    """The first call with cold compile caches, and with warm ones where measured."""
    cold, warm = n.first_call_s, n.first_call_warm_s
    if warm is None:
        return seconds(cold)
    return f"{seconds(cold) if cold is not None else '–'} / {seconds(warm)}"


def per_second(n: UnitSummary) -> str:
    """Items per second, named where the workload says what an item is: "1,234 tokens/s"."""
    count = _count(n.items_per_s)
    return f"{count} {n.item}s/s" if count and n.item else count


def _count(v: float | None) -> str:
    return "" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _dollars(v: float | None) -> str:
    return "" if v is None else f"${v:.3g}" if v < 1000 else f"${v:,.0f}"


def numbers_section(bench: dict[str, CellSummary], rows: list[Row]) -> list[str]:
    """`## Numbers`: a table per cell; the cell whose units need a look first comes first."""
    if not bench:
        return []
    lines = ["## Numbers", "",
             "Medians over this run's worker processes. Change: against the baseline, with its "
             "confidence interval, as the test estimates it: the ratio of the geometric means "
             "of the processes it compared (in lock-step, the pairs it used), which "
             "[compare.md](compare.md) shows beside it; a median here may differ from those. "
             "Cost: the device's `price_per_hour` over the throughput.",
             ""]
    for cell in sorted(bench, key=lambda c: (_rank([r for r in rows if r.cell == c]), c)):
        summary = bench[cell]
        if summary.status != Status.OK:     # a device not present, a backend not registered
            lines += [f"### `{cell}`", "", f"{summary.status}: {summary.reason}", ""]
            continue
        extra = cell_lines(summary)
        lines += [f"### `{cell}`", "", cell_table(summary, rows), "",
                  *([*extra, ""] if extra else [])]
    return lines
