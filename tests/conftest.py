import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A fresh git repository holding torchgate's pipeline files, as a user's fork would."""
    for name in ("conf", "stages", "dvc.yaml", ".dvcignore"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, tmp_path / name)
    (tmp_path / ".dvc").mkdir()
    shutil.copy(ROOT / ".dvc" / "config", tmp_path / ".dvc" / "config")
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    git("init", "-q", cwd=tmp_path)
    git("config", "user.email", "test@torchgate.invalid", cwd=tmp_path)
    git("config", "user.name", "torchgate test", cwd=tmp_path)
    # Stage commands run `python -m stages...`: the interpreter running the tests.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(tmp_path)
    return tmp_path
