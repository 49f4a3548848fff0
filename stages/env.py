"""Stage `env`: record the environment that timings were taken in.

    python -m stages.env

reports/<machine>/env/env.json holds stable fields only (measure.probe), so an unchanged environment
rewrites it byte-identical and `dvc repro` skips everything downstream. The environment is not
a file DVC can hash, so this stage runs on every `dvc repro` (`always_changed`, in
reports/env/dvc.yaml); it must cost next to nothing when nothing changed. When the fingerprint
(measure.fingerprint: interpreter, installed distributions, CPU, GPU driver, OS, variables;
read with the standard library alone) equals the one recorded beside the capture, the capture
stands and nothing else is imported: no torch, no package metadata, no git. Measured on the
shared 2-core VM: 0.05 s, against 0.19 s when this stage also rendered env.md, and 2 s for a
full capture (torch's import). The environment's diff against the baseline, reports/env/env.md,
is the compare stage's: it depends on the baseline, which a commit moves, and a page that
changed after every commit would leave the committed tree dirty.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os

from stages.core import machine
from stages.core.errors import UserError, one_line_errors
from stages.measure.fingerprint import fingerprint

ENV_SCHEMA = 1      # records.SCHEMA["env"], not imported: importing records costs 0.06 s


def _digest(env: object) -> str:
    """sha256 of the capture as records.dumps writes it (tests check they agree)."""
    text = json.dumps(env, sort_keys=True, indent=1, allow_nan=False) + "\n"
    return hashlib.sha256(text.encode()).hexdigest()


def _load(json_path: str) -> dict:
    with open(json_path, encoding="utf-8") as fh:
        return json.load(fh)


def recorded(json_path: str, print_: dict) -> dict | None:
    """The recorded capture when its fingerprint is this one and it is intact (an edited or
    older record is captured again), else None."""
    try:
        previous = _load(json_path)
        env = previous["env"]
        if (previous.get("kind") == "env" and previous.get("schema_version") == ENV_SCHEMA
                and previous.get("fingerprint") == json.loads(json.dumps(print_))
                and previous.get("digest") == _digest(env)):
            return env
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _capture(json_path: str, print_: dict) -> str:
    """Capture the environment (imports torch), write it, and say what changed since the
    record it replaces."""
    from stages.core.records import dumps, write_record
    from stages.core.records.schema import EnvRecord
    from stages.judge.environment import diff, hardware_changes
    from stages.measure.probe import capture

    try:
        before = _load(json_path).get("env")
    except (OSError, ValueError, AttributeError):
        before = None
    now = json.loads(dumps(capture()))
    write_record(json_path, EnvRecord(now, print_, _digest(now)))
    if not isinstance(before, dict):
        return "captured"
    if hardware_changes(before, now):
        return "captured: hardware changed"
    changed = [field for field, _, _ in diff(before, now)]
    if not changed:
        return "captured: unchanged"
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return f"captured: {len(changed)} field(s) changed since the last capture ({shown})"


def check_machine(name: str, derived: bool) -> None:
    """Stop before anything is written when params.yaml names a machine this is not: another
    machine's reports would take this one's numbers."""
    why = machine.check_name(None if name in ("None", "null") else name)
    if why:
        raise UserError(why)
    declared = os.environ.get(machine.ENV_VAR)
    if declared and declared != name:
        raise UserError(f"{machine.ENV_VAR}={declared} but params.yaml names machine {name!r}: "
                        "run `python -m stages.compose` to compose params.yaml for this machine")
    if derived and not declared and name != machine.derived_name():
        raise UserError(f"params.yaml names machine {name!r}, composed on other hardware (this "
                        f"is {machine.derived_name()!r}): run `python -m stages.compose` here, "
                        f"or name this machine with {machine.ENV_VAR}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.env",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--machine", help="machine.name from params.yaml (default: "
                        "TORCHGATE_MACHINE, else the name derived from this hardware)")
    parser.add_argument("--derived", default="false",
                        help="machine.derived: the name was derived from the hardware")
    parser.add_argument("--out", help="folder for env.json (default reports/<machine>/env)")
    args = parser.parse_args(argv)
    with one_line_errors("env"):
        args.machine = args.machine or machine.unnamed()
        check_machine(args.machine, args.derived.lower() == "true")
        out = args.out or os.path.join(machine.REPORTS.name, args.machine, "env")
        json_path = os.path.join(out, "env.json")   # os.path: pathlib costs 3 ms to import
        print_ = fingerprint()
        if recorded(json_path, print_) is not None:
            print(f"torchgate env: {json_path} stands (the environment's fingerprint is "
                  "unchanged)")
            return
        try:
            summary = _capture(json_path, print_)
        except OSError as exc:
            raise UserError(f"cannot write {json_path}: {exc}") from None
        print(f"torchgate env: wrote {json_path}; {summary}")


if __name__ == "__main__":
    main()
