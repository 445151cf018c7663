"""Plain-text tables for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from perfcheck.model import Peaks, Source
from perfcheck.report.units import format_value
from perfcheck.schema import PEAK_UNITS, metric_unit

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis


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


# The second table of `inspect`: what the counters and the hardware allow.
METRIC_COLUMNS = [
    ("hbm_bytes", "hbm bytes"),
    ("hbm_bw", "hbm bw"),
    ("hbm_bw_pct", "% peak"),
    ("flop_rate", "FLOP/s"),
    ("ai_hbm", "AI hbm"),
    ("roofline_pct", "% roof"),
    ("bound", "bound"),
    ("gips", "GIPS"),
    ("occupancy_pct", "occupancy"),
    ("occupancy_limiter", "limited by"),
    ("achieved_occupancy_pct", "achieved"),
]


def kernel_table(summary: pd.DataFrame, columns: Sequence[tuple[str, str]] = SUMMARY_COLUMNS) -> str:
    present = [(c, h) for c, h in columns if c in summary.columns and summary[c].notna().any()]
    header = ["kernel", *(h for _, h in present)]
    rows = []
    for record in summary.to_dict("records"):
        cells = [_shorten(str(record["kernel"]))]
        for col, _ in present:
            value = record[col]
            if isinstance(value, str):
                cells.append(value)
                continue
            cells.append(format_value(None if pd.isna(value) else value, metric_unit(col)))
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


def inspect_text(analysis: "Analysis") -> str:
    parts = [describe_sources(analysis.sources)]
    target = analysis.target
    if target is not None:
        if target.device is not None:
            parts.append(f"hardware: {target.device.name} ({target.arch.name}), {analysis.target_origin}")
        else:
            parts.append(
                f"hardware: {target.arch.name} ({analysis.target_origin}; device unknown: "
                "name it with --arch for theoretical peaks)"
            )
    else:
        parts.append("hardware: unknown (name it with --arch for occupancy and theoretical peaks)")
    for ceiling in analysis.ceilings.values():
        parts.append(f"ceiling {ceiling.name}: {format_value(ceiling.value, ceiling.unit)} ({ceiling.kind}: {ceiling.source})")
    table = analysis.kernels
    parts.append("")
    if not len(table):
        parts.append("no kernel dispatches in this profile")
        return "\n".join(parts)
    parts.append(kernel_table(table))
    if any(c in table.columns and table[c].notna().any() for c, _ in METRIC_COLUMNS):
        parts.append("")
        parts.append(kernel_table(table, METRIC_COLUMNS))
    return "\n".join(parts)
