"""The timeline of an Nsight Systems SQLite export: kernels, memory copies and
memsets on the device, and NVTX ranges. The kernel reader is ``perfcheck.ingest.nsys``;
this one reads the other tables, only when a timeline is asked for, opening the
database read-only (``sqlitefile``).

Seen in real exports (Nsight Systems 2025.1, export schema 3.17.1, H200):

* ``CUPTI_ACTIVITY_KIND_MEMCPY``: ``start``/``end`` (ns), ``deviceId``,
  ``streamId``, ``bytes``, ``copyKind`` (``ENUM_CUDA_MEMCPY_OPER``: 1 HtoD, 2 DtoH,
  8 DtoD, 10 PtoP, 11-13 the unified-memory variants, 3-7 the CUDA-array ones).
  ``CUPTI_ACTIVITY_KIND_MEMSET``: the same with ``bytes`` set.
* ``NVTX_EVENTS``: a range is a row with an ``end``; push/pop ranges are event type
  59 (``NvtxPushPopRange``), start/end ranges 60 (``NvtxStartEndRange``; ids from
  ``ENUM_NSYS_EVENT_TYPE``). The name is ``text``, or a registered string
  (``textId`` into ``StringIds``). ``globalTid`` is the thread.
* A report captured without CUDA tracing has no ``CUPTI_ACTIVITY_KIND_*`` tables
  (4x A100, 2026.1): its timeline is empty, with a warning.
* The rank of the report, before its file name (``report.rank3.sqlite``):
  ``MPI_RANKS`` (globalTid -> MPI rank, written with ``--trace=mpi``) when it holds
  one rank, else the launcher's rank variable in the environment nsys ran in
  (``TARGET_INFO_SYSTEM_ENV``, name ``DeviceEnvironment``: ``NAME=value`` pairs
  separated by ``;``; under ``mpirun nsys profile ...`` each report's nsys has its
  rank's variables). ``PROCESSES`` names processes (pid, name) but no rank. A report
  holding several ranks (``nsys profile mpirun ...``) gets none: a warning says so.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.names import gnu_style
from perfcheck.ingest.nsys import FORMAT, TOOL
from perfcheck.ingest.sqlitefile import connect_read_only, query_frame, table_names
from perfcheck.ingest.timeline import (HOST, KERNEL, MEMCPY, MEMSET, TraceTimeline, activity_frame, range_frame,
                                       usable_rows)
from perfcheck.model import Oddity, Source

__all__ = ["FORMAT", "read"]

KERNELS, MEMCPYS, MEMSETS, NVTX = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                   "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS")
# ENUM_CUDA_MEMCPY_OPER id -> direction (arrays are device memory).
COPY_KINDS = {1: "H2D", 2: "D2H", 3: "H2D", 4: "D2H", 5: "D2D", 6: "D2D", 7: "D2D", 8: "D2D", 9: "H2H",
              10: "P2P", 11: "H2D", 12: "D2H", 13: "D2D"}
# ENUM_NSYS_EVENT_TYPE of NVTX ranges, where the export has no enum table.
_RANGE_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60}

_KERNEL_SQL = (f"SELECT k.start, k.end, k.deviceId, k.streamId, s.value FROM {KERNELS} AS k "
               "LEFT JOIN StringIds AS s ON s.id = k.demangledName")
_COPY_SQL = f"SELECT start, end, deviceId, streamId, bytes, copyKind FROM {MEMCPYS}"
_SET_SQL = f"SELECT start, end, deviceId, streamId, bytes FROM {MEMSETS}"


# The rank variables of MPI launchers and torchrun: Open MPI, MPICH/Intel MPI (PMI),
# PMIx, Slurm, MVAPICH2, HPE PALS (Cray), torch.distributed.
_RANK_ENV = re.compile(r"(?:^|;)(?:OMPI_COMM_WORLD_RANK|PMI_RANK|PMIX_RANK|SLURM_PROCID|MV2_COMM_WORLD_RANK|"
                       r"PALS_RANKID|RANK)=(\d+)(?=;|$)")


def _rank(connection: sqlite3.Connection, tables: set[str]) -> tuple[int | None, str | None]:
    """The report's rank from its own tables, and a note when it holds several."""
    if "MPI_RANKS" in tables:
        ranks = [int(r) for (r,) in connection.execute("SELECT DISTINCT rank FROM MPI_RANKS LIMIT 2")]
        if len(ranks) == 1:
            return ranks[0], None
        if len(ranks) > 1:
            return None, "MPI_RANKS holds several ranks: one report of several processes is read as one rank"
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        rows = connection.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'")
        for (value,) in rows:
            found = _RANK_ENV.search(str(value))
            if found:
                return int(found.group(1)), None
    return None, None


def _range_types(connection: sqlite3.Connection, tables: set[str]) -> list[int]:
    if "ENUM_NSYS_EVENT_TYPE" not in tables:
        return list(_RANGE_TYPES.values())
    marks = ",".join("?" * len(_RANGE_TYPES))
    found = [i for (i,) in connection.execute(f"SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ({marks})",
                                              tuple(_RANGE_TYPES))]
    return found or list(_RANGE_TYPES.values())


def _nvtx_sql(types: list[int], tables: set[str]) -> str:
    name = "COALESCE(n.text, s.value)" if "StringIds" in tables else "n.text"
    join = " LEFT JOIN StringIds AS s ON s.id = n.textId" if "StringIds" in tables else ""
    return (f"SELECT n.start, n.end, n.globalTid, {name} FROM {NVTX} AS n{join} "
            f"WHERE n.end IS NOT NULL AND n.eventType IN ({','.join(str(int(t)) for t in types)})")


def read(path: Path) -> TraceTimeline:
    try:
        with closing(connect_read_only(path)) as connection:
            tables = table_names(connection)
            kernels = (query_frame(connection, _KERNEL_SQL, ["start", "end", "device", "stream", "name"])
                       if KERNELS in tables and "StringIds" in tables else None)
            copies = (query_frame(connection, _COPY_SQL, ["start", "end", "device", "stream", "bytes", "copyKind"])
                      if MEMCPYS in tables else None)
            sets = query_frame(connection, _SET_SQL, ["start", "end", "device", "stream", "bytes"]) if MEMSETS in tables \
                else None
            nvtx = (query_frame(connection, _nvtx_sql(_range_types(connection, tables), tables),
                           ["start", "end", "thread", "name"]) if NVTX in tables else None)
            rank, several = _rank(connection, tables)
    except sqlite3.Error as exc:
        raise InputError(path, f"cannot read the timeline tables ({exc})",
                         hint="is the export complete? re-run `nsys export --type sqlite`") from None
    oddities: list[Oddity] = [Oddity(str(path), several)] if several else []
    parts: list[pd.DataFrame] = []
    if kernels is not None:
        kernels["kind"] = KERNEL
        kernels["name"] = gnu_style(kernels["name"].astype("string"))
        parts.append(kernels)
    if copies is not None:
        copies["kind"] = MEMCPY
        copies["direction"] = pd.to_numeric(copies["copyKind"], errors="coerce").map(COPY_KINDS)
        parts.append(copies.drop(columns="copyKind"))
    if sets is not None:
        sets["kind"] = MEMSET
        parts.append(sets)
    if not parts:
        oddities.append(Oddity(str(path), "no kernel, memcpy or memset activity in this report (was it captured "
                                          "with CUDA tracing?)"))
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["kind", "start", "end", "device", "stream"])
    rows, start, end, left_out = usable_rows(path, rows)
    oddities += left_out
    activities = activity_frame({
        "kind": rows["kind"].to_numpy(),
        "name": rows["name"].to_numpy() if "name" in rows else pd.NA,
        "device_id": rows["device"].to_numpy(),
        "stream_id": rows["stream"].to_numpy(),
        "start_ns": start.to_numpy(dtype="int64"),
        "end_ns": end.to_numpy(dtype="int64"),
        "bytes": pd.to_numeric(rows["bytes"], errors="coerce").to_numpy(dtype="float64") if "bytes" in rows
        else np.nan,
        "direction": rows["direction"].to_numpy() if "direction" in rows else pd.NA,
    }, len(rows))

    nvtx = nvtx if nvtx is not None else pd.DataFrame(columns=["start", "end", "thread", "name"])
    ranges = range_frame({
        "name": nvtx["name"].to_numpy(),
        "on": HOST,
        "thread": nvtx["thread"].to_numpy(),
        "start_ns": nvtx["start"].to_numpy(dtype="int64"),
        "end_ns": nvtx["end"].to_numpy(dtype="int64"),
    }, len(nvtx))
    source = Source(path=str(path), format=FORMAT, tool=TOOL, rank=rank)
    return TraceTimeline(activities=activities, ranges=ranges, source=source, oddities=tuple(oddities))
