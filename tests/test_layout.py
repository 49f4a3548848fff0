"""The layout's rules, checked on the code itself: dvc.yaml's code deps cover every file each
stage runs (so `dvc repro` can never serve results of older code), a stage imports no stage,
each room imports only the rooms its table row allows and no module imports itself back in a
circle, the pure rooms touch no files, git or clocks, only render/ writes markdown, measure/
imports with torch alone, and no module grows past 600 lines."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

from .projects import ROOT

PACKAGE = ROOT / "stages"               # the package torchgate's folder
ROOMS = ("core", "arms", "measure", "launch", "judge", "render", "workloads")
PURE = ("judge", "render")
MODULE = re.compile(r"^torchgate(\.\w+)+$")


def module_file(name: str) -> Path | None:
    top, *parts = name.split(".")
    path = PACKAGE.joinpath(*parts)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if top == "torchgate" and candidate.is_file():
            return candidate
    return None


def module_name(path: Path) -> str:
    parts = ("torchgate", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def imported(path: Path) -> set[str]:
    """Every torchgate.* module this file imports (at any depth, in functions too) or names in a
    string (`python -m torchgate.measure.worker`, a workload `_target_` module)."""
    found = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module_name(path).split(".")
                if path.name != "__init__.py":
                    package = package[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and MODULE.match(node.value):
            found.add(node.value)
    return {n for n in found if n.split(".")[0] == "torchgate" and module_file(n)}


def closure(entry: str) -> set[Path]:
    """The files a `python -m <entry>` process may run: imports, transitively, with the
    packages that hold them."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            path = module_file(".".join(parts[:i]))
            if path is not None and path not in seen:
                seen.add(path)
                todo.extend(imported(path))
    return seen


def workload_targets() -> set[str]:
    """The modules that conf/workload/*.yaml name: the worker imports them by `_target_`."""
    found = set()
    for path in (ROOT / "conf" / "workload").glob("*.yaml"):
        for body in (yaml.safe_load(path.read_text()) or {}).values():
            found.add(body["_target_"].rpartition(".")[0])
    return {m for m in found if m.startswith("torchgate.")}


def run_by(entry: str) -> set[Path]:
    """closure(entry), and where it starts workers, the workload modules they import."""
    files = closure(entry)
    if module_file("torchgate.measure.worker") in files:
        for target in workload_targets():
            files |= closure(target)
    return files


def stages_of_dvc_yaml() -> dict[str, tuple[str, list[str]]]:
    """stage -> (entry module, code deps), in dvc.yaml and reports/env/dvc.yaml (the env
    stage, which has a lock file of its own; its paths are relative to its `wdir`, ../..)."""
    found = {}
    for path in (ROOT / "dvc.yaml", ROOT / "reports" / "env" / "dvc.yaml"):
        for name, stage in yaml.safe_load(path.read_text())["stages"].items():
            stage = stage.get("do", stage)        # a `foreach` stage's body
            assert (path.parent / stage.get("wdir", ".")).resolve() == ROOT, (path, name)
            entry = re.search(r"python -m (torchgate\.\w+)", stage["cmd"]).group(1)
            found[name] = (entry, [d for d in stage.get("deps", []) if d.startswith("stages")])
    return found


@pytest.mark.parametrize("stage", list(stages_of_dvc_yaml()))
def test_dvc_yaml_deps_cover_every_file_a_stage_runs(stage):
    entry, deps = stages_of_dvc_yaml()[stage]
    files = {p.relative_to(ROOT).as_posix() for p in run_by(entry)}
    covered = {f for f in files if any(f == d or f.startswith(d.rstrip("/") + "/") for d in deps)}
    assert files - covered == set(), f"dvc.yaml stage {stage!r} misses code it imports"
    unused = [d for d in deps if not any(f == d or f.startswith(d.rstrip("/") + "/")
                                         for f in files)]
    assert unused == [], f"dvc.yaml stage {stage!r} depends on code it never imports"


def test_the_worker_and_the_builtin_workloads_are_in_the_bench_closure():
    """Spawned as `python -m torchgate.measure.worker`, named by a `_target_`: not imported, but
    run all the same."""
    files = {p.relative_to(ROOT).as_posix() for p in run_by("torchgate.bench")}
    assert {"stages/measure/worker.py", "stages/workloads/__init__.py"} <= files


def entry_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def room_modules(*rooms: str) -> list[Path]:
    return sorted(p for room in rooms for p in (PACKAGE / room).rglob("*.py"))


COMMAND = PACKAGE / "torchgate.py"     # the `torchgate` command: above the stages, it runs them


def test_a_stage_imports_no_stage():
    stage_names = {module_name(p) for p in entry_modules()}
    for path in [p for p in entry_modules() if p != COMMAND] + room_modules(*ROOMS):
        others = imported(path) & (stage_names - {module_name(path)})
        assert not others, f"{path.relative_to(ROOT)} imports the stage(s) {sorted(others)}"


FORBIDDEN_IMPORTS = {"subprocess", "tempfile", "shutil", "socket", "torchgate.core.baseline.git",
                     "torchgate.core.baseline", "torchgate.measure"}
FORBIDDEN_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes",
                   "perf_counter", "perf_counter_ns", "time", "write_record", "load_record"}


@pytest.mark.parametrize("path", room_modules(*PURE), ids=lambda p: p.name)
def test_the_judge_and_render_rooms_are_pure(path):
    """Records in, rows or text out: no files, no git, no processes, no clocks."""
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            assert called not in FORBIDDEN_CALLS, f"{path.name} calls {called}()"
    bad = {n for n in imported_names(path)
           if any(n == f or n.startswith(f + ".") for f in FORBIDDEN_IMPORTS)}
    assert not bad, f"{path.name} imports {sorted(bad)}"


MARKDOWN = re.compile(r"^#{1,3} |\|---|^\| ", re.M)


def test_only_render_writes_markdown():
    for path in entry_modules() + room_modules("core", "measure", "judge", "workloads"):
        docstrings = {id(n.body[0].value) for n in ast.walk(tree(path))
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings:
                assert not MARKDOWN.search(node.value), (
                    f"{path.relative_to(ROOT)}:{node.lineno} writes markdown; render/ does")
        assert "tabulate" not in imported_names(path), path


def imported_names(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_grows_past_600_lines(path):
    """A module holds one concept; past ~600 lines it holds two. The cap guards against that,
    not against a concept's natural size: 400 made modules split where no concept does."""
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 600


BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"scipy", "yaml", "tabulate", "dvc", "hydra", "omegaconf"}:
            raise ImportError(f"{name} is not installed in a torch-only interpreter")
sys.meta_path.insert(0, Block())
import pkgutil, torchgate.measure, torchgate.workloads
for m in pkgutil.iter_modules(torchgate.measure.__path__):
    __import__(f"torchgate.measure.{m.name}")
from torchgate.measure.probe import capture
assert capture()["torch"]["version"]
print("ok")
"""


@pytest.mark.slow
def test_the_measure_room_needs_nothing_but_torch():
    """The other interpreter of an A/B run has torch alone: everything it runs must import
    without scipy, yaml, tabulate, dvc or hydra."""
    run = subprocess.run([sys.executable, "-c", BLOCKER], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


# Which room may import which. Rooms are by where their code runs: measure inside a worker
# process (torch and core only), launch on the host around the workers (it starts them by
# module name, and uses arms to build their interpreters); judge and render are pure.
MAY_IMPORT = {
    "core": set(),
    "workloads": set(),
    "measure": {"core", "workloads"},   # a worker imports the workload it runs
    "arms": {"core"},
    "launch": {"core", "measure", "arms"},
    "judge": {"core"},
    "render": {"core", "judge"},
}


def room_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in MAY_IMPORT) else None


@pytest.mark.parametrize("room", sorted(MAY_IMPORT))
def test_each_room_imports_only_what_its_row_allows(room):
    assert set(MAY_IMPORT) == set(ROOMS)
    for path in room_modules(room):
        rooms = {room_of(n) for n in imported(path)} - {None, room}
        assert rooms <= MAY_IMPORT[room], (
            f"{path.relative_to(ROOT)} imports the room(s) {sorted(rooms - MAY_IMPORT[room])}; "
            f"{room}/ may import only {sorted(MAY_IMPORT[room]) or 'no other room'}")


def test_render_imports_judge_for_its_results_only():
    """render formats what judge decided: the result types (judge.results) and the gate's
    decision, which the summary states; never a rule, nor a way back into a raw record."""
    allowed = {"torchgate.judge.results", "torchgate.judge.gate"}
    for path in room_modules("render"):
        used = {n for n in imported(path) if n.startswith("torchgate.judge.")}
        modules = {n if module_file(n) and n.count(".") == 2 else n.rpartition(".")[0]
                   for n in used}
        assert modules <= allowed, (f"{path.relative_to(ROOT)} reads {sorted(modules - allowed)}")


def import_graph() -> dict[str, set[str]]:
    """module -> the torchgate modules it imports, at module level and inside functions alike (a
    function's import runs too, only later); not those under `if TYPE_CHECKING:`, which never
    run."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = set()
        for node in _runtime_nodes(tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    found.add(full if module_file(full) else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[module_name(path)] = {n for n in found
                                    if n.startswith("torchgate.") and module_file(n)}
    return graph


def _runtime_nodes(node: ast.AST):
    """Every node below `node`, skipping the bodies of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and isinstance(child.test, ast.Name) \
                and child.test.id == "TYPE_CHECKING":
            yield from (n for c in child.orelse for n in (c, *_runtime_nodes(c)))
            continue
        yield child
        yield from _runtime_nodes(child)


def test_no_import_circles():
    """Depth-first over the module graph; a back edge is a circle."""
    graph, state, path = import_graph(), {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                circle = path[path.index(nxt):] + [nxt]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_code_needs_no_python_newer_than_the_floor_pyproject_states():
    """CI runs 3.11; the floor is pyproject's requires-python. vermin reads every module for
    the syntax and standard-library names it needs (tomllib, typing.Self: 3.11's), so that
    code needing more fails here, not on a 3.10 user's first import."""
    floor = re.search(r'^requires-python = "([^"]+)"', (ROOT / "pyproject.toml").read_text(
        encoding="utf-8"), re.M).group(1)        # no tomllib: it is 3.11's
    assert floor == ">=3.10", floor             # the target below
    vermin = str(Path(sys.executable).with_name("vermin"))     # the test extra's script
    found = subprocess.run([vermin, "-q", "-t=3.10-", "--violations",
                            "--eval-annotations", "--no-tips", "--no-parse-comments",
                            str(PACKAGE), str(ROOT / "tests")], capture_output=True, text=True)
    assert found.returncode == 0, found.stdout + found.stderr
