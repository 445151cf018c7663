"""The timeline of rocprofv3 CSV traces: ``kernel_trace.csv`` (kernels) and
``memory_copy_trace.csv`` (copies), given together, one rank per set. The kernel
reader is ``perfcheck.ingest.rocprofv3``.

Seen in real files (rocprofiler-sdk documentation, 2024 and 2025):

* Timestamps are integer ns (``Start_Timestamp``, ``End_Timestamp``).
* Agents are integers in 2024 (``1``) and ``"Agent 4"`` in 2025; the kernel's
  ``Agent_Id`` and a copy's device agent are the same numbering, so the number is
  the device id of both.
* A copy's ``Direction`` is ``MEMORY_COPY_HOST_TO_DEVICE``, ``..._DEVICE_TO_HOST``,
  ``..._DEVICE_TO_DEVICE`` or ``..._HOST_TO_HOST``; its device is the destination
  agent of a copy to a device, else the source agent. The files hold no byte
  counts (``bytes`` is missing) and no stream for kernels before 2025 (``Queue_Id``
  is used then: a queue is where a dispatch waits, the nearest thing to a stream).

``marker_api_trace.csv`` (``--marker-trace``) holds the ROCTx ranges. Its columns
are those of every API trace (``Domain``, ``Function``, ``Process_Id``,
``Thread_Id``, ``Correlation_Id``, ``Start_Timestamp``, ``End_Timestamp``; format
``rocprofv3-api-trace``); per the rocprofiler-sdk documentation (using-rocprofv3,
"Marker trace", 2024-2025):

* a range (``roctxRangePush``/``Pop``, ``roctxRangeStart``/``Stop``) is one row whose
  ``Function`` is the range's message, from its start to its end;
* a mark (``roctxMark``) is a row whose start equals its end: an instant, not a range;
* ROCTx's own calls appear under their function names (``roctxGetThreadId``) and
  ``MARKER_CONTROL_API`` / ``MARKER_NAME_API`` rows are profiler control and thread
  naming: none is a range;
* the domain of ranges is ``MARKER_CORE_API`` (ROCm 6.x) or ``MARKER_CORE_RANGE_API``
  (ROCm 7.x): any ``MARKER_CORE*`` domain counts.

Other API traces (``hip_api_trace.csv``) have no ROCTx rows: an empty timeline, with
a warning.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.ingest.rocprofv3 import TOOL
from perfcheck.ingest.tabular import read_csv, require_columns
from perfcheck.ingest.timeline import HOST, KERNEL, MEMCPY, TraceTimeline, activity_frame, range_frame, unusable_times
from perfcheck.model import Oddity, Source

KERNEL_TRACE, COPY_TRACE, API_TRACE = "rocprofv3-kernel-trace", "rocprofv3-memory-copy-trace", "rocprofv3-api-trace"
FORMATS = (KERNEL_TRACE, COPY_TRACE, API_TRACE)
# ROCTx's own API functions ("roctxGetThreadId", "roctxRangePushA"): calls, not messages.
_ROCTX_CALL = r"^roctx[A-Z]\w*$"
_DIRECTION = {"MEMORY_COPY_HOST_TO_DEVICE": "H2D", "MEMORY_COPY_DEVICE_TO_HOST": "D2H",
              "MEMORY_COPY_DEVICE_TO_DEVICE": "D2D", "MEMORY_COPY_HOST_TO_HOST": "H2H"}
_TIMES = ("Start_Timestamp", "End_Timestamp")


def _agent(values: pd.Series) -> pd.Series:
    """``1`` or ``"Agent 4"`` -> 1, 4."""
    return pd.to_numeric(values.astype("string").str.extract(r"(\d+)\s*$", expand=False), errors="coerce")


def _times(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    start = pd.to_numeric(frame["Start_Timestamp"], errors="coerce")
    end = pd.to_numeric(frame["End_Timestamp"], errors="coerce")
    bad = unusable_times(start, end)
    return start, end, bad


def _markers(path: Path, table: pd.DataFrame) -> TraceTimeline:
    """The ROCTx ranges of a marker (or any API) trace."""
    require_columns(path, list(table.columns), (*_TIMES, "Domain", "Function"), line=1)
    start, end, bad = _times(table)
    domain = table["Domain"].astype("string").str.strip()
    function = table["Function"].astype("string")
    marker = domain.str.startswith("MARKER_CORE").fillna(False).astype(bool)
    calls = function.str.fullmatch(_ROCTX_CALL).fillna(False).astype(bool)
    keep = marker & ~calls & ~bad & (end > start)
    oddities = []
    if (marker & bad).any():
        oddities.append(Oddity(str(path), "ROCTx row with a missing time or an end before its start left out",
                               int((marker & bad).sum())))
    if not keep.any():
        what = "marks only, no ROCTx ranges" if marker.any() else "no ROCTx ranges (not a --marker-trace file)"
        oddities.append(Oddity(str(path), what))
    rows = table[keep]
    thread = pd.to_numeric(rows["Thread_Id"], errors="coerce") if "Thread_Id" in rows else pd.NA
    ranges = range_frame({
        "name": function[keep].to_numpy(), "on": HOST,
        "thread": thread.to_numpy() if isinstance(thread, pd.Series) else thread,
        "start_ns": start[keep].to_numpy(dtype="int64"), "end_ns": end[keep].to_numpy(dtype="int64"),
    }, int(keep.sum()))
    activities = activity_frame({"kind": KERNEL, "start_ns": [], "end_ns": []}, 0)
    return TraceTimeline(activities=activities, ranges=ranges,
                         source=Source(path=str(path), format=API_TRACE, tool=TOOL), oddities=tuple(oddities))


def read(path: Path) -> TraceTimeline:
    table = read_csv(path)
    header = list(table.columns)
    if "Domain" in header and "Function" in header:
        return _markers(path, table)
    copies = "Direction" in header
    require_columns(path, header, (*_TIMES, "Direction", "Source_Agent_Id", "Destination_Agent_Id") if copies
                    else (*_TIMES, "Agent_Id", "Kernel_Name"), line=1)
    start, end, bad = _times(table)
    oddities = []
    if bad.any():
        oddities.append(Oddity(str(path), "row with a missing or impossible time, or an end before its start, left out",
                               int(bad.sum())))
    table, start, end = table[~bad], start[~bad], end[~bad]
    if copies:
        direction = table["Direction"].map(_DIRECTION)
        to_device = direction.isin(["H2D", "D2D"])
        device = _agent(table["Destination_Agent_Id"]).where(to_device, _agent(table["Source_Agent_Id"]))
        stream = table["Stream_Id"] if "Stream_Id" in table else pd.Series(np.nan, index=table.index)
        columns = {"kind": MEMCPY, "name": ("Memcpy " + direction.fillna("?")).to_numpy(),
                   "direction": direction.to_numpy()}
    else:
        device = _agent(table["Agent_Id"])
        stream = table["Stream_Id"] if "Stream_Id" in table else table.get("Queue_Id", pd.Series(np.nan, index=table.index))
        columns = {"kind": KERNEL, "name": table["Kernel_Name"].to_numpy()}
    activities = activity_frame({
        **columns,
        "device_id": device.to_numpy(),
        "stream_id": pd.to_numeric(stream, errors="coerce").to_numpy(),
        "start_ns": start.to_numpy(dtype="int64"),
        "end_ns": end.to_numpy(dtype="int64"),
    }, len(table))
    ranges = range_frame({"start_ns": [], "end_ns": []}, 0)
    format_name = COPY_TRACE if copies else KERNEL_TRACE
    return TraceTimeline(activities=activities, ranges=ranges, source=Source(path=str(path), format=format_name,
                                                                              tool=TOOL), oddities=tuple(oddities))
