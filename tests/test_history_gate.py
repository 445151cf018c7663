"""The gate that knows history: baseline from recent runs, noise from their spread."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from conftest import one_line_error
from perfcheck.history import Result, RunRecord, open_store
from perfcheck.history.gate import MIN_RUNS, reference, judge, within_run_se

# These tests are about history, not strict baselines: they record on a first run
# as a developer's machine does, also when the suite itself runs in CI (CI=true).
pytestmark = pytest.mark.usefixtures("local_run")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"
T0 = 1_767_225_600.0
EO = "EOCloverFBCGPU(float*, float const*, int)"


def _drift(seed: int, n: int, sigma: float) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))


def test_reference_is_the_median_since_the_last_change_point() -> None:
    x = _drift(1, 40, 0.01)
    x[30:] *= 1.20
    ref = reference(x)
    assert ref.usable and ref.since_index == 30 and ref.runs == 10
    assert ref.value == pytest.approx(float(np.median(x[30:])))
    assert 0.005 < ref.spread < 0.02


def test_reference_sets_spikes_aside_and_needs_enough_runs() -> None:
    x = _drift(2, 12, 0.01)
    x[8] *= 1.8
    ref = reference(x)
    assert ref.spread < 0.02 and ref.value == pytest.approx(float(np.median(np.delete(x, 8)[-10:])))
    short = reference(x[:MIN_RUNS - 1])
    assert not short.usable and short.comparable == MIN_RUNS - 1
    x = _drift(3, 30, 0.01)
    x[27:] *= 1.2  # a change three runs ago: three comparable runs, not enough
    assert not reference(x).usable and reference(x).comparable == 3


def test_drift_does_not_fail_but_a_real_slowdown_does() -> None:
    ref = reference(_drift(4, 30, 0.02))
    base = ref.value
    assert judge(base * 1.02, "<=", 0.05, None, ref).passed  # +2% with 2% drift: within the noise
    assert judge(base * 1.06, "<=", 0.05, None, ref).passed  # beyond 5%, but not 90% sure of it
    slow = judge(base * 1.20, "<=", 0.05, None, ref)
    assert not slow.passed and slow.reference == pytest.approx(base * 1.05) and slow.limit > slow.reference
    # a higher-is-better metric: a 20% drop fails, a 2% one does not
    assert not judge(base * 0.80, ">=", -0.05, None, ref).passed
    assert judge(base * 0.98, ">=", -0.05, None, ref).passed
    assert judge(base, "==", 0.0, None, ref) is None


def test_quiet_history_is_strict() -> None:
    ref = reference(_drift(5, 30, 0.001))
    assert not judge(ref.value * 1.06, "<=", 0.05, None, ref).passed
    # a noisy current run widens the limit
    noisy = np.exp(np.random.default_rng(6).normal(0.0, 0.3, 20)) * ref.value
    assert within_run_se(noisy) > 0.05
    assert judge(ref.value * 1.06, "<=", 0.05, None, ref, within_run_se(noisy)).passed


# --- end to end: perfcheck check --history --------------------------------------------------------

@pytest.fixture
def history_at(store_at) -> "Path | str":  # noqa: ANN001
    """The suite's history store, on each backend (a file by the config, or a database)."""
    return store_at("perf-history")


@pytest.fixture
def stencil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history_at: "Path | str") -> Path:
    for name in ("results-after.csv", "machines"):
        src = EXAMPLE / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    (tmp_path / "perfcheck.toml").write_text(
        '[tool.perfcheck]\ndevice = "mi100"\npeaks = ["machines/mulan-mi100.toml"]\n'
        f'history = "{history_at}"\n\n'
        '[tool.perfcheck.suites.after]\nprofiles = ["results-after.csv"]\n'
        f'[tool.perfcheck.suites.after.expect]\n"{EO}" = ["duration <= baseline + 5%", "hbm_bytes == baseline"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFCHECK_HISTORY", raising=False)
    return tmp_path


def _seed_history(path: Path, duration: float, runs: int) -> None:
    from perfcheck import baseline as baselines
    from perfcheck.analysis import analyse
    from perfcheck.history.store import machine_key

    machine = machine_key(baselines.fingerprint(analyse([EXAMPLE / "results-after.csv"], arch="mi100")))
    drift = _drift(7, runs, 0.01)
    with open_store(path) as store:
        for i in range(runs):
            store.add(RunRecord(f"old-{i}", T0 + i * 86400, commit=f"{i:07d}"),
                      [Result(machine, "after", EO, "duration", duration * drift[i], "s")])


def _observed() -> float:
    from perfcheck.analysis import analyse

    kernels = analyse([EXAMPLE / "results-after.csv"], arch="mi100").kernels
    return float(kernels.loc[kernels["kernel"] == EO, "duration"].iloc[0])


def _duration_check(cli, *args: str) -> tuple[int, dict]:  # noqa: ANN001
    result = cli("check", "--json", "out.json", *args)
    doc = json.loads(Path("out.json").read_text())
    checks = [c for c in doc["suites"]["after"]["checks"] if c["metric"] == "duration"]
    return result.code, checks[0]


def test_check_judges_on_history_and_appends_the_run(stencil: Path, cli, history_at) -> None:  # noqa: ANN001
    code, check = _duration_check(cli)  # no baseline, no history: recorded, and the store is created
    assert code == 0 and check["outcome"] == "recorded"
    observed = check["observed"]
    store_path = history_at
    with open_store(store_path, create=False) as store:
        frame = store.series(metric="duration", kernel=EO)
    assert len(frame) == 1 and frame["value"].iloc[0] == pytest.approx(observed)

    # the file baseline is this very run (passes); history says it used to be 20% faster
    _seed_history(store_path, observed / 1.2, 8)
    code, check = _duration_check(cli)
    assert code == 1 and check["outcome"] == "failed"
    assert "vs history" in check["message"] and "median of the last" in check["message"]
    assert check["baseline"] == pytest.approx(observed / 1.2, rel=0.03)
    with open_store(store_path, create=False) as store:
        assert len(store.runs()) == 1 + 8 + 1  # every check run appended once


def test_the_run_is_stored_after_every_report_and_only_then(stencil: Path, cli, history_at,  # noqa: ANN001
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # The reports are written while the store inserts the values (SQLite: on a helper
    # thread), and the run is committed once every report is written: while the JSON file
    # is being written the store holds none of this run; a report that cannot be written,
    # or an interrupt, leaves the store as it was, and no thread is left behind.
    import threading

    from perfcheck.report import results as results_module

    _seed_history(history_at, _observed(), 1)
    real = results_module.write_document
    seen: list[int] = []

    def peeking(path, content):  # noqa: ANN001, ANN202
        with open_store(history_at, create=False) as store:
            seen.append(len(store.runs()))
        return real(path, content)

    def failing(path, content):  # noqa: ANN001, ANN202
        raise OSError(28, "No space left on device")

    def interrupted(path, content):  # noqa: ANN001, ANN202
        raise KeyboardInterrupt

    threads = threading.active_count()
    monkeypatch.setattr(results_module, "write_document", peeking)
    assert cli("check", "--json", "out.json").code == 0
    assert seen == [1]
    monkeypatch.setattr(results_module, "write_document", failing)
    result = cli("check", "--json", "out.json")
    assert result.code == 2 and "out.json: No space left on device" in result.err
    monkeypatch.setattr(results_module, "write_document", interrupted)
    assert cli("check", "--json", "out.json").code == 130
    with open_store(history_at, create=False) as store:
        assert len(store.runs()) == 2
    # with roofline plots the reports come first (seconds of drawing, with the store's
    # write lock not held), then the append: the same outcome
    monkeypatch.setattr(results_module, "write_document", peeking)
    assert cli("check", "--json", "out.json", "--roofline", "plots").code == 0
    assert seen == [1, 2] and list(Path("plots").glob("*.png"))
    monkeypatch.setattr(results_module, "write_document", failing)
    assert cli("check", "--json", "out.json", "--roofline", "plots").code == 2
    with open_store(history_at, create=False) as store:
        assert len(store.runs()) == 3
    assert threading.active_count() == threads


def test_drift_in_history_does_not_fail_a_run(stencil: Path, cli, history_at) -> None:  # noqa: ANN001
    observed = _observed()
    _seed_history(history_at, observed / 1.055, 8)  # 5.5% slower than usual: drift
    Path("baselines/after").mkdir(parents=True)
    code, check = _duration_check(cli)  # no baseline file at all: history alone decides
    assert code == 0 and check["outcome"] == "passed" and "vs history" in check["message"], check["message"]
    # the same run against a one-run snapshot 5.5% faster: the file baseline would fail it
    code, check = _duration_check(cli, "--history", str(stencil / "empty.sqlite"))
    assert "history has 0 comparable runs" in check["message"]


def test_too_little_history_falls_back_to_the_baseline_file(stencil: Path, cli) -> None:  # noqa: ANN001
    cli("check")
    code, check = _duration_check(cli)
    assert code == 0 and check["outcome"] == "passed"
    assert "[baseline file: history has 1 comparable run on this machine, needs 5]" in check["message"]
    code, check = _duration_check(cli)
    assert "history has 2 comparable runs" in check["message"]


def test_the_history_option_and_environment(stencil: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    cli("check", "--history", "cli.sqlite")
    assert (stencil / "cli.sqlite").exists() and not (stencil / "perf-history.sqlite").exists()
    monkeypatch.setenv("PERFCHECK_HISTORY", str(stencil / "env.sqlite"))
    cli("check")
    assert (stencil / "env.sqlite").exists() and not (stencil / "perf-history.sqlite").exists()


def test_update_baseline_is_not_judged_on_history(stencil: Path, cli, history_at) -> None:  # noqa: ANN001
    cli("check")
    code, check = _duration_check(cli)
    _seed_history(history_at, check["observed"] / 1.5, 8)
    code, check = _duration_check(cli, "--update-baseline")
    assert code == 0 and "history" not in check["message"]


# --- the accepted level and the baseline file's guard (issue 15) ------------------------------------

def _duration_check_record(observed: float, stored: float, outcome: str):  # noqa: ANN202
    from perfcheck.model import Check

    return Check(suite="after", kernel=EO, pattern="*", expression="duration <= baseline + 5%", metric="duration",
                 relation="<=", observed=observed, reference=stored * 1.05, unit="s", outcome=outcome,
                 origin="baseline", message="duration ...", baseline=stored)


def test_the_history_never_passes_what_the_baseline_file_fails_beyond_its_noise() -> None:
    from perfcheck.history.gate import rejudge

    ref = reference(1.3e-3 * _drift(8, 30, 0.01))  # the history's level: 30% above the file's
    (stale,) = rejudge([_duration_check_record(1.31e-3, 1.0e-3, "failed")], {(EO, "duration"): ref}, None, {})
    assert stale.outcome == "failed" and "vs history" in stale.message
    assert "vs the baseline file 1 ms (+31.0%)" in stale.message and "(allowance + measured noise), failed" in stale.message
    # the file agrees with the history (within allowance + noise): passes, one figure
    (fresh,) = rejudge([_duration_check_record(1.31e-3, 1.28e-3, "passed")], {(EO, "duration"): ref}, None, {})
    assert fresh.outcome == "passed" and "baseline file" not in fresh.message
    # beyond the strict file bound but within its noise: passes, and says both figures
    (near,) = rejudge([_duration_check_record(1.31e-3, 1.24e-3, "failed")], {(EO, "duration"): ref}, None, {})
    assert near.outcome == "passed" and "vs the baseline file" in near.message and not near.message.endswith("failed")


def test_an_open_regression_is_named_in_the_failure() -> None:
    from dataclasses import replace as with_

    from perfcheck.history.changepoints import ChangePoint
    from perfcheck.history.gate import rejudge

    cp = ChangePoint("m", "after", EO, "duration", "s", "night-06", "06" + "ab" * 19, T0, 5, 1e-3, 1.3e-3, 30.1,
                     "regression", 1e-6, 5, 8)
    ref = with_(reference(1e-3 * _drift(9, 5, 0.01)), open=cp)
    (check,) = rejudge([_duration_check_record(1.3e-3, 1e-3, "failed")], {(EO, "duration"): ref}, None, {})
    assert check.outcome == "failed"
    assert check.message.startswith("open regression since 06ababababab (2026-01-01, run night-06), +30.1%: accept it "
                                    "with perfcheck history accept 'EOCloverFBCGPU(float*, float const*, int)' "
                                    "--suite after --metric duration --reason TEXT, or fix it; duration 1.3 ms")
    (fixed,) = rejudge([_duration_check_record(1.0e-3, 1e-3, "passed")], {(EO, "duration"): ref}, None, {})
    assert fixed.outcome == "passed" and not fixed.message.startswith("open regression")  # the fix passes


def test_with_too_few_runs_before_an_open_regression_the_file_decides_and_names_it() -> None:
    from dataclasses import replace as with_

    from perfcheck.history.changepoints import ChangePoint
    from perfcheck.history.gate import rejudge

    cp = ChangePoint("m", "after", EO, "duration", "s", "night-03", None, T0, 3, 1e-3, 1.3e-3, 30.0,
                     "regression", 1e-6, 3, 8)
    ref = with_(reference(1e-3 * _drift(10, 3, 0.01)), open=cp)  # 3 runs before it: too few for a reference
    assert not ref.usable
    (check,) = rejudge([_duration_check_record(1.3e-3, 1e-3, "failed")], {(EO, "duration"): ref}, None, {})
    assert check.outcome == "failed" and check.message.startswith("open regression since night-03")
    assert "[baseline file: history has 3 comparable runs on this machine, needs 5]" in check.message


def test_a_change_point_at_a_run_without_a_commit_names_the_run(stencil: Path, cli, history_at) -> None:  # noqa: ANN001
    # Runs added without a commit (a store fed by hand or by a CI without git) before
    # runs with one read back with a NaN commit (pandas' string column); the reference
    # since a change point at such a run names the run instead.
    from perfcheck import baseline as baselines
    from perfcheck.analysis import analyse
    from perfcheck.history.store import machine_key

    observed = _observed()
    machine = machine_key(baselines.fingerprint(analyse([EXAMPLE / "results-after.csv"], arch="mi100")))
    levels = [observed * 2] * 8 + [observed / 1.2] * 8
    with open_store(history_at) as store:
        for i, value in enumerate(levels):
            commit = f"{i:07d}" if i >= 10 else None
            store.add(RunRecord(f"nocommit-{i}", T0 + i * 86400, commit=commit),
                      [Result(machine, "after", EO, "duration", value, "s")])
    Path("baselines/after").mkdir(parents=True)
    code, check = _duration_check(cli)
    assert code == 1 and check["outcome"] == "failed", check["message"]
    assert "since the change point at nocommit-8 (" in check["message"]


def test_the_gate_reads_only_the_series_it_judges(history_at, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    # The checks judge A's duration and B's occupancy: the gate is given those two
    # series, not every metric of both kernels (nor the other kernels' series: a year
    # of a 2,000-kernel suite is 32,000 of them), and a damaged series it does not
    # judge cannot fail the check.
    import sqlite3
    from collections.abc import Iterator

    import pandas as pd

    from perfcheck.history import gate
    from perfcheck.history import store as store_module
    from perfcheck.history.latest import LatestValues

    machine = "mi100_gfx908_rocprofv3"
    with open_store(history_at) as store:
        for i in range(12):
            store.add(RunRecord(f"n-{i:02d}", T0 + i * 86400),
                      [Result(machine, "s", kernel, metric, value * (1.0 + 0.01 * (i % 3)), "s")
                       for kernel in ("A", "B", "C") for metric, value in (("duration", 1e-3), ("occupancy", 0.5))])
    if isinstance(history_at, Path):  # SQLite takes text in a REAL column: a damaged store
        with sqlite3.connect(history_at) as db:
            db.execute("UPDATE results SET value = 'garbage' WHERE series_id IN (SELECT series_id FROM series "
                       "WHERE NOT ((kernel = 'A' AND metric = 'duration') OR (kernel = 'B' AND metric = 'occupancy')))")
    fetched: set[tuple[str, str]] = set()

    def seen(frame: pd.DataFrame) -> pd.DataFrame:
        fetched.update(zip(frame["kernel"], frame["metric"]))
        return frame

    class Counting:  # the store, noting the series of every frame it gives
        def __init__(self, store) -> None:  # noqa: ANN001
            self.store = store

        def __enter__(self) -> "Counting":
            return self

        def __exit__(self, *exc: object) -> None:
            self.store.close()

        def __getattr__(self, name: str):  # noqa: ANN204
            attr = getattr(self.store, name)
            if not callable(attr):
                return attr

            def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
                out = attr(*args, **kwargs)
                if isinstance(out, pd.DataFrame):
                    return seen(out)
                if isinstance(out, LatestValues):  # the gate's lean read: names once per series
                    fetched.update(zip(out.kernels, out.metrics))
                    return out
                return (seen(part) for part in out) if isinstance(out, Iterator) else out
            return call

    opened = store_module.open_store
    monkeypatch.setattr(store_module, "open_store", lambda *a, **k: Counting(opened(*a, **k)))
    refs = gate.references(history_at, machine, "s", [("A", "duration"), ("B", "occupancy")])
    assert sorted(refs) == [("A", "duration"), ("B", "occupancy")] and all(r.usable for r in refs.values())
    assert refs[("A", "duration")].value == pytest.approx(1.01e-3, rel=0.011)
    assert fetched == {("A", "duration"), ("B", "occupancy")}


@pytest.mark.parametrize("order", ["appended", "backlog"])
def test_latest_values_are_the_values_of_latest(store_at, order: str) -> None:  # noqa: ANN001 (both backends)
    # The gate's lean read gives the rows ``latest`` gives, in its order: each series'
    # last N runs by time then run id (ties, runs imported out of order, a series with
    # fewer runs), missing and non-finite values as NaN, the runs' ids, times and commits.
    import pandas as pd

    machine = "m"
    nights = list(range(9)) if order == "appended" else [4, 8, 0, 3, 7, 1, 2, 5, 6]
    with open_store(store_at()) as store:
        for i in nights:
            rows = [Result(machine, "s", "k1", "duration", [1.0 + i, None, float("inf")][i % 3] if i < 6 else 1.0 + i, "s"),
                    Result(machine, "s", "k1", "occupancy", 50.0 + i, "%"),
                    Result(machine, "other", "k1", "duration", 9.0, "s")]
            if i % 2:
                rows.append(Result(machine, "s", "k2", "duration", 2.0 + i, "s"))
            store.add(RunRecord(f"r{i}", T0 + (i // 2) * 86400.0, commit=f"c{i}" if i % 4 else None), rows)
        pairs = [("k1", "duration"), ("k1", "occupancy"), ("k2", "duration"), ("nope", "duration")]
        for last in (1, 4, 30):
            frame = store.latest(machine=machine, suite="s", pairs=pairs, last=last)
            got = store.latest_values(machine=machine, suite="s", pairs=pairs, last=last)
            spans = [got.span(i) for i in range(len(got))]
            assert [(got.kernels[i], got.metrics[i]) for i in range(len(got))] == \
                list(dict.fromkeys(zip(frame["kernel"], frame["metric"])))
            assert [b - a for a, b in spans] == frame.groupby(["kernel", "metric"], sort=False).size().tolist()
            np.testing.assert_array_equal(got.values, frame["value"].to_numpy(dtype="float64"))
            assert [got.run_ids[r] for r in got.runs] == frame["run_id"].tolist()
            stamps = pd.to_datetime(got.times[got.runs], unit="s", utc=True)
            assert list(stamps) == frame["time"].tolist()
            assert [got.commits[r] for r in got.runs] == [c if isinstance(c, str) else None for c in frame["commit"]]
        assert np.isnan(got.values[:6]).sum() == 4  # None and inf in nights 1, 2, 4, 5
        assert not len(store.latest_values(machine=machine, suite="s", pairs=[("nope", "duration")], last=5))


def test_latest_values_say_a_damaged_value_in_one_line(tmp_path: Path) -> None:
    # SQLite's REAL column takes text: a value the gate judges that is not a number is
    # the store's one-line error (as the full read says), not a crash or a silent NaN.
    import sqlite3

    from perfcheck.errors import InputError

    path = tmp_path / "h.sqlite"
    with open_store(path) as store:
        for i in range(6):
            store.add(RunRecord(f"r{i}", T0 + i * 86400.0), [Result("m", "s", "k", "duration", 1.0, "s")])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE results SET value = 'garbage' WHERE run = 3")
    with open_store(path) as store, pytest.raises(InputError, match="column 'value' holds 'garbage'") as caught:
        store.latest_values(machine="m", suite="s", pairs=[("k", "duration")], last=30)
    assert "\n" not in str(caught.value)
    for text in ("nan", "1_0"):  # text numpy would read as a number (missing; 10) is no number either
        with sqlite3.connect(path) as db:
            db.execute("UPDATE results SET value = ? WHERE run = 3", (text,))
        with open_store(path) as store, pytest.raises(InputError, match=f"column 'value' holds '{text}'"):
            store.latest_values(machine="m", suite="s", pairs=[("k", "duration")], last=30)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE results SET value = 1.0")
        db.execute("UPDATE runs SET time = 1e12 WHERE run = 2")  # past 2200
    with open_store(path) as store, pytest.raises(InputError, match="outside 1970-2200"):
        store.latest_values(machine="m", suite="s", pairs=[("k", "duration")], last=30)


def test_the_gates_median_is_numpys_to_the_bit() -> None:
    from perfcheck.history.gate import _middle

    def _median(x: np.ndarray) -> float:  # one series: a matrix of one sorted row
        return float(_middle(np.sort(x)[None, :])[0])

    rng = np.random.default_rng(3)
    for n in range(1, 80):
        for scale in (1e-6, 1.0, 1e9):
            x = rng.lognormal(0.0, 0.3, n) * scale
            x[rng.random(n) < 0.2] = x[0]  # ties
            assert _median(x) == float(np.median(x)), (n, scale)
            logs = np.log(x)
            assert _median(np.abs(logs - _median(logs))) == float(np.median(np.abs(logs - np.median(logs))))


def _execute(location, sql: str) -> None:  # noqa: ANN001
    """``sql`` on the store at ``location`` (an SQLite file or a PostgreSQL URL), as another tool would."""
    if isinstance(location, Path):
        with closing(sqlite3.connect(location)) as db, db:
            db.execute(sql)
        return
    import psycopg

    with psycopg.connect(location, autocommit=True) as db:
        db.execute(sql)


def test_a_judged_run_time_outside_1970_2200_is_named_on_either_backend(cli, store_at) -> None:  # noqa: ANN001
    # An older perfcheck stored run times past 2200 (1e12 s): the gate's read of the judged
    # series names the run and the time, as the SQLite store always did (PostgreSQL said
    # "a value or a run's time is not a number": its double precision column holds 1e12).
    from perfcheck.errors import InputError
    from perfcheck.history import gate

    location = store_at()
    with open_store(location) as store:
        for i in range(6):
            store.add(RunRecord(f"r{i}", T0 + i * 86400.0), [Result("m", "s", "k", "duration", 1.0 + i / 100, "s")])
    _execute(location, "UPDATE runs SET time = 1e12 WHERE run_id = 'r3'")
    with open_store(location) as store:
        for read in (store.latest_values, store.latest):
            with pytest.raises(InputError) as caught:
                read(machine="m", suite="s", pairs=[("k", "duration")], last=30)
            message = str(caught.value)
            assert "run 'r3' has time 1000000000000.0, outside 1970-2200" in message, message
            assert "prune" in message and "\n" not in message and "not a number" not in message
    with pytest.raises(InputError, match="run 'r3' has time 1000000000000.0, outside 1970-2200"):
        gate.references(location, "m", "s", [("k", "duration")])
    # and the commands that read every run (PostgreSQL's list showed the year 33658 on
    # pandas 3; pandas 2 cannot hold it)
    for command in (("history", "list"), ("history", "detect")):
        one_line_error(cli(*command, "--history", location), None, "run 'r3' has time 1000000000000.0, outside 1970-2200",
                       "prune")
