"""The one interface of a history store, whichever backend keeps it, and the read
queries both backends share.

``open_store`` (``perfcheck.history.store``) returns an SQLite ``Store`` for a path
and a ``PostgresStore`` (``perfcheck.history.pgstore``) for a ``postgresql://`` URL;
everything above the store (the CLI's history commands, the gate, the dashboard,
the exports, ``history copy``) uses only what this protocol names, so both backends
serve it alike (``tests/test_history_postgres.py`` runs the history tests on both).

Both stores read their values with the same SQL, written once here (``SeriesReader``):
a backend gives only its dialect's pieces, the placeholder, how a list of values
is bound, and how text is sorted by its bytes (SQLite's default; PostgreSQL's
``COLLATE "C"``, whatever the database's own collation), so the two list and read
series in one order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from perfcheck.errors import InputError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import numpy as np
    import pandas as pd

    from perfcheck.history.latest import LatestValues
    from perfcheck.history.store import AddResult, Machine, Result, RunRecord, ValueRows
    from perfcheck.storeurl import StoreURL

    # what checks a column as read: (its name, its values as read, each row's run id, for
    # messages) -> a number column as float64, a run number column (ID_COLUMNS; each row's
    # series id for ``results.run``) as int64, or InputError for a damaged store (SQLite's
    # columns take any type: ``SeriesReader._check``)
    Clean = Callable[[str, np.ndarray, np.ndarray], np.ndarray]

SERIES_COLUMNS = (
    "machine", "suite", "kernel", "metric", "unit", "run_id", "time", "commit", "branch",
    "ci_job", "ci_url", "value", "n", "median", "spread", "outcome", "low", "high",
)
VALUE_COLUMNS = ("series_id", "run", "value", "unit", "n", "median", "spread", "outcome", "low", "high")
# the run numbers a read joins on (``SeriesReader._ids``): a value's run, a run's own
ID_COLUMNS = ("results.run", "runs.run")
DAMAGED_HINT = "restore it from a copy, or name a new file for --history"
BATCH_ROWS = 100_000  # values per part read: ~100-200 MB at most in the commands, and few queries
MAX_IDS = 4_000  # series per query: under SQLite's 32,766 bound variables
MAX_RUNS = 1_000  # runs per query of ``run_parts`` (runs without values add nothing to a part's size)
# values per part of whole runs (``run_parts``): each part reads the series' names again,
# so fewer, larger parts than BATCH_ROWS (the Bencher export peaks at ~0.5 GB with them)
RUN_ROWS = 2 * BATCH_ROWS


class HistoryStore(Protocol):
    """An open history store (a context manager)."""

    path: "Path | StoreURL"  # what messages name: a file, or the URL with its password masked

    @property
    def version(self) -> int: ...

    def machines(self) -> dict[str, dict[str, str]]: ...

    def runs(self, *, since: float | None = None, limit: int | None = None) -> "pd.DataFrame": ...

    def series(self, *, machine: str | None = None, suite: str | Sequence[str] | None = None,
               kernel: str | Sequence[str] | None = None, metric: str | Sequence[str] | None = None,
               since: float | None = None, last: int | None = None,
               run_id: str | Sequence[str] | None = None) -> "pd.DataFrame": ...

    def series_keys(self) -> "pd.DataFrame": ...  # machine, suite, kernel, metric of every series

    def values(self, *, machine: str | None = None, suite: str | Sequence[str] | None = None,
               kernel: str | Sequence[str] | None = None, metric: str | Sequence[str] | None = None,
               since: float | None = None, last: int | None = None) -> "SeriesValues": ...  # the numbers alone

    def batches(self, *, machine: str | None = None, suite: str | Sequence[str] | None = None,
                kernel: str | Sequence[str] | None = None, metric: str | Sequence[str] | None = None,
                since: float | None = None, last: int | None = None, run_id: str | Sequence[str] | None = None,
                rows: int = ..., columns: Sequence[str] = ...
                ) -> "Iterator[pd.DataFrame]": ...  # ``series`` in parts of whole kernels (``columns``: only these)

    def latest(self, *, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]],
               last: int) -> "pd.DataFrame": ...  # the latest runs of the (kernel, metric) series named: the gate's

    def latest_values(self, *, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]],
                      last: int) -> "LatestValues": ...  # ``latest`` as arrays (perfcheck.history.latest)

    def add(self, run: "RunRecord", results: "Iterable[Result] | ValueRows", machines: Iterable["Machine"] = (), *,
            alongside: "Callable[[], object] | None" = None) -> "AddResult": ...  # alongside: done before the commit

    def prune(self, *, keep_days: float, now: float | None = None) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> "HistoryStore": ...

    def __exit__(self, *exc: object) -> None: ...


class SeriesReader:
    """``series_keys``, ``batches`` and ``series`` of a store, written once for both
    backends. A backend sets ``MARK`` and ``BYTE_ORDER`` and gives ``_rows`` (run a
    query, its errors as InputError), ``_any`` (a column matching a list) and, where
    its columns take any type (SQLite), ``_check``."""

    MARK: ClassVar[str] = "?"  # the driver's placeholder
    path: "Path | StoreURL"  # what the store's messages name (set by the backend)
    BYTE_ORDER: ClassVar[str] = ""  # appended to a text column to sort it by its bytes
    # a term true where a value's run number is an integer (SQLite's INTEGER columns keep
    # 1.5 or text as another tool wrote them; empty: the column holds integers only)
    INTEGER_RUN: ClassVar[str] = "typeof(v.run) = 'integer'"

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        raise NotImplementedError

    def _any(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """A term true where ``column`` is one of ``values``, and its parameters."""
        return f"{column} IN ({', '.join([self.MARK] * len(values))})", list(values)

    def _check(self, name: str, raw: "np.ndarray", run_id: "np.ndarray") -> "np.ndarray":
        """A column as read, checked: ``series_batches``' ``clean``. A number column
        (``name``: time, value, median, spread, low, high or n; ``run_id``: each row's
        run, for messages) as float64: text or blobs in it (SQLite's REAL columns take
        anything), or a run time outside 1970-2200 (an older perfcheck stored such, on
        either backend), is a damaged store, not a crash or a wrong number in a reader.
        A run number (``results.run``, ``runs.run``: ``_ids``) as int64."""
        import numpy as np
        import pandas as pd

        from perfcheck.history.store import MAX_TIME, MIN_TIME, impossible_time

        if name in ID_COLUMNS:
            return self._ids(name, raw, run_id)
        values = numbers(raw)  # only numbers: nothing to check but the time's range
        if values is None:
            values = np.asarray(pd.to_numeric(raw, errors="coerce"), dtype=np.float64)
            bad = np.isnan(values) & ~pd.isna(raw)
        else:
            bad = np.zeros(len(values), dtype=bool)
        if bad.any():
            raise InputError(self.path, f"the history store is damaged (column {name!r} holds "
                             f"{raw[bad][0]!r} in {int(bad.sum())} row(s), not a number)", hint=DAMAGED_HINT)
        if name == "time":
            bad = ~((values >= MIN_TIME) & (values <= MAX_TIME))
            if bad.any():
                raise impossible_time(self.path, run_id[bad][0], "time", float(values[bad][0]))
        return values

    def _ids(self, name: str, raw: "np.ndarray", where: "np.ndarray") -> "np.ndarray":
        """A column of run numbers as read (``name``: ``results.run``, a value's run, or
        ``runs.run``; ``where``: each row's series id, or its run id, for messages) as
        int64. SQLite's INTEGER columns keep text, blobs and fractions as another tool
        wrote them: numpy would take 1.5 as run 1, b"7" and "1_0" as runs 7 and 10 (a
        value joined to the wrong run), and "x" is a ValueError; each is a damaged store."""
        import numpy as np

        if integral(raw):
            return raw.astype(np.int64)
        # found only once the column is known to be damaged (a loop over its rows is no cost then)
        bad = np.fromiter((not isinstance(x, (int, np.integer)) or isinstance(x, bool) for x in raw.tolist()),
                          dtype=bool, count=len(raw))
        row = "series_id" if name == "results.run" else "run id"
        raise InputError(self.path, f"the history store is damaged ({name} holds {raw[bad][0]!r} in "
                         f"{int(bad.sum())} row(s), not a run number; the first at {row} "
                         f"{where[bad].tolist()[0]!r})", hint=DAMAGED_HINT)

    def _clean(self, frame: "pd.DataFrame") -> None:
        """``_check`` of a frame's columns in place (its run numbers as int64, its number
        columns as float64): for a reader that makes a frame of the rows it could not
        convert, to raise the store's own message (the gate's lean read of the latest
        values, ``history.latest``). A column ``results.run`` is named by each row's
        ``series_id``, the others by its ``run_id``."""
        import numpy as np

        run_id = frame["run_id"].to_numpy(dtype=object) if "run_id" in frame else np.full(len(frame), None)
        for column in ("runs.run", "results.run", "time", "value", "median", "spread", "low", "high", "n"):
            if column in frame:
                where = frame["series_id"].to_numpy(dtype=object) if column == "results.run" else run_id
                frame[column] = self._check(column, frame[column].to_numpy(dtype=object), where)

    def _run_numbers(self, rows: list[tuple[object, ...]], runs: list[tuple[object, ...]]) -> None:
        """The store's error where a value row's run (its second field) or a run's number
        (the first of ``runs``' rows) is not an integer (``_ids``): for ``values``, which
        reads the rows straight into int64."""
        import numpy as np

        def column(table: list[tuple[object, ...]], at: int) -> "np.ndarray":
            return np.fromiter(map(itemgetter(at), table), dtype=object, count=len(table))

        numbers = column(runs, 0)
        if not integral(numbers):
            self._ids("runs.run", numbers, column(runs, 1))  # named by the run id
        run = column(rows, 1)
        if not integral(run):
            self._ids("results.run", run, column(rows, 0))  # named by the series id

    def _unjoinable_values(self) -> None:
        """The store's error where a value's series is not a series number, which only
        a store whose columns take any type can hold (SQLite's: ``Store``); here none."""

    def _by_name(self) -> str:
        return ", ".join(f"{column}{self.BYTE_ORDER}" for column in ("machine", "suite", "kernel", "metric"))

    def series_keys(self) -> "pd.DataFrame":
        """Every stored series' names (machine, suite, kernel, metric), sorted by their
        bytes: what the commands' filters are checked against without reading a value."""
        import pandas as pd

        return pd.DataFrame(self._rows(f"SELECT machine, suite, kernel, metric FROM series ORDER BY {self._by_name()}"),
                            columns=["machine", "suite", "kernel", "metric"])

    def _keys(self, machine: object, suite: object, kernel: object, metric: object) -> list[tuple[object, ...]]:
        """(series_id, machine, suite, kernel, metric) of the series the name filters
        select, in series order (names by their bytes): ``batches``' and ``values``' series."""
        self._unjoinable_values()
        where, params = series_filters(machine, suite, kernel, metric, self.MARK)
        return self._rows("SELECT series_id, machine, suite, kernel, metric FROM series"
                          + (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY {self._by_name()}", params)

    def _since(self, since: float) -> tuple[list[str], list[object]]:
        """The term (on the values ``v``) keeping the runs from ``since`` on, and its parameter."""
        return [f"v.run IN (SELECT run FROM runs WHERE time >= {self.MARK})"], [float(since)]

    def batches(
        self,
        *,
        machine: str | None = None,
        suite: str | Sequence[str] | None = None,
        kernel: str | Sequence[str] | None = None,
        metric: str | Sequence[str] | None = None,
        since: float | None = None,
        last: int | None = None,
        run_id: str | Sequence[str] | None = None,
        rows: int = BATCH_ROWS,
        columns: Sequence[str] = SERIES_COLUMNS,
    ) -> "Iterator[pd.DataFrame]":
        """``series`` in parts of about ``rows`` values, each holding whole kernels
        (every series of a machine x suite x kernel that the filters let through), in
        the order of ``series``: memory stays that of one part however long the history.
        ``run_id``: only these runs' values (a few hundred ids at most: each is bound
        in the query), read by the primary key's (series, run) lookups, so a reader
        that goes run by run (``history copy``, the Bencher export) reads each value once.
        ``columns``: only these of SERIES_COLUMNS (in that order), and only the value
        columns among them are fetched: a reader that needs few reads less."""
        mark = self.MARK
        fetched = value_columns(columns)
        keys = self._keys(machine, suite, kernel, metric)
        chosen: list[str] = []
        chosen_params: list[object] = []
        if since is not None:
            chosen.append(f"time >= {mark}")
            chosen_params.append(float(since))
        if run_id is not None:
            term, more = self._any("run_id", [run_id] if isinstance(run_id, str) else list(run_id))
            chosen.append(term if more else "0 = 1")
            chosen_params.extend(more)
        runs = self._rows("SELECT run, run_id, time, commit_sha, branch, ci_job, ci_url FROM runs"
                          + (" WHERE " + " AND ".join(chosen) if chosen else ""), chosen_params)
        when: list[str] = []
        when_params: list[object] = []
        if run_id is not None:  # the runs found above, by number
            term, when_params = self._any("v.run", [row[0] for row in runs])
            when.append(term)
        elif since is not None:
            when, when_params = self._since(since)

        def read(ids: list[int]) -> list[tuple[object, ...]]:
            term, id_params = self._any("v.series_id", ids)
            sql = values_sql(" AND ".join([term, *when]), last, mark, self.BYTE_ORDER, fetched)
            return self._rows(sql, [*id_params, *when_params, *([last] if last is not None else [])])

        yield from series_batches(keys, runs, read, last=last, rows=rows, clean=self._check, columns=columns)

    def values(
        self,
        *,
        machine: str | None = None,
        suite: str | Sequence[str] | None = None,
        kernel: str | Sequence[str] | None = None,
        metric: str | Sequence[str] | None = None,
        since: float | None = None,
        last: int | None = None,
    ) -> "SeriesValues":
        """The values of the series ``series`` selects (the same filters), in its order,
        without the columns a pass over only the numbers does not need: ``history detect
        --relative`` reads a year of every kernel of one metric to find the run-wide
        offsets, and the names and eight other columns of each of those values, as
        ``batches`` makes them, cost several times the reading of the numbers."""
        import numpy as np
        import pandas as pd

        when, when_params = self._since(since) if since is not None else ([], [])
        rows: list[tuple[object, ...]] = []
        with self._snapshot():  # the series, the runs, each series' span and its values as of one moment
            keys = self._keys(machine, suite, kernel, metric)  # (a pruned series' id may be reused by an add)
            ids = [key[0] for key in keys]
            runs = self._rows("SELECT run, run_id, time, commit_sha FROM runs"
                              + (f" WHERE time >= {self.MARK}" if since is not None else ""),
                              [float(since)] if since is not None else [])
            # a series with a value at every run of its span reads its values alone (``_spans``)
            whole, ids = self._spans(ids, runs, when, when_params) if last is None and runs else (None, ids)
            for at in range(0, len(ids) if runs else 0, MAX_IDS):
                term, id_params = self._any("v.series_id", ids[at:at + MAX_IDS])
                rows.extend(self._rows(values_sql(" AND ".join([term, *when]), last, self.MARK, self.BYTE_ORDER,
                                                  fetched=("series_id", "run", "value")),
                                       [*id_params, *when_params, *([last] if last is not None else [])]))
        names = pd.DataFrame([key[1:] for key in keys], columns=["machine", "suite", "kernel", "metric"])
        self._run_numbers(rows, runs)  # before numpy reads them as int64 (1.5 as run 1)
        # numbers (None: missing), as a number column holds them (a frame of the tuples cost
        # 3x the reading; numpy's rows of tuples, half as much again as its records)
        kinds = {type(row[2]) for row in rows}
        if kinds <= {float, int}:
            numbers = np.fromiter(rows, dtype=[("series_id", "i8"), ("run", "i8"), ("value", "f8")], count=len(rows))
            values = pd.DataFrame({name: numbers[name] for name in ("series_id", "run", "value")})
        elif kinds <= {float, int, type(None)}:
            numbers = np.array(rows, dtype="float64").reshape(len(rows), 3)
            values = pd.DataFrame({"series_id": numbers[:, 0].astype(np.int64), "run": numbers[:, 1].astype(np.int64),
                                   "value": numbers[:, 2]})
        else:  # text or blobs in the value column (SQLite's columns take anything): checked as a part's are
            values = pd.DataFrame(rows, columns=["series_id", "run", "value"])
            self._clean(values)
        if whole is not None:
            values = pd.concat([whole, values], ignore_index=True) if len(values) else whole
        table = pd.DataFrame(runs, columns=["run", "run_id", "time", "commit"])
        # the runs with a value, as ``_frame``'s join keeps them
        table = table[table["run"].isin(values["run"])].reset_index(drop=True)
        self._clean(table)
        table["time"] = table["time"].astype("float64")
        # runs by time, then run id (``_frame``'s order of a series' values); series by name
        table = table.iloc[np.lexsort((table["run_id"].to_numpy(dtype=object).astype(str),
                                       table["time"].to_numpy()))].reset_index(drop=True)
        series_at = pd.Index([key[0] for key in keys]).get_indexer(values["series_id"])
        run_at = pd.Index(table["run"]).get_indexer(values["run"])
        order = _by_series_then_run(series_at, run_at)
        order = order[(series_at[order] >= 0) & (run_at[order] >= 0)]  # as ``_frame``'s inner joins
        series_at, run_at = series_at[order], run_at[order]
        value = values["value"].to_numpy(dtype="float64")[order]
        if last is not None and len(order):  # as ``_frame``: each series' latest ``last`` values
            starts = np.r_[0, np.flatnonzero(np.diff(series_at)) + 1]
            ends = np.r_[starts[1:], len(series_at)]
            keep = np.arange(len(series_at)) >= np.repeat(ends - last, ends - starts)
            series_at, run_at, value = series_at[keep], run_at[keep], value[keep]
        with np.errstate(invalid="ignore"):
            value = np.where(np.isfinite(value), value, np.nan)  # as ``_frame``: a value no float holds is missing
        table["time"] = pd.to_datetime(table["time"], unit="s", utc=True)
        return SeriesValues(names, table[["run_id", "time", "commit"]], series_at, run_at, value)

    def _snapshot(self) -> "AbstractContextManager[None]":
        """A context in which every query sees the store as of one moment (one read
        transaction): ``values`` reads each series' span, then the values alone."""
        raise NotImplementedError

    def _spans(self, ids: list[int], runs: list[tuple[object, ...]], when: list[str],
               when_params: list[object]) -> "tuple[pd.DataFrame | None, list[int]]":
        """The values (series_id, run, value) of the series of ``ids`` that hold a value at
        every run number from their first to their last, and the ids of the others: in a
        year of nights nearly every series, and such a series need read only its numbers,
        in the primary key's order (sqlite3 makes a Python object of every column of every
        row: the series and run of each value were two of its three). A series' run numbers
        are distinct integers, so when it has as many values as its last run less its first
        plus one, they are every number between (a value of a run the runs table lacks is
        then left out as ``_frame``'s join leaves it out). ``runs``: the runs table's rows
        (run number first) read in the same snapshot (``_snapshot``) as the spans and the values."""
        import itertools

        import numpy as np
        import pandas as pd

        numbers = [row[0] for row in runs if type(row[0]) is int]
        first, last = (min(numbers), max(numbers)) if numbers else (0, -1)
        # the values are read without the count's run range: a value whose run is text, a
        # blob or a fraction (SQLite orders text and blobs after every number) is then one
        # value more than the count, and the general read says the store is damaged
        read_when, read_params = when, when_params
        if len(numbers) == last - first + 1:
            # the runs are numbered without a gap (as SQLite numbers them, a year of nights
            # added and pruned oldest first): a series with as many values in their range as
            # there are runs has one at every run; a count alone is cheaper than its span
            # (a fifth of the spans' query)
            when = [*when, f"v.run BETWEEN {self.MARK} AND {self.MARK}"]
            when_params = [*when_params, first, last]
            summary = f"count(*), {first}, {last}"
        else:
            summary = "count(*), min(v.run), max(v.run)"
        # only integer run numbers counted: a run of 1.5 or text makes the series' values
        # more than its count, so it is read as before (and the read says the store is damaged)
        counted = [*when, self.INTEGER_RUN] if self.INTEGER_RUN else when
        spans: list[tuple[object, ...]] = []
        for at in range(0, len(ids), MAX_IDS):
            term, id_params = self._any("v.series_id", ids[at:at + MAX_IDS])
            spans.extend(self._rows(f"SELECT v.series_id, {summary} FROM results v WHERE "
                                    f"{' AND '.join([term, *counted])} GROUP BY v.series_id",
                                    [*id_params, *when_params]))
        # integers only: text in a damaged store's columns is left to the general read
        spans = [row for row in spans if all(type(x) is int for x in row)]
        if not spans:
            return None, ids
        span = np.asarray(spans, dtype=np.int64).reshape(-1, 4)
        span = span[span[:, 1] == span[:, 3] - span[:, 2] + 1]
        span = span[np.argsort(span[:, 0], kind="stable")]  # read in series id order
        if not len(span):
            return None, ids
        values: list[tuple[object, ...]] = []
        for at in range(0, len(span), MAX_IDS):
            term, id_params = self._any("v.series_id", span[at:at + MAX_IDS, 0].tolist())
            values.extend(self._rows(f"SELECT v.value FROM results v WHERE {' AND '.join([term, *read_when])} "
                                     "ORDER BY v.series_id, v.run", [*id_params, *read_params]))
        if len(values) != int(span[:, 1].sum()):  # a run number not an integer (in one snapshot, nothing else)
            return None, ids
        # numbers (None: missing) as a number column holds them, in one C loop; text or blobs
        # (SQLite's columns take anything) checked as a part's are
        kinds = {type(row[0]) for row in values}
        if kinds <= {float, int}:
            number = np.fromiter(itertools.chain.from_iterable(values), dtype=np.float64, count=len(values))
        elif kinds <= {float, int, type(None)}:
            number = np.fromiter(values, dtype=[("value", "f8")], count=len(values))["value"]  # None: NaN
        else:
            raw = np.fromiter(itertools.chain.from_iterable(values), dtype=object, count=len(values))
            number = self._check("value", raw, np.full(len(raw), None, dtype=object))
        counts = span[:, 1]
        whole = pd.DataFrame({"series_id": np.repeat(span[:, 0], counts),
                              # each series' first run, plus the value's place in the series
                              "run": np.repeat(span[:, 2] - (np.cumsum(counts) - counts), counts)
                              + np.arange(len(values)), "value": number})
        chosen = set(span[:, 0].tolist())
        return whole, [i for i in ids if i not in chosen]

    def series(
        self,
        *,
        machine: str | None = None,
        suite: str | Sequence[str] | None = None,
        kernel: str | Sequence[str] | None = None,
        metric: str | Sequence[str] | None = None,
        since: float | None = None,
        last: int | None = None,
        run_id: str | Sequence[str] | None = None,
    ) -> "pd.DataFrame":
        """The values as one long frame (SERIES_COLUMNS), sorted by machine, suite,
        kernel, metric (by their bytes), then time: group by the first four for one
        series each. ``time`` is a UTC timestamp. Filters are exact names (a list: any
        of them); ``since``: Unix seconds; ``last``: the latest N runs of each series;
        ``run_id``: only these runs. The whole selection at once: a reader of every
        series uses ``batches``."""
        return as_text(concat_batches(self.batches(machine=machine, suite=suite, kernel=kernel, metric=metric,
                                                   since=since, last=last, run_id=run_id)))


def run_parts(store: HistoryStore, *, rows: int = RUN_ROWS, since: float | None = None,
              run_id: Sequence[str] | None = None,
              **names: str | Sequence[str] | None) -> "Iterator[tuple[list[str], pd.DataFrame]]":
    """``store.series`` a few whole runs at a time, oldest runs first (as ``runs`` lists
    them): (the run ids, their values) of about ``rows`` values (one run at least), for
    readers that go run by run (``history copy``, the Bencher export) in memory that does
    not grow with the history. A run without values is in its ids, not in the frame.
    ``run_id``: only these runs; ``names``: the machine, suite, kernel and metric
    filters of ``series``."""
    runs = store.runs(since=since)
    if run_id is not None:
        runs = runs[runs["run_id"].isin(list(run_id))]
    chunk: list[str] = []
    size = 0
    for name, count in zip(runs["run_id"].tolist(), runs["values"].tolist()):
        if chunk and (size + count > rows or len(chunk) >= MAX_RUNS):
            yield chunk, store.series(run_id=chunk, since=since, **names)  # type: ignore[arg-type]
            chunk, size = [], 0
        chunk.append(name)
        size += count
    if chunk:
        yield chunk, store.series(run_id=chunk, since=since, **names)  # type: ignore[arg-type]


# --- the read path's pieces ------------------------------------------------------------------


def values_sql(where: str, last: int | None, mark: str, collate: str,
               fetched: Sequence[str] = VALUE_COLUMNS) -> str:
    """The ``fetched`` VALUE_COLUMNS of the series ``where`` selects; ``last``: only each
    series' latest N runs (by time, then run id), ranked in SQL, so the gate's "last 30
    runs" of a year-long series reads 30 rows, not 365 (``collate``: the run id's byte order)."""
    columns = ", ".join(f"v.{c}" for c in fetched)
    if last is None:
        return f"SELECT {columns} FROM results v WHERE {where}"
    return (f"SELECT {', '.join(fetched)} FROM (SELECT {columns}, row_number() OVER (PARTITION BY v.series_id "
            f"ORDER BY r.time DESC, r.run_id{collate} DESC) AS latest FROM results v JOIN runs r ON r.run = v.run "
            f"WHERE {where}) AS ranked WHERE latest <= {mark}")


def _by_series_then_run(series_at: "np.ndarray", run_at: "np.ndarray") -> "np.ndarray":
    """``np.lexsort((run_at, series_at))``: the rows by series, then run. Where each series'
    rows are one stretch with its runs in order (as ``values`` reads a series whole, in
    the primary key's order, when the runs' numbers are in their time order), only the
    stretches are put in order, moved whole: the same order (no two rows tie), without a
    sort of every value (a tenth of reading a slice)."""
    import numpy as np

    n = len(series_at)
    if n:
        other = series_at[1:] != series_at[:-1]
        starts = np.r_[0, np.flatnonzero(other) + 1]
        heads = series_at[starts]
        if ((run_at[1:] > run_at[:-1]) | other).all() and len(np.unique(heads)) == len(heads):
            lengths = np.diff(np.r_[starts, n])
            chosen = np.argsort(heads, kind="stable")
            moved = np.cumsum(lengths[chosen]) - lengths[chosen]  # where each stretch goes
            return np.repeat(starts[chosen] - moved, lengths[chosen]) + np.arange(n)
    return np.lexsort((run_at, series_at))


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


def value_columns(columns: Sequence[str]) -> tuple[str, ...]:
    """The VALUE_COLUMNS a read of ``columns`` (of SERIES_COLUMNS) fetches: the series
    and run (what the names and the runs join on) and the value columns asked for."""
    unknown = sorted(set(columns) - set(SERIES_COLUMNS))
    if unknown or not columns:
        raise ValueError(f"not a column of a series: {', '.join(unknown) or 'none asked for'} "
                         f"(one of {', '.join(SERIES_COLUMNS)})")
    return ("series_id", "run", *(c for c in VALUE_COLUMNS[2:] if c in columns))


def series_batches(keys: list[tuple[object, ...]], runs: list[tuple[object, ...]],
                   read: "Callable[[list[int]], list[tuple[object, ...]]]", *, last: int | None,
                   rows: int = BATCH_ROWS, clean: "Clean | None" = None,
                   columns: Sequence[str] = SERIES_COLUMNS) -> "Iterator[pd.DataFrame]":
    """Frames of ``columns`` (of SERIES_COLUMNS, in that order) from the series ``keys``
    (series_id, machine, suite, kernel, metric; in key order), the ``runs`` (run, run_id,
    time, commit, branch, ci_job, ci_url) and ``read`` (the ``value_columns(columns)``
    rows of some series ids). A part is whole kernels of about ``rows`` values.

    Nothing is done row by row in Python after the fetch: the names and the runs join
    the values by numpy indexing (a series' place in ``keys``, a run's in ``runs``), the
    rows are ordered by integers (each run's rank by time, then run id, found once), and
    the names and run ids are Categoricals (``_names``), so that each row holds a small
    code rather than a long kernel name, and a later groupby hashes the codes, not every
    row's text. ``clean``: checks a column as read and makes it float64 (``Clean``)."""
    import numpy as np

    if not keys or not runs:
        return
    fetched = value_columns(columns)
    columns = [c for c in SERIES_COLUMNS if c in columns]
    table = _Runs(runs, clean)
    names = np.empty((len(keys), 5), dtype=object)
    names[:] = keys
    ids = names[:, 0].astype(np.int64)
    # a kernel's series are adjacent (keys are in key order): each row's kernel number
    new = np.ones(len(keys), dtype=bool)
    new[1:] = (names[1:, 1:4] != names[:-1, 1:4]).any(axis=1)
    kernels = np.cumsum(new)
    # a part of few runs holds many series: read MAX_IDS at a time, but make it one frame
    step = max(1, rows // max(1, len(runs)))
    start = 0
    while start < len(keys):
        end = min(start + step, len(keys))
        end = int(np.searchsorted(kernels, kernels[end - 1], side="right"))  # whole kernels only
        chosen = ids[start:end].tolist()
        values: list[tuple[object, ...]] = []
        for at in range(0, len(chosen), MAX_IDS):  # a kernel with more series than MAX_IDS: several queries
            values.extend(read(chosen[at:at + MAX_IDS]))
        frame = _frame(names[start:end], table, values, fetched, columns, last, clean)
        start = end
        if len(frame):
            yield frame


def _floats(name: str, raw: "np.ndarray", run_id: "np.ndarray") -> "np.ndarray":
    """A number column as read as float64 (None: NaN), a run number column as int64,
    where no check is needed."""
    import numpy as np
    import pandas as pd

    if name in ID_COLUMNS:  # a store of typed columns (PostgreSQL's): integers only
        return raw.astype(np.int64)
    fast = numbers(raw)
    return fast if fast is not None else np.asarray(pd.to_numeric(raw, errors="coerce"), dtype=np.float64)


def integral(raw: "np.ndarray") -> bool:
    """Whether ``raw`` (objects as read) holds only integers: what a column of run
    numbers must hold (``SeriesReader._ids``), found by pandas' C loop over the
    objects, a few ns a row, before they are converted."""
    import pandas as pd

    return pd.api.types.infer_dtype(raw, skipna=False) in ("integer", "empty")


def numbers(raw: "np.ndarray") -> "np.ndarray | None":
    """``raw`` (objects as read) as float64 where it holds only numbers and missing
    values (None: NaN), else None: a column of floats converts in a C loop, ten times
    faster than ``pd.to_numeric``'s general parse (which text, if any, still takes)."""
    import numpy as np
    import pandas as pd

    if pd.api.types.infer_dtype(raw, skipna=True) not in ("floating", "integer", "mixed-integer-float", "empty"):
        return None
    missing = pd.isna(raw)
    if not missing.any():
        return raw.astype(np.float64)
    out = np.full(len(raw), np.nan)
    out[~missing] = raw[~missing].astype(np.float64)
    return out


class _Runs:
    """The runs table of one read as arrays: what each part takes its rows' run columns
    from by a run's position, and each run's rank in the order of a series' rows (by
    time, then run id by its bytes), found once rather than sorted per part."""

    def __init__(self, runs: list[tuple[object, ...]], clean: "Clean | None") -> None:
        import numpy as np
        import pandas as pd

        table = np.empty((len(runs), 7), dtype=object)
        table[:] = runs
        self.clean = clean or _floats
        number = self.clean("runs.run", table[:, 0], table[:, 1])
        self.sorter = np.argsort(number, kind="stable")
        self.number = number[self.sorter]  # run numbers, sorted: a row's run found by searchsorted
        self.run_id = table[:, 1]
        self.raw_time = table[:, 2]
        self.text = {name: table[:, i] for i, name in enumerate(("commit", "branch", "ci_job", "ci_url"), start=3)}
        try:
            self.time: np.ndarray | None = self.clean("time", self.raw_time, self.run_id)
        except InputError:  # a damaged run time: said by the part that holds one of its rows (row by row)
            self.time = None
        # the runs' ids as codes in byte order (code point order is UTF-8's byte order)
        ids, self.id_code = _sorted_codes(self.run_id)
        self.ids = np.asarray(ids, dtype=object)
        self.id_categories: pd.Index | None = None
        time = self.time if self.time is not None else np.asarray(pd.to_numeric(self.raw_time, errors="coerce"),
                                                                  dtype=np.float64)
        self.rank = np.empty(len(runs), dtype=np.int64)
        self.rank[np.lexsort((self.id_code, time))] = np.arange(len(runs))
        self.stamps: pd.DatetimeIndex | None = None
        if self.time is not None:
            self.stamps = pd.DatetimeIndex(pd.to_datetime(self.time, unit="s", utc=True))

    def find(self, run: "np.ndarray") -> "tuple[np.ndarray, np.ndarray]":
        """The position in the table of each run number in ``run``, and which are in it."""
        import numpy as np

        at = np.searchsorted(self.number, run)
        found = at < len(self.number)
        found[found] = self.number[at[found]] == run[found]
        return self.sorter[np.where(found, at, 0)], found


def _frame(names: "np.ndarray", runs: _Runs, values: list[tuple[object, ...]], fetched: Sequence[str],
           columns: Sequence[str], last: int | None, clean: "Clean | None" = None) -> "pd.DataFrame":
    """One part: the value rows ``values`` (``fetched`` columns) of the series ``names``
    (series_id, machine, suite, kernel, metric rows, in key order) joined with ``runs``."""
    import numpy as np
    import pandas as pd

    # the rows straight into typed columns: the series as integers (a row read is one of
    # an integer series_id the query named: text, a blob or 1.5 there matches none), the
    # rest as the objects read, the run numbers checked (``Clean``: 1.5, "x" or a blob
    # there is a damaged store) before they are made integers
    table = np.fromiter(values, dtype=np.dtype([(c, np.int64 if c == "series_id" else object) for c in fetched]),
                        count=len(values))
    raw = {column: table[column] for column in fetched}
    sid = raw.pop("series_id")
    convert = clean or _floats
    run, found = runs.find(convert("results.run", raw.pop("run"), sid))
    # each row's series: its place among the part's (ids unique, so one match each)
    ids = names[:, 0].astype(np.int64)
    by_id = np.argsort(ids, kind="stable")
    series = by_id[np.searchsorted(ids, sid, sorter=by_id)] if len(ids) else np.zeros(len(sid), dtype=np.int64)
    # the order of ``series``: by series, then by the run's rank (time, then run id)
    keep = np.flatnonzero(found)  # a value of a run not read (inner join)
    keep = keep[np.argsort(series[keep] * len(runs.rank) + runs.rank[run[keep]], kind="stable")]
    series, run = series[keep], run[keep]
    # the number columns as float64, checked in the order the store's checks name them
    numbers: dict[str, np.ndarray] = {}
    stamps = runs.stamps
    if stamps is None:  # a damaged run time: checked row by row (``clean`` says which run)
        stamps = pd.DatetimeIndex(pd.to_datetime(convert("time", runs.raw_time[run], runs.run_id[run]), unit="s",
                                                 utc=True))
    for column in ("value", "median", "spread", "low", "high", "n"):
        if column in raw:
            numbers[column] = convert(column, raw[column][keep], runs.run_id[run])
    if last is not None and len(keep):  # each series' latest ``last`` rows
        ends = np.searchsorted(series, series, side="right")
        latest = np.flatnonzero(ends - np.arange(len(series)) <= last)
        keep, series, run = keep[latest], series[latest], run[latest]
        numbers = {column: number[latest] for column, number in numbers.items()}
        if stamps is not runs.stamps:
            stamps = stamps[latest]
    out: dict[str, object] = {}
    for column in columns:
        if column in NAME_COLUMNS:
            out[column] = _names(names[:, 1 + NAME_COLUMNS.index(column)], series)
        elif column == "run_id":
            out[column] = _run_ids(runs, run)
        elif column == "time":
            out[column] = stamps.take(run) if stamps is runs.stamps else stamps  # type: ignore[union-attr]
        elif column in runs.text:
            out[column] = _text(runs.text[column], run)
        elif column == "n":
            usable = np.abs(numbers["n"]) < 2.0**53  # NaN and inf: missing
            out[column] = pd.arrays.IntegerArray(np.where(usable, np.round(numbers["n"]), 0).astype(np.int64), ~usable)
        elif column in numbers:
            # a value no float holds (1e309 written as text by another tool) is missing, as inf is
            out[column] = np.where(np.isfinite(numbers[column]), numbers[column], np.nan)
        else:  # unit, outcome: one value a row
            out[column] = _text(*_distinct(raw[column][keep]), raw[column][keep])
    return pd.DataFrame(out, columns=list(columns))


NAME_COLUMNS = ("machine", "suite", "kernel", "metric")
NUMBER_COLUMNS = ("value", "median", "spread", "low", "high")


def _names(names: "np.ndarray", series: "np.ndarray") -> "pd.Categorical":
    """A name column of a part's rows (``series``: each row's place among ``names``, the
    part's series' names) as a Categorical: its categories the part's names, sorted as
    text (so a sort by it is the sort by the names), its codes by each row's series."""
    import pandas as pd

    categories, code = _sorted_codes(names)
    return pd.Categorical.from_codes(code[series], categories=pd.Index(categories))


def _sorted_codes(names: "np.ndarray") -> "tuple[list[object], np.ndarray]":
    """The distinct ``names`` sorted as Python sorts text (by code point: UTF-8's byte
    order, as the store sorts them) and each one's code: by a dict, one entry a series
    or a run, not a hash table of pandas 2's that ends a text at a NUL ("k\\0x" is "k\\0")."""
    import numpy as np

    distinct = set(names.tolist())
    try:
        categories = sorted(distinct)
    except TypeError:  # not all text (a blob written into the store by another tool): text first, in order
        categories = sorted(distinct, key=lambda name: (not isinstance(name, str), str(name)))
    index = {name: n for n, name in enumerate(categories)}
    return categories, np.fromiter(map(index.__getitem__, names.tolist()), dtype=np.int64, count=len(names))


def _run_ids(runs: _Runs, run: "np.ndarray") -> "pd.Categorical":
    """The rows' run ids (``run``: each row's run's position) as a Categorical of the
    runs read, sorted as text (the same categories in every part of a read)."""
    import pandas as pd

    if runs.id_categories is None:
        runs.id_categories = pd.Index(runs.ids.tolist())
    return pd.Categorical.from_codes(runs.id_code[run], categories=runs.id_categories)


def _distinct(rows: "np.ndarray") -> "tuple[np.ndarray, np.ndarray]":
    """The distinct values of a text column (a few units) and each row's code (-1: missing),
    by pandas' hash table where it tells every value apart (pandas 2's ends a text at a
    NUL: then by a dict)."""
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(rows)
    present = codes >= 0
    if not np.array_equal(np.asarray(uniques, dtype=object)[codes[present]], rows[present]):
        values, code = _sorted_codes(rows[present])
        uniques, codes = np.asarray(values, dtype=object), np.full(len(rows), -1, dtype=np.int64)
        codes[present] = code
    return np.asarray(uniques, dtype=object), codes


def _text(values: "np.ndarray", at: "np.ndarray", rows: "np.ndarray | None" = None) -> object:
    """The text column ``values[at]`` (-1: missing) as pandas makes one of rows holding
    it (str where every value is text or missing, else objects), found from the values
    the rows use only (a few units or commits), not from each row's. ``rows``: the
    column as read, where it is already one value a row."""
    import numpy as np
    import pandas as pd

    if rows is None:
        used, code = np.unique(at, return_inverse=True)
        values, at = values[used], code.reshape(-1)
    inferred = pd.Series(values, dtype=None if len(values) else object)
    if isinstance(inferred.dtype, np.dtype):  # objects (pandas 2, or no text): the values themselves, None kept
        return rows if rows is not None else np.asarray(values, dtype=object)[at]
    return inferred.array.take(at, allow_fill=True)


@dataclass(frozen=True, eq=False)
class SeriesValues:
    """Some series' values as numbers and positions (``HistoryStore.values``), each
    value's series and run as rows of two small tables, in the order of ``series``: by
    series (their names' byte order), then time, then run id."""

    keys: "pd.DataFrame"  # machine, suite, kernel, metric of each series selected
    runs: "pd.DataFrame"  # run_id, time (UTC timestamp), commit of each run with a value, by time then run id
    series: "np.ndarray"  # per value: its row of ``keys``
    run: "np.ndarray"  # per value: its row of ``runs``
    value: "np.ndarray"  # per value, float64: NaN where none (or none a float holds)


def concat_batches(parts: "Iterable[pd.DataFrame]") -> "pd.DataFrame":
    """The parts as one frame (an empty one of SERIES_COLUMNS when there are none); a
    name or run id column stays a Categorical, of every part's categories."""
    import pandas as pd

    frames = list(parts)
    if not frames:
        return _empty()
    if len(frames) > 1:
        for column in frames[0].columns:
            if all(isinstance(f[column].dtype, pd.CategoricalDtype) for f in frames if column in f.columns):
                union = sorted(set().union(*(f[column].cat.categories.tolist() for f in frames if column in f.columns)))
                categories = pd.Index(union) if union else None
                frames = [f.assign(**{column: f[column].cat.set_categories(categories)}) if column in f.columns else f
                          for f in frames]
    return pd.concat(frames, ignore_index=True)


def as_text(frame: "pd.DataFrame") -> "pd.DataFrame":
    """``frame`` with its Categorical columns (names, run ids) as text, of the dtype a
    column of their values has (``str``, or objects on pandas 2): what ``series`` gives,
    so that two reads' frames compare equal whatever runs and series each held (the
    parts' categories are each read's own)."""
    import pandas as pd

    # the categories taken by code (an arrow take), not ``astype``: pandas builds each row's string
    texts = {c: pd.api.extensions.take(frame[c].cat.categories, frame[c].cat.codes.to_numpy(), allow_fill=True)
             for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)}
    return frame.assign(**texts) if texts else frame


def _empty() -> "pd.DataFrame":
    import numpy as np

    runs = _Runs([(0, "", 0.0, None, None, None, None)], None)
    return _frame(np.empty((0, 5), dtype=object), runs, [], VALUE_COLUMNS, SERIES_COLUMNS, None)
