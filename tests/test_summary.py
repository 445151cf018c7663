"""Per-kernel summary on small in-memory frames, checked against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from perfcheck.errors import UsageError
from perfcheck.ingest.dispatch import TimingTally, finish
from perfcheck.metrics.summary import KernelSummary, summarise


def dispatches(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["kernel", "start_ns", "end_ns"])
    return finish(frame, TimingTally())


def test_statistics_per_kernel_by_hand() -> None:
    chunk = dispatches([("a", 0, 10), ("b", 0, 100), ("a", 20, 50), ("a", 60, 80)])
    table = summarise([chunk]).set_index("kernel")
    # a: durations 10, 30, 20 ns -> median 20, mean 20, total 60
    assert table.loc["a", "calls"] == 3
    assert table.loc["a", "duration"] == pytest.approx(20e-9)
    assert table.loc["a", "duration_min"] == pytest.approx(10e-9)
    assert table.loc["a", "duration_max"] == pytest.approx(30e-9)
    assert table.loc["a", "duration_total"] == pytest.approx(60e-9)
    # ordered by total time: b (100 ns) before a (60 ns)
    assert list(table.index) == ["b", "a"]


def test_chunks_combine_like_one_frame() -> None:
    rng = np.random.default_rng(7)
    n = 1000
    frame = pd.DataFrame(
        {
            "kernel": rng.choice(["k1", "k2", "k3"], n),
            "start_ns": np.zeros(n, dtype=np.int64),
            "end_ns": rng.integers(1, 10_000, n),
            "vgpr": rng.integers(8, 128, n),
        }
    )
    whole = summarise([finish(frame.copy(), TimingTally())]).set_index("kernel").sort_index()
    parts = [finish(frame.iloc[i : i + 137].copy(), TimingTally()) for i in range(0, n, 137)]
    chunked = summarise(parts).set_index("kernel").sort_index()
    pd.testing.assert_frame_equal(whole, chunked)
    expected = frame.assign(d=frame.end_ns * 1e-9).groupby("kernel")["d"].median()
    assert np.allclose(whole["duration"].to_numpy(), expected.sort_index().to_numpy())
    assert whole.loc["k1", "vgpr"] == frame.loc[frame.kernel == "k1", "vgpr"].max()


def test_negative_and_zero_durations_are_left_empty_and_counted() -> None:
    tally = TimingTally()
    chunk = finish(pd.DataFrame({"kernel": ["a", "a", "a"], "start_ns": [0, 50, 5], "end_ns": [10, 40, 5]}), tally)
    assert chunk["duration"].iloc[0] == pytest.approx(10e-9)
    assert math.isnan(chunk["duration"].iloc[1]) and math.isnan(chunk["duration"].iloc[2])
    assert (tally.negative, tally.zero) == (1, 1)
    messages = [o.what for o in tally.oddities("f.csv")]
    assert any("end timestamp before begin" in m for m in messages)
    assert any("zero duration" in m for m in messages)
    # The summary uses only the valid sample.
    table = summarise([chunk]).set_index("kernel")
    assert table.loc["a", "calls"] == 3
    assert table.loc["a", "duration"] == pytest.approx(10e-9)


def test_code_object_suffixes_are_stripped() -> None:
    chunk = dispatches(
        [
            ("vecCopy(double*, int) [clone .kd]", 0, 1),
            ("vecCopy(double*, int) (.kd)", 0, 1),
            ("__amd_rocclr_fillBuffer.kd", 0, 1),
            ("plain", 0, 1),
        ]
    )
    assert list(chunk["kernel"]) == ["vecCopy(double*, int)", "vecCopy(double*, int)", "__amd_rocclr_fillBuffer", "plain"]


def test_kernel_level_statistics_combine() -> None:
    stats = finish(
        pd.DataFrame(
            {
                "kernel": ["a", "b", "a"],
                "calls": [2, 1, 3],
                "duration_total": [4.0, 5.0, 9.0],
                "duration_min": [1.0, 5.0, 2.0],
                "duration_max": [3.0, 5.0, 4.0],
            }
        ),
        TimingTally(),
    )
    table = summarise([stats]).set_index("kernel")
    assert table.loc["a", "calls"] == 5
    assert table.loc["a", "duration_total"] == pytest.approx(13.0)
    assert table.loc["a", "duration_mean"] == pytest.approx(2.6)
    assert table.loc["a", "duration_min"] == 1.0 and table.loc["a", "duration_max"] == 4.0
    assert math.isnan(table.loc["a", "duration"])  # a median cannot be recovered
    assert table.loc["b", "duration"] == pytest.approx(5.0)  # one call: its duration is the median


def test_mixing_levels_is_refused() -> None:
    summary = KernelSummary()
    summary.add(dispatches([("a", 0, 1)]))
    summary.add(finish(pd.DataFrame({"kernel": ["a"], "calls": [1], "duration_total": [1.0]}), TimingTally()))
    with pytest.raises(UsageError, match="per-kernel statistics"):
        summary.frame()


def test_empty_input_gives_empty_table() -> None:
    assert summarise([]).empty


def _chunks(seed: int, sizes: tuple[int, ...], kernels: list[str], *, scale: float,
            empty: float) -> list[pd.DataFrame]:
    """Dispatch chunks of these sizes: random kernels and durations, a share ``empty``
    of durations left empty, and the last kernel's all empty."""
    rng = np.random.default_rng(seed)
    chunks = []
    for size in sizes:
        kernel = rng.choice(kernels, size=size)
        duration = rng.random(size) * scale
        duration[rng.random(size) < empty] = np.nan
        duration[kernel == kernels[-1]] = np.nan
        chunks.append(pd.DataFrame({"kernel": kernel, "duration": duration}))
    return chunks


def test_medians_are_pandas_medians_over_chunks_with_gaps() -> None:
    """The summary's medians (one sort of every dispatch by kernel, a selection per
    kernel) are exactly pandas' groupby medians: odd and even counts, durations left
    empty, a kernel with none, kernels spread over several chunks."""
    from perfcheck.metrics.summary import KernelSummary

    chunks = _chunks(23, (1000, 1, 2, 777), ["a", "b", "c", "d", "e"], scale=1e-5, empty=0.2)
    summary = KernelSummary()
    for chunk in chunks:
        summary.add(chunk)
    table = summary.frame().set_index("kernel")
    every = pd.concat(chunks)
    expected = every.groupby("kernel")["duration"].median()
    assert np.isnan(table.loc["e", "duration"])
    for kernel, median in expected.items():
        got = table.loc[kernel, "duration"]
        assert (np.isnan(got) and np.isnan(median)) or got == median, kernel
    assert table["calls"].to_dict() == every.groupby("kernel").size().to_dict()


def test_counts_and_extremes_are_pandas_groupby_over_chunks_with_gaps() -> None:
    """Counts (one bincount), shortest and longest (from the runs sorted for the
    medians) and sums and means (pandas over the dispatches in file order) are
    exactly pandas' groupby over the dispatches: kernels spread over chunks, durations
    left empty, a kernel with none (counted, no extremes), the table in its order."""
    chunks = _chunks(5, (500, 3, 1, 1200), ["p", "q", "r", "s", "t", "u"], scale=1e-4, empty=0.3)
    summary = KernelSummary()
    for chunk in chunks:
        summary.add(chunk)
    table = summary.frame().set_index("kernel")
    grouped = pd.concat(chunks, ignore_index=True).groupby("kernel")["duration"]
    expected = pd.DataFrame({"calls": grouped.size(), "duration_mean": grouped.mean(), "duration_min": grouped.min(),
                             "duration_max": grouped.max(), "duration_total": grouped.sum(min_count=1)})
    got = table[list(expected.columns)].sort_index()
    got.index.name = expected.index.name
    pd.testing.assert_frame_equal(got, expected, check_exact=True, check_index_type=False)
    assert table.loc["u", "calls"] > 0 and np.isnan(table.loc["u", "duration_min"])
    assert list(summary.duration_samples()) == [k for k in dict.fromkeys(pd.concat(chunks)["kernel"]) if k != "u"]


@pytest.mark.parametrize("limit", [None, 60, 0])  # runs joined; sorted at the end past 60 runs; always
def test_runs_sorted_per_chunk_join_into_the_one_sort(monkeypatch: pytest.MonkeyPatch, limit: int | None) -> None:
    """Each chunk's durations are sorted by kernel as the chunk comes, and the runs are
    joined at the end (or, past ``_JOINED_RUNS`` runs, every dispatch sorted at once):
    the duration samples are each kernel's durations in file order, exactly; medians
    and extremes are pandas'; kernels first seen in later chunks, empty chunks, and
    chunks added after a first table join the runs already joined."""
    from perfcheck.metrics import summary as module

    if limit is not None:
        monkeypatch.setattr(module, "_JOINED_RUNS", limit)
    names = [f"k{i}" for i in range(40)]
    chunks = [c.assign(kernel=c["kernel"].where(c.index % 7 != 3, names[min(i + 30, 39)]))  # later kernels
              for i, c in enumerate(_chunks(11, (300, 0, 1, 50, 999, 2, 640, 77), names[:30] + ["gone"], scale=1e-3,
                                            empty=0.1))]
    summary = KernelSummary()
    for chunk in chunks[:5]:
        summary.add(chunk)
    summary.frame()  # a first table joins the runs so far
    for chunk in chunks[5:]:
        summary.add(chunk)
    table = summary.frame().set_index("kernel")
    every = pd.concat(chunks, ignore_index=True)
    samples = summary.duration_samples()
    expected = {k: d.dropna().to_numpy() for k, d in every.groupby("kernel", sort=False)["duration"] if d.notna().any()}
    assert list(samples) == list(expected)  # in the order kernels were first met
    for kernel, durations in expected.items():
        assert np.array_equal(samples[kernel], durations), kernel
    grouped = every.groupby("kernel")["duration"]
    for column, values in (("duration", grouped.median()), ("duration_min", grouped.min()), ("duration_max", grouped.max())):
        pd.testing.assert_series_equal(table[column].sort_index(), values, check_names=False, check_exact=True)


def test_chunks_sharing_one_categorical_dtype_number_kernels_as_they_come() -> None:
    """Chunks whose names share one categorical dtype (the SQLite readers' chunks) reuse
    the codes found for its categories; a category first used in a later chunk, and a
    missing name, still get theirs in the order of their first dispatch: the table and
    the samples are those of the same names as plain strings."""
    dtype = pd.CategoricalDtype(pd.Index(pd.array(["a", "b", "c", "d"], dtype="string")))
    names = [["b", "b", None], ["d", "a", "b", "c"], ["c", None, "a"]]
    tables, samples = [], []
    for categorical in (True, False):
        summary = KernelSummary()
        for chunk_names in names:
            kernels = pd.Series(pd.Categorical(chunk_names, dtype=dtype)) if categorical else pd.Series(chunk_names, dtype=object)
            summary.add(pd.DataFrame({"kernel": kernels, "duration": np.random.default_rng(len(chunk_names)).random(len(chunk_names))}))
        tables.append(summary.frame())
        samples.append(summary.duration_samples())
    pd.testing.assert_frame_equal(tables[0], tables[1], check_exact=True)
    assert list(samples[0]) == list(samples[1]) == ["b", "<unnamed>", "d", "a", "c"]
    for kernel, values in samples[0].items():
        assert np.array_equal(values, samples[1][kernel]), kernel
