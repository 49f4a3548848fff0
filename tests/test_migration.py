"""Is it worth moving? A declared pair of cells compared with each other: the ratio intervals
cover the truth at their rate (sides in one run, and sides measured apart with each machine's
run-to-run variance), the break-even price is the hand arithmetic, a workload that lacks a
kernel on the target "does not run there", another machine's committed history widens the
intervals, and no pair declared is no stage."""
import dataclasses
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from torchgate import migration as stage
from torchgate.compose import compose
from torchgate.core import config
from torchgate.core.errors import UserError
from torchgate.core.records import write_record
from torchgate.core.records.migration import Ratio
from torchgate.core.records.schema import (
    EnvRecord,
    ModeNumerics,
    NumericsRecord,
    RecordedWorkload,
    Tolerance,
    WorkloadRun,
)
from torchgate.judge.migration import PER_ITEM, SideInput, cost, migrate, ratio
from torchgate.judge.moderation import run_spreads
from torchgate.render.migration import figure, informative, page, picture_rows, throughput

from .projects import MACHINE, REPORTS, git, init_repo
from .records import bench, process

ALPHA = 0.05
HOW = dict(alpha=ALPHA, busy_share=1.0, run_spread=0.03)


def side(label, record, numerics=None, price=0.1, **extra) -> SideInput:
    machine, _, cell = label.rpartition("/")
    return SideInput(label, machine or MACHINE, cell, "this run", record, numerics, None, price,
                     **extra)


def cell_record(steady: dict[str, float], n=4, seed=0, **extra):
    rng = random.Random(seed)
    return bench({w: [process(steady=s, rng=rng, **extra) for _ in range(n)]
                  for w, s in steady.items()})


# ---- configuration ---------------------------------------------------------------------------

RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "matrix": {"modes": ["eager"]},
       "workload": {"m": {"_target_": "torchgate.workloads.matmul_relu"}}}


def test_a_pair_is_two_sides_and_a_bad_one_is_one_line():
    cfg = config.parse({**RAW, "migration": {"pairs": {
        "to_b": {"from": "cpu-fp32", "to": "box-b/cpu-fp32", "modes": ["eager"]}}}})
    pair = cfg.migration.pairs["to_b"]
    assert (pair.source.cell, pair.source.machine) == ("cpu-fp32", None)
    assert (pair.target.cell, pair.target.machine, pair.modes) == ("cpu-fp32", "box-b",
                                                                   ("eager",))
    assert config.parse(RAW).migration.pairs == {}
    for pairs, message in (
            ({"x": {"from": "cpu-fp32"}}, "migration.pairs.x.to is missing"),
            ({"x": {"from": "cpu", "to": "cpu-bf16"}}, "names the cell 'cpu'"),
            ({"x": {"from": "a/b/cpu-fp32", "to": "cpu-bf16"}}, "must be a cell, `"),
            ({"x": {"from": "cpu-fp32", "to": "cpu-bf16", "mode": ["eager"]}},
             "unknown key migration.pairs.x.mode; valid keys: from, to, modes"),
            ({"x": {"from": "cpu-fp32", "to": "cpu-fp32"}}, "to itself")):
        with pytest.raises(UserError, match=message):
            config.parse({**RAW, "migration": {"pairs": pairs}})


# ---- the statistics ----------------------------------------------------------------------------

def _coverage(apart: bool, trials=300, units=6, n=4, history=5, sigma=0.02, tau=0.03,
              truth=0.7, seed=1):
    """Share of ratio intervals that hold the true ratio, with and without the run-to-run
    variance; each side's runs (this one and its `history` committed ones) are offset by
    N(0, tau) (apart) or share one offset (one run)."""
    rng = random.Random(seed)

    def run(offset):
        return [math.exp(offset + rng.gauss(0, sigma)) for _ in range(n)]
    held = {"with": 0, "without": 0}
    total = 0
    for _ in range(trials):
        spreads = []
        for _side in range(2):      # each machine's history: units x runs
            past = {(f"w{u}", "eager", "steady_s"): [run(rng.gauss(0, tau)) for _ in
                                                     range(history)] for u in range(units)}
            spreads.append(run_spreads(past, 0.03))
        for u in range(units):
            shared = rng.gauss(0, tau)
            a = run(shared if not apart else rng.gauss(0, tau))
            b = [v * truth for v in run(shared if not apart else rng.gauss(0, tau))]
            key = (f"w{u}", "eager", "steady_s")
            for name, runs in (("with", [s[key] for s in spreads] if apart else []),
                               ("without", [])):
                r = ratio(PER_ITEM, a, b, runs, ALPHA)
                held[name] += r.low <= truth <= r.high
            total += 1
    return {k: v / total for k, v in held.items()}


def test_the_ratio_interval_covers_the_truth_at_its_rate():
    """Known truth: the target 0.7 of the source's time per item. Sides in one run share
    their run's offset: Welch's interval alone holds. Sides measured apart differ by both
    runs' offsets: with each machine's run-to-run variance from its history (5 runs) the
    interval holds at its rate, without it it falls far short."""
    one_run = _coverage(apart=False)
    assert 0.92 <= one_run["without"] <= 0.98, one_run
    apart = _coverage(apart=True)
    assert 0.92 <= apart["with"] <= 0.99, apart
    assert apart["without"] < 0.75, apart


def test_the_break_even_price_is_the_hand_arithmetic():
    per_item = Ratio(PER_ITEM, 2e-6, 1e-6, ratio=0.5, low=0.4, high=0.625)
    c = cost(0.10, 0.25, per_item)
    # $ per million items: $0.10/h / 3600 s × 1e6 items × 2 µs per item
    assert c.source_usd_per_million == pytest.approx(0.10 / 3600 * 1e6 * 2e-6)
    assert c.target_usd_per_million == pytest.approx(0.25 / 3600 * 1e6 * 1e-6)
    # break-even: 0.10 × 2 (twice the throughput) = $0.20/h; interval 0.10 / [0.625, 0.4]
    assert (c.break_even, c.break_even_low, c.break_even_high) == pytest.approx((0.2, 0.16, 0.25))
    # cost per item: 2.5 × 0.5 = 1.25, [2.5 × 0.4, 2.5 × 0.625]
    assert (c.ratio, c.low, c.high) == pytest.approx((1.25, 1.0, 1.5625))
    assert c.target_usd_per_million / c.source_usd_per_million == pytest.approx(1.25)


def test_a_migration_in_one_run_compares_each_workload():
    source = side("cpu-fp32", cell_record({"mm": 2e-3, "mlp": 1e-3}), price=0.10)
    target = side("cpu-bf16", cell_record({"mm": 1e-3, "mlp": 1e-3}, seed=1), price=0.25)
    record = migrate("fp32_to_bf16", source, target, same_run=True, modes=(), **HOW)
    mm = {w.workload: w for w in record.workloads}["mm"].modes[0]
    per_item = mm.timing(PER_ITEM)
    assert per_item.low < 0.5 < per_item.high and per_item.widened is None
    assert per_item.source == pytest.approx(2e-3, rel=0.02)
    assert mm.cost.break_even == pytest.approx(0.10 / per_item.ratio)
    text = page(record, "../pictures/x.png")
    assert "- **mm**: runs; eager 2.00× [" in text and "cheaper below $0.200/h" in text
    assert "cost per item +2" in text      # 2.5 × 0.5: +25 %, within its interval
    assert "no run-to-run variance added" in text
    assert figure(record)[:4] == b"\x89PNG"


NO_KERNEL = ("NotImplementedError: operator aten::_transformer_encoder_layer_fwd has no kernel "
             "for the tgaccel backend (it has kernels for CPU only): the extension does not "
             "support this device, or its tgaccel kernel was not registered")


def test_a_workload_without_a_kernel_on_the_target_does_not_run_there():
    source = side("cpu-fp32", cell_record({"mm": 1e-3, "block": 2e-3}))
    rng = random.Random(3)
    failed = bench({"mm": [process(steady=1e-3, rng=rng) for _ in range(4)],
                    "block": [process(status="ERROR", error=NO_KERNEL) for _ in range(4)]})
    target = side("trn-fp32", failed)
    record = migrate("to_trn", source, target, same_run=True, modes=(), **HOW)
    found = {w.workload: w for w in record.workloads}
    assert found["block"].verdict == "does not run there"
    assert found["block"].reason == ("aten::_transformer_encoder_layer_fwd has no kernel for "
                                     "the device (tgaccel)")
    assert found["mm"].verdict == "runs" and found["mm"].modes[0].timing(PER_ITEM).tested
    text = page(record, None)
    assert ("- **block**: does not run there: aten::_transformer_encoder_layer_fwd has no "
            "kernel for the device (tgaccel)") in text
    assert "- **mm**: runs; eager 1.00× [" in text or "- **mm**: runs; eager 0.99" in text \
        or "- **mm**: runs; eager 1.01" in text


def test_numerics_side_by_side_and_the_targets_tolerance():
    def numerics(error, status="PASS", tol=1e-5):
        return NumericsRecord("c", "OK", workloads={"mm": {"eager": ModeNumerics(
            status, ("out rel. L2 error 3.00e-02 > tolerance 2e-02",) if status != "PASS"
            else (), rel_l2={"out": error})}}, tolerance=Tolerance(tol, 0.99, 2.0))
    source = side("cpu-fp32", cell_record({"mm": 1e-3}), numerics(2e-7))
    target = side("cpu-bf16", cell_record({"mm": 1e-3}, seed=2), numerics(3e-2, "FAIL", 2e-2))
    w = migrate("x", source, target, same_run=True, modes=(), **HOW).workloads[0]
    m = w.modes[0]
    assert (m.source.rel_l2, m.target.rel_l2, m.target.tolerance) == (2e-7, 3e-2, 2e-2)
    assert m.error_ratio == pytest.approx(1.5e5)
    check = {c.item: c for c in w.checklist}["numerics within the target's tolerances"]
    assert check.mark == "✗" and "eager: out rel. L2 error 3.00e-02 > tolerance 2e-02" in \
        check.detail


def test_each_side_is_compared_at_its_own_recommended_sweep_point():
    """Each side's sweep recommends its own batch (the summary's rule, judge.sweeps); the
    migration compares the two recommended points and names them."""
    def swept(times: dict[int, float], seed):
        rng = random.Random(seed)
        return _as_sweep(bench({f"mlp[batch={b}]": [process(steady=t, rng=rng)
                                                     for _ in range(4)]
                                for b, t in times.items()}))
    cfg = config.parse(RAW)
    source = side("box-a/cpu-fp32", swept({16: 1e-3, 64: 3e-3}, 0))
    target = side("box-b/cpu-fp32", swept({16: 2e-3, 64: 1e-3}, 1))
    source, target = (dataclasses.replace(s, points=stage.points(s, cfg))
                      for s in (source, target))
    assert source.points == {("mlp", "eager"): "mlp[batch=16]"}
    assert target.points == {("mlp", "eager"): "mlp[batch=64]"}
    w = migrate("x", source, target, same_run=True, modes=(), **HOW).workloads[0]
    assert w.workload == "mlp" and w.retuned == "eager: batch=16 → batch=64"
    m = w.modes[0]
    assert (m.source.unit, m.target.unit) == ("mlp[batch=16]", "mlp[batch=64]")
    assert m.timing(PER_ITEM).ratio == pytest.approx(1.0, rel=0.02)
    assert {c.item: c.mark for c in w.checklist}["batch re-tuned"] == "✓"
    assert "## Re-tuned" in page(migrate("x", source, target, same_run=True, modes=(), **HOW),
                                 None)


def _as_sweep(record):
    """The record's units as points of one sweep of `mlp` (their items: 1 per call)."""
    runs = {}
    for name, run in record.workloads.items():
        batch = int(name.split("=")[1].rstrip("]"))
        runs[name] = WorkloadRun(run.processes, RecordedWorkload(
            name, "t", {"batch": batch}, family="mlp", point=(("batch", batch),)))
    return dataclasses.replace(record, workloads=runs)


# ---- machines: another machine's committed records and history -------------------------------

ENV = {"env": {"hardware": {"cpu_model": "Some CPU", "gpu_names": []},
               "torch": {"version": "2.13.0", "num_threads": 2}}}


def _commit_runs(repo: Path, machine: str, level: float, runs: int, tau: float, seed: int):
    rng = random.Random(seed)
    reports = repo / "reports" / machine
    (reports / "env").mkdir(parents=True, exist_ok=True)
    (reports / "env" / "env.json").write_text(json.dumps({"schema_version": 2, "kind": "env",
                                                          **ENV}))
    for i in range(runs):
        offset = math.exp(rng.gauss(0, tau))
        record = cell_record({"mm": level * offset}, seed=rng.randrange(10 ** 6))
        record = dataclasses.replace(record, cell="cpu-fp32",
                                     device={"price_per_hour": 0.1})
        write_record(reports / "bench" / "cpu-fp32.json", record)
        git("add", "-A", cwd=repo)
        git("commit", "-qm", f"{machine} run {i}", cwd=repo)


def _params(repo: Path, pairs: dict) -> Path:
    path = repo / "params.yaml"
    path.write_text(yaml.safe_dump({**RAW, "machine": {"name": MACHINE},
                                    "migration": {"pairs": pairs}}))
    return path


def _fails(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        stage.main(argv)
    return capsys.readouterr().err


def test_two_machines_histories_widen_the_interval(tmp_path, monkeypatch, capsys):
    repo = init_repo(tmp_path)
    monkeypatch.chdir(repo)
    _commit_runs(repo, "box-a", 1e-3, 6, 0.04, 1)
    _commit_runs(repo, "box-b", 0.5e-3, 6, 0.04, 2)
    params = _params(repo, {"a_to_b": {"from": "box-a/cpu-fp32", "to": "box-b/cpu-fp32"}})
    stage.main(["--pair", "a_to_b", "--params", str(params)])
    record = json.loads((repo / REPORTS / "migration" / "a_to_b.json").read_text())
    assert record["same_run"] is False
    assert record["source"]["where"].startswith("committed at ")
    assert "history of 6 runs" in record["source"]["run_spread"]
    per_item = record["workloads"][0]["modes"][0]["timings"][0]
    assert per_item["metric"] == PER_ITEM and per_item["widened"] > 1.5
    assert per_item["se_widened"] > 1.5
    text = (repo / REPORTS / "migration" / "a_to_b.md").read_text()
    assert "The sides were measured apart" in text and "it made the steady-state standard " \
        "errors ×" in text
    assert (repo / REPORTS / "pictures" / "migration-a_to_b" / "throughput.png").exists()

    params = _params(repo, {"x": {"from": "box-a/cpu-fp32", "to": "box-c/cpu-fp32"}})
    assert "machine 'box-c' has no committed cell 'cpu-fp32' at HEAD; committed machines: " \
        "box-a, box-b" in _fails(["--pair", "x", "--params", str(params)], capsys)
    params = _params(repo, {"x": {"from": "box-a/cpu-bf16", "to": "box-b/cpu-fp32"}})
    assert "machine 'box-a' has no committed cell 'cpu-bf16' at HEAD; its cells: cpu-fp32" \
        in _fails(["--pair", "x", "--params", str(params)], capsys)
    params = _params(repo, {"x": {"from": "cpu-bf16", "to": "box-b/cpu-fp32"}})
    assert "names the cell 'cpu-bf16', which this run does not measure; this run's cells: " \
        "cpu-fp32" in _fails(["--pair", "x", "--params", str(params)], capsys)


# ---- the pipeline: no pair, no stage ------------------------------------------------------------

def _stages(project: Path) -> set[str]:
    run = subprocess.run([sys.executable, "-m", "dvc", "stage", "list", "--name-only"],
                         cwd=project, capture_output=True, text=True, check=True)
    return set(run.stdout.split())


def test_no_pair_declared_is_no_stage(project):
    compose(project / "params.yaml", ["matrix=smoke"], conf=project / "conf")
    assert not any(s.startswith("migration") for s in _stages(project))
    compose(project / "params.yaml", ["matrix=smoke", "precision=[fp32,bf16]",
                                      "+migration.pairs.fp32_to_bf16={from: cpu-fp32, "
                                      "to: cpu-bf16}"], conf=project / "conf")
    assert "migration@fp32_to_bf16" in _stages(project)


@pytest.mark.slow     # real worker processes on the stand-in accelerator
def test_the_stand_in_accelerator_without_one_kernel(monkeypatch):
    """cpu -> tgaccel, with the encoder layer's fused op left without a kernel there: that
    workload does not run there, the matmul is compared."""
    from torchgate.core.config import DeviceSpec, PrecisionSpec
    from torchgate.core.config.settings import WorkloadSpec
    from torchgate.core.records.job import Job, Timing
    from torchgate.core.records.schema import BenchProcess
    from torchgate.core.typed import from_data
    from torchgate.launch.local import run_worker

    monkeypatch.setenv("TGACCEL_NO_KERNEL", "aten::_transformer_encoder_layer_fwd")
    specs = (WorkloadSpec("matmul_relu", "torchgate.workloads.matmul_relu", {"size": 32}),
             WorkloadSpec("transformer_block", "torchgate.workloads.transformer_block",
                          {"batch": 2, "seq": 8, "width": 16, "heads": 2}))

    def measured(device: DeviceSpec):
        found = {}
        for workload in specs:
            job = Job("bench", 0, device, PrecisionSpec("fp32", "float32"), (workload,),
                      ("eager",), Timing(3, 0.002, 0.01, 3, 1.0))
            found[workload.name] = [from_data(BenchProcess, run_worker(job, timeout_s=120),
                                              "result") for _ in range(2)]
        return bench(found)
    source = side("cpu-fp32", measured(DeviceSpec("cpu", "cpu")))
    target = side("trn-fp32", measured(DeviceSpec("trn", "tgaccel",
                                                  modules=("tests.accel_standin",))))
    record = migrate("to_trn", source, target, same_run=True, modes=(), **HOW)
    found = {w.workload: w for w in record.workloads}
    assert found["transformer_block"].verdict == "does not run there"
    assert found["transformer_block"].reason == (
        "aten::_transformer_encoder_layer_fwd has no kernel for the device (tgaccel)")
    assert found["matmul_relu"].verdict == "runs"
    assert found["matmul_relu"].modes[0].timing(PER_ITEM).tested
    # the picture keeps the workload that does not run there, saying so on its row
    assert [(name, why) for name, _, _, why in picture_rows(record)] == [
        ("matmul_relu · eager", None), ("transformer_block · eager", "does not run there")]
    assert figure(record)[:4] == b"\x89PNG"


def test_a_busy_machine_says_what_it_left_out_and_a_wide_interval_decides_nothing():
    """The busy rule dropped every target process: the page says so and what to do, not
    "fewer than 2 processes"; the checklist does not call a measured compile "not measured"
    without the reason, and no lock is no pin."""
    source = side("cpu-fp32", cell_record({"mm": 2e-3}))
    busy = cell_record({"mm": 1e-3}, seed=1, busy=0.9)
    target = dataclasses.replace(side("cpu-bf16", busy),
                                 env=EnvRecord({"torch": {"version": "2.13.0+cpu"}}))
    record = migrate("fp32_to_bf16", source, target, same_run=True, modes=(),
                     alpha=ALPHA, busy_share=0.25, run_spread=0.03)
    text = page(record, "../pictures/x.png")
    assert ("eager runs, throughput not tested (0 processes kept on the target: 4 of 4 "
            "processes timed while other programs took more than compare.busy_share of the "
            "CPU: left out; measure again on a quiet machine)") in text, text
    assert "fewer than 2 processes a side" not in text
    assert "not pinned: no lock declared (`torchgate lock` writes one)" in text
    assert informative(0.5, 2.0) and not informative(8.05e-05, 68598)
    wide = Ratio("per_item_s", 1e-3, 1e-3, 1.0, 8.05e-05, 68598, 2, 2)
    assert "decide nothing" in throughput(wide) and "[" not in throughput(wide)


def test_one_reason_for_both_sides_and_both_modes_is_said_once():
    def both_modes(record):
        workloads = {w: dataclasses.replace(run, processes=tuple(
            dataclasses.replace(p, modes={"eager": p.modes["eager"],
                                          "compiled": p.modes["eager"]})
            for p in run.processes)) for w, run in record.workloads.items()}
        return dataclasses.replace(record, modes=("eager", "compiled"), workloads=workloads)
    source = side("cpu-fp32", both_modes(cell_record({"mm": 2e-3}, busy=0.9)))
    target = side("cpu-bf16", both_modes(cell_record({"mm": 1e-3}, seed=1, busy=0.9)))
    record = migrate("fp32_to_bf16", source, target, same_run=True, modes=(),
                     alpha=ALPHA, busy_share=0.25, run_spread=0.03)
    line = next(x for x in page(record, "../pictures/x.png").splitlines()
                if x.startswith("- **mm**"))
    assert line == ("- **mm**: runs; eager and compiled run, throughput not tested (0 processes "
                    "kept on either side: 4 of 4 processes timed while other programs took "
                    "more than compare.busy_share of the CPU: left out; measure again on a "
                    "quiet machine)"), line


def test_the_page_ends_its_workloads_with_one_line_for_the_pair():
    from torchgate.render.migration import overall
    source = side("cpu-fp32", cell_record({"mm": 2e-3, "mlp": 1e-3}))
    faster = side("cpu-bf16", cell_record({"mm": 1e-3, "mlp": 0.5e-3}, seed=1))
    record = migrate("fp32_to_bf16", source, faster, same_run=True, modes=(), **HOW)
    assert overall(record).startswith("**Move**: every workload runs there, passes its "
                                      "numerics and is faster: ")
    assert overall(record) in page(record, None)
    mixed = side("cpu-bf16", cell_record({"mm": 1e-3, "mlp": 2e-3}, seed=1))
    line = overall(migrate("fp32_to_bf16", source, mixed, same_run=True, modes=(), **HOW))
    assert line.startswith("**Do not move for speed**: slower there: mlp eager 0.5") and (
        "; faster: mm eager 2.00×" in line), line
    same = side("cpu-bf16", cell_record({"mm": 2e-3, "mlp": 1e-3}, seed=1))
    line = overall(migrate("fp32_to_bf16", source, same, same_run=True, modes=(), **HOW))
    assert line.startswith("**Not decided**: no test decided mlp eager, mm eager"), line


def test_the_page_names_the_cpu_units_that_run_each_sides_precision():
    """fp32 → bf16 on one CPU with AVX-512 BF16 and no AMX, then onto a CPU with AMX: the
    note names the unit each side's matmuls run on; an older environment without the
    features says so; an accelerator's cell names none."""
    def env(*features, machine="x86_64"):
        return EnvRecord({"hardware": {"cpu_features": list(features), "machine": machine}})
    here = env("avx2", "fma", "avx512f", "avx512_bf16")

    def cell(steady, dtype, device="cpu", seed=0):
        return dataclasses.replace(cell_record({"mm": steady}, seed=seed), device={
            "type": device}, precision={"dtype": dtype})
    source = dataclasses.replace(side("cpu-fp32", cell(2e-3, "float32")), env=here)
    target = dataclasses.replace(side("cpu-bf16", cell(1e-3, "bfloat16", seed=1)), env=here)
    amx = dataclasses.replace(target, label="box-b/cpu-bf16",
                              env=env("avx512f", "avx512_bf16", "amx_tile", "amx_bf16"))

    def note(a, b):
        record = migrate("p", a, b, same_run=True, modes=(), **HOW)
        return next(n for n in record.notes if "matmuls" in n), page(record, None)
    said, text = note(source, target)
    assert said == ("What runs the matmuls: the source float32 on AVX-512; the target bfloat16 "
                    "on AVX-512 BF16 (no AMX-BF16 tiles). A speed difference between them is "
                    "the CPU units' before it is the code's.")
    assert f"> {said}" in text
    assert "the target bfloat16 on AMX-BF16 tiles." in note(target, amx)[0]
    assert note(target, target)[0] == ("The matmuls run bfloat16 on AVX-512 BF16 (no AMX-BF16 "
                                       "tiles) on both sides' CPUs.")
    plain = dataclasses.replace(target, env=env("avx2", "fma"))
    assert "bfloat16 with no unit for it: its matmuls convert to float32" in note(source,
                                                                                plain)[0]
    old = dataclasses.replace(target, env=EnvRecord({"hardware": {"machine": "x86_64"}}))
    assert "a CPU whose features its environment does not record" in note(source, old)[0]
    arm = dataclasses.replace(target, env=env("asimd", "bf16", machine="aarch64"))
    assert "the target bfloat16 on Arm BF16 (BFMMLA)." in note(source, arm)[0]
    gpu = dataclasses.replace(target, bench=cell(1e-3, "bfloat16", "cuda"))
    assert note(source, gpu)[0].startswith("What runs the matmuls: the source float32 on "
                                           "AVX-512.")
