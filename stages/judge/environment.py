"""Environments compared: which fields changed, and whether the hardware under the timings did."""
from __future__ import annotations

from typing import Any

from stages.core.records.dotted import MISSING, flatten, get
from stages.core.records.packages import comparable

# The fields whose change makes timings incomparable, as (dotted field, hardware_key name).
HARDWARE_FIELDS = (
    ("hardware.cpu_model", "cpu_model"),
    ("hardware.gpu_names", "gpu_names"),
    ("torch.num_threads", "torch_threads"),
)
Change = tuple[str, object, object]      # (dotted field, baseline's value, this run's)


def hardware_key(env: dict) -> dict:
    """What must match for two timings to be comparable: CPU, GPUs, torch threads."""
    return {name: get(env, dotted) for dotted, name in HARDWARE_FIELDS}


def diff(base: dict | None, now: dict) -> list[Change]:
    """Changed, added and removed dotted fields, sorted; an absent side is MISSING. Packages
    are compared on those that matter (core.records.packages.comparable): an older baseline
    that lists every installed distribution, on the names that matter now."""
    base, now = comparable(base, now)
    old, new = flatten(base or {}), flatten(now)
    changes = []
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key, MISSING), new.get(key, MISSING)
        if before != after:
            changes.append((key, before, after))
    return changes


def hardware_first(changes: list[Change]) -> list[Change]:
    """A diff with the hardware fields (what makes timings incomparable) first."""
    first = {dotted for dotted, _ in HARDWARE_FIELDS}
    return sorted(changes, key=lambda c: (c[0] not in first, c[0]))


def hardware_changes(base: dict, now: dict) -> list[tuple[str, Any, Any]]:
    """(name, baseline's, now) for every hardware field that differs."""
    old, new = hardware_key(base), hardware_key(now)
    return [(name, old[name], new[name]) for name in old if old[name] != new[name]]


def python_change(base: dict | None, now: dict | None) -> str | None:
    """"CPython 3.11.7 -> 3.12.1" when the interpreter differs between two environments; None
    when it does not, or when either side does not say."""
    versions = [(get(env, "python.implementation"), get(env, "python.version"))
                for env in (base, now)]
    if any(v is None for _, v in versions) or versions[0] == versions[1]:
        return None
    (old_impl, old), (new_impl, new) = versions
    return (f"{old_impl or 'Python'} {old} -> {new}" if old_impl == new_impl else
            f"{old_impl} {old} -> {new_impl} {new}")
