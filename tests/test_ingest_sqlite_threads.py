"""The ranges of a SQLite dispatch table are read by two threads at once
(``sqlitefile.read_ranges``, ``reading_threads``): the reads must give what one
thread gives (the same ranges in the same order, the same frames, the same summary),
and a range that fails on a reading thread, a caller that stops, or Ctrl-C must end
every thread and close every connection, with the one-line error of one thread."""

from __future__ import annotations

import signal
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import one_line_error, profile
from perfcheck.ingest import nsys, open_profile, rocpd, sqlitefile
from perfcheck.metrics.summary import metrics_want
from test_ingest_sqlite import (ALL_BUT_CORRELATION, H200, ROCPD, _analyses, _assert_same_analysis, _copy, _grow_nsys,
                                _guid_table, _table)


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("perfcheck-sqlite")]


def _grow_rocpd(path: Path, copies: int) -> str:
    """The 301 real dispatches repeated ``copies`` times with advancing timestamps
    (every third copy with another grid); returns the dispatch table's name."""
    with sqlite3.connect(path) as db:
        table = _guid_table(db, "rocpd_kernel_dispatch")
        columns = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")') if r[1] != "id"]
        listed = ", ".join(f'"{c}"' for c in columns)
        for i in range(1, copies + 1):
            select = ", ".join(f'"{c}" + {i} * 100000000' if c in ("start", "end") else
                               f'dispatch_id + {i} * 1000' if c == "dispatch_id" else
                               f'CASE WHEN {i} % 3 = 2 THEN grid_size_x * 2 ELSE grid_size_x END' if c == "grid_size_x"
                               else f'"{c}"' for c in columns)
            db.execute(f'INSERT INTO "{table}" ({listed}) SELECT {select} FROM "{table}" WHERE id <= 301')
    return table


def _one_and_two_threads(monkeypatch: pytest.MonkeyPatch, read):  # noqa: ANN001, ANN202
    """``read()`` with one reading thread and with two (and three: ranges in flight
    out of order more often)."""
    out = []
    for threads in (1, 2, 3):
        with monkeypatch.context() as patch:
            patch.setattr(sqlitefile, "reading_threads", lambda n=threads: n)
            out.append(read())
    assert not _threads()
    return out


def _assert_same_tables(tables: list) -> None:  # noqa: ANN001
    (one, one_odd), *others = tables
    for frame, odd in others:
        pd.testing.assert_frame_equal(frame, one, check_exact=True)
        assert odd == one_odd


@pytest.mark.parametrize("relative, module, rows", [(H200, nsys, 3), (ROCPD, rocpd, 7)])
def test_two_threads_read_what_one_reads_on_the_real_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           relative: str, module, rows: int) -> None:  # noqa: ANN001
    path = profile(relative)
    monkeypatch.setattr(module, "CHUNK_ROWS", rows)  # 6 and 43 ranges
    for want in (metrics_want(), ALL_BUT_CORRELATION):
        _assert_same_tables(_one_and_two_threads(monkeypatch, lambda: _table(path, want)))
    analyses = _one_and_two_threads(monkeypatch, lambda: _analyses(path, monkeypatch))
    for grouped, framed in analyses:
        _assert_same_analysis(grouped, analyses[0][0])
        _assert_same_analysis(framed, analyses[0][1])


def test_two_threads_read_what_one_reads_over_many_ranges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generated file of 1,098 dispatches in 157 ranges, with two configurations of a
    kernel and ranges sent to the row-by-row read (a NULL end, an end before its start),
    so that ranges come back from the threads out of order and of every kind."""
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 60)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = NULL WHERE rowid % 397 = 0")
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 3 WHERE rowid % 499 = 0")
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 7)
    monkeypatch.setattr(sqlitefile, "_SPLIT_ROWS", 10)  # the (process, device) pass in two halves too

    def ranges() -> list[sqlitefile.Range]:
        with sqlitefile.Reader(path, "the profile", "") as reader:
            return list(sqlitefile.read_ranges(reader, "CUPTI_ACTIVITY_KIND_KERNEL", "", (), key='"demangledName"',
                                               series=['"correlationId"'], config=['"gridX"', '"gridY"'],
                                               rowid="rowid", size=7, spans={"duration": ('"end"', '"start"')}))

    one, *others = _one_and_two_threads(monkeypatch, ranges)
    assert len(one) == 157 and not all(p.exact for p in one)
    for parts in others:
        assert [(p.first, p.last, p.exact, p.configs) for p in parts] == [(p.first, p.last, p.exact, p.configs) for p in one]
        for a, b in zip(parts, one):
            assert sorted(a.series) == sorted(b.series)
            assert all(np.array_equal(a.series[k], b.series[k]) for k in a.series)
            assert (a.config_of_row is None) == (b.config_of_row is None)
            assert a.config_of_row is None or np.array_equal(a.config_of_row, b.config_of_row)
    _assert_same_tables(_one_and_two_threads(monkeypatch, lambda: _table(path, metrics_want())))
    analyses = _one_and_two_threads(monkeypatch, lambda: _analyses(path, monkeypatch))
    for grouped, framed in analyses:
        _assert_same_analysis(grouped, analyses[0][0])
        _assert_same_analysis(framed, analyses[0][1])
    assert any("without a start or end" in o.what for o in analyses[0][0].oddities)


def test_two_ranges_are_read_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first two parses of a read meet at a barrier: only two threads reading two
    ranges at once pass it (one thread would wait for itself until the timeout)."""
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 20)
    met = threading.Barrier(2, timeout=30)
    calls = [0]
    lock = threading.Lock()
    parse = sqlitefile._parse_integers

    def meeting(text, count):  # noqa: ANN001, ANN202
        with lock:
            calls[0] += 1
            first_two = calls[0] <= 2
        if first_two:
            met.wait()
        return parse(text, count)

    monkeypatch.setattr(sqlitefile, "_parse_integers", meeting)
    monkeypatch.setattr(sqlitefile, "reading_threads", lambda: 2)
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 50)
    frame, _ = _table(path, metrics_want())
    assert len(frame) == 18 * 21 and not met.broken


def test_reading_threads_follow_the_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for cores, threads in ((1, 1), (2, 2), (16, 2)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        assert sqlitefile.reading_threads() == threads


def _damage_middle_page(path: Path, table: str, at: float = 0.5) -> None:
    """Overwrite a leaf page ``at`` (a fraction) of ``table``'s b-tree with garbage, as
    a disk or a copy might: the file opens, and its first ranges read."""
    with sqlite3.connect(path) as db:
        try:
            pages = [p for (p,) in db.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' "
                                              "ORDER BY pageno", (table,))]
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no dbstat table to find the table's pages")
        size = db.execute("PRAGMA page_size").fetchone()[0]
    assert len(pages) > 20
    with open(path, "r+b") as out:
        out.seek((pages[int(len(pages) * at)] - 1) * size)
        out.write(np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8).tobytes())


def test_a_range_that_fails_on_a_reading_thread_is_the_one_line_error(tmp_path: Path, cli,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that turns bad in the middle: the range over the damaged page fails on a
    reading thread; the caller gets the one-line error naming the table, every
    thread ends and every connection is closed."""
    path = _copy(ROCPD, tmp_path)
    table = _grow_rocpd(path, 30)  # 9,331 dispatches
    _damage_middle_page(path, table)
    monkeypatch.setattr(rocpd, "CHUNK_ROWS", 200)
    monkeypatch.setattr(sqlitefile, "reading_threads", lambda: 2)
    opened: list[sqlitefile.Reader] = []
    siblings: list[int] = []
    real_init, real_sibling = sqlitefile.Reader.__init__, sqlitefile.Reader.sibling

    def tracked(self, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        real_init(self, *args, **kwargs)
        opened.append(self)

    def sibling(self, steps):  # noqa: ANN001, ANN202
        siblings.append(threading.get_ident())
        return real_sibling(self, steps)

    monkeypatch.setattr(sqlitefile.Reader, "__init__", tracked)
    monkeypatch.setattr(sqlitefile.Reader, "sibling", sibling)
    line = one_line_error(cli("inspect", "--json", path), path, "malformed", "reading 'rocpd_kernel_dispatch'")
    assert "the rocpd database" in line
    assert threading.get_ident() not in siblings and siblings  # the ranges were read on the reading threads
    assert not _threads()
    for reader in opened:
        with pytest.raises(sqlite3.ProgrammingError):  # closed
            reader.connection.execute("SELECT 1")


def test_ctrl_c_during_a_read_ends_every_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT reaches the main thread while the reading threads scan (sent from one
    of them, on its fifth range): KeyboardInterrupt comes out of the read, and no
    reading thread nor connection is left."""
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 40)
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 20)
    monkeypatch.setattr(sqlitefile, "reading_threads", lambda: 2)
    main = threading.main_thread().ident
    if threading.get_ident() != main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's KeyboardInterrupt in the main thread here")
    calls = [0]
    lock = threading.Lock()
    parse = sqlitefile._parse_integers

    def interrupted(text, count):  # noqa: ANN001, ANN202
        with lock:
            calls[0] += 1
            now = calls[0] == 5
        if now:
            signal.pthread_kill(main, signal.SIGINT)
        return parse(text, count)

    opened: list[sqlitefile.Reader] = []
    real_sibling = sqlitefile.Reader.sibling

    def sibling(self, steps):  # noqa: ANN001, ANN202
        opened.append(real_sibling(self, steps))
        return opened[-1]

    monkeypatch.setattr(sqlitefile, "_parse_integers", interrupted)
    monkeypatch.setattr(sqlitefile.Reader, "sibling", sibling)
    chunks = open_profile(path, None, metrics_want()).chunks
    with pytest.raises(KeyboardInterrupt):
        for _ in chunks:
            pass
    # The interrupt lands in the read (waiting for a range) or, between two chunks, in
    # the caller, which then drops the read: either way, closing it ends the threads.
    chunks.close()
    assert calls[0] >= 5 and opened
    assert not _threads()
    for reader in opened:
        with pytest.raises(sqlite3.ProgrammingError):  # closed
            reader.connection.execute("SELECT 1")


def test_the_process_and_device_pass_reads_two_halves_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nsight Systems' whole-table pass (the processes and devices that ran kernels)
    reads its two halves of rowids on two threads, and finds the rows one pass finds."""
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 40)
    with sqlite3.connect(path) as db:  # another process in the upper half
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = globalPid + 2 * 16777216 WHERE rowid > 700")
    monkeypatch.setattr(sqlitefile, "_SPLIT_ROWS", 10)
    threads: dict[tuple, int] = {}
    rows = sqlitefile.Reader.rows

    def recorded(self, source, sql, params=()):  # noqa: ANN001, ANN202
        threads[tuple(params)] = threading.get_ident()
        return rows(self, source, sql, params)

    monkeypatch.setattr(sqlitefile.Reader, "rows", recorded)
    columns = ['"globalPid"', '"deviceId"']
    with sqlitefile.Reader(path, "the profile", "") as reader:
        whole = reader.rows("K", "SELECT DISTINCT globalPid, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL")
        split = sqlitefile.distinct(reader, "CUPTI_ACTIVITY_KIND_KERNEL", columns, "rowid")
        with monkeypatch.context() as patch:
            patch.setattr(sqlitefile, "reading_threads", lambda: 1)
            one = sqlitefile.distinct(reader, "CUPTI_ACTIVITY_KIND_KERNEL", columns, "rowid")
    assert len(whole) == 2 and sorted(split) == sorted(whole) == sorted(one)
    assert len(split) == len(set(split))
    assert threads[(1, 369)] == threading.get_ident() != threads[(370, 738)]  # the halves, on two threads
    assert not _threads()


def test_a_damaged_page_in_the_other_half_of_the_device_pass_is_the_one_line_error(tmp_path: Path, cli,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 300)
    _damage_middle_page(path, "CUPTI_ACTIVITY_KIND_KERNEL", at=0.8)  # in the upper half, read by the other thread
    monkeypatch.setattr(sqlitefile, "_SPLIT_ROWS", 10)
    monkeypatch.setattr(sqlitefile, "reading_threads", lambda: 2)
    one_line_error(cli("inspect", "--json", path), path, "malformed", "reading 'CUPTI_ACTIVITY_KIND_KERNEL'")
    assert not _threads()


def test_a_kernel_view_without_rowids_is_an_error_not_an_empty_profile(tmp_path: Path, cli) -> None:
    """A view in place of the kernel table (a hand-made file) has NULL rowids, which
    no range reaches: it was read as a profile without a kernel, exit 0."""
    path = _copy(H200, tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO kernel_rows")
        db.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM kernel_rows")
    one_line_error(cli("inspect", "--json", path), path, "'CUPTI_ACTIVITY_KIND_KERNEL' have no integer rowid",
                   "a view in place of the table")


def test_names_are_cleaned_once_not_per_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks that use the same kernels share one categorical dtype, and what is
    derived from its names (cleaned names, packets, the summary's kernel codes) is
    derived once: names of kilobytes were cleaned, hashed and matched again per chunk
    (0.7 s of 10M dispatches with 3.5 KB names). The analysis stays the same."""
    from perfcheck.ingest import dispatch

    path = _copy(H200, tmp_path)
    _grow_nsys(path, 40)  # 738 dispatches, 16 kernels in every range of 50
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 50)
    cleaned = [0]
    clean = dispatch._clean

    def counted(names):  # noqa: ANN001, ANN202
        cleaned[0] += 1
        return clean(names)

    monkeypatch.setattr(dispatch, "_clean", counted)
    grouped, framed = _analyses(path, monkeypatch)
    _assert_same_analysis(grouped, framed)
    assert cleaned[0] <= 6  # (15 ranges, each read twice: grouped and framed)
