"""The migrations a run reports on: named pairs `from -> to`, each side a cell of a machine.

    migration:
      pairs:
        fp32_to_bf16: {from: cpu-fp32, to: cpu-bf16}
        to_box_b: {from: box-a/cpu-fp32, to: box-b/cpu-fp32, modes: [eager]}

A side is `[machine/]cell`: the cell as in reports/<machine>/bench/<cell>.json, the machine
omitted for this run's. Each pair is one `migration@<name>` stage (dvc.yaml's `foreach`), so
that no pair declared is no stage. The keys `from` and `to` are Python keywords, so the pairs
are read here rather than typed field by field. Standard library only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from stages.core import machine
from stages.core.errors import UserError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
CELL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*-[A-Za-z0-9_.]+$")
KEYS = ("from", "to", "modes")


@dataclass(frozen=True)
class Side:
    """One side of a migration: a cell, on a machine (None: this run's)."""
    cell: str
    machine: str | None = None

    def label(self, here: str | None = None) -> str:
        """`cell` on this run's machine (`here`), else `machine/cell`."""
        return self.cell if self.machine in (None, here) else f"{self.machine}/{self.cell}"

    def on(self, here: str) -> Side:
        """The side with its machine named (this run's where it was omitted)."""
        return Side(self.cell, self.machine or here)


@dataclass(frozen=True)
class MigrationPair:
    name: str
    source: Side
    target: Side
    modes: tuple[str, ...] = ()        # () : every mode both sides measured


def side(text: Any, where: str) -> Side:
    if not isinstance(text, str) or text.count("/") > 1:
        raise UserError(f"{where} must be a cell, `[machine/]cell` (e.g. cpu-fp32 or "
                        f"box-b/cpu-fp32), got {text!r}")
    host, _, cell = text.rpartition("/")
    if host:
        why = machine.check_name(host)
        if why:
            raise UserError(f"{where}: {why.replace('machine.name', 'the machine')}")
    if not CELL.match(cell):
        raise UserError(f"{where} names the cell {cell!r}; a cell is <device>-<precision> as in "
                        "reports/<machine>/bench/<cell>.json (e.g. cpu-fp32)")
    return Side(cell, host or None)


def parse_pairs(pairs: Any, modes: tuple[str, ...]) -> dict[str, MigrationPair]:
    """`migration.pairs` as Pairs; one line naming the key for anything malformed. `modes`:
    the valid mode names."""
    if pairs is None:
        return {}
    if not isinstance(pairs, dict):
        raise UserError(f"migration.pairs must map a name to {{from: <cell>, to: <cell>}}, "
                        f"got {pairs!r}")
    found = {}
    for name, body in pairs.items():
        where = f"migration.pairs.{name}"
        if not isinstance(name, str) or not NAME.match(name):
            raise UserError(f"{where}: a pair's name names its stage and files; use letters, "
                            "digits, '.', '_' and '-' (at most 64)")
        if not isinstance(body, dict):
            raise UserError(f"{where} must be {{from: <cell>, to: <cell>}}, got {body!r}")
        unknown = sorted(set(body) - set(KEYS))
        if unknown:
            raise UserError(f"unknown key {where}.{unknown[0]}; valid keys: {', '.join(KEYS)}")
        for key in ("from", "to"):
            if key not in body:
                raise UserError(f"{where}.{key} is missing; give a cell such as cpu-fp32")
        chosen = body.get("modes") or ()
        if not isinstance(chosen, (list, tuple)) or any(m not in modes for m in chosen):
            raise UserError(f"{where}.modes must list modes among {', '.join(modes)}, "
                            f"got {chosen!r}")
        source, target = side(body["from"], f"{where}.from"), side(body["to"], f"{where}.to")
        if source == target:
            raise UserError(f"{where} goes from {body['from']} to itself; name two cells")
        found[name] = MigrationPair(name, source, target, tuple(chosen))
    return found
