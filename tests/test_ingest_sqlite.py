"""The SQLite profile readers (Nsight Systems, rocpd, rocprof v1 results.db) as a whole:
the fast read (names once per distinct kernel, per-row integers by ranges) gives the
same dispatches as reading row by row; every read is bounded and read-only; damaged
or hostile files are one-line errors or warnings. The files are copies of the real
ones in ../shared/profiles with rows added or views replaced by SQL."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import one_line_error, profile
from perfcheck.ingest import nsys, open_profile, rocpd, sqlitefile
from perfcheck.ingest.formats import Grouped
from perfcheck.metrics.summary import metrics_want
from perfcheck.schema import ALL, COLUMNS, Want

H200 = "nsys/nvidia-fuser-h200-nsys2025.1/report1.sqlite"
ROCPD = "rocprofv3/batched_gemm-mi300x-rocpd/15_results.db"
KOKKOS_DB = "rocprof-v1/kokkos-gfx906/results.db"
MI300X_DB = "rocprof-v1/batched_gemm-mi300x/results.db"


def _copy(relative: str, tmp_path: Path, name: str | None = None) -> Path:
    dest = tmp_path / (name or Path(relative).name)
    shutil.copyfile(profile(relative), dest)
    dest.chmod(0o644)
    return dest


def _guid_table(db: sqlite3.Connection, stem: str) -> str:
    return db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?", (stem + "_0%",)).fetchone()[0]


def _table(path: Path, want) -> tuple[pd.DataFrame, list]:  # noqa: ANN001
    scan = open_profile(path, None, want)
    chunks = list(scan.chunks)
    # The summary's Want takes grouped chunks (each launch configuration once) where a
    # range is read fast: they must hold the same dispatches as the row-by-row read.
    assert want.grouped or not any(isinstance(c, Grouped) for c in chunks)
    frames = [c.frame() if isinstance(c, Grouped) else c for c in chunks]
    return pd.concat(frames, ignore_index=True), list(scan.oddities)


# Every canonical column but the correlation id (which needs a join per row): the fast
# read with all it can give.
ALL_BUT_CORRELATION = Want(frozenset(COLUMNS) - {"correlation_id"})


def _same_dispatches(path: Path) -> pd.DataFrame:
    """The fast read (what inspect asks for, and all it can give) against the row-by-row
    one (everything): the same rows and values in every column the fast read gives."""
    slow, slow_odd = _table(path, ALL)
    assert all(isinstance(c, Grouped) for c in open_profile(path, None, metrics_want()).chunks)
    for want in (metrics_want(), ALL_BUT_CORRELATION):
        fast, fast_odd = _table(path, want)
        assert len(fast) == len(slow)
        assert [(o.what, o.count) for o in fast_odd] == [(o.what, o.count) for o in slow_odd]
        # grouped chunks (the summary's) carry durations, not timestamps
        assert {"kernel", "duration", *(() if want.grouped else ("start_ns", "end_ns"))} <= set(fast.columns)
        for column in fast.columns:
            assert column in slow.columns, column
            a, b = fast[column], slow[column]
            if column == "kernel":
                a, b = a.astype("string"), b.astype("string")
            pd.testing.assert_series_equal(a, b, check_dtype=False, check_categorical=False, obj=column)
    assert set(fast.columns) == set(slow.columns) - {"correlation_id"} - {c for c in slow.columns if c.startswith("raw.")}
    return slow


def _grow_nsys(path: Path, copies: int) -> None:
    """The 18 real kernel rows repeated ``copies`` times with advancing timestamps; every
    third repetition launches the nvjet kernel with another grid (a second launch
    configuration of one kernel), and names get a '.kd'-free spelling variant."""
    with sqlite3.connect(path) as db:
        columns = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
        listed = ", ".join(f'"{c}"' for c in columns)
        for i in range(1, copies + 1):
            select = ", ".join(
                f'start + {i} * 10000000000' if c == "start" else
                f'"end" + {i} * 10000000000 + {i % 7}' if c == "end" else
                f'correlationId + {i} * 100000' if c == "correlationId" else
                f'CASE WHEN gridY = 66 AND {i} % 3 = 0 THEN 33 ELSE gridY END' if c == "gridY" else f'"{c}"'
                for c in columns)
            db.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({listed}) SELECT {select} FROM CUPTI_ACTIVITY_KIND_KERNEL "
                       "WHERE rowid <= 18")


def test_nsys_fast_read_is_the_row_by_row_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 40)  # 738 dispatches
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 50)  # 15 ranges, some with two configurations of a kernel
    d = _same_dispatches(path)
    assert len(d) == 18 * 41 and d["kernel"].nunique() == 16
    assert set(d.loc[d["kernel"] == "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "grid_y"]) == {66, 33}
    # inspect's medians are exact: the same as numpy's over the durations read by hand
    with sqlite3.connect(path) as db:
        durations = np.array([e - s for s, e in db.execute(
            "SELECT start, \"end\" FROM CUPTI_ACTIVITY_KIND_KERNEL K JOIN StringIds S ON S.id = K.demangledName "
            "WHERE S.value = 'nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN'")]) * 1e-9
    kernel = {k["kernel"]: k for k in cli("inspect", "--json", path).json()["kernels"]}["nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN"]
    assert kernel["calls"] == len(durations) == 41
    assert kernel["metrics"]["duration"] == pytest.approx(float(np.median(durations)), rel=1e-12)


def test_rocpd_fast_read_is_the_view_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _copy(ROCPD, tmp_path)
    with sqlite3.connect(path) as db:
        table = _guid_table(db, "rocpd_kernel_dispatch")
        columns = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")') if r[1] != "id"]
        listed = ", ".join(f'"{c}"' for c in columns)
        for i in range(1, 4):
            select = ", ".join(f'"{c}" + {i} * 100000000' if c in ("start", "end") else
                               f'dispatch_id + {i} * 1000' if c == "dispatch_id" else
                               f'CASE WHEN {i} = 2 THEN grid_size_x * 2 ELSE grid_size_x END' if c == "grid_size_x"
                               else f'"{c}"' for c in columns)
            db.execute(f'INSERT INTO "{table}" ({listed}) SELECT {select} FROM "{table}" WHERE id <= 301')
    monkeypatch.setattr(rocpd, "CHUNK_ROWS", 97)
    d = _same_dispatches(path)
    assert len(d) == 4 * 301 and d["kernel"].nunique() == 2


# Cells the fast read must not take as integers (it checks group_concat's text, not each
# cell's type): each sends its range to the row-by-row read, whose values and warnings
# the fast read must then give. The table's columns lose their INTEGER affinity first,
# so text that looks like a number stays text, as in a hand-made file.
ODD_CELLS = ["66", "NULL", "'2,'", "''", "1.5", "3.0", "'99999999999999999999'", "'-99999999999999999999'", "'12abc'", "'Inf'",
             "' 12'", "'12'", "x'3132'"]


@pytest.mark.parametrize("cell", ODD_CELLS)
@pytest.mark.parametrize("column", ["start", "demangledName", "gridY"])
def test_odd_cells_leave_their_range_to_the_row_by_row_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           column: str, cell: str) -> None:
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 5)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_master SET sql = replace(replace(sql, 'NOT NULL', ''), 'INTEGER', '') "
                   "WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'")
    with sqlite3.connect(path) as db:
        # one cell in the second range, and a NULL beside it that a comma in the cell could hide
        db.execute(f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "{column}" = {cell} WHERE rowid = 25')
        if "," in cell:
            db.execute(f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "{column}" = NULL WHERE rowid = 31')
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 20)
    want = metrics_want()
    fast, fast_odd = _table(path, want)
    monkeypatch.setattr(sqlitefile, "_parse_integers", lambda text, count: None)  # every range row by row
    slow, slow_odd = _table(path, want)
    assert [(o.what, o.count) for o in fast_odd] == [(o.what, o.count) for o in slow_odd]
    # (grouped chunks, from the ranges read fast, carry durations, not timestamps)
    for name in sorted(c for c in fast.columns if c in want and c not in ("start_ns", "end_ns")):
        a, b = fast[name], slow[name]
        if name == "kernel":
            a, b = a.astype("string"), b.astype("string")
        pd.testing.assert_series_equal(a, b, check_dtype=False, check_categorical=False, obj=name)


def test_null_timestamps_are_counted_with_a_warning(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 5)
    with sqlite3.connect(path) as db:  # the export's NOT NULL is a promise a hand-made file may break
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = NULL WHERE rowid % 4 = 0")
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 20)
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    document = result.json()
    assert sum(k["calls"] for k in document["kernels"]) == 18 * 6
    warned = [w for w in document["warnings"] if "without a start or end timestamp" in w["message"]]
    assert len(warned) == 1 and warned[0]["count"] == 18 * 6 // 4


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("relative", [H200, ROCPD, MI300X_DB])
def test_reading_never_writes_nor_leaves_side_files(tmp_path: Path, cli, relative: str) -> None:
    path = _copy(relative, tmp_path)
    with sqlite3.connect(path) as db:  # a database left in WAL mode by its writer
        assert db.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    before = _sha(path)
    listing = sorted(p.name for p in tmp_path.iterdir())
    path.chmod(0o444)
    tmp_path.chmod(0o555)  # read-only storage: no side file could be created anyway
    try:
        assert cli("inspect", "--json", path).code == 0
        assert cli("inspect", path).code == 0
    finally:
        tmp_path.chmod(0o755)
    assert _sha(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing


def _replace_with_view(path: Path, name: str, select: str) -> None:
    with sqlite3.connect(path) as db:
        kind = db.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        if kind:
            db.execute(f'DROP {kind[0].upper()} "{name}"')
        db.execute(f'CREATE VIEW "{name}" AS {select}')


def _runaway(path: Path, name: str) -> None:
    """``name`` becomes a view with its own columns that never ends: its rows repeated
    by a recursive counter without a bound."""
    with sqlite3.connect(path) as db:
        kind, sql = db.execute("SELECT type, sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        if kind == "table":
            db.execute(f'ALTER TABLE "{name}" RENAME TO "{name}_rows"')
        else:
            body = sql[sql.upper().index(" AS") + 3:]
            db.execute(f'DROP VIEW "{name}"')
            db.execute(f'CREATE VIEW "{name}_rows" AS {body}')
        db.execute(f'CREATE VIEW "{name}" AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) '
                   f'SELECT "{name}_rows".* FROM r, "{name}_rows"')


@pytest.mark.parametrize("relative,view", [
    (H200, "META_DATA_EXPORT"), (H200, "TARGET_INFO_GPU"), (H200, "CUPTI_ACTIVITY_KIND_KERNEL"),
    (ROCPD, "rocpd_info_agent"), (ROCPD, "rocpd_kernel_dispatch"),
])
def test_a_runaway_view_is_a_clean_error_naming_it(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch,
                                                   relative: str, view: str) -> None:
    path = _copy(relative, tmp_path)
    _runaway(path, view)
    # the real budget takes a few seconds to spend on these 2 MB files
    monkeypatch.setattr(sqlitefile, "MIN_STEPS", 10_000_000)
    monkeypatch.setattr(sqlitefile, "STEPS_PER_BYTE", 1)
    line = one_line_error(cli("inspect", path), path)
    assert f"reading {view!r}" in line and "SQLite steps" in line and "recursive or runaway view" in line


@pytest.mark.parametrize("relative,view,select", [
    # 80 MB strings, beyond MAX_LENGTH (64 MiB)
    (H200, "StringIds", "SELECT DISTINCT demangledName AS id, hex(zeroblob(40000000)) AS value FROM CUPTI_ACTIVITY_KIND_KERNEL"),
    (H200, "TARGET_INFO_GPU", "SELECT 0 AS id, 0 AS cuDevice, hex(zeroblob(40000000)) AS name"),
    (ROCPD, "rocpd_info_kernel_symbol", "SELECT *, 1 FROM rocpd_info_agent"),
])
def test_huge_strings_and_odd_views_are_clean_errors(tmp_path: Path, cli, relative: str, view: str, select: str) -> None:
    path = _copy(relative, tmp_path)
    _replace_with_view(path, view, select)
    result = cli("inspect", path)
    line = one_line_error(result, path)
    assert f"reading {view!r}" in line


def test_compound_select_limit(tmp_path: Path, cli) -> None:
    path = _copy(ROCPD, tmp_path)
    terms = " UNION ALL ".join(["SELECT * FROM rocpd_info_agent_view_base"] * (sqlitefile.MAX_COMPOUND + 10))
    with sqlite3.connect(path) as db:
        agent = _guid_table(db, "rocpd_info_agent")
        db.execute(f'CREATE VIEW rocpd_info_agent_view_base AS SELECT * FROM "{agent}"')
        db.execute("DROP VIEW rocpd_info_agent")
        db.execute(f"CREATE VIEW rocpd_info_agent AS {terms}")
    line = one_line_error(cli("inspect", path), path)
    assert "compound" in line


def test_a_column_named_with_a_quote_is_read(tmp_path: Path, cli) -> None:
    path = _copy(MI300X_DB, tmp_path, "results.db")
    with sqlite3.connect(path) as db:
        db.execute('ALTER TABLE OPS ADD COLUMN "we""ird" TEXT')
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    assert result.json()["kernels"]


def test_cuda_device_map_without_pid_is_a_warning(tmp_path: Path, cli) -> None:
    path = _copy(H200, tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE TARGET_INFO_CUDA_DEVICE DROP COLUMN pid")
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    document = result.json()
    assert any("TARGET_INFO_CUDA_DEVICE lacks column(s) pid" in w["message"] for w in document["warnings"])
    assert document["target"]["arch"] == "sm_90"  # the device is still known, by CUDA ordinal


def test_blank_stats_row_is_no_kernel(tmp_path: Path, cli) -> None:
    real = profile("rocprof-v1/batched_gemm-mi300x/results.stats.csv").read_text()
    head, *rows = real.splitlines()
    path = tmp_path / "results.stats.csv"
    path.write_text("\n".join([head, rows[0], ",,,,", *rows[1:]]) + "\n")
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    kernels = [k["kernel"] for k in result.json()["kernels"]]
    assert "" not in kernels and len(kernels) == len(rows)
    assert any("empty rows" in w["message"] for w in result.json()["warnings"])
    path.write_text("\n".join([head, ",5,100,20,1.0", *rows]) + "\n")
    one_line_error(cli("inspect", path), path, ":2", "without a kernel name")


@pytest.mark.parametrize("error", ["memory", "arrow"])
def test_running_out_of_memory_is_a_one_line_error(cli, monkeypatch: pytest.MonkeyPatch, error: str) -> None:
    import pyarrow as pa

    import perfcheck.analysis

    def exhausted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if error == "arrow":
            pa.default_memory_pool()  # pyarrow's own exception type, raised as its allocator does
            raise pa.lib.ArrowMemoryError("malloc of size 8589934592 failed")
        raise MemoryError()

    monkeypatch.setattr(perfcheck.analysis, "analyse", exhausted)
    result = cli("inspect", profile(H200))
    assert result.code == 2
    line = one_line_error(result, None, "ran out of", "--since")
    assert "internal error" not in line
    assert ("pyarrow's memory pool" in line) == (error == "arrow")


def test_a_read_stopped_early_leaves_no_worker_nor_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranges are read ahead on reading threads, each with its own connection: a
    caller that stops after the first chunk ends them all (no thread left running)."""
    import threading

    path = _copy(H200, tmp_path)
    _grow_nsys(path, 40)
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 50)
    opened: list[sqlitefile.Reader] = []
    real_init = sqlitefile.Reader.__init__

    def tracked(self, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        real_init(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(sqlitefile.Reader, "__init__", tracked)
    chunks = open_profile(path, None, metrics_want()).chunks
    assert len(next(chunks)) > 0
    assert any(t.name.startswith("perfcheck-sqlite") for t in threading.enumerate())
    chunks.close()
    assert not any(t.name.startswith("perfcheck-sqlite") for t in threading.enumerate())
    assert len(opened) >= 3  # the scan's, the chunks', the reading threads'
    for reader in opened:
        with pytest.raises(sqlite3.ProgrammingError):  # closed
            reader.connection.execute("SELECT 1")


@pytest.mark.parametrize("text, count", [("1,2,3.5", 3), ("1,2,1.0e+20", 3), ("1,Inf,2", 3), ("-Inf", 1), ("1,2,", 3),
                                         ("1,,3", 3), ("1,2", 3), ("", 1)])
def test_group_concat_text_that_is_not_integers_is_refused(text: str, count: int) -> None:
    # SQLite writes reals with a '.' (its "%!.15g") or as Inf; older numpy would parse
    # "3.5" as 3 with a warning, so the text is checked before numpy sees it.
    assert sqlitefile._parse_integers(text, count) is None
    assert list(sqlitefile._parse_integers("12,-3,0", 3)) == [12, -3, 0]


def _analyses(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """``inspect``'s analysis of ``path`` from grouped chunks (each launch configuration
    once) and from the frames of the same reads (a frame per dispatch, as before)."""
    from dataclasses import replace

    from perfcheck import analysis
    from perfcheck.metrics import summary

    grouped = analysis.analyse([path])
    with monkeypatch.context() as patch:
        patch.setattr(summary, "metrics_want", lambda: replace(metrics_want(), grouped=False))
        framed = analysis.analyse([path])
    return grouped, framed


def _assert_same_analysis(grouped, framed) -> None:  # noqa: ANN001
    assert len(grouped.kernels)
    pd.testing.assert_frame_equal(grouped.kernels, framed.kernels, check_exact=True)
    # in the same order: kernels are numbered as their first dispatches come, and the
    # numbering breaks ties of the final sort
    assert list(grouped.duration_samples) == list(framed.duration_samples)
    for kernel, samples in grouped.duration_samples.items():
        assert np.array_equal(samples, framed.duration_samples[kernel]), kernel
    assert grouped.oddities == framed.oddities


def test_summary_of_grouped_chunks_is_the_summary_of_frames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary's numbers (medians, sums, resources, occupancy, the order of kernels
    with equal totals) and every warning are the same from grouped chunks as from a
    frame per dispatch: on a file with two configurations of a kernel, GPU packets that
    are dropped, impossible values in a configuration and in a timestamp, a zero
    duration, and a rank taken from the path."""
    (tmp_path / "rank_3").mkdir()
    path = _copy(H200, tmp_path / "rank_3")
    _grow_nsys(path, 40)
    with sqlite3.connect(path) as db:
        packet = db.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
        db.execute("INSERT INTO StringIds (id, value) VALUES (?, '<barrier packet>')", (packet,))
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = ? WHERE rowid % 9 = 4", (packet,))
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = -2 WHERE rowid % 11 = 5")
        # every dispatch of one kernel: a configuration row that stands for several
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET blockZ = -1 WHERE demangledName = "
                   "(SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 7)")
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -5 WHERE rowid = 100")
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start WHERE rowid = 200")
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 50)
    grouped, framed = _analyses(path, monkeypatch)
    _assert_same_analysis(grouped, framed)
    said = " ".join(o.what for o in grouped.oddities)
    assert "'<barrier packet>'" in said and "in 'grid_size'" in said and "in 'workgroup_size'" in said and "'start_ns'" in said and "zero duration" in said
    assert grouped.sources[0].rank == 3


@pytest.mark.parametrize("relative", [H200, ROCPD])
def test_summary_of_grouped_chunks_on_the_real_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: str) -> None:
    grouped, framed = _analyses(profile(relative), monkeypatch)
    _assert_same_analysis(grouped, framed)
    assert grouped.target is not None  # occupancy was computed from the configurations


@pytest.mark.parametrize("relative, source, rowid, key", [
    (H200, "CUPTI_ACTIVITY_KIND_KERNEL", "rowid", '"demangledName"'),
    (ROCPD, "rocpd_kernel_dispatch", "id", "kernel_id"),  # a view of the session's table
])
def test_range_bounds_are_looked_up_not_scanned(tmp_path: Path, relative: str, source: str, rowid: str, key: str) -> None:
    """The first and last rowid are two b-tree lookups: SQLite scanned the whole table
    for min() and max() in one SELECT (2.7 s of a 10M-dispatch file, before the read)."""
    path = _copy(relative, tmp_path)
    with sqlite3.connect(path) as db:
        table = source if relative == H200 else _guid_table(db, source)
        columns = ", ".join(f'"{r[1]}"' for r in db.execute(f'PRAGMA table_info("{table}")') if r[1] != "id")
        for _ in range(5):  # 32 times the real rows
            db.execute(f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM "{table}"')
        rows = db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    with sqlitefile.Reader(path, "the profile", "") as reader:
        reader.tables()  # the schema is read (in VM steps too) before counting
        # The ranges run on a connection of their own: this one runs only the bounds.
        reader.connection.set_progress_handler(count, 1)
        ranges = sqlitefile.read_ranges(reader, source, "", (), key=key, series=["start"], config=[], rowid=rowid, size=10)
        assert next(ranges).exact
        ranges.close()
    assert rows > 500 and steps[0] < 100


def test_an_end_before_its_start_sends_its_range_to_the_timestamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-range query checks the start's minimum, not the end's: an end below its
    start (both at or above zero here) shows as a negative difference, and its range
    reads the timestamps themselves, as a range with a negative timestamp does. The
    analysis is the one a frame per dispatch gives (the same negative-duration count)."""
    path = _copy(H200, tmp_path)
    _grow_nsys(path, 5)  # 108 dispatches
    with sqlite3.connect(path) as db:
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 7 WHERE rowid = 30")
        assert db.execute("SELECT min(start), min(\"end\") FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[1] >= 0
    with sqlitefile.Reader(path, "the profile", "") as reader:
        parts = list(sqlitefile.read_ranges(reader, "CUPTI_ACTIVITY_KIND_KERNEL", "", (), key='"demangledName"',
                                            series=[], config=['"gridX"'], rowid="rowid", size=20,
                                            spans={"duration": ('"end"', '"start"')}))
    assert [sorted(p.series) for p in parts] == [["duration"], ['"end"', '"start"'], *[["duration"]] * 4]
    assert all(p.exact for p in parts)
    assert int((parts[1].series['"end"'] - parts[1].series['"start"']).min()) == -7
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 20)
    grouped, framed = _analyses(path, monkeypatch)
    _assert_same_analysis(grouped, framed)
    assert [o.count for o in grouped.oddities if "end timestamp before begin" in o.what] == [1]
