"""The arms cache: one builder per entry (the others wait, then reuse), entries built in place
and complete only with their marker, checked before use (owner, a venv's spec and platform,
its python runs), the litter of killed builds swept, least recently used entries evicted.
Venvs are built by a fake installer here (test_arms builds real ones)."""
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchgate.arms import cache, venv
from torchgate.arms.cache import MARKER, complete, ensure, evict, release
from torchgate.core.errors import UserError

from .projects import ROOT


@pytest.fixture(autouse=True)
def let_go():
    yield
    release()


def folder_builder(calls: list, content: str = "x"):
    def build(folder: Path) -> None:
        calls.append(folder)
        folder.mkdir()
        (folder / "file").write_text(content)
    return build


BUILDER = """
import sys, time
from pathlib import Path
from torchgate.arms.cache import ensure
path, log = Path(sys.argv[1]), Path(sys.argv[2])
def build(folder):
    folder.mkdir()
    with open(log, "a") as fh:
        fh.write("built\\n")
    time.sleep(float(sys.argv[3]))
print("built" if ensure(path, build) else "reused", flush=True)
time.sleep(float(sys.argv[4]))
"""


def builder(path: Path, log: Path, build_s: float, hold_s: float = 0):
    return subprocess.Popen([sys.executable, "-c", BUILDER, str(path), str(log), str(build_s),
                             str(hold_s)], cwd=ROOT, stdout=subprocess.PIPE, text=True)


def test_parallel_builders_of_one_entry_build_it_once_and_the_others_reuse_it(tmp_path):
    path, log = tmp_path / "venvs" / "k", tmp_path / "log"
    first = builder(path, log, build_s=2, hold_s=30)       # builds, then keeps using it
    while not log.exists():
        time.sleep(0.02)
    others = [builder(path, log, build_s=0) for _ in range(2)]
    try:
        said = [p.communicate(timeout=120)[0].strip() for p in others]
        assert said == ["reused", "reused"] and log.read_text() == "built\n"
        assert complete(path)
    finally:
        first.kill()
        first.wait()


def test_a_build_killed_outright_is_removed_and_built_again(tmp_path):
    path, log = tmp_path / "venvs" / "k", tmp_path / "log"
    killed = builder(path, log, build_s=3600)
    while not log.exists():
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert path.is_dir() and not complete(path)         # what a killed build leaves
    calls = []
    assert ensure(path, folder_builder(calls)) is True and calls == [path]
    assert complete(path) and (path / "file").read_text() == "x"
    assert ensure(path, folder_builder(calls)) is False and len(calls) == 1


def test_a_failed_build_leaves_nothing(tmp_path):
    def build(folder):
        folder.mkdir()
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        ensure(tmp_path / "code" / "c", build)
    assert not (tmp_path / "code" / "c").exists()


def test_an_entry_of_another_user_is_refused_in_one_line(tmp_path, monkeypatch):
    path = tmp_path / "venvs" / "k"
    ensure(path, folder_builder([]))
    release()
    monkeypatch.setattr(os, "getuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(UserError, match=r"venvs/k in the arms cache belongs to another user "
                                        r"\(uid \d+\) and would run as you; set "
                                        r"arms.cache_dir to a folder of your own"):
        ensure(path, folder_builder([]))


def fake_installer(monkeypatch, calls: list):
    """venv + pip stood in for: a `python` that runs (a shell script), nothing installed."""
    def create(installer, base, folder):
        calls.append(folder)
        (folder / "bin").mkdir(parents=True)
        (folder / "bin" / "python").write_text("#!/bin/sh\nexit 0\n")
        (folder / "bin" / "python").chmod(0o755)
    monkeypatch.setattr(venv, "_create", create)
    monkeypatch.setattr(venv, "_install", lambda installer, folder, args: None)
    monkeypatch.setattr(venv, "installed", lambda python: {"tabulate": "1.0"})


SPEC = venv.VenvSpec(".".join(map(str, sys.version_info[:3])), ("tabulate==1.0",),
                     installer="pip")


def test_a_venv_is_built_where_it_stays_and_checked_before_each_use(tmp_path, monkeypatch):
    calls, lines = [], []
    fake_installer(monkeypatch, calls)
    python = Path(venv.materialise(SPEC, tmp_path, lines.append))
    folder = python.parents[1]
    assert calls == [folder]                   # built at its final path: nothing renamed
    assert json.loads((folder / venv.SPEC_FILE).read_text())["pins"] == ["tabulate==1.0"]
    venv.materialise(SPEC, tmp_path, lines.append)
    assert lines[-1] == f"reusing the venv {folder}" and len(calls) == 1

    python.write_text("#!/nonexistent/python3.11\n")      # its base interpreter is gone
    venv.materialise(SPEC, tmp_path, lines.append)
    assert f"building {folder} again: its python does not run (its base interpreter was " \
           "removed?)" in lines and len(calls) == 2
    spec_file = folder / venv.SPEC_FILE
    spec_file.write_text(spec_file.read_text().replace("tabulate==1.0", "tabulate==0.1"))
    venv.materialise(SPEC, tmp_path, lines.append)
    assert f"building {folder} again: its {venv.SPEC_FILE} is not this spec's" in lines
    assert len(calls) == 3


def test_the_key_holds_the_platform(monkeypatch):
    here = SPEC.key
    monkeypatch.setattr(venv.platform, "machine", lambda: "aarch64-elsewhere")
    assert SPEC.key != here and venv.carried(SPEC)["machine"] == "aarch64-elsewhere"


def aged(path: Path, hours: float) -> Path:
    when = time.time() - hours * 3600
    os.utime(path, (when, when))
    return path


def test_the_litter_of_killed_builds_is_swept_once_stale_and_unlocked(tmp_path):
    venvs = tmp_path / "venvs"
    old_tmp = venvs / ".abc.x1y2.tmp"                 # an older version's rename-into-place
    (old_tmp / "lib").mkdir(parents=True)
    stale, fresh, building = (venvs / name for name in ("stale", "fresh", "building"))
    for path in (stale, fresh, building):
        path.mkdir()
    done = venvs / "done"
    ensure(done, folder_builder([]))
    for path in (old_tmp, stale, building, done):
        aged(path, 4)
    lock = os.open(venvs / "building.build.lock", os.O_RDONLY | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)                   # a build in progress, elsewhere
    try:
        assert sorted(p.name for p in cache.tidy(tmp_path)) == [".abc.x1y2.tmp", "stale"]
    finally:
        os.close(lock)
    assert fresh.exists() and building.exists() and complete(done)


def filled(path: Path, mib: int, used_hours_ago: float) -> Path:
    def build(folder):
        folder.mkdir()
        (folder / "blob").write_bytes(os.urandom(mib << 20))
    ensure(path, build)
    aged(path / MARKER, used_hours_ago)
    return path


def test_the_least_recently_used_entries_go_first_and_one_in_use_stays(tmp_path, capsys):
    oldest = filled(tmp_path / "venvs" / "oldest", 2, used_hours_ago=30)
    older = filled(tmp_path / "code" / "older", 2, used_hours_ago=20)
    release()
    held = filled(tmp_path / "venvs" / "held", 2, used_hours_ago=40)    # this run uses it
    recent = filled(tmp_path / "venvs" / "recent", 2, used_hours_ago=1)
    lines = []
    gone = evict(tmp_path, keep_gb=4.5 / 1024, log=lines.append)
    assert gone == [oldest, older] and lines[0].startswith(f"evicted {oldest} (")
    assert complete(held) and complete(recent)
    release()
    cache.main(["--cache-dir", str(tmp_path), "--evict", "--keep-gb", "0"])
    out = capsys.readouterr().out
    assert f"evicted {held}" in out and "0.00 GB in 0 entries" in out


def test_a_failed_build_holds_no_lock_another_run_would_wait_on(tmp_path):
    path, log = tmp_path / "venvs" / "k", tmp_path / "log"
    path.mkdir(parents=True)                    # a killed build's: removed, then built again

    def build(folder):
        folder.mkdir()
        raise UserError("the rebuilt environment got torch None, not the recorded 9.9.9")
    with pytest.raises(UserError):
        ensure(path, build)
    other = builder(path, log, build_s=0)       # while this process lives on
    try:
        assert other.communicate(timeout=60)[0].strip() == "built"
    finally:
        other.kill()
        other.wait()
