"""Where each kernel and each series of a part of the store lies, found once per part
(``PartIndex.of``) and read by every step of ``history detect`` that goes series by
series or kernel by kernel: what ``scan`` gathers of the whole store, which series a
person asked about (``findings.watched``), the lifecycle (``lifecycle.states``) and the
diagnosis (``findings.explain``).

A part holds whole kernels in the store's order (machine, suite, kernel, metric, then
time: ``HistoryStore.batches``), so a series is a stretch of neighbouring rows with the
same names, found by comparing each row's names with the row before it (a vectorised
``!=`` per name column). A groupby on the name columns in each step hashed every row's
names again: with pandas' arrow-backed strings, the bytes of a long C++ kernel name per
row and per step (9 s of `history detect` over a year of nights, issue 22).

Any frame gives the groups a groupby would (``groupby(sort=False)``: by first row, a
row with a missing name in none): where a name comes back after another (a frame in
another order) or is missing, they are found by one groupby instead. The name columns
may be text or categoricals (compared with ``!=``, grouped with ``observed=True``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

KERNEL = ("machine", "suite", "kernel")
SERIES = (*KERNEL, "metric")


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class Groups:
    """A frame's rows grouped by some name columns: the groups in the order of their
    first row (``keys``: their names as text), group n's rows (in frame order)
    ``rows[bounds[n]:bounds[n + 1]]``."""

    keys: list[tuple[str, ...]]
    rows: np.ndarray
    bounds: np.ndarray
    number: dict[tuple[str, ...], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "number", {key: n for n, key in enumerate(self.keys)})

    def __len__(self) -> int:
        return len(self.keys)

    def at(self, n: int) -> np.ndarray:
        """Group ``n``'s rows."""
        return self.rows[self.bounds[n]:self.bounds[n + 1]]

    def sizes(self) -> np.ndarray:
        return np.diff(self.bounds)

    def of_rows(self, length: int) -> np.ndarray:
        """The group of each of a frame's ``length`` rows (-1: in none)."""
        out = np.full(length, -1, dtype=np.int64)
        out[self.rows] = np.repeat(np.arange(len(self.keys), dtype=np.int64), self.sizes())
        return out


@dataclass(frozen=True, eq=False)
class PartIndex:
    """A part's kernels (machine x suite x kernel) and series (x metric) as ``Groups``,
    and its run ids as codes (``run_code``: -1 where missing; ``run_names``)."""

    kernels: Groups
    series: Groups
    run_code: np.ndarray
    run_names: list[str]

    @staticmethod
    def of(frame: "pd.DataFrame") -> "PartIndex":
        import pandas as pd

        length = len(frame)
        missing = np.zeros(length, dtype=bool)
        change = np.zeros(length, dtype=bool)  # the first row of a stretch of equal names
        change[:1] = True
        found = {}
        for column in SERIES:
            names = frame[column]
            missing |= names.isna().to_numpy(dtype=bool)
            # each row against the one before, on slices of the column (views: ``shift`` copied
            # every long kernel name of the part)
            change[1:] |= pd.array(names.array[1:] != names.array[:-1]).to_numpy(dtype=bool, na_value=True)
            if column == KERNEL[-1]:
                found[KERNEL] = _groups(frame, KERNEL, change.copy(), missing.copy())
        found[SERIES] = _groups(frame, SERIES, change, missing)
        code, names = pd.factorize(frame["run_id"]) if length else (np.empty(0, dtype=np.int64), [])
        return PartIndex(found[KERNEL], found[SERIES], np.asarray(code, dtype=np.int64), [str(r) for r in names])

    def kernel_series(self) -> list[list[int]]:
        """The series of each kernel (kernel number -> series numbers, in their order)."""
        out: list[list[int]] = [[] for _ in range(len(self.kernels))]
        for n, key in enumerate(self.series.keys):
            out[self.kernels.number[key[:3]]].append(n)
        return out


def _groups(frame: "pd.DataFrame", columns: Sequence[str], change: np.ndarray, missing: np.ndarray) -> Groups:
    """``columns``' groups of ``frame``, from where its names change (``change``) and
    are missing (``missing``)."""
    heads = np.flatnonzero(change & ~missing)
    keys = _names(frame, columns, heads)
    if len(set(keys)) == len(keys):  # every stretch is a group of its own
        rows = np.flatnonzero(~missing)
        return Groups(keys, rows, np.append(np.searchsorted(rows, heads), len(rows)))
    # names that come back after others: a groupby, once; numbered by first row whatever
    # order the pandas version gives its groups in
    number = frame.groupby(list(columns), sort=False, observed=True).ngroup().to_numpy(dtype="float64")
    rows = np.flatnonzero(np.isfinite(number) & (number >= 0))  # a missing name: NaN (older pandas: -1)
    _, first = np.unique(number[rows], return_index=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    group = rank[np.unique(number[rows], return_inverse=True)[1].ravel()]
    order = np.argsort(group, kind="stable")
    rows = rows[order]
    bounds = np.append(np.searchsorted(group[order], np.arange(len(first))), len(rows))
    return Groups(_names(frame, columns, rows[bounds[:-1]]), rows, bounds)


def _names(frame: "pd.DataFrame", columns: Sequence[str], rows: np.ndarray) -> list[tuple[str, ...]]:
    """The names of ``rows`` as text (a categorical's or a string column's alike)."""
    return list(zip(*[[str(v) for v in frame[c].iloc[rows].tolist()] for c in columns])) if len(rows) else []
