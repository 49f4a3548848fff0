"""Workload targets: the `_target_` of conf/workload/<name>.yaml, imported by name, and its
keys checked against the function's signature before anything is measured; a module of the
project that the stage's DVC deps do not cover is refused (`dvc repro` would keep the numbers
of its old code; yaml is imported only when dvc.yaml is read).

A worker imports its workload (`load_target`). The stage never does (`check_workloads`): a
function defined by a plain top-level `def` is read from its source (`source_signature`:
milliseconds, nothing imported, so that its import failing or hanging is its workers' to
record: a worker that has not imported its workloads within bench.import_timeout_s is stopped
with that said, launch.local); any other target is read in a child process with a time limit, so that a module
that calls sys.exit() or os._exit(), crashes, hangs, or takes a GPU at import cannot end,
stall or load the stage. A signal.alarm around an in-process import would stop neither
os._exit() nor a hang in C code that holds the GIL, and would leave the module's threads and
device state in the stage; the child costs the stage what the import costs (torch: 2-4 s).
The env stage reads, the same way, which modules a worker imports (`imports`): their
distributions are the packages that matter.
"""
from __future__ import annotations

import ast
import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterable

from torchgate.core import lifetime, names
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.errors import UserError

# Passed by torchgate, not by the YAML (the last three to a distributed unit's ranks).
PROVIDED = ("device", "dtype", "compile", "seed", "rank", "world_size", "ddp")


def load_target(target: str):
    """The workload function; ImportError when its module does not import, whatever failed
    there (a custom-operator library that does not load raises OSError or RuntimeError; a
    module may even call sys.exit()), with that failure's first line."""
    names.alias_old_names()        # a module written for an older revision's name
    module_name, _, attr = names.current(target).rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImportError(f"cannot import workload _target_ {target!r}: {exc}") from exc
    except SystemExit as exc:
        raise ImportError(f"cannot import workload _target_ {target!r}: the module called "
                          f"sys.exit({exc.code!r}) while being imported") from None
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise ImportError(f"cannot import workload _target_ {target!r}: "
                          f"{type(exc).__name__}: {first}") from exc


# The child: its stdout carries only these lines (what the modules print goes to stderr).
# [target, null] before each import, so that a hang or crash is known to be that target's.
CHILD = """
import inspect, json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
paths, targets = json.load(sys.stdin)
sys.path[:] = paths
from torchgate.core.lifetime import hold_launcher
hold_launcher()
from torchgate.core.config.targets import load_target
for target in targets:
    print(json.dumps([target, None]), file=out, flush=True)
    try:
        params = inspect.signature(load_target(target)).parameters.values()
        found = {"takes": [p.name for p in params],
                 "any": any(p.kind is p.VAR_KEYWORD for p in params)}
    except (ImportError, TypeError, ValueError) as exc:
        found = {"error": str(exc)}
    print(json.dumps([target, found]), file=out, flush=True)
"""


def _paths() -> list[str]:
    """A child's sys.path: this one's, after a folder that makes its torchgate this one's."""
    return [names.importable(), *sys.path]


def _child(script: str, payload: object, limit_s: float) -> tuple[str, bool, int | None]:
    """Run `script` in a child of this interpreter, `payload` as JSON on its stdin, within
    `limit_s`: (its stdout, whether it hung, its return code). The child and whatever it
    started end with it."""
    line, entry = lifetime.lifeline()         # the child ends with this process too
    proc = lifetime.launched(lambda: subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, env={**os.environ, **entry}, pass_fds=(line,),
        start_new_session=True))
    hung = False
    try:
        out, _ = proc.communicate(json.dumps(payload), timeout=limit_s)
    except subprocess.TimeoutExpired:
        hung = True
        out = ""
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # with whatever the modules started
        except (ProcessLookupError, PermissionError):
            pass
        if hung:
            out, _ = proc.communicate()
        lifetime.ended(proc.pid)
    return out, hung, proc.returncode


def _module_file(parts: list[str], paths: list[str]) -> Path | None:
    """The source file of the module `parts` (its dotted name, split) that `import` would load
    from the folders `paths`, found without importing anything; None where a compiled module,
    or none, is found first."""
    for entry in paths:
        folder = Path(entry or ".").joinpath(*parts[:-1])
        for candidate in (folder / f"{parts[-1]}.py", folder / parts[-1] / "__init__.py"):
            if candidate.is_file():
                return candidate
        if folder.is_dir() and any(folder.glob(f"{parts[-1]}.*.so")):
            return None
    return None


def _binds(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               and n.name == name
               or isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               or isinstance(n, ast.alias) and (n.asname or n.name).split(".")[0] == name
               for n in ast.walk(node))


def source_signature(target: str, paths: list[str]) -> dict | None:
    """{"takes": parameter names, "any": takes **kwargs} of a target that its module's source
    defines once, by a top-level `def` without decorators (what inspect.signature would say of
    it); None where only importing the module can tell."""
    module, _, name = names.current(target).rpartition(".")
    parts = module.split(".")
    if parts[0] == names.NAME:     # torchgate's own: where its workers import it from
        parts, paths = [names.PACKAGE.name, *parts[1:]], [str(names.PACKAGE.parent)]
    path = _module_file(parts, paths) if module else None
    if path is None:
        return None
    try:
        body = ast.parse(path.read_bytes(), filename=str(path)).body
    except (SyntaxError, ValueError, OSError):
        return None
    binding = [stmt for stmt in body if _binds(stmt, name)]
    if len(binding) != 1 or not isinstance(binding[0], ast.FunctionDef) \
            or binding[0].decorator_list:
        return None
    args = binding[0].args
    takes = [a.arg for a in (*args.posonlyargs, *args.args, *filter(None, [args.vararg]),
                             *args.kwonlyargs, *filter(None, [args.kwarg]))]
    return {"takes": takes, "any": args.kwarg is not None}


def signatures(targets: list[str], limit_s: float) -> dict[str, dict]:
    """target -> {"takes": parameter names, "any": takes **kwargs} or {"error": why not},
    read in one child process; a target whose import hung ("hung": true) or ended the child
    says so, and the targets after it are left out (unchecked: their workers will tell)."""
    out, hung, code = _child(CHILD, [_paths(), targets], limit_s)
    found: dict[str, dict] = {}
    for text in out.splitlines():
        target, result = json.loads(text)
        found[target] = result or (
            {"error": f"importing it did not finish within {limit_s:g} s", "hung": True}
            if hung else
            {"error": f"importing it ended the process ({_status(code)})"})
    return found


# The child of `imports`: after each import, the modules it added (name -> file or null).
IMPORTS_CHILD = """
import importlib, json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
paths, modules, targets = json.load(sys.stdin)
sys.path[:] = paths
from torchgate.core.lifetime import hold_launcher
hold_launcher()
from torchgate.core.config.targets import load_target
seen = set()
def added():
    new = {name: getattr(m, "__file__", None) for name, m in list(sys.modules.items())
           if name not in seen}
    seen.update(new)
    return new
added()
for name, load in [(m, importlib.import_module) for m in modules] + [(t, load_target)
                                                                     for t in targets]:
    try:
        load(name)
    except (Exception, SystemExit):
        pass
    print(json.dumps(added()), file=out, flush=True)
"""


def imports(modules: list[str], targets: list[str], limit_s: float) -> dict[str, str | None]:
    """The modules a process imports with `modules` and the workload `targets` (module name ->
    its file, or None), read in one child process as a worker imports them. One that fails
    to import is passed over; one that hangs or ends the child ends the reading, with what
    was read before it kept. The bench stage reports either."""
    out, _, _ = _child(IMPORTS_CHILD, [_paths(), modules, targets], limit_s)
    found: dict[str, str | None] = {}
    for text in out.splitlines():
        try:
            found.update(json.loads(text))
        except ValueError:     # the last line of a child ended mid-write
            pass
    return found


def _status(code: int) -> str:
    return lifetime.killed_by(code) or f"exit status {code}"


def check_workloads(specs: Iterable[WorkloadSpec], limit_s: float) -> list[str]:
    """A key in conf/workload/<name>.yaml that the function does not take is a typo: say so
    before anything is measured. A target that does not import is left to the worker, which
    records it as that workload's failure while the others run; one whose import hung in the
    child (a target not read from its source) is returned as a note (its workers will time
    out too)."""
    specs = list(specs)
    found = {t: source_signature(t, sys.path) for t in sorted({s.target for s in specs})}
    unread = [target for target, got in found.items() if got is None]
    if unread:
        found.update(signatures(unread, limit_s))
    notes = []
    for spec in specs:
        got = found.get(spec.target)
        if got is None or "error" in got:
            if got and got.get("hung"):
                notes.append(f"workload {spec.name}: importing {spec.target} did not finish "
                             f"within {limit_s:g} s; its processes will time out")
            continue
        if got["any"]:
            continue
        unknown = sorted(set(spec.kwargs) - set(got["takes"]))
        if unknown:
            takes = [p for p in got["takes"] if p not in PROVIDED]
            raise UserError(f"workload.{spec.name} has no parameter {unknown[0]!r}; "
                            f"{spec.target} takes: {', '.join(takes) or 'no parameters'}")
    return list(dict.fromkeys(notes))


def module_paths(target: str, root: Path = Path(".")) -> list[str]:
    """The project's file or package folder that a `_target_`'s module is, relative to the
    project folder `root`; [] for a module outside the project (an installed package)."""
    module = target.rpartition(".")[0]
    base = "/".join(names.checkout_parts(module)) if module else ""
    return [c for c in (f"{base}.py", base) if base and (root / c).exists()]


def module_closure(target: str, root: Path = Path(".")) -> list[str]:
    """The project's files a `_target_`'s module runs when imported: its own file, the
    packages' `__init__.py` above it, and the project modules it imports, transitively (read
    from its import statements; a module imported by name at run time is not seen). Relative
    to `root`, sorted; [] for a module outside the project."""
    todo, found = [names.current(target).rpartition(".")[0]], set()
    seen: set[str] = set()
    while todo:
        name = names.current(todo.pop())
        if not name or name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))   # parent packages
        found_at = _module_file(names.checkout_parts(name), [str(root)])
        if found_at is None:
            continue
        path = found_at.relative_to(root).as_posix()
        found.add(path)
        try:
            tree = ast.parse((root / path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(filter(None, [*up, base]))
                todo.append(base)      # and each name, where it is a submodule
                todo.extend(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return sorted(found)


def _covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d + "/") for d in deps)


def check_tracked(workloads: dict, stage: str, root: Path = Path(".")) -> None:
    """Every workload module of the project is a dependency of `stage` in dvc.yaml (as
    stages/workloads/ is): else editing it would leave `dvc status` clean and `dvc repro`
    serving the old numbers. Not a DVC project (no dvc.yaml, no such stage): nothing to
    check."""
    import yaml
    try:
        deps = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"][stage][
            "deps"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return
    deps = [d.strip().rstrip("/") for d in deps or () if isinstance(d, str)]
    for spec in workloads.values():
        for path in module_paths(spec.target, root):
            if not _covered(path, deps):
                raise UserError(
                    f"workload.{spec.family or spec.name}: its module {path} is not a dependency "
                    f"of the {stage} stage, so `dvc repro` would keep the old numbers after you "
                    f"edit it; move it into stages/workloads/ (or a package under it) and set "
                    f"_target_: torchgate.workloads.{spec.target}, or add {path} to the deps of "
                    "the bench and numerics stages in dvc.yaml")
