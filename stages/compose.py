"""Compose conf/ into params.yaml, as `dvc exp run` does, for a plain `dvc repro`.

    python -m stages.compose                 # the defaults (matrix=cpu)
    python -m stages.compose matrix=smoke    # any Hydra override

Uses DVC's own composition, so the result equals what `dvc exp run -S ...` writes.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from stages.core.errors import UserError, one_line_errors

CONF = Path(__file__).resolve().parent.parent / "conf"


def compose(output: Path, overrides: list[str], conf: Path = CONF) -> None:
    from dvc.utils.hydra import compose_and_dump
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException
    try:
        compose_and_dump(output, str(conf), None, "config", str(conf.parent), overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        head = " ".join(str(exc).split("Available options")[0].split("Config search path")[0]
                        .split())
        missing = re.search(r"Could not (?:find|load) '([\w/]+)/[^/']+'", head)
        if missing:  # name the valid choices, also where Hydra does not (list selections)
            group = conf / missing.group(1)
            head = head.rstrip(".") + ". Valid options: " + ", ".join(sorted(p.stem for p in group.glob("*.yaml")))
            head += "."
        raise UserError(head) from None


def main(argv: list[str] | None = None) -> None:
    with one_line_errors("compose"):
        overrides = sys.argv[1:] if argv is None else argv
        compose(Path("params.yaml"), overrides)
        print("torchgate compose: wrote params.yaml" + (f" ({' '.join(overrides)})"
                                                        if overrides else ""))


if __name__ == "__main__":
    main()
