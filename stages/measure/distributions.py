"""Installed distributions, and the ones that matter to a measurement: torch's dependency
closure and the distributions of the modules a worker imports (torch, the harness, the
workloads). Installing pytest or ipython beside them changes no timing, so it must not change
env.json, which every bench and numerics stage depends on.

Read from package metadata (importlib.metadata), standard library alone; `path` reads another
folder list than sys.path (tests build a fake site folder).
"""
from __future__ import annotations

import inspect
import re
from importlib import metadata
from typing import Iterable

ROOTS = ("torch",)      # whose dependency closure matters whether or not it is imported
_EXTRA = re.compile(r"\bextra\s*[=!]=")


def normalized(name: str) -> str:
    """PEP 503: "Typing_Extensions" -> "typing-extensions"."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(path: list[str] | None = None) -> dict[str, metadata.Distribution]:
    """Every installed distribution by normalized name; the first on the path wins, as it is
    the one that imports."""
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions(**({} if path is None else {"path": path})):
        try:
            name = normalized(dist.metadata["Name"] or "")
        except Exception:
            continue
        if name and name not in found:
            found[name] = dist
    return found


def _servable(dist: metadata.Distribution) -> bool:
    """Installed from an index: not from a path, a URL or in editable mode (PEP 610
    direct_url.json), which no index serves again."""
    try:
        return not dist.read_text("direct_url.json")
    except Exception:
        return False


def versions(dists: dict[str, metadata.Distribution]) -> dict[str, str]:
    """name -> version (with its local label: torch 2.13.0+cpu) of every distribution an
    index can serve again, sorted."""
    found = {}
    for name, dist in dists.items():
        if _servable(dist):
            try:
                found[name] = dist.version
            except Exception:
                found[name] = None
    return dict(sorted(found.items()))


def _applies(marker: str) -> bool:
    """Whether a requirement's environment marker holds here, extras left out. Evaluated with
    `packaging` when it is installed; without it only extras are told apart (a platform's
    dependency that does not apply here is not installed either, and only installed ones
    count)."""
    if not marker.strip():
        return True
    try:
        from packaging.markers import Marker
        return Marker(marker).evaluate({"extra": ""})
    except Exception:   # no packaging, or a marker it cannot read
        return not _EXTRA.search(marker)


def requirements(dist: metadata.Distribution) -> list[str]:
    """The normalized names of what `dist` requires here (markers honoured, extras not)."""
    names = []
    for text in dist.requires or ():
        spec, _, marker = text.partition(";")
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if found and _applies(marker):
            names.append(normalized(found.group(1)))
    return names


def closure(roots: Iterable[str], dists: dict[str, metadata.Distribution]) -> set[str]:
    """The installed distributions `roots` need, transitively, the roots included."""
    seen: set[str] = set()
    todo = [normalized(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen or name not in dists:
            continue
        seen.add(name)
        try:
            todo.extend(requirements(dists[name]))
        except Exception:
            pass
    return seen


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The import names a distribution provides: top_level.txt, else the first part of each
    file it installed (importlib.metadata.packages_distributions reads them the same way)."""
    declared = (dist.read_text("top_level.txt") or "").split()
    if declared:
        return set(declared)
    names = set()
    for file in dist.files or ():
        parts = file.parts
        name = parts[0] if len(parts) > 1 else inspect.getmodulename(str(file))
        if name and "." not in name:
            names.add(name)
    return names


def providers(dists: dict[str, metadata.Distribution]) -> dict[str, set[str]]:
    """Top-level import name -> the distributions that provide it (several for a namespace
    package)."""
    found: dict[str, set[str]] = {}
    for name, dist in dists.items():
        try:
            tops = _top_level(dist)
        except Exception:
            continue
        for top in tops:
            found.setdefault(top, set()).add(name)
    return found


def that_matter(modules: Iterable[str], dists: dict[str, metadata.Distribution],
                roots: Iterable[str] = ROOTS) -> set[str]:
    """The names of the distributions that matter: the closure of `roots` and the providers
    of the imported `modules` (dotted names; their top level decides)."""
    by_top = providers(dists)
    imported = {m.split(".")[0] for m in modules}
    return closure(roots, dists) | {d for top in imported for d in by_top.get(top, ())}
