"""The `torchgate` command (stages/torchgate.py): the tools under one name, and `compare` of
two record files. Two committed runs compared as compare.md did: tests/test_gate.py."""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchgate import torchgate
from torchgate.core.records import write_record

from .projects import ROOT
from .records import bench, process

PARAMS = str(ROOT / "params.yaml")


def written(folder: Path, steady: float, seed: int, cell: str = "c") -> Path:
    """A machine's bench record of cell `cell`: 6 processes of workload `w` at `steady` s."""
    rng = random.Random(seed)
    record = bench({"w": [process(steady * rng.uniform(0.98, 1.02), rng=rng)
                          for _ in range(6)]})
    path = folder / "reports/m/bench" / f"{cell}.json"
    write_record(path, record.__class__(**{**record.__dict__, "cell": cell}))
    return path


def read_back(path: Path):
    from torchgate.core.records import load_record
    from torchgate.core.records.schema import BenchRecord
    return load_record(path, BenchRecord)


def test_compare_two_record_files_prints_a_line_a_unit_within_100_columns(tmp_path, capsys):
    base, now = written(tmp_path / "a", 1e-3, 0), written(tmp_path / "b", 1.3e-3, 1)
    torchgate.main(["compare", str(base), str(now), "--params", PARAMS])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "cell c"                  # one cell: named once, the units below
    assert out[1].split() == ["verdict", "unit", "metric", "baseline", "→", "now", "change",
                              "[CI]"]
    row = next(line for line in out if " steady_s " in line)
    change = re.search(r" ([+-][\d.]+) % \[", row)
    assert row.startswith("REGRESSED ") and " w eager " in row, row
    assert 20 < float(change.group(1)) < 40 and "ms →" in row, row
    assert out[-1].startswith("1 REGRESSED") and max(map(len, out)) <= 100
    torchgate.main(["compare", str(base), str(now), "--params", PARAMS, "--only-changed"])
    changed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in changed[2:-1]] == ["REGRESSED"]
    assert changed[-1].endswith("unchanged not shown)")
    torchgate.main(["compare", str(base), str(now), "--params", PARAMS, "--md"])
    page = capsys.readouterr().out
    assert page.startswith(f"# torchgate compare {base} {now}") and "| REGRESSED |" in page
    torchgate.main(["compare", str(base), str(now), "--params", PARAMS, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert {r["verdict"] for r in data["rows"] if r["metric"] == "steady_s"} == {"REGRESSED"}


def test_compare_with_gate_exits_1_on_what_gate_fail_on_lists(tmp_path, capsys):
    base, now = written(tmp_path / "a", 1e-3, 0), written(tmp_path / "b", 1.3e-3, 1)
    with pytest.raises(SystemExit) as stop:
        torchgate.main(["compare", str(base), str(now), "--params", PARAMS, "--gate"])
    assert stop.value.code == 1
    assert "torchgate compare: failed: 1 REGRESSED" in capsys.readouterr().err
    same = written(tmp_path / "c", 1e-3, 2)
    torchgate.main(["compare", str(base), str(same), "--params", PARAMS, "--gate"])


def test_a_lock_step_record_compared_with_itself_reads_no_change(tmp_path, capsys):
    """A record that carries its baseline arm (a PR check's, 30 % slower than that arm):
    `torchgate compare X X` compares X with X, never X with the arm it carries."""
    from .records import with_ab
    slow, fast = (read_back(written(tmp_path / name, s, 1)) for name, s in (
        ("a", 1.3e-3), ("b", 1e-3)))
    path = tmp_path / "pr/reports/m/bench/c.json"
    write_record(path, with_ab(slow, fast, interleaved=True))
    torchgate.main(["compare", str(path), str(path), "--params", PARAMS, "--gate"])
    out = capsys.readouterr().out       # --gate passed: no SystemExit
    assert out == f"Nothing changed: {path} holds the same bytes as {path}.\n"
    torchgate.main(["compare", str(path), str(path), "--params", PARAMS, "--json"])
    rows = json.loads(capsys.readouterr().out)["rows"]   # compared all the same
    assert "REGRESSED" not in {r["verdict"] for r in rows} and \
        "EQUIVALENT" in {r["verdict"] for r in rows}


def test_two_revisions_holding_the_same_records_read_nothing_changed(tmp_path, monkeypatch,
                                                                    capsys):
    from .projects import git, init_repo
    init_repo(tmp_path)
    written(tmp_path, 1e-3, 0)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "run", cwd=tmp_path)
    (tmp_path / "notes.txt").write_text("a commit that brings no run\n")
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "notes", cwd=tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["--params", PARAMS, "--reports", "reports/m"]
    torchgate.main(["compare", "HEAD~1", "HEAD", *args])
    assert capsys.readouterr().out == ("Nothing changed: HEAD~1 and HEAD hold the same records "
                                       "in reports/m/.\n")
    written(tmp_path, 1.3e-3, 1)
    git("commit", "-qam", "another run", cwd=tmp_path)
    torchgate.main(["compare", "HEAD~1", "HEAD", *args])
    assert "REGRESSED" in capsys.readouterr().out


def test_compare_judges_and_gates_with_the_params_now_was_measured_with(tmp_path,
                                                                        monkeypatch):
    """Two revisions: NOW's committed params.yaml, not the working tree's (which a later
    compose may have changed); --params overrides; record files: the working tree's."""
    import yaml

    from .projects import git, init_repo
    init_repo(tmp_path)
    raw = yaml.safe_load(Path(PARAMS).read_text())
    raw["gate"]["fail_on"] = []
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "run", cwd=tmp_path)
    (tmp_path / "params.yaml").write_text(Path(PARAMS).read_text())    # composed since
    monkeypatch.chdir(tmp_path)
    assert torchgate._params_of("HEAD", None).gate.fail_on == ()
    assert torchgate._params_of("HEAD", PARAMS).gate.fail_on != ()
    record = written(tmp_path, 1e-3, 0)
    assert torchgate._params_of(str(record), None).gate.fail_on != ()


@pytest.mark.parametrize("make, message", [
    (lambda t: (written(t / "a", 1e-3, 0), written(t / "b", 1e-3, 1, cell="d")),
     "is bench c, "),
    (lambda t: (written(t / "a", 1e-3, 0), t / "nowhere.json"),
     "is not a file, nor a revision of this repository"),
    (lambda t: (written(t / "a", 1e-3, 0), (t / "x.json", (t / "x.json").write_text("{}"))[0]),
     "is not a torchgate bench or numerics record"),
])
def test_compare_of_what_cannot_be_compared_is_one_line(tmp_path, capsys, make, message):
    base, now = make(tmp_path)
    with pytest.raises(SystemExit) as stop:
        torchgate.main(["compare", str(base), str(now), "--params", PARAMS])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and message in err[0], err


def test_the_console_script_names_its_tools_and_refuses_an_unknown_one():
    script = Path(sys.executable).with_name("torchgate")      # pip install -e . writes it
    listed = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert listed.returncode == 0
    for tool in (*torchgate.TOOLS, "compare"):
        assert f"torchgate {tool}" in listed.stdout
    wrong = subprocess.run([str(script), "composee"], capture_output=True, text=True)
    assert wrong.returncode == 2 and wrong.stderr.startswith(
        "torchgate: error: no tool 'composee'; the tools: compose, lock"), wrong.stderr
    helped = subprocess.run([str(script), "gate", "--help"], capture_output=True, text=True,
                            cwd=ROOT)
    assert helped.returncode == 0 and "gate.fail_on" in helped.stdout
    # Every tool answers --help with its usage, and the command its version.
    for tool in torchgate.TOOLS:
        helped = subprocess.run([str(script), tool, "--help"], capture_output=True, text=True,
                                cwd=ROOT)
        assert helped.returncode == 0 and "torchgate" in helped.stdout, (tool, helped.stderr)
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert re.fullmatch(r"torchgate \d+\.\d+\.\d+\n", version.stdout), version.stdout


def test_exps_shows_dvc_exp_show_with_the_declared_columns_each_of_which_exists(monkeypatch):
    """Each column `torchgate exps` keeps is one `dvc exp show` has: a params.yaml key or a
    metrics.json key of a run (a key renamed would silently vanish from the view)."""
    import yaml

    from torchgate.core.records.rows import CompareRecord
    from torchgate.render.metrics import decisions
    called = []
    monkeypatch.setattr("subprocess.call", lambda argv: called.append(argv) or 0)
    with pytest.raises(SystemExit) as done:
        torchgate.main(["exps", "-A", "--md"])
    assert done.value.code == 0
    assert called[0][:5] == ["dvc", "exp", "show", "--drop", ".*"]
    assert called[0][5] == "--keep" and called[0][7:] == ["-A", "--md"]

    def leaves(tree, prefix=""):
        for key, v in tree.items():
            yield from leaves(v, f"{prefix}{key}.") if isinstance(v, dict) else [prefix + key]
    columns = [*leaves(yaml.safe_load(Path(PARAMS).read_text())),
               *leaves(decisions(CompareRecord("HEAD", True, 0.05, 0), []))]
    for pattern in torchgate.EXP_COLUMNS[2:]:
        assert any(re.fullmatch(pattern, c) for c in columns), pattern


def test_a_table_of_wide_intervals_and_long_metric_names_still_fits_100_columns():
    """The pull-request scenario's `compare main HEAD`: NOT COMPARABLE timings whose
    intervals reach three digits beside first_call_warm_s read 102 columns when only the
    unit's name could give way; the gaps and then the name give way, never a number."""
    from torchgate.core.records.rows import Change, CompareRecord, Row
    from torchgate.render.verdicts import terse

    def row(workload, mode, metric, ratio, low, high, base=2.17e-3, verdict="NOT COMPARABLE"):
        change = Change(ratio, low, high, 0.95, 0.2, 4, 4, 0.03, "Welch t", 0.4, 0.08, 9)
        return Row("bench", "cpu-fp32", workload, mode, metric, verdict, base, ratio * base,
                   0.05, change)
    for workload in ("chain", "a_workload_with_a_long_name"):
        rows = (row(workload, "eager", "instructions", 1.25, 1.246, 1.255, 11_987_419,
                    "REGRESSED"),
                row(workload, "compiled", "warmup_s", 1.161, 0.654, 2.061),
                row(workload, "compiled", "first_call_warm_s", 1.002, 0.989, 1.015))
        out = terse(CompareRecord("main", True, 0.05, 2, rows=rows)).splitlines()
        assert max(map(len, out)) <= 100, "\n".join(out)
        assert "11,987,419 → 14,984,274" in out[2] and " eager " in out[2]
        assert "+16.1 % [-34.6, +106.1]" in out[3] and " compiled " in out[3]
        assert "first_call_warm_s" in out[4]
