"""The latest runs of the series a gate judges, as arrays: what ``check --history``
reads from a store (``HistoryStore.latest_values``).

The gate needs, for each of a suite's ~2,000 judged series, its last 60 values, and
the run id, time and commit of a handful of rows (where its reference starts). Read
as ``HistoryStore.latest`` gives them (a frame of every series column, each row holding
the kernel's name and the run's provenance) that was most of the gate's time at 365
nights; here only (series, run, value) are read, and the runs table (one row a night)
is looked up by position. The rows kept and their order are those of ``latest``: runs
by time then run id, each series' last ``last`` of them, values that are missing or not
finite as NaN (``tests/test_history_gate.py`` compares the two on both backends).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, NoReturn

from perfcheck.errors import InputError
from perfcheck.history.backend import DAMAGED_HINT

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

LEAN_COLUMNS = ("series_id", "run", "value")  # the first three of backend.VALUE_COLUMNS


@dataclass(frozen=True)
class LatestValues:
    """Each series' latest values (series order: machine, suite, kernel, metric by their
    bytes; series without values left out). Series ``i`` is ``values[starts[i]:starts[i + 1]]``,
    oldest first; ``runs`` gives each value's run as a position in ``run_ids``/``times``/``commits``."""

    kernels: tuple[str, ...]
    metrics: tuple[str, ...]
    starts: "np.ndarray"  # int64, one more than the series
    values: "np.ndarray"  # float64 (base units); NaN: missing or not finite
    runs: "np.ndarray"  # int64 positions in the run columns below
    run_ids: tuple[str, ...]
    times: "np.ndarray"  # float64 Unix seconds (UTC)
    commits: tuple[str | None, ...]

    def __len__(self) -> int:
        return len(self.kernels)

    def span(self, index: int) -> tuple[int, int]:
        return int(self.starts[index]), int(self.starts[index + 1])


def empty() -> LatestValues:
    import numpy as np

    none = np.zeros(0, dtype="int64")
    return LatestValues((), (), np.zeros(1, dtype="int64"), np.zeros(0, dtype="float64"), none, (), np.zeros(0), ())


def _records(rows: Sequence[tuple[object, ...]],
             runs: Sequence[Sequence[object]]) -> "tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None":
    """(series ids, run numbers, runs table's run numbers, values) as int64, int64, int64
    and float64 (None: NaN) where the rows hold what a store holds: integers, integers
    and numbers, and the runs table integers; else None, for the checked way. The rows
    go into a record array in one C loop: the three tuples of 120,000 items ``zip``
    made, and numpy's walk over each, were a third of the gate's read at 365 nights."""
    import numpy as np

    if len(rows[0]) != 3 or {type(run[0]) for run in runs} != {int}:
        return None
    kinds = [set(map(type, map(itemgetter(column), rows))) for column in range(3)]
    if kinds[0] != {int} or kinds[1] != {int} or not kinds[2] <= {float, int, type(None)}:
        return None
    numbers = np.asarray([run[0] for run in runs], dtype="int64")
    if type(None) not in kinds[2]:
        table = np.fromiter(rows, dtype=[("series_id", "i8"), ("run", "i8"), ("value", "f8")], count=len(rows))
        return table["series_id"], table["run"], numbers, table["value"]
    # with missing values: as floats (ids and run numbers are far below 2**53, exact)
    table = np.array(rows, dtype="float64").reshape(len(rows), 3)
    return table[:, 0].astype("int64"), table[:, 1].astype("int64"), numbers, table[:, 2].copy()


def latest_values(keys: Sequence[Sequence[object]], runs: Sequence[Sequence[object]],
                  read: "Callable[[list[int]], list[tuple[object, ...]]]", *, last: int, max_ids: int,
                  where: object, clean: "Callable[[pd.DataFrame], None] | None" = None) -> LatestValues:
    """The LatestValues of the series ``keys`` (series_id, machine, suite, kernel,
    metric; in series order), from the ``runs`` table's rows (run, run_id, time,
    commit, ...) and ``read`` (the LEAN_COLUMNS rows of some series ids, at most
    ``max_ids`` a query; each series' latest ``last`` runs or more). ``clean``: the
    store's check of a part's number columns, which raises the store's one-line error
    for a value or time that is not a number (SQLite's columns take any type);
    ``where``: the store's path or masked URL, for an error ``clean`` does not raise."""
    import numpy as np  # here: storing a run (the store module imports this one) needs no numpy

    if not keys or not runs:
        return empty()
    ids = [key[0] for key in keys]
    rows: list[tuple[object, ...]] = []
    for at in range(0, len(ids), max_ids):
        rows.extend(read(ids[at:at + max_ids]))
    if not rows:
        return empty()
    records = _records(rows, runs)
    if records is not None:  # rows as a store holds them: the arrays in one C loop
        return _joined(keys, runs, rows, *records, last=last, clean=clean, where=where)
    row_series, row_runs, row_values = zip(*(row[:3] for row in rows))
    # text in a value (SQLite's REAL columns take it) is a damaged store, as ``latest``
    # says: numpy would read "nan" as missing and "1_0" as 10
    if any(isinstance(value, (str, bytes)) for value in row_values):
        _damaged(rows, runs, clean, where)
    from perfcheck.history.backend import integral

    # the run numbers as read, checked before they are made integers: numpy would take a
    # run 1.5 as 1, b"7" and "1_0" as 7 and 10 (SQLite's INTEGER columns keep what another
    # tool wrote), a value joined to the wrong run
    row_numbers = np.asarray(row_runs, dtype=object)
    numbers = np.asarray([run[0] for run in runs], dtype=object)  # the runs table's, in its order
    if not (integral(row_numbers) and integral(numbers)):
        _damaged(rows, runs, clean, where)
    try:
        values = np.asarray(row_values, dtype="float64")
        row_ids = np.asarray(row_series, dtype="int64")  # an integer id the query named (no text matches one)
        row_numbers, numbers = row_numbers.astype("int64"), numbers.astype("int64")
    except (TypeError, ValueError, OverflowError):
        _damaged(rows, runs, clean, where)
    return _joined(keys, runs, rows, row_ids, row_numbers, numbers, values, last=last, clean=clean, where=where)


def _joined(keys: Sequence[Sequence[object]], runs: Sequence[Sequence[object]], rows: Sequence[tuple[object, ...]],
            row_ids: "np.ndarray", row_numbers: "np.ndarray", numbers: "np.ndarray", values: "np.ndarray", *,
            last: int, clean: "Callable[[pd.DataFrame], None] | None", where: object) -> LatestValues:
    """``latest_values`` of the rows ``rows`` read as arrays: each row's series id, run
    number and value, and the runs table's run numbers (in its order)."""
    import numpy as np

    ids = [key[0] for key in keys]
    from perfcheck.history.store import MAX_TIME, MIN_TIME

    # a run's time that is not a possible one is an error only where a value uses it
    times = np.asarray([_seconds(run[2]) for run in runs], dtype="float64")
    # each value's series position and run position (inner joins, as ``latest`` makes:
    # a value of a run or series not listed is no value of it)
    by_id = np.argsort(np.asarray(ids, dtype="int64"), kind="stable")
    sorted_ids = np.asarray(ids, dtype="int64")[by_id]
    at = np.clip(np.searchsorted(sorted_ids, row_ids), 0, len(ids) - 1)
    series = np.where(sorted_ids[at] == row_ids, by_id[at], -1)  # position in ``keys``
    by_number = np.argsort(numbers, kind="stable")
    at = np.clip(np.searchsorted(numbers[by_number], row_numbers), 0, len(numbers) - 1)
    run = np.where(numbers[by_number][at] == row_numbers, by_number[at], -1)  # position in ``runs``
    kept = (series >= 0) & (run >= 0)
    series, run, values = series[kept], run[kept], values[kept]
    used = np.unique(run)
    if len(used) and not np.all((times[used] >= MIN_TIME) & (times[used] <= MAX_TIME)):  # NaN: False
        _damaged([row for row, keep in zip(rows, kept) if keep], runs, clean, where)
    # runs by time, then run id (as ``latest`` orders them), each series' last ``last``
    run_ids = [str(r[1]) for r in runs]
    rank = np.empty(len(runs), dtype="int64")
    usable = np.where(np.isnan(times), np.inf, times)  # unused runs only (NaN would unsettle the sort)
    rank[sorted(range(len(runs)), key=lambda i: (usable[i], run_ids[i]))] = np.arange(len(runs))
    order = np.lexsort((rank[run], series))
    series, run, values = series[order], run[order], values[order]
    cuts = np.flatnonzero(np.diff(series)) + 1
    starts = np.concatenate(([0], cuts, [len(series)]))
    from_end = np.repeat(starts[1:], np.diff(starts)) - np.arange(len(series))  # 1 for a series' last row
    keep = from_end <= last
    series, run, values = series[keep], run[keep], values[keep]
    values = np.where(np.isfinite(values), values, np.nan)
    present = np.flatnonzero(np.concatenate(([True], np.diff(series) != 0))) if len(series) else np.zeros(0, "int64")
    starts = np.concatenate((present, [len(series)])).astype("int64")
    chosen = series[present].tolist()
    return LatestValues(
        kernels=tuple(str(keys[i][3]) for i in chosen), metrics=tuple(str(keys[i][4]) for i in chosen),
        starts=starts, values=values, runs=run.astype("int64"), run_ids=tuple(run_ids), times=times,
        commits=tuple(r[3] if isinstance(r[3], str) else None for r in runs))


def _seconds(value: object) -> float:
    """A run's time as float seconds; NaN for what is not a number (a damaged store)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _damaged(rows: Sequence[tuple[object, ...]], runs: Sequence[Sequence[object]],
             clean: "Callable[[pd.DataFrame], None] | None", where: object) -> NoReturn:
    """Raise the store's own error for rows whose run number, value, or run's time is not
    a number (or not a possible time, or a run number not an integer): the frames its
    ``clean`` checks, made only then."""
    import pandas as pd

    times = {run[0]: (run[1], run[2]) for run in runs}
    frame = pd.DataFrame({
        "series_id": [row[0] for row in rows],
        "results.run": [row[1] for row in rows],
        "run_id": [times.get(row[1], (None, None))[0] for row in rows],
        "time": [times.get(row[1], (None, None))[1] for row in rows],
        "value": [row[2] for row in rows],
        **{column: [None] * len(rows) for column in ("median", "spread", "low", "high", "n")},
    }, dtype=object)
    if clean is not None:
        clean(pd.DataFrame({"runs.run": [run[0] for run in runs], "run_id": [run[1] for run in runs]}, dtype=object))
        clean(frame)
    raise InputError(where, "the history store is damaged (a value or a run's time is not a number)",  # type: ignore[arg-type]
                     hint=DAMAGED_HINT)
