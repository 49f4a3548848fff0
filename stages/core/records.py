"""File formats: versioned JSON records, written atomically with sorted keys.

Every record carries `schema_version` and `kind`; loaders reject anything else with a one-line
message. JSON only: nothing here (or anywhere in torchgate) loads pickles.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from stages.core.errors import UserError

SCHEMA_VERSION = 1
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _clean(obj: Any) -> Any:
    """Make a value JSON-safe: NaN/inf become None, tuples lists (JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(_clean(obj), sort_keys=True, indent=1, allow_nan=False) + "\n"


def write_text(path: str | Path, text: str) -> None:
    """Write atomically: a temp file in the same folder, fsync, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; reports are ordinary files
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_record(path: str | Path, kind: str, body: dict) -> None:
    write_text(path, dumps({"schema_version": SCHEMA_VERSION, "kind": kind, **body}))


def parse_record(text: str, kind: str, source: str) -> dict:
    """Parse and check a record; `source` names where it came from, for the message."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source} is not valid JSON ({exc.msg} at line {exc.lineno}); "
                        f"restore it from git or delete it and rerun") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise UserError(f"{source} is not a torchgate {kind} record")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UserError(f"{source} has schema_version {version!r}, this torchgate reads "
                        f"{SCHEMA_VERSION}; rerun the stage to rewrite it")
    return data


def load_record(path: str | Path, kind: str) -> dict:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path} is missing; run `dvc repro` to produce it") from None
    return parse_record(text, kind, str(path))
