"""Post a run's report on its pull request as one comment that later runs edit in place.

    python -m torchgate.comment --repo owner/name --pr 12 --body-file comment.md

Talks to GitHub's REST API at $GITHUB_API_URL (default https://api.github.com; GitHub
Enterprise sets it in its runners) with the token in $GITHUB_TOKEN, which goes to that host
only (never along a redirect or a next-page link to another). The comment carries a hidden
marker: the pull request's first comment that holds it and was written by the token's own
user (GET /user; a workflow's GITHUB_TOKEN, which may not ask, posts as github-actions[bot];
--author names another) is edited, else one is created, so a pull request has one torchgate
comment however often it is pushed to, and nobody else's comment is ever overwritten. With
--machine the marker names the machine: each machine that checks the pull request keeps a
comment of its own, which only its own later runs edit. Only the
standard library: the follow-up workflow that comments on a fork's pull request runs it
without installing the project.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from torchgate.core import cli
from torchgate.core.errors import UserError, one_line_errors

MARKER = "<!-- torchgate -->"
MAX_BODY = 65536          # GitHub refuses a longer comment
TRUNCATED = "\n\n… (cut to fit a comment; the run's artifact holds the full reports)\n"
NEXT_PAGE = re.compile(r'<([^>]+)>;\s*rel="next"')
# Who a workflow's GITHUB_TOKEN (an installation token, which GET /user refuses) posts as.
ACTIONS_BOT = "github-actions[bot]"
# A markdown link or image whose target is a path in the reports folder (not a URL or anchor).
RELATIVE = re.compile(r"(!?)\[([^\]]*)\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s]+)\)")


def with_reports_at(body: str, url: str, images: str | None = None) -> str:
    """The summary's links made absolute for a comment, whose page is not the reports folder.
    `url` with `{path}` (e.g. a blob URL of a branch that holds the reports) is filled in per
    link; a plain URL (the run's page, where the reports are an artifact) takes every link.
    An image stays an image where `images` (or else `url`) has `{path}`: a raw URL of a commit
    that holds the pictures, since GitHub shows a blob URL's picture as a page, not inline;
    else it becomes a link, since the comment cannot show what it cannot reach."""
    images = images or url

    def absolute(match: re.Match) -> str:
        image, text, path = match.groups()
        if image and "{path}" in images:
            return f"![{text}]({images.replace('{path}', path)})"
        if "{path}" in url:
            return f"[{text}]({url.replace('{path}', path)})"
        return f"[{text}{' (picture)' if image else ''}]({url})"
    return RELATIVE.sub(absolute, body)


class Refused(UserError):
    """GitHub answered with an error status: the one-line message, and the status."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def origin(url: str) -> tuple[str, str]:
    """(scheme, host[:port]) of a URL: where a token may be sent."""
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only within the API's origin (and never carries the token along:
    it is an unredirected header)."""

    def __init__(self, api: str):
        self.api = api

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if origin(newurl) != origin(self.api):
            raise UserError(f"{req.get_method()} {req.full_url} was redirected to "
                            f"{origin(newurl)[1] or newurl}, not {origin(self.api)[1]}; not "
                            "following it (check GITHUB_API_URL)")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class GitHub:
    """The few REST calls a comment needs; every refusal becomes a UserError saying what to
    fix."""

    def __init__(self, repo: str, token: str, api: str):
        self.repo, self.token, self.api = repo, token, api.rstrip("/")
        self.opener = urllib.request.build_opener(_SameOrigin(self.api))

    def call(self, method: str, url: str, payload: dict | None = None) -> tuple[object, str]:
        """(decoded JSON, the Link header). The token goes to the API's own host only."""
        if not url.startswith(("http://", "https://")):
            url = self.api + url
        if origin(url) != origin(self.api):
            raise UserError(f"GitHub's reply pointed {method} at {origin(url)[1] or url}, not at "
                            f"{origin(self.api)[1]}; not sending GITHUB_TOKEN there (check "
                            "GITHUB_API_URL and any proxy in between)")
        request = urllib.request.Request(
            url, method=method, data=None if payload is None else json.dumps(payload).encode(),
            headers={"Accept": "application/vnd.github+json",
                     "X-GitHub-Api-Version": "2022-11-28",
                     "Content-Type": "application/json", "User-Agent": "torchgate"})
        request.add_unredirected_header("Authorization", f"Bearer {self.token}")
        try:
            with self.opener.open(request, timeout=30) as response:
                raw, link = response.read(), response.headers.get("Link", "")
                kind = response.headers.get("Content-Type", "") or "no content type"
        except urllib.error.HTTPError as exc:
            raise Refused(exc.code, self.refusal(exc.code, method, url, exc.read())) from None
        except urllib.error.URLError as exc:
            raise UserError(f"cannot reach {self.api} ({exc.reason}); check GITHUB_API_URL "
                            "and the network") from None
        try:
            return json.loads(raw or b"null"), link
        except ValueError:        # a proxy's or a login page, not the API
            raise UserError(f"{method} {url} answered with something that is not JSON "
                            f"({kind.split(';')[0]}, {len(raw)} bytes): not GitHub's API; "
                            "check GITHUB_API_URL and any proxy in between") from None

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
        return (pull or {}).get("head", {}).get("sha", "") if isinstance(pull, dict) else ""

    def login(self) -> str:
        """Who the token posts as: GET /user; a workflow's installation token may not ask,
        and posts as github-actions[bot]."""
        try:
            user, _ = self.call("GET", "/user")
        except Refused as exc:
            if exc.code == 403:
                return ACTIONS_BOT
            raise
        login = user.get("login") if isinstance(user, dict) else None
        if not isinstance(login, str) or not login:
            raise UserError(f"GET {self.api}/user does not name the token's user; pass "
                            "--author with the login the comments are posted as")
        return login


def marker(machine: str | None = None) -> str:
    """The hidden line that finds the comment again: one per machine when named (the
    names never contain a space, so no marker is part of another)."""
    return f"<!-- torchgate {machine} -->" if machine else MARKER


def with_marker(body: str, mark: str = MARKER) -> str:
    """The body as posted: marked, and short enough for GitHub."""
    text = f"{mark}\n{body.rstrip()}\n"
    if len(text) > MAX_BODY:
        text = text[:MAX_BODY - len(TRUNCATED)] + TRUNCATED
    return text


def _author(comment: dict) -> str | None:
    user = comment.get("user")
    return user.get("login") if isinstance(user, dict) else None


def post(github: GitHub, pr: int, body: str, author: str,
         mark: str = MARKER) -> tuple[str, str]:
    """Edit this pull request's comment that holds `mark` and that `author` wrote, or create
    one: (what was done, its URL). A marked comment by anyone else (quoting the report, say)
    is left be."""
    text = with_marker(body, mark)
    mine = [c for c in github.comments(pr) if isinstance(c, dict)
            and mark in (c.get("body") or "") and _author(c) == author]
    if mine:
        done, _ = github.call("PATCH", f"/repos/{github.repo}/issues/comments/{mine[0]['id']}",
                              {"body": text})
        return "updated", _html_url(done)
    done, _ = github.call("POST", f"/repos/{github.repo}/issues/{pr}/comments", {"body": text})
    return "created", _html_url(done)


def _html_url(done: object) -> str:
    return str(done.get("html_url") or "") if isinstance(done, dict) else ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=cli.prog("comment"), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", required=True, help="owner/name")
    parser.add_argument("--pr", required=True, type=int, help="the pull request's number")
    parser.add_argument("--body-file", type=Path, help="the comment (required unless "
                                                       "--verify-only)")
    parser.add_argument("--verify-only", action="store_true",
                        help="check --head-sha and print PR=<number> (for $GITHUB_ENV), "
                             "posting nothing: before anything of the run is published")
    parser.add_argument("--head-sha", help="refuse unless the pull request's head is this "
                                           "commit (a fork's artifact names its own number)")
    parser.add_argument("--author", help="the login the token posts as, whose marked comment "
                                         "is edited (default: GET /user; a workflow's "
                                         f"GITHUB_TOKEN: {ACTIONS_BOT})")
    parser.add_argument("--machine", help="the machine that measured (TORCHGATE_MACHINE): "
                                          "one comment per machine, edited by its later runs")
    parser.add_argument("--reports-url", help="where the body's relative links point: a URL "
                                              "with {path} (filled per link), or one page "
                                              "for all of them (the run that holds the "
                                              "reports as an artifact)")
    parser.add_argument("--images-url", help="where the body's pictures are, a URL with "
                                             "{path} (a raw URL of a commit that holds "
                                             "them): shown in the comment, not linked")
    args = parser.parse_args(argv)
    with one_line_errors("comment"):
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
            raise UserError(f"--repo must be owner/name, got {args.repo!r}")
        if args.machine is not None and not re.fullmatch(r"[\w.-]+", args.machine):
            raise UserError(f"--machine must be a name of letters, digits, '.', '_' or '-', "
                            f"got {args.machine!r}")
        if args.images_url is not None and "{path}" not in args.images_url:
            raise UserError(f"--images-url must hold {{path}}, where each picture's path goes, "
                            f"got {args.images_url!r}")
        if args.verify_only and not args.head_sha:
            raise UserError("--verify-only checks the pull request's head: give --head-sha")
        if not args.verify_only and args.body_file is None:
            raise UserError("give --body-file, the comment to post")
        token = os.environ.get("GITHUB_TOKEN", "")
        if not token:
            raise UserError("GITHUB_TOKEN is not set; export a token that may write "
                            "pull-request comments (in a workflow: secrets.GITHUB_TOKEN)")
        github = GitHub(args.repo, token,
                        os.environ.get("GITHUB_API_URL") or "https://api.github.com")
        if args.head_sha:
            head = github.head_sha(args.pr)
            if head != args.head_sha:
                raise UserError(f"pull request {args.pr} of {args.repo} is at {head[:10]}, "
                                f"not at the run's {args.head_sha[:10]}; not commenting")
        if args.verify_only:
            print(f"PR={args.pr}")
            return
        try:
            body = args.body_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot read --body-file {args.body_file} ({exc.strerror})") \
                from None
        if args.reports_url:
            body = with_reports_at(body, args.reports_url, args.images_url)
        done, url = post(github, args.pr, body, args.author or github.login(),
                         marker(args.machine))
        print(f"torchgate comment: {done} the "
              + (f"{args.machine} " if args.machine else "")
              + f"comment on {args.repo}#{args.pr}"
              + (f": {url}" if url else ""))


if __name__ == "__main__":
    main()
