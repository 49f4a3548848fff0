"""Comparison rules on constructed records: statuses, exact counters, hardware, the sentinel,
A/B records. The statistics themselves are tested by simulation in test_stats_simulation."""
import random

from stages.judge import comparison
from stages.judge import stats

DELTAS = {"steady_s": 0.05, "first_call_s": 0.2, "warmup_s": 0.25, "peak_bytes": 0.05}


def process(steady=1e-3, sentinel=0.02, status="OK", error=None, breaks=None, rng=None, **mode):
    rng = rng or random.Random(0)
    if status != "OK":
        return {"status": status, "error": error}
    m = {"status": "OK", "steady_s": [steady * rng.uniform(0.99, 1.01) for _ in range(8)],
         "first_call_s": 0.5 * rng.uniform(0.98, 1.02), "warmup_s": 0.1 * rng.uniform(0.98, 1.02),
         "peak_bytes": 1000, **mode}
    if breaks is not None:
        m.update(graph_breaks=breaks, recompiles=0)
    return {"status": "OK", "sentinel": {"python_loop_s": sentinel * rng.uniform(0.99, 1.01)},
            "modes": {"eager": m}}


def record(n=5, seed=0, **kw):
    rng = random.Random(seed)
    return {"status": "OK", "modes": ["eager"],
            "workloads": {"w": {"processes": [process(rng=rng, **kw) for _ in range(n)]}}}


def rows(now, base, not_comparable=None):
    result = comparison.Comparison(rows=comparison.bench_rows("cpu-fp32", now, base, DELTAS,
                                                              not_comparable))
    return {r.metric: r for r in comparison.finish(result, 0.05, 0.8).rows}


def test_identical_distributions_are_equivalent_and_a_real_slowdown_regresses():
    same = rows(record(seed=1), record(seed=2))
    assert same["steady_s"].verdict == stats.EQUIVALENT
    assert same["peak_bytes"].verdict == stats.EQUIVALENT
    slower = rows(record(seed=1, steady=1.2e-3), record(seed=2))
    assert slower["steady_s"].verdict == stats.REGRESSED
    assert 1.15 < slower["steady_s"].shift.ratio < 1.25
    assert slower["steady_s"].mde is not None and slower["steady_s"].p_adjusted < 0.05


def test_a_unit_that_fails_now_is_failed_with_was_ok_and_a_fixed_one_improves():
    broken = rows(record(status="CRASHED", error="worker killed by signal SIGSEGV: x"), record())
    assert broken["status"].verdict == stats.FAILED
    assert broken["status"].note.startswith("was OK, now CRASHED: worker killed by signal SIGSEGV")
    fixed = rows(record(), record(status="TIMEOUT", error="no result within 4 s"))
    assert fixed["status"].verdict == stats.IMPROVED
    assert "now runs; was TIMEOUT: no result within 4 s" in fixed["status"].note


def test_graph_breaks_and_memory_are_compared_by_their_own_rules():
    more = rows(record(breaks=2), record(breaks=0))
    assert more["graph_breaks"].verdict == stats.REGRESSED
    assert (more["graph_breaks"].base, more["graph_breaks"].now) == (0, 2)
    bigger = rows(record(peak_bytes=1100), record(peak_bytes=1000))
    assert bigger["peak_bytes"].verdict == stats.REGRESSED


def test_other_hardware_or_a_moved_sentinel_makes_timings_not_comparable():
    other = rows(record(steady=2e-3), record(), not_comparable="hardware changed (cpu_model)")
    assert other["steady_s"].verdict == stats.NOT_COMPARABLE
    assert "hardware changed" in other["steady_s"].note
    assert other["peak_bytes"].verdict == stats.REGRESSED or other["peak_bytes"].verdict == \
        stats.EQUIVALENT  # memory is still compared
    slow_machine = rows(record(steady=1.3e-3, sentinel=0.026), record())
    assert slow_machine["steady_s"].verdict == stats.NOT_COMPARABLE
    assert "sentinel" in slow_machine["steady_s"].note


def test_new_missing_and_skipped_cells():
    assert {r.verdict for r in comparison.bench_rows("c", record(), None, DELTAS)} == {stats.NEW}
    assert comparison.bench_rows("c", None, record(), DELTAS)[0].verdict == stats.MISSING
    skipped = {"status": "SKIPPED", "reason": "device 'cuda' (cuda) is not available"}
    row = comparison.bench_rows("c", skipped, record(), DELTAS)[0]
    assert (row.verdict, row.note) == (stats.SKIPPED, skipped["reason"])


def test_an_ab_record_carries_its_own_baseline():
    now = record(seed=1, steady=1.3e-3)
    now["ab"] = {"baseline": {"python": "/a/python", "workloads": record(seed=2)["workloads"]},
                 "candidate": {"python": "/b/python"}}
    base = comparison.ab_baseline(now)
    assert base["workloads"] is now["ab"]["baseline"]["workloads"] and base["ab"] is None
    assert rows(now, base)["steady_s"].verdict == stats.REGRESSED
    # The candidate interpreter may run the sentinel's Python loop slower (another CPython):
    # that is not the machine moving, the arms ran interleaved.
    slower_python = record(seed=1, steady=1.3e-3, sentinel=0.03)
    slower_python["ab"] = now["ab"]
    assert rows(slower_python, comparison.ab_baseline(slower_python))["steady_s"].verdict == \
        stats.REGRESSED


def test_numerics_flags_new_failures_and_errors_that_grew():
    ok = {"status": "PASS", "problems": [], "rel_l2": {"out": 1e-6}}
    grown = {"status": "PASS", "problems": [], "rel_l2": {"out": 3e-6}}
    bad = {"status": "NONFINITE", "problems": ["out has 8 NaN/Inf of 8 values"]}
    rec = lambda ev: {"status": "OK", "workloads": {"w": {"eager": ev}}}  # noqa: E731
    verdict = lambda now, base: comparison.numerics_rows("c", rec(now), rec(base))[0]  # noqa
    assert verdict(ok, ok).verdict == stats.EQUIVALENT
    assert verdict(grown, ok).verdict == stats.REGRESSED
    assert "3.0x the baseline's" in verdict(grown, ok).note
    assert verdict(bad, ok).verdict == stats.FAILED
    assert verdict(bad, ok).note == "was PASS, now out has 8 NaN/Inf of 8 values"
    assert verdict(ok, bad).verdict == stats.IMPROVED


def test_processes_sampled_on_a_busy_machine_are_left_out():
    """Measured on a 2-core VM: with another test run beside the bench stage, the 2-thread
    workloads of a whole cell ran 1.6-13x slower in every process while the sentinel, a
    single-threaded loop, saw nothing. Other programs' share of the CPU says so."""
    def busy(rec, shares):
        for proc, share in zip(rec["workloads"]["w"]["processes"], shares):
            proc["modes"]["eager"]["busy_machine"] = {"other_cpu": share, "steal": 0.0}
        return rec
    quiet = [0.02] * 5
    slowed = busy(record(seed=1, steady=3e-3), [0.6, 0.7, 0.5, 0.9, 0.6])
    verdicts = rows(slowed, busy(record(seed=2), quiet))
    assert verdicts["steady_s"].verdict == stats.NOT_COMPARABLE
    assert "5 process(es) left out" in verdicts["steady_s"].note
    # Two busy processes of five: the other three still decide, and the note says so.
    partly = busy(record(seed=1, steady=1.2e-3), [0.6, 0.02, 0.7, 0.02, 0.02])
    row = rows(partly, busy(record(seed=2), quiet))["steady_s"]
    assert row.verdict == stats.REGRESSED and row.shift.n_now == 3
    assert row.note.startswith("2 process(es) left out")
    assert rows(slowed, busy(record(seed=2), quiet))["peak_bytes"].verdict == stats.EQUIVALENT
    # A record without readings (another OS, an older baseline) keeps every process.
    assert rows(record(seed=1), busy(record(seed=2), quiet))["steady_s"].shift.n_base == 5


def test_busy_machine_note():
    def record_of(shares):
        return {"workloads": {"w": {"processes": [
            {"status": "OK", "modes": {"eager": {"busy_machine": {"other_cpu": x, "steal": 0}}}}
            for x in shares]}}}
    assert comparison.busy_note("this run's cpu", record_of([0.01, 0.1, 0.2])) is None
    note = comparison.busy_note("this run's cpu", record_of([0.01, 0.6, 0.9]))
    assert "in 2 of 3 measured modes" in note and "up to 90%" in note
    assert comparison.busy_note("x", None) is None
