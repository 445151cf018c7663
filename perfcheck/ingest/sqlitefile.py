"""SQLite files that profilers write (Nsight Systems exports, rocprofv3's rocpd,
rocprof v1's results.db), opened the one way every reader of them needs."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only (``mode=ro``): a profile is evidence, it may sit on
    read-only storage, and no journal or WAL file may appear beside it."""
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


def table_names(connection: sqlite3.Connection) -> set[str]:
    """The tables and views of the database."""
    return {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
