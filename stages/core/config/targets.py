"""Workload targets: the `_target_` of conf/workload/<name>.yaml, imported by name, and its
keys checked against the function's signature before anything is measured. Imports the
workload's module only when asked (it may need torch)."""
from __future__ import annotations

import importlib
import inspect

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
