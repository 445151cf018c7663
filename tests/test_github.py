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

    def __init__(self, status: int = 200, filler: int = 0) -> None:
        self.requests: list[tuple[str, str, dict, dict | None]] = []
        # other people's comments first (pagination: more than one page of 100)
        self.comments: list[dict] = [{"id": 1000 + i, "body": f"looks good {i}"} for i in range(filler)]
        self.status = status
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, code: int, doc: object) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self) -> dict | None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                stub.requests.append((self.command, self.path, dict(self.headers), body))
                return body

            def do_GET(self) -> None:  # noqa: N802
                self._record()
                if stub.status != 200:
                    return self._answer(stub.status, {"message": "Resource not accessible by integration"})
                from urllib.parse import parse_qs, urlsplit

                page = int(parse_qs(urlsplit(self.path).query).get("page", ["1"])[0])
                self._answer(200, stub.comments[(page - 1) * 100: page * 100])

            def do_POST(self) -> None:  # noqa: N802
                body = self._record()
                comment = {"id": 1, "body": body["body"], "html_url": "http://stub/c/1"}
                stub.comments.append(comment)
                self._answer(201, comment)

            def do_PATCH(self) -> None:  # noqa: N802
                body = self._record()
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
        ("GET", "/repos/o/r/issues/7/comments"), ("GET", "/repos/o/r/issues/7/comments"),
        ("POST", "/repos/o/r/issues/7/comments"),
        ("GET", "/repos/o/r/issues/7/comments"), ("GET", "/repos/o/r/issues/7/comments"),
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
    assert [r[0] for r in stub.requests] == ["GET", "POST", "GET", "PATCH"]


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
