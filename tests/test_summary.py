"""The typed per-unit summary (judge.summary): each field from a small record whose processes
are known (kept, busy in one phase, failed), the baseline's arm beside this run's, and one
summary per unit per run however many pages, files and pictures read it."""
import dataclasses
from collections import Counter

import pytest

from torchgate import report as report_stage
from torchgate.compose import compose
from torchgate.core.config.settings import Delta, HistorySettings
from torchgate.core.records import write_record
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import (
    BenchProcess,
    BenchRecord,
    Busy,
    EnvRecord,
    ModeTiming,
    Sentinel,
    Waiting,
    WorkloadRun,
)
from torchgate.core.vocabulary import BASELINE, NOW, UnitKey
from torchgate.judge import summary as summary_module
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.judge.trends import Run, series
from torchgate.judge.verdicts import finish
from torchgate.render.bench import measured, waiting
from torchgate.render.numbers import cell_table

from .records import BUSY, DELTA, bench, process, with_ab

QUIET, STOLEN = Busy(0.0, 0.0), Busy(0.5, 0.1)     # 60 % of the CPU taken: over busy_share
PRICE = 3.6                                         # $ per device-hour: 1e-3 $ per second


def timing(steady, first, warmup, calls, peak, *, cache=None, busy=QUIET, first_busy=QUIET,
           latency=None, **extra) -> ModeTiming:
    p50, p90, p99, n = latency or (None, None, None, None)
    return ModeTiming("OK", first_call_s=first, warmup_s=warmup, warmup_calls=calls,
                      steady_s=tuple(steady), peak_bytes=peak, items=2, compile_cache=cache,
                      busy_machine=busy, busy_first_call=first_busy, busy_warmup=first_busy,
                      busy_latency=busy, latency_calls=n, latency_p50_s=p50,
                      latency_p90_s=p90, latency_p99_s=p99, **extra)


def known() -> BenchRecord:
    """Five processes of workload w: two quiet ones; one whose steady state (and tail
    latency) ran on a busy machine but whose first call and warm-up did not; one that
    crashed; one whose eager mode ran out of memory."""
    kept = [
        BenchProcess("OK", sentinel=Sentinel(0.02, 0.004), modes={
            "eager": timing((1e-3, 1e-3, 1e-3), 0.5, 0.1, 4, 1000,
                            latency=(1e-4, 2e-4, 5e-4, 100)),
            "compiled": timing((5e-4,), 2.0, 0.3, 2, 4000, graph_breaks=1, recompiles=0)}),
        BenchProcess("OK", sentinel=Sentinel(0.04, 0.004), modes={
            "eager": timing((3e-3,), 0.7, 0.3, 6, 3000, latency=(3e-4, 4e-4, 9e-4, 120)),
            "compiled": timing((7e-4,), 1.0, 0.2, 2, 4000, cache="warm", graph_breaks=2,
                               recompiles=0)}),
        BenchProcess("OK", sentinel=Sentinel(0.03, 0.004), modes={
            "eager": timing((9e-3,), 0.9, 0.2, 5, 2000, busy=STOLEN,
                            latency=(9e-4, 9e-4, 9e-3, 140))}),
    ]
    failed = [BenchProcess("CRASHED", error="killed by signal SIGSEGV"),
              BenchProcess("OK", modes={"eager": ModeTiming("OOM", error="out of memory")})]
    return BenchRecord("cpu-fp32", "OK", modes=("eager", "compiled"),
                       workloads={"w": WorkloadRun(tuple(kept + failed))})


def test_a_workload_that_names_its_item_is_read_in_it():
    """A decoder's `_item_: token`: the summary and the bench page say tokens/s; a workload
    that names none, items/s as before."""
    from torchgate.core import config
    from torchgate.core.records.schema import RecordedWorkload
    from torchgate.render.bench import measured as bench_table
    raw = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
           "matrix": {"modes": ["eager"]}, "workload": {"gpt_decode": {
               "_target_": "torchgate.workloads.decoder.gpt", "_item_": "token"}}}
    spec = config.parse(raw).workloads["gpt_decode"]
    assert spec.item == "token"
    record = known()
    run = record.workloads["w"]
    decoder = dataclasses.replace(record, workloads={"w": dataclasses.replace(
        run, spec=RecordedWorkload("w", "m.f", item=spec.item))})
    for rec, said in ((decoder, "1,000 tokens/s"), (record, "| 1,000 ")):
        cell = summarize("cpu-fp32", rec, PRICE, BUSY)
        assert said in cell_table(cell, []), said
        assert said in bench_table(cell)
    assert "tokens/s" not in cell_table(summarize("cpu-fp32", record, PRICE, BUSY), [])


def test_each_field_of_a_unit_from_known_processes():
    cell = summarize("cpu-fp32", known(), PRICE, BUSY)
    eager = cell.unit("w", "eager")
    # The steady state: the two quiet processes; the busy one is left out, two failed.
    assert eager.steady_per_process_s == (1e-3, 3e-3)
    assert eager.steady_s == pytest.approx(2e-3)
    assert (eager.processes_kept, eager.processes_busy, eager.processes_failed) == (2, 1, 2)
    assert eager.failures == ("CRASHED: killed by signal SIGSEGV", "OOM: out of memory")
    # 2 items per call at 2 ms: 1,000 items/s; 1e6 items in 1,000 s at 1e-3 $/s.
    assert eager.items_per_s == pytest.approx(1000)
    assert eager.usd_per_million == pytest.approx(1.0)
    # Its first call and warm-up ran on a quiet machine: kept there.
    assert eager.first_call_s == pytest.approx(0.7)          # of 0.5, 0.7, 0.9
    assert eager.first_call_warm_s is None                    # no process started warm
    assert eager.warmup_s == pytest.approx(0.2) and eager.warmup_calls == 5
    # Its tail latency ran on the busy machine: left out, like its steady state.
    assert (eager.latency_p50_s, eager.latency_p90_s, eager.latency_p99_s) == pytest.approx(
        (2e-4, 3e-4, 7e-4))
    assert eager.latency_calls == (100, 120)
    assert eager.peak_bytes == 2000                           # memory: every OK process
    assert eager.cold_s is eager.graph_s is eager.graph_breaks is eager.recompiles is None
    assert (eager.shapes, eager.gpu, eager.family, eager.point) == ((), None, None, ())
    assert eager.value("latency_p99_s") == eager.latency_p99_s and eager.measured

    compiled = cell.unit("w", "compiled")
    assert compiled.steady_s == pytest.approx(6e-4) and compiled.processes_kept == 2
    assert (compiled.first_call_s, compiled.first_call_warm_s) == (2.0, 1.0)   # cold / warm
    assert (compiled.graph_breaks, compiled.recompiles) == (2, 0)              # the most
    assert compiled.processes_failed == 1 and compiled.processes_busy == 0
    assert compiled.latency_calls == () and compiled.latency_p50_s is None

    assert cell.sentinel_loop_s == pytest.approx(0.03)       # every process's sentinel
    assert cell.keys() == [UnitKey("bench", "cpu-fp32", "w", "eager"),
                           UnitKey("bench", "cpu-fp32", "w", "compiled")]
    assert not cell.has_baseline and cell.keys(BASELINE) == []
    # The bench page says who was left out of the steady state; so does the summary's row.
    assert "| 2 (1 busy left out) |" in measured(cell).replace("  ", "")
    row = next(line for line in cell_table(cell, []).splitlines() if "| eager " in line)
    assert "2.00 ms" in row and "1 of 3 processes left out (busy)" in row


def test_fewer_than_two_processes_left_by_the_busy_rule_show_busy_not_a_number():
    quiet, stolen = process(steady=1e-3), process(steady=9e-3)
    stolen = dataclasses.replace(stolen, modes={"eager": dataclasses.replace(
        stolen.modes["eager"], busy_machine=STOLEN)})
    cell = summarize("c", bench({"w": [quiet, stolen, stolen]}), 0.0, BUSY)
    row = next(line for line in cell_table(cell, []).splitlines() if "| eager " in line)
    assert "| busy machine " in row and "2 of 3 processes left out (busy)" in row
    assert " ms" not in row                           # the lone quiet process is not the unit's
    alone = summarize("c", bench({"w": [quiet]}), 0.0, BUSY)      # one process by design
    assert "| 999 µs " in next(line for line in cell_table(alone, []).splitlines()
                              if "| eager " in line)


def test_a_unit_no_process_measured_says_why():
    busy_only = bench({"w": [dataclasses.replace(process(), modes={"eager": dataclasses.replace(
        process().modes["eager"], busy_machine=STOLEN)})]})
    unit = summarize("c", busy_only, 0.0, BUSY).unit("w", "eager")
    assert not unit.measured and unit.steady_per_process_s == () and unit.processes_busy == 1
    assert unit.items_per_s is None and unit.usd_per_million is None
    assert "| w          | eager  | busy machine " in cell_table(summarize("c", busy_only, 0.0,
                                                                          BUSY), [])
    crashed = summarize("c", bench({"w": [process(status="CRASHED", error="boom")]}), 0.0, BUSY)
    assert crashed.unit("w", "eager").failures == ("CRASHED: boom",)
    assert "| FAILED " in cell_table(crashed, [])


def test_the_baseline_arm_comes_from_the_record_or_the_recorded_baseline():
    now, base = bench({"w": [process(steady=2e-3)]}), bench({"w": [process(steady=1e-3)]})
    ab = summarize("c", with_ab(now, base), PRICE, BUSY)
    assert ab.has_baseline and [k.arm for k in ab.units] == [NOW, BASELINE]
    assert ab.unit("w", "eager", BASELINE).steady_s == pytest.approx(1e-3, rel=0.02)
    recorded = summarize("c", now, PRICE, BUSY, base)
    assert recorded.unit("w", "eager", BASELINE) == ab.unit("w", "eager", BASELINE)
    assert recorded.unit("w", "eager") == ab.unit("w", "eager")


def test_the_cpu_each_lock_step_arm_used_while_the_other_was_timed_is_shown():
    def waited(cpu_s):
        return dataclasses.replace(process(), waiting=Waiting(2.0, cpu_s, 40))
    now, base = (bench({"w": [waited(cpu), waited(cpu)]}) for cpu in (0.004, 0.6))
    found = summarize("c", with_ab(now, base, interleaved=True), PRICE, BUSY)
    assert found.waiting == {NOW: Waiting(4.0, 0.008, 80), BASELINE: Waiting(4.0, 1.2, 80)}
    section = waiting(found)
    assert "- now: 0.2 % of a core (0.01 s of CPU in 4.0 s of 80 waits)" in section
    assert "- baseline: 30.0 % of a core" in section
    assert section.count("**not idle**") == 1
    assert waiting(summarize("c", now, PRICE, BUSY)) == ""       # not lock-step: nothing


def counting(monkeypatch) -> Counter:
    """Every call through the per-unit builder, by (record, workload, mode)."""
    calls: Counter = Counter()
    build = summary_module.unit_summary

    def counted(unit, *args):
        calls[id(unit.record), unit.workload, unit.mode] += 1
        return build(unit, *args)
    monkeypatch.setattr(summary_module, "unit_summary", counted)
    return calls


def test_the_report_stage_summarizes_each_unit_once(project, monkeypatch):
    """summary.md, numbers.json, the pictures, their CSV and the sweeps all read one summary
    per unit and arm: 3 workloads x 2 modes, this run's arm and the baseline's."""
    compose(project / "params.yaml", ["matrix=smoke", "matrix.modes=[eager,compiled]"],
            conf=project / "conf")
    procs = {w: [dataclasses.replace(process(steady=s), modes={
        "eager": process(steady=s).modes["eager"],
        "compiled": process(steady=s / 2).modes["eager"]}) for _ in range(3)]
        for w, s in (("a", 1e-3), ("b", 2e-3), ("c", 3e-3))}
    now = dataclasses.replace(bench(procs, modes=("eager", "compiled")), cell="cpu-fp32")
    record = with_ab(now, now)
    write_record(project / "reports/test-box/bench/cpu-fp32.json", record)
    rows = finish(bench_rows("cpu-fp32", record, now, DELTA, same_run=True), alpha=0.05,
                  power=0.8).rows
    write_record(project / "reports/test-box/compare.json",
                 CompareRecord("HEAD", True, 0.05, 0, rows=tuple(rows)))
    calls = counting(monkeypatch)
    report_stage.main([])
    assert len(calls) == 12 and set(calls.values()) == {1}
    page = (project / "reports/test-box/summary.md").read_text()
    assert "### `cpu-fp32`" in page and "| a          | eager " in page
    assert (project / "reports/test-box/pictures/summary/steady.png").exists()
    assert "](pictures/summary/steady.png)" in page
    assert (project / "reports/test-box/numbers.json").exists()


def test_the_history_summarizes_each_unit_of_each_run_once(monkeypatch):
    runs = [Run(f"{i:040x}", "2026-01-01", bench({"w": [process() for _ in range(3)],
                                                  "v": [process() for _ in range(3)]}),
                EnvRecord({"hardware": {"cpu_model": "x"}})) for i in range(4)]
    calls = counting(monkeypatch)
    found = series({"c": runs}, HistorySettings(), BUSY, Delta())
    assert len(calls) == 8 and set(calls.values()) == {1}
    assert {(s.workload, s.metric) for s in found} >= {("w", "steady_s"), ("v", "steady_s")}
