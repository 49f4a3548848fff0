"""The fields of a captured environment (an EnvRecord's nested dict) by dotted name,
"torch.version": read one, flatten them all, or list those that differ between two. Which
changes keep the timings comparable is the judge's (judge.environment)."""
from __future__ import annotations

from typing import Any


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


def changed(base: dict | None, now: dict | None) -> list[tuple[str, object, object]]:
    """(dotted field, base's value, now's) for every field that differs, added or removed
    (an absent side is MISSING), sorted by field."""
    old, new = flatten(base or {}), flatten(now or {})
    return [(key, old.get(key, MISSING), new.get(key, MISSING))
            for key in sorted(old.keys() | new.keys())
            if old.get(key, MISSING) != new.get(key, MISSING)]
