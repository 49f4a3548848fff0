"""The history stage: change points on synthetic series with known steps, and end to end on a
git repository of committed bench reports."""
import dataclasses
import json
import random
import re

import numpy as np
import pytest

from torchgate import history as history_stage
from torchgate.core import config
from torchgate.core.config.settings import Delta, HistorySettings
from torchgate.core.errors import UserError
from torchgate.core.numbers import median
from torchgate.core.records import write_record
from torchgate.core.records.schema import EnvRecord
from torchgate.judge.changepoints import change_points
from torchgate.judge.results import RunPoint, Trend
from torchgate.judge.trends import Run, failure_rates, series
from torchgate.render.history import failures_section, metric_section, y_range

from .projects import git, init_repo
from .records import BUSY, bench, process

STEPS = {60: 1.05, 120: 1.10, 160: 0.92}
SPIKES = {35: 1.30, 140: 1.25}


def ar1(rng: np.random.Generator, n: int, sd: float = 0.02, rho: float = 0.3) -> np.ndarray:
    """Stationary AR(1) noise of relative SD `sd`, as a factor around 1."""
    x = np.empty(n)
    x[0] = rng.normal(0, sd)
    for i in range(1, n):
        x[i] = rho * x[i - 1] + rng.normal(0, sd * np.sqrt(1 - rho ** 2))
    return np.exp(x)


def stepped(seed: int) -> np.ndarray:
    level = np.ones(200)
    for at, factor in STEPS.items():
        level[at:] *= factor
    y = 1e-3 * level * ar1(np.random.default_rng(seed), 200)
    for at, factor in SPIKES.items():
        y[at] *= factor
    return y


def test_three_steps_are_found_where_they_began_and_the_spikes_are_not():
    found = change_points(stepped(seed=0))
    assert [s.index for s in found] == pytest.approx(list(STEPS), abs=2), found
    for shift, factor in zip(found, STEPS.values()):
        assert (shift.ratio > 1) == (factor > 1)
        assert shift.ratio == pytest.approx(factor, rel=0.03)
        assert shift.pvalue <= 0.001
    assert not {s.index for s in found} & {i + d for i in SPIKES for d in (0, 1)}


def test_series_without_a_step_have_no_change_point_at_all():
    """50 series of AR(1) noise, each with a spike of +30 %: a spike is not a shift."""
    named = {}
    for seed in range(50):
        rng = np.random.default_rng(1000 + seed)
        y = ar1(rng, 200)
        y[rng.integers(10, 190)] *= 1.3
        found = change_points(y)
        if found:
            named[seed] = found
    assert named == {}


def test_a_single_slow_run_at_the_end_is_not_a_shift_yet():
    rng = np.random.default_rng(7)
    y = ar1(rng, 30)
    y[-1] *= 1.5
    assert change_points(y) == []
    y[-3:] *= 1.5       # three runs alike: a level
    assert [s.index for s in change_points(y)] == [27]


# ---- end to end: a git repository of committed report files ------------------------------

RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"w": {"_target_": "x.w"}}, "matrix": {"modes": ["eager"]}}
ENV = {"hardware": {"cpu_model": "cpu"}, "torch": {"version": "2.13.0", "num_threads": 2}}


def _write_run(root, seed, steady, env=ENV):
    rng = random.Random(seed)
    rec = bench({"w": [process(steady=steady, rng=rng) for _ in range(4)]})
    write_record(root / "reports" / "test-box" / "bench" / "cpu-fp32.json",
                 dataclasses.replace(rec, cell="cpu-fp32"))
    write_record(root / "reports" / "test-box" / "env" / "env.json", EnvRecord(env))


def _commit(root, message):
    git("add", "-A", cwd=root)
    git("commit", "-qm", message, cwd=root)
    return git("rev-parse", "HEAD", cwd=root).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    init_repo(tmp_path)
    (tmp_path / "params.yaml").write_text(json.dumps(RAW))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _shift_rows(page: str) -> list[str]:
    table = page.split("## Lasting shifts")[1].split("\n## ")[0]
    return [line for line in table.splitlines() if line.startswith("| cpu-fp32")]


@pytest.mark.slow
def test_forty_committed_runs_with_a_step_at_commit_25_name_that_commit(repo):
    """Commit 25 is a torch upgrade that makes the steady state 10 % slower; each run also
    has its own offset (2 % SD), as runs measured apart do."""
    offsets = np.random.default_rng(3).normal(0, 0.02, 40)
    commits = []
    for i in range(1, 41):
        upgraded = i >= 25
        env = {**ENV, "torch": {"version": "2.14.1" if upgraded else "2.13.0",
                                "num_threads": 2}}
        _write_run(repo, i, 1e-3 * (1.10 if upgraded else 1.0) * np.exp(offsets[i - 1]), env)
        commits.append(_commit(repo, f"run {i}"))
    history_stage.main([])
    page = (repo / "reports" / "test-box" / "history.md").read_text()
    rows = _shift_rows(page)
    assert len(rows) == 1, page
    assert commits[24][:10] in rows[0] and "steady state" in rows[0].lower()
    assert "▲ +1" in rows[0] and "slower" in rows[0]
    assert "torch 2.13.0 → 2.14.1" in rows[0]
    named = set(re.findall(r"`([0-9a-f]{10})`", "\n".join(rows)))
    assert named == {commits[24][:10]}
    assert "30 older run(s) not shown" in page     # the tables show the newest 10
    image = repo / "reports" / "test-box" / "pictures" / "history" / "cpu-fp32-steady_s-hw1.png"
    assert "](pictures/history/cpu-fp32-steady_s-hw1.png)" in page
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_two_committed_runs_and_this_one_in_the_workspace_are_three_points(repo):
    for i in (1, 2):
        _write_run(repo, i, 1e-3)
        _commit(repo, f"run {i}")
    _write_run(repo, 3, 1.02e-3)          # measured, not committed yet
    history_stage.main([])
    page = (repo / "reports" / "test-box" / "history.md").read_text()
    steady = page.split("### Steady state")[1].split("###")[0]
    rows = [line for line in steady.splitlines() if re.match(r"\| (`|this run)", line)]
    assert len(rows) == 3 and rows[-1].startswith("| this run")
    assert "over 3 run(s)" in steady
    first_call = page.split("### First call")[1]
    assert len([line for line in first_call.splitlines()
                if re.match(r"\| (`|this run)", line)]) == 3
    folder = repo / "reports" / "test-box" / "pictures" / "history"
    pictures = sorted(p.name for p in folder.glob("*.png"))
    assert pictures == ["cpu-fp32-first_call_s-hw1.png", "cpu-fp32-steady_s-hw1.png"]
    for name in pictures:   # the page links each picture where it is drawn
        assert f"](pictures/history/{name})" in page
    assert page.count("`dvc repro -s history` draws them") == 1
    written = [repo / "reports" / "test-box" / "history.md", folder / pictures[1]]
    before = [p.stat().st_mtime_ns for p in written]
    history_stage.main([])                # nothing changed: nothing is rewritten
    assert [p.stat().st_mtime_ns for p in written] == before


def test_committing_this_run_changes_neither_the_page_nor_its_pictures(repo):
    """DVC does not run the history stage after a commit (no file it sees changed): what it
    would write then must be what it wrote before, also once `history.runs` caps the runs."""
    (repo / "params.yaml").write_text(json.dumps({**RAW, "history": {"runs": 3}}))
    for i in (1, 2, 3):
        _write_run(repo, i, 1e-3 * (1 + i / 100))
        _commit(repo, f"run {i}")
    _write_run(repo, 4, 1.05e-3)

    def drawn() -> dict[str, bytes]:
        history_stage.main([])
        reports = repo / "reports" / "test-box"
        return {p.name: p.read_bytes() for p in [reports / "history.md",
                                                 *sorted(reports.glob("pictures/history/*"))]}

    before = drawn()
    page = before["history.md"].decode()
    assert "over 3 run(s)" in page and "| this run" in page and len(before) == 4
    _commit(repo, "run 4")
    committed = git("ls-files", cwd=repo).stdout.split()
    assert "reports/test-box/history.md" in committed and "pictures" not in " ".join(committed)
    assert drawn() == before
    assert git("status", "--porcelain", cwd=repo).stdout == ""
    history_stage.main([])                   # and again, as `dvc repro -s -f history` would
    assert git("status", "--porcelain", cwd=repo).stdout == ""


def test_a_change_of_hardware_starts_a_new_series():
    def run(i, cpu):
        rec = bench({"w": [process(steady=1e-3, rng=random.Random(i)) for _ in range(3)]})
        env = EnvRecord({**ENV, "hardware": {"cpu_model": cpu}})
        return Run(f"{i:040x}", "2026-01-01", dataclasses.replace(rec, cell="c"), env)
    runs = [run(i, "old cpu") for i in range(4)] + [run(i, "new cpu") for i in range(4, 6)]
    steady = [s for s in series({"c": runs}, HistorySettings(), BUSY, Delta()) if s.metric == "steady_s"]
    assert [(s.era, len(s.points)) for s in steady] == [(0, 4), (1, 2)]
    assert dict(steady[1].hardware)["cpu_model"] == "new cpu"


def test_a_bad_history_setting_is_one_line():
    with pytest.raises(UserError, match=r"history.max_pvalue must be in \(0, 1\), got 2"):
        config.parse({**RAW, "history": {"max_pvalue": 2}})


# ---- the page as an expert reads it ------------------------------------------------------------

def _trend(workload: str, values: list[float], runs: list[int] | None = None) -> Trend:
    runs = runs if runs is not None else list(range(len(values)))
    return Trend("cpu-fp32", workload, "eager", "steady_s",
                 (("cpu_model", "AMD EPYC"), ("torch_threads", "2")), 0,
                 tuple(RunPoint(r, f"{r:040x}", "2026-12-01", v) for r, v in zip(runs, values)))


def test_a_series_reads_oldest_to_newest_and_a_wobble_is_drawn_flat():
    """889 → 882 is said in that order (the old line read min to max, "882 µs to 889 µs",
    while the run fell); a 1 % wobble spans a tenth of its panel, not all of it; the level
    of two points is their middle, not the upper one."""
    lines = metric_section("steady_s", [_trend("w", [889e-6, 885e-6, 882e-6])], 10, "###")
    line = next(x for x in lines if x.startswith("- w · eager"))
    assert "889 µs → 882 µs over 3 run(s), oldest to newest (from 882 µs to 889 µs)" in line
    low, high = y_range([889.0, 885.0, 882.0])
    assert (high - low) >= 0.2 * 885 and low < 882 and high > 889
    wide = y_range([100.0, 200.0])
    assert wide[0] < 100 and wide[1] > 200 and wide[0] >= 0
    assert median([1.0, 3.0]) == 2.0


def test_the_table_shows_only_the_series_with_a_point_among_its_runs():
    found = [_trend("kept", [1e-3, 1.1e-3, 1e-3], [7, 8, 9]),
             *[_trend(f"old{i}", [1e-3, 1e-3], [0, 1]) for i in range(8)]]
    lines = metric_section("steady_s", found, 3, "###")
    header = next(x for x in lines if x.startswith("| run "))
    assert "kept · eager" in header and "old0" not in header
    assert any(x.startswith("8 series with no point among these runs left out of the table: "
                            "old0 · eager") and x.endswith("and 2 more.") for x in lines)


def test_a_unit_that_fails_in_every_process_since_a_run_reads_broken_not_a_rate():
    ok = bench({"w": [process() for _ in range(4)]})
    broken = bench({"w": [process(status="ERROR", error="boom")]})
    runs = {"c": [Run(f"{i:040x}", "2026-12-01", r, None) for i, r in
                  enumerate([ok, ok, ok, broken, broken])]}
    (rate,) = failure_rates(runs)
    assert (rate.failed, rate.processes, rate.broken_runs) == (2, 14, 2)
    row = next(x for x in "\n".join(failures_section([rate])).splitlines() if x.startswith("| c "))
    assert "2 of 14 (14%); **every process of the newest 2 run(s)**: broken, not flaky" in row
    again = failure_rates({"c": runs["c"] + [Run("f" * 40, "2026-12-02", ok, None)]})
    assert again[0].broken_runs == 0


def test_a_run_whose_processes_were_all_busy_is_named_not_dropped_silently():
    rng = random.Random(3)
    quiet = [bench({"w": [process(rng=rng) for _ in range(3)]}) for _ in range(3)]
    loud = bench({"w": [process(rng=rng, busy=0.9) for _ in range(3)]})
    runs = [Run(f"{i:040x}", "2026-12-01", r, None) for i, r in
            enumerate([quiet[0], loud, quiet[1], quiet[2]])]
    (steady,) = [s for s in series({"c": runs}, HistorySettings(), BUSY, Delta())
                 if s.metric == "steady_s"]
    assert len(steady.points) == 3 and steady.busy_runs == (f"{1:040x}",)
    line = next(x for x in metric_section("steady_s", [steady], 10, "###")
                if x.startswith("- w · eager"))
    assert line.endswith("; 1 run(s) without a point, every process timed on a busy machine: "
                         + f"{1:040x}"[:10]), line


def test_a_point_some_busy_processes_were_left_out_of_is_marked_and_drawn_hollow(monkeypatch):
    rng = random.Random(4)
    quiet = [bench({"w": [process(rng=rng) for _ in range(3)]}) for _ in range(2)]
    part = bench({"w": [process(rng=rng), process(rng=rng),
                        process(rng=rng, busy=0.9)]})
    runs = [Run(f"{i:040x}", "2026-12-01", r, None) for i, r in
            enumerate([quiet[0], part, quiet[1]])]
    (steady,) = [s for s in series({"c": runs}, HistorySettings(), BUSY, Delta())
                 if s.metric == "steady_s"]
    assert [p.busy for p in steady.points] == [0, 1, 0]
    from matplotlib.axes import Axes

    from torchgate.render.history import BUSY_POINT, trend
    labels = []
    original = Axes.legend
    monkeypatch.setattr(Axes, "legend", lambda ax, *a, **k: labels.append(
        [t.get_text() for t in original(ax, *a, **k).get_texts()]))
    assert trend([steady], "t") is not None and labels == [[BUSY_POINT]]
    labels.clear()
    quiet_only = dataclasses.replace(steady, points=tuple(
        dataclasses.replace(p, busy=0) for p in steady.points))
    assert trend([quiet_only], "t") is not None and labels == []   # no legend over the points
