import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV_DVC_YAML = "reports/env/dvc.yaml"     # the env stage, with a lock file of its own
MACHINE = "test-box"                      # every test's machine (TORCHGATE_MACHINE)
REPORTS = Path("reports") / MACHINE       # its reports, relative to a project


@pytest.fixture(autouse=True)
def machine_name(monkeypatch):
    """Every test runs as machine MACHINE, whatever hardware runs the suite; a test of the
    derived name removes the variable."""
    monkeypatch.setenv("TORCHGATE_MACHINE", MACHINE)


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run where torch sees a CUDA device, and are skipped, with the
    reason, elsewhere (torch is imported only when such a test was collected)."""
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    try:
        import torch
        present = torch.cuda.is_available()
    except Exception:
        present = False
    if not present:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def init_repo(path: Path) -> Path:
    """An empty git repository with an author, for tests that commit records by hand."""
    git("init", "-q", cwd=path)
    git("config", "user.email", "t@t.invalid", cwd=path)
    git("config", "user.name", "t", cwd=path)
    return path


def make_project(where: Path, repository: Path) -> Path:
    """torchgate's pipeline files in `where`, inside the git repository `repository` (the
    same folder, or a parent: a project kept in a subdirectory of a larger repository)."""
    where.mkdir(parents=True, exist_ok=True)
    for name in ("conf", "stages", "dvc.yaml", ".dvcignore", ENV_DVC_YAML):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, where / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, where / name)
    (where / ".dvc").mkdir()
    shutil.copy(ROOT / ".dvc" / "config", where / ".dvc" / "config")
    (repository / ".gitignore").write_text("__pycache__/\n")
    git("init", "-q", cwd=repository)
    git("config", "user.email", "test@torchgate.invalid", cwd=repository)
    git("config", "user.name", "torchgate test", cwd=repository)
    return where


def enter_project(where: Path, monkeypatch) -> Path:
    """Work in the project `where` as its user would, with this interpreter's tools."""
    # Stage commands run `python -m stages...`: the interpreter running the tests.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(where)
    return where


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A fresh git repository holding torchgate's pipeline files, as a user's fork would."""
    return enter_project(make_project(tmp_path, tmp_path), monkeypatch)


OTHER_CPU = "Some Other CPU 9000"


def _on_another_cpu(data: dict) -> dict:
    """A bench record whose processes say they ran on OTHER_CPU (each records its hardware)."""
    for run in data.get("workloads", {}).values():
        for proc in run.get("processes", []):
            if (proc.get("host") or {}).get("hardware"):
                proc["host"]["hardware"]["cpu_model"] = OTHER_CPU
    return data


def commit_baseline_from_another_cpu(project: Path) -> None:
    """Commit the current reports as a baseline measured on another CPU model (the
    environment's and every bench process's), and leave the workspace's files as this
    machine's."""
    edits = {project / "reports/test-box/env/env.json":
             lambda d: {**d, "env": {**d["env"], "hardware": {**d["env"]["hardware"],
                                                               "cpu_model": OTHER_CPU}}}}
    edits.update({path: _on_another_cpu for path in (project / "reports/test-box/bench").glob("*.json")})
    real = {path: path.read_text() for path in edits}
    for path, edit in edits.items():
        path.write_text(json.dumps(edit(json.loads(real[path]))))
    git("commit", "-qam", "baseline from another machine", cwd=project)
    for path, text in real.items():
        path.write_text(text)


@pytest.fixture
def github(monkeypatch):
    """A local stand-in of GitHub's API, and the environment that points the poster at it."""
    from tests.github_standin import GitHubStandIn

    with GitHubStandIn() as hub:
        monkeypatch.setenv("GITHUB_API_URL", hub.url)
        monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
        yield hub
