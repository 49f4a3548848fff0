"""A/B mode with two virtual environments: a candidate that cannot run is one line. The arms
measured in lock-step pairs through a real `dvc exp run`: test_pipeline.py (the README's
upgrade workflow)."""
import json
import subprocess

import pytest

from torchgate.core import config
from torchgate.core.errors import UserError

from .venvs import child_venv


def test_a_candidate_that_is_not_an_interpreter_is_one_line(tmp_path):
    raw = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
           "workload": {"w": {"_target_": "torchgate.workloads.matmul_relu"}},
           "matrix": {"modes": ["eager"]}, "candidate": {"python": str(tmp_path / "nope")}}
    with pytest.raises(UserError, match="candidate.python .* is not an executable file"):
        config.parse(raw)


@pytest.mark.slow
def test_a_second_venv_sees_the_projects_packages_and_not_the_systems(tmp_path):
    """On a fresh machine the system Python has no torch; a test venv that borrowed the
    system's site-packages would pass only where someone installed torch by hand."""
    python = child_venv(tmp_path / "venv")
    probe = ("import sys, torch, json; print(json.dumps([sys.base_prefix, sys.path, "
             "torch.__file__]))")
    base, path, torch_file = json.loads(subprocess.run(
        [str(python), "-c", probe], check=True, capture_output=True, text=True).stdout)
    system = [p for p in path if p.startswith(base) and p.endswith("site-packages")]
    assert system == [] and not torch_file.startswith(base)
