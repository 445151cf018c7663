"""The timeline of a rocpd database (rocprofv3's SQLite output, ROCm 7): kernels,
memory copies and ROCTx ranges. The kernel reader is ``perfcheck.ingest.rocpd``
(see there for the layout); this one reads the base views without their GUID suffix
(``rocpd_kernel_dispatch``, ``rocpd_memory_copy``, ``rocpd_region``, ...), joined
on ``id`` and ``guid`` as rocprofv3's own ``kernels`` view joins them, opened
read-only.

* The device of a kernel is its agent's ``type_index``: the GPU's index among the
  node's GPUs, which is the HIP device ordinal (agents 0-1 are CPUs and 2-9 GPUs
  0-7 in an 8x MI300X run).
* A copy's direction comes from its source and destination agents' types (CPU or
  GPU; two GPUs: D2D on one, P2P between two); its device is the GPU end (the
  destination when both are GPUs); ``size`` is its bytes.
* User ranges are regions whose event category starts with ``MARKER`` (ROCTx
  push/pop and start/stop); the other regions are HIP/HSA API calls, not ranges.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.rocpd import FORMAT, TOOL
from perfcheck.ingest.sqlitefile import connect_read_only, query_frame, table_names
from perfcheck.ingest.timeline import HOST, KERNEL, MEMCPY, TraceTimeline, activity_frame, range_frame, usable_rows
from perfcheck.model import Oddity, Source

__all__ = ["FORMAT", "read"]

_KERNELS = """
SELECT K.start, K."end", A.type_index, K.stream_id, S.display_name
FROM rocpd_kernel_dispatch AS K
JOIN rocpd_info_agent AS A ON A.id = K.agent_id AND A.guid = K.guid
LEFT JOIN rocpd_info_kernel_symbol AS S ON S.id = K.kernel_id AND S.guid = K.guid
"""
_COPIES = """
SELECT M.start, M."end", M.size, M.stream_id, SRC.type, SRC.type_index, DST.type, DST.type_index
FROM rocpd_memory_copy AS M
LEFT JOIN rocpd_info_agent AS SRC ON SRC.id = M.src_agent_id AND SRC.guid = M.guid
LEFT JOIN rocpd_info_agent AS DST ON DST.id = M.dst_agent_id AND DST.guid = M.guid
"""
_MARKERS = """
SELECT R.start, R."end", R.tid, N.string
FROM rocpd_region AS R
JOIN rocpd_event AS E ON E.id = R.event_id AND E.guid = R.guid
JOIN rocpd_string AS C ON C.id = E.category_id AND C.guid = E.guid
LEFT JOIN rocpd_string AS N ON N.id = R.name_id AND N.guid = R.guid
WHERE C.string LIKE 'MARKER%'
"""
_NEEDED = ("rocpd_kernel_dispatch", "rocpd_info_agent", "rocpd_info_kernel_symbol", "rocpd_memory_copy",
           "rocpd_region", "rocpd_event", "rocpd_string")


def read(path: Path) -> TraceTimeline:
    try:
        with closing(connect_read_only(path)) as connection:
            missing = [t for t in _NEEDED if t not in table_names(connection)]
            if missing:
                raise InputError(path, f"rocpd database without {', '.join(missing)}",
                                 hint="is it complete? rocprofv3 writes these views in every rocpd file")
            kernels = query_frame(connection, _KERNELS, ["start", "end", "device", "stream", "name"])
            copies = query_frame(connection, _COPIES, ["start", "end", "bytes", "stream", "src", "src_index", "dst",
                                                   "dst_index"])
            markers = query_frame(connection, _MARKERS, ["start", "end", "thread", "name"])
    except sqlite3.Error as exc:
        raise InputError(path, f"cannot read the timeline views ({exc})",
                         hint="is the database complete? rocprofv3 writes it when the run ends") from None
    to_gpu = copies["dst"] == "GPU"
    from_gpu = copies["src"] == "GPU"
    same = copies["src_index"] == copies["dst_index"]
    direction = np.select([~from_gpu & to_gpu, from_gpu & ~to_gpu, from_gpu & to_gpu & same, from_gpu & to_gpu,
                           (copies["src"] == "CPU") & (copies["dst"] == "CPU")],
                          ["H2D", "D2H", "D2D", "P2P", "H2H"], default="")
    copies = copies.assign(device=copies["dst_index"].where(to_gpu, copies["src_index"].where(from_gpu)),
                           direction=pd.Series(direction, index=copies.index).replace("", pd.NA),
                           kind=MEMCPY, name="Memcpy")
    kernels = kernels.assign(kind=KERNEL, bytes=np.nan, direction=pd.NA)
    rows = pd.concat([kernels, copies[kernels.columns]], ignore_index=True)
    rows, start, end, oddities = usable_rows(path, rows)
    if rows.empty:
        oddities.append(Oddity(str(path), "no kernel dispatches or memory copies in this database"))
    activities = activity_frame({
        "kind": rows["kind"].to_numpy(), "name": rows["name"].to_numpy(),
        "device_id": pd.to_numeric(rows["device"], errors="coerce").to_numpy(),
        "stream_id": pd.to_numeric(rows["stream"], errors="coerce").to_numpy(),
        "start_ns": start.to_numpy(dtype="int64"), "end_ns": end.to_numpy(dtype="int64"),
        "bytes": pd.to_numeric(rows["bytes"], errors="coerce").to_numpy(dtype="float64"),
        "direction": rows["direction"].to_numpy(),
    }, len(rows))
    ranges = range_frame({
        "name": markers["name"].to_numpy(), "on": HOST,
        "thread": pd.to_numeric(markers["thread"], errors="coerce").to_numpy(),
        "start_ns": markers["start"].to_numpy(dtype="int64"), "end_ns": markers["end"].to_numpy(dtype="int64"),
    }, len(markers))
    return TraceTimeline(activities=activities, ranges=ranges, source=Source(path=str(path), format=FORMAT, tool=TOOL),
                         oddities=tuple(oddities))
