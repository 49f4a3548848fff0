"""File formats and the baseline: atomic versioned records, one-line errors for bad files."""
import json
import subprocess

import pytest

from stages.core import baseline
from stages.core import records
from stages.core.errors import UserError


def test_records_are_sorted_versioned_and_nan_free(tmp_path):
    path = tmp_path / "r.json"
    records.write_record(path, "bench", {"b": [1.5, float("nan")], "a": {"z": 1, "y": 2}})
    text = path.read_text()
    data = json.loads(text)
    assert data["schema_version"] == records.SCHEMA_VERSION and data["kind"] == "bench"
    assert data["b"] == [1.5, None]
    assert text.index('"a"') < text.index('"b"') and text.index('"y"') < text.index('"z"')
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]      # no temporary left over


def test_a_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("previous")

    def boom(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(records.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        records.write_text(path, "new")
    assert path.read_text() == "previous" and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("text, message", [
    ('{"schema_version": 1, "kind": "ben', "is not valid JSON"),
    ('{"schema_version": 2, "kind": "bench"}', "has schema_version 2, this torchgate reads 1"),
    ('{"schema_version": 0, "kind": "bench"}', "has schema_version 0"),
    ('{"kind": "bench"}', "has schema_version None"),
    ('{"schema_version": 1, "kind": "env"}', "is not a torchgate bench record"),
    ('[1, 2]', "is not a torchgate bench record"),
])
def test_a_bad_record_is_one_line_that_says_what_to_do(tmp_path, text, message):
    path = tmp_path / "cpu-fp32.json"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        records.load_record(path, "bench")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_record_says_how_to_make_it(tmp_path):
    with pytest.raises(UserError, match="is missing; run `dvc repro`"):
        records.load_record(tmp_path / "nope.json", "bench")


def test_baseline_errors_without_git_or_with_a_bad_rev(tmp_path):
    with pytest.raises(UserError, match="is not a git repository; run `git init`"):
        baseline.resolve_rev("HEAD", tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert baseline.resolve_rev("HEAD", tmp_path) is None          # no commit yet: first run
    (tmp_path / "f").write_text("x")
    subprocess.run(["git", "add", "f"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "m"],
                   cwd=tmp_path, check=True)
    with pytest.raises(UserError, match="baseline.rev 'v9' is not a commit in this repository"):
        baseline.resolve_rev("v9", tmp_path)
    commit = baseline.resolve_rev("HEAD", tmp_path)
    assert baseline.load_baseline(commit, "reports/bench/x.json", "bench", tmp_path) is None
