"""mixbench logs -> ``Peaks``.

mixbench (ekondis/mixbench) sweeps a kernel's arithmetic intensity from memory-bound
to compute-bound, once per precision, and prints a fixed-width CSV block::

    mixbench-hip (79c4ef5)
    ------------------------ Device specifications ------------------------
    Device:              AMD Instinct MI210
    ...
    ------------------------------- CSV data -------------------------------
    Experiment ID, Single Precision ops,,,,   Packed Single Precision ops,,,, ...
    Compute iters, Flops/byte, ex.time,  GFLOPS, GB/sec, Flops/byte, ...
                0,      0.250,    0.09,  370.52,1482.09,      0.250, ...
    ------------------------------------------------------------------------

The precision groups vary by build: CUDA prints single, double, half and integer;
HIP adds "Packed Single Precision" before double; 2016 builds print three groups and
close the table with a second "CSV data" line. Groups are found from the two header
lines, never by position.

Units (mixbench-hip/mix_kernels_hip.cpp, printf of each row): ex.time is in ms and
both rates divide by ``1000.*1000.*1000.`` after scaling ms to s, so GFLOPS/GIOPS are
10**9 operations/s and GB/sec is 10**9 B/s (decimal).

Several runs may share one log (a job looping over mixbench). When concurrent runs
write to one file, their block-buffered output interleaves: a run's table is cut
off by the next run's banner and its remaining rows appear later with no header
(seen in converged-computing/performance-study, AWS V100: 8 runs, 7 such
continuations). Rows cannot be attributed to runs then, so they are pooled.
"""

from __future__ import annotations

import math

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Sniff
from perfcheck.ingest.tabular import text_lines
from perfcheck.model import Oddity, PeakDetail, Peaks, Source

FORMAT = "mixbench"
TOOL = "mixbench"

# Group -> (bandwidth peak, rate peak). The memory peak is the single-precision
# group's best GB/sec: the stencil study (seed 001) quotes "Empirical Peak (mixbench
# fp32)" for V100, MI100 and MI250X. Packed single precision (v_pk_fma_f32) and any
# group unknown here are kept as details only.
_PEAKS: dict[str, tuple[str | None, str]] = {
    "single precision": ("hbm_bw", "flop_rate_fp32"),
    "double precision": (None, "flop_rate_fp64"),
    "half precision": (None, "flop_rate_fp16"),
    "integer": (None, "iop_rate_int32"),
}

_SPEC = re.compile(r"Device specifications")
_BANNER = re.compile(r"(mixbench[\w/.+-]*)\s+\(([^)]*)\)")
_DEVICE = re.compile(r"^\s*Device:[ \t]*(.*?)\s*$")
_CAPABILITY = re.compile(r"^\s*Compute Capability:\s*(\d+)\.(\d+)\s*$")
# The device block's "GPU clock rate:      1530 MHz" (cudaDeviceProp / hipDeviceProp
# clockRate: the peak clock the GPU reports, which the benchmark runs at when it boosts).
_CLOCK = re.compile(r"^\s*GPU clock rate:\s*(\d+(?:\.\d+)?)\s*MHz\s*$")
_TITLES = re.compile(r"^\s*Experiment ID\s*,")
_NAMES = re.compile(r"^\s*Compute iters\b")
_ROW = r"^\s*\d+\s*[,;|\t]"  # a data row starts with the compute-iteration count
_CLOSE = re.compile(r"^\s*-{20,}(?:\s*CSV data\s*-+)?\s*$")  # dashes; 2016 builds repeat "CSV data"


@dataclass(frozen=True)
class _Group:
    name: str  # "single precision", "packed single precision", "integer", ...
    bandwidth: int  # 0-based field of GB/sec
    rate: int  # 0-based field of GFLOPS / GIOPS
    unit: str  # "FLOP/s" or "OP/s"


@dataclass(frozen=True)
class _Layout:
    fields: int
    groups: tuple[_Group, ...]


@dataclass
class _Run:
    names: int  # 0-based line of "Compute iters, ..."
    layout: _Layout
    version: str | None = None
    device: str | None = None
    arch: str | None = None
    clock_mhz: float | None = None  # "GPU clock rate:": the device's reported (peak) clock


def _sniff(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    lines = sniff.lines
    banner = any(_BANNER.match(line.strip()) for line in lines[:50]) and any(_SPEC.search(line) for line in lines[:50])
    table = any(_TITLES.match(line) for line in lines) and any(_NAMES.match(line) for line in lines)
    return banner or table


def _group_name(title: str) -> str:
    words = title.lower().split()
    return " ".join(w for w in words if w not in ("ops", "operations")) or title


def _layout(path: Path, lines: list[str], names_at: int) -> _Layout:
    line = lines[names_at]
    if "," not in line:
        found = next((repr(c) for c in (";", "\t", "|") if c in line), "no delimiter")
        raise InputError(path, f"column names are not comma-separated ({found} found)", line=names_at + 1,
                         hint="mixbench writes comma-separated values; was the table converted?")
    if names_at == 0 or not _TITLES.match(lines[names_at - 1]):
        raise InputError(path, "the 'Experiment ID, ...' line naming the precision groups is missing", line=names_at,
                         hint="mixbench prints it above the column names; is the log intact?")
    names = [n.strip() for n in line.split(",")]
    titles = [t.strip() for t in lines[names_at - 1].split(",")][: len(names)]
    starts = [i for i, title in enumerate(titles) if i > 0 and title]
    groups = []
    for start, stop in zip(starts, starts[1:] + [len(names)]):
        columns = names[start:stop]
        rates = [start + i for i, n in enumerate(columns) if n in ("GFLOPS", "GIOPS")]
        if "GB/sec" not in columns or not rates:
            raise InputError(path, f"group {titles[start]!r} has no GB/sec or GFLOPS/GIOPS column",
                             line=names_at + 1, hint="is this mixbench's unmodified output?")
        unit = "OP/s" if names[rates[0]] == "GIOPS" else "FLOP/s"
        groups.append(_Group(_group_name(titles[start]), start + columns.index("GB/sec"), rates[0], unit))
    if not groups:
        raise InputError(path, "no precision groups in the 'Experiment ID' line", line=names_at,
                         hint="is this mixbench's unmodified output?")
    return _Layout(len(names), tuple(groups))


def _runs(path: Path, lines: list[str], text: pd.Series, names_at: np.ndarray) -> tuple[list[_Run], int]:
    """One run per table; device facts from the spec block above it. Also counts
    spec blocks that never reached a table (runs cut off early)."""
    specs = np.flatnonzero(text.str.contains(_SPEC).to_numpy())
    runs = []
    for previous, names in zip(np.concatenate([[-1], names_at[:-1]]), names_at):
        run = _Run(int(names), _layout(path, lines, int(names)))
        own = specs[(specs > previous) & (specs < names)]
        if len(own):
            block = lines[int(own[-1]) : int(names)]
            banner = _BANNER.search(lines[int(own[-1]) - 1]) if own[-1] > 0 else None
            run.version = banner.group(2).strip() if banner else None
            device = next((m.group(1) for m in map(_DEVICE.match, block) if m), "")
            run.device = device or None  # mixbench-hip leaves it empty on some ROCm versions
            capability = next((m for m in map(_CAPABILITY.match, block) if m), None)
            run.arch = f"sm_{capability.group(1)}{capability.group(2)}" if capability else None
            clock = next((m for m in map(_CLOCK.match, block) if m), None)
            run.clock_mhz = float(clock.group(1)) if clock and float(clock.group(1)) > 0 else None
        runs.append(run)
    tabled = np.searchsorted(specs, names_at) - 1  # the spec block each table follows
    return runs, len(specs) - len(set(tabled[tabled >= 0].tolist()))


# printf's %f of an infinity or NaN: "inf", "-inf", "nan", "-nan" (glibc; "infinity"
# elsewhere). mixbench-ocl on a device without fp64 prints them in the fp64 columns.
_NONFINITE = r"[+-]?(?:inf(?:inity)?|nan)"


def _rows(path: Path, text: pd.Series, idx: np.ndarray, layout: _Layout, width: int,
          droppable: tuple[bool, bool]) -> tuple[pd.DataFrame, list[int]]:
    """Numbers of one block of consecutive rows. A damaged row (cut short, cut inside
    its last number, glued to other output) is dropped when it sits where output can
    be cut -- first row of a continuation, last row of an unclosed table -- and is an
    error anywhere else. Returns the good rows and the file lines of those dropped.
    An ``inf``/``nan`` cell is no damage: it is missing (NaN) in the rows returned."""
    rows = text.iloc[idx]
    parts = rows.str.split(",", expand=True)
    cells = parts.iloc[:, 1 : layout.fields].apply(lambda column: column.str.strip())
    numbers = cells.apply(lambda column: pd.to_numeric(column, errors="coerce"))
    nonfinite = cells.apply(lambda column: column.str.fullmatch(_NONFINITE, case=False)).fillna(False).astype(bool)
    # A negative time, bandwidth or rate is damage, treated like text where a number
    # belongs; inf and nan are what printf makes of a division by zero: missing.
    numbers = numbers.where(np.isfinite(numbers.to_numpy(dtype="float64")) & (numbers.to_numpy(dtype="float64") >= 0))
    count = rows.str.count(",").to_numpy() + 1
    last = rows.str.rsplit(",", n=1).str[-1]
    short_last = (last.str.len() < width).to_numpy() & ~nonfinite.iloc[:, -1].to_numpy()
    bad = (count != layout.fields) | (numbers.isna() & ~nonfinite).any(axis=1).to_numpy() | short_last
    allowed = np.zeros(len(rows), dtype=bool)
    allowed[0] |= droppable[0]
    allowed[-1] |= droppable[1]
    if (bad & ~allowed).any():
        at = int(np.flatnonzero(bad & ~allowed)[0])
        line = int(idx[at]) + 1
        if count[at] != layout.fields:
            what = f"{count[at]} comma-separated fields where the header has {layout.fields}"
        elif (numbers.iloc[at].isna() & ~nonfinite.iloc[at]).any():
            column = int(np.flatnonzero((numbers.iloc[at].isna() & ~nonfinite.iloc[at]).to_numpy())[0]) + 1
            cell = parts.iat[at, column].strip()
            what = "is not a number" if pd.isna(pd.to_numeric(cell, errors="coerce")) else "is not a finite, non-negative number"
            raise InputError(path, f"{cell!r} {what}", line=line, column=column + 1,
                             hint="is the file complete and unmodified?")
        else:
            what = f"last value {last.iat[at].strip()!r} is shorter than mixbench prints it (cut off?)"
        raise InputError(path, what, line=line, hint="is the file complete and unmodified?")
    return numbers[~bad], (idx[bad] + 1).tolist()


def _figures(frame: pd.DataFrame, layout: _Layout) -> dict[tuple[str, str], float]:
    """Best bandwidth (B/s) and rate (FLOP/s, OP/s) of each group in ``frame``, rounded
    to whole units: the log's two decimals of G-units are exact there, and rounding
    keeps 1076.85 GB/sec from becoming 1076849999999.9999 B/s."""
    out = {}
    for group in layout.groups:
        for kind, column in (("bandwidth", group.bandwidth), ("compute", group.rate)):
            value = float(frame[column].max()) * 1e9
            # 1e308 G-units overflow to inf: not a figure (read_peaks leaves it out, warned)
            out[(group.name, kind)] = float(round(value)) if math.isfinite(value) else math.nan
    return out


def read_peaks(path: Path) -> Peaks:
    lines = text_lines(path)
    if not any(line.strip() for line in lines):
        raise InputError(path, "file is empty", hint="was the run cut off before it wrote anything?")
    text = pd.Series(lines, dtype=object).str.rstrip()
    names_at = np.flatnonzero(text.str.match(_NAMES).to_numpy())
    if not len(names_at):
        if text.str.contains(_SPEC).any():
            raise InputError(path, "no CSV data table; the run was cut off before its results", line=len(lines),
                             hint="rerun mixbench; the log ends before its results")
        raise InputError(path, "no mixbench 'Compute iters, ...' table found", hint="is this mixbench output?")
    runs, tableless = _runs(path, lines, text, names_at)
    is_row = text.str.match(_ROW).to_numpy()
    row_idx = np.flatnonzero(is_row)
    if not len(row_idx):
        raise InputError(path, "result table has no rows; the run was cut off", line=int(names_at[-1]) + 1,
                         hint="rerun mixbench; the log ends after the table header")
    lengths = text.iloc[row_idx].str.rsplit(",", n=1).str[-1].str.len()
    width = int(lengths.mode().iloc[0])  # every row prints its last value with the same %7.2f

    blocks = np.split(row_idx, np.flatnonzero(np.diff(row_idx) > 1) + 1)
    owners = {int(run.names) + 1: position for position, run in enumerate(runs)}  # first row line -> run
    parsed: list[tuple[int | None, pd.DataFrame, bool]] = []  # run position (None: continuation), rows, closed
    dropped: list[int] = []
    for block in blocks:
        owner = owners.get(int(block[0]))
        before = np.searchsorted(names_at, block[0]) - 1
        if before < 0:
            raise InputError(path, "table rows before any 'Compute iters' header", line=int(block[0]) + 1,
                             hint="is the log intact?")
        after = int(block[-1]) + 1
        closed = after < len(lines) and bool(_CLOSE.match(lines[after]))
        frame, lost = _rows(path, text, block, runs[before].layout, width, (owner is None, not closed))
        dropped += lost
        parsed.append((owner, frame, closed))

    oddities: list[Oddity] = []
    if dropped:
        oddities.append(Oddity(str(path), f"cut-off table rows dropped (first at line {dropped[0]})", len(dropped)))
    continuations = sum(owner is None for owner, _, _ in parsed)
    sections: list[tuple[str, list[pd.DataFrame], _Layout]] = []
    if continuations:
        if len({run.layout for run in runs}) > 1:
            raise InputError(path, "interleaved runs with different table layouts cannot be told apart",
                             hint="run mixbench once per log file")
        oddities.append(Oddity(str(path), f"the tables of {len(runs)} runs are interleaved (concurrent runs writing to "
                               f"one file: {continuations} continuations without a header); their rows are pooled"))
        sections.append((f"runs 1-{len(runs)} (interleaved): ", [f for _, f, _ in parsed], runs[0].layout))
    else:
        for position, run in enumerate(runs):
            mine = [(frame, closed) for owner, frame, closed in parsed if owner == position]
            prefix = f"run {position + 1}: " if len(runs) > 1 else ""
            rows = sum(len(frame) for frame, _ in mine)
            if not all(closed for _, closed in mine) or not mine:
                which = f"run {position + 1}'s table" if len(runs) > 1 else "the table"
                oddities.append(Oddity(str(path), f"{which} stops after {rows} rows without mixbench's closing line "
                                       "(run cut off?); its peaks are lower bounds"))
            sections.append((prefix, [frame for frame, _ in mine], run.layout))
    if tableless:
        oddities.append(Oddity(str(path), "run header(s) without a result table (cut off)", tableless))

    details: list[PeakDetail] = []
    values: dict[str, float] = {}
    unsupported: set[str] = set()
    for prefix, frames, layout in sections:
        frames = [f for f in frames if len(f)]
        if not frames:
            continue
        units = {g.name: g.unit for g in layout.groups}
        rows = pd.concat(frames)
        # inf/nan cells: a group whose every rate is one ran on a device without that
        # precision (no ceiling, said once below); single cells are missing values.
        for group in layout.groups:
            if rows[group.rate].isna().all():
                unsupported.add(group.name)
        scattered = sum(int(rows[[g.bandwidth, g.rate]].isna().sum().sum())
                        for g in layout.groups if not rows[g.rate].isna().all())
        if scattered:
            oddities.append(Oddity(str(path), f"{prefix}inf/nan values left out", scattered))
        for (group, kind), value in _figures(rows, layout).items():
            if not math.isfinite(value):
                if group not in unsupported:  # a figure beyond a double once in base units (1e308 G)
                    oddities.append(Oddity(str(path), f"{prefix}{group} {kind} is not positive and finite; left out"))
                continue
            unit = "B/s" if kind == "bandwidth" else units[group]
            details.append(PeakDetail(str(path), f"{prefix}{group} {kind}", value, unit))
            peak = _PEAKS.get(group, (None, None))[0 if kind == "bandwidth" else 1]
            if peak is not None:
                values[peak] = max(values.get(peak, 0.0), value)
    for group in sorted(unsupported):
        oddities.append(Oddity(str(path), f"{group}: every value is inf/nan (a precision the device does not support?); "
                               "no ceiling for it"))
    if not details:
        raise InputError(path, "no complete result rows", hint="is the file complete?")

    devices = {run.device for run in runs}
    arches = {run.arch for run in runs}
    source = Source(path=str(path), format=FORMAT, tool=TOOL, tool_version=runs[0].version,
                    device=devices.pop() if len(devices) == 1 else None,
                    arch=arches.pop() if len(arches) == 1 else None)
    # The SM clock the compute peaks hold at, when every run reports the same one: a
    # profile taken at another clock (ncu's base-clock lock) is warned about (docs/clocks.md).
    clocks_mhz = {run.clock_mhz for run in runs}
    clocks = {"sm_clock": clocks_mhz.pop() * 1e6} if len(clocks_mhz) == 1 and None not in clocks_mhz else {}
    return Peaks(values=values, details=tuple(details), sources=(source,), oddities=tuple(oddities), clocks=clocks)


FORMATS: tuple[Format, ...] = (
    Format(
        name=FORMAT,
        tool=TOOL,
        kind="peaks",
        description="mixbench log (CUDA/HIP/OpenCL; CSV data block per run) -> hbm_bw (fp32 GB/sec), flop/iop rates",
        sniff=_sniff,
        read_peaks=read_peaks,
    ),
)
