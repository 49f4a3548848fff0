"""Host instructions per call (measure.callgrind): counted under valgrind in counts processes
per workload and arm after the first timings, each in a drawn layout (0.1-0.5 % apart for
the same code), tested like a timing against a prior spread (judge.counts): beyond its margin
(stats.delta.instructions, 0.5 %, or two layout SDs) REGRESSED or IMPROVED, within it
EQUIVALENT, between INCONCLUSIVE and counted again; counts taken another way NOT COMPARABLE,
a count the baseline had and this run lost never green."""
from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest

from torchgate.core import config
from torchgate.core.errors import UserError
from torchgate.core.metrics import BY_NAME
from torchgate.core.records.schema import BenchProcess, Counter, ModeTiming, WorkloadRun
from torchgate.core.vocabulary import UnitKey, Verdict
from torchgate.judge import counts
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish
from torchgate.launch import cells
from torchgate.launch.cells import measure_bench, not_counted
from torchgate.measure import callgrind
from torchgate.render.metrics import bench_metrics

from . import jobs
from .records import BUSY, DELTA, bench, process

COUNTER = Counter("callgrind", "3.19.0", "AVX2", ("--tool=callgrind",), 2, 1)


def counted(instructions: dict[str, int | None], counter: Counter = COUNTER, status="OK",
            error=None) -> BenchProcess:
    """A counts process: per mode its instructions a call (None: the mode failed there)."""
    return BenchProcess(status, error=error, counter=counter, modes={
        mode: ModeTiming("OK", instructions=n) if n is not None else
        ModeTiming("ERROR", error="RuntimeError: boom") for mode, n in instructions.items()})


def with_counts(*counts: BenchProcess, **extra):
    record = bench({"w": [process() for _ in range(4)]}, **extra)
    run = record.workloads["w"]
    return dataclasses.replace(record, workloads={"w": WorkloadRun(run.processes, run.spec,
                                                                   counts)})


def row(now, base, alpha=0.05):
    found = [r for r in bench_rows("c", now, base, DELTA, busy_share=BUSY)
             if r.metric == "instructions"]
    return finish(found, alpha=alpha, power=0.8).rows[0] if found else None


# ---- the test, with simulated counts whose truth is known ----------------------------------
# The spread of a count over drawn layouts, as measured with the shipped counts worker: SDs of
# 0.52 % at 66 k a call, 0.23 % at 640 k, 0.10 % at 11.4 M, which the prior's fit lies on
# (0.1 % + 1.1/√count) and the prior 1.3 times above; but 0.29 % at 5.35 M for 100 layers of
# 32, 1.5 times the prior. Drawn here at the fit for power, at the prior's own, 1.5 and 2
# times it for false alarms.
INSTRUCTIONS = BY_NAME["instructions"]
MEASURED = 1 / 1.3


def _counts(rng, n0: float, truth: float, k: int, noise: float) -> list[float]:
    sd = noise * counts.prior_spread(INSTRUCTIONS, n0)
    return [round(n0 * truth * math.exp(rng.gauss(0, sd))) for _ in range(k)]


def _check(rng, n0: float, truth: float, noise: float, most: int = 4) -> str:
    """One check as the launcher runs it: a counts process a side, and where the shipped
    rule leaves that undecided, counts processes up to `most` a side; its final verdict."""
    key = UnitKey("bench", "c", "w", "eager", "instructions")
    base, now = _counts(rng, n0, 1.0, 1, noise), _counts(rng, n0, truth, 1, noise)
    while True:
        d = counts.count_draft(key, INSTRUCTIONS, base, now, 0.005, most)
        verdict = finish([d], alpha=0.05, power=0.8).rows[0].verdict
        if verdict != Verdict.INCONCLUSIVE or len(base) >= most:
            return verdict
        base += _counts(rng, n0, 1.0, most - 1, noise)
        now += _counts(rng, n0, truth, most - 1, noise)


def _rates(rng, n0, truth, runs, noise=MEASURED) -> dict[str, float]:
    found = [_check(rng, n0, truth, noise) for _ in range(runs)]
    return {v: found.count(v) / runs for v in set(found)}


@pytest.mark.slow       # ~2.5 s a size: 6,800 simulated checks
@pytest.mark.parametrize("n0", [66_000, 93_000, 1_000_000, 11_400_000, 100_000_000])
def test_counts_keep_false_alarms_below_alpha_and_decide_one_percent_from_a_million(n0):
    """Checks as run (one counts process a side, up to 4 where undecided, each look at
    α/2), 2,000 A/A a noise: REGRESSED or IMPROVED in at most α (0.05) at the measured
    spread, the prior's and 1.5 times it, at most 2α at twice it; +1 % work REGRESSED in
    99 % of 400 from 1 M a call, ±5 % in every one of 200 from 93 k (98 % at 66 k)."""
    rng = random.Random(n0)
    for noise, most in ((MEASURED, 0.05), (1.0, 0.05), (1.5, 0.05), (2.0, 0.10)):
        same = _rates(rng, n0, 1.0, 2000, noise)
        alarms = same.get(Verdict.REGRESSED, 0) + same.get(Verdict.IMPROVED, 0)
        assert alarms <= most, (noise, same)
    if n0 >= 1_000_000:
        assert _rates(rng, n0, 1.01, 400).get(Verdict.REGRESSED, 0) >= 0.99
    least = 0.98 if n0 < 93_000 else 1.0
    assert _rates(rng, n0, 1.05, 200).get(Verdict.REGRESSED, 0) >= least
    assert _rates(rng, n0, 0.95, 200).get(Verdict.IMPROVED, 0) >= least


def test_a_count_is_tested_against_its_margin_and_says_how_it_was_counted():
    """One counts process a side at 1 M: +1 % is within what two layouts can differ by at
    the first look (INCONCLUSIVE, counted again), +5 % is REGRESSED; the row's delta is
    its margin, δ or 1.5 layout SDs of a count its size (0.9 % at 93 k)."""
    base = with_counts(counted({"eager": 1_000_000}))
    found = row(with_counts(counted({"eager": 1_010_000}),
                            settings={"instruction_processes": 4}), base)
    assert found.verdict == Verdict.INCONCLUSIVE and found.delta == 0.005
    assert found.note.startswith("1 and 1 counts processes, each in a layout of its own")
    assert row(with_counts(counted({"eager": 1_050_000})), base).verdict == Verdict.REGRESSED
    four = [counted({"eager": n}) for n in (1_000_000, 1_002_000, 998_500, 1_001_000)]
    more = [counted({"eager": round(n * 1.01)}) for n in (999_000, 1_001_500, 1_000_500,
                                                          998_000)]
    assert row(with_counts(*more), with_counts(*four)).verdict == Verdict.REGRESSED
    assert row(with_counts(*four[::-1]), with_counts(*four)).verdict == Verdict.EQUIVALENT
    small = row(with_counts(counted({"eager": 93_000})), with_counts(counted({"eager": 93_000})))
    assert small.delta == pytest.approx(1.5 * (0.0013 + 1.43 / 93_000 ** 0.5))


def test_one_recorded_count_against_four_is_tested_at_the_pooled_degrees_of_freedom():
    """A recorded baseline's one count against this run's four (only this side can count
    again): the pooled variance's 3 + 3 degrees of freedom, not Satterthwaite's 2.3 of an
    evenly split prior, which left a +1 % PR at 400 M a call INCONCLUSIVE at p 0.007."""
    base = [400_545_000]
    now = [404_554_424, 404_516_544, 404_538_000, 404_541_000]
    shift = counts.count_shift(INSTRUCTIONS, base, now)
    assert shift.df == pytest.approx(counts.PRIOR_DF + 3)
    found = row(with_counts(*[counted({"eager": n}) for n in now],
                            settings={"instruction_processes": 4}),
                with_counts(counted({"eager": base[0]})))
    assert found.verdict == Verdict.REGRESSED, found


def test_a_unit_that_spreads_more_than_the_prior_is_believed():
    """Four counts a side that spread 2 % (not a layout's 0.2 %): a +1 % mean is not
    REGRESSED; the unit's own spread outweighs the prior's six processes."""
    wide = [1.0, 1.02, 0.98, 1.01]
    base = with_counts(*[counted({"eager": round(1_000_000 * w)}) for w in wide])
    now = with_counts(*[counted({"eager": round(1_010_000 * w)}) for w in reversed(wide)])
    assert row(now, base).verdict == Verdict.INCONCLUSIVE


def test_one_count_of_the_same_inputs_on_both_sides_is_equivalent_outright():
    """A count shared by both arms, or carried from the reports: the same process on both
    sides, nothing to test."""
    shared = with_counts(counted({"eager": 66_000}))
    found = row(shared, shared)
    assert found.verdict == Verdict.EQUIVALENT and found.change is None
    assert found.note == "the same inputs on both sides: counted once"


def test_a_compile_that_does_more_work_is_regressed_beyond_its_own_band():
    """bench.instructions_compile: a compiled mode's first call (warm caches), margin 2 %."""
    def side(n):
        return with_counts(BenchProcess("OK", counter=COUNTER, modes={"compiled": ModeTiming(
            "OK", instructions=10**8, compile_instructions=n)}), modes=("compiled",))
    rows = {r.metric: r for r in finish(bench_rows(
        "c", side(5_300_000_000), side(5_000_000_000), DELTA, busy_share=BUSY),
        alpha=0.05, power=0.8).rows}
    assert rows["compile_instructions"].verdict == Verdict.REGRESSED
    assert rows["compile_instructions"].delta == 0.02
    assert rows["instructions"].verdict in (Verdict.EQUIVALENT, Verdict.INCONCLUSIVE)
    rows = {r.metric: r for r in finish(bench_rows(
        "c", side(5_050_000_000), side(5_000_000_000), DELTA, busy_share=BUSY),
        alpha=0.05, power=0.8).rows}
    assert rows["compile_instructions"].verdict == Verdict.EQUIVALENT     # +1 %: within 2 %


def test_counts_taken_another_way_are_not_comparable_and_say_what_differs():
    base = with_counts(counted({"eager": 1000}))
    other = dataclasses.replace(COUNTER, version="3.22.0", capability="DEFAULT")
    now = with_counts(counted({"eager": 2000}, other))
    found = row(now, base)
    assert found.verdict == Verdict.NOT_COMPARABLE
    assert found.note == ("counted another way: version 3.19.0 → 3.22.0; capability AVX2 → "
                          "DEFAULT (counts compare only with counts taken the same way)")


def test_a_compiled_count_taken_in_another_cache_state_is_not_comparable_and_eager_is():
    """Counts record the compile cache state each compiled mode was counted in; a side
    counted in another state is NOT COMPARABLE, saying so, and the eager count beside it is
    judged as usual."""
    def taken(state, instructions):
        counter = dataclasses.replace(COUNTER, settings=(
            *COUNTER.settings, f"compiled compile: {state}"))
        process = counted({"eager": 10**8, "compiled": instructions}, counter)
        return with_counts(process, modes=("eager", "compiled"))
    base = taken("loaded from the compile cache", 10**6)
    now = taken("compiled in this process", 1_015_000)      # the cache, not the code

    def rows(now, base):
        return {r.mode: r for r in finish(bench_rows("c", now, base, DELTA, busy_share=BUSY),
                                          alpha=0.05, power=0.8).rows
                if r.metric == "instructions"}
    found = rows(now, base)
    assert found["compiled"].verdict == Verdict.NOT_COMPARABLE
    assert found["compiled"].note == (
        "counted another way: settings compiled compile: compiled in this process, compiled "
        "compile: loaded from the compile cache (counts compare only with counts taken the "
        "same way)")
    assert found["eager"].change is not None        # tested, as usual
    assert found["eager"].verdict in (Verdict.EQUIVALENT, Verdict.INCONCLUSIVE)
    assert rows(taken("loaded from the compile cache", 1_100_000), base)[
        "compiled"].verdict == Verdict.REGRESSED


def test_a_counts_process_starts_its_stack_where_a_draw_says_whatever_its_paths():
    """Arguments and environment padded to one size, then moved by a drawn offset: a pid one
    digit wider, another arm's worktree or venv, one variable more leave the stack's start
    where the draw put it, and draws spread it over the window."""
    base = {"PATH": "/usr/bin", "TMPDIR": "/tmp/runs/999-abc"}
    sizes = set()
    for python, job, extra in (("/usr/bin/python3", "/tmp/runs/999-abc/job.json", {}),
                               ("/a/longer/venv/bin/python", "/tmp/runs/31337-abc/job.json",
                                {"ONE_MORE": "1"})):
        argv = [python, "-m", "torchgate.measure.worker", job]
        env = callgrind.drawn_layout(argv, {**base, **extra}, offset=48)
        strings, _ = callgrind._strings_and_pointers(argv, env)
        assert strings % 8 == 0                         # no rounding left to move it
        sizes.add(callgrind.stack_bytes(argv, env))
        assert callgrind.drawn_layout(argv, env, offset=48) == env  # again: the same
    assert sizes == {callgrind.LAYOUT_BYTES + 48}
    drawn = {callgrind.stack_bytes(["p"], callgrind.drawn_layout(["p"], base))
             for _ in range(50)}
    assert len(drawn) > 40 and all(
        0 <= b - callgrind.LAYOUT_BYTES < callgrind.LAYOUT_DRAWN and b % 16 == 0 for b in drawn)
    huge = {"BIG": "x" * 2 * callgrind.LAYOUT_BYTES}
    assert callgrind.drawn_layout(["p"], huge) == huge


def test_a_count_lost_is_never_green():
    """A baseline that counted a unit: this run's counts process failing is FAILED (the gate
    fails), not counting here at all is NOT COMPARABLE with the record's reason; a first
    count is NEW; neither side counting gives no row."""
    base = with_counts(counted({"eager": 1000}))
    failed = with_counts(counted({"eager": None}))
    assert (row(failed, base).verdict, row(failed, base).note) == (
        Verdict.FAILED, "counted in the baseline; the counts process: ERROR: RuntimeError: boom")
    crashed = with_counts(counted({}, status="CRASHED", error="worker killed by SIGSEGV"))
    assert row(crashed, base).verdict == Verdict.FAILED
    first = [r for r in bench_rows("c", crashed, with_counts(), DELTA, busy_share=BUSY)
             if r.metric.endswith("instructions")]
    assert [(r.metric, r.verdict, r.note) for r in first] == [
        ("instructions", Verdict.NOT_COMPARABLE,
         "not counted: the counts process: CRASHED: worker killed by SIGSEGV")]
    missing = with_counts(instructions="not counted: valgrind is not installed: install it")
    assert (row(missing, base).verdict, row(missing, base).note) == (
        Verdict.NOT_COMPARABLE, "counted in the baseline, not in this run: not counted: "
                                "valgrind is not installed: install it")
    assert row(base, missing).verdict == Verdict.NEW
    assert row(missing, missing) is None


def test_the_summary_and_numbers_json_carry_the_count_and_time_says_its_part():
    now = with_counts(counted({"eager": 123_456}))
    summary = summarize("c", now, None, BUSY)
    assert summary.unit("w", "eager").value("instructions") == 123_456
    assert bench_metrics(summary)["w"]["eager"]["instructions"] == 123_456


# ---- when counts processes run ---------------------------------------------------------------

RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"a": {"_target_": "x.a"}, "b": {"_target_": "x.b"}},
       "matrix": {"modes": ["eager", "compiled"]},
       "bench": {"processes": 3, "adaptive_budget_s": 0, "cold_compile_processes": 1,
                 "instructions": "always"}}


def test_one_counts_process_per_workload_after_every_timing_in_a_cache_of_its_own(monkeypatch):
    monkeypatch.setattr(cells.callgrind, "missing", lambda: None)
    cfg = config.parse(RAW)
    seen = []

    def worker(job, timeout_s, python=None, fresh_compile_cache=True):
        seen.append((job.kind, job.workload.name, job.modes, fresh_compile_cache,
                     job.compile_cache, timeout_s))
        if job.kind == "instructions":
            return {"status": "OK", "counter": {"tool": "callgrind", "calls": 2},
                    "modes": {m: {"status": "OK", "instructions": 1000} for m in job.modes}}
        broken = job.workload.name == "b"       # b's compiled mode fails: not counted
        return {"status": "OK", "modes": {
            "eager": {"status": "OK", "steady_s": [1e-3], "first_call_s": 0.1},
            "compiled": {"status": "ERROR", "error": "boom"} if broken else
            {"status": "OK", "steady_s": [1e-3], "first_call_s": 1.0}}}
    record = measure_bench(cfg, cfg.cells()[0], run=worker)
    kinds = [k for k, *_ in seen]
    assert kinds == ["bench"] * 6 + ["instructions"] * 2      # after every timed process
    counts = {name: (modes, fresh, cache, limit)
              for kind, name, modes, fresh, cache, limit in seen if kind == "instructions"}
    # Not the timed processes' caches (native kernels), nor one kept across runs: an empty
    # one of its own, the one state a compiled mode is counted in.
    assert counts["a"] == (("eager", "compiled"), True, None, 900.0)
    assert counts["b"][0] == ("eager",)
    assert record.instructions is None
    assert record.workloads["a"].counts[0].modes["compiled"].instructions == 1000


def test_an_undecided_count_is_counted_again_up_to_its_processes_each_in_a_drawn_layout(
        monkeypatch):
    """The interim look names the workloads whose count is undecided: each gets counts
    processes up to bench.instruction_processes, appended to its first; the others keep
    theirs. The judge then tests all of them."""
    monkeypatch.setattr(cells.callgrind, "missing", lambda: None)
    cfg = config.parse({**RAW, "bench": {**RAW["bench"], "instruction_processes": 3}})
    counted_ = []

    def worker(job, timeout_s, python=None, fresh_compile_cache=True):
        if job.kind == "instructions":
            counted_.append(job.workload.name)
            return {"status": "OK", "counter": {"tool": "callgrind", "calls": 2},
                    "modes": {m: {"status": "OK", "instructions": 1000 + len(counted_)}
                              for m in job.modes}}
        return {"status": "OK", "modes": {
            m: {"status": "OK", "steady_s": [1e-3], "first_call_s": 0.1} for m in job.modes}}
    looked = []

    def undecided(record):
        looked.append({n: len(w.counts) for n, w in record.workloads.items()})
        return ["b"]
    record = measure_bench(cfg, cfg.cells()[0], run=worker, undecided_counts=undecided)
    assert looked == [{"a": 1, "b": 1}]                 # one look, after the first counts
    assert sorted(counted_) == ["a", "b", "b", "b"]
    assert len(record.workloads["a"].counts) == 1 and len(record.workloads["b"].counts) == 3
    assert len({p.modes["eager"].instructions for p in record.workloads["b"].counts}) == 3


def test_the_interim_look_names_the_workloads_whose_count_is_undecided():
    from torchgate.judge.adaptive import undecided_counts
    base = with_counts(counted({"eager": 1_000_000}))
    undecided = with_counts(counted({"eager": 1_010_000}), settings={"instruction_processes": 4})
    decided = with_counts(counted({"eager": 1_100_000}), settings={"instruction_processes": 4})
    for now, named in ((undecided, ["w"]), (decided, []), (base, [])):
        result = finish(bench_rows("c", now, base, DELTA, busy_share=BUSY), alpha=0.05,
                        power=0.8)
        assert undecided_counts(result) == named


def test_counts_come_before_the_adaptive_rounds_which_they_spare_where_they_decide(
        monkeypatch):
    """A unit 4 % slower in time, too noisy to tell in 3 processes: with its host
    instructions +5 % (beyond the 1 % band) its counts decide it and no round is added; with
    the same instructions, the rounds go to its time."""
    from torchgate.core.records.inputs import RecordPair, RunInputs
    from torchgate.judge.adaptive import pending_units
    from torchgate.judge.run import compare_run
    monkeypatch.setattr(cells.callgrind, "missing", lambda: None)
    cfg = config.parse({**RAW, "workload": {"a": {"_target_": "x.a"}},
                        "matrix": {"modes": ["eager"]}, "stats": {"run_spread": 0.0},
                        "bench": {**RAW["bench"], "adaptive_budget_s": 600, "max_looks": 2,
                                  "max_processes": 12}})
    cell = cfg.cells()[0]

    def worker(slower, instructions, seen):
        rng = random.Random(1)

        def run(job, timeout_s, python=None, fresh_compile_cache=True):
            seen.append(job.kind)
            if job.kind == "instructions":
                return {"status": "OK", "counter": dataclasses.asdict(COUNTER), "modes": {
                    m: {"status": "OK", "instructions": instructions} for m in job.modes}}
            level = slower * rng.lognormvariate(0, 0.05) * 1e-3
            return {"status": "OK", "sentinel": {"python_loop_s": 0.02}, "modes": {
                m: {"status": "OK", "steady_s": [level] * 3, "first_call_s": 0.1}
                for m in job.modes}}
        return run
    base = measure_bench(cfg, cell, run=worker(1.0, 10**6, []))

    def pending(record):
        return pending_units(compare_run(cfg, RunInputs("HEAD", "0" * 40, {
            ("bench", cell.name): RecordPair(record, base)})), cfg.bench.max_processes)
    for instructions, rounds in ((1_050_000, 0), (10**6, True)):
        seen = []
        now = measure_bench(cfg, cell, run=worker(1.04, instructions, seen), pending=pending)
        assert seen[:4] == ["bench"] * 3 + ["instructions"], seen
        assert bool(now.adaptive_processes) == bool(rounds), (instructions, seen)


def test_without_valgrind_auto_says_why_in_one_line_and_always_stops_before_measuring(
        monkeypatch):
    monkeypatch.setattr(callgrind.shutil, "which", lambda name: None)
    why = callgrind.missing()
    assert why.startswith("valgrind is not installed: install valgrind (Debian, Ubuntu: "
                          "`sudo apt-get install valgrind`") and "\n" not in why
    auto = config.parse({**RAW, "bench": {**RAW["bench"], "instructions": "auto"}})
    assert not_counted(auto, auto.cells()[0]) == f"not counted: {why}"
    cfg = config.parse(RAW)
    started = []
    with pytest.raises(UserError, match="bench.instructions is always, but valgrind is not "
                                        "installed"):
        measure_bench(cfg, cfg.cells()[0], run=lambda *a, **k: started.append(a))
    assert started == []
    never = config.parse({**RAW, "bench": {**RAW["bench"], "instructions": "never"}})
    assert not_counted(never, never.cells()[0]) == "not counted (bench.instructions=never)"
    gpu = config.parse({**RAW, "device": {"cuda": {"type": "cuda"}}})
    assert not_counted(gpu, gpu.cells()[0]).startswith("counted on CPU cells only")


# ---- callgrind itself ------------------------------------------------------------------------

def test_a_dump_gives_its_totals_and_a_file_that_is_none_says_so(tmp_path):
    dump = tmp_path / "callgrind.1.1"
    dump.write_text("# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\ncmd: python\n"
                    "events: Ir\nsummary: 187831\n\nfl=(1) x.c\nfn=(1) f\n0 12\n\ntotals: 187831\n")
    assert callgrind.totals(dump) == 187831
    (tmp_path / "bad").write_text("nothing here")
    with pytest.raises(ValueError, match="bad is not a callgrind dump"):
        callgrind.totals(tmp_path / "bad")


def test_natively_a_client_request_is_a_no_op_and_the_command_pins_what_counts_depend_on():
    client = callgrind.Client()
    assert client.on_valgrind is False
    client.start_instrumentation()
    client.stop_instrumentation()
    argv, env = callgrind.command(["python", "-m", "w"], Path("/tmp/x/callgrind"))
    assert argv[-3:] == ["python", "-m", "w"]
    run = argv[argv.index("valgrind"):]
    assert set(callgrind.options_for_machine()) <= set(run)
    assert "--callgrind-out-file=/tmp/x/callgrind.%p" in run and "--cache-sim=no" in run
    assert env["PYTHONHASHSEED"] == "0" and env["OMP_NUM_THREADS"] == "1"
    assert env[callgrind.DUMPS] == "/tmp/x/callgrind"
    if callgrind.client_requests_supported():      # x86-64: AVX2, the widest valgrind runs
        assert env["ATEN_CPU_CAPABILITY"] == "avx2"
        assert env["TORCHINDUCTOR_CPP_MARCH"] == "x86-64-v3"    # not native: AVX-512 SIGILLs
        # no fused multiply-adds, each lane a helper call under valgrind: MKL's SSE4.2
        assert env["MKL_ENABLE_INSTRUCTIONS"] == "SSE4_2"
        assert env["ONEDNN_MAX_CPU_ISA"] == "SSE41"


@pytest.mark.slow       # a compile, cold, and its load from the cache
def test_a_compiled_mode_is_counted_loaded_from_the_cache_whatever_the_cache_held(
        tmp_path, monkeypatch):
    """An empty compile cache: the counts process compiles, resets and counts the graph it
    loads from the cache, the state a process that found the cache full counts in."""
    import torch

    from torchgate.measure import worker
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(worker, "_counted", lambda step, calls, client, dumps: (
        [step() for _ in range(calls)], 1000 * calls)[1])
    chain = jobs.job("tests.count_workloads.chain", {"layers": 3}, name="chain",
                     kind="instructions", modes=("compiled",))
    found = worker.count_instructions(chain, worker.workload_factory(chain.workload.target),
                                      torch.device("cpu"), "compiled", None, None)
    assert found == (2000, None, "compiled in this process, then loaded from the compile cache")
    eager = worker.count_instructions(chain, worker.workload_factory(chain.workload.target),
                                      torch.device("cpu"), "eager", None, None)
    assert eager == (2000, None, None)


def test_the_history_finds_where_a_count_stepped_and_shows_it_as_a_count():
    """Eight committed runs whose host instructions rose 5 % at the fifth: the history's series
    of counts has its lasting shift there, shown as counts, not as seconds."""
    from torchgate.core.config.settings import HistorySettings
    from torchgate.judge.trends import Run, series
    from torchgate.render.history import history

    def run(i, n):
        rec = with_counts(counted({"eager": n}))
        return Run(f"{i:040x}", "2026-01-01", rec, None)
    counts = [4_000_000 + d for d in (0, 12, -7, 3)] + [4_200_000 + d for d in (5, -9, 0, 4)]
    found = [s for s in series({"c": [run(i, n) for i, n in enumerate(counts)]},
                               HistorySettings(), BUSY, DELTA) if s.metric == "instructions"]
    [trend] = found
    assert [s.index for s in trend.shifts] == [4] and 1.04 < trend.shifts[0].ratio < 1.06
    page = history(found, ["c"], HistorySettings())
    [shift] = [line for line in page.splitlines() if "▲" in line and "→" in line]
    assert [c.strip() for c in shift.split("|")[3:8]] == [
        "eager", "Host instructions per call", "`0000000000`", "2026-01-01", "▲ +5.0 % more"]
    assert "4,000,003 → 4,200,004" in shift
    assert "### Host instructions per call (callgrind)" in page


def test_the_migration_report_shows_what_a_move_changes_in_the_work_of_a_call():
    from torchgate.judge.migration import SideInput, migrate
    from torchgate.render.migration import page

    def side(label, n, ops):
        rec = with_counts(counted({"eager": n}))
        run = rec.workloads["w"]
        timed = tuple(dataclasses.replace(p, modes={"eager": dataclasses.replace(
            p.modes["eager"], aten_ops=ops)}) for p in run.processes)
        rec = dataclasses.replace(rec, workloads={"w": dataclasses.replace(run, processes=timed)})
        return SideInput(label, label, "c", "this run", rec)
    found = migrate("m", side("here", 4_000_000, 40), side("there", 3_000_000, 40),
                    modes=("eager",), same_run=False, alpha=0.05, busy_share=BUSY,
                    run_spread=0.03)
    [mode] = found.workloads[0].modes
    assert mode.source.work == {"aten_ops": 40, "instructions": 4_000_000}
    assert ("- w eager: aten ops per call 40 → 40; host instructions per call 4,000,000 → "
            "3,000,000 (−25.0 %)") in page(found, None)


def test_the_summary_table_shows_a_calls_host_instructions_with_their_change():
    from torchgate.judge.verdicts import finish
    from torchgate.render.numbers import cell_table
    base, now = with_counts(counted({"eager": 1_000_000})), with_counts(counted({"eager": 1_052_000}))
    rows = list(finish(bench_rows("c", now, base, DELTA, busy_share=BUSY), alpha=0.05,
                       power=0.8).rows)
    table = cell_table(summarize("c", now, None, BUSY), rows)
    head, _, line = table.splitlines()[:3]
    cells = dict(zip([c.strip() for c in head.split("|")], [c.strip() for c in line.split("|")]))
    assert cells["host instructions (change)"] == "1,052,000 (+5.2 % [+3.9, +6.5])"
    assert "**REGRESSED** host instructions per call +5.2 %" in cells["also"]
