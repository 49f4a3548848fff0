"""Run another revision's workloads with this harness: a worker of the other arm imports
`stages.workloads` and the project's own modules from that revision's folder, while `stages`
itself (measure, core: how things are measured) stays this one."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import stages


def use_code(root: str) -> None:
    """Import workloads from the project folder `root` (another revision) from now on."""
    harness = Path(stages.__file__).resolve().parent.parent
    here = {os.path.realpath(p) for p in (os.getcwd(), harness)}
    # The other revision's top-level modules first; this working tree's not at all.
    sys.path[:] = [root] + [p for p in sys.path if os.path.realpath(p or os.getcwd()) not in here]
    package = Path(root) / "stages" / "workloads"
    spec = importlib.util.spec_from_file_location(
        "stages.workloads", package / "__init__.py", submodule_search_locations=[str(package)])
    module = importlib.util.module_from_spec(spec)
    for name in [n for n in sys.modules if n == "stages.workloads"
                 or n.startswith("stages.workloads.")]:
        del sys.modules[name]
    sys.modules["stages.workloads"] = module
    spec.loader.exec_module(module)
    stages.workloads = module
