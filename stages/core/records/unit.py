"""One unit of a bench record (a workload's mode, in one arm) and the questions every room asks
of it: its values of a metric, one per worker process, with the busy-machine rule; the pairs
it makes with another arm's unit; how its processes failed, or why it was skipped; what a
counted metric's detail says. The rules (judge.timings) and the summary (judge.summary) read a
record through it (`BenchRecord.unit`), and nothing else reduces a unit. Pure; standard
library only.

One value per process: a series' median sample, or the phase's value. A process that failed,
or whose mode failed, gives none. A timing's busy rule leaves out the processes whose phase
of it ran while other programs and steal took more than a share of the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from torchgate.core.metrics import WHOLE_MODE, Metric
from torchgate.core.numbers import median
from torchgate.core.vocabulary import Failure, Status

if TYPE_CHECKING:
    from torchgate.core.records.schema import (
        BenchProcess,
        BenchRecord,
        Busy,
        ModeTiming,
        WorkloadRun,
    )

def taken(b: Busy) -> float:
    """The CPU share this process could not have: others' and the hypervisor's steal."""
    return b.other_cpu + b.steal


def reading(mode: ModeTiming, metric: Metric) -> Busy | None:
    """What else took the CPU during the phase a metric times. A record that read the
    steady-state samples only (schema 2) is judged by that reading in every phase."""
    phase = getattr(mode, metric.phase) if metric.phase else None
    return phase or mode.busy_machine


def busy(mode: ModeTiming, share: float | None, metric: Metric = WHOLE_MODE) -> bool:
    """Other programs and steal took more than `share` of the CPU while this phase ran."""
    b = reading(mode, metric)
    return share is not None and b is not None and taken(b) > share


@dataclass(frozen=True)
class BenchUnit:
    """A view: it holds the record, never a copy of its numbers."""
    record: BenchRecord
    workload: str
    mode: str

    @property
    def run(self) -> WorkloadRun | None:
        return self.record.workloads.get(self.workload)

    @property
    def exists(self) -> bool:
        """The record measured this workload in this mode (or failed to)."""
        return self.workload in self.record.workloads and self.mode in self.record.modes

    @property
    def processes(self) -> tuple[BenchProcess, ...]:
        return tuple(self.run.processes) if self.run is not None else ()

    @property
    def counts(self) -> tuple[BenchProcess, ...]:
        """The counts processes (a BANDED metric's, measure.callgrind)."""
        return tuple(self.run.counts) if self.run is not None else ()

    def measured(self, metric: Metric) -> Iterator[tuple[BenchProcess, ModeTiming, float]]:
        """(process, its mode's result, its value) for every process where the mode succeeded
        and measured the metric (the counts processes, for a metric counted apart)."""
        for proc in self.counts if metric.counted_apart else self.processes:
            m = proc.modes.get(self.mode) if proc.status == Status.OK else None
            if m is None or m.status != Status.OK:
                continue
            value = metric.read(m)
            if isinstance(value, tuple):
                if value:
                    yield proc, m, median(value)
            elif value is not None:
                yield proc, m, value

    def kept(self, metric: Metric, busy_share: float | None = None
             ) -> Iterator[tuple[BenchProcess, ModeTiming, float]]:
        """`measured`, with `busy_share`, less a timing's processes whose phase ran on a busy
        machine (other metrics keep every process)."""
        share = busy_share if metric.timed else None
        return ((p, m, v) for p, m, v in self.measured(metric) if not busy(m, share, metric))

    def values(self, metric: Metric, busy_share: float | None = None) -> list[float]:
        """One number per process that measured it (`kept`)."""
        return [v for _, _, v in self.kept(metric, busy_share)]

    def modes(self, metric: Metric | None = None, busy_share: float | None = None
              ) -> list[ModeTiming]:
        """The mode's result in every process where it ran (that measured `metric`, if given,
        as `kept`)."""
        if metric is not None:
            return [m for _, m, _ in self.kept(metric, busy_share)]
        return [m for p in self.processes if p.status == Status.OK
                for m in [p.modes.get(self.mode)] if m is not None and m.status == Status.OK]

    def field(self, name: str) -> list[Any]:
        """A plain field of the mode's record (not a metric: items, warm-up calls) in every
        process where the mode ran and recorded it."""
        return [v for m in self.modes() if (v := getattr(m, name)) is not None]

    def paired(self, other: BenchUnit, metric: Metric, busy_share: float | None = None
               ) -> list[tuple[tuple[ModeTiming, float], tuple[ModeTiming, float]]]:
        """Interleaved A/B, this unit the baseline arm: each lock-step round where both arms'
        processes kept a value (`kept`), in order: ((mode, value) of this arm, of the other)."""
        b, n = ({p.round: (m, v) for p, m, v in unit.kept(metric, busy_share)
                 if p.round is not None} for unit in (self, other))
        return [(b[r], n[r]) for r in sorted(b.keys() & n.keys())]

    def pairs(self, other: BenchUnit, metric: Metric, busy_share: float | None = None
              ) -> tuple[list[float], list[float]]:
        """Both arms' values, round by round (`paired`)."""
        found = self.paired(other, metric, busy_share)
        return [b[1] for b, _ in found], [n[1] for _, n in found]

    def paired_modes(self, other: BenchUnit, metric: Metric, busy_share: float | None = None
                     ) -> tuple[list[ModeTiming], list[ModeTiming]]:
        """Both arms' mode results, round by round (`paired`)."""
        found = self.paired(other, metric, busy_share)
        return [b[0] for b, _ in found], [n[0] for _, n in found]

    def failures(self) -> list[Failure]:
        """How each process that failed the mode failed: the process, or the mode in it."""
        found = []
        for proc in self.processes:
            if proc.status != Status.OK:
                found.append(Failure(proc.status, proc.error))
                continue
            m = proc.modes.get(self.mode)
            if m is not None and m.status not in (Status.OK, Status.SKIPPED):
                found.append(Failure(m.status, m.error))
        return found

    def ran(self) -> int:
        """In how many processes the mode ran to the end."""
        return len(self.modes())

    def skipped(self) -> str | None:
        """Why the workload said it cannot run in this mode here (torchgate.workloads.Unsupported),
        where no process ran the mode; else None."""
        modes = [p.modes.get(self.mode) for p in self.processes if p.status == Status.OK]
        reasons = [m.error or "" for m in modes if m is not None and m.status == Status.SKIPPED]
        ran = any(m is not None and m.status == Status.OK for m in modes)
        return reasons[0] if reasons and not ran else None

    def detail(self, metric: Metric) -> Any:
        """What a counted metric's `detail` says over every process that measured it: its
        reasons, in order; or its counts by name, the most any process counted of each."""
        found = [metric.detail_of(m) for _, m, _ in self.measured(metric)]
        if any(isinstance(d, dict) for d in found):
            most: dict = {}
            for d in found:
                for name, count in (d or {}).items():
                    most[name] = max(most.get(name, 0), count)
            return dict(sorted(most.items()))
        return tuple(dict.fromkeys(r for d in found for r in d or ()))

    def counts_lost(self) -> str | None:
        """How the first counts process that failed the mode failed; None: none did."""
        return next((f"{p.status}: {p.error}" if p.status != Status.OK else
                     f"{p.modes[self.mode].status}: {p.modes[self.mode].error}"
                     for p in self.counts if p.status != Status.OK
                     or (self.mode in p.modes and p.modes[self.mode].status != Status.OK)), None)

    def counter(self):
        """How this unit's counts were taken (schema.Counter.of_mode); None: not counted."""
        return next((p.counter.of_mode(self.mode) for p in self.counts
                     if p.counter is not None), None)
