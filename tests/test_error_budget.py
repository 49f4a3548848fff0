"""One error budget: which level each verdict is decided at, the interval shown, and where a
recorded baseline's run-to-run variance comes from (the committed history, or the prior)."""
import dataclasses
import json
import math
import random

from torchgate.core import config
from torchgate.core.baseline import load_run
from torchgate.core.records import write_record
from torchgate.core.records.schema import EnvRecord, Look, Pending
from torchgate.core.vocabulary import UnitKey, Verdict
from torchgate.judge.run import compare_run
from torchgate.judge.timings import bench_rows, fresh_since_last_look
from torchgate.judge.verdicts import finish

from .projects import REPORTS, git, init_repo
from .records import DELTA, bench, process, record

STEADY = UnitKey("bench", "c", "w", "eager", "steady_s")


def _row(now, base, **kw):
    drafts = [dataclasses.replace(d, **kw) for d in bench_rows("c", now, base, DELTA)]
    result = finish(drafts, alpha=0.05, power=0.8, looks=2)
    return {r.metric: r for r in result.rows}, result


def test_a_confirmed_regression_is_decided_at_alpha_an_unconfirmed_one_at_alpha_over_looks():
    slower, base = record(seed=1, steady=1.2e-3), record(seed=2)
    confirmed, _ = _row(slower, base, confirmed=True)
    seen, _ = _row(slower, base, confirmed=False)
    assert confirmed["steady_s"].verdict == seen["steady_s"].verdict == Verdict.REGRESSED
    assert math.isclose(confirmed["steady_s"].change.confidence, 0.95)
    assert math.isclose(seen["steady_s"].change.confidence, 1 - 0.05 / 2)
    assert "tested at α/2: no fresh processes since an interim look" in seen["steady_s"].note
    assert "tested at" not in confirmed["steady_s"].note


def test_equivalence_is_the_two_one_sided_tests_interval_and_that_is_the_one_shown():
    rows, result = _row(record(seed=1), record(seed=2))
    same = rows["steady_s"]
    assert same.verdict == Verdict.EQUIVALENT
    assert math.isclose(same.change.confidence, 1 - 2 * 0.05 / 2)
    assert 1 / 1.05 <= same.change.ci_low <= same.change.ci_high <= 1.05
    # An interval shown inside ±δ is always EQUIVALENT.
    for row in result.rows:
        if row.change is not None and 1 / (1 + row.delta) <= row.change.ci_low \
                and row.change.ci_high <= 1 + row.delta:
            assert row.verdict == Verdict.EQUIVALENT


def test_a_unit_is_fresh_when_processes_came_after_its_last_look():
    rng = random.Random(0)
    plain = bench({"w": [process(rng=rng) for _ in range(6)]})
    assert fresh_since_last_look(plain, STEADY)      # no adaptive looks
    looked = dataclasses.replace(plain, looks_planned=2)
    assert not fresh_since_last_look(looked, STEADY)  # decided at the look
    pending = Pending("w", "eager", "steady_s", Verdict.REGRESSED, 1.2, 1.1, 1.3)
    extended = dataclasses.replace(looked, looks=(Look(4, (pending,)),))
    assert fresh_since_last_look(extended, STEADY)   # 6 > 4 processes
    stuck = dataclasses.replace(looked, looks=(Look(6, (pending,)),))
    assert not fresh_since_last_look(stuck, STEADY)  # out of budget


RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"w": {"_target_": "x.w"}}, "matrix": {"modes": ["eager"]},
       "bench": {"adaptive_budget_s": 0}}
ENV = {"hardware": {"cpu_model": "cpu"}, "torch": {"version": "2.13.0", "num_threads": 2}}


def _commit_run(root, seed, offset, env=ENV, message="run"):
    rng = random.Random(seed)
    rec = bench({"w": [process(steady=1e-3 * offset, rng=rng) for _ in range(4)]})
    write_record(root / "reports" / "test-box" / "bench" / "cpu-fp32.json", dataclasses.replace(
        rec, cell="cpu-fp32"))
    write_record(root / "reports" / "test-box" / "env" / "env.json", EnvRecord(env))
    git("add", "-A", cwd=root)
    git("commit", "-qm", message, cwd=root)


def test_the_run_to_run_variance_comes_from_like_committed_runs(tmp_path, monkeypatch):
    init_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(json.dumps(RAW))
    cfg = config.parse(RAW)
    # Two runs on other hardware and another torch do not count; then too few like runs.
    _commit_run(tmp_path, 1, 1.00, {**ENV, "hardware": {"cpu_model": "other"}})
    _commit_run(tmp_path, 2, 1.02, {**ENV, "torch": {"version": "2.12.0", "num_threads": 2}})
    _commit_run(tmp_path, 3, 0.97)
    _commit_run(tmp_path, 4, 1.03)
    write_record(tmp_path / "reports" / "test-box" / "bench" / "cpu-fp32.json", dataclasses.replace(
        bench({"w": [process(steady=1e-3, rng=random.Random(9)) for _ in range(4)]}),
        cell="cpu-fp32"))

    def judged():
        inputs = load_run("HEAD", ["cpu-fp32"], ("bench",), reports=REPORTS, history_runs=20)
        return compare_run(cfg, inputs)
    first = judged()
    steady = next(r for r in first.rows if r.metric == "steady_s")
    assert steady.change.run_source == "prior"
    assert math.isclose(steady.change.run_spread, 0.03, rel_tol=1e-9)
    assert any("from the prior stats.run_spread = 3.0%" in n for n in first.notes)
    _commit_run(tmp_path, 5, 1.01)
    steady = next(r for r in judged().rows if r.metric == "steady_s")
    assert steady.change.run_source == "history of 3 runs"
    assert 0 <= steady.change.run_spread < 0.1
    # The note says how large the term was, and what it left decidable.
    note = next(n for n in judged().notes if "run-to-run variance" in n)
    assert "timing(s) from the history of 3 runs, " in note
    assert f"{steady.change.run_spread:.1%}" in note.split("history of 3 runs, ")[1].split(")")[0]
    assert f"with 80% power was +{steady.change.mde:.0%} (cpu-fp32 w eager)" in note


def test_the_compare_stage_reads_the_committed_history(tmp_path, monkeypatch):
    """The stage, not only the judge: a recorded comparison's run variance (and with it the
    like reference and the slopes) comes from the committed runs. The stages once read none,
    so the prior decided every recorded comparison whatever the history held."""
    from torchgate import compare

    init_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(json.dumps(RAW))
    for seed, offset in ((3, 0.97), (4, 1.03), (5, 1.01)):
        _commit_run(tmp_path, seed, offset)
    write_record(tmp_path / "reports" / "test-box" / "bench" / "cpu-fp32.json", dataclasses.replace(
        bench({"w": [process(steady=1e-3, rng=random.Random(9)) for _ in range(4)]}),
        cell="cpu-fp32"))
    compare.main([])
    rows = json.loads((tmp_path / "reports/test-box/compare.json").read_text())["rows"]
    steady = next(r for r in rows if r["metric"] == "steady_s")
    assert steady["change"]["run_source"] == "history of 3 runs"
