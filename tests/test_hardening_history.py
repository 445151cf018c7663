"""Hostile history stores and results files (issue 16 section 2): a store that fails
costs a run neither its reports nor later runs; damaged or foreign stores are one-line
errors on every command; results files are validated before anything is stored.

The damaged stores are made here from a real store perfcheck wrote, the way they
turn up: a page overwritten (a disk or a copy gone wrong), a table rebuilt by another
tool without a column, text where a number belongs, a trigger added by someone else,
a run an older perfcheck stored with an impossible time.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from perfcheck.history import Result, RunRecord, open_store
from perfcheck.history import store as store_module
from tests.conftest import one_line_error

pytestmark = pytest.mark.usefixtures("local_run")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"
DAY = 86400.0
T0 = 1_767_225_600.0  # 2026-01-01 UTC
MACHINE = "mi250x_gfx90a_rocprofv3-1.0.0"


@pytest.fixture(autouse=True)
def _in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PERFCHECK_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)


def _store(path: Path, runs: int = 40, kernels: int = 20) -> Path:
    with open_store(path) as store:
        for i in range(runs):
            store.add(RunRecord(f"night-{i:02d}", T0 + i * DAY, commit=f"{i:02d}" + "f" * 38, branch="main"),
                      [Result(MACHINE, "nightly", f"k{k}", "duration", 1e-3 * (1 + k / 10), "s") for k in range(kernels)])
    with closing(sqlite3.connect(path)) as db, db:  # everything in the main file, as an archived store is
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _settled(path: Path) -> None:
    """Everything in the main file (no -wal), so its bytes say whether it was written."""
    try:
        with closing(sqlite3.connect(path)) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.DatabaseError:
        pass  # not a database at all


def _malformed(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("PRAGMA journal_mode = DELETE")
        page = int(db.execute("PRAGMA page_size").fetchone()[0])  # a new store's are 1 KB
    data = bytearray(path.read_bytes())
    for start in range(3 * page, len(data), page):  # the b-tree pages past the schema
        data[start + 8:start + 200] = b"\xff" * 192
    path.write_bytes(bytes(data))


def _without_column(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:  # another tool rebuilt the table and dropped a column
        db.execute("ALTER TABLE results DROP COLUMN spread")


def _text_in_real(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:  # SQLite's REAL columns take text
        db.execute("UPDATE results SET value = 'fast' WHERE series_id IN (SELECT series_id FROM series WHERE kernel = 'k3')")


def _text_time(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE runs SET time = 'yesterday' WHERE run_id = 'night-05'")


def _trigger(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TRIGGER spy AFTER INSERT ON runs BEGIN DELETE FROM results; END")


def _newer(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(f"PRAGMA user_version = {store_module.SCHEMA_VERSION + 1}")


def _foreign(path: Path) -> None:
    path.unlink()
    with closing(sqlite3.connect(path)) as db, db:  # a rocpd or rocprof database named by mistake
        db.execute("CREATE TABLE rocpd_kernel_dispatch (id INTEGER, start INTEGER)")


def _not_sqlite(path: Path) -> None:
    path.write_text("these are notes, not a database\n" * 200)


def _future(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:  # what perfcheck up to now stored from `"time": 1e12`
        db.execute("UPDATE runs SET time = 1e12 WHERE run_id = 'night-07'")


DAMAGE = {
    # SQLite says "database disk image is malformed" or, where the damage reaches a page of
    # the schema (with 1 KB pages it can spill past page 3), "malformed database schema"
    "malformed": (_malformed, "the history store is damaged ("),
    "missing-column": (_without_column, "lacks column 'spread'"),
    "text-in-real": (_text_in_real, "column 'value' holds 'fast'"),
    "text-time": (_text_time, "column 'time' holds 'yesterday'"),
    "trigger": (_trigger, "triggers perfcheck did not create (spy)"),
    "newer-schema": (_newer, "newer than this perfcheck"),
    "foreign": (_foreign, "not a perfcheck history store"),
    "not-sqlite": (_not_sqlite, "not a perfcheck history store"),
}
# Commands that never read the damaged part (list and prune read no values).
COMMANDS = {
    "list": ("history", "list"),
    "detect": ("history", "detect"),
    "report": ("history", "report", "--markdown", "digest.md", "--html", "site"),
    "export": ("history", "export", "--bencher", "bencher", "--openmetrics", "m.txt"),
    "prune": ("history", "prune", "--keep-days", "100000"),
}
READS = {"text-in-real": {"list", "prune"}, "text-time": {"prune"}}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_and_foreign_stores_are_one_line_errors_on_every_command(cli, tmp_path: Path, damage: str,
                                                                          command: str) -> None:  # noqa: ANN001
    path = _store(tmp_path / "h.sqlite", runs=12, kernels=6)
    make, what = DAMAGE[damage]
    make(path)
    _settled(path)
    before = path.read_bytes()
    result = cli(*COMMANDS[command], "--history", path)
    if command in READS.get(damage, ()):  # this command never reads the damaged part
        assert result.code in (0, 1), result.err
        return
    one_line_error(result, path, what)
    if damage != "malformed":
        assert path.read_bytes() == before  # refused before anything was written


# Run numbers another tool wrote into SQLite's INTEGER columns, which keep text, blobs and
# fractions as given: numpy read 4.5 as run 4, b"4" and "4_0" as runs 4 and 40 (a value
# joined to the wrong run, silently), and "x" was an internal error (exit 3).
_ONE_ROW = "run = 5 AND series_id = (SELECT min(series_id) FROM results)"
ID_DAMAGE = {
    "text-run": (f"UPDATE results SET run = 'x' WHERE {_ONE_ROW}", "results.run holds 'x' in 1 row(s)"),
    "fraction-run": (f"UPDATE results SET run = 4.5 WHERE {_ONE_ROW}", "results.run holds 4.5 in 1 row(s)"),
    "blob-run": (f"UPDATE results SET run = X'34' WHERE {_ONE_ROW}", "results.run holds b'4' in 1 row(s)"),
    "digits-run": (f"UPDATE results SET run = '4_0' WHERE {_ONE_ROW}", "results.run holds '4_0' in 1 row(s)"),
    # the runs table rebuilt by another tool without its key (the columns perfcheck reads are all there)
    "runs-rebuilt": ("CREATE TABLE runs_copy AS SELECT * FROM runs; DROP TABLE runs; "
                     "ALTER TABLE runs_copy RENAME TO runs; UPDATE runs SET run = 5.5 WHERE run_id = 'night-05'",
                     "runs.run holds 5.5 in 1 row(s), not a run number; the first at run id 'night-05'"),
}
ID_COMMANDS = {
    "detect": ("history", "detect"),
    "detect-relative": ("history", "detect", "--relative"),
    "report-markdown": ("history", "report", "--markdown", "digest.md"),
    "report-html": ("history", "report", "--html", "site"),
    "export-openmetrics": ("history", "export", "--openmetrics", "m.txt"),
    "export-bencher": ("history", "export", "--bencher", "bencher"),
    "list": ("history", "list"),  # reads no run numbers: the runs, as stored
}


@pytest.mark.parametrize("command", sorted(ID_COMMANDS))
@pytest.mark.parametrize("damage", sorted(ID_DAMAGE))
def test_a_run_number_that_is_not_an_integer_is_a_one_line_error(cli, tmp_path: Path, damage: str,
                                                                  command: str) -> None:  # noqa: ANN001
    path = _store(tmp_path / "h.sqlite", runs=12, kernels=6)
    sql, what = ID_DAMAGE[damage]
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(sql)
    _settled(path)
    before = path.read_bytes()
    result = cli(*ID_COMMANDS[command], "--history", path)
    if command == "list":
        assert result.code == 0, result.err
        assert len(cli("history", "list", "--history", path, "--json").json()["runs"]) == 12
    else:
        one_line_error(result, path, "the history store is damaged (", what, "restore it from a copy")
        assert not any((tmp_path / name).exists() for name in ("digest.md", "site", "m.txt", "bencher"))  # none written
    assert path.read_bytes() == before


@pytest.mark.parametrize("command", sorted(set(ID_COMMANDS) - {"list"}))
@pytest.mark.parametrize("damage", ["text", "blob"])
def test_a_value_of_no_series_is_a_one_line_error(cli, tmp_path: Path, damage: str, command: str) -> None:  # noqa: ANN001
    # text or a blob in results.series_id matches no series: every read left that value
    # out without a word (the series showed a missing night); found by one step to the
    # primary key's end, where SQLite sorts them after every number
    path = _store(tmp_path / "h.sqlite", runs=12, kernels=6)
    bad = {"text": "'k0'", "blob": "X'30'"}[damage]
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(f"UPDATE results SET series_id = {bad} WHERE {_ONE_ROW}")
    shown = {"text": "'k0'", "blob": "b'0'"}[damage]
    one_line_error(cli(*ID_COMMANDS[command], "--history", path), path,
                   f"the history store is damaged (results.series_id holds {shown}, not a series number")


@pytest.mark.parametrize("damage", sorted(ID_DAMAGE))
def test_the_gate_says_which_run_number_is_not_an_integer(cli, tmp_path: Path, damage: str) -> None:  # noqa: ANN001
    # check --history: the gate's lean read of the judged series (history.latest) says
    # what the full read says (before: "a value or a run's time is not a number", or
    # the run 4.5 judged as run 4)
    store = tmp_path / "h.sqlite"
    for i in range(3):
        first = _check(cli, store, f"night{i}")
        assert first.code in (0, 1), first.err
    sql, what = ID_DAMAGE[damage]
    latest = "run = (SELECT max(run) FROM results)"  # every value of the latest run: the judged ones too
    with closing(sqlite3.connect(store)) as db, db:
        db.executescript(sql.replace(_ONE_ROW, latest).replace("'night-05'", "(SELECT max(run_id) FROM runs)"))
    result = _check(cli, store, "run")
    assert result.code == 2, (result.out, result.err)
    last = one_line_error_last(result)
    assert str(store) in last and "the history store is damaged (" in last, last
    assert what.split(" in 1 row")[0] in last, last


@pytest.mark.parametrize("damage", sorted(d for d in DAMAGE if d not in ("text-in-real", "text-time")))
def test_add_into_a_damaged_or_foreign_store_is_a_one_line_error(cli, tmp_path: Path, damage: str) -> None:  # noqa: ANN001
    path = _store(tmp_path / "h.sqlite", runs=3, kernels=2)
    DAMAGE[damage][0](path)
    _settled(path)
    before = path.read_bytes()
    results = _write(tmp_path, _results(tmp_path), "r.json")
    one_line_error(cli("history", "add", results, "--history", path), path, DAMAGE[damage][1])
    if damage != "malformed":
        assert path.read_bytes() == before


def test_reading_commands_never_turn_an_empty_file_into_a_store(cli, tmp_path: Path) -> None:  # noqa: ANN001
    empty = tmp_path / "h.sqlite"
    empty.touch()
    for command in COMMANDS.values():
        one_line_error(cli(*command, "--history", empty), empty, "is empty, not a history store")
        assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.sqlite"]  # no -wal, -shm, reports


def test_a_run_stored_with_an_impossible_time_is_named_and_prune_removes_it(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = _store(tmp_path / "h.sqlite", runs=10, kernels=2)
    _future(path)
    one_line_error(cli("history", "list", "--history", path), path, "'night-07'", "outside 1970-2200", "prune")
    one_line_error(cli("history", "detect", "--history", path), path, "'night-07'")
    assert "removed 1 run" in cli("history", "prune", "--history", path, "--keep-days", "100000").out
    listing = cli("history", "list", "--history", path, "--json").json()["runs"]
    assert len(listing) == 9 and "night-07" not in {r["run_id"] for r in listing}


def _check(cli, store: Path, tag: str):  # noqa: ANN001, ANN202
    return cli("check", "--config", EXAMPLE / "perfcheck.toml", "--suite", "after", "--baseline-dir", "b",
               "--junit", f"{tag}.xml", "--markdown", f"{tag}.md", "--json", f"{tag}.json", "--roofline", f"{tag}-plots",
               "--history", store)


@pytest.mark.parametrize("damage", ["directory", "malformed", "newer-schema", "foreign", "not-sqlite", "trigger",
                                    "missing-column"])
def test_check_writes_every_report_before_a_failing_store(cli, tmp_path: Path, damage: str) -> None:  # noqa: ANN001
    store = tmp_path / "h.sqlite"
    if damage == "directory":
        store.mkdir()
    else:
        _store(store, runs=6, kernels=2)
        DAMAGE[damage][0](store)
    result = _check(cli, store, "run")
    assert result.code == 2, (result.out, result.err)
    for report in ("run.xml", "run.md", "run.json"):
        assert (tmp_path / report).stat().st_size > 0, report
    assert list((tmp_path / "run-plots").glob("*.png"))
    last = result.err.strip().splitlines()[-1]
    assert last.startswith("perfcheck: error: ") and str(store) in last and "Traceback" not in result.err
    assert last.endswith("this run was not added to the history; the results file run.json can be added later "
                         "with `perfcheck history add`"), last
    assert DAMAGE[damage][1] in last if damage in DAMAGE else "is a directory" in last


def test_check_with_an_unwritable_store_says_so_after_the_reports(cli, tmp_path: Path) -> None:  # noqa: ANN001
    store = _store(tmp_path / "h.sqlite", runs=2, kernels=1)
    with closing(sqlite3.connect(store)) as db, db:  # a read-only store: the gate reads it, the append cannot write it
        db.execute("PRAGMA journal_mode = DELETE")
    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.move(store, folder / "h.sqlite")
    with _read_only(folder):
        result = _check(cli, folder / "h.sqlite", "run")
    assert result.code == 2 and (tmp_path / "run.json").stat().st_size > 0 and (tmp_path / "run.xml").exists()
    last = one_line_error_last(result)
    assert "cannot be written" in last or "cannot write" in last or "readonly" in last, last
    assert "run.json can be added later with `perfcheck history add`" in last


def one_line_error_last(result) -> str:  # noqa: ANN001
    last = result.err.strip().splitlines()[-1]
    assert last.startswith("perfcheck: error: ") and "Traceback" not in result.err, result.err
    return last


class _read_only:
    """``folder`` as a read-only file system (a bind mount remounted ro): root can
    write through permission bits, not through a read-only mount. Skips where
    mounting is not allowed (not root, no mount namespace)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __enter__(self) -> Path:
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("a read-only mount needs root")
        done = subprocess.run(["mount", "--bind", str(self.folder), str(self.folder)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"mount not permitted: {done.stderr.decode(errors='replace').strip()}")
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(self.folder)], capture_output=True)
        if ro.returncode != 0:
            subprocess.run(["umount", str(self.folder)], check=False)
            pytest.skip("remounting read-only not permitted")
        return self.folder

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["umount", str(self.folder)], check=True)


def test_a_wal_store_on_a_read_only_file_system_can_still_be_read(cli, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "archive"
    folder.mkdir()
    store = _store(folder / "h.sqlite", runs=8, kernels=2)  # WAL mode, no -wal/-shm left beside it
    assert not (folder / "h.sqlite-shm").exists()
    with _read_only(folder):
        listing = cli("history", "list", "--history", store, "--json")
        assert listing.code == 0, listing.err
        assert len(listing.json()["runs"]) == 8
        assert cli("history", "detect", "--history", store).code == 0
        report = cli("history", "report", "--history", store, "--markdown", tmp_path / "digest.md")
        assert report.code == 0, report.err
        one_line_error(cli("history", "prune", "--history", store, "--keep-days", "1"), store, "cannot be written")
    assert sorted(p.name for p in folder.iterdir()) == ["h.sqlite"]


# --- results files ------------------------------------------------------------------------------


def _results(tmp_path: Path, name: str = "r.json", **run: object) -> dict:
    doc = {
        "format_version": 1,
        "run": {"id": "night-1", "time": T0, "commit": "a" * 40, "branch": "main", **run},
        "suites": {"stencil": {
            "fingerprint": {"device": "mi250x", "arch": "gfx90a", "tool": "rocprofv3", "tool_version": "1.0.0"},
            "checks": [{"kernel": "k1", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s",
                        "outcome": "passed", "relation": "<=", "reference": 0.0025}],
            "measurements": {"k1": {"duration": 0.002, "hbm_bytes": 4.0e9}},
            "samples": {"k1": {"n": 100, "median": 0.002, "spread": 0.01}},
        }},
    }
    return doc


def _write(tmp_path: Path, doc: dict | str, name: str = "r.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _deep(depth: int) -> str:
    return '{"format_version": 1, "suites": {"s": ' + "[" * depth + "]" * depth + "}}"


def _edit(**changes: object):  # noqa: ANN202
    def edit(doc: dict) -> dict:
        for where, value in changes.items():
            *keys, last = where.split("__")
            target = doc
            for key in keys:
                target = target[key]
            if value is KeyError:
                del target[last]
            else:
                target[last] = value
        return doc
    return edit


HOSTILE_RESULTS = {
    # what the file holds: (how it is made, what the one-line error names)
    "time-1e12": (_edit(run__time=1e12), ("run.time", "outside 1970-2200")),
    "time-negative": (_edit(run__time=-86400.0), ("run.time", "outside 1970-2200")),
    "time-1e400": ('{"run": {"id": "x", "time": 1e400}, "suites": {}}', ("run.time",)),
    "nan-token": ('{"run": {"id": "x", "time": NaN}, "suites": {}}', ("not strict JSON", "NaN")),
    "400-digit-value": ('{"suites": {"s": {"fingerprint": {}, "measurements": {"k": {"duration": ' + "9" * 400 + "}}}}}",
                        ("suites.s.measurements.k.duration", "400 digits")),
    "n-2^63": (_edit(suites__stencil__samples__k1__n=2**63), ("suites.stencil.samples.k1.n", "64 bits")),
    "export-overflow": (_edit(suites__stencil__measurements__k1__duration=1e300),
                        ("suites.stencil.measurements.k1.duration", "beyond any measured quantity")),
    "lone-surrogate": ('{"suites": {"s": {"fingerprint": {}, "measurements": {"k\\ud800x": {"duration": 1}}}}}',
                       ("suites.s.measurements", "lone surrogate")),
    "surrogate-commit": ('{"run": {"id": "x", "time": 1767225600, "commit": "\\udfff"}, "suites": {}}', ("run.commit",)),
    "nested-100000": (_deep(100_000), ("deeper than Python can read",)),
    "no-fingerprint": (_edit(suites__stencil__fingerprint=KeyError), ("suites.stencil.fingerprint", "missing")),
    "fingerprint-string": (_edit(suites__stencil__fingerprint="mi250x"),
                           ("suites.stencil.fingerprint", "must be an object")),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_RESULTS))
def test_hostile_results_files_are_refused_before_anything_is_stored(cli, tmp_path: Path, case: str) -> None:  # noqa: ANN001
    make, fragments = HOSTILE_RESULTS[case]
    bad = _write(tmp_path, make if isinstance(make, str) else make(_results(tmp_path)), "bad.json")
    good = _write(tmp_path, _results(tmp_path), "good.json")
    result = cli("history", "add", good, bad, "--history", "h.sqlite")
    one_line_error(result, bad, *fragments, "none of the 2 files was imported")
    assert not (tmp_path / "h.sqlite").exists()  # all or none: the good file waits for the bad one
    assert cli("history", "add", good, "--history", "h.sqlite").code == 0


@pytest.mark.parametrize("layout", [{}, {"indent": 2}, {"separators": (",", ":")}, {"indent": "\t"}])
def test_the_walk_is_skipped_only_where_the_bytes_cannot_hold_what_it_refuses(tmp_path: Path, layout: dict) -> None:
    # read_results walks every item of a results file only when its bytes could hold a
    # lone surrogate, an integer past 64 bits or a magnitude past 1e250: each of those,
    # however json.dumps lays the file out, is seen (and refused); a plain file is not walked.
    from perfcheck.errors import InputError
    from perfcheck.history.runs import _maybe_refused, read_results

    hostile = {"int-2^63": 2**63, "int-below": -(2**63) - 1, "float-1.1e250": 1.1e250, "float-neg": -3e251,
               "float-1e300": 1e300, "int-300-digits": 10**300, "surrogate": "x\ud800", "low-surrogate": "\udfff"}
    for name, value in hostile.items():
        for where in ("measurements", "key"):
            doc = _results(tmp_path)
            if where == "key" and isinstance(value, str):
                doc["suites"]["stencil"]["measurements"][value] = {"duration": 0.002}
            else:
                doc["suites"]["stencil"]["measurements"]["k1"]["duration"] = value
            raw = json.dumps(doc, **layout).encode()
            assert _maybe_refused(raw), (name, where)
            path = tmp_path / "hostile.json"
            path.write_bytes(raw)
            with pytest.raises(InputError):
                read_results(path)
    plain = _results(tmp_path)
    plain["suites"]["stencil"]["measurements"]["k1"].update(calls=123456789012345678, tiny=1.5e-300, big=9.9e99)
    plain["suites"]["stencil"]["fingerprint"]["serial"] = "7" * 200_000 + "e+1000"  # digits in a string: no number
    assert not _maybe_refused(json.dumps(plain, **layout).encode())


def test_a_reused_run_id_with_other_values_is_an_error_not_already_stored(cli, tmp_path: Path) -> None:  # noqa: ANN001
    first = _write(tmp_path, _results(tmp_path), "first.json")
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(first, copy / "first.json")  # the same file from elsewhere: the same run
    other = _results(tmp_path)
    other["suites"]["stencil"]["measurements"]["k1"]["duration"] = 0.003
    second = _write(tmp_path, other, "second.json")
    assert cli("history", "add", first, "--history", "h.sqlite").code == 0
    assert "already stored" in cli("history", "add", copy / "first.json", "--history", "h.sqlite").out
    result = cli("history", "add", second, "--history", "h.sqlite")
    one_line_error(result, "h.sqlite", "'night-1' is already stored with other values")
    with open_store(tmp_path / "h.sqlite", create=False) as store:
        assert store.series(metric="duration")["value"].tolist() == [0.002]


def test_add_names_the_files_imported_before_a_store_failure(cli, tmp_path: Path) -> None:  # noqa: ANN001
    one = _write(tmp_path, _results(tmp_path), "one.json")
    clash = _results(tmp_path)
    clash["suites"]["stencil"]["measurements"]["k1"]["duration"] = 0.004
    two = _write(tmp_path, clash, "two.json")
    result = cli("history", "add", one, two, "--history", "h.sqlite")
    assert result.out.strip() == f"{one}: added run night-1 (2 values)"
    one_line_error(result, two, "the 1 file(s) listed above were imported")


def test_bencher_export_gives_distinct_run_ids_distinct_files(cli, tmp_path: Path) -> None:  # noqa: ANN001
    ids = ["night/1", "night 1", "night:1", "night-1"]
    with open_store(tmp_path / "h.sqlite") as store:
        for i, run_id in enumerate(ids):
            store.add(RunRecord(run_id, T0 + i * DAY), [Result(MACHINE, "s", "k", "duration", 1e-3 * (i + 1), "s")])
    assert cli("history", "export", "--history", "h.sqlite", "--bencher", "out").code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [m["run_id"] for m in manifest] == ids
    files = [m["file"] for m in manifest]
    assert len(set(files)) == 4 and files[3] == f"night-1--{MACHINE}.json"
    values = [json.loads((tmp_path / "out" / f).read_text())["s::k"]["latency"]["value"] for f in files]
    assert values == pytest.approx([1e6, 2e6, 3e6, 4e6])


def test_pytest_perf_history_writes_the_junit_before_a_failing_store(tmp_path: Path) -> None:
    import sys

    (tmp_path / "pyproject.toml").write_text(
        f'[tool.perfcheck]\ndevice = "mi100"\nbaseline_dir = "b"\n[tool.perfcheck.suites.after]\n'
        f'profiles = ["{EXAMPLE / "results-after.csv"}"]\n[tool.perfcheck.suites.after.expect]\n'
        '"*Clover*FBCGPU*" = ["duration <= baseline + 5%"]\n')
    store = tmp_path / "h.sqlite"
    store.mkdir()  # not a store at all
    done = subprocess.run([sys.executable, "-m", "pytest", "--perf", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "--perf-history", "h.sqlite", "--perf-junit", "perf.xml", "--perf-json", "perf.json",
                           str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert (tmp_path / "perf.xml").stat().st_size > 0 and (tmp_path / "perf.json").stat().st_size > 0
    assert f"perfcheck: error: {store}: is a directory, not a history store" in done.stdout
