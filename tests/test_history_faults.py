"""One malformed record of an old schema in the committed history is a skipped run with a
one-line note, not a crash of every bench, compare and history run until it ages out."""
import dataclasses
import json
import random

import pytest

from torchgate.core import config
from torchgate.core.baseline import load_history, load_run, load_timeline
from torchgate.core.errors import UserError
from torchgate.core.records import parse_record, write_record
from torchgate.core.records.schema import BenchRecord, EnvRecord
from torchgate.judge.run import compare_run

from .projects import REPORTS, git, init_repo
from .records import bench, process

RAW = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
       "workload": {"w": {"_target_": "x.w"}}, "matrix": {"modes": ["eager"]},
       "bench": {"adaptive_budget_s": 0}}
ENV = {"hardware": {"cpu_model": "cpu"}, "torch": {"version": "2.13.0", "num_threads": 2}}
CELL = "cpu-fp32"
# Schema 3's upgrade walks workloads -> runs -> processes: a run that is a list breaks it.
MALFORMED = json.dumps({"schema_version": 3, "kind": "bench", "cell": CELL, "status": "OK",
                        "workloads": {"w": ["not", "a", "run"]}})


def _commit(root, text, message):
    path = root / "reports" / "test-box" / "bench" / f"{CELL}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    write_record(root / "reports" / "test-box" / "env" / "env.json", EnvRecord(ENV))
    git("add", "-A", cwd=root)
    git("commit", "-qm", message, cwd=root)


def _good(seed):
    rec = bench({"w": [process(rng=random.Random(seed * 10 + i)) for i in range(4)]})
    return dataclasses.replace(rec, cell=CELL)


@pytest.fixture
def history(tmp_path, monkeypatch):
    init_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(json.dumps(RAW))
    from torchgate.core.records import dumps, record_data
    _commit(tmp_path, dumps(record_data(_good(1))), "good 1")
    _commit(tmp_path, MALFORMED, "malformed")
    malformed = git("rev-parse", "HEAD", cwd=tmp_path).stdout.strip()
    _commit(tmp_path, dumps(record_data(_good(2))), "good 2")
    return tmp_path, malformed


def test_a_malformed_old_record_is_a_one_line_user_error():
    with pytest.raises(UserError) as err:
        parse_record(MALFORMED, BenchRecord, "old.json")
    assert str(err.value).startswith("old.json is a malformed bench record of schema_version 3 "
                                     "(AttributeError: ")
    assert "\n" not in str(err.value)


def test_the_history_loaders_skip_the_malformed_run_with_a_note(history):
    root, malformed = history
    head = git("rev-parse", "HEAD", cwd=root).stdout.strip()
    notes = []
    found = load_history(head, [CELL], 20, reports=REPORTS, notes=notes)
    assert len(found[CELL]) == 2
    assert notes == [f"History: the run committed at {malformed[:10]} is skipped, "
                     f"reports/test-box/bench/{CELL}.json is unreadable there (baseline "
                     f"reports/test-box/bench/{CELL}.json at {malformed[:10]} is a malformed bench "
                     "record of schema_version 3 (AttributeError: 'list' object has no "
                     "attribute 'get'); restore it from git or delete it and rerun)"]
    timeline_notes = []
    timeline = load_timeline(head, [CELL], 50, reports=REPORTS, notes=timeline_notes)
    # The newest point is this run, named so whether it is committed (at HEAD here) or not.
    readable = [c for c in git("log", "--format=%H", cwd=root).stdout.split() if c != malformed]
    assert [past for past, *_ in timeline[CELL]] == readable[::-1][:-1] + [None]
    assert timeline_notes == notes


def test_compare_and_history_stages_run_past_it(history, capsys):
    root, malformed = history
    write_record(root / "reports" / "test-box" / "bench" / f"{CELL}.json", _good(3))
    inputs = load_run("HEAD", [CELL], ("bench",), reports=REPORTS, history_runs=20)
    result = compare_run(config.parse(RAW), inputs)
    assert any(n.startswith(f"History: the run committed at {malformed[:10]} is skipped")
               for n in result.notes)
    from torchgate.history import main
    main([])
    out = capsys.readouterr().out
    assert f"torchgate history: the run committed at {malformed[:10]} is skipped" in out
    assert (root / "reports" / "test-box" / "history.md").exists()


def test_bytes_that_are_not_utf8_are_one_line_in_git_and_a_skipped_run_in_history(history,
                                                                                   capsys):
    """The committed reader refuses what the workspace reader refuses (no replacement
    characters), and history runs past such a run, and past such a workspace record."""
    root, _ = history
    path = root / "reports" / "test-box" / "bench" / f"{CELL}.json"
    path.write_bytes(b'{"schema_version": 12, "kind": "bench", "cell": "c\xff"}')
    git("add", "-A", cwd=root)
    git("commit", "-qm", "not utf-8", cwd=root)
    bad = git("rev-parse", "HEAD", cwd=root).stdout.strip()
    from torchgate.core.baseline import load_baseline
    with pytest.raises(UserError, match=f"at {bad[:10]} is not UTF-8 text"):
        load_baseline(bad, REPORTS / "bench" / f"{CELL}.json", BenchRecord)
    notes = []
    assert len(load_history(bad, [CELL], 20, reports=REPORTS, notes=notes)[CELL]) == 2
    assert any(f"the run committed at {bad[:10]} is skipped" in n for n in notes)
    from torchgate.history import main
    main([])            # the workspace record is the same bytes: evidence, skipped
    assert (root / "reports" / "test-box" / "history.md").exists()
