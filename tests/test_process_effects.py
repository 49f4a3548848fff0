"""What a process's circumstances do to its numbers. Compile time cold and warm: the first
processes of a unit compile with empty inductor caches (a first start), the rest find what those
left (a second start), judged as two metrics. The order of a process's modes, which a mode's
peak memory depends on."""
import os
from pathlib import Path

from torchgate.core import config, scratch
from torchgate.core.metrics import BY_NAME
from torchgate.core.records.schema import BenchProcess
from torchgate.judge.timings import bench_rows
from torchgate.launch.cells import CellRun, measure_bench
from torchgate.measure.worker import compile_cache_state

from .records import DELTA, bench, mode

RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"a": {"_target_": "x.a"}, "b": {"_target_": "x.b"}},
       "matrix": {"modes": ["eager", "compiled"]},
       "bench": {"processes": 4, "adaptive_budget_s": 0, "cold_compile_processes": 2,
                 "instructions": "never"}}


def caching_worker(seen: list):
    """A worker that compiles into the folder its job names: slow into an empty one, fast
    from one that holds an earlier process's work, as inductor's FX and AOT caches do."""
    def run(job, timeout_s, python=None, fresh_compile_cache=True):
        folder = scratch.compile_cache(job.compile_cache, job.compile_cache_cold)  # as a launcher
        warm = any(folder.iterdir())
        (folder / f"graph-{os.getpid()}-{len(seen)}").write_text("compiled")
        seen.append((job.workload.name, str(folder), warm))
        timing = {"status": "OK", "steady_s": [1e-3] * 3, "warmup_s": 0.01, "peak_bytes": 1,
                  "items": 1}
        return {"status": "OK", "wall_s": 0.0, "sentinel": {"python_loop_s": 0.02},
                "modes": {"eager": {**timing, "first_call_s": 0.01},
                          "compiled": {**timing, "first_call_s": 2.0 if warm else 9.0,
                                       "compile_cache": "warm" if warm else "cold"}}}
    return run


def test_the_first_processes_compile_cold_and_the_rest_find_their_caches():
    cfg = config.parse(RAW)
    seen: list = []
    record = measure_bench(cfg, cfg.cells()[0], run=caching_worker(seen))
    for name in ("a", "b"):
        mine = [(folder, warm) for w, folder, warm in seen if w == name]
        assert [warm for _, warm in mine] == [False, False, True, True]
        assert len({folder for folder, _ in mine}) == 1        # one folder per unit and arm
    assert len({folder for _, folder, _ in seen}) == 2
    assert not Path(seen[0][1]).exists()                    # removed after the cell
    assert record.unit("a", "compiled").values(BY_NAME["first_call_s"]) == [9.0, 9.0]
    assert record.unit("a", "compiled").values(BY_NAME["first_call_warm_s"]) == [2.0, 2.0]
    # Eager first calls compile nothing: every process counts as a first start.
    assert len(record.unit("a", "eager").values(BY_NAME["first_call_s"])) == 4
    assert record.unit("a", "eager").values(BY_NAME["first_call_warm_s"]) == []


def test_a_process_runs_its_modes_in_the_configured_order():
    """A mode's peak memory starts from what the modes before it left resident: an adaptive
    process asked for (compiled, eager) still runs eager first."""
    cfg = config.parse(RAW)
    seen: list = []
    run = caching_worker(seen)

    def recording(job, timeout_s, python=None, fresh_compile_cache=True):
        seen.append(job.modes)
        return run(job, timeout_s)
    cell_run = CellRun(cfg, cfg.cells()[0], "bench", recording)
    try:
        cell_run.process("a", 5, ["compiled", "eager"])
    finally:
        cell_run.close()
    assert ("eager", "compiled") in seen


def compiled(first: float, cache: str) -> BenchProcess:
    return BenchProcess("OK", modes={"compiled": mode(first=first, compile_cache=cache)})


def test_a_slower_warm_start_is_its_own_regression():
    base = bench({"w": [compiled(9.0, "cold"), compiled(9.1, "cold"),
                        compiled(2.0, "warm"), compiled(2.02, "warm"), compiled(1.98, "warm")]},
                 modes=("compiled",))
    now = bench({"w": [compiled(9.05, "cold"), compiled(9.0, "cold"),
                       compiled(3.0, "warm"), compiled(3.03, "warm"), compiled(2.97, "warm")]},
                modes=("compiled",))
    rows = {r.metric: r for r in bench_rows("c", now, base, DELTA, None, same_run=True)}
    assert rows["first_call_warm_s"].shift.ratio > 1.45
    assert abs(rows["first_call_s"].shift.ratio - 1) < 0.02


def test_the_worker_says_which_caches_it_found(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert compile_cache_state() == "cold"
    (tmp_path / "fxgraph").mkdir()
    assert compile_cache_state() == "warm"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "absent"))
    assert compile_cache_state() == "cold"
