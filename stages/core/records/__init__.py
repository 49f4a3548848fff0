"""File formats: versioned JSON records, written atomically with sorted keys, read into the
dataclasses of `schema` with one-line errors that name the file and the field.

Each kind has its own schema version; a record of an older version is upgraded on reading
(`upgrades`), so a baseline history committed by an older torchgate stays comparable. JSON
only: nothing here (or anywhere in torchgate) loads pickles.
"""
from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from torchgate.core.errors import UserError
from torchgate.core.metrics import METRICS, Unit
from torchgate.core.records import schema, upgrades
from torchgate.core.typed import from_data, to_data

# Each kind's version: its newest entry in upgrades.HISTORY. A new field with a default needs
# no new one; a field whose meaning, unit, type or default changes, or that is removed, renamed
# or made required, does (the rule, and each version's change, are in `upgrades`).
SCHEMA = {kind: max(v for k, v in upgrades.HISTORY if k == kind) for kind in schema.KINDS}
KIND_OF = {cls: kind for kind, cls in schema.KINDS.items()}
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def dumps(obj: Any) -> str:
    """Sorted keys, one key per line, shortest round-trip floats: readable git diffs."""
    return json.dumps(to_data(obj), sort_keys=True, indent=1, allow_nan=False) + "\n"


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


# A full disk or quota, a read-only or too-small file system: what to do about it.
_FULL = {errno.ENOSPC: "free space on that disk and rerun",
         errno.EDQUOT: "free space within your disk quota and rerun",
         errno.EFBIG: "the file system takes no file this large",
         errno.EROFS: "the file system is read-only; rerun where reports/ can be written",
         errno.EACCES: "make the folder writable and rerun",
         errno.EPERM: "make the folder writable and rerun"}


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write atomically: a temp file in the same folder, fsync, then rename over the target.
    A failed write leaves the previous file in place and is one line naming the file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _unwritten(path, exc) from None
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; reports are ordinary files
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in _FULL:
            raise _unwritten(path, exc) from None
        raise


def _unwritten(path: Path, exc: OSError) -> Exception:
    if exc.errno not in _FULL:
        return exc
    name = errno.errorcode.get(exc.errno, str(exc.errno))
    kept = "the previous file is kept" if path.exists() else "nothing was written"
    return UserError(f"cannot write {path}: {exc.strerror or exc} ({name}); {kept}: "
                     f"{_FULL[exc.errno]}")


# A cell this machine cannot run (its device is absent: `matrix=gpu` on a CPU box) writes its
# SKIPPED record where DVC wants its outputs, listed here, so that `git add reports` leaves
# it out (this file too): nothing else would tell a reviewer it is not a measurement.
NOT_RUN = ("#torchgate: cells this machine cannot run (no device); records kept out of git\n"
           "/.gitignore\n")


def out_of_git(folder: str | Path, names: list[str], out: bool) -> None:
    """List `names` in the folder's .gitignore (out) or take them off (a cell that ran)."""
    ignore = Path(folder) / ".gitignore"
    listed = [line for line in (ignore.read_text(encoding="utf-8").splitlines()
                                if ignore.exists() else []) if line.startswith("/")
              and line != "/.gitignore"]
    these = {f"/{name}" for name in names}
    wanted = sorted(set(listed) | these) if out else [line for line in listed
                                                     if line not in these]
    if wanted == listed:
        return
    if wanted:
        write_text(ignore, NOT_RUN + "".join(f"{line}\n" for line in wanted))
    else:
        ignore.unlink()


# A picture folder ignores itself (its .gitignore included): whatever the reports root,
# nothing drawn is committed.
IGNORE_ALL = "*\n"


def replace_pictures(folder: str | Path, pictures: dict[str, bytes]) -> None:
    """Make the folder's PNGs exactly `pictures`: each written (atomically) only where its
    bytes changed, since the pictures carry no date; any other PNG removed, so that none is
    left from an earlier run. The folder is made even when empty (it is a declared DVC
    output), with a .gitignore that keeps all of it out of git."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists() or ignore.read_text(encoding="utf-8") != IGNORE_ALL:
        write_text(ignore, IGNORE_ALL)
    drop_pictures(folder, keep=set(pictures))
    for name, data in pictures.items():
        path = folder / name
        if not path.exists() or path.read_bytes() != data:
            write_bytes(path, data)


def drop_pictures(folder: str | Path, keep: set[str] = frozenset()) -> None:
    """Remove the folder's PNGs but those in `keep` (also those an older torchgate committed
    beside the data, in plots/ and trends/, so that the next commit takes them out)."""
    folder = Path(folder)
    for old in folder.glob("*.png") if folder.is_dir() else ():
        if old.name not in keep:
            old.unlink()


def record_data(record: Any) -> dict:
    """A record as the plain data of its file, with its kind and schema version."""
    kind = KIND_OF[type(record)]
    return {"schema_version": SCHEMA[kind], "kind": kind, **to_data(record)}


# Bench and compare records keep each float to 6 significant digits (a whole number whole):
# at most 5e-7 of a value lost, four orders of magnitude below the run-to-run spread (about
# 1e-2) and any δ, where the 17 digits of a full float were a fifth of a committed run's
# bytes. Numerics records keep full floats: an output is compared with the baseline's bit for
# bit. Any change a page shows, any verdict, is as the full floats gave it (the test: records).
DIGITS = 6
KEPT_TO_DIGITS = {"bench", "compare"}


def kept(data: Any, digits: int = DIGITS) -> Any:
    """Plain data with every float that is not a whole number kept to `digits` significant
    digits; a non-finite float as it is."""
    if isinstance(data, dict):
        return {k: kept(v, digits) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [kept(v, digits) for v in data]
    if isinstance(data, float) and math.isfinite(data) and not data.is_integer():
        return float(f"{data:.{digits}g}")
    return data


def write_record(path: str | Path, record: Any) -> None:
    data = record_data(record)
    write_text(path, dumps(kept(data) if data["kind"] in KEPT_TO_DIGITS else data))


def parse_record(text: str, cls: type, source: str) -> Any:
    """Parse, upgrade and check a record; `source` names where it came from."""
    kind = KIND_OF[cls]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source} is not valid JSON ({exc.msg} at line {exc.lineno}); "
                        f"restore it from git or delete it and rerun") from None
    except RecursionError:      # e.g. "[" 100,000 times: nested past any record's depth
        raise UserError(f"{source} is nested deeper than any torchgate record; restore it "
                        "from git or delete it and rerun") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise UserError(f"{source} is not a torchgate {kind} record")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(f"{source} has schema_version {version!r}; a torchgate {kind} record "
                        f"has a whole number from 1 to {SCHEMA[kind]}")
    if version > SCHEMA[kind]:
        raise UserError(f"{source} has schema_version {version}, written by a newer torchgate; "
                        f"this one reads {kind} records up to {SCHEMA[kind]}: upgrade torchgate "
                        "or rerun the stage to rewrite it")
    written = version
    try:
        while True:
            data = upgrades.SAME_VERSION.get((kind, version), dict)(data)
            if version == SCHEMA[kind]:
                break
            data = upgrades.UPGRADES.get((kind, version), dict)(data)
            version += 1
    except Exception as exc:   # noqa: BLE001  an upgrade assumes its version's shape
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise UserError(f"{source} is a malformed {kind} record of schema_version {version} "
                        f"({type(exc).__name__}: {first}); restore it from git or delete it "
                        "and rerun") from None
    if not isinstance(data, dict):
        raise UserError(f"{source} is not a torchgate {kind} record")
    body = {k: v for k, v in data.items() if k not in ("schema_version", "kind")}
    try:
        record = from_data(cls, body, "", context=f"{source}: ")
    except UserError as exc:
        # A field added without a version (one with a default) is unknown to an older
        # torchgate: refused by name, never misread.
        if written != SCHEMA[kind] or not str(exc).startswith(f"{source}: unknown key "):
            raise
        raise UserError(f"{exc} (a field this torchgate does not know: a newer torchgate may "
                        "have written it; upgrade torchgate or rerun the stage to rewrite the "
                        "record)") from None
    if kind == "bench":
        why = unmeasurable(record)
        if why:
            raise UserError(f"{source}: {why}: a measured value is a finite number, not "
                            "negative, and a timing one a clock can give (1 ns to a day); "
                            "restore it from git or rerun the stage")
    return record


# What a clock can give for one timed thing: no call takes under a nanosecond, none that a
# run waits for takes a day. Outside them a timing is an edit or a corruption, and would
# overflow the judge's arithmetic (1e-30 s and 1e300 s did) or drop the process unseen (0).
SECONDS = (1e-9, 86_400.0)


def unmeasurable(record: schema.BenchRecord) -> str | None:
    """Where a bench record holds a value no measurement gives (NaN, inf, negative; a timing
    of zero or outside SECONDS) in a timing, size or count of core.metrics, or in its
    device's price, or a workload with no process that says why: an edited or corrupted
    record, which must not be compared as if measured. None: every value can be."""
    def bad(value, timed: bool = False) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        return not (math.isfinite(value) and value >= 0) or timed and not (
            SECONDS[0] <= value <= SECONDS[1])
    price = (record.device or {}).get("price_per_hour")
    if bad(price):
        return f"device price_per_hour {price!r}"
    for workload, run in record.workloads.items():
        if not run.processes and not run.unchanged and record.status == "OK":
            return f"{workload}: no process, and no reason it was not measured"
        for i, proc in enumerate(run.processes):
            for mode, timing in proc.modes.items():
                for metric in METRICS:
                    value = metric.read(timing)
                    for v in value if isinstance(value, tuple) else (value,):
                        if bad(v, metric.unit == Unit.SECONDS):
                            return f"{workload} {mode}, process {i + 1}: {metric.name} {v!r}"
    return None


def load_record(path: str | Path, cls: type) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path} is missing; run `dvc repro` to produce it") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (byte {exc.start}); restore it from git or "
                        "delete it and rerun") from None
    return parse_record(text, cls, str(path))
