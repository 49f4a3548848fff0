"""reports/selfcheck.md: this machine's measured false-alarm and detection rates. Pure."""
from __future__ import annotations

from stages.render.markdown import mde


def report(cfg, false_rate, detect_rate, mdes, slowdown, splits, repeats, wall_s) -> str:
    lines = ["# torchgate self-check", "",
             f"Matrix `{cfg.matrix.name}`, {cfg.bench.processes} processes per side (measured "
             f"{2 * cfg.bench.processes} per unit), {splits} random A/A splits, "
             f"false discovery rate {cfg.stats.alpha}, δ steady state "
             f"{cfg.stats.delta.steady_s:.0%}. Wall time {wall_s:.0f} s.", "",
             f"- **False-alarm rate**: {false_rate:.1%} of A/A comparisons had any REGRESSED "
             f"verdict (bound: {cfg.stats.alpha:.0%}).",
             f"- **Detection rate**: a {slowdown:.0%} steady-state slowdown injected into one "
             f"random unit was REGRESSED in "
             + (f"{detect_rate:.1%}" if detect_rate is not None else "n/a") + " of comparisons.",
             ]
    if repeats is not None:
        bad = sum(1 for c in repeats if c)
        lines.append(f"- **Repeated runs**: {bad} of {len(repeats)} fresh runs compared with the "
                     f"first had a REGRESSED verdict ({repeats}).")
    lines += ["", "Minimum detectable steady-state effect per unit (80 % power, median over "
              "splits):", "", "| cell | workload | mode | MDE |", "|---|---|---|---|"]
    lines += [f"| {c} | {w} | {m} | {mde(v)} |" for (c, w, m), v in sorted(mdes.items())]
    return "\n".join(lines) + "\n"
