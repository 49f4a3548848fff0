"""Compose conf/ into params.yaml, as `dvc exp run` does, for a plain `dvc repro`.

    torchgate compose                        # the defaults (matrix=cpu)
    torchgate compose matrix=smoke           # any Hydra override: matrix=pr, 'device=[cpu,cuda]',
                                             # bench.processes=6; the groups and keys: conf/

Composes as DVC does (Hydra's compose, resolved, dumped by OmegaConf), so the result equals what
`dvc exp run -S ...` writes; a test holds the two equal.
"""
from __future__ import annotations

import os
import re
import runpy
import sys
from pathlib import Path

from torchgate.core import config, machine
from torchgate.core.errors import UserError, one_line_errors

CONF = Path(__file__).resolve().parent.parent / "conf"
# The Hydra plugins `dvc exp run` loads (.dvc/config hydra.plugins_path): the machine's name.
PLUGINS = Path(__file__).resolve().parent / "hydra"


def project_conf() -> Path:
    """The conf/ of the project it runs in, as `dvc exp run` composes it (the `torchgate`
    command may be installed from another clone); else the one beside this module."""
    here = Path("conf")
    return here.resolve() if (here / "config.yaml").is_file() else CONF


def compose(output: Path, overrides: list[str], conf: Path = CONF) -> str:
    """Write params.yaml; return the machine it names."""
    import yaml
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    # The plugin's resolvers, also where Hydra scanned for plugins earlier in this process
    # (its scan runs once a process).
    runpy.run_path(str(PLUGINS / "hydra_plugins" / "torchgate_machine.py"))
    # Composed beside it and checked first: a refused composition leaves params.yaml as it was.
    composing = output.with_name(f".{output.name}.composing.yaml")
    try:
        with initialize_config_dir(str(conf), version_base=None):
            composed = hydra_compose(config_name="config", overrides=overrides)
        OmegaConf.resolve(composed)
        composing.write_text(OmegaConf.to_yaml(composed), encoding="utf-8")
        name = name_machine(composing)
        config.parse(yaml.safe_load(composing.read_text(encoding="utf-8")))  # the stages' checks
        os.replace(composing, output)
        return name
    except (HydraException, OmegaConfBaseException) as exc:
        head = " ".join(str(exc).split("Available options")[0].split("Config search path")[0]
                        .split())
        missing = re.search(r"Could not (?:find|load) '([\w/]+)/[^/']+'", head)
        if missing:  # name the valid choices, also where Hydra does not (list selections)
            group = conf / missing.group(1)
            head = head.rstrip(".") + ". Valid options: " + ", ".join(sorted(p.stem for p in group.glob("*.yaml")))
            head += "."
        raise UserError(head) from None
    finally:
        composing.unlink(missing_ok=True)


def name_machine(path: Path) -> str:
    """Fill in a machine name that neither the config nor TORCHGATE_MACHINE gave: derived
    from this hardware (core.machine). The name selects reports/<name>/ in dvc.yaml, so it
    must be in params.yaml before `dvc repro` reads it."""
    import yaml
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    section = params.setdefault("machine", {}) or {}
    if not section.get("name"):          # null, or an empty TORCHGATE_MACHINE
        section.update(name=machine.unnamed(), derived=not os.environ.get(machine.ENV_VAR))
        params["machine"] = section
        path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    why = machine.check_name(section["name"])
    if why:
        raise UserError(why)
    return section["name"]


def main(argv: list[str] | None = None) -> None:
    with one_line_errors("compose"):
        overrides = sys.argv[1:] if argv is None else argv
        if any(o in ("-h", "--help") for o in overrides):
            print(__doc__.strip())
            return
        name = compose(Path("params.yaml"), overrides, project_conf())
        print("torchgate compose: wrote params.yaml" + (f" ({' '.join(overrides)})"
                                                        if overrides else "")
              + f"; reports go to reports/{name}/")


if __name__ == "__main__":
    main()
