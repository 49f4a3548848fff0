"""A stand-in for the few GitHub REST calls that torchgate.comment makes, on 127.0.0.1: issue
comments of pull requests (paged by a Link header, as GitHub pages them), creating and editing
them, a pull request's head commit and the token's user. A token named "read-only" is refused
writes as a fork's pull request's token is; a token without a user (`users`) is a workflow's
installation token: GET /user refuses it and it posts as github-actions[bot]. Faults on demand:
`html` (a proxy's page instead of JSON), `next_base` (next-page links to another host),
`redirect` (comments moved to another host); `tokens` lists every token received."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

PAGE = 2          # small pages, so that a handful of comments already spans several


class GitHubStandIn:
    def __init__(self, repo: str = "owner/name", pulls: dict[int, str] | None = None):
        self.repo = repo
        self.pulls = pulls if pulls is not None else {7: "a" * 40}   # number -> head sha
        self.comments: dict[int, list[dict]] = {n: [] for n in self.pulls}
        self.requests: list[tuple[str, str]] = []
        self.tokens: list[str] = []
        self.users = {"t0ken": "torchgate-bot", "read-only": "fork-reader"}
        self.html = False
        self.next_base: str | None = None
        self.redirect: str | None = None
        self.next_id = 100
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def add(self, pr: int, body: str, user: str = "someone") -> None:
        self.comments[pr].append({"id": self.next_id, "body": body, "user": {"login": user}})
        self.next_id += 1

    def handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, code: int, data, link: str = "") -> None:
                raw = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                if link:
                    self.send_header("Link", link)
                self.end_headers()
                self.wfile.write(raw)

            def route(self, method: str) -> None:
                url = urlparse(self.path)
                hub.requests.append((method, url.path))
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if token:
                    hub.tokens.append(token)
                if hub.redirect and method == "GET" and "/comments" in url.path:
                    self.send_response(302)
                    self.send_header("Location", hub.redirect + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if not token:
                    return self.reply(401, {"message": "Requires authentication"})
                if hub.html:
                    raw = b"<html><body>Sign in to the corporate proxy</body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                    return None
                if url.path == "/user":
                    if token in hub.users:
                        return self.reply(200, {"login": hub.users[token]})
                    return self.reply(403, {"message": "Resource not accessible by integration"})
                base = f"/repos/{hub.repo}"
                if method in ("POST", "PATCH") and token == "read-only":
                    return self.reply(403, {"message": "Resource not accessible by integration"})
                if m := re.fullmatch(base + r"/issues/(\d+)/comments", url.path):
                    pr = int(m.group(1))
                    if pr not in hub.comments:
                        return self.reply(404, {"message": "Not Found"})
                    if method == "GET":
                        return self.page(pr, int(parse_qs(url.query).get("page", ["1"])[0]))
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    hub.add(pr, body["body"], hub.users.get(token, "github-actions[bot]"))
                    return self.reply(201, {**hub.comments[pr][-1], "html_url": "c"})
                if m := re.fullmatch(base + r"/issues/comments/(\d+)", url.path):
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    for comment in (c for cs in hub.comments.values() for c in cs):
                        if comment["id"] == int(m.group(1)):
                            comment["body"] = body["body"]
                            return self.reply(200, {**comment, "html_url": "c"})
                if m := re.fullmatch(base + r"/pulls/(\d+)", url.path):
                    if int(m.group(1)) in hub.pulls:
                        return self.reply(200, {"head": {"sha": hub.pulls[int(m.group(1))]}})
                return self.reply(404, {"message": "Not Found"})

            def page(self, pr: int, page: int) -> None:
                comments = hub.comments[pr]
                chunk = comments[(page - 1) * PAGE:page * PAGE]
                link = ""
                if page * PAGE < len(comments):
                    nxt = (f"{hub.next_base or hub.url}{urlparse(self.path).path}"
                           f"?per_page={PAGE}&page={page + 1}")
                    link = f'<{nxt}>; rel="next", <{hub.url}/x?page=1>; rel="first"'
                self.reply(200, chunk, link)

            def do_GET(self):
                self.route("GET")

            def do_POST(self):
                self.route("POST")

            def do_PATCH(self):
                self.route("PATCH")

        return Handler


def one_line_error(capsys, call) -> str:
    """The stage's exit status 2 and its one-line message, from a call that must fail."""
    with pytest.raises(SystemExit) as exit_:
        call()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1, err
    return err.strip()
