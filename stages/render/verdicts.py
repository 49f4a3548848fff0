"""The verdict table of a comparison, and reports/compare.md. Pure."""
from __future__ import annotations

import math
import textwrap

from torchgate.core.metrics import BY_NAME, Rule, Unit, names
from torchgate.core.records.rows import CompareRecord, Contribution, Row
from torchgate.core.vocabulary import Verdict
from torchgate.render.markdown import (
    ORDER,
    markdown_table,
    mde,
    percent,
    pvalue,
    ratio_change,
    seconds,
    tally,
    value,
)

# Shown as a relative change, as their rule judges them.
RELATIVE = ("peak_bytes", *names(rule=Rule.BANDED))


def change(row: Row) -> str:
    if row.change is not None:
        return ratio_change(row.change.ratio, row.change.ci_low, row.change.ci_high)
    numbers = isinstance(row.base, (int, float)) and isinstance(row.now, (int, float))
    if numbers and row.base and row.metric in RELATIVE:
        return percent(row.now / row.base - 1)
    if numbers and row.base != row.now:
        return f"{value(row.metric, row.base)} → {value(row.metric, row.now)}"
    return ""


MOVED = (Verdict.REGRESSED, Verdict.IMPROVED)
FEW = 0.5        # below this share of the change, an attribution says it explains little


def compact(n: float) -> str:
    """A count per call as people read it: 2.56M, 840k, 312."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.0f}"


def attributed(row: Row) -> str:
    """Where a moved row's change went, in one line: the parts (functions with their
    libraries, operators, compile phases) with each one's share of the change, then the
    libraries; said where the parts shown explain less than half of it. "" for a row that
    did not move or has no attribution."""
    if row.verdict not in MOVED or not row.attribution:
        return ""
    total = (row.now - row.base if isinstance(row.now, (int, float))
             and isinstance(row.base, (int, float)) else 0.0)
    parts = [c for c in row.attribution if c.kind != "library"]
    if not total or not parts:
        return ""
    timed = BY_NAME[row.metric].unit == Unit.SECONDS if row.metric in BY_NAME else False

    def amount(x: float) -> str:
        return ("+" if x > 0 else "−") + (seconds(abs(x)) if timed else compact(abs(x)))
    kind = parts[0].kind
    said = [f"{c.change / total:.0%} `{c.what}`" + _about(c) for c in parts
            if c.change * total > 0][:4]
    against = [f"{amount(c.change)} `{c.what}`" + _about(c) for c in parts
               if c.change * total < 0]
    libraries = [f"{c.what} {amount(c.change)}" for c in row.attribution if c.kind == "library"]
    explained = sum(c.change for c in parts) / total
    line = f"where ({kind}s): {amount(total)}{'' if timed else ' a call'}: " + ", ".join(said)
    if against:
        line += "; against it " + ", ".join(against[:2])
    if libraries:
        line += "; by library " + ", ".join(libraries)
    if explained < FEW:
        line += (f"; the {kind}s shown explain {explained:.0%} of it"
                 + (" (the rest is spread over functions below 0.1 % of the count each)"
                    if kind == "function" else ""))
    return line


def _about(part: Contribution) -> str:
    """What a part's name leaves out: its library, that it is new or gone, its test."""
    said = [part.library] if part.library else []
    kept = " above 0.1 %" if part.kind == "function" else ""   # a function below it is not kept
    if part.kind != "library" and not part.base:
        said.append("new" + kept)
    elif part.kind != "library" and not part.now:
        said.append("gone" + kept.replace("above", "below"))
    elif part.p is not None:
        said.append(f"p {pvalue(part.p)}")
    return f" ({', '.join(said)})" if said else ""


def evidence(row: Row) -> str:
    parts = []
    if row.change is not None and row.change.mde is not None:
        parts.append(f"MDE {mde(row.change.mde)}")
    if row.change is not None and row.change.needed is not None:
        unit = "A/B pairs" if row.change.paired else "processes/side"
        parts.append(f"~{row.change.needed} {unit} to decide")
    if row.note:
        parts.append(row.note)
    if where := attributed(row):
        parts.append(where)
    return "; ".join(parts)


def effect(row: Row) -> float:
    """How far a row moved: |log ratio| of a tested change, else 0."""
    c = row.change
    return abs(math.log(c.ratio)) if c is not None and c.ratio > 0 else 0.0


def ordered(rows) -> list[Row]:
    return sorted(rows, key=lambda r: (ORDER.get(r.verdict, 99), r.cell, r.workload, r.mode,
                                       r.metric))


def by_effect(rows) -> list[Row]:
    """Most serious verdict first, and within a verdict the largest change first."""
    return sorted(rows, key=lambda r: (ORDER.get(r.verdict, 99), -effect(r), r.cell,
                                       r.workload, r.mode, r.metric))


def table(rows: list[Row]) -> str:
    """Every row, sorted by verdict and effect; EQUIVALENT rows folded under a summary line
    (they are the bulk of a quiet run and need no reading)."""
    def body(found: list[Row]) -> str:
        return markdown_table([
            [r.verdict, r.stage, r.cell, r.workload, r.mode, r.metric,
             value(r.metric, r.base), value(r.metric, r.now), change(r),
             pvalue(r.change.p if r.change else None),
             pvalue(r.change.p_adjusted if r.change else None),
             f"{r.change.n_base}/{r.change.n_now}" if r.change else "", evidence(r)]
            for r in by_effect(found)],
            ["verdict", "stage", "cell", "workload", "mode", "metric", "baseline", "now",
             "change [CI]", "p", "p adj.", "n", "evidence"])
    shown = [r for r in rows if r.verdict != Verdict.EQUIVALENT]
    folded = [r for r in rows if r.verdict == Verdict.EQUIVALENT]
    parts = [body(shown)] if shown or not folded else []
    if folded:
        parts.append(f"<details><summary>{len(folded)} EQUIVALENT (within their δ)</summary>"
                     f"\n\n{body(folded)}\n\n</details>")
    return "\n\n".join(parts)


# What a reviewer must look at: a change decided, or a unit that could not be compared.
CHANGED = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.FAILED, Verdict.NEW, Verdict.MISSING,
           Verdict.NOT_COMPARABLE)


def terse(result: CompareRecord, only_changed: bool = False, width: int = 100) -> str:
    """A line a unit, most serious first, within `width` columns (asv's and pyperf's
    `compare`): verdict, unit, metric, baseline → now, change [CI]; then the tally. The unit
    is workload and mode (the cell too where there are several), its workload cut first; a
    moved row's attribution is wrapped below it. The page (`page`) has the tests, p-values
    and evidence."""
    found = result.findings()
    shown = [r for r in by_effect(found) if not only_changed or r.verdict in CHANGED]
    cells = len({r.cell for r in found}) > 1
    lines = [[r.verdict, (r.cell if cells else "", r.workload, r.mode), r.metric,
              _moved(r), change(r) if r.change is not None or r.metric in RELATIVE else ""]
             for r in shown]
    head = ["verdict", ("", "unit", ""), "metric", "baseline → now", "change [CI]"]
    widths = [max(len(_unit(x) if isinstance(x, tuple) else str(x)) for x in column)
              for column in zip(head, *lines)]
    # Over the width, the unit's name gives way first (to 16), then the gaps (to one
    # space), then the name again, to its mode and four letters.
    gap = 2
    widths[1] -= max(0, min(_over(widths, gap, width), widths[1] - 16))
    if _over(widths, gap, width) > 0:
        gap = 1
    shortest = max(len(_unit((r.cell if cells else "", "abcd", r.mode))) for r in shown) \
        if shown else 0
    widths[1] -= max(0, min(_over(widths, gap, width), widths[1] - shortest))
    out = [(" " * gap).join(_unit(x, w) if isinstance(x, tuple) else _cell(str(x), w)
                            for x, w in zip(row, widths)).rstrip() for row in (head, *lines)]
    # Each moved row's attribution below it, indented, wrapped to the width.
    for i in reversed(range(len(shown))):
        if where := attributed(shown[i]):
            out[i + 2:i + 2] = textwrap.wrap(where, width, initial_indent="    ",
                                             subsequent_indent="      ",
                                             break_on_hyphens=False)
    left = len(found) - len(shown)
    if found and not cells:      # one cell: named once, above the table
        out.insert(0, f"cell {found[0].cell}")
    return "\n".join(out + [tally(r.verdict for r in found) + (
        f" ({left} unchanged not shown)" if left else "")])


def _over(widths: list[int], gap: int, width: int) -> int:
    return sum(widths) + gap * (len(widths) - 1) - width


def _unit(parts: tuple[str, str, str], width: int | None = None) -> str:
    """"cpu-fp32 chain compiled" in `width`: the workload's name cut, never the mode."""
    cell, workload, mode = parts
    text = " ".join(filter(None, parts))
    if width is None or len(text) <= width:
        return text if width is None else text.ljust(width)
    room = width - len(" ".join(filter(None, (cell, mode)))) - 1
    if room < 4:
        return _cell(text, width)
    return " ".join(filter(None, (cell, _cell(workload, room).rstrip(), mode))).ljust(width)


def _moved(row: Row) -> str:
    if isinstance(row.base, (int, float)) and isinstance(row.now, (int, float)):
        return f"{value(row.metric, row.base)} → {value(row.metric, row.now)}"
    return value(row.metric, row.now) if isinstance(row.now, (int, float)) else ""


def _cell(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[:width - 1] + "…"


# Every rule's wording lives once, in the judge's docstrings and reports/README.md; a page
# states its own numbers and links there (a page lives in reports/<machine>/).
VERDICTS_LINK = "[reports/README.md, Verdicts](../README.md#verdicts)"


def method(result: CompareRecord) -> str:
    paired = any(r.change is not None and r.change.paired for r in result.rows)
    welch = any(r.change is not None and not r.change.paired for r in result.rows)
    trimmed = any(r.change is not None and "trimmed" in r.change.test for r in result.rows)
    pairs = "a paired t-test on the log ratio of each lock-step A/B pair" + (
        ", trimmed from 8 pairs on (12 where a pair shares its cores): the n // 8 highest and "
        "lowest ratios left out (Yuen's test), so that one process in a slow state does not "
        "decide" if trimmed else "")
    tests = [t for t, used in ((pairs, paired), ("Welch's t-test on log values", welch))
             if used]
    test = " and ".join(tests) or "Welch's t-test on log values"
    a, k = result.alpha, result.looks
    budget = (f"REGRESSED/IMPROVED at α = {a:g} when decided on processes no interim look had "
              f"seen (adaptive sampling looks up to {k} times and always confirms an interim "
              f"regression on a fresh batch), else at α/{k}; EQUIVALENT at α/{k} = {a / k:g}, "
              f"from its {100 * (1 - 2 * a / k):g} % interval" if k > 1 else
              f"REGRESSED/IMPROVED at α = {a:g}; EQUIVALENT from the {100 * (1 - 2 * a):g} % "
              "interval")
    moderated = "; ".join(f"{metric}: prior SD {100 * math.sqrt(p.variance):.2g} % with "
                          f"{_df(p.df)} degrees of freedom over {p.units} units"
                          for metric, p in sorted(result.priors.items()))
    return (f"Baseline: `reports/` at git `{result.baseline}`. Timings compare one summary per "
            f"worker process ({test}), each unit's process variance moderated across the run's "
            f"units of the same metric" + (f" ({moderated})" if moderated else "")
            + f"; the run's {result.tests} tested metrics are decided together: {budget}. "
            f"MDE: the slowdown that would be caught with {result.power:.0%} power. What each "
            f"verdict means, and how it is decided: {VERDICTS_LINK}.")


def _df(df: float) -> str:
    return "∞" if math.isinf(df) else f"{df:.1f}"


def page(result: CompareRecord, title: str, extra: str = "", footer: str | None = None) -> str:
    lines = [f"# {title}", ""]
    lines += [f"> {note}" for note in result.notes] + ([""] if result.notes else [])
    found = result.findings()
    lines += [f"**{tally(r.verdict for r in found)}**", "", table(found), ""]
    if extra:
        lines += [extra, ""]
    lines += [method(result) if footer is None else footer, ""]
    return "\n".join(lines)
