"""The verdict table of a comparison, and reports/compare.md. Pure."""
from __future__ import annotations

from stages.core.rows import Row
from stages.judge.verdicts import Comparison
from stages.render.markdown import (ORDER, markdown_table, mde, percent, pvalue, ratio_change,
                                    tally, value)


def change(row: Row) -> str:
    if row.change is not None:
        return ratio_change(row.change.ratio, row.change.ci_low, row.change.ci_high)
    numbers = isinstance(row.base, (int, float)) and isinstance(row.now, (int, float))
    if numbers and row.base and row.metric == "peak_bytes":
        return percent(row.now / row.base - 1)
    if numbers and row.base != row.now:
        return f"{value(row.metric, row.base)} → {value(row.metric, row.now)}"
    return ""


def evidence(row: Row) -> str:
    parts = []
    if row.change is not None and row.change.mde is not None:
        parts.append(f"MDE {mde(row.change.mde)}")
    if row.change is not None and row.change.needed is not None:
        unit = "A/B pairs" if row.change.paired else "processes/side"
        parts.append(f"~{row.change.needed} {unit} to decide")
    if row.note:
        parts.append(row.note)
    return "; ".join(parts)


def ordered(rows) -> list[Row]:
    return sorted(rows, key=lambda r: (ORDER.get(r.verdict, 99), r.cell, r.workload, r.mode,
                                       r.metric))


def table(rows: list[Row]) -> str:
    body = [[r.verdict, r.cell, r.workload, r.mode, r.metric, value(r.metric, r.base),
             value(r.metric, r.now), change(r),
             pvalue(r.change.p if r.change else None),
             pvalue(r.change.p_adjusted if r.change else None),
             f"{r.change.n_base}/{r.change.n_now}" if r.change else "", evidence(r)]
            for r in ordered(rows)]
    headers = ["verdict", "cell", "workload", "mode", "metric", "baseline", "now",
               "change [CI]", "p", "p adj.", "n", "evidence"]
    return markdown_table(body, headers)


def method(result: Comparison) -> str:
    level = result.alpha / result.looks
    test = ("a paired t-test on the log ratio of each lock-step A/B pair"
            if any(r.change is not None and r.change.paired for r in result.rows)
            else "Welch's t-test on log values")
    looks = (f", each test at α/{result.looks} = {level:g} (adaptive sampling looks up to "
             f"{result.looks} times)" if result.looks > 1 else "")
    return (f"Baseline: `reports/` at git `{result.baseline}`. Timings compare one summary per "
            f"worker process ({test}; change with its {100 * (1 - level):g} % confidence "
            f"interval, the one the verdict is decided on); p-values are Benjamini-Hochberg "
            f"adjusted over the {result.tests} tested metrics of the run (false discovery rate "
            f"{result.alpha}{looks}). REGRESSED/IMPROVED: significant and beyond the metric's "
            f"minimum effect δ; EQUIVALENT: the interval lies within ±δ; INCONCLUSIVE: neither. "
            f"MDE: the slowdown that would be caught with {result.power:.0%} power. Memory "
            f"compares medians against δ; graph breaks and recompiles compare exactly.")


def page(result: Comparison, title: str, extra: str = "", footer: str | None = None) -> str:
    lines = [f"# {title}", ""]
    lines += [f"> {note}" for note in result.notes] + ([""] if result.notes else [])
    lines += [f"**{tally(r.verdict for r in result.rows)}**", "", table(result.rows), ""]
    if extra:
        lines += [extra, ""]
    lines += [method(result) if footer is None else footer, ""]
    return "\n".join(lines)
