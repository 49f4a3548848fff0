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


def fake_worker(spread: dict, rng: random.Random):
    """A worker whose process medians have a known process-to-process spread."""
    def run(job, timeout_s, python=None, fresh_compile_cache=True):
        level = rng.lognormvariate(0, spread[job.workload.name]) * 1e-3
        mode = {"status": "OK", "steady_s": [level] * 3, "first_call_s": 1.0,
                "warmup_s": 0.1, "peak_bytes": 10, "items": 1}
        return {"status": "OK", "wall_s": 0.0, "sentinel": {"python_loop_s": 0.02},
                "modes": {m: dict(mode) for m in job.modes}}
    return run


def test_inconclusive_units_get_more_processes_and_alpha_is_split():
    cfg = config.parse(RAW)
    cell = cfg.cells()[0]
    rng = random.Random(3)
    spreads = {"quiet": 0.001, "noisy": 0.08}
    base = measure_bench(cfg, cell, run=fake_worker(spreads, rng))

    def judged(record):
        return compare_run(cfg, RunInputs("HEAD", "0" * 40, {("bench", cell.name):
                                                              Pair(record, base)}))

    now = measure_bench(cfg, cell, run=fake_worker(spreads, rng),
                        pending=lambda rec: pending_units(judged(rec), cfg.bench.max_processes))
    counts = {name: len(w.processes) for name, w in now.workloads.items()}
    assert counts["quiet"] == 4                      # decided (EQUIVALENT) after the first look
    assert 4 < counts["noisy"] <= 12                 # extended, within max_processes
    assert now.looks_planned == 2 and now.adaptive_processes == counts["noisy"] - 4
    [look] = now.looks                               # the interim look, as it was
    assert look.processes == 4 and {p.workload for p in look.pending} == {"noisy"}
    result = judged(now)
    assert result.looks == 2
    levels = {r.workload: 1 - r.change.confidence for r in result.rows
              if r.metric == "steady_s"}
    # Equivalence at alpha/looks: the (1 - 2·alpha/2) interval; the noisy unit had fresh
    # processes after its interim look, the quiet one was decided there.
    assert abs(levels["quiet"] - 2 * 0.05 / 2) < 1e-12
