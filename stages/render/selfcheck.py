"""reports/selfcheck.md: this machine's measured false-alarm and detection rates, torchgate's
beside the rules of other tools on the same splits. Pure."""
from __future__ import annotations

from stages.render.markdown import mde


def _rate(x) -> str:
    return f"{x:.1%}" if x is not None else "n/a"


def report(cfg, result, slowdown, splits, repeats, wall_s) -> str:
    """`result`: judge.selfcheck.SelfCheck."""
    delta = cfg.stats.delta.steady_s
    lines = ["# torchgate self-check", "",
             f"Matrix `{cfg.matrix.name}`, {cfg.bench.processes} processes per side (measured "
             f"{2 * cfg.bench.processes} per unit), {splits} random A/A splits, "
             f"family-wise error rate {cfg.stats.alpha}, δ steady state "
             f"{delta:.0%}. Wall time {wall_s:.0f} s.", "",
             f"- **False-alarm rate**: {result.false_rate:.1%} of A/A comparisons had any "
             f"REGRESSED verdict (bound: {cfg.stats.alpha:.0%}).",
             f"- **Detection rate**: a {slowdown:.0%} steady-state slowdown injected into one "
             f"random unit was REGRESSED in {_rate(result.detect_rate)} of comparisons.",
             ]
    if repeats is not None:
        bad = sum(1 for c in repeats if c)
        lines.append(f"- **Repeated runs**: {bad} of {len(repeats)} fresh runs compared with the "
                     f"first had a REGRESSED verdict ({repeats}).")
    lines += ["", "## Beside the rules of other tools", "",
              "The same A/A splits and the same injected slowdowns, steady state only, judged by "
              "the rule each tool applies to one benchmark. A false alarm is an A/A comparison "
              "in which the rule calls any unit of the run slower; detection, the share of "
              f"injected {slowdown:.0%} slowdowns it calls slower. The other rules are given "
              "every process's samples of a side, pooled, as asv and pyperf pool their "
              "processes (TorchBench times one process a side).", "",
              f"| rule | a regression when | false alarms | detects +{slowdown:.0%} |",
              "|---|---|---|---|",
              f"| torchgate | the change of the process medians significant after "
              f"Holm's step-down over the run (family-wise error rate {cfg.stats.alpha}) and "
              f"its estimate beyond δ {delta:.0%} | {result.steady_false_rate:.1%} | "
              f"{_rate(result.detect_rate)} |"]
    lines += [f"| {r.rule.name} | {r.rule.description} | {r.false_alarm:.1%} | "
              f"{_rate(r.detection)} |" for r in result.rules]
    lines += ["", "Minimum detectable steady-state effect per unit (80 % power, median over "
              "splits):", "", "| cell | workload | mode | MDE |", "|---|---|---|---|"]
    lines += [f"| {c} | {w} | {m} | {mde(v)} |" for (c, w, m), v in sorted(result.mdes.items())]
    return "\n".join(lines) + "\n"
