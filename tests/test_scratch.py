"""Scratch space and shared caches per user: <temp dir>/torchgate-<uid>, private or refused;
the numerics workers' shared inductor cache lives there; a killed run's folder is removed by
the next run."""
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from torchgate.core import config, scratch
from torchgate.core.errors import UserError
from torchgate.launch.jobs import job_for
from torchgate.launch.local import run_worker

from .projects import ROOT


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    """A temp dir of this test's own, and no run folder made yet."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(scratch, "_run", None)
    return tmp_path


def test_the_scratch_folder_is_the_users_own_and_private(tmp):
    made = scratch.inductor_cache()
    assert made == tmp / f"torchgate-{os.getuid()}" / "inductor"
    for path in (made, made.parent):
        assert path.stat().st_mode & 0o777 == 0o700 and path.stat().st_uid == os.getuid()


@pytest.mark.parametrize("plant, problem", [
    (lambda path: (path.mkdir(), path.chmod(0o777)), "is writable by other users"),
    (lambda path: path.symlink_to(path.parent), "is not a folder"),
    (lambda path: path.mkdir(), "belongs to another user"),
])
def test_a_scratch_folder_planted_by_someone_else_is_refused_in_one_line(tmp, monkeypatch,
                                                                          plant, problem):
    path = tmp / f"torchgate-{os.getuid()}"
    plant(path)
    if problem == "belongs to another user":
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
        path.rename(tmp / f"torchgate-{uid + 1}")
    with pytest.raises(UserError, match=f"{problem}.*; torchgate keeps compiled code there "
                                        "and will not trust it: remove it, or set TMPDIR to a "
                                        "folder of your own"):
        scratch.inductor_cache()


HOLDER = """
import sys, time
from torchgate.core import scratch
print(scratch.run_dir(), flush=True)
time.sleep(3600)
"""


def test_a_killed_runs_folder_is_removed_by_the_next_run_and_a_live_ones_kept(tmp,
                                                                             monkeypatch):
    env = {**os.environ, "TMPDIR": str(tmp)}
    killed, live = (subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, text=True) for _ in range(2))
    try:
        folders = [Path(p.stdout.readline().strip()) for p in (killed, live)]
        (folders[0] / "inductor-of-a-worker").mkdir()
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        monkeypatch.setattr(scratch, "YOUNG_S", 0)
        mine = scratch.run_dir()
        assert not folders[0].exists() and folders[1].exists() and mine.exists()
    finally:
        for p in (killed, live):
            p.kill()
            p.wait()


def test_numerics_workers_share_an_inductor_cache_of_this_users_own(tmp):
    noted = tmp / "noted"
    raw = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
           "workload": {"w": {"_target_": "tests.process_workloads.notes_its_inductor_cache",
                              "path": str(noted)}},
           "matrix": {"modes": ["eager"]}}
    cfg = config.parse(raw)
    job = job_for(cfg, cfg.cells()[0], [cfg.workloads["w"]], "numerics")
    assert run_worker(job, timeout_s=120, fresh_compile_cache=False)["status"] == "OK"
    private = tmp / f"torchgate-{os.getuid()}"
    assert noted.read_text() == str(private / "inductor")
    assert private.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in (private / "runs").iterdir()] == [scratch.run_dir().name]


def test_a_compile_cache_named_by_a_driver_is_this_users_own_folder(tmp_path, monkeypatch):
    """A Ray driver names a unit's inductor cache; the node resolves the name under its own
    user's private scratch (a path from the driver could be another user's folder there, who
    could plant compiled code); a cold round finds it empty, a warm one as the last left it."""
    monkeypatch.setattr(scratch.tempfile, "gettempdir", lambda: str(tmp_path))
    cold = scratch.compile_cache("caches-abc/now-w", cold=True)
    assert cold == tmp_path / f"torchgate-{os.getuid()}" / "compile" / "caches-abc" / "now-w"
    (cold / "entry").write_text("compiled")
    assert (scratch.compile_cache("caches-abc/now-w", cold=False) / "entry").exists()
    assert not (scratch.compile_cache("caches-abc/now-w", cold=True) / "entry").exists()
    assert cold.stat().st_mode & 0o077 == 0
    for name in ("/etc/x", "../x/y", "caches-abc", "a/b/c", "caches-abc/.."):
        with pytest.raises(ValueError, match="not a compile cache name"):
            scratch.compile_cache(name, cold=False)
