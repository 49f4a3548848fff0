"""Stage `env`: record the environment that timings were taken in.

    python -m torchgate.env

Three files in this machine's reports/<machine>/env/ (under --reports where given):

- env.json, which every bench and numerics stage depends on: stable fields only
  (measure.probe), its `distributions` the packages that matter, torch's dependency closure
  and the distributions of the modules a worker imports (torch, the harness and the workloads
  of params.yaml, imported in a child process, torchgate.core.config.targets.imports: a workload
  that does not import is left to the bench stage to report). Rewritten only when its content
  changed, so `pip install pytest` re-measures nothing and an unchanged environment leaves it
  byte-identical.
- packages.json: every installed distribution, for reproducibility and to rebuild the
  baseline's venv (arms); nothing that measures depends on it.
- fingerprint.json: what decides whether to capture again, and the digests of the two files
  as written; nothing depends on it (inside env.json, any pip install would rewrite that).

The environment is not a file DVC can hash, so this stage runs on every `dvc repro`
(`always_changed`, in reports/env/dvc.yaml); it must cost next to nothing when nothing changed.
When the fingerprint (measure.fingerprint: interpreter, installed distributions, CPU, GPU
driver, OS, variables; and the contents of params.yaml and of the project's files that the
last capture found a worker importing, whose imports decide what matters) equals the recorded
one and both files are as written, the capture stands and nothing else is imported: no torch,
no package metadata, no git. Measured on the shared 2-core VM: 0.05 s, against 0.19 s when
this stage also rendered env.md, and a few seconds for a full capture (torch's import, here
and in the child, side by side); the check itself takes 3 ms, 1 ms of it the files' digests.
The environment's diff against the baseline, reports/<machine>/env/env.md, is the compare
stage's: it depends on the baseline, which a commit moves, and a page that changed after every
commit would leave the committed tree dirty.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

from torchgate.core import cli, machine
from torchgate.core.errors import UserError, one_line_errors
from torchgate.measure.fingerprint import fingerprint

ENV_SCHEMA = 2      # records.SCHEMA["env"], not imported: importing records costs 0.06 s
ENV, PACKAGES, FINGERPRINT = "env.json", "packages.json", "fingerprint.json"
# What a worker imports before its workload (measure.worker; the modules of the workloads'
# `_target_`s follow).
WORKER_MODULES = ["torch", "torchgate.measure.worker"]


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _load(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def sources(paths) -> dict[str, str | None]:
    """path -> sha256 of its content (None: absent), sorted."""
    return {path: _digest(path) for path in sorted(set(paths))}


def current(recorded: dict | None, params: str) -> dict:
    """This fingerprint: the environment's, and the contents of params.yaml and of the files
    that the recorded capture found a worker importing."""
    try:
        files = list(recorded["fingerprint"]["sources"])
    except (TypeError, KeyError):
        files = []
    return json.loads(json.dumps({**fingerprint(), "sources": sources([params, *files])}))


def stands(out: str, recorded: dict | None, print_: dict) -> bool:
    """Whether the recorded capture stands: its fingerprint is this one, it was written by
    this env schema, and env.json and packages.json are as written (an edited, deleted or
    older record is captured again)."""
    if not recorded or recorded.get("env_schema") != ENV_SCHEMA \
            or recorded.get("fingerprint") != print_:
        return False
    written = recorded.get("written")
    return isinstance(written, dict) and all(
        written.get(name) == _digest(os.path.join(out, name)) for name in (ENV, PACKAGES))


def worker_imports(params: str) -> tuple[list[str], list[str], str | None]:
    """(the modules a worker imports, the project's files among them, why the workloads were
    not read), read in a child process: a workload module that fails, hangs or ends the
    process is the bench stage's to report, and this stage's own imports (yaml) are not a
    worker's."""
    from torchgate.core import config
    from torchgate.core.config.targets import imports, module_paths

    try:
        cfg = config.load(params)
        default = cfg.bench.timeout_s
        targets = sorted({w.target for w in cfg.workloads.values()})
        limit_s = max((w.timeout_s or default for w in cfg.workloads.values()), default=default)
        note = None
    except UserError as exc:
        targets, limit_s, note = [], 300.0, f"workloads not read ({exc})"
    try:
        found = imports(WORKER_MODULES, targets, limit_s)
    except OSError as exc:      # no child: torch's closure is still known
        found, note = {}, f"what a worker imports not read ({exc})"
    root = os.path.join(os.path.abspath("."), "")
    installed = tuple({os.path.join(p, "") for p in (sys.prefix, sys.exec_prefix,
                                                      sys.base_prefix)})
    files = {os.path.relpath(f, root) for f in found.values() if isinstance(f, str)
             and f.startswith(root) and not f.startswith(installed)
             and not {"site-packages", "dist-packages"} & set(f.split(os.sep))}
    for target in targets:      # one that did not import: its fix must be read again
        files.update(p for p in module_paths(target) if os.path.isfile(p))
    return sorted(found), sorted(files), note


def _write_if_changed(path: str, text: str) -> bool:
    """Write `text` (atomically) unless the file holds it already: an unchanged file keeps
    its bytes and its time."""
    from torchgate.core.records import write_text
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return False
    except (OSError, ValueError):
        pass
    write_text(path, text)
    return True


def _before(path: str) -> dict | None:
    """The environment env.json held, upgraded to this schema; None if unreadable."""
    from torchgate.core.records import parse_record
    from torchgate.core.records.schema import EnvRecord
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_record(fh.read(), EnvRecord, path).env
    except (OSError, ValueError, UserError):
        return None


def _capture(out: str, params: str, environment: dict) -> str:
    """Capture the environment (imports torch, here and in the child), write what changed,
    and say what changed since the record it replaces."""
    from concurrent.futures import ThreadPoolExecutor

    from torchgate.core.records import dumps, record_data, write_text
    from torchgate.core.records.schema import EnvRecord
    from torchgate.judge.environment import diff, hardware_changes
    from torchgate.measure.probe import capture, distributions

    with ThreadPoolExecutor(1) as pool:     # the child imports while this process does
        child = pool.submit(worker_imports, params)
        try:
            import torch  # noqa: F401  the capture's own import, meanwhile
        except Exception:
            pass            # the capture records None for torch
        modules, files, note = child.result()
    env_path, packages_path = os.path.join(out, ENV), os.path.join(out, PACKAGES)
    before = _before(env_path)
    now = json.loads(dumps(capture(modules)))
    env_text = dumps(record_data(EnvRecord(now)))
    every = distributions()
    packages_text = dumps({"distributions": every})
    rewritten = _write_if_changed(env_path, env_text)
    _write_if_changed(packages_path, packages_text)
    write_text(os.path.join(out, FINGERPRINT), dumps({
        "env_schema": ENV_SCHEMA,
        "fingerprint": {**environment, "sources": sources([params, *files])},
        "written": {ENV: hashlib.sha256(env_text.encode()).hexdigest(),
                    PACKAGES: hashlib.sha256(packages_text.encode()).hexdigest()}}))
    counted = (f"{len(now.get('distributions') or {})} of {len(every)} installed "
               "distributions matter" + (f"; {note}" if note else ""))
    if not rewritten:
        return f"captured: unchanged ({counted})"
    if before is None:
        return f"captured ({counted})"
    if hardware_changes(before, now):
        return f"captured: hardware changed ({counted})"
    changed = [field for field, _, _ in diff(before, now)]
    if not changed:
        return f"captured: rewritten in the current format ({counted})"
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return (f"captured: {len(changed)} field(s) changed since the last capture ({shown}; "
            f"{counted})")


def check_machine(name: str, derived: bool) -> None:
    """Stop before anything is written when params.yaml names a machine this is not: another
    machine's reports would take this one's numbers."""
    why = machine.check_name(None if name in ("None", "null") else name)
    if why:
        raise UserError(why)
    declared = os.environ.get(machine.ENV_VAR)
    if declared and declared != name:
        raise UserError(f"{machine.ENV_VAR}={declared} but params.yaml names machine {name!r}: "
                        "run `python -m torchgate.compose` to compose params.yaml for this machine")
    if derived and not declared and name != machine.derived_name():
        raise UserError(f"params.yaml names machine {name!r}, composed on other hardware (this "
                        f"is {machine.derived_name()!r}): run `python -m torchgate.compose` here, "
                        f"or name this machine with {machine.ENV_VAR}")


def main(argv: list[str] | None = None) -> None:
    args = cli.parse(
        "env", __doc__.splitlines()[0], argv,
        ("--machine", dict(help="machine.name from params.yaml (default: TORCHGATE_MACHINE, "
                                "else the name derived from this hardware)")),
        ("--derived", dict(default="false",
                           help="machine.derived: the name was derived from the hardware")))
    with one_line_errors("env"):
        args.machine = args.machine or machine.unnamed()
        check_machine(args.machine, args.derived.lower() == "true")
        # The environment's files: <reports>/env/ (env.json, packages.json, fingerprint.json).
        out = os.path.join(args.reports or os.path.join(machine.REPORTS.name, args.machine),
                           "env")
        env_path = os.path.join(out, ENV)   # os.path: pathlib costs 3 ms to import
        recorded = _load(os.path.join(out, FINGERPRINT))
        print_ = current(recorded, args.params)
        if stands(out, recorded, print_):
            print(f"torchgate env: {env_path} stands (the environment's fingerprint is "
                  "unchanged)")
            return
        environment = {k: v for k, v in print_.items() if k != "sources"}
        try:
            summary = _capture(out, args.params, environment)
        except OSError as exc:
            raise UserError(f"cannot write in {out}: {exc}") from None
        print(f"torchgate env: wrote {env_path}; {summary}")


if __name__ == "__main__":
    main()
