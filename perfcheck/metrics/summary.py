"""Per-kernel summary of a dispatch table, computed chunk by chunk.

Only the columns the summary needs are kept from each chunk (a kernel code and
a duration per dispatch, plus per-chunk maxima of launch resources), so a
10-million-dispatch trace is summarised in a few hundred MB whatever its width.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from perfcheck.errors import UsageError
from perfcheck.ingest.formats import Grouped, Want

if TYPE_CHECKING:
    from perfcheck.arch import Target

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


def metrics_want() -> Want:
    """What the summary needs when it also derives work and occupancy: its own
    columns plus every raw counter a work formula may use."""
    from perfcheck.arch.occupancy import WANT as occupancy_want
    from perfcheck.metrics.counters import wanted

    # grouped: the summary takes each distinct launch configuration once, with its
    # dispatches' durations (ingest.formats.Grouped), where a reader can give that.
    return replace(SUMMARY_WANT | wanted() | occupancy_want, grouped=True)


class _Work:
    """Per-kernel sums of the per-dispatch quantities ``metrics.counters.work`` derives,
    and the worst theoretical occupancy. Partial sums per chunk, combined at the end.

    For each quantity q a kernel gets ``q`` (mean per dispatch over the dispatches
    that have it) and ``q_rate`` (sum of q / sum of duration over the dispatches
    that have both: a duration-weighted rate, not a mean of per-dispatch rates).
    """

    def __init__(self, target: "Target | None") -> None:
        self._target = target
        self._parts: list[pd.DataFrame] = []
        self._occupancy: list[pd.DataFrame] = []
        self._achieved: list[pd.DataFrame] = []
        # (occupancy inputs..., kernel code) combinations already computed: a file's
        # chunks repeat the same few hundred, and the worst per kernel is the first
        # minimum, which a repeat of an earlier combination never is.
        self._occupancy_seen: set[tuple] = set()

    def add(self, chunk: pd.DataFrame, codes: np.ndarray, duration: np.ndarray, weight: np.ndarray) -> None:
        """``weight`` is how many dispatches a row stands for (1, or calls for kernel-level rows,
        whose quantities are means per dispatch and whose ``duration`` is the total)."""
        from perfcheck.metrics.counters import work

        from perfcheck.metrics.counters import INTENSIVE

        quantities = work(chunk, self._target)
        # Intensive quantities (achieved occupancy, latencies): the mean over the
        # dispatches that have one, never a sum or a rate.
        for name in [q for q in INTENSIVE if q in quantities.columns]:
            values = quantities.pop(name)
            frame = pd.DataFrame({"_code": codes, f"{name}__v": values.to_numpy(dtype="float64", na_value=np.nan) * weight,
                                  f"{name}__w": np.where(values.notna(), weight, 0)})
            self._achieved.append(frame.fillna({f"{name}__v": 0.0}).groupby("_code").sum())
        columns: dict[str, np.ndarray] = {"_code": codes}
        has_duration = ~np.isnan(duration)
        for name in quantities.columns:
            q = quantities[name].to_numpy(dtype="float64", na_value=np.nan)
            known = ~np.isnan(q)
            both = known & has_duration
            columns[f"{name}__sum"] = np.where(known, q * weight, 0.0)
            columns[f"{name}__n"] = np.where(known, weight, 0)
            columns[f"{name}__rq"] = np.where(both, q * weight, 0.0)
            columns[f"{name}__rd"] = np.where(both, duration, 0.0)
        if len(columns) > 1:
            self._parts.append(pd.DataFrame(columns).groupby("_code").sum())
        self.add_occupancy(chunk, codes)

    def needs_dispatches(self, rows: pd.DataFrame) -> bool:
        """Whether the launch configurations ``rows`` carry counters that make
        per-dispatch quantities (their sums must be taken dispatch by dispatch to
        stay what they are, so a grouped chunk is then expanded)."""
        from perfcheck.metrics.counters import work

        return len(work(rows, self._target).columns) > 0

    def add_occupancy(self, chunk: pd.DataFrame, codes: np.ndarray) -> None:
        """The worst theoretical occupancy per kernel code of ``chunk``'s rows (one
        row per dispatch, or per distinct launch configuration: the same result)."""
        if self._target is not None:
            from perfcheck.arch.occupancy import WANT as OCCUPANCY_INPUTS
            from perfcheck.arch.occupancy import occupancy_table

            # Occupancy is a function of a few launch resources, which repeat from
            # dispatch to dispatch of a kernel: computed once per distinct combination.
            inputs = [c for c in sorted(OCCUPANCY_INPUTS.columns or ()) if c in chunk.columns]
            if inputs:
                combinations = chunk[inputs].assign(_code=codes)
                distinct = ~combinations.duplicated().to_numpy()
                keys = list(combinations[distinct].itertuples(index=False, name=None))
                distinct[distinct] = [key not in self._occupancy_seen for key in keys]
                self._occupancy_seen.update(keys)
                if not distinct.any():
                    return
            else:
                distinct = np.ones(len(chunk), bool)
            occupancy = occupancy_table(self._target.arch, chunk[distinct])
            if occupancy["occupancy_pct"].notna().any():
                occupancy = occupancy.assign(_code=codes[distinct]).dropna(subset=["occupancy_pct"]).reset_index(drop=True)
                worst = occupancy.loc[occupancy.groupby("_code")["occupancy_pct"].idxmin()]
                self._occupancy.append(worst.set_index("_code"))

    def frame(self) -> pd.DataFrame:
        table = pd.DataFrame()
        if self._parts:
            sums = pd.concat(self._parts).groupby(level=0).sum()
            names = sorted({c.rsplit("__", 1)[0] for c in sums.columns})
            out = {}
            for name in names:
                n = sums[f"{name}__n"]
                out[name] = (sums[f"{name}__sum"] / n).where(n > 0)
                rd = sums[f"{name}__rd"]
                out[f"{name}_rate"] = (sums[f"{name}__rq"] / rd).where(rd > 0)
            table = pd.DataFrame(out)
        if self._achieved:
            achieved = pd.concat(self._achieved).groupby(level=0).sum(min_count=1)
            for name in sorted({c.rsplit("__", 1)[0] for c in achieved.columns}):
                v, w = achieved[f"{name}__v"], achieved[f"{name}__w"].fillna(0)
                table = table.join((v / w).where(w > 0).rename(name), how="outer")
        if self._occupancy:
            rows = pd.concat(self._occupancy).reset_index()
            worst = rows.loc[rows.groupby("_code")["occupancy_pct"].idxmin()].set_index("_code")
            table = table.join(worst, how="outer")
        return table


# At most this many (kernel, chunk) runs are joined by slicing (a Python object each,
# about a microsecond: 25,000 at 10M dispatches of 500 kernels in 50 chunks); more,
# and every dispatch is sorted at the end instead (the same array, 0.9 s at 10M).
_JOINED_RUNS = 200_000


@dataclass(frozen=True)
class _Piece:
    """A chunk's valid durations sorted by kernel code (stably), and its runs: the
    code of each run's kernel, where the run starts and its length."""

    durations: np.ndarray
    kernels: np.ndarray
    first: np.ndarray
    lengths: np.ndarray


class KernelSummary:
    """Accumulates chunks; ``frame()`` gives one row per kernel.

    With ``work=True`` it also derives, chunk by chunk, the per-dispatch quantities
    of ``metrics.counters`` (bytes per memory level, FLOPs, instructions, achieved
    occupancy) and, when ``target`` is known, the theoretical occupancy.
    """

    def __init__(self, target: "Target | None" = None, *, work: bool = False) -> None:
        self._codes: dict[str, int] = {}
        self._kernel_codes: list[np.ndarray] = []
        self._durations: list[np.ndarray] = []
        self._resources: list[pd.DataFrame] = []
        self._aggregates: list[pd.DataFrame] = []
        self._work = _Work(target) if work else None
        self._sorted: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        # Per chunk, its valid durations sorted by kernel code: the one sort of
        # ``_by_kernel``, done chunk by chunk as they come (while the SQLite readers'
        # threads read the next ranges) and joined at the end; None past
        # ``_JOINED_RUNS`` runs (then every dispatch is sorted at the end).
        self._pieces: list[_Piece] | None = []
        self._run_count = 0
        # The codes of the last chunk's kernel categories (see _encode).
        self._last_codes: tuple[pd.CategoricalDtype, np.ndarray] | None = None

    def _dispatches(self, codes: np.ndarray, durations: np.ndarray) -> None:
        """Keep a chunk's dispatches: kernel codes (int32) and durations (s, NaN for none)."""
        self._kernel_codes.append(codes)
        self._durations.append(durations)
        if self._pieces is None:
            return
        valid = ~np.isnan(durations)
        if not valid.all():  # (no copy in the usual case)
            codes, durations = codes[valid], durations[valid]
        # A stable sort of 16-bit keys is a radix sort in numpy, of 32-bit ones a merge sort.
        order = np.argsort(codes.astype(np.int16) if len(self._codes) < 2**15 else codes, kind="stable")
        ordered = codes[order]
        # The chunk's runs of kernels: where each starts among its sorted durations.
        first = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]])) if len(ordered) else order[:0]
        self._pieces.append(_Piece(durations[order], ordered[first].astype(np.int64), first,
                                   np.diff(first, append=len(ordered))))
        self._run_count += len(first)
        if self._run_count > _JOINED_RUNS:  # runs of a few dispatches each (very many kernels)
            self._pieces = None

    def _encode(self, kernels: pd.Series) -> np.ndarray:
        dtype = kernels.dtype
        if isinstance(dtype, pd.CategoricalDtype) and self._last_codes is not None and self._last_codes[0] is dtype:
            # The last chunk's categories (the same dtype object: see
            # ingest.dispatch._LAST_CLEANED): each category's code, -1 where none is
            # given yet, the last one for a missing name ("<unnamed>").
            by_category = self._last_codes[1]
            category = kernels.cat.codes.to_numpy()
            codes = by_category[np.where(category >= 0, category, len(by_category) - 1)]
            if (codes >= 0).all():
                return codes
        codes = self._encode_each(kernels)
        if isinstance(dtype, pd.CategoricalDtype):
            by_category = np.array([self._codes.get(str(c), -1) for c in dtype.categories] +
                                   [self._codes.get("<unnamed>", -1)], dtype=np.int64)
            self._last_codes = (dtype, by_category)
        return codes

    def _encode_each(self, kernels: pd.Series) -> np.ndarray:
        if isinstance(kernels.dtype, pd.CategoricalDtype) and "<unnamed>" not in kernels.cat.categories:
            # Dictionary-encoded names (streamed traces): the fill below must be a category.
            kernels = kernels.cat.add_categories("<unnamed>")
        local, uniques = pd.factorize(kernels.fillna("<unnamed>"))
        mapping = np.array([self._codes.setdefault(str(u), len(self._codes)) for u in uniques], dtype=np.int64)
        return mapping[local]

    def add(self, chunk: "pd.DataFrame | Grouped") -> None:
        """Add a chunk of a dispatch table or of a kernel-level statistics table, or a
        grouped chunk (``ingest.formats.Grouped``)."""
        self._sorted = None  # sorted again when asked for
        if isinstance(chunk, Grouped):
            if not self._add_grouped(chunk):
                self.add(chunk.frame())
            return
        if chunk.empty:
            return
        codes = self._encode(chunk["kernel"])
        if "calls" in chunk.columns:
            keep = ["calls", *(c for c in chunk.columns if c.startswith("duration_"))]
            part = chunk[keep].copy()
            part["_code"] = codes
            self._aggregates.append(part)
            if self._work is not None:
                calls = chunk["calls"].to_numpy(dtype="float64", na_value=0.0)
                total = (
                    chunk["duration_total"].to_numpy(dtype="float64", na_value=np.nan)
                    if "duration_total" in chunk.columns
                    else np.full(len(chunk), np.nan)
                )
                self._work.add(chunk, codes, total, calls)
            return
        if self._work is not None and ("duration" not in chunk.columns or chunk["duration"].isna().all()):
            # ncu runs without gpu__time_duration still time each kernel in
            # elapsed cycles at a known cycle rate (the NERSC roofline metric set).
            from perfcheck.metrics.counters import cycles_duration

            derived = cycles_duration(chunk)
            if derived is not None:
                chunk = chunk.assign(duration=derived)
        if "duration" in chunk.columns:
            duration = chunk["duration"].to_numpy(dtype="float64", na_value=np.nan)
        else:
            duration = np.full(len(chunk), np.nan)
        self._dispatches(codes.astype(np.int32), duration)
        if self._work is not None:
            self._work.add(chunk, codes, duration, np.ones(len(chunk)))
        present = [c for c in RESOURCES if c in chunk.columns]
        if present:
            # assign: a new frame (chunk stays as it is), and no SettingWithCopyWarning
            # on pandas 2, where a column selection may be a view
            part = chunk[present].assign(_code=codes)
            self._resources.append(part.groupby("_code", sort=False).max())

    def _add_grouped(self, chunk: Grouped) -> bool:
        """A grouped chunk without a frame per dispatch: kernel codes per configuration
        row, spread to the dispatches by their row numbers; resources and occupancy
        per configuration row. False (nothing added) when it needs the per-dispatch
        path: counters to sum per dispatch, or no measured duration (ncu's cycles)."""
        if not len(chunk):
            return True
        rows = chunk.rows
        duration = chunk.series.get("duration")
        if self._work is not None and (duration is None or bool(np.isnan(duration).all()) or self._work.needs_dispatches(rows)):
            return False
        row_codes = self._encode(rows["kernel"])
        self._dispatches(row_codes.astype(np.int32)[chunk.group],
                         np.asarray(duration, dtype="float64") if duration is not None else np.full(len(chunk), np.nan))
        if self._work is not None:
            self._work.add_occupancy(rows, row_codes)
        present = [c for c in RESOURCES if c in rows.columns]
        if present:
            self._resources.append(rows[present].assign(_code=row_codes).groupby("_code", sort=False).max())
        return True

    def _from_aggregates(self) -> pd.DataFrame:
        """Kernel-level statistics: sums and extremes combine; a median cannot be
        recovered from them, so ``duration`` is left empty unless a kernel ran once."""
        rows = pd.concat(self._aggregates, ignore_index=True)
        grouped = rows.groupby("_code", sort=True)
        # min_count=1: a kernel whose call counts are all missing has no count (not 0
        # calls), and then no mean either (not total / 0 = inf).
        table = pd.DataFrame({"calls": grouped["calls"].sum(min_count=1)})
        table["duration_total"] = grouped["duration_total"].sum(min_count=1) if "duration_total" in rows else np.nan
        calls = table["calls"].astype("float64")
        table["duration_mean"] = (table["duration_total"] / calls).where(calls > 0)
        table["duration_min"] = grouped["duration_min"].min() if "duration_min" in rows else np.nan
        table["duration_max"] = grouped["duration_max"].max() if "duration_max" in rows else np.nan
        single = table["calls"] == 1
        table["duration"] = table["duration_mean"].where(single)
        return table[["calls", "duration", "duration_mean", "duration_min", "duration_max", "duration_total"]]

    def duration_samples(self) -> dict[str, np.ndarray]:
        """Per-kernel durations (s) of every dispatch with a valid one, in file order:
        the samples that noise-aware baseline comparisons work on. Empty for
        kernel-level statistics files, which hold no samples."""
        if not self._kernel_codes:
            return {}
        names = list(self._codes)
        kernels, durations, ends = self._by_kernel()
        return {names[int(k)]: durations[a:b] for k, a, b in zip(kernels, ends - self._runs(ends), ends)}

    @staticmethod
    def _runs(ends: np.ndarray) -> np.ndarray:
        """Lengths of the kernels' runs that end at ``ends``."""
        return np.diff(ends, prepend=0)

    def _by_kernel(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The codes of the kernels with a duration (ascending), the durations of every
        dispatch with one sorted by code (stably: each kernel's in file order), and
        where each kernel's run ends; for the medians, extremes and the duration
        samples. Each chunk was sorted as it came (``_dispatches``); here each kernel's
        runs in the chunks are joined in chunk order, which is the stable sort of the
        whole: the same array without a sort of every dispatch at the end (0.9 s of
        CPU at 10M dispatches, which now overlaps the SQLite readers' threads)."""
        if self._sorted is None:
            if self._pieces is not None:
                pieces = self._pieces
                kernel_of = np.concatenate([p.kernels for p in pieces] or [np.zeros(0, dtype=np.int64)])
                lengths = np.concatenate([p.lengths for p in pieces] or [np.zeros(0, dtype=np.int64)])
                total = np.zeros(len(self._codes), dtype=np.int64)
                np.add.at(total, kernel_of, lengths)
                # Kernel-major, and within a kernel in chunk order (the runs are listed
                # chunk by chunk, and the sort is stable).
                order = np.argsort(kernel_of, kind="stable")
                chunk_of = np.concatenate([np.full(len(p.kernels), i) for i, p in enumerate(pieces)] or [order])[order]
                first = np.concatenate([p.first for p in pieces] or [order])[order]
                joined = np.concatenate([pieces[c].durations[a:a + n] for c, a, n in
                                         zip(chunk_of.tolist(), first.tolist(), lengths[order].tolist())] or [np.zeros(0)])
            else:  # past _JOINED_RUNS runs (a file of very many kernels): one sort of all
                codes = np.concatenate(self._kernel_codes)
                durations = np.concatenate(self._durations)
                self._kernel_codes, self._durations = [codes], [durations]
                valid = ~np.isnan(durations)
                if not valid.all():
                    codes, durations = codes[valid], durations[valid]
                narrow = codes.astype(np.int16) if len(self._codes) < 2**15 else codes
                joined = durations[np.argsort(narrow, kind="stable")]
                total = np.bincount(codes, minlength=len(self._codes)).astype(np.int64)
            kernels = np.flatnonzero(total)
            ends = np.cumsum(total[kernels])
            # The joined runs stand for every chunk so far (a chunk added later joins them).
            self._pieces = [_Piece(joined, kernels.astype(np.int64), ends - total[kernels], total[kernels])]
            self._run_count = len(kernels)
            self._sorted = (kernels, joined, ends)
        return self._sorted

    def _medians(self) -> pd.Series:
        """The exact median duration per kernel code (those with one): what pandas'
        groupby median gives (the middle value, or the mean of the two middle ones),
        from the one sort of ``_by_kernel`` and a selection per kernel, where pandas
        sorted every kernel's durations again (2.8 s of 10M dispatches)."""
        kernels, durations, ends = self._by_kernel()
        values = [float(np.median(durations[a:b])) for a, b in zip(ends - self._runs(ends), ends)]
        return pd.Series(values, index=kernels.astype(np.int64), dtype="float64")

    def _extremes(self) -> tuple[pd.Series, pd.Series]:
        """The shortest and longest duration per kernel code (those with one), from the
        sorted runs of ``_by_kernel``: exact whatever the order, and one pass each where
        pandas' groupby took two more over the dispatches."""
        kernels, durations, ends = self._by_kernel()
        if not len(kernels):
            return pd.Series([], dtype="float64"), pd.Series([], dtype="float64")
        index = kernels.astype(np.int64)
        starts = ends - self._runs(ends)
        return (pd.Series(np.minimum.reduceat(durations, starts), index=index, dtype="float64"),
                pd.Series(np.maximum.reduceat(durations, starts), index=index, dtype="float64"))

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
            # Grouped by a categorical of the codes: pandas takes them as group numbers
            # as they are, where integers would be hashed first (half the time at 10M
            # dispatches; the same groups in the same order, the same numbers).
            key = pd.Categorical.from_codes(codes, categories=pd.RangeIndex(len(names)))
            # Sums and means stay pandas' over the dispatches in file order (its sums
            # depend on how the kernels' dispatches interleave: over the sorted runs they
            # differ in the last digit); counts come from one bincount, extremes and
            # medians from the sorted runs.
            grouped = pd.DataFrame({"code": key, "d": durations}, copy=False).groupby("code", sort=True, observed=True)["d"]
            mean, total = grouped.mean(), grouped.sum(min_count=1)
            # The groupby's arrays go before the runs are joined: not held at once.
            del grouped, key
            calls = np.bincount(codes, minlength=len(names))
            present = pd.Index(np.flatnonzero(calls).astype(np.int64), name="code")  # the groupby's (observed) groups
            shortest, longest = self._extremes()
            table = pd.DataFrame(
                {
                    "calls": calls[present.to_numpy()].astype(np.int64),
                    "duration_mean": mean.to_numpy(),
                    "duration_min": shortest.reindex(present).to_numpy(),
                    "duration_max": longest.reindex(present).to_numpy(),
                    "duration_total": total.to_numpy(),
                },
                index=present,
            )
            table.insert(1, "duration", self._medians().reindex(table.index).to_numpy())
        if self._resources:
            resources = pd.concat(self._resources).groupby(level=0).max()
            table = table.join(resources)
        if self._work is not None:
            work = self._work.frame()
            if not work.empty:
                table = table.join(work)
        table.insert(0, "kernel", names[table.index.to_numpy()])
        table = table.sort_values(["duration_total", "calls"], ascending=[False, False], na_position="last", kind="stable")
        return table.reset_index(drop=True)


def summarise(chunks: Iterable[pd.DataFrame]) -> pd.DataFrame:
    summary = KernelSummary()
    for chunk in chunks:
        summary.add(chunk)
    return summary.frame()
