"""Stage `report`: reports/summary.md, the page a reviewer reads first, and reports/metrics.json,
a small flat file for `dvc metrics diff`.

    python -m stages.report
"""
from __future__ import annotations

from pathlib import Path

from stages.judge import comparison
from stages.core import config
from stages import env
from stages.render import markdown as render
from stages.judge import stats
from stages.core.baseline import load_baseline, resolve_rev
from stages.compare import run_arguments
from stages.core.errors import UserError, one_line_errors
from stages.core.records import dumps, load_record, write_text


def bench_metrics(record: dict, price_per_hour: float) -> dict:
    """Medians over processes, rounded: what `dvc metrics diff` shows between revisions."""
    out = {}
    for workload, modes in sorted(record.get("workloads", {}).items()):
        for mode in record.get("modes", []):
            steady = comparison.process_values(record, workload, mode, "steady_s")
            if not steady:
                continue
            per_call = stats.median(steady)
            items = comparison.process_values(record, workload, mode, "items")[0]
            m = {"steady_ms": per_call * 1e3,
                 "first_call_s": stats.median(comparison.process_values(
                     record, workload, mode, "first_call_s")),
                 "warmup_s": stats.median(comparison.process_values(record, workload, mode,
                                                                    "warmup_s")),
                 "items_per_s": items / per_call,
                 "peak_mib": stats.median(comparison.process_values(record, workload, mode,
                                                                    "peak_bytes")) / 2 ** 20}
            if price_per_hour:
                m["usd_per_million_items"] = price_per_hour / 3600 * 1e6 / m["items_per_s"]
            breaks = comparison.process_values(record, workload, mode, "graph_breaks")
            if breaks:
                m["graph_breaks"] = max(breaks)
            out.setdefault(workload, {})[mode] = {k: render.short_number(v) for k, v in m.items()}
    return out


def numerics_metrics(record: dict) -> dict:
    out = {}
    for workload, modes in sorted(record.get("workloads", {}).items()):
        for mode, ev in sorted(modes.items()):
            errors = [v for v in ev.get("rel_l2", {}).values() if v is not None]
            if errors:
                out.setdefault(workload, {})[mode] = {"max_rel_l2": render.short_number(
                    max(errors))}
    return out


def env_change(cfg: config.Config, reports: Path) -> tuple[list, str | None]:
    """Changed environment fields against the baseline, and why they could not be read."""
    try:
        commit = resolve_rev(cfg.baseline_rev)
        now = load_record(reports / "env" / "env.json", "env")["env"]
        base = load_baseline(commit, (reports / "env" / "env.json").as_posix(), "env")
    except UserError as exc:
        return [], str(exc)
    if base is None:
        return [], "no baseline environment"
    return env.diff(base.get("env"), now), None


def summary(cfg: config.Config, compare: dict, changes: list, env_note: str | None,
            cells: list[str]) -> str:
    rows = compare["rows"]
    ordered = render.counts(r["verdict"] for r in rows).items()
    lines = [f"# torchgate summary: matrix `{cfg.matrix_name}`", ""]
    lines += [f"> {n}" for n in compare["notes"]] + ([""] if compare["notes"] else [])
    bad = [r for r in rows if r["verdict"] in render.BAD]
    headline = ("**No regressions.**" if not bad else f"**{len(bad)} regressed or failed.**")
    lines += [headline + " " + ", ".join(f"{n} {v}" for v, n in ordered), ""]
    if bad:
        lines += ["## Regressions and failures", "",
                  render.markdown_table([[r["verdict"], r["stage"], r["cell"], r["workload"], r["mode"],
                             r["metric"], _change(r), r["note"]] for r in bad],
                           ["verdict", "stage", "cell", "workload", "mode", "metric", "change",
                            "detail"]), ""]
    # ---- numerics and portability (stages/coverage.py builds this section) ----
    from stages.judge.portability import summary_section
    lines += summary_section(rows)
    # ---- end numerics and portability ----
    lines += ["## Environment", ""]
    if env_note:
        lines.append(f"Environment change: {env_note}.")
    elif changes:
        lines += [f"{len(changes)} field(s) changed against the baseline "
                  "(see [env/env.md](env/env.md)):", ""]
        lines += [f"- `{k}`: {_v(a)} → {_v(b)}" for k, a, b in changes[:20]]
    else:
        lines.append("No environment change against the baseline.")
    lines += ["", "## Reports", "", f"- [compare.md](compare.md): every verdict "
              f"({compare['tests']} tested metrics, false discovery rate {compare['alpha']})",
              "- [env/env.md](env/env.md)"]
    for cell in cells:
        lines.append(f"- `{cell}`: [bench](bench/{cell}.md), [numerics](numerics/{cell}.md)")
    lines.append("")
    return "\n".join(lines)


def _change(r: dict) -> str:
    if r.get("ratio") is not None:
        return render.ratio_change(r["ratio"], r["ci_low"], r["ci_high"])
    if r.get("base") is not None or r.get("now") is not None:
        return f"{r.get('base')} → {r.get('now')}"
    return ""


def _v(x) -> str:
    return "(absent)" if x is env.MISSING else f"`{x}`"


def main(argv: list[str] | None = None) -> None:
    args = run_arguments("report", __doc__, argv)
    with one_line_errors("report"):
        cfg = config.load(args.params)
        compare = load_record(args.reports / "compare.json", "compare")
        cells = [c.name for c in cfg.cells()]
        metrics: dict = {"bench": {}, "numerics": {}}
        for cell in cfg.cells():
            for stage in ("bench", "numerics"):
                path = args.reports / stage / f"{cell.name}.json"
                if path.exists():
                    record = load_record(path, stage)
                    metrics[stage][cell.name] = (bench_metrics(record, cell.device.price_per_hour)
                                                 if stage == "bench" else numerics_metrics(record))
        metrics["verdicts"] = {v.lower().replace(" ", "_"): n for v, n in
                               render.counts(r["verdict"] for r in compare["rows"]).items()}
        write_text(args.reports / "metrics.json", dumps(metrics))
        changes, note = env_change(cfg, args.reports)
        write_text(args.reports / "summary.md", summary(cfg, compare, changes, note, cells))
        print(f"torchgate report: wrote {args.reports / 'summary.md'} and metrics.json")


if __name__ == "__main__":
    main()
