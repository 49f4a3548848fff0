"""One line per worker process while a stage runs, so that a long run shows where it is: how
many of the planned processes are done, the time so far and an estimate of what is left. Plain
lines, no terminal control codes: a CI log and `dvc queue logs` read as a terminal does."""
from __future__ import annotations

from torchgate.core.numbers import median
from torchgate.core.records.schema import BenchProcess, ModeNumerics, NumericsProcess
from torchgate.core.vocabulary import Status, Tick


def clock(seconds: float) -> str:
    """0:42, 12:05, 1:02:03."""
    minutes, secs = divmod(int(round(max(seconds, 0.0))), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def counter(tick: Tick | None) -> str:
    """`[3/12 0:42, ~1:24 left] `, or nothing without a tick."""
    if tick is None:
        return ""
    done, planned, elapsed_s, left_s = tick
    left = f", ~{clock(left_s)} left" if done < planned else ""
    return f"[{done}/{planned} {clock(elapsed_s)}{left}] "


def bench_line(cell: str, workload: str, arm: str, round_: int, result: BenchProcess,
               tick: Tick | None = None) -> str:
    label = "" if arm == "now" else f" [{arm}]"
    which = "counts process" if result.counter is not None or round_ < 0 else \
        f"process {round_ + 1}"
    if result.status != Status.OK:
        what = f"{result.status}: {result.error}"
    elif result.counter is not None:
        what = "; ".join(f"{mode} {m.instructions:,} host instructions a call"
                         if m.status == Status.OK else f"{mode} {m.status}: {m.error}"
                         for mode, m in result.modes.items())
    else:
        what = "; ".join(
            f"{mode} {m.status}: {m.error}" if m.status != Status.OK else
            f"{mode} {median(m.steady_s) * 1e3:.3f} ms (first call "
            f"{m.first_call_s:.2f} s{', warm caches' if m.compile_cache == 'warm' else ''})"
            if m.steady_s else f"{mode} OK"
            for mode, m in result.modes.items())
    profiling = sum(m.profile_s or 0.0 for m in result.modes.values())
    wall = f" [{result.wall_s:.1f} s" + (f", {profiling:.1f} s of it profiling" if profiling
                                          else "") + "]" if result.wall_s is not None else ""
    node = result.host.node if result.host is not None else None
    where = f" on node {node[:8]}" if node else ""
    return (f"torchgate bench: {counter(tick)}{cell} {workload}{label} {which}"
            f"{where}: {what}{wall}")


def numerics_process_line(cell: str, workload: str, arm: str, round_: int,
                          result: NumericsProcess, tick: Tick | None = None) -> str:
    """A numerics worker as it ends; the verdicts follow when the cell is judged."""
    label = "" if arm == "now" else f" [{arm}]"
    failed = [f"{mode} {m.status}" for mode, m in result.modes.items() if m.status != Status.OK]
    what = (f"{result.status}: {result.error}" if result.status != Status.OK else
            "ran" + (f" ({', '.join(failed)})" if failed else ""))
    wall = f" [{result.wall_s:.1f} s]" if result.wall_s is not None else ""
    return f"torchgate numerics: {counter(tick)}{cell} {workload}{label}: {what}{wall}"


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


def others_measuring(found: list[tuple[int, str]]) -> str:
    """One warning for every other measuring process (a run's stage and its workers alike):
    the first one's command, every pid."""
    pids = ("pids " if len(found) > 1 else "pid ") + ", ".join(str(pid) for pid, _ in found)
    return (f"another torchgate run is measuring on this machine ({found[0][1]}; {pids}): its "
            "load moves this run's timings; run one at a time (`dvc queue start -j 1`)")
