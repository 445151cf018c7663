"""Nsight Compute (``ncu --csv``) tables.

Two layouts, one row per kernel launch after reading:

* ``ncu-raw`` (``--page raw``): wide. A header row, a *units row* (``"","",...,
  "ns","block",...``), then one row per launch with every collected metric as a
  column (``gpu__time_duration.sum``, ``launch__registers_per_thread``, ...).
* ``ncu-details`` (``--page details``, the default page, e.g. with
  ``--metrics a,b,c``): long. One row per launch x metric with ``Metric Name``,
  ``Metric Unit`` and ``Metric Value`` columns; pivoted by ``ID``. With sections
  instead of ``--metrics`` the names are section labels (``Duration``,
  ``Registers Per Thread``); those four that map to canonical columns are read too.

Quirks seen in real files: ``==PROF==`` lines and application stdout before the
header (2020-era ``--metrics`` runs on V100 print the training log first); a failed
run holds only ``==PROF==``/``==ERROR==`` lines; thousands separators in values
(``"5,318,969,728.00"`` with ``--print-fp``, A100, 2023); a ``Kernel Time`` column
in 2020-era details pages that is a wall-clock date, not a duration (ignored); no
``Block Size``/``Grid Size``/``Device``/``CC`` columns before ~2021; text-valued
metrics (``device__attribute_display_name``, ``launch__execution_model`` = ``SIMT``).

Units. Every ``raw.<metric>`` holds float64 in the *base unit ncu itself uses* for
that metric, i.e. what ``ncu --print-units base`` prints, whatever scaling the
file was written with (``--print-units auto`` picks a prefix per value, so the
same metric can be ``usecond`` on one row and ``msecond`` on the next):

=====================================  ====================  =====================
written                                stored as             factor
=====================================  ====================  =====================
byte, Kbyte, Mbyte, Gbyte, Tbyte       byte                  1, 1e3, 1e6, 1e9, 1e12
ns/nsecond, us/usecond, ms/msecond,    nsecond               1, 1e3, 1e6, 1e9
s/second
hz, Khz, Mhz, Ghz                      hz                    1, 1e3, 1e6, 1e9
X/second, X/msecond, X/usecond,        X/second              1, 1e3, 1e6, 1e9
X/nsecond (also /s, /ms, /us, /ns)
Kbyte/block, Gbyte/second, ...         byte/block, byte/sec  prefix x denominator
%, cycle, inst, register/thread, ...   unchanged             1
=====================================  ====================  =====================

Prefixes are decimal: ncu prints 1024 bytes as ``1.02 Kbyte`` and 65536 as
``65.54 Kbyte`` (Launch Statistics section, any ncu since 2019). ``cycle`` is not
a time unit. ``base_unit`` exposes this rule. Canonical columns are in perfcheck's
base units (``duration`` in seconds, LDS in bytes). Metrics whose every value is
text are left out of ``raw.*``; ``n/a`` cells are missing (NaN).

Both formats share one scanner and the header found in the file decides the
layout, so either ``--format`` name reads either page (``Source.format`` tells
which it was).

A directory whose files are all ncu CSVs (one ``--metrics`` run per file, as
hierarchical-roofline scripts write them) is read as one table: the files' rows
are merged by kernel ``ID``, after checking that each ID names the same kernel.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.names import gnu_named
from perfcheck.ingest.formats import Format, Scan, Sniff, Want
from perfcheck.ingest.tabular import read_csv, require_columns, split_csv_line, text_lines
from perfcheck.model import Oddity, Source

TOOL = "ncu"
RAW, DETAILS = "ncu-raw", "ncu-details"

# Identity columns of both layouts -> canonical columns.
_IDENTITY = {"ID": "dispatch_id", "Process ID": "pid", "Context": "context_id", "Stream": "stream_id", "Device": "device_id"}
_DETAILS_REQUIRED = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")

DURATION = "gpu__time_duration.sum"
REGISTERS = "launch__registers_per_thread"
LDS_STATIC = "launch__shared_mem_per_block_static"
LDS_DYNAMIC = "launch__shared_mem_per_block_dynamic"
_BLOCK_DIMS = ("launch__block_dim_x", "launch__block_dim_y", "launch__block_dim_z")
_GRID_DIMS = ("launch__grid_dim_x", "launch__grid_dim_y", "launch__grid_dim_z")  # in blocks
DISPLAY_NAME = "device__attribute_display_name"
_CC = ("device__attribute_compute_capability_major", "device__attribute_compute_capability_minor")
# Section labels of the details page (``--section LaunchStats`` etc.) for the same quantities.
_LABELS = {
    "Duration": DURATION,
    "Registers Per Thread": REGISTERS,
    "Static Shared Memory Per Block": LDS_STATIC,
    "Dynamic Shared Memory Per Block": LDS_DYNAMIC,
}
# Metrics that feed canonical columns: a non-number there is an error, not an oddity.
_CANONICAL_METRICS = frozenset({DURATION, REGISTERS, LDS_STATIC, LDS_DYNAMIC, *_BLOCK_DIMS, *_GRID_DIMS, *_LABELS})
# Converted even when no raw counter is wanted (they give canonical columns or provenance).
_ALWAYS = _CANONICAL_METRICS | {DISPLAY_NAME, *_CC}

# ncu writes "n/a" for a metric it could not collect for a launch.
_MISSING = ("", "n/a", "N/A")

# --- units --------------------------------------------------------------------

_SCALE = {
    "byte": (1.0, "byte"), "kbyte": (1e3, "byte"), "mbyte": (1e6, "byte"), "gbyte": (1e9, "byte"),
    "tbyte": (1e12, "byte"),
    "nsecond": (1.0, "nsecond"), "ns": (1.0, "nsecond"), "usecond": (1e3, "nsecond"), "us": (1e3, "nsecond"),
    "msecond": (1e6, "nsecond"), "ms": (1e6, "nsecond"), "second": (1e9, "nsecond"), "s": (1e9, "nsecond"),
    "hz": (1.0, "hz"), "khz": (1e3, "hz"), "mhz": (1e6, "hz"), "ghz": (1e9, "hz"),
}  # fmt: skip
_PER = {"second": 1.0, "s": 1.0, "msecond": 1e3, "ms": 1e3, "usecond": 1e6, "us": 1e6, "nsecond": 1e9, "ns": 1e9}


def base_unit(unit: str) -> tuple[float, str]:
    """``(factor, base)``: a value written in ``unit`` times ``factor`` is in ncu's
    base unit ``base`` (see the module docstring)."""
    parts = (unit or "").strip().split("/")
    factor, base = _SCALE.get(parts[0].lower(), (1.0, parts[0]))
    for part in parts[1:]:
        per = _PER.get(part.lower())
        factor, base = (factor * per, base + "/second") if per else (factor, base + "/" + part)
    return factor, base


# --- locating the table -----------------------------------------------------------


def _layout(line: str) -> str | None:
    """Which ncu table a header line starts, if any. Cheap prefix test first:
    a preamble can be a long training log."""
    if not line.lstrip("\ufeff").startswith(('"ID"', "ID,")):
        return None
    fields = [f.strip() for f in split_csv_line(line.lstrip("\ufeff"))]
    if "Kernel Name" not in fields:
        return None
    if "Metric Name" in fields and "Metric Value" in fields:
        return DETAILS
    # Every ncu metric is named unit__counter; the raw page's columns are metrics.
    return RAW if any("__" in f for f in fields) else None


def _is_tool_line(line: str) -> bool:
    return line.startswith(("==PROF==", "==ERROR==", "==WARNING=="))


def _no_header(path: Path, lines: list[str]) -> InputError | None:
    """The error for a file without a table; None when ncu says no kernel ran."""
    if not any(line.strip() for line in lines):
        return InputError(path, "file is empty", hint="was the run cut off before it wrote anything?")
    for prefix, verdict in (("==ERROR==", "the run failed"), ("==WARNING==", "ncu warned")):
        found = [(i, line) for i, line in enumerate(lines) if line.startswith(prefix)]
        if found:
            i, line = found[0]
            text = line[len(prefix):].strip()
            if prefix == "==WARNING==" and "no kernels were profiled" in text.lower():
                return None
            return InputError(path, f"no Nsight Compute CSV header; {verdict}: {text}", line=i + 1,
                              hint="fix the profiled run and profile it again")
    return InputError(path, "no Nsight Compute CSV header found",
                      hint="write it with ncu --csv (--page raw or details); is the file complete and comma-separated?")


@dataclass
class _Table:
    """One file's launches: canonical columns and base-unit metrics, both indexed by ID."""

    layout: str
    canon: pd.DataFrame
    metrics: pd.DataFrame
    device: str | None = None
    arch: str | None = None
    oddities: list[Oddity] = field(default_factory=list)


def _read_table(path: Path, want: Want) -> _Table | None:
    lines = text_lines(path)
    header = next((i for i, line in enumerate(lines) if _layout(line)), None)
    if header is None:
        error = _no_header(path, lines)
        if error:
            raise error
        return None
    layout = _layout(lines[header])
    # ncu's own messages after the table (==PROF== Disconnected, warnings) are not rows.
    end = len(lines)
    while end > header + 1 and (not lines[end - 1].strip() or _is_tool_line(lines[end - 1])):
        end -= 1
    oddities = [Oddity(str(path), f"ncu message after the table: {line.strip()}")
                for line in lines[end:] if line.startswith(("==ERROR==", "==WARNING=="))]
    _check_last_row(path, lines, header, end, layout)
    read = _read_raw if layout == RAW else _read_details
    table = read(path, lines, header, end, want)
    table.oddities[:0] = oddities
    return table


def _check_last_row(path: Path, lines: list[str], header: int, end: int, layout: str) -> None:
    """A run cut off mid-write leaves a short last row (pandas would pad it with
    empty cells, i.e. silently missing values) or an unclosed quote.

    On the details page a short row is no sign of that: ncu writes the rule columns
    (``Rule Name`` ... ``Estimated Speedup``, newer versions) only on rows that carry
    a rule result, so a metric row has fewer fields (16 against 20 seen). There the
    last row is cut only when a field is left open inside quotes or the row ends
    before ``Metric Value``."""
    if end <= header + 1:
        return
    names = [f.strip() for f in split_csv_line(lines[header].lstrip("\ufeff"))]
    last = lines[end - 1]
    fields = split_csv_line(last)
    # (A required column missing from the header is reported by the reader itself.)
    need = (max((names.index(c) for c in _DETAILS_REQUIRED if c in names), default=len(names) - 1) + 1
            if layout == DETAILS else len(names))
    short = len(fields) < need if layout == DETAILS else len(fields) != need
    if last.count('"') % 2 or short:
        raise InputError(path, f"last row is cut off ({len(fields)} of {len(names)} fields)", line=end,
                         hint="the profiler output is truncated; profile again or delete the partial row")


# --- numbers ------------------------------------------------------------------------


def _numbers(text: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Text -> float64 (thousands separators dropped, n/a missing) and the mask of
    cells that hold text other than a number."""
    clean = text.astype("string").str.strip().str.replace(",", "", regex=False)
    clean = clean.mask(clean.isin(_MISSING))
    values = pd.to_numeric(clean, errors="coerce").astype("float64")
    return values, values.isna() & clean.notna()


def _not_a_number(path: Path, text: pd.Series, bad: pd.Series, lines: pd.Series, column: str) -> InputError:
    pos = int(np.flatnonzero(bad.to_numpy())[0])
    return InputError(path, f"{str(text.iloc[pos]).strip()!r} is not a number", line=int(lines.iloc[pos]),
                      column=column, hint="is the file complete and written by ncu --csv?")


def _required_numbers(path: Path, text: pd.Series, lines: pd.Series, column: str) -> pd.Series:
    values, bad = _numbers(text)
    if bad.any():
        raise _not_a_number(path, text, bad, lines, column)
    return values


def _ids(path: Path, text: pd.Series, lines: pd.Series) -> pd.Series:
    """The launch ID of every row: present and a whole number."""
    values = _required_numbers(path, text, lines, "ID")
    bad = values.isna() | (values != values.round())
    if bad.any():
        raise _not_a_number(path, text, bad, lines, "ID")
    return values.astype("int64")


def _text_oddities(path: Path, mixed: dict[str, int], scaled: dict[str, int]) -> list[Oddity]:
    out = []
    if mixed:
        names = ", ".join(sorted(mixed)[:3]) + (", ..." if len(mixed) > 3 else "")
        out.append(Oddity(str(path), f"text where numbers are expected in metric(s) {names}; left empty",
                          sum(mixed.values())))
    if scaled:
        units = ", ".join(sorted(scaled)[:4])
        out.append(Oddity(str(path), f"values printed in scaled units ({units}) are rounded by ncu; converted to "
                          "base units, exact values need ncu --print-units base", sum(scaled.values())))
    return out


# --- the two layouts ------------------------------------------------------------------


def _read_raw(path: Path, lines: list[str], header: int, end: int, want: Want) -> _Table:
    if end <= header + 1 or split_csv_line(lines[header + 1])[:1] != [""]:
        raise InputError(path, "no units row after the header", line=header + 2,
                         hint="ncu --page raw --csv writes one (\"\",\"\",...,\"ns\",...); without it the "
                         "units of the values are unknown")
    frame = read_csv(path, header_line=header, skip_after_header=1, nrows=max(end - header - 2, 0))
    units = dict(zip(frame.columns, (u.strip() for u in split_csv_line(lines[header + 1]))))
    row_lines = pd.Series(header + 3 + np.arange(len(frame)), index=frame.index)
    index = pd.Index(_ids(path, frame["ID"], row_lines), name="ID")

    names = [n for n in frame.columns if "__" in n and (want.raw or n in _ALWAYS)]
    # All metric cells converted in one pass: per-column string operations cost
    # ~1 ms each, and a raw page has hundreds of columns.
    cells = pd.Series(frame[names].to_numpy(dtype=object).ravel(order="F"), dtype="string")
    flat_values, flat_bad = _numbers(cells)
    shape = (len(names), len(frame))
    values = flat_values.to_numpy().reshape(shape).T
    bad = flat_bad.to_numpy().reshape(shape).T
    numeric = ~np.isnan(values)
    for j in np.flatnonzero(bad.any(axis=0)):
        if names[j] in _CANONICAL_METRICS:
            raise _not_a_number(path, frame[names[j]], pd.Series(bad[:, j]), row_lines, names[j])
    # A column of text only is an attribute (SIMT, PolicySpread, the device name), not a counter.
    text_only = bad.any(axis=0) & ~numeric.any(axis=0)
    mixed = {names[j]: int(bad[:, j].sum()) for j in np.flatnonzero(bad.any(axis=0) & ~text_only)}
    conversions = [base_unit(units.get(n, "")) for n in names]
    factors = np.array([c[0] for c in conversions])
    scaled: dict[str, int] = {}
    for j in np.flatnonzero(factors != 1.0):
        scaled[units[names[j]]] = scaled.get(units[names[j]], 0) + int(numeric[:, j].sum())
    keep = np.flatnonzero(~text_only)
    table = pd.DataFrame(values[:, keep] * factors[keep], index=index, columns=[names[j] for j in keep])
    units.update({n: c[1] for n, c in zip(names, conversions)})
    ident = frame.set_axis(index)
    canon = _canonical(path, ident, row_lines.set_axis(index), table, units)
    device = _unique(frame[DISPLAY_NAME]) if DISPLAY_NAME in frame else None
    return _Table(RAW, canon, table, device, _arch(ident, table), _text_oddities(path, mixed, scaled))


def _read_details(path: Path, lines: list[str], header: int, end: int, want: Want) -> _Table:
    long = read_csv(path, header_line=header, nrows=max(end - header - 1, 0))
    require_columns(path, list(long.columns), _DETAILS_REQUIRED, line=header + 1)
    long["_line"] = header + 2 + np.arange(len(long))
    # Rows without a metric (rule results in newer versions) carry nothing to pivot.
    long["Metric Name"] = long["Metric Name"].str.strip()
    long = long[long["Metric Name"] != ""]
    long["_id"] = _ids(path, long["ID"], long["_line"])
    oddities = []
    repeated = long.duplicated(["_id", "Metric Name"])
    if repeated.any():
        oddities.append(Oddity(str(path), "metric repeated for the same kernel ID (another section?); first kept",
                               int(repeated.sum())))
        long = long[~repeated]
    ident = long.drop_duplicates("_id").set_index("_id")
    index = pd.Index(ident.index.to_numpy(), name="ID")
    if not want.raw:
        long = long[long["Metric Name"].isin(_ALWAYS)]

    values, bad = _numbers(long["Metric Value"])
    canonical_bad = bad & long["Metric Name"].isin(_CANONICAL_METRICS)
    if canonical_bad.any():
        raise _not_a_number(path, long["Metric Value"], canonical_bad, long["_line"], "Metric Value")
    unit_text = long["Metric Unit"].str.strip()
    conversions = {u: base_unit(u) for u in unit_text.unique()}
    factors = unit_text.map({u: c[0] for u, c in conversions.items()}).astype("float64")
    long = long.assign(_value=values * factors, _bad=bad, _num=values.notna(), _scaled=values.notna() & (factors != 1.0))

    per_metric = long.groupby("Metric Name", sort=False)[["_bad", "_num"]].sum()
    text_only = per_metric.index[(per_metric["_num"] == 0) & (per_metric["_bad"] > 0)]
    mixed = per_metric[(per_metric["_num"] > 0) & (per_metric["_bad"] > 0)]["_bad"].astype(int).to_dict()
    scaled = long[long["_scaled"]].groupby("Metric Unit")["_scaled"].size().astype(int).to_dict()
    names = [n for n in per_metric.index if n not in set(text_only)]
    table = long.pivot(index="_id", columns="Metric Name", values="_value").reindex(index=index, columns=names)
    first_units = long.drop_duplicates("Metric Name").set_index("Metric Name")["Metric Unit"]
    units = {n: conversions[str(u).strip()][1] for n, u in first_units.items()}

    display = long.loc[long["Metric Name"] == DISPLAY_NAME, "Metric Value"]
    canon = _canonical(path, ident.set_axis(index), ident["_line"].set_axis(index), table, units)
    oddities += _text_oddities(path, mixed, scaled)
    return _Table(DETAILS, canon, table, _unique(display), _arch(ident, table), oddities)


# --- canonical columns ------------------------------------------------------------------


def _unique(text: pd.Series | None) -> str | None:
    """The one value a column holds for every launch (device name, CC), else None."""
    if text is None:
        return None
    values = text.astype("string").str.strip().dropna()
    values = values[values != ""].unique()
    return str(values[0]) if len(values) == 1 else None


def _arch(ident: pd.DataFrame, metrics: pd.DataFrame) -> str | None:
    """CC "10.0" -> "sm_100" (B200), "8.0" -> "sm_80", "7.0" -> "sm_70"."""
    cc = _unique(ident["CC"]) if "CC" in ident else None
    if cc is None and all(c in metrics for c in _CC):
        pair = metrics[list(_CC)].dropna().drop_duplicates()
        cc = f"{int(pair.iloc[0, 0])}.{int(pair.iloc[0, 1])}" if len(pair) == 1 else None
    major, dot, minor = (cc or "").partition(".")
    return f"sm_{major}{minor}" if dot and major.isdigit() and minor.isdigit() else None


def _metric(metrics: pd.DataFrame, units: dict[str, str], name: str) -> tuple[pd.Series, str, str] | None:
    """A metric by its name or, in a sectioned details page, by its label."""
    for candidate in (name, *(label for label, target in _LABELS.items() if target == name)):
        if candidate in metrics:
            return metrics[candidate], units.get(candidate, ""), candidate
    return None


def _dims(path: Path, text: pd.Series, lines: pd.Series, column: str) -> pd.DataFrame:
    """ "(128, 1, 1)" -> three float columns; ncu writes no thousands separators here."""
    dims = text.str.extract(r"^\s*\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)\s*$").astype("float64")
    bad = dims[0].isna() & ~text.astype("string").str.strip().isin(_MISSING)
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(path, f"{text.iloc[pos]!r} is not a size like '(128, 1, 1)'", line=int(lines.iloc[pos]),
                         column=column, hint="is the file complete and written by ncu --csv?")
    return dims


def _canonical(path: Path, ident: pd.DataFrame, lines: pd.Series, metrics: pd.DataFrame,
               units: dict[str, str]) -> pd.DataFrame:
    out = pd.DataFrame(index=ident.index)
    out["kernel"] = ident["Kernel Name"]
    for column, canonical in _IDENTITY.items():
        if column in ident:
            out[canonical] = _required_numbers(path, ident[column], lines, column)

    block = grid = None
    if "Block Size" in ident:
        block = _dims(path, ident["Block Size"], lines, "Block Size")
    elif all(d in metrics for d in _BLOCK_DIMS):
        block = metrics[list(_BLOCK_DIMS)].set_axis([0, 1, 2], axis=1)
    if "Grid Size" in ident:
        grid = _dims(path, ident["Grid Size"], lines, "Grid Size")
    elif all(d in metrics for d in _GRID_DIMS):
        grid = metrics[list(_GRID_DIMS)].set_axis([0, 1, 2], axis=1)
    if block is not None:
        for i, axis in enumerate("xyz"):
            out[f"workgroup_{axis}"] = block[i]
        out["workgroup_size"] = block[0] * block[1] * block[2]
    if grid is not None:
        # ncu's grid counts blocks; perfcheck's counts threads (see perfcheck.schema).
        out["workgroups"] = grid[0] * grid[1] * grid[2]
        if block is not None:
            for i, axis in enumerate("xyz"):
                out[f"grid_{axis}"] = grid[i] * block[i]
            out["grid_size"] = out["grid_x"] * out["grid_y"] * out["grid_z"]

    found = _metric(metrics, units, REGISTERS)
    if found:
        out["registers"] = found[0]
    lds = {}
    for name, canonical in ((LDS_STATIC, "lds_static"), (LDS_DYNAMIC, "lds_dynamic")):
        found = _metric(metrics, units, name)
        if found:
            values, unit, label = found
            if unit.split("/")[0] != "byte":
                raise InputError(path, f"unit {unit!r} of {label} is not bytes", column=label,
                                 hint="expected byte/block or Kbyte/block")
            # Scaled units (1.02 Kbyte) are rounded by ncu: back to whole bytes.
            lds[canonical] = out[canonical] = values.round()
    if len(lds) == 2:
        out["lds_per_workgroup"] = lds["lds_static"] + lds["lds_dynamic"]
    found = _metric(metrics, units, DURATION)
    if found:
        values, unit, label = found
        if unit != "nsecond":
            raise InputError(path, f"unit {unit!r} of {label} is not a time unit", column=label,
                             hint="expected ns, usecond, msecond or second")
        out["duration"] = values * 1e-9
    return out


# --- scanning ---------------------------------------------------------------------------------


def _merge(tables: list[tuple[Path, _Table]]) -> _Table:
    """Files of one directory, each a separate run of the same program with other
    metrics, joined by launch ID. IDs must name the same kernel in every file."""
    for path, table in tables:
        if not table.canon.index.is_unique:
            raise InputError(path, "kernel IDs repeat; files cannot be merged by ID", hint="read the files one by one")
    first_path, first = tables[0]
    merged = _Table(first.layout, first.canon, first.metrics, first.device, first.arch, list(first.oddities))
    repeated: list[str] = []
    for path, table in tables[1:]:
        common = merged.canon.index.intersection(table.canon.index)
        ours, theirs = merged.canon.loc[common, "kernel"], table.canon.loc[common, "kernel"]
        differ = ours.ne(theirs)
        if differ.any():
            launch = common[np.flatnonzero(differ.to_numpy())[0]]
            raise InputError(path, f"kernel ID {launch} is {theirs[launch]!r} here but {ours[launch]!r} in "
                             f"{first_path.name}; these runs launched different kernels and cannot be merged by ID",
                             hint="read the files one by one")
        canon = table.canon
        # Each file is a separate process: a pid that differs belongs to no merged row.
        if "pid" not in merged.canon or ("pid" in canon and merged.canon.loc[common, "pid"].ne(
                canon.loc[common, "pid"]).any()):
            merged.canon = merged.canon.drop(columns="pid", errors="ignore")
            canon = canon.drop(columns="pid", errors="ignore")
        overlap = [m for m in table.metrics.columns if m in merged.metrics.columns]
        repeated += overlap
        order = list(dict.fromkeys([*merged.canon.columns, *canon.columns]))
        merged.canon = merged.canon.combine_first(canon)[order]
        merged.metrics = merged.metrics.join(table.metrics.drop(columns=overlap), how="outer")
        merged.device = merged.device or table.device
        merged.arch = merged.arch or table.arch
        merged.oddities += table.oddities
    if repeated:
        names = ", ".join(sorted(set(repeated))[:3])
        merged.oddities.append(Oddity(str(tables[0][0].parent), f"metric(s) {names} measured in several files "
                                      "(separate runs); the values of the first file kept", len(repeated)))
    return merged


def _ncu_files(directory: Path) -> list[Path]:
    """Regular files of a directory, when every one is an ncu CSV (else [])."""
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files or len(files) > 256:
        return []
    return files if all(_head_layout(Sniff(p)) for p in files) else []


def _scan(path: Path, want: Want) -> Scan:
    if path.is_dir():
        files = _ncu_files(path)
        if not files:
            raise InputError(path, "not a directory of Nsight Compute CSV files",
                             hint="every file in it must be an ncu --csv table")
        tables = [(f, t) for f in files if (t := _read_table(f, want)) is not None]
        table = _merge(tables) if tables else None
    else:
        table = _read_table(path, want)
    if table is None or table.canon.empty:
        what = "ncu profiled no kernels" if table is None else "the CSV table has no rows"
        source = Source(path=str(path), format=table.layout if table else DETAILS, tool=TOOL)
        return Scan(source, iter(()), [Oddity(str(path), f"holds no kernel dispatches ({what})")])
    source = Source(path=str(path), format=table.layout, tool=TOOL, device=table.device, arch=table.arch)

    def chunks() -> Iterator[pd.DataFrame]:
        frames = [table.canon]
        if want.raw:
            frames.append(table.metrics.add_prefix("raw."))
        yield pd.concat(frames, axis=1).reset_index(drop=True)

    return Scan(source, chunks(), list(table.oddities))


# --- sniffing -----------------------------------------------------------------------------------


def _head_layout(sniff: Sniff) -> str | None:
    try:
        if sniff.is_dir or sniff.is_binary:
            return None
        return next((layout for line in sniff.lines if (layout := _layout(line))), None)
    except Exception:  # noqa: BLE001 - a sniffer answers yes or no, never raises
        return None


def _sniff_raw(sniff: Sniff) -> bool:
    return _head_layout(sniff) == RAW


def _sniff_details(sniff: Sniff) -> bool:
    """Details tables; also ncu output with no table at all (a failed run: only
    ==PROF==/==ERROR== lines), so that its error is reported, and directories of
    ncu CSVs. nvprof prefixes its lines with ==<pid>==, never ==PROF==."""
    try:
        if sniff.is_dir:
            return bool(_ncu_files(sniff.path))
        layout = _head_layout(sniff)
        if layout:
            return layout == DETAILS
        return not sniff.is_binary and any(line.startswith(("==PROF==", "==ERROR==")) for line in sniff.lines)
    except Exception:  # noqa: BLE001
        return False


FORMATS: tuple[Format, ...] = (
    Format(
        name=RAW,
        tool=TOOL,
        kind="profile",
        description="Nsight Compute ncu --csv --page raw (one row per launch, units row)",
        sniff=_sniff_raw,
        scan=gnu_named(_scan),
    ),
    Format(
        name=DETAILS,
        tool=TOOL,
        kind="profile",
        description="Nsight Compute ncu --csv [--metrics ...] details page (one row per launch x metric); "
        "also a directory of such files, one per metric run, merged by kernel ID",
        sniff=_sniff_details,
        scan=gnu_named(_scan),
    ),
)
