"""What a comparison reads, as plain data: per (stage, cell) this run's record and its
baseline. core.baseline fills it from reports/ and git; the judge reads it. Pure."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from torchgate.core.records.schema import BenchRecord, EnvRecord, NumericsRecord


def ab_baseline(record: Any) -> Any:
    """In A/B mode a record carries its own baseline: the other interpreter's arm, measured
    beside this one on the same machine. As a record of the same kind, or None."""
    if record is None or record.ab is None:
        return None
    arm = record.ab.baseline
    if isinstance(record, BenchRecord):
        return dataclasses.replace(record, workloads=arm.workloads, ab=None)
    return dataclasses.replace(record, workloads=arm.workloads, coverage=arm.coverage, ab=None)


@dataclass
class RecordPair:
    now: Any
    base: Any
    ab: bool = False          # base is the other arm of this run (A/B mode)
    paired: bool = False      # ... measured in lock-step pairs
    rebuilt: Any = None       # numerics: the baseline measured again, beside the recorded one


@dataclass
class RunInputs:
    """Everything a comparison reads: per (stage, cell) this run's record and the baseline's."""
    rev: str
    commit: str | None
    pairs: dict[tuple[str, str], RecordPair] = field(default_factory=dict)
    env_now: EnvRecord | None = None
    env_base: EnvRecord | None = None
    notes: list[str] = field(default_factory=list)
    # per cell, committed bench runs with their environments, the baseline's first
    history: dict[str, list[tuple[BenchRecord, EnvRecord]]] = field(default_factory=dict)
    # per (stage, cell), why its committed baseline record is there but unreadable (the
    # loader's message): not a first run, a baseline present but unusable
    unusable: dict[tuple[str, str], str] = field(default_factory=dict)
    # the cells the baseline commit holds bench records of, for this machine (whatever this
    # run measures): none of this run's among them is a renamed cell, not a first run
    base_cells: tuple[str, ...] = ()


def pair(now: Any, base: Any) -> RecordPair:
    """This run's record and its baseline: the committed one, or the other arm it carries.
    Numerics of a rebuilt baseline compare with both: the recorded outputs stay the
    reference, the rebuilt arm's are measured the same day."""
    if now is not None and now.ab is not None:
        if now.ab.rebuilt and isinstance(now, NumericsRecord):
            return RecordPair(now, base, rebuilt=ab_baseline(now))
        return RecordPair(now, ab_baseline(now), True, getattr(now.ab, "interleaved", False))
    return RecordPair(now, base)


def own_arm(record: Any) -> Any:
    """A record's own arm alone, without the baseline arm it carries: two runs named by the
    user (`torchgate compare BASE NOW`) compare with each other, not each with its arm."""
    return dataclasses.replace(record, ab=None) if getattr(record, "ab", None) else record


def needs_recorded(now: Any) -> bool:
    """Whether a record is compared with the committed baseline (else only with its arm)."""
    return now is None or now.ab is None or (now.ab.rebuilt and isinstance(now, NumericsRecord))


def with_record(inputs: RunInputs, stage: str, cell: str, record: Any) -> RunInputs:
    """The same inputs with this run's record of (stage, cell) replaced: adaptive sampling
    looks again without reading the baseline again."""
    old = inputs.pairs.get((stage, cell))
    return dataclasses.replace(inputs, pairs={**inputs.pairs, (stage, cell): pair(
        record, old.base if old is not None and not old.ab else None)})
