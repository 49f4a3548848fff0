"""Post a run's report on its pull request as one comment that later runs edit in place.

    python -m stages.comment --repo owner/name --pr 12 --body-file comment.md

Talks to GitHub's REST API at $GITHUB_API_URL (default https://api.github.com; GitHub
Enterprise sets it in its runners) with the token in $GITHUB_TOKEN. The comment carries a
hidden marker: the pull request's first comment that holds it is edited, else one is created,
so a pull request has one torchgate comment however often it is pushed to. Only the standard
library: the follow-up workflow that comments on a fork's pull request runs it without
installing the project.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

from stages.core.errors import UserError, one_line_errors

MARKER = "<!-- torchgate -->"
MAX_BODY = 65536          # GitHub refuses a longer comment
TRUNCATED = "\n\n… (cut to fit a comment; the run's artifact holds the full reports)\n"
NEXT_PAGE = re.compile(r'<([^>]+)>;\s*rel="next"')
# A markdown link or image whose target is a path in the reports folder (not a URL or anchor).
RELATIVE = re.compile(r"(!?)\[([^\]]*)\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s]+)\)")


def with_reports_at(body: str, url: str) -> str:
    """The summary's links made absolute for a comment, whose page is not the reports folder.
    `url` with `{path}` (e.g. a blob URL of a branch that holds the reports) is filled in per
    link, and images stay images; a plain URL (the run's page, where the reports are an
    artifact) takes every link, and an image becomes a link to it, since the comment cannot
    show what it cannot reach."""
    def absolute(match: re.Match) -> str:
        image, text, path = match.groups()
        if "{path}" in url:
            return f"{image}[{text}]({url.replace('{path}', path)})"
        return f"[{text}{' (picture)' if image else ''}]({url})"
    return RELATIVE.sub(absolute, body)


class GitHub:
    """The few REST calls a comment needs; every refusal becomes a UserError saying what to
    fix."""

    def __init__(self, repo: str, token: str, api: str):
        self.repo, self.token, self.api = repo, token, api.rstrip("/")

    def call(self, method: str, url: str, payload: dict | None = None) -> tuple[object, str]:
        """(decoded JSON, the Link header)."""
        if not url.startswith(("http://", "https://")):
            url = self.api + url
        request = urllib.request.Request(
            url, method=method, data=None if payload is None else json.dumps(payload).encode(),
            headers={"Accept": "application/vnd.github+json",
                     "Authorization": f"Bearer {self.token}",
                     "X-GitHub-Api-Version": "2022-11-28",
                     "Content-Type": "application/json", "User-Agent": "torchgate"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null"), response.headers.get("Link", "")
        except urllib.error.HTTPError as exc:
            raise UserError(self.refusal(exc.code, method, url, exc.read())) from None
        except urllib.error.URLError as exc:
            raise UserError(f"cannot reach {self.api} ({exc.reason}); check GITHUB_API_URL "
                            "and the network") from None

    def refusal(self, code: int, method: str, url: str, body: bytes) -> str:
        try:
            said = json.loads(body).get("message", "")
        except (ValueError, AttributeError):
            said = ""
        said = f": {said}" if said else ""
        if code == 401:
            return f"GitHub refused GITHUB_TOKEN (401{said}); set a valid token"
        if code == 403:
            return (f"the token may not write comments on {self.repo} (403{said}); a pull "
                    "request from a fork gets a read-only token: post its comment from the "
                    "follow-up workflow (on workflow_run), or grant pull-requests: write")
        if code == 404:
            return (f"{method} {url} found nothing (404{said}); check --repo and --pr, and "
                    "that the token can see the repository")
        return f"{method} {url} failed ({code}{said})"

    def comments(self, pr: int) -> list[dict]:
        """Every comment of the pull request, page after page."""
        found: list[dict] = []
        url: str | None = f"/repos/{self.repo}/issues/{pr}/comments?per_page=100"
        while url:
            page, link = self.call("GET", url)
            found.extend(page if isinstance(page, list) else [])
            more = NEXT_PAGE.search(link)
            url = more.group(1) if more else None
        return found

    def head_sha(self, pr: int) -> str:
        pull, _ = self.call("GET", f"/repos/{self.repo}/pulls/{pr}")
        return (pull or {}).get("head", {}).get("sha", "")


def with_marker(body: str) -> str:
    """The body as posted: marked, and short enough for GitHub."""
    text = f"{MARKER}\n{body.rstrip()}\n"
    if len(text) > MAX_BODY:
        text = text[:MAX_BODY - len(TRUNCATED)] + TRUNCATED
    return text


def post(github: GitHub, pr: int, body: str) -> tuple[str, str]:
    """Edit this pull request's marked comment, or create it: (what was done, its URL)."""
    text = with_marker(body)
    mine = [c for c in github.comments(pr) if MARKER in (c.get("body") or "")]
    if mine:
        done, _ = github.call("PATCH", f"/repos/{github.repo}/issues/comments/{mine[0]['id']}",
                              {"body": text})
        return "updated", (done or {}).get("html_url", "")
    done, _ = github.call("POST", f"/repos/{github.repo}/issues/{pr}/comments", {"body": text})
    return "created", (done or {}).get("html_url", "")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.comment", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", required=True, help="owner/name")
    parser.add_argument("--pr", required=True, type=int, help="the pull request's number")
    parser.add_argument("--body-file", required=True, type=Path)
    parser.add_argument("--head-sha", help="refuse unless the pull request's head is this "
                                           "commit (a fork's artifact names its own number)")
    parser.add_argument("--reports-url", help="where the body's relative links point: a URL "
                                              "with {path} (filled per link), or one page "
                                              "for all of them (the run that holds the "
                                              "reports as an artifact)")
    args = parser.parse_args(argv)
    with one_line_errors("comment"):
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
            raise UserError(f"--repo must be owner/name, got {args.repo!r}")
        token = os.environ.get("GITHUB_TOKEN", "")
        if not token:
            raise UserError("GITHUB_TOKEN is not set; export a token that may write "
                            "pull-request comments (in a workflow: secrets.GITHUB_TOKEN)")
        try:
            body = args.body_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot read --body-file {args.body_file} ({exc.strerror})") \
                from None
        if args.reports_url:
            body = with_reports_at(body, args.reports_url)
        github = GitHub(args.repo, token,
                        os.environ.get("GITHUB_API_URL") or "https://api.github.com")
        if args.head_sha:
            head = github.head_sha(args.pr)
            if head != args.head_sha:
                raise UserError(f"pull request {args.pr} of {args.repo} is at {head[:10]}, "
                                f"not at the run's {args.head_sha[:10]}; not commenting")
        done, url = post(github, args.pr, body)
        print(f"torchgate comment: {done} the comment on {args.repo}#{args.pr}"
              + (f": {url}" if url else ""))


if __name__ == "__main__":
    main()
