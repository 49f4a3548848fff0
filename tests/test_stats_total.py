"""The judge is total on what a loaded machine can measure: two lock-step pairs one 3x apart at
a Holm level of a 60-test run, 1-3 processes a side, equal values, tiny and huge times. Every
public function returns a number (inf included) and the pages print it readably; nothing
raises (an OverflowError at an interim look once lost a bench stage's 16 processes)."""
from __future__ import annotations

import itertools
import math
import random

from torchgate.judge import changepoints, stats
from torchgate.render.markdown import mde, percent, ratio_change

ALPHA, POWER, DELTA = 0.05, 0.8, 0.05


def extreme_sides(seed: int = 0, count: int = 600):
    """(base, now) process values: 1-3 a side, equal, tiny, huge, 3x and 1e6x apart."""
    rng = random.Random(seed)
    scales = [1e-9, 1e-6, 1e-3, 1.0, 1e3, 1e6]
    for _ in range(count):
        n, m = rng.randint(1, 3), rng.randint(1, 3)
        scale = rng.choice(scales)
        far = rng.choice([1.0, 1.0001, 3.0, 1e3, 1e6, 1e-6])
        base = [scale * rng.choice([1.0, rng.uniform(0.5, 2)]) for _ in range(n)]
        now = [scale * far * rng.choice([1.0, rng.uniform(0.5, 2)]) for _ in range(m)]
        yield base, now
    for value in (1e-300, 1e300):
        yield [value, value], [value, value]
        yield [value, value * 2], [value * 3, value]


def test_every_public_function_returns_a_number_on_extreme_inputs():
    for base, now in extreme_sides():
        for s in (stats.shift(base, now), stats.paired_shift(base, now[:len(base)] if len(
                now) >= len(base) else now + now[:len(base) - len(now)])):
            if s is None:
                continue
            for tests in (1, 60, 300):
                level = ALPHA / tests
                ratio = s.ratio
                low, high = s.interval(level)
                assert 0 <= low <= ratio <= high or math.isnan(ratio)
                v = stats.verdict(s, min(1.0, s.p_value * tests), alpha=ALPHA, delta=DELTA)
                stats.decided_interval(s, v, ALPHA)
                found = stats.minimum_detectable_effect(s, alpha=ALPHA, power=POWER,
                                                        delta=DELTA, tests=tests)
                assert found >= 0 and not math.isnan(found)
                mde(found), ratio_change(ratio, low, high), percent(ratio - 1)
                stats.processes_needed(s, alpha=ALPHA, power=POWER, delta=DELTA, tests=tests)
                stats.processes_to_catch(s, 0.10, alpha=ALPHA, power=POWER, delta=DELTA,
                                         tests=tests)


def test_two_wild_pairs_in_a_long_run_are_inconclusive_with_an_unbounded_mde():
    """The case seen twice in real runs: 2 pairs, one 3x apart, at a 60-test Holm level."""
    s = stats.paired_shift([1.0, 1.0], [1.01, 3.0])
    p = min(1.0, s.p_value * 60)
    assert stats.verdict(s, p, alpha=ALPHA, delta=DELTA) == "INCONCLUSIVE"
    found = stats.minimum_detectable_effect(s, alpha=ALPHA, power=POWER, delta=DELTA, tests=60)
    assert found > 10 and mde(found) == "> 1000 %"
    low, high = s.interval(ALPHA / 60)
    assert ratio_change(s.ratio, low, high).endswith(", > +1000]")


def test_pages_print_unbounded_numbers_as_words_not_digits():
    assert mde(math.inf) == "> 1000 %" and mde(math.nan) == "none detectable at this spread"
    assert percent(math.inf) == "> +1000 %" and percent(0.031) == "+3.1 %"
    assert ratio_change(1.5, 0.0, math.inf) == "+50.0 % [-100.0, > +1000]"


def test_a_history_whose_level_jumps_by_orders_of_magnitude_is_a_shift_not_an_error():
    rng = random.Random(1)
    for before, after in itertools.product((1e-300, 1e-6, 1.0), (1.0, 1e6, 1e300)):
        series = [before * rng.uniform(0.99, 1.01) for _ in range(6)] + [
            after * rng.uniform(0.99, 1.01) for _ in range(6)]
        for found in changepoints.change_points(series, min_points=3):
            assert found.ratio >= 0 and not math.isnan(found.pvalue)


def test_the_bench_stage_keeps_every_process_of_two_wild_pairs_and_judges_them():
    """The bench stage's own measuring path (torchgate.bench.measure: rounds, an interim look,
    adaptive rounds) with a pair one 1e6x apart: the record keeps every process, and the unit
    is INCONCLUSIVE with an MDE shown as unbounded, not a traceback."""
    from types import SimpleNamespace

    from torchgate import bench
    from torchgate.arms.plan import Plan
    from torchgate.core import config
    from torchgate.core.records.inputs import RunInputs, with_record
    from torchgate.core.records.job import NOW_ARM, Arm
    from torchgate.judge.run import compare_run
    from torchgate.render.verdicts import change, evidence

    cfg = config.parse({
        "device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
        "workload": {"w": {"_target_": "torchgate.workloads.matmul_relu", "size": 8}},
        "matrix": {"modes": ["eager"]},
        "bench": {"processes": 2, "adaptive_budget_s": 30, "max_processes": 2,
                  "cold_compile_processes": 1, "instructions": "never"}})
    cell = cfg.cells()[0]
    base = Arm("baseline", python="/base/python")
    rounds = []

    def run_pair(jobs, timeout_s, fresh_compile_cache=True):
        wild = len(rounds) == 1         # the second pair: the baseline's process 1e6x faster
        rounds.append(len(jobs))
        return [{"status": "OK", "modes": {"eager": {
            "status": "OK", "first_call_s": 1e-3,
            "steady_s": [1e-9 if wild and python == base.python else 1e-3] * 3}}}
            for _, python in jobs]
    where = SimpleNamespace(run=None, run_pair=run_pair, capture_env=lambda python: {})
    inputs = RunInputs("HEAD", None)
    record = bench.measure(cfg, cell, Plan((base, NOW_ARM), "lock-step", rebuilt=True), where,
                           inputs)
    assert len(record.workloads["w"].processes) == 2 == len(record.ab.baseline.workloads["w"]
                                                            .processes)
    rows = compare_run(cfg, with_record(inputs, "bench", cell.name, record)).rows
    steady = next(r for r in rows if r.metric == "steady_s")
    assert steady.verdict == "INCONCLUSIVE" and steady.change.mde > 10
    assert "> +1000" in change(steady) and "MDE > 1000 %" in evidence(steady)


def test_a_cell_whose_judging_raises_fails_alone_and_the_others_are_judged(monkeypatch):
    """No input is known to raise (the tests above); should one ever, compare still writes
    the run's verdicts: that cell FAILED with the reason, the gate red, the others judged."""
    import yaml

    from torchgate.core import config
    from torchgate.core.records.inputs import RunInputs, pair
    from torchgate.judge import run

    from .projects import default_params
    from .records import record

    real = run.bench_rows

    def bench_rows(cell, *args, **kwargs):
        if cell == "a":
            raise OverflowError("math range error")
        return real(cell, *args, **kwargs)
    monkeypatch.setattr(run, "bench_rows", bench_rows)
    inputs = RunInputs("HEAD", "0" * 40, {("bench", c): pair(record(seed=1), record(seed=2))
                                          for c in ("a", "b")})
    rows = run.compare_run(config.parse(yaml.safe_load(default_params())), inputs).rows
    failed = [r for r in rows if r.cell == "a"]
    assert [(r.verdict, r.workload) for r in failed] == [("FAILED", "*")]
    assert failed[0].note.startswith("judging this cell failed (OverflowError: math range "
                                     "error); its records are kept as measured")
    assert any(r.cell == "b" and r.metric == "steady_s" for r in rows)
