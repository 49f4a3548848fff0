"""Markdown for people: pure functions from comparisons and records to text."""
from __future__ import annotations

import math

from tabulate import tabulate

from stages.judge import stats
from stages.judge.comparison import Comparison, Row

ORDER = {v: i for i, v in enumerate(stats.VERDICTS)}
BAD = (stats.REGRESSED, stats.FAILED)


def seconds(v: float | None) -> str:
    if v is None or not isinstance(v, (int, float)):
        return "" if v is None else str(v)
    if v >= 1:
        return f"{v:.2f} s"
    if v >= 1e-3:
        return f"{v * 1e3:.3f} ms"
    return f"{v * 1e6:.1f} µs"


def nbytes(v: float | None) -> str:
    return "" if v is None else f"{v / 2 ** 20:.1f} MiB"


def value(metric: str, v) -> str:
    if metric.endswith("_s"):
        return seconds(v)
    if metric.endswith("_bytes"):
        return nbytes(v)
    return "" if v is None else str(v)


def percent(x: float) -> str:
    return f"{x * 100:+.1f} %"


def ratio_change(ratio: float, low: float, high: float) -> str:
    """A ratio as a change with its confidence interval: "+3.1 % [-0.4, +6.7]"."""
    return f"{percent(ratio - 1)} [{(low - 1) * 100:+.1f}, {(high - 1) * 100:+.1f}]"


def change(row: Row, alpha: float) -> str:
    if row.shift is not None:
        return ratio_change(row.shift.ratio, *row.shift.interval(alpha))
    numbers = isinstance(row.base, (int, float)) and isinstance(row.now, (int, float))
    if numbers and row.base and row.metric in ("peak_bytes",):
        return percent(row.now / row.base - 1)
    if numbers and row.base != row.now:
        return f"{row.base} → {row.now}"
    return ""


def pvalue(p: float | None) -> str:
    if p is None:
        return ""
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def mde(value: float) -> str:
    # Past 10x the number says only "hopeless at this noise"; more digits would mislead.
    return "> 1000 %" if value > 10 else f"{value * 100:.1f} %"


def evidence(row: Row) -> str:
    parts = []
    if row.mde is not None:
        parts.append(f"MDE {mde(row.mde)}")
    if row.needed is not None:
        unit = "A/B pairs" if row.shift is not None and row.shift.paired else "processes/side"
        parts.append(f"~{row.needed} {unit} to decide")
    if row.note:
        parts.append(row.note)
    return "; ".join(parts)


def table(rows: list[Row], alpha: float) -> str:
    body = [[r.verdict, r.cell, r.workload, r.mode, r.metric, value(r.metric, r.base),
             value(r.metric, r.now), change(r, alpha),
             pvalue(r.shift.p_value if r.shift else None), pvalue(r.p_adjusted),
             f"{r.shift.n_base}/{r.shift.n_now}" if r.shift else "", evidence(r)]
            for r in sorted(rows, key=lambda r: (ORDER.get(r.verdict, 99), r.cell, r.workload,
                                                  r.mode, r.metric))]
    headers = ["verdict", "cell", "workload", "mode", "metric", "baseline", "now",
               "change [CI]", "p", "p adj.", "n", "evidence"]
    return markdown_table(body, headers)


def markdown_table(rows: list, headers: list[str]) -> str:
    """A GitHub markdown table; cells are shown as given (no number reformatting)."""
    return tabulate(rows, headers, tablefmt="github", disable_numparse=True)


def counts(verdicts) -> dict[str, int]:
    """How many of each verdict, most serious first."""
    found: dict[str, int] = {}
    for verdict in verdicts:
        found[verdict] = found.get(verdict, 0) + 1
    return dict(sorted(found.items(), key=lambda kv: ORDER.get(kv[0], 99)))


def method(result: Comparison) -> str:
    conf = 100 * (1 - result.alpha)
    test = ("a paired t-test on the log ratio of each lock-step A/B pair"
            if any(r.shift is not None and r.shift.paired for r in result.rows)
            else "Welch's t-test on log values")
    return (f"Baseline: `reports/` at git `{result.baseline}`. Timings compare one summary per "
            f"worker process ({test}; change with a {conf:.0f} % "
            f"confidence interval); p-values are Benjamini-Hochberg adjusted over the "
            f"{result.tests} tested metrics (false discovery rate {result.alpha}). REGRESSED/"
            f"IMPROVED: significant and beyond the metric's minimum effect δ; EQUIVALENT: the "
            f"interval lies within ±δ; INCONCLUSIVE: neither. MDE: the slowdown that would be "
            f"caught with 80 % power. Memory compares medians against δ; graph breaks and "
            f"recompiles compare exactly.")


def cell_report(result: Comparison, stage: str, cell: str, extra: str = "") -> str:
    lines = [f"# {stage}: {cell}", ""]
    lines += [f"> {note}" for note in result.notes] + ([""] if result.notes else [])
    tally = ", ".join(f"{n} {v}" for v, n in counts(r.verdict for r in result.rows).items()) or "nothing compared"
    lines += [f"**{tally}**", "", table(result.rows, result.alpha), ""]
    if extra:
        lines += [extra, ""]
    lines += [method(result), ""]
    return "\n".join(lines)


def short_number(v: float) -> float:
    """Round to 4 significant digits so metrics files diff cleanly."""
    if v == 0 or not math.isfinite(v):
        return v
    return round(v, 3 - int(math.floor(math.log10(abs(v)))))
