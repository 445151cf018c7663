"""Roofline plots of a suite: PNG for people, SVG for documents.

``plot_roofline``: the hierarchical FLOP roofline (Yang, Kurth & Williams 2020):
every memory level with a known bandwidth is a sloped roof, the flat compute
roofs are those of the precision classes the kernels use; empirical ceilings
solid, theoretical (datasheet) dashed, each labelled in the plot with its value
and kind. One point per kernel and memory level at that level's arithmetic
intensity (marker = level, colour = kernel, area = share of the suite's kernel
time); a kernel's points share one FLOP rate and are joined by a thin line.
With a baseline, an arrow leads from where each kernel was to where it is.

``plot_instruction_roofline``: the same for instructions (Ding & Williams 2019):
instruction rate against instructions per byte of each level, under the
peak-GIPS roof and each level's bandwidth. Intensity is per *byte* rather than
per 32/64-byte transaction as in the papers, so the bandwidth roofs are the
bandwidth ceilings themselves (inst/B x B/s = inst/s).

matplotlib is imported inside the functions (and only its object-oriented API:
no pyplot, no global backend switch), so importing this module stays cheap.
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfcheck.comparison import without_signature
from perfcheck.report.results import device_label, write_atomic
from perfcheck.units import format_value

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis
    from perfcheck.metrics.roofline import Ceiling

# Spelled out rather than imported from perfcheck.metrics.roofline, which imports
# pandas: this module is imported by the CLI and the pytest plugin's check path.
EMPIRICAL = "empirical"
GIPS = "gips"

# Memory levels, outermost first: bytes quantity -> (label, marker) and its bandwidth ceiling,
# the levels of perfcheck.metrics.roofline.LEVELS (tests keep the two in step).
_LEVEL_STYLE: dict[str, tuple[str, str]] = {
    "hbm_bytes": ("HBM", "o"),
    "mem_bytes": ("DRAM", "h"),  # a CPU's main memory (perf.measure on device="cpu")
    "l2_bytes": ("L2", "s"),
    "l1_bytes": ("L1", "^"),
    "lds_bytes": ("LDS", "D"),
}
_LEVEL_CEILING = {"hbm_bytes": "hbm_bw", "mem_bytes": "mem_bw", "l2_bytes": "l2_bw", "l1_bytes": "l1_bw",
                  "lds_bytes": "lds_bw"}
_MAX_KERNELS = 10  # the longest-running ones; more colours are not told apart
_ROOF_COLOR = "#333333"

_CLASS = re.compile(r"^(flop|mfma|tensor)_rate_(\w+)$")
_CLASS_OF_FLOPS = re.compile(r"^(?:flops_(\w+)|(mfma|tensor)_flops_(\w+)|tensor_flops)$")


@dataclass(frozen=True)
class RoofPoint:
    """One kernel at one memory level: ``intensity`` work/byte, ``rate`` work/s."""

    kernel: str
    level: str  # "HBM", "L2", "L1", "LDS"
    intensity: float
    rate: float
    share: float  # of the plotted suite's kernel time, 0..1


@dataclass(frozen=True)
class _Mode:
    work: str  # per-dispatch quantity: "flops" | "instructions"
    rate: str  # "flop_rate" | "instruction_rate"
    rate_unit: str  # for format_value on the y axis
    x_label: str
    y_label: str
    title: str


_FLOP = _Mode("flops", "flop_rate", "FLOP/s", "arithmetic intensity (FLOP per byte moved at each level)",
              "performance (FLOP/s)", "Roofline")
_INST = _Mode("instructions", "instruction_rate", "inst/s",
              "instruction intensity (wavefront/warp instructions per byte at each level)",
              "instruction rate (GIPS = 10\u2079 instructions/s)", "Instruction roofline")


# --- data ------------------------------------------------------------------------------


def _finite_positive(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _row_points(row: Mapping[str, object], mode: _Mode, kernel: str, share: float) -> list[RoofPoint]:
    """The points of one kernel from a mapping of its metrics (a stored baseline's)."""
    work, rate = _finite_positive(row.get(mode.work)), _finite_positive(row.get(mode.rate))
    if work is None or rate is None:
        return []
    points = []
    for quantity, (label, _marker) in _LEVEL_STYLE.items():
        moved = _finite_positive(row.get(quantity))
        if moved is not None:
            points.append(RoofPoint(kernel, label, work / moved, rate, share))
    return points


def _time_shares(kernels: Any) -> dict[str, float]:
    import pandas as pd

    if "duration_total" in kernels.columns:
        time = pd.to_numeric(kernels["duration_total"], errors="coerce")
    elif "duration" in kernels.columns:
        calls = pd.to_numeric(kernels["calls"], errors="coerce") if "calls" in kernels.columns else 1.0
        time = pd.to_numeric(kernels["duration"], errors="coerce") * calls
    else:
        time = pd.Series(0.0, index=kernels.index)
    time = time.fillna(0.0).clip(lower=0.0)
    total = float(time.sum())
    names = kernels["kernel"].astype(str)
    if total <= 0:
        return dict.fromkeys(names, 1.0 / max(len(names), 1))
    return dict(zip(names, (time / total).astype(float)))


def _points(analysis: "Analysis", mode: _Mode) -> tuple[list[RoofPoint], list[str], int]:
    """(points of the longest-running kernels, kernels that could not be placed
    with the reason, number of kernels left out for space). Whole columns decide
    which kernels can be placed; points are made for the few that are drawn."""
    import numpy as np
    import pandas as pd

    kernels = analysis.kernels
    if not len(kernels) or "kernel" not in kernels.columns:
        return [], [], 0
    kernels = kernels.reset_index(drop=True)
    names = kernels["kernel"].astype(str)
    shares = names.map(_time_shares(kernels)).fillna(0.0).astype("float64")

    def numbers(column: str) -> "pd.Series":
        if column not in kernels.columns:
            return pd.Series(np.nan, index=kernels.index)
        return pd.to_numeric(kernels[column], errors="coerce").astype("float64")

    def positive(values: "pd.Series") -> "pd.Series":
        return values.where(np.isfinite(values) & (values > 0))

    counted = numbers(mode.work)
    work, rate = positive(counted), positive(numbers(mode.rate))
    moved = {quantity: positive(numbers(quantity)) for quantity in _LEVEL_STYLE}
    placeable = work.notna() & rate.notna() & pd.concat(moved.values(), axis=1).notna().any(axis=1)
    why = pd.Series(np.select([counted.isna(), work.isna(), rate.isna()],
                              [f"no {mode.work} counted", f"0 {mode.work}", "no duration"], "no byte counts"),
                    index=kernels.index)
    order = shares.sort_values(ascending=False, kind="stable").index  # longest-running first, ties in table order
    missing = [f"{short_name(names[i])} ({why[i]})" for i in order if not placeable[i]]
    drawn = [i for i in order if placeable[i]]
    points = [RoofPoint(names[i], label, work[i] / moved[quantity][i], rate[i], shares[i])
              for i in drawn[:_MAX_KERNELS]
              for quantity, (label, _marker) in _LEVEL_STYLE.items() if pd.notna(moved[quantity][i])]
    return points, missing, max(len(drawn) - _MAX_KERNELS, 0)


def roofline_points(analysis: "Analysis") -> list[RoofPoint]:
    """The points ``plot_roofline`` draws (kernels with FLOPs and bytes)."""
    return _points(analysis, _FLOP)[0]


def instruction_points(analysis: "Analysis") -> list[RoofPoint]:
    """The points ``plot_instruction_roofline`` draws (kernels with instructions and bytes)."""
    return _points(analysis, _INST)[0]


def has_instructions(analysis: "Analysis") -> bool:
    return bool(instruction_points(analysis))


def short_name(kernel: str, width: int = 40) -> str:
    """"void gemm_v0<float>(T1 *, ...)" -> "gemm_v0<float>": a kernel's name without
    return type and parameter list (as the profile spells it, not its canonical key:
    comparison.bare_name), cut to ``width``."""
    name = without_signature(kernel)
    return name if len(name) <= width else name[: width - 1] + "…"


# --- roofs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Roof:
    """One ceiling as drawn: solid at ``value`` (the ceiling used for checks), and
    dashed at ``theoretical`` when an empirical ceiling has a datasheet twin."""

    name: str  # ceiling name, "hbm_bw", "flop_rate_fp32", "gips"
    title: str  # "HBM", "FP32", "FP16 tensor core", "peak"
    value: float  # B/s for a sloped roof, work/s for a flat one
    kind: str  # of ``value``: "empirical" | "theoretical"
    sloped: bool
    theoretical: float | None = None
    unit: str = ""

    def label(self, scale: float = 1.0) -> str:
        def shown(v: float) -> str:
            return f"{v / 1e9:.4g} GIPS" if self.unit == "inst/s" else format_value(v, self.unit)

        text = f"{self.title} {shown(self.value)} ({self.kind})"
        if self.theoretical is not None:  # second line: keeps labels short enough to fit a roof
            text += f"\n{self.title} {shown(self.theoretical)} (theoretical, dashed)"
        return text


def _class_title(name: str) -> str:
    match = _CLASS.match(name)
    if match is None:
        return name
    family, precision = match.groups()
    suffix = {"flop": "", "mfma": " matrix core", "tensor": " tensor core"}[family]
    return f"{precision.upper()}{suffix}"


def _roof(ceiling: "Ceiling", title: str, sloped: bool) -> Roof:
    twin = ceiling.theoretical
    theoretical = twin.value if ceiling.kind == EMPIRICAL and twin is not None and twin.value != ceiling.value else None
    return Roof(ceiling.name, title, ceiling.value, ceiling.kind, sloped, theoretical, ceiling.unit)


def _compute_roof_names(analysis: "Analysis") -> list[str]:
    """The flat roofs worth drawing: the precision classes the kernels do FLOPs in
    (and each kernel's dominant class); without FLOPs, the vector FP64/FP32 roofs
    for orientation. At most four, highest first."""
    ceilings = analysis.ceilings
    kernels = analysis.kernels
    names: list[str] = []
    for column in sorted(kernels.columns) if len(kernels) else []:
        match = _CLASS_OF_FLOPS.match(column)
        if match is None:
            continue
        total = _finite_positive(kernels[column].fillna(0).sum())
        if total is None:
            continue
        if column == "tensor_flops":
            names.append("tensor_rate_fp16")  # FP16-tensor-equivalent, see metrics.roofline
        elif match.group(1):
            names.append(f"flop_rate_{match.group(1)}")
        else:
            names.append(f"{match.group(2)}_rate_{match.group(3)}")
    if "compute_ceiling" in kernels.columns:
        names.extend(str(v) for v in kernels["compute_ceiling"].dropna().unique())
    names = [n for n in dict.fromkeys(names) if n in ceilings]
    if not names:
        names = [n for n in ("flop_rate_fp64", "flop_rate_fp32") if n in ceilings]
    return sorted(names, key=lambda n: -ceilings[n].value)[:4]


def roofs(analysis: "Analysis", instructions: bool = False) -> list[Roof]:
    """The ceilings a plot draws: every memory level's bandwidth, then the compute
    roofs (FLOP plot) or the peak instruction rate (instruction plot)."""
    out: list[Roof] = []
    for quantity, bw in _LEVEL_CEILING.items():
        ceiling = analysis.ceilings.get(bw)
        if ceiling is not None:
            out.append(_roof(ceiling, _LEVEL_STYLE[quantity][0], True))
    if instructions:
        gips = analysis.ceilings.get(GIPS)
        if gips is not None:
            out.append(_roof(gips, "peak", False))
    else:
        out.extend(_roof(analysis.ceilings[n], _class_title(n), False) for n in _compute_roof_names(analysis))
    return out


def _peaks_note(analysis: "Analysis", drawn: Sequence[Roof]) -> str:
    """"ceilings: empirical from roofline.csv; theoretical from arch database: a100"."""
    by_kind: dict[str, list[str]] = {}
    for roof in drawn:
        ceiling = analysis.ceilings.get(roof.name)
        for c in (ceiling, ceiling.theoretical if ceiling is not None and roof.theoretical is not None else None):
            if c is not None:
                by_kind.setdefault(c.kind, []).append(c.source.split(" (", 1)[0])
    parts = [f"{kind} from {', '.join(dict.fromkeys(where))}" for kind, where in sorted(by_kind.items())]
    return "ceilings: " + "; ".join(parts) if parts else "no ceilings known: give measured peaks (--peaks) or the device (--arch)"


# --- drawing ------------------------------------------------------------------------------


def _decade_floor(x: float) -> float:
    return 10.0 ** math.floor(math.log10(x))


def _decade_ceil(x: float) -> float:
    return 10.0 ** math.ceil(math.log10(x))


def _limits(points: Sequence[RoofPoint], drawn: Sequence[Roof]) -> tuple[float, float, float, float]:
    """Axis limits (x in work/B, y in work/s): every point and every ridge point
    with room around them, at least three decades of intensity."""
    xs = [p.intensity for p in points]
    ys = [p.rate for p in points]
    flat = [v for r in drawn if not r.sloped for v in (r.value, r.theoretical) if v]
    slopes = [v for r in drawn if r.sloped for v in (r.value, r.theoretical) if v]
    xs += [f / s for f in flat for s in slopes]  # ridge points
    if not xs:
        xs = [0.01, 100.0]
    xmin, xmax = _decade_floor(min(xs) / 3), _decade_ceil(max(xs) * 3)
    while xmax / xmin < 1e3:
        xmin, xmax = xmin / 10, xmax * 10
    ymax = max([*ys, *flat]) * 4 if (ys or flat) else max(slopes, default=1.0) * xmax
    lows = ys or [ymax / 1e4]
    ymin = _decade_floor(min(lows) / 3)
    if slopes:  # show the slowest slope entering the plot, within reason
        ymin = max(min(ymin, min(slopes) * xmin), ymin / 100)
    return xmin, xmax, ymin, ymax


class _Labeller:
    """Places ceiling labels on their lines where they cover no kernel point and no
    other label: candidates along each line (above or below it) are scored in
    display space, the cheapest wins."""

    def __init__(self, ax: Any, renderer: Any, obstacles: list[tuple[float, float, float]]) -> None:
        self.ax, self.renderer = ax, renderer
        self.obstacles = list(obstacles)  # (x px, y px, radius px)
        self.box = ax.get_window_extent(renderer)

    def _extent(self, text: str, fontsize: float) -> tuple[float, float]:
        probe = self.ax.text(0, 0, text, fontsize=fontsize, transform=None)
        bbox = probe.get_window_extent(self.renderer)
        probe.remove()
        return bbox.width, bbox.height

    def _samples(self, x: float, y: float, angle: float, width: float, height: float, below: bool, right: bool) -> Any:
        """Points (display px) along the middle of a label anchored at (x, y), every ~6 px."""
        import numpy as np

        c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        along = np.linspace(0.0, width, max(int(width // 6), 2)) * (-1 if right else 1)
        side = -(height / 2 + 3) if below else (height / 2 + 3)
        return np.column_stack([x + along * c - side * s, y + along * s + side * c])

    def place(self, candidates: Sequence[tuple[float, float]], angle: float, text: str, *, right: bool,
              fontsize: float = 8.5) -> None:
        """``candidates``: points on the line (data coordinates), best first."""
        import numpy as np

        width, height = self._extent(text, fontsize)
        obstacles = np.asarray(self.obstacles, dtype=float).reshape(-1, 3)
        box = self.box
        best: tuple[float, tuple[float, float], bool] | None = None
        for order, (dx, dy) in enumerate(candidates):
            px, py = self.ax.transData.transform((dx, dy))
            for below in (False, True):
                samples = self._samples(px, py, angle, width, height, below, right)
                outside = ~((samples[:, 0] >= box.x0 + 2) & (samples[:, 0] <= box.x1 - 2)
                            & (samples[:, 1] >= box.y0 + 2) & (samples[:, 1] <= box.y1 - 2))
                distance = np.hypot(samples[:, None, 0] - obstacles[None, :, 0], samples[:, None, 1] - obstacles[None, :, 1])
                hits = np.count_nonzero(distance < obstacles[None, :, 2] + height / 2)
                cost = order * 0.01 + (0.3 if below else 0.0) + 5.0 * np.count_nonzero(outside) + hits
                if best is None or cost < best[0]:
                    best = (float(cost), (dx, dy), below)
        if best is None:
            return
        _cost, (dx, dy), below = best
        px, py = self.ax.transData.transform((dx, dy))
        offset = 3.0 * (-1 if below else 1)
        c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        ax_x, ax_y = self.ax.transData.inverted().transform((px - offset * s, py + offset * c))
        self.ax.text(ax_x, ax_y, text, rotation=angle, rotation_mode="anchor", ha="right" if right else "left",
                     va="top" if below else "bottom", fontsize=fontsize, color=_ROOF_COLOR, zorder=5,
                     bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.5})
        placed = self._samples(px, py, angle, width, height, below, right)
        self.obstacles.extend((sx, sy, height / 2) for sx, sy in placed)


def _draw_roofs(ax: Any, drawn: Sequence[Roof], limits: tuple[float, float, float, float], scale: float,
                labeller: _Labeller) -> None:
    """Flat roofs start where the fastest memory roof meets them, so every level's
    ridge lies on them (L1 and LDS ridges sit left of HBM's); sloped roofs end at
    the highest compute roof (the usual hierarchical drawing)."""
    xmin, xmax, ymin, ymax = limits
    flat = [r for r in drawn if not r.sloped]
    slopes = sorted((r for r in drawn if r.sloped), key=lambda r: r.value)
    top = max((v for r in flat for v in (r.value, r.theoretical) if v), default=None)
    fastest = max((v for r in slopes for v in (r.value, r.theoretical) if v), default=None)
    p0, p1 = ax.transData.transform((xmin, ymin)), ax.transData.transform((xmin * 10, ymin * 10))
    angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))

    def line(value: float, sloped: bool, dashed: bool) -> tuple[float, float]:
        style = {"color": _ROOF_COLOR, "lw": 1.3 if dashed else 1.8, "ls": "--" if dashed else "-", "zorder": 2}
        if sloped:
            end = min(top / value, xmax) if top else xmax
            xs, ys = [xmin, end], [value * xmin / scale, value * end / scale]
        else:
            start = max(value / fastest, xmin) if fastest else xmin
            xs, ys = [start, xmax], [value / scale, value / scale]
        ax.plot(xs, ys, **style)
        # Labels keep off other roofs' lines too: the line as a row of small obstacles.
        (x0, y0), (x1, y1) = ax.transData.transform((xs[0], ys[0])), ax.transData.transform((xs[1], ys[1]))
        steps = max(int(math.hypot(x1 - x0, y1 - y0) // 4), 1)
        labeller.obstacles.extend((x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps, 1.5) for i in range(steps + 1))
        return xs[0], xs[1]

    spans = []
    for roof in drawn:
        if roof.theoretical is not None:
            line(roof.theoretical, roof.sloped, dashed=True)
        spans.append(line(roof.value, roof.sloped, dashed=roof.kind != EMPIRICAL))
    for roof, (start, end) in zip(drawn, spans):
        if roof.sloped:
            # left part of the visible line first, where labels rarely meet kernels
            lo = max(start, ymin * 1.3 * scale / roof.value)
            steps = [lo * (end / lo) ** f for f in (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65)] if end > lo else [lo]
            labeller.place([(x, roof.value * x / scale) for x in steps], angle, roof.label(), right=False)
        else:
            steps = [end / 1.15 * (start / end) ** f for f in (0.0, 0.15, 0.3, 0.45, 0.6)]
            labeller.place([(x, roof.value / scale) for x in steps], 0.0, roof.label(), right=True)


def baseline_moves(analysis: "Analysis", baseline: Any, *, instructions: bool = False) -> list[tuple[RoofPoint, RoofPoint]]:
    """(where a kernel was in ``baseline``, where it is now) for every plotted kernel
    and memory level found in both: the arrows of the plot."""
    mode = _INST if instructions else _FLOP
    points = _points(analysis, mode)[0]
    before = _baseline_points(baseline, mode, list(dict.fromkeys(p.kernel for p in points)))
    return [(before[(p.kernel, p.level)], p) for p in points if (p.kernel, p.level) in before]


def _previous_points(previous: Any, mode: _Mode, kernels: Sequence[str]) -> dict[tuple[str, str], RoofPoint]:
    """Where each kernel was: in a stored baseline, or in another Analysis (the "before"
    side of ``perfcheck compare``)."""
    if previous is None:
        return {}
    if hasattr(previous, "ceilings") and hasattr(previous, "kernels"):  # an Analysis
        table = previous.kernels
        if not len(table) or "kernel" not in table.columns:
            return {}
        picked = table[table["kernel"].astype(str).isin(set(kernels))]
        out: dict[tuple[str, str], RoofPoint] = {}
        for row in picked.to_dict("records"):
            for point in _row_points(row, mode, str(row["kernel"]), 0.0):
                out[(point.kernel, point.level)] = point
        return out
    return _baseline_points(previous, mode, kernels)


def _baseline_points(baseline: Any, mode: _Mode, kernels: Sequence[str]) -> dict[tuple[str, str], RoofPoint]:
    """Where each kernel was in the stored baseline (``Baseline.kernels[k].metrics``)."""
    out: dict[tuple[str, str], RoofPoint] = {}
    stored = getattr(baseline, "kernels", None) or {}
    for kernel in kernels:
        metrics = getattr(stored.get(kernel), "metrics", None)
        if metrics:
            for point in _row_points(metrics, mode, kernel, 0.0):
                out[(kernel, point.level)] = point
    return out


# A change of a few percent moves a point by a few pixels on a log axis: the arrow is
# drawn at least this long (display px, past the marker's edge), above the markers,
# green when the kernel got faster, red when slower.
MIN_ARROW_PX = 26.0
MIN_CHANGE = 0.005
ARROW_BETTER, ARROW_WORSE = "#1a9850", "#d73027"


def arrow_ends(start: tuple[float, float], end: tuple[float, float], r_start: float,
               r_end: float) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """(tail, head) in display px of the arrow from the marker at ``start`` (radius
    ``r_start``, where the kernel was) to the one at ``end`` (where it is now): the
    tail on the first marker's edge, the head touching the second from outside, so it
    reads from before to after. Markers too close for a visible arrow between them
    (a 30% change is ~20 px on a log axis, less than two markers): the arrow runs beside
    them, parallel to the move, ``MIN_ARROW_PX`` or more long, clear of both markers
    (on their left: the number tags sit on the right). None: no move."""
    (sx, sy), (ex, ey) = start, end
    dx, dy = ex - sx, ey - sy
    length = math.hypot(dx, dy)
    if length < 1e-6:
        return None
    ux, uy = dx / length, dy / length
    if length - r_start - r_end - 2 >= MIN_ARROW_PX:
        return (sx + ux * (r_start + 1), sy + uy * (r_start + 1)), (ex - ux * (r_end + 1), ey - uy * (r_end + 1))
    nx, ny = -uy, ux
    if nx > 0 or (nx == 0 and ny < 0):
        nx, ny = -nx, -ny
    side = max(r_start, r_end) + 5
    mx, my = (sx + ex) / 2 + nx * side, (sy + ey) / 2 + ny * side
    half = max(length, MIN_ARROW_PX) / 2
    return (mx - ux * half, my - uy * half), (mx + ux * half, my + uy * half)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], r_start: float, r_end: float,
           color: str) -> None:
    ends = arrow_ends(start, end, r_start, r_end)
    if ends is None:
        return
    tail = ax.transData.inverted().transform(ends[0])
    head = ax.transData.inverted().transform(ends[1])
    ax.annotate("", xy=tuple(head), xytext=tuple(tail), zorder=7,
                arrowprops={"arrowstyle": "-|>,head_length=0.7,head_width=0.35", "color": color, "lw": 2.0,
                            "shrinkA": 0, "shrinkB": 0})


# Kernels on one spot (the four variants of a stencil): each marker is moved this far
# (in marker radii) from the spot, around a circle, so every colour shows.
SPREAD = 0.6


def spread(centres: Sequence[tuple[float, float]], radii: Sequence[float]) -> list[tuple[float, float]]:
    """Display offsets (px) for markers at ``centres`` (radius ``radii``, px): markers
    closer than half a radius to the first of their group are set around a small circle
    about it, the first at the top, the rest clockwise; a lone marker stays put."""
    groups: list[list[int]] = []
    for i, (x, y) in enumerate(centres):
        for group in groups:
            gx, gy = centres[group[0]]
            if math.hypot(x - gx, y - gy) < min(radii[i], radii[group[0]]) / 2:
                group.append(i)
                break
        else:
            groups.append([i])
    out = [(0.0, 0.0)] * len(centres)
    for group in groups:
        if len(group) < 2:
            continue
        reach = SPREAD * max(radii[i] for i in group)
        for k, i in enumerate(group):
            angle = math.pi / 2 - 2 * math.pi * k / len(group)
            out[i] = (reach * math.cos(angle), reach * math.sin(angle))
    return out


def _plain_tick(value: float, _pos: object = None) -> str:
    """0.001 ... 1000 as plain numbers, powers of ten beyond ("$10^{-5}$")."""
    if value <= 0:
        return ""
    if 1e-3 <= value < 1e4:
        return f"{value:g}"
    return f"$10^{{{round(math.log10(value))}}}$"


def _number_tags(ax: Any, points: Sequence[RoofPoint], kernels: Sequence[str], colors: Mapping[str, str],
                 scale: float) -> None:
    """Each kernel's legend number next to its rightmost point, so points can be
    told apart without relying on colour alone. Kernels that sit on the same spot
    (the four variants of a stencil, say) share one tag, "1, 2, 3, 4", instead of
    printing their numbers on top of each other."""
    groups: list[tuple[tuple[float, float], RoofPoint, list[int]]] = []
    for number, kernel in enumerate(kernels, start=1):
        last = max((p for p in points if p.kernel == kernel), key=lambda p: p.intensity)
        where = ax.transData.transform((last.intensity, last.rate / scale))
        for (x, y), _anchor, numbers in groups:
            if math.hypot(where[0] - x, where[1] - y) < 11:  # about one line of tag text
                numbers.append(number)
                break
        else:
            groups.append(((where[0], where[1]), last, [number]))
    for _where, anchor, numbers in groups:
        color = colors[kernels[numbers[0] - 1]] if len(numbers) == 1 else "#222222"
        ax.annotate(", ".join(map(str, numbers)), (anchor.intensity, anchor.rate / scale),
                    # a group's markers are spread around the spot (``spread``): past them
                    xytext=(math.sqrt(_marker_area(anchor.share)) / 2 * (1 + (SPREAD if len(numbers) > 1 else 0)) + 4,
                            0),
                    textcoords="offset points",
                    ha="left", va="center", fontsize=9, fontweight="bold", color=color, zorder=6)


def _share_text(share: float) -> str:
    return "<1%" if 0 < share < 0.005 else f"{share * 100:.0f}%"


def _marker_area(share: float) -> float:
    return 40.0 + 460.0 * share  # points^2


def _legends(ax: Any, renderer: Any, groups: Sequence[tuple[str | None, list[Any], int]]) -> None:
    """Legends stacked beside the axes, each placed under the previous one's
    measured extent."""
    top = 1.0
    box = ax.get_window_extent(renderer)
    for title, handles, ncol in groups:
        if not handles:
            continue
        legend = ax.legend(handles=handles, title=title, loc="upper left", bbox_to_anchor=(1.02, top), fontsize=8.5,
                           title_fontsize=9, frameon=False, ncol=ncol, alignment="left", borderaxespad=0.0)
        ax.add_artist(legend)
        extent = legend.get_window_extent(renderer)
        top -= (extent.height + 14) / box.height


def _plot(analysis: "Analysis", path_stem: str | Path, mode: _Mode, suite: str, previous: Any, *,
          moves: tuple[str, str] = ("baseline", "current"), title: str | None = None,
          limits: tuple[float, float, float, float] | None = None) -> list[Path]:
    """``previous``: a Baseline or an Analysis, where each kernel was (hollow markers,
    arrows); ``moves`` names the two ends in the legend; ``limits``: axis limits shared
    with other plots (``axis_limits``, in work/s before the GIPS scale), else this plot's own."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    points, missing, left_out = _points(analysis, mode)
    drawn = roofs(analysis, instructions=mode is _INST)
    kernels = list(dict.fromkeys(p.kernel for p in points))
    before = _previous_points(previous, mode, kernels)
    scale = 1e9 if mode is _INST else 1.0  # the instruction plot's y axis is in GIPS

    fig = Figure(figsize=(12.5, 7.2), dpi=110)
    canvas = FigureCanvasAgg(fig)
    fig.subplots_adjust(left=0.11, right=0.68, top=0.87, bottom=0.18 if missing else 0.11)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xmin, xmax, ymin, ymax = limits or _limits([*points, *before.values()], drawn)
    limits = (xmin, xmax, ymin / scale, ymax / scale)
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(limits[2], limits[3])
    ax.grid(True, which="major", color="#d9d9d9", lw=0.6)
    ax.grid(True, which="minor", color="#f2f2f2", lw=0.4)
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.yaxis.set_major_locator(LogLocator(base=10))
    # Minor ticks at 2 and 5 only: a log scale still reads as one, and a plot over
    # ten decades does not spend a second drawing 150 unlabelled ticks.
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0), numticks=100))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0), numticks=100))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(_plain_tick))
    if mode is _INST:
        ax.yaxis.set_major_formatter(FuncFormatter(_plain_tick))
    else:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_value(v, mode.rate_unit)))
    ax.set_xlabel(mode.x_label)
    ax.set_ylabel(mode.y_label)
    renderer = canvas.get_renderer()

    colors = {k: f"C{i % 10}" for i, k in enumerate(kernels)}
    markers = dict(_LEVEL_STYLE.values())
    obstacles = []
    moved: set[str] = set()
    _number_tags(ax, points, kernels, colors, scale)

    def radius(p: RoofPoint) -> float:  # display px
        return math.sqrt(_marker_area(p.share)) / 2 * fig.dpi / 72

    def placed(group: Sequence[RoofPoint]) -> dict[tuple[str, str], tuple[float, float, float]]:
        """Display position (x, y) of each marker, markers on one spot spread apart
        (``spread``), and the radius of the spot it belongs to (the marker's own plus
        its offset: an arrow keeps clear of the whole group)."""
        centres = [tuple(ax.transData.transform((p.intensity, p.rate / scale))) for p in group]
        offsets = spread(centres, [radius(p) for p in group])
        return {(p.kernel, p.level): (x + dx, y + dy, radius(p) + math.hypot(dx, dy))
                for p, (x, y), (dx, dy) in zip(group, centres, offsets)}

    def data(xy: tuple[float, float]) -> tuple[float, float]:
        x, y = ax.transData.inverted().transform(xy)
        return float(x), float(y)

    now = placed(points)
    was = placed([before[(p.kernel, p.level)] for p in points if (p.kernel, p.level) in before])
    arrows: set[tuple[int, int, int, int, str]] = set()  # kernels that moved together: one arrow
    for kernel in kernels:
        mine = sorted((p for p in points if p.kernel == kernel), key=lambda p: p.intensity)
        if len(mine) > 1:
            line = [data(now[(p.kernel, p.level)][:2]) for p in mine]
            ax.plot([x for x, _ in line], [y for _, y in line], "-", color=colors[kernel], lw=0.8, alpha=0.6, zorder=3)
        for p in mine:
            area, r = _marker_area(p.share), radius(p)
            px, py, reach = now[(p.kernel, p.level)]
            ax.scatter(*zip(data((px, py))), s=area, marker=markers[p.level], color=colors[kernel],
                       edgecolors="black", linewidths=0.6, zorder=4)
            obstacles.append((px, py, r + 2))
            old = before.get((kernel, p.level))
            if old is None:
                continue
            change = p.rate / old.rate - 1.0 if old.rate > 0 else 0.0
            if abs(change) < MIN_CHANGE and abs(p.intensity / old.intensity - 1.0) < MIN_CHANGE:
                continue  # unchanged within 0.5%: no arrow
            ox, oy, old_reach = was[(kernel, p.level)]
            color = ARROW_BETTER if change >= 0 else ARROW_WORSE
            moved.add(color)
            ax.scatter(*zip(data((ox, oy))), s=area, marker=markers[p.level], facecolors="none",
                       edgecolors=colors[kernel], linewidths=1.0, zorder=4)
            obstacles.append((ox, oy, r + 2))
            # from the centre of the spot it was on to the centre of the spot it is on
            start = tuple(ax.transData.transform((old.intensity, old.rate / scale)))
            end = tuple(ax.transData.transform((p.intensity, p.rate / scale)))
            key = (round(start[0]), round(start[1]), round(end[0]), round(end[1]), color)
            if key not in arrows:
                arrows.add(key)
                _arrow(ax, start, end, old_reach, reach, color)
    if not points:
        # Lower right: below every roof, where ceiling labels never go.
        note = ax.text(0.97, 0.05, f"no kernel has {mode.work} and byte counts to place here", transform=ax.transAxes,
                       ha="right", va="bottom", fontsize=11, color="#aa0000",
                       bbox={"facecolor": "white", "edgecolor": "#aa0000"})
        extent = note.get_window_extent(renderer)
        obstacles.extend((x, y, extent.height / 2) for x in range(int(extent.x0), int(extent.x1), 6)
                         for y in (extent.y0 + extent.height / 2,))

    _draw_roofs(ax, drawn, limits, scale, _Labeller(ax, renderer, obstacles))

    shares = {p.kernel: p.share for p in points}
    kernel_handles = [
        Line2D([], [], ls="", marker="o", color=colors[k], markeredgecolor="black", markersize=8,
               label=f"{i}  {short_name(k)}  ({_share_text(shares[k])})")
        for i, k in enumerate(kernels, start=1)
    ]
    if left_out:
        kernel_handles.append(Line2D([], [], ls="", label=f"({left_out} shorter kernel{'s' if left_out > 1 else ''} not shown)"))
    levels = list(dict.fromkeys(p.level for p in sorted(points, key=lambda p: list(markers).index(p.level))))
    level_handles = [Line2D([], [], ls="", marker=markers[lv], color="white", markeredgecolor="black", markersize=8,
                            label=lv) for lv in levels]
    kinds = {r.kind for r in drawn} | ({"theoretical"} if any(r.theoretical for r in drawn) else set())
    line_handles = []
    if EMPIRICAL in kinds:
        line_handles.append(Line2D([], [], ls="-", color=_ROOF_COLOR, lw=1.8, label="empirical ceiling (measured)"))
    if kinds - {EMPIRICAL}:
        line_handles.append(Line2D([], [], ls="--", color=_ROOF_COLOR, lw=1.3, label="theoretical ceiling (datasheet)"))
    for color, what in ((ARROW_BETTER, "faster"), (ARROW_WORSE, "slower")):
        if color in moved:
            line_handles.append(Line2D([], [], ls="-", color=color, lw=2.0, marker=">", markersize=6,
                                       label=f"{moves[0]} \u2192 {moves[1]}, {what} (hollow marker: {moves[0]})"))
    _legends(ax, renderer, [
        ("kernels (share of kernel time; marker area \u221d share)", kernel_handles, 1),
        ("memory level of each point", level_handles, max(len(level_handles), 1)),
        (None, line_handles, 1),
    ])

    where = f"suite {suite} on " if suite else ""
    heading = f"{mode.title}: {title} on {device_label(analysis)}" if title else \
        f"{mode.title}: {where}{device_label(analysis)}"
    fig.text(0.11, 0.955, heading, ha="left", va="top", fontsize=13, fontweight="bold")
    note = _peaks_note(analysis, drawn)
    from perfcheck.metrics.roofline import clocks_note  # here: an analysis means pandas is loaded

    clocks = clocks_note(analysis.ceilings)
    if clocks:
        note += f"; {clocks}"
    if mode is _INST and GIPS not in analysis.ceilings:
        note += "; no peak instruction rate (the device is unknown: name it with --arch)"
    fig.text(0.11, 0.905, note, ha="left", va="bottom", fontsize=9, color="#444444")
    if missing:
        shown = "; ".join(missing[:6]) + (f"; and {len(missing) - 6} more" if len(missing) > 6 else "")
        wrapped = textwrap.fill(f"not plotted: {shown}", width=170, max_lines=2, placeholder=" ...")
        fig.text(0.11, 0.015, wrapped, ha="left", va="bottom", fontsize=8.5, color="#666666")

    stem = Path(path_stem)
    written = []
    for fmt in ("png", "svg"):
        buffer = io.BytesIO()
        # SVG text stays text (searchable, selectable, small) rather than glyph
        # outlines; no dates in either file, so the same data gives the same bytes.
        with rc_context({"svg.fonttype": "none", "svg.hashsalt": "perfcheck"}):
            fig.savefig(buffer, format=fmt, metadata={"Date": None} if fmt == "svg" else {"Software": None})
        written.append(write_atomic(stem.with_name(f"{stem.name}.{fmt}"), buffer.getvalue()))
    return written


def why_not_plotted(analysis: "Analysis", *, instructions: bool = False) -> str | None:
    """Why a plot would be empty (then it is not written), or None."""
    mode = _INST if instructions else _FLOP
    points, missing, _ = _points(analysis, mode)
    if points:
        return None
    shown = "; ".join(missing[:3]) + (f"; and {len(missing) - 3} more" if len(missing) > 3 else "")
    return f"no kernel has {mode.work} and byte counts" + (f" ({shown})" if shown else "")


def axis_limits(plots: Sequence[tuple["Analysis", Any]], *, instructions: bool = False
                ) -> tuple[float, float, float, float] | None:
    """Axis limits (work/B, work/s) that hold every point, previous point and roof of
    ``plots`` ((analysis, baseline or None) each): plots of one device drawn on the same
    axes, so a kernel's move between two suites is seen by laying the pictures side by
    side. None when no plot has a point."""
    mode = _INST if instructions else _FLOP
    points: list[RoofPoint] = []
    drawn: list[Roof] = []
    for analysis, previous in plots:
        mine = _points(analysis, mode)[0]
        points += mine
        points += _previous_points(previous, mode, list(dict.fromkeys(p.kernel for p in mine))).values()
        drawn += roofs(analysis, instructions=instructions)
    return _limits(points, drawn) if points else None


def plot_comparison(before: "Analysis", after: "Analysis", path_stem: str | Path, *, title: str = "",
                    instructions: bool = False) -> list[Path]:
    """One roofline of ``after`` with an arrow per kernel and level from where it was in
    ``before`` (``perfcheck compare``); the roofs are ``after``'s. Returns the PNG and
    SVG written, none when no kernel of ``after`` can be placed."""
    mode = _INST if instructions else _FLOP
    if not _points(after, mode)[0]:
        return []
    limits = axis_limits([(after, before)], instructions=instructions)
    return _plot(after, path_stem, mode, "", before, moves=("before", "after"), title=title, limits=limits)


def plot_roofline(analysis: "Analysis", path_stem: str | Path, *, suite: str = "", baseline: Any = None,
                  limits: tuple[float, float, float, float] | None = None) -> list[Path]:
    """Write ``<path_stem>.png`` and ``<path_stem>.svg``; returns both paths, or none
    when no kernel can be placed (``why_not_plotted`` says why).

    ``baseline``: a ``perfcheck.baseline.Baseline`` (anything with
    ``kernels[name].metrics`` holding flops, flop_rate and the level bytes); each
    kernel found there gets an arrow from its stored position. Kernels without
    FLOPs or byte counts are named under the plot.
    """
    if why_not_plotted(analysis) is not None:
        return []
    return _plot(analysis, path_stem, _FLOP, suite, baseline, limits=limits)


def plot_instruction_roofline(
    analysis: "Analysis", path_stem: str | Path, *, suite: str = "", baseline: Any = None,
    limits: tuple[float, float, float, float] | None = None,
) -> list[Path]:
    """Write the instruction roofline as ``<path_stem>.png``/``.svg`` when some kernel
    has instruction and byte counts; returns the paths written (none otherwise)."""
    if not has_instructions(analysis):
        return []
    return _plot(analysis, path_stem, _INST, suite, baseline, limits=limits)
