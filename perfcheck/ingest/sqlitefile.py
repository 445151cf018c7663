"""SQLite files that profilers write (Nsight Systems exports, rocprofv3's rocpd,
rocprof v1's results.db), opened the one way every reader of them needs."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only (``mode=ro``): a profile is evidence, it may sit on
    read-only storage, and no journal or WAL file may appear beside it."""
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


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
