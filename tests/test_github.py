"""GitHub: annotations on the expectation's line, step outputs, the sticky pull-request
comment (against a loopback stub of the REST API that records the requests), and
the composite action's own shell steps run as the runner would run them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from perfcheck.model import ERROR, FAILED, PASSED, Check
from perfcheck.report.github import annotation, annotations, marker_line, post_comment, pull_request_number
from tests.conftest import one_line_error

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil" / "perfcheck.toml"
pytest_plugins = ["pytester"]


def _line_of(path: Path, text: str, after: str) -> int:
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    return next(i for i in range(start, len(lines)) if f'"{text}"' in lines[i]) + 1


FAILED_CHECK = Check(
    "before", "OECloverFBCGPU", "*Clover*FBCGPU*", "hbm_bw >= 80% of peak", "hbm_bw", ">=", 4.8e11, 8.6e11, "B/s",
    FAILED, "expectation", "hbm_bw 480 GB/s; expected >= 860.4 GB/s", source_file="ex, dir/perfcheck.toml", source_line=25,
)


# --- annotations ---------------------------------------------------------------------------


def test_annotation_points_at_the_expectation_and_escapes() -> None:
    line = annotation(FAILED_CHECK)
    assert line.startswith("::error file=ex%2C dir/perfcheck.toml,line=25,title=perfcheck before%3A hbm_bw >= 80%25 of peak failed::")
    assert "OECloverFBCGPU: hbm_bw: observed 480 GB/s, expected >= 860 GB/s" in line
    multi = Check("s", "k\nx", "k*", "e", "m", ">=", None, None, "", ERROR, "expectation", "no\r\ncounters 100%")
    text = annotation(multi)
    assert "\n" not in text and "\r" not in text and text.endswith("::no%0D%0Acounters 100%25")
    assert "file=" not in text  # no source: GitHub puts it on the run


def test_at_most_ten_error_annotations() -> None:
    lines = annotations([FAILED_CHECK] * 13 + [Check("s", "k", "k", "e", "m", ">=", 1.0, 0.0, "", PASSED, "expectation", "ok")])
    assert len(lines) == 11 and lines[-1].startswith("::warning") and "3 more" in lines[-1]


def test_check_in_github_actions_prints_annotations_and_outputs(cli, tmp_path, monkeypatch) -> None:
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary"))
    monkeypatch.chdir(ROOT)
    result = cli("check", "--config", STENCIL, "--suite", "before", "--baseline-dir", tmp_path / "b",
                 "--json", tmp_path / "r.json")
    assert result.code == 1
    errors = [line for line in result.out.splitlines() if line.startswith("::error ")]
    assert errors, result.out
    wanted = _line_of(STENCIL, "hbm_bw >= 80% of peak", "suites.before.expect")
    hbm = next(line for line in errors if "hbm_bw >= 80%25 of peak" in line)
    assert hbm.startswith(f"::error file=examples/stencil/perfcheck.toml,line={wanted},")
    occ = next(line for line in errors if "occupancy >= 40%25" in line)
    assert f"line={_line_of(STENCIL, 'occupancy >= 40%', 'suites.before.expect')}," in occ
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert outputs["failed"] != "0" and outputs["ok"] == "false"
    assert outputs["json-report"].endswith("r.json")
    assert int(outputs["total"]) == sum(int(outputs[k]) for k in ("passed", "failed", "errors", "recorded", "xfailed",
                                                                    "xpassed"))


def test_no_workflow_commands_outside_github_actions(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    result = cli("check", "--config", STENCIL, "--suite", "before", "--baseline-dir", tmp_path)
    assert "::error" not in result.out


# --- the sticky comment against a loopback stub --------------------------------------------


class _Stub:
    """A loopback stand-in for the GitHub REST API: records every request and keeps
    the comments of one pull request."""

    def __init__(self, status: int = 200, filler: int = 0, *, login: str | None = "perf-bot") -> None:
        self.requests: list[tuple[str, str, dict, dict | None]] = []
        # other people's comments first (pagination: more than one page of 100)
        self.comments: list[dict] = [{"id": 1000 + i, "body": f"looks good {i}", "user": {"login": "reviewer"}}
                                     for i in range(filler)]
        self.status = status
        # the token's user (GET /user); None: an installation token (GITHUB_TOKEN), which
        # GET /user refuses and whose comments are the Actions bot's
        self.login = login
        self.answers: dict[tuple[str, str], tuple[int, object, dict]] = {}  # (method, path) -> canned answer
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, code: int, doc: object, headers: dict | None = None) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _canned(self) -> bool:
                from urllib.parse import urlsplit

                canned = stub.answers.get((self.command, urlsplit(self.path).path))
                if canned is None:
                    return False
                self._answer(*canned)
                return True

            def _record(self) -> dict | None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                stub.requests.append((self.command, self.path, dict(self.headers), body))
                return body

            def do_GET(self) -> None:  # noqa: N802
                self._record()
                if self._canned():
                    return None
                if self.path == "/user":
                    if stub.login is None:
                        return self._answer(403, {"message": "Resource not accessible by integration"})
                    return self._answer(200, {"login": stub.login, "id": 9})
                if stub.status != 200:
                    return self._answer(stub.status, {"message": "Resource not accessible by integration"})
                from urllib.parse import parse_qs, urlsplit

                page = int(parse_qs(urlsplit(self.path).query).get("page", ["1"])[0])
                self._answer(200, stub.comments[(page - 1) * 100: page * 100])

            def do_POST(self) -> None:  # noqa: N802
                body = self._record()
                if self._canned():
                    return
                comment = {"id": 1, "body": body["body"], "html_url": "http://stub/c/1",
                           "user": {"login": stub.login or "github-actions[bot]"}}
                stub.comments.append(comment)
                self._answer(201, comment)

            def do_PATCH(self) -> None:  # noqa: N802
                body = self._record()
                if self._canned():
                    return
                cid = int(self.path.rsplit("/", 1)[1])
                comment = next(c for c in stub.comments if c["id"] == cid)
                comment["body"] = body["body"]
                self._answer(200, {**comment, "html_url": f"http://stub/c/{cid}"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "_Stub":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_comment_is_created_then_updated_never_duplicated() -> None:
    with _Stub(filler=150) as stub:
        first = post_comment("### perfcheck: 2 failed", repository="o/r", number=7, token="t0k", api_url=stub.url)
        second = post_comment("perfcheck: 12 checks passed", repository="o/r", number=7, token="t0k", api_url=stub.url)
    assert (first.action, second.action) == ("created", "updated")
    assert first.comment_id == second.comment_id == 1
    ours = [c for c in stub.comments if marker_line() in c["body"]]
    assert len(ours) == 1 and ours[0]["body"].endswith("perfcheck: 12 checks passed")
    methods = [(m, p.split("?")[0]) for m, p, _, _ in stub.requests]
    assert methods == [
        ("GET", "/user"), ("GET", "/repos/o/r/issues/7/comments"), ("GET", "/repos/o/r/issues/7/comments"),
        ("POST", "/repos/o/r/issues/7/comments"),
        ("GET", "/user"), ("GET", "/repos/o/r/issues/7/comments"), ("GET", "/repos/o/r/issues/7/comments"),
        ("PATCH", "/repos/o/r/issues/comments/1"),
    ]
    headers = stub.requests[-1][2]
    assert headers["Authorization"] == "Bearer t0k"
    assert headers["Accept"] == "application/vnd.github+json"


def test_comment_body_is_capped_at_githubs_limit() -> None:
    with _Stub() as stub:
        post_comment("x" * 100_000, repository="o/r", number=1, token="t", api_url=stub.url)
    body = stub.requests[-1][3]["body"]
    assert len(body) <= 65536 and "truncated" in body and body.startswith(marker_line())


def test_cli_comment_uses_the_environment(tmp_path, monkeypatch, capsys) -> None:
    from perfcheck.cli import main

    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 42}}))
    summary = tmp_path / "summary.md"
    summary.write_text("perfcheck: 8 checks passed on AMD Instinct MI100\n")
    with _Stub() as stub:
        for name, value in {"GITHUB_API_URL": stub.url, "GITHUB_TOKEN": "abc", "GITHUB_REPOSITORY": "me/proj",
                            "GITHUB_EVENT_PATH": str(event)}.items():
            monkeypatch.setenv(name, value)
        assert main(["github", "comment", "--markdown", str(summary)]) == 0
        assert main(["github", "comment", "--markdown", str(summary)]) == 0
    out = capsys.readouterr().out
    assert "created comment 1 on me/proj#42" in out and "updated comment 1 on me/proj#42" in out
    assert [r[0] for r in stub.requests] == ["GET", "GET", "POST", "GET", "GET", "PATCH"]


def test_cli_comment_refused_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    from perfcheck.cli import main

    summary = tmp_path / "summary.md"
    summary.write_text("x\n")
    with _Stub(status=403) as stub:
        monkeypatch.setenv("GITHUB_API_URL", stub.url)
        monkeypatch.setenv("GITHUB_TOKEN", "abc")
        monkeypatch.setenv("GITHUB_REPOSITORY", "me/proj")
        assert main(["github", "comment", "--markdown", str(summary), "--pr", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HTTP 403" in err and "fork" in err


def test_not_a_pull_request_posts_nothing(tmp_path, monkeypatch, capsys) -> None:
    from perfcheck.cli import main

    for name in ("GITHUB_EVENT_PATH", "GITHUB_REF"):
        monkeypatch.delenv(name, raising=False)
    assert main(["github", "comment", "--markdown", str(tmp_path / "none.md")]) == 0
    assert "not a pull request" in capsys.readouterr().err


def test_pull_request_number_sources(tmp_path) -> None:
    event = tmp_path / "e.json"
    event.write_text('{"pull_request": {"number": 5}}')
    assert pull_request_number({"GITHUB_EVENT_PATH": str(event)}) == 5
    assert pull_request_number({"GITHUB_REF": "refs/pull/17/merge"}) == 17
    assert pull_request_number({"GITHUB_REF": "refs/heads/main"}) is None


# --- the API cannot take the token or the comment anywhere (issue 16 section 3) -------------


def test_a_redirect_to_another_host_is_not_followed_and_gets_no_token() -> None:
    from perfcheck.report.github import GitHubError

    with _Stub() as stub, _Stub() as elsewhere:
        stub.answers[("GET", "/repos/o/r/issues/7/comments")] = (
            302, {}, {"Location": f"{elsewhere.url}/repos/o/r/issues/7/comments?page=1"})
        with pytest.raises(GitHubError, match="redirected to another host .*not followed: the token is only sent"):
            post_comment("x", repository="o/r", number=7, token="s3cret", api_url=stub.url)
    assert elsewhere.requests == []  # nothing at all reached the other host
    assert [m for m, *_ in stub.requests] == ["GET", "GET"]


def test_a_redirect_on_the_api_host_is_followed_for_reading() -> None:
    with _Stub() as stub:  # a renamed repository: GitHub answers 301 to the new name
        stub.answers[("GET", "/repos/old/r/issues/7/comments")] = (
            301, {}, {"Location": "/repos/new/r/issues/7/comments?per_page=100&page=1"})
        done = post_comment("x", repository="old/r", number=7, token="t", api_url=stub.url)
    assert done.action == "created"
    followed = [r for r in stub.requests if r[1].startswith("/repos/new/")]
    assert len(followed) == 1 and followed[0][2]["Authorization"] == "Bearer t"


def test_a_redirected_post_is_an_error_not_a_get(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    summary = tmp_path / "summary.md"
    summary.write_text("x\n")
    with _Stub() as stub:
        stub.answers[("POST", "/repos/me/proj/issues/3/comments")] = (302, {}, {"Location": "/somewhere/else"})
        for name, value in {"GITHUB_API_URL": stub.url, "GITHUB_TOKEN": "abc", "GITHUB_REPOSITORY": "me/proj"}.items():
            monkeypatch.setenv(name, value)
        result = cli("github", "comment", "--markdown", summary, "--pr", "3")
    line = one_line_error(result, None, "answered with a redirect (HTTP 302), not followed")
    assert "created comment" not in result.out and "GitHub API POST" in line
    assert [p for _, p, *_ in stub.requests if p.startswith("/somewhere")] == []


def test_one_deadline_bounds_the_whole_exchange_even_when_a_server_drips() -> None:
    import socket
    import time

    from perfcheck.report.github import GitHubError

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    stop = threading.Event()

    def drip() -> None:  # headers, then a byte every 0.2 s of a 100,000-byte body
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        try:
            while not stop.is_set():
                conn.sendall(b" ")
                time.sleep(0.2)
        except OSError:
            pass
        finally:
            conn.close()

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    start = time.monotonic()
    try:
        with pytest.raises(GitHubError, match="did not finish within 1.5 s"):
            post_comment("x", repository="o/r", number=1, token="t",
                         api_url=f"http://127.0.0.1:{server.getsockname()[1]}", timeout=1.5)
    finally:
        stop.set()
        server.close()
    assert time.monotonic() - start < 10  # a busy 2-core box: well under the drip's 5.5 hours


def test_pages_searched_are_capped() -> None:
    from perfcheck.report import github
    from perfcheck.report.github import GitHubError

    with _Stub(filler=100 * (github.MAX_PAGES + 3)) as stub:
        with pytest.raises(GitHubError, match=f"more than {github.MAX_PAGES * 100} comments"):
            post_comment("x", repository="o/r", number=1, token="t", api_url=stub.url)
    assert len(stub.requests) == 1 + github.MAX_PAGES and not [r for r in stub.requests if r[0] == "POST"]


@pytest.mark.parametrize("method, path, answer, what", [
    ("POST", "/repos/me/proj/issues/3/comments", {"html_url": "x"}, "has no comment id"),
    ("POST", "/repos/me/proj/issues/3/comments", {"id": "12"}, "has no comment id"),
    ("POST", "/repos/me/proj/issues/3/comments", [1, 2], "has no comment id"),
    ("GET", "/repos/me/proj/issues/3/comments", {"message": "moved"}, "not a list of comments"),
])
def test_unexpected_json_is_a_one_line_error(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str,  # noqa: ANN001
                                             path: str, answer: object, what: str) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("x\n")
    with _Stub() as stub:
        stub.answers[(method, path)] = (201 if method == "POST" else 200, answer, {})
        for name, value in {"GITHUB_API_URL": stub.url, "GITHUB_TOKEN": "abc", "GITHUB_REPOSITORY": "me/proj"}.items():
            monkeypatch.setenv(name, value)
        one_line_error(cli("github", "comment", "--markdown", summary, "--pr", "3"), None, what)


def test_a_marker_planted_by_someone_else_neither_blocks_nor_hijacks() -> None:
    planted = {"id": 5, "body": f"{marker_line()}\nplanted", "user": {"login": "mallory"}}
    quoted = {"id": 6, "body": f"> {marker_line()}\nquoting the bot", "user": {"login": "perf-bot"}}
    with _Stub() as stub:
        stub.comments += [planted, quoted]
        first = post_comment("mine", repository="o/r", number=7, token="t", api_url=stub.url)
        second = post_comment("mine again", repository="o/r", number=7, token="t", api_url=stub.url)
    assert (first.action, first.comment_id, second.action, second.comment_id) == ("created", 1, "updated", 1)
    assert planted["body"].endswith("planted") and quoted["body"].endswith("quoting the bot")
    assert not [p for m, p, *_ in stub.requests if m == "PATCH" and not p.endswith("/1")]


def test_with_the_actions_token_the_bots_comment_is_the_sticky_one() -> None:
    bot = {"id": 77, "body": f"{marker_line()}\nold", "user": {"login": "github-actions[bot]"}}
    planted = {"id": 5, "body": f"{marker_line()}\nplanted", "user": {"login": "mallory"}}
    with _Stub(login=None) as stub:  # GITHUB_TOKEN: GET /user is refused
        stub.comments += [planted, bot]
        done = post_comment("new", repository="o/r", number=7, token="t", api_url=stub.url)
    assert (done.action, done.comment_id) == ("updated", 77) and bot["body"].endswith("new")
    assert planted["body"].endswith("planted")


# --- the composite action's steps, run as the runner runs them -----------------------------


def _action_steps() -> dict[str, dict]:
    yaml = pytest.importorskip("yaml")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    return {step.get("id") or step["name"]: step for step in action["runs"]["steps"]}


def _run_step(step: dict, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    # GitHub runs a bash step as `bash --noprofile --norc -eo pipefail {0}`
    script = cwd / "step.sh"
    script.write_text(step["run"])
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is needed")
def test_action_check_step_and_verdict(tmp_path: Path) -> None:
    steps = _action_steps()
    inputs = _action_inputs()
    work = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "stencil", work / "examples" / "stencil")
    output, summary = tmp_path / "output", tmp_path / "summary"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary),
        "IN_CONFIG": "examples/stencil/perfcheck.toml", "IN_SUITES": "before", "IN_REPORTS": inputs["reports"],
        "IN_DIR": "perf", "IN_FLAVOUR": "xunit", "IN_ARGS": "", "IN_UPDATE": "false",
        "IN_HISTORY": inputs["history"], "IN_HISTORY_MODE": inputs["history-mode"], "IN_EVENT": "push",
    }
    done = _run_step(steps["check"], env, work)
    assert done.returncode == 0, done.stderr  # the step itself passes; the verdict decides
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert outputs["exit-code"] == "1" and int(outputs["failed"]) > 0
    assert "::error file=examples/stencil/perfcheck.toml,line=" in done.stdout
    for name in ("summary.md", "junit.xml", "results.json"):
        assert (work / "perf" / name).is_file(), name
    assert (work / "perf" / "roofline").is_dir()
    assert "perfcheck" in summary.read_text()
    verdict = steps["verdict"]
    for fail_on, code in (("failure", 1), ("error", 0), ("never", 0)):
        got = _run_step(verdict, {**env, "CODE": outputs["exit-code"], "ERRORS": outputs["errors"], "FAIL_ON": fail_on}, work)
        assert got.returncode == code, (fail_on, got.stdout, got.stderr)
    bad = _run_step(steps["check"], {**env, "IN_REPORTS": "junit,html"}, work)
    assert bad.returncode == 2 and "unknown report 'html'" in bad.stdout


def _action_inputs() -> dict[str, str]:
    yaml = pytest.importorskip("yaml")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    return {k: str(v.get("default", "")) for k, v in action["inputs"].items()}


def test_action_declares_the_inputs_and_outputs_it_uses() -> None:
    yaml = pytest.importorskip("yaml")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    text = (ROOT / "action.yml").read_text()
    for name in action["inputs"]:
        assert f"inputs.{name}" in text, name
    for name in ("total", "passed", "failed", "errors", "recorded", "xfailed", "xpassed", "exit-code", "markdown",
                 "junit", "json"):
        assert name in action["outputs"]
    # every report the check step can be asked for has its path as an output (bencher and
    # github-benchmark had none), read from the step output perfcheck writes for it
    reports = re.findall(r"^\s*([a-z-]+)\) ", _action_steps()["check"]["run"], flags=re.M)
    assert "junit" in reports and "github-benchmark" in reports
    for kind in reports:
        assert action["outputs"][kind]["value"] == f"${{{{ steps.check.outputs.{kind}-report }}}}", kind
    install = _action_steps()["install perfcheck (from the action's checkout)"]["run"]
    assert '"$GITHUB_ACTION_PATH"' in install and "pip install" in install


def test_absolute_source_paths_are_made_relative_to_the_workspace(tmp_path, monkeypatch) -> None:
    from dataclasses import replace

    monkeypatch.chdir(tmp_path)
    check = replace(FAILED_CHECK, source_file=str(tmp_path / "perf" / "perfcheck.toml"), source_line=3)
    assert annotation(check).startswith("::error file=perf/perfcheck.toml,line=3,")
    outside = replace(FAILED_CHECK, source_file="/elsewhere/perfcheck.toml", source_line=3)
    assert annotation(outside).startswith("::error file=/elsewhere/perfcheck.toml,line=3,")


def test_pytest_perf_in_github_actions_prints_annotations(pytester, monkeypatch) -> None:
    """A plain `run: pytest --perf` step gets the annotations too, on the config line."""
    config = STENCIL.read_text().replace('"results-before.csv"', f'"{STENCIL.parent / "results-before.csv"}"')
    config = config.replace('"results-after.csv"', f'"{STENCIL.parent / "results-after.csv"}"')
    config = config.replace('"machines/mulan-mi100.toml"', f'"{STENCIL.parent / "machines" / "mulan-mi100.toml"}"')
    pytester.makefile(".toml", perfcheck=config)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    result = pytester.runpytest("--perf", "--perf-baseline-dir", str(pytester.path / "b"), "-p", "no:randomly")
    errors = [line for line in result.outlines if line.startswith("::error ")]
    line = _line_of(STENCIL, "occupancy >= 40%", "suites.before.expect")
    assert any(e.startswith(f"::error file=perfcheck.toml,line={line},") for e in errors), errors
