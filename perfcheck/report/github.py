"""GitHub: workflow-command annotations, step outputs, and one sticky PR comment.

* ``annotations``: ``::error file=perfcheck.toml,line=24,title=...::message`` lines
  that GitHub turns into annotations on the expectation's line (printed by
  ``perfcheck check`` when ``GITHUB_ACTIONS=true``). GitHub shows at most 10 error
  annotations per step, so the 10 first failures are annotated and a warning says
  how many more the summary lists.
* ``step_outputs``: ``name=value`` lines for ``$GITHUB_OUTPUT`` (the action's outputs).
* ``post_comment``: create or update ONE comment on a pull request through the REST
  API (``GITHUB_API_URL``, default https://api.github.com, with ``GITHUB_TOKEN``). The
  comment is found again by a hidden marker (an HTML comment GitHub does not render)
  at the start of a comment by the token's own user or the Actions bot, so a re-run
  updates it instead of adding another. http.client only: no dependency.

REST endpoints used (docs.github.com, "REST API endpoints for issue comments";
"REST API endpoints for users": ``GET /user``):
``GET /repos/{repo}/issues/{number}/comments`` (paged, 100 per page),
``POST /repos/{repo}/issues/{number}/comments``, ``PATCH /repos/{repo}/issues/comments/{id}``.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfcheck.errors import PerfcheckError
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, XFAILED, XPASSED, Check
from perfcheck.report.results import figures_line, source_path

if TYPE_CHECKING:
    from perfcheck.suiterun import Run

# GitHub's limits (docs.github.com, "Workflow commands": annotations; "issue
# comments": body length): 10 error annotations per step, 65,536 characters per body.
MAX_ERROR_ANNOTATIONS = 10
MAX_COMMENT_CHARS = 65536
DEFAULT_MARKER = "perfcheck"


class GitHubError(PerfcheckError):
    """The GitHub API refused or could not be reached; the message says what to do.
    ``status``: the HTTP status of a refusal, None otherwise."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# --- workflow commands ---------------------------------------------------------------------


def _escape_data(text: str) -> str:
    # the runner's own escaping of a command's message (actions/toolkit, command.ts)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(check: Check) -> str:
    """One ``::error`` workflow command for a failed or unevaluated check."""
    props = []
    where = source_path(check)
    if where:
        props.append(f"file={_escape_property(where)}")
        if check.source_line:
            props.append(f"line={check.source_line}")
    what = "could not be evaluated" if check.outcome == ERROR else "failed"
    title = f"perfcheck {check.suite + ': ' if check.suite else ''}{check.expression} {what}"
    props.append(f"title={_escape_property(title)}")
    body = check.message if check.outcome == ERROR else f"{check.kernel}: {figures_line(check)}"
    return f"::error {','.join(props)}::{_escape_data(body)}"


def annotations(checks: Sequence[Check], *, limit: int = MAX_ERROR_ANNOTATIONS) -> list[str]:
    bad = [c for c in checks if c.outcome in (FAILED, ERROR)]
    lines = [annotation(c) for c in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"::warning title=perfcheck::{len(bad) - limit} more failed checks are not annotated "
                     "(GitHub shows 10 per step); the job summary lists them all")
    return lines


def run_outputs(run: "Run") -> dict[str, object]:
    """The action's outputs: counts, the verdict and every report's paths."""
    counts = run.counts()
    values: dict[str, object] = {
        "total": len(run.checks), "passed": counts.get(PASSED, 0), "failed": counts.get(FAILED, 0),
        "errors": counts.get(ERROR, 0), "recorded": counts.get(RECORDED, 0),
        # pytest xfail outcomes, so that the counts add up to the total
        "xfailed": counts.get(XFAILED, 0), "xpassed": counts.get(XPASSED, 0), "ok": str(run.exit_code == 0).lower(),
    }
    for kind, paths in run.reports.items():
        values[f"{kind}-report"] = " ".join(str(p) for p in paths)
    return values


def step_outputs(values: Mapping[str, object]) -> str:
    """``name=value`` lines for ``$GITHUB_OUTPUT`` (values on one line each)."""
    return "".join(f"{k}={str(v).replace(chr(10), ' ').replace(chr(13), ' ')}\n" for k, v in values.items())


# --- the sticky pull-request comment -------------------------------------------------------


def marker_line(key: str = DEFAULT_MARKER) -> str:
    return f"<!-- perfcheck-comment:{key} -->"


@dataclass(frozen=True)
class CommentResult:
    action: str  # "created" | "updated"
    comment_id: int
    url: str | None


def _truncate(body: str, limit: int) -> str:
    if len(body) <= limit:
        return body
    note = "\n\n... (truncated: GitHub takes at most 65,536 characters; the job summary and the JSON results have everything)\n"
    return body[: limit - len(note)] + note


# Bounds on what the API may make perfcheck do (a comment is one short exchange):
MAX_PAGES = 50  # 5,000 comments searched for the sticky one, then give up
MAX_REDIRECTS = 5  # GETs only, and only on the API's own host (a renamed repository)
MAX_ANSWER_BYTES = 32 * 1024 * 1024  # a page of 100 comments of 65,536 characters is ~7 MB
# Who may have written the sticky comment: the token's own user (GET /user), or, for
# the Actions GITHUB_TOKEN (an installation token, for which GET /user answers 403),
# the GitHub Actions bot that token comments as.
ACTIONS_BOT = "github-actions[bot]"


class _Api:
    """The few REST calls the comment needs, with the token sent only to the API's own
    host: http.client, not urllib, because urllib follows a redirect to any host with
    the Authorization header kept, and turns a redirected POST into a GET. One deadline
    covers the whole exchange (every page and the write): a watchdog shuts the socket
    down when it passes, so a server that drips a byte at a time cannot hold the job."""

    def __init__(self, api_url: str, token: str, timeout: float) -> None:
        parts = urllib.parse.urlsplit(api_url.rstrip("/"))
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise GitHubError(f"GitHub API URL {api_url!r} is not an http(s) URL (GITHUB_API_URL)")
        self.scheme, self.host = parts.scheme, parts.hostname
        try:
            self.port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise GitHubError(f"GitHub API URL {api_url!r} has a bad port (GITHUB_API_URL)") from None
        self.prefix = parts.path
        self.base = api_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout

    def _origin(self, url: str) -> tuple[str, str | None, int | None]:
        parts = urllib.parse.urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = None
        return parts.scheme, parts.hostname, port

    def _late(self) -> GitHubError:
        return GitHubError(f"GitHub API {self.base} did not finish within {self.timeout:g} s (the whole exchange)")

    def _send(self, method: str, target: str, data: bytes | None) -> tuple[int, str, "http.client.HTTPMessage", bytes]:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self._late()
        if self.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=remaining, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=remaining)
        fired = threading.Event()

        def abort() -> None:
            fired.set()
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        watchdog = threading.Timer(remaining, abort)
        watchdog.daemon = True
        watchdog.start()
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                   "Authorization": f"Bearer {self.token}", "User-Agent": "perfcheck"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, target, body=data, headers=headers)
            response = conn.getresponse()
            chunks, size = [], 0
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise GitHubError(f"GitHub API {method} {target}: the answer is larger than "
                                      f"{MAX_ANSWER_BYTES // 2**20} MiB")
                chunks.append(chunk)
            if fired.is_set():
                raise self._late()
            return response.status, response.reason, response.headers, b"".join(chunks)
        except (OSError, http.client.HTTPException) as exc:
            if fired.is_set() or time.monotonic() >= self.deadline:
                raise self._late() from None
            raise GitHubError(f"GitHub API {self.base} cannot be reached: {exc}") from None
        finally:
            watchdog.cancel()
            conn.close()

    def call(self, method: str, path: str, body: Mapping[str, object] | None = None) -> object:
        data = json.dumps(body).encode() if body is not None else None
        target = self.prefix + path
        for _ in range(MAX_REDIRECTS + 1):
            status, reason, headers, raw = self._send(method, target, data)
            if status not in (301, 302, 303, 307, 308):
                break
            location = urllib.parse.urljoin(f"{self.scheme}://{self.host}:{self.port}{target}", headers.get("Location", ""))
            if method != "GET":
                raise GitHubError(f"GitHub API {method} {path}: answered with a redirect (HTTP {status}), not "
                                  "followed: a comment is never sent again elsewhere or turned into a GET")
            if self._origin(location) != (self.scheme, self.host, self.port):
                raise GitHubError(f"GitHub API {method} {path}: redirected to another host "
                                  f"({urllib.parse.urlsplit(location).netloc}), not followed: the token is only "
                                  f"sent to {self.host}")
            parts = urllib.parse.urlsplit(location)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
        else:
            raise GitHubError(f"GitHub API {method} {path}: more than {MAX_REDIRECTS} redirects")
        if status >= 400:
            hint = ""
            if status in (401, 403, 404):
                hint = (" (the token needs `pull-requests: write`; a pull request from a fork gets a "
                        "read-only GITHUB_TOKEN: the job summary still has the report)")
            raise GitHubError(f"GitHub API {method} {path}: HTTP {status} {reason}{hint}", status)
        try:
            return json.loads(raw.decode("utf-8")) if raw else None
        except (ValueError, RecursionError):
            raise GitHubError(f"GitHub API {method} {path}: the answer is not JSON") from None


def _comment_id(answer: object, what: str) -> int:
    value = answer.get("id") if isinstance(answer, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise GitHubError(f"GitHub API {what}: the answer has no comment id (got {str(answer)[:80]!r})")
    return value


def _own_logins(api: _Api) -> set[str]:
    """Whose comments may be the sticky one: the token's user, and the Actions bot."""
    try:
        user = api.call("GET", "/user")
    except GitHubError as exc:
        if exc.status not in (401, 403, 404):
            raise
        return {ACTIONS_BOT}  # an installation token (GITHUB_TOKEN) has no user
    login = user.get("login") if isinstance(user, dict) else None
    return {login, ACTIONS_BOT} if isinstance(login, str) and login else {ACTIONS_BOT}


def _author(comment: Mapping[str, object]) -> str | None:
    user = comment.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) else None


def post_comment(
    body: str,
    *,
    repository: str,
    number: int,
    token: str,
    api_url: str = "https://api.github.com",
    key: str = DEFAULT_MARKER,
    timeout: float = 30.0,
) -> CommentResult:
    """Create, or update in place, the one perfcheck comment on pull request ``number``:
    the comment whose body starts with the marker, written by the token's own user or
    the GitHub Actions bot (a marker planted by anyone else is ignored). ``timeout``
    bounds the whole exchange."""
    marker = marker_line(key)
    text = _truncate(f"{marker}\n{body}", MAX_COMMENT_CHARS)
    api = _Api(api_url, token, timeout)
    ours = _own_logins(api)
    found = None
    for page in range(1, MAX_PAGES + 1):
        comments = api.call("GET", f"/repos/{repository}/issues/{number}/comments?per_page=100&page={page}")
        if not isinstance(comments, list):
            raise GitHubError(f"GitHub API GET /repos/{repository}/issues/{number}/comments: the answer is not a "
                              "list of comments")
        found = next((c for c in comments if isinstance(c, dict) and _author(c) in ours
                      and str(c.get("body", "")).startswith(marker)), None)
        if found is not None or len(comments) < 100:
            break
    else:
        raise GitHubError(f"GitHub API: pull request {repository}#{number} has more than {MAX_PAGES * 100} comments; "
                          "not searched further for perfcheck's comment")
    if found is not None:
        comment_id = _comment_id(found, f"GET /repos/{repository}/issues/{number}/comments")
        answer = api.call("PATCH", f"/repos/{repository}/issues/comments/{comment_id}", {"body": text})
        action = "updated"
    else:
        answer = api.call("POST", f"/repos/{repository}/issues/{number}/comments", {"body": text})
        action = "created"
    comment_id = _comment_id(answer, f"{'PATCH' if found is not None else 'POST'} comment")
    url = answer.get("html_url") if isinstance(answer, dict) else None
    return CommentResult(action, comment_id, url if isinstance(url, str) else None)


def pull_request_number(environ: Mapping[str, str] | None = None) -> int | None:
    """The pull request a workflow runs for: the event payload's ``pull_request.number``
    (``GITHUB_EVENT_PATH``), else ``refs/pull/N/merge`` in ``GITHUB_REF``; None otherwise."""
    env = os.environ if environ is None else environ
    path = env.get("GITHUB_EVENT_PATH")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                event = json.load(handle)
            number = (event.get("pull_request") or {}).get("number")
            if number is not None:
                return int(number)
        except (OSError, ValueError, AttributeError, TypeError, RecursionError):
            pass  # no readable event: the GITHUB_REF fallback below
    ref = env.get("GITHUB_REF", "")
    parts = ref.split("/")
    if len(parts) >= 3 and parts[:2] == ["refs", "pull"] and parts[2].isdigit():
        return int(parts[2])
    return None
