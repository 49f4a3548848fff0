"""A/B mode with two virtual environments: workers alternate between interpreters and the
candidate is compared with the baseline directly, without a baseline commit."""
import json
import subprocess
import sys

import pytest

from stages.compose import compose
from stages.core import config
from stages.core.errors import UserError

from .venvs import child_venv


@pytest.mark.slow
def test_ab_mode_compares_two_environments_without_a_commit(project, tmp_path):
    # busy_share=1: with two pairs, one turn taken while the other arm's threads spin down
    # would leave a side with one process; this test is about the mechanics of A/B.
    python_b = child_venv(tmp_path / "venv-b")   # the same torch: an A/A check
    compose(project / "params.yaml", ["matrix=smoke", "bench.processes=2", "bench.samples=3",
                                      "bench.adaptive_budget_s=0", "compare.busy_share=1",
                                      f"candidate.python={python_b}"], conf=project / "conf")
    for args in (["stages.env"], ["stages.bench", "--device", "cpu", "--precision", "fp32"],
                 ["stages.compare"]):
        run = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
    record = json.loads((project / "reports/test-box/bench/cpu-fp32.json").read_text())
    base_procs = record["ab"]["baseline"]["workloads"]["matmul_relu"]["processes"]
    cand_procs = record["workloads"]["matmul_relu"]["processes"]
    assert len(base_procs) == len(cand_procs) == 2
    assert record["ab"]["candidate"]["python"] == str(python_b)
    assert record["env_candidate"]["python"]["version"]         # the candidate's environment
    compare = (project / "reports/test-box/compare.md").read_text()
    assert f"candidate `{python_b}`" in compare and f"baseline `{sys.executable}`" in compare
    assert "No baseline yet" not in compare                   # A/B needs no commit
    rows = json.loads((project / "reports/test-box/compare.json").read_text())["rows"]
    steady = next(r for r in rows if r["metric"] == "steady_s")
    assert steady["verdict"] in ("EQUIVALENT", "INCONCLUSIVE")  # same code, same torch
    # The arms ran in lock-step pairs and are tested pair by pair.
    assert record["ab"]["interleaved"] and steady["change"]["test"] == "paired t"
    assert [p["round"] for p in base_procs] == [p["round"] for p in cand_procs] == [0, 1]
    assert "lock-step pairs" in compare
    md = (project / "reports/test-box/bench/cpu-fp32.md").read_text()
    assert "A/B environments" in md


def test_a_candidate_that_is_not_an_interpreter_is_one_line(tmp_path):
    raw = {"device": {"cpu": {"type": "cpu"}}, "precision": {"fp32": {"dtype": "float32"}},
           "workload": {"w": {"_target_": "stages.workloads.matmul_relu"}},
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
