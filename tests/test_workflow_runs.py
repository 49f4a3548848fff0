"""The workflows' jobs run, step after step, on this machine (tests/workflow_runner.py) against
a local git origin and the stand-in of GitHub's API: `dvc repro` and `pip` are stand-ins (the
measurement itself is tested elsewhere), everything else is real: `python -m torchgate.compose`,
`dvc params diff`, .github/torchgate.sh, `python -m torchgate.comment`, git."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.workflow_runner import Runner, load

from .projects import ROOT, git, make_project

pytestmark = pytest.mark.slow       # each job composes and calls dvc: seconds

WORKFLOWS = ROOT / ".github" / "workflows"
REPO, FORK = "owner/name", "someone/name"
BOT = "github-actions[bot]"
MARK = "<!-- torchgate ci-cpu -->"

# `dvc repro` as the workflows call it: it writes this machine's reports as a run would, or
# fails as a measurement can; `dvc repro gate` fails when asked; the rest is the real dvc.
DVC = """#!/usr/bin/env bash
echo "dvc $*" >> "$FAKE_CALLS"
[ "$1" = repro ] || exec "$REAL_DVC" "$@"
if [ "$2" = gate ]; then
  [ -z "${FAKE_GATE_FAILS:-}" ] || { echo "torchgate gate: failed: 1 REGRESSED" >&2; exit 1; }
  exit 0
fi
echo "Running stage 'bench@cpu-fp32'"
if [ -n "${FAKE_MEASURE_FAILS:-}" ]; then
  echo "ERROR: failed to reproduce 'bench@cpu-fp32': $FAKE_MEASURE_FAILS" >&2
  exit 1
fi
mkdir -p "reports/$TORCHGATE_MACHINE/bench"
printf '# torchgate summary: matrix `smoke`\\n\\n%s\\n\\n%s\\n' "$FAKE_SUMMARY" \\
  '![Every tested change](pictures/summary/changes.png)' > "reports/$TORCHGATE_MACHINE/summary.md"
# The pictures, in a folder that ignores itself, and a file named as one that is not a PNG.
pictures="reports/$TORCHGATE_MACHINE/pictures/summary"
mkdir -p "$pictures"
printf '*\\n' > "$pictures/.gitignore"
printf '\\211PNG\\r\\n\\032\\n%s' "$FAKE_SUMMARY" > "$pictures/changes.png"
printf '<script>' > "$pictures/page.png"
echo "{\\"run\\": \\"$FAKE_SUMMARY\\"}" > "reports/$TORCHGATE_MACHINE/bench/cpu-fp32.json"
if [ -n "${FAKE_RACE:-}" ]; then        # another writer of this machine pushes meanwhile
  git -C "$FAKE_RACE" push -q origin "HEAD:refs/heads/torchgate/$TORCHGATE_MACHINE"
fi
"""
# `gh`: the calls are logged; the REST calls on refs act on the origin, as GitHub's would.
GH = """#!/usr/bin/env bash
echo "gh $*" >> "$FAKE_CALLS"
case "$1 $2" in
  "api repos/"*/git/matching-refs/*)
    prefix=${2#*/git/matching-refs/}
    git --git-dir="$FAKE_ORIGIN" for-each-ref --format='%(refname)' "refs/${prefix%/}" ;;
  "api -X") git --git-dir="$FAKE_ORIGIN" update-ref -d "refs/${4#*/git/refs/}" ;;
esac
"""
# A protected main, as a ruleset makes it: no push reaches it (changes come by pull request).
PROTECTED = """#!/bin/sh
while read -r old new ref; do
  if [ "$ref" = refs/heads/main ]; then
    echo "GH013: Repository rule violations found for refs/heads/main: changes must be made through a pull request" >&2
    exit 1
  fi
done
"""
PIP = """#!/usr/bin/env bash
echo "pip $*" >> "$FAKE_CALLS"
"""
UV = """#!/usr/bin/env bash
echo "uv $*" >> "$FAKE_CALLS"
"""
# A hosted runner's sudo: what it would install is logged, not installed.
SUDO = """#!/usr/bin/env bash
echo "sudo $*" >> "$FAKE_CALLS"
"""
# The GPU box's python3: `-m venv` makes an empty venv (so that pip stays the stand-in).
PYTHON3 = """#!/bin/sh
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && : > "$3/bin/activate" && exit 0; fi
exec "{python}" "$@"
"""


@pytest.fixture
def site(tmp_path, github):
    """(runner, origin's path, the base commit, the pull request's head commit): a project
    whose main holds the base commit and whose branch `feature` changes one committed
    parameter."""
    src = make_project(tmp_path / "src", tmp_path / "src")
    git("symbolic-ref", "HEAD", "refs/heads/main", cwd=src)
    shutil.copy(ROOT / "params.yaml", src / "params.yaml")
    shutil.copytree(ROOT / ".github", src / ".github")
    git("add", "-A", cwd=src)
    git("commit", "-qm", "base", cwd=src)
    base = git("rev-parse", "HEAD", cwd=src).stdout.strip()
    git("checkout", "-qb", "feature", cwd=src)
    params = src / "params.yaml"
    params.write_text(params.read_text().replace("  seed: 0\n", "  seed: 1\n", 1))
    git("commit", "-qam", "another seed", cwd=src)
    head = git("rev-parse", "HEAD", cwd=src).stdout.strip()
    git("checkout", "-q", "main", cwd=src)          # origin's default branch
    origin = tmp_path / "origin.git"
    git("clone", "-q", "--bare", str(src), str(origin), cwd=tmp_path)
    merge = git("commit-tree", f"{head}^{{tree}}", "-p", base, "-p", head, "-m", "merge",
                cwd=origin).stdout.strip()
    git("update-ref", "refs/pull/7/merge", merge, cwd=origin)   # GitHub's test merge
    tools = tmp_path / "bin"
    tools.mkdir()
    python = '#!/bin/sh\nexec "{python}" "$@"\n'
    for name, script in (("dvc", DVC), ("pip", PIP), ("uv", UV), ("python", python),
                         ("python3", PYTHON3), ("gh", GH), ("sudo", SUDO)):
        (tools / name).write_text(script.replace("{python}", sys.executable))
        (tools / name).chmod(0o755)
    (tmp_path / "home").mkdir()
    env = {"PATH": f"{tools}:{os.environ['PATH']}", "HOME": str(tmp_path / "home"),
           "LANG": "C.UTF-8", "REAL_DVC": str(Path(sys.executable).parent / "dvc"),
           "FAKE_CALLS": str(tmp_path / "calls"), "FAKE_SUMMARY": "**Passed:** 2 OK",
           "FAKE_ORIGIN": str(origin),
           "GITHUB_API_URL": github.url}
    github.pulls[7] = head
    return Runner(origin, tmp_path / "runs", env), origin, base, head


def pull_request(base: str, head: str, fork: bool = False) -> dict:
    return {"event_name": "pull_request", "repository": REPO, "sha": head,
            "ref": "refs/pull/7/merge",
            "event": {"pull_request": {"number": 7, "base": {"sha": base},
                                       "head": {"sha": head, "repo": {
                                           "full_name": FORK if fork else REPO}}}}}


def check(runner: Runner, base: str, head: str, fork: bool = False, **fake: str):
    """torchgate.yml on a pull request: its check, then its comment job. A fork's pull
    request gets a read-only token."""
    runner.env.update({f"FAKE_{k.upper()}": v for k, v in fake.items()})
    workflow = load(WORKFLOWS / "torchgate.yml")
    run = runner.start(pull_request(base, head, fork))
    token = {"GITHUB_TOKEN": "read-only" if fork else "ghs_workflow"}
    assert runner.job(run, workflow, "baseline").result == "skipped"
    runner.job(run, workflow, "measure", token)     # a split check's parts, where asked
    checked = runner.job(run, workflow, "check", token)
    commented = runner.job(run, workflow, "comment", token)
    for name in [k for k in fake if k in ("measure_fails", "gate_fails")]:
        runner.env.pop(f"FAKE_{name.upper()}")
    return run, checked, commented


def mine(github) -> list[dict]:
    return [c for c in github.comments[7] if MARK in c["body"]]


PICTURE = "reports/ci-cpu/pictures/summary/changes.png"


def shown(commit: str) -> str:
    """The summary's picture as a page that shows it from `commit` has it."""
    return f"![Every tested change](https://github.com/{REPO}/raw/{commit}/{PICTURE})"


def tree(origin: Path, rev: str) -> list[str]:
    return git("ls-tree", "-r", "--name-only", rev, cwd=origin).stdout.split()


def tip(origin: Path, branch: str) -> str:
    found = subprocess.run(["git", "rev-parse", "-q", "--verify", f"refs/heads/{branch}"],
                           cwd=origin, capture_output=True, text=True)
    return found.stdout.strip()


def test_a_pull_request_from_this_repository_gets_one_comment_edited_by_later_runs(site,
                                                                                  github):
    runner, origin, base, head = site
    github.add(7, "a reviewer's comment")
    _, checked, commented = check(runner, base, head)
    assert checked.result == commented.result == "success", [
        (s.name, s.output[-2000:]) for s in checked.steps + commented.steps]
    (comment,) = mine(github)
    assert comment["user"]["login"] == BOT and "**Passed:** 2 OK" in comment["body"]
    # Its pictures, on a branch of their own (the PNG files alone, each checked), shown in
    # the comment; the check's read-only run page links them to the run.
    pictures = tip(origin, "torchgate-pages/pull-7/ci-cpu")
    assert tree(origin, pictures) == [PICTURE] and parents(origin, pictures) == []
    assert shown(pictures) in comment["body"]
    assert "Main's newest pages" not in comment["body"], "no writer has published any"
    assert "[Every tested change (picture)](https://github.com/owner/name/actions/runs/" in \
        checked.summary
    # The committed parameter the pull request changes, and not the check's own composition
    # (matrix=pr, baseline.rev=<base>, baseline.code=<base>) that the work tree holds.
    body = comment["body"]
    params = body[body.index("## Parameters this pull request changes"):]
    assert "bench.seed" in params and "baseline." not in params and "matrix" not in params
    composed = yaml.safe_load((checked.workspace / "params.yaml").read_text())
    # The rebuilt baseline runs the base's code, whichever commit main's writer measured.
    assert composed["baseline"] == {"rev": base, "code": base, "measure": "rebuild"}
    assert composed["machine"]["name"] == "ci-cpu"          # TORCHGATE_MACHINE
    assert "**Passed:** 2 OK" in checked.summary            # the run's page
    run, checked, _ = check(runner, base, head, summary="**Passed:** 3 OK")
    assert len(github.comments[7]) == 2 and len(mine(github)) == 1
    assert "3 OK" in mine(github)[0]["body"] and "2 OK" not in mine(github)[0]["body"]
    again = tip(origin, "torchgate-pages/pull-7/ci-cpu")
    assert again != pictures and parents(origin, again) == [], "replaced, not piled up"
    assert shown(again) in mine(github)[0]["body"]
    assert (run.artifacts / "reports-ci-cpu" / "summary.md").is_file()
    assert not (run.artifacts / "torchgate-comment").exists(), "posted here, no follow-up"


def test_a_split_check_measures_its_parts_on_runners_of_their_own_and_joins_them(site, github):
    """TORCHGATE_PARTS [1, 2]: two jobs measure a part each (launcher.shard), the check
    joins their reports (launcher.parts) and judges the whole; one comment. Unset, the check
    measures everything itself and no part job runs."""
    runner, _, base, head = site
    runner.vars["TORCHGATE_PARTS"] = "[1, 2]"
    run, checked, commented = check(runner, base, head)
    assert checked.result == commented.result == "success", [
        (s.name, s.output[-2000:]) for s in checked.steps + commented.steps]
    parts = [run.jobs[f"measure-{i}"] for i in (0, 1)]
    for i, part in enumerate(parts, 1):
        assert part.result == "success", [(s.name, s.output[-2000:]) for s in part.steps]
        composed = yaml.safe_load((part.workspace / "params.yaml").read_text())
        assert composed["launcher"]["shard"] == f"{i}/2"
        assert composed["baseline"]["measure"] == "rebuild"
        assert (run.artifacts / f"part-{i}" / "bench" / "cpu-fp32.json").is_file()
    composed = yaml.safe_load((checked.workspace / "params.yaml").read_text())
    assert composed["launcher"]["parts"] == ["parts/part-1", "parts/part-2"]
    assert composed["launcher"]["shard"] is None
    assert (checked.workspace / "parts" / "part-2" / "bench" / "cpu-fp32.json").is_file()
    valgrind = next(s for s in checked.steps if s.name.startswith("valgrind"))
    assert valgrind.outcome == "skipped"        # the parts counted
    assert len(mine(github)) == 1
    del runner.vars["TORCHGATE_PARTS"]
    run, checked, _ = check(runner, base, head)
    assert run.jobs["measure"].result == "skipped" and checked.result == "success"
    assert yaml.safe_load((checked.workspace / "params.yaml").read_text())["launcher"][
        "parts"] == []


def test_a_failed_measurement_replaces_the_comment_with_measurement_failed(site, github):
    runner, _, base, head = site
    check(runner, base, head)
    assert "Passed" in mine(github)[0]["body"]
    _, checked, commented = check(runner, base, head, measure_fails="CUDA out of memory")
    assert checked.result == "failure" and commented.result == "success"
    assert [s.conclusion for s in checked.steps if s.name == "Gate"] == ["skipped"]
    (comment,) = mine(github)
    body = comment["body"]
    assert "# torchgate on `ci-cpu`: measurement failed" in body and "Passed" not in body
    assert "failed to reproduce 'bench@cpu-fp32': CUDA out of memory" in body
    assert "measurement failed" in checked.summary


def test_a_red_gate_still_comments_the_summary(site, github, tmp_path):
    runner, origin, base, _ = site
    work = tmp_path / "dev"             # a pull request that changes no parameter
    git("clone", "-q", str(origin), str(work), cwd=tmp_path)
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--allow-empty", "-m",
        "nothing", cwd=work)
    git("push", "-q", "origin", "HEAD:refs/heads/nothing", cwd=work)
    same = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    _, checked, _ = check(runner, base, same, gate_fails="1", summary="**1 REGRESSED**")
    assert checked.result == "failure"
    body = mine(github)[0]["body"]
    assert "**1 REGRESSED**" in body
    assert body.endswith("## Parameters this pull request changes\n\n"
                         "None: params.yaml is as at the base commit.\n")


def test_a_forks_comment_comes_from_the_follow_up_workflow(site, github):
    runner, origin, base, head = site
    run, checked, commented = check(runner, base, head, fork=True)
    assert checked.result == commented.result == "success"
    assert github.comments[7] == [] and "read-only" not in github.tokens, \
        "the fork's run must not try to post"
    assert (run.artifacts / "torchgate-comment" / "pr").read_text().strip() == "7"
    follow_up = load(WORKFLOWS / "torchgate-comment.yml")
    event = {"event_name": "workflow_run", "repository": REPO, "sha": base,
             "ref": "refs/heads/main",
             "event": {"workflow_run": {"event": "pull_request", "conclusion": "success",
                                        "id": run.id, "head_sha": head,
                                        "html_url": f"https://github.com/{REPO}/runs/{run.id}",
                                        "head_repository": {"full_name": FORK}}}}
    for _ in range(2):                      # a second run edits the comment
        posted = runner.job(runner.start(event), follow_up, "comment",
                            {"GITHUB_TOKEN": "ghs_workflow"})
        assert posted.result == "success", [(s.name, s.output) for s in posted.steps]
    (comment,) = github.comments[7]
    assert comment["user"]["login"] == BOT and MARK in comment["body"]
    assert "**Passed:** 2 OK" in comment["body"]
    # The follow-up ran main's code: its checkout is the base commit, not the fork's.
    assert git("rev-parse", "HEAD", cwd=posted.workspace).stdout.strip() == base
    # The fork's pictures: data, the PNG files alone, shown in the comment.
    pictures = tip(origin, "torchgate-pages/pull-7/ci-cpu")
    assert tree(origin, pictures) == [PICTURE] and shown(pictures) in comment["body"]
    # An artifact naming another pull request (at another commit): nothing is published under
    # that number, nothing posted.
    github.pulls[8] = base
    github.comments[8] = []
    (run.artifacts / "torchgate-comment" / "pr").write_text("8\n")
    forged = runner.job(runner.start(event), follow_up, "comment", {"GITHUB_TOKEN": "ghs_x"})
    assert forged.result == "failure"
    refused = next(s for s in forged.steps if s.outcome == "failure")
    assert refused.name.startswith("The pull request it belongs to")
    assert "pull request 8 of owner/name is at " in refused.output
    assert tip(origin, "torchgate-pages/pull-8/ci-cpu") == "" and github.comments[8] == []
    # Closed: its pictures' branches are deleted; nothing is commented.
    closed = runner.start({"event_name": "pull_request_target", "repository": REPO,
                           "sha": base, "ref": "refs/heads/main",
                           "event": {"action": "closed", "pull_request": {"number": 7}}})
    assert runner.job(closed, follow_up, "comment", {"GITHUB_TOKEN": "x"}).result == "skipped"
    gone = runner.job(closed, follow_up, "pictures-gone", {"GITHUB_TOKEN": "ghs_workflow"})
    assert gone.result == "success", [(s.name, s.output) for s in gone.steps]
    assert tip(origin, "torchgate-pages/pull-7/ci-cpu") == ""
    assert "deleted refs/heads/torchgate-pages/pull-7/ci-cpu" in gone.steps[0].output


def test_a_committed_lock_is_what_the_check_installs(site, tmp_path):
    runner, origin, base, _ = site
    work = tmp_path / "dev"
    git("clone", "-q", "-b", "feature", str(origin), str(work), cwd=tmp_path)
    (work / "conf" / "env").mkdir()
    (work / "conf" / "env" / "ci-cpu.txt").write_text("torch==2.13.0+cpu\n")
    git("add", "-A", cwd=work)
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "a lock", cwd=work)
    git("push", "-q", "origin", "HEAD:feature", cwd=work)
    head = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    _, checked, _ = check(runner, base, head)
    assert checked.result == "success"
    cache = next(s for s in checked.steps if s.uses.startswith("actions/cache"))
    locked = hashlib.sha256(hashlib.sha256(b"torch==2.13.0+cpu\n").digest()).hexdigest()
    assert re.search(rf"-{locked}-\d{{4}}-\d\d$", cache.with_["key"]), cache.with_["key"]
    calls = (tmp_path / "calls").read_text().splitlines()
    # The check: one installer and one download cache, uv's, which the arms' venvs use too;
    # then the comment job: torchgate alone, none of its dependencies.
    assert [c for c in calls if c.startswith(("pip", "uv"))] == [
        "pip install uv", "uv pip install --system -r conf/env/ci-cpu.txt",
        "uv pip install --system --no-deps -e .", "pip install --no-deps ."]
    assert "~/.cache/pip" not in cache.with_["path"] and "~/.cache/uv" in cache.with_["path"]


def test_the_gpu_box_checks_a_labelled_pull_request_from_this_repository_only(site, github):
    runner, _, base, head = site
    workflow = load(WORKFLOWS / "torchgate-gpu.yml")

    def event(fork=False, labels=("gpu-check",), action="labeled", label="gpu-check"):
        pull = pull_request(base, head, fork)["event"]["pull_request"]
        pull["labels"] = [{"name": n} for n in labels]
        return {"event_name": "pull_request_target", "repository": REPO, "sha": base,
                "ref": "refs/heads/main",
                "event": {"action": action, "label": {"name": label}, "pull_request": pull}}

    token = {"GITHUB_TOKEN": "ghs_workflow"}
    for skipped in (event(fork=True), event(labels=()), event(labels=("gpu-check", "docs"),
                                                              label="docs")):
        run = runner.start(skipped)
        assert runner.job(run, workflow, "baseline").result == "skipped"
        assert runner.job(run, workflow, "check", token).result == "skipped"
    run = runner.start(event())
    checked = runner.job(run, workflow, "check", token)
    commented = runner.job(run, workflow, "comment", token)
    assert checked.result == commented.result == "success", [
        (s.name, s.output[-2000:]) for s in checked.steps + commented.steps]
    assert runner.job(run, workflow, "unlabel", token).result == "skipped"
    assert runner.job(run, workflow, "cancel", token).result == "skipped"
    # New commits were not read by whoever labelled it: the label comes off, nothing runs.
    pushed = runner.start(event(action="synchronize"))
    assert runner.job(pushed, workflow, "check", token).result == "skipped"
    assert runner.job(pushed, workflow, "unlabel", token).result == "success"
    assert "gh pr edit 7 --repo owner/name --remove-label gpu-check" in site_calls(runner)
    # Taken off by a person: the cancel job, in the check's concurrency group, runs.
    taken_off = runner.start(event(action="unlabeled", labels=()))
    assert runner.job(taken_off, workflow, "check", token).result == "skipped"
    assert runner.job(taken_off, workflow, "cancel", token).result == "success"
    groups = {workflow["jobs"][j]["concurrency"]["group"] for j in ("check", "unlabel", "cancel")}
    assert groups == {"torchgate-gpu-${{ github.event.pull_request.number }}"}
    # A push while the check waited for the runner: the merge is not of the approved head.
    moved = event()
    moved["event"]["pull_request"]["head"]["sha"] = base
    stopped = runner.job(runner.start(moved), workflow, "check", token)
    assert stopped.result == "failure"
    refused = next(s for s in stopped.steps if s.outcome == "failure")
    assert refused.name == "The head the label approved, or stop"
    assert "which the label approved: label it again" in refused.output
    assert all(s.outcome == "skipped" for s in stopped.steps
               if s.name == "Measure both arms")
    (comment,) = github.comments[7]
    assert comment["body"].startswith("<!-- torchgate gpu-box -->\nMeasured on `gpu-box`")
    composed = yaml.safe_load((checked.workspace / "params.yaml").read_text())
    assert composed["matrix"]["name"] == "gpu" and composed["baseline"]["rev"] == base
    assert composed["machine"]["name"] == "gpu-box"
    # The check measured the test merge, with main's workflow; the comment ran main's code.
    assert git("rev-parse", "HEAD^2", cwd=checked.workspace).stdout.strip() == head
    assert git("rev-parse", "HEAD", cwd=commented.workspace).stdout.strip() == base


def writer(runner: Runner, **fake: str):
    runner.env.update({f"FAKE_{k.upper()}": v for k, v in fake.items()})
    run = runner.start({"event_name": "push", "repository": REPO, "sha": "0" * 40,
                        "ref": "refs/heads/main", "event": {}})
    workflow = load(WORKFLOWS / "torchgate.yml")
    assert runner.job(run, workflow, "measure").result == "skipped"
    assert runner.job(run, workflow, "check").result == "skipped"
    job = runner.job(run, workflow, "baseline", {"GITHUB_TOKEN": "ghs_workflow"})
    assert job.result == "success", [(s.name, s.output[-2000:]) for s in job.steps]
    runner.env.pop("FAKE_RACE", None)
    return job


def site_calls(runner: Runner) -> list[str]:
    return Path(runner.env["FAKE_CALLS"]).read_text().splitlines()


def protect(origin: Path) -> None:
    hook = origin / "hooks" / "pre-receive"
    hook.write_text(PROTECTED)
    hook.chmod(0o755)


def merged(work: Path, origin: Path) -> str:
    """`work`'s commit merged into main as a pull request's merge reaches a protected main."""
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "code", cwd=work)
    git("push", "-q", "origin", "HEAD:refs/heads/incoming", cwd=work)
    sha = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    git("update-ref", "refs/heads/main", sha, cwd=origin)
    return sha


def parents(origin: Path, rev: str) -> list[str]:
    return git("log", "-1", "--format=%P", rev, cwd=origin).stdout.split()


def test_the_writer_commits_its_reports_to_its_own_branch_and_main_stays_protected(
        site, tmp_path, github):
    runner, origin, base, head = site
    protect(origin)
    other = tmp_path / "other-writer"  # another writer of ci-cpu, ready to push meanwhile
    git("clone", "-q", str(origin), str(other), cwd=tmp_path)
    (other / "reports" / "ci-cpu").mkdir(parents=True)
    (other / "reports" / "ci-cpu" / "summary.md").write_text("another run\n")
    git("add", "-A", cwd=other)
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "raced", cwd=other)
    raced = git("rev-parse", "HEAD", cwd=other).stdout.strip()

    job = writer(runner, race=str(other))
    composed = yaml.safe_load((job.workspace / "params.yaml").read_text())
    assert composed["baseline"]["rev"] == base, "a first run: its own commit, no reports"
    assert composed["matrix"]["name"] == "pr", "the baseline the checks compare against"
    assert git("rev-parse", "main", cwd=origin).stdout.strip() == base, "main is untouched"
    top = git("rev-parse", "torchgate/ci-cpu", cwd=origin).stdout.strip()
    assert parents(origin, top) == [base, raced], "committed again on the tip that moved"
    assert git("log", "-1", "--format=%s", top, cwd=origin).stdout.strip() == \
        f"torchgate baseline: ci-cpu at {base[:12]} [skip ci]"
    changed = git("diff", "--name-only", base, top, cwd=origin).stdout.split()
    assert changed == ["reports/ci-cpu/bench/cpu-fp32.json", "reports/ci-cpu/summary.md"]
    calls = site_calls(runner)
    assert calls[-1] == "dvc repro gate", "the gate runs after the commit"
    assert "passed" not in job.summary and "**Passed:** 2 OK" in job.summary
    # The pages with their pictures, which the history leaves out, replace the pages branch;
    # the run's page shows the pictures from there and links the pages to the history.
    pages = tip(origin, "torchgate-pages/ci-cpu")
    assert parents(origin, pages) == [] and tree(origin, pages) == [
        "reports/ci-cpu/bench/cpu-fp32.json", "reports/ci-cpu/pictures/summary/.gitignore",
        PICTURE, "reports/ci-cpu/pictures/summary/page.png", "reports/ci-cpu/summary.md"]
    assert shown(pages) in job.summary

    # Main moves by a merged pull request: the writer compares with its previous point and
    # commits on top of the commit it measured and of that point.
    work = tmp_path / "dev"
    git("clone", "-q", str(origin), str(work), cwd=tmp_path)
    (work / "NOTES").write_text("a change of code\n")
    git("add", "-A", cwd=work)
    code = merged(work, origin)
    job = writer(runner, summary="**Passed:** 5 OK")
    assert yaml.safe_load((job.workspace / "params.yaml").read_text())["baseline"]["rev"] == top
    newest = git("rev-parse", "torchgate/ci-cpu", cwd=origin).stdout.strip()
    assert parents(origin, newest) == [code, top]
    assert "**Passed:** 5 OK\n" in git("show", f"{newest}:reports/ci-cpu/summary.md",
                                        cwd=origin).stdout
    assert git("log", "--format=%H", "torchgate/ci-cpu", "--", "reports/ci-cpu/",
               cwd=origin).stdout.split()[:2] == [newest, top], "the history"
    assert parents(origin, tip(origin, "torchgate-pages/ci-cpu")) == []
    assert subprocess.run(["git", "show", f"torchgate-pages/ci-cpu:{PICTURE}"], cwd=origin,
                          capture_output=True).stdout.endswith(b"5 OK")

    # A pull request based on the older main: its baseline measured an ancestor of its base.
    _, checked, _ = check(runner, base, head)
    assert checked.result == "success", [(s.name, s.output[-2000:]) for s in checked.steps]
    composed = yaml.safe_load((checked.workspace / "params.yaml").read_text())
    assert composed["baseline"] == {"rev": top, "code": base, "measure": "rebuild"}
    assert f"(its baseline: {top[:10]} on torchgate/ci-cpu)" in mine(github)[0]["body"]
    assert ("Main's newest pages on this machine, with their pictures: [torchgate-pages/ci-cpu]"
            f"(https://github.com/{REPO}/blob/torchgate-pages/ci-cpu/reports/ci-cpu/summary.md)"
            ) in mine(github)[0]["body"]


def test_the_writer_commits_nothing_when_its_reports_did_not_change(site, tmp_path):
    runner, origin, _, _ = site
    writer(runner)
    before = git("rev-parse", "torchgate/ci-cpu", cwd=origin).stdout
    writer(runner)
    assert git("rev-parse", "torchgate/ci-cpu", cwd=origin).stdout == before
