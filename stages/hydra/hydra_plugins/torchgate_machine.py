"""The machine's name where `conf/` is composed: by `dvc exp run -S ...` (DVC loads the Hydra
plugins under `hydra.plugins_path` of .dvc/config, this folder's parent) and by
`python -m torchgate.compose`. `conf/config.yaml` names the machine `${torchgate_machine:}`:
TORCHGATE_MACHINE where set, else derived from this hardware (stages/core/machine.py), so that
an experiment's params.yaml names the machine a plain `dvc repro` does.

Hydra imports every module of the `hydra_plugins` namespace to find plugins; this one defines
none and registers two OmegaConf resolvers. DVC runs it with neither this project on its
import path nor torch: it loads machine.py (standard library only) from its file.
"""
import importlib.util
import os
from pathlib import Path

from omegaconf import OmegaConf

_MACHINE = Path(__file__).resolve().parents[2] / "core" / "machine.py"


def _machine_module():
    spec = importlib.util.spec_from_file_location("torchgate_machine_naming", _MACHINE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def derived(name: str) -> bool:
    """Whether `name` is this hardware's own (the env stage then checks that params.yaml was
    composed here); False for a name the user or TORCHGATE_MACHINE gave."""
    return not os.environ.get(_machine.ENV_VAR) and name == _machine.derived_name()


_machine = _machine_module()
OmegaConf.register_new_resolver("torchgate_machine", _machine.unnamed, replace=True)
OmegaConf.register_new_resolver("torchgate_machine_derived", derived, replace=True)
