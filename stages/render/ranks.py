"""Distributed units (`_ranks_`): a line per unit on the summary page, a table on the bench
page; their numbers are judge.summary's (judge.ranks). Pure."""
from __future__ import annotations

from stages.core.records.rows import Row
from stages.core.vocabulary import Status
from stages.judge.summary import CellSummary
from stages.render.markdown import markdown_table, nbytes, seconds
from stages.render.verdicts import change

ABOUT = ("Per distributed unit: its ranks and their threads each; the all-reduce time per step "
         "(that of the last rank to arrive: the others wait in theirs) and the bus bandwidth "
         "it gives (nccl-tests': bytes / time × 2(n-1)/n); the slowest rank by its time to "
         "the collective (its forward and backward passes, waits excluded), and how far it "
         "lags the fastest (nvidia-resiliency-ext's relative performance: fastest / its "
         "time). Medians over the processes.")


def rate(bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "not measured"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6)):
        if bytes_per_s >= size:
            return f"{bytes_per_s / size:.3g} {unit}"
    return f"{bytes_per_s / 1e3:.3g} kB/s"


def _moved(row: Row | None) -> str:
    """" (+3.1 % [-0.4, +6.7] EQUIVALENT)": the change against the baseline, where tested."""
    if row is None or row.change is None:
        return ""
    return f" ({change(row)} {row.verdict})"


def _slowed(r) -> str:
    return f" (rank {r.slowed} slowed {r.slow_factor:g}× on purpose: `_slow_rank_`)" \
        if r.slowed is not None else ""


def line(cell: str, workload: str, mode: str, r, rows: list[Row]) -> str:
    """One unit: ranks, all-reduce, bus bandwidth, the straggler, and their changes."""
    mine = {x.metric: x for x in rows if (x.stage, x.cell, x.workload, x.mode)
            == ("bench", cell, workload, mode)}
    said = [f"`{cell}` {workload} {mode}: {r.world_size} {r.backend} ranks × {r.threads} "
            f"thread{'s' * (r.threads != 1)}",
            f"all-reduce {seconds(r.comm_s)} a step{_moved(mine.get('comm_s'))}, bus bandwidth "
            f"{rate(r.busbw)} ({nbytes(r.bytes_per_step)} a step)"]
    if r.lag is not None and r.slowest is not None:
        said.append(f"slowest rank {r.slowest} ({r.slowest_in} of {r.processes} processes), "
                    f"{r.lag * 100:.1f} % behind the fastest{_moved(mine.get('straggler'))}")
    return "- " + "; ".join(said) + _slowed(r)


def section(bench: dict[str, CellSummary], rows: list[Row]) -> list[str]:
    """`## Distributed units` on the summary page: one line per unit; nothing without one."""
    found = [line(cell, key.workload, key.mode, n.ranks, rows)
             for cell, summary in sorted(bench.items()) if summary.status == Status.OK
             for key in summary.keys() if (n := summary.units[key]).ranks is not None]
    return ["## Distributed units", "", ABOUT, "", *found, ""] if found else []


def table(summary: CellSummary) -> str:
    """`## Distributed units` on the bench page: per unit, each rank's numbers too."""
    body = []
    for key in summary.keys():
        r = summary.units[key].ranks
        if r is None:
            continue
        body.append([key.workload, key.mode, f"{r.world_size} × {r.threads}", r.backend,
                     seconds(r.comm_s), rate(r.busbw), nbytes(r.bytes_per_step),
                     " / ".join(seconds(s) for s in r.ready_s),
                     " / ".join(seconds(s) for s in r.allreduce_s),
                     "" if r.lag is None else f"rank {r.slowest}, {r.lag * 100:.1f} %" + _slowed(r)])
    if not body:
        return ""
    return ("## Distributed units\n\n" + ABOUT + " Per rank, in rank order: its time to the "
            "collective, and its all-reduce time with its waits.\n\n" + markdown_table(
                body, ["workload", "mode", "ranks × threads", "backend", "all-reduce a step",
                       "bus bandwidth", "all-reduced a step", "to the collective, per rank",
                       "all-reduce, per rank", "slowest, lag"]))
