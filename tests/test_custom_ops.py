"""Custom operators: a user's extension appears in the op coverage under its own namespace;
one without a kernel for the device, or one that does not load, is a FAILED unit with the
loader's message in one line."""
import functools
import random

import pytest
import torch

from torchgate.core.config.targets import load_target
from torchgate.core.records.outputs import Coverage, extensions, namespaces
from torchgate.core.records.schema import ModeNumerics
from torchgate.core.vocabulary import Verdict
from torchgate.judge.numerics import numerics_rows
from torchgate.judge.timings import bench_rows
from torchgate.measure.build import failure, missing_kernel
from torchgate.measure.ops import op_coverage
from torchgate.measure.worker import run_bench
from torchgate.render.numerics import ops as ops_section

from .custom_op_workloads import scaled
from .jobs import BRIEF, job
from .records import DELTA, bench, numerics, process

# The user's op as the numerics stage runs it.
scaled_job = functools.partial(job, "tests.custom_op_workloads.scaled", name="scaled",
                               kind="numerics", timing=BRIEF)


def test_a_user_extension_appears_in_the_op_coverage_under_its_own_namespace():
    coverage = op_coverage(scaled_job(), scaled, torch.device("cpu"), torch.float32)
    assert "userlib.scale.default" in coverage.ops and "aten.mm.default" in coverage.ops
    assert extensions(coverage) == {"userlib": ["userlib.scale.default"]}
    assert list(namespaces(coverage)) == ["aten", "userlib"]
    record = numerics({"scaled": {"eager": ModeNumerics("PASS")}},
                      coverage={"scaled": coverage})
    page = ops_section(record, [])
    assert "Namespaces: `aten` 2, `userlib` 1 (extension)" in page
    assert "| `userlib.scale.default` | fwd" in page
    row = {r.metric: r for r in numerics_rows("cpu-fp32", record, None)}["ops"]
    assert row.note == "extensions: userlib `userlib.scale.default`"


def test_the_same_op_without_a_cpu_kernel_fails_the_unit_with_one_clear_line():
    m = run_bench(scaled_job({"gpu_only": True}, kind="bench")).modes["eager"]
    assert m.status == "ERROR"
    assert m.error == ("NotImplementedError: operator userlib::scale_gpu_only has no kernel for "
                       "the CPU backend (it has kernels for CUDA only): the extension does not "
                       "support this device, or its CPU kernel was not registered")
    failed = bench({"scaled": [process(rng=random.Random(0))]}, modes=("eager",))
    now = bench({"scaled": [process(status="ERROR", error=m.error)]})
    row = bench_rows("cpu-fp32", now, failed, DELTA)[0]
    assert row.verdict == Verdict.FAILED and "has no kernel for the CPU backend" in row.note
    with pytest.raises(NotImplementedError) as err:    # op coverage says the same
        op_coverage(scaled_job({"gpu_only": True}), scaled, torch.device("cpu"), torch.float32)
    assert failure(err.value).error == m.error
    cov = Coverage("ERROR", error=m.error)
    rows = numerics_rows("c", numerics({"scaled": {"eager": ModeNumerics("PASS")}},
                                       coverage={"scaled": cov}), None)
    assert {r.metric: r.verdict for r in rows}["ops"] == Verdict.FAILED


def test_only_a_missing_kernel_is_rewritten():
    assert missing_kernel(ValueError("Could not run 'a::b' with arguments from the 'CPU' "
                                     "backend")) is None
    assert missing_kernel(NotImplementedError("something else")) is None
    lib = torch.library.Library("userlib_nokernel", "DEF")
    lib.define("op(Tensor x) -> Tensor")
    with pytest.raises(NotImplementedError) as err:
        torch.ops.userlib_nokernel.op(torch.ones(2))
    assert missing_kernel(err.value) == (
        "operator userlib_nokernel::op has no kernel for the CPU backend (it has no device "
        "kernel at all): the extension does not support this device, or its CPU kernel was "
        "not registered")


def test_an_extension_library_that_does_not_load_fails_the_workload_with_the_loaders_message(
        tmp_path, monkeypatch):
    (tmp_path / "userlib_loader.py").write_text(
        "import torch\ntorch.ops.load_library('/nonexistent/libuserops.so')\n\n\n"
        "def workload(**kwargs):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError) as err:
        load_target("userlib_loader.workload")
    assert str(err.value) == ("cannot import workload _target_ 'userlib_loader.workload': "
                              "OSError: Could not load this library: /nonexistent/libuserops.so")
