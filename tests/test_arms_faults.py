"""What stops the baseline from being measured again is one line, and under
baseline.measure=auto the documented fallback (its recorded numbers), never a traceback."""
import os

import pytest

from stages.arms import checkout
from stages.arms.plan import plan
from stages.core.errors import UserError
from stages.core.records import write_record
from stages.core.records.job import Arm
from stages.core.records.schema import EnvRecord

from .conftest import git
from .test_arms import WORKLOAD, cfg_of, commit_all, repo  # noqa: F401  (repo: a fixture)


def test_a_committed_link_out_of_the_project_falls_back_to_the_recorded_numbers(repo, tmp_path):
    os.symlink("/etc", repo / "outside")                   # an absolute link, committed
    commit_all(repo, "a link to an absolute path")
    (repo / "stages" / "workloads" / "tagged.py").write_text(WORKLOAD.format(items=2))
    head = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    with pytest.raises(UserError) as err:
        checkout.export(head, tmp_path / "export", repo)
    message = str(err.value)
    assert message.startswith(f"cannot export the project at {head[:10]}: 'outside' is a link "
                              "to an absolute path"), message
    assert "\n" not in message
    assert not list((tmp_path / "export" / "code").iterdir())   # nothing half-made is kept
    found = plan(cfg_of(repo))
    assert found.arms == (Arm("now"),)
    assert "the baseline could not be measured again (cannot export the project at" in found.note
    with pytest.raises(UserError, match="'outside' is a link to an absolute path"):
        plan(cfg_of(repo, measure="rebuild"))


def test_a_baseline_env_without_a_python_section_is_one_line(repo):
    write_record(repo / "reports" / "env" / "env.json",
                 EnvRecord({"distributions": {"torch": "2.12.0+cpu"}}))
    commit_all(repo, "an env.json without its python section")
    write_record(repo / "reports" / "env" / "env.json", EnvRecord(
        {"python": {"version": "3.11.7"}, "distributions": {"torch": "2.13.0+cpu"}}))
    found = plan(cfg_of(repo))                             # packages differ: a rebuild is due
    assert found.arms == (Arm("now"),)
    assert ("the baseline's env.json lists its packages but not its Python version (no python "
            "section)") in found.note
    with pytest.raises(UserError, match="not its Python version"):
        plan(cfg_of(repo, measure="rebuild"))
