"""Environments compared: which fields changed, and whether the hardware under the timings did."""
from __future__ import annotations

from typing import Any

# The fields whose change makes timings incomparable, as (dotted field, hardware_key name).
HARDWARE_FIELDS = (
    ("hardware.cpu_model", "cpu_model"),
    ("hardware.gpu_names", "gpu_names"),
    ("torch.num_threads", "torch_threads"),
)


class _Missing:
    """A field absent on one side of a diff (distinct from a recorded None)."""

    def __repr__(self) -> str:
        return "(absent)"


MISSING = _Missing()


def get(env: dict | None, dotted: str) -> Any:
    node: Any = env
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def hardware_key(env: dict) -> dict:
    """What must match for two timings to be comparable: CPU, GPUs, torch threads."""
    return {name: get(env, dotted) for dotted, name in HARDWARE_FIELDS}


def flatten(env: dict, prefix: str = "") -> dict[str, object]:
    """Nested dict to dotted keys ("torch.version"); lists and scalars are leaves.

    An empty dict contributes no keys, so setting the first env var reads as one added field.
    """
    flat: dict[str, object] = {}
    for key, value in env.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def diff(base: dict | None, now: dict) -> list[tuple[str, object, object]]:
    """Changed, added and removed dotted fields, sorted; an absent side is MISSING."""
    old, new = flatten(base or {}), flatten(now)
    changes = []
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key, MISSING), new.get(key, MISSING)
        if before != after:
            changes.append((key, before, after))
    return changes


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
