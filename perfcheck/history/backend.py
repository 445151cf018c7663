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
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from perfcheck.history.store import AddResult, Machine, Result, RunRecord
    from perfcheck.storeurl import StoreURL

SERIES_COLUMNS = (
    "machine", "suite", "kernel", "metric", "unit", "run_id", "time", "commit", "branch",
    "ci_job", "ci_url", "value", "n", "median", "spread", "outcome", "low", "high",
)
VALUE_COLUMNS = ("series_id", "run", "value", "unit", "n", "median", "spread", "outcome", "low", "high")
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
                rows: int = ...) -> "Iterator[pd.DataFrame]": ...  # ``series`` in parts of whole kernels

    def latest(self, *, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]],
               last: int) -> "pd.DataFrame": ...  # the latest runs of the (kernel, metric) series named: the gate's

    def add(self, run: "RunRecord", results: Iterable["Result"], machines: Iterable["Machine"] = ()) -> "AddResult": ...

    def prune(self, *, keep_days: float, now: float | None = None) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> "HistoryStore": ...

    def __exit__(self, *exc: object) -> None: ...


class SeriesReader:
    """``series_keys``, ``batches`` and ``series`` of a store, written once for both
    backends. A backend sets ``MARK`` and ``BYTE_ORDER`` and gives ``_rows`` (run a
    query, its errors as InputError), ``_any`` (a column matching a list) and, where
    its columns take any type (SQLite), ``_clean``."""

    MARK: ClassVar[str] = "?"  # the driver's placeholder
    BYTE_ORDER: ClassVar[str] = ""  # appended to a text column to sort it by its bytes

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        raise NotImplementedError

    def _any(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """A term true where ``column`` is one of ``values``, and its parameters."""
        return f"{column} IN ({', '.join([self.MARK] * len(values))})", list(values)

    def _clean(self, frame: "pd.DataFrame") -> None:
        """Check a part's number columns in place (``series_batches``' ``clean``)."""

    def _by_name(self) -> str:
        return ", ".join(f"{column}{self.BYTE_ORDER}" for column in ("machine", "suite", "kernel", "metric"))

    def series_keys(self) -> "pd.DataFrame":
        """Every stored series' names (machine, suite, kernel, metric), sorted by their
        bytes: what the commands' filters are checked against without reading a value."""
        import pandas as pd

        return pd.DataFrame(self._rows(f"SELECT machine, suite, kernel, metric FROM series ORDER BY {self._by_name()}"),
                            columns=["machine", "suite", "kernel", "metric"])

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
    ) -> "Iterator[pd.DataFrame]":
        """``series`` in parts of about ``rows`` values, each holding whole kernels
        (every series of a machine x suite x kernel that the filters let through), in
        the order of ``series``: memory stays that of one part however long the history.
        ``run_id``: only these runs' values (a few hundred ids at most: each is bound
        in the query), read by the primary key's (series, run) lookups, so a reader
        that goes run by run (``history copy``, the Bencher export) reads each value once."""
        mark = self.MARK
        where, params = series_filters(machine, suite, kernel, metric, mark)
        keys = self._rows("SELECT series_id, machine, suite, kernel, metric FROM series"
                          + (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY {self._by_name()}", params)
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
            when.append(f"v.run IN (SELECT run FROM runs WHERE time >= {mark})")
            when_params.append(float(since))

        def read(ids: list[int]) -> list[tuple[object, ...]]:
            term, id_params = self._any("v.series_id", ids)
            sql = values_sql(" AND ".join([term, *when]), last, mark, self.BYTE_ORDER)
            return self._rows(sql, [*id_params, *when_params, *([last] if last is not None else [])])

        yield from series_batches(keys, runs, read, last=last, rows=rows, clean=self._clean)

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

        where, params = series_filters(machine, suite, kernel, metric, self.MARK)
        keys = self._rows("SELECT series_id, machine, suite, kernel, metric FROM series"
                          + (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY {self._by_name()}", params)
        runs = self._rows("SELECT run, run_id, time, commit_sha FROM runs"
                          + (f" WHERE time >= {self.MARK}" if since is not None else ""),
                          [float(since)] if since is not None else [])
        when = [f"v.run IN (SELECT run FROM runs WHERE time >= {self.MARK})"] if since is not None else []
        rows: list[tuple[object, ...]] = []
        ids = [key[0] for key in keys]
        for at in range(0, len(ids) if runs else 0, MAX_IDS):
            term, id_params = self._any("v.series_id", ids[at:at + MAX_IDS])
            rows.extend(self._rows(values_sql(" AND ".join([term, *when]), last, self.MARK, self.BYTE_ORDER,
                                              columns=("series_id", "run", "value")),
                                   [*id_params, *([float(since)] if since is not None else []),
                                    *([last] if last is not None else [])]))
        names = pd.DataFrame([key[1:] for key in keys], columns=["machine", "suite", "kernel", "metric"])
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
        order = np.lexsort((run_at, series_at))
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
        return concat_batches(self.batches(machine=machine, suite=suite, kernel=kernel, metric=metric, since=since,
                                           last=last, run_id=run_id))


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
               columns: Sequence[str] = VALUE_COLUMNS) -> str:
    """The ``columns`` (of VALUE_COLUMNS) of the series ``where`` selects; ``last``: only each series'
    latest N runs (by time, then run id), ranked in SQL, so the gate's "last 30 runs"
    of a year-long series reads 30 rows, not 365 (``collate``: the run id's byte order)."""
    wanted = ", ".join(f"v.{c}" for c in columns)
    if last is None:
        return f"SELECT {wanted} FROM results v WHERE {where}"
    return (f"SELECT {', '.join(columns)} FROM (SELECT {wanted}, row_number() OVER (PARTITION BY v.series_id "
            f"ORDER BY r.time DESC, r.run_id{collate} DESC) AS latest FROM results v JOIN runs r ON r.run = v.run "
            f"WHERE {where}) AS ranked WHERE latest <= {mark}")


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
                   rows: int = BATCH_ROWS,
                   clean: "Callable[[pd.DataFrame], None] | None" = None) -> "Iterator[pd.DataFrame]":
    """Frames of SERIES_COLUMNS from the series ``keys`` (series_id, machine, suite,
    kernel, metric; in key order), the ``runs`` (run, run_id, time, commit, branch,
    ci_job, ci_url) and ``read`` (the VALUE_COLUMNS rows of some series ids). A part
    is whole kernels of about ``rows`` values; names join the values here, not in
    SQL, so each row holds pointers to one copy of a long kernel name. ``clean``: checks
    (and makes float64) a part's number columns in place before they are used."""
    import numpy as np
    import pandas as pd

    if not keys or not runs:
        return
    names = pd.DataFrame(keys, columns=["series_id", "machine", "suite", "kernel", "metric"])
    names["order"] = np.arange(len(names))
    kernels = names.groupby(["machine", "suite", "kernel"], sort=False).ngroup().to_numpy()
    run_table = pd.DataFrame(runs, columns=["run", "run_id", "time", "commit", "branch", "ci_job", "ci_url"])
    # a part of few runs holds many series: read MAX_IDS at a time, but make it one frame
    step = max(1, rows // max(1, len(run_table)))
    start = 0
    while start < len(names):
        end = min(start + step, len(names))
        end = int(np.searchsorted(kernels, kernels[end - 1], side="right"))  # whole kernels only
        ids = names["series_id"].iloc[start:end].tolist()
        values = []
        for at in range(0, len(ids), MAX_IDS):  # a kernel with more series than MAX_IDS: several queries
            values.extend(read(ids[at:at + MAX_IDS]))
        frame = _frame(names.iloc[start:end], run_table, values, last, clean)
        start = end
        if len(frame):
            yield frame


def _frame(names: "pd.DataFrame", runs: "pd.DataFrame", values: list[tuple[object, ...]],
           last: int | None, clean: "Callable[[pd.DataFrame], None] | None" = None) -> "pd.DataFrame":
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(values, columns=list(VALUE_COLUMNS))
    frame = frame.merge(runs, on="run", how="inner").merge(names, on="series_id", how="inner")
    if clean is not None:
        clean(frame)
    time = frame["time"].astype("float64").to_numpy()
    order = np.lexsort((frame["run_id"].to_numpy(dtype=object).astype(str), time, frame["order"].to_numpy()))
    frame = frame.iloc[order].reset_index(drop=True)
    if last is not None and len(frame):
        frame = frame.groupby("order", sort=False).tail(last).reset_index(drop=True)
    frame = frame[list(SERIES_COLUMNS)].copy()
    frame["time"] = pd.to_datetime(frame["time"].astype("float64"), unit="s", utc=True)
    numbers = ["value", "median", "spread", "low", "high"]
    frame[numbers] = frame[numbers].astype("float64")
    # a value no float holds (1e309 written as text by another tool) is missing, as inf is
    frame[numbers] = frame[numbers].where(np.isfinite(frame[numbers]))
    n = frame["n"].astype("float64")
    frame["n"] = n.where(n.abs() < 2.0**53).round().astype("Int64")
    return frame


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
    """The parts as one frame (an empty one of SERIES_COLUMNS when there are none)."""
    import pandas as pd

    frames = list(parts)
    if frames:
        return pd.concat(frames, ignore_index=True)
    return _frame(pd.DataFrame(columns=["series_id", "machine", "suite", "kernel", "metric", "order"]),
                  pd.DataFrame(columns=["run", "run_id", "time", "commit", "branch", "ci_job", "ci_url"]), [], None)
