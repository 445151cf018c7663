"""McCalpin STREAM output -> ``Peaks`` (host main-memory bandwidth).

STREAM prints one table per run::

    Function    Best Rate MB/s  Avg time     Min time     Max time
    Copy:           92980.4     0.005803     0.005774     0.005843

Seen in real files: STREAM 5.10 built with the Cray compiler on Broadwell
(``STREAM version $Revision: 5.10 $``), followed by Cray's ALPS launcher footer.
Older 5.x releases head the column ``Rate (MB/s)``; both spellings are read.

Units: stream.c prints ``1.0E-06 * bytes / mintime``, so "MB/s" is 10**6 B/s even
though the same output sizes the arrays in MiB ("Memory per array = 256.0 MiB").

STREAM runs on a CPU, so its peak is ``mem_bw`` (main memory), never ``hbm_bw``.

The CUDA (and HIP) ports of STREAM print the same table for a GPU, headed
``STREAM Benchmark implementation in CUDA`` and ``output in IEC units (KiB = 1024
B)``, with the column ``Rate (GiB/s)`` (2**30 B/s), ``Avg time(s)``-style time
columns and a dashed line under the header. Their peak is ``hbm_bw`` (device
memory).

Several runs concatenated in one log (a job that reruns the benchmark) each give a
table: every run's rates are kept in ``Peaks.details`` ("run 2: Triad"), and the
peak is the best rate of any kernel in any run. One-line JSON records after the
results (job-scheduler event logs, as Flux writes them) are not STREAM's and are
skipped without a warning; other unrelated text is skipped with one.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Sniff
from perfcheck.ingest.tabular import text_lines
from perfcheck.model import Oddity, PeakDetail, Peaks, Source

FORMAT = "stream"
TOOL = "stream"
PEAK = "mem_bw"

# Cray's ALPS launcher (aprun) appends this accounting line to every job's stdout
# (seen after STREAM and GPU-STREAM runs in UoB-HPC/BabelStream results/v2.0). It is
# not the benchmark's output but not a sign of damage either, so it is skipped quietly.
LAUNCHER_FOOTER = re.compile(r"^Application \d+ resources: ")

_BANNER = re.compile(r"^STREAM version \$Revision:\s*([\w.]+)\s*\$")
_HEADER = re.compile(r"^Function\s+(?:Best\s+)?Rate\s*\(?\s*(MB|GB|MiB|GiB)/s\)?\s+Avg time", re.IGNORECASE)
_SCALE = {"mb": 1e6, "gb": 1e9, "mib": 2.0**20, "gib": 2.0**30}
_KERNELS = ("Copy", "Scale", "Add", "Triad")
_ROW = re.compile(r"^(Copy|Scale|Add|Triad):(.*)$")
# What STREAM itself prints after the table: separators and the validation report.
_TRAILER = re.compile(
    r"^(-{10,}|Solution Validates|Failed Validation|Expected|Observed|AvgRelAbsErr|For array|Results Comparison)"
)
_FAILED = re.compile(r"^Failed Validation")
# GPU ports (cuda-stream, HIP-STREAM): "STREAM Benchmark implementation in CUDA".
_GPU_BANNER = re.compile(r"^STREAM Benchmark implementation in (CUDA|HIP)\b", re.IGNORECASE)
_SEPARATOR = re.compile(r"^-{10,}$")
GPU_PEAK = "hbm_bw"


@dataclass
class _Table:
    line: int  # file line of the header, 1-based
    scale: float
    rows: list[tuple[str, float]] = field(default_factory=list)  # kernel, B/s
    cut: int | None = None  # file line of a cut-off row, if the run was interrupted


def _sniff(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    lines = [line.strip() for line in sniff.lines]
    if any(_BANNER.match(line) or _GPU_BANNER.match(line) for line in lines[:20]):
        return True
    # A STREAM table without the banner (a log trimmed to the results).
    return any(_HEADER.match(line) for line in lines) and any(line.startswith("Triad:") for line in lines)


def _row_values(path: Path, text: str, number: int) -> list[float] | None:
    """The four numbers of a table row; None if the row is cut short."""
    values = []
    for position, token in enumerate(text.split(), start=2):
        try:
            values.append(float(token))
        except ValueError:
            raise InputError(path, f"{token!r} is not a number", line=number, column=position,
                             hint="is this STREAM's unmodified output?") from None
    if len(values) > 4:
        raise InputError(path, f"{len(values)} numbers where STREAM prints 4", line=number,
                         hint="is this STREAM's unmodified output?")
    return values if len(values) == 4 else None


def _quiet(line: str) -> bool:
    """Lines after a table that STREAM (or the launcher) writes."""
    return not line or bool(_TRAILER.match(line) or LAUNCHER_FOOTER.match(line) or _BANNER.match(line)
                            or _GPU_BANNER.match(line) or _json_record(line))


def _json_record(line: str) -> bool:
    """A one-line JSON object (a scheduler's job record), not STREAM output."""
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):  # nested past Python's limit: no job record either
        return False


def _read_table(path: Path, lines: list[str], header: int, scale: float) -> tuple[_Table, int]:
    """The table whose header is at 0-based ``header``; returns it and the index after it."""
    table = _Table(line=header + 1, scale=scale)
    index = header + 1
    if index < len(lines) and _SEPARATOR.match(lines[index].strip()):  # the GPU ports rule the header off
        index += 1
    while index < len(lines) and (row := _ROW.match(lines[index].strip())):
        values = _row_values(path, row.group(2), index + 1)
        if values is None:
            if index + 1 < len(lines) and _ROW.match(lines[index + 1].strip()):
                raise InputError(path, "result row is cut short", line=index + 1, hint="is the file intact?")
            table.cut = index + 1
        else:
            table.rows.append((row.group(1), values[0] * scale))
        index += 1
    if table.cut is None and len(table.rows) < len(_KERNELS) and index < len(lines) and not _quiet(lines[index].strip()):
        # STREAM always prints all four kernels: a stray fragment such as "Tri" right
        # after a short table is the remains of the next row, cut mid-label.
        table.cut = index + 1
        index += 1
    return table, index


def _parse(path: Path, lines: list[str]) -> tuple[list[_Table], str | None, list[Oddity], str | None]:
    tables: list[_Table] = []
    version: str | None = None
    gpu: str | None = None
    failed: list[int] = []
    stray: list[int] = []
    after_table = False
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        banner, header = _BANNER.match(line), _HEADER.match(line)
        if header:
            table, index = _read_table(path, lines, index, _SCALE[header.group(1).lower()])
            tables.append(table)
            after_table = True
            continue
        if banner:
            version, after_table = version or banner.group(1), False
        elif (port := _GPU_BANNER.match(line)):
            gpu, after_table = gpu or port.group(1).upper(), False
        elif _FAILED.match(line):
            failed.append(index + 1)
        elif after_table and not _quiet(line):
            stray.append(index + 1)
        index += 1
    oddities = []
    short = [t for t in tables if t.rows and (t.cut is not None or len(t.rows) < len(_KERNELS))]
    if short:
        where = f" (line {short[0].cut} cut off)" if short[0].cut else ""
        oddities.append(Oddity(str(path), f"result table ends after {len(short[0].rows)} of STREAM's "
                               f"{len(_KERNELS)} kernels{where}; the run was interrupted", len(short)))
    if failed:
        oddities.append(Oddity(str(path), f"STREAM reported a failed validation (line {failed[0]}); "
                               "its rates may be wrong", len(failed)))
    if stray:
        first = lines[stray[0] - 1].strip()[:40]
        oddities.append(Oddity(str(path), f"text STREAM does not write was ignored after its table "
                               f"(from line {stray[0]}: {first!r})", len(stray)))
    return tables, version, oddities, gpu


def read_peaks(path: Path) -> Peaks:
    lines = text_lines(path)
    if not any(line.strip() for line in lines):
        raise InputError(path, "file is empty", hint="was the run cut off before it wrote anything?")
    tables, version, oddities, gpu = _parse(path, lines)
    if not tables:
        if version is None and gpu is None:
            raise InputError(path, "no STREAM result table ('Function    Best Rate MB/s ...') found",
                             hint="is this STREAM output?")
        raise InputError(path, "no result table; the run was cut off", line=len(lines),
                         hint="rerun STREAM; the log ends before its results")
    empty = [t for t in tables if not t.rows]
    if empty:
        raise InputError(path, "result table has no rows; the run was cut off", line=empty[0].line,
                         hint="rerun STREAM; the log ends after the table header")
    details = []
    nonfinite: list[str] = []
    for run, table in enumerate(tables, start=1):
        prefix = f"run {run}: " if len(tables) > 1 else ""
        # printf's inf/nan (a zero time): that rate is missing, the others still count.
        nonfinite += [prefix + kernel for kernel, value in table.rows if not math.isfinite(value)]
        details += [PeakDetail(str(path), prefix + kernel, value, "B/s") for kernel, value in table.rows
                    if math.isfinite(value)]
    if nonfinite:
        oddities.append(Oddity(str(path), f"inf/nan rates left out: {', '.join(nonfinite[:4])}", len(nonfinite)))
    if not details:
        raise InputError(path, "every rate is inf or nan", hint="rerun STREAM with a larger array")
    # Every STREAM kernel streams arrays through main memory; the best of them is the
    # attainable bandwidth (Triad usually, Copy on some machines).
    values = {GPU_PEAK if gpu else PEAK: max(d.value for d in details)}
    source = Source(path=str(path), format=FORMAT, tool=TOOL,
                    tool_version=version or (f"{gpu} port" if gpu else None))
    return Peaks(values=values, details=tuple(details), sources=(source,), oddities=tuple(oddities))


FORMATS: tuple[Format, ...] = (
    Format(
        name=FORMAT,
        tool=TOOL,
        kind="peaks",
        description="McCalpin STREAM text output (Best Rate MB/s table) -> mem_bw; its CUDA/HIP ports "
                    "(Rate (GiB/s)) -> hbm_bw; concatenated runs: the best rate of all",
        sniff=_sniff,
        read_peaks=read_peaks,
    ),
)
