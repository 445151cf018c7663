"""The history store on a PostgreSQL server: one store that every CI job of a team
writes directly, at the same time, and that dashboards (Grafana) query.

Opened by ``open_store("postgresql://user@host/db")`` (or ``postgres://``); a path
keeps the SQLite store (``perfcheck.history.store``), whose tables, columns, schema
version and behaviour this backend repeats, so ``list/add/prune/detect/report/export``
and the gate cannot tell them apart. The adapter is psycopg 3, an optional extra
(perfcheck's ``postgres`` extra, or ``pip install 'psycopg[binary]'``). Credentials come from the URL, the ``PG*``
variables or ``~/.pgpass`` (libpq reads those); messages show the URL masked.

Schema: the tables of ``store.MIGRATIONS`` in PostgreSQL's types, ``PG_MIGRATIONS[i]``
taking a store from version i to i + 1 (``test_history_postgres`` checks that both
backends have as many), and the version in ``perfcheck_schema``; since version 4 the
values' primary key carries the value (``INCLUDE``, PostgreSQL 11 or later). Migrations run in
one transaction under an advisory lock, so many jobs opening a new store at once
create it once. One view is an interface for dashboards, stable across versions::

    perfcheck_series(time timestamptz, commit, machine, suite, kernel, metric,
                     value, unit, run_id, branch)     one row per run x series value

Concurrency is by transactions, not by luck: ``add`` is one transaction whose first
statement claims the run id (``INSERT ... ON CONFLICT DO NOTHING``: a second writer of
the same run waits for the first, then finds it stored); a writer killed mid-run
leaves nothing, as the server rolls back an uncommitted transaction.
"""

from __future__ import annotations

import contextlib
import json
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from perfcheck.documents import json_loads
from perfcheck.errors import InputError, UsageError
from perfcheck.history.backend import (MAX_IDS, VALUE_COLUMNS, SeriesReader, as_text, concat_batches,
                                       series_batches, values_sql)
from perfcheck.history.latest import LEAN_COLUMNS, LatestValues, latest_values
from perfcheck.history.store import (
    AddResult,
    Machine,
    Result,
    RunRecord,
    run_summary,
    runs_frame,
    runs_in_order,
    same_run_sql,
    same_values,
    stored_rows,
    UpgradeRefused,
    upgrade_refused,
    value_rows,
    ValueRows,
)
from perfcheck.storeurl import StoreURL, masked_in

if TYPE_CHECKING:
    import pandas as pd

INSTALL_HINT = "install psycopg 3: pip install 'psycopg[binary]' (or perfcheck with its postgres extra)"
# pg_advisory_xact_lock key for migrations: "pckh" in ASCII, as the SQLite store's application_id
MIGRATION_LOCK = 0x70636B68
CONNECT_TIMEOUT_S = 10  # libpq waits forever by default on a silent host (a firewall dropping packets)

PG_MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1 (store.MIGRATIONS[0] in PostgreSQL's types: REAL -> double precision)
    """
    CREATE TABLE machines (
        machine text PRIMARY KEY,
        fingerprint text NOT NULL
    );
    CREATE TABLE runs (
        run_id text PRIMARY KEY,
        time double precision NOT NULL,
        commit_sha text,
        branch text,
        ci_system text,
        ci_job text,
        ci_url text,
        host text,
        source text,
        added double precision NOT NULL
    );
    CREATE INDEX runs_time ON runs(time);
    CREATE TABLE results (
        run_id text NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        machine text NOT NULL REFERENCES machines(machine),
        suite text NOT NULL,
        kernel text NOT NULL,
        metric text NOT NULL,
        value double precision,
        unit text NOT NULL DEFAULT '',
        n bigint,
        median double precision,
        spread double precision,
        outcome text,
        PRIMARY KEY (run_id, machine, suite, kernel, metric)
    );
    CREATE INDEX results_series ON results(machine, suite, kernel, metric);
    """,
    # 1 -> 2: the budget each value was checked against (the dashboard's band)
    """
    ALTER TABLE results ADD COLUMN low double precision;
    ALTER TABLE results ADD COLUMN high double precision;
    """,
    # 2 -> 3 (store.MIGRATIONS[2]): series named once, values keyed by integers (issue 22);
    # the view reads the old tables, so it goes first and is made again after the migration
    """
    DROP VIEW IF EXISTS perfcheck_series;
    CREATE TABLE series (
        series_id bigserial PRIMARY KEY,
        machine text NOT NULL REFERENCES machines(machine),
        suite text NOT NULL,
        kernel text NOT NULL,
        metric text NOT NULL,
        UNIQUE (machine, suite, kernel, metric)
    );
    INSERT INTO series (machine, suite, kernel, metric)
        SELECT machine, suite, kernel, metric FROM results GROUP BY machine, suite, kernel, metric
        ORDER BY machine COLLATE "C", suite COLLATE "C", kernel COLLATE "C", metric COLLATE "C";
    CREATE TABLE runs_v3 (
        run bigserial PRIMARY KEY,
        run_id text NOT NULL UNIQUE,
        time double precision NOT NULL,
        commit_sha text,
        branch text,
        ci_system text,
        ci_job text,
        ci_url text,
        host text,
        source text,
        added double precision NOT NULL,
        machines text,
        suites text,
        n_values bigint NOT NULL DEFAULT 0
    );
    INSERT INTO runs_v3 (run_id, time, commit_sha, branch, ci_system, ci_job, ci_url, host, source, added,
                         machines, suites, n_values)
        SELECT r.run_id, r.time, r.commit_sha, r.branch, r.ci_system, r.ci_job, r.ci_url, r.host, r.source, r.added,
               (SELECT string_agg(DISTINCT v.machine, ',' ORDER BY v.machine) FROM results v WHERE v.run_id = r.run_id),
               (SELECT string_agg(DISTINCT v.suite, ',' ORDER BY v.suite) FROM results v WHERE v.run_id = r.run_id),
               (SELECT count(*) FROM results v WHERE v.run_id = r.run_id)
        FROM runs r ORDER BY r.time, r.run_id COLLATE "C";
    CREATE TABLE results_v3 (
        series_id bigint NOT NULL,
        run bigint NOT NULL,
        value double precision,
        unit text NOT NULL DEFAULT '',
        n bigint,
        median double precision,
        spread double precision,
        outcome text,
        low double precision,
        high double precision,
        PRIMARY KEY (series_id, run)
    );
    INSERT INTO results_v3
        SELECT s.series_id, r.run, v.value, v.unit, v.n, v.median, v.spread, v.outcome, v.low, v.high
        FROM results v JOIN series s ON s.machine = v.machine AND s.suite = v.suite AND s.kernel = v.kernel
             AND s.metric = v.metric
        JOIN runs_v3 r ON r.run_id = v.run_id;
    DROP TABLE results;
    DROP TABLE runs;
    ALTER TABLE runs_v3 RENAME TO runs;
    ALTER TABLE results_v3 RENAME TO results;
    CREATE INDEX runs_time ON runs(time);
    """,
    # 3 -> 4: the values' key holds the value too (INCLUDE), so reading a series' values is a
    # scan of its key range alone (an index-only scan, where the pages are all-visible). A
    # run's values are written together, so without it a series lies on a heap page per night:
    # `detect --relative` reads each metric of 2,000 kernels over 365 nights, 730,000 heap
    # pages a metric, 2.8 s against 0.6 s from the key (EXPLAIN ANALYZE; the whole command
    # 81 s against 50 s, docs/history-scale.md). The key grows by the value's 8 bytes.
    """
    ALTER TABLE results DROP CONSTRAINT results_v3_pkey;
    ALTER TABLE results ADD CONSTRAINT results_pkey PRIMARY KEY (series_id, run) INCLUDE (value);
    """,
)
SCHEMA_VERSION = len(PG_MIGRATIONS)

# The dashboards' interface (docs/team-history.md): re-created after every migration,
# so a later schema keeps these columns.
SERIES_VIEW = """
CREATE OR REPLACE VIEW perfcheck_series AS
SELECT to_timestamp(r.time) AS time, r.commit_sha AS commit, s.machine, s.suite, s.kernel, s.metric,
       v.value, v.unit, r.run_id, r.branch
FROM results v JOIN runs r ON r.run = v.run JOIN series s ON s.series_id = v.series_id
"""


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        return None
    return psycopg


def _one_line(exc: BaseException, url: StoreURL) -> str:
    """A driver's message on one line (libpq's span several: "connection to server at
    ... failed: Connection refused\\n\\tIs the server running ..."), password masked."""
    return masked_in(" ".join(str(exc).split()), url) or type(exc).__name__


class NoStore(InputError):
    """The database is there but holds no perfcheck store (opened with create=False)."""


class PostgresStore(SeriesReader):
    """An open history store on a PostgreSQL server. Use as a context manager or call ``close``."""

    MARK = "%s"
    BYTE_ORDER = ' COLLATE "C"'  # byte order, as SQLite sorts text, whatever the database's collation
    INTEGER_RUN = ""  # results.run is a bigint column

    def __init__(self, url: StoreURL, *, create: bool = True, read_only: bool = False) -> None:
        self.url = url
        self.path = url  # what messages name (prints masked), as Store.path does
        psycopg = _driver()
        if psycopg is None:
            raise InputError(url, "a PostgreSQL history store needs psycopg, which is not installed",
                             hint=INSTALL_HINT)
        self._errors = psycopg.Error
        options: dict[str, object] = {"autocommit": True, "application_name": "perfcheck"}
        if "connect_timeout" not in url.secret:
            options["connect_timeout"] = CONNECT_TIMEOUT_S
        try:
            self._db = psycopg.connect(url.secret, **options)
        except psycopg.Error as exc:
            raise InputError(url, f"cannot connect to the history store ({_one_line(exc, url)})",
                             hint="check the host, port, database, user and password (URL, PG* variables "
                             "or ~/.pgpass)") from None
        try:
            self._prepare(create and not read_only, read_only)
        except psycopg.Error as exc:
            self._db.close()
            raise InputError(url, f"cannot open the history store ({_one_line(exc, url)})") from None
        except (InputError, UsageError):
            self._db.close()
            raise

    # --- opening and migrations ----------------------------------------------------------

    def _version(self) -> int | None:
        """The schema version; None when the database has no perfcheck store."""
        exists = self._db.execute("SELECT to_regclass('perfcheck_schema') IS NOT NULL").fetchone()[0]
        if not exists:
            return None
        row = self._db.execute("SELECT max(version) FROM perfcheck_schema").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    @property
    def version(self) -> int:
        return self._version() or 0

    def _prepare(self, create: bool, read_only: bool = False) -> None:
        version = self._version()
        if version is None:
            taken = self._db.execute("SELECT to_regclass('runs') IS NOT NULL OR to_regclass('results') IS NOT NULL"
                                     ).fetchone()[0]
            if taken:
                raise InputError(self.url, "the database has runs/results tables but is not a perfcheck history store",
                                 hint="name another database (or a schema: ?options=-csearch_path%3Dperfcheck)")
            if not create:
                raise NoStore(self.url, "no perfcheck history store in this database",
                                 hint="create one with `perfcheck history add --history URL FILE` or "
                                 "`perfcheck check --history URL`")
        if version is not None and version > SCHEMA_VERSION:
            raise self._newer(version)
        if version != SCHEMA_VERSION:
            if read_only:  # history_mode read-only: a migration is a write too
                raise upgrade_refused(self.url, version or 0)
            self._migrate()

    def _newer(self, version: int) -> InputError:
        from perfcheck import __version__

        return InputError(self.url, f"history schema version {version} is newer than this perfcheck "
                          f"({__version__}) reads ({SCHEMA_VERSION})", hint="upgrade perfcheck")

    def _migrate(self) -> None:
        with self._db.transaction():
            # one job creates or migrates; the others wait here, then find it done
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            self._db.execute("CREATE TABLE IF NOT EXISTS perfcheck_schema (version integer NOT NULL)")
            current = self._version() or 0
            if current > SCHEMA_VERSION:
                raise self._newer(current)  # a newer perfcheck migrated it meanwhile
            for index in range(current, SCHEMA_VERSION):
                for statement in _statements(PG_MIGRATIONS[index]):
                    self._db.execute(statement)
            if current < SCHEMA_VERSION:
                self._db.execute(SERIES_VIEW)
                self._db.execute("DELETE FROM perfcheck_schema")
                self._db.execute("INSERT INTO perfcheck_schema VALUES (%s)", (SCHEMA_VERSION,))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "PostgresStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _failed(self, doing: str, exc: BaseException) -> InputError:
        return InputError(self.url, f"cannot {doing} the history store ({_one_line(exc, self.url)})")

    # --- writing -------------------------------------------------------------------------

    def add(self, run: RunRecord, results: "Iterable[Result] | ValueRows", machines: Iterable[Machine] = (), *,
            alongside: "Callable[[], object] | None" = None) -> AddResult:
        """Append one run and its values in one transaction. A run id already stored is
        left alone (``added`` False): importing the same results file twice adds nothing.
        ``alongside``: as ``Store.add``'s, work done before the commit: here before the
        transaction (the values go in one COPY, with no GIL to share), which so holds its
        locks no longer than it did; if it raises, nothing is written."""
        rows = value_rows(results)
        named = {m.machine: m for m in machines}
        for machine in {machine for machine, _ in rows.groups} - set(named):
            named[machine] = Machine(machine)
        if alongside is not None:
            alongside()
        done = self._add(run, rows, named)
        if done is None:
            raise InputError(self.url, f"run {run.run_id!r} is already stored with other values",
                             hint="a run id names one run: give the other run its own id (the results file's run.id)")
        return done

    def _add(self, run: RunRecord, rows: ValueRows, named: dict[str, Machine]) -> AddResult | None:
        try:
            with self._db.transaction():
                claimed = self._db.execute(
                    "INSERT INTO runs (run_id, time, commit_sha, branch, ci_system, ci_job, ci_url, host, source, "
                    "added, machines, suites, n_values) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (run_id) DO NOTHING RETURNING run",
                    (run.run_id, float(run.time), run.commit, run.branch, run.ci_system, run.ci_job, run.ci_url,
                     run.host, run.source, _time.time(), *run_summary(rows)),
                ).fetchone()
                if claimed is None:
                    # the same results file imported again adds nothing; another run under
                    # the same id is an error (raised by ``add``, after the transaction ends)
                    return AddResult(run.run_id, False, 0) if self._same_run(run, rows) else None
                number = claimed[0]
                with self._db.cursor() as cursor:
                    # sorted: concurrent writers lock shared machine and series rows in one order
                    # (no deadlock); a machine seen again keeps its first fingerprint unless this one says more
                    cursor.executemany(
                        "INSERT INTO machines VALUES (%s, %s) ON CONFLICT (machine) DO UPDATE "
                        "SET fingerprint = excluded.fingerprint WHERE excluded.fingerprint <> '{}' "
                        "AND machines.fingerprint IS DISTINCT FROM excluded.fingerprint",
                        [(m.machine, json.dumps(dict(m.fingerprint), sort_keys=True))
                         for m in sorted(named.values(), key=lambda m: m.machine)],
                    )
                    values = stored_rows(rows, number, lambda machine, suite, group: self._series_ids(
                        cursor, machine, suite, group))
                    # COPY: one round trip for the values (the run is new, so no key is there yet)
                    with cursor.copy("COPY results (series_id, run, value, unit, n, median, spread, outcome, low, high) "
                                     "FROM STDIN") as copy:
                        for row in values:
                            copy.write_row(row)
        except self._errors as exc:
            raise self._failed("write to", exc) from None
        return AddResult(run.run_id, True, len(rows))

    def _series_ids(self, cursor: Any, machine: str, suite: str,
                    keys: Mapping[tuple[str, str], object]) -> dict[tuple[str, str], int]:
        """(kernel, metric) -> series id of every key of ``keys`` in one machine x suite,
        making the ones not stored yet (in key order)."""
        query = "SELECT kernel, metric, series_id FROM series WHERE machine = %s AND suite = %s"
        cursor.execute(query, (machine, suite))
        ids = {(kernel, metric): number for kernel, metric, number in cursor.fetchall()}
        missing = sorted(keys.keys() - ids.keys())
        if missing:
            cursor.executemany("INSERT INTO series (machine, suite, kernel, metric) VALUES (%s, %s, %s, %s) "
                               "ON CONFLICT DO NOTHING", [(machine, suite, kernel, metric) for kernel, metric in missing])
            cursor.execute(query, (machine, suite))
            ids = {(kernel, metric): number for kernel, metric, number in cursor.fetchall()}
        return ids

    def _same_run(self, run: RunRecord, rows: ValueRows) -> bool:
        """The run already stored under ``run.run_id`` holds exactly these values (as the
        SQLite store decides: the time left out, a copied file's modification time moves)."""
        stored = self._db.execute("SELECT commit_sha, branch, ci_system, ci_job, ci_url, host FROM runs "
                                  "WHERE run_id = %s", (run.run_id,)).fetchone()
        if stored is None or tuple(stored) != (run.commit, run.branch, run.ci_system, run.ci_job, run.ci_url, run.host):
            return False
        return same_values(self._db.execute(same_run_sql("%s"), (run.run_id,)).fetchall(), rows)

    def prune(self, *, keep_days: float, now: float | None = None) -> int:
        """Delete runs older than ``keep_days`` (and their values); returns how many."""
        if not keep_days >= 0:
            raise UsageError(f"--keep-days must be 0 or more, not {keep_days!r}")
        cutoff = (now if now is not None else _time.time()) - keep_days * 86400.0
        try:
            with self._db.transaction():
                self._db.execute("DELETE FROM results WHERE run IN (SELECT run FROM runs WHERE time < %s)", (cutoff,))
                count = self._db.execute("DELETE FROM runs WHERE time < %s", (cutoff,)).rowcount
                self._db.execute("DELETE FROM series s WHERE NOT EXISTS "
                                 "(SELECT 1 FROM results v WHERE v.series_id = s.series_id)")
                self._db.execute("DELETE FROM machines m WHERE NOT EXISTS "
                                 "(SELECT 1 FROM series s WHERE s.machine = m.machine)")
        except self._errors as exc:
            raise self._failed("prune", exc) from None
        return int(count)

    # --- reading -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One REPEATABLE READ transaction (``SeriesReader._snapshot``): its reads see one
        snapshot (the connection's autocommit gives each statement its own)."""
        try:
            with self._db.transaction():
                self._db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield
        except self._errors as exc:
            raise self._failed("read", exc) from None

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(sql, params).fetchall()
        except self._errors as exc:
            raise self._failed("read", exc) from None

    def machines(self) -> dict[str, dict[str, str]]:
        """machine slug -> its fingerprint (device, arch, tool, tool_version)."""
        return {m: json_loads(fp, self.url, hint="restore the store from a copy")
                for m, fp in self._rows("SELECT machine, fingerprint FROM machines ORDER BY machine")}

    def runs(self, *, since: float | None = None, limit: int | None = None) -> "pd.DataFrame":
        """As ``Store.runs``: one row per run, oldest first (RUN_COLUMNS)."""
        sql = ("SELECT run_id, time, commit_sha, branch, ci_system, ci_job, ci_url, host, source, added, machines, "
               "suites, n_values FROM runs")
        params: list[object] = []
        if since is not None:
            sql += " WHERE time >= %s"
            params.append(float(since))
        sql += ' ORDER BY time, run_id COLLATE "C"'
        return runs_frame(self._rows(sql, params), limit, self.path)

    def latest(self, *, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]], last: int) -> "pd.DataFrame":
        """As ``Store.latest``: the latest ``last`` runs of the series ``pairs`` names."""
        keys, runs, read = self._latest_parts(machine, suite, pairs, last, VALUE_COLUMNS)
        return as_text(concat_batches(series_batches(keys, runs, read, last=last, clean=self._check)))

    def latest_values(self, *, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]],
                      last: int) -> LatestValues:
        """As ``Store.latest_values``: ``latest`` as arrays, only the values read."""
        keys, runs, read = self._latest_parts(machine, suite, pairs, last, LEAN_COLUMNS)
        # ``clean``: the store's messages (a run time outside 1970-2200 says so, and which run)
        return latest_values(keys, runs, read, last=last, max_ids=MAX_IDS, where=self.path, clean=self._clean)

    def _latest_parts(self, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]], last: int,
                      columns: Sequence[str]):  # noqa: ANN202 (as Store._latest_parts)
        wanted = sorted(set(pairs), key=lambda pair: (pair[0], pair[1] or ""))
        keys = self._rows(
            "SELECT DISTINCT s.series_id, s.machine, s.suite, s.kernel, s.metric "
            "FROM unnest(%s::text[], %s::text[]) AS w(kernel, metric) JOIN series s "
            "ON s.machine = %s AND s.suite = %s AND s.kernel = w.kernel AND (w.metric IS NULL OR s.metric = w.metric)",
            [[k for k, _ in wanted], [m for _, m in wanted], machine, suite])
        keys = sorted(keys, key=lambda key: key[1:])  # series order: Python sorts text by code point, as COLLATE "C"
        runs = self._rows("SELECT run, run_id, time, commit_sha, branch, ci_job, ci_url FROM runs")
        by_number = runs_in_order(runs)

        def read(ids: list[int]) -> list[tuple[object, ...]]:
            if by_number:  # each series' last ``last`` rows of its primary key range
                return self._rows(f"SELECT {', '.join(f'v.{c}' for c in columns)} FROM unnest(%s::bigint[]) AS ids(id) "
                                  "CROSS JOIN LATERAL (SELECT * FROM results x WHERE x.series_id = ids.id "
                                  "ORDER BY x.run DESC LIMIT %s) AS v", [ids, last])
            return self._rows(values_sql("v.series_id = ANY(%s)", last, "%s", ' COLLATE "C"', fetched=columns),
                              [ids, last])

        return keys, runs, read

    def _any(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """One array parameter, however many values (no bound-variable limit to stay under),
        as a set to join (``IN (SELECT unnest(...))``), not ``= ANY(array)``: with the
        array, a read of many series (``detect --relative``'s slice of one metric: 2,000
        series, 730,000 values at 365 nights) became a bitmap scan too large for work_mem,
        whose lossy pages PostgreSQL rechecks row by row against the whole array (6.9
        million rows x 2,000 ids: 60 s a query, measured); joined, it is one index range
        per id (1-3 s)."""
        if not values:
            return "FALSE", []
        # typed: a list of text is sent as an array of unknown type, which unnest cannot take
        kind = "bigint" if all(type(v) is int for v in values) else "text"
        return f"{column} IN (SELECT unnest({self.MARK}::{kind}[]))", [list(values)]


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def store_exists(url: StoreURL) -> bool:
    """Whether the database holds a perfcheck store (the gate reads no history from an
    empty one, as from an SQLite file not yet written). Connection errors are raised.
    Asking migrates nothing: a read-only run must find an old store as it was."""
    try:
        PostgresStore(url, create=False, read_only=True).close()
    except NoStore:
        return False
    except UpgradeRefused:
        return True
    return True
