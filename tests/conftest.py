"""Shared test fixtures.

Reader tests use the real profiler outputs in ``../shared/profiles`` (read in
place, never copied into the project); they skip cleanly when that directory is
absent. Set PERFCHECK_SHARED to point elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perfcheck.cli import main

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PERFCHECK_SHARED", ROOT.parent / "shared"))
PROFILES = SHARED / "profiles"


def profile(relative: str) -> Path:
    """Path of a real profile under ../shared/profiles; skips the test when absent."""
    path = PROFILES / relative
    if not path.exists():
        pytest.skip(f"real profile data not available: {path}")
    return path


def one_line_error(result: "CliResult", path: str | Path | None = None, *fragments: str) -> str:
    """Assert the ground rule for bad input: exit 2, one line on stderr starting
    with "perfcheck: error: ", naming ``path``, no traceback; returns that line."""
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("perfcheck: error: "), lines[0]
    if path is not None:
        assert str(path) in lines[0], lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self) -> dict:
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def _terminal_width_of_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts as output to a pipe: no COLUMNS/LINES from the terminal that ran
    pytest (pytest-xdist's workers get the controller's COLUMNS, which would shorten kernel
    names in the tables the tests read). Tests of terminal widths set COLUMNS themselves."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


# What perfcheck reads from a CI runner or a batch job (CI=true makes baselines strict;
# the others name the run in the history and the Markdown links). The suite runs in CI
# (`.ci/run` under CI=true), so every test starts outside one; a test of CI behaviour
# sets the variables it needs with monkeypatch.
_RUNNER_VARIABLES = ("CI", "BUILDKITE", "JENKINS_URL", "TF_BUILD", "GITLAB_CI")
_RUNNER_PREFIXES = ("GITHUB_", "CI_", "SLURM_JOB_", "SLURM_ARRAY_", "SLURM_CLUSTER_")
# perfcheck's own settings (PERFCHECK_HISTORY, PERFCHECK_STRICT_BASELINE, ...) are cleared
# too; these few are the test suite's own knobs and stay.
_SUITE_OWN = ("PERFCHECK_FUZZ_", "PERFCHECK_SCREENSHOTS", "PERFCHECK_SHARED")


@pytest.fixture(autouse=True)
def _outside_a_ci_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts as on a developer's machine, whatever runs the suite (a user's
    PERFCHECK_* settings in the shell that runs pytest would change what tests see)."""
    for name in list(os.environ):
        if name in _RUNNER_VARIABLES or name.startswith(_RUNNER_PREFIXES) or (
            name.startswith("PERFCHECK_") and not name.startswith(_SUITE_OWN)
        ):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``perfcheck ARGS...`` in-process; returns exit code, stdout, stderr."""

    def run(*args: str | Path) -> CliResult:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def local_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's machine, not CI: the first run may record a missing baseline.
    The project's own CI sets CI=true, which makes baselines strict (a missing one is
    an error); tests that rely on first-run recording say so with this fixture."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PERFCHECK_STRICT_BASELINE", raising=False)


@pytest.fixture
def ci_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI job: CI=true, as GitHub Actions and GitLab CI set it."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("PERFCHECK_STRICT_BASELINE", raising=False)


# --- history stores on both backends -------------------------------------------------------------

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server for the session (tests/pgserver.py); skips with the reason
    when PostgreSQL or psycopg is not installed."""
    from tests import pgserver

    reason = pgserver.why_not()
    if reason:
        pytest.skip(reason)
    server = pgserver.start()
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS)
def store_at(request: pytest.FixtureRequest, tmp_path: Path):
    """``store_at(name="h")``: a fresh, empty history store location on the parametrised
    backend: ``tmp_path / "NAME.sqlite"``, or the URL of a new database on the session's
    PostgreSQL server (dropped after the test). The history tests run on both."""
    if request.param == "sqlite":
        yield lambda name="h": tmp_path / f"{name}.sqlite"
        return
    server = request.getfixturevalue("pg_server")
    made: list[str] = []

    def make(name: str = "h") -> str:
        database = f"t{os.getpid()}_{len(made)}_{abs(hash(request.node.nodeid)) % 10**8}_{name}".lower()[:60]
        made.append(database)
        return server.create_database(database)

    yield make
    for database in made:
        server.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
