"""nvprof outputs (the CUDA command-line profiler before Nsight; CUDA 5 - 11).

Four shapes are read:

* ``nvprof-trace``: ``--print-gpu-trace --csv``, one row per kernel launch or memory
  operation; a units row under the header says each column's unit (``ms``, ``KB``, ...).
* ``nvprof-summary``: ``--print-gpu-summary --csv`` (or the default summary), one row
  per kernel with Calls/Time/Avg/Min/Max, each time column in its own unit.
* ``nvprof-metrics``: ``--metrics ... --csv``, long table of (device, kernel, metric)
  with Min/Max/Avg aggregated over the kernel's invocations; values carry their unit
  inline ("190.706924GB/s", "99.98%", "Low (3)").
* ``nvprof-log``: nvprof's text output inside a job log (Slurm ``*.out``): the summary
  table and/or the ``--metrics`` table, with the application's stdout around them;
  also the ``--metrics`` text cut down to its blocks, starting directly at
  ``Kernel: <name>`` (no ``==PID==`` banner, no table header, no ``Device`` line),
  whose large counts nvprof prints in scientific notation (``1.7180e+10``).

All but the trace are kernel-level statistics (``Scan.level == "kernel"``).

Every nvprof section starts with ``==<pid>== ...`` lines; a table ends at the next such
line or at a blank line (CSV files append e.g. a "Unified Memory profiling result"
section after one).

Memory units. nvprof (CUDA 8 - 10 era, the files seen) uses binary prefixes:

* matrixMul_trace.csv (CUDA 8, GTX 1080 Ti): a 320x320 float matrix copy (409,600 B)
  is written "400.000000 KB", its 1.028854 ms throughput "379.670001 MB/s"
  (409,600 B / 1.028854 ms / 2**20); the matrixMulCUDA<32> kernel's two 32x32 float
  tiles (8,192 B) are "Static SMem 8.000000 KB".
* print-gpu-summary.csv (TITAN Xp): 158 x 40.860352 KB = 6.304688 MB only with
  1 MB = 1024 KB.
* slurm-9186634.out (P100): dram_read_bytes 192 at 57.310 MB/s, sysmem_write_bytes 160
  at 47.758 MB/s, dram_write_bytes 36,320 at 10.587 GB/s and l2_global_load_bytes
  400,000 at 116.60 GB/s all give the same kernel time (3.195 us) only with
  MB = 2**20 B and GB = 2**30 B; with decimal prefixes the MB/s and GB/s metrics
  disagree by exactly 1.024.

So KB/MB/GB (and their "/s" forms) are 2**10/2**20/2**30 here. (CUDA 5.x text traces
printed decimal sizes such as "409.60KB"; those are not read.)
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from perfcheck.errors import InputError
from perfcheck.ingest.names import gnu_named
from perfcheck.ingest.formats import Format, Scan, Sniff, Want
from perfcheck.ingest.tabular import require_columns, split_csv_line, to_number
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

TOOL = "nvprof"

_TIME_TO_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
_BINARY = {"": 1.0, "K": 2.0**10, "M": 2.0**20, "G": 2.0**30, "T": 2.0**40}
_BYTES = {f"{p}B": f for p, f in _BINARY.items()}
_METRIC_UNITS = {"": 1.0, "%": 1.0, **_BYTES, **{f"{u}/s": f for u, f in _BYTES.items()}}
_UNIT_LIKE = re.compile(r"^[A-Za-z%/]{0,6}$")

_MARKER = re.compile(r"^==\d+== ")
_DEVICE_ID = r"^(?P<name>.*\S)\s+\((?P<id>\d+)\)$"  # "GeForce GTX 1080 Ti (0)"
# nvprof names memory operations in brackets: "[CUDA memcpy HtoD]", "[CUDA memset]".
_MEMORY_OP = r"^\["
# Trace kernel names end in " [1073]": "the number shown in the square brackets after
# the kernel name correlates to the CUDA API call that launched that kernel" (Profiler
# User's Guide, GPU-Trace and API-Trace Modes). Consecutive launches in matrixMul_trace.csv
# differ by 7 = cudaConfigureCall + 5 x cudaSetupArgument + cudaLaunch.
_CORRELATION_SUFFIX = r"^(?P<name>.*\S) \[(?P<id>\d+)\]$"
# nvprof --metrics utilisation levels: Idle (0), Low (1-3), Mid (4-6), High (7-9), Max (10).
_LEVEL = r"^[A-Za-z]+ \((?P<level>\d+)\)$"
_QUANTITY = r"^(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?P<unit>[A-Za-z/%]*)$"

_CUT_OFF_HINT = "the file looks cut off; re-run nvprof or use a complete log"


# --------------------------------------------------------------------------- input


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror})") from None
    if not data.strip():
        raise InputError(path, "file is empty", hint="was the profiler run cut off?")
    if b"\x00" in data[:4096]:
        raise InputError(path, "binary data where text was expected", hint="is this the right file?")
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:
        # CRLF (a Windows copy) or CR-only line ends (an old Mac editor): lines as an
        # editor shows them, so the table search and the line numbers of errors hold.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _fields(line: str) -> list[str]:
    try:
        return [f.strip() for f in split_csv_line(line)]
    except Exception:  # noqa: BLE001 - any unparsable line is simply not a header
        return []


def _is_units_row(fields: list[str]) -> bool:
    """Short unit-like tokens ("ms", "KB", "MB/s", "%") or empty cells; whether each
    unit is understood is checked where the column is converted."""
    return len(fields) > 1 and any(fields) and all(_UNIT_LIKE.match(f) for f in fields)


@dataclass
class _Table:
    header: list[str]
    units: list[str]
    rows: pd.DataFrame  # every cell as text; index = row number in the table
    first_line: int  # 1-based file line of the first data row
    text: str  # the whole file
    end: int  # offset in ``text`` where the table ends


def _line_at(text: str, pos: int) -> tuple[str, int]:
    """The line starting at ``pos`` (without its end) and where the next one starts."""
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    return text[pos:end].rstrip("\r"), end + 1


# A table ends at the next ==<pid>== section or blank line.
_TABLE_END = re.compile(r"^(?:==\d+== |[ \t\r]*$)", re.MULTILINE)


def _csv_table(
    path: Path, is_header: Callable[[list[str]], bool], *, what: str, units: bool, text_columns: tuple[str, ...]
) -> _Table:
    """The first CSV table whose header satisfies ``is_header``, up to the next
    ``==<pid>==`` line or blank line. ``text_columns`` stay text ("" when empty);
    pandas' C parser converts the others, so only a column holding a non-number
    needs the slow, located check of ``_numbers``."""
    text = _read_text(path)
    pos, index = 0, 0  # offset and 0-based number of the line being looked at
    while pos < len(text):  # only the preamble is walked line by line
        line, after = _line_at(text, pos)
        if is_header(_fields(line)):
            break
        pos, index = after, index + 1
    else:
        raise InputError(path, f"no {what} header found", hint="is this nvprof --csv output of that kind?")
    header = _fields(line)
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        # nvprof names each column once; repeats mean the lines ran together (a lost
        # newline), and pandas would refuse them without saying where.
        raise InputError(path, f"header repeats column names ({', '.join(map(repr, repeated[:5]))})", line=index + 1,
                         hint="were two lines joined?")
    body, body_line = after, index + 1  # 0-based line number of the first row
    unit_row: list[str] = []
    if units:
        line, after = _line_at(text, body)
        if not _is_units_row(_fields(line)):
            raise InputError(path, "units row missing under the header", line=body_line + 1,
                             hint="nvprof --csv writes one (ms, KB, ...); was the file edited?")
        unit_row = _fields(line) + [""] * (len(header) - len(_fields(line)))
        body, body_line = after, body_line + 1
    end_match = _TABLE_END.search(text, min(body, len(text)))
    end = end_match.start() if end_match else len(text)
    if not text.endswith("\n") and end == len(text) and end > body:
        raise InputError(path, "last row has no line end", line=text.count("\n") + 1, hint=_CUT_OFF_HINT)
    try:
        with warnings.catch_warnings():
            # With index_col=False pandas cuts a row with more fields than the header to
            # the header's width, with only a ParserWarning: data lost silently. Refuse.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            rows = pd.read_csv(io.StringIO(text[body:end]), header=None, names=header,
                               dtype={c: str for c in text_columns if c in header}, keep_default_na=False,
                               na_values=[""], index_col=False, skip_blank_lines=False)
    except pd.errors.ParserWarning:
        widths = [len(_fields(line)) for line in text[body:end].splitlines()]
        wide = next((i for i, n in enumerate(widths) if n > len(header)), None)
        raise InputError(path, f"a row has more fields than the header ({len(header)})",
                         line=None if wide is None else body_line + 1 + wide,
                         hint="check the delimiter and that the file is complete") from None
    except pd.errors.EmptyDataError:
        rows = pd.DataFrame(columns=header, dtype=object)
    except pd.errors.ParserError as exc:
        message = str(exc).split("C error: ")[-1].strip().rstrip(".")
        line_match = re.search(r"line (\d+)", message)
        row_match = re.search(r"row (\d+)", message)
        line = (body_line + int(line_match.group(1)) if line_match
                else body_line + int(row_match.group(1)) + 1 if row_match else None)
        raise InputError(path, f"malformed CSV ({message})", line=line,
                         hint="check the delimiter and that the file is complete") from None
    present = [c for c in text_columns if c in rows]
    rows[present] = rows[present].fillna("").astype(str)
    return _Table(header, unit_row, rows, body_line + 1, text, end)


def _numbers(table: _Table, path: Path, column: str) -> pd.Series:
    values = table.rows[column]
    if pd.api.types.is_numeric_dtype(values):
        return values.astype("float64")
    return to_number(values, path=path, column=column, first_line=table.first_line)


def _unit_factor(table: _Table, path: Path, column: str, factors: dict[str, float]) -> float:
    unit = table.units[table.header.index(column)]
    if unit not in factors:
        raise InputError(path, f"unit {unit!r} not understood (expected one of {', '.join(sorted(factors))})",
                         line=table.first_line - 1, column=column)
    return factors[unit]


def _split_device(devices: pd.Series) -> tuple[pd.Series, pd.Series]:
    """"GeForce GTX 1080 Ti (0)" -> ("GeForce GTX 1080 Ti", 0). A trace repeats a
    few device labels on every row, so each distinct label is parsed once."""
    codes, labels = pd.factorize(devices.astype(str))
    parts = pd.Series(labels, dtype=object).str.extract(_DEVICE_ID)
    names = parts["name"].fillna(pd.Series(labels, dtype=object))
    ids = pd.to_numeric(parts["id"], errors="coerce")
    return (pd.Series(names.to_numpy()[codes], index=devices.index),
            pd.Series(ids.to_numpy()[codes], index=devices.index))


def _device_label(names: pd.Series) -> str | None:
    unique = [n for n in pd.unique(names.dropna()) if n]
    return ", ".join(unique) if unique else None


def _memory_ops_oddity(path: Path, count: int) -> Oddity:
    return Oddity(str(path), "memory copy/memset rows dropped (not kernels)", count)


# --------------------------------------------------------------------------- trace


def _sniff_trace(sniff: Sniff) -> bool:
    return _sniff_csv(sniff, lambda f: f[:2] == ["Start", "Duration"], units=True)


def _sniff_csv(sniff: Sniff, is_header: Callable[[list[str]], bool], *, units: bool) -> bool:
    """A CSV header nvprof writes, under ``==<pid>==`` lines or above a units row."""
    try:
        if sniff.is_dir or sniff.is_binary:
            return False
        lines = sniff.lines
        for i, line in enumerate(lines):
            if is_header(_fields(line)):
                preamble = any(_MARKER.match(previous) for previous in lines[:i])
                units_row = i + 1 < len(lines) and _is_units_row(_fields(lines[i + 1]))
                return preamble or (units and units_row)
        return False
    except Exception:  # noqa: BLE001 - a sniffer answers yes or no, never raises
        return False


_TRACE_COUNTS = {
    "Registers Per Thread": "registers",
    "Context": "context_id",
    "Stream": "stream_id",
    "Correlation_ID": "correlation_id",
}


def _scan_trace(path: Path, want: Want) -> Scan:
    table = _csv_table(path, lambda f: f[:2] == ["Start", "Duration"], what="nvprof --print-gpu-trace", units=True,
                       text_columns=("Name", "Device"))
    require_columns(path, table.header, ("Start", "Duration", "Name"), line=table.first_line - 2)
    rows = table.rows
    names = rows["Name"].str.strip()
    if (names == "").any():
        pos = int(np.flatnonzero((names == "").to_numpy())[0])
        raise InputError(path, "row has no Name (too few fields)", line=table.first_line + pos, hint=_CUT_OFF_HINT)
    grid_columns = [f"Grid {d}" for d in "XYZ"]
    # Only kernel rows have a launch geometry; memory operations leave it empty.
    is_kernel = rows["Grid X"].notna() if "Grid X" in rows else pd.Series(False, index=rows.index)
    oddities: list[Oddity] = []
    memory_ops = int(names.str.match(_MEMORY_OP).sum())
    others = int((~is_kernel).sum()) - memory_ops
    device_names, device_ids = _split_device(rows["Device"]) if "Device" in rows else (None, None)
    source = Source(path=str(path), format="nvprof-trace", tool=TOOL,
                    device=_device_label(device_names[is_kernel]) if device_names is not None else None)
    if not is_kernel.any():
        held = f"{memory_ops} memory copies/memsets" + (f", {others} other rows" if others else "")
        oddities.append(Oddity(str(path), f"holds no kernel dispatches ({held})", 1))
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    if memory_ops:
        oddities.append(_memory_ops_oddity(path, memory_ops))
    if others:
        oddities.append(Oddity(str(path), "rows without launch geometry dropped (not kernels)", others))
    require_columns(path, table.header, [*grid_columns, "Block X", "Block Y", "Block Z"], line=table.first_line - 2)

    frame = pd.DataFrame(index=rows.index)
    # Every name is distinct (its correlation id), so the suffix is split in Arrow, not per row in Python.
    names_arrow = pa.array(names.to_numpy(dtype=object), type=pa.string())
    parts = pc.extract_regex(names_arrow, _CORRELATION_SUFFIX)
    frame["kernel"] = pc.coalesce(pc.struct_field(parts, "name"), names_arrow).to_pandas()
    if "Correlation_ID" not in rows:  # a column of its own in some versions (read below)
        frame["correlation_id"] = pc.cast(pc.struct_field(parts, "id"), pa.int64()).to_pandas()
    start = _numbers(table, path, "Start") * _unit_factor(table, path, "Start", _TIME_TO_NS)
    duration_ns = _numbers(table, path, "Duration") * _unit_factor(table, path, "Duration", _TIME_TO_NS)
    frame["start_ns"] = np.rint(start)
    # Start + Duration is the end; the duration is kept as written (sub-ns for "us" units).
    frame["end_ns"] = frame["start_ns"] + np.rint(duration_ns)
    frame["duration"] = duration_ns * 1e-9
    grid = [_numbers(table, path, c) for c in grid_columns]
    block = [_numbers(table, path, f"Block {d}") for d in "XYZ"]
    for d, g, b in zip("xyz", grid, block):
        frame[f"grid_{d}"] = g * b  # nvprof counts the grid in blocks; canonical is threads
        frame[f"workgroup_{d}"] = b
    frame["grid_size"] = frame["grid_x"] * frame["grid_y"] * frame["grid_z"]
    frame["workgroup_size"] = block[0] * block[1] * block[2]
    frame["workgroups"] = grid[0] * grid[1] * grid[2]
    for column, canonical in _TRACE_COUNTS.items():
        if column in rows and canonical not in frame:
            if column in ("Context", "Stream"):
                # Not always numeric (e.g. a "Default" stream label); only ids are kept.
                frame[canonical] = pd.to_numeric(rows[column], errors="coerce")
            else:
                frame[canonical] = _numbers(table, path, column)
    for column, canonical in (("Static SMem", "lds_static"), ("Dynamic SMem", "lds_dynamic")):
        if column in rows:
            frame[canonical] = np.rint(_numbers(table, path, column) * _unit_factor(table, path, column, _BYTES))
    if {"lds_static", "lds_dynamic"} <= set(frame.columns):
        frame["lds_per_workgroup"] = frame["lds_static"] + frame["lds_dynamic"]
    if device_ids is not None:
        frame["device_id"] = device_ids
    return Scan(source=source, chunks=iter([frame[is_kernel].reset_index(drop=True)]), oddities=oddities)


# --------------------------------------------------------------------------- summary

_SUMMARY_HEADER = ("Time(%)", "Time", "Calls", "Avg", "Min", "Max", "Name")
_SUMMARY_TIMES = {"Time": "duration_total", "Avg": "duration_mean", "Min": "duration_min", "Max": "duration_max"}


def _is_summary_header(fields: list[str]) -> bool:
    return "Time(%)" in fields and "Calls" in fields and "Avg" in fields


def _sniff_summary(sniff: Sniff) -> bool:
    return _sniff_csv(sniff, _is_summary_header, units=True)


def _scan_summary(path: Path, want: Want) -> Scan:
    table = _csv_table(path, _is_summary_header, what="nvprof summary", units=True, text_columns=("Type", "Name"))
    require_columns(path, table.header, _SUMMARY_HEADER, line=table.first_line - 2)
    rows = table.rows
    names = rows["Name"].str.strip()
    frame = pd.DataFrame({"kernel": names})
    frame["calls"] = _numbers(table, path, "Calls")
    for column, canonical in _SUMMARY_TIMES.items():
        # Each column has its own unit in the units row (",%,ms,,us,us,ms," in print-gpu-summary.csv).
        frame[canonical] = _numbers(table, path, column) * _unit_factor(table, path, column, _TIME_TO_NS) * 1e-9
    incomplete = names.eq("") | frame["calls"].isna()
    if incomplete.any():
        pos = int(np.flatnonzero(incomplete.to_numpy())[0])
        raise InputError(path, "row has no Name or Calls (too few fields)", line=table.first_line + pos,
                         hint=_CUT_OFF_HINT)
    # The default summary mixes "GPU activities" and "API calls" rows in one table.
    api = rows["Type"].str.strip().eq("API calls") if "Type" in rows else pd.Series(False, index=rows.index)
    memory = names.str.match(_MEMORY_OP) & ~api
    kernels = ~api & ~memory
    oddities = []
    if memory.any():
        oddities.append(_memory_ops_oddity(path, int(memory.sum())))
    if api.any():
        oddities.append(Oddity(str(path), "API call rows dropped (not kernels)", int(api.sum())))
    # The GPU summary has no device column; the Unified Memory section that may follow names it.
    device = re.search(r'^"Device",.*\n"([^"\n]+?) \(\d+\)",', table.text[table.end:], re.MULTILINE)
    source = Source(path=str(path), format="nvprof-summary", tool=TOOL, device=device.group(1) if device else None)
    if not kernels.any():
        oddities.append(Oddity(str(path), f"holds no kernel dispatches ({int(memory.sum())} memory operation rows, "
                                          f"{int(api.sum())} API call rows)", 1))
        return Scan(source=source, chunks=iter(()), oddities=oddities, level="kernel")
    return Scan(source=source, chunks=iter([frame[kernels].reset_index(drop=True)]), oddities=oddities,
                level="kernel")


# --------------------------------------------------------------------------- metrics


def _metric_values(text: pd.Series, path: Path, lines: np.ndarray, column: str) -> tuple[pd.Series, int]:
    """Metric cells -> float64 in base units: B/s for throughputs, percent for "%",
    the 0-10 level for "Low (3)"-style utilisations. ``<OVERFLOW>`` (a counter that
    wrapped) becomes NaN and is counted."""
    text = text.astype(str).str.strip()
    quantity = text.str.extract(_QUANTITY)
    level = text.str.extract(_LEVEL)["level"]
    factor = quantity["unit"].map(_METRIC_UNITS)
    values = pd.to_numeric(quantity["num"]) * factor
    values = values.fillna(pd.to_numeric(level))
    overflow = text.eq("<OVERFLOW>")
    bad = values.isna() & ~overflow
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        unit = quantity["unit"].iloc[pos]
        has_unit = isinstance(unit, str) and unit
        what = f"unit {unit!r} not understood" if has_unit else f"{text.iloc[pos]!r} is not a metric value"
        raise InputError(path, what, line=int(lines[pos]), column=column,
                         hint="expected a number, a number with a unit (GB/s, %), or a level such as 'Low (3)'")
    return values.astype("float64"), int(overflow.sum())


def _pivot_metrics(long: pd.DataFrame, keys: list[str], path: Path, oddities: list[Oddity]) -> pd.DataFrame:
    """Long (keys..., metric, value, calls) -> one row per key with raw.<metric> columns,
    metrics in the order the file lists them."""
    duplicated = long.duplicated(keys + ["metric"])
    if duplicated.any():
        oddities.append(Oddity(str(path), "metric reported more than once for a kernel; first value kept",
                               int(duplicated.sum())))
        long = long[~duplicated]
    order = list(pd.unique(long["metric"]))
    wide = long.pivot(index=keys, columns="metric", values="value")[order]
    wide.columns = [raw(m) for m in order]
    calls = long.groupby(keys, sort=False)["calls"].max()
    first_seen = long.drop_duplicates(keys)[keys]
    out = first_seen.merge(calls.rename("calls").reset_index(), on=keys).merge(wide.reset_index(), on=keys)
    return out


def _is_metrics_header(fields: list[str]) -> bool:
    return "Invocations" in fields and "Metric Name" in fields


def _sniff_metrics(sniff: Sniff) -> bool:
    return _sniff_csv(sniff, _is_metrics_header, units=False)


def _scan_metrics(path: Path, want: Want) -> Scan:
    table = _csv_table(path, _is_metrics_header, what="nvprof --metrics", units=False,
                       text_columns=("Device", "Kernel", "Metric Name", "Metric Description", "Min", "Max", "Avg"))
    require_columns(path, table.header, ("Kernel", "Invocations", "Metric Name", "Avg"), line=table.first_line - 1)
    rows = table.rows
    lines = table.first_line + np.arange(len(rows))
    long = pd.DataFrame({"kernel": rows["Kernel"].str.strip(), "metric": rows["Metric Name"].str.strip()})
    long["calls"] = _numbers(table, path, "Invocations")
    cut = long["kernel"].eq("") | long["metric"].eq("") | rows["Avg"].str.strip().eq("")
    if cut.any():
        pos = int(np.flatnonzero(cut.to_numpy())[0])
        raise InputError(path, "row has no Kernel, Metric Name or Avg (too few fields)", line=int(lines[pos]),
                         hint=_CUT_OFF_HINT)
    oddities: list[Oddity] = []
    long["value"], overflows = _metric_values(rows["Avg"], path, lines, "Avg")
    if overflows:
        oddities.append(Oddity(str(path), "<OVERFLOW> metric values left empty", overflows))
    if long.empty:
        raise InputError(path, "metrics table has no rows", line=table.first_line - 1, hint=_CUT_OFF_HINT)
    if "Device" not in rows:
        frame = _pivot_metrics(long, ["kernel"], path, oddities)
        return Scan(source=Source(path=str(path), format="nvprof-metrics", tool=TOOL), chunks=iter([frame]),
                    oddities=oddities, level="kernel")
    # One row per (device, kernel): the same kernel on two GPUs is two rows.
    long["device"] = rows["Device"].str.strip()
    frame = _pivot_metrics(long, ["device", "kernel"], path, oddities)
    names, frame["device_id"] = _split_device(frame.pop("device"))
    source = Source(path=str(path), format="nvprof-metrics", tool=TOOL, device=_device_label(names))
    return Scan(source=source, chunks=iter([frame]), oddities=oddities, level="kernel")


# --------------------------------------------------------------------------- text log

_TIME = r"[\d.]+(?:s|ms|us|ns)"
_LOG_SUMMARY_HEADER = r"^\s*(?:Type\s+)?Time\(%\)\s+Time\s+Calls\s+Avg\s+Min\s+Max\s+Name\s*$"
_LOG_SUMMARY_ROW = (
    rf"^\s*(?:(?P<type>GPU activities|API calls):)?\s+(?P<pct>[\d.]+)%\s+(?P<time>{_TIME})\s+(?P<calls>\d+)"
    rf"\s+(?P<avg>{_TIME})\s+(?P<min>{_TIME})\s+(?P<max>{_TIME})\s+(?P<name>\S.*?)\s*$"
)
_LOG_METRICS_HEADER = r"^\s*Invocations\s+Metric Name\s+Metric Description\s+Min\s+Max\s+Avg\s*$"
# Values are right-aligned in columns but descriptions contain spaces, so a row is
# split from the right: three values, each a number with an optional unit, a level
# such as "Low (1)" or <OVERFLOW>.
_LOG_VALUE = r"(?:[-+]?[\d.]+(?:[eE][-+]?\d+)?[A-Za-z/%]*|[A-Za-z]+ \(\d+\)|<OVERFLOW>)"
_LOG_METRIC_ROW = (
    rf"^\s*(?P<calls>\d+)\s+(?P<metric>\S+)\s+(?P<desc>.*?)\s+(?P<min>{_LOG_VALUE})\s+(?P<max>{_LOG_VALUE})"
    rf"\s+(?P<avg>{_LOG_VALUE})\s*$"
)
_LOG_SECTIONS = {"Profiling result:": "gpu", "Metric result:": "metric", "API calls:": "api"}


_KERNEL_LINE = r"^\s*Kernel: \S"


def _starts_at_kernel(lines: list[str]) -> bool:
    """A --metrics text cut down to its blocks: the first line that says anything is
    ``Kernel: <name>`` and a metric row follows (no ==PID== banner, no header, no Device line)."""
    said = [line for line in lines if line.strip()]
    return (len(said) > 1 and re.match(_KERNEL_LINE, said[0]) is not None
            and re.match(_LOG_METRIC_ROW, said[1]) is not None)


def _sniff_log(sniff: Sniff) -> bool:
    try:
        if sniff.is_dir or sniff.is_binary:
            return False
        head = sniff.head
        marker = re.search(r"^==\d+== (?:Profiling|Metric) result:", head, re.MULTILINE)
        table = re.search(f"{_LOG_SUMMARY_HEADER}|{_LOG_METRICS_HEADER}", head, re.MULTILINE)
        return bool(marker and table) or _starts_at_kernel(sniff.lines[:50])
    except Exception:  # noqa: BLE001 - a sniffer answers yes or no, never raises
        return False


def _log_seconds(text: pd.Series) -> pd.Series:
    parts = text.str.extract(r"^(?P<num>[\d.]+)(?P<unit>s|ms|us|ns)$")
    return pd.to_numeric(parts["num"]) * parts["unit"].map(_TIME_TO_NS) * 1e-9


def _scan_log(path: Path, want: Want) -> Scan:
    text = _read_text(path)
    lines = pd.Series(text.splitlines(), dtype=object)
    line_no = np.arange(1, len(lines) + 1)
    marker = lines.str.extract(r"^==(?P<pid>\d+)== (?P<what>.*)$")
    is_marker = marker["pid"].notna()
    section = is_marker.cumsum()
    # Each ==pid== line opens a section; only result sections hold tables.
    kind = pd.Series(pd.NA, index=lines.index, dtype=object)
    kind[is_marker] = "none"
    for prefix, name in _LOG_SECTIONS.items():
        kind[is_marker & marker["what"].str.startswith(prefix, na=False)] = name
    kind = kind.ffill().fillna("none")

    summary_header = lines.str.match(_LOG_SUMMARY_HEADER) & kind.isin(["gpu", "api"])
    metric_header = lines.str.match(_LOG_METRICS_HEADER) & kind.eq("metric")
    if not is_marker.any() and _starts_at_kernel(lines.head(50).tolist()):
        # Only the metric blocks were kept: the whole text is one metrics table,
        # opened by its first "Kernel:" line.
        kind[:] = "metric"
        kernel_line = lines.str.match(_KERNEL_LINE)
        metric_header = kernel_line & kernel_line.cumsum().eq(1)
    in_table = (summary_header | metric_header).astype(int).groupby(section).cumsum() > 0
    if not (summary_header | metric_header).any():
        raise InputError(path, "no nvprof summary or metrics table found",
                         hint="the log holds no nvprof result; was nvprof run with --csv (then read that file)?")
    if not text.endswith("\n") and bool(in_table.iloc[-1]) and lines.iloc[-1].strip():
        raise InputError(path, "last line has no line end", line=len(lines), hint=_CUT_OFF_HINT)

    summary = lines.str.extract(_LOG_SUMMARY_ROW)
    summary_row = summary["calls"].notna() & in_table & kind.isin(["gpu", "api"])
    metric = lines.str.extract(_LOG_METRIC_ROW)
    metric_row = metric["calls"].notna() & in_table & kind.eq("metric")
    for header, rows, what in ((summary_header, summary_row, "summary"), (metric_header, metric_row, "metrics")):
        counts = rows.groupby(section).sum()
        empty = [s for s in section[header] if counts.get(s, 0) == 0]
        if empty:
            first = int(line_no[(header & section.eq(empty[0])).to_numpy()][0])
            raise InputError(path, f"nvprof {what} table has no rows", line=first, hint=_CUT_OFF_HINT)

    oddities: list[Oddity] = []
    # Rows after "API calls:" (either a Type label or an old-style section) are host calls.
    row_type = summary["type"].where(summary_row)
    row_type[is_marker] = ""
    row_type = row_type.groupby(section).ffill()
    rows = summary[summary_row]
    api = (kind[summary_row].eq("api") | row_type[summary_row].eq("API calls"))
    memory = rows["name"].str.match(_MEMORY_OP) & ~api
    keep = ~api & ~memory
    if memory.any():
        oddities.append(_memory_ops_oddity(path, int(memory.sum())))
    if api.any():
        oddities.append(Oddity(str(path), "API call rows dropped (not kernels)", int(api.sum())))
    rows = rows[keep]
    kernels = pd.DataFrame({"kernel": rows["name"], "calls": pd.to_numeric(rows["calls"])})
    for column, canonical in (("time", "duration_total"), ("avg", "duration_mean"), ("min", "duration_min"),
                              ("max", "duration_max")):
        kernels[canonical] = _log_seconds(rows[column])

    # Metrics: 'Device "Tesla P100-PCIE-16GB (0)"' and 'Kernel: <name>' lines head each block.
    device = lines.str.extract(r'^\s*Device "(?P<device>.+)"\s*$')["device"].where(kind.eq("metric"))
    kernel = lines.str.extract(r"^\s*Kernel: (?P<kernel>.+?)\s*$")["kernel"].where(kind.eq("metric"))
    device[is_marker], kernel[is_marker] = "", ""
    device = device.groupby(section).ffill().where(metric_row)
    kernel = kernel.groupby(section).ffill().where(metric_row)
    orphan = metric_row & kernel.fillna("").eq("")
    if orphan.any():
        raise InputError(path, "metric row before any 'Kernel:' line", line=int(line_no[orphan.to_numpy()][0]),
                         hint="is the metrics table complete?")
    long = pd.DataFrame({"kernel": kernel[metric_row], "metric": metric["metric"][metric_row],
                         "calls": pd.to_numeric(metric["calls"][metric_row])})
    long["value"], overflows = _metric_values(metric["avg"][metric_row], path, line_no[metric_row.to_numpy()], "Avg")
    if overflows:
        oddities.append(Oddity(str(path), "<OVERFLOW> metric values left empty", overflows))
    device_names, _ = _split_device(device[metric_row].dropna())
    source = Source(path=str(path), format="nvprof-log", tool=TOOL, device=_device_label(device_names))

    if not long.empty:
        # Metrics are per kernel name (the summary has no device column); a kernel
        # profiled by several runs in one log keeps its first block of metrics.
        wide = _pivot_metrics(long, ["kernel"], path, oddities)
        kernels = kernels.merge(wide.drop(columns="calls"), on="kernel", how="left")
        # Kernels only the metrics run saw: their invocation count is all the log says.
        extra = wide[~wide["kernel"].isin(kernels["kernel"])]
        kernels = pd.concat([kernels, extra], ignore_index=True) if len(kernels) else extra.reset_index(drop=True)
    if kernels.empty:
        oddities.append(Oddity(str(path), f"holds no kernel dispatches ({int(memory.sum())} memory operation rows, "
                                          f"{int(api.sum())} API call rows)", 1))
        return Scan(source=source, chunks=iter(()), oddities=oddities, level="kernel")
    return Scan(source=source, chunks=iter([kernels.reset_index(drop=True)]), oddities=oddities, level="kernel")


FORMATS: tuple[Format, ...] = (
    Format(
        name="nvprof-trace",
        tool=TOOL,
        kind="profile",
        description="nvprof --print-gpu-trace --csv (per-launch rows with a units row)",
        sniff=_sniff_trace,
        scan=gnu_named(_scan_trace),
    ),
    Format(
        name="nvprof-summary",
        tool=TOOL,
        kind="profile",
        description="nvprof --print-gpu-summary --csv (per-kernel Calls/Time/Avg/Min/Max)",
        sniff=_sniff_summary,
        scan=gnu_named(_scan_summary),
    ),
    Format(
        name="nvprof-metrics",
        tool=TOOL,
        kind="profile",
        description="nvprof --metrics ... --csv (per-kernel metric averages over invocations)",
        sniff=_sniff_metrics,
        scan=gnu_named(_scan_metrics),
    ),
    Format(
        name="nvprof-log",
        tool=TOOL,
        kind="profile",
        description="nvprof text output in a job log: GPU summary and --metrics tables (also metric blocks "
                    "starting at 'Kernel:', without banner or Device line)",
        sniff=_sniff_log,
        scan=gnu_named(_scan_log),
    ),
)
