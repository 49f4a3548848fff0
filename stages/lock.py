"""Write this machine's declared environment, conf/env/<machine>.txt, from this interpreter.

    python -m torchgate.lock            # write (or rewrite) the lock of params.yaml's machine
    python -m torchgate.lock --check    # exit 1, naming what differs, when this venv is not it
    python -m torchgate.lock --machine ci-cpu --python-platform x86_64-manylinux_2_28 \
        --python-version 3.11 --torch-backend cpu
                                     # a machine you cannot log in to (a hosted runner):
                                     # resolved by uv for its platform, not read from here

The last resolves torchgate's dependencies with `uv pip compile` (uv ships with torchgate)
for that platform and Python; name the machine with --machine (`ci-cpu`) or TORCHGATE_MACHINE.

Commit the lock: from then on an arm's environment is the lock at that arm's revision (see
stages/arms/locks.py), and CI installs it with `pip install -r conf/env/<machine>.txt`.
Installed from a path or in editable mode (torchgate itself): left out, no index has it.
"""
from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from torchgate.arms import locks, venv
from torchgate.arms.venv import NOT_PINNED
from torchgate.core import cli, machine
from torchgate.core.errors import UserError, one_line_errors
from torchgate.measure.probe import distributions


def this_environment() -> locks.Lock:
    pins = {name: version for name, version in distributions().items()
            if name not in NOT_PINNED and version}
    return locks.Lock(platform.python_version(), pins)


def another_platform(platform_: str, python: str, torch_backend: str | None,
                     project: Path = Path("pyproject.toml")) -> locks.Lock:
    """The lock of a machine this is not: torchgate's dependencies resolved by `uv pip
    compile` for `platform_` and `python` (major.minor), torch from `torch_backend`'s index."""
    uv = venv.uv_binary()
    if uv is None:
        raise UserError("--python-platform needs uv: pip install uv")
    if not re.fullmatch(r"\d+\.\d+", python):
        raise UserError(f"--python-version {python!r}: give major.minor, e.g. 3.11")
    argv = [uv, "pip", "compile", str(project), "--quiet", "--no-header", "--no-annotate",
            "--python-platform", platform_, "--python-version", python]
    argv += ["--torch-backend", torch_backend] if torch_backend else []
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1].strip()
        raise UserError(f"uv pip compile for {platform_}, Python {python} failed: {last}")
    pins = {n: v for n, v in locks.pins_of(done.stdout).items() if n not in NOT_PINNED}
    if "torch" not in pins:
        raise UserError(f"uv pip compile for {platform_}, Python {python} pinned no torch")
    return locks.Lock(python, pins)


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("lock", __doc__.splitlines()[0], argv,
                     ("--check", dict(action="store_true",
                                      help="compare this venv with the lock instead of writing "
                                           "it")),
                     ("--python-platform", dict(help="resolve for another platform (uv's "
                                                     "names: x86_64-manylinux_2_28, ...)")),
                     ("--python-version", dict(help="with --python-platform: its Python, "
                                                    "major.minor")),
                     ("--torch-backend", dict(help="with --python-platform: torch's build "
                                                   "(uv's: cpu, cu130, ...)")),
                     ("--machine", dict(help="whose lock: conf/env/<machine>.txt (default "
                                             "TORCHGATE_MACHINE, else params.yaml's "
                                             "machine.name)")), reports=False)
    with one_line_errors("lock"):
        name = args.machine or os.environ.get(machine.ENV_VAR) or cli.load(args).reports.name
        if (why := machine.check_name(name)) is not None:
            raise UserError(why)
        if args.python_platform and (args.check or not args.python_version):
            raise UserError("--python-platform needs --python-version (major.minor, e.g. "
                            "3.11), and checks no venv (--check compares this one)")
        path = locks.path_of(name)
        now = another_platform(args.python_platform, args.python_version,
                               args.torch_backend) if args.python_platform else \
            this_environment()
        if args.check:
            locked = locks.read(name)
            if locked is None:
                print(f"torchgate lock: {path} does not exist; write it with "
                      "`python -m torchgate.lock`")
                sys.exit(1)
            differ = locks.changes(locked.pins, now.pins)
            if locks.minor(locked.python) != locks.minor(now.python):
                differ.insert(0, f"python {locked.python} -> {now.python}")
            print(f"torchgate lock: this environment is {path}" if not differ else
                  f"torchgate lock: this environment differs from {path}: "
                  + ", ".join(differ[:8]) + (f" and {len(differ) - 8} more"
                                             if len(differ) > 8 else ""))
            sys.exit(1 if differ else 0)
        from torchgate.core.records import write_text
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, locks.text_of(now, name))
        print(f"torchgate lock: wrote {path} ({len(now.pins)} pinned packages, "
              f"python {now.python})")


if __name__ == "__main__":
    main()
