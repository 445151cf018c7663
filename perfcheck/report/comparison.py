"""``perfcheck compare A B`` rendered: a terminal table and a Markdown section.

One row per kernel found on both sides, longest-running first: the median duration
before -> after with the speed-up, the main-memory bandwidth as a percentage of its
peak, the occupancy with its limiter, and the launch resources that changed::

    kernel             duration              speed-up  bandwidth      occupancy          changed
    EOCloverFBCGPU     2.666 ms -> 1.408 ms  1.89x     44.9% -> 85.2%  20% -> 40% (lds -> vgpr)  vgpr 52 -> 64, ...
"""

from __future__ import annotations

from collections.abc import Sequence

from perfcheck.comparison import OCCUPANCY, POSITION, RESOURCES, Change, Comparison, KernelComparison
from perfcheck.report.markdown import _cell, _code, _table as _md_table
from perfcheck.report.results import device_label
from perfcheck.report.text import _table, printable
from perfcheck.units import format_value

ARROW = "\u2192"
# Short names of the launch resources in the "changed" column.
_SHORT = {"vgpr": "vgpr", "agpr": "agpr", "sgpr": "sgpr", "registers": "regs", "lds_per_workgroup": "lds/wg",
          "scratch_per_thread": "scratch", "workgroup_size": "wg size", "achieved_occupancy_pct": "achieved occ."}


def _shown(value: float | str | None, unit: str) -> str:
    if isinstance(value, str):
        return value
    if unit == "%" and value is not None:
        return f"{value:.1f}%"
    return format_value(value, unit)


def _pair(change: Change | None) -> str:
    if change is None:
        return "-"
    return f"{_shown(change.before, change.unit)} {ARROW} {_shown(change.after, change.unit)}"


def speedup_text(kernel: KernelComparison) -> str:
    """"1.89x faster", "1.30x slower", "same" (within 1%)."""
    ratio = kernel.speedup
    if ratio is None:
        return "-"
    if abs(ratio - 1.0) < 0.01:
        return "same"
    return f"{ratio:.2f}x faster" if ratio > 1 else f"{1 / ratio:.2f}x slower"


def _position(kernel: KernelComparison) -> Change | None:
    return next((kernel.change(m) for m in POSITION if kernel.change(m) is not None), None)


def position_title(comparison: Comparison) -> str:
    """"% of hbm_bw peak" (the quantity of the bandwidth column), from the first kernel that has one."""
    for kernel in comparison.kernels:
        change = _position(kernel)
        if change is not None:
            name = change.metric.removesuffix("_pct")
            return "% of roofline" if name == "roofline" else f"% of {name} peak"
    return "% of peak"


def _occupancy(kernel: KernelComparison) -> str:
    occ, limiter = kernel.change(OCCUPANCY[0]), kernel.change(OCCUPANCY[1])
    text = _pair(occ)
    if limiter is not None:
        text += f" ({limiter.before or '?'} {ARROW} {limiter.after or '?'})" if limiter.moved else f" ({limiter.after})"
    return text


def _resources(kernel: KernelComparison) -> str:
    moved = [c for c in kernel.changes if c.metric in RESOURCES or c.metric == "achieved_occupancy_pct"]
    return ", ".join(f"{_SHORT.get(c.metric, c.metric)} {_pair(c)}" for c in moved if c.moved) or "-"


def _rows(comparison: Comparison) -> list[list[str]]:
    return [[k.kernel, _pair(k.change("duration")), speedup_text(k), _pair(_position(k)), _occupancy(k), _resources(k)]
            for k in comparison.kernels]


def _header(comparison: Comparison) -> list[str]:
    return ["kernel", "duration (median)", "speed-up", position_title(comparison), "occupancy (limiter)",
            "launch resources changed"]


def _sides(comparison: Comparison) -> str:
    a, b = comparison.before, comparison.after
    return f"{a.label} on {device_label(a.analysis)} {ARROW} {b.label} on {device_label(b.analysis)}"


def _apart(comparison: Comparison) -> list[str]:
    lines = []
    for names, where in ((comparison.only_before, comparison.before.label),
                         (comparison.only_after, comparison.after.label)):
        if names:
            lines.append(f"only in {where}: {', '.join(names)}")
    return lines


def comparison_text(comparison: Comparison, *, width: int | None = None) -> str:
    """The terminal table, fitted to ``width`` (None: no limit)."""
    lines = [printable(f"compare: {_sides(comparison)}"), ""]
    if comparison.kernels:
        rows = [[printable(c) for c in row] for row in _rows(comparison)]
        lines.append(_table(_header(comparison), rows, right=set(), width=width, shrink=(0,)))
    else:
        lines.append("no kernel is in both (kernels are matched by name)")
    apart = _apart(comparison)
    if apart:
        lines += ["", *(printable(line) for line in apart)]
    return "\n".join(lines)


def comparison_markdown(comparison: Comparison, *, images: Sequence[str] = ()) -> str:
    """A Markdown section: the headline, the roofline images (``images``: paths relative
    to the Markdown file), the table, the kernels on one side only."""
    faster = sum((k.speedup or 1.0) >= 1.01 for k in comparison.kernels)
    slower = sum((k.speedup or 1.0) <= 1 / 1.01 for k in comparison.kernels)
    lines = [f"### perfcheck compare: {_cell(_sides(comparison))}", "",
             f"{len(comparison.kernels)} kernel{'s' if len(comparison.kernels) != 1 else ''} in both: "
             f"{faster} faster, {slower} slower, {len(comparison.kernels) - faster - slower} the same (within 1%)", ""]
    for image in images:
        what = "instruction roofline" if "instructions" in image else "roofline"
        lines += [f"![{what}: arrows from before to after]({image.replace(' ', '%20')})", ""]
    if comparison.kernels:
        rows = [[_code(r[0], 72), *(_cell(c) for c in r[1:])] for r in _rows(comparison)]
        lines += [*_md_table(_header(comparison), rows), ""]
    lines += [f"{_cell(line)}" for line in _apart(comparison)]
    return "\n".join(lines).rstrip() + "\n"
