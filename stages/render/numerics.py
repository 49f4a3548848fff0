"""reports/numerics/<cell>.md: the cell's numerics and portability findings against the
baseline, then everything measured beneath them. Numerics verdicts follow fixed rules (no
test across the run), so they read the same here as in compare.md. Pure."""
from __future__ import annotations

import math

from torchgate.core.records import dumps
from torchgate.core.records.outputs import (
    SKETCH_K,
    TORCH_NAMESPACES,
    WHOLE_MAX,
    fallback_ops,
    namespaces,
)
from torchgate.core.records.rows import CompareRecord, Row
from torchgate.core.records.schema import NumericsRecord
from torchgate.core.vocabulary import Check, Status
from torchgate.render.markdown import markdown_table, sci
from torchgate.render.verdicts import page as verdict_page


def _units(record: NumericsRecord):
    for workload, modes in sorted(record.workloads.items()):
        for mode, ev in sorted(modes.items()):
            yield workload, mode, ev


def _cosine(v: float | None) -> str:
    return sci(v) if v is None or not math.isfinite(v) else f"{v:.6f}"


def errors(record: NumericsRecord, own: dict[str, float] | None = None) -> str:
    rows = []
    for workload, mode, ev in _units(record):
        for name in sorted(ev.rel_l2):
            rows.append([workload, mode, name, sci(ev.rel_l2[name]), sci(ev.max_abs.get(name)),
                         _cosine(ev.cosine.get(name))])
        if not ev.rel_l2:
            rows.append([workload, mode, f"{ev.status}: {'; '.join(ev.problems)}"[:300], "", "",
                         ""])
    if not rows:
        return ""
    tol = record.tolerance
    theirs = "; ".join(f"`{n}` ≤ {t:g}" for n, t in sorted((own or {}).items())
                       if n in record.workloads)
    return ("## Errors against the float64 CPU reference\n\n"
            f"Tolerance: rel. L2 ≤ {tol.rel_l2 if tol else '?'}, cosine ≥ "
            f"{tol.cosine_min if tol else '?'} (conf/precision)"
            + (f"; workloads with their own (`_rel_l2_tol_`): {theirs}" if theirs else "")
            + ". The table above flags an "
            "error that grew beyond `stats.error_growth` x the baseline's even while it "
            "passes.\n\n" + markdown_table(rows, ["workload", "mode", "output", "rel. L2",
                                                  "max abs", "cosine"]))


def compiled(record: NumericsRecord) -> str:
    rows = []
    for workload, mode, ev in _units(record):
        check = ev.compiled_vs_eager
        if check is None:
            continue
        for name in sorted(ev.rel_l2):
            rows.append([workload, mode, name, sci(ev.rel_l2[name]),
                         sci(check.eager_rel_l2.get(name)), sci(check.rel_l2.get(name)),
                         sci(check.max_abs.get(name)), check.status])
        if not ev.rel_l2 or check.status == Check.NOT_MEASURED:
            rows.append([workload, mode, "; ".join(check.problems), "", "", "", "",
                         check.status])
    if not rows:
        return ""
    mult = record.tolerance.compiled_multiplier if record.tolerance else "?"
    return ("## Compiled against eager\n\n"
            f"dynamo's accuracy rule: the compiled error against float64 may be at most "
            f"{mult}x eager's + tolerance/10.\n\n" + markdown_table(
                rows, ["workload", "mode", "output", "compiled vs fp64", "eager vs fp64",
                       "compiled vs eager (rel. L2)", "compiled vs eager (max abs)", "check"]))


def determinism(record: NumericsRecord) -> str:
    rows = []
    for workload, mode, ev in _units(record):
        if ev.rerun_max_abs is None:
            continue
        fresh = ev.fresh_process
        if fresh is None:
            across = "" if mode != "eager" else "not measured"
        elif fresh.equal is None:
            across = f"not measured: {fresh.error}"
        elif fresh.equal:
            across = "bitwise equal"
        else:
            across = f"differs: moved {sci(fresh.distance)} (rel.), most in {fresh.worst}"
        same = ("bitwise equal" if ev.rerun_max_abs == 0
                else f"differs: max abs {sci(ev.rerun_max_abs)}")
        rows.append([workload, mode, same, across])
    if not rows:
        return ""
    return ("## Determinism\n\nThe same inputs twice in one worker process, and the eager "
            "outputs of a fresh process (nothing run before them) against this one's.\n\n"
            + markdown_table(rows, ["workload", "mode", "same process", "fresh process"]))


def drift(record: NumericsRecord, rows: list[Row]) -> str:
    found = [[r.workload, r.mode, r.verdict, "" if r.now is None else sci(r.now), r.note]
             for r in rows if r.metric == "drift"]
    prints = {f"{w}/{m}": ev.fingerprint for w, m, ev in _units(record)}
    count = sum(len(p) for p in prints.values())
    lines = ["## Drift against the baseline", "",
             f"Each output is kept in this record ({count} outputs, {len(dumps(prints)):,} bytes "
             f"of JSON of this cell's {len(dumps(record)):,}): whole when it has at most "
             f"{WHOLE_MAX} values, else its norm, mean, std and a fixed {SKETCH_K}-coordinate "
             f"random projection (`{record.fingerprint_method}`). The next run measures how far "
             "its outputs moved (relative L2) against the precision's tolerance.", ""]
    lines.append(markdown_table(found, ["workload", "mode", "verdict", "moved", "detail"])
                 if found else "No baseline outputs to compare with.")
    return "\n".join(lines)


def ops(record: NumericsRecord, rows: list[Row]) -> str:
    if not record.coverage:
        return ""
    diffs = {r.workload: r for r in rows if r.metric == "ops"}
    lines = ["## Op coverage", "",
             "The operators one eager step runs (forward, backward, optimizer), logged by a "
             "TorchDispatchMode; `fwd` is everything outside backward. Namespaces beyond "
             "PyTorch's own (`torch.ops.<namespace>`) are extensions: custom operators.", ""]
    for workload, c in sorted(record.coverage.items()):
        if c.status != Status.OK:
            lines += [f"### {workload}", "", f"Not measured: {c.error}", ""]
            continue
        off = fallback_ops(c)
        lines += [f"### {workload}: {len(c.ops)} ops, {c.calls} calls on {c.device}", "",
                  "Namespaces: " + ", ".join(
                      f"`{ns}` {len(ops)}" + (" (extension)" if ns not in
                                              TORCH_NAMESPACES else "")
                      for ns, ops in namespaces(c).items()), ""]
        row = diffs.get(workload)
        if row is not None and row.note:
            lines += [f"Against the baseline ({row.verdict}): {row.note}", ""]
        lines.append(markdown_table([[f"`{op}`", phase, off.get(op, "")]
                                     for op, phase in c.ops.items()],
                                    ["op", "phase", "off device"]))
        for op in sorted(set(off) - set(c.ops)):
            lines.append(f"\nFallback: `{op}` ({off[op]})")
        for w in c.warnings:
            lines.append(f"\nWarning during the step: {w}")
        lines.append("")
    return "\n".join(lines).rstrip()


def graph_breaks(record: NumericsRecord) -> str:
    rows = [[workload, mode, str(ev.dynamo.graph_breaks),
             "<br>".join(ev.dynamo.graph_break_reasons), str(ev.dynamo.recompiles),
             "<br>".join(ev.dynamo.recompile_reasons)]
            for workload, mode, ev in _units(record) if ev.dynamo is not None]
    if not rows:
        return ""
    return ("## Graph breaks and recompiles\n\nFrom dynamo's `graph_breaks` and `recompiles` "
            "logs during the compiled run (recompiles: after the first step).\n\n"
            + markdown_table(rows, ["workload", "mode", "graph breaks", "reasons", "recompiles",
                                    "reasons"]))


def page(record: NumericsRecord, result: CompareRecord,
         own: dict[str, float] | None = None) -> str:
    """Findings against the baseline (this cell's rows), then errors against float64,
    compiled against eager, determinism, drift and the size of what is kept for it, op
    coverage, graph breaks and recompiles. `own`: the workloads' own tolerances."""
    if record.status == Status.SKIPPED:    # nothing computed: no baseline named, as each rerun
        return f"# numerics: {record.cell}\n\n**{record.status}**: {record.reason}\n"
    rows = result.rows
    parts = [errors(record, own), compiled(record), determinism(record), drift(record, rows),
             ops(record, rows), graph_breaks(record)]
    return verdict_page(result, f"numerics: {record.cell}", "\n\n".join(p for p in parts if p),
                        footer=f"Baseline: `reports/` at git `{result.baseline}`. Numerics "
                        "verdicts follow fixed rules (tolerances, error growth, exact op sets "
                        "and graph-break counts), with no test across the run: they are the "
                        "same here as in [compare.md](../compare.md).")
