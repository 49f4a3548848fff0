"""The gate: whether a run fails, decided from its compare record and `gate.fail_on`.

One decision for the gate stage (its exit status) and the summary (which says the same), so
the report can show the gate's result without depending on the gate stage. Pure.
"""
from __future__ import annotations

from torchgate.core.config.settings import NOTHING_COMPARABLE
from torchgate.core.metrics import BY_NAME, TIMINGS, Family
from torchgate.core.records.rows import CompareRecord, Row
from torchgate.core.vocabulary import VERDICTS, Verdict
from torchgate.judge.verdicts import UNUSABLE

# A bench row that stands for every timing of its unit: failed, skipped or missing.
UNIT_METRICS = ("status", "cell")
NO_TIMING = "no timing was tested against the baseline"


def timing_rows(record: CompareRecord) -> list[Row]:
    """The bench rows that are, or stand for, timings (memory and counts are exact rules);
    a cell whose baseline is present but unusable is its own reason (`unusable`)."""
    return [r for r in record.rows if r.stage == "bench" and r.metric in (*TIMINGS, *UNIT_METRICS)
            and not is_unusable(r)]


def is_unusable(row: Row) -> bool:
    return row.metric == "cell" and row.verdict == Verdict.NOT_COMPARABLE \
        and row.note.startswith(UNUSABLE)


def unusable(record: CompareRecord) -> str | None:
    """The cells whose committed baseline is there but cannot be used (unreadable, or
    SKIPPED where this run measured them), each with why; None when there is none. Never a
    first run: the gate fails on it whether or not the run changed anything."""
    found = [f"{r.stage} {r.cell}: {r.note[len(UNUSABLE) + 2:]}" for r in record.rows
             if is_unusable(r)]
    if not found:
        return None
    more = f" (and {len(found) - 2} more)" if len(found) > 2 else ""
    return f"Baseline present but unusable: {'; '.join(found[:2])}{more}"


def tested(row: Row) -> bool:
    """A timing tested against the baseline (whatever the test decided)."""
    return row.change is not None and row.verdict != Verdict.NOT_COMPARABLE


def _first_seen(row: Row) -> bool:
    """Nothing in the baseline to test it against: new, or failed with no baseline value."""
    return row.verdict == Verdict.NEW or (row.verdict in (Verdict.FAILED, Verdict.FLAKY)
                                          and row.base is None)


UNCHANGED = ("this run's packages, workload code and environment are the baseline's, so no "
             "change of them can have moved a timing")


def nothing_comparable(record: CompareRecord) -> str | None:
    """Why not one timing of a run that changed something could be tested against its
    baseline. None when one was, when there is no baseline, on a first run (every timing new;
    skipped cells aside), and when the run changed neither packages nor workload code: on a
    noisy machine its timings may not be comparable, but there is nothing for them to gate.
    Unchanged means the environment too (arms.plan.environment_moved): a variable, a backend
    flag, a driver or the hardware can move a timing."""
    return None if record.unchanged else untested(record)


def untested(record: CompareRecord) -> str | None:
    """Why not one timing of the run could be tested against its baseline, if none was."""
    timings = timing_rows(record)
    if not record.has_baseline or not timings or any(tested(r) for r in timings):
        return None
    if any(map(_first_seen, timings)) and all(_first_seen(r) or r.verdict == Verdict.SKIPPED
                                              for r in timings):
        return None
    # The rows' own notes say why (another CPU, the machine's speed); NOT COMPARABLE first.
    ordered = sorted(timings, key=lambda r: r.verdict != Verdict.NOT_COMPARABLE)
    notes = list(dict.fromkeys(r.note for r in ordered if r.note))
    if not notes:
        return _tally(timings)
    more = f" (and {len(notes) - 2} more)" if len(notes) > 2 else ""
    return "; ".join(notes[:2]) + more


# Which budget a REGRESSED row spends: more work is the code's (counted, decided exactly or
# within a margin), slower the machine's time under it (tested); each is its own fix.
BUDGETS = {Family.WORK: "more work", Family.TIME: "slower", Family.LATENCY: "slower",
           Family.GPU: "slower", Family.RANKS: "slower", Family.BREAKDOWN: "slower",
           Family.ENERGY: "more energy", Family.MEMORY: "more memory",
           Family.COMPILER: "compiles more"}


def budget(row: Row) -> str:
    """What a REGRESSED row says grew: more work, slower, more memory, compiles more; a
    numerics row's is its numerics."""
    found = BY_NAME.get(row.metric)     # a finding's stages: "bench + numerics"
    return BUDGETS[found.family] if found is not None else row.stage.split(" ")[0]


def gate_failures(record: CompareRecord, fail_on: tuple[str, ...]) -> list[str]:
    """Why the run fails, one reason a line (the verdicts counted together, REGRESSED by the
    budget it spends: "3 REGRESSED (more work: 2, slower: 1)"); [] passes."""
    failures = []
    failing = [r for r in record.findings() if r.verdict in fail_on]
    spent = sorted(budget(r) for r in failing if r.verdict == Verdict.REGRESSED)
    counted = _tally(failing, {Verdict.REGRESSED: ", ".join(
        f"{b}: {spent.count(b)}" for b in dict.fromkeys(spent))})
    if counted:
        failures.append(counted)
    broken = unusable(record) if NOTHING_COMPARABLE in fail_on else None
    if broken:
        failures.append(broken)
    why = nothing_comparable(record) if NOTHING_COMPARABLE in fail_on else None
    if why:
        failures.append(f"Nothing could be compared: {why}; {NO_TIMING}")
    return failures


def gate_checked(record: CompareRecord, fail_on: tuple[str, ...]) -> str:
    """What a passing gate checked, in one line."""
    if not fail_on:
        return "gate.fail_on is empty: nothing checked"
    said = []
    verdicts = [v for v in VERDICTS if v in fail_on]
    if verdicts:
        said.append(f"no {' or '.join(verdicts)} among {len(record.findings())} verdicts")
    if NOTHING_COMPARABLE in fail_on:
        count = sum(map(tested, timing_rows(record)))
        said.append(f"{count} timing(s) tested against the baseline" if count else
                    UNCHANGED if record.unchanged and untested(record) else
                    "no baseline to test timings against yet")
    return "; ".join(said)


def _tally(rows: list[Row], said: dict[str, str] | None = None) -> str:
    """Counts by verdict, most serious first, each with what `said` adds to it: 2 REGRESSED
    (more work: 2), 1 FAILED."""
    found = [(sum(r.verdict == v for r in rows), v) for v in VERDICTS]
    return ", ".join(f"{n} {v}" + (f" ({(said or {})[v]})" if (said or {}).get(v) else "")
                     for n, v in found if n)
