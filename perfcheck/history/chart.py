"""Trend charts of one kernel x metric over the runs of a history, as inline SVG.

The dashboard must work from a file on a laptop or an air-gapped cluster's
shared filesystem, so a chart is plain SVG text written into the page: no
script, no web font, no CDN. What a chart shows:

* the value of each run (a line through the points; the runs evenly spaced in
  order along the x axis, some labelled with their date or time);
* the budget band: where the value must stay (the expectation's limits, e.g.
  ``duration <= baseline + 5%``), shaded; a side without a limit runs to the
  plot's edge;
* change points: a dashed vertical line where a lasting shift began, red for a
  regression, green for an improvement, and the level before and after it;
* on hover (the SVG ``<title>`` of each point and change point): time, commit
  and value, which every browser shows without a script.

Coordinates are computed with numpy over whole columns; values stay in base
units and are formatted only in labels (``perfcheck.units``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np
import pandas as pd

from perfcheck.units import format_value

# The viewBox; the SVG scales to the page width (width: 100%), so a narrow
# screen shrinks it evenly. 520 units wide keeps 12-unit text readable at
# 360 CSS pixels (about 8 px) and sharp on a desktop.
WIDTH, HEIGHT = 520, 250
_LEFT, _RIGHT, _TOP, _BOTTOM = 80, 14, 14, 34
FONT = 12

LINE = "#1f5fa8"
BAND = "#2e7d32"
REGRESSION = "#c62828"
IMPROVEMENT = "#2e7d32"
GRID = "#d9dde3"
TEXT = "#333333"

# A limit far away from the data (``duration <= 10 ms`` for a 50 us kernel) would
# squash the trend into a line; the y range takes in a limit only while it lies
# within this many data spans of the data, and the caption says when one does not.
_LIMIT_REACH = 1.0


# Units whose values are whole numbers (bytes, registers, calls): no tick between them.
INTEGER_UNITS = ("B", "count")


def nice_ticks(low: float, high: float, count: int = 5, *, integer: bool = False) -> np.ndarray:
    """Round tick values (1, 2, 2.5 or 5 x 10^k apart; whole numbers with
    ``integer``) within [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return np.array([low]) if math.isfinite(low) else np.array([0.0])
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    # the round step nearest the raw one (in ratio), so a chart gets about
    # ``count`` ticks, never just two
    step = min((m * magnitude for m in (1.0, 2.0, 2.5, 5.0, 10.0)), key=lambda s: abs(math.log(s / raw)))
    if integer:
        step = max(1.0, float(math.ceil(step)))
    first = math.ceil(low / step - 1e-9) * step
    ticks = np.arange(first, high + step * 1e-6, step)
    return np.round(ticks / step) * step  # no 0.30000000000000004


def _value_range(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[float, float, list[str]]:
    """y range: the data, the band edges near it, padded; notes for limits left out."""
    data = values[np.isfinite(values)]
    lo, hi = (float(data.min()), float(data.max())) if data.size else (0.0, 1.0)
    if hi == lo:  # a constant series (no spills, every night): a range around it
        lo, hi = (lo - abs(lo) * 0.1, hi + abs(hi) * 0.1) if lo else (0.0, 1.0)
    span = hi - lo
    notes: list[str] = []
    for edges, side in ((low, "lower"), (high, "upper")):
        finite = edges[np.isfinite(edges)]
        if not finite.size:
            continue
        near = finite[(finite >= lo - _LIMIT_REACH * span) & (finite <= hi + _LIMIT_REACH * span)]
        if near.size:
            lo, hi = min(lo, float(near.min())), max(hi, float(near.max()))
        if near.size < finite.size:
            notes.append(f"{side} limit off the chart")
    span = hi - lo if hi > lo else (abs(hi) or 1.0) * 0.1
    lo, hi = lo - 0.08 * span, hi + 0.08 * span
    if lo < 0 and (not data.size or float(data.min()) >= 0):
        lo = 0.0  # durations and bandwidths are never negative: no axis below zero
    return lo, hi, notes


# Width of a label character in viewBox units: system-ui digits and letters average
# about 0.55 em; 0.62 leaves room for wide glyphs (M, W) in month names.
_CHAR_EM = 0.62
_LABEL_GAP = 10.0  # viewBox units between two x labels


def run_ticks(times: pd.Series, count: int = 5, *, room: float | None = None) -> list[tuple[int, str]]:
    """About ``count`` runs to label on the x axis (first and last included) and
    their times, formatted for the span of the whole series: dates over days, hours
    and minutes within a day, seconds within minutes. ``room``: viewBox units per run;
    labels are then kept at least their own width apart, so none overlaps its
    neighbour (8 runs leave 53 units per run for a 70-unit "Nov 26 06:42")."""
    return _run_ticks(_nanoseconds(times), count, room=room)


def _nanoseconds(times: "pd.Series | Sequence[object]") -> np.ndarray:
    """UTC times as numpy ``datetime64[ns]`` (naive, UTC), the charts' time arrays."""
    return np.asarray(pd.Series(pd.to_datetime(times, utc=True)).to_numpy(dtype="datetime64[ns]"))


def _strftime(time: np.datetime64, fmt: str) -> str:
    return pd.Timestamp(time).strftime(fmt)


def _run_ticks(times: np.ndarray, count: int = 5, *, room: float | None = None) -> list[tuple[int, str]]:
    """``run_ticks`` of ``datetime64[ns]`` times (UTC)."""
    n = len(times)
    if not n:
        return []
    span = times[-1] - times[0]
    fmt = "%b %d" if span >= np.timedelta64(2, "D") else "%b %d %H:%M" if span >= np.timedelta64(2, "h") \
        else "%H:%M" if span >= np.timedelta64(10, "m") else "%H:%M:%S"
    picks = sorted({int(i) for i in np.linspace(0, n - 1, min(count, n)).round()})
    if room is not None and n > 1:
        width = len(_strftime(times[0], fmt)) * FONT * _CHAR_EM + _LABEL_GAP
        gap = max(1, math.ceil(width / room))  # runs between two labels
        wanted = max(1, math.ceil((n - 1) / max(count - 1, 1)))
        gap = max(gap, wanted)
        picks = list(range(0, n, gap))
        if picks[-1] != n - 1:  # the latest run is always labelled; its neighbour gives way
            picks = [*(picks[:-1] if n - 1 - picks[-1] < gap else picks), n - 1]
    return [(i, _strftime(times[i], fmt)) for i in picks]


# Below this many viewBox units per run (more than ~140 runs in a chart) the points
# overlap and no one can hover a single one: the line alone is drawn, with a point (and
# its hover text) only where a value is outside its budget, at the latest run and where
# a value has no neighbour on the line. A year of nightly runs drew 365 points with
# their text per chart: most of the time and size of a large dashboard.
MIN_DOT_STEP = 3.0


def _dotted(values: np.ndarray, outside: np.ndarray, step: float) -> np.ndarray:
    """Which runs get a point (see MIN_DOT_STEP)."""
    finite = np.isfinite(values)
    if step >= MIN_DOT_STEP or not finite.any():
        return np.ones(len(values), dtype=bool)
    before = np.concatenate([[False], finite[:-1]])
    after = np.concatenate([finite[1:], [False]])
    keep = outside | ~(before | after)
    keep[np.flatnonzero(finite)[-1]] = True
    return keep


def utc_minutes(times: "pd.Series | np.ndarray") -> list[str]:
    """"2026-01-06 02:13 UTC" for each of ``times`` (UTC timestamps, or ``datetime64[ns]``
    in UTC): what ``strftime("%Y-%m-%d %H:%M UTC")`` gives, at numpy's speed (strftime was
    40% of a chart of a year of nightly runs)."""
    stamps = times if isinstance(times, np.ndarray) else times.to_numpy(dtype="datetime64[ns]")
    minutes = np.asarray(stamps).astype("datetime64[m]")
    return [f"{text[:10]} {text[11:]} UTC" for text in np.datetime_as_string(minutes, unit="m").tolist()]


def _corners(xs: np.ndarray, ys: np.ndarray) -> tuple[list[float], list[float]]:
    """The points of an edge of the budget band without those in the middle of a level
    stretch (the same y as both neighbours): the same shape, drawn from a few points where
    the limits stay put (a year of nights drew 730 points a band, a quarter of a page)."""
    if len(ys) < 3:
        return xs.tolist(), ys.tolist()
    middle = (ys[1:-1] == ys[:-2]) & (ys[1:-1] == ys[2:])
    keep = np.concatenate([[True], ~middle, [True]])
    return xs[keep].tolist(), ys[keep].tolist()


def _path(xs: np.ndarray, ys: np.ndarray) -> str:
    keep = np.isfinite(ys)
    if not keep.any():
        return ""
    # A missing value (NaN, a counter not collected that night) breaks the line
    # instead of joining its neighbours: M starts a new piece after each gap.
    if keep.all():  # no gap: one piece (a year of nights is 365 points a chart)
        return "M" + " L".join([f"{x:.1f},{y:.1f}" for x, y in zip(xs.tolist(), ys.tolist())])
    parts: list[str] = []
    pen_down = False
    for x, y, ok in zip(xs.tolist(), ys.tolist(), keep.tolist()):
        if not ok:
            pen_down = False
            continue
        parts.append(f"{'L' if pen_down else 'M'}{x:.1f},{y:.1f}")
        pen_down = True
    return " ".join(parts)


@dataclass(frozen=True)
class Runs:
    """A chart's runs as arrays, oldest first: ``times`` (``datetime64[ns]``, UTC),
    ``values`` (base units), ``low``/``high`` (the budget band, NaN where unbounded),
    ``failed`` (a check failed on that run's value), ``commits``. A large dashboard
    draws thousands of charts: slices of one part's arrays, no frame per chart."""

    times: np.ndarray
    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    failed: np.ndarray | None
    commits: Sequence[str]


@dataclass(frozen=True)
class Steps:
    """A chart's change points as arrays, oldest first: ``times`` (``datetime64[ns]``,
    UTC, the first run after the shift), ``before``/``after`` (levels), ``change_pct``,
    ``kinds`` ("regression" or "improvement"), ``commits``."""

    times: np.ndarray
    before: np.ndarray
    after: np.ndarray
    change_pct: np.ndarray
    kinds: Sequence[str]
    commits: Sequence[object]


NO_STEPS = Steps(np.array([], dtype="datetime64[ns]"), np.array([]), np.array([]), np.array([]), (), ())


def trend_svg(
    points: pd.DataFrame,
    changes: pd.DataFrame | None = None,
    *,
    unit: str,
    label: str,
) -> str:
    """One chart as an ``<svg>`` element.

    ``points``: one row per run, columns ``time`` (UTC timestamps), ``value``
    (base units), optional ``low``/``high`` (the budget band, NaN where
    unbounded), ``failed`` (a check failed on that run's value) and ``commit``. ``changes``: one row per change point, columns
    ``time``, ``before``, ``after``, ``change_pct`` and ``kind``
    ("regression" or "improvement"), optional ``commit``. ``label`` names the
    chart for screen readers ("duration of stencil_kernel").
    """
    points = points.sort_values("time", kind="stable").reset_index(drop=True)
    n = len(points)
    runs = Runs(_nanoseconds(points["time"]), points["value"].to_numpy(dtype=float),
                points["low"].to_numpy(dtype=float) if "low" in points else np.full(n, np.nan),
                points["high"].to_numpy(dtype=float) if "high" in points else np.full(n, np.nan),
                points["failed"].fillna(False).to_numpy(dtype=bool) if "failed" in points else None,
                points["commit"].fillna("").astype(str).tolist() if "commit" in points else [""] * n)
    steps = NO_STEPS
    if changes is not None and len(changes):
        steps = Steps(_nanoseconds(changes["time"]), changes["before"].to_numpy(dtype=float),
                      changes["after"].to_numpy(dtype=float), changes["change_pct"].to_numpy(dtype=float),
                      changes["kind"].tolist(),
                      changes["commit"].tolist() if "commit" in changes.columns else [""] * len(changes))
    return trend_svg_of(runs, steps, unit=unit, label=label)


def trend_svg_of(runs: Runs, steps: Steps = NO_STEPS, *, unit: str, label: str) -> str:
    """``trend_svg`` of arrays (see ``Runs`` and ``Steps``)."""
    times, values, low, high, commits = runs.times, runs.values, runs.low, runs.high, runs.commits
    n = len(values)

    y0, y1, notes = _value_range(values, low, high)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    # Runs are spaced evenly, in order: nightly runs skip weekends and CI runs come
    # in bursts, and a time axis would crowd the bursts and stretch the gaps.
    step = plot_w / n if n else plot_w

    def x_of(positions: np.ndarray) -> np.ndarray:
        return _LEFT + (np.asarray(positions, dtype=float) + 0.5) * step

    def y_of(v: np.ndarray) -> np.ndarray:
        return _TOP + (1.0 - (np.asarray(v, dtype=float) - y0) / (y1 - y0)) * plot_h

    xs, ys = x_of(np.arange(n)), y_of(values)
    out: list[str] = [
        f'<svg class="trend" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg" '
        f'font-family="system-ui, sans-serif" font-size="{FONT}">',
        f"<title>{escape(label)}</title>",
    ]
    # grid and y axis labels
    for tick in nice_ticks(y0, y1, integer=unit in INTEGER_UNITS):
        y = float(y_of(np.array([tick]))[0])
        if _TOP - 0.5 <= y <= _TOP + plot_h + 0.5:
            out.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
            out.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="{TEXT}">'
                       f"{escape(format_value(float(tick), unit))}</text>")
    for position, text in _run_ticks(times, room=step):
        x = float(x_of(np.array([position]))[0])
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP + plot_h}" y2="{_TOP + plot_h + 4}" stroke="{TEXT}"/>')
        out.append(f'<text x="{x:.1f}" y="{_TOP + plot_h + 17}" text-anchor="middle" fill="{TEXT}">{escape(text)}</text>')
    out.append(f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="{GRID}"/>')

    # budget band: a polygon along the runs, upper edge forward, lower edge back;
    # an unbounded side is the plot's edge. Runs without any limit leave a gap.
    bounded = np.isfinite(low) | np.isfinite(high)
    if bounded.any() and n:
        top = np.clip(np.where(np.isfinite(high), y_of(high), _TOP), _TOP, _TOP + plot_h)
        bottom = np.clip(np.where(np.isfinite(low), y_of(low), _TOP + plot_h), _TOP, _TOP + plot_h)
        # each run's limits hold over its own slot: the band starts and ends at the frame
        bx = np.concatenate([[_LEFT], xs, [_LEFT + plot_w]])
        top, bottom = np.concatenate([top[:1], top, top[-1:]]), np.concatenate([bottom[:1], bottom, bottom[-1:]])
        keep = np.concatenate([bounded[:1], bounded, bounded[-1:]])
        poly = [f"{x:.1f},{y:.1f}" for x, y in zip(*_corners(bx[keep], top[keep]))]
        poly += [f"{x:.1f},{y:.1f}" for x, y in zip(*_corners(bx[keep][::-1], bottom[keep][::-1]))]
        out.append(f'<polygon class="band" points="{" ".join(poly)}" fill="{BAND}" fill-opacity="0.12" '
                   f'stroke="{BAND}" stroke-opacity="0.5" stroke-dasharray="3 3"><title>budget</title></polygon>')

    # change points: where the shift began, the level before and after
    # a change point sits between the last run at the old level and the first at the new
    first_new = np.searchsorted(times.view("i8"), steps.times.view("i8"))
    cxs = x_of(first_new - 0.5)
    edges = np.concatenate([[_LEFT], cxs, [_LEFT + plot_w]])
    for i, (kind, before, after, pct, commit) in enumerate(zip(
            steps.kinds, steps.before.tolist(), steps.after.tolist(), steps.change_pct.tolist(), steps.commits)):
        color = REGRESSION if kind == "regression" else IMPROVEMENT
        x = float(cxs[i])
        commit = commit or ""
        tip = (f"{kind} at {_strftime(steps.times[i], '%Y-%m-%d %H:%M UTC')}"
               + (f", commit {commit}" if commit else "")
               + f": {format_value(before, unit)} -> {format_value(after, unit)}"
               + (f" ({pct:+.1f}%)" if not math.isnan(pct) else ""))
        for y_level, a, b in ((before, edges[i], x), (after, x, edges[i + 2])):
            if math.isfinite(y_level):
                yl = float(y_of(np.array([y_level]))[0])
                out.append(f'<line class="level" x1="{a:.1f}" x2="{b:.1f}" y1="{yl:.1f}" y2="{yl:.1f}" '
                           f'stroke="{color}" stroke-opacity="0.45" stroke-width="2"/>')
        out.append(f'<g class="change {escape(str(kind))}"><title>{escape(tip)}</title>'
                   f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" stroke="{color}" '
                   f'stroke-width="1.5" stroke-dasharray="5 3"/>'
                   f'<path d="M{x - 6:.1f},{_TOP} L{x + 6:.1f},{_TOP} L{x:.1f},{_TOP + 9} Z" fill="{color}"/></g>')

    # the runs
    line = _path(xs, ys)
    if line:
        out.append(f'<path class="series" d="{line}" fill="none" stroke="{LINE}" stroke-width="1.8"/>')
    outside = (np.isfinite(low) & (values < low)) | (np.isfinite(high) & (values > high))
    if runs.failed is not None:  # a check of that run failed on this value (limits not stored)
        outside |= runs.failed
    # the points drawn only (a year of nights draws a handful: their times formatted alone)
    dots = np.flatnonzero(_dotted(values, outside, step) & np.isfinite(ys))
    for x, y, when, value, i, out_of_budget in zip(xs[dots].tolist(), ys[dots].tolist(), utc_minutes(times[dots]),
                                                   values[dots].tolist(), dots.tolist(), outside[dots].tolist()):
        commit = commits[i]
        tip = when + (f", commit {commit}" if commit else "") \
            + f": {format_value(value, unit)}" + (" (outside its budget)" if out_of_budget else "")
        fill = REGRESSION if out_of_budget else LINE
        out.append(f'<circle class="run" cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{fill}" stroke="#fff">'
                   f"<title>{escape(tip)}</title></circle>")
    if not np.isfinite(values).any():
        out.append(f'<text x="{_LEFT + plot_w / 2}" y="{_TOP + plot_h / 2}" text-anchor="middle" fill="{TEXT}">'
                   "no value recorded</text>")
    if notes:
        out.append(f'<text x="{_LEFT + plot_w}" y="{_TOP + plot_h - 6}" text-anchor="end" fill="{TEXT}" '
                   f'font-size="{FONT - 1}">{escape("; ".join(notes))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def legend_svg(items: Sequence[tuple[str, str]] = ()) -> str:
    """The key shared by every chart of a page, drawn once: run, budget, regression, improvement."""
    entries = list(items) or [("run", LINE), ("budget", BAND), ("regression", REGRESSION), ("improvement", IMPROVEMENT)]
    width = 110 * len(entries)
    parts = [f'<svg class="legend" viewBox="0 0 {width} 20" width="{width}" height="20" role="img" '
             f'aria-label="legend" xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" '
             f'font-size="{FONT}">']
    for i, (name, color) in enumerate(entries):
        x = 110 * i + 4
        if name == "budget":
            parts.append(f'<rect x="{x}" y="4" width="16" height="12" fill="{color}" fill-opacity="0.15" '
                         f'stroke="{color}" stroke-dasharray="3 3"/>')
        elif name == "run":
            parts.append(f'<line x1="{x}" x2="{x + 16}" y1="10" y2="10" stroke="{color}" stroke-width="2"/>'
                         f'<circle cx="{x + 8}" cy="10" r="3.5" fill="{color}"/>')
        else:
            parts.append(f'<line x1="{x + 8}" x2="{x + 8}" y1="2" y2="18" stroke="{color}" stroke-width="1.5" '
                         f'stroke-dasharray="5 3"/>')
        parts.append(f'<text x="{x + 22}" y="14" fill="{TEXT}">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
