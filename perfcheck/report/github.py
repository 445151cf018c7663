"""GitHub: workflow-command annotations, step outputs, and one sticky PR comment.

* ``annotations``: ``::error file=perfcheck.toml,line=24,title=...::message`` lines
  that GitHub turns into annotations on the expectation's line (printed by
  ``perfcheck check`` when ``GITHUB_ACTIONS=true``). GitHub shows at most 10 error
  annotations per step, so the 10 first failures are annotated and a warning says
  how many more the summary lists.
* ``step_outputs``: ``name=value`` lines for ``$GITHUB_OUTPUT`` (the action's outputs).
* ``post_comment``: create or update ONE comment on a pull request through the REST
  API (``GITHUB_API_URL``, default https://api.github.com, with ``GITHUB_TOKEN``). The
  comment is found again by a hidden marker (an HTML comment GitHub does not render),
  so a re-run updates it instead of adding another. urllib only: no dependency.

REST endpoints used (docs.github.com, "REST API endpoints for issue comments"):
``GET /repos/{repo}/issues/{number}/comments`` (paged, 100 per page),
``POST /repos/{repo}/issues/{number}/comments``, ``PATCH /repos/{repo}/issues/comments/{id}``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
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
    """The GitHub API refused or could not be reached; the message says what to do."""


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


class _Api:
    def __init__(self, api_url: str, token: str, timeout: float) -> None:
        self.base = api_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: Mapping[str, object] | None = None) -> object:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("User-Agent", "perfcheck")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (https or loopback)
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            hint = ""
            if exc.code in (401, 403, 404):
                hint = (" (the token needs `pull-requests: write`; a pull request from a fork gets a "
                        "read-only GITHUB_TOKEN: the job summary still has the report)")
            raise GitHubError(f"GitHub API {method} {path}: HTTP {exc.code} {exc.reason}{hint}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GitHubError(f"GitHub API {self.base} cannot be reached: {reason}") from None
        try:
            return json.loads(text) if text else None
        except ValueError:
            raise GitHubError(f"GitHub API {method} {path}: the answer is not JSON") from None


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
    """Create, or update in place, the one perfcheck comment on pull request ``number``."""
    marker = marker_line(key)
    text = _truncate(f"{marker}\n{body}", MAX_COMMENT_CHARS)
    api = _Api(api_url, token, timeout)
    found = None
    page = 1
    while found is None:
        comments = api.call("GET", f"/repos/{repository}/issues/{number}/comments?per_page=100&page={page}")
        if not isinstance(comments, list) or not comments:
            break
        found = next((c for c in comments if isinstance(c, dict) and marker in str(c.get("body", ""))), None)
        if len(comments) < 100:
            break
        page += 1
    if found is not None:
        answer = api.call("PATCH", f"/repos/{repository}/issues/comments/{found['id']}", {"body": text})
        action = "updated"
    else:
        answer = api.call("POST", f"/repos/{repository}/issues/{number}/comments", {"body": text})
        action = "created"
    answer = answer if isinstance(answer, dict) else {}
    return CommentResult(action, int(answer.get("id", found["id"] if found else 0)), answer.get("html_url"))


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
        except (OSError, ValueError, AttributeError, TypeError):
            pass
    ref = env.get("GITHUB_REF", "")
    parts = ref.split("/")
    if len(parts) >= 3 and parts[:2] == ["refs", "pull"] and parts[2].isdigit():
        return int(parts[2])
    return None
