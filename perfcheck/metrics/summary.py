"""Per-kernel summary of a dispatch table, computed chunk by chunk.

Only the columns the summary needs are kept from each chunk (a kernel code and
a duration per dispatch, plus per-chunk maxima of launch resources), so a
10-million-dispatch trace is summarised in a few hundred MB whatever its width.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from perfcheck.errors import UsageError
from perfcheck.ingest.formats import Want

# Launch resources reported per kernel. A kernel's register and scratch figures
# are properties of its code object and do not vary between dispatches; LDS can
# (dynamic shared memory) and the grid does, so the maximum is reported: the
# worst case is what limits occupancy.
RESOURCES = (
    "vgpr",
    "agpr",
    "sgpr",
    "registers",
    "lds_per_workgroup",
    "scratch_per_thread",
    "workgroup_size",
    "grid_size",
)

SUMMARY_WANT = Want(
    frozenset(
        {"kernel", "duration", "start_ns", "end_ns", "rank", *RESOURCES,
         "calls", "duration_total", "duration_mean", "duration_min", "duration_max"}
    )
)


class KernelSummary:
    """Accumulates chunks; ``frame()`` gives one row per kernel."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self._kernel_codes: list[np.ndarray] = []
        self._durations: list[np.ndarray] = []
        self._resources: list[pd.DataFrame] = []
        self._aggregates: list[pd.DataFrame] = []

    def _encode(self, kernels: pd.Series) -> np.ndarray:
        if isinstance(kernels.dtype, pd.CategoricalDtype) and "<unnamed>" not in kernels.cat.categories:
            # Dictionary-encoded names (streamed traces): the fill below must be a category.
            kernels = kernels.cat.add_categories("<unnamed>")
        local, uniques = pd.factorize(kernels.fillna("<unnamed>"))
        mapping = np.array([self._codes.setdefault(str(u), len(self._codes)) for u in uniques], dtype=np.int64)
        return mapping[local]

    def add(self, chunk: pd.DataFrame) -> None:
        """Add a chunk of a dispatch table or of a kernel-level statistics table."""
        if chunk.empty:
            return
        codes = self._encode(chunk["kernel"])
        if "calls" in chunk.columns:
            part = chunk.drop(columns=["kernel"]).copy()
            part["_code"] = codes
            self._aggregates.append(part)
            return
        self._kernel_codes.append(codes.astype(np.int32))
        if "duration" in chunk.columns:
            self._durations.append(chunk["duration"].to_numpy(dtype="float64", na_value=np.nan))
        else:
            self._durations.append(np.full(len(chunk), np.nan))
        present = [c for c in RESOURCES if c in chunk.columns]
        if present:
            part = chunk[present]  # a new frame: adding _code leaves chunk alone
            part["_code"] = codes
            self._resources.append(part.groupby("_code", sort=False).max())

    def _from_aggregates(self) -> pd.DataFrame:
        """Kernel-level statistics: sums and extremes combine; a median cannot be
        recovered from them, so ``duration`` is left empty unless a kernel ran once."""
        rows = pd.concat(self._aggregates, ignore_index=True)
        grouped = rows.groupby("_code", sort=True)
        table = pd.DataFrame({"calls": grouped["calls"].sum()})
        table["duration_total"] = grouped["duration_total"].sum(min_count=1) if "duration_total" in rows else np.nan
        table["duration_mean"] = table["duration_total"] / table["calls"].astype("float64")
        table["duration_min"] = grouped["duration_min"].min() if "duration_min" in rows else np.nan
        table["duration_max"] = grouped["duration_max"].max() if "duration_max" in rows else np.nan
        single = table["calls"] == 1
        table["duration"] = table["duration_mean"].where(single)
        return table[["calls", "duration", "duration_mean", "duration_min", "duration_max", "duration_total"]]

    def frame(self) -> pd.DataFrame:
        names = np.array(list(self._codes), dtype=object)
        if not len(names):
            return pd.DataFrame(columns=["kernel", "calls", "duration", "duration_mean", "duration_min", "duration_max", "duration_total"])
        if self._aggregates and self._kernel_codes:
            raise UsageError(
                "cannot summarise per-dispatch profiles together with per-kernel statistics files; "
                "inspect them separately"
            )
        if self._aggregates:
            table = self._from_aggregates()
        else:
            codes = np.concatenate(self._kernel_codes)
            durations = np.concatenate(self._durations)
            # Keep only the joined arrays (and let groupby use them uncopied): at 10M
            # dispatches this halves the memory and time of the summary's last step.
            self._kernel_codes, self._durations = [codes], [durations]
            grouped = pd.DataFrame({"code": codes, "d": durations}, copy=False).groupby("code", sort=True)["d"]
            table = pd.DataFrame(
                {
                    "calls": grouped.size(),
                    "duration": grouped.median(),
                    "duration_mean": grouped.mean(),
                    "duration_min": grouped.min(),
                    "duration_max": grouped.max(),
                    "duration_total": grouped.sum(min_count=1),
                }
            )
        if self._resources:
            resources = pd.concat(self._resources).groupby(level=0).max()
            table = table.join(resources)
        table.insert(0, "kernel", names[table.index.to_numpy()])
        table = table.sort_values(["duration_total", "calls"], ascending=[False, False], na_position="last", kind="stable")
        return table.reset_index(drop=True)


def summarise(chunks: Iterable[pd.DataFrame]) -> pd.DataFrame:
    summary = KernelSummary()
    for chunk in chunks:
        summary.add(chunk)
    return summary.frame()
