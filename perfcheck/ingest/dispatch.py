"""Finishing touches every reader's chunks get: kernel-name cleanup, durations
from timestamps, oddity counting, canonical dtypes."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from perfcheck.ingest.formats import Grouped
from perfcheck.model import Oddity
from perfcheck.schema import COLUMNS, conform, is_raw

# AMD code objects name the kernel descriptor "<name>.kd"; rocprof v1 and
# Omniperf 1.x append " [clone .kd]", Omniperf 2.0 on MI300X " (.kd)". None is
# part of the kernel's name, and rocprofv3 omits them, so they are stripped to
# let names match across tools.
_KD_SUFFIX = r"(?: \[clone \.kd\]| \(\.kd\)|\.kd)$"


# What was derived from the categories of the last chunk's names, by the identity of
# their dtype (held here, so no other dtype can take its id): SQLite readers give every
# chunk that uses the same kernels the same dtype (``KernelNames.column``), and names
# of kilobytes cost far more to clean, hash and match again than the rest of a chunk.
_LAST_CLEANED: list[tuple[pd.CategoricalDtype, np.ndarray, pd.CategoricalDtype]] = []
_LAST_FLAGS: list[tuple[pd.CategoricalDtype, np.ndarray]] = []


def clean_kernel_names(names: pd.Series) -> pd.Series:
    if isinstance(names.dtype, pd.CategoricalDtype):
        # Streamed traces keep names dictionary-encoded (millions of dispatches,
        # a few hundred kernels): clean each distinct name once. Names that become
        # equal once cleaned ("k" and "k [clone .kd]") merge into one category.
        last = _LAST_CLEANED[0] if _LAST_CLEANED else None
        if last is not None and last[0] is names.dtype:
            _, mapping, dtype = last
        else:
            cleaned = _clean(pd.Series(names.cat.categories))
            mapping, uniques = pd.factorize(cleaned)
            dtype = pd.CategoricalDtype(pd.Index(pd.array(uniques, dtype="string")))
            _LAST_CLEANED[:] = [(names.dtype, mapping, dtype)]
        codes = names.cat.codes.to_numpy()
        merged = np.where(codes < 0, -1, mapping[codes] if len(mapping) else codes)
        return pd.Series(pd.Categorical.from_codes(merged, dtype=dtype), index=names.index, name=names.name)
    return _clean(names)


class KernelNames:
    """Kernel names as one dictionary for readers that get names by id (SQLite string
    tables): each distinct name is cleaned once (``clean_kernel_names``), dispatches
    carry codes into it, and each chunk gets a categorical of the names it uses."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.names: list[str] = []
        # The codes the last chunk used, their names' merged numbers and dtype: most
        # chunks use the same kernels, and then get the same dtype (see _LAST_CLEANED).
        self._last: tuple[bytes, np.ndarray, pd.CategoricalDtype] | None = None

    def codes_of(self, names: Sequence[object]) -> np.ndarray:
        """Codes of ``names`` (-1 for a missing one); new names are cleaned in one go."""
        texts = [None if n is None or (isinstance(n, float) and np.isnan(n)) else str(n) for n in names]
        new = list(dict.fromkeys(t for t in texts if t is not None and t not in self.codes))
        if new:
            base = len(self.names)
            self.codes.update((t, base + i) for i, t in enumerate(new))
            self.names.extend(str(c) for c in clean_kernel_names(pd.Series(new, dtype="string")))
        return np.array([-1 if t is None else self.codes[t] for t in texts], dtype=np.int64)

    def column(self, codes: np.ndarray) -> pd.Categorical:
        """Codes of one chunk -> a categorical holding only the names it uses (cleaned
        names that coincide, "k" and "k.kd", become one category)."""
        present = np.unique(codes[codes >= 0])
        if self._last is not None and self._last[0] == present.tobytes():
            _, merged, dtype = self._last
        else:
            merged, uniques = pd.factorize(pd.Series([self.names[i] for i in present], dtype=object))
            dtype = pd.CategoricalDtype(pd.Index(pd.array(list(uniques), dtype="string")))
            self._last = (present.tobytes(), merged, dtype)
        remap = np.full(len(self.names) + 1, -1, dtype=np.int64)
        remap[present] = merged
        local = remap[np.where(codes >= 0, codes, len(self.names))]
        return pd.Categorical.from_codes(local, dtype=dtype)


# _KD_SUFFIX's alternatives: they end in different characters, so at most one applies.
_KD_SUFFIXES = (" [clone .kd]", " (.kd)", ".kd")


def _clean(names: pd.Series) -> pd.Series:
    names = names.astype("string").str.strip()
    # _KD_SUFFIX without a regex: names run to kilobytes (composable_kernel), and a
    # regex search tries every position of each; a suffix test looks at the end only.
    out = names
    for suffix in _KD_SUFFIXES:
        has = names.str.endswith(suffix).fillna(False).to_numpy(dtype=bool)
        if has.any():
            out = out.copy() if out is names else out
            out[has] = names[has].str.slice(0, -len(suffix))
    return out


# GPU packets and operations that AMD tools list among the dispatches but that run no
# kernel code: the AQL barrier packets HIP inserts for stream ordering ("<barrier
# packet>", and the "-and"/"-or" kinds; rocprof v1's "Unknown command type"),
# marker packets, and the copy/fill operations of the HIP runtime's activity records
# (roctracer op names). A user's kernel is never spelt like these: a function name
# has no angle brackets or spaces around it, and every other name keeps its row.
NON_KERNEL = re.compile(
    r"<[a-z -]*(?:barrier|marker|copy|packet)[a-z -]*>|Unknown command type|Barrier(?:And|Or)?|Marker"
    r"|Copy(?:HostToDevice|DeviceToHost|DeviceToDevice|HostToHost)|FillBuffer",
    re.IGNORECASE,
)


def non_kernel_rows(names: pd.Series) -> np.ndarray:
    """Mask of the rows whose (cleaned) name is a packet or copy, not a kernel."""
    # Each distinct name is matched once: millions of dispatches, a few hundred kernels.
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.cat.codes.to_numpy()
        last = _LAST_FLAGS[0] if _LAST_FLAGS else None
        if last is not None and last[0] is names.dtype:
            flags = last[1]
        else:
            flags = np.array([bool(NON_KERNEL.fullmatch(str(c))) for c in names.cat.categories], dtype=bool)
            _LAST_FLAGS[:] = [(names.dtype, flags)]
        return np.where(codes >= 0, flags[codes] if len(flags) else False, False)
    codes, distinct = pd.factorize(names)
    flags = np.array([bool(NON_KERNEL.fullmatch(str(c))) for c in distinct], dtype=bool)
    return np.where(codes >= 0, flags[codes] if len(flags) else False, False)


# No input may hold more than a signed 64-bit counter or clock can (2**63), nor a
# negative duration, size, count or counter, nor a fraction of a count. Such a value
# comes from a damaged file (inf, 1e308, -1, NaN written into a column), so it is
# left empty, counted, and reported once per file; it never reaches a metric.
_LIMIT = 2.0**63
_SIGNED = frozenset(c.name for c in COLUMNS.values() if c.group == "identity")  # ids: labels, -1 allowed


class TimingTally:
    """Counts of suspicious durations and impossible values over a whole scan,
    turned into oddities (warnings) at the end."""

    def __init__(self) -> None:
        self.negative = 0
        self.zero = 0
        self.impossible: dict[str, int] = {}  # column -> values left empty
        self.impossible_rows = 0  # rows with at least one of them
        self.non_kernels: dict[str, int] = {}  # packet / copy name -> rows dropped

    def oddities(self, path: str) -> list[Oddity]:
        out = []
        if self.negative:
            out.append(Oddity(path, "end timestamp before begin; duration left empty", self.negative))
        if self.zero:
            out.append(
                Oddity(path, "zero duration (timestamps too coarse or in lossy E-notation); duration left empty", self.zero)
            )
        if self.non_kernels:
            names = ", ".join(f"{name!r}" for name in sorted(self.non_kernels))
            out.append(Oddity(path, f"GPU packets that are not kernels dropped ({names})",
                              sum(self.non_kernels.values())))
        if self.impossible:
            columns = ", ".join(f"{n} in {name!r}" for name, n in sorted(self.impossible.items()))
            out.append(Oddity(path, f"values that are not finite, negative, fractional counts or beyond 2**63 "
                                    f"left empty: {columns}", self.impossible_rows))
        return out


def impossible_values(name: str, series: pd.Series) -> np.ndarray | None:
    """Mask of the cells of a canonical or raw numeric column no real profile can
    hold (see ``_LIMIT``); None when the column is not numeric."""
    column = COLUMNS.get(name)
    if name == "kernel" or (column is None and not is_raw(name)) or not pd.api.types.is_numeric_dtype(series.dtype):
        return None
    if pd.api.types.is_bool_dtype(series.dtype):
        return None
    if pd.api.types.is_integer_dtype(series.dtype):
        # Integers are finite, whole and below 2**63 already: only the sign is left to
        # check (cheaply: 10M-dispatch traces pass here column by column).
        if name in _SIGNED:
            return None
        low = series.le(0) if name == "calls" else series.lt(0)
        return np.asarray(low.to_numpy(dtype=bool, na_value=False))
    values = series.to_numpy(dtype="float64", na_value=np.nan)
    with np.errstate(invalid="ignore"):
        bad = np.isinf(values) | (np.abs(values) >= _LIMIT)
        if name not in _SIGNED and name != "duration":  # a negative duration: see TimingTally.negative
            bad |= values < 0
        if name == "calls":
            bad |= values == 0  # a statistics row summarising no dispatch
        if column is not None and column.dtype == "Int64":
            bad |= np.isfinite(values) & (values != np.floor(values))
    return bad


def _drop_impossible(chunk: pd.DataFrame, tally: TimingTally) -> None:
    rows: np.ndarray | None = None
    for name in list(chunk.columns):
        bad = impossible_values(name, chunk[name])
        if bad is not None and bad.any():
            tally.impossible[name] = tally.impossible.get(name, 0) + int(bad.sum())
            rows = bad if rows is None else rows | bad
            series = chunk[name]
            if pd.api.types.is_integer_dtype(series.dtype) and not isinstance(series.dtype, pd.api.extensions.ExtensionDtype):
                series = series.astype("Int64")  # numpy int64 has no missing value
            chunk[name] = series.mask(bad)
    if rows is not None:
        tally.impossible_rows += int(rows.sum())


def _finish_grouped(chunk: Grouped, tally: TimingTally) -> Grouped:
    """``finish`` for a grouped chunk: the same cleaning, checks and counts as for the
    frame ``chunk.frame()`` would give, done once per configuration row and weighted by
    its dispatches, and per dispatch only on the per-dispatch series."""
    rows, group = chunk.rows, chunk.group
    series = dict(chunk.series)
    if "kernel" in rows.columns:
        rows["kernel"] = clean_kernel_names(rows["kernel"])
        packets = non_kernel_rows(rows["kernel"])
        if packets.any():
            weights = np.bincount(group, minlength=len(rows))
            dropped = pd.Series(weights[packets]).groupby(rows["kernel"][packets].astype("string").to_numpy()).sum()
            for name, count in dropped.items():
                tally.non_kernels[str(name)] = tally.non_kernels.get(str(name), 0) + int(count)
            kept = ~packets
            of_dispatch = kept[group]
            renumber = np.cumsum(kept) - 1
            group = renumber[group[of_dispatch]]
            series = {name: values[of_dispatch] for name, values in series.items()}
            rows = rows.loc[kept].reset_index(drop=True)
            if isinstance(rows["kernel"].dtype, pd.CategoricalDtype):
                rows = rows.assign(kernel=rows["kernel"].cat.remove_unused_categories())
    # Impossible values: a configuration's counts once per dispatch that has it.
    weights = np.bincount(group, minlength=len(rows))
    bad_rows = np.zeros(len(rows), dtype=bool)
    for name in list(rows.columns):
        bad = impossible_values(name, rows[name])
        if bad is not None and bad.any():
            tally.impossible[name] = tally.impossible.get(name, 0) + int(weights[bad].sum())
            bad_rows |= bad
            column = rows[name]
            if pd.api.types.is_integer_dtype(column.dtype) and not isinstance(column.dtype, pd.api.extensions.ExtensionDtype):
                column = column.astype("Int64")
            rows[name] = column.mask(bad)
    bad_dispatches = bad_rows[group]
    for name, values in list(series.items()):
        bad = impossible_values(name, pd.Series(values, copy=False))
        if bad is not None and bad.any():
            tally.impossible[name] = tally.impossible.get(name, 0) + int(bad.sum())
            bad_dispatches = bad_dispatches | bad
            column = pd.array(values, dtype="Int64") if np.issubdtype(np.asarray(values).dtype, np.integer) else values
            series[name] = pd.Series(column, copy=False).mask(bad).array
    tally.impossible_rows += int(bad_dispatches.sum())
    if "duration" not in series and "start_ns" in series and "end_ns" in series:
        start, end = series["start_ns"], series["end_ns"]
        if isinstance(start, np.ndarray) and isinstance(end, np.ndarray) and start.dtype.kind == end.dtype.kind == "i":
            difference = (end - start).astype("float64")  # what Int64 arrays give, without the masks
        else:
            difference = (pd.array(end, dtype="Int64") - pd.array(start, dtype="Int64")).to_numpy(dtype="float64", na_value=np.nan)
        series["duration"] = difference * 1e-9
    if "duration" in series:
        duration = np.asarray(series["duration"], dtype="float64")
        negative = duration < 0
        zero = duration == 0
        tally.negative += int(negative.sum())
        tally.zero += int(zero.sum())
        series["duration"] = np.where(negative | zero, np.nan, duration)
    return Grouped(conform(rows), group, series)


def finish(chunk: pd.DataFrame | Grouped, tally: TimingTally) -> pd.DataFrame | Grouped:
    """Canonicalise one chunk a reader produced."""
    if isinstance(chunk, Grouped):
        return _finish_grouped(chunk, tally)
    if "kernel" in chunk.columns:
        chunk["kernel"] = clean_kernel_names(chunk["kernel"])
        packets = non_kernel_rows(chunk["kernel"])
        if packets.any():
            dropped = chunk["kernel"][packets].astype("string").value_counts()
            for name, count in dropped.items():
                tally.non_kernels[str(name)] = tally.non_kernels.get(str(name), 0) + int(count)
            chunk = chunk.loc[~packets].copy()
            if isinstance(chunk["kernel"].dtype, pd.CategoricalDtype):
                chunk = chunk.assign(kernel=chunk["kernel"].cat.remove_unused_categories())
    _drop_impossible(chunk, tally)
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
