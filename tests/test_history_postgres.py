"""The PostgreSQL history store against a real server (tests/pgserver.py), and what
holds on both backends: concurrent writers, a writer killed mid-run, `history copy`,
errors that are one line with the password masked, the dashboards' view."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfcheck.errors import InputError, UsageError
from perfcheck.history import Machine, Result, RunRecord, open_store
from perfcheck.history import pgstore
from perfcheck.history import store as sqlite_store
from perfcheck.storeurl import MASK, StoreURL, mask_password, masked_in, store_location
from tests import pgserver
from tests.conftest import one_line_error

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "team-history.md"
T0 = 1_767_225_600.0
MACHINE = "mi250x_gfx90a_rocprofv3-1.0.0"


def _run(store, run_id: str, i: int, values: int = 3) -> bool:  # noqa: ANN001
    rows = [Result(MACHINE, "nightly", f"k{k}", "duration", 1e-3 * (1 + k + i / 1000), "s", n=10, median=1e-3,
                   spread=0.01, outcome="passed", low=None, high=2e-3) for k in range(values)]
    return store.add(RunRecord(run_id, T0 + i * 60.0, commit=f"{i:040x}", branch="main", ci_system="github",
                               ci_job="nightly/1", host="runner-1"),
                     rows, [Machine(MACHINE, {"device": "mi250x", "arch": "gfx90a"})]).added


# --- URLs: never a file, always masked ----------------------------------------------------------------

def test_a_url_is_kept_as_a_url_and_prints_masked(tmp_path: Path) -> None:
    url = store_location("postgresql://ci:hunter2@db.example:5432/perf?sslmode=require&password=other")
    assert isinstance(url, StoreURL) and url.secret.startswith("postgresql://ci:hunter2@")
    for shown in (str(url), repr(url), f"{url}"):
        assert "hunter2" not in shown and "other" not in shown and MASK in shown and "db.example:5432/perf" in shown
    assert store_location("postgres://u@h/db").scheme == "postgres"
    assert store_location("perf.sqlite", base=tmp_path) == tmp_path / "perf.sqlite"
    assert mask_password("postgresql://u@h/db") == "postgresql://u@h/db"  # nothing to mask
    assert masked_in('failed for "hunter%2A" and hunter*', StoreURL("postgresql://u:hunter%2A@h/d")) == \
        f'failed for "{MASK}" and {MASK}'
    with pytest.raises(UsageError, match="unknown URL scheme 'mysql'"):
        store_location("mysql://u:pw@h/db")


def test_the_settings_keep_a_url_from_every_source_and_never_carry_its_password(tmp_path: Path) -> None:
    from perfcheck.config import SuiteSettings, resolver

    url = "postgresql://ci:hunter2@db.example/perf"
    (tmp_path / "perfcheck.toml").write_text(f'history = "{url}"\n[suites.s]\nprofiles = ["p.csv"]\n')
    for cli, env in (({"history": url}, {}), ({}, {"PERFCHECK_HISTORY": url}), ({}, {})):
        found = resolver(cli=cli, env=env, cwd=tmp_path).get("history")
        assert found is not None and isinstance(found.value, StoreURL) and found.value.secret == url
    settings = resolver(cwd=tmp_path).suite("s", validate=False)
    doc = settings.as_dict()  # travels in pytest reports (pytest-xdist, report logs)
    assert "hunter2" not in repr(doc) and doc["history"] == "postgresql://ci:***@db.example/perf"
    assert str(SuiteSettings.from_dict(doc).history) == doc["history"]


def test_without_psycopg_a_url_is_a_one_line_error(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    monkeypatch.chdir(tmp_path)
    result = cli("history", "list", "--history", "postgresql://ci:hunter2@127.0.0.1:1/perf")
    line = one_line_error(result, None, "pip install 'psycopg[binary]'", "postgres extra", "postgresql://ci:***@127.0.0.1:1/perf")
    assert "hunter2" not in line
    assert list(tmp_path.iterdir()) == []  # no file named after the URL


@pytest.mark.parametrize("command", [("history", "list"), ("history", "prune", "--keep-days", "1"), ("check",)])
def test_an_unknown_scheme_is_never_a_file(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                          command: tuple[str, ...]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.json").write_text("{}")
    monkeypatch.setenv("PERFCHECK_HISTORY", "mysql://ci:hunter2@db/perf")
    line = one_line_error(cli(*command), None, "mysql://ci:***@db/perf")
    assert "hunter2" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_connection_refused_is_one_line_exit_2(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'psycopg[binary]')")
    monkeypatch.chdir(tmp_path)
    with __import__("socket").socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://ci:hunter2@127.0.0.1:{port}/perf"
    for args in (("history", "list", "--history", url), ("history", "detect", "--history", url)):
        line = one_line_error(cli(*args), None, f"postgresql://ci:***@127.0.0.1:{port}/perf", "Connection refused")
        assert "hunter2" not in line


# --- against a real server ----------------------------------------------------------------------------

def test_a_wrong_password_is_one_line_and_masked(cli, pg_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    pg_server.create_database("wrongpw")
    url = pg_server.password_url("wrongpw", password="not-the-password")
    line = one_line_error(cli("history", "list", "--history", url), None, "password authentication failed",
                          f"postgresql://{pgserver.PASSWORD_USER}:***@127.0.0.1:{pg_server.port}/wrongpw")
    assert "not-the-password" not in line
    # the right one: the store is created by `history add` and read back by the same user
    right = pg_server.password_url("wrongpw")
    with open_store(right) as store:
        assert _run(store, "r1", 1)
    listing = cli("history", "list", "--history", right)
    assert listing.code == 0 and "r1" in listing.out and pgserver.PASSWORD not in listing.out + listing.err
    copied = cli("history", "copy", right, tmp_path / "copy.sqlite")
    assert copied.code == 0 and f"from postgresql://{pgserver.PASSWORD_USER}:***@" in copied.out
    assert pgserver.PASSWORD not in copied.out + copied.err


def test_the_password_may_come_from_pgpassword(pg_server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    pg_server.create_database("envpw")
    url = f"postgresql://{pgserver.PASSWORD_USER}@127.0.0.1:{pg_server.port}/envpw"
    monkeypatch.setenv("PGPASSWORD", "wrong")
    with pytest.raises(InputError, match="password authentication failed"):
        open_store(url)
    monkeypatch.setenv("PGPASSWORD", pgserver.PASSWORD)
    with open_store(url) as store:
        assert store.version == sqlite_store.SCHEMA_VERSION


def test_the_password_may_come_from_a_pgpass_file(pg_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    pg_server.create_database("pgpass")
    url = f"postgresql://{pgserver.PASSWORD_USER}@127.0.0.1:{pg_server.port}/pgpass"
    monkeypatch.delenv("PGPASSWORD", raising=False)
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg_server.port}:pgpass:{pgserver.PASSWORD_USER}:{pgserver.PASSWORD}\n")
    passfile.chmod(0o600)  # libpq ignores a password file others can read
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    with open_store(url) as store:
        assert _run(store, "r1", 1)


def test_newer_schema_and_foreign_tables_are_refused(cli, pg_server, tmp_path: Path,  # noqa: ANN001
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = pg_server.create_database("newer")
    open_store(url).close()
    pg_server.execute(f"UPDATE perfcheck_schema SET version = {pgstore.SCHEMA_VERSION + 1}", "newer")
    one_line_error(cli("history", "list", "--history", url), None, "newer than this perfcheck", "upgrade perfcheck")
    other = pg_server.create_database("someone_elses")
    pg_server.execute("CREATE TABLE runs (id integer)", "someone_elses")
    with pytest.raises(InputError, match="not a perfcheck history store"):
        open_store(other)
    empty = pg_server.create_database("empty")
    one_line_error(cli("history", "detect", "--history", empty), None, "no perfcheck history store in this database")
    assert pg_server.execute("SELECT to_regclass('perfcheck_schema') IS NULL", "empty") == [(True,)]  # not created


def test_a_schema_named_in_the_url_keeps_the_store_beside_other_tables(pg_server) -> None:  # noqa: ANN001
    url = pg_server.create_database("shared")
    pg_server.execute("CREATE TABLE runs (id integer); CREATE SCHEMA perf", "shared")  # someone else's runs
    with pytest.raises(InputError, match="search_path"):
        open_store(url)
    with open_store(url + "&options=-csearch_path%3Dperf") as store:
        assert _run(store, "r1", 1)
    assert pg_server.execute("SELECT count(*) FROM perf.results", "shared") == [(3,)]
    assert pg_server.execute("SELECT count(*) FROM public.runs", "shared") == [(0,)]


def test_both_backends_have_the_same_schema(pg_server, tmp_path: Path) -> None:  # noqa: ANN001
    """Same tables, columns and version: a migration added to one backend only fails here."""
    assert len(pgstore.PG_MIGRATIONS) == len(sqlite_store.MIGRATIONS)
    url = pg_server.create_database("schema")
    open_store(url).close()
    path = tmp_path / "h.sqlite"
    open_store(path).close()
    with sqlite3.connect(path) as db:
        lite = {t: [c[1] for c in db.execute(f"PRAGMA table_info({t})")]
                for t in ("machines", "runs", "series", "results")}
    pg = {t: [c for (c,) in pg_server.execute(
        f"SELECT column_name FROM information_schema.columns WHERE table_name = '{t}' ORDER BY ordinal_position",
        "schema")] for t in ("machines", "runs", "series", "results")}
    assert pg == lite


def test_an_older_store_is_migrated_in_place(pg_server) -> None:  # noqa: ANN001
    url = pg_server.create_database("older")
    # a version-1 store (before low/high and before series ids), as perfcheck wrote it then
    pg_server.execute(pgstore.PG_MIGRATIONS[0] + "; CREATE TABLE perfcheck_schema (version integer NOT NULL); "
                      "INSERT INTO perfcheck_schema VALUES (1); "
                      f"INSERT INTO runs VALUES ('r1', {T0}, 'c1', 'main', NULL, NULL, NULL, NULL, NULL, {T0}); "
                      f"INSERT INTO machines VALUES ('{MACHINE}', '{{}}'); "
                      "INSERT INTO results (run_id, machine, suite, kernel, metric, value, unit) VALUES "
                      f"('r1', '{MACHINE}', 'nightly', 'k0', 'duration', 1e-3, 's'), "
                      f"('r1', '{MACHINE}', 'nightly', 'k1', 'duration', 2e-3, 's'), "
                      f"('r1', '{MACHINE}', 'nightly', 'k2', 'duration', 3e-3, 's')", "older")
    with open_store(url) as store:
        assert store.version == pgstore.SCHEMA_VERSION
        frame = store.series()
    assert frame["value"].tolist() == [1e-3, 2e-3, 3e-3] and frame["high"].isna().all()  # kept, new columns there


def test_a_version_3_store_gets_the_value_in_its_key(pg_server) -> None:  # noqa: ANN001
    # version 4: the values' primary key carries the value (INCLUDE), so a series' values
    # are read from the key's range alone; a version-3 store keeps every value
    url = pg_server.create_database("v3")
    with open_store(url) as store:
        for i in range(3):
            assert _run(store, f"r{i}", i)
        before = store.series()
    pg_server.execute("ALTER TABLE results DROP CONSTRAINT results_pkey; "
                      "ALTER TABLE results ADD CONSTRAINT results_v3_pkey PRIMARY KEY (series_id, run); "
                      "UPDATE perfcheck_schema SET version = 3", "v3")
    with open_store(url) as store:
        assert store.version == pgstore.SCHEMA_VERSION == 4
        assert store.series().equals(before)
        assert _run(store, "r3", 3)
    keys = pg_server.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'results'", "v3")
    assert keys == [("CREATE UNIQUE INDEX results_pkey ON public.results USING btree (series_id, run) INCLUDE (value)",)]


def test_the_dashboard_view_and_the_documented_grafana_query(pg_server) -> None:  # noqa: ANN001
    url = pg_server.create_database("grafana")
    with open_store(url) as store:
        for i in range(4):
            _run(store, f"r{i}", i)
    rows = pg_server.execute("SELECT time, commit, machine, suite, kernel, metric, value, unit FROM perfcheck_series "
                             "WHERE kernel = 'k0' ORDER BY time", "grafana")
    assert len(rows) == 4 and rows[0][0].timestamp() == T0 and rows[0][1] == f"{0:040x}" and rows[0][7] == "s"
    # the query the docs give, with Grafana's macros as Grafana expands them
    text = DOCS.read_text(encoding="utf-8")
    query = re.search(r"```sql grafana\n(.*?)```", text, re.S)
    assert query, "docs/team-history.md shows the Grafana query in a ```sql grafana block"
    sql = (query[1].replace("$__timeFilter(time)", "time BETWEEN '2025-01-01' AND '2027-01-01'")
           .replace("'$machine'", f"'{MACHINE}'").replace("'$suite'", "'nightly'").replace("'$metric'", "'duration'"))
    found = pg_server.execute(sql, "grafana")
    assert len(found) == 12 and {r[2] for r in found} == {"k0", "k1", "k2"}


# --- both backends --------------------------------------------------------------------------------

WRITERS, RUNS_EACH, VALUES_EACH = 16, 50, 3


def _writer(location: str, worker: int, barrier, timings) -> None:  # noqa: ANN001
    with open_store(location) as store:
        barrier.wait()  # every writer appends at the same moment
        start = time.perf_counter()
        for i in range(RUNS_EACH):
            _run(store, f"w{worker:02d}-{i:03d}", worker * RUNS_EACH + i, VALUES_EACH)
        timings.put((time.perf_counter() - start) / RUNS_EACH)


def test_concurrent_writers_lose_and_duplicate_nothing(store_at) -> None:  # noqa: ANN001
    """16 processes x 50 runs appended at once: every run once, every value once."""
    location = str(store_at())
    open_store(location).close()  # the schema exists; creating it at once is test_history_store's parallel test
    context = multiprocessing.get_context("spawn")
    barrier, timings = context.Barrier(WRITERS), context.Queue()
    workers = [context.Process(target=_writer, args=(location, w, barrier, timings)) for w in range(WRITERS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)
    assert [w.exitcode for w in workers] == [0] * WRITERS
    with open_store(location, create=False) as store:
        runs, series = store.runs(), store.series()
    assert len(runs) == WRITERS * RUNS_EACH and runs["run_id"].is_unique
    assert len(series) == WRITERS * RUNS_EACH * VALUES_EACH
    assert not series.duplicated(["run_id", "machine", "suite", "kernel", "metric"]).any()
    assert (runs["values"] == VALUES_EACH).all()


_KILLED = """
import sys, time
from perfcheck.history import Result, RunRecord, open_store
with open_store(sys.argv[1]) as store:
    for i in range(100000):
        rows = [Result("m", "s", f"k{{k}}", "duration", 1.0 + k, "s") for k in range({values})]
        store.add(RunRecord(f"run-{{i:05d}}", 1.0e9 + i), rows)
        print(i, flush=True)
"""


def test_a_writer_killed_mid_run_leaves_no_half_run(store_at) -> None:  # noqa: ANN001
    location = str(store_at())
    open_store(location).close()
    values = 20000  # a run takes long enough to be killed inside its transaction
    writer = subprocess.Popen([sys.executable, "-c", _KILLED.format(values=values), location],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert writer.stdout is not None
    writer.stdout.readline()
    writer.stdout.readline()  # two runs committed: the third is being written
    time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert writer.returncode == -signal.SIGKILL
    with open_store(location, create=False) as store:
        runs = store.runs()
    assert len(runs) >= 2 and (runs["values"] == values).all(), runs[["run_id", "values"]]


def test_copy_between_backends_is_idempotent(cli, store_at, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """SQLite -> the parametrised backend -> SQLite: the same runs and values; twice adds nothing."""
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "first.sqlite"
    with open_store(first) as store:
        for i in range(6):
            _run(store, f"r{i}", i)
        store.add(RunRecord("empty", T0 + 999.0), [])  # a run without values is copied too
    middle, last = str(store_at("middle")), tmp_path / "last.sqlite"
    copied = cli("history", "copy", first, middle)
    assert copied.code == 0 and "copied 7 runs (18 values)" in copied.out and "0 already there" in copied.out
    again = cli("history", "copy", first, middle)
    assert "copied 0 runs (0 values)" in again.out and "7 already there" in again.out
    assert cli("history", "copy", middle, last).code == 0
    with open_store(first) as a, open_store(last) as b:
        for frame_a, frame_b in ((a.series(), b.series()), (a.runs().drop(columns="added"), b.runs().drop(columns="added"))):
            assert frame_a.equals(frame_b)
        assert a.machines() == b.machines()
    one_line_error(cli("history", "copy", "absent.sqlite", last), None, "no such history store")


def test_read_only_history_mode_refuses_writing_commands(cli, store_at, tmp_path: Path,  # noqa: ANN001
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    location = str(store_at())
    with open_store(location) as store:
        _run(store, "r1", 1)
    monkeypatch.setenv("PERFCHECK_HISTORY_MODE", "read-only")
    one_line_error(cli("history", "prune", "--history", location, "--keep-days", "0"), None,
                   "read-only here (PERFCHECK_HISTORY_MODE")
    assert cli("history", "list", "--history", location).code == 0  # reading is what it is for
    with open_store(location) as store:
        assert len(store.runs()) == 1


def test_report_export_detect_and_list_are_the_same_on_both_backends(cli, pg_server, tmp_path: Path,  # noqa: ANN001
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.dashboard_data import fill_store

    monkeypatch.chdir(tmp_path)
    lite = fill_store(tmp_path / "h.sqlite")
    url = pg_server.create_database("same")
    assert cli("history", "copy", lite, url).code == 0
    outputs = {}
    for name, store in (("sqlite", str(lite)), ("postgresql", url)):
        out = tmp_path / name
        texts = [cli("history", "report", "--history", store, "--html", out / "site", "--markdown", out / "digest.md"),
                 cli("history", "export", "--history", store, "--openmetrics", out / "om.txt", "--prometheus",
                     out / "prom.txt", "--bencher", out / "bencher"),
                 cli("history", "detect", "--history", store, "--json"),
                 cli("history", "list", "--history", store, "--json")]
        # detect exits 1: the step is a regression nobody accepted, open on both backends
        assert [t.code for t in texts] == [0, 0, 1, 0], [t.err for t in texts]
        assert json.loads(texts[2].out)["findings"]  # the step and the improvement
        files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
        listing = json.loads(texts[3].out)["runs"]
        for run in listing:
            run.pop("added")  # when each store got the run
        outputs[name] = (files, texts[2].out, listing)
    (files_a, detect_a, list_a), (files_b, detect_b, list_b) = outputs["sqlite"], outputs["postgresql"]
    assert sorted(files_a) == sorted(files_b) and len(files_a) > 5
    assert [k for k in files_a if files_a[k] != files_b[k]] == []
    assert detect_a == detect_b and list_a == list_b


def test_both_backends_implement_the_store_interface() -> None:
    import inspect

    from perfcheck.history.backend import HistoryStore
    from perfcheck.history.pgstore import PostgresStore

    members = {n for n, _ in inspect.getmembers(HistoryStore) if not n.startswith("_")} | {"__enter__", "__exit__"}
    assert {"add", "prune", "runs", "series", "machines", "version", "close"} <= members
    for backend in (sqlite_store.Store, PostgresStore):
        for name in members - {"version"}:
            ours, theirs = inspect.signature(getattr(backend, name)), inspect.signature(getattr(HistoryStore, name))
            assert list(ours.parameters) == list(theirs.parameters), (backend.__name__, name)
        assert isinstance(inspect.getattr_static(backend, "version"), property)


def test_a_set_of_ids_or_names_is_joined_typed_and_an_empty_one_matches_nothing(pg_server) -> None:  # noqa: ANN001
    # ``_any`` joins the set (``IN (SELECT unnest(...))``) instead of ``= ANY(array)``: a
    # read of a whole metric slice made the array's bitmap scan lossy, rechecked row by row
    # against every id (60 s a query at 365 nights x 2,000 kernels). The array must be
    # typed (a list of text is sent as an array of unknown type) and an empty set is no term.
    url = pg_server.create_database("anyset")
    with open_store(url) as store:
        store.add(RunRecord(run_id="r1", time=1.7e9), [Result("m", "s", "k1", "duration", 1.0, "s"),
                                                       Result("m", "s", "k2", "duration", 2.0, "s")],
                  [Machine("m", {"device": "mi300x"})])
        ids = [row[0] for row in store._rows("SELECT series_id FROM series ORDER BY series_id")]
        for column, values, found in (("series_id", ids, 2), ("series_id", ids[:1], 1), ("kernel", ["k2", "x"], 1),
                                      ("kernel", [], 0), ("series_id", [], 0)):
            term, params = store._any(column, values)
            assert store._rows(f"SELECT count(*) FROM series WHERE {term}", params)[0][0] == found, (column, values)
        assert len(store.values(metric="duration").value) == 2
