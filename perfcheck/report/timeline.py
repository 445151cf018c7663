"""``perfcheck inspect --timeline``: the breakdown of each device's time (busy, idle,
compute, copies, communication), the copies per direction, the spread over ranks and
the top user ranges, as 80-column text or as JSON (base units, ``units`` says which)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from perfcheck.metrics.timeline import RANGE_METRICS, TimelineMetrics
from perfcheck.model import Source
from perfcheck.report.jsonreport import _number
from perfcheck.report.text import _table, describe_sources, printable
from perfcheck.schema import TIMELINE_METRICS, metric_unit
from perfcheck.units import format_value, shorten_middle

# The per-device table: (metric, header); fits 80 columns with two-space gaps.
DEVICE_COLUMNS = (("span", "span"), ("gpu_busy_pct", "busy"), ("idle_pct", "idle"), ("idle_gap_max", "max gap"),
                  ("compute_pct", "compute"), ("memcpy_time", "copies"), ("comm_share_pct", "comm"),
                  ("comm_overlap_pct", "hidden"))
SPREAD_METRICS = ("span", "gpu_busy_pct", "idle", "memcpy_time", "comm_time")
TOP_RANGES = 10


def _rows(frame: pd.DataFrame) -> list[tuple[object, dict]]:
    """(index key, row as a dict) per row: rendering only, a few rows per device."""
    return list(zip(frame.index, frame.to_dict("records")))


def _label(value: object) -> str:
    return "-" if value is None or value is pd.NA or (isinstance(value, float) and value != value) else str(value)


def _cell(value: object, unit: str) -> str:
    number = _number(value)
    return format_value(number, unit)


def timeline_text(metrics: TimelineMetrics, sources: Sequence[Source], *, width: int | None = 36) -> str:
    """``width``: cut range names to it in the middle (a terminal); None: whole names."""
    parts = [describe_sources(sources), ""]
    devices = metrics.devices
    if devices.empty:
        parts.append("no kernel, copy or memset activity in this timeline")
    else:
        rows = [[_label(rank), _label(device), *(_cell(row[m], metric_unit(m)) for m, _ in DEVICE_COLUMNS)]
                for (rank, device), row in _rows(devices)]
        header = ["rank", "gpu", *(h for _, h in DEVICE_COLUMNS)]
        parts.append(_table(header, rows, right=set(range(len(header)))))
        parts.append("busy, idle, compute, comm: % of span (first to last GPU activity)\n"
                     "hidden: % of the communication time under compute")
        copies = []
        for (rank, device), row in _rows(devices):
            for direction in ("h2d", "d2h", "d2d", "p2p", "h2h"):
                calls = row[f"memcpy_{direction}_calls"]
                if calls:
                    copies.append([_label(rank), _label(device), direction.upper(), _cell(calls, "count"),
                                   _cell(row[f"memcpy_{direction}_bytes"], "B"),
                                   _cell(row[f"memcpy_{direction}_time"], "s"),
                                   _cell(row[f"memcpy_{direction}_bw"], "B/s")])
        if copies:
            parts += ["", _table(["rank", "gpu", "copy", "calls", "bytes", "time", "bandwidth"], copies,
                                 right={0, 1, 3, 4, 5, 6})]
    ranks = devices.index.get_level_values("rank").dropna().unique() if not devices.empty else []
    if len(ranks) > 1:
        spread = metrics.ranks
        rows = [[m, *(_cell(spread.loc[m, s], metric_unit(m)) for s in ("min", "median", "max")),
                 _cell(spread.loc[m, "imbalance"], "")] for m in SPREAD_METRICS]
        parts += ["", _table(["over ranks", "min", "median", "max", "max/mean"], rows, right={1, 2, 3, 4}),
                  f"straggler (longest span): rank {_label(spread.loc['span', 'straggler'])}"]
    ranges = metrics.ranges
    if len(ranges):
        top = ranges.sort_values("duration_total", ascending=False).head(TOP_RANGES)
        rows = [[shorten_middle(printable(name), width) if width else printable(name), on,
                 _cell(row["calls"], "count"), _cell(row["duration"], "s"), _cell(row["duration_p90"], "s"),
                 _cell(row["duration_total"], "s")] for (name, on), row in _rows(top)]
        title = f"range (top {len(top)} of {len(ranges)} by total)"
        parts += ["", _table([title, "on", "calls", "median", "p90", "total"], rows, right={2, 3, 4, 5})]
    return "\n".join(parts)


def timeline_document(metrics: TimelineMetrics, sources: Sequence[Source]) -> dict:
    """``perfcheck inspect --timeline --json``."""
    devices = [{"rank": _number(rank), "device_id": _number(device),
                "metrics": {m: _number(row[m]) for m in TIMELINE_METRICS}}
               for (rank, device), row in _rows(metrics.devices)]
    ranges = [{"range": str(name), "on": str(on), "metrics": {m: _number(row[m]) for m in RANGE_METRICS}}
              for (name, on), row in _rows(metrics.ranges)]
    spread = {m: {s: _number(row[s]) for s in ("min", "median", "max", "imbalance", "straggler")}
              for m, row in _rows(metrics.ranks)}
    return {
        "sources": [s.as_dict() for s in sources],
        "devices": devices,
        "ranges": ranges,
        "ranks": spread,
        "units": {m: metric_unit(m) for m in (*TIMELINE_METRICS, *RANGE_METRICS)},
    }
