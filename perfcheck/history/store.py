"""The history store: every run's values in one SQLite file, per machine x suite x
kernel x metric.

SQLite because it is embedded (no server on a cluster login node or a CI runner),
one file that can be copied or archived, and safe for several local writers at once:
the store runs in WAL mode (readers never block the writer) with a busy timeout, and
every write is one ``BEGIN IMMEDIATE`` transaction, so parallel ``perfcheck check``
processes on one node queue instead of failing. WAL needs shared memory, which
network file systems (NFS, Lustre, GPFS) do not give reliably: on a cluster each
job writes its own results file and one job imports them (``perfcheck history add``).

Schema (``PRAGMA user_version`` is the schema version; ``MIGRATIONS[i]`` takes a
store from version i to i + 1, each in one transaction, so an older store is brought
up to date when it is opened and a newer one is refused with a clear error)::

    machines(machine PK, fingerprint JSON)            the fingerprint slug and its parts
    runs(run INTEGER PK, run_id UNIQUE, time, commit_sha, branch, ci_system, ci_job, ci_url,
         host, source, added, machines, suites, n_values)   one row per run
    series(series_id INTEGER PK, machine, suite, kernel, metric; UNIQUE)  names stored once
    results(series_id, run, value, unit, n, median, spread, outcome, low, high;
            PK (series_id, run))                       one row per run x series

Since version 3 (issue 22) a value row holds two integers where it held the machine,
suite, kernel name (long C++ templates) and metric as text: a year of nightly runs of
2,000 kernels x 16 metrics went from 7 GB to well under 1 GB. The primary key
(series_id, run) is the order readers want, so reading series by series
(``Store.batches``) is a range scan per series; the runs table carries each run's
machines, suites and value count, so listing runs never scans the values.

``time`` and ``added`` are Unix seconds (UTC); ``value`` is in base units (``unit``);
``n``/``median``/``spread`` describe the run's samples of that value (dispatch count,
median, relative spread 1.4826 x MAD / median), null when the run had none;
``low``/``high`` the tightest limits the run's checks held the value to (base
units; null where a side was not limited).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.errors import InputError, UsageError
from perfcheck.history.backend import (  # noqa: F401 (the read path's names, imported from here by other modules)
    BATCH_ROWS,
    DAMAGED_HINT,
    MAX_IDS,
    SERIES_COLUMNS,
    VALUE_COLUMNS,
    SeriesReader,
    as_text,
    concat_batches,
    series_batches,
    values_sql,
)
from perfcheck.history.latest import LEAN_COLUMNS, LatestValues, latest_values

if TYPE_CHECKING:
    import pandas as pd

    from perfcheck.history.backend import HistoryStore
    from perfcheck.storeurl import StoreURL

# "pckh" in ASCII: marks a SQLite file as a perfcheck history store, so a rocpd or
# rocprof database given by mistake is refused instead of being written into.
APPLICATION_ID = 0x70636B68
BUSY_TIMEOUT_S = 60.0  # a writer waits this long for another one (imports of many files)
PAGE_SIZE = 1024  # bytes per page of a new store (see ``Store._prepare``)

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1
    """
    CREATE TABLE machines (
        machine TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        time REAL NOT NULL,
        commit_sha TEXT,
        branch TEXT,
        ci_system TEXT,
        ci_job TEXT,
        ci_url TEXT,
        host TEXT,
        source TEXT,
        added REAL NOT NULL
    );
    CREATE INDEX runs_time ON runs(time);
    CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        machine TEXT NOT NULL REFERENCES machines(machine),
        suite TEXT NOT NULL,
        kernel TEXT NOT NULL,
        metric TEXT NOT NULL,
        value REAL,
        unit TEXT NOT NULL DEFAULT '',
        n INTEGER,
        median REAL,
        spread REAL,
        outcome TEXT,
        PRIMARY KEY (run_id, machine, suite, kernel, metric)
    ) WITHOUT ROWID;
    CREATE INDEX results_series ON results(machine, suite, kernel, metric);
    """,
    # 1 -> 2: the budget each value was checked against (the dashboard's band)
    """
    ALTER TABLE results ADD COLUMN low REAL;
    ALTER TABLE results ADD COLUMN high REAL;
    """,
    # 2 -> 3: series named once, values keyed by integers (issue 22). The values keep no
    # foreign keys: SQLite would check each deleted run against every value row (no index
    # on run), so ``prune`` deletes values, series and machines itself.
    """
    CREATE TABLE series (
        series_id INTEGER PRIMARY KEY,
        machine TEXT NOT NULL REFERENCES machines(machine),
        suite TEXT NOT NULL,
        kernel TEXT NOT NULL,
        metric TEXT NOT NULL,
        UNIQUE (machine, suite, kernel, metric)
    );
    INSERT INTO series (machine, suite, kernel, metric)
        SELECT DISTINCT machine, suite, kernel, metric FROM results ORDER BY machine, suite, kernel, metric;
    CREATE TABLE runs_v3 (
        run INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL UNIQUE,
        time REAL NOT NULL,
        commit_sha TEXT,
        branch TEXT,
        ci_system TEXT,
        ci_job TEXT,
        ci_url TEXT,
        host TEXT,
        source TEXT,
        added REAL NOT NULL,
        machines TEXT,
        suites TEXT,
        n_values INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO runs_v3 (run_id, time, commit_sha, branch, ci_system, ci_job, ci_url, host, source, added,
                         machines, suites, n_values)
        SELECT r.run_id, r.time, r.commit_sha, r.branch, r.ci_system, r.ci_job, r.ci_url, r.host, r.source, r.added,
               (SELECT group_concat(machine) FROM (SELECT DISTINCT machine FROM results v
                                                    WHERE v.run_id = r.run_id ORDER BY machine)),
               (SELECT group_concat(suite) FROM (SELECT DISTINCT suite FROM results v
                                                  WHERE v.run_id = r.run_id ORDER BY suite)),
               (SELECT count(*) FROM results v WHERE v.run_id = r.run_id)
        FROM runs r ORDER BY r.time, r.run_id;
    CREATE TABLE results_v3 (
        series_id INTEGER NOT NULL,
        run INTEGER NOT NULL,
        value REAL,
        unit TEXT NOT NULL DEFAULT '',
        n INTEGER,
        median REAL,
        spread REAL,
        outcome TEXT,
        low REAL,
        high REAL,
        PRIMARY KEY (series_id, run)
    ) WITHOUT ROWID;
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
    # 3 -> 4: nothing here. PostgreSQL's values key takes the value along (pgstore.PG_MIGRATIONS[3]);
    # SQLite's values table is its key already (WITHOUT ROWID), so a series' values are read in
    # key order from its own pages. One version for both backends: a store's version says the same
    # schema wherever it lives.
    "",
)
SCHEMA_VERSION = len(MIGRATIONS)
COMPACT_VERSION = 3  # series named once (issue 22)
# The columns perfcheck reads and writes, per table (what the migrations above make).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "machines": ("machine", "fingerprint"),
    "series": ("series_id", "machine", "suite", "kernel", "metric"),
    "runs": ("run", "run_id", "time", "commit_sha", "branch", "ci_system", "ci_job", "ci_url", "host", "source", "added",
             "machines", "suites", "n_values"),
    "results": ("series_id", "run", "value", "unit", "n", "median", "spread", "outcome", "low", "high"),
}
# Times a run can have: Unix seconds from 1970 to 2200 (a results file claiming more is
# refused; pandas' timestamps end in 2262, so later ones would break every reader).
MIN_TIME, MAX_TIME = 0.0, 7_258_118_400.0  # 2200-01-01 UTC

RUN_COLUMNS = ("run_id", "time", "commit", "branch", "ci_system", "ci_job", "ci_url", "host", "source", "added",
               "machines", "suites", "values")


@dataclass(frozen=True)
class RunRecord:
    """Who, when and where of one run (``perfcheck.history.runs.current_run`` fills it
    from git and the CI environment)."""

    run_id: str
    time: float  # Unix seconds, UTC
    commit: str | None = None
    branch: str | None = None
    ci_system: str | None = None  # github | gitlab | slurm | ...
    ci_job: str | None = None
    ci_url: str | None = None
    host: str | None = None
    source: str | None = None  # the results file it was imported from


@dataclass(frozen=True)
class Result:
    """One value of one run: machine x suite x kernel x metric."""

    machine: str
    suite: str
    kernel: str
    metric: str
    value: float | None
    unit: str = ""
    n: int | None = None
    median: float | None = None
    spread: float | None = None
    outcome: str | None = None  # passed | failed | recorded | error, when a check judged it
    low: float | None = None  # the tightest lower limit a check held the value to (base units)
    high: float | None = None  # the tightest upper limit


@dataclass(frozen=True)
class AddResult:
    run_id: str
    added: bool  # False: the store already had this run (imports are idempotent)
    values: int


@dataclass(frozen=True)
class Machine:
    machine: str  # the slug series are keyed by
    fingerprint: Mapping[str, str] = field(default_factory=dict)


def machine_key(fingerprint: Mapping[str, str]) -> str:
    """The machine a series belongs to: the same slug the baseline files use
    (``mi100_gfx908_rocprofv3-1.0.0``), so a history and a baseline name one machine alike."""
    from perfcheck.baseline import baseline_path

    return baseline_path(".", "s", fingerprint).stem


def finite(value: object) -> float | None:
    """A finite float, or None (JSON null, text, booleans, inf and NaN stay missing)."""
    if type(value) is float:  # nearly every value of a results file: no conversion to try
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past any float
        return None
    return number if math.isfinite(number) else None


# SQLite's file header (https://www.sqlite.org/fileformat.html, 1.3: "SQLite format 3\000").
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _foreign_file(path: Path) -> bool:
    """A file with content that does not start as an SQLite database does. SQLite itself
    takes a file shorter than its header for an empty database and writes a store over it
    (a 1-byte file given as --history was lost); longer ones it refuses on first read."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(_SQLITE_MAGIC))
    except OSError:  # absent, unreadable: opening says so
        return False
    return bool(head) and head != _SQLITE_MAGIC  # an empty file is a new store (or refused as empty when reading)


class Store(SeriesReader):
    """An open history store. Use as a context manager or call ``close``."""

    def __init__(self, path: str | Path, *, create: bool = True, read_only: bool = False) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise InputError(self.path, "no such history store", hint="name an existing store, or run `perfcheck check --history PATH` to create one")
        if self.path.is_dir():
            raise InputError(self.path, "is a directory, not a history store", hint="name a file, e.g. perf-history.sqlite")
        if _foreign_file(self.path):
            raise InputError(self.path, "is not a perfcheck history store (not an SQLite database)",
                             hint="name another file for --history")
        # Reading commands open an existing file without creating it, read-only where
        # the file or its folder cannot be written (an archived store on a read-only
        # file system: WAL then needs immutable=1, as no -shm file can be made).
        # ``read_only``: the settings say never to write here (history_mode read-only).
        self.read_only = read_only or (not create and not (os.access(self.path, os.W_OK)
                                                           and os.access(self.path.parent, os.W_OK)))
        self._create = create
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = self._connect(immutable=False)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(self.path, f"cannot open the history store ({exc})") from None
        try:
            try:
                self._prepare()
            except sqlite3.OperationalError as exc:
                if not self.read_only or "unable to open" not in str(exc):
                    raise
                self._db.close()  # a WAL store whose -shm cannot be created: nobody writes here
                self._db = self._connect(immutable=True)
                self._prepare()
        except sqlite3.Error as exc:
            self._db.close()
            raise self._damaged(exc) from None
        except (InputError, UsageError):
            self._db.close()
            raise

    def _connect(self, *, immutable: bool) -> sqlite3.Connection:
        # check_same_thread off: ``_insert_alongside`` hands the connection to a helper
        # thread for one statement, and waits for it; never two threads at once
        if self._create:
            return sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        mode = "ro" if self.read_only else "rw"  # rw: never creates a missing file
        uri = f"{self.path.resolve().as_uri()}?mode={mode}" + ("&immutable=1" if immutable else "")
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)

    def _damaged(self, exc: sqlite3.Error) -> InputError:
        """One line for an SQLite error on this store: what SQLite said and what to do."""
        text = str(exc)
        if "file is not a database" in text:
            return InputError(self.path, "is not a perfcheck history store (not an SQLite database)",
                              hint="name another file for --history")
        if "malformed" in text or "no such column" in text or "no such table" in text:
            return InputError(self.path, f"the history store is damaged ({text})",
                              hint=DAMAGED_HINT)
        if "readonly" in text or "read-only" in text:
            return InputError(self.path, f"the history store cannot be written ({text})",
                              hint="make it writable, or name another file for --history")
        return InputError(self.path, f"cannot use the history store ({text})")

    # --- opening and migrations ----------------------------------------------------------

    def _prepare(self) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        db.execute("PRAGMA foreign_keys = ON")
        self._check_identity()
        if self.read_only:
            if self.version != SCHEMA_VERSION:
                self._migrate_refused()
            self._check_schema()
            return
        if int(db.execute("PRAGMA page_count").fetchone()[0]) == 0:
            # a new store: small pages (set before WAL fixes the size). A night's run puts
            # one value at the end of each series' key range, i.e. on one leaf page per
            # series, so a commit of 32,000 values writes (and its checkpoint copies)
            # 33,000-41,000 pages however small the values: 166 MB of WAL at SQLite's
            # default 4 KB, 34 MB at 1 KB (measured at 365 nights, docs/history-scale.md).
            # Reading costs the same (a full scan of a year: equal CPU time). Existing
            # stores keep theirs (changing it rewrites the whole file: VACUUM).
            db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        mode = self._retry(lambda: db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        if str(mode).lower() != "wal":  # e.g. a file system without shared memory: still correct, less concurrent
            db.execute("PRAGMA journal_mode = DELETE")
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, never corrupt
        self._migrate()
        self._retry(self._check_schema)  # another process may be switching to WAL this moment

    def _check_identity(self) -> None:
        # one read transaction, so one snapshot: another process creating the store commits
        # its tables and its application id together, and two separate reads could see the
        # id before it and the tables after it (a store of another tool, by mistake)
        self._db.execute("BEGIN")
        try:
            app = self._db.execute("PRAGMA application_id").fetchone()[0]
            kinds = dict(self._db.execute("SELECT type, count(*) FROM sqlite_master GROUP BY type").fetchall())
        finally:
            self._db.execute("COMMIT")
        if app not in (0, APPLICATION_ID) or (app == 0 and kinds.get("table")):
            raise InputError(self.path, "is an SQLite database but not a perfcheck history store",
                             hint="name another file for --history")
        if not self._create and app == 0:  # an empty file: reading must not turn it into a store
            raise InputError(self.path, "is empty, not a history store (no run was ever stored)",
                             hint="run `perfcheck check --history PATH` or `perfcheck history add` first")
        # perfcheck creates no triggers: one found here was put there by something else and
        # would run inside perfcheck's own transactions (add, prune) with the user's rights.
        if kinds.get("trigger"):
            names = [r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")]
            raise InputError(self.path, f"the history store has triggers perfcheck did not create ({', '.join(names)})",
                             hint="remove them (DROP TRIGGER) or name another file for --history")

    def _check_schema(self) -> None:
        """Every column perfcheck reads is there (a store edited by hand, or by a tool
        that rebuilt a table, is refused on open instead of failing in a query)."""
        for table, wanted in REQUIRED_COLUMNS.items():
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if not have:
                raise InputError(self.path, f"the history store is damaged (table {table!r} is missing)",
                                 hint=DAMAGED_HINT)
            missing = [c for c in wanted if c not in have]
            if missing:
                raise InputError(self.path, f"the history store is damaged (table {table!r} lacks column "
                                 f"{', '.join(repr(c) for c in missing)})",
                                 hint=DAMAGED_HINT)

    def _migrate_refused(self) -> None:
        if self.version > SCHEMA_VERSION:
            self._migrate()  # raises: newer than this perfcheck
        raise upgrade_refused(self.path, self.version)

    def _retry(self, action):  # noqa: ANN001, ANN202
        """Run ``action``, retrying while another process holds a lock the busy handler
        does not wait for (switching to WAL, creating the schema at the same moment)."""
        deadline = _time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or _time.monotonic() > deadline:
                    raise
                _time.sleep(0.05)

    @property
    def version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        if self.version == SCHEMA_VERSION:
            return
        if self.version > SCHEMA_VERSION:
            from perfcheck import __version__

            raise InputError(self.path, f"history schema version {self.version} is newer than this perfcheck "
                             f"({__version__}) reads ({SCHEMA_VERSION})", hint="upgrade perfcheck")

        def step() -> None:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                current = self.version  # another process may have migrated meanwhile
                for index in range(current, SCHEMA_VERSION):
                    for statement in _statements(MIGRATIONS[index]):
                        self._db.execute(statement)
                    self._db.execute(f"PRAGMA user_version = {index + 1}")
                if current == 0:
                    self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

        before = self.version
        self._retry(step)
        if before and before < COMPACT_VERSION:
            # the old value tables were dropped, but SQLite keeps their pages in the file
            # until it is rebuilt: once, so a 7 GB store shrinks to what it holds now
            try:
                self._db.execute("VACUUM")
            except sqlite3.OperationalError:
                pass  # busy or out of disk: the store is correct, only larger than it needs to be

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing -------------------------------------------------------------------------

    def add(self, run: RunRecord, results: "Iterable[Result] | ValueRows", machines: Iterable[Machine] = (), *,
            alongside: "Callable[[], object] | None" = None) -> AddResult:
        """Append one run and its values in one transaction. A run id already stored is
        left alone (``added`` False): importing the same results file twice adds nothing.

        ``alongside``: the caller's own work, done (on the caller's thread, once) while
        SQLite inserts the values, before the commit; if it raises, the run is rolled back
        and the exception goes on; not called where nothing is added (the run is stored).
        The suite runner writes its reports so: the values are stored only once every
        report is written, and the inserts, one statement on a helper thread that SQLite
        runs without the GIL, take none of the run's time on a second core (0.2 s of
        `check --history`'s 1.0 s at 2,000 kernels x 16 metrics)."""
        rows = value_rows(results)
        named = {m.machine: m for m in machines}
        for machine in {machine for machine, _ in rows.groups} - set(named):
            named[machine] = Machine(machine)
        summary = run_summary(rows)
        pending = [alongside] if alongside is not None else []  # called once, whatever ``_retry`` does

        def write() -> AddResult | None:  # None: the id is stored with other values
            db = self._db
            if pending:  # the staged values (``_insert_alongside``, 1.5 MB a night) in memory, not
                db.execute("PRAGMA temp_store = MEMORY")  # a file in $TMPDIR; set outside a transaction
            db.execute("BEGIN IMMEDIATE")
            try:
                exists = db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone()
                if exists:
                    same = self._same_run(run, rows)
                    db.execute("ROLLBACK")
                    return AddResult(run.run_id, False, 0) if same else None
                number = db.execute(
                    "INSERT INTO runs (run_id, time, commit_sha, branch, ci_system, ci_job, ci_url, host, source, added, "
                    "machines, suites, n_values) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run.run_id, float(run.time), run.commit, run.branch, run.ci_system, run.ci_job, run.ci_url,
                     run.host, run.source, _time.time(), *summary),
                ).lastrowid
                # a machine seen again keeps its first fingerprint unless this one says more
                db.executemany(
                    "INSERT INTO machines VALUES (?, ?) ON CONFLICT(machine) DO UPDATE SET fingerprint = excluded.fingerprint "
                    "WHERE excluded.fingerprint != '{}'",
                    [(m.machine, json.dumps(dict(m.fingerprint), sort_keys=True)) for m in named.values()],
                )
                values = stored_rows(rows, number, self._series_ids)
                if pending:
                    self._insert_alongside(values, pending.pop())
                else:
                    db.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return AddResult(run.run_id, True, len(rows))

        try:
            done = self._retry(write)
        except sqlite3.Error as exc:
            if "malformed" in str(exc) or "no such" in str(exc):
                raise self._damaged(exc) from None
            raise InputError(self.path, f"cannot write to the history store ({exc})") from None
        if done is None:
            raise InputError(self.path, f"run {run.run_id!r} is already stored with other values",
                             hint="a run id names one run: give the other run its own id (the results file's run.id)")
        return done

    def _insert_alongside(self, values: list[tuple[object, ...]], alongside: "Callable[[], object]") -> None:
        """Insert ``values`` (in the open transaction) while ``alongside`` runs. Each row of
        ``executemany`` is a step that lets go of the GIL and must win it back, so beside a
        busy Python thread it advances a row per switch interval: the rows go first into a
        table in memory (cheap: appended in order), then into the values with one
        statement, a single step, on a helper thread, while the caller's thread runs
        ``alongside``. Measured at 2,000 kernels x 16 metrics: 0.09 s to stage, then
        0.2 s of inserts that overlap the reports (docs/history-scale.md)."""
        import threading

        db = self._db
        db.execute("CREATE TEMP TABLE IF NOT EXISTS staged_values AS SELECT * FROM main.results WHERE 0")
        db.executemany("INSERT INTO temp.staged_values VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
        failed: list[BaseException] = []

        def insert() -> None:
            try:
                db.execute("INSERT INTO main.results SELECT * FROM temp.staged_values")
            except BaseException as exc:  # noqa: BLE001 (raised on the caller's thread below)
                failed.append(exc)

        helper = threading.Thread(target=insert, name="perfcheck-history-insert", daemon=True)
        helper.start()
        try:
            alongside()
        finally:
            helper.join()  # the connection is the helper's until its statement ends, however this ends
        if failed:
            raise failed[0]
        db.execute("DROP TABLE temp.staged_values")

    def _series_ids(self, machine: str, suite: str, keys: Mapping[tuple[str, str], object]) -> dict[tuple[str, str], int]:
        """(kernel, metric) -> series id of every key of ``keys`` in one machine x suite (in a
        write transaction), making the ones not stored yet (in key order). A nightly run's
        series are all there: their names are read once, and nothing is inserted."""
        # An entry of the names' index keeps at most 231 bytes in a 1 KB page ((U - 12) x
        # 64 / 255 - 23 for an index page, https://www.sqlite.org/fileformat2.html 1.6), so
        # each long C++ kernel name goes on to an overflow page of its own: the index is 3.4
        # times the size of the table (37 vs 11 MB for 32,000 series), and reading a whole
        # suite through it took 66 ms against 38 ms for a scan of the table. Where the group
        # is at least half of the store's series, the table is scanned.
        highest = self._db.execute("SELECT max(series_id) FROM series").fetchone()[0] or 0  # at least their count
        scan = "NOT INDEXED " if 2 * len(keys) >= highest else ""
        query = f"SELECT kernel, metric, series_id FROM series {scan}WHERE machine = ? AND suite = ?"
        ids = {(kernel, metric): number for kernel, metric, number in self._db.execute(query, (machine, suite))}
        missing = sorted(keys.keys() - ids.keys())
        if missing:
            self._db.executemany("INSERT OR IGNORE INTO series (machine, suite, kernel, metric) VALUES (?, ?, ?, ?)",
                                 [(machine, suite, kernel, metric) for kernel, metric in missing])
            ids = {(kernel, metric): number for kernel, metric, number in self._db.execute(query, (machine, suite))}
        return ids

    def _same_run(self, run: RunRecord, rows: ValueRows) -> bool:
        """The run already stored under ``run.run_id`` holds exactly these values (the
        same results file imported again, from wherever it was copied to). The time is
        left out: a file without a run block takes its modification time, which a copy
        changes; its id is a digest of its bytes."""
        stored = self._db.execute(
            "SELECT commit_sha, branch, ci_system, ci_job, ci_url, host FROM runs WHERE run_id = ?",
            (run.run_id,)).fetchone()
        if tuple(stored) != (run.commit, run.branch, run.ci_system, run.ci_job, run.ci_url, run.host):
            return False
        have = self._db.execute(same_run_sql("?"), (run.run_id,)).fetchall()
        return same_values(have, rows)

    def prune(self, *, keep_days: float, now: float | None = None) -> int:
        """Delete runs older than ``keep_days`` (and their values); returns how many."""
        if not keep_days >= 0:
            raise UsageError(f"--keep-days must be 0 or more, not {keep_days!r}")
        cutoff = (now if now is not None else _time.time()) - keep_days * 86400.0

        def delete() -> int:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                # runs with impossible times (an older perfcheck stored whatever a results
                # file said) go too: no reader can place them, so nothing else removes them
                db.execute("DELETE FROM results WHERE run IN (SELECT run FROM runs WHERE time < ? "
                           "OR NOT (time BETWEEN ? AND ?))", (cutoff, MIN_TIME, MAX_TIME))
                count = db.execute("DELETE FROM runs WHERE time < ? OR NOT (time BETWEEN ? AND ?)",
                                   (cutoff, MIN_TIME, MAX_TIME)).rowcount
                db.execute("DELETE FROM series WHERE NOT EXISTS (SELECT 1 FROM results v WHERE v.series_id = series.series_id)")
                db.execute("DELETE FROM machines WHERE machine NOT IN (SELECT DISTINCT machine FROM series)")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return int(count)

        try:
            return self._retry(delete)
        except sqlite3.Error as exc:
            raise self._damaged(exc) from None

    # --- reading -------------------------------------------------------------------------

    def machines(self) -> dict[str, dict[str, str]]:
        """machine slug -> its fingerprint (device, arch, tool, tool_version)."""
        out: dict[str, dict[str, str]] = {}
        for machine, text in self._rows("SELECT machine, fingerprint FROM machines ORDER BY machine"):
            try:
                fingerprint = json.loads(text)
            except (TypeError, ValueError, RecursionError):
                fingerprint = None
            if not isinstance(fingerprint, dict):
                raise InputError(self.path, f"the history store is damaged (machine {machine!r}: fingerprint is not "
                                 "a JSON object)", hint=DAMAGED_HINT)
            out[str(machine)] = {str(k): str(v) for k, v in fingerprint.items()}
        return out

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction (``SeriesReader._snapshot``): in WAL mode its reads see one
        snapshot, in a rollback journal its shared lock keeps writers out until it ends."""
        if self._db.in_transaction:
            yield
            return
        try:
            self._db.execute("BEGIN")
        except sqlite3.Error as exc:
            raise self._damaged(exc) from None
        try:
            yield
        finally:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error:  # a read transaction keeps nothing: the error that ended it is the one said
                try:  # but it must end: left open, it would pin the WAL and refuse the next add's BEGIN
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._damaged(exc) from None
        except (UnicodeDecodeError, OverflowError) as exc:  # text not UTF-8, integers past 64 bits
            raise InputError(self.path, f"the history store is damaged ({exc})",
                             hint=DAMAGED_HINT) from None

    def _numbers(self, frame: "pd.DataFrame", columns: Sequence[str]) -> None:
        """``columns`` of ``frame`` as float64 in place; text or blobs in them (SQLite's
        REAL columns take anything) are a damaged store, not a crash in a reader."""
        import pandas as pd

        for column in columns:
            values = pd.to_numeric(frame[column], errors="coerce")
            bad = values.isna() & frame[column].notna()
            if bad.any():
                raise InputError(self.path, f"the history store is damaged (column {column!r} holds "
                                 f"{frame.loc[bad, column].iloc[0]!r} in {int(bad.sum())} row(s), not a number)",
                                 hint=DAMAGED_HINT)
            frame[column] = values.astype("float64")

    def _times(self, frame: "pd.DataFrame", column: str) -> None:
        self._numbers(frame, [column])
        as_times(frame, column, self.path)

    def runs(self, *, since: float | None = None, limit: int | None = None) -> "pd.DataFrame":
        """One row per run, oldest first: RUN_COLUMNS, ``time``/``added`` as UTC
        timestamps, ``machines``/``suites`` comma-joined, ``values`` the count stored."""
        sql = ("SELECT run_id, time, commit_sha, branch, ci_system, ci_job, ci_url, host, source, added, machines, "
               "suites, n_values FROM runs")
        params: list[object] = []
        if since is not None:
            sql += " WHERE time >= ?"
            params.append(float(since))
        sql += " ORDER BY time, run_id"
        import pandas as pd

        frame = pd.DataFrame(self._rows(sql, params), columns=list(RUN_COLUMNS))
        if limit is not None:
            frame = frame.tail(limit).reset_index(drop=True)
        for column in ("time", "added"):
            self._times(frame, column)
        frame["values"] = self._integers(frame["values"].fillna(0)).astype("int64")
        return frame

    def latest(self, *, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]], last: int) -> "pd.DataFrame":
        """The latest ``last`` runs of the series ``pairs`` names (kernel, metric; a metric
        of None: every metric of that kernel) of one machine x suite, as ``series`` gives
        them (SERIES_COLUMNS, series order): what the gate judges a run on, read from the
        series' own index ranges, however many other series and nights the store holds."""
        keys, runs, read = self._latest_parts(machine, suite, pairs, last, VALUE_COLUMNS)
        return as_text(concat_batches(series_batches(keys, runs, read, last=last, clean=self._check)))

    def latest_values(self, *, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]],
                      last: int) -> LatestValues:
        """``latest``'s values, runs and names as arrays (``perfcheck.history.latest``):
        the gate's read, without a frame of every column."""
        keys, runs, read = self._latest_parts(machine, suite, pairs, last, LEAN_COLUMNS)
        return latest_values(keys, runs, read, last=last, max_ids=MAX_IDS, where=self.path, clean=self._clean)

    def _latest_parts(self, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]], last: int,
                      columns: Sequence[str]):  # noqa: ANN202 (keys, runs, read: series_batches' arguments)
        """The named series' keys (series order), the runs table and a reader of the
        ``columns`` (the first of VALUE_COLUMNS) of each series' latest ``last`` runs."""
        wanted = sorted(set(pairs), key=lambda pair: (pair[0], pair[1] or ""))
        keys: list[tuple[object, ...]] = []
        # (kernel, metric) pairs and whole kernels (metric None) asked apart: a metric that
        # may be NULL kept SQLite from the names index's last column (it read each kernel's
        # every metric: 2.4x the time of the gate's 2,000 lookups); duplicates go below
        named = [pair for pair in wanted if pair[1] is not None]
        whole = [pair for pair in wanted if pair[1] is None]
        for asked, term in ((named, " AND s.metric = w.metric"), (whole, "")):
            for at in range(0, len(asked), MAX_IDS):
                chunk = asked[at:at + MAX_IDS]
                keys.extend(self._rows(
                    f"WITH wanted(kernel, metric) AS (VALUES {', '.join(['(?, ?)'] * len(chunk))}) "
                    # CROSS JOIN keeps the names the outer loop, each one index lookup (planned
                    # freely, SQLite scanned the suite's every series once per name: seconds)
                    "SELECT s.series_id, s.machine, s.suite, s.kernel, s.metric FROM wanted w CROSS JOIN series s "
                    f"ON s.machine = ? AND s.suite = ? AND s.kernel = w.kernel{term}",
                    [*(name for pair in chunk for name in pair), machine, suite]))
        keys = sorted(set(keys), key=lambda key: key[1:])  # the order of series (text sorts as SQLite's BINARY)
        runs = self._rows("SELECT run, run_id, time, commit_sha, branch, ci_job, ci_url FROM runs")
        by_number = runs_in_order(runs)

        def read(ids: list[int]) -> list[tuple[object, ...]]:
            if by_number:  # each series' last ``last`` rows of its primary key range
                chosen = ", ".join(f"v.{c}" for c in columns)
                return self._rows(
                    f"WITH ids(id) AS (VALUES {', '.join(['(?)'] * len(ids))}) SELECT {chosen} FROM ids "
                    "CROSS JOIN results v ON v.series_id = ids.id AND v.run >= coalesce((SELECT x.run FROM results x "
                    "WHERE x.series_id = ids.id ORDER BY x.run DESC LIMIT 1 OFFSET ?), -9223372036854775808)",
                    [*ids, max(0, last - 1)])
            return self._rows(values_sql(f"v.series_id IN ({', '.join('?' * len(ids))})", last, "?", "",
                                         fetched=columns), [*ids, last])

        return keys, runs, read

    def _unjoinable_values(self) -> None:
        """Text or a blob in ``results.series_id`` (its INTEGER column keeps what another
        tool wrote) is a damaged store: such a row matches no series, so every read would
        leave its value out without a word. Text and blobs sort after every number in the
        primary key (series_id, run): one step from its end finds one, not a scan of the
        values (a fraction, 2.5, sorts among the numbers: found only by such a scan, so
        left to the reads, which see no value of it)."""
        last = self._rows("SELECT series_id FROM results ORDER BY series_id DESC LIMIT 1")
        if last and not isinstance(last[0][0], int):
            raise InputError(self.path, f"the history store is damaged (results.series_id holds {last[0][0]!r}, "
                             "not a series number: its value belongs to no series)", hint=DAMAGED_HINT)

    def _integers(self, values: "pd.Series") -> "pd.Series":
        import pandas as pd

        frame = pd.DataFrame({"values": values})
        self._numbers(frame, ["values"])
        return frame["values"]


# --- shared by both backends ------------------------------------------------------------------



def _first(row: tuple[object, ...]) -> int:
    return row[0]  # type: ignore[return-value]


# (kernel, metric) -> the stored columns after series_id and run: value, unit, n, median,
# spread, outcome, low, high (numbers finite or None, unit text)
Group = Mapping[tuple[str, str], tuple[object, ...]]


@dataclass(frozen=True)
class ValueRows:
    """A run's values as both stores write them, grouped as the series ids are looked
    up: (machine, suite) -> (kernel, metric) -> the stored columns. ``value_rows`` makes
    it of ``Result``s; ``runs.read_results`` makes it straight from a results file
    (32,000 Results, then their rows made again, were 90 ms of `history add`'s CPU)."""

    groups: Mapping[tuple[str, str], Group]

    def __len__(self) -> int:
        return sum(map(len, self.groups.values()))

    def results(self) -> list[Result]:
        return [Result(machine, suite, kernel, metric, *columns)  # type: ignore[arg-type]
                for (machine, suite), group in self.groups.items() for (kernel, metric), columns in group.items()]


def value_rows(results: "Iterable[Result] | ValueRows") -> ValueRows:
    """The stored columns of each value (a key given twice: the last wins, as INSERT OR
    REPLACE did); a ``ValueRows`` is already that."""
    if isinstance(results, ValueRows):
        return results
    groups: dict[tuple[str, str], dict[tuple[str, str], tuple[object, ...]]] = {}
    for r in results:
        group = groups.get((r.machine, r.suite))
        if group is None:
            group = groups[(r.machine, r.suite)] = {}
        group[(r.kernel, r.metric)] = (finite(r.value), r.unit or "", r.n, finite(r.median), finite(r.spread),
                                       r.outcome, finite(r.low), finite(r.high))
    return ValueRows(groups)


def stored_rows(rows: ValueRows, run: int,
                series_ids: "Callable[[str, str, Group], Mapping[tuple[str, str], int]]") -> list[tuple[object, ...]]:
    """The value rows to insert, (series_id, run, columns...) sorted by series: each leaf
    page of the values is changed once, in one pass. ``series_ids(machine, suite, group)``
    gives a group's ids, making the missing ones: called in key order, so new series are
    numbered in key order."""
    out: list[tuple[object, ...]] = []
    for (machine, suite), group in sorted(rows.groups.items()):
        ids = series_ids(machine, suite, group)
        out += [(number, run, *columns) for number, columns in zip(map(ids.__getitem__, group), group.values())]
    out.sort(key=_first)
    return out


def same_run_sql(mark: str) -> str:
    """The values stored under one run id (``mark``: its placeholder), with their series' names."""
    return ("SELECT s.machine, s.suite, s.kernel, s.metric, v.value, v.unit, v.n, v.median, v.spread, v.outcome, "
            "v.low, v.high FROM results v JOIN series s ON s.series_id = v.series_id JOIN runs r ON r.run = v.run "
            f"WHERE r.run_id = {mark}")


def same_values(have: Iterable[Sequence[object]], rows: ValueRows) -> bool:
    """The stored rows (``same_run_sql``) are exactly ``rows`` (``value_rows``)."""
    wanted = [(machine, suite, *key, *columns) for (machine, suite), group in rows.groups.items()
              for key, columns in group.items()]
    return sorted(map(tuple, have), key=repr) == sorted(wanted, key=repr)


def run_summary(rows: ValueRows) -> tuple[str | None, str | None, int]:
    """The run's machines and suites (sorted, comma-joined; None without values) and its value count."""
    filled = [name for name, group in rows.groups.items() if group]
    machines = ",".join(sorted({machine for machine, _ in filled})) or None
    suites = ",".join(sorted({suite for _, suite in filled})) or None
    return machines, suites, len(rows)


def runs_in_order(runs: Sequence[Sequence[object]]) -> bool:
    """Whether the runs (run, run_id, time, ...) were numbered in the order of their time
    (then run id), as runs appended night after night are: then a series' latest N runs
    are the last N rows of its primary key range (series_id, run), read without sorting
    its whole history. A run imported later than a newer one (a backlog of results
    files, a copied store) breaks it: readers then rank the runs by time in SQL."""
    ordered = sorted(runs, key=lambda run: run[0])  # type: ignore[arg-type,return-value]
    stamps = [(run[2], run[1]) for run in ordered]
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and isinstance(i, str) for t, i in stamps):
        return False  # a damaged time or id: the ranked query reads it and says what is wrong
    return all(a < b for a, b in zip(stamps, stamps[1:]))


def as_times(frame: "pd.DataFrame", column: str, where: "Path | StoreURL") -> None:
    """``frame[column]`` (Unix seconds, float64) as UTC timestamps in place; a time
    outside 1970-2200 (an older perfcheck stored such) names its run (``where``: the
    store): pandas 2 cannot hold it, pandas 3 would show the year 33658."""
    import pandas as pd

    bad = ~frame[column].between(MIN_TIME, MAX_TIME)
    if bad.any():
        raise impossible_time(where, frame.loc[bad, "run_id"].iloc[0], column, float(frame.loc[bad, column].iloc[0]))
    frame[column] = pd.to_datetime(frame[column], unit="s", utc=True)


def impossible_time(where: "Path | StoreURL", run_id: object, column: str, value: float) -> InputError:
    """The error of a run's ``column`` (Unix seconds) outside MIN_TIME-MAX_TIME, read from ``where``."""
    return InputError(where, f"run {run_id!r} has {column} {value!r}, outside 1970-2200 (an older "
                      "perfcheck stored it)", hint="`perfcheck history prune` removes runs with impossible times")


def runs_frame(rows: list[tuple[object, ...]], limit: int | None, where: "Path | StoreURL") -> "pd.DataFrame":
    """``runs``' frame of a store of typed columns (PostgreSQL's) from its rows."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    if limit is not None:
        frame = frame.tail(limit).reset_index(drop=True)
    for column in ("time", "added"):
        frame[column] = frame[column].astype("float64")
        as_times(frame, column, where)
    frame["values"] = frame["values"].astype("int64")
    return frame


class UpgradeRefused(InputError):
    """A store of an older schema opened where it may not be written."""


def upgrade_refused(location: "Path | StoreURL", version: int) -> UpgradeRefused:
    """A store of an older schema opened where it may not be written (read-only mode, a
    read-only file): migrating it is a write, so it is refused, never done behind the
    read-only setting's back."""
    return UpgradeRefused(location, f"history schema version {version} needs an upgrade to {SCHEMA_VERSION}, and the "
                      "store cannot be written here",
                      hint="run a command that writes once where the store can be written (e.g. `perfcheck "
                           "history add`, or `perfcheck history list` on a writable copy, not read-only)")


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def open_store(path: "str | Path | StoreURL", *, create: bool = True, read_only: bool = False) -> "HistoryStore":
    """Open (and create or migrate) the store at ``path``: a file path is an SQLite
    store (``Store``), a ``postgresql://`` URL a PostgreSQL one (``perfcheck.history.pgstore``;
    a URL is never taken as a file name). ``create=False``: a missing store is an
    InputError (reading commands: list, detect, report). ``read_only``: nothing is
    written, a migration included (``upgrade_refused``): history_mode read-only."""
    from perfcheck.storeurl import StoreURL, store_location

    location = store_location(path) if isinstance(path, str) else path
    if isinstance(location, StoreURL):
        from perfcheck.history.pgstore import PostgresStore

        return PostgresStore(location, create=create, read_only=read_only)
    return Store(location, create=create and not read_only, read_only=read_only)


def store_exists(path: "str | Path | StoreURL") -> bool:
    """Whether a store is there to read (the gate reads no history before the first run)."""
    from perfcheck.storeurl import StoreURL, store_location

    location = store_location(path) if isinstance(path, str) else path
    if isinstance(location, StoreURL):
        from perfcheck.history.pgstore import store_exists as database_has_store

        return database_has_store(location)
    path = Path(location)
    # an empty file (touched, or a store whose first run has not been written) has no history
    return path.exists() and not (path.is_file() and path.stat().st_size == 0)
