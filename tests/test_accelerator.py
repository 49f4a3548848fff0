"""Any accelerator: a device type torchgate does not know by name runs through PyTorch's
device-generic API. Tested with a backend the test registers: tests/accel_standin.py, a
PrivateUse1 device (`tgaccel`) whose kernels run on the CPU, imported by the worker as an
out-of-tree backend's package is (`device.<name>.modules`)."""
import json
import random
import tempfile
from pathlib import Path

import pytest
import torch

from torchgate.core import config
from torchgate.core.config import DeviceSpec, PrecisionSpec
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.records.job import Job, Timing
from torchgate.core.records.schema import BenchProcess, NumericsProcess
from torchgate.core.typed import from_data, to_data
from torchgate.core.vocabulary import Verdict
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.launch.cells import measure_bench
from torchgate.launch.local import run_worker
from torchgate.measure import accelerator, worker
from torchgate.measure.accelerator import Unavailable
from torchgate.measure.build import compiler
from torchgate.measure.device import resolve_device
from torchgate.render.bench import unmeasured
from torchgate.render.numbers import numbers_section

from .records import BUSY, DELTA, bench

STANDIN = DeviceSpec("trn", "tgaccel", modules=("tests.accel_standin",))


def job(kind: str, device: DeviceSpec = STANDIN) -> Job:
    spec = WorkloadSpec("matmul_relu", "torchgate.workloads.matmul_relu", {"size": 32},
                        latency=True)
    return Job(kind, 0, device, PrecisionSpec("fp32", "float32"), (spec,), ("eager",),
               Timing(3, 0.005, 0.02, 3, 1.0, latency_calls=200, latency_s=0.01))


def test_an_unknown_device_type_is_a_valid_device_config():
    raw = {"device": {"trn": {"type": "neuron", "modules": ["torch_neuronx"]}},
           "precision": {"fp32": {"dtype": "float32"}}, "matrix": {"modes": ["eager"]},
           "workload": {"m": {"_target_": "torchgate.workloads.matmul_relu"}}}
    assert config.parse(raw).devices["trn"] == DeviceSpec("trn", "neuron",
                                                          modules=("torch_neuronx",))


def test_the_device_names_the_compile_backend_and_the_workload_dynamic_shapes():
    compile = compiler("compiled", True, "neuron")
    assert compile.func is torch.compile
    assert compile.keywords == {"dynamic": True, "backend": "neuron"}
    assert compiler("max-autotune").keywords == {"mode": "max-autotune", "dynamic": None}


def test_a_device_type_without_a_backend_is_unavailable_with_the_reason():
    with pytest.raises(Unavailable) as err:
        resolve_device(DeviceSpec("trn", "tgmissing"))
    assert str(err.value).startswith("device 'trn' (tgmissing) is not available: no backend "
                                     "registered for device type 'tgmissing' with torch ")
    with pytest.raises(Unavailable, match="its backend module 'no_such_backend' could not be "
                                          "imported .ModuleNotFoundError: No module named"):
        resolve_device(DeviceSpec("trn", "neuron", modules=("no_such_backend",)))
    assert accelerator.notes("cpu") == accelerator.Notes()


@pytest.mark.slow     # real worker processes
def test_the_registered_backend_runs_through_the_generic_path():
    """A real worker process: the stand-in registers itself when the worker imports it."""
    raw = run_worker(job("bench"), timeout_s=120)
    assert raw["status"] == "OK", raw
    process = from_data(BenchProcess, raw, "result")
    m = process.modes["eager"]
    assert m.status == "OK" and len(m.steady_s) == 3 and m.first_call_s > 0
    assert m.latency_calls == 200 and m.latency_p99_s >= m.latency_p50_s > 0
    # No timing events and no memory statistics on this backend: said, not faked.
    assert m.clock == "synchronize" and m.peak_bytes is None
    # No energy counter either; CPU busy may be missing too (a steady state shorter than
    # /proc's clock ticks), which tests/test_energy.py checks.
    assert {k: v for k, v in m.unmeasured.items() if k != "cpu_busy"} == {
        "peak_bytes": "the tgaccel backend keeps no memory statistics "
                      "(torch.accelerator.memory_stats raised RuntimeError)",
        "joules_per_item": "no energy counter is read on tgaccel devices"}
    page = unmeasured(summarize("c", bench({"matmul_relu": [process]}), 0.0, BUSY))
    assert "peak_bytes not measured: the tgaccel backend keeps no memory statistics" in page
    assert "host clock between device synchronizations" in page

    raw = run_worker(job("numerics"), timeout_s=120)
    numbers = from_data(NumericsProcess, raw, "result")
    assert numbers.status == "OK" and numbers.modes["eager"].status == "OK"
    assert numbers.coverage.device == "tgaccel"
    assert {"aten.mm.default", "aten.relu.default"} <= set(numbers.coverage.ops)
    assert numbers.coverage.other_device == {}                 # it all ran on the device
    assert numbers.modes["eager"].outputs["out"].rel_l2 < 1e-6  # against float64 on the CPU


def test_a_backend_that_cannot_synchronize_is_skipped(monkeypatch):
    monkeypatch.setenv("TGACCEL_NO_SYNC", "1")
    raw = run_worker(job("bench"), timeout_s=120)
    assert raw["status"] == "SKIPPED"
    assert raw["error"] == (
        "device 'trn' (tgaccel): the backend cannot synchronize (neither "
        "torch.accelerator.synchronize nor torch.tgaccel.synchronize works), so its timings "
        "would measure launches, not work")


@pytest.mark.slow     # a real worker process (the fast lane: the in-process test below)
def test_a_cell_whose_backend_is_missing_is_skipped_with_the_reason():
    raw = {"device": {"trn": {"type": "tgmissing"}}, "precision": {"fp32": {"dtype": "float32"}},
           "matrix": {"modes": ["eager"]}, "bench": {"processes": 2},
           "workload": {"m": {"_target_": "torchgate.workloads.matmul_relu", "size": 8}}}
    cfg = config.parse(raw)
    record = measure_bench(cfg, cfg.cell("trn", "fp32"))
    assert record.status == "SKIPPED" and "no backend registered for device type 'tgmissing'" \
        in record.reason
    rows = bench_rows("trn-fp32", record, None, DELTA)
    assert [(r.verdict, r.note) for r in rows] == [(Verdict.SKIPPED, record.reason)]
    summary = "\n".join(numbers_section(
        {"trn-fp32": summarize("trn-fp32", record, 0.0, BUSY)}, []))
    assert f"### `trn-fp32`\n\nSKIPPED: {record.reason}" in summary
    # The stand-in is imported by workers only: nothing registered in this process. (Not
    # `current_accelerator() is None`: torch's CUDA build reports `cuda` without a GPU too.)
    assert not hasattr(torch, "tgaccel") and _privateuse1_name() == "privateuseone"


def _privateuse1_name() -> str:
    return torch._C._get_privateuse1_backend_name()


# ---- torch's CUDA build on a machine without a GPU -----------------------------------------
# What `pip install torch` resolves on PyPI: torch.accelerator.current_accelerator() is `cuda`
# although no device is there (is_available() is False). Simulated here on any build.


@pytest.fixture
def cuda_build_without_gpu(monkeypatch):
    def current_accelerator(check_available: bool = False):
        return None if check_available else torch.device("cuda")
    monkeypatch.setattr(torch.accelerator, "current_accelerator", current_accelerator)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for cached in (accelerator.synchronizer, accelerator.has_timing_events):
        cached.cache_clear()
    yield
    for cached in (accelerator.synchronizer, accelerator.has_timing_events):
        cached.cache_clear()


def in_process(job: Job, *, timeout_s: float, python=None, fresh_compile_cache=True) -> dict:
    """run_worker without the process: the worker's main here, where the monkeypatches are."""
    with tempfile.TemporaryDirectory(prefix="torchgate-") as tmp:
        job_path, result_path = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_path.write_text(json.dumps(to_data(job)), encoding="utf-8")
        # What the worker sets for its process, put back for the tests after this one.
        precision, rng = torch.get_float32_matmul_precision(), torch.get_rng_state()
        state = random.getstate()
        try:
            assert worker.main([str(job_path), str(result_path)]) == 0
        finally:
            torch.set_float32_matmul_precision(precision)
            torch.set_rng_state(rng)
            random.setstate(state)
        return json.loads(result_path.read_text(encoding="utf-8"))


def test_on_the_cuda_build_without_a_gpu_only_the_absent_devices_cells_are_skipped(
        cuda_build_without_gpu):
    assert accelerator._current_type() == "cuda"
    raw = {"device": {"cpu": {"type": "cpu"}, "cuda": {"type": "cuda"},
                      "trn": {"type": "tgmissing"}},
           "precision": {"fp32": {"dtype": "float32"}}, "matrix": {"modes": ["eager"]},
           "bench": {"processes": 1, "cold_compile_processes": 1, "samples": 2,
                     "sample_target_s": 0.002, "warmup_s": 0.0},
           "workload": {"m": {"_target_": "torchgate.workloads.matmul_relu", "size": 8}}}
    cfg = config.parse(raw)
    reasons = {
        "cuda": "device 'cuda' (cuda) is not available on this machine with torch "
                f"{torch.__version__}",
        "trn": "device 'trn' (tgmissing) is not available: no backend registered for device "
               f"type 'tgmissing' with torch {torch.__version__}"}
    for device, reason in reasons.items():
        record = measure_bench(cfg, cfg.cell(device, "fp32"), run=in_process)
        assert record.status == "SKIPPED" and record.reason.startswith(reason), record.reason
        rows = bench_rows(f"{device}-fp32", record, None, DELTA)
        assert [(r.verdict, r.note) for r in rows] == [(Verdict.SKIPPED, record.reason)]
        summary = "\n".join(numbers_section(
            {f"{device}-fp32": summarize(f"{device}-fp32", record, 0.0, BUSY)}, []))
        assert f"### `{device}-fp32`\n\nSKIPPED: {record.reason}" in summary
        with pytest.raises(Unavailable) as err:
            resolve_device(DeviceSpec(device, cfg.devices[device].type))
        assert str(err.value) == record.reason
    # The CPU's cell measures as on the CPU build: the registered CUDA is not its device.
    record = measure_bench(cfg, cfg.cell("cpu", "fp32"), run=in_process)
    assert record.status == "OK", record.reason
    proc = record.workloads["m"].processes[0]
    assert proc.status == "OK" and proc.modes["eager"].status == "OK"
    assert len(proc.modes["eager"].steady_s) == 2 and proc.modes["eager"].peak_bytes > 0
    assert resolve_device(DeviceSpec("cpu", "cpu")) == torch.device("cpu")
    assert accelerator.notes("cpu") == accelerator.Notes()
    # Another device type is never asked about through torch.accelerator: that is CUDA's.
    assert accelerator.synchronizer("tgmissing") is None
    assert accelerator.notes("tgmissing").unmeasured == {
        "peak_bytes": "the tgmissing backend keeps no memory statistics "
                      "(torch.tgmissing.memory_stats raised AttributeError)"}
