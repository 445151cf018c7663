"""Streamed traces keep kernel names dictionary-encoded (pandas categorical) through
finish, conform and the summary; results must equal those of plain string names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfcheck.ingest.rocprofv3 as rocprofv3
from perfcheck.ingest import open_profile, read_profile
from perfcheck.ingest.dispatch import TimingTally, clean_kernel_names, finish
from perfcheck.metrics.summary import SUMMARY_WANT, summarise
from conftest import profile

NAMES = ["  k(int) [clone .kd]", "k(int)", None, "m.kd ", "", "k(int)", "z"]


def test_categorical_names_clean_like_strings() -> None:
    plain = clean_kernel_names(pd.Series(NAMES, dtype=object))
    encoded = clean_kernel_names(pd.Series(NAMES, dtype="category"))
    assert isinstance(encoded.dtype, pd.CategoricalDtype)
    assert encoded.astype("string").equals(plain)
    # "k(int) [clone .kd]" and "k(int)" are one kernel once cleaned: one category.
    assert sorted(encoded.cat.categories) == ["", "k(int)", "m", "z"]
    assert encoded.isna().tolist() == [False, False, True, False, False, False, False]


def _chunks(dtype: str) -> list[pd.DataFrame]:
    rng = np.random.default_rng(3)
    chunks = []
    # Each chunk sees the kernels in another order, and one holds a nameless dispatch.
    for first, names in enumerate([["b", "a [clone .kd]"], ["c", "a", "b"], ["a", None, "c.kd"]]):
        n = 50
        kernels = pd.Series(rng.choice(np.array(names, dtype=object), n), dtype=dtype)
        frame = pd.DataFrame({"kernel": kernels, "start_ns": np.arange(n) * 100 + first,
                              "end_ns": np.arange(n) * 100 + first + rng.integers(1, 90, n)})
        chunks.append(finish(frame, TimingTally()))
    return chunks


def test_summary_of_categorical_chunks_equals_string_chunks() -> None:
    plain = summarise(_chunks("object"))
    encoded = summarise(_chunks("category"))
    pd.testing.assert_frame_equal(plain, encoded)
    assert set(plain["kernel"]) == {"a", "b", "c", "<unnamed>"}


def test_trace_read_in_many_small_chunks_equals_one(monkeypatch: pytest.MonkeyPatch) -> None:
    path = profile("rocprofv3/rocprofiler-sdk-docs-2025/kernel_trace.csv")
    whole = read_profile(path).dispatches
    whole_summary = summarise(open_profile(path, want=SUMMARY_WANT).chunks)
    # A block of ~3 rows and chunks of 2 blocks: every chunk has its own kernel dictionary.
    monkeypatch.setattr(rocprofv3, "BLOCK_BYTES", 600)
    monkeypatch.setattr(rocprofv3, "CHUNK_ROWS", 2)
    assert len(list(open_profile(path).chunks)) >= 3
    parts = read_profile(path).dispatches
    assert str(parts["kernel"].dtype) == "string"
    pd.testing.assert_frame_equal(whole, parts)
    pd.testing.assert_frame_equal(whole_summary, summarise(open_profile(path, want=SUMMARY_WANT).chunks))
    assert whole_summary["calls"].sum() == 9
