"""The shape of each record type: its dataclasses, their fields and the fields' types, through
every nested dataclass, fingerprinted and kept per kind and schema version in
tests/fixtures/schema/shapes.json. tests/test_schema_fixtures.py fails when a record type's
shape moves while its schema version stays.

    python -m tests.schema_shapes            # print the shapes of this checkout
    python -m tests.schema_shapes --write    # add the current versions' shapes to shapes.json
                                             # (an existing version's shape is never changed;
                                             # --force: a rename that leaves the JSON as it was)
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import sys
import types
import typing
from pathlib import Path

SHAPES = Path(__file__).parent / "fixtures" / "schema" / "shapes.json"

# The one place that names the record modules: `records` (SCHEMA, load_record ...) and
# `schema` (KINDS, the record dataclasses).
MODULES = {"records": "stages.core.records", "schema": "stages.core.records.schema"}


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


def classes(cls: type) -> dict[str, dict[str, str]]:
    """Every dataclass reached from `cls`: its name -> {field: type}."""
    found: dict[str, dict[str, str]] = {}
    todo = [cls]
    while todo:
        c = todo.pop()
        if c.__name__ in found:
            continue
        hints = typing.get_type_hints(c)
        found[c.__name__] = {f.name: type_name(hints[f.name]) for f in dataclasses.fields(c)}
        stack = [hints[f.name] for f in dataclasses.fields(c)]
        while stack:
            t = stack.pop()
            stack.extend(typing.get_args(t))
            if isinstance(t, type) and dataclasses.is_dataclass(t):
                todo.append(t)
    return dict(sorted(found.items()))


def shape(cls: type) -> dict:
    tree = classes(cls)
    digest = hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest()[:16]
    return {"fingerprint": digest, "classes": tree}


def current() -> dict[str, tuple[int, dict]]:
    """kind -> (its schema version, the shape of its record type) in this checkout."""
    versions, kinds = module("records").SCHEMA, module("schema").KINDS
    return {kind: (versions[kind], shape(kinds[kind])) for kind in sorted(kinds)}


def write(force: bool = False) -> list[str]:
    """Add the current versions' shapes to shapes.json; the problems that stopped it."""
    known = json.loads(SHAPES.read_text()) if SHAPES.exists() else {}
    problems = []
    for kind, (version, now) in current().items():
        old = known.setdefault(kind, {}).get(str(version))
        if old is not None and old["fingerprint"] != now["fingerprint"] and not force:
            problems.append(f"{kind} schema {version} has another shape in {SHAPES.name}: "
                            "bump the version rather than rewrite it")
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
