"""The env stage: stable capture, the fingerprint that spares a capture when nothing changed,
diffing, and the page (written by the compare stage) against a git baseline."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchgate import compare, env
from torchgate.core.records import SCHEMA, dotted, dumps, load_record, packages, record_data
from torchgate.core.records.schema import EnvRecord
from torchgate.judge import environment
from torchgate.measure import fingerprint, probe

from .projects import REPORTS, ROOT


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                    "-c", "commit.gpgsign=false", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    _git("init", "-q", cwd=tmp_path)
    monkeypatch.chdir(tmp_path)
    # What a worker imports is read in a child that imports torch (tests/test_env_packages.py
    # tests it); these tests need only its result.
    monkeypatch.setattr(env, "worker_imports", lambda params: (["torch"], [], None))
    return tmp_path


def _commit_all(root: Path, message: str = "c") -> None:
    _git("add", "-A", cwd=root)
    _git("commit", "-q", "-m", message, cwd=root)


SAMPLE = {
    "python": {"version": "3.11.7", "implementation": "CPython"},
    "torch": {"version": "2.13.0", "num_threads": 8, "cuda": "12.8"},
    "hardware": {"cpu_model": "AMD EPYC 9654", "gpu_names": ["NVIDIA H100"],
                 "logical_cores": 16},
    "os": {"system": "Linux", "release": "6.1"},
    "packages": {"numpy": "2.4.6"},
    "flags": {"float32_matmul_precision": "highest"},
    "env_vars": {},
}


def test_capture_is_stable_and_complete():
    first, second = probe.capture(), probe.capture()
    assert dumps(first) == dumps(second)
    assert set(first) == set(probe.SECTIONS)
    assert first["torch"]["version"]
    assert first["python"]["implementation"]
    assert isinstance(first["hardware"]["gpu_names"], list)
    assert set(environment.hardware_key(first)) == {"cpu_model", "gpu_names", "torch_threads"}


def test_env_vars_keep_relevant_and_drop_volatile():
    kept = fingerprint.env_vars({
        "OMP_NUM_THREADS": "4", "TORCHINDUCTOR_MAX_AUTOTUNE": "1", "PYTORCH_CUDA_ALLOC_CONF":
        "expandable_segments:True", "HOME": "/home/u", "TORCHINDUCTOR_CACHE_DIR": "/tmp/x1",
        "TORCH_API_TOKEN": "s3cret", "TORCHELASTIC_RUN_ID": "abc", "TORCH_MASTER_PORT": "29500",
    })
    assert kept == {"OMP_NUM_THREADS": "4", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                    "TORCHINDUCTOR_MAX_AUTOTUNE": "1"}


def test_flatten_uses_dotted_keys_and_keeps_lists():
    flat = dotted.flatten({"a": {"b": 1, "c": {"d": None}}, "e": [1, 2], "f": {}})
    assert flat == {"a.b": 1, "a.c.d": None, "e": [1, 2]}


def test_diff_reports_changed_added_removed_sorted():
    now = copy.deepcopy(SAMPLE)
    now["torch"]["version"] = "2.14.0"
    now["packages"]["triton"] = "3.5.0"
    del now["packages"]["numpy"]
    assert environment.diff(SAMPLE, now) == [
        ("packages.numpy", "2.4.6", dotted.MISSING),
        ("packages.triton", dotted.MISSING, "3.5.0"),
        ("torch.version", "2.13.0", "2.14.0"),
    ]
    assert environment.diff(SAMPLE, copy.deepcopy(SAMPLE)) == []
    assert all(before is dotted.MISSING for _, before, _ in environment.diff(None, SAMPLE))


def test_hardware_key():
    assert environment.hardware_key(SAMPLE) == {"cpu_model": "AMD EPYC 9654",
                                        "gpu_names": ["NVIDIA H100"], "torch_threads": 8}
    assert environment.hardware_key({}) == {"cpu_model": None, "gpu_names": None, "torch_threads": None}


def test_render_md_without_baseline():
    md = compare.env_md(None, SAMPLE, "HEAD")
    assert md.startswith("# Environment\n")
    assert "| CPU " in md and "AMD EPYC 9654" in md and "NVIDIA H100" in md
    assert "## Change against the baseline (HEAD)" in md
    assert "No baseline yet: commit `reports/` to make this run the baseline." in md


def test_render_md_identical():
    md = compare.env_md(copy.deepcopy(SAMPLE), SAMPLE, "main")
    assert "No environment change against the baseline." in md
    assert "Hardware changed" not in md


def test_render_md_hardware_change_comes_first():
    base = copy.deepcopy(SAMPLE)
    base["hardware"]["gpu_names"] = ["NVIDIA A100"]
    base["packages"]["numpy"] = "2.0.0"
    md = compare.env_md(base, SAMPLE, "v1")
    section = md.split("## Change against the baseline (v1)")[1]
    assert "Hardware changed: timings are not comparable" in section
    assert section.index("Hardware changed") < section.index("| field")
    assert section.index("hardware.gpu_names") < section.index("packages.numpy")
    assert "NVIDIA A100" in section and "| now " in section


def test_render_md_escapes_pipes():
    now = copy.deepcopy(SAMPLE)
    now["hardware"]["cpu_model"] = "odd|name"
    assert "odd\\|name" in compare.env_md(None, now, "HEAD")


def test_main_first_run_then_hardware_change(repo):
    env.main([])
    record = record_data(load_record(repo / "reports/test-box/env/env.json", EnvRecord))
    assert set(record["env"]) == set(probe.SECTIONS)
    assert compare.env_page("HEAD", REPORTS) == "no baseline yet"
    assert "No baseline yet" in (repo / "reports/test-box/env/env.md").read_text()

    _commit_all(repo)
    env.main([])
    assert compare.env_page("HEAD", REPORTS) == "no change"
    assert "No environment change against the baseline." in (
        repo / "reports/test-box/env/env.md").read_text()
    assert subprocess.run(["git", "status", "--porcelain", "reports/test-box/env/env.json"], cwd=repo,
                          capture_output=True, text=True).stdout == ""  # byte-identical

    record["env"]["hardware"]["cpu_model"] = "Some Other CPU"
    (repo / "reports/test-box/env/env.json").write_text(dumps(record))
    _commit_all(repo)
    env.main([])            # an edited record is captured again
    assert "hardware changed" in compare.env_page("HEAD", REPORTS)
    md = (repo / "reports/test-box/env/env.md").read_text()
    assert "Hardware changed: timings are not comparable" in md
    assert "Some Other CPU" in md


def test_the_page_compares_with_the_baseline_rev_it_is_given(repo):
    env.main([])
    record = json.loads((repo / "reports/test-box/env/env.json").read_text())
    record["env"]["torch"]["version"] = "0.0.1"
    (repo / "reports/test-box/env/env.json").write_text(dumps(record))
    _commit_all(repo, "old")
    _git("tag", "old", cwd=repo)
    env.main([])
    _commit_all(repo, "new")
    compare.env_page("old", REPORTS)
    md = (repo / "reports/test-box/env/env.md").read_text()
    assert "## Change against the baseline (old)" in md
    assert "| torch.version " in md and "0.0.1" in md


def test_corrupt_baseline_is_reported_not_raised(repo):
    out = repo / "reports/test-box/env"
    out.mkdir(parents=True)
    (out / "env.json").write_text("{not json")
    _commit_all(repo)
    env.main([])
    assert compare.env_page("HEAD", REPORTS).startswith("baseline unreadable")
    md = (out / "env.md").read_text()
    assert "Baseline env.json unreadable: baseline reports/test-box/env/env.json at " in md
    assert "is not valid JSON" in md
    assert load_record(out / "env.json", EnvRecord).env["torch"]["version"]


def test_an_unknown_baseline_rev_is_said_on_the_page(repo):
    env.main([])
    _commit_all(repo)
    summary = compare.env_page("no-such-branch", REPORTS)
    assert summary.startswith("baseline unreadable") and "no-such-branch" in summary
    assert "no-such-branch" in (repo / "reports/test-box/env/env.md").read_text()


# ---- the no-op: an unchanged fingerprint stands for the capture -----------------------------

def test_an_unchanged_fingerprint_keeps_the_capture_without_importing_torch(repo, capsys):
    env.main([])
    path = repo / REPORTS / "env" / "env.json"
    before = path.read_bytes()
    recorded = json.loads((path.parent / "fingerprint.json").read_text())
    assert {k: v for k, v in recorded["fingerprint"].items() if k != "sources"} == json.loads(
        json.dumps(fingerprint.fingerprint()))
    # The stage as DVC runs it, in a fresh interpreter: the second run imports no torch.
    code = ("import runpy, sys; sys.argv = ['torchgate.env']; "
            "runpy.run_module('torchgate.env', run_name='__main__'); "
            "print('torch imported:', 'torch' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert "stands" in run.stdout and "torch imported: False" in run.stdout, run.stdout
    assert path.read_bytes() == before


def test_a_changed_fingerprint_or_an_edited_record_is_captured_again(repo, capsys,
                                                                     monkeypatch):
    env.main([])
    path = repo / REPORTS / "env" / "env.json"
    prints = path.parent / "fingerprint.json"
    good = path.read_bytes()
    calls = []
    real = probe.capture
    monkeypatch.setattr(probe, "capture", lambda modules=None: calls.append(1) or real(modules))

    env.main([])
    assert calls == [] and path.read_bytes() == good        # nothing changed: not captured

    stale = json.loads(prints.read_text())
    stale["fingerprint"]["installed"].append("torch-0.0.1.dist-info")   # an upgrade
    prints.write_text(dumps(stale))
    env.main([])
    assert calls == [1] and path.read_bytes() == good
    assert "captured: unchanged" in capsys.readouterr().out

    edited = json.loads(good)
    edited["env"]["torch"]["version"] = "0.0.1"     # the record edited, its digest not
    path.write_text(dumps(edited))
    env.main([])
    assert calls == [1, 1] and path.read_bytes() == good
    assert "1 field(s) changed since the last capture (torch.version" in capsys.readouterr().out


def test_the_stage_and_the_records_agree_on_the_schema_and_the_file_names():
    assert env.ENV_SCHEMA == SCHEMA["env"]
    assert env.PACKAGES == packages.PACKAGES


def test_the_cpu_features_that_decide_a_precisions_kernels_are_recorded(monkeypatch):
    """From /proc/cpuinfo's flags (x86) or Features (Arm): the known ones the CPU has, in the
    table's order; None where the file lists neither (the migration page then says so)."""
    cpuinfo = {"x86": "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f amx_bf16 amx_tile\n",
               "arm": "processor\t: 0\nFeatures\t: fp asimd asimdhp bf16 i8mm\n", "none": ""}
    for arch, features in (("x86", ["avx2", "fma", "avx512f", "amx_tile", "amx_bf16"]),
                           ("arm", ["asimd", "asimdhp", "bf16", "i8mm"]), ("none", None)):
        with monkeypatch.context() as patched:
            patched.setattr(probe, "read", lambda path, text=cpuinfo[arch]: text)
            assert probe.cpu_features() == features
    assert "cpu_features" in probe.capture()["hardware"]


def test_the_committed_fingerprint_names_the_interpreter_without_the_users_path(
        tmp_path, monkeypatch):
    from torchgate.measure.fingerprint import fingerprint
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.executable", str(tmp_path / ".venv" / "bin" / "python"))
    assert fingerprint()["executable"] == ".venv/bin/python"
