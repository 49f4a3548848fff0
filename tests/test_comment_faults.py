"""torchgate.comment where GitHub's side goes wrong or is not GitHub: a reply that is not JSON is
one line, the token never leaves the API's host (a next-page link or a redirect to another),
and only the token's own marked comment is edited, never someone else's that holds the
marker."""
from pathlib import Path

import pytest

from tests.github_standin import GitHubStandIn, one_line_error
from torchgate import comment


@pytest.fixture
def elsewhere():
    """Another host (another port of 127.0.0.1: another origin), which must see no token."""
    with GitHubStandIn() as hub:
        yield hub


def post(tmp_path: Path, body: str, *extra: str) -> None:
    path = tmp_path / "comment.md"
    path.write_text(body)
    comment.main(["--repo", "owner/name", "--pr", "7", "--body-file", str(path), *extra])


def test_a_reply_that_is_not_json_is_one_line(github, tmp_path, capsys):
    github.html = True
    err = one_line_error(capsys, lambda: post(tmp_path, "x"))
    assert err == (f"torchgate comment: error: GET {github.url}/user answered with something "
                   "that is not JSON (text/html, 56 bytes): not GitHub's API; check "
                   "GITHUB_API_URL and any proxy in between")
    assert github.comments[7] == []


def test_a_next_page_on_another_host_gets_no_token(github, elsewhere, tmp_path, capsys):
    for i in range(3):                             # two pages
        github.add(7, f"comment {i}")
    github.next_base = elsewhere.url
    err = one_line_error(capsys, lambda: post(tmp_path, "x"))
    host = elsewhere.url.removeprefix("http://")
    assert err == (f"torchgate comment: error: GitHub's reply pointed GET at {host}, not at "
                   f"{github.url.removeprefix('http://')}; not sending GITHUB_TOKEN there "
                   "(check GITHUB_API_URL and any proxy in between)")
    assert elsewhere.requests == [] and elsewhere.tokens == []
    assert len(github.comments[7]) == 3            # nothing posted on a partial listing


def test_a_redirect_to_another_host_is_not_followed(github, elsewhere, tmp_path, capsys):
    github.redirect = elsewhere.url
    err = one_line_error(capsys, lambda: post(tmp_path, "x"))
    assert "was redirected to " + elsewhere.url.removeprefix("http://") in err
    assert elsewhere.requests == [] and elsewhere.tokens == []


def test_a_marked_comment_by_someone_else_is_never_edited(github, tmp_path, capsys):
    quoted = f"{comment.MARKER}\nthe PR author quoting an old report, marker and all"
    github.add(7, quoted, user="pr-author")
    post(tmp_path, "run 1")
    assert "created the comment" in capsys.readouterr().out
    post(tmp_path, "run 2")
    assert "updated the comment" in capsys.readouterr().out
    bodies = {c["user"]["login"]: c["body"] for c in github.comments[7]}
    assert bodies == {"pr-author": quoted, "torchgate-bot": f"{comment.MARKER}\nrun 2\n"}
    assert ("GET", "/user") in github.requests


def test_a_workflow_token_posts_as_the_actions_bot_and_edits_its_own(github, tmp_path,
                                                                     monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", "installation")      # GET /user: 403
    github.add(7, f"{comment.MARKER}\nby a person", user="someone")
    post(tmp_path, "run 1")
    post(tmp_path, "run 2")
    mine = [c for c in github.comments[7] if c["user"]["login"] == comment.ACTIONS_BOT]
    assert len(mine) == 1 and mine[0]["body"] == f"{comment.MARKER}\nrun 2\n"
    assert github.comments[7][0]["body"] == f"{comment.MARKER}\nby a person"


def test_author_names_the_login_whose_comment_is_edited(github, tmp_path):
    github.add(7, f"{comment.MARKER}\nold", user="torchgate-app[bot]")
    post(tmp_path, "new", "--author", "torchgate-app[bot]")
    assert [c["body"] for c in github.comments[7]] == [f"{comment.MARKER}\nnew\n"]
    assert ("GET", "/user") not in github.requests
