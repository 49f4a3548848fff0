"""Stage `numerics`: errors of one cell's workloads against a float64 CPU reference.

    python -m stages.numerics --device cpu --precision bf16

Per workload and mode, in a worker process: relative L2, max abs error, cosine similarity and
NaN/Inf count of every output (for training: the loss and parameters after N steps), the
same inputs run twice (determinism), and compiled against eager by the dynamo rule.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import comparison, config, coverage, render
from .bench import CellRun, job_for
from .baseline import resolve_rev
from .errors import one_line_errors
from .launcher import run_worker
from .records import write_record, write_text

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
            problems.append(f"{name}: the float64 reference itself has {m['ref_nonfinite']} "
                            f"NaN/Inf of {m['numel']} values")
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
    """dynamo's accuracy rule, per output: the compiled result's error against float64 may be
    at most `compiled_multiplier` x eager's error + tolerance/10; plus the direct difference
    between compiled and eager, for the record."""
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
        allowed = precision.compiled_multiplier * eager_err + precision.rel_l2_tol / 10
        if m["rel_l2"] > allowed:
            found["problems"].append(
                f"{name} compiled error {m['rel_l2']:.2e} > {precision.compiled_multiplier:g}x "
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
    now = "candidate" if cfg.candidate_python else "now"
    if "eager" in cfg.modes:
        fresh = fresh_process_check(cfg, cell, run, cfg.candidate_python)
        for name, modes in evaluated[now].items():
            ev = modes.get("eager")
            if ev and ev.get("digest"):
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
    coverage = {name: procs[0]["coverage"] for name, procs in cell_run.results[now].items()
                if procs and isinstance(procs[0].get("coverage"), dict)}
    record = {"cell": cell.name, "status": "OK", "reason": None, "workloads": evaluated[now],
              "coverage": coverage, "fingerprint_method": coverage.FINGERPRINT_METHOD,
              "tolerance": {"rel_l2": cell.precision.rel_l2_tol,
                            "cosine_min": cell.precision.cosine_min,
                            "compiled_multiplier": cell.precision.compiled_multiplier},
              "wall_s": time.perf_counter() - started}
    if cfg.candidate_python:
        record["ab"] = {"baseline": {"python": sys.executable, "torch": cell_run.torch["baseline"],
                                     "workloads": evaluated["baseline"]},
                        "candidate": {"python": cfg.candidate_python,
                                      "torch": cell_run.torch["candidate"]}}
    return record


def fresh_process_check(cfg: config.Config, cell: config.Cell, run=run_worker,
                        python: str | None = None) -> dict:
    """One more worker process for the whole cell: each workload's eager outputs computed
    first thing in a fresh process. Returns workload -> {status, digest, fingerprint}."""
    specs = list(cfg.workloads.values())
    job = job_for(cfg, cell, specs[0], KIND, ["eager"])
    job["fresh_process_check"] = True
    job["workloads"] = [{"name": w.name, "target": w.target, "kwargs": w.kwargs} for w in specs]
    timeout = max(w.timeout_s or cfg.numerics.timeout_s for w in specs)
    result = run(job, timeout_s=timeout, python=python, fresh_compile_cache=False)
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


def details(record: dict) -> str:
    """Per-output errors of this run, beneath the diff."""
    rows = []
    for workload, modes in sorted(record.get("workloads", {}).items()):
        for mode, ev in sorted(modes.items()):
            for name in sorted(ev.get("rel_l2", {})):
                rows.append([workload, mode, name, _sci(ev["rel_l2"][name]),
                             _sci(ev["max_abs"][name]),
                             "" if ev["cosine"][name] is None else f"{ev['cosine'][name]:.6f}",
                             _sci(ev["rerun_max_abs"])])
    if not rows:
        return ""
    return "## Errors against the float64 CPU reference\n\n" + render.tabulate(
        rows, ["workload", "mode", "output", "rel. L2", "max abs", "cosine",
               "rerun max abs diff"], tablefmt="github", disable_numparse=True)


def _sci(v) -> str:
    return "NaN/Inf" if v is None else f"{v:.2e}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.numerics", description=__doc__)
    parser.add_argument("--device", required=True)
    parser.add_argument("--precision", required=True)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", type=Path, default=Path("reports/numerics"))
    args = parser.parse_args(argv)
    with one_line_errors("numerics"):
        cfg = config.load(args.params)
        cell = cfg.cell(args.device, args.precision)
        resolve_rev(cfg.baseline_rev)  # a bad baseline.rev or no git: say so before measuring
        record = run_cell(cfg, cell)
        write_record(args.out / f"{cell.name}.json", KIND, record)
        result = comparison.compare_cell(cfg, KIND, cell.name, record)
        write_text(args.out / f"{cell.name}.md",
                   render.cell_report(result, KIND, cell.name, details(record)))
        print(f"torchgate numerics: wrote {args.out / cell.name}.json and .md")


if __name__ == "__main__":
    main()
