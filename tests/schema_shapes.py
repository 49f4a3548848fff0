"""The shape of each record type: its dataclasses, their fields, the fields' types and
defaults, through every nested dataclass, kept per kind and schema version in
tests/fixtures/schema/shapes.json. tests/test_schema_fixtures.py fails when a record type
changes in a way a reader would misread while its schema version stays (`changes`): a field
removed, renamed or retyped, made required, or given another default. A field added with a
default passes: records without it read as the default.

    python -m tests.schema_shapes            # print the shapes of this checkout
    python -m tests.schema_shapes --write    # record the current versions' shapes in shapes.json
                                             # (a new version's; a current one's with fields
                                             # added since, so that their removal is caught too;
                                             # never one a reader would misread. --force: a
                                             # change that leaves the JSON as it was, such as a
                                             # renamed class, or a type that only widens)
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import importlib
import json
import sys
import types
import typing
from pathlib import Path

SHAPES = Path(__file__).parent / "fixtures" / "schema" / "shapes.json"

# The one place that names the record modules: `records` (SCHEMA, load_record ...),
# `schema` (KINDS, the record dataclasses) and `upgrades` (HISTORY, UPGRADES).
MODULES = {"records": "torchgate.core.records", "schema": "torchgate.core.records.schema",
           "upgrades": "torchgate.core.records.upgrades"}


def module(name: str) -> types.ModuleType:
    return importlib.import_module(MODULES[name])


def type_name(t: typing.Any) -> str:
    """A resolved annotation as text, without module paths: `dict[str, ModeTiming | None]`."""
    if t is type(None):
        return "None"
    args = typing.get_args(t)
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if args:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{type_name(typing.get_origin(t))}[{inner}]"
    return getattr(t, "__name__", None) or repr(t)


def reached(cls: type) -> dict[str, type]:
    """Every dataclass reached from `cls`, by name."""
    found: dict[str, type] = {}
    todo = [cls]
    while todo:
        c = todo.pop()
        if c.__name__ in found:
            continue
        found[c.__name__] = c
        hints = typing.get_type_hints(c)
        stack = [hints[f.name] for f in dataclasses.fields(c)]
        while stack:
            t = stack.pop()
            stack.extend(typing.get_args(t))
            if isinstance(t, type) and dataclasses.is_dataclass(t):
                todo.append(t)
    return dict(sorted(found.items()))


def classes(cls: type) -> dict[str, dict[str, str]]:
    """Every dataclass reached from `cls`: its name -> {field: type}."""
    out = {}
    for name, c in reached(cls).items():
        hints = typing.get_type_hints(c)
        out[name] = {f.name: type_name(hints[f.name]) for f in dataclasses.fields(c)}
    return out


def default(f: dataclasses.Field) -> str | None:
    """A field's default as text (what a record without the field reads as); None: required."""
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return None
    return repr(value.value if isinstance(value, enum.Enum) else value)


def defaults(cls: type) -> dict[str, dict[str, str]]:
    """Every dataclass reached from `cls`: its name -> {field: default} for its fields that
    have one."""
    return {name: {f.name: d for f in dataclasses.fields(c) if (d := default(f)) is not None}
            for name, c in reached(cls).items()}


def shape(cls: type) -> dict:
    """The classes, their fingerprint (of fields and types only, as before defaults were
    kept) and their defaults."""
    tree = classes(cls)
    digest = hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest()[:16]
    return {"fingerprint": digest, "classes": tree, "defaults": defaults(cls)}


def changes(recorded: dict, now: dict) -> list[str]:
    """What in `now` a reader of a record of the `recorded` shape would misread or refuse: a
    field removed or renamed, retyped, new without a default, or whose default changed (a
    record leaves out a field at its default). Empty where `now` only adds fields with
    defaults, and classes through them. A shape recorded without defaults has its defaults
    unchecked."""
    found = []
    before = recorded.get("defaults")
    for cls, fields in sorted(recorded["classes"].items()):
        new = now["classes"].get(cls)
        if new is None:
            found.append(f"{cls} is gone (removed or renamed)")
            continue
        was, has = (before or {}).get(cls, {}), now["defaults"].get(cls, {})
        for name, kind in fields.items():
            if name not in new:
                found.append(f"{cls}.{name} is gone (removed or renamed)")
            elif new[name] != kind:
                found.append(f"{cls}.{name} is {new[name]}, was {kind}")
            elif before is not None and name in was and has.get(name) != was[name]:
                found.append(f"{cls}.{name} defaults to {has.get(name, 'nothing (required)')}, "
                             f"was {was[name]}")
        found += [f"{cls}.{name} is new without a default: a record without it is refused"
                  for name in sorted(new.keys() - fields.keys()) if name not in has]
    return found


def current() -> dict[str, tuple[int, dict]]:
    """kind -> (its schema version, the shape of its record type) in this checkout."""
    versions, kinds = module("records").SCHEMA, module("schema").KINDS
    return {kind: (versions[kind], shape(kinds[kind])) for kind in sorted(kinds)}


def write(force: bool = False) -> list[str]:
    """Record the current versions' shapes in shapes.json; the problems that stopped it."""
    known = json.loads(SHAPES.read_text()) if SHAPES.exists() else {}
    problems = []
    for kind, (version, now) in current().items():
        old = known.setdefault(kind, {}).get(str(version))
        misread = changes(old, now) if old is not None else []
        if misread and not force:
            problems.append(f"{kind} schema {version}: {'; '.join(misread)}: a reader would "
                            "misread its records; add a version rather than rewrite its shape")
            continue
        known[kind][str(version)] = now
    if not problems:
        known = {k: dict(sorted(v.items(), key=lambda kv: int(kv[0])))
                 for k, v in sorted(known.items())}
        SHAPES.write_text(json.dumps(known, indent=1, sort_keys=False) + "\n")
    return problems


if __name__ == "__main__":
    if "--write" in sys.argv:
        errors = write(force="--force" in sys.argv)
        sys.exit("\n".join(errors) if errors else None)
    print(json.dumps({k: {str(v): s} for k, (v, s) in current().items()}, indent=1))
