"""Where the step goes (an input pipeline's parts and the diagnosis) and what it used
(utilization and energy): the sections of reports/bench/<cell>.md and the lines under each
cell of summary.md. Pure."""
from __future__ import annotations

from torchgate.core.vocabulary import BASELINE
from torchgate.judge.results import BOUND_SHARE, NEAR_BAND, CellSummary, UnitSummary
from torchgate.render.markdown import joules, markdown_table, seconds

BUSY = ("not shown: its {} process(es) timed it while other programs took more than "
        "`compare.busy_share` of the CPU")
# The metrics these sections say "not measured" of, with the reason.
OWN = ("copy_s", "cpu_busy", "joules_per_item", "sm_util")
RULE = (f"input-bound or transfer-bound when the input wait or the copy, the larger of the "
        f"two, takes at least {BOUND_SHARE:.0%} of the step (the device idles meanwhile), "
        f"else compute-bound; *near* one from {NEAR_BAND[0]:.0%} to {NEAR_BAND[1]:.0%}; "
        f"*oversubscribed* where the loader's workers and torch's threads outnumber the cores")


def _joules(v: float | None) -> str:
    return "" if v is None else joules(v)


def _share(v: float | None) -> str:
    return "" if v is None else f"{v:.0%}"


def _part(time: float | None, share: float | None) -> str:
    return "" if time is None else f"{seconds(time)} ({_share(share)})"


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' * (n != 1)}"


def diagnosis(n: UnitSummary, base: UnitSummary | None) -> str:
    """"input-bound (input wait 41 %; baseline compute-bound, 3 %)"."""
    b = n.breakdown
    text = f"**{b.bound}** (input wait {_share(b.input_wait_share)}" + (
        f", copy {_share(b.copy_share)}" if b.copy_share is not None else "")
    if b.oversubscribed is not None:
        workers, threads, cores = b.oversubscribed
        text += (f"; **oversubscribed**: {_count(workers, 'loader worker')} and "
                 f"{_count(threads, 'torch thread')} on {_count(cores, 'core')}: compute and "
                 "the loader wait for each other's cores, so the shares mislead; fewer of "
                 "either first")
    was = base.breakdown if base is not None else None
    if was is not None:
        text += (f"; baseline {'the same' if was.bound == b.bound else was.bound}, input wait "
                 f"{_share(was.input_wait_share)}")
    return text + ")"


def _why(n: UnitSummary, metric: str) -> str:
    return dict(n.unmeasured).get(metric, "")


def breakdown_section(summary: CellSummary) -> str:
    rows = []
    for key in summary.keys():
        n = summary.units[key]
        b = n.breakdown
        if b is None:
            if n.breakdown_busy:
                rows.append([key.workload, key.mode, "0", "", BUSY.format(n.breakdown_busy),
                             *[""] * 4])
            continue
        rows.append([key.workload, key.mode, str(b.processes), f"{b.steps:g}",
                     _part(b.input_wait_s, b.input_wait_share),
                     _part(b.copy_s, b.copy_share) or f"none: {_why(n, 'copy_s')}",
                     "" if b.copy_gbps is None else f"{b.copy_gbps:.3g}",
                     _part(b.compute_s, b.compute_share),
                     diagnosis(n, summary.unit(key.workload, key.mode, BASELINE))])
    if not rows:
        return ""
    return ("## Where the step goes\n\nWorkloads with an input pipeline: after the steady "
            "state, single steps with each part timed, the device idle at each step's start: "
            "the wait for the next host batch (host clock), its copy to the device and the "
            "compute (the device's clock). Means per step, medians over processes (shares: of "
            f"each process's step). Diagnosis: {RULE}. Each part is compared with the "
            "baseline's like a timing, in compare.md.\n\n" + markdown_table(
                rows, ["workload", "mode", "processes", "steps", "input wait", "copy",
                       "copy GB/s", "compute", "diagnosis"]))


def usage_section(summary: CellSummary) -> str:
    rows, said = [], {}
    for key in summary.keys():
        n = summary.units[key]
        for metric in ("cpu_busy", "joules_per_item", "sm_util"):
            if _why(n, metric):
                said[f"{LABELS[metric]} not measured: {_why(n, metric)}"] = None
        u = n.usage
        if u is None:
            continue
        rows.append([key.workload, key.mode, _share(u.cpu_busy), _share(u.sm_util),
                     _share(u.mem_util), _joules(u.joules_per_item),
                     "" if u.watts is None else f"{u.watts:.3g} W"])
    if not rows and not said:
        return ""
    return "\n".join([
        "## Utilization and energy", "",
        "Over the steady-state samples (CUDA: the hot series). CPU busy: the worker's CPU "
        "time, its loader and compile workers included, per second and per torch thread. SM "
        "and memory: NVML's utilization rates. Energy per item: the energy counter (RAPL's "
        "packages on the CPU, the whole host; NVML on CUDA, the whole GPU) over the items "
        "processed, compared with the baseline like a timing.", "",
        *([markdown_table(rows, ["workload", "mode", "CPU busy", "SM", "memory",
                                 "energy per item", "mean power"]), ""] if rows else []),
        *(f"- {line}" for line in said)]).rstrip()


LABELS = {"cpu_busy": "CPU busy", "joules_per_item": "energy per item",
          "sm_util": "GPU utilization"}


def cell_lines(summary: CellSummary) -> list[str]:
    """Under a cell's table in summary.md: each input pipeline's diagnosis, the energy per
    item where it was read, else why not (once)."""
    lines = []
    for key in summary.keys():
        n = summary.units[key]
        if n.breakdown is not None:
            lines.append(f"- Where the step goes, {key.workload} {key.mode}: "
                         + diagnosis(n, summary.unit(key.workload, key.mode, BASELINE)) + ".")
        elif n.breakdown_busy:
            lines.append(f"- Where the step goes, {key.workload} {key.mode}: "
                         f"{BUSY.format(n.breakdown_busy)}.")
    energy = [f"{k.workload} {k.mode} {_joules(summary.units[k].usage.joules_per_item)}"
              for k in summary.keys() if summary.units[k].usage is not None
              and summary.units[k].usage.joules_per_item is not None]
    why = list(dict.fromkeys(_why(summary.units[k], "joules_per_item")
                             for k in summary.keys() if _why(summary.units[k], "joules_per_item")))
    if energy:
        lines.append("- Energy per item: " + "; ".join(energy) + ".")
    elif why:
        lines.append(f"- Energy per item not measured: {'; '.join(why)}.")
    return lines
