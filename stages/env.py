"""Stage `env`: record the environment that timings were taken in, and what changed.

    python -m stages.env

reports/env/env.json holds stable fields only (measure.probe), so an unchanged environment
rewrites it byte-identical and `dvc repro` skips everything downstream; when nothing that
could change it changed (a fingerprint read without importing torch), the previous capture is
reused. reports/env/env.md is the environment and its diff against the baseline's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

from stages.core.baseline import load_baseline
from stages.core.baseline.git import resolve_rev
from stages.core.config.settings import Baseline
from stages.core.errors import UserError, one_line_errors
from stages.core.records import dumps, write_record, write_text
from stages.core.records.schema import EnvRecord
from stages.core.typed import from_data
from stages.core.vocabulary import REPORTS
from stages.judge.environment import diff, hardware_changes, hardware_first
from stages.measure.probe import capture, fingerprint
from stages.render.environment import render_md


def _baseline_rev(params: Path) -> str:
    """`baseline.rev` from the params file; HEAD when the file or the key is absent. Only the
    `baseline` section is read: the env stage depends on nothing else."""
    import yaml
    try:
        data = yaml.safe_load(params.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "HEAD"
    except yaml.YAMLError as exc:
        raise UserError(f"{params} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        return "HEAD"
    if not isinstance(data, dict):
        raise UserError(f"{params} must be a mapping of settings")
    return from_data(Baseline, data.get("baseline") or {}, "baseline").rev


def _reuse(json_path: Path, print_: dict) -> dict:
    """The previous capture when the fingerprint still matches, else a fresh one, written."""
    try:
        previous = json.loads(json_path.read_text(encoding="utf-8"))
        env = previous.get("env")
        if (previous.get("fingerprint") == json.loads(dumps(print_))
                and previous.get("digest") == _digest(env)):  # an edited record is recaptured
            return env
    except (OSError, ValueError, AttributeError):
        pass
    now = json.loads(dumps(capture()))
    write_record(json_path, EnvRecord(now, print_, _digest(now)))
    return now


def _digest(env: object) -> str:
    return hashlib.sha256(dumps(env).encode()).hexdigest()


def page(base: dict | None, now: dict, label: str, error: str | None = None) -> str:
    """env.md: the environment, and what changed against the baseline's (`label`), the
    hardware fields first; `error`: why the baseline's could not be read."""
    changes = None if base is None else hardware_first(diff(base, now))
    hardware = [] if base is None else hardware_changes(base, now)
    return render_md(now, label, changes, hardware, baseline_error=error)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.env",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", type=Path,
                        help="params file; baseline.rev names the baseline (default HEAD)")
    parser.add_argument("--out", default=REPORTS / "env", type=Path,
                        help="folder for env.json and env.md")
    args = parser.parse_args(argv)
    with one_line_errors("env"):
        rev = _baseline_rev(args.params)
        json_path = args.out / "env.json"
        now = _reuse(json_path, fingerprint())
        commit = resolve_rev(rev)
        base, error = None, None
        try:
            record = load_baseline(commit, Path(os.path.relpath(json_path)), EnvRecord)
            base = record.env if record is not None else None
        except UserError as exc:
            error = str(exc)
        write_text(args.out / "env.md", page(base, now, rev, error))
        if error is not None:
            summary = f"baseline unreadable ({error})"
        elif base is None:
            summary = "no baseline yet"
        elif hardware_changes(base, now):
            summary = "hardware changed: timings not comparable"
        else:
            count = len(diff(base, now))
            summary = f"{count} field(s) changed against the baseline" if count else "no change"
        print(f"torchgate env: wrote {json_path} and {args.out / 'env.md'}; {summary}")


if __name__ == "__main__":
    main()
