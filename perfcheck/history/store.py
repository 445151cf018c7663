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

import json
import math
import sqlite3
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.errors import InputError, UsageError

if TYPE_CHECKING:
    import pandas as pd

    from perfcheck.history.backend import HistoryStore
    from perfcheck.storeurl import StoreURL

# "pckh" in ASCII: marks a SQLite file as a perfcheck history store, so a rocpd or
# rocprof database given by mistake is refused instead of being written into.
APPLICATION_ID = 0x70636B68
BUSY_TIMEOUT_S = 60.0  # a writer waits this long for another one (imports of many files)

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
)
SCHEMA_VERSION = len(MIGRATIONS)
COMPACT_VERSION = 3  # series named once (issue 22)

SERIES_COLUMNS = (
    "machine", "suite", "kernel", "metric", "unit", "run_id", "time", "commit", "branch",
    "ci_job", "ci_url", "value", "n", "median", "spread", "outcome", "low", "high",
)
VALUE_COLUMNS = ("series_id", "run", "value", "unit", "n", "median", "spread", "outcome", "low", "high")
BATCH_ROWS = 100_000  # values per part read: ~100-200 MB at most in the commands, and few queries
MAX_IDS = 4_000  # series per query: under SQLite's 32,766 bound variables
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
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class Store:
    """An open history store. Use as a context manager or call ``close``."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise InputError(self.path, "no such history store", hint="name an existing store, or run `perfcheck check --history PATH` to create one")
        if self.path.is_dir():
            raise InputError(self.path, "is a directory, not a history store", hint="name a file, e.g. perf-history.sqlite")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(self.path, f"cannot open the history store ({exc})") from None
        try:
            self._prepare()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            if "file is not a database" in str(exc) or "malformed" in str(exc):
                raise InputError(self.path, "is not a perfcheck history store (not an SQLite database)",
                                 hint="name another file for --history") from None
            raise InputError(self.path, f"cannot open the history store ({exc})") from None
        except (InputError, UsageError):
            self._db.close()
            raise

    # --- opening and migrations ----------------------------------------------------------

    def _prepare(self) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        db.execute("PRAGMA foreign_keys = ON")
        self._check_identity()
        mode = self._retry(lambda: db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        if str(mode).lower() != "wal":  # e.g. a file system without shared memory: still correct, less concurrent
            db.execute("PRAGMA journal_mode = DELETE")
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, never corrupt
        self._migrate()

    def _check_identity(self) -> None:
        app = self._db.execute("PRAGMA application_id").fetchone()[0]
        tables = self._db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        if app not in (0, APPLICATION_ID) or (app == 0 and tables):
            raise InputError(self.path, "is an SQLite database but not a perfcheck history store",
                             hint="name another file for --history")

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

    def add(self, run: RunRecord, results: Iterable[Result], machines: Iterable[Machine] = ()) -> AddResult:
        """Append one run and its values in one transaction. A run id already stored is
        left alone (``added`` False): importing the same results file twice adds nothing."""
        rows = value_rows(results)
        named = {m.machine: m for m in machines}
        for machine in {key[0] for key in rows} - set(named):
            named[machine] = Machine(machine)
        summary = run_summary(rows)

        def write() -> AddResult:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                exists = db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone()
                if exists:
                    db.execute("ROLLBACK")
                    return AddResult(run.run_id, False, 0)
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
                db.executemany("INSERT OR IGNORE INTO series (machine, suite, kernel, metric) VALUES (?, ?, ?, ?)",
                               sorted(rows))
                ids: dict[tuple[str, str, str, str], int] = {}
                for machine, suite in sorted({key[:2] for key in rows}):
                    ids.update(((m, su, k, me), i) for i, m, su, k, me in db.execute(
                        "SELECT series_id, machine, suite, kernel, metric FROM series WHERE machine = ? AND suite = ?",
                        (machine, suite)))
                db.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               [(ids[key], number, *values) for key, values in rows.items()])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return AddResult(run.run_id, True, len(rows))

        try:
            return self._retry(write)
        except sqlite3.Error as exc:
            raise InputError(self.path, f"cannot write to the history store ({exc})") from None

    def prune(self, *, keep_days: float, now: float | None = None) -> int:
        """Delete runs older than ``keep_days`` (and their values); returns how many."""
        if not keep_days >= 0:
            raise UsageError(f"--keep-days must be 0 or more, not {keep_days!r}")
        cutoff = (now if now is not None else _time.time()) - keep_days * 86400.0

        def delete() -> int:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM results WHERE run IN (SELECT run FROM runs WHERE time < ?)", (cutoff,))
                count = db.execute("DELETE FROM runs WHERE time < ?", (cutoff,)).rowcount
                db.execute("DELETE FROM series WHERE NOT EXISTS (SELECT 1 FROM results v WHERE v.series_id = series.series_id)")
                db.execute("DELETE FROM machines WHERE machine NOT IN (SELECT DISTINCT machine FROM series)")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return int(count)

        return self._retry(delete)

    # --- reading -------------------------------------------------------------------------

    def machines(self) -> dict[str, dict[str, str]]:
        """machine slug -> its fingerprint (device, arch, tool, tool_version)."""
        return {m: json.loads(fp) for m, fp in self._db.execute("SELECT machine, fingerprint FROM machines ORDER BY machine")}

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
        return runs_frame(self._db.execute(sql, params).fetchall(), limit)

    def batches(
        self,
        *,
        machine: str | None = None,
        suite: str | Sequence[str] | None = None,
        kernel: str | Sequence[str] | None = None,
        metric: str | Sequence[str] | None = None,
        since: float | None = None,
        last: int | None = None,
        rows: int = BATCH_ROWS,
    ) -> "Iterator[pd.DataFrame]":
        """``series`` in parts of about ``rows`` values, each holding whole kernels
        (every series of a machine x suite x kernel that the filters let through), in
        the order of ``series``: memory stays that of one part however long the history."""
        where, params = series_filters(machine, suite, kernel, metric, "?")
        keys = self._db.execute(
            "SELECT series_id, machine, suite, kernel, metric FROM series" + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY machine, suite, kernel, metric", params).fetchall()
        run_sql = "SELECT run, run_id, time, commit_sha, branch, ci_job, ci_url FROM runs"
        runs = self._db.execute(run_sql + (" WHERE time >= ?" if since is not None else ""),
                                [float(since)] if since is not None else []).fetchall()
        when = " AND v.run IN (SELECT run FROM runs WHERE time >= ?)" if since is not None else ""

        def read(ids: list[int]) -> list[tuple[object, ...]]:
            sql = values_sql(f"v.series_id IN ({', '.join('?' * len(ids))})" + when, last, "?", "")
            extra = [float(since)] if since is not None else []
            return self._db.execute(sql, [*ids, *extra, *([last] if last is not None else [])]).fetchall()

        yield from series_batches(keys, runs, read, last=last, rows=rows)

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
        """The values as one long frame (SERIES_COLUMNS), sorted by machine, suite,
        kernel, metric, then time: group by the first four for one series each.
        ``time`` is a UTC timestamp. Filters are exact names (a list: any of them);
        ``since``: Unix seconds; ``last``: the latest N runs of each series. The whole
        selection at once: a reader of every series uses ``batches``."""
        return concat_batches(self.batches(machine=machine, suite=suite, kernel=kernel, metric=metric, since=since,
                                           last=last))


# --- shared by both backends ------------------------------------------------------------------



def value_rows(results: Iterable[Result]) -> dict[tuple[str, str, str, str], tuple[object, ...]]:
    """(machine, suite, kernel, metric) -> the stored columns after series_id and run
    (a key given twice: the last wins, as INSERT OR REPLACE did)."""
    return {(r.machine, r.suite, r.kernel, r.metric): (
        finite(r.value), r.unit or "", r.n, finite(r.median), finite(r.spread), r.outcome, finite(r.low),
        finite(r.high)) for r in results}


def run_summary(rows: Mapping[tuple[str, str, str, str], object]) -> tuple[str | None, str | None, int]:
    """The run's machines and suites (sorted, comma-joined; None without values) and its value count."""
    machines = ",".join(sorted({key[0] for key in rows})) or None
    suites = ",".join(sorted({key[1] for key in rows})) or None
    return machines, suites, len(rows)


def values_sql(where: str, last: int | None, mark: str, collate: str) -> str:
    """The VALUE_COLUMNS of the series ``where`` selects; ``last``: only each series'
    latest N runs (by time, then run id), ranked in SQL, so the gate's "last 30 runs"
    of a year-long series reads 30 rows, not 365 (``collate``: the run id's byte order)."""
    columns = ", ".join(f"v.{c}" for c in VALUE_COLUMNS)
    if last is None:
        return f"SELECT {columns} FROM results v WHERE {where}"
    return (f"SELECT {', '.join(VALUE_COLUMNS)} FROM (SELECT {columns}, row_number() OVER (PARTITION BY v.series_id "
            f"ORDER BY r.time DESC, r.run_id{collate} DESC) AS latest FROM results v JOIN runs r ON r.run = v.run "
            f"WHERE {where}) AS ranked WHERE latest <= {mark}")


def runs_frame(rows: list[tuple[object, ...]], limit: int | None) -> "pd.DataFrame":
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    if limit is not None:
        frame = frame.tail(limit).reset_index(drop=True)
    for column in ("time", "added"):
        frame[column] = pd.to_datetime(frame[column].astype("float64"), unit="s", utc=True)
    frame["values"] = frame["values"].astype("int64")
    return frame


def series_filters(machine: object, suite: object, kernel: object, metric: object, mark: str) -> tuple[list[str], list[object]]:
    """WHERE terms on the series table and their parameters (``mark``: the driver's placeholder)."""
    where, params = [], []  # type: ignore[var-annotated]
    for column, wanted in (("machine", machine), ("suite", suite), ("kernel", kernel), ("metric", metric)):
        if wanted is None:
            continue
        values = [wanted] if isinstance(wanted, str) else list(wanted)  # type: ignore[call-overload]
        where.append(f"{column} IN ({', '.join([mark] * len(values))})" if values else "0 = 1")
        params.extend(values)
    return where, params


def series_batches(keys: list[tuple[object, ...]], runs: list[tuple[object, ...]],
                   read: "Callable[[list[int]], list[tuple[object, ...]]]", *, last: int | None,
                   rows: int = BATCH_ROWS) -> "Iterator[pd.DataFrame]":
    """Frames of SERIES_COLUMNS from the series ``keys`` (series_id, machine, suite,
    kernel, metric; in key order), the ``runs`` (run, run_id, time, commit, branch,
    ci_job, ci_url) and ``read`` (the VALUE_COLUMNS rows of some series ids). A part
    is whole kernels of about ``rows`` values; names join the values here, not in
    SQL, so each row holds pointers to one copy of a long kernel name."""
    import numpy as np
    import pandas as pd

    if not keys or not runs:
        return
    names = pd.DataFrame(keys, columns=["series_id", "machine", "suite", "kernel", "metric"])
    names["order"] = np.arange(len(names))
    kernels = names.groupby(["machine", "suite", "kernel"], sort=False).ngroup().to_numpy()
    run_table = pd.DataFrame(runs, columns=["run", "run_id", "time", "commit", "branch", "ci_job", "ci_url"])
    step = max(1, min(MAX_IDS, rows // max(1, len(run_table))))
    start = 0
    while start < len(names):
        end = min(start + step, len(names))
        end = int(np.searchsorted(kernels, kernels[end - 1], side="right"))  # whole kernels only
        ids = names["series_id"].iloc[start:end].tolist()
        values = []
        for at in range(0, len(ids), MAX_IDS):  # a kernel with more series than MAX_IDS: several queries
            values.extend(read(ids[at:at + MAX_IDS]))
        frame = _frame(names.iloc[start:end], run_table, values, last)
        start = end
        if len(frame):
            yield frame


def _frame(names: "pd.DataFrame", runs: "pd.DataFrame", values: list[tuple[object, ...]],
           last: int | None) -> "pd.DataFrame":
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(values, columns=list(VALUE_COLUMNS))
    frame = frame.merge(runs, on="run", how="inner").merge(names, on="series_id", how="inner")
    time = frame["time"].astype("float64").to_numpy()
    order = np.lexsort((frame["run_id"].to_numpy(dtype=object).astype(str), time, frame["order"].to_numpy()))
    frame = frame.iloc[order].reset_index(drop=True)
    if last is not None and len(frame):
        frame = frame.groupby("order", sort=False).tail(last).reset_index(drop=True)
    frame = frame[list(SERIES_COLUMNS)].copy()
    frame["time"] = pd.to_datetime(frame["time"].astype("float64"), unit="s", utc=True)
    for column in ("value", "median", "spread", "low", "high"):
        frame[column] = frame[column].astype("float64")
    frame["n"] = frame["n"].astype("Int64")
    return frame


def concat_batches(parts: "Iterable[pd.DataFrame]") -> "pd.DataFrame":
    """The parts as one frame (an empty one of SERIES_COLUMNS when there are none)."""
    import pandas as pd

    frames = list(parts)
    if frames:
        return pd.concat(frames, ignore_index=True)
    return _frame(pd.DataFrame(columns=["series_id", "machine", "suite", "kernel", "metric", "order"]),
                  pd.DataFrame(columns=["run", "run_id", "time", "commit", "branch", "ci_job", "ci_url"]), [], None)


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def open_store(path: "str | Path | StoreURL", *, create: bool = True) -> "HistoryStore":
    """Open (and create or migrate) the store at ``path``: a file path is an SQLite
    store (``Store``), a ``postgresql://`` URL a PostgreSQL one (``perfcheck.history.pgstore``;
    a URL is never taken as a file name). ``create=False``: a missing store is an
    InputError (reading commands: list, detect, report)."""
    from perfcheck.storeurl import StoreURL, store_location

    location = store_location(path) if isinstance(path, str) else path
    if isinstance(location, StoreURL):
        from perfcheck.history.pgstore import PostgresStore

        return PostgresStore(location, create=create)
    return Store(location, create=create)


def store_exists(path: "str | Path | StoreURL") -> bool:
    """Whether a store is there to read (the gate reads no history before the first run)."""
    from perfcheck.storeurl import StoreURL, store_location

    location = store_location(path) if isinstance(path, str) else path
    if isinstance(location, StoreURL):
        from perfcheck.history.pgstore import store_exists as database_has_store

        return database_has_store(location)
    return Path(location).exists()
