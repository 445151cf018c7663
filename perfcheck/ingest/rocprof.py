"""rocprof v1 outputs (the ``rocprof`` script of ROCm 3.x-6.x) and the per-dispatch
CSV files Omniperf / rocprof-compute keep from their rocprof runs.

Files one ``rocprof -o results.csv [--stats] [--hip-trace] [-i input.txt]`` run writes:

* ``results.csv``: one row per dispatch: ``Index,KernelName,gpu-id,queue-id,
  queue-index,pid,tid,grd,wgr,lds,scr,<registers>,...,<counters>,DispatchNs,BeginNs,
  EndNs,CompleteNs``. Register columns: ``vgpr,sgpr,fbar,sig,obj`` up to ROCm 4.x,
  ``arch_vgpr,accum_vgpr,sgpr,wave_size,sig,obj`` from ROCm 5.x. Omniperf keeps the
  same rows per pass (``SQ_LEVEL_WAVES.csv``, ...) and from its 2.0 releases renames the
  columns (``Dispatch_ID,Kernel_Name,GPU_ID,...,Grid_Size,Workgroup_Size,
  LDS_Per_Workgroup,Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,...,
  Start_Timestamp,End_Timestamp``; rocprofv2/v3 backends add ``Correlation_ID`` and
  ``Kernel_ID``). All generations -> ``rocprof-results``.
* ``results.stats.csv``: per-kernel ``Name,Calls,TotalDurationNs,AverageNs,Percentage``
  -> ``rocprof-stats`` (kernel level). ``results.hip_stats.csv`` / ``copy_stats.csv``
  / ``hsa_stats.csv`` share the columns but hold API calls and copies.
* ``results.json``: Chrome trace of the HIP/HSA API, copy and GPU lanes -> ``rocprof-json``.
* ``results.db``: SQLite with one table per lane -> ``rocprof-db``.
* ``results.sysinfo.txt``: the rocminfo dump rocprof captures; it names the GPU of every
  sibling file (``device_from_rocminfo``) and loads itself as ``rocprof-sysinfo``.

The text input file (``pmc:`` lines) is not a profile: see ``read_counter_groups``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.documents import json_loads
from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Scan, Sniff, Want, single_chunk
from perfcheck.ingest.sqlitefile import Reader, quote, sniffed_tables
from perfcheck.ingest.tabular import read_csv, require_columns, split_csv_line, text_lines, to_integer, to_number
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

TOOL = "rocprof"
NO_KERNELS = "holds no kernel dispatches ({})"

# rocprof v1 names every AQL packet it cannot classify "Unknown command type": the
# barrier packets HIP inserts for stream synchronisation. In the Kokkos gfx906 run
# (ROCm 4.0) all 6 of them last 0 ns and sit in the GPU lane next to real kernels;
# they are not kernels, so every reader drops them and says how many.
UNKNOWN_PACKET = "Unknown command type"

# ---------------------------------------------------------------------------------
# Per-dispatch results CSV (rocprof-results); also the rows of the kernel table of results.db

# Tool column -> canonical column, every generation (see the module docstring).
# Units, from rocprofiler's test/tool/tool.cpp which prints these fields:
# * grd / wgr: packet grid_size_x*y*z and workgroup_size_x*y*z, in work-items.
# * lds: bytes per workgroup, allocated: ROCm <= 4 printed the granulated LDS field of
#   COMPUTE_PGM_RSRC2 times 128 dwords (512 B), ROCm 5+ the packet's group_segment_size
#   rounded up to the LDS block size. Either way bytes, granule-rounded.
# * scr: the packet's private_segment_size, bytes per work-item.
# * vgpr / arch_vgpr / accum_vgpr / sgpr: ALLOCATED registers, i.e. the granulated
#   counts of the code object times the allocation granule ((n+1)*4 VGPRs, (n/2+1)*16
#   SGPRs, 128 SGPRs on gfx10+), not the compiler's exact usage. Kept as reported:
#   occupancy follows allocation anyway, but they may exceed `-Rpass-analysis` figures.
_RESULT_COLUMNS = {
    "Index": "dispatch_id",
    "Dispatch_ID": "dispatch_id",
    "KernelName": "kernel",
    "Kernel_Name": "kernel",
    "gpu-id": "device_id",
    "GPU_ID": "device_id",
    "queue-id": "queue_id",
    "Queue_ID": "queue_id",
    "pid": "pid",
    "PID": "pid",
    "tid": "tid",
    "TID": "tid",
    "grd": "grid_size",
    "Grid_Size": "grid_size",
    "wgr": "workgroup_size",
    "Workgroup_Size": "workgroup_size",
    "lds": "lds_per_workgroup",
    "LDS_Per_Workgroup": "lds_per_workgroup",
    "scr": "scratch_per_thread",
    "Scratch_Per_Workitem": "scratch_per_thread",
    "vgpr": "vgpr",
    "arch_vgpr": "vgpr",
    "Arch_VGPR": "vgpr",
    "accum_vgpr": "agpr",
    "Accum_VGPR": "agpr",
    "sgpr": "sgpr",
    "SGPR": "sgpr",
    "wave_size": "wave_size",
    "Wave_Size": "wave_size",
    "Correlation_ID": "correlation_id",
    "BeginNs": "start_ns",
    "Start_Timestamp": "start_ns",
    "EndNs": "end_ns",
    "End_Timestamp": "end_ns",
}
# Dispatch metadata with no canonical column: the queue slot, fbarrier count, the
# completion-signal and kernel-object handles (hex), the packet's dispatch/complete
# times (host-side, not kernel execution) and rocprofv3's kernel symbol id.
_METADATA = {"queue-index", "fbar", "sig", "obj", "DispatchNs", "CompleteNs", "Kernel_ID"}
# Omniperf merges passes side by side and pandas-style suffixes the repeated columns
# (``Wave_Size_1``, ``obj_3``). Repeated metadata duplicates the first pass and is
# dropped; repeated counters have no base to fall back on and are kept verbatim.
_REPEAT = re.compile(r"_\d+$")
_TIMESTAMPS = ("start_ns", "end_ns")


def _is_metadata(name: str) -> bool:
    if name in _METADATA:
        return True
    base = _REPEAT.sub("", name)
    return base != name and (base in _METADATA or base in _RESULT_COLUMNS)


def _header(sniff: Sniff) -> list[str]:
    if sniff.is_dir or sniff.is_binary or not sniff.lines:
        return []
    try:
        return [f.strip() for f in split_csv_line(sniff.lines[0])]
    except Exception:  # noqa: BLE001 - a sniffer answers yes or no, never raises
        return []


# Omniperf's pmc_perf.csv (all passes joined) and 3.x's per-pass pmc_perf_N.csv carry
# rocprof v1 headers too but belong to the Omniperf reader, which claims them by name.
# Its timing pass timestamps.csv and the per-block SQ_*.csv passes are plain rocprof
# output and stay here.
_OMNIPERF_JOINED = re.compile(r"pmc_perf(_\d+)?\.csv")


def _is_results(sniff: Sniff) -> bool:
    header = set(_header(sniff))
    v1 = {"Index", "KernelName"} <= header and bool({"grd", "BeginNs"} & header)
    renamed = {"Dispatch_ID", "Kernel_Name", "Grid_Size", "Workgroup_Size"} <= header
    return (v1 or renamed) and not _OMNIPERF_JOINED.fullmatch(sniff.path.name)


def _file_lines(first_line: int | None, n: int) -> np.ndarray | None:
    return None if first_line is None else np.arange(first_line, first_line + n)


def _numbers(text: pd.Series, path: Path, column: str, first_line: int | None) -> pd.Series:
    """``tabular.to_number``; for rows without a file line (JSON events, database rows)
    the error names the row instead."""
    if first_line is not None:
        return to_number(text, path=path, column=column, first_line=first_line)
    try:
        return to_number(text, path=path, column=column, first_line=1)
    except InputError as exc:
        raise InputError(path, f"{exc.what} (row {exc.line})", column=column, hint=exc.hint) from None


def _integers(text: pd.Series, path: Path, column: str, first_line: int | None) -> np.ndarray:
    """A count column, as float64 values (positional, like the Int64 array it became
    before): ``dispatch.finish`` leaves values no count can have (inf, 1e308, -1, 2.5)
    empty with a warning before the cast to Int64."""
    return _numbers(text, path, column, first_line).to_numpy(dtype="float64")


def _timestamps(
    text: pd.Series, path: Path, column: str, lines: np.ndarray | None
) -> tuple[pd.Series, pd.Series]:
    """Integer nanosecond timestamps, exactly (``tabular.to_integer``: rocprof's 17-digit
    values, 12074903646084267 in the MI100 Omniperf run, exceed float64's 2**53), and a
    mask of the cells written in E-notation, which are left empty (see ``_dispatch_frame``).
    Without file lines (JSON events, database rows) an error names the row."""
    cells = text.astype("string").str.strip().fillna("").reset_index(drop=True)
    enotation = cells.str.fullmatch(r"[+-]?\d+(?:\.\d*)?[eE][+-]?\d+").fillna(False).astype(bool)
    rows = np.arange(1, len(cells) + 1)
    try:
        values = to_integer(cells.mask(enotation, ""), path=path, column=column,
                            lines=rows if lines is None else lines)
    except InputError as exc:
        if lines is not None:
            raise
        raise InputError(path, f"{exc.what} (row {exc.line})", column=column, hint=exc.hint) from None
    return values.set_axis(text.index), enotation.set_axis(text.index)


def _dispatch_frame(
    table: pd.DataFrame, path: Path, want: Want, first_line: int | None, oddities: list[Oddity]
) -> pd.DataFrame:
    """Canonical chunk from a text table of rocprof v1 dispatch rows (CSV or the db's
    kernel table). ``first_line`` is the file line of the first row, when there is one."""
    header = [str(c) for c in table.columns]
    if "KernelName" not in header and "Kernel_Name" not in header:
        require_columns(path, header, ["KernelName"], line=1 if first_line else None)
    lines = _file_lines(first_line, len(table))
    out: dict[str, object] = {}
    stamps: dict[str, str] = {}
    counters: list[str] = []
    for name in header:
        canonical = _RESULT_COLUMNS.get(name)
        if canonical is None:
            if not _is_metadata(name) and want.raw and raw(name) in want:
                counters.append(name)
            continue
        if canonical in out or canonical in stamps or (canonical != "kernel" and canonical not in want):
            continue
        if canonical == "kernel":
            out["kernel"] = table[name].astype("string").to_numpy()
        elif canonical in _TIMESTAMPS:
            stamps[canonical] = name
        else:
            out[canonical] = _integers(table[name], path, name, first_line)
    lossy = pd.Series(False, index=table.index)
    parsed = {}
    for canonical, name in stamps.items():
        parsed[canonical], enotation = _timestamps(table[name], path, name, lines)
        lossy |= enotation
    if lossy.any():
        # Omniperf 2.0's rocprofv2 backend wrote "8.1097E+14" (5 significant digits) for
        # every timestamp of the MI300X vcopy workload: begin == end, or 10 us steps.
        # Durations from such cells would be wrong numbers, so both ends are dropped.
        oddities.append(
            Oddity(str(path), "timestamps written in E-notation (precision lost); start/end left empty",
                   int(lossy.sum()))
        )
    for canonical, values in parsed.items():
        out[canonical] = values.mask(lossy).array
    frame = pd.DataFrame(out, index=table.index)
    if counters:
        # Counters stay in the tool's unit (FETCH_SIZE/WRITE_SIZE are KiB in rocprof v1's
        # derived metrics, SQ_* are counts); metrics convert them.
        frame = frame.join(_counter_block(table, counters, path, first_line))
    # grd/wgr are totals over x*y*z, so the workgroup count is not recoverable exactly
    # (a partial last workgroup in y or z changes it); it is left out on purpose.
    return frame


def _counter_block(table: pd.DataFrame, names: list[str], path: Path, first_line: int | None) -> pd.DataFrame:
    """All counter columns -> float64 in one numpy conversion (Omniperf passes on MI350
    hold 500+ per-channel columns); on failure the column-wise conversion names the cell."""
    cells = np.char.strip(table[names].to_numpy(dtype=str))
    cells[cells == ""] = "nan"
    try:
        values = cells.astype(np.float64)
    except ValueError:
        values = np.column_stack(
            [_numbers(table[n], path, n, first_line).to_numpy() for n in names]
        )
    return pd.DataFrame(values, columns=[raw(n) for n in names], index=table.index)


def _check_complete(path: Path) -> None:
    """rocprof ends every row with a newline; a file that does not was cut off, and its
    last row may hold a truncated number that would parse as a wrong value."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        if fh.tell() == 0:
            raise InputError(path, "file is empty", hint="was the profiler run cut off?")
        fh.seek(-1, 2)
        last = fh.read(1)
    if last not in (b"\n", b"\r"):
        with open(path, "rb") as fh:
            count = sum(1 for _ in fh)
        raise InputError(
            path,
            "last line is incomplete (no final newline): the file was cut off",
            line=count,
            hint="rerun the profiler, or remove the partial last line",
        )


def _check_field_counts(path: Path) -> None:
    """Every row has as many fields as the header. pandas pads a short row with empty
    cells, which would load a cut or damaged row as a dispatch with missing counters;
    counting the commas outside quotes (kernel names are quoted and hold commas) finds it."""
    lines = pd.Series(text_lines(path), dtype="string")
    counts = lines.str.replace(r'"[^"]*"', "", regex=True).str.count(",").to_numpy() + 1
    blank = (lines.str.strip() == "").to_numpy()
    wrong = (counts != counts[0]) & ~blank
    if wrong.any():
        pos = int(np.flatnonzero(wrong)[0])
        raise InputError(path, f"row has {counts[pos]} fields, the header {counts[0]}", line=pos + 1,
                         hint="was the run cut off? every row of a rocprof CSV has all columns")


def _check_binary(path: Path, what: str) -> None:
    if Sniff(path).is_binary:
        raise InputError(path, f"binary data where {what} was expected", hint="is this the right file?")


def _scan_results(path: Path, want: Want) -> Scan:
    _check_binary(path, "a rocprof results CSV")
    _check_complete(path)
    _check_field_counts(path)
    table = read_csv(path)
    # The 2018 tblextr.py ended every header and row with a comma: pandas names the
    # resulting empty last column "Unnamed: N". It holds nothing and is dropped.
    unnamed = table.columns.str.fullmatch(r"Unnamed: \d+") & (table.isna() | table.eq("")).all().to_numpy()
    table = table.loc[:, ~unnamed]
    oddities: list[Oddity] = []
    source = _source(path, "rocprof-results", oddities)
    frame = _dispatch_frame(table, path, want, 2, oddities)
    return Scan(source=source, chunks=single_chunk([frame]), oddities=oddities)


# ---------------------------------------------------------------------------------
# Kernel statistics (rocprof-stats)

_STATS_HEADER = ["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage"]
# --stats writes these next to results.stats.csv with the same columns; they hold
# no kernels. (rocprofv3's *_stats.csv add MinNs,MaxNs,StdDev and are not ours.)
_NOT_KERNEL_STATS = {
    "hip_stats.csv": "HIP API statistics",
    "hsa_stats.csv": "HSA API statistics",
    "copy_stats.csv": "memory copy statistics",
}


def _is_stats(sniff: Sniff) -> bool:
    return _header(sniff) == _STATS_HEADER


def _unquote(names: pd.Series) -> pd.Series:
    quoted = names.str.startswith('"') & names.str.endswith('"') & (names.str.len() >= 2)
    return names.where(~quoted, names.str.slice(1, -1).str.replace('""', '"', regex=False))


def _scan_stats(path: Path, want: Want) -> Scan:
    lines = text_lines(path)
    if not lines:
        raise InputError(path, "file is empty", hint="was the profiler run cut off?")
    header = [f.strip() for f in split_csv_line(lines[0])]
    require_columns(path, header, _STATS_HEADER, line=1)
    if header != _STATS_HEADER:
        raise InputError(path, f"unexpected statistics columns {header}", line=1,
                         hint="rocprof v1 writes Name,Calls,TotalDurationNs,AverageNs,Percentage")
    oddities: list[Oddity] = []
    source = _source(path, "rocprof-stats", oddities)
    for suffix, what in _NOT_KERNEL_STATS.items():
        if path.name.endswith(suffix):
            oddities.append(Oddity(str(path), NO_KERNELS.format(what)))
            return Scan(source=source, chunks=iter(()), oddities=oddities, level="kernel")
    _check_complete(path)
    while lines and not lines[-1].strip():
        lines.pop()
    body = pd.Series(lines[1:], dtype="string")
    # Kernel names are written unquoted by ROCm 4.x (Kokkos gfx906 run) although C++
    # names contain commas; the last four fields are always numbers, so split from the right.
    parts = body.str.rsplit(",", n=4, expand=True)
    if parts.shape[1] < 5 or parts[4].isna().any():
        pos = 0 if parts.shape[1] < 5 else int(np.flatnonzero(parts[4].isna().to_numpy())[0])
        raise InputError(path, "row has fewer than 5 fields", line=pos + 2,
                         hint="was the file cut off? rows are Name,Calls,TotalDurationNs,AverageNs,Percentage")
    names = _unquote(parts[0].str.strip())
    # A row of empty fields (",,,,": seen where a run's writer was cut off mid-line and
    # restarted) is no kernel; a name left empty beside numbers is a damaged row.
    unnamed = (names == "").to_numpy()
    blank = unnamed & parts.iloc[:, 1:].apply(lambda c: c.str.strip() == "").all(axis=1).to_numpy()
    if (unnamed & ~blank).any():
        raise InputError(path, "row without a kernel name", line=int(np.flatnonzero(unnamed & ~blank)[0]) + 2,
                         hint="rows are Name,Calls,TotalDurationNs,AverageNs,Percentage")
    if blank.any():
        oddities.append(Oddity(str(path), "empty rows (',,,,') skipped", int(blank.sum())))
    calls = to_number(parts[1], path=path, column="Calls", first_line=2)
    total = to_number(parts[2], path=path, column="TotalDurationNs", first_line=2)
    mean = to_number(parts[3], path=path, column="AverageNs", first_line=2)
    to_number(parts[4], path=path, column="Percentage", first_line=2)  # validated, derivable
    unknown = (names == UNKNOWN_PACKET).to_numpy()
    if unknown.any():
        oddities.append(Oddity(
            str(path),
            f"{UNKNOWN_PACKET!r} row dropped ({int(calls[unknown].sum())} non-kernel GPU packets, "
            f"{total[unknown].sum() * 1e-9:g} s)",
        ))
    keep = ~unknown & ~blank
    frame = pd.DataFrame({
        "kernel": names[keep].to_numpy(),
        "calls": calls[keep].to_numpy(),  # Int64 once dispatch.finish has checked it
        "duration_total": total[keep].to_numpy() * 1e-9,
        "duration_mean": mean[keep].to_numpy() * 1e-9,
    })
    return Scan(source=source, chunks=single_chunk([frame]), oddities=oddities, level="kernel")


# ---------------------------------------------------------------------------------
# Chrome-trace JSON (rocprof-json)

def _is_json(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    head = sniff.head.lstrip()
    return head.startswith("{") and '"traceEvents"' in head[:200] and '"BeginNs"' in head


def _arch_from_other_data(doc: dict) -> str | None:
    """rocprof copies rocminfo into ``otherData`` with spaces squeezed out of every
    value ("Vega20" for "Vega 20"), so only the gfx name is trustworthy there."""
    other = doc.get("otherData")
    if not isinstance(other, dict):
        return None
    gpus = [k[: -len(".DeviceType")] for k, v in other.items() if k.endswith(".DeviceType") and v == "GPU"]
    arch = other.get(f"{gpus[0]}.Name") if gpus else None
    return arch if isinstance(arch, str) and arch.startswith("gfx") else None


def _scan_json(path: Path, want: Want) -> Scan:
    _check_binary(path, "a rocprof JSON trace")
    try:
        doc = json_loads(path.read_text(encoding="utf-8", errors="replace"), path,
                         hint="is this a rocprof results.json?")
    except json.JSONDecodeError as exc:
        raise InputError(path, f"malformed JSON ({exc.msg})", line=exc.lineno,
                         hint="was the file cut off?") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise InputError(path, "no 'traceEvents' list", hint="is this a rocprof results.json?")
    oddities: list[Oddity] = []
    source = _source(path, "rocprof-json", oddities)
    if source.arch is None:
        source = replace(source, arch=_arch_from_other_data(doc))
    table = pd.json_normalize([e for e in events if isinstance(e, dict)], max_level=1)
    # Lanes are processes named by "process_name" metadata: "CPU HIP API", "COPY",
    # "Markers and Ranges", and one "GPU<n>" per device holding its dispatched packets.
    # Metadata pids are numbers, event pids strings ("6"): compare as text.
    for col in ("ph", "name", "pid", "args.name", "args.Name", "args.BeginNs", "args.EndNs"):
        if col not in table:
            table[col] = pd.NA
    pids = table["pid"].astype("string")
    meta = (table["ph"] == "M") & (table["name"] == "process_name")
    gpu_lane = table["args.name"].astype("string").str.fullmatch(r"GPU\d+").fillna(False).astype(bool)
    gpu_pids = set(pids[meta & gpu_lane].dropna())
    rows = table[(table["ph"] == "X") & pids.isin(gpu_pids)]
    names = rows["args.Name"].where(rows["args.Name"].notna(), rows["name"]).astype("string")
    unknown = (names == UNKNOWN_PACKET).to_numpy()
    if unknown.any():
        oddities.append(Oddity(str(path), f"{UNKNOWN_PACKET!r} GPU packets dropped (not kernels)", int(unknown.sum())))
    rows, names = rows[~unknown], names[~unknown]
    if rows.empty:
        # A --hsa-trace/--hip-trace run without GPU activity has only API and copy lanes.
        oddities.append(Oddity(str(path), NO_KERNELS.format("HIP/HSA API and copy trace only")))
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    frame = pd.DataFrame({"kernel": names.to_numpy()})
    for column, canonical in (("args.BeginNs", "start_ns"), ("args.EndNs", "end_ns")):
        frame[canonical] = _timestamps(rows[column].reset_index(drop=True), path, column[5:], None)[0].array
    for column, canonical in (("args.dev-id", "device_id"), ("args.queue-id", "queue_id"), ("args.proc-id", "pid")):
        if column in rows and canonical in want:
            frame[canonical] = _integers(rows[column], path, column[5:], None)
    return Scan(source=source, chunks=single_chunk([frame]), oddities=oddities)


# ---------------------------------------------------------------------------------
# SQLite database (rocprof-db)

# Tables rocprof v1's tblextr.py writes: one per traced lane, plus the kernel table
# (named "A" in ROCm 4.0, "KERN" in ROCm 6.x) whose columns are those of results.csv.
_LANES = {"HIP", "HSA", "OPS", "COPY", "rocTX"}


def _tables(reader: Reader) -> dict[str, list[str]]:
    names = [r[0] for r in reader.rows("sqlite_master", "SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {n: reader.columns(n) for n in names}


def _is_db(sniff: Sniff) -> bool:
    if sniff.is_dir or not sniff.is_sqlite:
        return False
    tables = sniffed_tables(sniff.path)
    if tables is None:
        return False
    # rocpd databases (rocprofv3) name every table rocpd_*; they are another reader's.
    # `rocprof --stats` without API tracing writes the kernel table alone: "KERN" is
    # rocprof's own name for it (ROCm 6.x; ROCm 4.0's "A" is too generic to claim).
    return bool((_LANES | {"KERN"}) & set(tables)) and not any(n.startswith("rocpd_") for n in tables)


def _as_text(reader: Reader, table: str, columns: list[str]) -> pd.DataFrame:
    """All columns as text (NULL -> ""), so integers above 2**53 and counters go
    through the same located conversions as the CSV. Names come from the file: quoted."""
    select = ", ".join(f"COALESCE(CAST({quote(c)} AS TEXT), '') AS {quote(c)}" for c in columns)
    rows = reader.rows(table, f"SELECT {select} FROM {quote(table)}")
    return pd.DataFrame(rows, columns=columns, dtype=str)


def _scan_db(path: Path, want: Want) -> Scan:
    if not Sniff(path).is_sqlite:
        raise InputError(path, "not an SQLite database", hint="is this a rocprof results.db?")
    oddities: list[Oddity] = []
    source = _source(path, "rocprof-db", oddities)
    with Reader(path, "the rocprof database", "was the file cut off or written by another tool?") as reader:
        tables = _tables(reader)
        counts = {n: reader.one(n, f"SELECT COUNT(*) FROM {quote(n)}")[0] for n in tables}
        kernel_table = next((n for n, cols in tables.items() if {"Index", "KernelName"} <= set(cols)), None)
        if kernel_table and counts[kernel_table]:
            # Filled when the run collected counters or --timestamp: results.csv's rows.
            table = _as_text(reader, kernel_table, tables[kernel_table])
            frame = _dispatch_frame(table, path, want, None, oddities)
            return Scan(source=source, chunks=single_chunk([frame]), oddities=oddities)
        if "OPS" in tables and counts["OPS"]:
            # Without counters the kernel table stays empty (both real files), but
            # --hip-trace records every GPU packet in OPS: kernels plus barriers.
            frame = _ops_frame(reader, tables["OPS"], path, want, oddities)
            if len(frame):
                return Scan(source=source, chunks=single_chunk([frame]), oddities=oddities)
    held = ", ".join(n for n in tables if counts[n]) or "nothing"
    oddities.append(Oddity(str(path), NO_KERNELS.format(f"tables with rows: {held}")))
    return Scan(source=source, chunks=iter(()), oddities=oddities)


def _ops_frame(reader: Reader, columns: list[str], path: Path, want: Want,
               oddities: list[Oddity]) -> pd.DataFrame:
    require_columns(path, columns, ["Name", "BeginNs", "EndNs"], hint="an OPS table has Name, BeginNs and EndNs")
    table = _as_text(reader, "OPS", columns)
    unknown = (table["Name"] == UNKNOWN_PACKET).to_numpy()
    if unknown.any():
        oddities.append(Oddity(str(path), f"{UNKNOWN_PACKET!r} GPU packets dropped (not kernels)", int(unknown.sum())))
    table = table[~unknown].reset_index(drop=True)
    frame = pd.DataFrame({"kernel": table["Name"].astype("string").to_numpy()})
    for column, canonical in (("BeginNs", "start_ns"), ("EndNs", "end_ns")):
        frame[canonical] = _timestamps(table[column], path, column, None)[0].array
    # ROCm 4.0 stores the trace lane in "pid" and the process in "proc-id"; ROCm 6.x
    # moves the lane to "__section" and stores the real process id in "pid".
    pid = "proc-id" if "proc-id" in columns else ("pid" if "__section" in columns else None)
    for column, canonical in (("dev-id", "device_id"), ("queue-id", "queue_id"), ("stream-id", "stream_id"), (pid, "pid")):
        if column in columns and canonical in want:
            frame[canonical] = _integers(table[column], path, column, None)
    return frame


# ---------------------------------------------------------------------------------
# rocminfo dump (results.sysinfo.txt) and provenance

_AGENT = re.compile(r"^Agent\s+\d+\s*$")
# Agent properties sit at a 2-space indent; the ISA's "Name:" (amdgcn-amd-amdhsa--gfx942)
# is nested deeper and must not be taken for the agent's.
_AGENT_FIELD = re.compile(r"^  (Name|Marketing Name|Device Type):\s*(.*?)\s*$")


def device_from_rocminfo(path: str | Path) -> tuple[str | None, str | None]:
    """(marketing name, gfx name) of the first GPU agent of a rocminfo dump, e.g.
    ("AMD Instinct MI300X", "gfx942"); (None, None) when it lists no GPU agent."""
    path = Path(path)
    agents: list[dict[str, str]] = []
    for line in text_lines(path):
        if _AGENT.match(line.strip()):
            agents.append({})
            continue
        match = _AGENT_FIELD.match(line)
        if match and agents:
            agents[-1].setdefault(match.group(1), match.group(2))
    if not agents:
        raise InputError(path, "not a rocminfo dump (no 'Agent N' sections)", hint="is this the right file?")
    gpu = next((a for a in agents if a.get("Device Type") == "GPU"), None)
    if gpu is None:
        return None, None
    return gpu.get("Marketing Name") or None, gpu.get("Name") or None


# rocprof -o <prefix>.csv writes <prefix>.stats.csv, .json, .db, ... and <prefix>.sysinfo.txt.
_SUFFIXES = (".hip_stats.csv", ".hsa_stats.csv", ".copy_stats.csv", ".stats.csv", ".json", ".db", ".csv")


def _sysinfo_sibling(path: Path) -> Path | None:
    for suffix in _SUFFIXES:
        if path.name.endswith(suffix):
            sibling = path.with_name(path.name[: -len(suffix)] + ".sysinfo.txt")
            return sibling if sibling.is_file() else None
    return None


def _source(path: Path, fmt: str, oddities: list[Oddity]) -> Source:
    device = arch = None
    sibling = _sysinfo_sibling(path)
    if sibling is not None:
        try:
            device, arch = device_from_rocminfo(sibling)
        except InputError as exc:  # a broken side file must not hide a good profile
            oddities.append(Oddity(str(sibling), f"device not read from it: {exc.what}"))
    return Source(path=str(path), format=fmt, tool=TOOL, device=device, arch=arch)


def _is_sysinfo(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    return "HSA Agents" in sniff.head and "Device Type:" in sniff.head


def _scan_sysinfo(path: Path, want: Want) -> Scan:
    device, arch = device_from_rocminfo(path)
    source = Source(path=str(path), format="rocprof-sysinfo", tool=TOOL, device=device, arch=arch)
    return Scan(source=source, chunks=iter(()),
                oddities=[Oddity(str(path), NO_KERNELS.format("rocminfo system information"))])


# ---------------------------------------------------------------------------------
# An output directory (rocprof -d DIR, or the folder holding one -o results.csv run)

# Which of one run's files stands for it, best first: the per-dispatch CSV has the
# counters and launch resources, the database and the Chrome trace the same dispatches
# with timestamps only, the --stats file per-kernel totals. Copy and API statistics
# and the rocminfo dump hold no kernels.
_DIR_PREFERENCE = (
    ("rocprof-results", _is_results, _scan_results),
    ("rocprof-db", _is_db, _scan_db),
    ("rocprof-json", _is_json, _scan_json),
    ("rocprof-stats", _is_stats, _scan_stats),
)
_NOT_KERNELS = (".hip_stats.csv", ".hsa_stats.csv", ".copy_stats.csv", ".sysinfo.txt")


def _dir_files(directory: Path) -> list[tuple[int, Path]]:
    """(preference, file) for each rocprof output directly in ``directory``."""
    found = []
    for path in sorted(p for p in directory.iterdir() if p.is_file() and not p.name.endswith(_NOT_KERNELS)):
        sniff = Sniff(path)
        for rank, (_, is_kind, _) in enumerate(_DIR_PREFERENCE):
            try:
                claimed = bool(sniff.raw_head) and is_kind(sniff)
            except OSError:
                claimed = False
            if claimed:
                found.append((rank, path))
                break
    return found


def _is_dir(sniff: Sniff) -> bool:
    # An Omniperf workload (pmc_perf.csv beside the pass CSVs) is that reader's.
    if not sniff.is_dir or (sniff.path / "pmc_perf.csv").exists():
        return False
    try:
        return bool(_dir_files(sniff.path))
    except OSError:
        return False


def _scan_dir(path: Path, want: Want) -> Scan:
    found = _dir_files(path)
    if not found:
        raise InputError(path, "no rocprof output files in this directory", hint="name a results.* file instead")
    best = min(rank for rank, _ in found)
    chosen = [p for rank, p in found if rank == best]
    if len(chosen) > 1:
        raise InputError(path, f"holds {len(chosen)} rocprof runs ({', '.join(p.name for p in chosen)})",
                         hint="name the file of the run to read")
    _, _, scan = _DIR_PREFERENCE[best]
    # The source names the file read (and its format); the run's other files hold the same kernels.
    return scan(chosen[0], want)


# ---------------------------------------------------------------------------------
# Counter input files (rocprof -i input.txt): not a profile

_DIRECTIVE = re.compile(r"^\s*([A-Za-z_]+)\s*:(.*)$")


def read_counter_groups(path: str | Path) -> list[list[str]]:
    """Counters of each ``pmc`` line of a rocprof v1 input file, one list per line
    (rocprof reruns the application once per line), in file order.

    Accepts the spellings seen in real files: ``pmc: A B``, ``pmc : A, B``, indented
    lines, ``#`` comments; ``range:``, ``gpu:``, ``kernel:`` filters are ignored. An
    empty ``pmc:`` (Omniperf's timestamps pass) is a pass with no counters.
    """
    path = Path(path)
    groups: list[list[str]] = []
    for number, line in enumerate(text_lines(path), start=1):
        text = line.split("#", 1)[0]
        if not text.strip():
            continue
        match = _DIRECTIVE.match(text)
        if match is None:
            raise InputError(path, f"unexpected line {text.strip()!r}", line=number,
                             hint="expected 'pmc: COUNTER ...' or a range:/gpu:/kernel: filter")
        if match.group(1) == "pmc":
            groups.append([c for c in re.split(r"[\s,]+", match.group(2)) if c])
    if not groups:
        raise InputError(path, "no 'pmc:' line", hint="a rocprof input file lists counters as 'pmc: A B', one line per pass")
    return groups


FORMATS: tuple[Format, ...] = (
    Format(
        name="rocprof-results",
        tool=TOOL,
        kind="profile",
        description="rocprof v1 per-dispatch CSV (results.csv; Omniperf's SQ_*.csv passes), all header generations",
        sniff=_is_results,
        scan=_scan_results,
    ),
    Format(
        name="rocprof-stats",
        tool=TOOL,
        kind="profile",
        description="rocprof v1 --stats per-kernel CSV (results.stats.csv; hip_/copy_stats hold no kernels)",
        sniff=_is_stats,
        scan=_scan_stats,
    ),
    Format(
        name="rocprof-json",
        tool=TOOL,
        kind="profile",
        description="rocprof v1 Chrome-trace JSON (results.json): GPU-lane kernel dispatches",
        sniff=_is_json,
        scan=_scan_json,
    ),
    Format(
        name="rocprof-db",
        tool=TOOL,
        kind="profile",
        description="rocprof v1 SQLite results.db: kernel table (also KERN alone, as --stats writes it), "
                    "else the OPS (GPU packet) table",
        sniff=_is_db,
        scan=_scan_db,
    ),
    Format(
        name="rocprof-sysinfo",
        tool=TOOL,
        kind="profile",
        description="rocminfo dump rocprof saves (results.sysinfo.txt): device and arch, no dispatches",
        sniff=_is_sysinfo,
        scan=_scan_sysinfo,
    ),
)

# Sniffed after the Omniperf workload reader (see perfcheck.ingest.FORMATS): a workload
# directory holds rocprof pass CSVs too.
DIR_FORMATS: tuple[Format, ...] = (
    Format(
        name="rocprof-dir",
        tool=TOOL,
        kind="profile",
        description="rocprof v1 output directory: its per-dispatch CSV, else results.db, else results.json, "
                    "else results.stats.csv, read as one profile",
        sniff=_is_dir,
        scan=_scan_dir,
    ),
)
