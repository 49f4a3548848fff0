"""reports/summary.md: the page a reviewer reads first. Pure."""
from __future__ import annotations

from torchgate.core.metrics import Rule, names
from torchgate.core.records.rows import CompareRecord, Row
from torchgate.core.vocabulary import BAD, QUIET, Verdict
from torchgate.judge.gate import (
    NO_TIMING,
    UNCHANGED,
    gate_checked,
    gate_failures,
    nothing_comparable,
    untested,
    unusable,
)
from torchgate.judge.results import CellSummary
from torchgate.render.bench import ranks_section
from torchgate.render.environment import cell as env_cell
from torchgate.render.markdown import counts, markdown_table, pictures_note, value
from torchgate.render.numbers import environment_change, numbers_section
from torchgate.render.verdicts import VERDICTS_LINK, attributed, by_effect, change, evidence

# The verdicts of a comparison made.
COMPARED = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.EQUIVALENT, Verdict.INCONCLUSIVE)


def summary(matrix: str, compare: CompareRecord, changes: list, env_note: str | None,
            cells: list[str], fail_on: tuple[str, ...] = (),
            bench: dict[str, CellSummary] | None = None,
            images: list[tuple[str, str]] = (), env: dict | None = None,
            sweeps: list[str] = (), candidate: str | None = None) -> str:
    """`fail_on`: gate.fail_on, to say what the gate stage decides on the same record;
    `bench`: cell -> its judge.summary, for the numbers;
    `images`: (caption, path relative to the reports folder) embedded after the numbers;
    `env`: this run's environment, named when there is no baseline's to diff against;
    `sweeps`: the sweeps' section (render.sweeps), after the numbers and pictures;
    `candidate`: a what-if's bench page, where `changes` are this environment's against the
    candidate measured beside it (what the timings compare), not the baseline's."""
    rows = compare.findings()
    lines = [f"# torchgate summary: matrix `{matrix}`", ""]
    lines += [f"> {n}" for n in compare.notes] + ([""] if compare.notes else [])
    sides = "this environment → the candidate" if candidate else None
    lines += [environment_change(changes, env_note, env, sides, f"[{candidate}]({candidate})"
                                 if candidate else "[env/env.md](env/env.md)"), ""]
    bad = [r for r in rows if r.verdict in BAD]
    lines += [headline(compare, bad) + " " + ", ".join(
        f"{n} {v}" for v, n in counts(r.verdict for r in rows).items()), ""]
    lines += [gate_line(compare, fail_on), ""]
    lines += numbers_section(bench or {}, list(compare.rows))   # per unit, every stage's row
    lines += ranks_section(bench or {}, list(compare.rows))     # a line per distributed unit
    if images or any(line.startswith("![") for line in sweeps):
        lines += [pictures_note("report"), ""]
    for caption, path in images:
        lines += [f"![{caption}]({path})", ""]
    lines += list(sweeps)
    if bad:
        lines += ["## Regressions and failures", "",
                  markdown_table([[r.verdict, r.stage, r.cell, r.workload, r.mode, r.metric,
                                   change(r), "; ".join(filter(None, [r.note, attributed(r)]))]
                                  for r in by_effect(bad)],
                                 ["verdict", "stage", "cell", "workload", "mode", "metric",
                                  "change", "detail"]), ""]
    lines += slowdowns_section(rows)
    lines += numerics_section(compare.rows)
    lines += ["## Environment", ""]
    if env_note:
        lines.append(f"Environment change: {env_note}.")
    elif changes:
        lines += [f"{len(changes)} field(s) differ between this environment and the candidate "
                  f"(see [{candidate}]({candidate})):" if candidate else
                  f"{len(changes)} field(s) changed against the baseline "
                  "(see [env/env.md](env/env.md)):", ""]
        lines += [f"- `{k}`: {env_cell(a)} → {env_cell(b)}" for k, a, b in changes[:20]]
    else:
        lines.append("The candidate's environment is this one's." if candidate else
                     "No environment change against the baseline.")
    lines += ["", "## Reports", "", f"- [compare.md](compare.md): every verdict "
              f"({compare.tests} tested metrics, decided together at α = {compare.alpha})",
              "- [env/env.md](env/env.md)"]
    for cell in cells:
        lines.append(f"- `{cell}`: [bench](bench/{cell}.md), [numerics](numerics/{cell}.md)")
    lines.append("")
    return "\n".join(lines)


def headline(compare: CompareRecord, bad: list[Row]) -> str:
    """Never "No regressions" unless something was compared."""
    why = nothing_comparable(compare)
    said = [f"**Nothing could be compared:** {why}; {NO_TIMING}."] if why else []
    broken = unusable(compare)
    if broken:
        head, _, rest = broken.partition(": ")
        said.insert(0, f"**{head}:** {rest}.")
        why = why or "unusable"
    if compare.unchanged and untested(compare):
        said.append(f"**Timings not compared:** {untested(compare)}; {UNCHANGED}.")
        why = "unchanged"
    if bad:
        said.append(f"**{len(bad)} regressed or failed.**")
    elif not why:
        said.append("**No regressions.**" if any(r.verdict in COMPARED for r in compare.rows)
                    else "**Nothing compared yet:** no baseline for this run.")
    return " ".join(said)


def gate_line(compare: CompareRecord, fail_on: tuple[str, ...]) -> str:
    """What the gate stage decides on this record (it runs after this page is written)."""
    if not fail_on:
        return "Gate: off (`gate.fail_on` is empty)."
    on = ", ".join(f"`{v}`" for v in fail_on)
    failures = gate_failures(compare, fail_on)
    if failures:
        return f"Gate (fails on {on}): **failed**: {'; '.join(failures)}."
    return f"Gate (fails on {on}): passed: {gate_checked(compare, fail_on)}."


def slowdowns_section(rows: list[Row]) -> list[str]:
    """`## Possible slowdowns`: undecided timings beyond +δ whose own interval lies above no
    change, the largest first; more processes would decide them."""
    found = sorted((r for r in rows if r.possible_slowdown), key=lambda r: -r.change.ratio)
    if not found:
        return []
    return ["## Possible slowdowns", "",
            "Undecided timings that are slower by their own interval, beyond the metric's δ "
            f"({VERDICTS_LINK}). More worker processes (`bench.processes`) would decide "
            "them.", "",
            markdown_table([[r.cell, r.workload, r.mode, r.metric, change(r),
                             f"{r.delta * 100:g} %", evidence(r)] for r in found],
                           ["cell", "workload", "mode", "metric", "change [CI]", "δ",
                            "evidence"]), ""]


CHECKS = (("numerics", "vs float64"), ("drift", "drift vs baseline"),
          ("determinism", "determinism"), ("compiled_vs_eager", "compiled vs eager"),
          ("ops", "ops"), ("fallback_ops", "ops off-device"), ("graph_breaks", "graph breaks"),
          ("recompiles", "recompiles"))


def numerics_section(rows: list[Row]) -> list[str]:
    """`## Numerics and portability`: every numerics check of every cell, workload and mode
    at a glance, then each change against the baseline with its evidence (new graph breaks
    with their reasons, new and removed ops, drift, nondeterminism, error growth)."""
    rows = [r for r in rows if r.stage == "numerics"]
    if not rows:
        return []
    metrics = dict(CHECKS)
    grid: dict[tuple, dict] = {}
    for r in rows:
        if r.workload != "*":
            grid.setdefault((r.cell, r.workload, r.mode), {})[r.metric] = r
    used = [m for m, _ in CHECKS if any(m in checks for checks in grid.values())]
    lines = ["## Numerics and portability", "",
             "Per cell, workload and mode: error against the float64 CPU reference, how far the "
             "outputs moved from the baseline's, the same inputs twice (in this process and a "
             "fresh one), compiled against eager, the operators one eager step runs, and graph "
             "breaks. Details: each cell's `numerics/<cell>.md`, beside this page.", ""]
    if grid:
        header = "| cell | workload | mode | " + " | ".join(metrics[m] for m in used) + " |"
        lines += [header, "|" + "---|" * (3 + len(used))]
        for (cell, workload, mode), checks in sorted(grid.items()):
            cells = [_grid_cell(checks.get(m)) for m in used]
            lines.append(f"| {cell} | {workload} | {mode} | " + " | ".join(cells) + " |")
        lines.append("")
    changes = [r for r in rows if r.verdict not in QUIET and r.note]
    noted_new = [r for r in rows if r.verdict == "NEW" and r.metric == "determinism"
                 and r.now == "nondeterministic"]
    if changes or noted_new:
        lines += ["Findings (each against the baseline, where there is one):", ""]
        for r in sorted(changes + noted_new, key=lambda r: (r.cell, r.workload, r.mode,
                                                         r.metric)):
            lines.append(f"- **{r.verdict}** `{r.cell}` {r.workload} {r.mode} "
                         f"{metrics.get(r.metric, r.metric)}: {r.note}")
    elif all(r.verdict == "NEW" for r in rows):
        lines.append("No baseline to compare with yet: these are this run's values.")
    else:
        lines.append("No numerics or portability change against the baseline.")
    lines.append("")
    return lines


def _grid_cell(row: Row | None) -> str:
    if row is None:
        return ""
    now = value(row.metric, row.now)
    if row.base is not None and value(row.metric, row.base) != now and row.metric in (
            *names(rule=Rule.COUNTED), "ops", "fallback_ops"):
        now = f"{value(row.metric, row.base)} → {now}"
    if row.verdict in QUIET or row.verdict == now:
        return now
    return f"**{row.verdict}** {now}".strip()
