"""The words every room shares: verdicts, statuses, the unit key and where reports live.

Each is a `str` enum, so a record's JSON holds the same text as before ("REGRESSED", "OK",
"NOT MEASURED") and a loaded string compares equal to its member. Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import NamedTuple


class Word(str, Enum):
    """A str enum whose str() and format() are its value, on every Python torchgate runs on."""

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class Verdict(Word):
    """One metric of one unit against the baseline (judge.verdicts decides; DESIGN §4)."""
    REGRESSED = "REGRESSED"
    IMPROVED = "IMPROVED"
    EQUIVALENT = "EQUIVALENT"
    INCONCLUSIVE = "INCONCLUSIVE"
    NEW = "NEW"
    MISSING = "MISSING"
    FAILED = "FAILED"
    FLAKY = "FLAKY"             # failed in some processes, ran in the others
    SKIPPED = "SKIPPED"
    NOT_COMPARABLE = "NOT COMPARABLE"


# Every verdict, in the order a page lists them: what needs a look first.
VERDICTS = (Verdict.REGRESSED, Verdict.FAILED, Verdict.FLAKY, Verdict.INCONCLUSIVE,
            Verdict.NOT_COMPARABLE,
            Verdict.IMPROVED, Verdict.EQUIVALENT, Verdict.NEW, Verdict.MISSING, Verdict.SKIPPED)
BAD = (Verdict.REGRESSED, Verdict.FAILED, Verdict.FLAKY)          # what fails a gate by default
DECIDED = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.EQUIVALENT)   # a test reached a decision
QUIET = (Verdict.EQUIVALENT, Verdict.NEW, Verdict.SKIPPED)        # nothing for a reviewer to do


class Status(Word):
    """How a worker process, or one mode in it, ended. OK ran; SKIPPED could not run here
    (the device is absent); the rest are FAILURES."""
    OK = "OK"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    OOM = "OOM"
    CRASHED = "CRASHED"
    TIMEOUT = "TIMEOUT"
    NONFINITE = "NONFINITE"


FAILURES = (Status.ERROR, Status.OOM, Status.CRASHED, Status.TIMEOUT, Status.NONFINITE)


class Failure(NamedTuple):
    """How a worker process, or one mode in it, failed: its status and its message, kept
    apart (a row's `now` is the status, its note the whole line)."""
    status: str
    message: str | None

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"


class Check(Word):
    """A numerics check's outcome against its tolerances."""
    PASS = "PASS"
    FAIL = "FAIL"
    NONFINITE = "NONFINITE"
    NOT_MEASURED = "NOT MEASURED"


NOW, BASELINE = "now", "baseline"          # a unit's arm: this run's, or its baseline's


@dataclass(frozen=True, order=True)
class UnitKey:
    """One unit (a workload's mode in one cell, in one arm, as a stage saw it) and, for a
    verdict, its metric: the one key every room names a unit by. A cell's own row has
    workload and mode "*" and metric "cell"."""
    stage: str
    cell: str
    workload: str
    mode: str
    metric: str = ""            # a verdict's; "": the unit itself
    arm: str = NOW

    def with_metric(self, metric: str) -> UnitKey:
        return UnitKey(self.stage, self.cell, self.workload, self.mode, metric, self.arm)

    def parts(self) -> tuple[str, str, str, str, str]:
        """Its fields in order (dataclasses.astuple deep-copies: most of a judge's time)."""
        return self.stage, self.cell, self.workload, self.mode, self.metric


def cell_key(stage: str, cell: str) -> UnitKey:
    """The key of a row about a whole cell (missing, skipped, unusable, failed to judge)."""
    return UnitKey(stage, cell, "*", "*", "cell")


class Tick(NamedTuple):
    """Where a running stage is (launch.progress.Progress counts, render.progress writes the line)."""
    done: int
    planned: int
    elapsed_s: float
    left_s: float          # at the mean pace of the units done so far


FRESH = "fresh process"     # the unit that reruns a cell's workloads (determinism check)

# Where the reports live, relative to the project's root (and inside any revision of it).
REPORTS = Path("reports")
# The folder of a reports root that holds every picture, one sub-folder per page (summary,
# history): drawn from the records, never committed (it ignores itself), drawn again by
# `dvc repro` where it is missing. A picture is redrawn data: committed, the pictures were
# most of what a run added to the repository's history.
PICTURES = "pictures"
SHORT_COMMIT = 10           # characters of a commit id shown to people


def short(commit: str) -> str:
    return commit[:SHORT_COMMIT]


# Spent.function of a counts process's entry for a library's functions not kept one by one.
REST = "(smaller functions)"
