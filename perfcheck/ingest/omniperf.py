"""Omniperf / rocprofiler-compute ("rocprof-compute") workload directories and roofline peaks.

Omniperf was renamed rocprofiler-compute in 2024 (3.x); the workload layout stayed.
``omniperf profile -n NAME`` writes a directory with

* ``pmc_perf.csv``: one row per kernel dispatch, the tool's join of all its counter
  passes: identity and launch columns, ~1,000 counter columns (per-channel
  ``TCC_X[n]``, ``*_sum`` aggregates) and the dispatch's start/end timestamps;
* ``sysinfo.csv``: one row describing the GPU, the host and (2.x+) the tool version;
* ``timestamps.csv`` (1.x, 2.x): the timing pass, already copied into pmc_perf.csv;
* ``log.txt`` (2.x+): the profiling log, whose first lines name the exact version;
* ``roofline.csv``: empirical peaks per GPU, when the roofline benchmark ran;
* ``SQ_LEVEL_WAVES.csv``, ``SQ_INST_LEVEL_{LDS,SMEM,VMEM}.csv``, ``SQ_IFETCH_LEVEL.csv``
  (2.x+): one pass each, because rocprof v1/v2 have a single accumulator,
  ``SQ_ACCUM_PREV_HIRES``, which sums whichever ``*_LEVEL`` counter its pass
  collected. The analyzer joins them to pmc_perf.csv by dispatch (utils/file_io.py
  create_df_pmc, ``coll_level``); so does this reader, naming each file's
  accumulator as rocprof-compute 3.3 names the rocprofv3 counters
  (profile_configs/counter_defs.yaml: ``SQ_LEVEL_WAVES_ACCUM``,
  ``SQ_INST_LEVEL_VMEM_ACCUM``, ...). Counters in pmc_perf.csv itself (such as
  ``GRBM_GUI_ACTIVE``) keep its values, as in the analyzer's formulas.

sysinfo.csv's ``cu_per_gpu``, ``max_waves_per_cu`` and ``num_xcd`` (the analyzer's
``$cu_per_gpu`` ... variables: the device as profiled, partition mode included) are
passed on as constant columns ``raw.sysinfo.NAME`` when a formula wants them. Its
``cur_sclk`` is not a kernel's clock (docs/clocks.md) and is not passed on.

Column generations seen in the tools' own test workloads:

* Omniperf 1.x (2022): rocprof v1 names ``Index, KernelName, gpu-id, queue-id,
  queue-index, pid, tid, grd, wgr, lds, scr, vgpr, sgpr, fbar, sig, obj``, counters,
  then ``DispatchNs, BeginNs, EndNs, CompleteNs``.
* Omniperf 2.0 (2024): ``Dispatch_ID, Kernel_Name, GPU_ID, Grid_Size, Workgroup_Size,
  LDS_Per_Workgroup, Scratch_Per_Workitem, Arch_VGPR, Accum_VGPR, SGPR, wave_size``
  (``Wave_Size`` with rocprofv2), ``Start_Timestamp, End_Timestamp``. Each joined pass
  leaves copies of its identity columns suffixed ``_1``, ``_2``, ... (``wave_size_3``,
  ``Correlation_ID_7``, ``XCC_Index_5``). The rocprofv2 backend (MI300X) writes
  timestamps in lossy E-notation (``8.1097E+14``) and kernel names ending ``" (.kd)"``.
* rocprof-compute 3.x (2025, rocprofv3 backend): the same names plus ``Kernel_ID_N``
  copies; ``Start_Timestamp``/``End_Timestamp`` are fractional (means over passes).

pmc_perf.csv is streamed with pyarrow's block reader; only the columns the caller
wants are converted, so summarising a 300,000-dispatch, 1,000-column workload
does not pay for a million counter cells per hundred rows.
"""

from __future__ import annotations

import mmap
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Scan, Sniff, Want
from perfcheck.ingest.tabular import read_csv, require_columns, split_csv_line, text_lines, to_number
from perfcheck.model import Oddity, PeakDetail, Peaks, Source
from perfcheck.schema import raw

TOOL = "omniperf"
PMC_PERF = "pmc_perf.csv"
# pyarrow's block: its peak memory grows with it (64 MiB blocks of a 1,000-column
# pmc_perf.csv peaked at 1.3 GB RSS for 10 converted columns, 4 MiB at 0.24 GB), so
# blocks stay small and are gathered into chunks of up to CHUNK_CELLS converted values,
# which keeps the per-chunk pandas work (a few ms) rare.
BLOCK_BYTES = 4 << 20
CHUNK_CELLS = 8 << 20  # 64 MiB of float64
_MAX_LINE = 64 << 20  # a header or first row longer than this is not a pmc_perf.csv

# Tool column -> canonical column, all generations; a file has a subset.
_IDENTITY: dict[str, str] = {
    # Omniperf 1.x: rocprof v1 names (arch_vgpr/accum_vgpr from ROCm 5.3 on)
    "Index": "dispatch_id",
    "KernelName": "kernel",
    "gpu-id": "device_id",
    "queue-id": "queue_id",
    "pid": "pid",
    "tid": "tid",
    "grd": "grid_size",
    "wgr": "workgroup_size",
    "lds": "lds_per_workgroup",
    "scr": "scratch_per_thread",
    "vgpr": "vgpr",
    "arch_vgpr": "vgpr",
    "accum_vgpr": "agpr",
    "sgpr": "sgpr",
    "BeginNs": "start_ns",
    "EndNs": "end_ns",
    # Omniperf 2.x, rocprof-compute 3.x
    "Dispatch_ID": "dispatch_id",
    "Kernel_Name": "kernel",
    "GPU_ID": "device_id",
    "Queue_ID": "queue_id",
    "PID": "pid",
    "TID": "tid",
    "Correlation_ID": "correlation_id",
    "Grid_Size": "grid_size",
    "Workgroup_Size": "workgroup_size",
    "LDS_Per_Workgroup": "lds_per_workgroup",
    "Scratch_Per_Workitem": "scratch_per_thread",
    "Arch_VGPR": "vgpr",
    "Accum_VGPR": "agpr",
    "SGPR": "sgpr",
    "wave_size": "wave_size",
    "Wave_Size": "wave_size",
    "Start_Timestamp": "start_ns",
    "End_Timestamp": "end_ns",
}
_KERNEL_COLUMNS = ("Kernel_Name", "KernelName")
_TIMING = ("start_ns", "end_ns", "duration")

# Per-level files; each one's accumulator is read as X_ACCUM (the rocprofv3 derived
# counter accumulate(X, HIGH_RES), rocprof-compute 3.3 counter_defs.yaml).
LEVEL_FILES: tuple[str, ...] = (
    "SQ_LEVEL_WAVES", "SQ_INST_LEVEL_VMEM", "SQ_INST_LEVEL_SMEM", "SQ_INST_LEVEL_LDS", "SQ_IFETCH_LEVEL",
)
_ACCUMULATOR = "SQ_ACCUM_PREV_HIRES"
SYSINFO_PREFIX = "sysinfo."
SYSINFO_FIGURES: tuple[str, ...] = ("cu_per_gpu", "max_waves_per_cu", "num_xcd")

# Columns that are neither canonical nor counters: code-object/signal handles (hex
# strings), the queue slot, the host-side clocks the tool discards, pass bookkeeping.
# Their ``_N`` pass copies (``obj_7``, ``Kernel_ID_12``) are not counters either.
_NOT_COUNTERS = frozenset(_IDENTITY) | {
    "obj", "sig", "fbar", "queue-index", "Queue_Index", "OBJ", "SIG", "DispatchNs", "CompleteNs",
    "HostDuration", "Kernel_ID", "XCC_Index", "Node",
}
_PASS_COPY = re.compile(r"^(.+)_\d+$")

_VERSION_RE = re.compile(
    r"^\s*(?:omniperf|rocprofiler-compute|rocprof-compute|rocm compute profiler)\s+version:\s*(\S+)",
    re.IGNORECASE | re.MULTILINE,
)
# E-notation with its mantissa's fraction digits and exponent: "8.1097E+14" keeps
# 4 fraction digits of a 10^14 value, i.e. a resolution of 10^10 ns.
_E_NOTATION = r"^\s*[+-]?\d*(?:\.(?P<frac>\d*))?[eE](?P<exp>[+-]?\d+)\s*$"


# --------------------------------------------------------------------------- provenance


def _sysinfo(directory: Path) -> tuple[dict[str, str], list[Oddity]]:
    """First row of sysinfo.csv as text, or nothing. A broken sysinfo.csv costs the
    device name, not the profile, so it is a warning."""
    path = directory / "sysinfo.csv"
    if not path.is_file():
        return {}, []
    try:
        frame = read_csv(path)
    except InputError as exc:
        return {}, [Oddity(str(path), f"unreadable, device unknown ({exc.what})")]
    if frame.empty:
        return {}, [Oddity(str(path), "has no data row, device unknown")]
    row = frame.iloc[0]
    return {str(k).strip(): str(v).strip() for k, v in row.items() if str(v).strip() not in ("", "nan", "NA")}, []


def _log_version(directory: Path) -> str | None:
    """2.x+ logs start with e.g. "Omniperf version: 2.0.0-RC1" or
    "Rocprofiler-Compute version: 3.1.0"; sysinfo.csv keeps only the major ("2")."""
    path = directory / "log.txt"
    try:
        with open(path, "rb") as fh:
            head = fh.read(64 << 10).decode("utf-8", errors="replace")
    except OSError:
        return None
    match = _VERSION_RE.search(head)
    return match.group(1) if match else None


def _source(path: Path, directory: Path, fmt: str) -> tuple[Source, list[Oddity]]:
    info, oddities = _sysinfo(directory)
    # 1.x: gpu_soc + name ("mi200"); 2.x+: gpu_arch + gpu_model ("MI300X_A1"), 3.x also gpu_series.
    arch = info.get("gpu_arch") or info.get("gpu_soc")
    source = Source(
        path=str(path),
        format=fmt,
        tool=TOOL,
        tool_version=_log_version(directory) or info.get("version"),
        device=info.get("gpu_model") or info.get("gpu_series") or info.get("name"),
        arch=arch.split(":")[0] if arch else None,
    )
    return source, oddities


# --------------------------------------------------------------------------- header


@dataclass
class _Layout:
    """What pmc_perf.csv holds, decided from its header and first data row."""

    names: list[str]  # column names as read: the header with repeats made unique
    identity: dict[str, str]  # canonical -> column name (first of its aliases present)
    counters: list[str]  # counter columns, in file order
    rows: bool  # at least one data row
    oddities: list[Oddity] = field(default_factory=list)


def _first_lines(path: Path) -> tuple[str, str | None, bool]:
    """Header, first data row (None if there is none) and whether the file ends with a newline."""
    try:
        with open(path, "rb") as fh:
            header = fh.readline(_MAX_LINE)
            first = fh.readline(_MAX_LINE)
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(size - 1, 0))
            last = fh.read(1)
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror})") from None
    if not header.strip():
        raise InputError(path, "file is empty", hint="was the profiling run cut off before it wrote anything?")
    if b"\x00" in header or b"\x00" in first:
        raise InputError(path, "binary data where a CSV header was expected", line=1, hint="is this the right file?")
    try:
        header_text = header.decode("utf-8").rstrip("\r\n")
        first_text = first.decode("utf-8").rstrip("\r\n") if first.strip() else None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not text (byte {exc.start} is not UTF-8)", hint="is this the right file?") from None
    return header_text, first_text, last == b"\n"


def _unique(header: list[str]) -> tuple[list[str], list[str]]:
    """A header whose names repeat gets ``name.1``, ``name.2`` for the later copies (as
    pandas names them), so every column can be asked for by name."""
    taken = set(header)
    seen: dict[str, int] = {}
    names, repeated = [], []
    for i, name in enumerate(header):
        if not name:
            name = f"column {i + 1}"
        if name in seen:
            repeated.append(name)
            count = seen[name]
            while f"{name}.{count + 1}" in taken:
                count += 1
            seen[name] = count + 1
            name = f"{name}.{count + 1}"
            taken.add(name)
        else:
            seen[name] = 0
        names.append(name)
    return names, repeated


def _is_number(text: str) -> bool:
    if text.strip() in ("", "NA", "N/A", "n/a", "null", "NULL", "-nan", "-NaN"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _layout(path: Path) -> _Layout:
    header_text, first_text, ends_with_newline = _first_lines(path)
    header = [f.strip() for f in split_csv_line(header_text)]
    require_columns(path, header, [next((k for k in _KERNEL_COLUMNS if k in header), "Kernel_Name")], line=1,
                    hint="pmc_perf.csv names the kernel of each dispatch; is this an Omniperf/rocprof-compute workload?")
    if not ends_with_newline:
        # pandas.to_csv, which writes pmc_perf.csv, ends every row with a newline: a file
        # without one was cut off, and its last value may be a cut-off number.
        raise InputError(path, "the last row is cut off (no newline at the end of the file)",
                         line=_count_lines(path), hint="the profiling run or the copy was interrupted; re-run or re-copy it")
    names, repeated = _unique(header)
    layout = _Layout(names=names, identity={}, counters=[], rows=first_text is not None)
    if repeated:
        layout.oddities.append(Oddity(str(path), f"header repeats column names ({', '.join(sorted(set(repeated)))}); "
                                                 "later copies read as NAME.1, NAME.2", len(repeated)))
    first = split_csv_line(first_text) if first_text is not None else None
    if first is not None and len(first) != len(header):
        raise InputError(path, f"row has {len(first)} fields, the header has {len(header)}", line=2,
                         hint="is the file complete and written by Omniperf/rocprof-compute?")
    skipped = []
    for i, (name, original) in enumerate(zip(names, header)):
        canonical = _IDENTITY.get(original)
        if canonical and canonical not in layout.identity and name == original:
            layout.identity[canonical] = name
            continue
        copy = _PASS_COPY.match(original)
        if original in _NOT_COUNTERS or (copy and copy.group(1) in _NOT_COUNTERS):
            continue
        if not original or (first is not None and not _is_number(first[i])):
            skipped.append(name)
            continue
        layout.counters.append(name)
    if skipped:
        layout.oddities.append(Oddity(str(path), f"columns that are neither known identity columns nor numbers "
                                                 f"ignored ({', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''})",
                                      len(skipped)))
    return layout


def _count_lines(path: Path) -> int:
    """1-based number of the last line (only on the error path: it reads the file)."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        count = 0
        for start in range(0, len(data), 16 << 20):
            count += data[start:start + (16 << 20)].count(b"\n")
    return count + 1


def _line_of(path: Path, text: str) -> int | None:
    """File line holding ``text`` as a whole line (pyarrow's multi-threaded reader does
    not know row numbers)."""
    needle = text.encode("utf-8")
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        at = data.find(b"\n" + needle + b"\n")
        if at < 0:
            at = data.find(b"\n" + needle)
        return data[: at + 1].count(b"\n") + 1 if at >= 0 else None


# --------------------------------------------------------------------------- timing


@dataclass
class _Clock:
    """One timestamp column of a chunk, in ns."""

    values: np.ndarray  # float64; NaN where empty or lossy
    exact: np.ndarray | None  # int64, when every value is a whole number
    lossy: np.ndarray  # bool: E-notation too short to resolve 1 ns


def _parse_stamps(text: pa.Array | pa.ChunkedArray) -> _Clock:
    """Timestamp text -> ns. Whole numbers are kept exact as int64 (float64 loses the
    last ns after 2^53 ns, 104 days of uptime); 3.x writes pass means such as
    1248227792617386.5, which only float64 can hold."""
    values = pc.cast(text, pa.float64()).to_numpy(zero_copy_only=False).copy()
    lossy = np.zeros(len(values), dtype=bool)
    if pc.any(pc.match_substring_regex(text, "[eE]")).as_py():
        parts = pc.extract_regex(text, _E_NOTATION)
        digits = pc.utf8_length(pc.struct_field(parts, "frac"))
        exponent = pc.cast(pc.replace_substring(pc.struct_field(parts, "exp"), "+", ""), pa.int64())
        lossy = pc.fill_null(pc.greater(pc.subtract(exponent, digits), 0), False).to_numpy(zero_copy_only=False)
        values[lossy] = np.nan
    try:
        exact = pc.fill_null(pc.cast(text, pa.int64()), 0).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:  # fractions or E-notation
        exact = None
    return _Clock(values, exact, lossy)


def _stamps_table(directory: Path) -> pd.DataFrame | None:
    """timestamps.csv indexed by dispatch id, for a pmc_perf.csv without timestamps.
    Small (one row per dispatch, ~20 columns): read whole."""
    path = directory / "timestamps.csv"
    if not path.is_file():
        return None
    frame = read_csv(path)
    id_col = next((c for c in ("Dispatch_ID", "Index") if c in frame.columns), None)
    start_col = next((c for c in ("Start_Timestamp", "BeginNs") if c in frame.columns), None)
    end_col = next((c for c in ("End_Timestamp", "EndNs") if c in frame.columns), None)
    require_columns(path, list(frame.columns), [id_col or "Dispatch_ID", start_col or "Start_Timestamp",
                                                end_col or "End_Timestamp"], line=1)
    ids = to_number(frame[id_col], path=path, column=id_col, first_line=2)
    table = pd.DataFrame(index=pd.Index(ids.to_numpy(dtype="int64", na_value=-1), name="dispatch_id"))
    for name, column in (("start", start_col), ("end", end_col)):
        checked = to_number(frame[column], path=path, column=column, first_line=2)  # located errors
        clock = _parse_stamps(pa.array(frame[column].str.strip().mask(checked.isna()), type=pa.string()))
        table[name] = clock.values
        table[f"{name}_lossy"] = clock.lossy
        if clock.exact is not None:
            table[f"{name}_exact"] = pd.arrays.IntegerArray(clock.exact, np.isnan(clock.values))
    return table[~table.index.duplicated(keep="first")]


def _stamps_from_table(stamps: pd.DataFrame, ids: np.ndarray) -> tuple[_Clock, _Clock]:
    rows = stamps.reindex(np.nan_to_num(ids, nan=-1).astype(np.int64))
    clocks = []
    for name in ("start", "end"):
        exact = rows[f"{name}_exact"].to_numpy(dtype=np.int64, na_value=0) if f"{name}_exact" in rows else None
        lossy = rows[f"{name}_lossy"].fillna(False).to_numpy(dtype=bool)
        clocks.append(_Clock(rows[name].to_numpy(dtype=np.float64), exact, lossy))
    return clocks[0], clocks[1]


def _timing_columns(start: _Clock, end: _Clock) -> dict[str, object]:
    missing_start, missing_end = np.isnan(start.values), np.isnan(end.values)
    if start.exact is not None and end.exact is not None:
        duration = (end.exact - start.exact).astype(np.float64) * 1e-9
        return {
            "start_ns": pd.arrays.IntegerArray(start.exact, missing_start),
            "end_ns": pd.arrays.IntegerArray(end.exact, missing_end),
            "duration": np.where(missing_start | missing_end, np.nan, duration),
        }
    # The duration comes from the unrounded values: 3.x timestamps are means over the
    # counter passes (rocprof-compute's join_prof averages Start_Timestamp and
    # End_Timestamp across pmc_perf_N.csv and SQ_*.csv, and its roofline uses End - Start
    # of these means), so rounding each end first could shift it by 1 ns.
    return {
        "start_ns": np.rint(start.values),  # float64; Int64 once dispatch.finish has checked them
        "end_ns": np.rint(end.values),
        "duration": _difference(end.values, start.values) * 1e-9,
    }


def _difference(end: np.ndarray, start: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, emptied with a warning by finish
        return end - start


# --------------------------------------------------------------------------- scanning


@dataclass
class _Plan:
    """The columns one scan converts, and how."""

    identity: dict[str, str]  # canonical -> column, wanted ones only (start/end separate)
    start: str | None
    end: str | None
    counters: list[str]
    stamps: pd.DataFrame | None  # timestamps.csv fallback
    want_timing: bool
    levels: pd.DataFrame | None = None  # per-level accumulators by dispatch id
    sysinfo: dict[str, float] = field(default_factory=dict)  # raw.sysinfo.* constants

    @property
    def include(self) -> list[str]:
        columns = list(self.identity.values()) + [c for c in (self.start, self.end) if c] + self.counters
        return list(dict.fromkeys(columns))

    def types(self) -> dict[str, pa.DataType]:
        # Launch columns as float64, not int64: pandas writes "1048576.0" once a joined
        # column held a NaN. Timestamps as text, to see lossy E-notation before parsing.
        types: dict[str, pa.DataType] = {c: pa.float64() for c in self.include}
        types[self.identity["kernel"]] = pa.dictionary(pa.int32(), pa.string())
        for column in (self.start, self.end):
            if column:
                types[column] = pa.string()
        return types


def _plan(path: Path, layout: _Layout, want: Want, oddities: list[Oddity]) -> _Plan:
    want_timing = any(c in want for c in _TIMING)
    identity = {c: n for c, n in layout.identity.items() if c == "kernel" or (c in want and c not in ("start_ns", "end_ns"))}
    start, end = layout.identity.get("start_ns"), layout.identity.get("end_ns")
    stamps = None
    if want_timing and not (start and end):
        start = end = None
        stamps = _stamps_table(path.parent)
        if stamps is not None and "dispatch_id" in layout.identity:
            identity["dispatch_id"] = layout.identity["dispatch_id"]
        else:
            stamps = None
            oddities.append(Oddity(str(path), "no start/end timestamps (neither in pmc_perf.csv nor in timestamps.csv "
                                              "by dispatch id); durations unknown"))
    elif not want_timing:
        start = end = None
    counters = [c for c in layout.counters if raw(c) in want]
    plan = _Plan(identity, start, end, counters, stamps, want_timing)
    plan.sysinfo = _sysinfo_figures(path.parent, want)
    wanted_levels = [n for n in LEVEL_FILES if raw(f"{n}_ACCUM") in want and raw(f"{n}_ACCUM") not in
                     {raw(c) for c in layout.counters}]
    if wanted_levels and "dispatch_id" in layout.identity:
        plan.levels = _levels_table(path.parent, wanted_levels, oddities)
        if plan.levels is not None:
            plan.identity["dispatch_id"] = layout.identity["dispatch_id"]
    return plan


def _levels_table(directory: Path, names: list[str], oddities: list[Oddity]) -> pd.DataFrame | None:
    """The accumulator of each per-level file, indexed by dispatch id. Only the two
    columns are converted (pyarrow, block by block), as for pmc_perf.csv."""
    columns: dict[str, pd.Series] = {}
    for name in names:
        path = directory / f"{name}.csv"
        if not path.is_file():
            continue
        header = [f.strip() for f in split_csv_line(_first_lines(path)[0])]
        id_col = next((c for c in ("Dispatch_ID", "Index") if c in header), None)
        if id_col is None or _ACCUMULATOR not in header:
            oddities.append(Oddity(str(path), f"no {id_col or 'Dispatch_ID'} or {_ACCUMULATOR} column; "
                                              f"{name}_ACCUM (and what it gives, such as achieved occupancy) unknown"))
            continue
        try:
            table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
                include_columns=[id_col, _ACCUMULATOR],
                column_types={id_col: pa.float64(), _ACCUMULATOR: pa.float64()}))
        except pa.ArrowInvalid as exc:
            raise InputError(path, f"malformed per-level file ({str(exc).splitlines()[0][:160]})",
                             hint="is the workload complete?") from None
        ids = table.column(id_col).to_numpy(zero_copy_only=False)
        values = pd.Series(table.column(_ACCUMULATOR).to_numpy(zero_copy_only=False), index=ids)
        values = values[~np.isnan(ids)]
        columns[raw(f"{name}_ACCUM")] = values[~values.index.duplicated(keep="first")]
    if not columns:
        return None
    return pd.DataFrame(columns)


def _sysinfo_figures(directory: Path, want: Want) -> dict[str, float]:
    wanted = [n for n in SYSINFO_FIGURES if raw(SYSINFO_PREFIX + n) in want]
    if not wanted:
        return {}
    info, _ = _sysinfo(directory)
    figures = {}
    for name in wanted:
        try:
            value = float(info.get(name, "nan"))
        except ValueError:
            continue
        if np.isfinite(value) and value > 0:
            figures[raw(SYSINFO_PREFIX + name)] = value
    return figures


def _stamps_of(table: pa.Table, plan: _Plan, path: Path, first_line: int) -> tuple[_Clock, _Clock] | None:
    if plan.start and plan.end:
        clocks = []
        for column in (plan.start, plan.end):
            try:
                clocks.append(_parse_stamps(table.column(column)))
            except pa.ArrowInvalid:
                text = pd.Series(table.column(column).to_pylist(), dtype=object).fillna("")
                to_number(text, path=path, column=column, first_line=first_line)  # raises, located
                raise
        return clocks[0], clocks[1]
    if plan.stamps is not None:
        return _stamps_from_table(plan.stamps, table.column(plan.identity["dispatch_id"]).to_numpy(zero_copy_only=False))
    return None


def _frame(table: pa.Table, plan: _Plan, path: Path, first_line: int, tally: dict[str, int]) -> pd.DataFrame:
    columns: dict[str, object] = {}
    for canonical, column in plan.identity.items():
        if canonical == "kernel":
            # categorical; the " [clone .kd]" / " (.kd)" suffixes go in ingest/dispatch.finish
            columns["kernel"] = table.column(column).to_pandas()
        else:
            # float64: dispatch.finish empties values no count can have (inf, -1, 2.5)
            columns[canonical] = table.column(column).to_numpy(zero_copy_only=False)
    stamps = _stamps_of(table, plan, path, first_line) if plan.want_timing else None
    if stamps is not None:
        tally["lossy"] += int((stamps[0].lossy | stamps[1].lossy).sum())
        columns.update(_timing_columns(*stamps))
    frame = pd.DataFrame(columns)
    if plan.counters:
        counters = table.select(plan.counters).to_pandas()
        counters.columns = [raw(c) for c in plan.counters]
        frame = pd.concat([frame, counters], axis=1)
    if plan.levels is not None:
        ids = table.column(plan.identity["dispatch_id"]).to_numpy(zero_copy_only=False)
        levels = plan.levels.reindex(ids)
        levels.index = frame.index
        frame = pd.concat([frame, levels], axis=1)
    for name, value in plan.sysinfo.items():
        frame[name] = value
    return frame


def _located(path: Path, exc: pa.ArrowInvalid, layout: _Layout, bad_rows: list) -> InputError:
    """pyarrow's errors -> one located line. Parse errors come with the offending row
    (invalid_row_handler); conversion errors name a column, which is re-read as text
    to find the row."""
    hint = "is the file complete and written by Omniperf/rocprof-compute?"
    if bad_rows:
        row = bad_rows[0]
        line = row.number if row.number is not None else _line_of(path, row.text)
        return InputError(path, f"row has {row.actual_columns} fields, the header has {row.expected_columns}",
                          line=line, hint=hint)
    match = re.search(r"column #(\d+)", str(exc))
    if match:
        column = layout.names[int(match.group(1))]
        reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(column_names=layout.names, skip_rows=1, block_size=BLOCK_BYTES),
                                convert_options=pacsv.ConvertOptions(include_columns=[column], column_types={column: pa.string()}))
        line = 2
        for batch in reader:
            text = pd.Series(batch.column(0).to_pylist(), dtype=object).fillna("")
            to_number(text, path=path, column=column, first_line=line)  # raises, located
            line += batch.num_rows
    message = str(exc).split("\n")[0]
    return InputError(path, f"malformed pmc_perf.csv ({message[:160]})", hint=hint)


@contextmanager
def _quiet_undecodable_rows() -> Iterator[None]:
    """pyarrow hands a malformed row to ``invalid_row_handler`` as text; when that row
    is not UTF-8, decoding it fails inside pyarrow before the handler runs, and Python
    prints "Exception ignored in ..." with a traceback to stderr. The parse error that
    follows is reported as a located InputError anyway, so only that print is dropped."""
    previous = sys.unraisablehook

    def hook(unraisable: "sys.UnraisableHookArgs") -> None:
        if not isinstance(unraisable.exc_value, UnicodeDecodeError):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _gathered(reader: pacsv.CSVStreamingReader, rows: int) -> Iterator[pa.Table]:
    """The reader's small batches, gathered into tables of about ``rows`` rows."""
    batches: list[pa.RecordBatch] = []
    count = 0
    while True:
        with _quiet_undecodable_rows():  # only around pyarrow's own work, not across yields
            batch = next(reader, None)
        if batch is None:
            break
        batches.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(batches)
            batches, count = [], 0
    if batches:
        yield pa.Table.from_batches(batches)


def _scan_pmc_perf(path: Path, want: Want, source: Source, oddities: list[Oddity]) -> Scan:
    layout = _layout(path)
    oddities.extend(layout.oddities)
    if not layout.rows:
        oddities.append(Oddity(str(path), "holds no kernel dispatches (header only: the run launched no kernels, "
                                          "or the kernel/dispatch filter matched none)"))
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    plan = _plan(path, layout, want, oddities)
    scan = Scan(source=source, chunks=iter(()), oddities=oddities)

    def chunks() -> Iterator[pd.DataFrame]:
        bad_rows: list = []

        def on_bad_row(row: object) -> str:
            bad_rows.append(row)
            return "error"

        tally = {"lossy": 0}
        line = 2  # file line of the next chunk's first row
        try:
            with _quiet_undecodable_rows():
                reader = pacsv.open_csv(
                    path,
                    read_options=pacsv.ReadOptions(column_names=layout.names, skip_rows=1, block_size=BLOCK_BYTES),
                    parse_options=pacsv.ParseOptions(invalid_row_handler=on_bad_row),
                    convert_options=pacsv.ConvertOptions(include_columns=plan.include, column_types=plan.types(),
                                                         strings_can_be_null=True),
                )
            for table in _gathered(reader, max(1, CHUNK_CELLS // len(plan.include))):
                yield _frame(table, plan, path, line, tally)
                line += table.num_rows
        except pa.ArrowInvalid as exc:
            raise _located(path, exc, layout, bad_rows) from None
        if tally["lossy"]:
            scan.oddities.append(Oddity(
                str(path), "timestamps written in E-notation too short to resolve 1 ns (e.g. 8.1097E+14, as "
                           "Omniperf 2.0's rocprofv2 backend wrote them); start, end and duration left empty",
                tally["lossy"]))

    scan.chunks = chunks()
    return scan


def _scan_workload(path: Path, want: Want) -> Scan:
    pmc = path / PMC_PERF
    if not path.is_dir() or not pmc.is_file():
        raise InputError(path, f"not an Omniperf/rocprof-compute workload directory (no {PMC_PERF})",
                         hint="point at the directory `omniperf profile -n NAME` wrote (workloads/NAME/GPU)")
    source, oddities = _source(path, path, "omniperf-workload")
    scan = _scan_pmc_perf(pmc, want, source, oddities)
    roofline = path / "roofline.csv"
    if roofline.is_file():
        scan.companion_peaks = (roofline,)
    return scan


def _scan_pmc_file(path: Path, want: Want) -> Scan:
    if path.is_dir():
        raise InputError(path, "is a directory", hint="use --format omniperf-workload for a workload directory")
    source, oddities = _source(path, path.parent, "omniperf-pmc-perf")
    return _scan_pmc_perf(path, want, source, oddities)


# --------------------------------------------------------------------------- sniffing


def _sniff_workload(sniff: Sniff) -> bool:
    try:
        return sniff.is_dir and (sniff.path / PMC_PERF).is_file()
    except OSError:
        return False


# The joined pmc_perf.csv and the per-pass pmc_perf_N.csv that 3.x keeps next to it.
_PMC_FILE = re.compile(r"pmc_perf(?:_\d+)?\.csv")


def _sniff_pmc_file(sniff: Sniff) -> bool:
    """By name: a 1.x pmc_perf.csv has the very columns of a rocprof v1 results file,
    and a 2.x one those of the per-pass SQ_*.csv files next to it."""
    try:
        if sniff.is_dir or not _PMC_FILE.fullmatch(sniff.path.name) or sniff.is_binary:
            return False
        first = sniff.head.split("\n", 1)[0]
        return any(k in (f.strip() for f in split_csv_line(first)) for k in _KERNEL_COLUMNS)
    except Exception:  # noqa: BLE001 - a sniffer answers yes or no, never raises
        return False


# --------------------------------------------------------------------------- roofline.csv

# roofline.csv (the rocprof-compute roofline micro-benchmark, one row per GPU): ceiling
# column -> peak name, matched case-insensitively (the tool writes "hbmBwHigh" next to
# "HBMBwLow"). MFMA (matrix core) ceilings are separate peaks: on MI200 MFMA FP64 is
# twice the vector FP64 rate, so folding them into flop_rate_* would mix two roofs.
# rocprof-compute 3.3 (rocm-systems 1b1610fc2, the roofline binaries' header
# "device,HBMBw,HBMBwLow,hbmBwHigh,MALLBw,...,MFMAF4Flops,...,MFMAF6Flops,...,MFMAF8Flops,
# ...,MFMAI8Ops,...") adds the MALL (Infinity Cache) bandwidth and MFMA F8/F6/F4; a GPU
# without a unit (F6/F4 before MI350, MALL before MI300) gets 0 there, which means
# unsupported: it becomes a missing ceiling with a warning, never a zero roof.
_CEILINGS: dict[str, str] = {
    "mallbw": "mall_bw",
    "mfmaf8flops": "mfma_rate_fp8",
    "mfmaf6flops": "mfma_rate_f6",
    "mfmaf4flops": "mfma_rate_f4",
    "hbmbw": "hbm_bw",
    "l2bw": "l2_bw",
    "l1bw": "l1_bw",
    "ldsbw": "lds_bw",
    "fp64flops": "flop_rate_fp64",
    "fp32flops": "flop_rate_fp32",
    "fp16flops": "flop_rate_fp16",
    "bf16flops": "flop_rate_bf16",
    "i32ops": "iop_rate_int32",
    "i8ops": "iop_rate_int8",
    "mfmaf64flops": "mfma_rate_fp64",
    "mfmaf32flops": "mfma_rate_fp32",
    "mfmaf16flops": "mfma_rate_fp16",
    "mfmabf16flops": "mfma_rate_bf16",
    "mfmai8ops": "mfma_rate_int8",
}
# Units: GB/s and GFLOP/s (GOP/s), decimal. rocprof-compute's roofline plot
# (utils/roofline_calc.py) places kernels at FLOPs / duration-in-ns = 1e9 FLOP/s and
# bytes / ns = 1e9 B/s on the same axes as these ceilings.
_GIGA = 1e9


def _roofline_unit(column: str) -> str | None:
    base = re.sub(r"(low|high)$", "", column.lower())
    if base.endswith("bw"):
        return "B/s"
    if base.endswith("flops"):
        return "FLOP/s"
    if base.endswith("ops"):
        return "OP/s"
    return None


def _sniff_roofline(sniff: Sniff) -> bool:
    try:
        if sniff.is_dir or sniff.is_binary or not sniff.lines:
            return False
        header = [f.strip().lower() for f in split_csv_line(sniff.lines[0])]
        return bool(header) and header[0] == "device" and "hbmbw" in header
    except Exception:  # noqa: BLE001 - a sniffer answers yes or no, never raises
        return False


def _read_roofline(path: Path) -> Peaks:
    lines = text_lines(path)
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(fh.tell() - 1, 0))
        ends_with_newline = fh.read(1) == b"\n"
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    if not numbered:
        raise InputError(path, "file is empty", hint="did the roofline benchmark run?")
    header = [f.strip() for f in split_csv_line(numbered[0][1])]
    require_columns(path, header, ["device", "HBMBw"], line=numbered[0][0])
    rows = numbered[1:]
    if not rows:
        raise InputError(path, "no device rows after the header", line=numbered[0][0] + 1,
                         hint="the roofline benchmark did not finish; re-run it (omniperf profile --roof-only)")
    if not ends_with_newline:
        # The benchmark ends every row with a newline; without one the last number may be cut.
        raise InputError(path, "the last row is cut off (no newline at the end of the file)", line=rows[-1][0],
                         hint="re-run the roofline benchmark or re-copy the file")
    units = {c: _roofline_unit(c) for c in header[1:]}
    details: list[PeakDetail] = []
    sums: dict[str, list[float]] = {}
    unsupported: dict[str, list[int]] = {}
    impossible: dict[str, list[int]] = {}
    oddities = [Oddity(str(path), f"column {c!r} is not a bandwidth or FLOP/OP rate; ignored")
                for c, u in units.items() if u is None]
    for number, line in rows:
        fields = [f.strip() for f in split_csv_line(line)]
        if len(fields) != len(header):
            raise InputError(path, f"row has {len(fields)} fields, the header has {len(header)}", line=number,
                             hint="is the file complete?")
        for column, text in zip(header[1:], fields[1:]):
            unit = units[column]
            if unit is None:
                continue
            try:
                value = float(text) * _GIGA
            except ValueError:
                raise InputError(path, f"{text!r} is not a number", line=number, column=column,
                                 hint="is the file complete?") from None
            if value == 0:  # rocprof-compute writes 0 where the GPU lacks the unit
                unsupported.setdefault(column, []).append(number)
                continue
            if not (np.isfinite(value) and value > 0):
                impossible.setdefault(column, []).append(number)
                continue
            details.append(PeakDetail(source=str(path), name=f"device {fields[0]} {column}", value=value, unit=unit))
            peak = _CEILINGS.get(column.lower())
            if peak:
                sums.setdefault(peak, []).append(value)
    oddities += [Oddity(str(path), f"{column} is 0 on line "
                                   f"{', '.join(map(str, lines))} (unsupported on this GPU); that ceiling is missing",
                        len(lines))
                 for column, lines in unsupported.items()]
    if impossible:  # damage, not a missing unit: one warning for the file
        where = "; ".join(f"{column} on line {', '.join(map(str, lines))}" for column, lines in impossible.items())
        oddities.append(Oddity(str(path), f"values not positive and finite ({where}); those ceilings are missing",
                               sum(len(lines) for lines in impossible.values())))
    # One GPU model per node: the per-device figures differ by run-to-run noise, so
    # their mean is the machine's ceiling; every device's figure stays in the details.
    values = {peak: float(np.mean(v)) for peak, v in sums.items()}
    # metrics.counters counts F6 and F4 matrix FLOPs together (mfma_flops_f6f4): their
    # roof is the lower of the two rates, so that a kernel is never placed under a
    # ceiling it cannot reach.
    if "mfma_rate_f6" in values and "mfma_rate_f4" in values:
        values["mfma_rate_f6f4"] = min(values["mfma_rate_f6"], values["mfma_rate_f4"])
    source, sys_oddities = _source(path, path.parent, "omniperf-roofline")
    return Peaks(values=values, details=tuple(details), sources=(source,), oddities=tuple(oddities + sys_oddities))


FORMATS: tuple[Format, ...] = (
    Format(
        name="omniperf-workload",
        tool=TOOL,
        kind="profile",
        description="Omniperf / rocprof-compute workload directory (pmc_perf.csv + sysinfo.csv, 1.x-3.x)",
        sniff=_sniff_workload,
        scan=_scan_workload,
    ),
    Format(
        name="omniperf-pmc-perf",
        tool=TOOL,
        kind="profile",
        description="Omniperf / rocprof-compute pmc_perf.csv given as a file (sibling sysinfo.csv used if present)",
        sniff=_sniff_pmc_file,
        scan=_scan_pmc_file,
    ),
    Format(
        name="omniperf-roofline",
        tool=TOOL,
        kind="peaks",
        description="Omniperf / rocprof-compute roofline.csv (empirical HBM/L2/L1/LDS bandwidth, FLOP/s, MFMA rates)",
        sniff=_sniff_roofline,
        read_peaks=_read_roofline,
    ),
)
