"""A workload module of the project that dvc.yaml does not track would go stale silently:
editing it leaves `dvc status` clean and `dvc repro` serving the old numbers. The bench and
numerics stages refuse it in one line that says where to put it."""
import shutil
import subprocess
import sys

import pytest
import yaml

from torchgate.compose import compose
from torchgate.core import config
from torchgate.core.config.targets import check_tracked, module_paths
from torchgate.core.errors import UserError

from .projects import ROOT

MODULE = "def build(*, device, dtype, compile, seed):\n    raise RuntimeError('never run')\n"


def _specs(target="acme_workload.build"):
    return config.parse_workloads({"acme": {"_target_": target}})


@pytest.fixture
def tree(tmp_path):
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "acme_workload.py").write_text(MODULE)
    (tmp_path / "stages" / "workloads").mkdir(parents=True)
    (tmp_path / "stages" / "workloads" / "acme.py").write_text(MODULE)
    return tmp_path


def test_a_module_outside_the_tracked_folders_is_refused_naming_where_to_put_it(tree):
    with pytest.raises(UserError) as err:
        check_tracked(_specs(), "bench", tree)
    assert str(err.value) == (
        "workload.acme: its module acme_workload.py is not a dependency of the bench stage, "
        "so `dvc repro` would keep the old numbers after you edit it; move it into "
        "stages/workloads/ (or a package under it) and set _target_: "
        "torchgate.workloads.acme_workload.build, or add acme_workload.py to the deps of the "
        "bench and numerics stages in dvc.yaml")
    with pytest.raises(UserError, match="not a dependency of the numerics stage"):
        check_tracked(_specs(), "numerics", tree)


def test_tracked_modules_installed_packages_and_projects_without_dvc_pass(tree):
    check_tracked(_specs("torchgate.workloads.acme.build"), "bench", tree)
    check_tracked(_specs("numpy.linalg.norm"), "bench", tree)       # not the project's
    dvc = yaml.safe_load((tree / "dvc.yaml").read_text())
    for stage in ("bench", "numerics"):                             # the README's other way
        dvc["stages"][stage]["deps"].append("acme_workload.py")
    (tree / "dvc.yaml").write_text(yaml.safe_dump(dvc))
    check_tracked(_specs(), "bench", tree)
    (tree / "dvc.yaml").unlink()
    check_tracked(_specs(), "bench", tree)
    assert module_paths("acme_workload.build", tree) == ["acme_workload.py"]


def test_the_bench_stage_refuses_before_it_measures(project):
    (project / "acme_workload.py").write_text(MODULE)
    (project / "conf/workload/acme.yaml").write_text("acme:\n  _target_: acme_workload.build\n")
    compose(project / "params.yaml", ["matrix=smoke", "workload=[acme]"], conf=project / "conf")
    run = subprocess.run([sys.executable, "-m", "torchgate.bench", "--device", "cpu",
                          "--precision", "fp32"], capture_output=True, text=True, timeout=300)
    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0 and len(lines) == 1, run.stderr
    assert lines[0].startswith("torchgate bench: error: workload.acme: its module "
                               "acme_workload.py is not a dependency of the bench stage")
    assert not (project / "reports" / "test-box" / "bench").exists()
