"""Change points for people: a terminal table, a Markdown table and JSON (``perfcheck
history detect``). Renders ``perfcheck.history.ChangePoint`` records; reads nothing.

In history, beside the dashboard and the exports, rather than in ``perfcheck.report``:
history sits above the reports (it reads the results file they write), so the
reports never import it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from perfcheck.units import format_value

if TYPE_CHECKING:
    from perfcheck.history.changepoints import ChangePoint

COLUMNS = ("where", "change", "before -> after", "starts at", "p")


def _rows(points: Sequence["ChangePoint"], recent: set[int]) -> list[tuple[str, ...]]:
    rows = []
    for i, cp in enumerate(points):
        when = dt.datetime.fromtimestamp(cp.time, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        start = f"{(cp.commit or '-')[:10]} ({when}, run {cp.run_id})"
        mark = " (new)" if i in recent else ""
        rows.append((
            f"{cp.suite} / {cp.kernel} / {cp.metric} on {cp.machine}",
            f"{cp.change_pct:+.1f}% {cp.direction}{mark}",
            f"{format_value(cp.before, cp.unit)} -> {format_value(cp.after, cp.unit)} ({cp.runs_before} / {cp.runs_after} runs)",
            start,
            f"{cp.p:.2g}",
        ))
    return rows


def text(points: Sequence["ChangePoint"], recent: Sequence["ChangePoint"] = ()) -> str:
    if not points:
        return "no change points"
    marked = {i for i, cp in enumerate(points) if cp in recent}
    rows = [COLUMNS, *_rows(points, marked)]
    widths = [max(len(r[c]) for r in rows) for c in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(points: Sequence["ChangePoint"], recent: Sequence["ChangePoint"] = ()) -> str:
    if not points:
        return "No change points.\n"
    from perfcheck.report.mdescape import code, text as escape

    marked = {i for i, cp in enumerate(points) if cp in recent}
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for cp, row in zip(points, _rows(points, marked)):
        # names from the store, escaped as every Markdown writer does; the kernel copyable
        where = f"{escape(cp.suite)} / {code(cp.kernel)} / {escape(cp.metric)} on {escape(cp.machine)}"
        lines.append("| " + " | ".join([where, *(escape(c) for c in row[1:])]) + " |")
    regressions = sum(1 for cp in recent if cp.regression)
    head = f"**{regressions} new regression{'s' if regressions != 1 else ''}**\n\n" if regressions else ""
    return head + "\n".join(lines) + "\n"


def as_json(points: Sequence["ChangePoint"], recent: Sequence["ChangePoint"] = ()) -> str:
    doc = {"change_points": [{**cp.as_dict(), "recent": cp in recent} for cp in points],
           "recent_regressions": sum(1 for cp in recent if cp.regression)}
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False)
