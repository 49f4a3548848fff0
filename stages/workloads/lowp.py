"""Special data types: int8 dynamic quantization on the CPU, float8 (e4m3) matmul on GPUs
with float8 tensor cores. Each is numerically its own thing: its error against the float64
reference is the quantization's, larger than any float precision's, and is judged by the
workload's own tolerance (`_rel_l2_tol_` in its conf/workload/ file).

A device or dtype that has no kernels for them by design raises `Unsupported`: the workload
is SKIPPED there with the reason. The float64 reference (numerics) is the same model
unquantized, in float64.
"""
from __future__ import annotations

import warnings
from typing import Callable

import torch
from torch import nn

from torchgate.workloads import Unsupported, Workload, _positive, _random

FLOAT8_MAX = 448.0          # the largest finite float8_e4m3fn


def int8_mlp(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
             batch: int = 64, width: int = 512, hidden: int = 2048,
             layers: int = 2) -> Workload:
    """Inference through `layers` feed-forward blocks (Linear width->hidden, ReLU,
    Linear hidden->width, residual), their Linear layers quantized by
    torch.ao.quantization.quantize_dynamic: int8 weights, activations quantized per call,
    the matmuls in int8 (fbgemm or onednn), float32 in and out."""
    _positive("int8_mlp", batch=batch, width=width, hidden=hidden, layers=layers)
    if dtype != torch.float64 and (device.type != "cpu" or dtype != torch.float32):
        raise Unsupported(f"int8 dynamic quantization runs on the CPU with float32 "
                          f"activations; this cell is {device.type} {str(dtype)[6:]}")
    torch.manual_seed(seed)
    model = nn.Sequential(*(Residual(width, hidden) for _ in range(layers))).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    # An inference tensor, as the step's own are: dynamo breaks at each quantized Linear,
    # and a frame resumed after a break must see the same kind of tensor as the first.
    with torch.inference_mode():
        x = _random(batch, width, seed_gen=gen).to(device, dtype)
    if dtype == torch.float64:                  # the reference: the float model
        model = model.to(device, dtype)
    else:
        with warnings.catch_warnings():         # its deprecation notice, once per build
            warnings.simplefilter("ignore")
            model = torch.ao.quantization.quantize_dynamic(model, {nn.Linear},
                                                           dtype=torch.qint8)
    forward = compile(model)

    def step():
        with torch.inference_mode():
            return forward(x)

    return Workload(step=step, items=batch, flops=2.0 * batch * layers * 2 * width * hidden)


class Residual(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.up, self.down = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def float8_support(device: torch.device) -> str | None:
    """Why this device has no float8 matmul, or None where it has one: a CUDA GPU of compute
    capability 8.9 (Ada) or later, or a ROCm GPU of the MI300 line (gfx94x) or later."""
    if device.type != "cuda":
        return f"float8 matmul needs a GPU with float8 tensor cores; this is {device.type}"
    props = torch.cuda.get_device_properties(device)
    if torch.version.hip:
        arch = getattr(props, "gcnArchName", "")
        return None if arch.startswith(("gfx94", "gfx95")) else (
            f"float8 matmul needs an MI300-class ROCm GPU (gfx94x); this is {arch or 'older'}")
    if (props.major, props.minor) >= (8, 9):
        return None
    return (f"float8 matmul needs compute capability 8.9 or later (Ada, Hopper); "
            f"{props.name} has {props.major}.{props.minor}")


def fp8_matmul(*, device: torch.device, dtype: torch.dtype, compile: Callable, seed: int,
               size: int = 4096, on_cpu: bool = False) -> Workload:
    """a @ b.T of two size x size matrices quantized to float8_e4m3fn with one scale each
    (their largest magnitude to 448), through torch._scaled_mm, out in the cell's dtype. The
    quantization happens at build; the step is the matmul alone, so its FLOPs and bytes are
    exact. `on_cpu`: run torch's CPU kernel too (a reference implementation, not a fast
    path); otherwise the CPU is SKIPPED like any device without float8 tensor cores."""
    _positive("fp8_matmul", size=size)
    gen = torch.Generator().manual_seed(seed)
    a, b = (_random(size, size, seed_gen=gen) for _ in range(2))
    if dtype == torch.float64:                  # the reference: the exact product
        a, b = a.to(device, dtype), b.to(device, dtype)
        fn = compile(lambda x, y: x @ y.t())
        return Workload(step=lambda: fn(a, b), items=size, flops=2.0 * size ** 3)
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise Unsupported(f"float8 matmul writes float32, bfloat16 or float16, not {dtype}")
    why = None if on_cpu and device.type == "cpu" else float8_support(device)
    if why:
        raise Unsupported(why)
    scales = [t.abs().max() / FLOAT8_MAX for t in (a, b)]
    a8, b8 = ((t / s).to(torch.float8_e4m3fn).to(device) for t, s in zip((a, b), scales))
    sa, sb = (s.to(device) for s in scales)
    # _scaled_mm wants its second operand column-major: b8.t() is, as a view.
    fn = compile(lambda x, y: torch._scaled_mm(x, y.t(), scale_a=sa, scale_b=sb,
                                               out_dtype=dtype))
    itemsize = torch.empty((), dtype=dtype).element_size()
    return Workload(step=lambda: fn(a8, b8), items=size, flops=2.0 * size ** 3,
                    bytes_moved=float(2 * size * size + size * size * itemsize))
