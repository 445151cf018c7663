"""``perfcheck.history.partindex``: a part's kernels and series found once, from where the
names change, are the groups a groupby on the name columns gives (issue 22: history
detect grouped every part by its names in each step); the names as text or as
categoricals (the read path may give either), in the store's order or any other."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from perfcheck.history import lifecycle, open_store
from perfcheck.history.findings import watched
from perfcheck.history.partindex import KERNEL, SERIES, PartIndex
from perfcheck.history.scan import scan
from tests.test_history_scan import OPTIONS, _fill, _whole

NAMES = ("machine", "suite", "kernel", "metric", "run_id")


def _frame() -> pd.DataFrame:
    """Two machines x suites, kernels with long names, metrics, runs: in the store's order."""
    rows = []
    for machine, suite in (("m1", "nightly"), ("m1", "other"), ("m2", "nightly")):
        for k in range(3):
            kernel = f"void gemm<float, {k}>(float const*, float*, int)"
            for metric in ("duration", "hbm_bw", "vgpr"):
                rows += [(machine, suite, kernel, metric, f"run-{r:02d}", float(r + k)) for r in range(4)]
    return pd.DataFrame(rows, columns=[*NAMES, "value"])


def _groupby(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[tuple[tuple[str, ...], list[int]]]:
    """What a groupby gives: each group's names and rows, groups by first row."""
    found = frame.groupby(list(columns), sort=False, observed=True).indices
    groups = [(tuple(map(str, key)), sorted(int(i) for i in rows)) for key, rows in found.items()]
    return sorted(groups, key=lambda group: group[1][0])


def _groups(groups) -> list[tuple[tuple[str, ...], list[int]]]:  # noqa: ANN001
    return [(key, groups.at(n).tolist()) for n, key in enumerate(groups.keys)]


def _variants(frame: pd.DataFrame) -> list[pd.DataFrame]:
    shuffled = frame.iloc[np.random.default_rng(3).permutation(len(frame))].reset_index(drop=True)
    holed = frame.copy()
    holed.loc[[5, 40, 41], "metric"] = None  # missing names: in no series (still in their kernel)
    holed.loc[[70], "kernel"] = None
    back = pd.concat([frame.iloc[:30], frame.iloc[60:90], frame.iloc[30:60]], ignore_index=True)
    back = pd.concat([back, frame.iloc[:4]], ignore_index=True)  # a series that comes back after others
    return [frame, shuffled, holed, back]


@pytest.mark.parametrize("names", ["text", "category"])
def test_the_groups_are_a_groupby_s(names: str) -> None:
    for frame in _variants(_frame()):
        if names == "category":
            frame = frame.astype({c: "category" for c in NAMES})
        index = PartIndex.of(frame)
        assert _groups(index.kernels) == _groupby(frame, KERNEL)
        assert _groups(index.series) == _groupby(frame, SERIES)
        runs = [index.run_names[c] if c >= 0 else None for c in index.run_code.tolist()]
        assert runs == [None if pd.isna(r) else str(r) for r in frame["run_id"].tolist()]
        rows = index.series.of_rows(len(frame))
        for n in range(len(index.series)):
            assert np.flatnonzero(rows == n).tolist() == index.series.at(n).tolist()
    empty = PartIndex.of(_frame().iloc[:0])
    assert len(empty.kernels) == len(empty.series) == 0 and not len(empty.run_code)


@pytest.mark.parametrize("names", ["text", "category"])
def test_a_part_in_the_stores_order_is_grouped_without_a_groupby(names: str, monkeypatch) -> None:  # noqa: ANN001
    frame = _frame()
    if names == "category":
        frame = frame.astype({c: "category" for c in NAMES})
    expected = (_groupby(frame, KERNEL), _groupby(frame, SERIES))

    def groupby(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a part in the store's order needs no groupby")

    monkeypatch.setattr(pd.DataFrame, "groupby", groupby)
    index = PartIndex.of(frame)
    assert (_groups(index.kernels), _groups(index.series)) == expected
    assert len(index.series) == 27 and len(index.kernels) == 9


@pytest.mark.parametrize("names", ["text", "category"])
def test_watched_and_the_lifecycle_are_the_same_on_codes(names: str) -> None:
    from perfcheck.history.changepoints import KEY, ChangePoint

    frame = _frame()
    frame["outcome"] = np.where((frame["kernel"].str.contains("1>")) & (frame["metric"] == "vgpr"), "passed", None)
    frame.loc[frame["kernel"].str.contains("2>") & (frame["metric"] == "duration"), "metric"] = "calls"
    head = frame.drop_duplicates(list(KEY))
    points = [ChangePoint(m, s, k, x, "s", "run-02", None, 0.0, 2, 1.0, 1.5, 50.0, "regression", 1e-5, 2, 2)
              for m, s, k, x in head[list(KEY)].itertuples(index=False, name=None)]
    expected_watched = {(m, s, k, x) for m, s, k, x in head[list(KEY)].itertuples(index=False, name=None)
                        if x == "duration" or (k.endswith("1>(float const*, float*, int)") and x == "vgpr")
                        or "2>" in k}
    expected = [(s.point, s.status, s.new, s.level) for s in lifecycle.states(points, frame, last=2)]
    for variant in _variants(frame)[:2]:
        if names == "category":
            variant = variant.astype({c: "category" for c in NAMES})
        assert watched(variant) == expected_watched
        assert [(s.point, s.status, s.new, s.level) for s in lifecycle.states(points, variant, last=2)] == expected


def test_scan_of_parts_with_categorical_names_is_that_of_text(store_at, monkeypatch) -> None:  # noqa: ANN001
    # the read path may give the names and run ids as categoricals: the same findings, in the same order
    with open_store(store_at()) as store:
        _fill(store, tied=True)
        arches = {"m1": "gfx90a", "m2": "gfx908"}
        points, expected = _whole(store, False)
        real = type(store).batches

        def coded(self, **where):  # noqa: ANN001, ANN202
            for part in real(self, **where):
                yield part.astype({c: "category" for c in NAMES})

        monkeypatch.setattr(type(store), "batches", coded)
        for rows in (90, 10**6):
            done = scan(store, last=12, select="all", arches=arches, rows=rows, **OPTIONS)
            assert done.points == points
            assert [json.dumps(f.as_dict(), sort_keys=True) for f in done.found] == \
                [json.dumps(f.as_dict(), sort_keys=True) for f in expected]
    assert len(expected) >= 3
