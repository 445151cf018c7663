"""rocprofv3 CSV outputs (rocprofiler-sdk).

Column generations seen in real files:

* 2024 (ROCm 6.2 era): ``Agent_Id`` an integer, ``Private_Segment_Size`` and
  ``Group_Segment_Size``, no register counts, no ``Stream_Id``.
* 2025 (ROCm 6.4+/7.x): ``Agent_Id`` as ``"Agent N"``, ``Stream_Id``,
  ``LDS_Block_Size``, ``Scratch_Size``, ``VGPR_Count``, ``Accum_VGPR_Count``,
  ``SGPR_Count``.

Kernel traces can hold tens of millions of dispatches, so they are streamed with
pyarrow's block reader: only the wanted columns are converted, one block at a time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Scan, Sniff, Want
from perfcheck.ingest.tabular import blank_rows, iter_csv, require_columns, split_csv_line, text_lines, to_integer
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

TOOL = "rocprofv3"

# rocprofv3 column -> canonical column. Both generations; a file has a subset.
_TRACE_COLUMNS = {
    "Agent_Id": "device_id",
    "Queue_Id": "queue_id",
    "Stream_Id": "stream_id",
    "Thread_Id": "tid",
    "Dispatch_Id": "dispatch_id",
    "Kernel_Name": "kernel",
    "Correlation_Id": "correlation_id",
    "Start_Timestamp": "start_ns",
    "End_Timestamp": "end_ns",
    "LDS_Block_Size": "lds_per_workgroup",
    "Group_Segment_Size": "lds_per_workgroup",
    "Scratch_Size": "scratch_per_thread",
    "Private_Segment_Size": "scratch_per_thread",
    "VGPR_Count": "vgpr",
    "Accum_VGPR_Count": "agpr",
    "SGPR_Count": "sgpr",
    "Workgroup_Size_X": "workgroup_x",
    "Workgroup_Size_Y": "workgroup_y",
    "Workgroup_Size_Z": "workgroup_z",
    "Grid_Size_X": "grid_x",
    "Grid_Size_Y": "grid_y",
    "Grid_Size_Z": "grid_z",
}
_TRACE_REQUIRED = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")

# Derived canonical columns and the ones they are computed from.
_DERIVED = {
    "grid_size": ("grid_x", "grid_y", "grid_z"),
    "workgroup_size": ("workgroup_x", "workgroup_y", "workgroup_z"),
    "workgroups": ("grid_x", "grid_y", "grid_z", "workgroup_x", "workgroup_y", "workgroup_z"),
    "duration": ("start_ns", "end_ns"),
}

# pyarrow parses the file in blocks of BLOCK_BYTES; blocks are gathered into pandas
# chunks of about CHUNK_ROWS dispatches. The streaming reader's memory grows with
# its block (on a 1.9 GB, 10M-dispatch trace: 64 MiB blocks peaked at 1.8 GB RSS
# for the reader alone, 1 MiB blocks at 0.12 GB, parsing no slower), while pandas
# work per chunk has a fixed cost, so small blocks feed half-million-row chunks.
BLOCK_BYTES = 1 << 20
CHUNK_ROWS = 1 << 19


def _header(sniff: Sniff) -> list[str]:
    if sniff.is_dir or sniff.is_binary or not sniff.lines:
        return []
    try:
        return [f.strip() for f in split_csv_line(sniff.lines[0])]
    except Exception:  # noqa: BLE001 - a sniffer answers yes or no, never raises
        return []


def _is_kernel_trace(sniff: Sniff) -> bool:
    header = _header(sniff)
    # Dispatch_Id (this spelling) keeps Omniperf's pmc_perf.csv (Dispatch_ID,
    # Kernel_Name, Start_Timestamp) out.
    return (
        all(c in header for c in ("Kernel_Name", "Start_Timestamp", "Dispatch_Id"))
        and "Counter_Name" not in header
    )


def _wanted_columns(want: Want) -> set[str]:
    """Canonical columns to emit: the wanted ones this reader can give, and the kernel."""
    return {c for c in [*_DERIVED, *_TRACE_COLUMNS.values()] if c in want} | {"kernel"}


def _needed_source_columns(header: list[str], want: Want) -> list[str]:
    wanted: set[str] = set()
    for canonical in _wanted_columns(want):
        wanted.add(canonical)
        wanted.update(_DERIVED.get(canonical, ()))
    return [c for c in header if _TRACE_COLUMNS.get(c) in wanted]


def _agent_ids(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """2025 files write ``"Agent 4"`` (or ``"GPU 0"``), 2024 files ``4``: keep the number.

    A trace names a handful of agents, so the text is parsed once per distinct
    value (dictionary-encoded), not once per dispatch."""
    if pa.types.is_integer(values.type):
        return values
    encoded = values.cast(pa.string()).dictionary_encode()
    numbers = []
    for chunk in encoded.chunks:
        # "Agent N" by default, "GPU N"/"CPU N" with --agent-index=type-relative.
        text = pa.compute.replace_substring_regex(chunk.dictionary, pattern=r"^\s*(?:Agent|GPU|CPU)\s+", replacement="")
        numbers.append(pa.compute.take(pa.compute.cast(text, pa.int64()), chunk.indices))
    return pa.chunked_array(numbers, type=pa.int64())


_AS_INT64 = {pa.int64(): pd.Int64Dtype()}.get  # arrow int64 -> pandas Int64, nulls kept as <NA>


def _to_frame(table: pa.Table, present: list[str], wanted: set[str]) -> pd.DataFrame:
    columns = {}
    for name in present:
        array = table.column(name)
        if name == "Agent_Id":
            array = _agent_ids(array)
        canonical = _TRACE_COLUMNS[name]
        if name == "Kernel_Name":
            # Categorical: the names stay dictionary-encoded until finish() cleans
            # each distinct name once.
            columns[canonical] = array.to_pandas()
        else:
            columns[canonical] = array.to_pandas(types_mapper=_AS_INT64)
    frame = pd.DataFrame(columns, copy=False)  # the columns were just converted: no second copy
    if {"grid_x", "grid_y", "grid_z"} <= set(frame.columns) and ({"grid_size", "workgroups"} & wanted):
        frame["grid_size"] = frame["grid_x"] * frame["grid_y"] * frame["grid_z"]
    if {"workgroup_x", "workgroup_y", "workgroup_z"} <= set(frame.columns):
        if "workgroup_size" in wanted:
            frame["workgroup_size"] = frame["workgroup_x"] * frame["workgroup_y"] * frame["workgroup_z"]
        if "grid_size" in frame and "workgroups" in wanted:
            # rocprofv3 grid sizes count work-items; a partial last workgroup still launches.
            per_dim = [
                (frame[f"grid_{d}"] + frame[f"workgroup_{d}"] - 1) // frame[f"workgroup_{d}"] for d in "xyz"
            ]
            frame["workgroups"] = per_dim[0] * per_dim[1] * per_dim[2]
    # Columns read only to derive others (grid_x for grid_size, ...) are not passed on.
    return frame[[c for c in frame.columns if c in wanted or c in ("start_ns", "end_ns")]]


def _scan_kernel_trace(path: Path, want: Want) -> Scan:
    sniff = Sniff(path)
    header = _header(sniff)
    require_columns(path, header, _TRACE_REQUIRED, line=1)
    present = _needed_source_columns(header, want)
    wanted = _wanted_columns(want)
    source = Source(path=str(path), format="rocprofv3-kernel-trace", tool=TOOL)

    def chunks() -> Iterator[pd.DataFrame]:
        types = {c: pa.int64() for c in present if c not in ("Kernel_Name", "Agent_Id")}
        # Dictionary-encoding the name column keeps 10M repeated names cheap.
        types["Kernel_Name"] = pa.dictionary(pa.int32(), pa.string())
        good_rows = 0  # rows already handed on: the first bad row comes after them
        try:
            reader = pacsv.open_csv(
                path,
                read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES),
                convert_options=pacsv.ConvertOptions(include_columns=present, column_types=types),
            )
            batches: list[pa.RecordBatch] = []
            rows = 0
            for batch in reader:
                batches.append(batch)
                rows += batch.num_rows
                if rows >= CHUNK_ROWS:
                    yield _to_frame(pa.Table.from_batches(batches), present, wanted)
                    good_rows += rows
                    batches, rows = [], 0
            if batches:
                yield _to_frame(pa.Table.from_batches(batches), present, wanted)
        except pa.ArrowInvalid as exc:
            int_columns = [header.index(c) for c in present if c not in ("Kernel_Name", "Agent_Id")]
            raise _located(path, exc, _first_bad_line(path, good_rows, len(header), int_columns)) from None

    return Scan(source=source, chunks=chunks())


def _first_bad_line(path: Path, good_rows: int, fields: int, int_columns: list[int]) -> int | None:
    """1-based file line of the first row with the wrong number of fields or a
    non-integer where an integer belongs. pyarrow's errors name no line (its
    column-count error carries the row's text only), so on the error path the
    file is scanned from the last block known to be good."""
    import itertools

    integer = re.compile(r"\s*[+-]?\d+\s*")
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        # Kernel names carry no newlines, so lines and rows coincide.
        lines = itertools.islice(fh, 1 + good_rows, None)
        for number, line in enumerate(lines, start=2 + good_rows):
            row = split_csv_line(line.rstrip("\r\n"))
            if not row:
                continue
            # int(...) only on this error path: digits beyond int64 are what pyarrow refused
            if len(row) != fields or any(not integer.fullmatch(row[i]) or abs(int(row[i])) >= 2**63
                                         for i in int_columns if i < len(row)):
                return number
    return None


def _located(path: Path, exc: Exception, line: int | None) -> InputError:
    """pyarrow says e.g. 'CSV parse error: Expected 22 columns, got 3: ...' or
    'In CSV column #9: CSV conversion error to int64: invalid value 'x''."""
    text = str(exc)
    message = text.split(": ", 1)[-1] if "CSV" in text else text
    message = message.split("\n")[0]
    if len(message) > 160:
        message = message[:157] + "..."
    hint = (
        "a count or timestamp column holds something that is not an integer; is the file from rocprofv3?"
        if "conversion error" in text
        else "was the run cut off? a complete trace has the same number of fields on every line"
    )
    return InputError(path, f"malformed rocprofv3 CSV ({message})", line=line, hint=hint)


# ---------------------------------------------------------------------------
# Everything below reads the other rocprofv3 outputs: counter collection,
# --stats CSVs, the --summary text, and the traces that hold no dispatches.
# Column facts from rocprofiler-sdk's CSV writer (source/lib/output/generateCSV.cpp)
# and from rocpd's CSV export (source/lib/python/rocpd/source/csv.cpp), which
# writes the same files with a leading "Guid" (and, for counters, "Pid") column.

# ``Agent_Id`` spellings: 2024 files write the bare node number; later ones write
# ``--agent-index`` labels: "Agent N" (absolute/relative, the default) or
# "GPU N" / "CPU N" (type-relative).
_AGENT_RE = r"^\s*(?:Agent|GPU|CPU)?\s*(\d+)\s*$"

_COUNTER_COLUMNS = {
    "Correlation_Id": "correlation_id",
    "Dispatch_Id": "dispatch_id",
    "Agent_Id": "device_id",
    "Queue_Id": "queue_id",
    "Stream_Id": "stream_id",
    "Process_Id": "pid",
    "Thread_Id": "tid",
    # Grid_Size and Workgroup_Size are the products of the x/y/z sizes in
    # work-items (the writer multiplies dispatch_info.grid_size's dimensions;
    # 1048576 = 1024 x 1024 in the 2024 docs sample), although the docs' field
    # table calls them "thread blocks".
    "Grid_Size": "grid_size",
    "Kernel_Name": "kernel",
    "Workgroup_Size": "workgroup_size",
    "LDS_Block_Size": "lds_per_workgroup",
    "Scratch_Size": "scratch_per_thread",
    "VGPR_Count": "vgpr",
    "Accum_VGPR_Count": "agpr",
    "SGPR_Count": "sgpr",
    "Start_Timestamp": "start_ns",
    "End_Timestamp": "end_ns",
}
_COUNTER_REQUIRED = ("Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value")
_KEY_COLUMNS = ("Process_Id", "Agent_Id", "Dispatch_Id")  # what identifies one dispatch
COUNTER_CHUNK_ROWS = 1_000_000


def _is_counter_collection(sniff: Sniff) -> bool:
    header = _header(sniff)
    return all(c in header for c in _COUNTER_REQUIRED)


def _bad_cell(path: Path, frame: pd.DataFrame, bad: pd.Series, column: str, what: str, hint: str) -> InputError:
    """Error at the first flagged row; ``frame.index`` holds file lines."""
    pos = int(np.flatnonzero(bad.to_numpy())[0])
    return InputError(path, what.format(value=frame[column].iloc[pos]), line=int(frame.index[pos]), column=column, hint=hint)


def _agent_numbers(path: Path, frame: pd.DataFrame, column: str) -> pd.Series:
    # A file names a handful of agents: parse the distinct labels, not every row.
    codes, labels = pd.factorize(frame[column].astype(str))
    digits = pd.Series(labels).str.extract(_AGENT_RE, expand=False)
    bad = pd.Series(digits.isna().to_numpy()[codes] & (frame[column].str.strip() != "").to_numpy(), index=frame.index)
    if bad.any():
        raise _bad_cell(path, frame, bad, column, "{value!r} is not an agent id",
                        hint='rocprofv3 writes agents as N, "Agent N" or "GPU N"')
    return to_integer(pd.Series(digits.fillna("").to_numpy()[codes], index=frame.index), path=path, column=column,
                      lines=frame.index)


def _reject_short_rows(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """Drop blank lines; a row whose last field is empty was cut short (the last
    column of every rocprofv3 CSV is a number the tool always writes)."""
    frame = frame[~blank_rows(frame)]
    short = frame.iloc[:, -1].str.strip() == ""
    if short.any():
        raise _bad_cell(path, frame, short, str(frame.columns[-1]), "row has fewer fields than the header",
                        hint="was the run cut off? a complete file has every field on every line")
    return frame


def _numbers(path: Path, frame: pd.DataFrame, column: str) -> pd.Series:
    """Text column -> float64; empty cells become NaN. ``frame.index`` holds file lines."""
    text = frame[column].astype(str).str.strip()
    values = pd.to_numeric(text.mask(text == ""), errors="coerce")
    bad = values.isna() & (text != "")
    if bad.any():
        raise _bad_cell(path, frame, bad, column, "{value!r} is not a number",
                        hint="is the file complete and written by rocprofv3?")
    return values.astype("float64")


def _dispatch_keys(path: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """The columns that identify a dispatch, as integers. Dispatch ids are
    per process, and the rocpd CSV export can hold several processes."""
    ids = pd.DataFrame(index=rows.index)
    for column in _KEY_COLUMNS:
        if column == "Agent_Id" and column in rows:
            ids[column] = _agent_numbers(path, rows, column)
        elif column in rows:
            ids[column] = to_integer(rows[column], path=path, column=column, lines=rows.index)
    missing = ids["Dispatch_Id"].isna()
    if missing.any():
        raise _bad_cell(path, rows, missing, "Dispatch_Id", "dispatch id missing",
                        hint="was the file cut short or edited?")
    return ids


def _counter_frame(path: Path, rows: pd.DataFrame, want: Want, emitted: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per dispatch from the long table (one row per dispatch and counter).
    ``emitted`` are hashes of the dispatches of earlier chunks; returns the frame
    and the hashes including this chunk's."""
    key = [c for c in _KEY_COLUMNS if c in rows.columns]
    # Dispatch number of every row, in order of first appearance; the key text is
    # converted to integers only once per dispatch (every distinct key is some
    # dispatch's first row, so every one is still checked).
    group = rows.groupby(key, sort=False).ngroup().to_numpy()
    first = ~rows.duplicated(key)
    counter = rows["Counter_Name"].str.strip()
    # rocprofv3 sums a counter's dimension instances (XCC, SE, ...) itself and
    # writes one row per dispatch and counter name ("Accumulate counters based on
    # ID" in generateCSV.cpp; its own tests reject duplicate (Agent_Id,
    # Dispatch_Id, Counter_Name) rows). A repeat is therefore not a dimension to
    # add up but two runs in one file, and summing would double the counter.
    repeated = pd.Series(pd.DataFrame({"g": group, "c": counter.to_numpy()}).duplicated().to_numpy(), index=rows.index)
    if repeated.any():
        raise _bad_cell(path, rows, repeated, "Counter_Name", "counter {value!r} appears twice for the same dispatch",
                        hint="rocprofv3 writes each counter once per dispatch; were two files concatenated?")
    dispatches = rows[first]
    ids = _dispatch_keys(path, dispatches)
    hashes = pd.util.hash_pandas_object(ids, index=False).to_numpy()
    again = pd.Series(np.isin(hashes, emitted), index=ids.index)
    if again.any():
        raise _bad_cell(path, dispatches, again, "Dispatch_Id", "dispatch {value} appears again after other dispatches",
                        hint="rocprofv3 writes a dispatch's counters together; were two files concatenated?")
    frame = pd.DataFrame(index=dispatches.index)
    wanted = {"kernel", *(c for c in _COUNTER_COLUMNS.values() if c in want)}
    if "duration" in want:  # derived from the timestamps by dispatch.finish
        wanted |= {"start_ns", "end_ns"}
    for column, canonical in _COUNTER_COLUMNS.items():
        if column not in rows.columns or canonical not in wanted:
            continue
        if column in ids:
            frame[canonical] = ids[column]
        elif column == "Kernel_Name":
            frame[canonical] = dispatches[column]
        else:
            frame[canonical] = to_integer(dispatches[column], path=path, column=column, lines=dispatches.index)
    if want.raw:
        long = pd.DataFrame({"g": group, "c": counter.to_numpy(), "v": _numbers(path, rows, "Counter_Value").to_numpy()})
        wide = long.pivot(index="g", columns="c", values="v")  # index 0..n-1: the dispatches in file order
        wide = wide[pd.unique(long["c"])]  # the tool's counter order, not alphabetical
        wide.columns = [raw(str(c)) for c in wide.columns]
        wide.index = frame.index
        frame = frame.join(wide)
    return frame.reset_index(drop=True), np.union1d(emitted, hashes)


def _scan_counter_collection(path: Path, want: Want) -> Scan:
    header = _header(Sniff(path))
    require_columns(path, header, _COUNTER_REQUIRED, line=1)
    source = Source(path=str(path), format="rocprofv3-counter-collection", tool=TOOL)
    # Parsing text dominates: read only the columns the caller wants, the
    # dispatch key, and the last column (a cut-off row leaves it empty).
    wanted = {c for c, canonical in _COUNTER_COLUMNS.items() if canonical in want}
    if "duration" in want:
        wanted |= {"Start_Timestamp", "End_Timestamp"}
    wanted |= {*_KEY_COLUMNS, "Kernel_Name", "Counter_Name", header[-1]}
    if want.raw:
        wanted.add("Counter_Value")
    usecols = [c for c in header if c in wanted]

    def chunks() -> Iterator[pd.DataFrame]:
        # A dispatch's counters are written together but may straddle a chunk
        # boundary: the rows of the chunk's last dispatch wait for the next chunk.
        carry = pd.DataFrame()
        emitted = np.empty(0, dtype=np.uint64)
        for first_line, chunk in iter_csv(path, chunksize=COUNTER_CHUNK_ROWS, usecols=usecols, dtype=object):
            chunk.index = pd.RangeIndex(first_line, first_line + len(chunk))
            chunk = _reject_short_rows(path, chunk)
            chunk = pd.concat([carry, chunk]) if len(carry) else chunk
            if chunk.empty:
                continue
            tail = chunk["Dispatch_Id"] == chunk["Dispatch_Id"].iloc[-1]
            carry, ready = chunk[tail], chunk[~tail]
            if len(ready):
                frame, emitted = _counter_frame(path, ready, want, emitted)
                yield frame
        if len(carry):
            yield _counter_frame(path, carry, want, emitted)[0]

    return Scan(source=source, chunks=chunks())


# --stats CSVs: the same eight columns for every domain (generateCSV.cpp
# get_stats_output_file); the file name says the domain. rocprof v1's
# results.stats.csv has only the first five columns and is another reader's.
_STATS_HEADER = ["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage", "MinNs", "MaxNs", "StdDev"]
_KERNEL_STATS = "kernel_stats.csv"
_OTHER_STATS = {
    "hip_api_stats.csv": "HIP API statistics",
    "hsa_api_stats.csv": "HSA API statistics",
    "marker_api_stats.csv": "marker (ROCTx) API statistics",
    "rccl_api_stats.csv": "RCCL API statistics",
    "rocdecode_api_stats.csv": "rocDecode API statistics",
    "rocjpeg_api_stats.csv": "rocJPEG API statistics",
    "memory_copy_stats.csv": "memory copy statistics",
    "memory_allocation_stats.csv": "memory allocation statistics",
    "scratch_memory_stats.csv": "scratch memory statistics",
    "domain_stats.csv": "per-domain statistics",
}


def _is_stats(sniff: Sniff) -> bool:
    return _header(sniff) == _STATS_HEADER


def _scan_stats(path: Path, want: Want) -> Scan:
    name = path.name.lower()
    source = Source(path=str(path), format="rocprofv3-stats", tool=TOOL)
    require_columns(path, _header(Sniff(path)), _STATS_HEADER, line=1)
    if not name.endswith(_KERNEL_STATS):
        for suffix, what in _OTHER_STATS.items():
            if name.endswith(suffix):
                return Scan(source=source, chunks=iter(()), oddities=[Oddity(str(path), f"holds no kernel dispatches ({what})")])
        raise InputError(
            path,
            "cannot tell which rocprofv3 statistics these are from the file name",
            hint=f"rocprofv3 names kernel statistics <prefix>{_KERNEL_STATS} and the others "
            + ", ".join(_OTHER_STATS),
        )

    def chunks() -> Iterator[pd.DataFrame]:
        for first_line, rows in iter_csv(path):
            rows.index = pd.RangeIndex(first_line, first_line + len(rows))
            rows = _reject_short_rows(path, rows)

            def seconds(column: str) -> pd.Series:
                return _numbers(path, rows, column) * 1e-9

            yield pd.DataFrame(
                {
                    "kernel": rows["Name"],
                    "calls": to_integer(rows["Calls"], path=path, column="Calls", lines=rows.index),
                    "duration_total": seconds("TotalDurationNs"),
                    "duration_mean": seconds("AverageNs"),
                    "duration_min": seconds("MinNs"),
                    "duration_max": seconds("MaxNs"),
                    "duration_std": seconds("StdDev"),
                }
            ).reset_index(drop=True)

    return Scan(source=source, chunks=chunks(), level="kernel")


# --summary (-S/-D) text: one pipe-delimited table per domain under a
# "ROCPROFV3 <DOMAIN> SUMMARY:" title, plus an all-domain "ROCPROFV3 SUMMARY:".
# Durations are in the unit named in the header (--summary-units, default nsec);
# AVERAGE and STDDEV are printed with four significant digits.
_SUMMARY_TITLE = re.compile(r"^ROCPROFV3\s+(?:(.*?)\s+)?SUMMARY:\s*$")
_SUMMARY_UNITS = {"sec": 1.0, "msec": 1e-3, "usec": 1e-6, "nsec": 1e-9}
_SUMMARY_COLUMNS = ("NAME", "DOMAIN", "CALLS", "DURATION", "AVERAGE", "PERCENT", "MIN", "MAX", "STDDEV")


def _is_summary(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    lines = [line.strip() for line in sniff.lines]
    return any(_SUMMARY_TITLE.match(line) for line in lines) and any(
        line.startswith("|") and "NAME" in line and "CALLS" in line and "DOMAIN" in line for line in lines
    )


def _summary_tables(path: Path) -> dict[str, tuple[float, list[tuple[int, list[str]]]]]:
    """Title -> (seconds per unit, [(file line, fields)]) for every table."""
    tables: dict[str, tuple[float, list[tuple[int, list[str]]]]] = {}
    title: str | None = None
    for number, line in enumerate(text_lines(path), start=1):
        text = line.strip()
        match = _SUMMARY_TITLE.match(text)
        if match:
            title = match.group(1) or ""
            continue
        if title is None or not text.startswith("|"):
            continue
        if title not in tables:  # the header row
            names = [f.strip().upper() for f in text.strip("|").split("|")]
            if tuple(n.split(" ")[0] for n in names) != _SUMMARY_COLUMNS:
                raise InputError(path, f"unexpected summary table header {text!r}", line=number,
                                 hint="expected NAME | DOMAIN | CALLS | DURATION | AVERAGE | PERCENT | MIN | MAX | STDDEV")
            unit = re.search(r"\((\w+)\)", names[3])
            if not unit or unit.group(1).lower() not in _SUMMARY_UNITS:
                raise InputError(path, f"unknown duration unit in {names[3]!r}", line=number,
                                 hint="rocprofv3 --summary-units is one of " + ", ".join(_SUMMARY_UNITS))
            tables[title] = (_SUMMARY_UNITS[unit.group(1).lower()], [])
            continue
        if set(text) <= set("|-: "):
            continue
        fields = text.strip("|").split("|")
        if not text.endswith("|") or len(fields) < len(_SUMMARY_COLUMNS):
            raise InputError(path, "summary table row is cut short", line=number,
                             hint="was the output cut off? every row ends with '|'")
        # A kernel name may itself hold '|' (operator|): the eight numeric
        # columns are counted from the right.
        name = "|".join(fields[: len(fields) - 8])
        tables[title][1].append((number, [name, *fields[len(fields) - 8 :]]))
    return tables


def _scan_summary(path: Path, want: Want) -> Scan:
    tables = _summary_tables(path)
    source = Source(path=str(path), format="rocprofv3-summary", tool=TOOL)
    if not tables:
        raise InputError(path, "no summary table found", hint="is this rocprofv3 --summary output?")
    # The KERNEL_DISPATCH table if -D wrote one, else the kernel rows of the
    # all-domain (or group) table: both hold the same figures.
    candidates = [tables["KERNEL_DISPATCH"]] if "KERNEL_DISPATCH" in tables else list(tables.values())
    for scale, rows in candidates:
        kernel_rows = [(n, f) for n, f in rows if f[1].strip() == "KERNEL_DISPATCH"]
        if kernel_rows:
            break
    else:
        domains = ", ".join(t for t in tables if t) or "no domain"
        return Scan(source=source, chunks=iter(()),
                    oddities=[Oddity(str(path), f"holds no kernel dispatches (summary of {domains})")])
    lines = [n for n, _ in kernel_rows]
    table = pd.DataFrame([f for _, f in kernel_rows], columns=list(_SUMMARY_COLUMNS), index=lines)
    table = table.apply(lambda column: column.str.strip())

    def seconds(column: str) -> pd.Series:
        return (_numbers(path, table, column) * scale).reset_index(drop=True)

    frame = pd.DataFrame(
        {
            "kernel": table["NAME"].reset_index(drop=True),
            "calls": to_integer(table["CALLS"], path=path, column="CALLS", lines=lines).reset_index(drop=True),
            "duration_total": seconds("DURATION"),
            "duration_mean": seconds("AVERAGE"),
            "duration_min": seconds("MIN"),
            "duration_max": seconds("MAX"),
            "duration_std": seconds("STDDEV"),
        }
    )
    return Scan(source=source, chunks=iter([frame]), level="kernel")


# Trace files that hold no kernel dispatches: loaded, reported, no rows. The
# rocpd CSV export writes the same files with a leading "Guid" column.
_NO_DISPATCH_TRACES = {
    "rocprofv3-memory-copy-trace": (("Direction", "Source_Agent_Id", "Destination_Agent_Id", "Start_Timestamp"),
                                    "memory copy trace"),
    "rocprofv3-memory-allocation-trace": (("Kind", "Operation", "Agent_Id", "Start_Timestamp"),
                                          "memory allocation / scratch memory trace"),
    "rocprofv3-api-trace": (("Domain", "Function", "Correlation_Id", "Start_Timestamp"), "API call trace"),
}


def _sniff_no_dispatches(name: str) -> Callable[[Sniff], bool]:
    required = _NO_DISPATCH_TRACES[name][0]

    def sniff(sniff: Sniff) -> bool:
        header = _header(sniff)
        return all(c in header for c in required) and "Kernel_Name" not in header

    return sniff


def _scan_no_dispatches(name: str) -> Callable[[Path, Want], Scan]:
    required, what = _NO_DISPATCH_TRACES[name]

    def scan(path: Path, want: Want) -> Scan:
        require_columns(path, _header(Sniff(path)), required, line=1)
        return Scan(source=Source(path=str(path), format=name, tool=TOOL), chunks=iter(()),
                    oddities=[Oddity(str(path), f"holds no kernel dispatches ({what})")])

    return scan


FORMATS: tuple[Format, ...] = (
    Format(
        name="rocprofv3-kernel-trace",
        tool=TOOL,
        kind="profile",
        description="rocprofv3 --kernel-trace CSV (kernel_trace.csv, 2024 and 2025 columns)",
        sniff=_is_kernel_trace,
        scan=_scan_kernel_trace,
    ),
    Format(
        name="rocprofv3-counter-collection",
        tool=TOOL,
        kind="profile",
        description="rocprofv3 --pmc CSV (counter_collection.csv: one row per dispatch and counter; rocpd export too)",
        sniff=_is_counter_collection,
        scan=_scan_counter_collection,
    ),
    Format(
        name="rocprofv3-stats",
        tool=TOOL,
        kind="profile",
        description="rocprofv3 --stats CSV (kernel_stats.csv per kernel; hip_api_stats.csv etc. hold no kernels)",
        sniff=_is_stats,
        scan=_scan_stats,
    ),
    Format(
        name="rocprofv3-summary",
        tool=TOOL,
        kind="profile",
        description="rocprofv3 --summary text tables (KERNEL_DISPATCH table per kernel)",
        sniff=_is_summary,
        scan=_scan_summary,
    ),
    *(
        Format(
            name=name,
            tool=TOOL,
            kind="profile",
            description=f"rocprofv3 / rocpd CSV {what} (holds no kernel dispatches)",
            sniff=_sniff_no_dispatches(name),
            scan=_scan_no_dispatches(name),
        )
        for name, (_, what) in _NO_DISPATCH_TRACES.items()
    ),
)
