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
    from perfcheck.metrics.roofline import Ceiling
    from perfcheck.model import Check
    from perfcheck.suiterun import Run


GAP = 2  # spaces between columns
# A name is not shortened below this (nor below its header): "EOCloverFB…_kernel_v3"
# still tells kernels apart; past it, columns wrap instead.
MIN_NAME = 24


def _widths(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]


def _without_signatures(rows: Sequence[Sequence[str]], columns: Sequence[int]) -> list[list[str]]:
    """Kernel names without return type and parameter list ("void k<float>(float*, int)"
    -> "k<float>"): the first thing given up for width, where the names stay distinct
    (overloads that differ only in their parameters keep them)."""
    from perfcheck.report.roofline import short_name

    out = [list(r) for r in rows]
    for i in columns:
        names = {r[i] for r in rows}
        short = {n: short_name(n, width=len(n)) for n in names}
        if len(set(short.values())) == len(names):
            for r in out:
                r[i] = short[r[i]]
    return out


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int], *, width: int | None = None,
           shrink: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell, two spaces apart. ``width``: the line
    length the table must fit (None: no limit). Too wide, the ``shrink`` columns (names)
    are first shortened in the middle (both ends of a kernel name tell kernels apart),
    down to ``MIN_NAME``; then the columns wrap: the table is printed in blocks of the
    columns that fit, each block repeating the first column (what the rows are)."""
    widths = _widths(header, rows)
    if width is not None and sum(widths) + GAP * (len(widths) - 1) > width and shrink:
        rows = _without_signatures(rows, shrink)
        widths = _widths(header, rows)
    if width is not None and sum(widths) + GAP * (len(widths) - 1) > width and shrink:
        excess = sum(widths) + GAP * (len(widths) - 1) - width
        for i in shrink:
            floor = max(len(header[i]), MIN_NAME)
            cut = min(excess, max(widths[i] - floor, 0))
            if cut:
                widths[i] -= cut
                excess -= cut
                rows = [[shorten_middle(c, widths[i], "\u2026") if j == i else c for j, c in enumerate(r)]
                        for r in rows]
    blocks = [list(range(len(header)))]
    if width is not None and sum(widths) + GAP * (len(widths) - 1) > width and len(header) > 2:
        blocks = []
        current: list[int] = [0]
        used = widths[0]
        for i in range(1, len(header)):
            if len(current) > 1 and used + GAP + widths[i] > width:
                blocks.append(current)
                current, used = [0], widths[0]
            current.append(i)
            used += GAP + widths[i]
        blocks.append(current)

    def line(cells: Sequence[str], columns: Sequence[int]) -> str:
        return (" " * GAP).join(cells[i].rjust(widths[i]) if i in right else cells[i].ljust(widths[i])
                                for i in columns).rstrip()

    out: list[str] = []
    for columns in blocks:
        if out:
            out.append("")
        out += [line(header, columns), line(["-" * w for w in widths], columns), *(line(r, columns) for r in rows)]
    return "\n".join(out)


# What a terminal would act on: ESC (colour, cursor and title sequences), the other
# C0/C1 controls, DEL, and the bidi overrides that reorder a line. A name taken from a
# profile is shown with them escaped (\x1b), never interpreted.
_TERMINAL_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """``text`` with control characters written as escapes: safe to print."""
    return _TERMINAL_CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(text))


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
                 *, width: int | None = None, full_names: bool = False) -> str:
    """``width``: the line length to fit (None: no limit); kernel names are shortened
    in the middle to fit it, unless ``full_names``, then columns wrap."""
    present = [(c, h) for c, h in columns if c in summary.columns and summary[c].notna().any()]
    header = ["kernel", *(h for _, h in present)]
    rows = []
    for record in summary.to_dict("records"):
        cells = [printable(str(record["kernel"]))]
        for col, _ in present:
            value = record[col]
            if isinstance(value, str):
                cells.append(printable(value))
                continue
            cells.append(format_value(None if pd.isna(value) else value, metric_unit(col)))
        rows.append(cells)
    return _table(header, rows, right=set(range(1, len(header))), width=width, shrink=() if full_names else (0,))


def formats_text(formats: Sequence[object], width: int = 100) -> str:
    """`perfcheck formats`: name, kind and description, the description wrapped under
    itself so every line fits ``width`` (100: a wide terminal, a docs page)."""
    import textwrap

    names = max(len(getattr(f, "name")) for f in formats)
    kinds = max(len(getattr(f, "kind")) for f in formats)
    indent = " " * (names + GAP + kinds + GAP)
    lines = []
    for fmt in formats:
        head = f"{getattr(fmt, 'name').ljust(names)}{' ' * GAP}{getattr(fmt, 'kind').ljust(kinds)}{' ' * GAP}"
        lines += textwrap.wrap(getattr(fmt, "description"), width=width, initial_indent=head, subsequent_indent=indent,
                               break_on_hyphens=False) or [head.rstrip()]
    return "\n".join(lines)


def peaks_table(peaks: Peaks, *, width: int | None = None) -> str:
    """The peaks, then every figure with its source (file paths shortened in the
    middle to fit ``width``: the file name and the top folder stay)."""
    rows = [[name, format_value(value, PEAK_UNITS.get(name, ""))] for name, value in sorted(peaks.values.items())]
    text = _table(["peak", "value"], rows, right={1})
    detail_rows = [[printable(d.source), printable(d.name), format_value(d.value, d.unit)] for d in peaks.details]
    if detail_rows:
        text += "\n\n" + _table(["source", "figure", "value"], detail_rows, right={2}, width=width, shrink=(0,))
    return text


def arch_text(doc: dict) -> str:
    """`perfcheck arch show`: the figures of an arch/device document, one per line, with
    their units and citations; nested tables are indented. Then what the citations
    refer to: the sections of the reference and each document [Sn], with its URL."""
    from perfcheck.arch import figure_unit

    sources = doc.get("sources", {})
    lines: list[str] = []

    def shown(key: str, value: object, table: str) -> str:
        unit = figure_unit(key, table)
        if unit == "GIPS":  # giga-instructions per second: formatted as a rate
            value, unit = float(value) * 1e9, "inst/s"  # type: ignore[arg-type]
        if isinstance(value, bool) or not isinstance(value, (int, float, list)):
            return str(value)
        if isinstance(value, list):
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                return str(value)
            return "[" + ", ".join(format_value(v, unit) for v in value) + "]"
        return format_value(value, unit)

    def emit(mapping: dict, indent: str, source_map: dict, table: str) -> None:
        for key in sorted(mapping):
            if key in ("sources", "cited"):
                continue
            value = mapping[key]
            if isinstance(value, dict):
                lines.append(f"{indent}{key}:")
                inner = source_map.get(key, {}) if isinstance(source_map.get(key), dict) else source_map
                emit(value, indent + "  ", inner, key)
                continue
            cited = source_map.get(key) if isinstance(source_map, dict) else None
            text = f"{indent}{key}: {shown(key, value, table)}"
            if isinstance(cited, str):
                text += f"    [{cited}]"
            lines.append(text)

    emit(doc, "", sources, "")
    cited = doc.get("cited")
    if cited:
        lines += ["", f"sources: arch-specs.md is {cited['reference']}; its sections cited here:"]
        lines += [f"  {s['section']} {s['title']}" for s in cited["sections"]]
        lines.append("the documents cited:")
        for c in cited["documents"]:
            lines.append(f"  [{c['tag']}] {c['document']}: {c['table']}")
            lines.append(f"      {c['url']}")
    return "\n".join(lines)


def _clip(text: str, width: int | None) -> str:
    return text if width is None or len(text) <= width else text[: max(width - 1, 1)] + "\u2026"


def metrics_text(infos: Sequence["MetricInfo"], *, counters: bool = True, width: int | None = None) -> str:
    """`perfcheck metrics`: one row per metric (unit, meaning); with ``counters`` (a
    metric named, or --counters) also the unit words a threshold takes, what it needs
    and the counters per vendor and tool. ``width``: rows of the short list are cut
    to it (the meaning's end; `perfcheck metrics NAME` shows all)."""
    rows = []
    for info in infos:
        name = info.name + (f" ({', '.join(info.aliases)})" if info.aliases else "")
        rows.append([name, info.unit if not info.plain else "-", info.meaning])
    table = _table(["metric", "unit", "meaning"], rows, right=set()).splitlines()
    if not counters:
        return "\n".join([*(_clip(row, width) for row in table),
                          "", _clip("`perfcheck metrics NAME` or --counters: thresholds, needs and counters "
                                    "per tool", width)])
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


# The bandwidth and rate ceilings, the columns of the kernel table compared with each
# (a ceiling shown only where some kernel has that column: a trace without counters
# gets no ceiling lines at all).
_CEILING_COLUMNS = {"hbm_bw": "hbm_bw", "mem_bw": "mem_bw", "l2_bw": "l2_bw", "l1_bw": "l1_bw", "lds_bw": "lds_bw",
                    "gips": "gips"}


def _compared_ceilings(analysis: "Analysis") -> list["Ceiling"]:
    """The ceilings a kernel of ``analysis`` has a counter to compare with: a bandwidth
    ceiling where a kernel has that level's bandwidth, a FLOP roof where it has a
    FLOP rate in that class (or is placed under it), the GIPS roof where it has GIPS."""
    table = analysis.kernels
    have = {c for c in table.columns if table[c].notna().any()} if len(table) else set()
    roofs = set(table["roofline_ceiling"].dropna().astype(str)) if "roofline_ceiling" in have else set()
    picked = []
    for ceiling in analysis.ceilings.values():
        column = _CEILING_COLUMNS.get(ceiling.name)
        if column is not None:
            wanted = column in have
        else:  # flop_rate_fp32 <- flops_fp32; mfma_rate_fp16 <- mfma_flops_fp16; the roof a kernel is under
            precision = ceiling.name.split("_rate_", 1)[-1]
            family = ceiling.name.split("_rate_", 1)[0]
            counted = f"flops_{precision}" if family == "flop" else f"{family}_flops_{precision}"
            wanted = ceiling.name in roofs or counted in have
        if wanted:
            picked.append(ceiling)
    return picked


def ceiling_lines(analysis: "Analysis", *, width: int | None = None) -> list[str]:
    """One compact block, wrapped to ``width``::

        ceilings: hbm_bw 1.075 TB/s  flop_rate_fp32 23.1 TFLOP/s*  gips 180.2 Ginst/s*
          (empirical from mixbench-log.txt; * theoretical from arch database: mi100)

    empty when no kernel has a counter to compare with a ceiling."""
    import textwrap

    shown = _compared_ceilings(analysis)
    if not shown:
        return []
    sources: dict[str, list[str]] = {}
    for ceiling in shown:
        sources.setdefault(ceiling.kind, []).append(ceiling.source.split(" (", 1)[0])  # the file, not its notes
    said = "; ".join(f"{'* ' if kind != 'empirical' else ''}{kind} from {', '.join(dict.fromkeys(where))}"
                     for kind, where in sorted(sources.items()))
    # no-break spaces inside an item: a line breaks between ceilings, never inside one
    items = "  ".join(
        f"{c.name} {format_value(c.value, c.unit)}{'' if c.kind == 'empirical' else '*'}".replace(" ", "\u00a0")
        for c in shown)
    limit = width or 10**6
    lines = textwrap.wrap(f"ceilings: {items}", width=limit, subsequent_indent="  ", break_on_hyphens=False)
    lines += textwrap.wrap(f"({said})", width=limit, initial_indent="  ", subsequent_indent="   ",
                           break_on_hyphens=False)
    # which clock each figure is at (a profile at ncu's base clock scales the datasheet roofs)
    clocks: dict[str, list[str]] = {}
    for ceiling in shown:
        clock = ceiling.clock_text()
        if clock:
            clocks.setdefault(clock, []).append(ceiling.name)
    for clock, names in clocks.items():
        lines += textwrap.wrap(f"clock of {', '.join(names)}: {clock}", width=limit, initial_indent="  ",
                               subsequent_indent="   ", break_on_hyphens=False)
    return [printable(line.replace("\u00a0", " ")) for line in lines]


def inspect_text(analysis: "Analysis", *, width: int | None = None, full_names: bool = False) -> str:
    """``width``: fit the tables to it (a terminal), kernel names shortened in the middle
    unless ``full_names``; None: no limit (a pipe, a file)."""
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
    parts += ceiling_lines(analysis, width=width)
    table = analysis.kernels
    parts.append("")
    if not len(table):
        parts.append("no kernel dispatches in this profile")
        return "\n".join(parts)
    parts.append(kernel_table(table, width=width, full_names=full_names))
    if any(c in table.columns and table[c].notna().any() for c, _ in METRIC_COLUMNS):
        parts.append("")
        parts.append(kernel_table(table, METRIC_COLUMNS, width=width, full_names=full_names))
    return "\n".join(parts)


# --- check runs (perfcheck check / run, the pytest summary) -----------------------------------

_LABEL = {PASSED: "passed", FAILED: "FAILED", RECORDED: "recorded", ERROR: "ERROR", XFAILED: "xfailed",
          XPASSED: "xpassed"}


def checks_table(checks: Sequence["Check"], *, kernel_width: int = 40, width: int | None = None) -> list[str]:
    """A plain-text table: suite, kernel, expectation, observed, expected, baseline, outcome.
    On a terminal (``width``) kernel names are cut to ``kernel_width`` and further to fit
    it; without (a pipe, a file) they are whole."""
    from perfcheck.report.results import baseline_text, expected_text, observed_text

    header = ["suite", "kernel", "expectation", "observed", "expected", "baseline", "outcome"]
    cut = kernel_width if width is not None else 10**9
    rows = [
        [printable(c.suite), shorten_middle(printable(c.kernel), cut), printable(c.expression),
         observed_text(c), expected_text(c), baseline_text(c), _LABEL.get(c.outcome, c.outcome)]
        for c in checks
    ]
    return _table(header, rows, right={3, 4, 5}, width=width, shrink=(1,)).splitlines()


def problems(checks: Sequence["Check"]) -> list[str]:
    """One line per failed or errored check, with its message (and why the kernel
    changed, where known)."""
    return [printable(f"{_LABEL[c.outcome]} {c.suite + ': ' if c.suite else ''}{c.kernel} [{c.expression}]: {c.message}"
                      + (f"; why: {c.diagnosis}" if c.diagnosis else ""))
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


def print_run(run: "Run", *, out: "TextIO", err: "TextIO", reports: bool = True, width: int | None = None) -> None:
    """The terminal account of a check run: the table (fitted to ``width``), each
    problem on stderr, what happened to the baselines (and reports), the totals."""
    if run.checks:
        print("\n".join(checks_table(run.checks, width=width)), file=out)
    for line in problems(run.checks):
        print(f"perfcheck: {line}", file=err)
    for line in baseline_lines(run) + (report_lines(run) if reports else []):
        print(f"perfcheck: {line}", file=out)
    print(f"perfcheck: {totals(run)}", file=out)
