"""Compose conf/ into params.yaml, as `dvc exp run` does, for a plain `dvc repro`.

    python -m stages.compose                 # the defaults (matrix=cpu)
    python -m stages.compose matrix=smoke    # any Hydra override

Uses DVC's own composition, so the result equals what `dvc exp run -S ...` writes.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .errors import UserError, one_line_errors

CONF = Path(__file__).resolve().parent.parent / "conf"


def compose(output: Path, overrides: list[str], conf: Path = CONF) -> None:
    from dvc.utils.hydra import compose_and_dump
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException
    try:
        compose_and_dump(output, str(conf), None, "config", str(conf.parent), overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        message = str(exc).split("Config search path")[0]
        head, _, options = message.partition("Available options")
        valid = ", ".join(options.split()[2:]) if options else ""  # after "in 'group':"
        raise UserError(" ".join(head.split()) + (f" Valid options: {valid}." if valid else "")
                        ) from None


def main(argv: list[str] | None = None) -> None:
    with one_line_errors("compose"):
        overrides = sys.argv[1:] if argv is None else argv
        compose(Path("params.yaml"), overrides)
        print("torchgate compose: wrote params.yaml" + (f" ({' '.join(overrides)})"
                                                        if overrides else ""))


if __name__ == "__main__":
    main()
