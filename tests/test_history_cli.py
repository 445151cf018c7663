"""perfcheck history add|list|prune|detect, and pytest --perf-history."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfcheck.history import Result, RunRecord, open_store
from tests.conftest import one_line_error

# These tests are about history, not strict baselines: they record on a first run
# as a developer's machine does, also when the suite itself runs in CI (CI=true).
pytestmark = pytest.mark.usefixtures("local_run")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"
DAY = 86400.0
T0 = 1_767_225_600.0


@pytest.fixture(autouse=True)
def _no_store_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PERFCHECK_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)


def _nightly(path: Path, values: np.ndarray, *, kernel: str = "stencil_kernel") -> Path:
    with open_store(path) as store:
        for i, value in enumerate(values):
            store.add(RunRecord(f"night-{i:02d}", T0 + i * DAY, commit=f"{i:02d}" + "f" * 38, branch="main"),
                      [Result("mi250x_gfx90a_rocprofv3-1.0.0", "nightly", kernel, "duration", float(value), "s")])
    return path


def _noise(n: int, seed: int = 0) -> np.ndarray:
    return 2e-3 * np.exp(np.random.default_rng(seed).normal(0.0, 0.01, n))


def test_detect_fails_on_a_recent_regression(cli, store_at) -> None:  # noqa: ANN001
    values = _noise(30)
    values[27:] *= 1.08
    store = _nightly(store_at(), values)
    result = cli("history", "detect", "--history", store)
    assert result.code == 1, result.out
    assert "+7.6% regression (new, open)" in result.out and "27ffff" in result.out
    assert "1 open regression (1 new in the last 3 runs)" in result.out
    doc = cli("history", "detect", "--history", store, "--json").json()
    assert doc["recent_regressions"] == 1 and doc["open_regressions"] == 1
    (point,) = doc["findings"]
    assert (point["run_id"], point["direction"], point["recent"]) == ("night-27", "regression", True)
    assert (point["status"], point["new"]) == ("open", True)
    assert point["time_iso"] == "2026-01-28T00:00:00+00:00" and point["p"] < 0.001
    markdown = cli("history", "detect", "--history", store, "--markdown").out
    assert markdown.startswith("**1 open regression** (1 new)") and r"| nightly on mi250x\_gfx90a\_rocprofv3-1.0.0 | `stencil_kernel` | duration \+7.6% regression \(new, open\) |" in markdown
    # it started 3 runs ago: no longer new, still open (exit 1) unless only new ones fail
    older = cli("history", "detect", "--history", store, "--last", "2")
    assert older.code == 1 and "(open)" in older.out and "new" not in older.out.split("finding")[0]
    assert cli("history", "detect", "--history", store, "--last", "2", "--fail-on", "new").code == 0


def test_a_spike_last_night_is_not_a_regression(cli, tmp_path: Path) -> None:  # noqa: ANN001
    values = _noise(30, 1)
    values[-1] *= 1.9
    store = _nightly(tmp_path / "h.sqlite", values)
    result = cli("history", "detect", "--history", store)
    assert result.code == 0 and "no change points" in result.out
    values[-3] *= 1.9  # an older spike: still nothing
    store = _nightly(tmp_path / "h2.sqlite", values)
    assert cli("history", "detect", "--history", store).code == 0


def test_add_is_idempotent_and_list_shows_runs(cli, tmp_path: Path, store_at) -> None:  # noqa: ANN001
    fleet = str(store_at("fleet"))
    config = ["--config", str(EXAMPLE / "perfcheck.toml"), "--suite", "after", "--baseline-dir", str(tmp_path / "b")]
    assert cli("check", *config, "--json", "r1.json").code == 0
    assert cli("check", *config, "--json", "r2.json").code == 0
    result = cli("history", "add", "r1.json", "r2.json", "--history", fleet)
    assert result.code == 0 and result.out.count("added run") == 2
    again = cli("history", "add", "r1.json", "--history", fleet)
    assert "already stored" in again.out
    listing = cli("history", "list", "--history", fleet)
    assert listing.code == 0 and len(listing.out.strip().splitlines()) == 3 and "after" in listing.out
    runs = cli("history", "list", "--history", fleet, "--json").json()["runs"]
    assert [r["run_id"] for r in runs] == [json.loads(Path(f).read_text())["run"]["id"] for f in ("r1.json", "r2.json")]
    assert cli("history", "list", "--history", fleet, "--limit", "1", "--json").json()["runs"] == runs[1:]


def test_check_appends_the_rows_history_add_makes_of_its_results_file(cli, tmp_path: Path, store_at) -> None:  # noqa: ANN001
    # check --history stores its run from the results document it writes as --json (made
    # once for both): the same rows, numbers and budgets as importing that file later
    import pandas as pd

    appended, imported = str(store_at("appended")), str(store_at("imported"))
    config = ["--config", str(EXAMPLE / "perfcheck.toml"), "--baseline-dir", str(tmp_path / "b")]
    assert cli("check", *config, "--json", "r0.json").code in (0, 1)  # records the baselines: then checks compare
    assert cli("check", *config, "--json", "r1.json", "--history", appended).code in (0, 1)
    assert cli("history", "add", "r1.json", "--history", imported).code == 0
    with open_store(appended, create=False) as a, open_store(imported, create=False) as b:
        left, right = a.series(), b.series()
        assert a.runs()["run_id"].tolist() == b.runs()["run_id"].tolist() == [json.loads(Path("r1.json").read_text())["run"]["id"]]
    assert len(left) > 100 and left["suite"].nunique() > 1 and left["high"].notna().any()
    pd.testing.assert_frame_equal(left, right)


def test_history_add_imports_neither_numpy_nor_pandas(cli, tmp_path: Path) -> None:  # noqa: ANN001
    # storing a results file is reading JSON and writing SQLite: importing numpy (through
    # the change-point modules) was a third of history add's time
    config = ["--config", str(EXAMPLE / "perfcheck.toml"), "--suite", "after", "--baseline-dir", str(tmp_path / "b")]
    assert cli("check", *config, "--json", "r1.json").code == 0
    probe = ("import sys; from perfcheck.cli import main; code = main(['history', 'add', 'r1.json', '--history', "
             "'h.sqlite']); print(code, sorted(m for m in ('numpy', 'pandas', 'matplotlib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert done.stdout.splitlines()[-1] == "0 []", done.stdout + done.stderr


def test_prune(cli, store_at) -> None:  # noqa: ANN001
    store = _nightly(store_at(), _noise(10))
    result = cli("history", "prune", "--history", store, "--keep-days", "0")
    assert result.code == 0 and "removed 10 runs" in result.out
    assert "no runs stored" in cli("history", "list", "--history", store).out


def test_since_filters(cli, store_at) -> None:  # noqa: ANN001
    values = _noise(30)
    values[10:] *= 1.08
    store = _nightly(store_at(), values)
    assert "night-10" in cli("history", "detect", "--history", store).out
    assert "no change points" in cli("history", "detect", "--history", store, "--since", "2026-01-15").out
    one_line_error(cli("history", "detect", "--history", store, "--since", "yesterday"), None, "--since")


def test_store_from_the_environment_and_the_config(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    store = _nightly(tmp_path / "env.sqlite", _noise(5))
    monkeypatch.setenv("PERFCHECK_HISTORY", str(store))
    assert "night-04" in cli("history", "list").out
    monkeypatch.delenv("PERFCHECK_HISTORY")
    (tmp_path / "perfcheck.toml").write_text('history = "env.sqlite"\n')
    assert "night-04" in cli("history", "list").out


@pytest.mark.parametrize("args", [
    ("history", "list"),
    ("history", "detect", "--history", "absent.sqlite"),
    ("history", "add", "missing.json", "--history", "h.sqlite"),
    ("history", "detect", "--history", "notes.txt"),
])
def test_errors_are_one_line(cli, tmp_path: Path, args: tuple[str, ...]) -> None:  # noqa: ANN001
    (tmp_path / "notes.txt").write_text("not a database\n" * 100)
    result = cli(*args)
    one_line_error(result)
    assert not (tmp_path / "h.sqlite").exists()  # nothing is written when an input is bad


def test_pytest_perf_history_appends_the_session(tmp_path: Path, store_at) -> None:  # noqa: ANN001
    target = str(store_at())
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.perfcheck]\ndevice = "mi100"\nbaseline_dir = "b"\n[tool.perfcheck.suites.after]\n'
        f'profiles = ["{EXAMPLE / "results-after.csv"}"]\n[tool.perfcheck.suites.after.expect]\n'
        '"*Clover*FBCGPU*" = ["duration <= baseline + 5%"]\n')
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "pytest", "--perf", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                               "--perf-history", target, str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    with open_store(target, create=False) as store:
        assert len(store.runs()) == 2
        assert set(store.series(metric="duration")["suite"]) == {"after"}


def test_detect_relative_reports_a_machine_wide_regression_once(cli, tmp_path: Path) -> None:  # noqa: ANN001
    rng = np.random.default_rng(3)
    runs, kernels = 30, 6
    x = 2e-3 * np.exp(rng.normal(0.0, 0.02, runs)[None, :] + rng.normal(0.0, 0.002, (kernels, runs)))
    x[:, 27:] *= 1.08  # every kernel at once: a driver change
    path = tmp_path / "h.sqlite"
    with open_store(path) as store:
        for i in range(runs):
            store.add(RunRecord(f"night-{i:02d}", T0 + i * DAY, commit=f"{i:02d}" + "f" * 38, branch="main"),
                      [Result("m", "nightly", f"k{k}", "duration", float(x[k, i]), "s") for k in range(kernels)])
    doc = cli("history", "detect", "--history", path, "--relative", "--json").json()
    assert [(p["kernel"], p["run_id"], p["recent"]) for p in doc["findings"]] == [("(run-wide)", "night-27", True)]
    assert cli("history", "detect", "--history", path, "--relative").code == 1
    plain = cli("history", "detect", "--history", path, "--json").json()
    assert plain["recent_regressions"] == kernels  # without --relative: once per kernel


@pytest.mark.parametrize("enabled", [True, False])
def test_check_history_reads_and_appends_with_the_collector_paused_then_as_it_was(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool) -> None:  # noqa: ANN001
    # the collector's full passes walked the whole run for the gate's and the append's
    # row tuples (0.1 s at 2,000 kernels x 16 metrics); a caller's own setting is kept
    import gc

    from perfcheck.history import gate
    from perfcheck.history.store import Store

    seen: list[tuple[str, bool]] = []
    references, add = gate.references, Store.add

    def reading(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(("gate", gc.isenabled()))
        return references(*args, **kwargs)

    def adding(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(("add", gc.isenabled()))
        return add(self, *args, **kwargs)

    monkeypatch.setattr(gate, "references", reading)
    monkeypatch.setattr(Store, "add", adding)
    config = ["--config", str(EXAMPLE / "perfcheck.toml"), "--baseline-dir", str(tmp_path / "b")]
    assert cli("check", *config).code in (0, 1)  # records the baselines: then checks compare
    (gc.enable if enabled else gc.disable)()
    try:
        assert cli("check", *config, "--json", "r.json", "--history", tmp_path / "h.sqlite").code in (0, 1)
        after = gc.isenabled()
    finally:
        gc.enable()
    assert seen and {name for name, _ in seen} == {"gate", "add"} and not any(on for _, on in seen), seen
    assert after is enabled
