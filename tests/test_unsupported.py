"""A workload's own limits: one that cannot run on a device or dtype by design is SKIPPED with
its reason, not FAILED (torchgate.workloads.Unsupported); one whose error is larger by nature
than its precision's is judged by its own tolerance (`_rel_l2_tol_`)."""
from __future__ import annotations

import functools

import pytest
import torch

from torchgate.core.config import PrecisionSpec, parse_workloads
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.errors import UserError
from torchgate.core.records.outputs import ModeOutputs, OutputError
from torchgate.core.records.schema import ModeNumerics, NumericsRecord, Tolerance
from torchgate.core.vocabulary import BAD, Check, Status, Verdict
from torchgate.judge.numerics import numerics_rows
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.judge.tolerance import evaluate, own_tolerance
from torchgate.judge.verdicts import finish
from torchgate.launch.jobs import recorded
from torchgate.measure.accuracy import fingerprint
from torchgate.measure.build import failure
from torchgate.measure.worker import run_bench, run_numerics
from torchgate.render.numbers import cell_table
from torchgate.render.numerics import errors
from torchgate.render.summary import numerics_section
from torchgate.workloads import Unsupported

from .jobs import BRIEF, job
from .records import BUSY, DELTA, bench, numerics

FP32 = PrecisionSpec("fp32", "float32")
BF16 = PrecisionSpec("bf16", "bfloat16", rel_l2_tol=2e-2)

# A workload run in both modes, briefly: here it is skipped or fails, whatever the timing.
in_both_modes = functools.partial(job, modes=("eager", "compiled"), timing=BRIEF)


def test_unsupported_is_skipped_by_name_whichever_revision_raised_it():
    assert failure(Unsupported("no float8 here")) == (Status.SKIPPED, "no float8 here", None)
    # Another revision's workloads package defines its own class of the same name.
    theirs = type("Unsupported", (Exception,), {"__module__": "torchgate.workloads"})
    assert failure(theirs("no kernels")).status == Status.SKIPPED
    lookalike = type("Unsupported", (Exception,), {"__module__": "acme.models"})
    assert failure(lookalike("x")).status == Status.ERROR


def test_a_workload_unsupported_here_is_skipped_in_bench_and_numerics_with_its_reason():
    target = "torchgate.workloads.lowp.fp8_matmul"
    proc = run_bench(in_both_modes(target, {"size": 16}))
    assert {m: r.status for m, r in proc.modes.items()} == {
        "eager": Status.SKIPPED, "compiled": Status.SKIPPED}
    assert "float8 matmul needs a GPU" in proc.modes["eager"].error
    now = bench({"w": [proc]}, modes=("eager", "compiled"))
    for base in (None, now):
        rows = bench_rows("cpu-fp32", now, base, DELTA)
        assert [(r.mode, r.verdict) for r in rows] == [("compiled", Verdict.SKIPPED),
                                                       ("eager", Verdict.SKIPPED)]
        assert "float8 matmul needs a GPU" in rows[0].note and Verdict.SKIPPED not in BAD
    page = cell_table(summarize("cpu-fp32", now, None, BUSY),
                      finish(bench_rows("cpu-fp32", now, None, DELTA), alpha=0.05,
                             power=0.8).rows)
    assert "| SKIPPED " in page and "float8 matmul needs a GPU" in page
    out = run_numerics(in_both_modes(target, {"size": 16}, kind="numerics"))
    assert {m: r.status for m, r in out.modes.items()} == {
        "eager": Status.SKIPPED, "compiled": Status.SKIPPED}
    ev = evaluate(out.modes["eager"], FP32)
    rows = numerics_rows("cpu-fp32", numerics({"w": {"eager": ev}}), None)
    assert [(r.metric, r.verdict) for r in rows] == [("numerics", Verdict.SKIPPED)]
    assert "float8" in rows[0].note
    grid = numerics_section(finish(rows, alpha=0.05, power=0.8).rows)
    assert "| cpu-fp32 | w | eager | SKIPPED |" in grid


def test_a_workload_without_a_reference_skips_every_numerics_mode():
    out = run_numerics(in_both_modes("tests.unsupported_workloads.nowhere", kind="numerics"))
    assert {m: (r.status, r.error) for m, r in out.modes.items()} == {
        m: (Status.SKIPPED, "needs hardware nobody has; this is cpu")
        for m in ("eager", "compiled")}


def test_own_tolerances_are_a_number_or_per_precision_and_only_loosen():
    specs = parse_workloads({
        "q": {"_target_": "m.f", "_rel_l2_tol_": 0.02},
        "r": {"_target_": "m.f", "_rel_l2_tol_": {"bf16": 0.05}}, "s": {"_target_": "m.f"}})
    assert [specs[n].rel_l2_tol for n in "qrs"] == [{"*": 0.02}, {"bf16": 0.05}, {}]
    assert own_tolerance(BF16, specs["r"]).rel_l2_tol == 0.05
    assert own_tolerance(FP32, specs["r"]) is FP32                  # another precision's
    assert own_tolerance(FP32, specs["q"]).rel_l2_tol == 0.02
    assert own_tolerance(BF16, specs["q"]) is BF16                  # tighter: the precision's
    for bad in ("tight", -1, 0, {"bf16": "x"}, True):
        with pytest.raises(UserError, match=r"workload.q._rel_l2_tol_ must be a number > 0"):
            parse_workloads({"q": {"_target_": "m.f", "_rel_l2_tol_": bad}})
    # The bench record keeps what ran, not how its numerics are judged.
    assert recorded(specs["q"]) == recorded(specs["s"].__class__("q", "m.f"))


def test_numerics_and_drift_are_judged_by_the_workloads_own_tolerance():
    spec = WorkloadSpec("q", "m.f", rel_l2_tol={"*": 0.05})
    result = ModeOutputs(Status.OK, outputs={"out": OutputError(3e-2, 0.1, 0.9995, 0, 4096)})
    assert evaluate(result, BF16).status == Check.FAIL
    assert evaluate(result, own_tolerance(BF16, spec)).status == Check.PASS
    a = torch.linspace(1, 2, 4096)

    def moved(by: float) -> NumericsRecord:
        return numerics({"q": {"eager": ModeNumerics(
            Check.PASS, fingerprint={"out": fingerprint(a * (1 + by))})}},
            tolerance=Tolerance(2e-2, 0.99, 3.0))

    def drift(own=None):
        return [r for r in numerics_rows("cpu-bf16", moved(0.03), moved(0.0), own=own)
                if r.metric == "drift"][0]
    assert drift().verdict == Verdict.REGRESSED          # 3e-2 > the precision's 2e-2
    row = drift({"q": 0.05})
    assert row.verdict == Verdict.EQUIVALENT and "tolerance 5e-02" in row.note
    page = errors(numerics({"q": {"eager": evaluate(result, BF16)}}), {"q": 0.05, "x": 1.0})
    assert "workloads with their own (`_rel_l2_tol_`): `q` ≤ 0.05." in page
