"""Utilization and energy of the steady state: RAPL on the CPU (a fake powercap tree), NVML on
CUDA (the simulated device of tests/fake_gpu.py), the CPU busy share, and "not measured" with
the reason wherever a reading cannot be had."""
import pytest

from tests.fake_gpu import EventClock, FakeGpu, FakeSensor
from torchgate.core.config.settings import CudaTiming
from torchgate.core.records.schema import BenchProcess, ModeTiming
from torchgate.core.typed import from_data, to_data
from torchgate.judge.summary import summarize
from torchgate.measure.energy import NO_NVML, SHORT_FOR_TICKS, Meter, Rapl, busy_share, open_meter
from torchgate.measure.gpu_timing import GpuProcess
from torchgate.measure.timing import BusyMachine, measure
from torchgate.measure.worker import bench_mode
from torchgate.workloads.loader import loader_train

from .records import BUSY, bench
from .test_gpu_timing import H200, HOT, MISS
from .test_steps import loader_job
from .test_timing import FakeClock


def zone(root, name, label, uj, span=None):
    z = root / name
    z.mkdir(parents=True)
    (z / "name").write_text(label + "\n")
    if isinstance(uj, str):
        (z / "energy_uj").mkdir()             # unreadable, whoever runs the test
    else:
        (z / "energy_uj").write_text(f"{uj}\n")
    if span is not None:
        (z / "max_energy_range_uj").write_text(f"{span}\n")
    return z


def test_rapl_sums_the_packages_across_a_wrap_and_leaves_subzones_and_psys_out(tmp_path):
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", 999_000_000, span=1_000_000_000)
    p1 = zone(tmp_path, "intel-rapl:1", "package-1", 5_000_000, span=1_000_000_000)
    zone(tmp_path, "intel-rapl:0:0", "core", 1)
    zone(tmp_path, "intel-rapl:2", "psys", 1)
    rapl = Rapl(str(tmp_path))
    assert [z.name for z in rapl.zones] == ["intel-rapl:0", "intel-rapl:1"] and rapl.why is None
    clock = FakeClock()
    meter = Meter(rapl.read, rapl.spans, wall=lambda: clock.now)
    meter.start()
    (p0 / "energy_uj").write_text("2000000\n")          # wrapped: 1 J + 2 J
    (p1 / "energy_uj").write_text("9000000\n")          # 4 J
    clock.now += 0.5
    meter.stop()
    found = meter.record(items_per_interval=70)
    assert found.joules_per_item == pytest.approx(7.0 / 70)
    assert found.watts == pytest.approx(14.0) and found.unmeasured == {}


def test_without_rapl_the_energy_says_why(tmp_path):
    missing = open_meter("cpu", powercap=str(tmp_path / "nowhere")).record(10)
    assert missing.joules_per_item is None
    assert missing.unmeasured == {"joules_per_item": f"no {tmp_path / 'nowhere'}: RAPL is not "
                                                        "exposed here (a VM, or not Linux)"}
    assert open_meter("cpu", powercap=str(tmp_path)).record(10).unmeasured[
        "joules_per_item"] == f"no RAPL zone under {tmp_path} (a VM, or a CPU without RAPL)"
    zone(tmp_path, "intel-rapl:0", "package-0", "locked")
    why = open_meter("cpu", powercap=str(tmp_path)).record(10).unmeasured["joules_per_item"]
    assert why.endswith("energy_uj is not readable by this user (root only since Linux 5.10)")
    assert open_meter("mps").record(10).unmeasured == {
        "joules_per_item": "no energy counter is read on mps devices"}


def test_a_counter_that_does_not_move_or_fails_is_no_reading():
    still = Meter(lambda: (5.0,))
    still.start(), still.stop()
    assert still.record(1).unmeasured["joules_per_item"].startswith(
        "the energy counter did not advance over")
    readings = iter([(1.0,), None])
    broken = Meter(lambda: next(readings))
    broken.start(), broken.stop()
    assert broken.record(1).unmeasured == {"joules_per_item": "an energy counter reading "
                                                                 "failed"}


def test_the_cpu_busy_share_is_cpu_time_per_second_and_thread():
    busy = BusyMachine()
    busy.totals["own"], busy.wall, busy.intervals = 0.36, 0.24, 12
    assert busy_share(busy, 2) == pytest.approx(0.75)
    assert busy_share(busy, 1) == pytest.approx(1.5)     # loader workers beside the thread
    busy.wall = 0.01                                     # too short for /proc's ticks
    assert busy_share(busy, 2) is None


def test_a_cpu_busy_share_too_short_to_read_says_why(monkeypatch):
    """For real, in this process, with clock ticks too coarse for the steady state however
    long it lasts on this machine (a tick a second)."""
    import torch

    from torchgate.measure import energy
    from torchgate.render.steps import usage_section

    monkeypatch.setattr(energy, "hz", lambda: 1)
    m = bench_mode(loader_job(), loader_train, torch.device("cpu"), "eager")
    assert m.cpu_busy is None and m.unmeasured["cpu_busy"] == SHORT_FOR_TICKS
    m = from_data(ModeTiming, to_data(m), "mode")      # as the record reads it
    page = usage_section(summarize("c", bench({"loader_train": [
        BenchProcess("OK", modes={"eager": m})]}), 0.0, BUSY))
    assert f"- CPU busy not measured: {SHORT_FOR_TICKS}" in page


def gpu_mode(sensor_kwargs=None, series=("hot", "cold", "graph")):
    gpu = FakeGpu(hot=HOT, miss=MISS)
    sensor = FakeSensor(gpu=gpu, **(sensor_kwargs or {}))
    process = GpuProcess(gpu, sensor, CudaTiming(series=series), min_samples=8, kind="bf16",
                         limit=H200, wall=gpu.wall)
    meter = open_meter("cuda", sensor)
    sampler = process.sampler(None, None, meter)
    phases = measure(gpu.kernel, EventClock(gpu), samples=8, sample_target_s=2e-3,
                     warmup_s=1e-3, min_warmup_calls=3, sampler=sampler)
    return meter, sampler, phases


def test_on_cuda_the_energy_and_utilization_are_read_around_the_hot_samples_alone():
    meter, sampler, phases = gpu_mode()
    hot = sampler.series["hot"]
    assert meter.intervals == len(hot.samples) + hot.redone
    found = meter.record(items_per_interval=phases.calls_per_sample)
    # 500 W while a call of HOT seconds runs: the cold calls' misses and flushes left out.
    assert found.joules_per_item == pytest.approx(500.0 * HOT, rel=0.02)
    assert found.sm_util == 0.9 and found.mem_util == 0.4 and found.unmeasured == {}


def test_on_cuda_what_nvml_cannot_give_is_said():
    class Absent:
        available = False
    assert open_meter("cuda", Absent()).record(1).unmeasured == {
        "joules_per_item": NO_NVML, "sm_util": NO_NVML}
    meter, _, phases = gpu_mode({"power_w": None, "rates": None}, series=("hot",))
    found = meter.record(phases.calls_per_sample)
    assert found.joules_per_item is None and found.sm_util is None
    assert found.unmeasured == {
        "joules_per_item": "NVML gives no energy counter for this GPU (one before Volta)",
        "sm_util": "NVML gave no utilization rates for this GPU"}
