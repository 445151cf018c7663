"""`history add`'s write path: a results file read straight into the rows the store
writes (``ImportedRun.values``), and both stores writing them (issue 22)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from perfcheck.history import Machine, Result, RunRecord, open_store, read_results
from perfcheck.history.store import ValueRows, value_rows

T0 = 1_767_225_600.0  # 2026-01-01 UTC
FAST, SLOW = "mi300x_gfx942_rocprofv3", "mi100_gfx908_rocprof"


def _document() -> dict:
    """Two suites on two machines; checks that judge, repeat and miss; samples; odd values."""
    return {"format_version": 1, "run": {"id": "r-1", "time": T0, "commit": "abc", "branch": "main"}, "suites": {
        "zeta": {
            "fingerprint": {"device": "mi300x", "arch": "gfx942", "tool": "rocprofv3", "tool_version": "unknown"},
            "machine": FAST,
            "checks": [
                {"kernel": "k2", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s",
                 "outcome": "passed", "relation": "<=", "reference": 0.003},
                {"kernel": "k2", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s",
                 "outcome": "failed", "relation": "<=", "reference": 0.0025},  # the tighter limit, the worse outcome
                {"kernel": "k2", "pattern": "k*", "metric": "duration", "observed": 0.002, "unit": "s",
                 "outcome": "passed", "relation": ">=", "reference": 0.001},
                {"kernel": "k2", "pattern": "k*", "metric": "occupancy_pct", "observed": 50.0, "unit": "",
                 "outcome": "passed", "relation": "0..100", "reference": 0.0},  # two-sided: no budget
                {"kernel": "k9", "pattern": "k9", "metric": "checked_only", "observed": 7.0, "unit": "count",
                 "outcome": "recorded"},  # judged, not in the measurements table
                {"kernel": "gone*", "pattern": "gone*", "metric": "duration", "observed": None, "outcome": "error"}],
            "measurements": {"k2": {"duration": 0.0021, "hbm_bytes": 4096, "vgpr": "text", "sgpr": None},
                             "k1": {"duration": 0.001, "hbm_bw": 1.5e12}},
            "samples": {"k2": {"n": 50, "median": 0.002, "spread": 0.01}, "k1": {"n": True, "median": "x"},
                        "absent": {"n": 3, "median": 1.0, "spread": 0.0}}},
        "alpha": {
            "fingerprint": {"device": "mi100", "arch": "gfx908", "tool": "rocprof", "tool_version": "unknown"},
            "machine": SLOW,
            "measurements": {"k1": {"duration": 0.004}}},
        "empty": {"fingerprint": {"device": "mi100", "arch": "gfx908", "tool": "rocprof", "tool_version": "unknown"},
                  "machine": SLOW, "measurements": {}}}}


# what the store keeps of each: value, unit, n, median, spread, outcome, low, high
EXPECTED = {
    (FAST, "zeta"): {
        ("k2", "duration"): (0.0021, "s", 50, 0.002, 0.01, "failed", 0.001, 0.0025),
        ("k2", "occupancy_pct"): (50.0, "%", None, None, None, "passed", None, None),  # the unit by its name
        ("k9", "checked_only"): (7.0, "count", None, None, None, "recorded", None, None),
        ("k2", "hbm_bytes"): (4096.0, "B", None, None, None, None, None, None),
        ("k2", "vgpr"): (None, "count", None, None, None, None, None, None),
        ("k2", "sgpr"): (None, "count", None, None, None, None, None, None),
        ("k1", "duration"): (0.001, "s", None, None, None, None, None, None),  # samples of no count or median
        ("k1", "hbm_bw"): (1.5e12, "B/s", None, None, None, None, None, None)},
    (SLOW, "alpha"): {("k1", "duration"): (0.004, "s", None, None, None, None, None, None)}}


def _file(tmp_path: Path, doc: dict | None = None) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc or _document()))
    return path


def test_a_results_file_reads_straight_into_the_stored_rows(tmp_path: Path) -> None:
    imported = read_results(_file(tmp_path))
    assert imported.values == ValueRows(EXPECTED) and len(imported.values) == 9
    # a suite without values names no group (the run's suites and machines are those with values)
    assert [list(group) for group in imported.values.groups.values()] == [list(g) for g in EXPECTED.values()]
    # the same rows as the Results made of them, and the same as before: the Results' rows
    assert value_rows(imported.results) == imported.values
    assert imported.results[0] == Result(FAST, "zeta", "k2", "duration", 0.0021, "s", 50, 0.002, 0.01, "failed",
                                         0.001, 0.0025)


def test_rows_of_results_keep_the_last_of_a_key_given_twice() -> None:
    rows = value_rows([Result("m", "s", "k", "d", 1.0), Result("m", "t", "k", "d", 2.0),
                       Result("m", "s", "k", "d", float("inf"), "s", 3, float("nan"))])
    assert rows.groups == {("m", "s"): {("k", "d"): (None, "s", 3, None, None, None, None, None)},
                           ("m", "t"): {("k", "d"): (2.0, "", None, None, None, None, None, None)}}
    assert len(rows) == 2 and value_rows(rows) is rows


def _stored(store) -> list[tuple]:  # noqa: ANN001
    frame = store.series()
    columns = ["machine", "suite", "kernel", "metric", "value", "unit", "n", "median", "spread", "outcome", "low", "high"]
    # names are unique, so sorting never compares a value with a missing one
    return sorted(tuple(None if pd.isna(v) else v for v in row) for row in frame[columns].astype(object).itertuples(index=False))


def test_add_of_the_values_stores_what_add_of_the_results_does(store_at, tmp_path: Path) -> None:  # noqa: ANN001
    imported = read_results(_file(tmp_path))
    with open_store(store_at("values")) as by_values, open_store(store_at("results")) as by_results:
        done = by_values.add(imported.run, imported.values, imported.machines)
        assert (done.added, done.values) == (True, 9)
        assert by_results.add(imported.run, imported.results, imported.machines).values == 9
        assert _stored(by_values) == _stored(by_results) == sorted(
            (*group, *key, *columns) for group, rows in EXPECTED.items() for key, columns in rows.items())
        runs = by_values.runs()
        assert (runs["machines"].tolist(), runs["suites"].tolist()) == ([f"{SLOW},{FAST}"], ["alpha,zeta"])
        # the same file again adds nothing; the same id with other values is refused
        assert not by_values.add(imported.run, imported.values, imported.machines).added
        other = ValueRows({(FAST, "zeta"): {("k1", "duration"): (1.0, "s", None, None, None, None, None, None)}})
        with pytest.raises(Exception, match="already stored with other values"):
            by_values.add(imported.run, other, imported.machines)


def test_new_series_are_numbered_in_key_order_and_known_ones_keep_their_ids(store_at) -> None:  # noqa: ANN001
    def run(i: int) -> RunRecord:
        return RunRecord(f"r-{i}", T0 + i * 86400.0)

    row = (1.0, "s", None, None, None, None, None, None)
    with open_store(store_at()) as store:
        store.add(run(0), ValueRows({("m2", "s"): {("b", "d"): row, ("a", "d"): row},
                                     ("m1", "s"): {("z", "d"): row}}), [Machine("m1"), Machine("m2")])
        # a later run: one known series, new ones in two groups given out of order
        store.add(run(1), ValueRows({("m2", "s"): {("c", "d"): row, ("a", "d"): (2.0, *row[1:])},
                                     ("m1", "s"): {("y", "d"): row}}), [])
        numbered = store._rows("SELECT machine, kernel FROM series ORDER BY series_id")
        a = store.series(machine="m2", kernel="a")["value"].tolist()
    assert [tuple(name) for name in numbered] == [("m1", "z"), ("m2", "a"), ("m2", "b"), ("m1", "y"), ("m2", "c")]
    assert a == [1.0, 2.0]  # the known series' values, under its one id


def test_check_history_appends_rows_made_without_results(tmp_path: Path) -> None:
    """``results_of`` (the run ``check --history`` appends) gives the rows of the file it writes."""
    from perfcheck.history.runs import results_of

    doc = _document()
    values, machines = results_of(doc, ["zeta", "alpha", "empty"])
    assert values == ValueRows(EXPECTED) and [m.machine for m in machines] == [FAST, SLOW]
    with open_store(tmp_path / "h.sqlite") as store:
        assert store.add(RunRecord("r-1", T0), values, machines).values == 9
    with sqlite3.connect(tmp_path / "h.sqlite") as db:
        assert db.execute("SELECT count(*) FROM series").fetchone() == (9,)


def test_a_suite_s_ids_are_read_from_the_table_or_the_index_alike(tmp_path: Path) -> None:
    """Most of the store's series: the table is scanned (its long names overflow the
    names' index on 1 KB pages); a few: the index. Both give each value its series."""
    kernel = "void ck::kernel_gemm<" + "ck::half_t, " * 30 + "{}>(ck::Argument)"  # a name longer than an index entry
    row = (1.0, "s", None, None, None, None, None, None)
    big = {(kernel.format(i), metric): row for i in range(40) for metric in ("duration", "vgpr")}
    small = {(kernel.format(i), "duration"): row for i in range(3)}
    statements: list[str] = []
    with open_store(tmp_path / "h.sqlite") as store:
        store._db.set_trace_callback(statements.append)
        for night in range(2):
            with_other = {key: (float(night), *columns[1:]) for key, columns in big.items()}
            store.add(RunRecord(f"r-{night}", T0 + night), ValueRows({("m", "big"): with_other, ("m", "small"): small}))
        scans = [s for s in statements if s.startswith("SELECT kernel, metric, series_id")]
        # each night the big suite is most of the series, the small one is not; the first
        # night reads each again after making its series
        assert ["NOT INDEXED" in s for s in scans] == [True, True, False, False, True, False]
        frame = store.series()
    assert len(frame) == 2 * (80 + 3)
    by_name = frame[frame["suite"] == "big"].groupby(["kernel", "metric"])["value"].agg(list)
    assert set(map(tuple, by_name)) == {(0.0, 1.0)} and len(by_name) == 80
