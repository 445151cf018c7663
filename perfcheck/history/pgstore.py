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
backends have as many), and the version in ``perfcheck_schema``. Migrations run in
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

import json
import time as _time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from perfcheck.documents import json_loads
from perfcheck.errors import InputError, UsageError
from perfcheck.history.store import RUN_COLUMNS, SERIES_COLUMNS, AddResult, Machine, Result, RunRecord, finite
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
)
SCHEMA_VERSION = len(PG_MIGRATIONS)

# The dashboards' interface (docs/team-history.md): re-created after every migration,
# so a later schema keeps these columns.
SERIES_VIEW = """
CREATE OR REPLACE VIEW perfcheck_series AS
SELECT to_timestamp(r.time) AS time, r.commit_sha AS commit, v.machine, v.suite, v.kernel, v.metric,
       v.value, v.unit, v.run_id, r.branch
FROM results v JOIN runs r ON r.run_id = v.run_id
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


class PostgresStore:
    """An open history store on a PostgreSQL server. Use as a context manager or call ``close``."""

    def __init__(self, url: StoreURL, *, create: bool = True) -> None:
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
            self._prepare(create)
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

    def _prepare(self, create: bool) -> None:
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

    def add(self, run: RunRecord, results: Iterable[Result], machines: Iterable[Machine] = ()) -> AddResult:
        """Append one run and its values in one transaction. A run id already stored is
        left alone (``added`` False): importing the same results file twice adds nothing."""
        rows: dict[tuple[str, str, str, str], tuple[object, ...]] = {}
        for r in results:  # a key given twice: the last wins, as INSERT OR REPLACE does in SQLite
            rows[(r.machine, r.suite, r.kernel, r.metric)] = (
                run.run_id, r.machine, r.suite, r.kernel, r.metric, finite(r.value), r.unit or "", r.n,
                finite(r.median), finite(r.spread), r.outcome, finite(r.low), finite(r.high))
        named = {m.machine: m for m in machines}
        for machine in {key[0] for key in rows} - set(named):
            named[machine] = Machine(machine)
        done = self._add(run, rows, named)
        if done is None:
            raise InputError(self.url, f"run {run.run_id!r} is already stored with other values",
                             hint="a run id names one run: give the other run its own id (the results file's run.id)")
        return done

    def _add(self, run: RunRecord, rows: dict[tuple[str, str, str, str], tuple[object, ...]],
             named: dict[str, Machine]) -> AddResult | None:
        try:
            with self._db.transaction():
                claimed = self._db.execute(
                    "INSERT INTO runs VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING",
                    (run.run_id, float(run.time), run.commit, run.branch, run.ci_system, run.ci_job, run.ci_url,
                     run.host, run.source, _time.time()),
                ).rowcount
                if not claimed:
                    # the same results file imported again adds nothing; another run under
                    # the same id is an error (raised below, after the transaction ends)
                    return AddResult(run.run_id, False, 0) if self._same_run(run, list(rows.values())) else None
                with self._db.cursor() as cursor:
                    # sorted: concurrent writers lock shared machine rows in one order (no deadlock);
                    # a machine seen again keeps its first fingerprint unless this one says more
                    cursor.executemany(
                        "INSERT INTO machines VALUES (%s, %s) ON CONFLICT (machine) DO UPDATE "
                        "SET fingerprint = excluded.fingerprint WHERE excluded.fingerprint <> '{}' "
                        "AND machines.fingerprint IS DISTINCT FROM excluded.fingerprint",
                        [(m.machine, json.dumps(dict(m.fingerprint), sort_keys=True))
                         for m in sorted(named.values(), key=lambda m: m.machine)],
                    )
                    # COPY: one round trip for the values (the run is new, so no key is there yet)
                    with cursor.copy("COPY results (run_id, machine, suite, kernel, metric, value, unit, n, median, "
                                     "spread, outcome, low, high) FROM STDIN") as copy:
                        for row in rows.values():
                            copy.write_row(row)
        except self._errors as exc:
            raise self._failed("write to", exc) from None
        return AddResult(run.run_id, True, len(rows))

    def _same_run(self, run: RunRecord, rows: Sequence[tuple[object, ...]]) -> bool:
        """The run already stored under ``run.run_id`` holds exactly these values (as the
        SQLite store decides: the time left out, a copied file's modification time moves)."""
        stored = self._db.execute("SELECT commit_sha, branch, ci_system, ci_job, ci_url, host FROM runs "
                                  "WHERE run_id = %s", (run.run_id,)).fetchone()
        if stored is None or tuple(stored) != (run.commit, run.branch, run.ci_system, run.ci_job, run.ci_url, run.host):
            return False
        have = self._db.execute(
            "SELECT run_id, machine, suite, kernel, metric, value, unit, n, median, spread, outcome, low, high "
            "FROM results WHERE run_id = %s", (run.run_id,)).fetchall()
        return sorted(map(tuple, have), key=repr) == sorted(map(tuple, rows), key=repr)

    def prune(self, *, keep_days: float, now: float | None = None) -> int:
        """Delete runs older than ``keep_days`` (and their values); returns how many."""
        if not keep_days >= 0:
            raise UsageError(f"--keep-days must be 0 or more, not {keep_days!r}")
        cutoff = (now if now is not None else _time.time()) - keep_days * 86400.0
        try:
            with self._db.transaction():
                count = self._db.execute("DELETE FROM runs WHERE time < %s", (cutoff,)).rowcount
                self._db.execute("DELETE FROM machines m WHERE NOT EXISTS "
                                 "(SELECT 1 FROM results v WHERE v.machine = m.machine)")
        except self._errors as exc:
            raise self._failed("prune", exc) from None
        return int(count)

    # --- reading -------------------------------------------------------------------------

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
        import pandas as pd

        sql = (
            "SELECT r.run_id, r.time, r.commit_sha, r.branch, r.ci_system, r.ci_job, r.ci_url, r.host, r.source, r.added, "
            "string_agg(DISTINCT v.machine, ',' ORDER BY v.machine), string_agg(DISTINCT v.suite, ',' ORDER BY v.suite), "
            "count(v.metric) "
            "FROM runs r LEFT JOIN results v ON v.run_id = r.run_id"
        )
        params: list[object] = []
        if since is not None:
            sql += " WHERE r.time >= %s"
            params.append(float(since))
        sql += ' GROUP BY r.run_id ORDER BY r.time, r.run_id COLLATE "C"'
        frame = pd.DataFrame(self._rows(sql, params), columns=list(RUN_COLUMNS))
        if limit is not None:
            frame = frame.tail(limit).reset_index(drop=True)
        for column in ("time", "added"):
            frame[column] = pd.to_datetime(frame[column].astype("float64"), unit="s", utc=True)
        frame["values"] = frame["values"].astype("int64")
        return frame

    def series(
        self,
        *,
        machine: str | None = None,
        suite: str | Sequence[str] | None = None,
        kernel: str | Sequence[str] | None = None,
        metric: str | Sequence[str] | None = None,
        since: float | None = None,
        last: int | None = None,
    ) -> "pd.DataFrame":
        """As ``Store.series``: the values as one long frame (SERIES_COLUMNS)."""
        import pandas as pd

        where, params = [], []  # type: ignore[var-annotated]
        for column, wanted in (("v.machine", machine), ("v.suite", suite), ("v.kernel", kernel), ("v.metric", metric)):
            if wanted is None:
                continue
            where.append(f"{column} = ANY(%s)")
            params.append([wanted] if isinstance(wanted, str) else list(wanted))
        if since is not None:
            where.append("r.time >= %s")
            params.append(float(since))
        # COLLATE "C": byte order, as SQLite sorts text, so both backends list series alike
        sql = (
            "SELECT v.machine, v.suite, v.kernel, v.metric, v.unit, v.run_id, r.time, r.commit_sha, r.branch, "
            "r.ci_job, r.ci_url, v.value, v.n, v.median, v.spread, v.outcome, v.low, v.high "
            "FROM results v JOIN runs r ON r.run_id = v.run_id"
            + (" WHERE " + " AND ".join(where) if where else "")
            + ' ORDER BY v.machine COLLATE "C", v.suite COLLATE "C", v.kernel COLLATE "C", v.metric COLLATE "C", '
            'r.time, v.run_id COLLATE "C"'
        )
        frame = pd.DataFrame(self._rows(sql, params), columns=list(SERIES_COLUMNS))
        if last is not None and len(frame):
            frame = frame.groupby(["machine", "suite", "kernel", "metric"], sort=False).tail(last).reset_index(drop=True)
        frame["time"] = pd.to_datetime(frame["time"].astype("float64"), unit="s", utc=True)
        for column in ("value", "median", "spread", "low", "high"):
            frame[column] = frame[column].astype("float64")
        frame["n"] = frame["n"].astype("Int64")
        return frame


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def store_exists(url: StoreURL) -> bool:
    """Whether the database holds a perfcheck store (the gate reads no history from an
    empty one, as from an SQLite file not yet written). Connection errors are raised."""
    try:
        PostgresStore(url, create=False).close()
    except NoStore:
        return False
    return True
