"""Plain-text tables for the terminal."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from perfcheck.model import Peaks, Source
from perfcheck.report.units import format_value
from perfcheck.schema import METRIC_UNITS, PEAK_UNITS


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _shorten(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def describe_sources(sources: Sequence[Source]) -> str:
    lines = []
    for s in sources:
        bits = [s.format]
        if s.tool_version:
            bits.append(f"version {s.tool_version}")
        if s.device or s.arch:
            bits.append(" ".join(b for b in (s.device, f"({s.arch})" if s.arch else None) if b))
        if s.rank is not None:
            bits.append(f"rank {s.rank}")
        lines.append(f"{s.path}: {', '.join(bits)}")
    return "\n".join(lines)


SUMMARY_COLUMNS = [
    ("calls", "calls"),
    ("duration", "median"),
    ("duration_mean", "mean"),
    ("duration_min", "min"),
    ("duration_max", "max"),
    ("duration_total", "total"),
    ("vgpr", "vgpr"),
    ("agpr", "agpr"),
    ("sgpr", "sgpr"),
    ("registers", "regs"),
    ("lds_per_workgroup", "lds/wg"),
    ("scratch_per_thread", "scratch"),
]


def kernel_table(summary: pd.DataFrame) -> str:
    present = [(c, h) for c, h in SUMMARY_COLUMNS if c in summary.columns and summary[c].notna().any()]
    header = ["kernel", *(h for _, h in present)]
    rows = []
    for record in summary.to_dict("records"):
        cells = [_shorten(str(record["kernel"]))]
        for col, _ in present:
            value = record[col]
            cells.append(format_value(None if pd.isna(value) else value, METRIC_UNITS.get(col, "")))
        rows.append(cells)
    return _table(header, rows, right=set(range(1, len(header))))


def peaks_table(peaks: Peaks) -> str:
    rows = [[name, format_value(value, PEAK_UNITS.get(name, ""))] for name, value in sorted(peaks.values.items())]
    text = _table(["peak", "value"], rows, right={1})
    detail_rows = [[d.source, d.name, format_value(d.value, d.unit)] for d in peaks.details]
    if detail_rows:
        text += "\n\n" + _table(["source", "figure", "value"], detail_rows, right={2})
    return text


def arch_text(doc: dict) -> str:
    """`perfcheck arch show`: the figures of an arch/device document, one per line,
    with their sources; nested tables are indented."""
    sources = doc.get("sources", {})
    lines: list[str] = []

    def emit(mapping: dict, indent: str, source_map: dict) -> None:
        for key in sorted(mapping):
            if key == "sources":
                continue
            value = mapping[key]
            if isinstance(value, dict):
                lines.append(f"{indent}{key}:")
                emit(value, indent + "  ", source_map.get(key, {}) if isinstance(source_map.get(key), dict) else source_map)
                continue
            cited = source_map.get(key) if isinstance(source_map, dict) else None
            text = f"{indent}{key}: {value}"
            if isinstance(cited, str):
                text += f"    [{cited}]"
            lines.append(text)

    emit(doc, "", sources)
    return "\n".join(lines)
