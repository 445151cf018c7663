"""SQLite files that profilers write (Nsight Systems exports, rocprofv3's rocpd,
rocprof v1's results.db), opened the one way every reader of them needs: read-only,
without side files, and with every statement bounded.

A profile's own views run when it is read (rocpd is all views), so a hostile or
damaged file can make a read run for ever (a recursive view) or build strings of
gigabytes. Every connection opened here therefore has

* a budget of SQLite virtual-machine steps proportional to the file's size
  (``STEPS_PER_BYTE``, at least ``MIN_STEPS``), counted over all its statements by a
  progress handler. Measured: ``inspect`` of a 10M-dispatch Nsight Systems or rocpd
  file takes 0.6 steps per byte, reading rocpd's ``kernels`` view row by row (with
  its eight joins) a few; the budget leaves a margin of 5-30x and still ends a
  runaway view (about 15 million steps a second on a loaded machine: a minute per
  50 MB of file);
* limits on the length of a string or blob (``MAX_LENGTH``), the number of
  columns of a result (``MAX_COLUMNS``) and of terms of a compound SELECT
  (``MAX_COMPOUND``), through ``Connection.setlimit`` (Python >= 3.11). Older
  Pythons have no setlimit: there the step budget alone bounds a read, and strings
  are bounded only by SQLite's own limit (1 GB).

Exceeding any of them is an ``InputError`` naming the file and the table or view
being read (``Reader.rows`` and friends take its name). Identifiers taken from a
file are quoted with ``quote`` and never pasted into SQL as they are.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfcheck.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

STEPS_PER_BYTE = 20
MIN_STEPS = 100_000_000
# How many VM steps pass between two calls of the progress handler (cheap enough
# not to show in a profile: a call per ~0.1 ms of work).
_HANDLER_PERIOD = 100_000
# No real profile holds a string near this long (kernel names run to a few KB; a
# chunk of group_concat'ed integers, see nsys/rocpd, to a few MB).
MAX_LENGTH = 64 * 1024 * 1024
# rocprof v1's kernel table has a column per counter collected (a few hundred at
# most); SQLite's own default is 2000.
MAX_COLUMNS = 1000
# rocpd's views are a UNION ALL over the sessions merged into the file.
MAX_COMPOUND = 256


def quote(identifier: str) -> str:
    """``identifier`` as an SQL identifier, whatever characters it holds (a column
    name from a file may contain ``"``)."""
    return '"' + str(identifier).replace('"', '""') + '"'


def _uri(path: Path) -> str:
    # immutable=1: SQLite takes no locks and never creates -wal/-shm files beside the
    # input, even for a database in WAL mode on read-only storage. A -wal file already
    # beside it holds committed rows that immutable mode would not see, so then the
    # file is opened plainly read-only (the side files exist already).
    uri = Path(path).resolve().as_uri()
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return f"{uri}?mode=ro"
    return f"{uri}?mode=ro&immutable=1"


def query_frame(connection: sqlite3.Connection, sql: str, columns: list[str]) -> "pd.DataFrame":
    """Every row of ``sql`` as a frame of ``columns`` (an empty frame with those columns
    when there is none: ``from_records`` of no rows would have none)."""
    import pandas as pd

    rows = connection.execute(sql).fetchall()
    return pd.DataFrame.from_records(rows, columns=columns) if rows else pd.DataFrame(columns=columns)


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only, without side files, unbounded: for sniffers, which
    only read the schema. Readers use ``Reader``."""
    return sqlite3.connect(_uri(path), uri=True)


def table_names(connection: sqlite3.Connection) -> set[str]:
    """The tables and views of the database."""
    return {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def sniffed_tables(path: Path) -> set[str] | None:
    """The tables of the SQLite file at ``path`` for a format sniffer, which answers
    and never raises; None when it cannot be opened (a cut-off or damaged copy)."""
    try:
        with closing(connect_read_only(path)) as connection:
            return table_names(connection)
    except (sqlite3.Error, OSError, ValueError):
        return None


class Steps:
    """The SQLite steps spent by one or several connections (the reading threads of
    one read share theirs: one budget per read, whatever the number of threads), and
    a flag that ends their statements at the next progress call (the caller stopped,
    or a range failed: the other threads' scans must not run on)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.spent = 0
        self.stopped = False
        self._lock = threading.Lock()  # the handlers of several threads add to one count

    def spend(self, steps: int) -> bool:
        """Count ``steps``; True when the statement must end."""
        with self._lock:
            self.spent += steps
            return self.spent > self.budget or self.stopped

    def exhausted(self) -> bool:
        return self.spent > self.budget


class Reader:
    """A bounded read-only connection to one profile (see the module's docstring).

    ``what`` names the kind of file in errors ("the rocpd database"); ``hint`` says
    what to do about a damaged one. Every query names the table or view it reads,
    so that a bound exceeded or a damaged page is reported against it. ``steps``:
    the budget to share with other readers (``sibling``); by default one's own.
    ``threaded``: the connection may be closed by another thread than its maker's.
    """

    def __init__(self, path: Path, what: str, hint: str, *, steps: Steps | None = None, threaded: bool = False) -> None:
        self.path = Path(path)
        self.what = what
        self.hint = hint
        if steps is None:
            try:
                size = self.path.stat().st_size
            except OSError:
                size = 0
            steps = Steps(max(MIN_STEPS, STEPS_PER_BYTE * size))
        self.steps = steps
        self.budget = steps.budget
        try:
            # A reading thread's connection is closed by the thread that waited for it,
            # once no thread uses it (read_ranges): sqlite3 refuses that by default.
            self.connection = sqlite3.connect(_uri(self.path), uri=True, check_same_thread=not threaded)
        except sqlite3.Error as exc:
            raise self.error(exc, None) from None
        if hasattr(self.connection, "setlimit"):  # Python >= 3.11
            self.connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_LENGTH)
            self.connection.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
            self.connection.setlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, MAX_COMPOUND)
        self.connection.set_progress_handler(self._progress, _HANDLER_PERIOD)

    def _progress(self) -> int:
        return 1 if self.steps.spend(_HANDLER_PERIOD) else 0  # non-zero interrupts the statement

    def sibling(self, steps: Steps) -> "Reader":
        """Another connection to the same file, spending ``steps``."""
        return Reader(self.path, self.what, self.hint, steps=steps, threaded=True)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def error(self, exc: BaseException, source: str | None) -> InputError:
        """The one-line error for ``exc`` raised while reading ``source``."""
        text = str(exc)
        where = f" reading {source!r}" if source else ""
        if self.steps.exhausted() or "interrupted" in text:
            return InputError(self.path, f"{self.what}: gave up{where} after {self.budget:,} SQLite steps, "
                                         f"{STEPS_PER_BYTE} per byte of the file (a recursive or runaway view?)",
                              hint="a profile is read in a few steps per byte; check where the file came from")
        if isinstance(exc, sqlite3.DataError) or "too big" in text:
            return InputError(self.path, f"{self.what}: a value longer than {MAX_LENGTH // 2**20} MiB{where} "
                                         f"(no profile holds one)", hint="check where the file came from")
        if "too many columns" in text or "too many terms in compound" in text:
            return InputError(self.path, f"{self.what}: {text}{where} (the limits are {MAX_COLUMNS} columns "
                                         f"and {MAX_COMPOUND} compound terms)", hint="check where the file came from")
        if isinstance(exc, MemoryError):
            return InputError(self.path, f"{self.what}: ran out of memory{where}", hint=self.hint)
        return InputError(self.path, f"cannot read {self.what} ({text}){where}", hint=self.hint)

    def _run(self, source: str | None, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        try:
            return self.connection.execute(sql, tuple(params))
        except (sqlite3.Error, MemoryError) as exc:
            raise self.error(exc, source) from None

    def rows(self, source: str | None, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Every row of ``sql``, which reads ``source`` (a table or view name)."""
        cursor = self._run(source, sql, params)
        try:
            return cursor.fetchall()
        except (sqlite3.Error, MemoryError) as exc:
            raise self.error(exc, source) from None

    def one(self, source: str | None, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        cursor = self._run(source, sql, params)
        try:
            return cursor.fetchone()
        except (sqlite3.Error, MemoryError) as exc:
            raise self.error(exc, source) from None

    def batches(self, source: str | None, sql: str, params: Sequence[Any] = (), size: int = 100_000) -> Iterator[tuple[list[tuple], list[str]]]:
        """The rows of ``sql`` in lists of at most ``size``, with the column names."""
        cursor = self._run(source, sql, params)
        names = [d[0] for d in cursor.description or ()]
        while True:
            try:
                batch = cursor.fetchmany(size)
            except (sqlite3.Error, MemoryError) as exc:
                raise self.error(exc, source) from None
            if not batch:
                return
            yield batch, names

    def frame(self, source: str | None, sql: str, params: Sequence[Any] = ()) -> "pd.DataFrame":
        """The rows of ``sql`` as a DataFrame (for small tables: devices, metadata)."""
        import pandas as pd

        cursor = self._run(source, sql, params)
        try:
            rows = cursor.fetchall()
        except (sqlite3.Error, MemoryError) as exc:
            raise self.error(exc, source) from None
        return pd.DataFrame(rows, columns=[d[0] for d in cursor.description or ()])

    def frames(self, source: str | None, sql: str, params: Sequence[Any] = (), size: int = 100_000) -> Iterator["pd.DataFrame"]:
        """The rows of ``sql`` as DataFrames of at most ``size`` rows (what
        ``pandas.read_sql_query(chunksize=)`` gives, with this reader's errors: pandas
        turns SQLite's into its own DatabaseError, which names no table)."""
        import pandas as pd

        for batch, names in self.batches(source, sql, params, size):
            yield pd.DataFrame.from_records(batch, columns=names, coerce_float=True)

    def tables(self) -> set[str]:
        return {name for (name,) in self.rows("sqlite_master", "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}

    def columns(self, table: str) -> list[str]:
        """Column names of a table or view (bound as a parameter, never pasted)."""
        return [name for (name,) in self.rows(table, "SELECT name FROM pragma_table_info(?)", (table,))]


# --- reading a dispatch table by rowid ranges ---------------------------------------------
#
# CPython's sqlite3 builds a Python object per cell, which at 10M dispatches costs far more
# than SQLite's own scan. A dispatch table has two kinds of columns: a few that differ on
# every row (timestamps, ids) and many that take a handful of values (the kernel, its
# launch configuration, the device). Per range of rows, the first kind comes back as one
# comma-separated string per column (group_concat, parsed by numpy in C), the second as its
# DISTINCT combinations; a row's combination is known from its kernel when the kernel has
# one combination in the range (the usual case), and read row by row only for the kernels
# that have several.


@dataclass(frozen=True)
class Range:
    """Rows ``first``..``last`` (rowids) of a dispatch table, read column-wise.

    ``series``: column -> int64 per row, in rowid order; ``configs``: the distinct
    (key, *config columns) tuples of the range; ``config_of_row``: index into
    ``configs`` per row. ``exact`` is False when the range holds values the fast
    read cannot take (NULL, text, reals): the caller reads it row by row."""

    first: int
    last: int
    exact: bool
    series: dict[str, np.ndarray] = field(default_factory=dict)
    configs: list[tuple] = field(default_factory=list)
    config_of_row: np.ndarray | None = None


def _parse_integers(text: str | None, count: int) -> np.ndarray | None:
    """The ``count`` integers group_concat wrote into ``text`` from a column of numbers
    and NULLs (``read_ranges`` checked that), or None when it holds anything else:
    exactly ``count - 1`` commas (a NULL leaves one out) and no real, which SQLite
    writes with a '.' (1.0e+20 too: its "%!.15g") or as 'Inf'. Checked on the text
    before parsing: older numpy stops at a '.' with a warning and returns the
    integers before it, and a warnings filter would be process-wide (this runs on
    the reading thread)."""
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    if not text or text.count(",") != count - 1 or "." in text or "I" in text:
        return None
    try:
        values = np.fromstring(text, dtype=np.int64, sep=",")  # C parser
    except ValueError:
        return None
    return values if len(values) == count else None


def read_ranges(reader: Reader, source: str, where: str, params: Sequence[Any], *, key: str,
                series: Sequence[str], config: Sequence[str], rowid: str, size: int,
                spans: Mapping[str, tuple[str, str]] | None = None) -> Iterator[Range]:
    """``source`` (a table, or a view flattened onto one table) in ranges of ``size``
    rowids. ``where`` filters rows (with ``params``), ``key`` is the kernel column,
    ``series`` the per-row integer columns and ``config`` the others. ``spans``:
    name -> (end, start) columns whose difference per row is wanted instead of the
    two (a duration from its timestamps: one column to concatenate and parse, not
    two), unless one of the range's timestamps is negative (impossible, which the
    caller must see to report) or an end comes before its start: then the range's
    ``series`` holds the two columns instead. Names are SQL identifiers the caller chose (never taken from the file).

    It relies on SQLite visiting a rowid range of a table in rowid order, which a
    table and the rocpd views over one (``SELECT *``) give: group_concat has no
    ORDER BY before SQLite 3.44."""
    filt = f"({where}) AND " if where else ""
    # Bounds over all rows, not the filtered ones: on a table (or a view of one) min and
    # max of the rowid are two b-tree lookups, with a WHERE they would be a whole pass.
    # Each in a query of its own: SQLite looks up a lone min() or max(), but scans the
    # whole table for the two in one SELECT (2.7 s of 10M dispatches, measured).
    bounds = reader.one(source, f"SELECT (SELECT min({rowid}) FROM {source}), (SELECT max({rowid}) FROM {source})")
    if bounds is None or not all(isinstance(b, int) for b in bounds):
        # No rows, or rows that no range reaches: a view in place of the table (its rowids
        # are NULL) or ids that are not integers, in a hand-made file. Said, not read as
        # a profile without dispatches.
        if reader.one(source, f"SELECT 1 FROM {source} {'WHERE ' + where if where else ''} LIMIT 1", params) is not None:
            raise InputError(reader.path, f"{reader.what}: the rows of {source!r} have no integer {rowid} to be read "
                                          f"by (a view in place of the table?)", hint="check where the file came from")
        return
    low, high = bounds
    spans = dict(spans or {})
    bounded = list(dict.fromkeys(c for pair in spans.values() for c in pair))
    columns = [key, *series, *bounded]
    # typeof(max(c)) per column, not a typeof per cell (which costs as much as the
    # concatenation): SQLite orders text and blobs after every number, so the maximum is
    # a number only in a column of numbers and NULLs. group_concat skips NULLs and writes
    # a real with a '.' or an exponent: _parse_integers catches both in the text (a
    # difference of two integers too, and SQLite makes it a real when it overflows).
    types = ", ".join(f"typeof(max({c}))" for c in columns)
    lows = "".join(f", min({c})" for c in bounded)
    # The query of every range checks no more than it must: each aggregate costs about a
    # fifteenth of the scan (measured: 0.025 s per million rows of 0.37 s). Not the
    # kernel column's type: the DISTINCT below returns every value it holds, and a range
    # with any that is not an integer is read row by row. Not the minimum of a span's
    # end: an end below zero with a start at or above it leaves the difference negative,
    # which sends the range to the plain query (an end before its start does too; the
    # timestamps then give the same durations, dispatch.finish subtracts them).
    checked = [*series, *bounded]
    span_starts = list(dict.fromkeys(start for _, start in spans.values()))
    concat = ", ".join([*(f"group_concat({c})" for c in [key, *series]),
                        *(f"group_concat({end} - {start})" for end, start in spans.values())])
    checks = "".join([*(f", typeof(max({c}))" for c in checked), *(f", min({c})" for c in span_starts)])
    q_series = f"SELECT count(*){checks}, {concat} FROM {source} WHERE {filt}{rowid} BETWEEN ? AND ?"
    # A range with a negative timestamp gets the timestamps themselves, for
    # dispatch.finish to empty and report as it does for any reader.
    plain = ", ".join(f"group_concat({c})" for c in columns)
    q_plain = f"SELECT count(*), {types}{lows}, {plain} FROM {source} WHERE {filt}{rowid} BETWEEN ? AND ?"
    q_configs = f"SELECT DISTINCT {', '.join([key, *config])} FROM {source} WHERE {filt}{rowid} BETWEEN ? AND ?"

    def one_range(own: Reader, first: int, last: int) -> Range | None:
        head = own.one(source, q_series, [*params, first, last])
        count = int(head[0]) if head else 0
        if not count:
            return None
        held = len(checked)
        if any(t not in ("integer", "real") for t in head[1:1 + held]):  # text or blobs
            return Range(first, last, exact=False)
        lowest = head[1 + held:1 + held + len(span_starts)]
        if any(not isinstance(v, int) for v in lowest):
            return Range(first, last, exact=False)
        names = [*series, *spans]
        arrays = [_parse_integers(text, count) for text in head[1 + held + len(span_starts):]]
        if any(a is None for a in arrays):
            return Range(first, last, exact=False)
        differences = arrays[1 + len(series):]
        if any(v < 0 for v in lowest) or any(len(a) and int(a.min()) < 0 for a in differences):
            head = own.one(source, q_plain, [*params, first, last])
            if int(head[0]) != count:  # the file changed between the two reads
                return Range(first, last, exact=False)
            width = len(columns)
            if any(t not in ("integer", "real") for t in head[1:1 + width]) or \
                    any(not isinstance(v, int) for v in head[1 + width:1 + width + len(bounded)]):
                return Range(first, last, exact=False)
            names = [*series, *bounded]
            arrays = [_parse_integers(text, count) for text in head[1 + width + len(bounded):]]
            if any(a is None for a in arrays):
                return Range(first, last, exact=False)
        configs = own.rows(source, q_configs, [*params, first, last])
        if any(not (v is None or (isinstance(v, int) and not isinstance(v, bool))) for row in configs for v in row):
            return Range(first, last, exact=False)
        keys = arrays[0]
        per_key: dict[int, list[int]] = {}
        for i, c in enumerate(configs):
            per_key.setdefault(c[0], []).append(i)
        # Each row's kernel among the range's few hundred, by binary search: linear in
        # the rows, where np.unique sorted them (0.3 s per million).
        known = np.array(sorted(k for k in per_key if k is not None), dtype=np.int64)
        at = np.minimum(np.searchsorted(known, keys), max(len(known) - 1, 0))
        if not len(known) or bool((known[at] != keys).any()):  # the file changed between the two reads
            return Range(first, last, exact=False)
        of_row = np.array([per_key[int(k)][0] for k in known], dtype=np.int64)[at]
        several = [k for k, found in per_key.items() if len(found) > 1]
        if several:
            # Kernels launched with several configurations in this range: their rows'
            # configurations row by row, in the same (rowid) order as the series.
            rows_of = np.isin(keys, np.array(several, dtype=np.int64))
            marks = ", ".join("?" * len(several))
            picked = own.rows(source, f"SELECT {', '.join([key, *config])} FROM {source} WHERE {filt}{rowid} "
                                      f"BETWEEN ? AND ? AND {key} IN ({marks}) ORDER BY {rowid}",
                                  [*params, first, last, *several])
            index = {c: i for i, c in enumerate(configs)}
            if len(picked) != int(rows_of.sum()) or any(r not in index for r in picked):
                return Range(first, last, exact=False)
            of_row[rows_of] = np.fromiter((index[r] for r in picked), dtype=np.int64, count=len(picked))
        return Range(first, last, exact=True, series=dict(zip(names, arrays[1:])),
                     configs=configs, config_of_row=of_row)

    # The ranges are read by reading threads (``reading_threads``), each on a connection
    # of its own: SQLite runs without the GIL (CPython's sqlite3 releases it around each
    # step), so the threads' scans run on the cores at once, and beside what the caller
    # does with each range (names, the per-kernel summary). The ranges are handed out
    # in order and given back in order (the caller sees what one thread would give),
    # at most ``_AHEAD`` per thread read and not yet taken (memory stays bounded). The
    # threads' connections share one budget of steps, as bounded as ``reader``.
    threads = reading_threads()
    steps = Steps(reader.budget)
    readers: dict[int, Reader] = {}
    made = threading.Lock()

    def fetch(first: int) -> Range | None:
        if steps.stopped:  # the caller stopped or a range failed: no new scan
            return None
        own = readers.get(threading.get_ident())
        if own is None:  # made in the thread that alone uses it
            own = reader.sibling(steps)
            with made:
                readers[threading.get_ident()] = own
        return one_range(own, first, min(first + size - 1, high))

    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="perfcheck-sqlite")
    pending: deque[Future[Range | None]] = deque()
    starts = iter(range(low, high + 1, size))
    try:
        while True:
            while len(pending) < _AHEAD * threads:
                first = next(starts, None)
                if first is None:
                    break
                pending.append(pool.submit(fetch, first))
            if not pending:
                return
            part = pending.popleft().result()
            if part is not None:
                yield part
    finally:
        # Stopped early (the caller closed this generator, Ctrl-C, or a range's error):
        # nothing queued starts, and the running scans end at their next progress call.
        steps.stopped = True
        for future in pending:
            future.cancel()
        with made:
            for own in readers.values():
                own.connection.interrupt()
        pool.shutdown(wait=True)
        for own in readers.values():
            own.close()


def distinct(reader: Reader, source: str, columns: Sequence[str], rowid: str) -> list[tuple]:
    """``SELECT DISTINCT columns FROM source`` (a whole-table pass: Nsight Systems'
    processes and devices that ran kernels, before the ranges are read), its two
    halves of rowids read at once by two threads where there are two
    (``reading_threads``), on ``reader`` and on a connection of its own: the pass
    takes half the wall time on an idle machine. The rows of the lower half first,
    then those of the upper half not in it. ``columns`` and ``rowid`` are SQL the
    caller chose."""
    select = f"SELECT DISTINCT {', '.join(columns)} FROM {source}"
    if reading_threads() < 2:
        return reader.rows(source, select)
    bounds = reader.one(source, f"SELECT (SELECT min({rowid}) FROM {source}), (SELECT max({rowid}) FROM {source})")
    if bounds is None or not all(isinstance(b, int) for b in bounds) or bounds[1] - bounds[0] < _SPLIT_ROWS:
        return reader.rows(source, select)  # a small table, or a view (no rowids): one pass
    low, high = bounds
    middle = low + (high - low) // 2
    steps = Steps(reader.budget)
    other = reader.sibling(steps)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="perfcheck-sqlite")
    try:
        upper = pool.submit(other.rows, source, f"{select} WHERE {rowid} BETWEEN ? AND ?", (middle + 1, high))
        lower = reader.rows(source, f"{select} WHERE {rowid} BETWEEN ? AND ?", (low, middle))
        return list(dict.fromkeys([*lower, *upper.result()]))
    finally:  # (also on an error or Ctrl-C: the other half's scan ends at its next progress call)
        steps.stopped = True
        other.connection.interrupt()
        pool.shutdown(wait=True)
        other.close()


# Below this many rows a whole-table pass is not split (a thread and a connection cost
# more than the pass).
_SPLIT_ROWS = 100_000


# Ranges read ahead per reading thread: enough that a thread never waits for the caller
# to take a range, few enough that memory stays a few ranges' worth (about 5 MB each).
_AHEAD = 2


def reading_threads() -> int:
    """Threads that read a dispatch table's ranges at once: two where the process may
    run on two cores or more (a third thread gains nothing: the caller's own work
    needs a core too), else one (which still overlaps SQLite's scans with the caller's
    work)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 1


class Configs:
    """The canonical columns of each distinct (kernel, launch configuration) of a file,
    built once (``build`` turns new configuration tuples into canonical rows, with a
    kernel name each and whether the dispatches with it are kept) and taken per
    dispatch of each range. Names go by code (``KernelNames``): taking the strings
    themselves would copy a name, up to kilobytes, per dispatch."""

    def __init__(self, build: "Callable[[list[tuple]], tuple[pd.DataFrame, np.ndarray]]",
                 wanted: "Callable[[str], bool]" = lambda column: True) -> None:
        from perfcheck.ingest.dispatch import KernelNames

        self._build = build
        # Columns nobody asked for are not taken per dispatch (``inspect`` wants a dozen
        # of the two dozen a dispatch has): each costs a copy and a check per row.
        self._wanted = wanted
        self._index: dict[tuple, int] = {}
        self._parts: list["pd.DataFrame"] = []
        self._frame: "pd.DataFrame | None" = None
        self._codes = np.zeros(0, dtype=np.int64)
        self._keep = np.zeros(0, dtype=bool)
        self.names = KernelNames()

    def _rows_of(self, part: Range) -> tuple[np.ndarray, np.ndarray]:
        """Per dispatch of ``part`` that the file's view keeps, its canonical row (an
        index into the file's configurations); and which of the range's rows are kept."""
        import pandas as pd

        assert part.config_of_row is not None
        new = [c for c in dict.fromkeys(part.configs) if c not in self._index]
        if new:
            built, keep = self._build(new)
            codes = self.names.codes_of(list(built["kernel"]))
            base = len(self._index)
            self._index.update((c, base + i) for i, c in enumerate(new))
            kept = [c for c in built.columns if c != "kernel" and self._wanted(c)]
            self._parts.append(built[kept].reset_index(drop=True))
            self._frame = pd.concat(self._parts, ignore_index=True) if len(self._parts) > 1 else self._parts[0]
            self._parts = [self._frame]
            self._codes = np.concatenate([self._codes, codes])
            self._keep = np.concatenate([self._keep, np.asarray(keep, dtype=bool)])
        ids = np.fromiter((self._index[c] for c in part.configs), dtype=np.int64, count=len(part.configs))
        of_row = ids[part.config_of_row]
        keep = self._keep[of_row]
        return of_row[keep], keep

    def _canonical(self, ids: np.ndarray) -> "pd.DataFrame":
        """Canonical rows ``ids`` (kernel first)."""
        assert self._frame is not None
        frame = self._frame.take(ids).reset_index(drop=True)
        frame.insert(0, "kernel", self.names.column(self._codes[ids]))
        return frame

    def expand(self, part: Range) -> tuple["pd.DataFrame", np.ndarray]:
        """The dispatches of ``part`` as canonical rows (kernel first), and which of the
        range's rows they are."""
        of_row, keep = self._rows_of(part)
        return self._canonical(of_row), keep

    def grouped(self, part: Range) -> tuple["pd.DataFrame", np.ndarray, np.ndarray]:
        """The dispatches of ``part`` in grouped form (``formats.Grouped``): the
        canonical rows of the configurations they use, in the order of each one's
        first dispatch; per dispatch its row; and which of the range's rows they are."""
        of_row, keep = self._rows_of(part)
        # First-dispatch order, as a frame per dispatch would meet them: the summary
        # numbers kernels in that order, and it breaks ties of the final sort. Found
        # in one linear pass over the dispatches (np.unique would sort them).
        count = len(of_row)
        first = np.full(len(self._keep), count, dtype=np.int64)
        np.minimum.at(first, of_row, np.arange(count, dtype=np.int64))
        used = np.flatnonzero(first < count)
        used = used[np.argsort(first[used], kind="stable")]
        position = np.full(len(self._keep), -1, dtype=np.int64)
        position[used] = np.arange(len(used), dtype=np.int64)
        return self._canonical(used), position[of_row], keep
