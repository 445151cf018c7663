"""The timeline of a rocprof v1 ``results.db`` (``rocprof --hip-trace``; the kernel
reader is ``perfcheck.ingest.rocprof``): kernels, copies, buffer fills and ROCTx
ranges, opened read-only.

Seen in real databases (ROCm 4.0 on gfx906, Feb 2021; ROCm 6.x on MI300X):

* ``OPS`` holds every GPU packet of a HIP trace: kernels (``Name`` is the kernel)
  and ``Unknown command type`` barrier packets, which are no work and are left
  out. Without a HIP trace, kernels are in ``KERN`` (ROCm 6) or ``A`` (ROCm 4)
  with results.csv's columns (``KernelName``, ``gpu-id``).
* ``COPY``: ``CopyHostToDevice``, ``CopyDeviceToHost``, ``CopyDeviceToDevice``
  and ``FillBuffer`` (a memset), with ``dev-id`` and ``queue-id`` but no sizes.
* ``rocTX``: ROCTx ranges, the names written with their double quotes
  (``"Kokkos::View::initialization [V]"``), which are stripped.
* Times are ``BeginNs``/``EndNs``, integer ns (stored as text in some versions).

``results.json`` (the same run as a Chrome trace; format ``rocprof-json``) holds the
same lanes as processes named by ``process_name`` metadata: ``GPU<n>`` (the OPS
packets), ``COPY`` and ``Markers and Ranges`` (rocTX), each event's ``args``
carrying the database row (``BeginNs``, ``EndNs``, ``dev-id``, ``queue-id``,
``Name``) as text; metadata pids are numbers, event pids text. Both files of the
Kokkos run read to the same timeline.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.documents import json_loads
from perfcheck.errors import InputError
from perfcheck.ingest.rocprof import TOOL, UNKNOWN_PACKET
from perfcheck.ingest.sqlitefile import connect_read_only, table_names
from perfcheck.ingest.timeline import (HOST, KERNEL, MEMCPY, MEMSET, TraceTimeline, activity_frame, range_frame, unusable_times,
                                       usable_rows)
from perfcheck.model import Oddity, Source

FORMAT, JSON_FORMAT = "rocprof-db", "rocprof-json"
_COPIES = {"CopyHostToDevice": (MEMCPY, "H2D"), "CopyDeviceToHost": (MEMCPY, "D2H"),
           "CopyDeviceToDevice": (MEMCPY, "D2D"), "CopyHostToHost": (MEMCPY, "H2H"), "FillBuffer": (MEMSET, None)}


def _columns(connection: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')]


def _select(connection: sqlite3.Connection, table: str, wanted: dict[str, str]) -> pd.DataFrame:
    """The columns of ``wanted`` (table column -> our name) that the table has."""
    present = [c for c in wanted if c in _columns(connection, table)]
    sql = "SELECT " + ", ".join(f'"{c}"' for c in present) + f' FROM "{table}"'
    rows = connection.execute(sql).fetchall()
    return pd.DataFrame.from_records(rows, columns=[wanted[c] for c in present]) if rows else \
        pd.DataFrame(columns=[wanted[c] for c in present])


def _kernel_table(connection: sqlite3.Connection, tables: set[str]) -> pd.DataFrame | None:
    if "OPS" in tables and connection.execute('SELECT 1 FROM "OPS" LIMIT 1').fetchone():
        return _select(connection, "OPS", {"Name": "name", "BeginNs": "start", "EndNs": "end", "dev-id": "device",
                                           "queue-id": "stream"})
    for table in ("KERN", "A"):
        if table in tables:
            return _select(connection, table, {"KernelName": "name", "BeginNs": "start", "EndNs": "end",
                                               "gpu-id": "device", "queue-id": "stream"})
    return None


def _json_lanes(path: Path) -> tuple[pd.DataFrame, pd.Series, dict[str, str]]:
    """The complete events of a results.json (one row each, ``args`` flattened), their
    pids as text, and each lane's pid -> its process name."""
    try:
        doc = json_loads(path.read_text(encoding="utf-8", errors="replace"), path)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"malformed JSON ({exc.msg})", line=exc.lineno, hint="was the file cut off?") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise InputError(path, "no 'traceEvents' list", hint="is this a rocprof results.json?")
    table = pd.json_normalize([e for e in events if isinstance(e, dict)], max_level=1)
    for column in ("ph", "name", "pid", "args.name"):
        if column not in table:
            table[column] = pd.NA
    pids = table["pid"].astype("string")
    meta = (table["ph"] == "M") & (table["name"] == "process_name")
    lanes = dict(zip(pids[meta].astype(str), table.loc[meta, "args.name"].astype(str)))
    complete = table["ph"] == "X"
    return table[complete], pids[complete], lanes


def read_json(path: Path) -> TraceTimeline:
    """The timeline of a rocprof v1 ``results.json``."""
    events, pids, lanes = _json_lanes(path)

    def lane(wanted_lane: "Callable[[str], bool]", wanted: dict[str, str]) -> pd.DataFrame | None:
        chosen = {pid for pid, name in lanes.items() if wanted_lane(name)}
        if not chosen:
            return None
        rows = events[pids.isin(chosen)]
        present = {f"args.{c}": wanted[c] for c in wanted if f"args.{c}" in rows}
        return rows[list(present)].rename(columns=present).reset_index(drop=True)

    place = {"Name": "name", "BeginNs": "start", "EndNs": "end", "dev-id": "device", "queue-id": "stream"}
    kernels = lane(lambda name: re.fullmatch(r"GPU\d+", name) is not None, place)
    copies = lane(lambda name: name == "COPY", place)
    marks = lane(lambda name: name == "Markers and Ranges", {"Name": "name", "BeginNs": "start", "EndNs": "end",
                                                             "tid": "thread"})
    return _timeline(path, JSON_FORMAT, kernels, copies, marks)


def read(path: Path) -> TraceTimeline:
    try:
        with closing(connect_read_only(path)) as connection:
            tables = table_names(connection)
            kernels = _kernel_table(connection, tables)
            copies = (_select(connection, "COPY", {"Name": "name", "BeginNs": "start", "EndNs": "end",
                                                   "dev-id": "device", "queue-id": "stream"})
                      if "COPY" in tables else None)
            marks = (_select(connection, "rocTX", {"Name": "name", "BeginNs": "start", "EndNs": "end", "tid": "thread"})
                     if "rocTX" in tables else None)
    except sqlite3.Error as exc:
        raise InputError(path, f"cannot read the trace tables ({exc})",
                         hint="is the database complete? rocprof writes it when the run ends") from None
    return _timeline(path, FORMAT, kernels, copies, marks)


def _timeline(path: Path, format_name: str, kernels: pd.DataFrame | None, copies: pd.DataFrame | None,
              marks: pd.DataFrame | None) -> TraceTimeline:
    """Kernels, copies (columns name, start, end, device, stream) and rocTX ranges
    (name, start, end, thread) of either file, as a timeline."""
    oddities: list[Oddity] = []
    parts = []
    if kernels is not None:
        unknown = kernels["name"] == UNKNOWN_PACKET
        if unknown.any():
            oddities.append(Oddity(str(path), f"{UNKNOWN_PACKET!r} GPU packets left out (not kernels)",
                                   int(unknown.sum())))
        parts.append(kernels[~unknown].assign(kind=KERNEL, direction=None))
    if copies is not None:
        known = copies["name"].isin(list(_COPIES))
        if (~known).any():
            oddities.append(Oddity(str(path), "COPY rows of an unknown kind left out: "
                                   + ", ".join(sorted(map(str, copies.loc[~known, "name"].unique()))),
                                   int((~known).sum())))
        copies = copies[known]
        parts.append(copies.assign(kind=copies["name"].map(lambda n: _COPIES[n][0]),
                                   direction=copies["name"].map(lambda n: _COPIES[n][1])))
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["name", "start", "end", "kind"])
    rows, start, end, left_out = usable_rows(path, rows, "row")
    oddities += left_out
    if rows.empty:
        oddities.append(Oddity(str(path), "no kernels or copies in this database (was it run with --hip-trace?)"))
    column = (lambda name: pd.to_numeric(rows[name], errors="coerce").to_numpy() if name in rows else np.nan)
    activities = activity_frame({
        "kind": rows["kind"].to_numpy(), "name": rows["name"].to_numpy(), "device_id": column("device"),
        "stream_id": column("stream"), "start_ns": start.to_numpy(dtype="int64"),
        "end_ns": end.to_numpy(dtype="int64"),
        "direction": rows["direction"].to_numpy() if "direction" in rows else pd.NA,
    }, len(rows))
    marks = marks if marks is not None else pd.DataFrame(columns=["name", "start", "end", "thread"])
    m_start, m_end = pd.to_numeric(marks["start"], errors="coerce"), pd.to_numeric(marks["end"], errors="coerce")
    fine = ~unusable_times(m_start, m_end)
    marks, m_start, m_end = marks[fine], m_start[fine], m_end[fine]
    ranges = range_frame({
        "name": marks["name"].astype("string").str.strip('"').to_numpy(), "on": HOST,
        "thread": pd.to_numeric(marks["thread"], errors="coerce").to_numpy() if "thread" in marks else pd.NA,
        "start_ns": m_start.to_numpy(dtype="int64"), "end_ns": m_end.to_numpy(dtype="int64"),
    }, len(marks))
    return TraceTimeline(activities=activities, ranges=ranges,
                         source=Source(path=str(path), format=format_name, tool=TOOL), oddities=tuple(oddities))
