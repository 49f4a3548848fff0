"""Numerics and portability: errors against float64 and their growth, drift of the outputs
across runs, determinism in one process and a fresh one, compiled vs eager, op coverage and
graph breaks. Unit tests on constructed records first; then real worker processes (tiny
shapes, CPU) for the behaviour that depends on them."""
import dataclasses
import json
import math
import re

import pytest
import torch

from torchgate import numerics
from torchgate.core import config
from torchgate.core.records import dumps
from torchgate.core.records.inputs import ab_baseline
from torchgate.core.records.outputs import (
    FINGERPRINT_METHOD,
    Coverage,
    Dynamo,
    Fingerprint,
    ModeOutputs,
    OutputError,
    VersusEager,
)
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import (
    ArmId,
    FreshProcess,
    ModeNumerics,
    NumericsAB,
    NumericsArm,
    Tolerance,
)
from torchgate.core.vocabulary import Verdict
from torchgate.judge import portability as coverage
from torchgate.judge.numerics import numerics_rows
from torchgate.judge.tolerance import evaluate
from torchgate.judge.verdicts import finish
from torchgate.measure import accuracy
from torchgate.render import numerics as numerics_page
from torchgate.render.summary import summary

from .records import numerics as numerics_record

CELL = "cpu-fp32"
TINY = "tests.numerics_workloads.tiny"


def make_config(workloads: dict, modes=("eager",)) -> config.Config:
    return config.parse({
        "device": {"cpu": {"type": "cpu", "threads": 1}},
        "precision": {"fp32": {"dtype": "float32", "rel_l2_tol": 1e-5, "cosine_min": 0.99,
                               "compiled_multiplier": 2.0}},
        "workload": workloads, "matrix": {"name": "test", "modes": list(modes)},
        "numerics": {"timeout_s": 240}})


def by_key(rows):
    return {(r.workload, r.mode, r.metric): r for r in rows}


def summary_of(drafts) -> str:
    rows = finish(drafts, alpha=0.05, power=0.8).rows
    return summary("test", CompareRecord("HEAD", True, 0.05, 0, rows=tuple(rows)), [], None,
                   [CELL])


def details(record, drafts) -> str:
    return numerics_page.page(record, finish(drafts, alpha=0.05, power=0.8))


# ---- fingerprints: compact, safe, stable ---------------------------------------------------

def test_fingerprints_keep_small_outputs_whole_and_sketch_large_ones():
    small = accuracy.fingerprint(torch.arange(10.0))
    assert small == Fingerprint((10,), values=tuple(float(i) for i in range(10)))
    x = torch.randn(300, 200, generator=torch.Generator().manual_seed(0))
    big = accuracy.fingerprint(x)
    assert set(json.loads(dumps(big))) == {"shape", "norm", "mean", "std", "sketch"}
    assert len(dumps(big)) < 900                          # bytes per large output, as JSON
    assert accuracy.fingerprint(x) == big                 # deterministic
    assert accuracy.fingerprint(torch.tensor([1.0, float("nan")])).nonfinite == 1


def test_the_projection_does_not_depend_on_torch_random_numbers():
    """Fixed integer hashing: these numbers must not move with a torch upgrade, or every
    upgrade would look like drift."""
    torch.manual_seed(123)
    assert accuracy.count_sketch(torch.arange(100, dtype=torch.float64))[:4] == [
        17.0, -97.0, 14.0, -92.0]


@pytest.mark.parametrize("scale", [1e-2, 1e-4, 1e-7])
def test_the_sketch_distance_measures_how_far_outputs_moved(scale):
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    noise = torch.randn(100_000, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    moved = x + scale * noise * x.norm() / noise.norm()    # relative L2 distance = scale
    d, why = coverage.fingerprint_distance(accuracy.fingerprint(moved), accuracy.fingerprint(x))
    assert why is None and 0.7 * scale < d < 1.3 * scale
    scaled, _ = coverage.fingerprint_distance(accuracy.fingerprint(x * (1 + scale)),
                                              accuracy.fingerprint(x))
    assert scaled == pytest.approx(scale, rel=0.01)       # exact through the norms
    same, _ = coverage.fingerprint_distance(accuracy.fingerprint(x), accuracy.fingerprint(x))
    assert same == 0.0


def test_a_changed_shape_or_nan_is_said_not_measured():
    a, b = accuracy.fingerprint(torch.ones(8)), accuracy.fingerprint(torch.ones(9))
    assert coverage.fingerprint_distance(a, b) == (None, "shape changed from [9] to [8]")
    nan = accuracy.fingerprint(torch.tensor([1.0, float("nan")]))
    assert coverage.fingerprint_distance(nan, accuracy.fingerprint(torch.ones(2)))[0] is None


def test_nan_in_the_same_places_twice_is_reproducible_not_nondeterministic():
    a = torch.tensor([1.0, float("nan")])
    assert accuracy.max_abs_difference({"o": a}, {"o": a.clone()}) == 0.0
    assert accuracy.max_abs_difference({"o": a}, {"o": torch.ones(2)}) == math.inf


def test_a_reference_that_is_nan_is_a_clear_failure_not_a_crash():
    m = accuracy.error_metrics(torch.ones(4), torch.tensor([1.0, float("nan"), 1.0, 1.0]))
    precision = config.PrecisionSpec("fp32", "float32")
    ev = evaluate(ModeOutputs("OK", outputs={"out": m}, rerun_max_abs=0.0, digest="x"), precision)
    assert ev.status == "NONFINITE"
    assert ev.problems == ("out has 0 NaN/Inf of 4 values and its float64 reference 1: "
                           "the workload produces them at any precision",)


def test_a_step_that_returns_no_tensor_is_not_measured_and_fails_not_a_pass():
    """A forgotten `return` (or a dict of plain numbers) compares nothing: never "PASS,
    bitwise equal, deterministic" on the empty digest."""
    precision = config.PrecisionSpec("fp32", "float32")
    for outputs in ({}, {"out": OutputError(None, None, None, 0, 0)}):
        ev = evaluate(ModeOutputs("OK", outputs=outputs, rerun_max_abs=0.0, digest="e"),
                      precision)
        assert ev.status == "NOT MEASURED" and not ev.ran
        assert ev.problems[0].startswith("the step returned no tensor")
    row = numerics_rows(CELL, rec({"eager": ev}), None)[0]
    assert row.verdict == Verdict.FAILED and "returned no tensor" in row.note


def test_not_measured_and_nonfinite_read_differently():
    """An error of NaN/Inf outputs is measured and not finite; a compiled check that could
    not run is not measured. Neither is shown as the other."""
    nan = evaluate(ModeOutputs("OK", outputs={"out": OutputError(None, None, None, 3, 8)},
                               rerun_max_abs=0.0, digest="x"), config.PrecisionSpec("f", "float32"))
    assert math.isnan(nan.rel_l2["out"])
    failed_eager = evaluate(ModeOutputs("OK", outputs={"out": OutputError(1e-7, 1e-7, 1.0, 0, 8)},
                                        dynamo=Dynamo(), vs_eager_error="ERROR: eager broke"),
                            config.PrecisionSpec("f", "float32"))
    record = numerics_record({"w": {"eager": nan, "compiled": failed_eager}},
                             tolerance=Tolerance(1e-5, 0.99, 2.0))
    md = numerics_page.errors(record) + numerics_page.compiled(record)
    assert re.search(r"\| eager +\| out +\| NaN/Inf +\| NaN/Inf", md)
    assert re.search(r"\| compiled \| out +\| 1.00e-07 +\| not measured", md)
    assert "eager failed: ERROR: eager broke" in md and "NOT MEASURED" in md


# ---- rows on constructed records ---------------------------------------------------------------

def ev(rel_l2=1e-7, **extra) -> ModeNumerics:
    return ModeNumerics("PASS", rel_l2={"out": rel_l2}, max_abs={"out": rel_l2},
                        cosine={"out": 1.0}, digest="d", **{"rerun_max_abs": 0.0, **extra})


def rec(units: dict, coverage_=None):
    return numerics_record({"w": units}, tolerance=Tolerance(1e-5, 0.99, 2.0),
                           fingerprint_method=FINGERPRINT_METHOD,
                           coverage={"w": coverage_} if coverage_ else {})


def test_an_error_that_doubles_is_flagged_while_it_still_passes():
    rows = by_key(numerics_rows(CELL, rec({"eager": ev(2.5e-6)}),
                                           rec({"eager": ev(1e-6)})))
    row = rows[("w", "eager", "numerics")]
    assert row.verdict == Verdict.REGRESSED and row.now == "PASS"
    assert "2.5x the baseline's (1.00e-06 -> 2.50e-06) (still within tolerance)" in row.note
    same = by_key(numerics_rows(CELL, rec({"eager": ev(1.9e-6)}),
                                           rec({"eager": ev(1e-6)})))
    assert same[("w", "eager", "numerics")].verdict == Verdict.EQUIVALENT


def test_nondeterminism_is_reported_with_its_magnitude():
    fresh = FreshProcess(False, distance=3e-8, worst="out")
    now = rec({"eager": ev(rerun_max_abs=2e-7, fresh_process=fresh)})
    base = rec({"eager": ev(fresh_process=FreshProcess(True))})
    row = by_key(numerics_rows(CELL, now, base))[("w", "eager", "determinism")]
    assert (row.verdict, row.base, row.now) == (Verdict.REGRESSED, "deterministic",
                                                "nondeterministic")
    assert "differ by max abs 2.00e-07" in row.note and "moved 3.00e-08 (rel.)" in row.note
    again = by_key(numerics_rows(CELL, base, base))[("w", "eager", "determinism")]
    assert again.verdict == Verdict.EQUIVALENT


def test_compiled_vs_eager_is_a_check_of_its_own():
    precision = config.PrecisionSpec("fp32", "float32", rel_l2_tol=1e-5, compiled_multiplier=2.0)
    result = ModeOutputs("OK", rerun_max_abs=0.0, digest="d", dynamo=Dynamo(),
                         outputs={"out": OutputError(5e-6, 1e-5, 1.0, 0, 4096)},
                         vs_eager={"out": VersusEager(4e-6, 1e-5, 1e-6)})
    compiled = evaluate(result, precision)
    assert compiled.status == "PASS"                      # within tolerance against fp64 ...
    assert compiled.compiled_vs_eager.status == "FAIL"    # ... but 5x eager's error
    rows = by_key(numerics_rows(CELL, rec({"compiled": compiled}), None))
    row = rows[("w", "compiled", "compiled_vs_eager")]
    assert row.verdict == Verdict.FAILED and "> 2x eager's 1.00e-06" in row.note


def test_op_set_changes_and_new_fallbacks_are_shown():
    base_cov = Coverage(device="mps", ops={"aten.mm.default": "fwd", "aten.relu.default": "fwd"})
    now_cov = Coverage(device="mps", ops={"aten.mm.default": "fwd", "aten.gelu.default": "fwd"},
                       fallback_ops=("aten::gelu",))
    rows = by_key(numerics_rows(CELL, rec({"eager": ev()}, now_cov),
                                           rec({"eager": ev()}, base_cov)))
    ops = rows[("w", "eager", "ops")]
    assert ops.verdict == Verdict.INCONCLUSIVE
    assert "new: `aten.gelu.default`" in ops.note and "removed: `aten.relu.default`" in ops.note
    off = rows[("w", "eager", "fallback_ops")]
    assert off.verdict == Verdict.REGRESSED and "`aten::gelu`" in off.note
    same = by_key(numerics_rows(CELL, rec({"eager": ev()}, base_cov),
                                           rec({"eager": ev()}, base_cov)))
    assert same[("w", "eager", "ops")].verdict == Verdict.EQUIVALENT


def test_in_ab_mode_ops_are_compared_with_the_other_interpreters():
    relu = Coverage(device="cpu", ops={"aten.relu.default": "fwd"})
    gelu = Coverage(device="cpu", ops={"aten.gelu.default": "fwd"})
    now = dataclasses.replace(rec({"eager": ev()}, gelu), ab=NumericsAB(
        NumericsArm("/a/python", workloads={"w": {"eager": ev()}}, coverage={"w": relu}),
        ArmId("/b/python")))
    rows = by_key(numerics_rows(CELL, now, ab_baseline(now)))
    assert rows[("w", "eager", "ops")].verdict == Verdict.INCONCLUSIVE


def test_a_graph_break_that_only_moved_a_line_is_not_new():
    reason = "Data-dependent branching: Detected data-dependent branching (at m.py:{})"
    dyn = lambda n, line: Dynamo(n, (reason.format(line),) * n)  # noqa: E731
    moved = numerics_rows(CELL, rec({"compiled": ev(dynamo=dyn(1, 40))}),
                                     rec({"compiled": ev(dynamo=dyn(1, 12))}))
    assert by_key(moved)[("w", "compiled", "graph_breaks")].verdict == Verdict.EQUIVALENT
    new = numerics_rows(CELL, rec({"compiled": ev(dynamo=dyn(1, 40))}),
                                   rec({"compiled": ev(dynamo=dyn(0, 0))}))
    row = by_key(new)[("w", "compiled", "graph_breaks")]
    assert row.verdict == Verdict.REGRESSED and "graph breaks 0 → 1; new: Data-dep" in row.note


# ---- real worker processes ---------------------------------------------------------------------

DEFAULTS = {
    "matmul_relu": {"_target_": "torchgate.workloads.matmul_relu", "size": 32},
    "mlp_train": {"_target_": "torchgate.workloads.mlp_train", "batch": 8, "train_steps": 2},
}
# name -> (baseline kwargs, kwargs now): what a user edits between two runs
EDITS = {
    "edited": ({}, {"scale": 1.001, "act": "clamp"}),    # outputs move 1e-3, ops change
    "growing": ({"error": 2e-6}, {"error": 5e-6}),       # error vs fp64 x2.5, still < 1e-5
    "broken": ({}, {"nan": True}),                       # NaN
    "noisy": ({"process_noise": 1e-6, "call_noise": 1e-9},) * 2,   # nondeterministic both times
}


def edited_config(which: int) -> config.Config:
    workloads = dict(DEFAULTS)
    for name, kwargs in EDITS.items():
        workloads[name] = {"_target_": TINY, **kwargs[which]}
    return make_config(workloads)


@pytest.fixture(scope="module")
def two_runs():
    """A baseline run and a run after the edits, eager, in real worker processes."""
    records, logs = [], []
    for which in (0, 1):
        cfg = edited_config(which)
        records.append(numerics.run_cell(cfg, cfg.cell("cpu", "fp32")))
    base, now = records
    return base, now, numerics_rows(CELL, now, base, 2.0), logs


@pytest.mark.slow
def test_edited_outputs_drift_beyond_tolerance_with_the_measured_distance(two_runs):
    base, now, rows, _ = two_runs
    rows = by_key(rows)
    drift = rows[("edited", "eager", "drift")]
    assert drift.verdict == Verdict.REGRESSED
    assert drift.note.startswith("outputs moved ") and "(tolerance 1e-05)" in drift.note
    moved = float(drift.note.split()[2])
    assert moved == pytest.approx(1e-3, rel=1e-3), drift.note   # scale 1.001
    for name in list(DEFAULTS) + ["growing"]:             # unedited: bitwise the same outputs
        assert rows[(name, "eager", "drift")].verdict == Verdict.EQUIVALENT, name
    assert rows[("matmul_relu", "eager", "drift")].now == 0.0


@pytest.mark.slow
def test_an_error_that_grew_is_flagged_though_it_passes(two_runs):
    base, now, rows, _ = two_runs
    row = by_key(rows)[("growing", "eager", "numerics")]
    assert now.workloads["growing"]["eager"].status == "PASS"
    assert row.verdict == Verdict.REGRESSED and "still within tolerance" in row.note


@pytest.mark.slow
def test_nan_fails_with_a_clear_message_and_the_rest_completes(two_runs):
    base, now, rows, logs = two_runs
    broken = now.workloads["broken"]["eager"]
    assert broken.status == "NONFINITE"
    assert broken.problems == ("out.total has 1 NaN/Inf of 1 values",
                               "out.y has 1 NaN/Inf of 256 values")
    row = by_key(rows)[("broken", "eager", "numerics")]
    assert row.verdict == Verdict.FAILED and row.note.startswith("was PASS, now out.total has 1")
    assert all(now.workloads[n]["eager"].status == "PASS" for n in DEFAULTS)


@pytest.mark.slow
def test_nondeterminism_across_processes_is_measured(two_runs):
    base, now, rows, _ = two_runs
    noisy = now.workloads["noisy"]["eager"]
    assert noisy.rerun_max_abs > 0                        # within one process
    assert noisy.fresh_process.equal is False             # across processes, with magnitude
    assert noisy.fresh_process.distance > 0
    for name in DEFAULTS:
        assert now.workloads[name]["eager"].fresh_process == FreshProcess(True)
    row = by_key(rows)[("noisy", "eager", "determinism")]
    assert row.now == "nondeterministic" and "a fresh process's outputs differ" in row.note


@pytest.mark.slow
def test_op_coverage_lists_the_ops_of_each_default_workload_and_the_diff(two_runs):
    base, now, rows, _ = two_runs
    ops = now.coverage
    assert {"aten.mm.default", "aten.relu.default"} <= set(ops["matmul_relu"].ops)
    mlp = ops["mlp_train"].ops                            # forward, backward and optimizer
    assert mlp["aten.gelu_backward.default"] == "bwd" and mlp["aten.addmm.default"] == "fwd"
    assert "aten.addcdiv_.default" in mlp
    assert all(not c.other_device for c in ops.values())
    keyed = by_key(rows)
    for name in DEFAULTS:
        assert keyed[(name, "eager", "ops")].verdict == Verdict.EQUIVALENT
    changed = keyed[("edited", "eager", "ops")]
    assert changed.verdict == Verdict.INCONCLUSIVE
    assert "new: `aten.clamp.default`" in changed.note
    assert "removed: `aten.relu.default`" in changed.note
    md = details(now, rows)
    for name in DEFAULTS:
        assert f"### {name}: {len(ops[name].ops)} ops" in md
    assert re.search(r"\| `aten.gelu_backward.default` +\| bwd ", md)
    assert "Against the baseline (INCONCLUSIVE): new: `aten.clamp.default`" in md
    summary = summary_of(rows)
    assert "## Numerics and portability" in summary
    assert "`cpu-fp32` edited eager ops: new: `aten.clamp.default`; removed: " in summary


@pytest.mark.slow
def test_the_numerics_markdown_and_summary_show_every_check(two_runs):
    base, now, rows, _ = two_runs
    md = details(now, rows)
    for heading in ("## Errors against the float64 CPU reference", "## Determinism",
                    "## Drift against the baseline", "## Op coverage"):
        assert heading in md
    assert "outputs moved " in md and "bytes of JSON" in md
    summary = summary_of(rows)
    table = summary.split("## Numerics and portability")[1].split("## Environment")[0]
    assert "| cpu-fp32 | edited | eager |" in table
    assert "**REGRESSED** outputs moved" not in table     # the table holds values, the list words
    assert "- **REGRESSED** `cpu-fp32` edited eager drift vs baseline: outputs moved" in summary
    assert "- **FAILED** `cpu-fp32` broken eager vs float64: was PASS" in summary
    per_cell = len(dumps(now).encode())
    assert per_cell < 60_000, per_cell                    # committed reports stay small


@pytest.mark.slow
def test_a_new_graph_break_shows_in_the_summary_with_its_reason():
    records = []
    for graph_break in ("none", "both"):                  # the edit: a print and a branch
        cfg = make_config({"tiny": {"_target_": TINY, "graph_break": graph_break}},
                          modes=("compiled",))
        records.append(numerics.run_cell(cfg, cfg.cell("cpu", "fp32")))
    base, now = records
    assert base.workloads["tiny"]["compiled"].dynamo.graph_breaks == 0
    assert now.workloads["tiny"]["compiled"].dynamo.graph_breaks == 2
    rows = numerics_rows(CELL, now, base)
    row = by_key(rows)[("tiny", "compiled", "graph_breaks")]
    assert row.verdict == Verdict.REGRESSED and (row.base, row.now) == (0, 2)
    summary = summary_of(rows)
    line = next(ln for ln in summary.splitlines() if "graph breaks: graph breaks 0 → 2" in ln)
    assert "builtin operator `print`" in line and "Data-dependent branching" in line
    assert "numerics_workloads.py:" in line              # where, in the user's file
    check = now.workloads["tiny"]["compiled"].compiled_vs_eager
    assert check.status == "PASS" and math.isclose(check.rel_l2["out.y"], 0, abs_tol=1e-6)
    assert by_key(rows)[("tiny", "compiled", "compiled_vs_eager")].verdict == Verdict.EQUIVALENT
