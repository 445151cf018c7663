"""likwid (RRZE-HPC) outputs read as peaks: ``likwid-bench`` and ``likwid-perfctr``.

* ``likwid-bench``: the text a ``likwid-bench -t KERNEL -w ...`` run prints. The
  block after ``LIKWID MICRO BENCHMARK`` gives ``Test:``, ``MByte/s:``,
  ``MFlops/s:``, ``Size (Byte):`` and ``Cycles per update/cacheline:``. When
  likwid-bench ran under ``likwid-perfctr -m`` the performance group's ASCII tables
  follow (``Group 1: MEM`` and a ``| Metric | Core 0 |`` table); their bandwidth
  and FLOP-rate metrics are listed in ``details`` and never become peaks.
  ``mem_bw`` is the benchmark's ``MByte/s`` when its working set is large enough
  to live in main memory (see ``MEMORY_RESIDENT_BYTES``); ``flop_rate_fp64`` /
  ``flop_rate_fp32`` is ``MFlops/s`` when the kernel's element type is known.
* ``likwid-perfctr``: hardware-counter metrics per Marker API region (``-m``) or for
  the whole run, written as ``-O`` CSV (``STRUCT,Info`` and ``TABLE,Region R,Group 1
  Metric,FLOPS_DP,9`` blocks) or as the default ASCII tables. ``DP [MFLOP/s]`` ->
  ``flop_rate_fp64``, ``SP [MFLOP/s]`` -> ``flop_rate_fp32``, ``L2``/``L3 bandwidth
  [MBytes/s]`` -> ``l2_bw``/``l3_bw``, ``Memory bandwidth [MBytes/s]`` -> ``mem_bw``
  (older likwid writes ``DP MFLOP/s`` without brackets). Each peak is the maximum
  over regions and hardware threads; ``details`` keeps one figure per region,
  group and metric (the maximum over threads). Per-thread tables are used; the
  ``STAT`` tables (Sum/Min/Max/Avg) repeat them and are skipped.

likwid-perfctr measures an *application*, not a micro-benchmark: its figures are
the rates that application reached, a lower bound on what the machine can do, not
the machine's peak. They are read as peaks files because users asked to compare
kernels against the best rate a profiled code was seen to reach; prefer
likwid-bench, STREAM or ERT figures for true peaks.

* ``likwid-timeline``: ``likwid-perfctr -t INTERVAL`` writes the column legend
  (``# GID|MetricsCount|CpuCount|Total runtime [s]|<metrics>``) on stdout and one
  space-separated sample per interval on stderr. Given either file, the other is
  found beside it (same stem first: ``run.out`` / ``run.err``); a log holding both
  streams reads alone. Each sample's value is summed over the measured hardware
  threads (likwid's own STAT ``Sum``: socket-level memory bandwidth is counted on
  one thread per socket); ``read_timeline`` returns the bandwidth over time, the
  peak is the best interval. A ``-`` (no value) on some thread leaves that
  interval's sum a lower bound, which cannot raise the peak; it is reported.

``Source.device`` is the CPU name likwid prints (``CPU name:``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Sniff
from perfcheck.ingest.tabular import split_csv_line, text_lines, to_number
from perfcheck.model import Oddity, PeakDetail, Peaks, Source

TOOL = "likwid"

# likwid's M is decimal. likwid-bench.c prints ``MByte/s: 1.0E-06 * bytes / time`` and
# ``MFlops/s: 1.0E-06 * flops / time``; the perfctr groups define ``[MBytes/s]`` as
# ``1.0E-06*(...)*64.0/time`` and ``MFLOP/s`` as ``1.0E-06*(...)/time``
# (RRZE-HPC/likwid bench/likwid-bench.c, groups/skylake/L3.txt, groups/zen2/MEM.txt).
MEGA_EXPONENT = 6


def _mega(value: float) -> float:
    """M-units -> base units in decimal arithmetic, so that 3150.0709 MFLOP/s is exactly
    3150.0709e6 (a float product can be one unit in the last place off)."""
    return float(Decimal(repr(float(value))).scaleb(MEGA_EXPONENT))

# A working set below this may be cache-resident (server L3 caches reach hundreds of
# MB), so its MByte/s is not taken as the main-memory bandwidth.
MEMORY_RESIDENT_BYTES = 500_000_000

_STAT_COLUMNS = {"Sum", "Min", "Max", "Avg"}
_BANDWIDTH_METRIC = re.compile(r".*\[MBytes/s\]")
_FLOP_METRIC = re.compile(r".*\bMFLOP/s\]?")


def _metric_peak(metric: str) -> str | None:
    """Peak name of a likwid-perfctr metric (exact names only: "AVX DP [MFLOP/s]" is a
    subset of the DP rate and "L3 load bandwidth" a part of the L3 bandwidth)."""
    name = " ".join(metric.split())
    if re.fullmatch(r"DP (?:\[MFLOP/s\]|MFLOP/s)", name):
        return "flop_rate_fp64"
    if re.fullmatch(r"SP (?:\[MFLOP/s\]|MFLOP/s)", name):
        return "flop_rate_fp32"
    return {
        "L2 bandwidth [MBytes/s]": "l2_bw",
        "L3 bandwidth [MBytes/s]": "l3_bw",
        "Memory bandwidth [MBytes/s]": "mem_bw",
    }.get(name)


def _metric_unit(metric: str) -> str | None:
    if _BANDWIDTH_METRIC.fullmatch(metric):
        return "B/s"
    if _FLOP_METRIC.fullmatch(metric):
        return "FLOP/s"
    return None


@dataclass(frozen=True)
class _MetricTable:
    """One per-thread metric table: ``values`` indexed by metric name, one float
    column per hardware thread."""

    region: str | None
    group: str
    values: pd.DataFrame

    def label(self, metric: str) -> str:
        where = f"{self.group}, region {self.region}" if self.region else self.group
        return f"{metric} ({where})"


def _table(path: Path, header: list[str], rows: list[list[str]], first_line: int, *, group: str,
           region: str | None) -> _MetricTable:
    """Metric rows, already split into cells -> numbers per hardware-thread column."""
    columns = [c.strip() for c in header]
    # Metric tables are a dozen rows or so; checking their widths one by one is cheap.
    widths = [len(row) for row in rows]
    bad = next((k for k, width in enumerate(widths) if width != len(columns)), None)
    if bad is not None:
        raise InputError(path, f"metric row has {widths[bad]} fields where the header has {len(columns)}",
                         line=first_line + bad, hint="is the file complete?")
    frame = pd.DataFrame(rows, columns=range(len(columns)), dtype=str)
    threads = [k for k, c in enumerate(columns) if k > 0 and c and c not in _STAT_COLUMNS]
    values = pd.DataFrame(
        {columns[k]: to_number(frame[k], path=path, column=columns[k], first_line=first_line).to_numpy()
         for k in threads},
        index=frame[0].str.strip().to_numpy(),
    )
    return _MetricTable(region=region, group=group, values=values)


# --------------------------------------------------------------------------- -O CSV tables

_CSV_TABLE_KIND = re.compile(r"Group \d+ (Raw|Metric)( STAT)?")


def _csv_metric_tables(path: Path, lines: Sequence[str]) -> list[_MetricTable]:
    tables = []
    for i in [i for i, line in enumerate(lines) if line.startswith("TABLE,")]:
        fields = lines[i].rstrip().split(",")
        kind = next((j for j, f in enumerate(fields) if _CSV_TABLE_KIND.fullmatch(f)), None)
        if kind is None or len(fields) < kind + 3:
            raise InputError(path, f"TABLE line {lines[i][:80]!r} not understood", line=i + 1,
                             hint="is this likwid-perfctr -O output?")
        match = _CSV_TABLE_KIND.fullmatch(fields[kind])
        assert match is not None
        if match.group(1) != "Metric" or match.group(2):
            continue
        try:
            count = int(fields[-1])
        except ValueError:
            raise InputError(path, f"TABLE row count {fields[-1]!r} is not a number", line=i + 1,
                             hint="is this likwid-perfctr -O output?") from None
        region = ",".join(fields[1:kind]) or None
        if region and region.startswith("Region "):
            region = region[len("Region "):]
        body = list(lines[i + 1:i + 2 + count])
        blocks = [j for j, line in enumerate(body) if line.startswith(("TABLE,", "STRUCT,"))]
        if len(body) < count + 1 or blocks:
            raise InputError(path, f"metric table of group {fields[kind + 1]} is cut short "
                                   f"({(blocks[0] if blocks else len(body)) - 1} of {count} rows)",
                             line=i + 1, hint="the run or the file was cut off")
        header = split_csv_line(body[0])
        if not header or header[0].strip() != "Metric":
            raise InputError(path, "metric table has no 'Metric,...' header row", line=i + 2,
                             hint="is this likwid-perfctr -O output?")
        rows = [split_csv_line(row) for row in body[1:]]
        tables.append(_table(path, header, rows, i + 3, group=fields[kind + 1], region=region))
    return tables


# --------------------------------------------------------------------------- ASCII tables

_ASCII_GROUP = re.compile(r"(?:Region (.+), )?Group \d+: (\S+)\s*")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _ascii_metric_tables(path: Path, lines: Sequence[str]) -> list[_MetricTable]:
    """``+---+`` framed tables whose header row starts with ``| Metric |``; the group
    (and Marker region) come from the nearest ``[Region R, ]Group 1: NAME`` line above."""
    tables = []
    group, region = "", None
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _ASCII_GROUP.fullmatch(line)
        if heading:
            region, group = heading.group(1), heading.group(2)
        if line.startswith("|") and _cells(line)[0] == "Metric":
            end = i + 1
            if end < len(lines) and lines[end].startswith("+"):
                end += 1
            start = end
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            if end >= len(lines) or not lines[end].startswith("+"):
                raise InputError(path, f"metric table of group {group or '?'} is cut short", line=end,
                                 hint="the run or the file was cut off")
            rows = [_cells(row) for row in lines[start:end]]
            tables.append(_table(path, _cells(line), rows, start + 1, group=group, region=region))
            i = end
        i += 1
    return tables


# --------------------------------------------------------------------------- shared


def _cpu_name(lines: Sequence[str]) -> str | None:
    for line in lines[:400]:
        key, sep, value = line.partition(":")
        if sep and key.strip() == "CPU name" and value.strip(" \t,"):
            return value.strip(" \t,")
    return None


def _table_figures(src: str, tables: Sequence[_MetricTable]) -> tuple[dict[str, float], list[PeakDetail]]:
    """Every bandwidth / FLOP-rate metric of every table -> details (max over threads)
    and the peaks they map to (max over tables)."""
    values: dict[str, float] = {}
    details: list[PeakDetail] = []
    for table in tables:
        best = table.values.max(axis=1, skipna=True) if table.values.shape[1] else pd.Series(dtype=float)
        for metric, value in best.items():
            unit = _metric_unit(str(metric))
            if unit is None or not math.isfinite(value):
                continue
            figure = _mega(value)
            details.append(PeakDetail(source=src, name=table.label(str(metric)), value=figure, unit=unit))
            peak = _metric_peak(str(metric))
            if peak and figure > 0 and figure > values.get(peak, -math.inf):
                values[peak] = figure
    return values, details


# --------------------------------------------------------------------------- likwid-bench

_BENCH_MARK = "LIKWID MICRO BENCHMARK"
_KEY_VALUE = re.compile(r"([A-Za-z][^:\t]*):\s+(\S.*?)\s*")


def _bench_number(path: Path, fields: dict[str, tuple[str, int]], key: str) -> float | None:
    if key not in fields:
        return None
    text, line = fields[key]
    number = to_number(pd.Series([text.split()[0]]), path=path, column=key, first_line=line).iloc[0]
    return float(number)


def _flop_peak(test: str, per_update: float | None, per_line: float | None) -> tuple[str | None, str | None]:
    """Which FLOP rate a likwid-bench kernel's MFlops/s is, and why (an oddity) if guessed.

    likwid-bench prints ``Cycles per update = Cycles per cacheline / (64 / sizeof(element))``
    for the kernel's TYPE (INT, SINGLE or DOUBLE), so the ratio reveals the element size.
    """
    single_name = re.search(r"_sp(?:_|$)", test) is not None
    if per_update and per_line and per_update > 0:
        element = 64.0 / (per_line / per_update)
        if abs(element - 8) < 0.2:  # only DOUBLE is 8 bytes wide among likwid-bench's types
            return "flop_rate_fp64", None
        if abs(element - 4) < 0.1 and single_name:  # SINGLE or INT; likwid names SP kernels *_sp
            return "flop_rate_fp32", None
        return None, f"kernel {test!r} works on {element:.0f}-byte elements of unknown type; MFlops/s kept in details only"
    if single_name:
        return "flop_rate_fp32", f"element type of kernel {test!r} not printed; *_sp read as single precision"
    if "int" in test.lower():
        return None, f"kernel {test!r} looks like an integer kernel; MFlops/s kept in details only"
    # likwid's kernels without a suffix are double precision (bench/x86-64/triad.ptt:
    # "TYPE DOUBLE", "Double-precision triad").
    return "flop_rate_fp64", f"element type of kernel {test!r} not printed; read as double precision"


def _read_bench(path: Path) -> Peaks:
    lines = text_lines(path)
    src = str(path)
    if not any(line.strip() for line in lines):
        raise InputError(path, "file is empty", hint="was the likwid-bench run cut off?")
    starts = [i for i, line in enumerate(lines) if line.strip() == _BENCH_MARK]
    if not starts:
        raise InputError(path, f"no {_BENCH_MARK!r} block", hint="is this likwid-bench output?")
    values: dict[str, float] = {}
    details: list[PeakDetail] = []
    oddities: list[Oddity] = []

    def add(peak: str | None, name: str, value: float, unit: str) -> None:
        details.append(PeakDetail(source=src, name=name, value=value, unit=unit))
        if peak and value > 0 and value > values.get(peak, -math.inf):
            values[peak] = value

    for n, start in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(lines)
        fields: dict[str, tuple[str, int]] = {}
        for number in range(start + 1, stop):  # the result block is ~30 short lines
            match = _KEY_VALUE.fullmatch(lines[number])
            if match:
                fields.setdefault(match.group(1).strip(), (match.group(2), number + 1))
        test = fields.get("Test", ("?", 0))[0]
        bandwidth = _bench_number(path, fields, "MByte/s")
        if bandwidth is None:
            raise InputError(path, f"benchmark {test!r} has no 'MByte/s:' result line", line=start + 1,
                             hint="the likwid-bench run was cut off before its results")
        size = _bench_number(path, fields, "Size (Byte)")
        if size is not None and size >= MEMORY_RESIDENT_BYTES:
            add("mem_bw", f"likwid-bench {test}: MByte/s", _mega(bandwidth), "B/s")
        else:
            add(None, f"likwid-bench {test}: MByte/s", _mega(bandwidth), "B/s")
            oddities.append(Oddity(src, f"likwid-bench {test}: working set of "
                                        f"{'unknown size' if size is None else f'{size:.0f} bytes'} may be cache-resident; "
                                        f"its MByte/s is not taken as mem_bw (use >= {MEMORY_RESIDENT_BYTES} bytes, -w S0:1GB)"))
        flops = _bench_number(path, fields, "MFlops/s")
        if flops is not None and flops > 0:
            peak, why = _flop_peak(test, _bench_number(path, fields, "Cycles per update"),
                                   _bench_number(path, fields, "Cycles per cacheline"))
            add(peak, f"likwid-bench {test}: MFlops/s", _mega(flops), "FLOP/s")
            if why:
                oddities.append(Oddity(src, why))

    counters, counter_details = _table_figures(src, _ascii_metric_tables(path, lines))
    details.extend(PeakDetail(d.source, f"likwid-perfctr {d.name}", d.value, d.unit) for d in counter_details)
    measured, benched = counters.get("mem_bw"), values.get("mem_bw")
    if measured and benched and not 0.5 <= measured / benched <= 2.0:
        oddities.append(Oddity(src, f"likwid-perfctr 'Memory bandwidth' ({measured / 1e6:g} MB/s) disagrees with the "
                                    f"benchmark's {benched / 1e6:g} MB/s by more than 2x; mem_bw is the benchmark's figure "
                                    "(likwid marks some memory groups experimental)"))
    source = Source(path=src, format="likwid-bench", tool=TOOL, device=_cpu_name(lines))
    return Peaks(values=values, details=tuple(details), sources=(source,), oddities=tuple(oddities))


def _sniff_bench(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    return any(line.strip() == _BENCH_MARK for line in sniff.lines)


# --------------------------------------------------------------------------- likwid-perfctr


def _is_csv_output(lines: Sequence[str]) -> bool:
    return any(line.startswith(("STRUCT,Info,", "TABLE,")) for line in lines)


def _read_perfctr(path: Path) -> Peaks:
    lines = text_lines(path)
    src = str(path)
    if not any(line.strip() for line in lines):
        raise InputError(path, "file is empty", hint="was the likwid-perfctr run cut off?")
    csv_output = _is_csv_output(lines)
    tables = _csv_metric_tables(path, lines) if csv_output else _ascii_metric_tables(path, lines)
    if not tables:
        raise InputError(path, "no metric TABLE block" if csv_output
                         else "no metric table (neither -O CSV 'TABLE,...' blocks nor '| Metric |' tables)",
                         hint="the run was cut off, or measured a custom event set without metrics")
    values, details = _table_figures(src, tables)
    oddities = []
    if not values:
        groups = sorted({t.group for t in tables})
        oddities.append(Oddity(src, f"no bandwidth or FLOP-rate metric that maps to a peak in group(s) {', '.join(groups)}"))
    source = Source(path=src, format="likwid-perfctr", tool=TOOL, device=_cpu_name(lines))
    return Peaks(values=values, details=tuple(details), sources=(source,), oddities=tuple(oddities))


def _sniff_perfctr(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    lines = sniff.lines
    if any(line.strip() == _BENCH_MARK for line in lines):
        return False
    if any(line.startswith("STRUCT,Info,") for line in lines) or any(
        line.startswith("TABLE,") and _CSV_TABLE_KIND.search(line) for line in lines
    ):
        return True
    return any(_ASCII_GROUP.fullmatch(line) for line in lines) and any(
        line.startswith("|") and _cells(line)[0] in ("Metric", "Event") for line in lines
    )


# --------------------------------------------------------------------------- likwid-perfctr -t (timeline)

# Timeline mode (``likwid-perfctr -t 1s -g MEM -C 0-3 ./app``) prints, on stdout, a legend
#   # HWThreads: 0|1|2|3
#   # GID|MetricsCount|CpuCount|Total runtime [s]|<metric 1>|...|<metric M>
# (``EventCount`` and event names for a group without metrics), and on stderr one line per
# interval: ``GID M C <seconds since start> v(1,cpu1) .. v(1,cpuC) v(2,cpu1) ..`` -- every
# metric's value for each hardware thread, metric by metric; ``-`` where likwid had no value
# (RRZE-HPC/likwid src/applications/likwid-perfctr.lua, master 2026: the legend is print()ed,
# the samples print_stderr()ed; ``-O`` separates with commas; ``--outprefix`` prefixes each line).
# The two streams usually land in two files (``> run.out 2> run.err``); a log of both has both.
_LEGEND = re.compile(r"^(?P<prefix>.*?)# GID\|(?P<kind>MetricsCount|EventCount)\|CpuCount\|Total runtime \[s\]\|(?P<names>.*)$")
_SAMPLE = re.compile(r"^(?P<gid>\d+)[ ,](?P<count>\d+)[ ,](?P<cpus>\d+)[ ,](?P<rest>\S.*)$")
_TIMELINE_HEAD_LINES = 200


@dataclass(frozen=True)
class _Legend:
    gid_names: dict[int, list[str]]  # group id -> metric (or event) names, in sample order
    prefix: str


def _legend(lines: Sequence[str]) -> _Legend | None:
    groups: dict[int, list[str]] = {}
    prefix = ""
    gid = 0
    for line in lines:
        match = _LEGEND.match(line.rstrip("\n"))
        if match:
            gid += 1  # groups are listed in order, GID 1 first
            groups[gid] = [n.strip() for n in match.group("names").split("|")]
            prefix = match.group("prefix")
    return _Legend(groups, prefix) if groups else None


def _sample_lines(lines: Sequence[str], prefix: str = "") -> list[tuple[int, list[str]]]:
    """(line number, fields) of every timeline sample: GID, M, C, time, M x C values."""
    out = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if prefix and text.startswith(prefix):
            text = text[len(prefix):].strip()
        match = _SAMPLE.match(text)
        if not match:
            continue
        fields = re.split(r"[ ,]", text)
        count, cpus = int(match.group("count")), int(match.group("cpus"))
        if count > 0 and cpus > 0 and len(fields) == 4 + count * cpus:
            out.append((number, fields))
    return out


def _sniff_timeline(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    lines = sniff.lines[:_TIMELINE_HEAD_LINES]
    if any(_LEGEND.match(line) for line in lines):
        return True
    # A samples file alone: every line that looks like a sample is one, and there are some.
    return len(_sample_lines(lines)) >= 1 and not any(line.startswith(("|", "TABLE,", "STRUCT,")) for line in lines)


def _companion(path: Path, want_legend: bool) -> Path | None:
    """The other file of a timeline pair in ``path``'s folder: the stdout file with the legend,
    or the stderr file with the samples; one with the same stem first (run.out / run.err)."""
    found = []
    for other in sorted(p for p in path.parent.iterdir() if p.is_file() and p != path):
        try:
            head = Sniff(other)
            if head.is_binary:
                continue
            lines = head.lines[:_TIMELINE_HEAD_LINES]
        except OSError:
            continue
        if (any(_LEGEND.match(line) for line in lines) if want_legend else bool(_sample_lines(lines))):
            found.append(other)
    same_stem = [p for p in found if p.stem == path.stem]
    if len(same_stem) == 1:
        return same_stem[0]
    return found[0] if len(found) == 1 else None


def read_timeline(path: str | Path) -> tuple[pd.DataFrame, list[Path], list[Oddity]]:
    """A likwid-perfctr timeline as a tidy table: ``group``, ``time`` (s since the start),
    ``metric`` and ``value`` (summed over the measured hardware threads, as likwid's own
    STAT ``Sum``; base units for MBytes/s and MFLOP/s metrics, else as printed), one row per
    sample and metric; with the files read (legend, samples) and oddities."""
    path = Path(path)
    lines = text_lines(path)
    legend = _legend(lines)
    samples = _sample_lines(lines, legend.prefix if legend else "")
    files = [path]
    legend_path, samples_path = path, path
    if legend is None:
        other = _companion(path, want_legend=True)
        if other is None:
            raise InputError(path, "likwid-perfctr timeline samples without their legend ('# GID|MetricsCount|...')",
                             hint="keep likwid-perfctr's stdout file next to this one, or pass that file")
        legend, legend_path = _legend(text_lines(other)), other
        files.insert(0, other)
        samples = _sample_lines(lines, legend.prefix if legend else "")
    if not samples:
        other = _companion(path, want_legend=False)
        if other is None:
            raise InputError(path, "likwid-perfctr timeline legend without samples",
                             hint="keep likwid-perfctr's stderr file (the samples) next to this one, or pass that file")
        samples_path = other
        files.append(other)
        samples = _sample_lines(text_lines(other), legend.prefix)
        if not samples:
            raise InputError(other, "no timeline samples", hint="was the run cut off before its first interval?")
    assert legend is not None
    oddities: list[Oddity] = []
    frames = []
    missing = 0
    for gid, names in legend.gid_names.items():
        rows = [(number, f) for number, f in samples if int(f[0]) == gid]
        if not rows:
            continue
        count = int(rows[0][1][1])
        if count != len(names):
            raise InputError(samples_path, f"samples of group {gid} hold {count} values per thread where the legend "
                             f"({legend_path.name}) names {len(names)}", line=rows[0][0],
                             hint="are the two files of the same run?")
        cpus = int(rows[0][1][2])
        width = 4 + count * cpus
        bad = next(((n, f) for n, f in rows if len(f) != width), None)
        if bad is not None:
            raise InputError(samples_path, f"sample has {len(bad[1])} fields where {width} were expected", line=bad[0],
                             hint="is the file complete?")
        table = pd.DataFrame([f for _, f in rows])
        time = pd.to_numeric(table[3], errors="coerce")
        values = table.iloc[:, 4:].apply(pd.to_numeric, errors="coerce")
        missing += int(values.isna().to_numpy().sum())
        # metric-major: columns m*cpus .. m*cpus+cpus-1 are metric m on each thread
        cube = values.to_numpy(dtype="float64").reshape(len(rows), count, cpus)
        present = ~np.isnan(cube).all(axis=2)
        summed = pd.DataFrame(np.where(present, np.nansum(cube, axis=2), np.nan), columns=names)
        scale = [1e6 if _metric_unit(n) else 1.0 for n in names]  # [MBytes/s], MFLOP/s: decimal mega
        summed = summed * scale
        summed.insert(0, "time", time.to_numpy())
        long = summed.melt(id_vars="time", var_name="metric", value_name="value")
        long.insert(0, "group", gid)
        frames.append(long)
    if not frames:
        raise InputError(samples_path, f"no samples of the legend's group(s) {', '.join(map(str, legend.gid_names))}",
                         hint="are the two files of the same run?")
    if missing:
        oddities.append(Oddity(str(samples_path), "timeline values likwid left empty ('-'); left out", missing))
    return pd.concat(frames, ignore_index=True), files, oddities


def _read_timeline_peaks(path: Path) -> Peaks:
    table, files, oddities = read_timeline(path)
    src = " + ".join(str(f) for f in files)
    values: dict[str, float] = {}
    details: list[PeakDetail] = []
    for (group, metric), series in table.groupby(["group", "metric"], sort=False)["value"]:
        unit = _metric_unit(str(metric))
        if unit is None or series.notna().sum() == 0:
            continue
        best = float(series.max())
        details.append(PeakDetail(source=src, name=f"{metric} (group {group}, best of {series.notna().sum()} "
                                  f"intervals, median {float(series.median()):.6g})", value=best, unit=unit))
        peak = _metric_peak(str(metric))
        if peak and best > 0 and best > values.get(peak, -math.inf):
            values[peak] = best
    if not values:
        oddities.append(Oddity(src, "no bandwidth or FLOP-rate metric that maps to a peak in this timeline"))
    legend_file = files[0]
    source = Source(path=str(path), format="likwid-timeline", tool=TOOL, device=_cpu_name(text_lines(legend_file)))
    return Peaks(values=values, details=tuple(details), sources=(source,), oddities=tuple(oddities))


FORMATS: tuple[Format, ...] = (
    Format(
        name="likwid-bench",
        tool=TOOL,
        kind="peaks",
        description="likwid-bench output (MByte/s, MFlops/s; optional likwid-perfctr group tables)",
        sniff=_sniff_bench,
        read_peaks=_read_bench,
    ),
    Format(
        name="likwid-perfctr",
        tool=TOOL,
        kind="peaks",
        description="likwid-perfctr metrics (-O CSV or ASCII tables): best DP/SP MFLOP/s, L2/L3/memory MBytes/s",
        sniff=_sniff_perfctr,
        read_peaks=_read_perfctr,
    ),
    Format(
        name="likwid-timeline",
        tool=TOOL,
        kind="peaks",
        description="likwid-perfctr -t timeline: the '# GID|MetricsCount|...' legend (stdout) and the samples "
                    "(stderr), one file or a pair side by side: memory bandwidth etc. over time, best interval",
        sniff=_sniff_timeline,
        read_peaks=_read_timeline_peaks,
    ),
)
