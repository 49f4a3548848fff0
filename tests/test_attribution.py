"""Where a change went: a callgrind dump read per function, the functions' change between two
sides, and the one line the pages show."""
from __future__ import annotations

import pytest

from torchgate.core.records.rows import Change, Contribution, Row
from torchgate.core.records.schema import Spent
from torchgate.core.vocabulary import REST
from torchgate.judge.counts import where_it_went
from torchgate.measure.callgrind import self_costs, short_name, spent
from torchgate.render.verdicts import attributed, evidence

# A dump as callgrind writes it: names compressed, a call's inclusive cost after `calls=`,
# relative positions, a file switch inside a function (fi=), a recursion level ('2).
DUMP = """# callgrind format
version: 1
positions: line
events: Ir
summary: 1700

ob=(1) /usr/lib/libtorch_cpu.so
fl=(1) ???
fn=(1) at::native::(anonymous namespace)::tanh_kernel(at::TensorIteratorBase&)
0 300
+2 100
cob=(2) /usr/lib/libmkl_def.so
cfi=(2) ???
cfn=(2) mkl_blas_sgemm
calls=3 0
0 900
fi=(3) inlined.h
-1 50
ob=(2)
fl=(2)
fn=(2)
0 900
ob=(1)
fl=(1)
fn=(3) void at::vec::map<float, at::foo<int>>(float const*, long)'2
* 350

totals: 1700
"""


def test_a_dump_gives_each_function_its_own_instructions_not_its_callees(tmp_path,
                                                                        monkeypatch):
    path = tmp_path / "callgrind.out.1"
    path.write_text(DUMP)
    found = self_costs(path)
    tanh = "at::native::(anonymous namespace)::tanh_kernel(at::TensorIteratorBase&)"
    assert found[(tanh, "/usr/lib/libtorch_cpu.so")] == 450     # not the 900 of its call
    assert found[("mkl_blas_sgemm", "/usr/lib/libmkl_def.so")] == 900
    assert sum(found.values()) == 1700                          # the dump's totals line
    kept = spent([path], calls=10)
    assert kept[0] == ("mkl_blas_sgemm", "libmkl_def.so", 90)
    assert ("at::native::(anonymous namespace)::tanh_kernel", "libtorch_cpu.so", 45) in kept
    assert ("at::vec::map<…>", "libtorch_cpu.so", 35) in kept
    # A library's functions not kept one by one (here: past KEPT_MOST) still count toward it.
    monkeypatch.setattr("torchgate.measure.callgrind.KEPT_MOST", 1)
    assert spent([path], calls=10) == (("mkl_blas_sgemm", "libmkl_def.so", 90),
                                       (REST, "libtorch_cpu.so", 80))


@pytest.mark.parametrize("symbol, shown", [
    ("at::native::(anonymous namespace)::tanh_kernel(at::TensorIteratorBase&)",
     "at::native::(anonymous namespace)::tanh_kernel"),
    ("void at::vec::AVX2::map<float, at::native::f<int>>(std::function<void (int)> const&) const",
     "at::vec::AVX2::map<…>"),
    ("operator new(unsigned long)", "operator new"),
    ("at::foo::operator()(long) const", "at::foo::operator()"),
    ("mkl_blas_avx2_sgemm_kernel", "mkl_blas_avx2_sgemm_kernel"),
    ("void at::native::cpu_kernel_vec<at::F>(at::TensorIteratorBase&, long) [clone .isra.0]",
     "at::native::cpu_kernel_vec<…>"),
    ("0x00000000004fee40'2", "0x4fee40"),
])
def test_symbols_are_shown_as_users_search_them(symbol, shown):
    assert short_name(symbol) == shown


def test_a_long_name_is_cut():
    assert len(short_name("a" * 300)) == 100


def side(*counts: dict[str, int]) -> list[tuple[Spent, ...]]:
    return [tuple(Spent(f, "libtorch_cpu.so" if f != "sgemm" else "libmkl.so", n)
                  for f, n in c.items()) for c in counts]


def test_the_functions_that_moved_most_come_first_with_each_sides_median():
    base = side({"sgemm": 1000, "tanh": 400, "copy": 100}, {"sgemm": 1010, "tanh": 400,
                                                              "copy": 100})
    now = side({"sgemm": 1100, "tanh": 440, "copy": 100, "cast": 30},
               {"sgemm": 1110, "tanh": 440, "copy": 100, "cast": 30})
    found = where_it_went(base, now)
    functions = [c for c in found if c.kind == "function"]
    assert [c.what for c in functions] == ["sgemm", "tanh", "cast"]   # unmoved copy left out
    assert functions[0].change == pytest.approx(100) and functions[2].base == 0
    libraries = {c.what: c.change for c in found if c.kind == "library"}
    assert libraries == {"libmkl.so": pytest.approx(100), "libtorch_cpu.so": pytest.approx(70)}
    assert where_it_went(base, [()]) == ()       # a side that kept no functions: none
    # A library's smaller functions move the library, never show as a function.
    rest = [(*s, Spent(REST, "libtorch_cpu.so", 50)) for s in now]
    found = where_it_went(base, rest)
    assert REST not in [c.what for c in found if c.kind == "function"]
    assert {c.what: c.change for c in found if c.kind == "library"}["libtorch_cpu.so"] == \
        pytest.approx(120)


def row(base: float, now: float, attribution, verdict="REGRESSED") -> Row:
    return Row("bench", "c", "w", "eager", "instructions", verdict, base, now, 0.005,
               Change(now / base, now / base - 0.01, now / base + 0.01, 0.95, 1e-4, 1, 1,
                      0.001, "Welch t"), "", attribution=attribution)


def test_a_moved_row_says_where_in_one_line_with_shares():
    parts = (Contribution("sgemm", "function", 1000, 1100, "libmkl.so"),
             Contribution("tanh", "function", 400, 440, "libtorch_cpu.so"),
             Contribution("libmkl.so", "library", 1000, 1100))
    line = attributed(row(2000, 2140, parts))
    assert line.startswith("where (functions): +140 a call: 71% `sgemm` (libmkl.so), 29% `tanh`")
    assert "by library libmkl.so +100" in line and "explain" not in line
    assert line in evidence(row(2000, 2140, parts))
    assert attributed(row(2000, 2140, parts, verdict="EQUIVALENT")) == ""


def test_an_attribution_that_explains_little_says_so():
    parts = (Contribution("tanh", "function", 400, 420, "libtorch_cpu.so"),)
    assert "the functions shown explain 20% of it" in attributed(row(2000, 2100, parts))


def test_a_first_call_is_split_by_the_compiles_phases_each_sides_median():
    from torchgate.core.records.schema import ModeTiming
    from torchgate.judge.timings import by_phase

    def mode(build: float) -> ModeTiming:
        return ModeTiming("OK", first_call_s=1.0 + build, compile_phases={
            "tracing": 0.2, "build": build, "rest": 0.8})
    found = by_phase([mode(1.0), mode(1.1), ModeTiming("OK", first_call_s=2.0)],
                     [mode(2.0), mode(2.2)])
    assert found[0].what == "build" and found[0].change == pytest.approx(1.05)
    assert {c.what for c in found} == {"tracing", "build", "rest"}
    assert by_phase([ModeTiming("OK", first_call_s=0.1)], [mode(1.0)]) == ()   # eager base
    first = Row("bench", "c", "w", "compiled", "first_call_s", "REGRESSED", 2.05, 3.1, 0.2,
                Change(1.5, 1.4, 1.6, 0.95, 1e-4, 2, 2, 0.01, "Welch t"), "",
                attribution=found)
    assert attributed(first).startswith("where (phases): +1.05 s: 100% `build`")


def test_operator_times_are_each_operators_self_seconds_per_call(monkeypatch):
    """What the profiler summed over `calls` calls, divided by them (a per-call figure, whatever
    the machine's load; the pass below checks the real profiler's output)."""
    import types

    import torch.profiler

    from torchgate.measure import ops

    class Profile:
        def __init__(self, activities):
            self.activities = activities

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def key_averages(self):
            event = types.SimpleNamespace
            return [event(key="aten::mm", self_cpu_time_total=300.0),
                    event(key="aten::tanh", self_cpu_time_total=60.0),
                    event(key="aten::empty", self_cpu_time_total=0.0)]
    monkeypatch.setattr(torch.profiler, "profile", Profile)
    called = []
    found = ops.operator_times(lambda: called.append(1), lambda: None, 3)
    assert found == {"aten::mm": 1e-4, "aten::tanh": 2e-5} and len(called) == 3


def test_a_mode_is_profiled_by_operator_after_its_timed_samples():
    import torch

    from torchgate.core.config.targets import load_target
    from torchgate.measure.worker import bench_mode

    from .jobs import job, quick
    target = "tests.count_workloads.chain"
    m = bench_mode(job(target, {"layers": 4}), load_target(target), torch.device("cpu"), "eager")
    assert {"aten::mm", "aten::tanh"} <= m.operator_s.keys()
    assert all(s > 0 for s in m.operator_s.values())
    # What the pass cost is kept: at least its calls' own time, seconds at most here.
    calls = job(target, {"layers": 4}).timing.profile_calls
    assert calls * min(m.steady_s) < m.profile_s < 30
    off = bench_mode(job(target, {"layers": 4}, timing=quick(profile_calls=0)),
                     load_target(target), torch.device("cpu"), "eager")
    assert off.operator_s == {} and off.compile_phases == {} and off.profile_s is None


@pytest.mark.slow
def test_a_compiled_first_call_is_split_into_the_compiles_phases():
    import torch

    from torchgate.core.config.targets import load_target
    from torchgate.measure.worker import bench_mode

    from .jobs import job
    target = "tests.count_workloads.chain"
    m = bench_mode(job(target, {"layers": 4}, modes=("compiled",)), load_target(target),
                   torch.device("cpu"), "compiled")
    phases = m.compile_phases
    assert {"tracing", "AOT autograd", "lowering", "codegen", "build and load", "guards",
            "rest"} == phases.keys()
    assert phases["tracing"] > 0 and sum(phases.values()) == pytest.approx(m.first_call_s,
                                                                          rel=0.05)


def test_a_regressed_steady_state_names_the_operator_that_took_the_time():
    import random

    from torchgate.judge.timings import bench_rows
    from torchgate.judge.verdicts import finish

    from .records import DELTA, bench, process

    def side(steady: float, mm: float, seed: int, extra: dict | None = None):
        rng = random.Random(seed)
        return bench({"w": [process(steady, rng=rng, operator_s={
            "aten::mm": mm * rng.uniform(0.99, 1.01), "aten::tanh": 4e-4 * rng.uniform(0.99, 1.01),
            **(extra or {})}) for _ in range(8)]})
    base = side(1e-3, 5e-4, 1)
    now = side(1.1e-3, 6e-4, 2, {"aten::_to_copy": 2e-6})
    rows = {r.metric: r for r in finish(bench_rows("c", now, base, DELTA), alpha=0.05,
                                        power=0.8).rows}
    steady = rows["steady_s"]
    assert steady.verdict == "REGRESSED"
    first = steady.attribution[0]
    assert first.what == "aten::mm" and first.change == pytest.approx(1e-4, rel=0.05)
    assert first.p < 0.05                                  # tested, Holm over the unit's ops
    tanh = next(c for c in steady.attribution if c.what == "aten::tanh")
    assert tanh.p > 0.05                                   # unchanged: not significant
    line = attributed(steady)
    assert line.startswith("where (operators): +") and "`aten::mm` (p " in line
    assert "`aten::_to_copy` (new)" in line


def test_a_compiled_graphs_call_is_named_alike_on_both_sides():
    from torchgate.measure.ops import operator_name
    assert operator_name("## Call CompiledFxGraph fydtdusigt5q5nkz3q6vltpdzfrb6zo7i7h2ybdt7 ##") \
        == operator_name("## Call CompiledFxGraph f7cwegobkwbnuo7yf4uftjen6hkiw6c3ovzzaovu ##") \
        == "Call CompiledFxGraph …"
    assert operator_name("aten::_log_softmax_backward_data") == "aten::_log_softmax_backward_data"


def test_a_function_callgrind_named_by_its_address_is_named_from_the_exported_table(tmp_path):
    from pathlib import Path

    import torch

    from torchgate.measure.callgrind import _named, elf_functions
    lib = str(Path(torch.__file__).parent / "lib" / "libc10.so")
    table = elf_functions(lib)
    address, _, name = next(t for t in table if t[1] > 16)
    assert _named(f"0x{address:016x}", lib, {}) in {n for a, _, n in table if a == address}
    assert _named(f"0x{address + 8:016x}", lib, {}) != f"0x{address + 8:016x}"  # inside it
    assert _named("0x0000000000000001", lib, {}) == "0x0000000000000001"   # nothing there
    assert elf_functions(str(tmp_path / "missing.so")) == []
    (tmp_path / "text.so").write_text("not an ELF")
    assert elf_functions(str(tmp_path / "text.so")) == []


def test_the_moved_units_parts_are_drawn_as_diverging_bars():
    from torchgate.render.plots import pictures, where
    parts = (Contribution("sgemm", "function", 1000, 1100, "libmkl.so"),
             Contribution("copy", "function", 100, 90, "libc.so.6"),
             Contribution("libmkl.so", "library", 1000, 1100))
    assert where([row(2000, 2090, parts)]).startswith(b"\x89PNG")
    assert where([row(2000, 2090, parts, verdict="EQUIVALENT")]) is None
    assert pictures({}, [row(2000, 2090, ())])["where.png"] is None


def test_the_summary_and_so_the_pr_comment_says_where_a_regressed_unit_went():
    """summary.md is the pull-request comment: the unit's row and its regressions table say
    where, and compare.md's evidence too."""
    import random

    from torchgate.core.records.rows import CompareRecord
    from torchgate.judge.summary import summarize
    from torchgate.judge.timings import bench_rows
    from torchgate.judge.verdicts import finish
    from torchgate.render.summary import summary
    from torchgate.render.verdicts import table

    from .records import BUSY, DELTA, bench, process

    def side(steady: float, mm: float, seed: int):
        rng = random.Random(seed)
        return bench({"w": [process(steady, rng=rng, operator_s={
            "aten::mm": mm * rng.uniform(0.99, 1.01), "aten::relu": 3e-4}) for _ in range(6)]})
    base, now = side(1e-3, 5e-4, 1), side(1.3e-3, 8e-4, 2)
    result = finish(bench_rows("cpu-fp32", now, base, DELTA), alpha=0.05, power=0.8,
                    has_baseline=True)
    compare = CompareRecord("HEAD", True, 0.05, result.tests, rows=tuple(result.rows))
    page = summary("cpu", compare, [], None, ["cpu-fp32"], ("REGRESSED",),
                   {"cpu-fp32": summarize("cpu-fp32", now, 0.36, BUSY, base)})
    row = next(line for line in page.splitlines() if line.startswith("| w "))
    assert "where (operators): +" in row and "`aten::mm` (p " in row
    regressions = page.split("## Regressions and failures")[1].split("##")[0]
    assert "where (operators)" in regressions
    assert "where (operators)" in table(compare.rows)


def test_in_lock_step_each_operator_is_tested_on_its_pairs():
    """Rounds that drift together (each pair ±20 % alike) hide a +6 % operator from a test of
    the two sides apart; its pairs show it."""
    import random

    from torchgate.core.records.schema import ModeTiming
    from torchgate.judge.timings import by_operator

    rng = random.Random(3)
    drift = [rng.uniform(0.8, 1.2) for _ in range(10)]

    def modes(scale: float) -> list[ModeTiming]:
        return [ModeTiming("OK", steady_s=(1e-3,), operator_s={
            "aten::mm": 5e-4 * scale * d * rng.uniform(0.995, 1.005),
            "aten::relu": 1e-4 * d * rng.uniform(0.995, 1.005)}) for d in drift]
    base, now = modes(1.0), modes(1.06)
    apart = {c.what: c.p for c in by_operator(base, now)}
    paired = {c.what: c.p for c in by_operator(base, now, paired=True)}
    assert apart["aten::mm"] > 0.05 and paired["aten::mm"] < 0.01
    assert paired["aten::relu"] > 0.05


def test_a_profiler_that_fails_leaves_the_mode_measured_and_says_why(monkeypatch):
    import torch

    from torchgate.core.config.targets import load_target
    from torchgate.measure import ops
    from torchgate.measure.worker import bench_mode

    from .jobs import job

    def broken(*args, **kwargs):
        raise RuntimeError("no profiler for this device")
    monkeypatch.setattr(ops, "operator_times", broken)
    target = "tests.count_workloads.chain"
    m = bench_mode(job(target, {"layers": 2}), load_target(target), torch.device("cpu"), "eager")
    assert m.status == "OK" and m.steady_s and m.operator_s == {}
    assert m.unmeasured["operator_s"] == ("the profiler failed: RuntimeError: no profiler for "
                                          "this device")
