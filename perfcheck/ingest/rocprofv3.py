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

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Scan, Sniff, Want
from perfcheck.ingest.tabular import require_columns, split_csv_line
from perfcheck.model import Source

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

BLOCK_BYTES = 64 << 20  # pyarrow block: large enough for throughput, small enough for memory


def _header(sniff: Sniff) -> list[str]:
    if sniff.is_dir or sniff.is_binary or not sniff.lines:
        return []
    try:
        return [f.strip() for f in split_csv_line(sniff.lines[0])]
    except Exception:  # noqa: BLE001 - a sniffer answers yes or no, never raises
        return []


def _is_kernel_trace(sniff: Sniff) -> bool:
    header = _header(sniff)
    return "Kernel_Name" in header and "Start_Timestamp" in header and "Counter_Name" not in header


def _needed_source_columns(header: list[str], want: Want) -> list[str]:
    wanted: set[str] = set()
    for canonical in list(_DERIVED) + list(set(_TRACE_COLUMNS.values())):
        if canonical in want:
            wanted.add(canonical)
            wanted.update(_DERIVED.get(canonical, ()))
    wanted.add("kernel")
    return [c for c in header if _TRACE_COLUMNS.get(c) in wanted]


def _agent_ids(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """2025 files write ``"Agent 4"``, 2024 files ``4``: keep the number."""
    if pa.types.is_integer(values.type):
        return values
    text = pa.compute.replace_substring_regex(values.cast(pa.string()), pattern=r"^\s*Agent\s+", replacement="")
    return pa.compute.cast(text, pa.int64())


def _to_frame(batch: pa.RecordBatch, present: list[str]) -> pd.DataFrame:
    columns = {}
    for name in present:
        array = batch.column(name)
        if name == "Agent_Id":
            array = _agent_ids(array)
        canonical = _TRACE_COLUMNS[name]
        if name == "Kernel_Name":
            columns[canonical] = array.to_pandas()
        else:
            columns[canonical] = pd.array(array.to_pandas(), dtype="Int64")
    frame = pd.DataFrame(columns)
    if {"grid_x", "grid_y", "grid_z"} <= set(frame.columns):
        frame["grid_size"] = frame["grid_x"] * frame["grid_y"] * frame["grid_z"]
    if {"workgroup_x", "workgroup_y", "workgroup_z"} <= set(frame.columns):
        frame["workgroup_size"] = frame["workgroup_x"] * frame["workgroup_y"] * frame["workgroup_z"]
        if "grid_size" in frame:
            # rocprofv3 grid sizes count work-items; a partial last workgroup still launches.
            per_dim = [
                (frame[f"grid_{d}"] + frame[f"workgroup_{d}"] - 1) // frame[f"workgroup_{d}"] for d in "xyz"
            ]
            frame["workgroups"] = per_dim[0] * per_dim[1] * per_dim[2]
    return frame


def _scan_kernel_trace(path: Path, want: Want) -> Scan:
    sniff = Sniff(path)
    header = _header(sniff)
    require_columns(path, header, _TRACE_REQUIRED, line=1)
    present = _needed_source_columns(header, want)
    source = Source(path=str(path), format="rocprofv3-kernel-trace", tool=TOOL)

    def chunks() -> Iterator[pd.DataFrame]:
        types = {c: pa.int64() for c in present if c not in ("Kernel_Name", "Agent_Id")}
        # Dictionary-encoding the name column keeps 10M repeated names cheap.
        types["Kernel_Name"] = pa.dictionary(pa.int32(), pa.string())
        try:
            reader = pacsv.open_csv(
                path,
                read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES),
                convert_options=pacsv.ConvertOptions(include_columns=present, column_types=types),
            )
            rows_before = 1
            for batch in reader:
                yield _to_frame(batch, present)
                rows_before += batch.num_rows
        except pa.ArrowInvalid as exc:
            raise _located(path, exc) from None

    return Scan(source=source, chunks=chunks())


def _located(path: Path, exc: Exception) -> InputError:
    """pyarrow says e.g. 'CSV parse error: Expected 22 columns, got 3: ...' or
    'In CSV column #9: Row #12: CSV conversion error to int64: invalid value 'x''."""
    import re

    text = str(exc)
    row = re.search(r"Row #(\d+)", text)
    line = int(row.group(1)) if row else None  # pyarrow counts rows from 1 including the header
    message = text.split(": ", 1)[-1] if "CSV" in text else text
    message = message.split("\n")[0]
    if len(message) > 160:
        message = message[:157] + "..."
    return InputError(path, f"malformed rocprofv3 CSV ({message})", line=line,
                      hint="was the run cut off? a complete trace has the same number of fields on every line")


FORMATS: tuple[Format, ...] = (
    Format(
        name="rocprofv3-kernel-trace",
        tool=TOOL,
        kind="profile",
        description="rocprofv3 --kernel-trace CSV (kernel_trace.csv, 2024 and 2025 columns)",
        sniff=_is_kernel_trace,
        scan=_scan_kernel_trace,
    ),
)
