"""The one interface of a history store, whichever backend keeps it.

``open_store`` (``perfcheck.history.store``) returns an SQLite ``Store`` for a path
and a ``PostgresStore`` (``perfcheck.history.pgstore``) for a ``postgresql://`` URL;
everything above the store (the CLI's history commands, the gate, the dashboard,
the exports, ``history copy``) uses only what this protocol names, so both backends
serve it alike (``tests/test_history_postgres.py`` runs the history tests on both).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pandas as pd

    from perfcheck.history.store import AddResult, Machine, Result, RunRecord
    from perfcheck.storeurl import StoreURL


class HistoryStore(Protocol):
    """An open history store (a context manager)."""

    path: "Path | StoreURL"  # what messages name: a file, or the URL with its password masked

    @property
    def version(self) -> int: ...

    def machines(self) -> dict[str, dict[str, str]]: ...

    def runs(self, *, since: float | None = None, limit: int | None = None) -> "pd.DataFrame": ...

    def series(self, *, machine: str | None = None, suite: str | Sequence[str] | None = None,
               kernel: str | Sequence[str] | None = None, metric: str | Sequence[str] | None = None,
               since: float | None = None, last: int | None = None) -> "pd.DataFrame": ...

    def series_keys(self) -> "pd.DataFrame": ...  # machine, suite, kernel, metric of every series

    def batches(self, *, machine: str | None = None, suite: str | Sequence[str] | None = None,
                kernel: str | Sequence[str] | None = None, metric: str | Sequence[str] | None = None,
                since: float | None = None, last: int | None = None,
                rows: int = ...) -> "Iterator[pd.DataFrame]": ...  # ``series`` in parts of whole kernels

    def latest(self, *, machine: str, suite: str, pairs: Sequence[tuple[str, str | None]],
               last: int) -> "pd.DataFrame": ...  # the latest runs of the (kernel, metric) series named: the gate's

    def add(self, run: "RunRecord", results: Iterable["Result"], machines: Iterable["Machine"] = ()) -> "AddResult": ...

    def prune(self, *, keep_days: float, now: float | None = None) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> "HistoryStore": ...

    def __exit__(self, *exc: object) -> None: ...
