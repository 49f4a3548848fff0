"""Sweeps: a parameter with several values becomes one unit per value (measured, compared and
judged like any other unit), drawn as a curve with a recommended point that moves when the
hardware's best point does."""
import pytest

from torchgate.arms.plan import Plan
from torchgate.core import config
from torchgate.core.config.settings import CompareSettings, Recommend
from torchgate.core.errors import UserError
from torchgate.core.records.inputs import ab_baseline
from torchgate.core.records.job import Arm
from torchgate.judge.summary import summarize
from torchgate.judge.sweeps import curves, decide, recommend
from torchgate.launch.cells import measure_bench
from torchgate.render.sweeps import sweep_pictures, sweeps_section

RAW = {"device": {"cpu": {"type": "cpu", "price_per_hour": 0.36}},
       "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"mlp_train": {"_target_": "x.mlp", "batch": 64, "lr": 0.001},
                    "matmul_relu": {"_target_": "x.mm", "size": 256}},
       "matrix": {"modes": ["eager"]}, "bench": {"processes": 2, "adaptive_budget_s": 0},
       "sweep": {"batch": [16, 32, 64, 128, 256], "threads": [1, 2]}}


BUSY = CompareSettings().busy_share


def parsed(**changes):
    return config.parse({**RAW, **changes})


def test_each_swept_value_is_its_own_unit_with_its_own_arguments():
    cfg = parsed()
    swept = [n for n in cfg.workloads if n.startswith("mlp_train")]
    assert len(swept) == 10 and "mlp_train[batch=64,threads=2]" in swept
    unit = cfg.workloads["mlp_train[batch=128,threads=1]"]
    assert unit.kwargs == {"batch": 128, "lr": 0.001} and unit.threads == 1
    assert unit.family == "mlp_train" and unit.point == (("batch", 128), ("threads", 1))
    # matmul_relu has no batch: only the threads sweep applies to it.
    assert [n for n in cfg.workloads if n.startswith("matmul")] == [
        "matmul_relu[threads=1]", "matmul_relu[threads=2]"]
    assert "mlp_train" in parsed(sweep={"batch": None, "threads": None}).workloads


@pytest.mark.parametrize("sweep, message", [
    ({"batch": 64}, "sweep.batch must be a non-empty list of values"),
    ({"batch": []}, "sweep.batch must be a non-empty list"),
    ({"threads": [0, 2]}, "sweep.threads must list whole numbers > 0"),
    ({"batch": [16, 16]}, "sweep.batch lists a value twice"),
    ({"size_x": [1, 2]}, "no selected workload takes size_x"),
])
def test_a_bad_sweep_is_one_line(sweep, message):
    with pytest.raises(UserError) as err:
        parsed(sweep=sweep)
    assert message in str(err.value) and "\n" not in str(err.value)


def fake_worker(per_item_s: dict):
    """Throughput that rises with the batch until the cache runs out, memory with the batch,
    and two threads nearly twice as fast."""
    def run(job, timeout_s, python=None, fresh_compile_cache=True):
        spec = job.workload
        batch = spec.kwargs.get("batch", 1)
        call = per_item_s[batch] * batch / (1.9 if spec.threads == 2 else 1.0)
        timing = {"status": "OK", "steady_s": [call] * 3, "first_call_s": 0.01,
                  "warmup_s": 0.01, "peak_bytes": batch * 2 ** 20, "items": batch}
        return {"status": "OK", "wall_s": 0.0, "sentinel": {"python_loop_s": 0.02},
                "modes": {m: dict(timing) for m in job.modes}}
    return run


ALPHA, DELTA = 0.05, 0.05      # stats.alpha and the steady state's δ, by default
BEFORE = {16: 4e-5, 32: 3e-5, 64: 2e-5, 128: 2.5e-5, 256: 4e-5}   # best at 64
AFTER = {16: 4e-5, 32: 3e-5, 64: 2e-5, 128: 1.5e-5, 256: 3e-5}    # best at 128


def test_the_curve_names_a_recommended_point_and_how_it_moved():
    cfg = parsed(workload={"mlp_train": RAW["workload"]["mlp_train"]})
    cell = cfg.cells()[0]
    base = measure_bench(cfg, cell, run=fake_worker(BEFORE))
    now = measure_bench(cfg, cell, run=fake_worker(AFTER))
    found = curves(summarize(cell.name, now, 0.36, BUSY))
    points = found["mlp_train", "eager"]
    assert [p.label for p in points][:3] == ["batch=16, threads=1", "batch=16, threads=2",
                                             "batch=32, threads=1"]
    best = recommend(points, Recommend()).chosen
    assert best.label == "batch=128, threads=2"
    assert best.numbers.usd_per_million == pytest.approx(
        0.36 / 3600 * 1e6 * 1.5e-5 / 1.9, rel=1e-6)
    # A memory limit rules the larger batches out.
    assert recommend(points, Recommend(max_peak_mib=100)).chosen.label == "batch=64, threads=2"
    limited = curves(summarize(cell.name, now, 0.36, BUSY), Recommend(max_peak_mib=100))
    assert limited["mlp_train", "eager"][-1].outside == "over 100 MiB"

    def decided(summary):
        return {cell.name: decide(summary, Recommend(), alpha=ALPHA, delta=DELTA)}
    text = "\n".join(sweeps_section(decided(summarize(cell.name, now, 0.36, BUSY, base)),
                                    Recommend(), {cell.name: "pictures/summary/sweep-cpu-fp32.png"},
                                    alpha=ALPHA, delta=DELTA))
    assert "`cpu-fp32` mlp_train eager: batch=64, threads=2 → **batch=128, threads=2**" in text
    assert "| batch=128, threads=2 ◀ " in text
    assert "![cpu-fp32: throughput across the sweep](pictures/summary/sweep-cpu-fp32.png)" in text
    drawn = sweep_pictures(decided(summarize(cell.name, now, 0.36, BUSY)), alpha=ALPHA)
    assert drawn[cell.name][:8] == b"\x89PNG\r\n\x1a\n"
    first = "\n".join(sweeps_section(decided(summarize(cell.name, now, 0.36, BUSY)),
                                     Recommend(), {}, alpha=ALPHA, delta=DELTA))
    assert "`cpu-fp32` mlp_train eager: **batch=128, threads=2** ($" in first


def test_a_baseline_measured_beside_the_sweep_has_its_own_curve():
    """Lock-step A/B: the baseline arm's units carry their sweep point too."""
    cfg = parsed(workload={"mlp_train": RAW["workload"]["mlp_train"]})
    cell = cfg.cells()[0]
    before, after = fake_worker(BEFORE), fake_worker(AFTER)

    def run(job, timeout_s, python=None, fresh_compile_cache=True):
        return (before if python == "/baseline/python" else after)(job, timeout_s)
    record = measure_bench(cfg, cell, Plan((Arm("baseline", "/baseline/python"), Arm("now")), ""),
                           run=run, run_pair=None)
    # The record carries its baseline arm: the summary reads it from there.
    assert record.ab is not None and ab_baseline(record) is not None
    text = "\n".join(sweeps_section(
        {cell.name: decide(summarize(cell.name, record, 0.36, BUSY), Recommend())},
        Recommend(), {}, alpha=ALPHA, delta=DELTA))
    assert "batch=64, threads=2 → **batch=128, threads=2**" in text
