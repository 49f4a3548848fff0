"""The pull-request workflow: the workflow files as GitHub would read them, the commands they
run against the README's, and stages.comment against a stand-in for GitHub's API on 127.0.0.1
(one comment per pull request, edited by later runs; refusals as one line)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from stages import comment
from tests.github_standin import GitHubStandIn, one_line_error

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
BASE_SHA = "${{ github.event.pull_request.base.sha }}"


def workflow(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))     # YAML 1.1 reads a bare `on` as true
    return data


def steps(job: dict) -> list[dict]:
    return job["steps"]


def runs(job: dict) -> list[str]:
    """Every command line of a job's `run:` steps."""
    return [line.strip() for s in steps(job) for line in s.get("run", "").splitlines()
            if line.strip()]


def step(job: dict, name: str) -> dict:
    return next(s for s in steps(job) if s.get("name") == name)


# ---- the workflow files -------------------------------------------------------------------


def test_the_check_runs_on_pull_requests_against_the_base_commit_with_history():
    wf = workflow("torchgate.yml")
    assert "pull_request" in wf["on"]
    assert wf["env"]["BASE"] == BASE_SHA, "the baseline must come from the event"
    for name in ("smoke", "gpu"):
        job = wf["jobs"][name]
        checkout = next(s for s in steps(job) if s.get("uses", "").startswith("actions/checkout"))
        assert checkout["with"]["fetch-depth"] == 0, f"{name}: the base commit needs history"
        measure = step(job, "Measure")["run"]
        assert "baseline.rev=$BASE" in measure
        assert re.search(r"\bmain\b", " ".join(runs(job))) is None, "no hard-coded branch"


def test_the_smoke_matrix_on_a_hosted_runner_and_the_gpu_matrix_on_a_labelled_one():
    jobs = workflow("torchgate.yml")["jobs"]
    assert jobs["smoke"]["runs-on"] == "ubuntu-latest"
    assert jobs["gpu"]["runs-on"] == ["self-hosted", "gpu"]
    assert "head.repo.full_name == github.repository" in jobs["gpu"]["if"], \
        "a self-hosted runner must not run a fork's code"
    for name in ("smoke", "gpu"):
        matrix = re.search(r"matrix=(\w+)", step(jobs[name], "Measure")["run"]).group(1)
        assert matrix == name and (ROOT / "conf" / "matrix" / f"{matrix}.yaml").is_file()


def test_the_cpu_wheel_of_torch_is_installed_before_the_project():
    install = [line for line in runs(workflow("torchgate.yml")["jobs"]["smoke"])
               if line.startswith("pip install")]
    assert install[0].startswith("pip install torch ") and "whl/cpu" in install[0]
    assert install[1] == "pip install -e ."


def test_the_gate_runs_the_last_stage_and_the_reports_are_kept_whatever_it_decides():
    stages = list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])
    assert stages[-1] == "gate"
    for name in ("smoke", "gpu"):
        job = workflow("torchgate.yml")["jobs"][name]
        assert step(job, "Measure")["run"].strip().endswith("dvc repro report")
        assert step(job, "Gate")["run"].strip().endswith("dvc repro gate")
        names = [s.get("name") for s in steps(job)]
        assert names.index("Gate") > names.index("Measure")
        keep = step(job, "Keep the reports")
        assert keep["uses"].startswith("actions/upload-artifact")
        assert keep["with"]["path"] == "reports/" and "!cancelled()" in keep["if"]
        body = step(job, "Comment body")
        assert "steps.measure.outcome == 'success'" in body["if"], "a red gate still comments"
        for part in ("cat reports/summary.md", "dvc metrics diff $BASE --md",
                     "dvc params diff $BASE --md"):
            assert part in body["run"]


def test_one_comment_job_posts_for_this_repository_and_leaves_a_forks_for_the_follow_up():
    job = workflow("torchgate.yml")["jobs"]["comment"]
    assert set(job["needs"]) == {"smoke", "gpu"} and "!cancelled()" in job["if"]
    keep = step(job, "Keep it for the follow-up workflow (a fork's pull request)")
    assert keep["with"]["name"] == "torchgate-comment"
    assert "echo $PR > comment/pr" in step(job, "One body, and the pull request it belongs to")["run"]
    post = step(job, "Comment on the pull request")
    assert post["run"].startswith("python -m stages.comment ")
    assert "--body-file comment/comment.md" in post["run"]
    assert post["env"]["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
    assert "head.repo.full_name == github.repository" in post["if"]


def test_the_follow_up_workflow_comments_on_a_forks_pull_request():
    wf = workflow("torchgate-comment.yml")
    assert wf["on"]["workflow_run"]["workflows"] == [workflow("torchgate.yml")["name"]]
    assert wf["on"]["workflow_run"]["types"] == ["completed"]
    assert wf["permissions"]["pull-requests"] == "write"
    job = wf["jobs"]["comment"]
    assert "head_repository.full_name != github.repository" in job["if"]
    download = next(s for s in steps(job) if s.get("uses", "").startswith(
        "actions/download-artifact"))
    assert download["with"]["name"] == "torchgate-comment"
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    post = step(job, "Comment on the pull request")
    assert "python -m stages.comment" in post["run"] and '--head-sha "$HEAD_SHA"' in post["run"]
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    checkouts = [s for s in steps(job) if s.get("uses", "").startswith("actions/checkout")]
    assert all("ref" not in s.get("with", {}) for s in checkouts), "never the fork's code"


def readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## The pull-request workflow")
    return text[start:text.index("\n## ", start + 1)]


def test_the_readme_shows_the_workflows_commands_for_local_use():
    shown = {line.split("  #")[0].strip() for block in
             re.findall(r"```bash\n(.*?)```", readme_section(), re.S)
             for line in block.splitlines()}
    assert "BASE=$(git merge-base main HEAD)" in shown
    job = workflow("torchgate.yml")["jobs"]["smoke"]
    for name in ("Install, the CPU wheel of torch first", "Measure", "Gate", "Comment body"):
        for line in step(job, name)["run"].strip().splitlines():
            assert line.strip() in shown, f"README does not show the workflow's {line!r}"
    post = step(workflow("torchgate.yml")["jobs"]["comment"], "Comment on the pull request")
    assert any(line.startswith("python -m stages.comment --repo") for line in shown)
    assert "--body-file comment/comment.md" in post["run"]


# ---- stages.comment against the stand-in ------------------------------------------------




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
    """The follow-up workflow runs it without installing the project: -S leaves out
    site-packages."""
    (tmp_path / "body.md").write_text("hello\n")
    run = subprocess.run([sys.executable, "-S", "-m", "stages.comment", "--repo", "owner/name",
                          "--pr", "7", "--body-file", str(tmp_path / "body.md")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert github.comments[7][0]["body"] == f"{comment.MARKER}\nhello\n"


SUMMARY = ("See [compare.md](compare.md) and [bench](bench/cpu-fp32.md#steady).\n\n"
           "![Every tested change](plots/changes.png)\n\n[docs](https://example.org/x) "
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
        "plots/changes.png)")
