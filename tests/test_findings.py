"""One finding, one row: a metric of a unit judged by several stages is counted once."""
from __future__ import annotations

from torchgate.core.records.rows import CompareRecord, Row
from torchgate.core.vocabulary import Verdict
from torchgate.judge.gate import gate_failures
from torchgate.render.markdown import tally


def findings(rows: list[Row]) -> list[Row]:
    return CompareRecord("HEAD", True, 0.05, 0, rows=tuple(rows)).findings()


def row(stage: str, verdict: str, metric: str = "graph_breaks", workload: str = "net") -> Row:
    return Row(stage, "cpu-fp32", workload, "compiled", metric, verdict, 0, 1)


def test_one_graph_break_seen_by_three_stages_is_one_regression():
    rows = [row("bench", Verdict.REGRESSED), row("numerics", Verdict.REGRESSED),
            row("numerics vs rebuilt", Verdict.REGRESSED),
            row("bench", Verdict.EQUIVALENT, "steady_s")]
    found = findings(rows)
    assert len(found) == 2
    breaks = next(r for r in found if r.metric == "graph_breaks")
    assert breaks.stage == "bench + numerics + numerics vs rebuilt"
    assert tally(r.verdict for r in found) == "1 REGRESSED, 1 EQUIVALENT"
    record = CompareRecord("HEAD", True, 0.05, 1, rows=tuple(rows))
    assert gate_failures(record, (Verdict.REGRESSED,)) == ["1 REGRESSED (compiles more: 1)"]


def test_the_most_serious_source_stands_for_the_finding_and_the_others_are_named():
    found = findings([row("numerics", Verdict.EQUIVALENT), row("bench", Verdict.REGRESSED)])
    assert [(r.verdict, r.stage) for r in found] == [(Verdict.REGRESSED, "numerics + bench")]
    assert "numerics: EQUIVALENT" in found[0].note


def test_different_units_stay_apart():
    found = findings([row("bench", Verdict.REGRESSED, workload="a"),
                      row("numerics", Verdict.REGRESSED, workload="b")])
    assert len(found) == 2
