"""An out-of-tree accelerator for tests: a real PrivateUse1 backend, registered from Python.

Importing this module does what an out-of-tree backend package does (torch_neuronx, a
vendor's plugin): it renames PyTorch's PrivateUse1 device to `tgaccel`, registers a device
module (`torch.tgaccel`), hooks and a device guard, and a kernel for every operator. The
kernels run on the CPU: a `tgaccel` tensor is a device tensor whose data lives in a CPU
tensor (kept by storage), and each operator runs on those and wraps what it returns. So
`torch.accelerator.current_accelerator()` is `tgaccel`, tensors report `device='tgaccel:0'`
and every operator goes through the dispatcher's PrivateUse1 key, as on a real device.

What it lacks, as a young backend may: torch.accelerator.synchronize, timing events and
memory statistics (the device module's `synchronize` is the only way to wait, and the work
is already done when an operator returns). Set TGACCEL_NO_SYNC=1 to take that away too, and
TGACCEL_NO_KERNEL=aten::op[,aten::other] to leave operators without a kernel here (the
dispatcher's error, as on a backend that lacks them).
"""
from __future__ import annotations

import os

import torch
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

NAME = "tgaccel"


class DeviceModule:
    """torch.tgaccel: what PyTorch asks a backend's device module."""

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def _is_in_bad_fork(self) -> bool:
        return False

    def manual_seed_all(self, seed: int) -> None:
        pass


if not os.environ.get("TGACCEL_NO_SYNC"):
    DeviceModule.synchronize = lambda self, device=None: None

_setup_privateuseone_for_python_backend(NAME, backend_module=DeviceModule())
_DATA: dict[int, torch.Tensor] = {}      # device tensor's storage -> its CPU data
_MISSING = set(filter(None, os.environ.get("TGACCEL_NO_KERNEL", "").split(",")))


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _ours(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == NAME


def _wrap(cpu):
    if not isinstance(cpu, torch.Tensor):
        return cpu
    device_tensor = torch._C._acc.create_empty_tensor(cpu.shape, cpu.dtype)
    _DATA[_key(device_tensor)] = cpu
    return device_tensor


def _unwrap(t):
    if _ours(t):
        return _DATA[_key(t)]
    if isinstance(t, torch.device) and t.type == NAME:
        return torch.device("cpu")
    return t


def _kernel(op, *args, **kwargs):
    """Every operator on tgaccel tensors: run on their CPU data, wrap the results."""
    if op._schema.name in _MISSING:
        raise NotImplementedError(
            f"Could not run '{op._schema.name}' with arguments from the '{NAME}' backend. This "
            "could be because the operator doesn't exist for this backend.\n"
            "CPU: registered at aten/src/ATen/RegisterCPU.cpp:1 [kernel]")
    if op is torch.ops.aten._copy_from.default:          # to and from the device
        _unwrap(args[1]).copy_(_unwrap(args[0]))
        return args[1]
    target = kwargs.get("device")
    out = op(*tree_map(_unwrap, args), **{k: tree_map(_unwrap, v) for k, v in kwargs.items()})
    if isinstance(target, torch.device) and target.type != NAME:
        return out                                        # e.g. .to("cpu")
    given = {}
    for t in tree_leaves((args, kwargs)):
        if _ours(t):
            data = _unwrap(t)
            if t.shape != data.shape:     # an out= operator resized its output
                t.data = _wrap(data)
            given[id(data)] = t
    return tree_map(lambda r: given[id(r)] if id(r) in given else _wrap(r), out)


_LIBRARY = torch.library.Library("_", "IMPL")
_LIBRARY.fallback(_kernel, "PrivateUse1")
