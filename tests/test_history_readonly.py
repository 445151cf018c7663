"""Read-only history (pull requests naming the nightly store): the gate reads the store,
nothing is appended, and the summary says which store and how many runs it used. On
both backends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfcheck.history import open_store
from perfcheck.history import store as store_module
from tests.test_history_gate import EXAMPLE, _duration_check, _seed_history, history_at, stencil  # noqa: F401

pytestmark = pytest.mark.usefixtures("local_run")


def _runs(location: "Path | str") -> int:
    with open_store(location, create=False) as store:
        return len(store.runs())


@pytest.mark.parametrize("how", [("--history-read-only",), ("--history-mode", "read-only"), "env", "config"])
def test_read_only_judges_on_history_and_appends_nothing(stencil: Path, cli, history_at, how,  # noqa: ANN001, F811
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    code, check = _duration_check(cli)  # records the baseline file, appends run 1
    observed = check["observed"]
    _seed_history(history_at, observed / 1.2, 8)  # history says it used to be 20% faster
    args: tuple[str, ...] = ()
    if how == "env":
        monkeypatch.setenv("PERFCHECK_HISTORY_MODE", "read-only")
    elif how == "config":
        config = stencil / "perfcheck.toml"
        config.write_text(config.read_text().replace("[tool.perfcheck]\n", '[tool.perfcheck]\nhistory_mode = "read-only"\n', 1))
    else:
        args = how
    code, check = cli("check", "--json", "out.json", "--markdown", "summary.md", *args).code, None
    doc = json.loads(Path("out.json").read_text())
    check = next(c for c in doc["suites"]["after"]["checks"] if c["metric"] == "duration")
    assert code == 1 and check["outcome"] == "failed" and "vs history" in check["message"]  # the gate read it
    assert _runs(history_at) == 1 + 8  # and nothing was appended (the 9th, 20% slower, is set aside as a spike)
    summary = Path("summary.md").read_text()
    label = Path(history_at).name if isinstance(history_at, Path) else str(history_at)
    assert "(read-only: this run was not added): 1 check judged on up to 8 runs of this machine's history." in summary
    assert label in summary.split("History: ", 1)[1].splitlines()[0]
    cli("check", "--history-mode", "append")  # the command line wins over the environment and config
    assert _runs(history_at) == 1 + 8 + 1


def test_append_mode_says_so_too(stencil: Path, cli, history_at) -> None:  # noqa: ANN001, F811
    cli("check", "--markdown", "summary.md")
    line = next(l for l in Path("summary.md").read_text().splitlines() if l.startswith("History: "))
    assert line.endswith(": too little history to judge (at most 0 comparable runs), baseline files decided.")
    assert "read-only" not in line


def test_a_bad_history_mode_is_a_one_line_error(stencil: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001, F811
    from tests.conftest import one_line_error

    monkeypatch.setenv("PERFCHECK_HISTORY_MODE", "sometimes")
    one_line_error(cli("check"), None, "PERFCHECK_HISTORY_MODE", "\"append\" or \"read-only\"")


def test_pytest_perf_history_read_only(tmp_path: Path, store_at) -> None:  # noqa: ANN001
    target = str(store_at())
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.perfcheck]\ndevice = "mi100"\nbaseline_dir = "b"\n[tool.perfcheck.suites.after]\n'
        f'profiles = ["{EXAMPLE / "results-after.csv"}"]\n[tool.perfcheck.suites.after.expect]\n'
        '"*Clover*FBCGPU*" = ["duration <= baseline + 5%"]\n')
    base = [sys.executable, "-m", "pytest", "--perf", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
            "--perf-history", target, str(tmp_path)]
    for extra in ([], ["--perf-history-read-only"], ["--perf-history-mode", "read-only"]):
        done = subprocess.run(base + extra, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    assert _runs(target) == 1  # only the first session appended


# --- a store of an older schema, opened where it must not be written -----------------------


def _snapshot(location: "Path | str") -> object:
    """What a read must leave as it was: a store file's bytes, or a PostgreSQL store's
    schema version and rows."""
    if isinstance(location, Path):
        return location.read_bytes()
    import psycopg

    with psycopg.connect(location) as db:
        version = db.execute("SELECT version FROM perfcheck_schema").fetchall()
        tables = [r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                                           "ORDER BY tablename")]
        rows = {t: sorted(map(repr, db.execute(f'SELECT * FROM "{t}"').fetchall())) for t in tables}
    return version, rows


def _upgrade_refused(result, location) -> None:  # noqa: ANN001
    from tests.conftest import one_line_error

    from perfcheck.history.store import SCHEMA_VERSION

    line = one_line_error(result, None, f"history schema version 2 needs an upgrade to {SCHEMA_VERSION}",
                          "run a command that writes once")
    assert str(location).split("@")[-1] in line or str(location) in line, line


@pytest.mark.parametrize("how", [("--history-read-only",), ("--history-mode", "read-only"), "env"])
def test_check_read_only_on_a_version_2_store_is_one_line_and_leaves_it(stencil: Path, cli, history_at, how,  # noqa: ANN001, F811
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate may not migrate a store it was told not to write: exit 2, one line that
    says to run a writing command once, the store as it was (bytes, or rows)."""
    from tests.test_history_store import _version_2_store

    assert cli("check", "--history", str(stencil / "elsewhere.sqlite")).code == 0  # the baseline file, recorded
    _version_2_store(history_at)
    before = _snapshot(history_at)
    args: tuple[str, ...] = how if isinstance(how, tuple) else ()
    if how == "env":
        monkeypatch.setenv("PERFCHECK_HISTORY_MODE", "read-only")
    _upgrade_refused(cli("check", *args), history_at)
    assert _snapshot(history_at) == before
    monkeypatch.delenv("PERFCHECK_HISTORY_MODE", raising=False)
    assert cli("check").code in (0, 1)  # a writing command migrates it
    with open_store(history_at, create=False) as store:
        assert store.version == store_module.SCHEMA_VERSION


@pytest.mark.parametrize("command", [("list",), ("detect",), ("report", "--markdown", "digest.md"),
                                     ("export", "--openmetrics", "om.txt")])
def test_reading_commands_in_read_only_mode_leave_a_version_2_store(cli, store_at, tmp_path: Path, command,  # noqa: ANN001
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """PERFCHECK_HISTORY_MODE=read-only: history list, detect, report and export read,
    and a store of an older schema is refused (one line), not migrated."""
    from tests.test_history_store import _version_2_store

    monkeypatch.chdir(tmp_path)
    location = store_at()
    _version_2_store(location)
    before = _snapshot(location)
    monkeypatch.setenv("PERFCHECK_HISTORY_MODE", "read-only")
    _upgrade_refused(cli("history", *command[:1], "--history", str(location), *command[1:]), location)
    assert _snapshot(location) == before
    monkeypatch.delenv("PERFCHECK_HISTORY_MODE")
    assert cli("history", "list", "--history", str(location)).code == 0  # where it may write, it migrates
    assert _snapshot(location) != before


def test_a_version_2_store_on_a_read_only_file_system(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """No setting, but the file cannot be written: the same one line, the file as it was."""
    from tests.test_hardening_history import _read_only
    from tests.test_history_store import _version_2_store

    folder = tmp_path / "archive"
    folder.mkdir()
    store = folder / "h.sqlite"
    _version_2_store(store)
    before = store.read_bytes()
    with _read_only(folder):
        _upgrade_refused(cli("history", "list", "--history", store), store)
        _upgrade_refused(cli("history", "detect", "--history", store), store)
    assert store.read_bytes() == before and sorted(p.name for p in folder.iterdir()) == ["h.sqlite"]
