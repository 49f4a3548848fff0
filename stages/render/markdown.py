"""Numbers and tables for people: the formatting every page shares. Pure."""
from __future__ import annotations

import math

from tabulate import tabulate

from torchgate.core.metrics import BY_NAME, Unit
from torchgate.core.vocabulary import VERDICTS

ORDER = {v: i for i, v in enumerate(VERDICTS)}


def seconds(v) -> str:
    if v is None:
        return "not measured"
    if not isinstance(v, (int, float)):
        return str(v)
    if not math.isfinite(v):
        return "NaN/Inf"
    if v >= 1:
        return f"{three(v)} s"
    if v >= 1e-3:
        return f"{three(v * 1e3)} ms"
    return f"{three(v * 1e6)} µs"


def three(x: float) -> str:
    """Three significant figures, never an exponent: a process median's spread is percents, so
    more digits (53.298 ms) would claim a precision no run has."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:#.3g}"


def nbytes(v) -> str:
    return "not measured" if v is None else f"{three(v / 2 ** 20)} MiB"


def sci(v) -> str:
    """A magnitude: "not measured" (None) is not "NaN/Inf" (a measured non-finite value)."""
    if v is None:
        return "not measured"
    return f"{v:.2e}" if math.isfinite(v) else "NaN/Inf"


def joules(v) -> str:
    if v is None:
        return "not measured"
    return f"{three(v)} J" if v >= 1 else f"{three(v * 1e3)} mJ" if v >= 1e-3 else \
        f"{three(v * 1e6)} µJ"


def value(metric: str, v) -> str:
    """A metric's number in its unit (core.metrics); any other row's value as it is."""
    if v is None:
        return ""
    found = BY_NAME.get(metric)
    unit = found.unit if found is not None and isinstance(v, (int, float)) else None
    if unit == Unit.SECONDS:
        return seconds(v)
    if unit == Unit.JOULES:
        return joules(v)
    if unit == Unit.BYTES:
        return nbytes(v)
    if unit == Unit.RATIO and isinstance(v, float):   # slowest over fastest: its lag
        return f"{(v - 1) * 100:.1f} % lag"
    if unit == Unit.COUNT:     # a median or mean of counts is a float: whole where large
        return f"{v:,}" if isinstance(v, int) else f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:g}"
    if isinstance(v, float):
        return f"{v:.1e}" if v and (abs(v) < 1e-3 or abs(v) >= 1e4) else f"{v:g}"
    return str(v)


def percent(x: float) -> str:
    """A relative change, "+3.1 %"; past 10x (and inf) "> +1000 %": more digits would say
    only that nothing is bounded at this noise, and an unbounded one reads as a number."""
    return "> +1000 %" if x > 10 else f"{x * 100:+.1f} %"


def _bound(ratio: float) -> str:
    return "> +1000" if ratio > 11 else f"{(ratio - 1) * 100:+.1f}"


def ratio_change(ratio: float, low: float, high: float) -> str:
    """A ratio as a change with its confidence interval: "+3.1 % [-0.4, +6.7]"."""
    return f"{percent(ratio - 1)} [{_bound(low)}, {_bound(high)}]"


def pvalue(p: float | None) -> str:
    if p is None:
        return ""
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def mde(value: float) -> str:
    # Past 10x the number says only "hopeless at this noise"; more digits would mislead.
    if value != value:
        return "none detectable at this spread"
    return "> 1000 %" if value > 10 else f"{value * 100:.1f} %"


def markdown_table(rows: list, headers: list[str]) -> str:
    """A GitHub markdown table; cells are shown as given (no number reformatting)."""
    return tabulate(rows, headers, tablefmt="github", disable_numparse=True)


def counts(verdicts) -> dict[str, int]:
    """How many of each verdict, most serious first."""
    found: dict[str, int] = {}
    for verdict in verdicts:
        found[verdict] = found.get(verdict, 0) + 1
    return dict(sorted(found.items(), key=lambda kv: ORDER.get(kv[0], 99)))


def tally(verdicts) -> str:
    return ", ".join(f"{n} {v}" for v, n in counts(verdicts).items()) or "nothing compared"


def short_number(v: float) -> float:
    """Round to 4 significant digits so metrics files diff cleanly."""
    if v == 0 or not math.isfinite(v):
        return v
    return round(v, 3 - int(math.floor(math.log10(abs(v)))))


def pictures_note(stage: str) -> str:
    """Said once on a page that shows pictures: they are not committed (core.vocabulary
    PICTURES), so a fresh clone, or the page read on GitHub, shows none until drawn."""
    return (f"*The pictures are drawn from the committed records and are not committed "
            f"themselves: where they are missing (a fresh clone, this page on GitHub), "
            f"`dvc repro -s {stage}` draws them, measuring nothing.*")
