"""A row (one metric of one unit against the baseline) and the compare record that holds a
run's rows. The verdicts themselves are core.vocabulary's."""
from __future__ import annotations

from dataclasses import dataclass

from stages.core.vocabulary import UnitKey


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
    test: str                          # "Welch t" or "paired t"
    p_adjusted: float | None = None
    mde: float | None = None
    needed: int | None = None          # processes per side (pairs in A/B) that would decide
    df: float | None = None            # of the t-test (Satterthwaite)
    run_spread: float | None = None    # a recorded baseline's run-to-run SD (relative) in se
    run_source: str | None = None      # where that came from: "history of N runs" or "prior"

    @property
    def paired(self) -> bool:
        return self.test == "paired t"


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

    @property
    def key(self) -> UnitKey:
        return UnitKey(self.stage, self.cell, self.workload, self.mode, self.metric)


@dataclass(frozen=True)
class CompareRecord:
    baseline: str
    has_baseline: bool
    alpha: float
    tests: int
    looks: int = 1
    power: float = 0.8
    notes: tuple[str, ...] = ()
    rows: tuple[Row, ...] = ()
    unchanged: bool = False   # this run's packages and workload code were the baseline's
