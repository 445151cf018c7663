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
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.ingest.rocprofv3 import TOOL
from perfcheck.ingest.tabular import read_csv, require_columns
from perfcheck.ingest.timeline import KERNEL, MEMCPY, TraceTimeline, activity_frame, range_frame, unusable_times
from perfcheck.model import Oddity, Source

KERNEL_TRACE, COPY_TRACE = "rocprofv3-kernel-trace", "rocprofv3-memory-copy-trace"
FORMATS = (KERNEL_TRACE, COPY_TRACE)
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


def read(path: Path) -> TraceTimeline:
    table = read_csv(path)
    header = list(table.columns)
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
