"""BabelStream (formerly GPU-STREAM) output -> ``Peaks``.

BabelStream times STREAM-like kernels on one device and prints, per kernel, the
bandwidth of its fastest repetition. Generations seen in real files:

* GPU-STREAM 2.0 (CUDA, Tesla K20X): banner ``GPU-STREAM``, no Dot kernel, and the
  CUDA build says "Using OpenCL device" (a slip in that version's source).
* BabelStream 3.3 / 3.4 (CUDA TITAN Xp; HIP MI60, MI100): banner ``BabelStream``,
  table Copy/Mul/Add/Triad/Dot.
* BabelStream 5.0 (HIP, MI300A): adds ``Memory:`` and ``Init:``/``Read:`` lines
  (array initialisation and copy-back timings) before the table.

Options change the output (BabelStream src/main.cpp, 5.0): ``--mibibytes`` prints
"MiBytes/sec"; ``--triad-only`` prints ``Bandwidth (GB/s):`` instead of the table;
``--nstream-only`` prints one ``Nstream`` row; ``--csv`` prints comma-separated
tables (``function,num_times,n_elements,sizeof,max_mbytes_per_sec,...``) and no banner.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Sniff
from perfcheck.ingest.stream import LAUNCHER_FOOTER
from perfcheck.ingest.tabular import text_lines
from perfcheck.model import Oddity, PeakDetail, Peaks, Source

FORMAT = "babelstream"
TOOL = "babelstream"

# Units, from BabelStream src/main.cpp: the table prints
# ``1.0E-6 * bytes / min_time`` ("MB = 10^6"), or ``pow(2.0, -20.0) * ...`` under
# --mibibytes; the triad-only summary prints 1.0E-9 (GB/s) or pow(2.0, -30.0) (GiB/s).
# GBytes/sec and GiBytes/sec are accepted too (edited logs use them); the header's unit decides.
_UNIT = re.compile(r"^(?:max_)?(m|g|mi|gi)b(?:ytes)?(?:/sec|/s|_per_sec)$", re.IGNORECASE)
_SCALE = {"m": 1e6, "g": 1e9, "mi": 2.0**20, "gi": 2.0**30}

_BANNER = re.compile(r"^(BabelStream|GPU-STREAM)$")
_VERSION = re.compile(r"^Version:\s*(\S+)")
_IMPLEMENTATION = re.compile(r"^Implementation:\s*(.+)$")
_DEVICE = re.compile(r"^Using (\S+) device (.+)$")
_TABLE = re.compile(r"^Function\s+(\S+)\s+Min\b")
_PHASE = re.compile(r"^(Init|Read):\s+\S+\s+s\s+\(=\s*(\S+)\s+(\S+)\)$")
_TRIAD_ONLY = re.compile(r"^Bandwidth \(([^)]+)\):\s+(\S+)$")
_CSV_HEADER = re.compile(r"^(function|phase),(?:num_times,)?n_elements,sizeof,")
_VALIDATION = re.compile(r"^Validation failed")

_KERNELS = ("Copy", "Mul", "Add", "Triad", "Dot", "Nstream")
# Kernels that only stream arrays: the best of them is the memory bandwidth. Dot is
# left out: it is a reduction whose rate includes combining partial sums. Init and
# Read time array set-up and the copy back to the host, not the device's memory; they
# are kept as details under the tool's labels only (5.0's main.cpp computes each from
# the other's timestamps, so the labels may be swapped).
_STREAMING = frozenset({"Copy", "Mul", "Add", "Triad", "Nstream"})
# Implementations that run only on GPUs. Others (OpenMP, TBB, STD, Kokkos, SYCL,
# ...) may run on the host; the device line then decides (see _memory_peak).
_GPU_APIS = frozenset({"CUDA", "HIP", "HC"})
_CPU_NAME = re.compile(r"\b(CPU|Xeon|EPYC|Core\(TM\)|Ryzen|Opteron|Neoverse|Graviton|A64FX)\b", re.IGNORECASE)


@dataclass
class _Run:
    start: int  # 0-based index of the run's first line
    banner: str | None = None
    version: str | None = None
    implementation: str | None = None
    device: str | None = None
    figures: list[tuple[str, float]] = field(default_factory=list)  # label, B/s
    table: int | None = None  # file line of the result table's header
    results: bool = False  # a result table row or the triad-only bandwidth was read


def _scale(path: Path, unit: str, line: int) -> float:
    match = _UNIT.match(unit)
    if not match:
        raise InputError(path, f"unknown bandwidth unit {unit!r}", line=line,
                         hint="BabelStream prints MBytes/sec, or MiBytes/sec with --mibibytes")
    return _SCALE[match.group(1).lower()]


def _number(path: Path, token: str, line: int, column: int) -> float:
    try:
        return float(token)
    except ValueError:
        raise InputError(path, f"{token!r} is not a number", line=line, column=column,
                         hint="is this BabelStream's unmodified output?") from None


def _label_prefix(line: str) -> bool:
    """True for the remains of a row cut inside its label, such as "Tri"."""
    fragment = re.split(r"[\s,]", line)[0]
    return bool(fragment) and any(kernel.startswith(fragment) for kernel in _KERNELS)


def _sniff(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    lines = [line.strip() for line in sniff.lines[:400]]
    if any(_BANNER.match(a) and _VERSION.match(b) for a, b in zip(lines, lines[1:])):
        return True
    return any(_CSV_HEADER.match(line) for line in lines[:40])


class _Parser:
    """Reads one file: runs begin at a banner; each has a header, tables, maybe trailing text."""

    def __init__(self, path: Path, lines: list[str]) -> None:
        self.path, self.lines = path, lines
        self.runs: list[_Run] = []
        self.cut: list[int] = []  # file lines of cut-off last rows
        self.trailing: list[int] = []
        self.failed: list[int] = []

    def parse(self) -> None:
        run: _Run | None = None
        table: tuple[float, int | None, int] | None = None  # scale, CSV column of the rate, field count
        done = False  # the run's result table ended; what follows is not BabelStream's
        pending: int | None = None  # a short row: acceptable only as the table's last
        device: str | None = None  # a device line before --csv output (which has no banner)
        last = max((i + 1 for i, line in enumerate(self.lines) if line.strip()), default=0)
        for index, raw in enumerate(self.lines):
            number, line = index + 1, raw.strip()
            if _BANNER.match(line):
                run, table, done = _Run(start=index, banner=line), None, False
                self.runs.append(run)
                continue
            if run is None:
                if match := _DEVICE.match(line):
                    device = match.group(2).strip()
                if not _CSV_HEADER.match(line):
                    continue  # job-script chatter before the banner
                run = _Run(start=index, device=device)
                self.runs.append(run)
            if table is not None:
                row = self._row(line, number, table)
                if row is not None:
                    if pending is not None:
                        raise InputError(self.path, "result row is cut short", line=pending, hint="is the file intact?")
                    label, value = row
                    if value is None:
                        pending = number
                    else:
                        run.figures.append((label, value))
                        run.results = True
                    continue
                if pending is not None:
                    self.cut.append(pending)
                elif number == last and _label_prefix(line):
                    self.cut.append(number)  # the file ends inside a row's label ("Tri")
                    break
                # --csv prints the Init/Read table and the kernel table back to back.
                table, pending, done = None, None, not _CSV_HEADER.match(line)
            if not line or LAUNCHER_FOOTER.match(line):
                continue
            if _VALIDATION.match(line):
                self.failed.append(number)
            elif done:
                self.trailing.append(number)
            else:
                table = self._header(run, line, number)
        if pending is not None:
            self.cut.append(pending)

    def _header(self, run: _Run, line: str, number: int) -> tuple[float, int | None, int] | None:
        """Reads a header line into ``run``; returns the table layout if it opens a table."""
        if match := _VERSION.match(line):
            run.version = run.version or match.group(1)
        elif match := _IMPLEMENTATION.match(line):
            run.implementation = match.group(1).strip()
        elif match := _DEVICE.match(line):
            run.device = match.group(2).strip()
        elif match := _PHASE.match(line):
            value = _number(self.path, match.group(2), number, 2)
            run.figures.append((match.group(1), value * _scale(self.path, match.group(3), number)))
        elif match := _TRIAD_ONLY.match(line):
            value = _number(self.path, match.group(2), number, 2)
            run.figures.append(("Triad", value * _scale(self.path, match.group(1), number)))
            run.results = True
        elif match := _TABLE.match(line):
            run.table = number
            return _scale(self.path, match.group(1), number), None, 5
        elif _CSV_HEADER.match(line):
            names = line.split(",")
            rate = [i for i, name in enumerate(names) if _UNIT.match(name)]
            if not rate:
                raise InputError(self.path, "CSV header has no bandwidth column", line=number,
                                 hint="is this BabelStream --csv output?")
            run.table = number
            return _scale(self.path, names[rate[0]], number), rate[0], len(names)
        return None

    def _row(self, line: str, number: int, table: tuple[float, int | None, int]) -> tuple[str, float | None] | None:
        """A result row as (kernel, B/s), B/s None for a row cut short; None if not a row."""
        scale, rate, width = table
        if rate is None:
            fields = line.split()
            label = fields[0] if fields else ""
            if not (label in _KERNELS or (len(fields) == width and re.fullmatch(r"[A-Z]\w*", label))):
                return None
        else:
            fields = line.split(",")
            label = fields[0].strip()
            if _CSV_HEADER.match(line) or len(fields) < 2 or not re.fullmatch(r"[A-Za-z]\w*", label):
                return None
        if len(fields) > width:
            raise InputError(self.path, f"{len(fields)} fields where the header has {width}", line=number,
                             hint="is this BabelStream's unmodified output?")
        values = [_number(self.path, token, number, column) for column, token in enumerate(fields[1:], start=2)]
        if len(fields) < width:
            return label, None
        return label, values[(rate or 1) - 1] * scale


def _memory_peak(run: _Run, path: Path, oddities: list[Oddity]) -> str:
    """``hbm_bw`` for a GPU's memory, ``mem_bw`` when the run was on the host."""
    if run.banner == "GPU-STREAM" or run.implementation in _GPU_APIS:
        return "hbm_bw"
    if run.device is not None:
        return "mem_bw" if _CPU_NAME.search(run.device) else "hbm_bw"
    oddities.append(Oddity(str(path), f"implementation {run.implementation or 'unknown'!r} does not name its device; "
                           "its bandwidth is taken as host memory (mem_bw)"))
    return "mem_bw"


def read_peaks(path: Path) -> Peaks:
    lines = text_lines(path)
    if not any(line.strip() for line in lines):
        raise InputError(path, "file is empty", hint="was the run cut off before it wrote anything?")
    parser = _Parser(path, lines)
    parser.parse()
    if not parser.runs:
        raise InputError(path, "no BabelStream banner or result table found", hint="is this BabelStream output?")
    oddities: list[Oddity] = []
    ends = [run.start for run in parser.runs[1:]] + [len(lines)]
    cut_runs = [(run, end) for run, end in zip(parser.runs, ends) if not run.results]
    for run, end in cut_runs:
        if len(cut_runs) < len(parser.runs):  # other runs finished: keep them, say so
            oddities.append(Oddity(str(path), f"a run starting at line {run.start + 1} has no results (cut off)"))
        elif run.table is not None:
            raise InputError(path, "result table has no rows; the run was cut off", line=run.table,
                             hint="rerun BabelStream; the log ends after the table header")
        else:
            last = next((i for i in range(end, run.start, -1) if lines[i - 1].strip()), run.start + 1)
            raise InputError(path, "no result table; the run was cut off", line=last,
                             hint="rerun BabelStream; the log ends before its results")
    values: dict[str, float] = {}
    details: list[PeakDetail] = []
    nonfinite: list[str] = []
    for index, run in enumerate(parser.runs, start=1):
        prefix = f"run {index}: " if len(parser.runs) > 1 else ""
        # printf's inf/nan (a zero time): that figure is missing, the others still count.
        nonfinite += [prefix + label for label, value in run.figures if not math.isfinite(value)]
        figures = [(label, value) for label, value in run.figures if math.isfinite(value)]
        details += [PeakDetail(str(path), prefix + label, value, "B/s") for label, value in figures]
        streaming = [value for label, value in figures if label in _STREAMING]
        if streaming:
            name = _memory_peak(run, path, oddities)
            values[name] = max(values.get(name, 0.0), *streaming)
    if nonfinite:
        oddities.append(Oddity(str(path), f"inf/nan rates left out: {', '.join(nonfinite[:4])}", len(nonfinite)))
    if parser.cut:
        oddities.append(Oddity(str(path), f"cut-off last result row dropped (line {parser.cut[0]}); "
                               "the run was interrupted", len(parser.cut)))
    if parser.failed:
        first = lines[parser.failed[0] - 1].strip()
        oddities.append(Oddity(str(path), f"BabelStream reported a failed validation (line {parser.failed[0]}: "
                               f"{first[:60]!r}); its figures may be wrong", len(parser.failed)))
    if parser.trailing:
        first = lines[parser.trailing[0] - 1].strip()
        oddities.append(Oddity(str(path), "text BabelStream does not write was ignored after its result table "
                               f"(from line {parser.trailing[0]}: {first[:40]!r})", len(parser.trailing)))
    first = parser.runs[0]
    devices = {run.device for run in parser.runs}
    source = Source(path=str(path), format=FORMAT, tool=TOOL, tool_version=first.version,
                    device=devices.pop() if len(devices) == 1 else None)
    return Peaks(values=values, details=tuple(details), sources=(source,), oddities=tuple(oddities))


FORMATS: tuple[Format, ...] = (
    Format(
        name=FORMAT,
        tool=TOOL,
        kind="peaks",
        description="BabelStream / GPU-STREAM text or --csv output (Copy, Mul, Add, Triad, Dot) -> hbm_bw",
        sniff=_sniff,
        read_peaks=read_peaks,
    ),
)
