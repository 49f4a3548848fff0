"""Stage `numerics`: errors of one cell's workloads against a float64 CPU reference.

    python -m stages.numerics --device cpu --precision bf16

Per workload and mode, in a worker process: relative L2, max abs error, cosine similarity and
NaN/Inf count of every output (for training: the loss and parameters after N steps), the
same inputs run twice (determinism), and compiled against eager by the dynamo rule.
"""
from __future__ import annotations

import sys
import time

from stages.judge import comparison
from stages.core import config
from stages.judge import portability as coverage
from stages.render import markdown as render
from stages.bench import CellRun, cell_stage, job_for, measured_arm
from stages.core.errors import one_line_errors
from stages.measure.launcher import run_worker
from stages.core.records import write_record, write_text

KIND = "numerics"


def evaluate(result: dict, precision: config.PrecisionSpec, eager: dict | None) -> dict:
    """PASS / FAIL / NONFINITE (or the worker's failure status) with the reasons, for the
    errors against float64; compiled against eager is a check of its own
    (`compiled_vs_eager`), so is determinism, drift and op coverage."""
    if result.get("status") != "OK":
        return {"status": result.get("status", "ERROR"), "problems": [result.get("error", "")]}
    outputs = result["outputs"]
    problems, status = [], "PASS"
    for name, m in sorted(outputs.items()):
        if m.get("ref_nonfinite"):
            status = "NONFINITE"
            problems.append(f"{name} has {m['nonfinite']} NaN/Inf of {m['numel']} values and "
                            f"its float64 reference {m['ref_nonfinite']}: the workload produces "
                            "them at any precision")
            continue
        if m["nonfinite"]:
            status = "NONFINITE"
            problems.append(f"{name} has {m['nonfinite']} NaN/Inf of {m['numel']} values")
            continue
        if m["rel_l2"] is None:  # empty output: nothing to compare
            continue
        if m["rel_l2"] > precision.rel_l2_tol:
            problems.append(f"{name} rel. L2 error {m['rel_l2']:.2e} > tolerance "
                            f"{precision.rel_l2_tol:.0e}")
        if m["cosine"] < precision.cosine_min:
            problems.append(f"{name} cosine {m['cosine']:.4f} < {precision.cosine_min}")
    if problems and status == "PASS":
        status = "FAIL"
    ev = {
        "status": status,
        "problems": problems,
        "rel_l2": {n: m["rel_l2"] for n, m in outputs.items()},
        "max_abs": {n: m["max_abs"] for n, m in outputs.items()},
        "cosine": {n: m["cosine"] for n, m in outputs.items()},
        "rerun_max_abs": result["rerun_max_abs"],
        "digest": result["digest"],
        "fingerprint": result.get("fingerprint", {}),
    }
    if "dynamo" in result:
        ev["dynamo"] = result["dynamo"]
    if eager is not None or "vs_eager" in result:
        ev["compiled_vs_eager"] = compiled_check(result, precision, eager)
    return ev


def compiled_check(result: dict, precision: config.PrecisionSpec, eager: dict | None) -> dict:
    """dynamo's accuracy rule (torch._dynamo.utils.same), per output and on relative L2
    errors: the compiled result's error against float64 may be at most `compiled_multiplier`
    x eager's error + tolerance/10 (at least 3x for outputs under 1000 values); plus the
    direct difference between compiled and eager, for the record."""
    vs = result.get("vs_eager") or {}
    if "error" in vs:
        return {"status": "NOT MEASURED", "problems": [f"eager failed: {vs['error']}"]}
    found = {"status": "PASS", "problems": [], "rel_l2": {}, "max_abs": {}, "eager_rel_l2": {}}
    measured = False
    for name, m in sorted(result["outputs"].items()):
        v = vs.get(name, {})
        eager_err = v.get("eager_rel_l2", (eager or {}).get("rel_l2", {}).get(name))
        found["rel_l2"][name], found["max_abs"][name] = v.get("rel_l2"), v.get("max_abs")
        found["eager_rel_l2"][name] = eager_err
        if m["rel_l2"] is None or eager_err is None:
            continue
        measured = True
        # dynamo: 3x at least for outputs under 1000 values, where noise dominates the error
        mult = precision.compiled_multiplier if m.get("numel", 1000) >= 1000 else max(
            precision.compiled_multiplier, 3.0)
        allowed = mult * eager_err + precision.rel_l2_tol / 10
        if m["rel_l2"] > allowed:
            found["problems"].append(
                f"{name} compiled error {m['rel_l2']:.2e} > {mult:g}x "
                f"eager's {eager_err:.2e} + tolerance/10")
    if found["problems"]:
        found["status"] = "FAIL"
    elif not measured:
        found["status"] = "NOT MEASURED"
    return found


def evaluate_all(results: list[dict], cell: config.Cell, modes: tuple[str, ...]) -> dict:
    """Each mode's verdict; a process that crashed fails every mode with its message."""
    if not results:
        return {}
    result = results[0]
    by_mode = result.get("modes") or {m: result for m in modes}
    eager = by_mode.get("eager") if by_mode.get("eager", {}).get("status") == "OK" else None
    return {mode: evaluate(r, cell.precision, eager if mode != "eager" else None)
            for mode, r in by_mode.items()}


def run_cell(cfg: config.Config, cell: config.Cell, run=run_worker, log=print) -> dict:
    started = time.perf_counter()
    cell_run = CellRun(cfg, cell, KIND, run, lambda line: None, fresh_compile_cache=False)
    cell_run.rounds(1)
    if cell_run.skipped:
        log(f"torchgate numerics: {cell.name} skipped: {cell_run.skipped}")
        return {"cell": cell.name, "status": "SKIPPED", "reason": cell_run.skipped,
                "workloads": {}}
    evaluated = {arm: {name: evaluate_all(procs, cell, cfg.modes)
                       for name, procs in per_arm.items()}
                 for arm, per_arm in cell_run.results.items()}
    now = measured_arm(cfg)
    ran = [name for name, modes in evaluated[now].items()
           if (modes.get("eager") or {}).get("digest")]
    if ran:  # only what ran cleanly: a crash or a hang is reported once, not twice
        walls = sum(p.get("wall_s") or 0.0 for name in ran for p in cell_run.results[now][name])
        fresh = fresh_process_check(cfg, cell, ran, run, cfg.candidate_python,
                                    timeout_s=30 + 2 * walls)
        for name in ran:
            ev = evaluated[now][name]["eager"]
            ev["fresh_process"] = compare_fresh(ev, fresh.get(name))
    for name, modes in evaluated[now].items():
        for mode, ev in modes.items():
            worst = max((v for v in ev.get("rel_l2", {}).values() if v is not None), default=None)
            extra = [f"compiled vs eager {ev['compiled_vs_eager']['status']}"] if (
                "compiled_vs_eager" in ev) else []
            if ev.get("rerun_max_abs") or (ev.get("fresh_process") or {}).get("equal") is False:
                extra.append("NONDETERMINISTIC")
            log(f"torchgate numerics: {cell.name} {name} {mode}: {ev['status']}"
                + (f", max rel. L2 {worst:.2e}" if worst is not None else "")
                + "".join(f", {e}" for e in extra)
                + (f" ({'; '.join(ev['problems'])})" if ev["problems"] else ""))
    ops = {name: procs[0]["coverage"] for name, procs in cell_run.results[now].items()
           if procs and isinstance(procs[0].get("coverage"), dict)}
    record = {"cell": cell.name, "status": "OK", "reason": None, "workloads": evaluated[now],
              "coverage": ops, "fingerprint_method": coverage.FINGERPRINT_METHOD,
              "tolerance": {"rel_l2": cell.precision.rel_l2_tol,
                            "cosine_min": cell.precision.cosine_min,
                            "compiled_multiplier": cell.precision.compiled_multiplier},
              "wall_s": time.perf_counter() - started}
    if cfg.candidate_python:
        record["ab"] = {"baseline": {"python": sys.executable, "torch": cell_run.torch["baseline"],
                                     "workloads": evaluated["baseline"],
                                     "coverage": {
                                         name: procs[0]["coverage"]
                                         for name, procs in cell_run.results["baseline"].items()
                                         if procs and isinstance(procs[0].get("coverage"), dict)}},
                        "candidate": {"python": cfg.candidate_python,
                                      "torch": cell_run.torch["candidate"]}}
    return record


def fresh_process_check(cfg: config.Config, cell: config.Cell, names: list[str],
                        run=run_worker, python: str | None = None,
                        timeout_s: float | None = None) -> dict:
    """Determinism across processes, cheaply: one more worker process for the cell computes
    the named workloads' eager outputs first thing, before anything else touched the
    allocator or caches. Returns workload -> {status, digest, fingerprint}."""
    specs = [cfg.workloads[n] for n in names]
    job = job_for(cfg, cell, specs[0], KIND, ["eager"])
    job["fresh_process_check"] = True
    job["workloads"] = [{"name": w.name, "target": w.target, "kwargs": w.kwargs} for w in specs]
    result = run(job, timeout_s=timeout_s or cfg.numerics.timeout_s, python=python,
                 fresh_compile_cache=False)
    if result.get("status") != "OK":
        failed = {"status": result.get("status", "ERROR"), "error": result.get("error", "")}
        return {w.name: failed for w in specs}
    return result.get("workloads", {})


def compare_fresh(ev: dict, fresh: dict | None) -> dict:
    """The eager outputs of this process against a fresh process's: bitwise, else how far."""
    if not fresh or fresh.get("status") != "OK":
        return {"equal": None, "error": (fresh or {}).get("error") or "not run"}
    if fresh["digest"] == ev["digest"]:
        return {"equal": True}
    moved = coverage.drift(fresh.get("fingerprint", {}), ev.get("fingerprint", {}))
    return {"equal": False, "distance": moved["distance"], "worst": moved["worst"]}


def details(record: dict, rows: list | None = None) -> str:
    """Everything measured, beneath the diff: errors against float64, compiled against eager,
    determinism, drift against the baseline and the size of what is kept for it, op coverage,
    graph breaks and recompiles. `rows` are this cell's comparison rows (for the diffs)."""
    parts = [_errors(record), _compiled(record), _determinism(record),
             _drift(record, rows or []), _ops(record, rows or []), _graph_breaks(record)]
    return "\n\n".join(p for p in parts if p)


def _units(record: dict):
    for workload, modes in sorted(record.get("workloads", {}).items()):
        for mode, ev in sorted(modes.items()):
            yield workload, mode, ev


def _errors(record: dict) -> str:
    rows = []
    for workload, mode, ev in _units(record):
        for name in sorted(ev.get("rel_l2", {})):
            rows.append([workload, mode, name, _sci(ev["rel_l2"][name]),
                         _sci(ev["max_abs"][name]),
                         "" if ev["cosine"][name] is None else f"{ev['cosine'][name]:.6f}"])
        if not ev.get("rel_l2"):
            problem = f"{ev.get('status')}: {'; '.join(ev.get('problems', []))}"[:300]
            rows.append([workload, mode, problem, "", "", ""])
    if not rows:
        return ""
    return ("## Errors against the float64 CPU reference\n\n"
            f"Tolerance: rel. L2 ≤ {record.get('tolerance', {}).get('rel_l2')}, cosine ≥ "
            f"{record.get('tolerance', {}).get('cosine_min')} (conf/precision). The diff above "
            "flags an error that grew beyond `stats.error_growth` x the baseline's even while "
            "it passes.\n\n" + render.markdown_table(rows, ["workload", "mode", "output", "rel. L2",
                                              "max abs", "cosine"]))


def _compiled(record: dict) -> str:
    rows = []
    mult = record.get("tolerance", {}).get("compiled_multiplier")
    for workload, mode, ev in _units(record):
        check = ev.get("compiled_vs_eager")
        if not check:
            continue
        for name in sorted(ev.get("rel_l2", {})):
            rows.append([workload, mode, name, _sci(ev["rel_l2"][name]),
                         _sci(check.get("eager_rel_l2", {}).get(name)),
                         _sci(check.get("rel_l2", {}).get(name)),
                         _sci(check.get("max_abs", {}).get(name)), check["status"]])
        if not ev.get("rel_l2"):
            rows.append([workload, mode, "", "", "", "", "", check["status"]])
    if not rows:
        return ""
    return ("## Compiled against eager\n\n"
            f"dynamo's accuracy rule: the compiled error against float64 may be at most "
            f"{mult}x eager's + tolerance/10.\n\n" + render.markdown_table(
                rows, ["workload", "mode", "output", "compiled vs fp64", "eager vs fp64",
                       "compiled vs eager (rel. L2)", "compiled vs eager (max abs)", "check"]))


def _determinism(record: dict) -> str:
    rows = []
    for workload, mode, ev in _units(record):
        if "rerun_max_abs" not in ev:
            continue
        fresh = ev.get("fresh_process")
        if fresh is None:
            across = "" if mode != "eager" else "not measured"
        elif fresh.get("equal") is None:
            across = f"not measured: {fresh.get('error')}"
        elif fresh["equal"]:
            across = "bitwise equal"
        else:
            across = (f"differs: moved {_sci(fresh.get('distance'))} (rel.), most in "
                      f"{fresh.get('worst')}")
        same = "bitwise equal" if ev["rerun_max_abs"] == 0 else (
            f"differs: max abs {_sci(ev['rerun_max_abs'])}")
        rows.append([workload, mode, same, across])
    if not rows:
        return ""
    return ("## Determinism\n\nThe same inputs twice in one worker process, and the eager "
            "outputs of a fresh process (nothing run before them) against this one's.\n\n"
            + render.markdown_table(rows, ["workload", "mode", "same process", "fresh process"]))


def _drift(record: dict, rows: list) -> str:
    from stages.core.records import dumps
    found = [[r.workload, r.mode, r.verdict, r.now if r.now is not None else "", r.note]
             for r in rows if r.metric == "drift"]
    prints = {f"{w}/{m}": ev.get("fingerprint", {}) for w, m, ev in _units(record)}
    count = sum(len(p) for p in prints.values())
    size = len(dumps(prints))
    total = len(dumps(record))
    lines = ["## Drift against the baseline", "",
             f"Each output is kept in this record ({count} outputs, {size:,} bytes of JSON of "
             f"this cell's {total:,}): whole when it has at most {coverage.WHOLE_MAX} values, "
             f"else its norm, mean, std and a fixed {coverage.SKETCH_K}-coordinate random "
             f"projection (`{record.get('fingerprint_method')}`). The next run measures how "
             "far its outputs moved (relative L2) against the precision's tolerance.", ""]
    if found:
        lines.append(render.markdown_table(found, ["workload", "mode", "verdict", "moved", "detail"]))
    else:
        lines.append("No baseline outputs to compare with.")
    return "\n".join(lines)


def _ops(record: dict, rows: list) -> str:
    cov = record.get("coverage") or {}
    if not cov:
        return ""
    diffs = {r.workload: r for r in rows if r.metric == "ops"}
    lines = ["## Op coverage", "",
             "The operators one eager step runs (forward, backward, optimizer), logged by a "
             "TorchDispatchMode; `fwd` is everything outside backward.", ""]
    for workload, c in sorted(cov.items()):
        if "ops" not in c:
            lines += [f"### {workload}", "", f"Not measured: {c.get('error')}", ""]
            continue
        off = coverage.fallback_ops(c)
        lines += [f"### {workload}: {len(c['ops'])} ops, {c.get('calls')} calls on "
                  f"{c.get('device')}", ""]
        row = diffs.get(workload)
        if row is not None and row.note:
            lines += [f"Against the baseline ({row.verdict}): {row.note}", ""]
        lines.append(render.markdown_table([[f"`{op}`", phase, off.get(op, "")]
                             for op, phase in c["ops"].items()],
                            ["op", "phase", "off device"]))
        for op in sorted(set(off) - set(c["ops"])):
            lines.append(f"\nFallback: `{op}` ({off[op]})")
        for w in c.get("warnings") or []:
            lines.append(f"\nWarning during the step: {w}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _graph_breaks(record: dict) -> str:
    rows = []
    for workload, mode, ev in _units(record):
        d = ev.get("dynamo")
        if d is None:
            continue
        rows.append([workload, mode, str(d.get("graph_breaks")),
                     "<br>".join(d.get("graph_break_reasons") or []) or "",
                     str(d.get("recompiles")), "<br>".join(d.get("recompile_reasons") or [])])
    if not rows:
        return ""
    return ("## Graph breaks and recompiles\n\nFrom dynamo's `graph_breaks` and `recompiles` "
            "logs during the compiled run (recompiles: after the first step).\n\n"
            + render.markdown_table(rows, ["workload", "mode", "graph breaks", "reasons", "recompiles",
                            "reasons"]))


def _sci(v) -> str:
    return "NaN/Inf" if v is None else f"{v:.2e}"


def main(argv: list[str] | None = None) -> None:
    with one_line_errors(KIND):
        cfg, cell, out = cell_stage(KIND, __doc__, argv)
        record = run_cell(cfg, cell)
        write_record(out / f"{cell.name}.json", KIND, record)
        result = comparison.compare_cell(cfg, KIND, cell.name, record)
        write_text(out / f"{cell.name}.md",
                   render.cell_report(result, KIND, cell.name, details(record, result.rows)))
        print(f"torchgate numerics: wrote {out / cell.name}.json and .md")

if __name__ == "__main__":
    main()
