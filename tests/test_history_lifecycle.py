"""The lifecycle of a regression: open until accepted (the accepted file) or
recovered; `perfcheck history accept`; history filters that select nothing."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from perfcheck.history import Result, RunRecord, accepted, detect, lifecycle, open_store  # noqa: F401
from tests.conftest import one_line_error

DAY = 86400.0
T0 = 1_767_225_600.0
MACHINE = "mi250x_gfx90a_rocprofv3-1.0.0"


@pytest.fixture(autouse=True)
def _here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PERFCHECK_HISTORY", raising=False)
    monkeypatch.delenv("PERFCHECK_ACCEPTED", raising=False)
    monkeypatch.chdir(tmp_path)
    # who accepts: no git identity here, so $USER
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("USER", "night-shift")


def _store(path: Path, values: dict[tuple[str, str], np.ndarray]) -> Path:
    runs = len(next(iter(values.values())))
    with open_store(path) as store:
        for i in range(runs):
            store.add(RunRecord(f"night-{i:02d}", T0 + i * DAY, commit=f"{i:02d}" + "c" * 38, branch="main"),
                      [Result(MACHINE, "nightly", kernel, metric, float(v[i]), "s" if metric == "duration" else "B/s")
                       for (kernel, metric), v in values.items()])
    return path


def _noise(n: int, seed: int = 0, level: float = 2e-3) -> np.ndarray:
    return level * np.exp(np.random.default_rng(seed).normal(0.0, 0.01, n))


def test_an_old_regression_stays_open_until_accepted(cli, tmp_path: Path) -> None:  # noqa: ANN001
    slow = _noise(30)
    slow[10:] *= 1.3  # twenty nights ago, nobody decided
    store = _store(tmp_path / "h.sqlite", {("stencil_a", "duration"): slow, ("stencil_b", "duration"): _noise(30, 1)})
    result = cli("history", "detect", "--history", store)
    assert result.code == 1, result.out  # however old: still open
    assert "open" in result.out and "(new)" not in result.out and "1 open regression (0 new" in result.out
    assert cli("history", "detect", "--history", store, "--fail-on", "new").code == 0  # the explicit opt-out

    accept = cli("history", "accept", "stencil_*", "--history", store, "--reason", "tiling traded for registers")
    assert accept.code == 0, accept.err
    assert "accepted: nightly / stencil_a / duration" in accept.out and "+29.5%" in accept.out
    path = tmp_path / "baselines" / "accepted.toml"  # beside the baselines by default
    (entry,) = tomllib.loads(path.read_text())["accepted"]
    assert entry["machine"] == MACHINE and entry["suite"] == "nightly" and entry["kernel"] == "stencil_a"
    assert entry["metric"] == "*" and entry["run"] == "night-10" and entry["commit"].startswith("10cc")
    assert entry["before"] == pytest.approx(2e-3, rel=0.02) and entry["after"] == pytest.approx(2.6e-3, rel=0.02)
    assert entry["reason"] == "tiling traded for registers" and entry["who"] == "night-shift"
    assert len(entry["date"]) == 10 and entry["change_pct"] == pytest.approx(30, abs=2)

    after = cli("history", "detect", "--history", store, "--json")
    assert after.code == 0
    (point,) = after.json()["findings"]
    assert point["status"] == "accepted" and point["accepted_reason"] == "tiling traded for registers"
    # nothing is left to accept: an error, and the file is unchanged
    text = path.read_text()
    one_line_error(cli("history", "accept", "*", "--history", store, "--reason", "again"), None, "nothing to accept")
    assert path.read_text() == text


def test_an_accepted_change_is_the_new_level_an_unaccepted_one_never(tmp_path: Path) -> None:
    values = _noise(40)
    values[10:] *= 1.3
    values[25:] *= 1.3  # a second step on top of the first
    frame = _frame(tmp_path, values)
    points = detect(frame)
    assert [cp.index for cp in points] == [10, 25]
    found = lifecycle.states(points, frame)
    assert [s.status for s in found] == ["open", "open"]
    level = lifecycle.level(points, frame["value"].to_numpy())
    assert (level.start, level.end, level.open.point.index) == (0, 10, 10)  # before the first open one
    first = accepted.entry(points[0], reason="r", by="me")
    found = lifecycle.states(points, frame, [first])
    assert [s.status for s in found] == ["accepted", "open"]
    level = lifecycle.level(points, frame["value"].to_numpy(), [first])
    assert (level.start, level.end) == (10, 25)
    # accepting only the second leaves the first open, and the level where it was
    second = accepted.entry(points[1], reason="r", by="me")
    assert lifecycle.level(points, frame["value"].to_numpy(), [second]).end == 10


def _frame(tmp_path: Path, values: np.ndarray, kernel: str = "k"):  # noqa: ANN202
    store = _store(tmp_path / f"{kernel}-{len(values)}.sqlite", {(kernel, "duration"): values})
    with open_store(store, create=False) as s:
        return s.series()


def test_a_recovery_closes_it_and_is_reported_once(cli, tmp_path: Path) -> None:  # noqa: ANN001
    values = _noise(40, 2)
    values[10:20] *= 1.3  # fixed at night 20
    store = _store(tmp_path / "h.sqlite", {("k", "duration"): values[:23]})
    result = cli("history", "detect", "--history", store)
    assert result.code == 0, result.out
    assert "(new, recovered)" in result.out and "1 recovered" in result.out
    later = _store(tmp_path / "later.sqlite", {("k", "duration"): values})
    result = cli("history", "detect", "--history", later, "--json")
    assert result.code == 0
    assert [p["status"] for p in result.json()["findings"]] == [None]  # only the improvement; reported once


def test_a_partial_recovery_stays_open(tmp_path: Path) -> None:
    values = _noise(40, 3)
    values[10:] *= 1.3
    values[25:] /= 1.15  # half way back
    frame = _frame(tmp_path, values)
    found = lifecycle.states(detect(frame), frame)
    assert [s.status for s in found] == ["open", None]


def test_filters_that_select_nothing_are_errors(cli, tmp_path: Path) -> None:  # noqa: ANN001
    slow = _noise(30)
    slow[25:] *= 1.3
    store = _store(tmp_path / "h.sqlite", {("EOCloverFBCGPU(float*, int)", "duration"): slow,
                                           ("EOCloverFBCGPU(float*, int)", "hbm_bw"): 1e12 / slow})
    # globs and re: patterns as in expectations, aliases of metrics
    assert cli("history", "detect", "--history", store, "--kernel", "EOClover*", "--metric", "time").code == 1
    assert cli("history", "detect", "--history", store, "--kernel", "re:Clover", "--metric", "hbm_bw").code == 1
    assert cli("history", "detect", "--history", store, "--machine", "mi250x*").code == 1
    one_line_error(cli("history", "detect", "--history", store, "--kernel", "EOClovr*"), None,
                   "--kernel 'EOClovr*' selects no series", "EOCloverFBCGPU(float*, int)")
    one_line_error(cli("history", "detect", "--history", store, "--suite", "nosuch"), None,
                   "--suite 'nosuch' selects no series", "'nightly'")
    one_line_error(cli("history", "detect", "--history", store, "--metric", "hbm_bandwidth"), None,
                   "--metric 'hbm_bandwidth'", "hbm_bw")
    one_line_error(cli("history", "detect", "--history", store, "--metric", "occupancy"), None,
                   "--metric 'occupancy_pct' selects no series", "hbm_bw")
    one_line_error(cli("history", "detect", "--history", store, "--machine", "mi100"), None,
                   "--machine 'mi100' selects no series", MACHINE)
    for command in (("report", "--markdown", "d.md"), ("export", "--openmetrics", "o.txt")):
        one_line_error(cli("history", *command, "--history", store, "--suite", "nosuch"), None, "nosuch")
        assert cli("history", *command, "--history", store, "--kernel", "EOClover*").code == 0
    one_line_error(cli("history", "accept", "nosuch*", "--history", store, "--reason", "r"), None, "nosuch*")


def test_a_broken_accepted_file_is_a_located_error(cli, tmp_path: Path) -> None:  # noqa: ANN001
    store = _store(tmp_path / "h.sqlite", {("k", "duration"): _noise(10)})
    bad = tmp_path / "acc.toml"
    bad.write_text('[[accepted]]\nmachine = "m"\nsuite = "s"\n')
    one_line_error(cli("history", "detect", "--history", store, "--accepted", bad), bad, "entry 1", "'kernel'")
    bad.write_text("[[accepted]\n")
    one_line_error(cli("history", "detect", "--history", store, "--accepted", bad), bad, "not valid TOML")


def test_the_accepted_file_is_a_setting_and_keeps_what_was_there(cli, tmp_path: Path) -> None:  # noqa: ANN001
    slow = _noise(30)
    slow[20:] *= 1.3
    store = _store(tmp_path / "h.sqlite", {("k", "duration"): slow, ("k", "hbm_bw"): 1e12 / slow})
    (tmp_path / "perfcheck.toml").write_text('history = "h.sqlite"\naccepted = "reviewed/accepted.toml"\n')
    path = tmp_path / "reviewed" / "accepted.toml"
    path.parent.mkdir()
    path.write_text("# reviewed by the perf team\n")
    assert cli("history", "detect").code == 1
    result = cli("history", "accept", "k", "--metric", "duration", "--reason", 'a "quoted"\nreason')
    assert result.code == 0, result.err
    assert path.read_text().startswith("# reviewed by the perf team\n")
    (entry,) = tomllib.loads(path.read_text())["accepted"]
    assert entry["metric"] == "duration" and entry["reason"] == 'a "quoted"\nreason'
    assert cli("history", "detect").code == 1  # hbm_bw is still open
    assert cli("history", "detect", "--metric", "duration").code == 0


def test_an_accepted_change_point_that_moves_by_a_run_stays_accepted(tmp_path: Path) -> None:
    values = _noise(30, 4)
    values[12:] *= 1.3
    frame = _frame(tmp_path, values)
    (cp,) = detect(frame)
    moved = replace(accepted.entry(cp, reason="r", by="me"), run=f"night-{cp.index + 2:02d}", commit=None)
    assert [s.status for s in lifecycle.states([cp], frame, [moved])] == ["accepted"]
    far = replace(moved, run=f"night-{cp.index + lifecycle.MATCH_RUNS + 1:02d}")
    assert [s.status for s in lifecycle.states([cp], frame, [far])] == ["open"]
    other = replace(moved, kernel="other")
    assert [s.status for s in lifecycle.states([cp], frame, [other])] == ["open"]


def test_a_regression_within_the_noise_is_not_open_nor_the_level() -> None:
    from perfcheck.history.changepoints import ChangePoint

    values = 1e-3 * np.exp(np.random.default_rng(5).normal(0.0, 0.02, 40))  # 2% run-to-run

    def cp(index: int, before: float, after: float) -> ChangePoint:
        return ChangePoint("m", "s", "k", "duration", "s", f"night-{index:02d}", None, T0 + index * DAY, index,
                           before, after, (after / before - 1) * 100, "regression", 1e-4, 10, 10)

    small = cp(10, 1e-3, 1.02e-3)  # +2% at 2% noise: a change point, not beyond the noise
    found = lifecycle.series_states([small], values, 40, [], 3)
    assert [s.status for s in found] == [None]
    # a second small step on top: together beyond the noise of the accepted level (the first
    # never became the level), so it opens
    second = cp(20, 1.02e-3, 1.07e-3)
    found = lifecycle.series_states([small, second], values, 40, [], 3)
    assert [s.status for s in found] == [None, "open"] and found[1].level == 1e-3
    # nor does it start the gate's reference: the accepted level's runs go back before it
    level = lifecycle.level([small, second], values)
    assert (level.start, level.end) == (0, 20)
