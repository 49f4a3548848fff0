"""Comparison rules on constructed records: statuses, exact counters, hardware, the sentinel,
A/B records. The statistics themselves are tested by simulation in test_stats_simulation."""
import dataclasses

import pytest

from torchgate.core.records.inputs import ab_baseline
from torchgate.core.records.schema import Busy, ModeNumerics, ModeTiming
from torchgate.core.vocabulary import Verdict
from torchgate.judge.numerics import numerics_rows
from torchgate.judge.run import busy_note
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish

from .records import DELTA, bench, numerics, process, record, with_ab


def rows(now, base, not_comparable=None, **kw):
    drafts = bench_rows("cpu-fp32", now, base, DELTA, not_comparable, **kw)
    return {r.metric: r for r in finish(drafts, alpha=0.05, power=0.8).rows}


def test_identical_distributions_are_equivalent_and_a_real_slowdown_regresses():
    same = rows(record(seed=1), record(seed=2))
    assert same["steady_s"].verdict == Verdict.EQUIVALENT
    assert same["peak_bytes"].verdict == Verdict.EQUIVALENT
    slower = rows(record(seed=1, steady=1.2e-3), record(seed=2))
    assert slower["steady_s"].verdict == Verdict.REGRESSED
    assert 1.15 < slower["steady_s"].change.ratio < 1.25
    assert slower["steady_s"].change.mde is not None
    assert slower["steady_s"].change.p_adjusted < 0.05


def test_a_unit_that_fails_now_is_failed_with_was_ok_and_a_fixed_one_improves():
    broken = rows(record(status="CRASHED", error="worker killed by signal SIGSEGV: x"), record())
    assert broken["status"].verdict == Verdict.FAILED
    assert broken["status"].note.startswith("was OK, now CRASHED: worker killed by signal SIGSEGV")
    fixed = rows(record(), record(status="TIMEOUT", error="no result within 4 s"))
    assert fixed["status"].verdict == Verdict.IMPROVED
    assert "now runs; was TIMEOUT: no result within 4 s" in fixed["status"].note


def test_graph_breaks_and_memory_are_compared_by_their_own_rules():
    more = rows(record(breaks=2), record(breaks=0))
    assert more["graph_breaks"].verdict == Verdict.REGRESSED
    assert (more["graph_breaks"].base, more["graph_breaks"].now) == (0, 2)
    bigger = rows(record(peak=1100), record(peak=1000))
    assert bigger["peak_bytes"].verdict == Verdict.REGRESSED


def test_other_hardware_or_a_moved_sentinel_makes_timings_not_comparable():
    other = rows(record(steady=2e-3), record(), not_comparable="hardware changed (cpu_model)")
    assert other["steady_s"].verdict == Verdict.NOT_COMPARABLE
    assert "hardware changed" in other["steady_s"].note
    assert other["peak_bytes"].verdict == Verdict.EQUIVALENT          # memory is still compared
    slow_machine = rows(record(steady=1.3e-3, sentinel=0.026), record())
    assert slow_machine["steady_s"].verdict == Verdict.NOT_COMPARABLE
    assert "sentinel" in slow_machine["steady_s"].note


def test_new_missing_and_skipped_cells():
    assert {r.verdict for r in bench_rows("c", record(), None, DELTA)} == {Verdict.NEW}
    assert bench_rows("c", None, record(), DELTA)[0].verdict == Verdict.MISSING
    skipped = dataclasses.replace(record(), status="SKIPPED", reason="device 'cuda' (cuda) is "
                                  "not available", workloads={})
    row = bench_rows("c", skipped, None, DELTA)[0]
    assert (row.verdict, row.note) == (Verdict.SKIPPED, skipped.reason)
    # The baseline measured the cell: this run lost it.
    row = bench_rows("c", skipped, record(), DELTA)[0]
    assert (row.verdict, row.base, row.note) == (Verdict.FAILED, "OK",
                                                 f"was OK, now SKIPPED: {skipped.reason}")
    assert bench_rows("c", skipped, skipped, DELTA)[0].verdict == Verdict.SKIPPED


def test_a_unit_the_baseline_ran_and_this_run_skips_is_failed():
    """A mode a workload now says it cannot run here (torchgate.workloads.Unsupported): lost."""
    now = record()
    lost = dataclasses.replace(now, workloads={"w": dataclasses.replace(
        now.workloads["w"], processes=tuple(dataclasses.replace(
            p, modes={"eager": ModeTiming("SKIPPED", error="no bf16 kernel here")})
            for p in now.workloads["w"].processes))})
    [row] = bench_rows("c", lost, record(), DELTA)
    assert (row.metric, row.verdict, row.note) == (
        "status", Verdict.FAILED, "was OK, now SKIPPED: no bf16 kernel here")
    [row] = bench_rows("c", lost, lost, DELTA)
    assert (row.verdict, row.note) == (Verdict.SKIPPED, "no bf16 kernel here")


def test_an_ab_record_carries_its_own_baseline():
    now = with_ab(record(seed=1, steady=1.3e-3), record(seed=2))
    base = ab_baseline(now)
    assert base.workloads is now.ab.baseline.workloads and base.ab is None
    assert rows(now, base)["steady_s"].verdict == Verdict.REGRESSED
    # The candidate interpreter may run the sentinel's Python loop slower (another CPython):
    # that is not the machine moving, the arms ran interleaved.
    slower_python = with_ab(record(seed=1, steady=1.3e-3, sentinel=0.03), record(seed=2))
    assert rows(slower_python, ab_baseline(slower_python))["steady_s"].verdict == \
        Verdict.REGRESSED


def test_lock_step_pairs_are_tested_pair_by_pair():
    """Both arms drift together from round to round (the machine's speed); the paired test
    sees through it where Welch's cannot."""
    drift = [1.0, 1.6, 0.7, 1.3, 0.9, 1.5]
    base = bench({"w": [process(1e-3 * d, round_=i) for i, d in enumerate(drift)]})
    now = bench({"w": [process(1.1e-3 * d, round_=i) for i, d in enumerate(drift)]})
    paired = rows(now, base, paired=True)["steady_s"]
    assert paired.change.test == "paired t" and paired.verdict == Verdict.REGRESSED
    assert 1.08 < paired.change.ratio < 1.12
    assert rows(now, base)["steady_s"].verdict == Verdict.INCONCLUSIVE


def test_the_numbers_shown_beside_a_change_are_the_ones_it_tested():
    """Issue 22: in lock-step the page showed the baseline at 136.3 µs and this run at 152.8 µs
    (+12 %) beside a paired change of +2.2 %: each side's median of its own kept processes,
    where the test used the pairs both of whose processes were kept. Here two rounds of this
    run ran busy: the medians of the sides say +14 %, the pairs +2.2 %."""
    drift = [1.0, 1.0, 1.0, 1.25, 1.25, 1.25]
    base = bench({"w": [process(1e-3 * d, round_=i) for i, d in enumerate(drift)]})
    now = bench({"w": [process(1.022e-3 * d, round_=i, busy=0.9 if i < 2 else None)
                       for i, d in enumerate(drift)]})
    row = rows(now, base, paired=True)["steady_s"]
    assert row.change.n_base == row.change.n_now == 4
    assert 1.01 < row.change.ratio < 1.035
    assert row.now / row.base == pytest.approx(row.change.ratio, rel=1e-9)
    assert 1.2e-3 < row.now < 1.25e-3      # not the median of the kept 4 (1.28e-3)
    welch = rows(now, base)["steady_s"]   # Welch: every kept process of each side
    assert welch.change.n_base == 6 and welch.change.n_now == 4
    assert welch.now / welch.base == pytest.approx(welch.change.ratio, rel=1e-9)
    memory = rows(bench({"w": [process(peak=p) for p in (1000, 1100, 1050, 990)]}),
                  bench({"w": [process(peak=p) for p in (1000, 1010, 1020, 1030)]})
                  )["peak_bytes"]
    assert memory.now / memory.base == pytest.approx(memory.change.ratio, rel=1e-9)


def test_numerics_flags_new_failures_and_errors_that_grew():
    ok = ModeNumerics("PASS", rel_l2={"out": 1e-6})
    grown = ModeNumerics("PASS", rel_l2={"out": 3e-6})
    bad = ModeNumerics("NONFINITE", problems=("out has 8 NaN/Inf of 8 values",))

    def verdict(now, base):
        return numerics_rows("c", numerics({"w": {"eager": now}}),
                             numerics({"w": {"eager": base}}))[0]
    assert verdict(ok, ok).verdict == Verdict.EQUIVALENT
    assert verdict(grown, ok).verdict == Verdict.REGRESSED
    assert "3.0x the baseline's" in verdict(grown, ok).note
    assert verdict(bad, ok).verdict == Verdict.FAILED
    assert verdict(bad, ok).note == "was PASS, now out has 8 NaN/Inf of 8 values"
    assert verdict(ok, bad).verdict == Verdict.IMPROVED


def busy(rec, shares):
    """`rec` with other programs' CPU share during each process's samples."""
    procs = rec.workloads["w"].processes
    return bench({"w": [dataclasses.replace(p, modes={"eager": dataclasses.replace(
        p.modes["eager"], busy_machine=Busy(x, 0.0))}) for p, x in zip(procs, shares)]})


def test_processes_sampled_on_a_busy_machine_are_left_out():
    """Measured on a 2-core VM: with another test run beside the bench stage, the 2-thread
    workloads of a whole cell ran 1.6-13x slower in every process while the sentinel, a
    single-threaded loop, saw nothing. Other programs' share of the CPU says so."""
    quiet = [0.02] * 5
    slowed = busy(record(seed=1, steady=3e-3), [0.6, 0.7, 0.5, 0.9, 0.6])
    verdicts = rows(slowed, busy(record(seed=2), quiet))
    assert verdicts["steady_s"].verdict == Verdict.NOT_COMPARABLE
    assert "5 process(es) left out" in verdicts["steady_s"].note
    # Two busy processes of five: the other three still decide, and the note says so.
    partly = busy(record(seed=1, steady=1.2e-3), [0.6, 0.02, 0.7, 0.02, 0.02])
    row = rows(partly, busy(record(seed=2), quiet))["steady_s"]
    assert row.verdict == Verdict.REGRESSED and row.change.n_now == 3
    assert row.note.startswith("2 process(es) left out")
    assert rows(slowed, busy(record(seed=2), quiet))["peak_bytes"].verdict == Verdict.EQUIVALENT
    # A record without readings (another OS, an older baseline) keeps every process.
    assert rows(record(seed=1), busy(record(seed=2), quiet))["steady_s"].change.n_base == 5


def test_busy_machine_note():
    assert busy_note("this run's cpu", busy(record(n=3), [0.01, 0.1, 0.2]), 0.25) is None
    note = busy_note("this run's cpu", busy(record(n=3), [0.01, 0.6, 0.9]), 0.25)
    assert "in 2 of 3 measured modes" in note and "up to 90%" in note


def test_the_busy_rule_says_what_it_left_out_of_each_side_and_flags_unequal_rates():
    """The rule leaves out processes a side: where the change itself reads as other
    programs' CPU (a helper it starts), one side loses far more, and what is kept compares
    unlike things; the note gives each side's share and flags a difference beyond chance."""
    quiet = [0.02] * 8
    one_each = rows(busy(record(n=8, seed=1), [0.6] + [0.02] * 7),
                    busy(record(n=8, seed=2), [0.02] * 7 + [0.6]))["steady_s"]
    assert "baseline 1 of 8, this run 1 of 8" in one_each.note
    assert "different rates" not in one_each.note
    lopsided = rows(busy(record(n=8, seed=1), [0.6] * 6 + [0.02] * 2),
                    busy(record(n=8, seed=2), quiet))["steady_s"]
    assert "baseline 0 of 8, this run 6 of 8" in lopsided.note
    assert "different rates (Fisher p 0.007)" in lopsided.note
