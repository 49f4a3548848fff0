"""Workload targets: the `_target_` of conf/workload/<name>.yaml, imported by name, and its
keys checked against the function's signature before anything is measured; a module of the
project that the stage's DVC deps do not cover is refused (`dvc repro` would keep the numbers
of its old code). Imports the workload's module only when asked (it may need torch), yaml only
when dvc.yaml is read (the worker of a torch-only interpreter imports this module)."""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from stages.core.errors import UserError

PROVIDED = ("device", "dtype", "compile", "seed")  # passed by torchgate, not by the YAML


def load_target(target: str):
    """The workload function; ImportError when its module does not import, whatever failed
    there (a custom-operator library that does not load raises OSError or RuntimeError),
    with that failure's first line."""
    module_name, _, attr = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImportError(f"cannot import workload _target_ {target!r}: {exc}") from exc
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise ImportError(f"cannot import workload _target_ {target!r}: "
                          f"{type(exc).__name__}: {first}") from exc


def check_arguments(name: str, target: str, kwargs: dict) -> None:
    """A key in conf/workload/<name>.yaml that the function does not take is a typo: say so
    before anything is measured. A target that does not import is left to the worker, which
    records it as that workload's failure while the others run."""
    try:
        params = inspect.signature(load_target(target)).parameters
    except (ImportError, TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        takes = [p for p in params if p not in PROVIDED]
        raise UserError(f"workload.{name} has no parameter {unknown[0]!r}; {target} takes: "
                        f"{', '.join(takes) or 'no parameters'}")


def module_paths(target: str, root: Path = Path(".")) -> list[str]:
    """The project's file or package folder that a `_target_`'s module is, relative to the
    project folder `root`; [] for a module outside the project (an installed package)."""
    base = target.rpartition(".")[0].replace(".", "/")
    return [c for c in (f"{base}.py", base) if base and (root / c).exists()]


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
                    f"_target_: stages.workloads.{spec.target}, or add {path} to the deps of "
                    "the bench and numerics stages in dvc.yaml")
