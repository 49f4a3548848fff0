"""What the tests share: the repository's root, the test machine's name, and a user's project
made, entered and run as the user would (git, `dvc`, a stage's module)."""
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from torchgate.core.names import importable

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def default_params() -> str:
    """params.yaml as conf/ composes it with no overrides: the README's own `torchgate compose
    matrix=smoke` rewrites the working copy, which the tests must not take for the defaults."""
    from torchgate.compose import compose
    with tempfile.TemporaryDirectory() as tmp:
        compose(Path(tmp) / "params.yaml", [])
        return (Path(tmp) / "params.yaml").read_text()


def committed_params() -> str:
    """params.yaml as this checkout's HEAD holds it (the working copy outside git)."""
    found = subprocess.run(["git", "show", "HEAD:params.yaml"], cwd=ROOT, capture_output=True,
                           text=True)
    return found.stdout if found.returncode == 0 else (ROOT / "params.yaml").read_text()
ENV_DVC_YAML = "reports/env/dvc.yaml"     # the env stage, with a lock file of its own
MACHINE = "test-box"                      # every test's machine (TORCHGATE_MACHINE)
REPORTS = Path("reports") / MACHINE       # its reports, relative to a project


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
    for name in ("config", ".gitignore"):
        shutil.copy(ROOT / ".dvc" / name, where / ".dvc" / name)
    shutil.copytree(ROOT / ".dvc" / "plots", where / ".dvc" / "plots")   # its plot templates
    (repository / ".gitignore").write_text("__pycache__/\n")
    git("init", "-q", cwd=repository)
    git("config", "user.email", "test@torchgate.invalid", cwd=repository)
    git("config", "user.name", "torchgate test", cwd=repository)
    return where


def enter_project(where: Path, monkeypatch) -> Path:
    """Work in the project `where` as its user would, with this interpreter's tools."""
    # Stage commands run `python -m torchgate...`: the interpreter running the tests, with the
    # project's own torchgate, as a user's install of the project (its stages/ is what
    # dvc.yaml's deps track), and the tests' modules.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([importable(where / "stages"), str(ROOT)]))
    monkeypatch.chdir(where)
    return where


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
    edits = {project / REPORTS / "env/env.json":
             lambda d: {**d, "env": {**d["env"], "hardware": {**d["env"]["hardware"],
                                                               "cpu_model": OTHER_CPU}}}}
    edits.update({path: _on_another_cpu
                  for path in (project / REPORTS / "bench").glob("*.json")})
    real = {path: path.read_text() for path in edits}
    for path, edit in edits.items():
        path.write_text(json.dumps(edit(json.loads(real[path]))))
    git("commit", "-qam", "baseline from another machine", cwd=project)
    for path, text in real.items():
        path.write_text(text)


def dvc(*args, cwd=None, check=True) -> subprocess.CompletedProcess:
    """`dvc ARGS` with this interpreter's dvc, in `cwd` (default: here); a failure is an
    assertion that shows what dvc said, unless `check=False`."""
    return run_module("dvc", *args, cwd=cwd, check=check)


def run_module(module, *args, cwd=None, check=True, timeout=600) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` (a stage, dvc) as the user's shell runs it."""
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{module} {' '.join(map(str, args))} failed "
                             f"({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def read(path) -> str:
    return Path(path).read_text(encoding="utf-8")
