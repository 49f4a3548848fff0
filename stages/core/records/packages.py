"""Recorded package sets, and how two environments' are compared.

env.json's `distributions` are the packages that matter (torch's dependency closure and the
distributions of the modules a worker imports; stages/env.py): what `baseline.measure=auto`
and the env diff compare. packages.json beside it lists every installed distribution: what a
venv is rebuilt from (arms.venv pins exactly and installs without dependencies, so it needs a
complete set).
"""
from __future__ import annotations

import json

from stages.core.errors import UserError

PACKAGES = "packages.json"      # beside env.json, written by the env stage


def _restricted(env: dict, names: set[str]) -> dict:
    """An older env (schema 1: `installed`, every distribution) on the names that matter."""
    out = {k: v for k, v in env.items() if k != "installed"}
    out["distributions"] = {n: v for n, v in (env.get("installed") or {}).items() if n in names}
    if isinstance(env.get("packages"), dict):
        out["packages"] = {n: v for n, v in env["packages"].items() if n in names}
    return out


def comparable(base: dict | None, now: dict) -> tuple[dict | None, dict]:
    """The two environments as they are compared: on the packages that matter. An env.json
    of schema 1 listed every installed distribution (read as `installed`); which of them
    mattered then is not known, so it is compared on the names that matter on the other side
    now: a package installed beside them is no change. Two such records compare on all."""
    if base is None:
        return None, now
    old_base, old_now = "installed" in base, "installed" in now
    if old_base and old_now:
        every = set(base["installed"] or {}) | set(now["installed"] or {})
        return _restricted(base, every), _restricted(now, every)
    if old_base:
        return _restricted(base, set(now.get("distributions") or {})), now
    if old_now:
        return base, _restricted(now, set(base.get("distributions") or {}))
    return base, now


def that_matter(base: dict, now: dict) -> tuple[dict | None, dict]:
    """(the baseline's packages that matter, this run's), compared as `comparable` says;
    the baseline's is None when its record lists none (an older torchgate's)."""
    base, now = comparable(base, now)
    return base.get("distributions") or None, now.get("distributions") or {}


def every_installed(text: str | None, env: dict, source: str) -> dict[str, str] | None:
    """Every distribution an environment had installed: packages.json's `text` when there is
    one, else what its env.json lists (schema 1: every one; schema 2: the packages that
    matter, whose closure a venv built without dependency resolution may miss). None when
    neither lists any."""
    if text is not None:
        try:
            found = json.loads(text)["distributions"]
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{source} is not a torchgate package list; restore it from git "
                            "or rerun the env stage (`python -m stages.env`)") from None
        if isinstance(found, dict) and found:
            return found
    return env.get("installed") or env.get("distributions") or None
