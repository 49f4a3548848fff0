"""Write this machine's declared environment, conf/env/<machine>.txt, from this interpreter.

    python -m stages.lock            # write (or rewrite) the lock of params.yaml's machine
    python -m stages.lock --check    # exit 1, naming what differs, when this venv is not it

Commit the lock: from then on an arm's environment is the lock at that arm's revision (see
stages/arms/locks.py), and CI installs it with `pip install -r conf/env/<machine>.txt`.
Installed from a path or in editable mode (torchgate itself): left out, no index has it.
"""
from __future__ import annotations

import platform
import sys

from stages.arms import locks
from stages.arms.venv import NOT_PINNED
from stages.core import cli
from stages.core.errors import one_line_errors
from stages.measure.probe import distributions


def this_environment() -> locks.Lock:
    pins = {name: version for name, version in distributions().items()
            if name not in NOT_PINNED and version}
    return locks.Lock(platform.python_version(), pins)


def main(argv: list[str] | None = None) -> None:
    args = cli.parse("lock", __doc__.splitlines()[0], argv,
                     ("--check", dict(action="store_true",
                                      help="compare this venv with the lock instead of writing "
                                           "it")), reports=False)
    with one_line_errors("lock"):
        name = cli.load(args).reports.name
        path, now = locks.path_of(name), this_environment()
        if args.check:
            locked = locks.read(name)
            if locked is None:
                print(f"torchgate lock: {path} does not exist; write it with "
                      "`python -m stages.lock`")
                sys.exit(1)
            differ = locks.changes(locked.pins, now.pins)
            if locked.python.rsplit(".", 1)[0] != now.python.rsplit(".", 1)[0]:
                differ.insert(0, f"python {locked.python} -> {now.python}")
            print(f"torchgate lock: this environment is {path}" if not differ else
                  f"torchgate lock: this environment differs from {path}: "
                  + ", ".join(differ[:8]) + (f" and {len(differ) - 8} more"
                                             if len(differ) > 8 else ""))
            sys.exit(1 if differ else 0)
        from stages.core.records import write_text
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, locks.text_of(now, name))
        print(f"torchgate lock: wrote {path} ({len(now.pins)} pinned packages, "
              f"python {now.python})")


if __name__ == "__main__":
    main()
