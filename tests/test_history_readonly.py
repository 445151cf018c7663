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
