"""Recorded package sets, and how two environments' are compared.

env.json's `distributions` are the packages that matter (torch's dependency closure and the
distributions of the modules a worker imports; stages/env.py): what `baseline.measure=auto`
and the env diff compare. packages.json beside it lists every installed distribution: what a
venv is rebuilt from (arms.venv pins exactly and installs without dependencies, so it needs a
complete set).
"""
from __future__ import annotations

import json

from torchgate.core.errors import UserError

PACKAGES = "packages.json"      # beside env.json, written by the env stage


def _restricted(env: dict, names: set[str]) -> dict:
    """An env that lists every installed distribution (`installed`) on `names` and on those
    it says matter itself."""
    if "installed" not in env:
        return env
    keep = names | set(env.get("distributions") or {})
    out = {k: v for k, v in env.items() if k != "installed"}
    out["distributions"] = {n: v for n, v in (env["installed"] or {}).items() if n in keep}
    if isinstance(env.get("packages"), dict):
        out["packages"] = {n: v for n, v in env["packages"].items() if n in keep}
    return out


def comparable(base: dict | None, now: dict) -> tuple[dict | None, dict]:
    """The two environments as they are compared: on the packages that matter. A side that
    lists every installed distribution (`installed`: an env.json of schema 1, which did not
    say which mattered; another interpreter's capture, which imported no workload) is compared
    on the names that matter on the other side, and on those it says matter itself: a package
    installed beside them is no change."""
    if base is None:
        return None, now
    return (_restricted(base, set(now.get("distributions") or {})),
            _restricted(now, set(base.get("distributions") or {})))


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
                            "or rerun the env stage (`python -m torchgate.env`)") from None
        if isinstance(found, dict) and found:
            return found
    return env.get("installed") or env.get("distributions") or None
