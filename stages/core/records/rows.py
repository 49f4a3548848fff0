"""A row (one metric of one unit against the baseline) and the compare record that holds a
run's rows: what judge.verdicts decides, what compare.json keeps and every page reads. The
verdicts themselves are core.vocabulary's."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from torchgate.core.vocabulary import VERDICTS, UnitKey


@dataclass(frozen=True)
class Change:
    """A tested change of a timing: the ratio now/base with the interval decided on."""
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float                  # of the interval, e.g. 0.95
    p: float
    n_base: int
    n_now: int
    spread: float                      # process-to-process SD of log values
    test: str                          # "Welch t", "paired t" or "paired t trimmed g/n"
    p_adjusted: float | None = None
    mde: float | None = None
    needed: int | None = None          # processes per side (pairs in A/B) that would decide
    df: float | None = None            # of the t-test (Satterthwaite)
    run_spread: float | None = None    # a recorded baseline's run-to-run SD (relative) in se
    run_source: str | None = None      # where that came from: "history of N runs" or "prior"

    @property
    def paired(self) -> bool:
        return self.test.startswith("paired t")


@dataclass(frozen=True)
class Contribution:
    """Where part of a unit's change went: a function of a library (host instructions), an
    operator (time) or a compile phase, with each side's value per call in the row's unit."""
    what: str
    kind: str                          # core.metrics.Parts, or "library"
    base: float
    now: float
    library: str = ""                  # a function's shared object
    p: float | None = None             # an operator's test, Holm-adjusted over its unit's

    @property
    def change(self) -> float:
        return self.now - self.base


@dataclass(frozen=True)
class Row:
    """One verdict: a cell, workload, mode and metric of this run against the baseline."""
    stage: str
    cell: str
    workload: str
    mode: str
    metric: str
    verdict: str
    base: int | float | str | None = None
    now: int | float | str | None = None
    delta: float | None = None
    change: Change | None = None
    note: str = ""
    # Undecided, yet a slowdown by its own interval (judge.verdicts.possible_slowdown): a
    # page lists it for a look.
    possible_slowdown: bool = False
    # Where its change went, the largest parts first (judge.counts.where_it_went)
    attribution: tuple[Contribution, ...] = ()

    @property
    def key(self) -> UnitKey:
        return UnitKey(self.stage, self.cell, self.workload, self.mode, self.metric)


@dataclass(frozen=True)
class Prior:
    """Variance moderation's fitted distribution of a metric's unit variances over the run
    (judge.moderation): s0² with d0 degrees of freedom, from this many units."""
    variance: float
    df: float
    units: int


SEVERITY = {v: i for i, v in enumerate(VERDICTS)}


@dataclass(frozen=True)
class CompareRecord:
    """A whole run against its baseline, decided together (judge.verdicts.finish)."""
    baseline: str
    has_baseline: bool
    alpha: float
    tests: int
    looks: int = 1            # adaptive sampling: looks per cell planned
    power: float = 0.8
    notes: tuple[str, ...] = ()   # shown above the tables
    rows: tuple[Row, ...] = ()
    unchanged: bool = False   # this run's packages and workload code were the baseline's
    priors: dict[str, Prior] = field(default_factory=dict)   # variance moderation, per metric
    # What it compared (core.baseline.run_stamp): the gate refuses a comparison of other
    # records, cells or baseline than the run it judges holds; "" for a pair of files compared.
    inputs: str = ""

    def findings(self) -> list[Row]:
        """One row per finding: the same metric of the same unit judged by several stages (a
        new graph break seen by bench, by numerics and by numerics against the rebuilt
        baseline) is one finding, counted once. Its most serious row stands for it (the first
        stage's on a tie); its stage names every source, and a source that decided otherwise
        is noted."""
        groups: dict[tuple, list[Row]] = {}
        for r in self.rows:
            groups.setdefault(r.key.parts()[1:], []).append(r)   # its stage aside
        found = []
        for members in groups.values():
            if len(members) == 1:
                found.append(members[0])
                continue
            worst = min(members, key=lambda r: SEVERITY.get(r.verdict, len(SEVERITY)))
            sources = list(dict.fromkeys(r.stage for r in members))
            others = [f"{r.stage}: {r.verdict}" for r in members if r.verdict != worst.verdict]
            note = "; ".join(filter(None, [worst.note, *others]))
            found.append(dataclasses.replace(worst, stage=" + ".join(sources), note=note))
        return found
