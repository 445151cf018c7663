"""Plain-text tables for the terminal."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, XFAILED, XPASSED, Peaks, Source
from perfcheck.schema import PEAK_UNITS, metric_unit
from perfcheck.units import format_value, shorten_middle
from perfcheck.vocabulary import DECLARED as VOCABULARY_DECLARED
from perfcheck.vocabulary import TOOLS as VOCABULARY_TOOLS

if TYPE_CHECKING:
    from typing import TextIO

    from perfcheck.vocabulary import MetricInfo

    from perfcheck.analysis import Analysis
    from perfcheck.model import Check
    from perfcheck.suiterun import Run


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


# What a terminal would act on: ESC (colour, cursor and title sequences), the other
# C0/C1 controls, DEL, and the bidi overrides that reorder a line. A name taken from a
# profile is shown with them escaped (\x1b), never interpreted.
_TERMINAL_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """``text`` with control characters written as escapes: safe to print."""
    return _TERMINAL_CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(text))


def _shorten(name: str, width: int | None = 60) -> str:
    name = printable(name)
    return name if width is None or len(name) <= width else name[: width - 3] + "..."


def describe_sources(sources: Sequence[Source]) -> str:
    lines = []
    for s in sources:
        bits = [s.format]
        if s.tool_version:
            bits.append(f"version {s.tool_version}")
        if s.device and s.arch:
            bits.append(f"{s.device} ({s.arch})")
        elif s.device or s.arch:  # an arch alone is not put in parentheses: "proton, sm_90"
            bits.append(s.device or s.arch)
        if s.rank is not None:
            bits.append(f"rank {s.rank}")
        lines.append(printable(f"{s.path}: {', '.join(bits)}"))
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


def kernel_table(summary: pd.DataFrame, columns: Sequence[tuple[str, str]] = SUMMARY_COLUMNS,
                 *, width: int | None = 60) -> str:
    """``width``: kernel names longer than this are cut (None: full names)."""
    present = [(c, h) for c, h in columns if c in summary.columns and summary[c].notna().any()]
    header = ["kernel", *(h for _, h in present)]
    rows = []
    for record in summary.to_dict("records"):
        cells = [_shorten(str(record["kernel"]), width)]
        for col, _ in present:
            value = record[col]
            if isinstance(value, str):
                cells.append(printable(value))
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


def metrics_text(infos: Sequence["MetricInfo"]) -> str:
    """`perfcheck metrics`: one row per metric (unit, the unit words a threshold takes,
    meaning), then what it needs and the counters per vendor and tool."""
    rows = []
    for info in infos:
        name = info.name + (f" ({', '.join(info.aliases)})" if info.aliases else "")
        rows.append([name, info.unit if not info.plain else "-", info.meaning])
    table = _table(["metric", "unit", "meaning"], rows, right=set()).splitlines()
    lines = [
        "Thresholds on a metric with a unit name it (`duration <= 2.5 ms`); a bare number only for plain counts.",
        "Counters: what `perfcheck run` collects (rocprofv3, rocprof, ncu) or reads (Omniperf/rocprof-compute "
        "pmc_perf.csv, nvprof); 'a | b': alternatives per GPU generation.",
        "",
        *table[:2],
    ]
    for row, info in zip(table[2:], infos):
        lines.append(row)
        takes = "a plain number" if info.plain else ", ".join(info.units)
        lines.append(f"    thresholds: {takes}" + ("; 'N% of peak'" if info.of_peak else ""))
        lines.append(f"    needs: {info.needs}")
        if info.quantity is None:
            continue
        for vendor in dict.fromkeys(v for v, _ in VOCABULARY_TOOLS):
            parts = []
            for v, tool in VOCABULARY_TOOLS:
                alternatives = info.counters.get(tool)
                if v == vendor and alternatives:
                    parts.append(f"{tool}: " + " | ".join(", ".join(a) for a in alternatives))
            lines.append(f"    {vendor}: " + ("; ".join(parts) if parts else "no counters give it"))
        declared = info.counters.get(VOCABULARY_DECLARED)
        if declared:
            lines.append(f"    {VOCABULARY_DECLARED}: {declared[0][0]}")
    return "\n".join(lines)


def inspect_text(analysis: "Analysis", *, width: int | None = 60) -> str:
    """``width``: cut kernel names to it (a terminal); None: full names (a pipe, a file)."""
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
        clock = ceiling.clock_text()
        parts.append(f"ceiling {ceiling.name}: {format_value(ceiling.value, ceiling.unit)}{' ' + clock if clock else ''} "
                     f"({ceiling.kind}: {ceiling.source})")
    table = analysis.kernels
    parts.append("")
    if not len(table):
        parts.append("no kernel dispatches in this profile")
        return "\n".join(parts)
    parts.append(kernel_table(table, width=width))
    if any(c in table.columns and table[c].notna().any() for c, _ in METRIC_COLUMNS):
        parts.append("")
        parts.append(kernel_table(table, METRIC_COLUMNS, width=width))
    return "\n".join(parts)


# --- check runs (perfcheck check / run, the pytest summary) -----------------------------------

_LABEL = {PASSED: "passed", FAILED: "FAILED", RECORDED: "recorded", ERROR: "ERROR", XFAILED: "xfailed",
          XPASSED: "xpassed"}


def checks_table(checks: Sequence["Check"], *, kernel_width: int = 40) -> list[str]:
    """A plain-text table: suite, kernel, expectation, observed, expected, baseline, outcome."""
    from perfcheck.report.results import baseline_text, expected_text, observed_text

    header = ["suite", "kernel", "expectation", "observed", "expected", "baseline", "outcome"]
    rows = [
        [printable(c.suite), shorten_middle(printable(c.kernel), kernel_width), printable(c.expression),
         observed_text(c), expected_text(c), baseline_text(c), _LABEL.get(c.outcome, c.outcome)]
        for c in checks
    ]
    return _table(header, rows, right={3, 4, 5}).splitlines()


def problems(checks: Sequence["Check"]) -> list[str]:
    """One line per failed or errored check, with its message."""
    return [printable(f"{_LABEL[c.outcome]} {c.suite + ': ' if c.suite else ''}{c.kernel} [{c.expression}]: {c.message}")
            for c in checks if not c.passed]


def totals(run: "Run") -> str:
    counts = run.counts()
    # as pytest words its totals: "1 error", "4 errors"; the other labels are participles
    parts = [f"{counts[k]} {_LABEL[k].lower()}{'s' if k == ERROR and counts[k] != 1 else ''}"
             for k in (PASSED, FAILED, ERROR, RECORDED, XFAILED, XPASSED) if counts.get(k)]
    skipped = sum(s.skipped for s in run.suites)
    if skipped:
        parts.append(f"{skipped} suite(s) skipped")
    return ", ".join(parts) or "no checks"


def baseline_lines(run: "Run") -> list[str]:
    """What happened to each suite's baseline file."""
    from perfcheck.suiterun import NONE, SKIPPED, display_path

    lines = []
    for suite in run.suites:
        if suite.action in (NONE, SKIPPED) or suite.baseline_path is None:
            continue
        lines.append(f"baseline {suite.action}: {suite.name}: {display_path(suite.baseline_path)}")
        lines += [f"  {printable(line)}" for line in change_lines(suite.changes)]  # names from profiles
    return lines


def change_lines(changes: Sequence[object]) -> list[str]:
    """What a baseline update changed, per kernel and metric (old -> new), for the
    review of the baseline diff (``baseline.KernelChange`` records)."""
    lines = []
    for change in changes:
        kernel, status = getattr(change, "kernel"), getattr(change, "status")
        if status != "changed":
            lines.append(f"{kernel}: {status}")
            continue
        for m in getattr(change, "metrics"):
            unit = metric_unit(m.metric)
            moved = ""
            if m.old not in (None, 0) and m.new is not None:
                moved = f" ({100 * (m.new / m.old - 1):+.1f}%)"
            lines.append(f"{kernel}: {m.metric} {format_value(m.old, unit)} \u2192 {format_value(m.new, unit)}{moved}")
        others = getattr(change, "others")
        if others:
            lines.append(f"{kernel}: {others} other metric{'s' if others != 1 else ''} changed (see the file's diff)")
    return lines


def report_lines(run: "Run") -> list[str]:
    from perfcheck.suiterun import display_path

    names = {"junit": "JUnit XML", "markdown": "Markdown summary", "step-summary": "GitHub step summary",
             "json": "JSON results", "openmetrics": "OpenMetrics", "roofline": "roofline plots",
             "bencher": "Bencher metrics", "github-benchmark": "github-action-benchmark"}
    return [f"{names.get(kind, kind)}: {', '.join(display_path(p) for p in paths)}" for kind, paths in run.reports.items()]


def print_run(run: "Run", *, out: "TextIO", err: "TextIO", reports: bool = True) -> None:
    """The terminal account of a check run: the table, each problem on stderr, what
    happened to the baselines (and reports), the totals."""
    if run.checks:
        print("\n".join(checks_table(run.checks)), file=out)
    for line in problems(run.checks):
        print(f"perfcheck: {line}", file=err)
    for line in baseline_lines(run) + (report_lines(run) if reports else []):
        print(f"perfcheck: {line}", file=out)
    print(f"perfcheck: {totals(run)}", file=out)
