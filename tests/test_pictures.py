"""Pictures are drawn, never committed: every one lies in a reports root's pictures/ folder,
which ignores itself, and no stage that measures declares one among its outputs, so a fresh
clone draws them again (`dvc repro` runs report and history) without measuring, and the
pages it writes then are the committed ones."""
import dataclasses
import random
from pathlib import Path

import yaml

from torchgate import report as report_stage
from torchgate.compose import compose
from torchgate.core.baseline import compared_commit
from torchgate.core.records import IGNORE_ALL, replace_pictures, write_record
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import EnvRecord
from torchgate.core.vocabulary import PICTURES
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish

from .projects import ENV_DVC_YAML, REPORTS, ROOT, git
from .records import DELTA, bench, process

DRAWING = {"report", "history"}             # the stages that draw, and measure nothing
PNG = b"\x89PNG\r\n\x1a\n"


def outs(stage: dict) -> list[str]:
    return [next(iter(o)) if isinstance(o, dict) else o
            for key in ("outs", "metrics", "plots") for o in stage.get(key, ())]


def test_no_declared_output_of_a_stage_that_measures_is_a_picture():
    """A picture out of bench or numerics would make a fresh clone measure again to draw it;
    every picture out is a folder under reports/<machine>/pictures/ of a stage that only
    draws."""
    stages = {**yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"],
              **yaml.safe_load((ROOT / ENV_DVC_YAML).read_text())["stages"]}
    pictures = f"reports/${{machine.name}}/{PICTURES}"
    for name, stage in stages.items():
        for out in outs(stage):
            assert not out.endswith(".png") or out.startswith(f"{pictures}/"), (name, out)
            if out.startswith(f"{pictures}/"):
                assert name in DRAWING, (name, out)
    drawn = {out for name in DRAWING for out in outs(stages[name])}
    assert drawn >= {f"{pictures}/summary", f"{pictures}/history"}
    # `dvc plots` draws each revision's committed data; no revision but the workspace has PNGs
    plots = yaml.safe_dump(yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"])
    assert ".csv" in plots and ".png" not in plots


def test_a_picture_folder_ignores_itself(tmp_path):
    git("init", "-q", cwd=tmp_path)
    folder = tmp_path / "anywhere" / PICTURES / "page"
    replace_pictures(folder, {"a.png": PNG})
    (tmp_path / "anywhere" / "data.csv").write_text("x\n")
    assert (folder / ".gitignore").read_text() == IGNORE_ALL
    untracked = git("status", "--porcelain", "--untracked-files=all", cwd=tmp_path).stdout
    assert untracked.split() == ["??", "anywhere/data.csv"]
    replace_pictures(folder, {})            # a picture that is gone is removed
    assert not (folder / "a.png").exists() and (folder / ".gitignore").exists()


ENV = {"hardware": {"cpu_model": "cpu"}, "torch": {"version": "2.13.0", "num_threads": 2}}


def _run(project: Path, seed: int, steady: float, torch: str, base=None):
    """This run's bench record and environment, and compare.json against `base`."""
    rng = random.Random(seed)
    now = dataclasses.replace(bench({"w": [process(steady=steady, rng=rng) for _ in range(4)]}),
                              cell="cpu-fp32")
    write_record(project / REPORTS / "bench/cpu-fp32.json", now)
    write_record(project / REPORTS / "env/env.json",
                 EnvRecord({**ENV, "torch": {**ENV["torch"], "version": torch}}))
    rows = finish(bench_rows("cpu-fp32", now, base, DELTA), alpha=0.05, power=0.8).rows
    write_record(project / REPORTS / "compare.json",
                 CompareRecord("HEAD", base is not None, 0.05, len(rows), rows=tuple(rows)))
    return now


def _commit(project: Path, message: str) -> None:
    git("add", "-A", cwd=project)
    git("commit", "-qm", message, cwd=project)


def test_the_report_drawn_again_after_its_commit_is_the_committed_one(project):
    """A fresh clone has no pictures: `dvc repro` runs the report stage again, after the run
    was committed at baseline.rev (HEAD). It still compares with the run before, so the page
    is the committed one, the pictures are drawn where the page links them, and git sees
    none of them; the PNGs an older torchgate left in plots/ go."""
    compose(project / "params.yaml", ["matrix=smoke"], conf=project / "conf")
    base = _run(project, 1, 1e-3, "2.13.0")
    _commit(project, "baseline")
    _run(project, 2, 1.3e-3, "2.14.1", base)
    (project / REPORTS / "plots").mkdir(parents=True)
    (project / REPORTS / "plots/steady.png").write_bytes(PNG)     # an older torchgate's
    report_stage.main([])
    page = (project / REPORTS / "summary.md").read_text()
    assert "torch 2.13.0 → 2.14.1" in page
    folder = project / REPORTS / PICTURES / "summary"
    drawn = sorted(p.name for p in folder.glob("*.png"))
    assert {"changes.png", "steady.png"} <= set(drawn)
    for name in drawn:
        assert f"]({PICTURES}/summary/{name})" in page
    assert page.count("`dvc repro -s report` draws them") == 1
    assert not list((project / REPORTS / "plots").glob("*.png"))
    pictures = {name: (folder / name).read_bytes() for name in drawn}

    _commit(project, "this run")
    assert not [f for f in git("ls-files", cwd=project).stdout.split() if f.endswith(".png")]
    assert compared_commit("HEAD", ["cpu-fp32"], reports=REPORTS) == git(
        "rev-parse", "HEAD~1", cwd=project).stdout.strip()
    for picture in folder.iterdir():        # as a fresh clone has them: none
        picture.unlink()
    folder.rmdir()
    report_stage.main([])
    assert (project / REPORTS / "summary.md").read_text() == page
    assert {name: (folder / name).read_bytes() for name in drawn} == pictures
    assert git("status", "--porcelain", cwd=project).stdout == ""


def test_a_first_run_committed_has_no_baseline_when_drawn_again(project):
    compose(project / "params.yaml", ["matrix=smoke"], conf=project / "conf")
    _run(project, 1, 1e-3, "2.13.0")
    assert compared_commit("HEAD", ["cpu-fp32"], reports=REPORTS) is None      # no commit yet
    report_stage.main([])
    page = (project / REPORTS / "summary.md").read_text()
    _commit(project, "first run")
    assert compared_commit("HEAD", ["cpu-fp32"], reports=REPORTS) is None
    report_stage.main([])
    assert (project / REPORTS / "summary.md").read_text() == page
    assert git("status", "--porcelain", cwd=project).stdout == ""


def test_dvc_plots_diff_draws_each_revisions_change_with_its_interval(project):
    """`dvc plots diff` of two committed runs, each compared with the run before, through the
    template the `plots:` of dvc.yaml names (.dvc/plots/interval.json): each revision's ratio
    as a point on its interval, both revisions side by side, and the line of no change."""
    import json

    from .projects import dvc
    compose(project / "params.yaml", ["matrix=smoke"], conf=project / "conf")
    base = None
    for seed, steady in ((1, 1e-3), (2, 1.3e-3), (3, 1e-3)):
        base = _run(project, seed, steady, "2.13.0", base)
        report_stage.main([])
        _commit(project, f"run {seed}")
    shown = json.loads(dvc("plots", "diff", "HEAD~1", "HEAD", "--json").stdout)["data"]
    [spec] = shown["Change against the baseline (ratio)"]
    vega = spec["content"]
    assert [layer["mark"]["type"] for layer in vega["layer"]] == ["rule", "point", "rule"]
    interval = vega["layer"][0]["encoding"]
    assert (interval["x"]["field"], interval["x2"]["field"]) == ("ci_low", "ci_high")
    assert vega["layer"][2]["encoding"]["x"] == {"datum": 1}
    values = vega["data"]["values"]
    assert {v["rev"] for v in values} == {"HEAD~1", "HEAD"}
    for rev, slower in (("HEAD~1", True), ("HEAD", False)):     # +30 %, then back
        [steady] = [v for v in values if v["rev"] == rev and v["unit"].endswith("· steady")]
        assert float(steady["ci_low"]) <= float(steady["ratio"]) <= float(steady["ci_high"])
        assert (float(steady["ratio"]) > 1.2) == slower, steady
