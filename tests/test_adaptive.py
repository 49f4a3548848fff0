"""Adaptive sampling with a simulated worker: INCONCLUSIVE cells get more processes, decided
ones do not, and every test then runs at alpha / max_looks."""
import random

from stages import bench
from stages.judge import comparison
from stages.core import config

RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"quiet": {"_target_": "x.quiet"}, "noisy": {"_target_": "x.noisy"}},
       "matrix": {"modes": ["eager"]},
       "bench": {"processes": 4, "adaptive_budget_s": 600, "max_processes": 12, "max_looks": 2}}


def fake_worker(spread: dict, rng: random.Random):
    """A worker whose process medians have a known process-to-process spread."""
    def run(job, timeout_s, python=None, fresh_compile_cache=True):
        level = rng.lognormvariate(0, spread[job["workload"]["name"]]) * 1e-3
        mode = {"status": "OK", "steady_s": [level] * 3, "first_call_s": 1.0,
                "warmup_s": 0.1, "peak_bytes": 10}
        return {"status": "OK", "wall_s": 0.0, "sentinel": {"python_loop_s": 0.02},
                "modes": {m: dict(mode) for m in job["modes"]}}
    return run


def test_inconclusive_units_get_more_processes_and_alpha_is_split():
    cfg = config.parse(RAW)
    cell = cfg.cells()[0]
    rng = random.Random(3)
    base = bench.run_cell(cfg, cell, run=fake_worker({"quiet": 0.001, "noisy": 0.08}, rng),
                          log=lambda line: None)

    def compare(record):
        result = comparison.Comparison(rows=comparison.bench_rows(
            cell.name, record, base, cfg.stats.delta))
        return comparison.finish(result, cfg.stats.alpha, cfg.stats.power,
                                 record.get("looks_planned", 1))

    now = bench.run_cell(cfg, cell, run=fake_worker({"quiet": 0.001, "noisy": 0.08}, rng),
                         log=lambda line: None, compare=compare)
    counts = {name: len(w["processes"]) for name, w in now["workloads"].items()}
    assert counts["quiet"] == 4                      # decided (EQUIVALENT) after the first look
    assert 4 < counts["noisy"] <= 12                 # extended, within max_processes
    assert now["looks_planned"] == 2 and now["adaptive_processes"] == counts["noisy"] - 4
    result = compare(now)
    assert result.looks == 2                         # tested at alpha / 2
