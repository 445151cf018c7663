"""Change points for people: a terminal table, a Markdown table and JSON (``perfcheck
history detect``). Renders ``perfcheck.history.lifecycle.State`` records (a change
point, its status open | accepted | recovered and whether it is new); reads nothing.

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
    from perfcheck.history.lifecycle import State

COLUMNS = ("where", "change", "status", "before -> after", "starts at", "p")


def _status(state: "State") -> str:
    """open / accepted / recovered (regressions; "-" for an improvement), "new" when it
    starts (a recovery: recovers) in the last runs."""
    word = state.status or "-"
    return f"{word} (new)" if state.new else word


def _rows(found: Sequence["State"]) -> list[tuple[str, ...]]:
    rows = []
    for state in found:
        cp = state.point
        when = dt.datetime.fromtimestamp(cp.time, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        start = f"{(cp.commit or '-')[:10]} ({when}, run {cp.run_id})"
        rows.append((
            f"{cp.suite} / {cp.kernel} / {cp.metric} on {cp.machine}",
            f"{cp.change_pct:+.1f}% {cp.direction}",
            _status(state),
            f"{format_value(cp.before, cp.unit)} -> {format_value(cp.after, cp.unit)} ({cp.runs_before} / {cp.runs_after} runs)",
            start,
            f"{cp.p:.2g}",
        ))
    return rows


def text(found: Sequence["State"]) -> str:
    if not found:
        return "no change points"
    rows = [COLUMNS, *_rows(found)]
    widths = [max(len(r[c]) for r in rows) for c in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary(found: Sequence["State"]) -> dict[str, int]:
    """Counts of the regressions: open, of them new, accepted, recovered (the ones shown)."""
    regressions = [s for s in found if s.status is not None]
    return {"open": sum(s.open for s in regressions), "new": sum(s.open and s.new for s in regressions),
            "accepted": sum(s.status == "accepted" for s in regressions),
            "recovered": sum(s.status == "recovered" for s in regressions)}


def markdown(found: Sequence["State"]) -> str:
    if not found:
        return "No change points.\n"
    escape = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in _rows(found):
        lines.append("| " + " | ".join(escape(c) for c in row) + " |")
    counts = summary(found)
    head = (f"**{counts['open']} open regression{'s' if counts['open'] != 1 else ''}** ({counts['new']} new)\n\n"
            if counts["open"] else "")
    return head + "\n".join(lines) + "\n"


def as_json(found: Sequence["State"]) -> str:
    counts = summary(found)
    doc = {"change_points": [{**s.as_dict(), "recent": s.new} for s in found],
           "open_regressions": counts["open"], "new_regressions": counts["new"],
           "recent_regressions": counts["new"]}
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False)
