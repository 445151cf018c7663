"""Storing runs (``history add``, ``check --history``'s append): what the SQLite file
looks like on disk. The store's contents and idempotency are tested on both backends
in test_history_store.py; these are SQLite's own."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from perfcheck.history import Result, RunRecord, open_store
from perfcheck.history.store import PAGE_SIZE

T0 = 1_767_225_600.0


def _pragma(path: Path, name: str) -> object:
    with sqlite3.connect(path) as db:
        return db.execute(f"PRAGMA {name}").fetchone()[0]


def _night(i: int, kernels: int = 40) -> tuple[RunRecord, list[Result]]:
    return RunRecord(f"night-{i:03d}", T0 + i * 86400.0), [
        Result("m", "s", f"kernel_{k:03d}", metric, 1e-3 * (1 + k) * (1 + 0.01 * i), "s")
        for k in range(kernels) for metric in ("duration", "occupancy")]


def test_a_new_store_has_small_pages(tmp_path: Path) -> None:
    # each night writes one leaf page per series: a page of 1 KB, not SQLite's 4 KB
    path = tmp_path / "h.sqlite"
    with open_store(path) as store:
        store.add(*_night(0))
    assert PAGE_SIZE == 1024 and _pragma(path, "page_size") == 1024 and _pragma(path, "journal_mode") == "wal"


def test_a_store_with_other_pages_keeps_them_and_stays_idempotent(tmp_path: Path) -> None:
    # an existing store (4 KB pages) is not rewritten: runs go on being added to it, the
    # same results again add nothing, and what it holds reads back as from a new store
    old, new = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    for path in (old, new):
        with open_store(path) as store:
            store.add(*_night(0))
    with sqlite3.connect(old, isolation_level=None) as db:
        db.execute("PRAGMA journal_mode = DELETE")
        db.execute("PRAGMA page_size = 4096")
        db.execute("VACUUM")
        db.execute("PRAGMA journal_mode = WAL")
    assert _pragma(old, "page_size") == 4096
    for path in (old, new):
        with open_store(path) as store:
            for i in (1, 2):
                assert store.add(*_night(i)).added
            assert not store.add(*_night(2)).added
    assert _pragma(old, "page_size") == 4096 and _pragma(new, "page_size") == 1024
    with open_store(old, create=False) as a, open_store(new, create=False) as b:
        assert a.series().equals(b.series()) and len(a.series()) == 3 * 80
