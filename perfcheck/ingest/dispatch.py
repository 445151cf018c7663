"""Finishing touches every reader's chunks get: kernel-name cleanup, durations
from timestamps, oddity counting, canonical dtypes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcheck.model import Oddity
from perfcheck.schema import conform

# AMD code objects name the kernel descriptor "<name>.kd"; rocprof v1 and
# Omniperf 1.x append " [clone .kd]", Omniperf 2.0 on MI300X " (.kd)". None is
# part of the kernel's name, and rocprofv3 omits them, so they are stripped to
# let names match across tools.
_KD_SUFFIX = r"(?: \[clone \.kd\]| \(\.kd\)|\.kd)$"


def clean_kernel_names(names: pd.Series) -> pd.Series:
    if isinstance(names.dtype, pd.CategoricalDtype):
        # Streamed traces keep names dictionary-encoded (millions of dispatches,
        # a few hundred kernels): clean each distinct name once. Names that become
        # equal once cleaned ("k" and "k [clone .kd]") merge into one category.
        cleaned = _clean(pd.Series(names.cat.categories))
        mapping, uniques = pd.factorize(cleaned)
        codes = names.cat.codes.to_numpy()
        merged = np.where(codes < 0, -1, mapping[codes] if len(mapping) else codes)
        categories = pd.Index(pd.array(uniques, dtype="string"))
        return pd.Series(pd.Categorical.from_codes(merged, categories), index=names.index, name=names.name)
    return _clean(names)


def _clean(names: pd.Series) -> pd.Series:
    return names.astype("string").str.strip().str.replace(_KD_SUFFIX, "", regex=True)


class TimingTally:
    """Counts of suspicious durations over a whole scan, turned into oddities at the end."""

    def __init__(self) -> None:
        self.negative = 0
        self.zero = 0

    def oddities(self, path: str) -> list[Oddity]:
        out = []
        if self.negative:
            out.append(Oddity(path, "end timestamp before begin; duration left empty", self.negative))
        if self.zero:
            out.append(
                Oddity(path, "zero duration (timestamps too coarse or in lossy E-notation); duration left empty", self.zero)
            )
        return out


def finish(chunk: pd.DataFrame, tally: TimingTally) -> pd.DataFrame:
    """Canonicalise one chunk a reader produced."""
    if "kernel" in chunk.columns:
        chunk["kernel"] = clean_kernel_names(chunk["kernel"])
    if "calls" in chunk.columns:  # kernel-level statistics: nothing to derive
        return conform(chunk)
    if "duration" not in chunk.columns and "start_ns" in chunk.columns and "end_ns" in chunk.columns:
        start = pd.array(chunk["start_ns"], dtype="Int64")
        end = pd.array(chunk["end_ns"], dtype="Int64")
        chunk["duration"] = (end - start).to_numpy(dtype="float64", na_value=np.nan) * 1e-9
    if "duration" in chunk.columns:
        duration = chunk["duration"].astype("float64")
        negative = duration < 0
        zero = duration == 0
        tally.negative += int(negative.sum())
        tally.zero += int(zero.sum())
        chunk["duration"] = duration.mask(negative | zero)
    return conform(chunk)
