"""GPU timing without a GPU: a simulated device and clock (tests/fake_gpu.py) drive the real
sampling code; the rules (stopping, throttling, roofline) are checked on simulated data."""
import statistics

import pytest

from tests.fake_gpu import EventClock, FakeGpu, FakeSensor
from torchgate.core.config.settings import CudaTiming
from torchgate.measure.gpu_rules import (
    FIXED,
    MAX_SAMPLES,
    QUIET,
    TIMEOUT,
    Peak,
    StopRule,
    Window,
    math_of,
    peak,
    rel_sd,
    roofline,
    throttled,
)
from torchgate.measure.gpu_timing import GpuProcess, take_series
from torchgate.measure.timing import measure

H200 = Peak(989.0, 4800.0, "NVIDIA H200 SXM datasheet")
HOT, MISS = 20e-6, 12e-6          # a call with its data in L2, and what a cold L2 adds


def run_mode(gpu, spec=CudaTiming(), *, sensor=None, process=None, flops=None,
             bytes_moved=None, samples=12, limit=H200):
    """One mode as the worker measures it: measure() with the GPU sampler as its hook."""
    process = process or GpuProcess(gpu, sensor or FakeSensor(gpu=gpu), spec,
                                    min_samples=samples, kind="bf16", limit=limit,
                                    wall=gpu.wall)
    sampler = process.sampler(flops, bytes_moved)
    phases = measure(gpu.kernel, EventClock(gpu), samples=samples, sample_target_s=2e-3,
                     warmup_s=1e-3, min_warmup_calls=3, sampler=sampler)
    return phases, sampler.record()


def test_cold_and_hot_are_each_recovered_within_one_percent():
    gpu = FakeGpu(hot=HOT, miss=MISS, noise=0.002)
    phases, record = run_mode(gpu)
    hot, cold = statistics.median(phases.steady_s), statistics.median(record.cold_s)
    assert hot == pytest.approx(HOT, rel=0.01)
    assert cold == pytest.approx(HOT + MISS, rel=0.01)
    assert phases.calls_per_sample > 50                  # hot: batches of calls
    assert record.gpu.series["cold"].stop == QUIET


def test_reading_nvml_puts_no_host_time_inside_a_window():
    """NVML is read after the end event is queued: even a slow read (1 ms, 30x the call)
    must not stretch a window, as host overhead did in triton #6066."""
    gpu = FakeGpu(hot=HOT, miss=MISS)
    phases, record = run_mode(gpu, sensor=FakeSensor(gpu=gpu, read_s=1e-3))
    assert statistics.median(phases.steady_s) == pytest.approx(HOT, rel=0.01)
    assert statistics.median(record.cold_s) == pytest.approx(HOT + MISS, rel=0.01)


def test_the_flush_never_lands_inside_a_timed_window_and_is_allocated_once():
    gpu = FakeGpu(hot=HOT, miss=MISS, noise=0.01)      # noisy: many cold samples
    process = GpuProcess(gpu, FakeSensor(gpu=gpu), CudaTiming(), min_samples=12, kind="bf16",
                         limit=H200, wall=gpu.wall)
    assert gpu.allocations == 1                        # before the first mode
    for _ in range(2):                                 # two modes, one process
        _, record = run_mode(gpu, process=process)
    assert gpu.allocations == 1 and process.held_bytes == 256 << 20
    assert record.gpu.flush_bytes == 256 << 20
    assert len(gpu.flushes) >= 24 and gpu.windows
    for start, end in gpu.windows:
        for f_start, f_end in gpu.flushes:
            assert f_end <= start or f_start >= end, "a flush inside a timed window"


def test_the_graph_series_replays_a_captured_step():
    gpu = FakeGpu(hot=2e-6, launch_s=4e-6, graph_launch_s=0.5e-6)   # launch-bound eagerly
    phases, record = run_mode(gpu, CudaTiming(series=("hot", "graph")))
    assert gpu.captured == 1 and record.cold_s == ()
    assert statistics.median(phases.steady_s) == pytest.approx(4e-6, rel=0.02)
    assert statistics.median(record.graph_s) == pytest.approx(2e-6, rel=0.02)


def test_a_step_that_cannot_be_captured_leaves_hot_and_cold_standing():
    gpu = FakeGpu(hot=HOT, miss=MISS)

    def refuse(step):
        raise RuntimeError("operation not permitted when stream is capturing")
    gpu.capture = refuse
    _, record = run_mode(gpu, CudaTiming(series=("hot", "cold", "graph")))
    assert record.graph_s == () and len(record.cold_s) >= 12
    assert "not permitted" in record.gpu.graph_error


# ---- the stopping rule --------------------------------------------------------------------

def test_the_stopping_rule_stops_early_on_quiet_data():
    gpu = FakeGpu(hot=HOT, miss=MISS, noise=0.001)
    phases, record = run_mode(gpu)
    assert len(phases.steady_s) == 12 and len(record.cold_s) == 12
    assert {s.stop for s in record.gpu.series.values()} == {QUIET}
    assert record.gpu.series["hot"].rel_sd < 0.005


def test_the_stopping_rule_reports_a_timeout_on_noisy_data():
    gpu = FakeGpu(hot=HOT, miss=MISS, spikes=0.05)        # 5 % of calls take 3x as long
    spec = CudaTiming(max_samples=100_000, timeout_s=0.05)
    phases, record = run_mode(gpu, spec)
    hot = record.gpu.series["hot"]
    assert hot.stop == TIMEOUT and 0.05 <= hot.elapsed_s < 0.06
    assert 12 < len(phases.steady_s) < 100_000
    assert record.gpu.series["cold"].stop == TIMEOUT


def test_the_stopping_rule_caps_samples_and_can_be_turned_off():
    noisy = FakeGpu(hot=HOT, miss=MISS, spikes=0.05)
    phases, record = run_mode(noisy, CudaTiming(max_samples=30, timeout_s=100))
    assert len(phases.steady_s) == 30 and record.gpu.series["hot"].stop == MAX_SAMPLES
    phases, record = run_mode(FakeGpu(hot=HOT, spikes=0.05), CudaTiming(max_rel_sd=0))
    assert len(phases.steady_s) == 12 and record.gpu.series["hot"].stop == FIXED


def test_stop_rule_as_a_function():
    rule = StopRule(min_samples=10, max_rel_sd=0.005, max_samples=50, timeout_s=1.0)
    quiet, noisy = [1.0, 1.001] * 5, [1.0, 1.1] * 5
    assert rule.stop(quiet[:9], 0.0) is None               # the minimum comes first
    assert rule.stop(quiet[:9], 99.0) is None              # even past the timeout
    assert rule.stop(quiet, 0.1) == QUIET
    assert rule.stop(noisy, 0.1) is None
    assert rule.stop(noisy, 1.0) == TIMEOUT
    assert rule.stop(noisy * 5, 0.1) == MAX_SAMPLES
    assert rel_sd([1.0]) is None and rel_sd([2.0, 2.0]) == 0.0


# ---- throttling ------------------------------------------------------------------------

NORMAL = Window(1980.0, 60.0, 600.0, 0x1)               # idle bit: not a throttle


def test_throttled_windows_are_recognized():
    assert throttled(NORMAL, 1980.0, 0.75) is None
    assert "under 75% of 1980 MHz" in throttled(Window(1400.0), 1980.0, 0.75)
    assert throttled(Window(1980.0, reasons=0x40), 1980.0, 0.75) == "hw_thermal_slowdown"
    assert throttled(Window(1980.0, reasons=0x4), 1980.0, 0.75) is None    # power cap
    assert throttled(Window(), None, 0.75) is None         # NVML absent: nothing to judge


def samples_with(script, redos=3):
    """take_series over a steady 1 ms sample whose windows follow `script`."""
    sensor = FakeSensor(script)

    def sample():
        return 1e-3, sensor.window()
    rule = StopRule(min_samples=10, max_rel_sd=0.005, max_samples=100, timeout_s=10)
    return take_series(sample, rule, lambda w: throttled(w, 1980.0, 0.75), redos), sensor


def test_a_throttled_sample_is_redone():
    series, sensor = samples_with(lambda i: Window(1000.0) if i in (2, 3) else NORMAL)
    assert series.redone == 2 and series.throttled == [] and len(series.samples) == 10
    assert sensor.reads == 12


def test_throttling_that_outlasts_the_redos_is_flagged():
    series, _ = samples_with(lambda i: Window(1980.0, reasons=0x20) if i >= 5 else NORMAL)
    assert series.redone == 3
    assert series.throttled == [5, 6, 7, 8, 9] and len(series.samples) == 10


def test_the_record_says_what_nvml_read_and_what_was_flagged():
    gpu = FakeGpu(hot=HOT, miss=MISS)
    script = (lambda i: Window(1200.0, 83.0, 690.0, 0x44) if i % 2 else
              Window(1900.0, 70.0, 650.0, 0x4))
    _, record = run_mode(gpu, CudaTiming(throttle_redos=1), sensor=FakeSensor(script, gpu=gpu))
    hot = record.gpu.series["hot"]
    # Reads alternate; the first throttled one is redone, the later ones kept and flagged.
    assert hot.redone == 1 and hot.throttled == (2, 4, 6, 8, 10)
    assert hot.sm_clock_mhz[:4] == (1900.0, 1900.0, 1200.0, 1900.0)
    assert hot.temperature_c == 83.0 and hot.power_w == 690.0
    assert hot.reasons == ("sw_power_cap", "hw_thermal_slowdown")
    assert record.gpu.reference_sm_clock_mhz == 1980.0


def test_without_nvml_nothing_is_read_and_nothing_is_flagged():
    gpu = FakeGpu(hot=HOT, miss=MISS)
    _, record = run_mode(gpu, sensor=FakeSensor(lambda i: Window(), reference_mhz=None))
    hot = record.gpu.series["hot"]
    assert hot.sm_clock_mhz == () and hot.temperature_c is None and hot.throttled == ()
    assert record.gpu.reference_sm_clock_mhz is None


# ---- the roofline ----------------------------------------------------------------------

MATMUL_8192 = 2.0 * 8192 ** 3


def test_an_impossible_tflops_is_flagged():
    gpu = FakeGpu(hot=0.5e-3)                 # 2,199 TFLOP/s: beyond a 989 TFLOP/s peak
    _, record = run_mode(gpu, flops=MATMUL_8192)
    hot = record.gpu.series["hot"]
    assert hot.tflops == pytest.approx(2199, rel=0.01)
    assert "beyond the peak of 989" in hot.impossible and "measurement error" in hot.impossible
    assert record.gpu.impossible and record.gpu.peak_tflops == 989.0


def test_a_possible_tflops_passes():
    gpu = FakeGpu(hot=1.4e-3)                 # 785 TFLOP/s, as measured on an H200
    _, record = run_mode(gpu, flops=MATMUL_8192)
    assert record.gpu.series["hot"].tflops == pytest.approx(785, rel=0.01)
    assert record.gpu.impossible == []


def test_bandwidth_is_checked_on_the_cold_series_only():
    """A hot step may be served by L2, faster than HBM; a cold one may not."""
    nbytes = 2.0 * (16 << 20)
    assert roofline(3e-6, None, nbytes, H200, 0.05, check_bandwidth=False).impossible is None
    cold = roofline(3e-6, None, nbytes, H200, 0.05, check_bandwidth=True)
    assert cold.gbps == pytest.approx(11_185, rel=0.01) and "GB/s" in cold.impossible
    assert roofline(10e-6, None, nbytes, H200, 0.05, check_bandwidth=True).impossible is None
    assert roofline(1e-3, 1e12, None, Peak(None, None, None), 0.05,
                    check_bandwidth=True).impossible is None      # no peak known: no check


@pytest.mark.parametrize("name, kind, expected", [
    ("NVIDIA H200", "bf16", (989.0, 4800.0)),
    ("NVIDIA H100 80GB HBM3", "tf32", (495.0, 3350.0)),
    ("NVIDIA H100 80GB HBM3", "fp32", (67.0, 3350.0)),
    ("NVIDIA H100 PCIe", "bf16", (None, None)),
    ("NVIDIA H200 NVL", "bf16", (None, None)),
    ("NVIDIA A100-SXM4-80GB", "bf16", (None, None)),
])
def test_datasheet_peaks(name, kind, expected):
    found = peak(name, kind)
    assert (found.tflops, found.gbps) == expected
    assert (found.source is None) == (expected[0] is None)


def test_a_configured_peak_wins():
    found = peak("NVIDIA A100-SXM4-80GB", "bf16", {"bf16": 312.0}, 2039.0,
                 configured="device.cuda.timing")
    assert (found.tflops, found.gbps, found.source) == (312.0, 2039.0, "device.cuda.timing")
    mixed = peak("NVIDIA H200", "bf16", {"bf16": 900.0}, configured="device.cuda.timing")
    assert (mixed.tflops, mixed.gbps) == (900.0, 4800.0) and "datasheet" in mixed.source


@pytest.mark.parametrize("args, kind", [
    (("float32", "highest", False, "bfloat16"), "fp32"),
    (("float32", "high", False, "bfloat16"), "tf32"),
    (("float32", "medium", False, "bfloat16"), "bf16"),
    (("bfloat16", "highest", False, "bfloat16"), "bf16"),
    (("float32", "highest", True, "bfloat16"), "bf16"),
    (("float16", "highest", False, "bfloat16"), "fp16"),
    (("float64", "highest", True, "bfloat16"), "fp64"),
])
def test_the_arithmetic_of_a_cell(args, kind):
    assert math_of(*args) == kind


def test_the_worker_records_the_gpu_series_of_a_mode():
    """bench_mode with a GPU process on the simulated device (the step itself runs on the
    CPU): the mode's record holds every series, and peak memory leaves the flush out."""
    import torch

    from torchgate.core.config import DeviceSpec, PrecisionSpec
    from torchgate.core.config.settings import WorkloadSpec
    from torchgate.core.records.job import Job, Timing
    from torchgate.measure.worker import bench_mode
    from torchgate.workloads import elementwise

    spec = CudaTiming(series=("hot", "cold", "graph"), flush_mib=1, max_samples=20)
    job = Job("bench", 0, DeviceSpec("cuda", "cuda", timing=spec),
              PrecisionSpec("fp32", "float32"),
              (WorkloadSpec("elementwise", "torchgate.workloads.elementwise", {"mib": 1}),),
              ("eager",), Timing(5, 1e-4, 1e-4, 2))
    gpu = FakeGpu(hot=HOT, miss=MISS)
    process = GpuProcess(gpu, FakeSensor(gpu=gpu), spec, min_samples=5, kind="fp32",
                         limit=H200, wall=gpu.wall)
    m = bench_mode(job, elementwise, torch.device("cpu"), "eager", gpu=process)
    assert m.status == "OK" and len(m.steady_s) >= 5 and len(m.cold_s) >= 5 and m.graph_s
    assert set(m.gpu.series) == {"hot", "cold", "graph"} and m.gpu.math == "fp32"
    assert m.bytes_moved == 2 * (1 << 20) and m.flops == (1 << 20) // 4
    assert process.held_bytes == 1 << 20 and m.peak_bytes > 0
