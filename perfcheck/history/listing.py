"""Findings for people: a terminal table, a Markdown table and JSON (``perfcheck
history detect``). Renders ``perfcheck.history.findings.Finding`` records (one per
kernel x change run, the same change on other metrics inside it, why, and its
lifecycle status open | accepted | recovered from ``perfcheck.history.lifecycle``);
reads nothing.

In history, beside the dashboard and the exports, rather than in ``perfcheck.report``:
history sits above the reports (it reads the results file they write), so the
reports never import it."""

from __future__ import annotations

import datetime as dt
import json
import math
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from perfcheck.units import format_value, shorten_middle

if TYPE_CHECKING:
    from perfcheck.history.findings import Finding

COLUMNS = ("kernel", "metric", "change", "since")
KERNEL_MIN = 16  # a kernel column narrower than this says nothing: the row wraps instead
INDENT = "    "


def _since(f: "Finding") -> str:
    cp = f.headline
    when = dt.datetime.fromtimestamp(cp.time, dt.timezone.utc).strftime("%Y-%m-%d")
    return f"{(cp.commit or cp.run_id)[:10]} {when}"


def _state(f: "Finding") -> str:
    marks = [m for m in ("new" if f.new else "", f.status or "") if m]
    return f"{f.headline.direction}" + (f" ({', '.join(marks)})" if marks else "")


def pct_text(change: float) -> str:
    """"+30.1%", or "from 0" where the old level was 0 (a resource not used before)."""
    return f"{change:+.1f}%" if math.isfinite(change) else "from 0"


def change_text(f: "Finding") -> str:
    """"+30.1% regression (new)"."""
    return f"{pct_text(f.headline.change_pct)} {_state(f)}"


def levels_text(f: "Finding") -> str:
    """"2 ms -> 2.6 ms from run night-06 (10 / 5 runs, p 1.2e-09)"."""
    cp = f.headline
    return (f"{format_value(cp.before, cp.unit)} -> {format_value(cp.after, cp.unit)} from run {cp.run_id} "
            f"({cp.runs_before} / {cp.runs_after} runs, p {cp.p:.2g})")


def also_text(f: "Finding") -> str:
    """"duration_max +31.0%; hbm_bw, gips -23.1%" or "": metrics with the same change
    (rates over the same duration) share one figure."""
    same: dict[str, list[str]] = {}
    for cp in sorted(f.also, key=lambda cp: (-abs(cp.change_pct), cp.metric)):
        same.setdefault(pct_text(cp.change_pct), []).append(cp.metric)
    return "; ".join(f"{', '.join(metrics)} {pct}" for pct, metrics in same.items())


def why_text(f: "Finding") -> str:
    return f.diagnosis.reason() if f.diagnosis is not None else ""


def _where(f: "Finding") -> str:
    return f"{f.suite} on {f.machine}"


def text(found: Sequence["Finding"], *, width: int | None = None) -> str:
    """One row per finding under a line per suite and machine, then its levels, what
    also moved and why, indented. ``width``: the terminal's columns (kernel names
    shortened in the middle, the detail lines wrapped); None: whole names, one line each."""
    if not found:
        return "no change points"
    lines: list[str] = []
    groups: dict[str, list["Finding"]] = {}
    for f in found:
        groups.setdefault(_where(f), []).append(f)
    for where, mine in groups.items():
        rows = [(f.kernel, f.headline.metric, change_text(f), _since(f)) for f in mine]
        widths = [max(len(r[c]) for r in [COLUMNS, *rows]) for c in range(len(COLUMNS))]
        if width is not None:
            rest = sum(widths[1:]) + 2 * (len(COLUMNS) - 1) + 2
            widths[0] = max(KERNEL_MIN, min(widths[0], width - rest))
        if lines:
            lines.append("")
        lines.append(where if width is None else shorten_middle(where, width))
        for i, row in enumerate([COLUMNS, *rows]):
            cells = [shorten_middle(row[0], widths[0]) if width is not None else row[0], *row[1:]]
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
            if i == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
                continue
            f = mine[i - 1]
            detail = [levels_text(f)]
            if f.also:
                detail.append(f"also moved: {also_text(f)}")
            if f.diagnosis is not None:
                detail.append(f"why: {why_text(f)}")
            for item in detail:
                if width is None:
                    lines.append(INDENT + item)
                else:
                    lines.extend(textwrap.wrap(item, width=width, initial_indent=INDENT,
                                               subsequent_indent=INDENT + "  ", break_on_hyphens=False))
    return "\n".join(lines)


def summary(found: Sequence["Finding"]) -> dict[str, int]:
    """Counts of the regression findings: open, of them new, accepted, recovered."""
    regressions = [f for f in found if f.regression and f.status is not None]
    return {"open": sum(f.status == "open" for f in regressions),
            "new": sum(f.status == "open" and f.new for f in regressions),
            "accepted": sum(f.status == "accepted" for f in regressions),
            "recovered": sum(f.status == "recovered" for f in regressions)}


def markdown(found: Sequence["Finding"]) -> str:
    if not found:
        return "No change points.\n"
    from perfcheck.report.mdescape import code, text as escape

    lines = ["| where | kernel | change | before -> after | since | also moved | why |",
             "|---|---|---|---|---|---|---|"]
    for f in found:
        # names from the store, escaped as every Markdown writer does; the kernel copyable
        lines.append("| " + " | ".join([
            escape(_where(f)), code(f.kernel), escape(f"{f.headline.metric} {change_text(f)}"), escape(levels_text(f)),
            escape(_since(f)), escape(also_text(f)) or "-", escape(why_text(f)) or "-"]) + " |")
    counts = summary(found)
    head = (f"**{counts['open']} open regression{'s' if counts['open'] != 1 else ''}** ({counts['new']} new)\n\n"
            if counts["open"] else "")
    return head + "\n".join(lines) + "\n"


def as_json(found: Sequence["Finding"]) -> str:
    counts = summary(found)
    doc = {"findings": [f.as_dict() for f in found], "open_regressions": counts["open"],
           "new_regressions": counts["new"], "recent_regressions": counts["new"]}
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False)
