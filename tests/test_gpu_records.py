"""The GPU series in records, verdicts and reports; NVML without a GPU; the GPU settings and
workloads; the GPU script's configuration. No GPU needed."""
import json
import random
import sys
from types import SimpleNamespace

import pytest
import torch
import yaml

from tests.records import BUSY, DELTA, bench, process
from torchgate.core import config, records
from torchgate.core.errors import UserError
from torchgate.core.records.schema import BenchRecord, GpuMode, GpuSeries
from torchgate.core.vocabulary import Verdict
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.measure import nvml
from torchgate.render.bench import gpu_section
from torchgate.render.metrics import bench_metrics
from torchgate.workloads import elementwise, matmul_relu

from .projects import ROOT


def gpu_run(cold=30e-6, hot=20e-6, impossible=None, n=5, seed=0) -> BenchRecord:
    rng = random.Random(seed)

    def one():
        series = {"hot": GpuSeries("quiet", 0.001, tflops=1.0, impossible=impossible),
                  "cold": GpuSeries("timeout", 0.02, redone=2, throttled=(3,),
                                    sm_clock_mhz=(1980.0, 1200.0), temperature_c=71.0,
                                    power_w=640.0, gbps=2000.0)}
        gpu = GpuMode(series, 1980.0, 256 << 20, "bf16", 989.0, 4800.0, "NVIDIA H200 SXM")
        return process(steady=hot, rng=rng, gpu=gpu,
                       cold_s=tuple(cold * rng.uniform(0.99, 1.01) for _ in range(12)))
    return bench({"w": [one() for _ in range(n)]})


def rows_by_metric(now, base):
    return {r.metric: r for r in bench_rows("cuda-bf16", now, base, DELTA, same_run=True)}


def test_the_cold_series_is_tested_beside_the_hot_one():
    rows = rows_by_metric(gpu_run(cold=36e-6), gpu_run(seed=1))
    assert set(rows) >= {"steady_s", "cold_s"}
    assert rows["cold_s"].shift.ratio == pytest.approx(1.2, rel=0.01)
    assert rows["steady_s"].shift.ratio == pytest.approx(1.0, abs=0.01)
    assert rows["cold_s"].delta == DELTA.steady_s


def test_a_new_unit_lists_its_cold_series_and_a_cpu_unit_has_none():
    assert "cold_s" in rows_by_metric(gpu_run(), None)
    cpu = bench({"w": [process() for _ in range(3)]})
    assert "cold_s" not in rows_by_metric(cpu, cpu)
    # A baseline measured without cold samples (an older record): nothing to test it with.
    row = rows_by_metric(gpu_run(), cpu)["cold_s"]
    assert row.verdict == Verdict.NEW and row.shift is None


def test_an_impossible_rate_makes_its_series_not_comparable():
    why = "2,199 TFLOP/s is beyond the peak of 989 (datasheet): a measurement error"
    rows = rows_by_metric(gpu_run(impossible=why), gpu_run(seed=1))
    assert rows["steady_s"].verdict == Verdict.NOT_COMPARABLE
    assert rows["steady_s"].note == f"now: {why}"
    assert rows["cold_s"].verdict != Verdict.NOT_COMPARABLE     # its own series was possible
    assert rows_by_metric(gpu_run(seed=1), gpu_run(impossible=why))["steady_s"].note \
        .startswith("baseline: ")


def test_the_bench_page_and_metrics_show_the_gpu_series():
    why = "2,199 TFLOP/s is beyond the peak of 989 (datasheet): a measurement error"
    record = gpu_run(impossible=why)
    text = gpu_section(summarize("c", record, 0.0, BUSY))
    assert text.startswith("## GPU timing")
    assert "| w          | eager  | cold     |" in text and "1.50x" in text
    assert "timeout 5" in text and "10/5" in text and "IMPOSSIBLE: " + why in text
    assert "bf16: peak 989 TFLOP/s, 4,800 GB/s (NVIDIA H200 SXM)" in text
    assert "judged against 1980 MHz; L2 flushed with 256 MiB" in text
    cpu = bench({"w": [process() for _ in range(3)]})
    assert gpu_section(summarize("c", cpu, 0.0, BUSY)) == ""
    assert bench_metrics(summarize("c", record, 0.0, BUSY))["w"]["eager"]["cold_ms"] == \
        pytest.approx(0.03, rel=0.02)
    assert "cold_ms" not in bench_metrics(summarize("c", cpu, 0.0, BUSY))["w"]["eager"]


def test_gpu_fields_survive_a_record_round_trip_and_schema_3_still_reads():
    record = gpu_run(impossible="beyond the peak")
    text = records.dumps(records.record_data(record))
    assert json.loads(text)["schema_version"] == records.SCHEMA["bench"]
    back = records.parse_record(text, BenchRecord, "r.json")
    assert back == record
    old = '{"schema_version": 3, "kind": "bench", "cell": "c", "status": "OK"}'
    assert records.parse_record(old, BenchRecord, "old.json").cell == "c"


# ---- NVML without a GPU -------------------------------------------------------------------

class FakeNvml:
    """pynvml's calls as a machine with one H200 answers them (or a failing init)."""

    def __init__(self, fail=False):
        self.fail, self.shutdowns = fail, 0

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid != "GPU-5f0c":
            raise RuntimeError("Not Found")
        return "h0"

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"h{index}"

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return 1755

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 64

    def nvmlDeviceGetPowerUsage(self, handle):
        return 512_000                       # milliwatts

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x5

    def nvmlDeviceGetDefaultApplicationsClock(self, handle, kind):
        raise RuntimeError("Not Supported")

    def nvmlDeviceGetApplicationsClock(self, handle, kind):
        return 1980

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return 123_456_789                   # millijoules since the driver loaded

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=97, memory=41)

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return {nvml.CLOCK_SM: 1980, nvml.CLOCK_MEM: 3201}[kind]

    def nvmlDeviceGetUUID(self, handle):
        return b"GPU-5f0c"

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000


FAKE_TORCH = SimpleNamespace(cuda=SimpleNamespace(
    current_device=lambda: 0,
    get_device_properties=lambda index: SimpleNamespace(uuid="5f0c")))


def test_nvml_reads_a_sample_window_and_the_reference_clock(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    sensor = nvml.Sensor.open(FAKE_TORCH)
    assert sensor.available
    window = sensor.window()
    assert (window.sm_clock_mhz, window.temperature_c, window.power_w, window.reasons) == \
        (1755.0, 64.0, 512.0, 0x5)
    assert sensor.reference_sm_clock_mhz() == 1980.0      # no default clock: the maximum
    assert sensor.energy_j() == 123_456.789 and sensor.utilization() == (0.97, 0.41)
    assert nvml.clocks(FAKE_TORCH, 1) == [{
        "uuid": "GPU-5f0c", "sm_max_mhz": 1980, "sm_default_mhz": None,
        "sm_applications_mhz": 1980, "mem_max_mhz": 3201, "power_limit_w": 700.0}]


@pytest.mark.parametrize("module", [None, FakeNvml(fail=True)],
                         ids=["not installed", "no driver"])
def test_without_nvml_every_reading_is_none(monkeypatch, module):
    monkeypatch.setitem(sys.modules, "pynvml", module)    # None: the import fails
    sensor = nvml.Sensor.open(FAKE_TORCH)
    assert not sensor.available and sensor.reference_sm_clock_mhz() is None
    assert sensor.energy_j() is None and sensor.utilization() is None
    assert sensor.window() == nvml.Window()
    assert nvml.clocks(FAKE_TORCH, 2) == [None, None]


def test_a_device_hidden_by_cuda_visible_devices_maps_by_its_index(monkeypatch):
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    no_uuid = SimpleNamespace(cuda=SimpleNamespace(
        current_device=lambda: 0, get_device_properties=lambda i: SimpleNamespace()))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert nvml._handle(fake, no_uuid, 0) == "h3" and nvml._handle(fake, no_uuid, 1) == "h1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa")
    assert nvml._handle(fake, no_uuid, 0) is None          # not guessed


# ---- settings, workloads, the GPU script's configuration ------------------------------

def _raw():
    return yaml.safe_load((ROOT / "tests/gpu/params.yaml").read_text())


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["device"]["cuda"]["timing"].update(series=["hot", "lukewarm"]),
     "device.cuda.timing.series[1] is 'lukewarm'; valid choices: hot, cold, graph"),
    (lambda r: r["device"]["cuda"]["timing"].update(series=["cold"]),
     "device.cuda.timing.series must include hot"),
    (lambda r: r["device"]["cuda"]["timing"].update(max_samples=0),
     "device.cuda.timing.max_samples must be > 0, got 0"),
    (lambda r: r["device"]["cuda"]["timing"].update(throttle_clock=1.5),
     "device.cuda.timing.throttle_clock must be in [0, 1), got 1.5"),
    (lambda r: r["device"]["cuda"]["timing"].update(peak_tflops={"int8": 1979}),
     "unknown key device.cuda.timing.peak_tflops.int8; valid keys: fp64, fp32, tf32, bf16"),
    (lambda r: r["device"]["cuda"].update(type="mps"),
     "device.cuda.timing applies to CUDA devices only (this device's type is 'mps')"),
])
def test_a_bad_timing_setting_is_one_line(edit, message):
    raw = _raw()
    edit(raw)
    with pytest.raises(UserError, match=None) as caught:
        config.parse(raw)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_cuda_device_without_timing_is_timed_as_before():
    raw = _raw()
    del raw["device"]["cuda"]["timing"]
    assert config.parse(raw).devices["cuda"].timing is None


def test_the_gpu_scripts_params_equal_the_composition_of_conf(tmp_path):
    from torchgate.compose import compose
    overrides = (ROOT / "tests/gpu/overrides").read_text().split()
    compose(tmp_path / "params.yaml", overrides)
    assert (tmp_path / "params.yaml").read_text() == (ROOT / "tests/gpu/params.yaml").read_text(), (
        "tests/gpu/params.yaml is stale: run `bash tests/gpu/run_on_gpu.sh --compose`")
    cfg = config.parse(_raw())
    assert [c.name for c in cfg.cells()] == ["cuda-fp32", "cuda-tf32", "cuda-bf16"]
    assert list(cfg.workloads) == ["matmul_relu_xl", "elementwise", "loader_train"]
    assert cfg.workloads["loader_train"].kwargs["pin_memory"] is True
    assert cfg.devices["cuda"].timing.series == ("hot", "cold", "graph")


def test_elementwise_moves_exactly_its_bytes():
    w = elementwise(device=torch.device("cpu"), dtype=torch.bfloat16, compile=lambda f: f,
                    seed=0, mib=1)
    assert w.items == (1 << 20) // 2 and w.bytes_moved == 2 * (1 << 20) and w.flops == w.items
    out = w.step()
    assert out.dtype == torch.bfloat16 and out.nbytes == 1 << 20
    m = matmul_relu(device=torch.device("cpu"), dtype=torch.float32, compile=lambda f: f,
                    seed=0, size=8)
    assert m.flops == 2 * 8 ** 3 and m.bytes_moved is None


def test_the_gpu_summary_reads_a_run(tmp_path, capsys):
    """tests/gpu/summarize.py on records shaped like a GPU run's (a GPU's time is scarce:
    the script must work the first time)."""
    import runpy
    import shutil
    rng = random.Random(0)
    flops = 2.0 * 8192 ** 3

    def matmul(steady):
        series = {"hot": GpuSeries("quiet", 0.002, tflops=flops / steady / 1e12),
                  "cold": GpuSeries("quiet", 0.003)}
        gpu = GpuMode(series, 1980.0, 256 << 20, "bf16", 989.0, 4800.0, "NVIDIA H200 SXM")
        return process(steady=steady, rng=rng, gpu=gpu, flops=flops,
                       cold_s=tuple(steady * 1.01 for _ in range(12)))

    def elementwise_op():
        series = {"hot": GpuSeries("quiet", 0.004),
                  "cold": GpuSeries("max_samples", 0.03, redone=1, throttled=(4,))}
        gpu = GpuMode(series, None, 256 << 20, "bf16", 989.0, 4800.0, "NVIDIA H200 SXM",
                      graph_error="RuntimeError: capture failed")
        return process(steady=5e-6, rng=rng, gpu=gpu, bytes_moved=2.0 * (16 << 20),
                       cold_s=tuple(9e-6 for _ in range(12)))

    def loader():
        return process(steady=3e-3, rng=rng, breakdown_calls=30, input_wait_s=1e-4,
                       copy_s=5e-4, copy_bytes=20e6, compute_s=2.4e-3, sm_util=0.6,
                       mem_util=0.2, joules_per_item=2e-3, unmeasured={})

    record = bench({"matmul_relu_xl": [matmul(1.4e-3 * rng.uniform(0.995, 1.005))
                                       for _ in range(4)],
                    "elementwise": [elementwise_op() for _ in range(4)],
                    "loader_train": [loader() for _ in range(4)]})
    shutil.copy(ROOT / "tests/gpu/params.yaml", tmp_path / "params.yaml")
    records.write_record(tmp_path / "reports/gpu-check/bench/cuda-bf16.json", record)
    runpy.run_path(str(ROOT / "tests/gpu/summarize.py"))["main"](tmp_path)
    lines = capsys.readouterr().out.splitlines()
    text = "\n".join(lines)

    def cells(start):
        row = next(line for line in lines if line.startswith(start))
        return [c.strip() for c in row.strip("|").split("|")]
    assert cells("| cuda-bf16 | eager  | 783")[2:7] == ["783.1", "791.9", "99%", "989", "79%"]
    assert cells("| cuda-bf16 | eager  | hot")[3:] == ["4", "0.34%", "0.9 %", "0.9 %"]
    assert cells("| cuda-bf16 | eager  | 5.0")[2:] == ["5.02 µs", "9.00 µs", "1.79x", "6,690",
                                                       "3,728", "4,800"]
    assert "cold max_samples x4" in text and "redone 4, kept and flagged 4" in text
    assert "graph not captured: RuntimeError: capture failed" in text
    assert cells("| cuda-bf16 | loader_train")[3:11] == [
        "3%", "500 µs", "40", "80%", "compute-bound", "60%", "20%", "2 mJ"]
