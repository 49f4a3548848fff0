"""The import name is torchgate, its folder in a checkout stages/ (core.names): the
distribution installs that one package; a process without the install imports this very
folder; the names of older revisions (`stages.workloads.x` in configs, records and their
code) read as today's; `python -m stages.<tool>` still runs, with a line naming the new
spelling; and a neighbour distribution's `stages` cannot take torchgate's files with it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import version as version_of
from pathlib import Path

import pytest
import yaml

import torchgate.workloads
from torchgate.core.config import parse
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.config.targets import load_target, module_closure, module_paths
from torchgate.core.names import current, importable
from torchgate.core.records import load_record
from torchgate.core.records.schema import BenchRecord

from .projects import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "schema"


def test_the_distribution_installs_every_folder_of_the_package_as_torchgate():
    tomllib = pytest.importorskip("tomllib")      # Python 3.11
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"torchgate": "stages"}
    folders = {p.parent for p in (ROOT / "stages").rglob("*.py") if "__pycache__" not in p.parts}
    assert set(setuptools["packages"]) == {
        ".".join(("torchgate", *f.relative_to(ROOT / "stages").parts)) for f in folders}
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"torchgate": "torchgate.torchgate:main"}


def test_an_older_name_is_todays_in_one_place():
    assert current("stages.workloads.decoder.gpt") == "torchgate.workloads.decoder.gpt"
    assert current("stages") == "torchgate"
    for name in ("torchgate.workloads.x", "stagesx.y", "my_models.stages.f", "tests.x.y"):
        assert current(name) == name
    # A configuration or params.yaml of an older revision: its targets are today's.
    cfg = parse(yaml.safe_load((FIXTURES / "params.yaml").read_text()))
    assert cfg.workloads and all(w.target.startswith("torchgate.workloads.")
                                 for w in cfg.workloads.values())
    assert WorkloadSpec("m", "stages.workloads.matmul_relu") == WorkloadSpec(
        "m", "torchgate.workloads.matmul_relu")
    assert load_target("stages.workloads.matmul_relu") is torchgate.workloads.matmul_relu
    # Its files in a checkout: stages/, as dvc.yaml's deps name them.
    assert module_paths("stages.workloads.lowp.fp8_matmul", ROOT) == [
        "stages/workloads/lowp.py"] == module_paths("torchgate.workloads.lowp.fp8_matmul", ROOT)
    assert "stages/workloads/__init__.py" in module_closure("torchgate.workloads.lowp.f", ROOT)


def test_an_older_record_compares_with_todays_unit_for_unit(tmp_path):
    """A baseline written before the rename names its targets `stages.workloads.x`: it reads
    as the same workload as today's record, never as a changed definition."""
    old = load_record(FIXTURES / "bench-v17.json", BenchRecord)
    (tmp_path / "bench.json").write_text((FIXTURES / "bench-v17.json").read_text().replace(
        '"stages.workloads.', '"torchgate.workloads.'))
    now = load_record(tmp_path / "bench.json", BenchRecord)
    (name,) = old.workloads
    assert old.workloads[name].spec.target == "torchgate.workloads.matmul_relu"
    assert old.workloads[name].spec == now.workloads[name].spec


def run(code: str, *args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args, "-c", code] if code else
                          [sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_a_process_without_the_install_imports_this_folder_by_its_own_paths(tmp_path):
    """-S: no site-packages, so no install; the link folder first on the path is all it has.
    Its modules are the folder's files (a traceback names them; the env stage counts them as
    the project's)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import torchgate.core.metrics as m, "
            "torchgate; print(torchgate.__file__); print(m.__file__)")
    shown = subprocess.run([sys.executable, "-S", "-c", code, importable()], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [str(ROOT / "stages" / "__init__.py"),
                                    str(ROOT / "stages" / "core" / "metrics.py")]
    # Another copy of the folder (another checkout): its link leads there, not here.
    copy = tmp_path / "checkout" / "stages"
    shutil.copytree(ROOT / "stages", copy, ignore=shutil.ignore_patterns("__pycache__"))
    other = subprocess.run([sys.executable, "-S", "-c", code, importable(copy)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert other.stdout.split()[0] == str(copy / "__init__.py"), other.stderr


OLDER_CODE = """
import sys
from torchgate.core.names import alias_old_names
alias_old_names()
from stages.workloads import Workload
import stages.workloads.vision, stages.core.errors
import torchgate.workloads, torchgate.workloads.vision, torchgate.core.errors
assert Workload is torchgate.workloads.Workload
assert stages.workloads.vision is torchgate.workloads.vision
assert torchgate.workloads.__spec__.name == "torchgate.workloads"
files = [m.__file__ for n, m in sys.modules.items() if n.startswith(("stages", "torchgate"))
         and getattr(m, "__file__", None)]
print(len(files), len(set(files)))
"""


def test_older_code_imports_todays_modules_never_a_second_copy():
    shown = run(OLDER_CODE)
    assert shown.returncode == 0, shown.stderr
    listed, distinct = shown.stdout.split()
    assert int(listed) > int(distinct) > 5        # each file once, under both names


def test_a_neighbours_stages_package_is_left_to_it(tmp_path):
    """Where another distribution's `stages` is importable, older code's names do not take
    it over: it stays theirs."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "__init__.py").write_text("WHOSE = 'theirs'\n")
    (tmp_path / "stages" / "train.py").write_text("STEPS = 3\n")
    code = ("from torchgate.core.names import alias_old_names; alias_old_names()\n"
            "import stages.train, stages, torchgate\n"
            "print(stages.WHOSE, stages.train.STEPS, stages is torchgate)")
    shown = run(code, cwd=tmp_path)
    assert shown.stdout.split() == ["theirs", "3", "False"], shown.stderr


# Started first in the process (a sitecustomize on PYTHONPATH): at its exit, each module
# object the package's files were loaded as, with its names.
LOADED = """
import atexit, json, os, sys
def loaded():
    found = {}
    for name, m in list(sys.modules.items()):
        if (getattr(m, "__file__", None) or "").startswith(os.environ["PACKAGE"]):
            found.setdefault(m.__file__, {}).setdefault(str(id(m)), []).append(name)
    print("LOADED", json.dumps(found), file=sys.stderr)
atexit.register(loaded)
"""


@pytest.mark.parametrize("module, now", [("stages.compose", "torchgate compose"),
                                         ("stages.arms.cache", "torchgate cache"),
                                         ("stages.bench", "python -m torchgate.bench")])
def test_the_old_spelling_still_runs_once_more_with_a_line_naming_the_new(module, now, tmp_path):
    """`python -m stages.<tool>` in a checkout: the tool runs (its --help here), one line on
    stderr names its replacement, and each file loads once, as torchgate's (the entry runs as
    __main__; `stages` names the package itself)."""
    (tmp_path / "sitecustomize.py").write_text(LOADED)
    shown = run("", "-m", module, "--help", PYTHONPATH=str(tmp_path),
                PACKAGE=str(ROOT / "stages"))
    assert shown.returncode == 0, shown.stderr
    said, loaded = shown.stderr.rstrip("\n").rsplit("\n", 1)
    assert said == (f"torchgate: `python -m {module}` is the old spelling and stops working "
                    f"in the next release; use `{now}`")
    copies = json.loads(loaded.removeprefix("LOADED "))
    assert {f: len(c) for f, c in copies.items() if len(c) > 1} == {}, copies
    assert "torchgate.core.cli" in {n for c in copies.values() for ns in c.values() for n in ns}
    assert shown.stdout.startswith(("usage:", "Compose conf/"))


def test_the_old_import_name_says_so_in_one_line():
    shown = run("import stages, torchgate; print(stages is torchgate)", "-W", "error")
    assert shown.stdout.split() == ["True"]
    assert shown.stderr.splitlines() == ["torchgate: the import name stages is the old spelling "
                                         "and stops working in the next release; use `import "
                                         "torchgate`"]


OLDER_REVISION = {
    "__init__.py": "class Unsupported(Exception):\n    pass\n\n\nclass Workload:\n    pass\n",
    "lowp.py": textwrap.dedent("""\
        from stages.core.errors import clip
        from stages.workloads import Unsupported


        def fp8(**kwargs):
            raise Unsupported(clip("no float8 here"))
        """),
}


@pytest.mark.slow
def test_an_older_revisions_workloads_run_with_this_harness(tmp_path):
    """The other arm's worker (measure.build.use_code) imports an older revision's folder as
    torchgate.workloads; its code imports by the old name and reaches the same modules, this
    harness's for the rest, and its Unsupported counts as such."""
    folder = tmp_path / "rev" / "stages" / "workloads"
    folder.mkdir(parents=True)
    for name, text in OLDER_REVISION.items():
        (folder / name).write_text(text)
    code = textwrap.dedent("""\
        import sys
        from torchgate.core.config.targets import load_target
        from torchgate.measure.build import failure, use_code
        use_code(sys.argv[1])
        import torchgate.workloads, stages.workloads
        try:
            load_target("stages.workloads.lowp.fp8")()
        except Exception as exc:
            print(failure(exc).status, torchgate.workloads.__file__,
                  stages.workloads is torchgate.workloads, sep="\\n")
        """)
    shown = subprocess.run([sys.executable, "-c", code, str(tmp_path / "rev")], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert shown.stdout.split("\n")[:3] == ["SKIPPED", str(folder / "__init__.py"), "True"], \
        shown.stderr[-2000:]


NEIGHBOUR = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "1.0"

[tool.setuptools]
packages = ["stages"]
"""


@pytest.mark.slow
def test_a_neighbour_that_ships_stages_cannot_take_torchgates_files(tmp_path):
    """The issue: pip merges every distribution's `stages` into one folder, and uninstalling
    one deletes the files they share. torchgate installs `torchgate` alone: two neighbours
    that ship `stages`, one uninstalled, leave it whole. Built here, offline (no
    dependencies: torchgate --no-deps)."""
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    wheels = tmp_path / "wheels"
    for name in ("ml-stages-a", "ml-stages-b"):
        src = tmp_path / name
        (src / "stages").mkdir(parents=True)
        (src / "pyproject.toml").write_text(NEIGHBOUR.format(name=name))
        (src / "stages" / "__init__.py").write_text(f"WHOSE = {name!r}\n")
        subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                        str(src)], check=True, timeout=120)
    source = tmp_path / "torchgate-src"        # the working tree, as `pip install .` takes it
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "*.egg-info", "__pycache__", "reports", "build", ".pytest_cache"))
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(source)], check=True, timeout=120)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([*pip, "--python", python, "install", "--no-deps", "--no-index",
                    *sorted(map(str, wheels.glob("*.whl")))], check=True, timeout=120)
    record = next((venv / "lib").glob("python*/site-packages/torchgate-*.dist-info/RECORD"))
    files = [line.split(",")[0] for line in record.read_text().splitlines()]
    assert not [f for f in files if not f.startswith(("torchgate/", "torchgate-", "../"))]
    subprocess.run([*pip, "--python", python, "uninstall", "-y", "ml-stages-a"], check=True,
                   timeout=120)
    site = record.parent.parent
    assert not (site / "stages" / "__init__.py").exists(), "the neighbours' shared file"
    left = subprocess.run([python, "-c", "import torchgate, torchgate.core.metrics; "
                           "print(torchgate.__file__)"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert left.returncode == 0, left.stderr
    assert left.stdout.strip() == str(site / "torchgate" / "__init__.py")
    version = subprocess.run([str(venv / "bin" / "torchgate"), "--version"], capture_output=True,
                             text=True, cwd=tmp_path, timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"torchgate {version_of('torchgate')}"
    # The pull-request comment jobs install torchgate so (`pip install --no-deps .`): the
    # comment must run on the standard library alone.
    comment = subprocess.run([python, "-m", "torchgate.comment", "--help"], capture_output=True,
                             text=True, cwd=tmp_path, timeout=60)
    assert comment.returncode == 0 and "--verify-only" in comment.stdout, comment.stderr


def test_a_stage_in_a_project_runs_that_projects_code_or_says_so(tmp_path, monkeypatch):
    """dvc.yaml's code deps track the project's stages/: a stage that would run another
    checkout's installed torchgate stops in one line; a copy of the same code runs."""
    import shutil

    from torchgate.core import cli
    from torchgate.core.names import PACKAGE
    shutil.copytree(PACKAGE, tmp_path / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.chdir(tmp_path)
    cli.own_code("bench")                                        # the same code: runs
    (tmp_path / "stages/judge/stats.py").write_text("# edited\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"^python -m torchgate.bench: error: this Python's "
                                         r"torchgate is .*, not this project's stages/"):
        cli.own_code("bench")
    assert cli.parse("compose", "", []).params == "params.yaml"   # a tool: any project's
