"""``perfcheck.history.scan``: detect over a store part by part gives the findings that
detect + findings over the whole ``series()`` frame give (issue 22), on both backends."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfcheck.history import Machine, Result, RunRecord, detect, open_store, recent_regressions
from perfcheck.history import lifecycle
from perfcheck.history.findings import findings, with_states
from perfcheck.history.scan import scan

T0 = 1_767_225_600.0
DAY = 86400.0
OPTIONS = {"p": 0.001, "min_after": 2, "window": 30}


def _fill(store, runs: int = 30, kernels: int = 12, tied: bool = False) -> None:  # noqa: ANN001
    """``tied``: runs 10 and 11 at the same time, and the first kernel's duration without run 10,
    so that the store orders those two runs otherwise than a part of the other kernels does."""
    rng = np.random.default_rng(7)
    for i in range(runs):
        wide = 1.1 if i >= 10 else 1.0  # every kernel at run 10: the whole run moved
        rows = []
        for k in range(kernels):
            step = 1.3 if k in (3, 8) and i >= 20 else 1.0  # two kernels regress at run 20
            base = 1e-3 * (1 + k) * wide * step * float(np.exp(rng.normal(0, 0.01)))
            if not (tied and k == 0 and i == 10):
                rows.append(Result("m1", "nightly", f"kern<{k:02d}>", "duration", base, "s", n=10, median=base,
                                   spread=0.01, outcome="passed" if k % 2 else None, high=1.3e-3 * (1 + k)))
            rows += [Result("m1", "nightly", f"kern<{k:02d}>", "hbm_bw", 1e9 / base, "B/s"),
                     Result("m1", "nightly", f"kern<{k:02d}>", "occupancy", 0.5 * float(np.exp(rng.normal(0, 0.01))))]
            if k < 4:  # a second suite on another machine, a few kernels
                rows.append(Result("m2", "other", f"kern<{k:02d}>", "duration", base * 2, "s"))
        store.add(RunRecord(f"run-{i:03d}", T0 + (10 if tied and i == 11 else i) * DAY, commit=f"{i:040x}"), rows,
                  [Machine("m1", {"arch": "gfx90a"}), Machine("m2", {"arch": "gfx908"})])


def _whole(store, relative: bool, **where):  # noqa: ANN001, ANN202
    """What history detect computed before issue 22: everything over one frame."""
    frame = store.series(**where)
    points = detect(frame, relative=relative, **OPTIONS)
    recent = recent_regressions(points, frame, last=12)
    states = {s.point: s for s in lifecycle.states(points, frame, (), last=12)}  # as history detect judges them
    return points, with_states(findings(points, frame, recent=recent, select="all",
                                        arches={"m1": "gfx90a", "m2": "gfx908"}), states)


@pytest.mark.parametrize("relative", [False, True])
def test_scan_in_small_parts_finds_what_one_frame_finds(store_at, relative: bool) -> None:  # noqa: ANN001
    with open_store(store_at()) as store:
        _fill(store)
        points, expected = _whole(store, relative)
        for rows in (90, 10**6):  # 90 values: one kernel a part (3 series x 30 runs); all at once
            done = scan(store, relative=relative, last=12, select="all", arches={"m1": "gfx90a", "m2": "gfx908"},
                        rows=rows, **OPTIONS)
            assert done.points == points
            assert [json.dumps(f.as_dict(), sort_keys=True) for f in done.found] == \
                [json.dumps(f.as_dict(), sort_keys=True) for f in expected]
            assert done.series == 12 * 3 + 4
    assert any(f.new and f.regression for f in expected) and len(expected) >= 3
    assert any(f.diagnosis is not None and "whole run" in f.diagnosis.text() for f in expected) or relative


@pytest.mark.parametrize("relative", [False, True])
def test_scan_with_runs_of_one_time_and_filters_finds_what_one_frame_finds(store_at, relative: bool) -> None:  # noqa: ANN001
    # runs of one time are ordered by where the store first sees them: a part of one kernel
    # orders them otherwise (its kernel is read again), and --relative reads slices
    with open_store(store_at()) as store:
        _fill(store, tied=True)
        arches = {"m1": "gfx90a", "m2": "gfx908"}
        for where in ({}, {"machine": "m1", "kernel": [f"kern<{k:02d}>" for k in range(0, 12, 2)],
                           "since": T0 + 3 * DAY}, {"metric": ["duration", "hbm_bw"], "suite": "nightly"}):
            points, expected = _whole(store, relative, **where)
            for rows in (90, 10**6):
                done = scan(store, relative=relative, last=12, select="all", arches=arches, rows=rows, **where,
                            **OPTIONS)
                assert done.points == points
                assert [json.dumps(f.as_dict(), sort_keys=True) for f in done.found] == \
                    [json.dumps(f.as_dict(), sort_keys=True) for f in expected]
            assert len(expected) >= 3


def test_scan_keeps_the_filters(store_at) -> None:  # noqa: ANN001
    with open_store(store_at()) as store:
        _fill(store)
        where = {"machine": "m1", "kernel": ["kern<03>", "kern<05>"], "since": T0 + 5 * DAY}
        _, expected = _whole(store, False, **where)
        done = scan(store, last=12, select="all", arches={"m1": "gfx90a"}, rows=50, **where, **OPTIONS)
        assert [f.as_dict() for f in done.found] == [f.as_dict() for f in expected] and done.series == 6


@pytest.mark.parametrize("timestamps", ["s", "ms"])
def test_the_text_export_of_parts_is_the_export_of_the_whole(store_at, tmp_path, timestamps: str) -> None:  # noqa: ANN001
    from perfcheck.history.export import timestamped_metrics, write_timestamped_metrics

    with open_store(store_at()) as store:
        _fill(store, runs=6)
        store.add(RunRecord("empty", T0 - DAY), [])  # a run without values is not listed
        whole = timestamped_metrics(store.series(), timestamps=timestamps)
        parts = list(store.batches(rows=20))
        written = write_timestamped_metrics(iter(parts), tmp_path / "om.txt", timestamps=timestamps)
        nothing = timestamped_metrics(store.series(kernel="absent"), timestamps=timestamps)
    assert len(parts) > 5 and written.read_text(encoding="utf-8") == whole
    assert whole.count("perfcheck_run_info{") == 6 and whole.count("# TYPE ") == 4
    assert nothing == ("# EOF\n" if timestamps == "s" else "\n")


def test_write_atomic_takes_pieces(tmp_path) -> None:  # noqa: ANN001
    from perfcheck.atomicfile import write_atomic

    path = write_atomic(tmp_path / "a.txt", (piece for piece in ["a\n", b"b\n", "é\n"]))
    assert path.read_bytes() == "a\nb\né\n".encode()


@pytest.mark.parametrize("last", [None, 12])
def test_the_digest_of_parts_is_the_digest_of_the_whole_view(store_at, last) -> None:  # noqa: ANN001
    from perfcheck.history.dashboard import history_view_of, markdown_digest
    from perfcheck.history.scan import digest

    with open_store(store_at()) as store:
        _fill(store)
        frame = store.series(last=last)  # what load_view does: the whole selection at once
        view = history_view_of(frame, arches={"m1": "gfx90a", "m2": "gfx908"}, title="nightly")
        whole = markdown_digest(view, link="https://ci.example/report")
        for rows in (90, 10**6):
            assert digest(store, last=last, title="nightly", link="https://ci.example/report", rows=rows) == whole
    assert "### Outside budget" in whole and "kern<03>" in whole
    assert "### Open regressions" in whole or last is not None


def _facts_equal(got, expected, exact: bool = True) -> None:  # noqa: ANN001
    """``exact=False``: the name columns' dtypes may differ (text as objects or str: a
    merge of the parts' Categoricals gives either), not their values."""
    import pandas as pd

    for name in ("open", "latest"):
        pd.testing.assert_frame_equal(getattr(got, name).reset_index(drop=True),
                                      getattr(expected, name).reset_index(drop=True), check_dtype=exact)
    assert got.units == expected.units and got.runs == expected.runs


@pytest.mark.parametrize("columns", [None, "digested"])
def test_the_newest_rows_of_parts_give_the_facts_of_their_views_made_ready(store_at, columns) -> None:  # noqa: ANN001
    """``scan.Newest`` (the newest row and headline flag of each series from a part's
    index, only those rows normalised) gives the facts ``prepare`` gives of the whole
    part, and of the parts together their ``joined`` facts: parts as the store gives them,
    and frames in another order, without an outcome, with nothing checked; a frame with a
    name or the run ids missing is left to ``prepare``."""
    from perfcheck.history.dashboard import DigestFacts, history_view, prepare
    from perfcheck.history.scan import DIGESTED, Newest, ReportPass

    def expected(part, records):  # noqa: ANN001, ANN202
        return DigestFacts.of_prepared(prepare(history_view(part, records)))

    def got(part, records, index=None):  # noqa: ANN001, ANN202
        return Newest.facts([Newest.of(part, records, index)])

    with open_store(store_at()) as store:
        _fill(store, tied=True)
        report = ReportPass(store, where={}, last=None, rows=90, columns=DIGESTED if columns else None)
        pieces, each = [], []
        for n, (part, points, index) in enumerate(report.parts()):
            records = report.records(points)
            pieces.append(Newest.of(part, records, index))
            each.append(expected(part, records))
            _facts_equal(got(part, records, index), each[-1])
            if n % 3:
                continue  # the variants of every third part: the same code, a third of the time
            # the same rows in another order: names that come back, each series newest first
            # (a tie of times: runs 10 and 11 share one)
            for turned in (part.iloc[::-1].reset_index(drop=True),
                           part.sample(frac=1.0, random_state=n).reset_index(drop=True)):
                _facts_equal(got(turned, records), expected(turned, records))
            bare = part.drop(columns=["outcome"])
            _facts_equal(got(bare, records), expected(bare, records))
            unchecked = part.assign(outcome=None, metric=part["metric"].astype(str).replace("duration", "time"))
            renamed = [{**r, "metric": "time" if r["metric"] == "duration" else r["metric"]} for r in records]
            _facts_equal(got(unchecked, renamed), expected(unchecked, renamed))
            unnamed = part.assign(kernel=part["kernel"].astype(object).where(np.arange(len(part)) % 7 > 0))
            assert Newest.of(unnamed, records) is None and Newest.of(part.assign(run_id=""), records) is None
        _facts_equal(Newest.facts(pieces), DigestFacts.joined(each), exact=False)
    assert len(pieces) > 5 and sum(bool(p.records) for p in pieces) >= 2
    assert any(len(f.open) for f in each) and (columns or any(f.latest["outside"].any() for f in each))


@pytest.mark.parametrize("last", [None, 5])
def test_the_budgets_of_the_newest_rows_are_those_stored(store_at, monkeypatch, last) -> None:  # noqa: ANN001
    """``ReportPass.budgets``: the low and high of each series' newest row, read by those
    rows' runs (a run id or a few at a time), are the ones a read of every column gives,
    where series end at different runs, under filters; NaN where none is stored."""
    import pandas as pd

    from perfcheck.history import scan as scan_module
    from perfcheck.history.dashboard import DigestFacts, history_view, prepare
    from perfcheck.history.scan import ReportPass

    monkeypatch.setattr(scan_module, "BUDGET_RUNS", 1)
    with open_store(store_at()) as store:
        _fill(store, runs=12)
        # a last run of two series only: they end there, the others a run before
        store.add(RunRecord("run-late", T0 + 40 * DAY), [
            Result("m1", "nightly", "kern<00>", "duration", 5e-3, "s", outcome="failed", low=1e-4, high=2e-3),
            Result("m2", "other", "kern<01>", "duration", 1e-3, "s")])
        for where in ({}, {"machine": "m1", "kernel": ["kern<00>", "kern<05>"]}):
            whole = DigestFacts.of_prepared(prepare(history_view(store.series(**where, last=last))))
            report = ReportPass(store, where=where, last=last, columns=scan_module.DIGESTED)
            low, high = report.budgets(whole.latest)
            np.testing.assert_array_equal(low, whole.latest["low"].to_numpy(dtype=float))
            np.testing.assert_array_equal(high, whole.latest["high"].to_numpy(dtype=float))
            assert set(whole.latest["run"]) == {"run-late", "run-011"} and np.isfinite(high).any()
            assert np.isnan(high).any()
            read = whole.with_budgets(np.full(len(low), np.nan), np.full(len(high), np.nan)).with_budgets(low, high)
            pd.testing.assert_frame_equal(read.latest, whole.latest)
            assert [len(got) for got in report.budgets(whole.latest.iloc[:0])] == [0, 0]


def test_the_digest_makes_no_view_ready(store_at, monkeypatch) -> None:  # noqa: ANN001
    """The Markdown digest alone takes each part's facts from its index (``part_facts``),
    not from ``dashboard.prepare`` (ordering and normalising every row: most of the
    digest's own time at a year of nights); its text is the whole view's."""
    from perfcheck.history import dashboard
    from perfcheck.history.dashboard import history_view_of, markdown_digest
    from perfcheck.history.scan import digest

    with open_store(store_at()) as store:
        _fill(store)
        whole = markdown_digest(history_view_of(store.series(), arches={"m1": "gfx90a", "m2": "gfx908"},
                                                title="nightly"))
        nothing = markdown_digest(history_view_of(store.series(kernel=["absent"]), title="nightly"))
        assert digest(store, kernel=["absent"], title="nightly") == nothing and "No runs recorded yet" in nothing

        def prepare(view):  # noqa: ANN001, ANN202
            raise AssertionError("the digest made a view ready")

        monkeypatch.setattr(dashboard, "prepare", prepare)
        assert digest(store, title="nightly", rows=90) == whole


def test_the_digest_diagnoses_only_the_rows_it_shows(store_at, monkeypatch) -> None:  # noqa: ANN001
    """A whole-run step is a finding per kernel; the digest lists MAX_DIGEST_ROWS of them
    with their why. It diagnoses those (it used to diagnose every finding), and its text
    is the whole view's, the why of each listed row included."""
    from perfcheck.history import dashboard, findings as findings_module
    from perfcheck.history import scan as scan_module
    from perfcheck.history.dashboard import history_view_of, markdown_digest
    from perfcheck.history.scan import digest

    monkeypatch.setattr(dashboard, "MAX_DIGEST_ROWS", 1)
    with open_store(store_at()) as store:
        _fill(store)
        view = history_view_of(store.series(), arches={"m1": "gfx90a", "m2": "gfx908"}, title="nightly")
        whole = markdown_digest(view)
        diagnosed = []
        real = findings_module.explain

        def explain(heads, frame, *a):  # noqa: ANN001, ANN202 (records what is diagnosed)
            if frame is not None:
                diagnosed.extend(heads)
            return real(heads, frame, *a)

        monkeypatch.setattr(findings_module, "explain", explain)
        monkeypatch.setattr(scan_module, "explain", explain)
        assert digest(store, title="nightly", rows=90) == whole
    table = whole.split("### Open regressions")[1].split("\n\n")[1]
    listed = [line for line in table.splitlines() if line.startswith("| nightly |")]
    assert len(listed) == 1 and listed[0].rstrip(" |").split("| ")[-1] != "-"  # with its why
    assert "...and 1 more" in whole
    # the listed row's kernel (its two changes), not each of the 12 kernels' findings
    assert {cp.kernel for cp in diagnosed} == {"kern<03>"} and len(diagnosed) <= 2, diagnosed


@pytest.mark.parametrize("where", [{}, {"metric": "duration", "since": T0 + 5 * DAY},
                                   {"machine": "m1", "kernel": ["kern<01>", "kern<02>", "kern<09>"], "last": 7},
                                   {"kernel": ["kern<01>", "kern<09>"], "metric": "duration"}])
def test_values_are_the_numbers_of_series_in_its_order(store_at, where) -> None:  # noqa: ANN001
    """``HistoryStore.values`` (what --relative reads the run-wide offsets from): each value's
    series, run, time, commit and number as ``series`` gives them, missing values included."""
    with open_store(store_at()) as store:
        _fill(store, runs=14, tied=True)
        store.add(RunRecord("late", T0 + 20 * DAY, commit="c" * 40),
                  [Result("m1", "nightly", f"kern<{k:02d}>", "duration", float("nan") if k == 2 else 1e-3, "s")
                   for k in range(12)])
        frame = store.series(**where)
        got = store.values(**where)
    assert len(got.value) == len(frame) > 0
    for column in ("machine", "suite", "kernel", "metric"):
        assert got.keys[column].to_numpy(dtype=object)[got.series].tolist() == frame[column].tolist()
    for column in ("run_id", "time", "commit"):
        assert got.runs[column].to_numpy(dtype=object)[got.run].tolist() == frame[column].tolist()
    expected = frame["value"].to_numpy(dtype="float64")
    assert np.array_equal(got.value, expected, equal_nan=True)
    # a missing value (None from the store) read as NaN; and without one, every value a number
    assert np.isnan(got.value).any() == ("kern<02>" in where.get("kernel", ["kern<02>"]))


def test_values_of_a_damaged_store_is_one_error(tmp_path) -> None:  # noqa: ANN001
    import sqlite3

    from perfcheck.errors import InputError

    with open_store(tmp_path / "h.sqlite") as store:
        _fill(store, runs=6, kernels=6)
    db = sqlite3.connect(tmp_path / "h.sqlite")
    db.execute("UPDATE results SET value = 'fast' WHERE run = (SELECT min(run) FROM results)")
    db.commit()
    db.close()
    with open_store(tmp_path / "h.sqlite") as store, pytest.raises(InputError, match="holds 'fast'.*not a number"):
        store.values(metric="duration")


def test_values_of_series_with_every_run_are_their_numbers_alone_in_one_snapshot(tmp_path) -> None:  # noqa: ANN001
    """A series with a value at every run of its span is read as its numbers alone (sqlite3
    makes an object of every column of every row), its runs known from its span; the
    runs, the spans and the values are read in one transaction (one snapshot), so a run
    added or pruned meanwhile cannot shift a value onto another run."""
    with open_store(tmp_path / "h.sqlite") as store:
        _fill(store, runs=14, kernels=6, tied=True)  # kern<00>'s duration lacks a run: read with its runs
        seen: list[tuple[str, bool]] = []
        rows = store._rows

        def spy(sql, params=()):  # noqa: ANN001, ANN202
            seen.append((sql, store._db.in_transaction))
            return rows(sql, params)

        store._rows = spy
        got = store.values(metric="duration")
        del store._rows
        frame = store.series(metric="duration")
    assert np.array_equal(got.value, frame["value"].to_numpy(dtype="float64"), equal_nan=True)
    assert got.keys["kernel"].to_numpy(dtype=object)[got.series].tolist() == frame["kernel"].tolist()
    assert got.runs["run_id"].to_numpy(dtype=object)[got.run].tolist() == frame["run_id"].tolist()
    assert all(inside for _, inside in seen), seen  # the series' names and ids too (an id may be reused)
    # the values' reads (not the store's check that every value names a series number: _keys)
    reads = [(sql, inside) for sql, inside in seen if "FROM runs" in sql or "FROM results v" in sql]
    assert len(reads) == 4 and all(inside for _, inside in reads), reads  # runs, spans, numbers, the rest
    alone = [sql for sql, _ in reads if sql.startswith("SELECT v.value FROM")]
    assert len(alone) == 1 and "ORDER BY v.series_id, v.run" in alone[0]


@pytest.mark.parametrize("bad", ["'x'", "X'34'", "99.5", "-0.5"])
def test_values_say_a_damaged_run_number_beside_a_series_with_every_run(tmp_path, bad: str) -> None:  # noqa: ANN001
    """A value row more, whose run is text, a blob or a fraction (another tool wrote it),
    beside a series that has a value at every run: the count over the runs' range leaves
    it out (SQLite orders text and blobs after every number), so the series would read as
    whole and the row vanish; it is the damaged store's error, as ``series`` says."""
    import sqlite3
    from contextlib import closing

    from perfcheck.errors import InputError

    with open_store(tmp_path / "h.sqlite") as store:
        _fill(store, runs=12, kernels=6)
    with closing(sqlite3.connect(tmp_path / "h.sqlite")) as db, db:
        db.execute(f"INSERT INTO results (series_id, run, value, unit) SELECT series_id, {bad}, value, unit "
                   "FROM results WHERE run = 5 ORDER BY series_id LIMIT 1")
    with open_store(tmp_path / "h.sqlite") as store:
        for read in (store.series, store.values):
            with pytest.raises(InputError, match=r"the history store is damaged \(results\.run holds"):
                read(metric="duration")


@pytest.mark.parametrize("gap", [True, False])
def test_values_of_a_store_with_gaps_in_its_runs_are_those_of_series(tmp_path, gap: bool) -> None:  # noqa: ANN001
    """A run deleted from the runs table (an older tool, by hand) leaves its values without a
    run, and a value may name a run that never was: ``series`` leaves them out (its join),
    and so does ``values``, whose spans (a value at every run from the first to the last)
    must not take such a value for one of a stored run (``gap``: the runs are not numbered
    without a gap, so each series' span is read, not only its count)."""
    import sqlite3

    with open_store(tmp_path / "h.sqlite") as store:
        _fill(store, runs=12, kernels=6)
    db = sqlite3.connect(tmp_path / "h.sqlite")
    gone = db.execute("SELECT run FROM runs WHERE run_id = 'run-005'").fetchone()[0]
    if gap:
        db.execute("DELETE FROM runs WHERE run = ?", (gone,))  # its values stay: a gap in every span
    series = db.execute("SELECT series_id FROM series WHERE kernel = 'kern<01>' AND metric = 'duration'").fetchone()[0]
    last = db.execute("SELECT max(run) FROM runs").fetchone()[0]
    # a value at a run number no run has, and that series without the last run: as many values
    db.execute("UPDATE results SET run = ? WHERE series_id = ? AND run = ?", (last + 7, series, last))
    db.commit()
    db.close()
    with open_store(tmp_path / "h.sqlite") as store:
        for where in ({}, {"metric": "duration"}, {"since": T0 + 2 * DAY}):
            frame = store.series(**where)
            got = store.values(**where)
            assert len(got.value) == len(frame) > 0
            assert np.array_equal(got.value, frame["value"].to_numpy(dtype="float64"), equal_nan=True)
            for column in ("machine", "suite", "kernel", "metric"):
                assert got.keys[column].to_numpy(dtype=object)[got.series].tolist() == frame[column].tolist()
            assert got.runs["run_id"].to_numpy(dtype=object)[got.run].tolist() == frame["run_id"].tolist()
            assert ("run-005" in set(frame["run_id"])) is not gap


def test_relative_reads_every_kernel_once_in_parts_and_the_slices_numbers_alone(store_at, monkeypatch) -> None:  # noqa: ANN001
    """detect --relative reads each slice's numbers (``values``), then the parts of whole
    kernels as detect does; it used to read every machine x suite x metric as parts of
    frames (a year of every kernel's names and columns), then the kernels that changed again."""
    with open_store(store_at()) as store:
        _fill(store)
        _, expected = _whole(store, True)
        asked: list[dict] = []
        batches, values = store.batches, store.values
        monkeypatch.setattr(store, "batches", lambda **kw: (asked.append(kw), batches(**kw))[1])
        monkeypatch.setattr(store, "values", lambda **kw: (asked.append({"values": kw}), values(**kw))[1])
        done = scan(store, relative=True, last=12, select="all", arches={"m1": "gfx90a", "m2": "gfx908"}, rows=90,
                    **OPTIONS)
    assert [json.dumps(f.as_dict(), sort_keys=True) for f in done.found] == \
        [json.dumps(f.as_dict(), sort_keys=True) for f in expected]
    slices = [kw["values"] for kw in asked if "values" in kw]
    assert sorted((kw["machine"], kw["suite"], kw["metric"]) for kw in slices) == \
        [("m1", "nightly", "duration"), ("m1", "nightly", "hbm_bw"), ("m1", "nightly", "occupancy"),
         ("m2", "other", "duration")]
    # (and, where an offset series changed, the unit of its first value: one value by run id)
    parts = [kw for kw in asked if "values" not in kw and kw.get("run_id") is None]
    assert len(parts) == 1 and parts[0]["metric"] is None and parts[0]["kernel"] is None


def test_detect_over_names_as_categories_is_detect_over_text(tmp_path) -> None:  # noqa: ANN001
    # a reader may give the names as categories (codes, not text per value): the same change
    # points, plain and relative, and no warning of pandas 2's unobserved categories
    import warnings

    with open_store(tmp_path / "h.sqlite") as store:
        _fill(store)
        frame = store.series()
    coded = frame.astype({c: "category" for c in ("machine", "suite", "kernel", "metric")})
    for relative in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            found = detect(coded, relative=relative, **OPTIONS)
        assert found == detect(frame, relative=relative, **OPTIONS) and len(found) >= 3


def test_a_regression_recovered_in_the_last_runs_is_not_a_recent_one(store_at) -> None:  # noqa: ANN001
    # the lifecycle calls a recovered regression "new" when its recovery is recent; the
    # regression itself started long ago, so it is not one of the last runs' regressions
    rng = np.random.default_rng(3)
    with open_store(store_at()) as store:
        for i in range(40):
            rows = []
            for k in range(6):
                step = 1.3 if k == 2 and 10 <= i < 38 else 1.0  # regresses at run 10, recovers at run 38
                step *= 1.6 if k == 4 and i >= 15 else 1.0  # a larger regression, for good: listed first
                value = 1e-3 * (1 + k) * step * float(np.exp(rng.normal(0, 0.005)))
                rows.append(Result("m1", "nightly", f"kern<{k:02d}>", "duration", value, "s"))
            store.add(RunRecord(f"run-{i:03d}", T0 + i * DAY), rows, [Machine("m1", {"arch": "gfx90a"})])
        frame = store.series()
        points = detect(frame, **OPTIONS)
        assert any(cp.regression and cp.index == 10 for cp in points)  # the planted regression is found
        states = {s.point: s for s in lifecycle.states(points, frame, (), last=3)}
        regression = next(cp for cp in points if cp.regression and cp.index == 10)
        assert states[regression].new  # the lifecycle's sense: its recovery is recent
        expected = with_states(findings(points, frame, recent=recent_regressions(points, frame, last=3), select="all"),
                               states)
        done = scan(store, last=3, select="all", **OPTIONS)
        assert [json.dumps(f.as_dict(), sort_keys=True) for f in done.found] == \
            [json.dumps(f.as_dict(), sort_keys=True) for f in expected]
        assert regression not in recent_regressions(points, frame, last=3)
        assert [f.kernel for f in done.found][:2] == ["kern<04>", "kern<02>"]  # neither is a recent regression


def test_values_read_a_series_with_a_run_number_not_an_integer_with_its_runs(tmp_path) -> None:  # noqa: ANN001
    """A run number of 1.5 (SQLite's INTEGER columns keep what another tool wrote) in a
    series with as many values as its span: its values cannot be placed by their count,
    so the series is read with its runs, where the store's checks see it."""
    import sqlite3

    from perfcheck.errors import InputError

    with open_store(tmp_path / "h.sqlite") as store:
        _fill(store, runs=8, kernels=6)
    db = sqlite3.connect(tmp_path / "h.sqlite")
    series = db.execute("SELECT series_id FROM series WHERE kernel = 'kern<02>' AND metric = 'duration'").fetchone()[0]
    db.execute("UPDATE results SET run = run + 0.5 WHERE series_id = ? AND run = 5", (series,))
    db.commit()
    db.close()
    with open_store(tmp_path / "h.sqlite") as store:
        seen: list[tuple[str, list]] = []
        rows = store._rows
        store._rows = lambda sql, params=(): (seen.append((sql, list(params))), rows(sql, params))[1]
        try:
            store.values(metric="duration")
        except InputError:  # where the read of its runs says the store is damaged
            pass
        del store._rows
    alone = [params for sql, params in seen if sql.startswith("SELECT v.value FROM")]
    general = [params for sql, params in seen if sql.startswith("SELECT v.series_id, v.run, v.value FROM")]
    assert series in general[0] and not any(series in params for params in alone), seen


def test_values_put_whole_series_in_order_as_a_sort_of_every_value_would() -> None:
    # the rows of a series read whole, its runs in order, are moved a stretch at a time:
    # the order np.lexsort gives, in every case (and the sort itself where they are not so)
    from perfcheck.history.backend import _by_series_then_run

    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 9, 40)
    series = np.repeat(rng.permutation(40), lengths)  # each series one stretch, in no order
    runs = np.concatenate([np.sort(rng.choice(20, n, replace=False)) for n in lengths])
    cases = [(series, runs), (series[::-1].copy(), runs[::-1].copy()),  # runs backwards: sorted
             (np.where(series == 3, -1, series), runs), (series, np.where(runs == 4, -1, runs)),  # missing ones
             (np.r_[series, series[:5]], np.r_[runs, runs[:5] + 30]),  # a series in two stretches
             (np.r_[series, 41], np.r_[runs, runs[-1]]), (np.empty(0, dtype=np.int64),) * 2]
    for series_at, run_at in cases:
        assert np.array_equal(_by_series_then_run(series_at, run_at), np.lexsort((run_at, series_at)))
