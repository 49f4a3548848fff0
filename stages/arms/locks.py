"""An environment declared per machine, in the repository: conf/env/<machine>.txt.

A lock is a pip requirements file, every installable distribution pinned exactly (written from
a venv by `python -m torchgate.lock`), with the Python version in its header and, for a torch
build with a local label (2.13.0+cpu, 2.14.1+cu130), PyTorch's index for it, so that
`pip install -r conf/env/<machine>.txt` rebuilds it on a fresh runner. Where a lock exists an
arm's environment is the lock at that arm's revision (plan.py): a change that leaves the lock
alone is a code-only comparison in one interpreter, and one that edits it builds the baseline
from its own lock. Pure but for reading files and git.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from torchgate.core.baseline import git
from torchgate.core.errors import UserError

FOLDER = Path("conf/env")
TORCH_INDEX = "https://download.pytorch.org/whl/"
# A version as PEP 440 spells one (local labels included): `===` (arbitrary equality) or a
# trailing `\` (pip joins the next line) is no pin torchgate reads as pip would.
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.!+_-]*)\s*$")
_PYTHON = re.compile(r"^#\s*python\s+(\d+\.\d+(?:\.\d+)?)\s*$")
_INDEX = re.compile(r"^--extra-index-url\s+(" + re.escape(TORCH_INDEX) + r"[\w.]+)\s*$")


@dataclass(frozen=True)
class Lock:
    python: str                    # the interpreter's version, e.g. 3.11.7
    pins: dict[str, str]           # normalized name -> exact version
    index: str | None = None       # PyTorch's index for a labelled torch build (+cpu, +cu130)


def minor(version: str) -> str:
    """3.11.7 and 3.11 alike: 3.11 (a lock written for another machine names no patch)."""
    return ".".join(version.split(".")[:2])


def path_of(machine: str) -> Path:
    return FOLDER / f"{machine}.txt"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def text_of(lock: Lock, machine: str) -> str:
    label = lock.pins.get("torch", "").partition("+")[2]
    index = lock.index or (f"{TORCH_INDEX}{label}" if label else None)
    lines = [f"# The environment of machine {machine}, written by `python -m torchgate.lock`.",
             "# Install: pip install -r this file, then pip install --no-deps -e .",
             f"# python {lock.python}"]
    if index:
        lines.append(f"--extra-index-url {index}")
    lines += [f"{name}=={version}" for name, version in sorted(lock.pins.items())]
    return "\n".join(lines) + "\n"


def pins_of(text: str) -> dict[str, str]:
    """The `name==version` lines of a requirements text (uv's or pip's), normalized names;
    every other line (comments, options) left out."""
    return {normalized(m.group(1)): m.group(2) for line in text.splitlines()
            if (m := _PIN.match(line.strip()))}


def parse(text: str, where: str) -> Lock:
    """A lock's text; UserError naming the line that is not a pin, an option or a comment."""
    python, pins, index = None, {}, None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        found = _PYTHON.match(line)
        if found:
            python = found.group(1)
        if not line or line.startswith("#"):
            continue
        option = _INDEX.match(line)
        if option:
            index = option.group(1)
            continue
        if line.startswith("-"):   # pip would install by it what torchgate's pins do not say
            raise UserError(f"{where} line {number} is a pip option torchgate does not read: "
                            f"{line[:80]!r}; a lock holds exact pins and the torch index line "
                            "`python -m torchgate.lock` writes: write it again with that")
        pin = _PIN.match(line)
        if not pin:
            raise UserError(f"{where} line {number} is not `name==version`: {line[:80]!r}; "
                            "write the lock again with `python -m torchgate.lock`")
        pins[normalized(pin.group(1))] = pin.group(2)
    if python is None:
        raise UserError(f"{where} does not say its Python version (a `# python 3.11.7` line); "
                        "write it again with `python -m torchgate.lock`")
    return Lock(python, pins, index)


def read(machine: str, root: Path = Path(".")) -> Lock | None:
    """This working tree's lock of the machine, None when it has none."""
    where = root / path_of(machine)
    return parse(where.read_text(encoding="utf-8"), str(path_of(machine))) if where.is_file() \
        else None


def read_at(commit: str | None, machine: str, root: Path = Path(".")) -> Lock | None:
    """The machine's lock as committed at `commit`, None when it had none."""
    text = git.read_file(commit, path_of(machine).as_posix(), root)
    return None if text is None else parse(text, f"{path_of(machine)} at {commit[:10]}")


def changes(before: dict[str, str], after: dict[str, str],
            names: set[str] | None = None) -> list[str]:
    """What differs, torch first: `torch 2.13.0 -> 2.14.1`, `+numpy 2.1.0`, `-rich 13.0`;
    only among `names` when given (the packages that matter)."""
    keys = sorted(before.keys() | after.keys(), key=lambda n: (n != "torch", n))
    out = []
    for name in keys:
        if names is not None and name not in names:
            continue
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        out.append(f"+{name} {new}" if old is None else f"-{name} {old}" if new is None
                   else f"{name} {old} -> {new}")
    return out
