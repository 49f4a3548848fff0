"""GPU timing on a real CUDA device. Marked `gpu`: skipped, with the reason, where torch sees
none; `bash tests/gpu/run_on_gpu.sh` runs them, then the GPU matrix."""
import statistics

import pytest
import torch

from torchgate.core.config import DeviceSpec, PrecisionSpec
from torchgate.core.config.settings import CudaTiming
from torchgate.core.records.job import Timing
from torchgate.core.records.schema import BenchProcess
from torchgate.core.typed import from_data
from torchgate.launch.local import run_worker
from torchgate.measure.build import configure
from torchgate.measure.gpu_timing import GpuProcess
from torchgate.measure.nvml import Sensor
from torchgate.measure.probe import capture
from torchgate.measure.worker import bench_mode
from torchgate.workloads import elementwise, matmul_relu, mlp_train
from torchgate.workloads.loader import loader_train

from .jobs import job

pytestmark = pytest.mark.gpu

FP32 = PrecisionSpec("fp32", "float32")
BF16 = PrecisionSpec("bf16", "bfloat16", rel_l2_tol=0.02, compiled_multiplier=3.0)
# 12 samples of about 20 ms, after a warm-up of at least 100 ms and 3 calls.
SAMPLED = Timing(12, 0.02, 0.1, 3)


def cuda(series=("hot", "cold")) -> DeviceSpec:
    return DeviceSpec("cuda", "cuda", timing=CudaTiming(series=series))


def measure(factory, precision=FP32, series=("hot", "cold"), **kwargs):
    j = job(f"torchgate.workloads.{factory.__name__}", kwargs, name=factory.__name__,
            device=cuda(series), precision=precision, timing=SAMPLED)
    configure(j)
    gpu = GpuProcess.open(torch, j)
    m = bench_mode(j, factory, torch.device("cuda"), "eager", gpu=gpu)
    assert m.status == "OK", m.error
    return m, gpu


def test_cold_is_slower_than_hot_on_an_l2_resident_elementwise_op():
    m, _ = measure(elementwise, mib=16)
    hot, cold = statistics.median(m.steady_s), statistics.median(m.cold_s)
    assert cold > hot, (cold, hot)
    assert m.gpu.series["cold"].impossible is None    # the flush really reached HBM


def test_the_flush_buffer_is_held_once_and_left_out_of_peak_memory():
    m, gpu = measure(elementwise, mib=16)
    assert gpu.held_bytes == 256 << 20 and m.gpu.flush_bytes == 256 << 20
    assert 32 << 20 <= m.peak_bytes < 256 << 20       # input and output, not the buffer


def test_a_bf16_matmul_stays_below_the_peak():
    m, gpu = measure(matmul_relu, BF16, size=8192)
    hot = m.gpu.series["hot"]
    assert hot.tflops and hot.tflops > 1 and hot.impossible is None
    if gpu.limit.tflops:
        assert hot.tflops < gpu.limit.tflops * 1.05


def test_a_matmul_replays_as_a_cuda_graph():
    m, _ = measure(matmul_relu, series=("hot", "graph"), size=4096)
    assert m.gpu.graph_error is None and m.graph_s
    assert statistics.median(m.graph_s) == pytest.approx(statistics.median(m.steady_s), rel=0.3)


def test_a_step_that_may_not_be_captured_leaves_hot_and_cold_standing():
    m, _ = measure(mlp_train, series=("hot", "cold", "graph"))
    assert len(m.steady_s) >= 12 and len(m.cold_s) >= 12
    assert m.graph_s or m.gpu.graph_error


def test_the_worker_process_times_the_series_of_a_compiled_mode():
    """Through the launcher: the job's timing settings travel to a fresh worker as JSON."""
    compiled = job("torchgate.workloads.matmul_relu", {"size": 1024}, name="matmul_relu",
                   modes=("compiled",), device=cuda(), timing=SAMPLED)
    raw = run_worker(compiled, timeout_s=300)
    result = from_data(BenchProcess, raw, "worker")
    m = result.modes["compiled"]
    assert result.status == "OK" and m.status == "OK", (result.error, m.error)
    assert m.steady_s and m.cold_s and set(m.gpu.series) == {"hot", "cold"}


def test_nvml_reads_the_device_while_it_works():
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    sensor = Sensor.open(torch)
    assert sensor.available
    window = sensor.window()
    assert window.sm_clock_mhz and window.sm_clock_mhz > 0 and window.temperature_c > 0
    assert sensor.reference_sm_clock_mhz() > 0


def test_the_environment_names_the_gpu_its_driver_and_clocks():
    hardware = capture()["hardware"]
    assert hardware["gpu_count"] >= 1 and all(hardware["gpu_uuids"])
    assert len(hardware["gpu_clocks"]) == hardware["gpu_count"]
    if torch.version.hip is None:
        assert hardware["nvidia_driver"]
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return
    assert hardware["gpu_clocks"][0]["sm_max_mhz"] > 0


def test_an_input_pipeline_is_timed_part_by_part_on_the_device():
    """loader_train with pinned batches: the copy is timed by CUDA events, its bytes are the
    batch's tensors, and the parts add up to a step."""
    j = job("torchgate.workloads.loader.loader_train",
            {"batch": 256, "features": 1024, "pin_memory": True, "num_workers": 2},
            name="loader_train", device=cuda(("hot", "graph")), timing=SAMPLED)
    configure(j)
    m = bench_mode(j, loader_train, torch.device("cuda"), "eager", gpu=GpuProcess.open(torch, j))
    assert m.status == "OK", m.error
    assert m.copy_bytes == 256 * 1024 * 4 + 256 * 8 and m.copy_s > 0 and m.compute_s > 0
    assert 0.1 < m.copy_bytes / m.copy_s / 1e9 < 1000, m.copy_s          # GB/s, PCIe or faster
    assert m.breakdown_calls >= 30 and m.input_wait_s >= 0 and "copy_s" not in m.unmeasured
    assert m.gpu.graph_error.startswith("a step with an input pipeline is not captured")


def test_nvml_reads_energy_and_utilization_over_the_hot_series():
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    m, _ = measure(matmul_relu, BF16, size=8192)
    assert m.sm_util is not None and m.sm_util > 0.5, m.sm_util      # kernels back to back
    if "joules_per_item" in m.unmeasured:            # a GPU without an energy counter
        return
    assert m.joules_per_item > 0 and 20 < m.watts < 2000, (m.joules_per_item, m.watts)
