"""A user's extension: custom operators defined with torch.library in the user's module."""
import torch

from torchgate.workloads import Workload


@torch.library.custom_op("userlib::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scale.register_fake
def _(x, factor):
    return torch.empty_like(x)


# The same operator as an extension built for another device only: no CPU kernel.
@torch.library.custom_op("userlib::scale_gpu_only", mutates_args=(), device_types="cuda")
def scale_gpu_only(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


def scaled(*, device, dtype, compile, seed, size=16, gpu_only=False):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(size, size, generator=gen).to(device, dtype)
    op = torch.ops.userlib.scale_gpu_only if gpu_only else torch.ops.userlib.scale
    fn = compile(lambda x: torch.relu(op(x @ x, 0.5)))
    return Workload(step=lambda: fn(a), items=size)
