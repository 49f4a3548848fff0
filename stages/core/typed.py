"""Plain data (parsed YAML or JSON) <-> frozen dataclasses, checked against their type hints.

One mechanism for the configuration and every record: an unknown key, a missing field or a
value of the wrong type is a one-line UserError naming the field's full path and what it
should be. Non-finite floats are written as the strings "NaN", "Infinity" and "-Infinity"
(JSON has no such numbers), so that a measured NaN stays distinct from null, which means
"not measured".
"""
from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from enum import Enum
from typing import Any, Union

from torchgate.core.errors import UserError

NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def from_data(cls: type, data: Any, where: str, *, context: str = "",
              finite: bool = False) -> Any:
    """Build `cls` (a dataclass or a typing form) from plain data; `where` is the path of
    `data` (e.g. "bench" or "workloads.mlp.processes[0]"), `context` prefixes the message
    (e.g. the file). finite: every number must be finite (the configuration: a NaN or an
    infinity passes every range check, `value < low` being false); records keep theirs."""
    try:
        return _build(cls, data, where, finite)
    except UserError as exc:
        raise UserError(f"{context}{exc}") from None


def to_data(value: Any) -> Any:
    """A dataclass (nested) as plain JSON-safe data: tuples as lists, non-finite floats as
    strings, and fields left out where they hold their default (which is what reading an
    absent field gives back)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(v) for f in dataclasses.fields(value)
                if not _is_default(f, v := getattr(value, f.name))}
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Enum):          # the vocabulary's words: their text
        return value.value
    return value


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _is_default(f: dataclasses.Field, value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        value, default = _plain(value), _plain(f.default)
        return value is default or (type(value) is type(default) and value == default)
    if f.default_factory is not dataclasses.MISSING:
        return value == f.default_factory()
    return False


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _name(tp: Any) -> str:
    """How a type reads in a message: int, a number, true or false, a list of ..."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return "true or false"
    if tp is float:
        return "a number"
    if tp is int:
        return "an integer"
    if tp is str:
        return "a string"
    if tp is type(None):
        return "null"
    if origin in (Union, types.UnionType):
        return " or ".join(_name(a) for a in args)
    if origin in (list, tuple):
        return f"a list of {_plural(args[0])}"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


def _plural(tp: Any) -> str:
    return {bool: "true/false values", float: "numbers", int: "integers",
            str: "strings"}.get(tp, _name(tp))


def _wrong(tp: Any, value: Any, where: str) -> UserError:
    return UserError(f"{where} must be {_name(tp)}, got {value!r}")


def _build(tp: Any, value: Any, where: str, finite: bool = False) -> Any:
    if tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise _wrong(tp, value, where)
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return _build(option, value, where, finite)
            except UserError as exc:
                errors.append(exc)
        raise errors[0] if len(options) == 1 else _wrong(tp, value, where)
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, where, finite)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise _wrong(tp, value, where)
        return tuple(_build(args[0], v, f"{where}[{i}]", finite) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise _wrong(tp, value, where)
        return {str(k): _build(args[1], v, f"{where}.{k}", finite) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _wrong(tp, value, where)
    if tp is float:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str) and value in NONFINITE:
            number = NONFINITE[value]
        if number is None:
            raise _wrong(tp, value, where)
        if finite and not math.isfinite(number):
            raise UserError(f"{where} must be a finite number, got {value!r}")
        return number
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _wrong(tp, value, where)
    if tp is str:
        if isinstance(value, str):
            return value
        raise _wrong(tp, value, where)
    raise TypeError(f"typed: no rule for {tp!r} at {where}")


def _dataclass(cls: type, value: Any, where: str, finite: bool = False) -> Any:
    if not isinstance(value, dict):
        raise _wrong(cls, value, where)
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise UserError(f"unknown key {_join(where, unknown[0])}; valid keys: "
                        f"{', '.join(sorted(fields))}")
    values = {}
    for name, f in fields.items():
        if name in value:
            values[name] = _build(hints[name], value[name], _join(where, name), finite)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise UserError(f"{_join(where, name)} is missing")
    return cls(**values)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
