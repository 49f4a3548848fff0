"""Adaptive sampling with a simulated worker: INCONCLUSIVE cells get more processes, decided
ones do not, the interim looks are recorded, and the error budget follows them."""
import random

from stages.core import config
from stages.core.records.inputs import Pair, RunInputs
from stages.judge.adaptive import pending_units
from stages.judge.run import compare_run
from stages.launch.cells import measure_bench

RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"quiet": {"_target_": "x.quiet"}, "noisy": {"_target_": "x.noisy"}},
       "matrix": {"modes": ["eager"]},
       "bench": {"processes": 4, "adaptive_budget_s": 600, "max_processes": 12, "max_looks": 2},
       "stats": {"run_spread": 0.0}}    # two runs of one simulated machine: no run-level offset


def fake_worker(spread: dict, rng: random.Random, wall_s: float = 0.0):
    """A worker whose process medians have a known process-to-process spread."""
    def run(job, timeout_s, python=None, fresh_compile_cache=True):
        level = rng.lognormvariate(0, spread[job.workload.name]) * 1e-3
        mode = {"status": "OK", "steady_s": [level] * 3, "first_call_s": 1.0,
                "warmup_s": 0.1, "peak_bytes": 10, "items": 1}
        return {"status": "OK", "wall_s": wall_s, "sentinel": {"python_loop_s": 0.02},
                "modes": {m: dict(mode) for m in job.modes}}
    return run


def adaptive_run(seed: int, noisy: float, wall_s: float = 0.0, **bench):
    """A baseline and a run with adaptive sampling, of one quiet and one noisy workload; the
    processes its interim look asked for, and the run's result."""
    cfg = config.parse({**RAW, "bench": {**RAW["bench"], **bench}})
    cell = cfg.cells()[0]
    rng = random.Random(seed)
    spreads = {"quiet": 0.001, "noisy": noisy}
    base = measure_bench(cfg, cell, run=fake_worker(spreads, rng))

    def judged(record):
        return compare_run(cfg, RunInputs("HEAD", "0" * 40, {("bench", cell.name):
                                                              Pair(record, base)}))
    asked = []

    def pending(record):
        asked.append(pending_units(judged(record), cfg.bench.max_processes))
        return asked[-1]
    now = measure_bench(cfg, cell, run=fake_worker(spreads, rng, wall_s), pending=pending)
    return now, asked, judged(now)


def test_inconclusive_units_get_the_processes_that_decide_them_and_alpha_is_split():
    now, [asked], result = adaptive_run(5, 0.03)
    counts = {name: len(w.processes) for name, w in now.workloads.items()}
    [(unit, needed)] = asked
    assert unit.workload == "noisy" and 4 + 4 < needed <= 12    # more than a batch of 4
    assert counts == {"quiet": 4, "noisy": needed}   # quiet decided at the first look
    assert now.looks_planned == 2 and now.adaptive_processes == counts["noisy"] - 4
    [look] = now.looks                               # the interim look, as it was
    assert look.processes == 4 and {p.workload for p in look.pending} == {"noisy"}
    assert result.looks == 2
    levels = {r.workload: 1 - r.change.confidence for r in result.rows
              if r.metric == "steady_s"}
    # Equivalence at alpha/looks: the (1 - 2·alpha/2) interval; the noisy unit had fresh
    # processes after its interim look, the quiet one was decided there.
    assert abs(levels["quiet"] - 2 * 0.05 / 2) < 1e-12


def test_an_undecided_unit_beyond_the_limits_gets_none_and_says_what_it_would_cost():
    """The look asks 18 processes a side of a unit that may have 12 (bench.max_processes):
    six more would not decide it, so none are spent; the verdict's note says what would."""
    now, [[(_, needed)]], result = adaptive_run(3, 0.03)
    assert needed > 12 and now.adaptive_processes == 0
    [row] = [r for r in result.rows if r.workload == "noisy" and r.metric == "steady_s"]
    assert row.verdict == "INCONCLUSIVE" and row.change.needed is not None
    more = row.change.needed - 4
    assert f"{more} more processes (~0 s, 0 s each) would decide it: bench.max_processes " \
        "is 12" in row.note
    # Within max_processes but not within the budget: 5 s a process, 20 s a cell.
    now, [[(_, needed)]], result = adaptive_run(5, 0.03, wall_s=5.0, adaptive_budget_s=20)
    assert (needed - 4) * 5.0 > 20 and now.adaptive_processes == 0
    [row] = [r for r in result.rows if r.workload == "noisy" and r.metric == "steady_s"]
    more = row.change.needed - 4
    assert row.note.endswith(f"{more} more processes (~{5 * more:.0f} s, 5 s each) would "
                             "decide it: bench.adaptive_budget_s is 20 s a cell")
