"""The packages that matter: env.json lists torch's dependency closure and the distributions of
what a worker imports, so installing an unrelated package leaves it byte-identical (and `dvc
repro` re-measures nothing), while every installed one is recorded in packages.json and the
fingerprint lives in fingerprint.json beside them (end to end, through `dvc status`:
tests/test_pipeline.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from torchgate import env
from torchgate.arms import plan as plan_module
from torchgate.arms.plan import plan
from torchgate.core import config
from torchgate.core.records import SCHEMA, dotted, dumps, load_record, packages, write_record
from torchgate.core.records.schema import EnvRecord
from torchgate.judge import environment
from torchgate.measure import distributions, probe

from .projects import MACHINE, default_params, git, make_project

FIXTURES = Path(__file__).parent / "fixtures" / "schema"
OUT = Path("reports") / MACHINE / "env"


def dist(site: Path, name: str, version: str, requires=(), top=None, editable=False) -> None:
    """A fake installed distribution: its .dist-info folder with METADATA (and top_level.txt)."""
    for old in site.glob(f"{name.replace('-', '_')}-*.dist-info"):
        shutil.rmtree(old)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *[f"Requires-Dist: {r}" for r in requires]]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "top_level.txt").write_text((top or name.replace("-", "_")) + "\n")
    if editable:
        (info / "direct_url.json").write_text('{"url": "file:///src", "dir_info": {}}')


def bump(site: Path, name: str, version: str) -> None:
    """An upgrade of a fake distribution: the same metadata, another version."""
    (info,) = site.glob(f"{name.replace('-', '_')}-*.dist-info")
    text = "".join(f"Version: {version}\n" if line.startswith("Version:") else line
                   for line in (info / "METADATA").read_text().splitlines(keepends=True))
    (info / "METADATA").write_text(text)
    info.rename(site / f"{name.replace('-', '_')}-{version}.dist-info")


@pytest.fixture
def site(tmp_path):
    """torch needs dep-a, which needs dep-b; dep-x only as an extra, dep-win only on Windows; a
    workload imports wlpkg (distribution wl-pkg); `unrelated` is there and nothing uses it."""
    site = tmp_path / "site"
    dist(site, "torch", "2.0", ["dep-a", 'dep-x; extra == "x"',
                                'dep-win; sys_platform == "win32"'])
    dist(site, "dep-a", "1.0", ["Dep_B>=1"])
    dist(site, "dep-b", "1.0")
    dist(site, "dep-x", "1.0")
    dist(site, "dep-win", "1.0")
    dist(site, "wl-pkg", "1.0", top="wlpkg")
    dist(site, "unrelated", "1.0")
    return site


def test_what_matters_is_torchs_closure_and_what_is_imported(site):
    found = distributions.installed([str(site)])
    assert distributions.that_matter(["wlpkg.sub", "json", "torchgate.env"], found) == {
        "torch", "dep-a", "dep-b", "wl-pkg"}
    assert distributions.that_matter([], found) == {"torch", "dep-a", "dep-b"}
    dist(site, "mine", "0.1", editable=True)          # no index serves it again
    assert "mine" not in distributions.versions(distributions.installed([str(site)]))


def run_env(*extra: str) -> str:
    env.main(["--machine", MACHINE, *extra])
    return (OUT / "env.json").read_text()


@pytest.fixture
def faked(repo, site, monkeypatch):
    """The env stage reading the fake site's metadata (on sys.path, so that the fingerprint
    sees what is installed), a worker that imports torch and wlpkg."""
    monkeypatch.syspath_prepend(str(site))
    real = distributions.installed
    monkeypatch.setattr(distributions, "installed", lambda path=None: real([str(site)]))
    monkeypatch.setattr(env, "worker_imports", lambda params: (["torch", "wlpkg"], [], None))
    return site


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_unrelated_install_leaves_env_json_byte_identical(faked, capsys):
    first = run_env()
    data = json.loads(first)
    assert data["env"]["distributions"] == {"dep-a": "1.0", "dep-b": "1.0", "torch": "2.0",
                                            "wl-pkg": "1.0"}
    assert "fingerprint" not in data and "digest" not in data
    assert data["schema_version"] == SCHEMA["env"] == env.ENV_SCHEMA
    listed = json.loads((OUT / "packages.json").read_text())["distributions"]
    assert {"unrelated", "dep-x", "dep-win"} <= set(listed)
    stamp = (OUT / "env.json").stat().st_mtime_ns

    dist(faked, "pytest-fake", "1.0")                 # pip install pytest-fake
    bump(faked, "dep-x", "2.0")                       # an extra torch was not installed with
    assert run_env() == first
    assert (OUT / "env.json").stat().st_mtime_ns == stamp        # not even rewritten
    assert "captured: unchanged (4 of 8 installed distributions matter)" in \
        capsys.readouterr().out
    assert "pytest-fake" in json.loads((OUT / "packages.json").read_text())["distributions"]

    for name, version in (("torch", "2.1"), ("dep-b", "1.1"), ("wl-pkg", "1.1")):
        bump(faked, name, version)
        now = run_env()
        assert now != first and json.loads(now)["env"]["distributions"][name] == version
        assert f"distributions.{name}" in capsys.readouterr().out
        first = now


def test_the_fingerprint_is_kept_beside_env_json_and_stands_for_it(faked, capsys, monkeypatch):
    run_env()
    recorded = json.loads((OUT / "fingerprint.json").read_text())
    assert recorded["env_schema"] == env.ENV_SCHEMA
    assert set(recorded["written"]) == {"env.json", "packages.json"}
    calls = []
    real = probe.capture
    monkeypatch.setattr(probe, "capture", lambda modules=None: calls.append(1) or real(modules))
    run_env()
    assert calls == [] and "stands" in capsys.readouterr().out
    for edit in (lambda: (OUT / "packages.json").unlink(),           # deleted
                 lambda: (OUT / "env.json").write_text("{}"),          # edited
                 lambda: Path("params.yaml").write_text("workload: {}\n")):   # workloads
        edit()
        run_env()
        assert "captured" in capsys.readouterr().out
    assert len(calls) == 3 and load_record(OUT / "env.json", EnvRecord).env["torch"]


GOOD = "import wlpkg\n\ndef build(**kwargs):\n    pass\n"


def test_the_workloads_imports_are_read_in_a_child_and_a_broken_one_is_passed_over(repo, site,
                                                                                   monkeypatch):
    """a_good imports wlpkg; b_raises fails at import; c_exits ends the process that imports
    it: the env stage reads what it can and fails on none of them."""
    (site / "wlpkg").mkdir()
    (site / "wlpkg" / "__init__.py").write_text("")
    (repo / "a_good.py").write_text(GOOD)
    (repo / "b_raises.py").write_text("raise RuntimeError('broken on purpose')\n")
    (repo / "c_exits.py").write_text("import os\nos._exit(3)\n")
    params = yaml.safe_load(default_params())
    params["workload"] = {name: {"_target_": f"{name}.build"}
                          for name in ("a_good", "b_raises", "c_exits")}
    Path("params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(repo))
    modules, files, note = env.worker_imports("params.yaml")
    assert note is None
    assert {"torch", "torchgate.measure.worker", "a_good", "wlpkg"} <= set(modules)
    assert "b_raises" not in modules
    assert {"a_good.py", "b_raises.py", "c_exits.py"} <= set(files)   # edits re-read them
    assert not [f for f in files if f.startswith(("/", ".."))]


def test_unreadable_params_leave_the_workloads_out_not_the_stage(repo):
    Path("params.yaml").write_text("{not: yaml")
    modules, _, note = env.worker_imports("params.yaml")
    assert "torch" in modules and note.startswith("workloads not read (params.yaml is not valid")


# ---- comparing: the packages that matter, an older env.json on the names that matter now ----

V1 = json.loads((FIXTURES / "env-v1.json").read_text())


def test_an_older_env_json_reads_with_every_distribution_as_installed():
    record = load_record(FIXTURES / "env-v1.json", EnvRecord)
    assert record.env["installed"] == V1["env"]["distributions"]
    assert "distributions" not in record.env


def test_an_older_baseline_compares_on_the_names_that_matter_now():
    old = load_record(FIXTURES / "env-v1.json", EnvRecord).env
    old["installed"] = {**old["installed"], "pytest": "9.0", "torch": "2.12.0"}
    old["packages"] = {**old["packages"], "intel-extra": "1.0"}      # not imported now
    now = {**old, "distributions": {"torch": "2.13.0", "numpy": "2.4.6"}}
    del now["installed"]
    now["packages"] = {"torch": "2.13.0", "numpy": "2.4.6"}
    old["installed"]["numpy"] = old["packages"]["numpy"] = "2.4.6"
    old["packages"]["torch"] = "2.12.0"
    changed = {field for field, _, _ in environment.diff(old, now)}
    assert changed == {"distributions.torch", "packages.torch"}
    base, here = packages.that_matter(old, now)
    assert base == {"torch": "2.12.0", "numpy": "2.4.6"} and here == now["distributions"]
    # Another interpreter's capture: what matters there (a new dependency of its torch), and
    # every installed distribution, compared on the names that matter here.
    candidate = {**now, "distributions": {"torch": "2.14.0", "new-dep": "1.0"},
                 "installed": {"torch": "2.14.0", "new-dep": "1.0", "numpy": "2.4.7",
                               "pytest": "9.0"}}
    assert {c[0]: c[1:] for c in environment.diff(now, candidate)} == {
        "distributions.new-dep": (dotted.MISSING, "1.0"),
        "distributions.numpy": ("2.4.6", "2.4.7"), "distributions.torch": ("2.13.0", "2.14.0")}


def test_a_venv_is_rebuilt_from_every_installed_distribution():
    env_ = {"distributions": {"torch": "2.13.0"}}
    every = {"torch": "2.13.0", "filelock": "3.0", "pytest": "9.0"}
    assert packages.every_installed(json.dumps({"distributions": every}), env_, "p") == every
    assert packages.every_installed(None, env_, "p") == env_["distributions"]
    assert packages.every_installed(None, {"installed": every}, "p") == every
    with pytest.raises(Exception, match="p is not a torchgate package list"):
        packages.every_installed("[]", env_, "p")


# ---- baseline.measure=auto -----------------------------------------------------------------

@pytest.fixture
def project_repo(tmp_path, monkeypatch):
    root = make_project(tmp_path / "repo", tmp_path / "repo")
    (root / "stages" / "workloads" / "tagged.py").write_text(
        "def tagged(*, device, dtype, compile, seed):\n    pass\n")
    (root / "params.yaml").write_text(json.dumps({
        "device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
        "workload": {"t": {"_target_": "torchgate.workloads.tagged.tagged"}},
        "matrix": {"modes": ["eager"]}, "arms": {"cache_dir": str(tmp_path / "cache")}}))
    monkeypatch.chdir(root)
    built = []
    monkeypatch.setattr(plan_module, "_materialise",
                        lambda cfg, spec, cache, log: built.append(spec) or "/venv/bin/python")
    return root, built


def _env(distributions_: dict) -> EnvRecord:
    return EnvRecord({"python": {"version": "3.11.7"}, "distributions": distributions_})


def test_auto_ignores_a_package_that_does_not_matter(project_repo):
    root, built = project_repo
    cfg = config.parse(json.loads((root / "params.yaml").read_text()))
    folder = root / cfg.reports / "env"
    older = {"schema_version": 1, "kind": "env", "fingerprint": {}, "digest": None,
             "env": {"python": {"version": "3.11.7"},
                     "distributions": {"torch": "2.13.0", "pytest": "8.0", "ipython": "9"}}}
    folder.mkdir(parents=True)
    (folder / "env.json").write_text(dumps(older))            # every distribution, schema 1
    git("add", "-A", cwd=root)
    git("commit", "-qm", "baseline", cwd=root)
    write_record(folder / "env.json", _env({"torch": "2.13.0"}))
    found = plan(cfg)
    assert found.unchanged and not built

    write_record(folder / "env.json", _env({"torch": "2.13.0"}))
    (folder / "packages.json").write_text(json.dumps({"distributions": {
        "torch": "2.13.0", "filelock": "3.0", "pytest": "9.0"}}))
    git("add", "-A", cwd=root)
    git("commit", "-qm", "a baseline of schema 2", cwd=root)
    write_record(folder / "env.json", _env({"torch": "2.14.0"}))
    found = plan(cfg)
    assert found.rebuilt and "packages differ" in found.note
    assert built[-1].pins == ("filelock==3.0", "pytest==9.0", "torch==2.13.0")  # packages.json
