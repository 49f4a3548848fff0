"""reports/selfcheck.md: this machine's measured false-alarm and detection rates, torchgate's
beside the rules of other tools on the same splits, each at its own sampling design. Pure."""
from __future__ import annotations

import math

from torchgate.render.markdown import mde


def _rate(x) -> str:
    return f"{x:.1%}" if x is not None else "n/a"


def report(cfg, result, slowdown, splits, repeats, wall_s) -> str:
    """`result`: judge.selfcheck.SelfCheck."""
    delta = cfg.stats.delta.steady_s
    lines = ["# torchgate self-check", "",
             f"Matrix `{cfg.matrix.name}`, {cfg.bench.processes} processes per side (measured "
             f"{2 * result.pool} per unit), {splits} random A/A splits, "
             f"α = {cfg.stats.alpha}, δ steady state "
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
    lines += change(cfg, result, slowdown)
    lines += ["", "## Beside the rules of other tools", "",
              "The same A/A splits and the same injected slowdowns, steady state only. Each "
              "rule runs at its own tool's sampling design, drawn from the same halves of the "
              "measured processes (TorchBench times one process a side, asv 2 rounds of up to "
              "5 samples, pyperf 20 processes of 3 values), and is judged per unit: a false "
              "alarm is an unchanged unit called slower (the mean over the units, and the "
              "unit called slower most often), as none of the other tools claims control over "
              "a whole run; detection, the share of injected "
              f"{slowdown:.0%} slowdowns called slower. At matched false alarms, each rule's "
              "own statistic (torchgate's test p, TorchBench's and asv's ratio of medians, "
              "pyperf's t) is thresholded where it calls "
              f"{result.matched_rate:.0%} of the unchanged units slower: what is left is how "
              "well each statistic, at its design, tells a slowdown from noise. torchgate "
              "twice: within the run (both sides measured at once, as an A/B run), and as "
              "against a recorded baseline (a run measured apart, with the run-to-run "
              "variance that adds).", "",
              f"| rule | design (a side) | a regression when | false alarms per unit (mean; "
              f"worst unit) | detects +{slowdown:.0%} | detects +{slowdown:.0%} at "
              f"{result.matched_rate:.0%} false alarms |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r.name} | {r.design}{f' ({r.short})' if r.short else ''} | {r.rule} | "
              f"{r.false_alarm:.1%}; {r.worst:.1%} | {_rate(r.detection)} | "
              f"{_rate(r.matched)} |" for r in result.rows]
    catch = f"processes a side to catch +{slowdown:.0%}"
    lines += ["", f"Minimum detectable steady-state effect per unit ({cfg.stats.power:.0%} "
              f"power, median over splits), and the {catch} with that power (at the spread "
              "of all its processes):", "", f"| cell | workload | mode | MDE | {catch} |",
              "|---|---|---|---|---|"]
    lines += [f"| {c} | {w} | {m} | {mde(v)} | {_processes(result.needed.get((c, w, m)))} |"
              for (c, w, m), v in sorted(result.mdes.items())]
    return "\n".join(lines) + "\n"


def _processes(n) -> str:
    return "more than 1,000" if n is None else f"{n:,}"


def change(cfg, result, slowdown: float) -> list[str]:
    """What to change: the processes a side that would catch the slowdown in every unit."""
    delta = cfg.stats.delta.steady_s
    if slowdown <= delta:
        return [f"- **What to change**: a +{slowdown:.0%} slowdown is within δ "
                f"({delta:.0%}), never REGRESSED whatever the processes: check a larger one "
                f"(--slowdown) or lower `stats.delta.steady_s`."]
    if not result.needed:
        return []
    worst = max(result.needed.items(), key=lambda kv: math.inf if kv[1] is None else kv[1])
    (cell, workload, mode), n = worst
    unit = f"{workload} {mode} in {cell}"
    if n is None:
        return [f"- **What to change**: {unit} would not catch +{slowdown:.0%} with "
                f"{cfg.stats.power:.0%} power at any number of processes up to 1,000: a "
                "quieter machine, or lock-step pairs (`baseline.rev`), which cancel its drift."]
    if n <= cfg.bench.processes:
        return [f"- **What to change**: nothing: `bench.processes={cfg.bench.processes}` "
                f"catches +{slowdown:.0%} in every unit ({unit} needs the most, {n})."]
    return [f"- **What to change**: `bench.processes={n}` catches +{slowdown:.0%} with "
            f"{cfg.stats.power:.0%} power in every unit (now {cfg.bench.processes}; {unit} "
            "needs the most, see the table). That is within a run, as in lock-step pairs; "
            "against a recorded baseline a run's offset adds what no number of processes "
            "shrinks."]
