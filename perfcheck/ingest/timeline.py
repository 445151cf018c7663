"""The program's timeline beside its kernels: what ran on each device and when
(kernels, memory copies, memsets), which kernels were communication, and the user's
ranges (NVTX, Kineto ``user_annotation`` / ``gpu_user_annotation``,
``ProfilerStep#N``), per rank, device and stream.

Read only when asked (a timeline metric, ``inspect --timeline``): the kernel path
(``read_profile``) never opens these tables, so its speed does not change. One
reader per format, each in its own module (``timeline_kineto``, ``timeline_nsys``,
``timeline_rocprofv3``, ``timeline_rocpd``, ``timeline_rocprof``);
this module holds the record and picks the reader.

Columns (base units; timestamps are integer ns on the file's own clock, comparable
within one file, never across files):

``activities``  one row per device activity
    ``kind`` (``kernel`` | ``memcpy`` | ``memset``), ``name``, ``comm`` (a
    communication kernel: NCCL/RCCL by name), ``rank``, ``device_id``,
    ``stream_id`` (Int64), ``start_ns``, ``end_ns`` (int64), ``bytes`` (float,
    NaN where the tool does not say), ``direction`` (``H2D`` | ``D2H`` | ``D2D`` |
    ``P2P`` | ``H2H``; missing for kernels, memsets and unknown copies).
``ranges``      one row per user range
    ``name`` (as written), ``group`` (the name without a trailing ``#N`` step
    counter, so ``ProfilerStep#7`` counts as ``ProfilerStep``), ``on`` (``host``:
    the CPU range; ``device``: its GPU projection, Kineto's gpu_user_annotation),
    ``rank``, ``device_id``, ``thread`` (Int64), ``start_ns``, ``end_ns``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.errors import InputError, PerfcheckError, UsageError
from perfcheck.model import Oddity, Source

if TYPE_CHECKING:
    import pandas as pd

KERNEL, MEMCPY, MEMSET = "kernel", "memcpy", "memset"
KINDS = (KERNEL, MEMCPY, MEMSET)
DIRECTIONS = ("H2D", "D2H", "D2D", "P2P", "H2H")
HOST, DEVICE = "host", "device"

ACTIVITY_COLUMNS = ("kind", "name", "comm", "rank", "device_id", "stream_id", "start_ns", "end_ns", "bytes",
                    "direction")
RANGE_COLUMNS = ("name", "group", "on", "rank", "device_id", "thread", "start_ns", "end_ns")

# Collective kernels of NCCL and of RCCL (which keeps NCCL's kernel names, e.g.
# ``ncclDevKernel_Generic``); HTA classifies communication by ``^nccl.*Kernel``
# (hta/utils/utils.py, 0.5.0). Names may carry the GNU ``void `` return type.
COMM_KERNEL = re.compile(r"^(?:void\s+)?[nr]ccl\w*Kernel", re.IGNORECASE)
# A step counter torch.profiler appends to a range name ("ProfilerStep#12").
_STEP_SUFFIX = re.compile(r"#\d+$")


@dataclass(frozen=True)
class Timeline:
    """The activities and ranges of one or several traces (ranks)."""

    activities: "pd.DataFrame"
    ranges: "pd.DataFrame"
    sources: tuple[Source, ...]
    oddities: tuple[Oddity, ...] = ()


# Tools count time in ns in a signed 64-bit integer from some zero (boot, epoch, session
# start): a time outside [0, 2**63) (-1e308, inf, a 20-digit number in a damaged file) is
# none, and casting it to int64 gave a garbage time and a numpy RuntimeWarning.
_CLOCK_END = 2.0**63


def unusable_times(start: "pd.Series", end: "pd.Series") -> "pd.Series":
    """Rows (numeric ``start``/``end``, NaN where missing) that are no interval on a
    clock: a time missing or outside the clock's range, or an end before the start."""
    inside = start.ge(0) & start.lt(_CLOCK_END) & end.ge(0) & end.lt(_CLOCK_END)
    return ~inside | (end < start)


def usable_rows(path: Path, rows: "pd.DataFrame", noun: str = "activity"
                ) -> "tuple[pd.DataFrame, pd.Series, pd.Series, list[Oddity]]":
    """``rows`` without those whose ``start``/``end`` are no interval (``unusable_times``),
    their numeric start and end, and the oddity that counts what was left out (none when
    every row is usable; ``noun``: what a row is, in that message)."""
    import pandas as pd

    start, end = pd.to_numeric(rows["start"], errors="coerce"), pd.to_numeric(rows["end"], errors="coerce")
    bad = unusable_times(start, end)
    if not bad.any():
        return rows, start, end, []
    left_out = Oddity(str(path), f"{noun} with a missing or impossible time, or an end before its start, left out",
                      int(bad.sum()))
    return rows[~bad].reset_index(drop=True), start[~bad], end[~bad], [left_out]


def activity_frame(columns: dict[str, object], size: int) -> "pd.DataFrame":
    """An activities frame with every column of ACTIVITY_COLUMNS in its dtype;
    ``columns`` gives those a reader knows (arrays or scalars)."""
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(index=pd.RangeIndex(size))
    names = pd.Series(columns.get("name", ""), index=frame.index, dtype="string")
    frame["kind"] = pd.Series(columns["kind"], index=frame.index, dtype="string")
    frame["name"] = names
    # each distinct name tested once: a trace has many launches of a few names
    codes, distinct = pd.factorize(names, use_na_sentinel=True)
    is_comm = np.array([COMM_KERNEL.search(str(n)) is not None for n in distinct] + [False], dtype=bool)
    comm = pd.Series(is_comm[codes], index=frame.index) & (frame["kind"] == KERNEL)
    frame["comm"] = comm.astype(bool)
    for column in ("rank", "device_id", "stream_id"):
        frame[column] = pd.Series(columns.get(column, pd.NA), index=frame.index).astype("Int64")
    for column in ("start_ns", "end_ns"):
        frame[column] = np.asarray(columns[column], dtype="int64") if size else np.zeros(0, dtype="int64")
    frame["bytes"] = pd.Series(columns.get("bytes", np.nan), index=frame.index, dtype="float64")
    frame["direction"] = pd.Series(columns.get("direction", pd.NA), index=frame.index, dtype="string")
    return frame


def range_frame(columns: dict[str, object], size: int) -> "pd.DataFrame":
    """A ranges frame with every column of RANGE_COLUMNS in its dtype."""
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(index=pd.RangeIndex(size))
    frame["name"] = pd.Series(columns.get("name", ""), index=frame.index, dtype="string")
    frame["group"] = frame["name"].str.replace(_STEP_SUFFIX, "", regex=True)
    frame["on"] = pd.Series(columns.get("on", HOST), index=frame.index, dtype="string")
    for column in ("rank", "device_id", "thread"):
        frame[column] = pd.Series(columns.get(column, pd.NA), index=frame.index).astype("Int64")
    for column in ("start_ns", "end_ns"):
        frame[column] = np.asarray(columns[column], dtype="int64") if size else np.zeros(0, dtype="int64")
    return frame


@dataclass(frozen=True)
class TraceTimeline:
    """What one reader returns for one file."""

    activities: "pd.DataFrame"
    ranges: "pd.DataFrame"
    source: Source
    oddities: tuple[Oddity, ...] = ()


TimelineReader = Callable[[Path], TraceTimeline]


def _readers() -> dict[str, TimelineReader]:
    from perfcheck.ingest import timeline_kineto, timeline_nsys, timeline_rocpd, timeline_rocprof, timeline_rocprofv3

    return {timeline_kineto.FORMAT: timeline_kineto.read, timeline_nsys.FORMAT: timeline_nsys.read,
            timeline_rocpd.FORMAT: timeline_rocpd.read, timeline_rocprof.FORMAT: timeline_rocprof.read,
            timeline_rocprof.JSON_FORMAT: timeline_rocprof.read_json,
            **dict.fromkeys(timeline_rocprofv3.FORMATS, timeline_rocprofv3.read)}


def timeline_formats() -> tuple[str, ...]:
    """The profile formats a timeline can be read from."""
    return tuple(_readers())


def read_timeline(paths: str | Path | Sequence[str | Path], format: str | None = None) -> Timeline:
    """The timeline of one or several traces (one per rank); a file's rank comes from
    the trace (Kineto's distributedInfo) or its name (``rank3``)."""
    import pandas as pd

    from perfcheck.ingest import detect, format_named, rank_from_path

    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise UsageError("no trace paths given")
    readers = _readers()
    activities: list[pd.DataFrame] = []
    ranges: list[pd.DataFrame] = []
    sources: list[Source] = []
    oddities: list[Oddity] = []
    for p in paths:
        path = Path(p)
        fmt = format_named(format, "profile") if format else detect(path, "profile")
        reader = readers.get(fmt.name)
        if reader is None:
            raise UsageError(f"{path}: a {fmt.name} profile holds no timeline perfcheck reads; "
                             f"timelines come from: {', '.join(readers)}")
        try:
            trace = reader(path)
        except PerfcheckError:
            raise
        except (ValueError, KeyError, IndexError, TypeError, sqlite3.Error) as exc:
            # malformed input a reader did not anticipate: located, never a traceback
            raise InputError(path, f"cannot read its timeline as {fmt.name} ({type(exc).__name__}: {exc})",
                             hint="check that the file is complete, or name another --format") from None
        rank = trace.source.rank if trace.source.rank is not None else rank_from_path(path)
        if rank is not None:
            trace.activities["rank"] = pd.array([rank] * len(trace.activities), dtype="Int64")
            trace.ranges["rank"] = pd.array([rank] * len(trace.ranges), dtype="Int64")
        activities.append(trace.activities)
        ranges.append(trace.ranges)
        sources.append(replace(trace.source, rank=rank))
        oddities.extend(trace.oddities)
    _same_clock(paths, activities)
    def joined(frames: "list[pd.DataFrame]") -> "pd.DataFrame":  # one file's frame is not copied
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    return Timeline(activities=joined(activities), ranges=joined(ranges),
                    sources=tuple(sources), oddities=tuple(oddities))


# Files of one rank (rocprofv3's kernel and copy traces) share the run's clock; two
# windows this far apart are two runs, and a span across them would be meaningless.
_APART_S = 1.0


def _same_clock(paths: Sequence[str | Path], activities: "list[pd.DataFrame]") -> None:
    """Refuse files of one rank whose activity windows lie far apart (not one run)."""
    import pandas as pd

    windows: dict[object, list[tuple[str, int, int]]] = {}
    for path, frame in zip(paths, activities):
        if frame.empty:
            continue
        rank = frame["rank"].iloc[0]
        key = None if rank is None or rank is pd.NA else int(rank)  # type: ignore[call-overload]
        windows.setdefault(key, []).append((str(path), int(frame["start_ns"].min()), int(frame["end_ns"].max())))
    for rank, spans in windows.items():
        spans.sort(key=lambda w: w[1])
        for (a, a0, a1), (b, b0, b1) in zip(spans, spans[1:]):
            gap = b0 - max(a1, a0)
            if gap > 1e9 * _APART_S and gap > 10 * ((a1 - a0) + (b1 - b0)):
                raise InputError(Path(b), f"its activities start {gap * 1e-9:.4g} s after those of {a} end "
                                 f"(rank {'unknown' if rank is None else rank}): not the same run's clock",
                                 hint="give the files of one run together, and others in separate commands "
                                      "(a rank per file: name them rank0..., or record distributedInfo)")
