"""The package's import name, `torchgate`, and its folder, `stages/` in a checkout (the
repository's layout; an installed `stages` would share its folder with any other
distribution's, and pip merges such folders). Older revisions imported it as `stages`: their
workload targets, records and code (`from stages.workloads import Workload`) read here as
today's (`current`, `alias_old_names`).

A process started without the install (a worker in an arm's venv, a child that reads the
workloads, a Ray task) imports it from `importable()`, first on its path: a folder holding
only a link named torchgate to this package's folder, so that it runs this very code.
Standard library only: a worker imports this with torch alone.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path

NAME = "torchgate"
OLD = "stages"                                   # the import name of older revisions
FOLDER = "stages"                                # the package's folder in a checkout
PACKAGE = Path(__file__).resolve().parents[1]    # the folder this code runs from


def current(name: str) -> str:
    """A module name or `_target_` as today's: `stages.workloads.x` (an older revision's)
    is `torchgate.workloads.x`; any other name is itself."""
    if name == OLD or name.startswith(OLD + "."):
        return NAME + name[len(OLD):]
    return name


def checkout_parts(name: str) -> list[str]:
    """The path of a module below a checkout's root, in parts, without the suffix:
    `torchgate.workloads.x` is stages/workloads/x."""
    parts = current(name).split(".")
    return [FOLDER, *parts[1:]] if parts[0] == NAME else parts


def importable(package: Path | None = None) -> str:
    """A folder that, first on sys.path or PYTHONPATH, makes `import torchgate` load
    `package` (PACKAGE, this one): a link named torchgate to it, in this user's private
    scratch space (the processes that read it run what it points to)."""
    from torchgate.core import scratch
    package = (package or PACKAGE).resolve()
    digest = hashlib.sha256(str(package).encode()).hexdigest()[:16]
    folder = scratch.private(scratch.private(scratch.user_dir() / "import") / digest)
    link = folder / NAME
    if not (link.is_symlink() and os.readlink(link) == str(package)):
        made = folder / f".{NAME}.{os.getpid()}"
        made.unlink(missing_ok=True)
        made.symlink_to(package, target_is_directory=True)
        os.replace(made, link)        # whole, for a process that reads it meanwhile
    return str(folder)


def pythonpath(*then: str, env: dict | None = None) -> str:
    """PYTHONPATH for a process that imports torchgate without the install: importable()
    first, then `then`, then what `env` (os.environ) has."""
    given = (os.environ if env is None else env).get("PYTHONPATH")
    return os.pathsep.join(filter(None, [importable(), *then, given]))


def _ours(spec: importlib.machinery.ModuleSpec | None) -> bool:
    """A `stages` package that is torchgate's folder (of any revision: each has workloads/),
    not another distribution's `stages`."""
    origin = spec.origin if spec is not None else None
    return origin is None or os.path.isfile(
        os.path.join(os.path.dirname(origin), "workloads", "__init__.py"))


class _OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`stages` and `stages.x` as the modules `torchgate` and `torchgate.x` themselves: one
    module under both names, never a second copy of a file. A `stages` that is another
    distribution's is left to it."""

    def find_spec(self, name, path=None, target=None):
        if current(name) == name:
            return None
        if name == OLD:
            if not _ours(importlib.machinery.PathFinder.find_spec(name)):
                return None
        elif sys.modules.get(OLD) is not sys.modules.get(NAME):
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        module = importlib.import_module(current(spec.name))
        spec.loader_state = module.__spec__     # the import system sets __spec__ to `spec`
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


def alias_old_names() -> None:
    """From now on in this process, code written for older revisions (`from stages.workloads
    import Workload`) imports today's modules."""
    if not any(isinstance(f, _OldNames) for f in sys.meta_path):
        sys.meta_path.insert(0, _OldNames())

