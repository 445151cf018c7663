"""The history store: schema, idempotent runs, migrations, concurrent writers, results files."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from perfcheck.errors import InputError
from perfcheck.history import Machine, Result, RunRecord, current_run, open_store, read_results
from perfcheck.history import store as store_module
from perfcheck.history.runs import ci_job

DAY = 86400.0
T0 = 1_767_225_600.0  # 2026-01-01 UTC


def _add(store, i: int, value: float, *, run_id: str | None = None, machine: str = "mi100_gfx908_rocprofv3") -> bool:
    run = RunRecord(run_id or f"run-{i:03d}", T0 + i * DAY, commit=f"c{i:03d}", branch="main")
    rows = [Result(machine, "stencil", "k1", "duration", value, "s", n=100, median=value, spread=0.01, outcome="passed"),
            Result(machine, "stencil", "k1", "hbm_bw", 1e9 / value, "B/s")]
    return store.add(run, rows, [Machine(machine, {"device": "mi100", "arch": "gfx908"})]).added


def test_round_trip_series_runs_and_machines(store_at) -> None:  # noqa: ANN001 (both backends)
    with open_store(store_at()) as store:
        assert store.version == store_module.SCHEMA_VERSION
        for i in range(5):
            assert _add(store, i, 1e-3 * (1 + i / 100))
        frame = store.series(metric="duration")
        runs = store.runs()
        machines = store.machines()
    assert list(frame.columns) == list(store_module.SERIES_COLUMNS)
    assert frame["value"].tolist() == pytest.approx([1e-3 * (1 + i / 100) for i in range(5)])
    assert frame["commit"].tolist() == [f"c{i:03d}" for i in range(5)]
    assert str(frame["time"].dt.tz) == "UTC" and frame["time"].iloc[0].timestamp() == T0
    assert frame["n"].tolist() == [100] * 5 and frame["outcome"].unique().tolist() == ["passed"]
    assert runs["run_id"].tolist() == [f"run-{i:03d}" for i in range(5)] and runs["values"].tolist() == [2] * 5
    assert machines == {"mi100_gfx908_rocprofv3": {"arch": "gfx908", "device": "mi100"}}


def test_a_run_is_stored_once(store_at) -> None:  # noqa: ANN001 (both backends)
    with open_store(store_at()) as store:
        assert _add(store, 0, 1e-3)
        assert not _add(store, 0, 1e-3)  # the same run again: nothing changes
        with pytest.raises(InputError, match="'run-000' is already stored with other values"):
            _add(store, 0, 2e-3)  # the same id, other values: not the same run
        assert store.series()["value"].tolist() == [1e-3, 1e12]


def test_work_done_alongside_an_add_comes_before_its_commit(store_at) -> None:  # noqa: ANN001 (both backends)
    # ``alongside`` (the suite runner's reports) runs once, before the commit: another
    # reader sees none of the run meanwhile; if it raises, the run is rolled back and the
    # error goes on; the values stored are those a plain add stores, to the type
    location, plain = store_at(), store_at("plain")
    seen: list[int] = []

    def look() -> None:
        with open_store(location, create=False) as other:
            seen.append(len(other.runs()))

    def fail() -> None:
        raise KeyboardInterrupt

    run = RunRecord("run-001", T0 + DAY)
    rows = [Result("m", "stencil", f"k{k}", metric, value, unit, n=n, outcome="passed", low=None, high=2.0)
            for k in range(50) for metric, value, unit, n in (("duration", 1e-3 * (k + 1), "s", 10),
                                                             ("vgpr", 64, "", None), ("hbm_bw", 1.5e12, "B/s", None))]
    with open_store(location) as store, open_store(plain) as other:
        assert _add(store, 0, 1e-3) and _add(other, 0, 1e-3)
        with pytest.raises(KeyboardInterrupt):
            store.add(run, rows, alongside=fail)
        assert store.runs()["run_id"].tolist() == ["run-000"] and len(store.series(run_id="run-001")) == 0
        assert store.add(run, rows, alongside=look).added
        assert seen == [1] and store.runs()["run_id"].tolist() == ["run-000", "run-001"]
        assert other.add(run, rows).added
        assert store.series().equals(other.series()) and len(store.series(run_id="run-001")) == 150


def test_series_filters_last_and_since(store_at) -> None:  # noqa: ANN001 (both backends)
    with open_store(store_at()) as store:
        for i in range(10):
            _add(store, i, 1e-3)
        assert len(store.series(last=3)) == 6  # 3 per series, two series
        assert len(store.series(since=T0 + 8 * DAY)) == 4
        assert len(store.series(kernel=["k1", "other"], metric="hbm_bw")) == 10
        assert store.series(suite="none").empty


def test_prune_keeps_recent_runs(store_at) -> None:  # noqa: ANN001 (both backends)
    with open_store(store_at()) as store:
        for i in range(10):
            _add(store, i, 1e-3)
        assert store.prune(keep_days=3, now=T0 + 9 * DAY) == 6
        assert store.runs()["run_id"].tolist() == ["run-006", "run-007", "run-008", "run-009"]
        assert len(store.series()) == 8  # the values went with their runs


def test_not_a_store_is_a_clear_error(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello, this is not SQLite at all\n" * 20)
    with pytest.raises(InputError, match="not a perfcheck history store"):
        open_store(text)
    other = tmp_path / "results.db"  # e.g. a rocpd database given by mistake
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE kernels (id INTEGER)")
    with pytest.raises(InputError, match="SQLite database but not a perfcheck history store"):
        open_store(other)
    with pytest.raises(InputError, match="no such history store"):
        open_store(tmp_path / "absent.sqlite", create=False)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    open_store(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {store_module.SCHEMA_VERSION + 1}")
    with pytest.raises(InputError, match="newer than this perfcheck"):
        open_store(path)


def test_an_older_store_is_migrated_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "h.sqlite"
    with open_store(path) as store:
        _add(store, 0, 1e-3)
    extra = "ALTER TABLE runs ADD COLUMN note TEXT; CREATE INDEX series_kernel ON series(kernel)"
    monkeypatch.setattr(store_module, "MIGRATIONS", (*store_module.MIGRATIONS, extra))
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", len(store_module.MIGRATIONS))
    with open_store(path) as store:
        assert store.version == len(store_module.MIGRATIONS)
        assert store.series()["value"].tolist() == [1e-3, 1e12]  # data kept
    with sqlite3.connect(path) as db:
        assert "note" in [row[1] for row in db.execute("PRAGMA table_info(runs)")]


def _writer(path: str, worker: int, count: int) -> None:
    with open_store(path) as store:
        for i in range(count):
            _add(store, worker * 100 + i, 1e-3 + worker, run_id=f"w{worker}-{i}")


def test_parallel_writer_processes(tmp_path: Path) -> None:
    """Several processes create, migrate and append to one store at once (WAL, busy timeout)."""
    path = str(tmp_path / "h.sqlite")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, w, 15)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    with open_store(path) as store:
        assert len(store.runs()) == 60 and len(store.series()) == 120
        mode = store._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


# --- run identity and results files ------------------------------------------------------------

def test_ci_job_from_github_gitlab_and_slurm() -> None:
    github = {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "2",
              "GITHUB_REPOSITORY": "org/app", "GITHUB_SERVER_URL": "https://github.com"}
    assert ci_job(github) == ("github", "42/2", "https://github.com/org/app/actions/runs/42")
    assert ci_job({"GITLAB_CI": "true", "CI_JOB_ID": "7", "CI_JOB_URL": "https://gl/j/7"}) == ("gitlab", "7", "https://gl/j/7")
    slurm = {"SLURM_JOB_ID": "1001", "SLURM_ARRAY_JOB_ID": "1000", "SLURM_ARRAY_TASK_ID": "3", "SLURM_CLUSTER_NAME": "setonix"}
    assert ci_job(slurm) == ("slurm", "setonix:1000_3", None)
    assert ci_job({}) == (None, None, None)


def test_current_run_reads_commit_and_branch_from_the_environment() -> None:
    run = current_run({"GITHUB_SHA": "abc123", "GITHUB_HEAD_REF": "feature", "GITHUB_RUN_ID": "9"}, now=T0)
    assert (run.commit, run.branch, run.ci_system, run.time) == ("abc123", "feature", "github", T0)
    assert run.run_id.startswith("20260101T000000Z-")
    assert current_run({}, now=T0).run_id != run.run_id


def _results_file(tmp_path: Path, *, with_run: bool) -> Path:
    doc: dict = {"format_version": 1, "summary": {}, "suites": {"stencil": {
        "target": {"arch": "gfx908", "device": "AMD Instinct MI100"},
        "profiles": [{"tool": "rocprof", "tool_version": None, "device": None, "arch": "gfx908"}],
        "checks": [{"kernel": "k1", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s",
                    "outcome": "failed"},
                   {"kernel": "k1", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s",
                    "outcome": "passed"},
                   {"kernel": "nothing*", "pattern": "nothing*", "metric": "duration", "observed": None, "unit": "s",
                    "outcome": "error"}]}}}
    if with_run:
        doc["run"] = {"id": "r-1", "time": T0, "commit": "abc", "branch": "main",
                      "ci": {"system": "slurm", "job": "55", "url": None}, "host": "nid001"}
        doc["suites"]["stencil"].update({
            "fingerprint": {"device": "mi100", "arch": "gfx908", "tool": "rocprof", "tool_version": "unknown"},
            "machine": "mi100_gfx908_rocprof",
            "measurements": {"k1": {"duration": 0.002, "hbm_bytes": 4096.0}},
            "samples": {"k1": {"n": 50, "median": 0.002, "spread": 0.01}}})
    path = tmp_path / ("new.json" if with_run else "old.json")
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_read_a_results_file(tmp_path: Path) -> None:
    imported = read_results(_results_file(tmp_path, with_run=True))
    assert imported.run == RunRecord("r-1", T0, "abc", "main", "slurm", "55", None, "nid001", str(tmp_path / "new.json"))
    values = {(r.kernel, r.metric): r for r in imported.results}
    assert set(values) == {("k1", "duration"), ("k1", "hbm_bytes")}  # the unmatched pattern measured nothing
    duration = values[("k1", "duration")]
    assert (duration.value, duration.n, duration.spread, duration.outcome) == (0.002, 50, 0.01, "failed")
    assert values[("k1", "hbm_bytes")].unit == "B" and values[("k1", "hbm_bytes")].outcome is None
    assert imported.machines[0].machine == "mi100_gfx908_rocprof" and not imported.notices


def test_an_older_results_file_imports_once(tmp_path: Path) -> None:
    path = _results_file(tmp_path, with_run=False)
    first, second = read_results(path), read_results(path)
    assert first.run.run_id == second.run.run_id and first.run.run_id.startswith("file-")
    assert "no run block" in first.notices[0]
    assert first.machines[0].fingerprint["device"] == "AMD Instinct MI100"
    copy = tmp_path / "copied" / path.name  # the same file elsewhere, with another modification time
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    os.utime(copy, (1_700_000_000, 1_700_000_000))
    third = read_results(copy)
    assert third.run.run_id == first.run.run_id and third.run.time != first.run.time
    with open_store(tmp_path / "h.sqlite") as store:
        assert store.add(first.run, first.results, first.machines).added
        assert not store.add(second.run, second.results, second.machines).added
        assert not store.add(third.run, third.results, third.machines).added  # the same run, not a clash


@pytest.mark.parametrize(("text", "what"), [
    ('{"format_version": 1,\n "suites": {"s": [}}', "not valid JSON"),
    ('{"format_version": 1}', "not a perfcheck results file"),
    ("", "not valid JSON"),
])
def test_bad_results_files(tmp_path: Path, text: str, what: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=what) as info:
        read_results(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_budget_limits_come_from_the_checks_and_an_old_store_gains_them(tmp_path: Path) -> None:
    # a schema-1 store (before low/high): made by running only the first migration
    path = tmp_path / "h.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(store_module.MIGRATIONS[0])
        db.execute("PRAGMA user_version = 1")
        db.execute(f"PRAGMA application_id = {store_module.APPLICATION_ID}")
    doc = json.loads(_results_file(tmp_path, with_run=True).read_text())
    doc["suites"]["stencil"]["checks"] = [
        {"kernel": "k1", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s", "outcome": "passed",
         "relation": "<=", "reference": 0.0025},
        {"kernel": "k1", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s", "outcome": "passed",
         "relation": "<=", "reference": 0.003},  # the tighter limit (2.5 ms) is the budget
        {"kernel": "k1", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s", "outcome": "passed",
         "relation": ">=", "reference": 0.001}]
    results = tmp_path / "limits.json"
    results.write_text(json.dumps(doc))
    imported = read_results(results)
    with open_store(path) as store:
        assert store.version == store_module.SCHEMA_VERSION
        store.add(imported.run, imported.results, imported.machines)
        frame = store.series(metric="duration")
    assert (frame["low"].tolist(), frame["high"].tolist()) == ([0.001], [0.0025])
    hbm = [r for r in imported.results if r.metric == "hbm_bytes"][0]
    assert hbm.low is None and hbm.high is None  # no check held it


# --- schema 3: series named once (issue 22) ---------------------------------------------------

LONG = "void ck::kernel_gemm<ck::half_t, float, 256, (ck::Pipeline)1>(ck::Argument) [clone .kd]"
V2_ROWS = [  # run_id, machine, suite, kernel, metric, value, unit, n, median, spread, outcome, low, high
    ("r0", "m1", "nightly", LONG, "duration", 2e-3, "s", 10, 2e-3, 0.01, "passed", None, 3e-3),
    ("r0", "m1", "nightly", LONG, "hbm_bw", 1e12, "B/s", None, None, None, None, None, None),
    ("r0", "m1", "nightly", "axpy", "duration", 1e-4, "s", None, None, None, "failed", 2e-4, None),
    ("r1", "m1", "nightly", LONG, "duration", 2.1e-3, "s", 12, 2.1e-3, 0.02, "passed", None, 3e-3),
    ("r1", "m1", "other", "axpy", "duration", None, "s", None, None, None, None, None, None),
    ("r1", "m0", "nightly", "axpy", "duration", 1.5e-4, "s", None, None, None, None, None, None),
]


def _version_2_store(location) -> None:  # noqa: ANN001
    """A store as perfcheck wrote it before schema 3: names in every value row."""
    runs = [("r0", T0, "c0", "main", None, None, None, None, None, T0), ("r1", T0 + DAY, "c1", "main", None, None,
            None, None, None, T0), ("r2", T0 + 2 * DAY, None, None, None, None, None, None, None, T0)]
    machines = [("m0", "{}"), ("m1", '{"arch": "gfx90a"}')]
    if isinstance(location, Path):
        with sqlite3.connect(location) as db:
            for script in store_module.MIGRATIONS[:2]:
                db.executescript(script)
            db.execute("PRAGMA user_version = 2")
            db.execute(f"PRAGMA application_id = {store_module.APPLICATION_ID}")
            db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)
            db.executemany("INSERT INTO machines VALUES (?, ?)", machines)
            db.executemany("INSERT INTO results (run_id, machine, suite, kernel, metric, value, unit, n, median, "
                           "spread, outcome, low, high) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", V2_ROWS)
        return
    import psycopg

    from perfcheck.history import pgstore

    with psycopg.connect(location, autocommit=True) as db, db.transaction():
        for script in pgstore.PG_MIGRATIONS[:2]:
            db.execute(script)
        db.execute("CREATE TABLE perfcheck_schema (version integer NOT NULL); INSERT INTO perfcheck_schema VALUES (2)")
        with db.cursor() as cursor:
            cursor.executemany("INSERT INTO runs VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", runs)
            cursor.executemany("INSERT INTO machines VALUES (%s, %s)", machines)
            cursor.executemany("INSERT INTO results (run_id, machine, suite, kernel, metric, value, unit, n, median, "
                               "spread, outcome, low, high) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                               V2_ROWS)


def test_a_version_2_store_gets_series_ids_and_keeps_every_value(store_at) -> None:  # noqa: ANN001 (both backends)
    location = store_at()
    _version_2_store(location)
    with open_store(location) as store:
        assert store.version == store_module.SCHEMA_VERSION == 4
        frame = store.series()
        runs = store.runs()
        assert store.machines() == {"m0": {}, "m1": {"arch": "gfx90a"}}
    # the order series() always had: machine, suite, kernel, metric, time
    assert frame[["run_id", "machine", "suite", "kernel", "metric"]].values.tolist() == [
        ["r1", "m0", "nightly", "axpy", "duration"], ["r0", "m1", "nightly", "axpy", "duration"],
        ["r0", "m1", "nightly", LONG, "duration"], ["r1", "m1", "nightly", LONG, "duration"],
        ["r0", "m1", "nightly", LONG, "hbm_bw"], ["r1", "m1", "other", "axpy", "duration"]]
    second = frame.iloc[3]
    assert (second["value"], second["n"], second["spread"], second["outcome"], second["high"], second["commit"]) == \
        (2.1e-3, 12, 0.02, "passed", 3e-3, "c1")
    assert frame.iloc[1]["low"] == 2e-4 and frame.iloc[5]["value"] != frame.iloc[5]["value"]  # NaN stays missing
    assert runs[["run_id", "machines", "suites", "values"]].fillna("-").values.tolist() == [
        ["r0", "m1", "nightly", 3], ["r1", "m0,m1", "nightly,other", 3], ["r2", "-", "-", 0]]
    with open_store(location) as store:  # a run id keeps naming one run, and a new run finds its series
        with pytest.raises(InputError, match="already stored with other values"):
            store.add(RunRecord("r1", T0 + DAY), [Result("m1", "nightly", "axpy", "duration", 1.0, "s")])
        assert store.add(RunRecord("r3", T0 + 3 * DAY), [Result("m1", "nightly", LONG, "duration", 2.2e-3, "s"),
                                                          Result("m1", "nightly", "new", "duration", 1.0, "s")]).added
        after = store.series(kernel=LONG, metric="duration")
        assert after["value"].tolist() == [2e-3, 2.1e-3, 2.2e-3] and len(store.series(kernel="new")) == 1


def test_values_hold_series_ids_not_names(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with open_store(path) as store:
        for i in range(3):
            _add(store, i, 1e-3)
    with sqlite3.connect(path) as db:
        columns = [c[1] for c in db.execute("PRAGMA table_info(results)")]
        assert columns[:2] == ["series_id", "run"] and "kernel" not in columns and "run_id" not in columns
        assert db.execute("SELECT count(*) FROM series").fetchone()[0] == 2
        assert db.execute("SELECT count(*) FROM results").fetchone()[0] == 6


def test_batches_hold_whole_kernels_and_add_up_to_series(store_at) -> None:  # noqa: ANN001 (both backends)
    with open_store(store_at()) as store:
        for i in range(4):
            run = RunRecord(f"run-{i}", T0 + i * DAY)
            store.add(run, [Result("m", "s", f"k{k:02d}", metric, float(i + k), "s")
                            for k in range(10) for metric in ("duration", "a", "b")])
        whole = store.series()
        parts = list(store.batches(rows=20))  # 20 values: 5 series of 4 runs, so 2 kernels a part
        assert len(parts) == 5 and all(part["kernel"].nunique() == 2 and len(part) == 24 for part in parts)
        joined = store_module.concat_batches(parts)  # the parts' names stay Categoricals, of every part's names
        assert isinstance(joined["kernel"].dtype, pd.CategoricalDtype) and joined["kernel"].nunique() == 10
        assert store_module.as_text(joined).equals(whole)
        assert [len(p) for p in store.batches(rows=20, last=1, since=T0 + DAY)] == [6] * 5


def test_the_migration_to_series_ids_gives_the_space_back(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    _version_2_store(path)
    with sqlite3.connect(path) as db:  # many old-layout rows, names in each
        db.executemany("INSERT INTO results (run_id, machine, suite, kernel, metric, value, unit) VALUES "
                       "(?, 'm1', 'nightly', ?, 'duration', 1.0, 's')",
                       [(run, f"{LONG}<{i}>") for run in ("r0", "r1", "r2") for i in range(1000)])
    size = path.stat().st_size
    open_store(path).close()
    assert path.stat().st_size < size * 0.5  # without VACUUM the file keeps the dropped tables' pages
    with open_store(path) as store:
        assert len(store.series(suite="nightly", metric="duration")) == 4 + 3000


def test_last_runs_of_each_series_are_ranked_in_sql_as_the_tail_of_the_whole(store_at) -> None:  # noqa: ANN001
    with open_store(store_at()) as store:
        for i, run_id in enumerate(["b", "a", "c", "e", "d"]):  # a and b, d and e: the same time
            store.add(RunRecord(run_id, T0 + (i // 2) * DAY), [Result("m", "s", "k1", "duration", float(i), "s")] +
                      ([Result("m", "s", "k2", "duration", 10.0 + i, "s")] if i % 2 else []))
        whole = store.series()
        expected = whole.groupby(["machine", "suite", "kernel", "metric"], sort=False).tail(2).reset_index(drop=True)
        got = store.series(last=2)
    # k1: a, b at T0, c, e a day later (the run id breaks the tie), d last; k2: a, e
    assert got.equals(expected) and got["run_id"].tolist() == ["e", "d", "a", "e"]


@pytest.mark.parametrize("order", ["appended", "backlog"])
def test_latest_reads_the_named_series_as_series_last_does(store_at, order: str) -> None:  # noqa: ANN001 (both backends)
    # "appended": run numbers follow time, each series' last rows of its index are read;
    # "backlog": older results files imported after newer ones, the runs ranked by time
    import pandas as pd

    nights = list(range(12)) if order == "appended" else [5, 11, 0, 3, 10, 1, 2, 4, 6, 7, 8, 9]
    machine = "mi100_gfx908_rocprofv3"
    with open_store(store_at()) as store:
        for i in nights:
            _add(store, i, 1e-3 * (1 + i / 100))
            if i % 3 == 0:  # a kernel with fewer runs than asked for, and another suite
                store.add(RunRecord(f"k2-{i:03d}", T0 + i * DAY + 60.0),
                          [Result(machine, "stencil", "k2", "duration", 2e-3 + i * 1e-5, "s"),
                           Result(machine, "other", "k1", "duration", 5e-3, "s")])
        got = store.latest(machine=machine, suite="stencil", pairs=[("k1", "duration"), ("k2", "duration"),
                                                                     ("k1", "duration"), ("nope", "duration")], last=5)
        want = store.series(machine=machine, suite="stencil", metric="duration", last=5)
        pd.testing.assert_frame_equal(got, want)
        assert got["run_id"].tolist()[:5] == [f"run-{i:03d}" for i in range(7, 12)]
        assert got["run_id"].tolist()[5:] == [f"k2-{i:03d}" for i in (0, 3, 6, 9)]
        # a metric of None: every metric of that kernel
        pd.testing.assert_frame_equal(store.latest(machine=machine, suite="stencil", pairs=[("k1", None)], last=3),
                                      store.series(machine=machine, suite="stencil", kernel="k1", last=3))
        assert not len(store.latest(machine=machine, suite="stencil", pairs=[("k1", "nope")], last=3))


def test_runs_in_order_is_numbering_by_time_then_run_id() -> None:
    in_order = store_module.runs_in_order
    assert in_order([(1, "a", 10.0), (2, "b", 10.0), (3, "a", 11.0)])  # a tie in time: by run id
    assert in_order([(3, "a", 11.0), (1, "a", 10.0), (2, "b", 10.0)])  # the rows in any order
    assert not in_order([(1, "b", 10.0), (2, "a", 10.0)])
    assert not in_order([(1, "a", 11.0), (2, "b", 10.0)])  # an older results file imported later
    assert not in_order([(1, "a", "10"), (2, "b", 11.0)])  # a damaged time: the ranked query says so
    assert in_order([]) and in_order([(1, "a", 1.0)])


def test_the_runs_of_a_run_id_filter_are_the_rows_of_the_whole(store_at) -> None:  # noqa: ANN001 (both backends)
    """``run_id`` (what ``history copy`` and the Bencher export read run by run) selects
    rows, nothing else: the same columns, order and numbers as the whole frame's rows."""
    with open_store(store_at()) as store:
        for i, run_id in enumerate(["b", "a", "c", "e", "d", "f"]):
            store.add(RunRecord(run_id, T0 + (i // 2) * DAY, commit=f"c{i}"),
                      [Result("m", "s", f"k{k}", metric, float(i + k), "s") for k in range(3) for metric in ("x", "y")])
        store.add(RunRecord("empty", T0 + 9 * DAY), [])
        whole = store.series()
        for chosen, since, last in ((["a", "e"], None, None), ("d", None, None), (["a", "c", "f"], T0 + DAY, None),
                                    (["a", "b", "c", "f"], None, 1), (["empty", "absent"], None, None), ([], None, None)):
            wanted = whole[whole["run_id"].isin([chosen] if isinstance(chosen, str) else chosen)]
            if since is not None:
                wanted = wanted[wanted["time"] >= pd.Timestamp(since, unit="s", tz="UTC")]
            if last is not None:
                wanted = wanted.groupby(["machine", "suite", "kernel", "metric"], sort=False).tail(last)
            got = store.series(run_id=chosen, since=since, last=last)
            if wanted.empty:  # no rows: only the columns to compare (an empty frame's dtypes are its own)
                assert got.empty and list(got.columns) == list(whole.columns)
                continue
            assert got.equals(wanted.reset_index(drop=True)), (chosen, since, last)
            parts = list(store.batches(run_id=chosen, since=since, last=last, rows=2))  # one kernel a part
            assert all(part["kernel"].nunique() == 1 for part in parts)
            assert store_module.as_text(store_module.concat_batches(parts)).equals(got)
        assert len(store.series(run_id=["a", "e"])) == 12


ORDER_NAMES = ["kern_b", "kern_B", "kern_a", "kern_É", "kern_e", "kern_é", "kern_Z", "kern_z"]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_series_are_listed_in_byte_order_on_both_backends(backend: str, tmp_path: Path,
                                                           request: pytest.FixtureRequest) -> None:
    """Names that differ only in case or accents sort by their bytes on both stores
    (PostgreSQL sorted series_keys by the database's collation: with an ICU or
    en_US one, "kern_B" came after "kern_b" there and before it in SQLite)."""
    if backend == "sqlite":
        location: object = tmp_path / "h.sqlite"
    else:
        server = request.getfixturevalue("pg_server")
        name = f"icu_{os.getpid()}"
        # a database whose own collation is not byte order, as most servers' are (en_US.UTF-8)
        server.execute(f"CREATE DATABASE \"{name}\" OWNER alice TEMPLATE template0 LOCALE_PROVIDER icu "
                       "ICU_LOCALE 'en-US' LOCALE 'C'")
        request.addfinalizer(lambda: server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        location = server.url(name)
    with open_store(location) as store:  # type: ignore[arg-type]
        store.add(RunRecord("r1", T0), [Result(machine, suite, kernel, metric, 1.0, "s")
                                        for machine in ("m_a", "M_b") for suite in ("s",) for kernel in ORDER_NAMES
                                        for metric in ("Dur", "dur", "dür")])
        keys = store.series_keys()
        frame = store.series()
        parts = list(store.batches(rows=3))
    expected = sorted((m, "s", k, me) for m in ("m_a", "M_b") for k in ORDER_NAMES for me in ("Dur", "dur", "dür"))
    assert expected == sorted(expected, key=lambda key: tuple(part.encode() for part in key))  # code points = UTF-8 bytes
    assert list(keys.itertuples(index=False, name=None)) == expected
    assert list(frame[["machine", "suite", "kernel", "metric"]].itertuples(index=False, name=None)) == expected
    assert [part["kernel"].iloc[0] for part in parts] == [k for _, _, k, me in expected if me == "Dur"]


def _seeded(store) -> None:  # noqa: ANN001
    for i, run_id in enumerate(["b", "a", "c"]):  # a and b: the same time (the run id breaks the tie)
        store.add(RunRecord(run_id, T0 + (i // 2) * DAY, commit=f"c{i}" if i else None, branch="main"),
                  [Result("m", "s", f"k{k}", metric, float(i + k), "s", n=10 + i, median=1.0, spread=0.1,
                          outcome="passed" if metric == "duration" else "")
                   for k in range(3) for metric in ("duration", "hbm_bw")])


def test_batches_give_the_columns_asked_for_with_the_values_of_the_whole_read(store_at) -> None:  # noqa: ANN001
    with open_store(store_at()) as store:
        _seeded(store)
        whole = store.series()
        for columns in (("kernel", "value"), ("value", "machine", "run_id", "outcome", "n"), ("time", "commit"),
                        ("unit",), store_module.SERIES_COLUMNS):
            parts = list(store.batches(columns=columns, rows=4))
            assert len(parts) == 3 and all(sorted(part.columns) == sorted(columns) for part in parts)
            got = store_module.as_text(store_module.concat_batches(parts))
            assert list(got.columns) == [c for c in store_module.SERIES_COLUMNS if c in columns]  # in series' order
            assert got.equals(whole[list(got.columns)]), columns
        last = store_module.as_text(store_module.concat_batches(store.batches(columns=("value", "run_id"), last=1)))
        assert last.equals(store.series(last=1)[["run_id", "value"]])
        with pytest.raises(ValueError, match="not a column of a series: valu"):
            list(store.batches(columns=("valu",)))


def test_batches_fetch_only_the_value_columns_asked_for(store_at, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    with open_store(store_at()) as store:
        _seeded(store)
        queries: list[str] = []
        rows = type(store)._rows
        monkeypatch.setattr(type(store), "_rows", lambda self, sql, params=(): queries.append(sql) or rows(self, sql, params))
        assert len(list(store.batches(columns=("kernel", "value", "commit")))) == 1
    read = [sql for sql in queries if "FROM results v" in sql]  # the values' reads (not the damage check's step)
    assert read and all(sql.startswith("SELECT v.series_id, v.run, v.value FROM results") for sql in read), read


def test_a_part_names_are_categoricals_equal_to_the_names_in_byte_order(store_at) -> None:  # noqa: ANN001
    # odd names round-trip: a NUL inside and at the end (SQLite: PostgreSQL's text holds no NUL),
    # a newline, accents (one and two code points), a character beyond the BMP, a long template;
    # sorted by their bytes (upper case first)
    where = store_at()
    odd = ["k\x00x", "k\x00"] if isinstance(where, Path) else ["k.x", "k"]
    odd += ["line\nbreak", "caf\u00e9", "cafe\u0301", "\U0001d6fc_kernel", "B_kernel", "a_kernel",
            "void f<" + "int, " * 300 + "int>(float*)"]
    with open_store(where) as store:
        for i in range(3):
            store.add(RunRecord(f"r{i}", T0 + i * DAY), [Result("m\u00fc", "s", k, "duration", float(i), "s") for k in odd])
        parts = list(store.batches())
        whole = store.series()
    part = parts[0]
    assert len(parts) == 1 and all(isinstance(part[c].dtype, pd.CategoricalDtype)
                                   for c in ("machine", "suite", "kernel", "metric", "run_id"))
    assert part["kernel"].tolist() == [k for k in sorted(odd) for _ in range(3)] == whole["kernel"].tolist()
    assert list(part["kernel"].cat.categories) == sorted(odd)  # only this part's names, sorted as text
    assert (part["kernel"] == odd[1]).sum() == 3 and (part["machine"] == "m\u00fc").all()
    assert part["run_id"].tolist() == ["r0", "r1", "r2"] * len(odd)
    # what callers do with the names: group and sort as text, the .str accessor, unique, JSON
    assert [k for k, _ in part.groupby("kernel", sort=True, observed=True)] == sorted(odd)
    assert list(part.groupby("kernel", sort=False, observed=True).size().index) == sorted(odd)
    assert part.sort_values("kernel", kind="stable")["kernel"].tolist() == whole.sort_values(
        "kernel", kind="stable")["kernel"].tolist()
    assert part["kernel"].str.startswith(odd[1]).sum() == 6
    assert sorted(part["kernel"].unique()) == sorted(odd)
    assert part[["kernel", "run_id"]].to_json(orient="records") == whole[["kernel", "run_id"]].to_json(orient="records")
    assert not isinstance(whole["kernel"].dtype, pd.CategoricalDtype)  # series(): text, as before


def test_a_read_of_some_columns_still_refuses_a_damaged_store(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with open_store(path) as store:
        _seeded(store)
    with sqlite3.connect(path) as db:  # another tool wrote text into a number column
        db.execute("UPDATE results SET median = 'abc' WHERE run = (SELECT run FROM runs WHERE run_id = 'c')")
    with open_store(path) as store:
        assert len(store_module.concat_batches(store.batches(columns=("kernel", "value")))) == 18  # median not read
        with pytest.raises(InputError, match=r"column 'median' holds 'abc' in 6 row\(s\), not a number"):
            list(store.batches(columns=("kernel", "median")))
    with sqlite3.connect(path) as db:  # an impossible run time: refused though the time is not asked for
        db.execute("UPDATE runs SET time = 1e12 WHERE run_id = 'a'")
    with open_store(path) as store:
        with pytest.raises(InputError, match=r"run 'a' has time .*outside 1970-2200"):
            list(store.batches(columns=("kernel", "value")))
        assert len(store_module.concat_batches(store.batches(columns=("kernel", "value"), run_id=["b", "c"]))) == 12


def test_a_frame_of_damaged_rows_gets_the_store_s_own_message(tmp_path: Path) -> None:
    # what a reader that found rows it cannot convert raises (the gate's lean read does)
    with open_store(tmp_path / "h.sqlite") as store:
        frame = pd.DataFrame({"run_id": ["a", "b"], "time": [T0, T0], "value": [1.0, b"\x01"]})
        with pytest.raises(InputError, match=r"column 'value' holds b'\\x01' in 1 row\(s\), not a number"):
            store._clean(frame)
        frame = pd.DataFrame({"run_id": ["a", "b"], "time": [T0, 1e12], "value": [1.0, 2.0]})
        with pytest.raises(InputError, match=r"run 'b' has time .*outside 1970-2200"):
            store._clean(frame)
        frame = pd.DataFrame({"run_id": ["a"], "time": [T0], "value": [None], "n": [3]})
        store._clean(frame)
        assert frame["value"].isna().all() and frame["n"].tolist() == [3.0]
