"""Per-kernel spread over MPI ranks, for profiles that hold several ranks.

For each kernel, the time it ran on each rank (the sum of its dispatch durations
there) is compared across the ranks that ran it:

=====================  ====  ======================================================
column                 unit  meaning
=====================  ====  ======================================================
``ranks``              count ranks that ran the kernel
``rank_duration_min``  s     least time one rank spent in the kernel
``rank_duration_median`` s   median over those ranks
``rank_duration_max``  s     most time one rank spent in the kernel
``rank_imbalance``           max / mean over those ranks: 1 is perfect balance,
                             1.6 means the slowest rank took 60% longer than the
                             average one (the others wait for it at the next
                             synchronisation)
=====================  ====  ======================================================

Ranks that never launched a kernel are not counted as zero: a kernel only some
ranks run (I/O, rank 0's reductions) is not by itself an imbalance; ``ranks`` says
how many ran it. Nothing is added for a profile of fewer than two ranks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcheck.ingest.formats import Grouped

COLUMNS = ("ranks", "rank_duration_min", "rank_duration_median", "rank_duration_max", "rank_imbalance")


class RankSpread:
    """Accumulates (kernel, rank) time chunk by chunk; ``attach`` adds the columns."""

    def __init__(self) -> None:
        self._parts: list[pd.Series] = []

    def add(self, chunk: "pd.DataFrame | Grouped") -> None:
        if isinstance(chunk, Grouped):
            if "rank" not in chunk.rows.columns:
                return  # nothing to spread: no frame per dispatch needed
            chunk = chunk.frame()
        if chunk.empty or "rank" not in chunk.columns or "duration" not in chunk.columns or "kernel" not in chunk.columns:
            return
        part = pd.DataFrame({
            "kernel": chunk["kernel"].astype("string"),
            "rank": pd.array(chunk["rank"], dtype="Int64"),
            "d": chunk["duration"].astype("float64"),
        }).dropna()
        if len(part):
            self._parts.append(part.groupby(["kernel", "rank"], sort=False)["d"].sum())

    def frame(self) -> pd.DataFrame:
        """One row per kernel (index: kernel name) with ``COLUMNS``; empty for < 2 ranks."""
        if not self._parts:
            return pd.DataFrame(columns=list(COLUMNS))
        per_rank = pd.concat(self._parts).groupby(level=[0, 1], sort=False).sum()
        if per_rank.index.get_level_values(1).nunique() < 2:
            return pd.DataFrame(columns=list(COLUMNS))
        grouped = per_rank.groupby(level=0, sort=False)
        table = pd.DataFrame({
            "ranks": grouped.size(),
            "rank_duration_min": grouped.min(),
            "rank_duration_median": grouped.median(),
            "rank_duration_max": grouped.max(),
        })
        mean = grouped.mean()
        with np.errstate(divide="ignore", invalid="ignore"):
            table["rank_imbalance"] = (table["rank_duration_max"] / mean).where(mean > 0)
        table.index = table.index.astype(str)
        return table

    def attach(self, kernels: pd.DataFrame) -> pd.DataFrame:
        """``kernels`` (the per-kernel summary, with a ``kernel`` column) with the rank
        columns joined by kernel name; unchanged when there is no spread to report."""
        spread = self.frame()
        if spread.empty or "kernel" not in kernels.columns:
            return kernels
        joined = spread.reindex(kernels["kernel"].astype(str).to_numpy())
        joined.index = kernels.index
        out = kernels.copy()
        for column in COLUMNS:
            out[column] = joined[column].astype("float64")
        return out
