"""Every settings key is documented in conf/: the configuration reference is conf/'s comments.

The keys come from the typed configuration itself: `torchgate.core.config.Config` and its
dataclass fields, recursively (nested sections such as `stats.delta` and `launcher.ray`, and
the per-entry dataclasses of the dict sections `device`, `precision` and `workload`). A key is
documented when, within its section's text in conf/, a comment names it, or its own line
carries a comment, or the line right above it is a comment. A section's text is its block of
conf/config.yaml (with the comment right above it) and every file of its group folder
conf/<section>/ (where a group sets it, e.g. conf/device/*.yaml)."""
from __future__ import annotations

import dataclasses
import re
import types
import typing

import pytest

from torchgate.core import config

from .projects import ROOT

CONF = ROOT / "conf"

# Fields that are not keys a user writes, and why. Each must still be a field (checked below),
# so that this list cannot outlive the code.
NOT_KEYS = {
    "name": "an entry's name is its key in the group (`cuda:`), not a key of its own",
    "kwargs": "a workload's other keys are its function's arguments",
    "family": "set by a sweep: the workload a swept unit was made from",
    "point": "set by a sweep: a swept unit's values",
}
# Per-entry fields a sweep sets, not the entry's YAML (WorkloadSpec.threads is `sweep.threads`),
# or that another key holds (WorkloadSpec.slow_factor is `_slow_rank_`'s factor).
NOT_KEYS_OF = {"WorkloadSpec": {"threads", "slow_factor"}}


def dataclass_of(tp) -> type | None:
    """The dataclass a field holds: itself, optional, or as the values of a dict section."""
    if dataclasses.is_dataclass(tp):
        return tp
    origin = typing.get_origin(tp)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return dataclass_of(args[0])
    if origin is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]):
        return args[1]
    return None


def is_group(tp) -> bool:
    """A dict of named entries (device.<name>, ...) rather than a section of fixed keys."""
    return typing.get_origin(tp) is dict


def spellings(cls: type, name: str) -> tuple[str, ...]:
    """How a field is written in YAML: workloads reserve `_name_` for the harness's keys."""
    return (name, f"_{name}_") if cls.__name__ == "WorkloadSpec" else (name,)


def keys(cls: type, path: str) -> list[tuple[str, type, str]]:
    """(dotted path, owning class, field name) for every field under cls, recursively."""
    found = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in NOT_KEYS or f.name in NOT_KEYS_OF.get(cls.__name__, ()):
            continue
        here = f"{path}.{f.name}"
        found.append((here, cls, f.name))
        inner = dataclass_of(hints[f.name])
        if inner is not None:
            found += keys(inner, f"{here}.<name>" if is_group(hints[f.name]) else here)
    return found


def top_level_sections() -> list[tuple[str, type]]:
    """(YAML key, type) of Config's fields: a group's field is its folder's plural (devices ->
    conf/device/), so the key is whichever of the two conf/ has."""
    hints = typing.get_type_hints(config.Config)
    found = []
    for f in dataclasses.fields(config.Config):
        candidates = [f.name, f.name[:-1]] if f.name.endswith("s") else [f.name]
        key = next((c for c in candidates if (CONF / c).is_dir() or c in config_blocks()),
                   None)
        assert key is not None, (f"Config.{f.name} is no section of conf/: neither a block of "
                                 f"conf/config.yaml nor a group folder ({candidates})")
        found.append((key, hints[f.name]))
    return found


TOP_KEY = re.compile(r"^([A-Za-z_]\w*):")


def config_blocks() -> dict[str, list[str]]:
    """conf/config.yaml's top-level blocks, each with the comment lines right above it."""
    lines = (CONF / "config.yaml").read_text(encoding="utf-8").splitlines()
    blocks: dict[str, list[str]] = {}
    current, pending = None, []
    for line in lines:
        match = TOP_KEY.match(line)
        if match:
            current = match.group(1)
            blocks[current] = [*pending, line]
            pending = []
        elif line.startswith("#"):
            pending.append(line)
        elif not line.strip():
            if pending:
                pending = []
            elif current is not None:
                blocks[current].append(line)
        elif current is not None:
            blocks[current] += [*pending, line]
            pending = []
    return blocks


def section_text(section: str) -> list[str]:
    lines = list(config_blocks().get(section, []))
    for path in sorted((CONF / section).glob("*.yaml")) if (CONF / section).is_dir() else []:
        lines += path.read_text(encoding="utf-8").splitlines()
    return lines


def comment_of(line: str) -> str | None:
    """The comment of a YAML line, or None (a `#` inside quotes is no comment)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i + 1:]
    return None


def documented(names: tuple[str, ...], lines: list[str]) -> bool:
    words = [re.compile(rf"(?<!\w){re.escape(n)}(?!\w)") for n in names]
    key_line = re.compile(rf"^\s*(-\s*)?({'|'.join(map(re.escape, names))}):")
    for i, line in enumerate(lines):
        comment = comment_of(line)
        if comment is not None and any(w.search(comment) for w in words):
            return True
        if key_line.match(line) and line.lstrip()[0] != "#":
            if comment is not None and comment.strip():
                return True
            above = lines[i - 1] if i else ""
            if above.lstrip().startswith("#"):
                return True
    return False


def every_key() -> list[tuple[str, str, tuple[str, ...]]]:
    """(dotted path, section, spellings) of every settings key."""
    found = []
    for section, tp in top_level_sections():
        found.append((section, section, (section,)))
        inner = dataclass_of(tp)
        if inner is None:
            continue
        prefix = f"{section}.<name>" if is_group(tp) else section
        found += [(path, section, spellings(cls, name)) for path, cls, name in keys(inner, prefix)]
    return found


def test_the_walk_finds_the_configuration():
    """The walk is no vacuous pass: it reaches the nested and per-entry sections."""
    paths = {path for path, _, _ in every_key()}
    assert {"bench.processes", "stats.delta.steady_s", "launcher.ray.address",
            "device.<name>.type", "device.<name>.timing.series", "device.<name>.num_gpus",
            "precision.<name>.rel_l2_tol", "workload.<name>.target"} <= paths
    classes = {cls.__name__: cls for cls in reached(config.Config)}
    fields = {f.name for cls in classes.values() for f in dataclasses.fields(cls)}
    assert set(NOT_KEYS) <= fields, "NOT_KEYS names a field that no longer exists"
    for name, skipped in NOT_KEYS_OF.items():
        assert name in classes and skipped <= {f.name for f in dataclasses.fields(classes[name])}


def reached(cls: type) -> set[type]:
    """cls and every dataclass its fields hold, recursively."""
    found = {cls}
    for tp in typing.get_type_hints(cls).values():
        inner = dataclass_of(tp)
        if inner is not None and inner not in found:
            found |= reached(inner)
    return found


@pytest.mark.parametrize("path, section, names",
                         [pytest.param(*key, id=key[0]) for key in every_key()])
def test_every_settings_key_is_documented_in_conf(path, section, names):
    if path == section:   # a section: its block or group folder carries a comment about it
        lines = section_text(section)
        assert lines and any(comment_of(line) for line in lines), (
            f"section {section!r} has no comment in conf/config.yaml or conf/{section}/")
        return
    assert documented(names, section_text(section)), (
        f"{path} is not documented: add a comment naming `{names[-1]}` in the "
        f"{section!r} block of conf/config.yaml or in conf/{section}/*.yaml")


def test_an_undocumented_key_fails():
    lines = ["bench:", "  processes: 4   # worker processes per cell", "  seed: 0"]
    assert documented(("processes",), lines)
    assert not documented(("seed",), lines)
    assert documented(("seed",), lines[:2] + ["  # the seed of weights and inputs",
                                              "  seed: 0"])
    assert not documented(("seed",), ["  url: 'a # seed'", "  seed: 0"])
