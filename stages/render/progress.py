"""One line per worker process while a stage runs, so that a long run shows where it is."""
from __future__ import annotations

from stages.core.schema import OK, BenchProcess, ModeNumerics
from stages.judge import stats


def bench_line(cell: str, workload: str, arm: str, round_: int, result: BenchProcess) -> str:
    label = "" if arm == "now" else f" [{arm}]"
    if result.status != OK:
        what = f"{result.status}: {result.error}"
    else:
        what = "; ".join(
            f"{mode} {m.status}: {m.error}" if m.status != OK else
            f"{mode} {stats.median(m.steady_s) * 1e3:.3f} ms (first call "
            f"{m.first_call_s:.2f} s)" if m.steady_s else f"{mode} OK"
            for mode, m in result.modes.items())
    wall = f" [{result.wall_s:.1f} s]" if result.wall_s is not None else ""
    return f"torchgate bench: {cell} {workload}{label} process {round_ + 1}: {what}{wall}"


def numerics_line(cell: str, workload: str, mode: str, ev: ModeNumerics) -> str:
    worst = max((v for v in ev.rel_l2.values() if v is not None), default=None)
    extra = ([f"compiled vs eager {ev.compiled_vs_eager.status}"]
             if ev.compiled_vs_eager is not None else [])
    if ev.rerun_max_abs or (ev.fresh_process is not None and ev.fresh_process.equal is False):
        extra.append("NONDETERMINISTIC")
    return (f"torchgate numerics: {cell} {workload} {mode}: {ev.status}"
            + (f", max rel. L2 {worst:.2e}" if worst is not None else "")
            + "".join(f", {e}" for e in extra)
            + (f" ({'; '.join(ev.problems)})" if ev.problems else ""))
