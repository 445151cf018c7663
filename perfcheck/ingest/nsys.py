"""Nsight Systems SQLite export (``nsys export --type sqlite`` / ``nsys stats``' report.sqlite).

One row per ``CUPTI_ACTIVITY_KIND_KERNEL`` record. Seen in real exports (Nsight
Systems 2025.1, export schema 3.17.1, H200; 2026.1, schema 3.24.14, 4x A100):

* Kernel names are integer ids into ``StringIds`` (``demangledName``,
  ``shortName``, ``mangledName``); the demangled name is used, written the GNU way
  (``perfcheck.ingest.names``).
* ``start``/``end`` are integer ns from the session start; the grid is in blocks;
  ``staticSharedMemory``/``dynamicSharedMemory`` are bytes per block,
  ``localMemoryPerThread`` bytes per thread (spills).
* Columns grow between schema versions (``greenContextId``, ``graphNodeId``,
  ``sharedMemoryLimitConfig``): they are selected by name, and only those present.
  ``META_DATA_EXPORT.EXPORT_SCHEMA_VERSION`` is recorded with the product version.
* ``globalPid`` encodes the process id in bits 24-47 (``pid = globalPid >> 24 &
  0xFFFFFF``, matching the ``PROCESSES`` table). ``TARGET_INFO_CUDA_DEVICE`` maps
  each process's CUDA ordinal (``cudaId``, the kernels' ``deviceId``) to the
  report's ``gpuId``; it is filtered by the kernels' processes, since ``PROCESSES``
  lists every process on the host. ``TARGET_INFO_GPU.id`` is that gpuId, *not* the
  CUDA ordinal (the 4x A100 report numbers them in reverse); without the map,
  ``cuDevice`` is the ordinal. The architecture comes from ``computeMajor/Minor``
  (``smMajor/smMinor`` read 8.2 on an A100, CC 8.0).
* ``TARGET_INFO_GPU.memoryBandwidth`` (B/s) and ``clockRate`` (Hz) are the device's
  nominal figures: they pass through per dispatch as ``raw.device.memoryBandwidth``
  and ``raw.device.clockRate``, not as measured peaks.
* A report captured without CUDA tracing has no ``CUPTI_ACTIVITY_KIND_*`` tables at
  all (absent, not empty): it loads with a warning and no dispatches, distinct from
  a damaged file (an error).

The database is opened read-only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Grouped, Scan, Sniff, Want
from perfcheck.ingest.names import gnu_style
from perfcheck.ingest.sqlitefile import Configs, Reader, distinct, quote, read_ranges, sniffed_tables
from perfcheck.ingest.tabular import coerce_integers, cuda_arch
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

FORMAT = "nsys-sqlite"
TOOL = "nsys"
CHUNK_ROWS = 200_000
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
NO_KERNELS = "no kernel activity in this report (was it captured with CUDA tracing?)"
UNTIMED = "dispatches without a start or end timestamp: counted in calls, no duration"

# Kernel table column -> canonical column (taken when present).
_COLUMNS = {
    "start": "start_ns",
    "end": "end_ns",
    "deviceId": "device_id",
    "contextId": "context_id",
    "streamId": "stream_id",
    "correlationId": "correlation_id",
    "registersPerThread": "registers",
    "staticSharedMemory": "lds_static",
    "dynamicSharedMemory": "lds_dynamic",
    "localMemoryPerThread": "scratch_per_thread",
}
_RAW = ("launchType", "sharedMemoryExecuted", "localMemoryTotal", "graphNodeId", "greenContextId")
_DIMS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
_NAME_IDS = ("demangledName", "shortName", "mangledName")


def _is_nsys(sniff: Sniff) -> bool:
    if sniff.is_dir or not sniff.is_sqlite:
        return False
    tables = sniffed_tables(sniff.path)
    if tables is None:
        # A cut-off copy cannot be opened, but its first pages hold the schema text:
        # claim it so that the scan reports the damage instead of "unknown format".
        # (META_DATA_EXPORT is created last and sits at the end of the file.)
        return b"StringIds" in sniff.raw_head and b"TARGET_INFO_" in sniff.raw_head
    # Export schema 2.x (nsys 2021-2022) may lack META_DATA_EXPORT; its kernel and
    # string tables are those of 3.x, and they are what is read.
    return "StringIds" in tables and ("META_DATA_EXPORT" in tables or KERNELS in tables)


_HINT = "is the file complete? re-export it with `nsys export --type sqlite`"
_WHAT = "the Nsight Systems export"


def _meta(reader: Reader) -> dict[str, str]:
    return {str(k): str(v) for k, v in reader.rows("META_DATA_EXPORT", "SELECT name, value FROM META_DATA_EXPORT")}


def _gpus(reader: Reader, tables: set[str]) -> pd.DataFrame:
    if "TARGET_INFO_GPU" not in tables:
        return pd.DataFrame()
    return reader.frame("TARGET_INFO_GPU", "SELECT * FROM TARGET_INFO_GPU")


def _device_map(reader: Reader, tables: set[str], gpus: pd.DataFrame, pids: list[int],
                oddities: list[Oddity], path: Path) -> pd.DataFrame:
    """(pid, CUDA ordinal) -> TARGET_INFO_GPU row, for the processes that ran kernels."""
    if gpus.empty:
        return pd.DataFrame(columns=["pid", "cuda"])
    if "TARGET_INFO_CUDA_DEVICE" in tables and pids:
        have = set(reader.columns("TARGET_INFO_CUDA_DEVICE"))
        lacking = sorted({"pid", "cudaId", "gpuId"} - have)
        if lacking:
            oddities.append(Oddity(str(path), f"TARGET_INFO_CUDA_DEVICE lacks column(s) {', '.join(lacking)}: "
                                              "devices matched by CUDA ordinal (cuDevice) instead"))
        else:
            pairs = pd.DataFrame(reader.rows(
                "TARGET_INFO_CUDA_DEVICE",
                f"SELECT DISTINCT pid, cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE WHERE pid IN ({', '.join('?' * len(pids))})",
                pids), columns=["pid", "cuda", "gpuId"])
            if not pairs.empty and "id" in gpus:
                return pairs.merge(gpus, left_on="gpuId", right_on="id", how="left")
    # No per-process map: cuDevice is the CUDA ordinal (TARGET_INFO_GPU.id is not).
    if "cuDevice" not in gpus:
        return pd.DataFrame(columns=["pid", "cuda"])
    ordinal = gpus.rename(columns={"cuDevice": "cuda"})
    return pd.DataFrame({"pid": pids}).merge(ordinal, how="cross") if pids else ordinal.assign(pid=pd.NA)


def _integers(values: pd.Series, bad: list[int]) -> pd.Series:
    """An INTEGER column as Int64; what is not an integer (text or a float in a damaged
    export) becomes missing and is counted in ``bad[0]``."""
    out, count = coerce_integers(values)
    bad[0] += count
    return out


def _frame(rows: pd.DataFrame, devices: pd.DataFrame, want: Want, oddities: list[Oddity], path: Path) -> pd.DataFrame:
    bad = [0]
    frame = pd.DataFrame(index=rows.index)
    frame["kernel"] = gnu_style(rows["name"].astype("string"))
    frame["pid"] = _integers(rows["globalPid"], bad) // 2**24 % 2**24
    for column, canonical in _COLUMNS.items():
        if column in rows:
            frame[canonical] = _integers(rows[column], bad)
    if "lds_static" in frame and "lds_dynamic" in frame:
        frame["lds_per_workgroup"] = frame["lds_static"] + frame["lds_dynamic"]
    if all(d in rows for d in _DIMS):
        blocks = [_integers(rows[f"grid{d}"], bad) for d in "XYZ"]
        threads = [_integers(rows[f"block{d}"], bad) for d in "XYZ"]
        for d, b, t in zip("xyz", blocks, threads):
            frame[f"grid_{d}"] = b * t  # canonical grids count threads (schema)
            frame[f"workgroup_{d}"] = t
        frame["grid_size"] = frame["grid_x"] * frame["grid_y"] * frame["grid_z"]
        frame["workgroup_size"] = threads[0] * threads[1] * threads[2]
        frame["workgroups"] = blocks[0] * blocks[1] * blocks[2]
    if not devices.empty and "device_id" in frame:
        key = pd.DataFrame({"pid": frame["pid"], "cuda": frame["device_id"]})
        info = key.merge(devices.astype({"pid": "Int64", "cuda": "Int64"}), on=["pid", "cuda"], how="left")
        info.index = frame.index
        if "threadsPerWarp" in info:
            frame["wave_size"] = coerce_integers(info["threadsPerWarp"])[0]
        if want.raw:
            for column in ("memoryBandwidth", "clockRate"):
                if column in info:
                    frame[raw(f"device.{column}")] = pd.to_numeric(info[column], errors="coerce")
    if want.raw:
        for column in _RAW:
            if column in rows:
                frame[raw(column)] = pd.to_numeric(rows[column], errors="coerce")
    if bad[0]:
        oddities.append(Oddity(str(path), f"{KERNELS} values that are not integers left empty", bad[0]))
    return frame


_PER_ROW = {"start": "start_ns", "end": "end_ns", "correlationId": "correlation_id"}
_IN_BATCH = 500  # ids per IN (...) list, well under SQLite's bound-parameter limit


def _names_of(reader: Reader, ids: list[int], known: dict[int, str | None]) -> None:
    """StringIds values of ``ids`` not read yet: once per distinct kernel, not per dispatch."""
    new = sorted({i for i in ids if i not in known})
    for at in range(0, len(new), _IN_BATCH):
        part = new[at:at + _IN_BATCH]
        found = dict(reader.rows("StringIds", f"SELECT id, value FROM StringIds WHERE id IN ({', '.join('?' * len(part))})", part))
        known.update((i, found.get(i)) for i in part)


def _fast_chunks(reader: Reader, path: Path, columns: list[str], name_id: str, devices: pd.DataFrame, want: Want,
                 oddities: list[Oddity], slow_sql: str, untimed: list[int]) -> Iterator[pd.DataFrame | Grouped]:
    series = [c for c in ("start", "end") if c in columns]
    if "correlation_id" in want and "correlationId" in columns:
        series.append("correlationId")
    # Context and stream only identify a dispatch (nothing is derived from them): read
    # when asked for, as each column costs the DISTINCT scan about a twentieth.
    config = [c for c in [*_COLUMNS, *_DIMS, "globalPid"] if c in columns and c not in _PER_ROW
              and (c not in ("contextId", "streamId") or _COLUMNS[c] in want)]
    config += [c for c in _RAW if c in columns and raw(c) in want]
    strings: dict[int, str | None] = {}

    def build(new: list[tuple]) -> tuple[pd.DataFrame, np.ndarray]:
        _names_of(reader, [c[0] for c in new], strings)
        rows = pd.DataFrame(new, columns=["_name_id", *config], dtype=object)
        rows["name"] = [strings.get(i) for i in rows["_name_id"]]
        return _frame(rows, devices, want, oddities, path), np.ones(len(new), dtype=bool)

    configs = Configs(build, lambda column: column in want)
    # A grouped read takes the duration, computed by SQLite, instead of both timestamps.
    spans = {"duration": (quote("end"), quote("start"))} if want.grouped else None
    if want.grouped:
        series = [c for c in series if c not in ("start", "end")]
    for part in read_ranges(reader, KERNELS, "", (), key=quote(name_id), series=[quote(c) for c in series],
                            config=[quote(c) for c in config], rowid="rowid", size=CHUNK_ROWS, spans=spans):
        if not part.exact:  # NULLs, text or reals somewhere in the range: row by row
            for rows in reader.frames(KERNELS, slow_sql, (part.first, part.last), CHUNK_ROWS):
                untimed[0] += int((rows["start"].isna() | rows["end"].isna()).sum())
                yield _frame(rows, devices, want, oddities, path)
            continue
        per_row = {_PER_ROW[column]: part.series[quote(column)] for column in series if _PER_ROW[column] in want}
        if want.grouped:
            if "duration" in part.series:  # in s, as dispatch.finish derives it from the timestamps
                per_row["duration"] = part.series["duration"].astype("float64") * 1e-9
            else:  # a negative timestamp in the range: finish reports it
                per_row.update(start_ns=part.series[quote("start")], end_ns=part.series[quote("end")])
            rows, group, _ = configs.grouped(part)
            yield Grouped(rows, group, per_row)
            continue
        frame, _ = configs.expand(part)
        for canonical, values in per_row.items():
            frame[canonical] = values
        yield frame


def _scan(path: Path, want: Want) -> Scan:
    oddities: list[Oddity] = []
    with Reader(path, _WHAT, _HINT) as reader:
        tables = reader.tables()
        if "META_DATA_EXPORT" not in tables and KERNELS not in tables:
            raise InputError(path, "no META_DATA_EXPORT table", hint="is this an Nsight Systems SQLite export?")
        meta = _meta(reader) if "META_DATA_EXPORT" in tables else {}
        gpus = _gpus(reader, tables)
        columns = reader.columns(KERNELS) if KERNELS in tables else []
        # One pass for both: the processes that ran kernels, and the devices they ran on
        # (on two threads where there are two cores: half the wall time of 1 s at 10M
        # dispatches; only the set of rows is used, not their order).
        pairs = (distinct(reader, KERNELS, ["globalPid", "deviceId"], "rowid")
                 if {"globalPid", "deviceId"} <= set(columns) else
                 [(g, None) for (g,) in distinct(reader, KERNELS, ["globalPid"], "rowid")]
                 if "globalPid" in columns else [])
        pids = sorted({int(g) >> 24 & 0xFFFFFF for g, _ in pairs if isinstance(g, int)})
        devices = _device_map(reader, tables, gpus, pids, oddities, path)
        used = [(d,) for d in dict.fromkeys(d for _, d in pairs)] if "deviceId" in columns else []
        any_kernel = bool(columns) and reader.one(KERNELS, f"SELECT 1 FROM {KERNELS} LIMIT 1") is not None
    version = meta.get("EXPORT_PRODUCT_VERSION")
    schema = meta.get("EXPORT_SCHEMA_VERSION")
    tool_version = f"{version or 'unknown'} (export schema {schema})" if schema else version
    if not meta:
        oddities.append(Oddity(str(path), "no META_DATA_EXPORT table (an export schema 2.x report?): "
                                          "the Nsight Systems version is unknown"))
    ran = devices[devices["cuda"].isin([d for (d,) in used])] if not devices.empty and "cuda" in devices else devices
    names = sorted({str(n) for n in ran.get("name", pd.Series(dtype=object)).dropna()})
    majors, minors = (ran.get(c, pd.Series(None, index=ran.index, dtype=object)) for c in ("computeMajor", "computeMinor"))
    capabilities = [cuda_arch(a, b) for a, b in zip(majors, minors)]
    archs = sorted({a for a in capabilities if a})
    if any(a is None and (pd.notna(x) or pd.notna(y)) for a, x, y in zip(capabilities, majors, minors)):
        oddities.append(Oddity(str(path), "TARGET_INFO_GPU computeMajor/computeMinor is no compute capability "
                                          "(not small whole numbers); architecture left unknown: name it with --arch"))
    source = Source(path=str(path), format=FORMAT, tool=TOOL, tool_version=tool_version,
                    device=", ".join(names) or None, arch=", ".join(archs) or None)
    if KERNELS not in tables:
        oddities.append(Oddity(str(path), NO_KERNELS))
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    if not any_kernel:
        oddities.append(Oddity(str(path), f"{KERNELS} is empty: no kernel ran while CUDA was traced"))
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    name_id = next((c for c in _NAME_IDS if c in columns), None)
    missing = [c for c in ("start", "end", "globalPid") if c not in columns]
    if name_id is None or missing:
        raise InputError(path, f"{KERNELS} lacks column(s) {', '.join(missing) or 'demangledName'} "
                         f"(export schema {schema or 'unknown, older than 3.x'})",
                         hint="re-export the .nsys-rep/.qdrep with `nsys export --type sqlite` from a newer Nsight "
                         "Systems (export schema 3.x, 2023+)")
    picked = [c for c in [*_COLUMNS, *_DIMS, *_RAW, "globalPid"] if c in columns]
    slow_sql = (f'SELECT {", ".join(f"K.{quote(c)}" for c in picked)}, S.value AS name FROM {KERNELS} K '
                f"LEFT JOIN StringIds S ON S.id = K.{quote(name_id)} WHERE K.rowid BETWEEN ? AND ? ORDER BY K.rowid")

    def chunks() -> Iterator[pd.DataFrame | Grouped]:
        with Reader(path, _WHAT, _HINT) as reading:
            try:
                untimed = [0]
                yield from _fast_chunks(reading, path, columns, name_id, devices, want, oddities, slow_sql, untimed)
            except (sqlite3.Error, MemoryError) as exc:
                raise reading.error(exc, KERNELS) from None
        if untimed[0]:
            # The schema says NOT NULL, a damaged or hand-made export may not keep to it.
            oddities.append(Oddity(str(path), UNTIMED, untimed[0]))

    return Scan(source=source, chunks=chunks(), oddities=oddities)


FORMATS: tuple[Format, ...] = (
    Format(
        name=FORMAT,
        tool=TOOL,
        kind="profile",
        description="Nsight Systems SQLite export (CUPTI_ACTIVITY_KIND_KERNEL + StringIds, export schema 2.x-3.x): "
                    "kernel launches, device from TARGET_INFO_GPU",
        sniff=_is_nsys,
        scan=_scan,
    ),
)
