"""Command line: a thin shell over the library.

Exit status: 0 success, 1 a check failed (later subcommands), 2 input or usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from perfcheck import __version__
from perfcheck.errors import OutOfMemory, PerfcheckError, UsageError

if TYPE_CHECKING:
    from perfcheck.checking import Run
    from perfcheck.storeurl import StoreLocation

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as perfcheck's one-line errors (exit 2):
    what is wrong and where the command's help is, not the usage block (which, for
    `check` or `history detect`, is a screenful above the line that matters)."""

    subcommands: argparse._SubParsersAction[_Parser] | None = None

    def add_subparsers(self, **kwargs: Any) -> argparse._SubParsersAction[_Parser]:  # type: ignore[override]
        self.subcommands = super().add_subparsers(**kwargs)
        return self.subcommands

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # argparse reports them on the top-level parser: name the subcommand that was given
            self.chosen(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def chosen(self, parsed: argparse.Namespace) -> _Parser:
        """The innermost (sub)command parser the parsed arguments went through."""
        parser = self
        while parser.subcommands is not None:
            name = getattr(parsed, parser.subcommands.dest, None)
            if name not in parser.subcommands.choices:
                break
            parser = parser.subcommands.choices[name]
        return parser

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        self.exit(EXIT_INPUT, f"perfcheck: error: {message}; see `{self.prog} --help`\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="perfcheck",
        description="GPU kernel performance, testable in CI. Reads rocprof, rocprofv3, "
        "Omniperf/rocprof-compute, Nsight Compute, nvprof, Nsight Systems, PyTorch profiler (Kineto) and "
        "Triton Proton profiles and micro-benchmark peaks.",
        epilog="Exit status: 0 success, 1 a check failed, 2 input or usage error, 3 internal error (a bug).",
    )
    parser.add_argument("--version", action="version", version=f"perfcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    inspect = sub.add_parser(
        "inspect",
        help="summarise profiles per kernel",
        description="Summarise one or more profiles per kernel: calls, duration "
        "(median per dispatch; mean, min, max, total) and launch resources. Several paths "
        "(e.g. one file per MPI rank) are summarised together. The format is sniffed "
        "unless --format names it.",
    )
    inspect.add_argument("paths", nargs="+", metavar="PATH", help="profile file or tool output directory")
    inspect.add_argument("--format", metavar="NAME", help="reader to use (see `perfcheck formats`)")
    inspect.add_argument("--json", action="store_true", help="print JSON (values in base units) instead of a table")
    inspect.add_argument("--kernel", metavar="PATTERN", help="only the kernels matching PATTERN (glob on the "
                         "demangled name, or re:REGEX), as in expectations")
    inspect.add_argument("--timeline", action="store_true",
                         help="instead of kernels, the program's timeline (Kineto traces, Nsight Systems exports): "
                         "per rank and GPU the span, busy and idle time, compute, copies and communication, "
                         "and the user ranges (NVTX, ProfilerStep#N) with the most time; see docs/timeline.md")
    inspect.add_argument("--plot", metavar="STEM", type=Path,
                         help="with --timeline: draw each step's compute, communication, copies and idle time "
                         "per rank and GPU (ProfilerStep ranges, or --step NAME) to STEM.png and STEM.svg")
    inspect.add_argument("--step", metavar="NAME",
                         help="with --plot: the range that is one step (default: ProfilerStep)")
    inspect.add_argument("--baseline-trace", metavar="PATH", nargs="+", type=Path,
                         help="with --plot: the baseline's traces, drawn beside the current steps")
    inspect.add_argument("--full-names", action="store_true", default=None,
                         help="never shorten kernel names (the default when the output is not a terminal); "
                         "wide tables wrap their columns instead")
    inspect.add_argument(
        "--arch",
        metavar="NAME",
        help="GPU the profile was taken on: an arch id (gfx90a, sm_80) or a device (mi250x, a100); "
        "default: detected from the profile where it says (see `perfcheck arch list`)",
    )
    inspect.add_argument(
        "--peaks",
        nargs="+",
        metavar="FILE",
        default=[],
        help="empirical peaks (BabelStream, mixbench, ERT, roofline.csv, ... or a machine file); "
        "percentages use them, else the device's theoretical figures, and say which",
    )

    peaks = sub.add_parser(
        "peaks",
        help="read measured peaks from benchmark outputs",
        description="Read peak bandwidth and FLOP/s from BabelStream, mixbench, ERT, "
        "Omniperf roofline.csv, STREAM or likwid outputs. Where several files report the "
        "same peak the highest is kept; every figure is listed with its source. "
        "`perfcheck peaks measure` runs perfcheck's own micro-benchmarks instead "
        "(see `perfcheck peaks measure --help`).",
    )
    peaks.add_argument("paths", nargs="+", metavar="PATH", help="benchmark output file")
    peaks.add_argument("--format", metavar="NAME", help="reader to use (see `perfcheck formats`)")
    peaks.add_argument("--json", action="store_true", help="print JSON (values in base units) instead of a table")
    peaks.add_argument(
        "--save",
        metavar="TOML",
        help="also write the peaks as a machine file (e.g. baselines/machines/NAME.toml) for --peaks",
    )
    peaks.add_argument("--device", metavar="NAME", help="device the peaks were measured on, recorded in the machine file")

    sub.add_parser("formats", help="list the formats perfcheck reads", description="List every reader, its kind and what it reads.")

    metrics = sub.add_parser(
        "metrics",
        help="list the metrics expectations can check",
        description="Every metric an expectation may name, one line each: its name, unit and meaning. "
        "With metric names or --counters also the units a threshold on it takes "
        "(a bare number only for plain counts such as calls, registers, instructions) and "
        "what it is computed from: the kernel trace, or the counters per vendor and tool (AMD rocprofv3, "
        "rocprof, Omniperf/rocprof-compute; NVIDIA ncu, nvprof), as perfcheck's formulas read them.",
    )
    metrics.add_argument("names", nargs="*", metavar="METRIC", help="only these metrics (or aliases)")
    metrics.add_argument("--counters", action="store_true",
                         help="also the threshold units, inputs and counters per tool of every metric (the default "
                         "when metrics are named)")
    metrics.add_argument("--json", action="store_true", help="print JSON instead of a table")

    arch = sub.add_parser(
        "arch",
        help="show GPU architecture and device figures",
        description="The architecture database: occupancy limits per arch (gfx906 ... gfx950, "
        "sm_70 ... sm_100) and per-device figures (CUs/SMs, clock, memory bandwidth, peak FLOP/s, "
        "peak GIPS), each with its source.",
    )
    arch_sub = arch.add_subparsers(dest="arch_command", metavar="ACTION", parser_class=_Parser, required=True)
    arch_sub.add_parser("list", help="list known arches and devices",
                        description="List the arch ids (gfx90a, sm_80, ...) and device names (mi250x, h100-sxm, ...) "
                        "that --arch, `device =` and `perfcheck arch show` accept.")
    show = arch_sub.add_parser("show", help="show one arch or device",
                               description="Show the figures of one arch or device, each with its source.")
    show.add_argument("name", metavar="NAME", help="arch id (gfx942, sm_90) or device (mi300x, h100-sxm)")
    show.add_argument("--json", action="store_true", help="print JSON (base units)")

    occ = sub.add_parser(
        "occupancy",
        help="theoretical occupancy from launch resources",
        description="Theoretical occupancy of one kernel launch, by the vendor's rules (LLVM AMDGPU "
        "for AMD, the CUDA occupancy calculator for NVIDIA), and which resource limits it. "
        "AMD takes --vgpr/--agpr/--sgpr/--lds, NVIDIA --registers/--shared.",
    )
    occ.add_argument("--arch", required=True, metavar="NAME", help="arch id or device name")
    occ.add_argument("--block", required=True, type=int, metavar="N", help="workgroup / block size (threads)")
    occ.add_argument("--vgpr", type=int, metavar="V", help="AMD: architected VGPRs per work-item")
    occ.add_argument("--agpr", type=int, default=0, metavar="G", help="AMD: accumulation VGPRs (gfx908+)")
    occ.add_argument("--sgpr", type=int, metavar="S", help="AMD: SGPRs per wavefront")
    occ.add_argument("--lds", type=int, default=0, metavar="BYTES", help="AMD: LDS bytes per workgroup")
    occ.add_argument("--registers", type=int, metavar="R", help="NVIDIA: registers per thread")
    occ.add_argument("--shared", type=int, default=0, metavar="BYTES", help="NVIDIA: shared memory per block (static + dynamic)")
    occ.add_argument("--json", action="store_true", help="print JSON")

    check = sub.add_parser(
        "check",
        help="check performance expectations (exit 1 when one fails)",
        description="Check the suites of a config file ([tool.perfcheck] in pyproject.toml, or "
        "perfcheck.toml; found from the working directory up unless --config names it), or PATH... "
        "against --expect. Settings come from, in order: the command line, PERFCHECK_* variables, "
        "the config file, defaults. Every report asked for is written before the exit status: "
        "0 all passed (a newly recorded baseline passes), 1 a check failed or could not be evaluated, "
        "2 bad input or usage. Expectations read 'METRIC REL NUMBER UNIT' ('duration <= 2.5 ms', "
        "'occupancy >= 40%'), 'METRIC REL N% of peak', 'METRIC REL baseline +|- N%' (or N UNIT), or "
        "'LOW <= METRIC <= HIGH'; a number on a metric with a unit names the unit, a bare number is only for "
        "plain counts (calls, registers, instructions). `perfcheck metrics` lists every metric with its unit, "
        "meaning and the counters it needs.",
    )
    _check_options(check)
    check.add_argument("--update-baseline", action="store_true", default=None,
                       help="rewrite the baselines from this run (baseline-relative failures are accepted)")
    check.add_argument("--strict-baseline", action=argparse.BooleanOptionalAction, default=None,
                       help="a missing or re-fingerprinted baseline is an error, never recorded (default: on when "
                       "CI is set to a true value; PERFCHECK_STRICT_BASELINE, config strict_baseline)")

    compare = sub.add_parser(
        "compare",
        help="compare two suites or results files kernel by kernel (before -> after)",
        description="Compare A (before) with B (after), kernel by kernel (matched by name): the median duration "
        "and speed-up, the main-memory bandwidth as a percentage of its peak, the occupancy and the resource "
        "that limits it, and the launch resources that changed (VGPRs, LDS per workgroup, ...). A and B are "
        "suites of the config (their profiles are read now), results files of `perfcheck check --json` "
        "(FILE.json, or FILE.json:SUITE when it holds several suites), or profiles (read with --arch/--peaks). "
        "--roofline draws one roofline with an "
        "arrow per kernel from A to B; --markdown writes the table and links the plots. Exit 0 (a comparison "
        "judges nothing: expectations and baselines are `perfcheck check`'s).",
        epilog="example: perfcheck compare before after --config examples/stencil/perfcheck.toml --roofline out/",
    )
    compare.add_argument("before", metavar="A", help="suite, results file or profile: where the kernels were")
    compare.add_argument("after", metavar="B", help="suite, results file or profile: where they are now")
    compare.add_argument("--config", metavar="FILE", help="config file naming the suites (default: perfcheck.toml "
                         "or pyproject.toml with [tool.perfcheck], from the working directory up)")
    compare.add_argument("--arch", metavar="NAME", help="GPU the profiles were taken on (arch id or device)")
    compare.add_argument("--peaks", nargs="+", metavar="FILE", help="empirical peaks or a machine file (for "
                         "profiles given as A or B; a suite uses its own)")
    compare.add_argument("--roofline", metavar="DIR", help="write DIR/compare.png and .svg (and the instruction "
                         "roofline where the kernels have instruction counts)")
    compare.add_argument("--markdown", metavar="FILE", help="write the comparison as Markdown (images linked "
                         "relative to FILE)")
    compare.add_argument("--full-names", action="store_true", help="never shorten kernel names")

    base = sub.add_parser("baseline", help="manage stored baselines",
                          description="Baselines are JSON files under the baseline directory, one per suite and machine.")
    base_sub = base.add_subparsers(dest="baseline_command", metavar="ACTION", parser_class=_Parser, required=True)
    update = base_sub.add_parser(
        "update",
        help="record this run as the baselines of the suites",
        description="Run the suites and rewrite their baselines from this run (review the diff like code). "
        "Exit 0 once written, even when absolute expectations fail (they are listed).",
    )
    _check_options(update)
    update.add_argument("--merge", action="store_true",
                        help="add this run to the stored baseline instead of replacing it "
                        "(repeated runs make timing decisions aware of run-to-run noise)")

    gh = sub.add_parser("github", help="GitHub: post or update the pull request comment",
                        description="GitHub integration used by the perfcheck action (action.yml).")
    gh_sub = gh.add_subparsers(dest="github_command", metavar="ACTION", parser_class=_Parser, required=True)
    comment = gh_sub.add_parser(
        "comment",
        help="post the Markdown summary as one sticky pull-request comment",
        description="Create, or update in place, one comment on the pull request with the Markdown "
        "summary (found again by a hidden marker, never duplicated). Uses GITHUB_TOKEN, GITHUB_REPOSITORY, "
        "GITHUB_API_URL and the pull request of GITHUB_EVENT_PATH; outside a pull request it does nothing.",
    )
    comment.add_argument("--markdown", required=True, metavar="FILE", help="the summary (perfcheck check --markdown)")
    comment.add_argument("--key", default="perfcheck", metavar="KEY",
                         help="marker key: one comment per key (several configs in one workflow); default perfcheck")
    comment.add_argument("--pr", type=int, metavar="N", help="pull request number (default: from the event)")
    comment.add_argument("--repository", metavar="OWNER/NAME", help="default: $GITHUB_REPOSITORY")

    schema = sub.add_parser("schema", help="print the JSON Schema of a perfcheck document",
                            description="Print the published JSON Schema of `perfcheck check --json` results.")
    schema.add_argument("document", choices=("results",), help="which document")

    from perfcheck.cli_run import add_parser as add_run_parser  # light: argparse only

    add_run_parser(sub)
    _history_parser(sub)
    return parser


# --- perfcheck history ---------------------------------------------------------------------------

def _history_parser(sub: "argparse._SubParsersAction") -> None:
    """``perfcheck history ACTION``: each action is an entry of ``_HISTORY`` (add more there)."""
    history = sub.add_parser(
        "history", help="the history store of runs: add, list, prune, detect change points, accept regressions",
        description="A history store keeps every run's values per machine x suite x kernel x metric: an SQLite "
        "file (a path) or a PostgreSQL database (postgresql://user@host/db; needs psycopg 3: pip install 'psycopg[binary]'). "
        "The store is --history PATH|URL, else PERFCHECK_HISTORY, else history = \"...\" in the config.")
    actions = history.add_subparsers(dest="history_command", metavar="ACTION", parser_class=_Parser, required=True)

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--history", metavar="PATH|URL",
                            help="the history store: an SQLite file, or postgresql://user@host/db (the password from "
                            "the URL, PGPASSWORD or ~/.pgpass; never printed)")
        parser.add_argument("--config", metavar="FILE", help="config file naming the store (history = \"...\")")

    add = actions.add_parser("add", help="import results files (perfcheck check --json) into the store",
                             description="Import results files written elsewhere (per job, rank, runner). "
                             "A run already stored is skipped, so importing a file twice adds it once.")
    add.add_argument("results", nargs="+", metavar="RESULTS.json")
    common(add)
    listing = actions.add_parser("list", help="list the stored runs, oldest first")
    listing.add_argument("--since", metavar="WHEN", help="runs since a date (2026-01-31) or an age (30d, 12h)")
    listing.add_argument("--limit", type=int, metavar="N", help="the latest N runs")
    listing.add_argument("--json", action="store_true", help="print JSON")
    common(listing)
    prune = actions.add_parser("prune", help="delete runs older than N days")
    prune.add_argument("--keep-days", type=float, required=True, metavar="N")
    common(prune)
    def filters(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--suite", action="append", metavar="NAME", help="only this suite (name or glob; repeatable)")
        parser.add_argument("--kernel", action="append", metavar="PATTERN",
                            help="only kernels matching PATTERN: a glob on the whole name or re:REGEX, as in "
                            "expectations (repeatable)")
        parser.add_argument("--metric", action="append", metavar="NAME",
                            help="only this metric: a name or alias `perfcheck metrics` lists, or all (repeatable)")
        parser.add_argument("--machine", action="append", metavar="SLUG", help="only this machine (name or glob; "
                            "repeatable). A filter that selects no series is an error (exit 2) naming the closest")

    def accepted_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--accepted", metavar="FILE", help="the accepted-regressions file (default: accepted = "
                            "\"...\" in the config, else accepted.toml in the baseline directory)")

    detect = actions.add_parser(
        "detect", help="find change points; exit 1 while a regression is open",
        description="Change points per machine x suite x kernel x metric: E-divisive means with a t-test, "
        "windowed; single-run spikes are never change points. A regression (worse than the accepted level by more "
        "than 2 run-to-run sigmas) stays open, however old, until it is "
        "accepted (perfcheck history accept, perfcheck baseline update: entries in the accepted file) or recovers "
        "(a later change back to within the noise of the accepted level; reported once, as recovered). "
        "Exit 1 while a regression in the selection is open (--fail-on new: only when an open one starts in the "
        "last --last runs), 0 otherwise, 2 on bad input or a filter that selects nothing.")
    filters(detect)
    detect.add_argument("--full-names", action="store_true", help="whole kernel names (a pipe always gets them)")
    detect.add_argument("--since", metavar="WHEN", help="runs since a date (2026-01-31) or an age (90d)")
    detect.add_argument("--last", type=int, default=3, metavar="K",
                        help="mark change points in the last K runs of their series as new (default 3)")
    detect.add_argument("--fail-on", choices=("open", "new"), default="open",
                        help="exit 1 on any open regression (default), or only on new ones (the open ones are "
                        "still listed)")
    accepted_option(detect)
    detect.add_argument("--p", type=float, default=0.001, metavar="P", help="significance level (default 0.001)")
    detect.add_argument("--min-after", type=int, default=2, metavar="N",
                        help="runs a change must persist, its first included (default 2)")
    detect.add_argument("--window", type=int, default=30, metavar="N", help="runs per window (default 30)")
    detect.add_argument("--min-change", type=float, default=0.0, metavar="PCT", help="ignore shifts below PCT %%")
    detect.add_argument("--relative", action="store_true",
                        help="test each kernel against its run's run-wide offset (drift shared by the kernels of a "
                        "run), and that offset as the series '(run-wide)'")
    form = detect.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print JSON")
    form.add_argument("--markdown", action="store_true", help="print a Markdown table")
    common(detect)

    accept = actions.add_parser(
        "accept", help="accept open regressions as the new level (writes the accepted file)",
        description="Accept the open regressions of the kernels SELECTOR matches (a glob on the whole name or "
        "re:REGEX, as in expectations; * for every kernel), narrowed by --suite/--metric/--machine: each becomes "
        "its series' new level, so detect and the history gate stop failing on it. Writes one entry per kernel "
        "and change point (machine, suite, kernel, metric or *, the change point's run and commit, before -> "
        "after, reason, date, who: git config user.name or $USER) into the accepted file, atomically. Commit "
        "the file: the pull request shows the diff. Exit 2 when nothing open matches.")
    accept.add_argument("selector", metavar="SELECTOR", help="kernel pattern (glob or re:REGEX; * for all)")
    accept.add_argument("--reason", required=True, metavar="TEXT", help="why the change is accepted (kept in the file)")
    accept.add_argument("--suite", action="append", metavar="NAME", help="only this suite (name or glob; repeatable)")
    accept.add_argument("--metric", action="append", metavar="NAME",
                        help="only this metric (name or alias; repeatable; default: every metric, written as *)")
    accept.add_argument("--machine", action="append", metavar="SLUG", help="only this machine (name or glob)")
    accepted_option(accept)
    accept.add_argument("--p", type=float, default=0.001, metavar="P", help="significance level, as detect's")
    accept.add_argument("--min-after", type=int, default=2, metavar="N", help="as detect's")
    accept.add_argument("--window", type=int, default=30, metavar="N", help="as detect's")
    common(accept)

    report = actions.add_parser(
        "report", help="write the dashboard (static HTML) and a Markdown digest",
        description="A static site from the history: index.html (open regressions, a line per suite) and a page "
        "per suite with a trend chart per kernel x metric (budget band, change points, commits on hover and in a "
        "table). Self-contained (inline CSS and SVG, no script, no CDN): it opens offline and on a narrow screen. "
        "--markdown writes a digest for a nightly issue or chat message.")
    report.add_argument("--html", metavar="DIR", help="write the site into DIR (index.html, suite-*.html)")
    report.add_argument("--markdown", metavar="FILE", help="write the Markdown digest")
    report.add_argument("--link", metavar="URL", help="where the site is published, linked from the digest")
    filters(report)
    accepted_option(report)
    report.add_argument("--last", type=int, metavar="N", help="only the last N runs of each series")
    report.add_argument("--title", default="perfcheck history", help="the site's title")
    common(report)
    export = actions.add_parser(
        "export", help="export the history for Bencher, Prometheus/Grafana or VictoriaMetrics",
        description="--bencher DIR: Bencher Metric Format JSON, a file per run and machine, and manifest.json "
        "(commit, branch, machine for `bencher run --adapter json`). --openmetrics FILE: every value as a gauge "
        "sample with its run's timestamp in seconds (promtool tsdb create-blocks-from openmetrics). "
        "--prometheus FILE: the same in the Prometheus text format, timestamps in milliseconds "
        "(VictoriaMetrics /api/v1/import/prometheus).")
    export.add_argument("--bencher", metavar="DIR", help="write Bencher Metric Format files into DIR")
    export.add_argument("--openmetrics", metavar="FILE", help="write OpenMetrics text with timestamps (seconds)")
    export.add_argument("--prometheus", metavar="FILE", help="write Prometheus text with timestamps (milliseconds)")
    filters(export)
    export.add_argument("--since", metavar="WHEN", help="runs since a date (2026-01-31) or an age (90d)")
    common(export)
    copy = actions.add_parser(
        "copy", help="copy every run of one store into another (SQLite <-> PostgreSQL)",
        description="Copy the runs of SRC that DST does not have yet, with their values and machines; each is a "
        "path (SQLite) or a postgresql:// URL. Runs are keyed by run id, so copying twice adds nothing and an "
        "interrupted copy is finished by running it again. DST is created when absent.")
    copy.add_argument("source", metavar="SRC", help="the store to read (path or URL)")
    copy.add_argument("target", metavar="DST", help="the store to write (path or URL)")


def _history_path(args: argparse.Namespace, *, writing: bool = False) -> "StoreLocation":
    """The store the history command names: a path or a URL (``perfcheck.storeurl``).
    ``writing``: add and prune refuse a store the settings make read-only."""
    from perfcheck.config import resolver

    settings = resolver(cli={"config": args.config, "history": args.history})
    value = settings.get("history")
    if value is None:
        raise UsageError("no history store: give --history PATH|URL, set PERFCHECK_HISTORY, or add history = \"...\" "
                         "to the config")
    mode = settings.get("history_mode")
    if writing and mode is not None and mode.value == "read-only":
        raise UsageError(f"the history store {value.value} is read-only here ({mode.origin} = \"read-only\"); "
                         "unset it to write")
    return value.value  # type: ignore[return-value]


def _history_read_only(args: argparse.Namespace) -> bool:
    """Whether the settings make the store read-only here (history_mode): a reading
    command then opens it so, and an older schema is refused rather than migrated."""
    from perfcheck.config import resolver

    mode = resolver(cli={"config": args.config, "history": args.history}).get("history_mode")
    return mode is not None and mode.value == "read-only"


def _since(text: str | None) -> float | None:
    """Unix seconds of "2026-01-31[T12:00]" (UTC unless it says) or an age "30d" / "12h"."""
    if text is None:
        return None
    import datetime as dt
    import re
    import time

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dhw])\s*", text)
    if match:
        hours = float(match[1]) * {"h": 1, "d": 24, "w": 168}[match[2]]
        return time.time() - hours * 3600.0
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since {text!r}: give a date (2026-01-31) or an age (30d, 12h, 2w)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def _history_add(args: argparse.Namespace) -> int:
    from perfcheck.errors import InputError
    from perfcheck.history import open_store
    from perfcheck.history.runs import read_results_files

    imported = read_results_files(args.results)  # all validated first: one bad file, none imported
    with open_store(_history_path(args, writing=True)) as store:
        for index, (path, run) in enumerate(zip(args.results, imported)):
            for notice in run.notices:
                print(f"perfcheck: notice: {notice}", file=sys.stderr)
            try:
                done = store.add(run.run, run.values, run.machines)  # one transaction per file
            except InputError as exc:
                if index == 0:
                    raise
                raise InputError(exc.path, f"{path}: {exc.what}", hint=f"the {index} file(s) listed above were "
                                 "imported, this one and the rest were not; a rerun skips those stored") from None
            state = f"added run {done.run_id} ({done.values} values)" if done.added else f"run {done.run_id} already stored"
            print(f"{path}: {state}")
    return EXIT_OK


def _history_list(args: argparse.Namespace) -> int:
    import json

    from perfcheck.history import open_store

    with open_store(_history_path(args), create=False, read_only=_history_read_only(args)) as store:
        runs = store.runs(since=_since(args.since), limit=args.limit)
    if args.json:
        records = runs.assign(time=runs["time"].map(lambda t: t.isoformat()), added=runs["added"].map(lambda t: t.isoformat()))
        print(json.dumps({"runs": records.astype(object).where(records.notna(), None).to_dict("records")}, indent=2))
        return EXIT_OK
    if not len(runs):
        print("no runs stored")
        return EXIT_OK
    shown = runs.assign(time=runs["time"].dt.strftime("%Y-%m-%d %H:%M"), commit=runs["commit"].str.slice(0, 10))
    shown = shown[["run_id", "time", "commit", "branch", "ci_job", "suites", "values"]].fillna("-")
    print(shown.rename(columns={"run_id": "run", "time": "time (UTC)", "ci_job": "job"}).to_string(index=False))
    return EXIT_OK


def _history_prune(args: argparse.Namespace) -> int:
    from perfcheck.history import open_store

    with open_store(_history_path(args, writing=True), create=False) as store:
        removed = store.prune(keep_days=args.keep_days)
    print(f"removed {removed} run{'s' if removed != 1 else ''} older than {args.keep_days:g} days")
    return EXIT_OK


def _accepted_path(args: argparse.Namespace) -> Path:
    from perfcheck.config import resolver

    if args.accepted:
        return Path(args.accepted)
    return resolver(cli={"config": args.config}).accepted_file()


def _selected(args: argparse.Namespace, store: object, *, kernel: Sequence[str] | None = None,
              since: float | None = None, last: int | None = None, every_metric: bool = False) -> "object":
    """The series the filters select (``every_metric``: the --metric filter left out)."""
    from perfcheck.history import select

    filters = select.Filters.of(suite=args.suite, kernel=kernel if kernel is not None else getattr(args, "kernel", None),
                                metric=None if every_metric else args.metric, machine=args.machine)
    return select.series(store, filters, since=since, last=last, where=str(_history_path(args)))


def _resolved(args: argparse.Namespace, store: object, *, every_metric: bool = False) -> "tuple[dict[str, list[str]], object]":
    """The filters checked once on the store's series names, as ``_selected`` checks them
    (one that selects nothing: exit 2 with the closest names), and the names they chose:
    (keyword arguments for ``store.batches`` naming, for each filter given, the names it
    selects; the selected series' names)."""
    from perfcheck.history import select

    filters = select.Filters.of(suite=args.suite, kernel=getattr(args, "kernel", None),
                                metric=None if every_metric else getattr(args, "metric", None), machine=args.machine)
    chosen = select.apply(store.series_keys(), filters, where=str(_history_path(args)))  # type: ignore[attr-defined]
    where: dict[str, list[str]] = {}
    for column, given in (("machine", filters.machine), ("suite", filters.suite), ("kernel", filters.kernel),
                          ("metric", filters.metrics())):
        if given:
            where[column] = sorted(chosen[column].astype(str).unique())
    return where, chosen


def _no_runs_in_window(args: argparse.Namespace, chosen: "object") -> None:
    raise UsageError(f"the filters select {len(chosen)} series in {_history_path(args)}, "  # type: ignore[arg-type]
                     "but none has runs in the window asked for (--since/--last)")


def _history_detect(args: argparse.Namespace) -> int:
    from perfcheck.history import accepted, open_store
    from perfcheck.history import listing as render
    from perfcheck.history.scan import scan

    if args.last < 1 or args.min_after < 1 or args.window < 4 or not 0 < args.p < 1:
        raise UsageError("--last and --min-after must be 1 or more, --window 4 or more, --p between 0 and 1")
    entries = accepted.read(_accepted_path(args))
    with open_store(_history_path(args), create=False, read_only=_history_read_only(args)) as store:
        # the filters checked once on the series' names (one that selects nothing: exit 2
        # with the closest names); every metric of the selected kernels: the findings group
        # them and the diagnosis reads them all; --metric chooses which changes are reported
        where, chosen = _resolved(args, store, every_metric=True)
        metrics = _metric_selection(args, chosen)
        arches = {slug: fp.get("arch", "") for slug, fp in store.machines().items()}
        # part by part (bounded memory), each part's lifecycle with it; a recovered
        # regression is reported once, the night it recovered
        done = scan(store, **where, since=_since(args.since), p=args.p, min_after=args.min_after, window=args.window,
                    min_change_pct=args.min_change, relative=args.relative, last=args.last, select=metrics,
                    arches=arches, accepted=entries, named=metrics if isinstance(metrics, list) else None,
                    hide_recovered=True)
    if not done.series and len(chosen):
        _no_runs_in_window(args, chosen)
    found = done.found
    counts = render.summary(found)
    if args.json:
        print(render.as_json(found))
    elif args.markdown:
        print(render.markdown(found), end="")
    else:
        series = done.series
        whole = args.full_names or not sys.stdout.isatty()  # a pipe or a file gets whole names
        print(render.text(found, width=None if whole else shutil.get_terminal_size((80, 24)).columns))
        print(f"{len(found)} finding{'s' if len(found) != 1 else ''} in {series} series; "
              f"{counts['open']} open regression{'s' if counts['open'] != 1 else ''} "
              f"({counts['new']} new in the last {args.last} runs), {counts['accepted']} accepted, "
              f"{counts['recovered']} recovered")
        if counts["open"]:
            print("accept one with: perfcheck history accept KERNEL --reason TEXT (or fix it)")
    failing = counts["new"] if args.fail_on == "new" else counts["open"]
    return EXIT_FAILED if failing else EXIT_OK


def _metric_selection(args: argparse.Namespace, frame: "object") -> "str | list[str] | None":
    """What --metric asks ``findings`` to report: None (the watched metrics and duration),
    "all", or canonical names, each of which must select a series (UsageError otherwise)."""
    from perfcheck.history import select
    from perfcheck.history.findings import ALL

    if not args.metric:
        return None
    if ALL in args.metric:
        return ALL
    select.apply(frame, select.Filters.of(metric=args.metric), where=str(_history_path(args)))
    return list(select.Filters.of(metric=args.metric).metrics())


def _history_accept(args: argparse.Namespace) -> int:
    from perfcheck.history import accepted, detect, lifecycle, open_store

    if args.min_after < 1 or args.window < 4 or not 0 < args.p < 1:
        raise UsageError("--min-after must be 1 or more, --window 4 or more, --p between 0 and 1")
    if not args.reason.strip():
        raise UsageError("--reason: say why the change is accepted (it is kept in the file for review)")
    path = _accepted_path(args)
    entries = accepted.read(path)
    with open_store(_history_path(args), create=False, read_only=_history_read_only(args)) as store:
        frame = _selected(args, store, kernel=() if args.selector == "*" else [args.selector])
    points = detect(frame, p=args.p, min_after=args.min_after, window=args.window)
    found = lifecycle.open_regressions(lifecycle.states(points, frame, entries))
    if not found:
        raise UsageError(f"nothing to accept: no open regression in the {frame.groupby(['machine', 'suite', 'kernel', 'metric']).ngroups} "
                         f"series selected (`perfcheck history detect` lists them)")
    new = accepted.accept(found, reason=args.reason.strip(), by=accepted.who(), every_metric=not args.metric)
    accepted.append(path, new)
    for state in found:
        cp = state.point
        print(f"accepted: {cp.suite} / {cp.kernel} / {cp.metric} on {cp.machine}: {cp.change_pct:+.1f}% since "
              f"{(cp.commit or cp.run_id)[:12]}")
    print(f"perfcheck: {len(new)} entr{'ies' if len(new) != 1 else 'y'} written to {path}; commit it for review",
          file=sys.stderr)
    return EXIT_OK


def _written(what: str, run: "Callable[[argparse.Namespace], int]") -> "Callable[[argparse.Namespace], int]":
    """``run`` with an OSError while it writes (a folder not writable, a disk full, a
    rename refused) as a one-line usage error naming the path, as for every other report."""

    def command(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except OSError as exc:
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            raise UsageError(f"{what}: cannot write {where}{exc.strerror or exc}; check the path and its "
                             "folder's permissions and free space") from None

    return command


def _history_report(args: argparse.Namespace) -> int:
    return _written("history report", _history_report_to)(args)


def _history_report_to(args: argparse.Namespace) -> int:
    from perfcheck.atomicfile import write_atomic
    from perfcheck.history import accepted, open_store
    from perfcheck.history.dashboard import digest_text
    from perfcheck.history.scan import digest
    from perfcheck.history.site import check_target, digest_inside, write_report

    if not args.html and not args.markdown:
        raise UsageError("history report: give --html DIR and/or --markdown FILE")
    if args.last is not None and args.last < 1:
        raise UsageError(f"--last must be 1 or more, not {args.last}")
    if args.html:
        check_target(args.html, args.markdown)  # before the store is read
    path = _history_path(args)
    with open_store(path, create=False, read_only=_history_read_only(args)) as store:
        # part by part, bounded memory (perfcheck.history.scan, .site)
        where, chosen = _resolved(args, store)
        if not any(True for _ in store.batches(**where, last=args.last, rows=1)):
            if len(chosen):
                _no_runs_in_window(args, chosen)
            print(f"perfcheck: warning: {path}: no runs stored that match", file=sys.stderr)
        read = accepted.read(_accepted_path(args))
        if not args.html:
            write_atomic(args.markdown, digest(store, suites=where.get("suite"), machine=where.get("machine"),
                                               kernel=where.get("kernel"), metric=where.get("metric"), last=args.last,
                                               accepted=read, title=args.title, link=args.link))
            print(f"perfcheck: digest: {args.markdown}", file=sys.stderr)
            return EXIT_OK
        site = write_report(store, args.html, where=where, chosen=chosen, last=args.last, accepted=read,
                            title=args.title, digest=args.markdown, link=args.link)
    pages = site.pages
    print(f"perfcheck: dashboard: {pages[0]} and {len(pages) - 1} suite page{'s' if len(pages) != 2 else ''}"
          + (f", {site.kernel_pages} kernel page{'s' if site.kernel_pages != 1 else ''}" if site.kernel_pages else ""),
          file=sys.stderr)
    if args.markdown:
        if digest_inside(args.html, args.markdown) is None:  # else written with the site
            write_atomic(args.markdown, digest_text(site.facts, title=args.title, link=args.link))
        print(f"perfcheck: digest: {args.markdown}", file=sys.stderr)
    return EXIT_OK


def _history_export(args: argparse.Namespace) -> int:
    return _written("history export", _history_export_to)(args)


def _history_export_to(args: argparse.Namespace) -> int:
    from perfcheck.history import open_store
    from perfcheck.history.backend import run_parts
    from perfcheck.history.export import write_bencher, write_timestamped_metrics

    if not (args.bencher or args.openmetrics or args.prometheus):
        raise UsageError("history export: give --bencher DIR, --openmetrics FILE and/or --prometheus FILE")
    path = _history_path(args)
    with open_store(path, create=False, read_only=_history_read_only(args)) as store:
        names, chosen = _resolved(args, store)  # the filters checked once (exit 2 with the closest names)
        where = {**names, "since": _since(args.since)}
        if not any(True for _ in store.batches(**where, rows=1)):  # reads one kernel's values at most
            if len(chosen):
                _no_runs_in_window(args, chosen)
            print(f"perfcheck: warning: {path}: no values stored that match", file=sys.stderr)
        if args.bencher:  # a file per run: a few runs read at a time, written as they come
            files = write_bencher((part for _, part in run_parts(store, **where)), args.bencher)
            print(f"perfcheck: Bencher: {len(files) - 1} run file{'s' if len(files) != 2 else ''} and {files[-1]}",
                  file=sys.stderr)
        # the text exports stream: the store is read part by part as the file is written
        if args.openmetrics:
            write_timestamped_metrics(store.batches(**where), args.openmetrics, timestamps="s")
            print(f"perfcheck: OpenMetrics: {args.openmetrics}", file=sys.stderr)
        if args.prometheus:
            write_timestamped_metrics(store.batches(**where), args.prometheus, timestamps="ms")
            print(f"perfcheck: Prometheus text: {args.prometheus}", file=sys.stderr)
    return EXIT_OK


def _history_copy(args: argparse.Namespace) -> int:
    from perfcheck.history import open_store
    from perfcheck.history.transfer import copy_store
    from perfcheck.storeurl import store_location

    source, target = (store_location(text, base=Path.cwd()) for text in (args.source, args.target))
    if str(source) == str(target) and type(source) is type(target):
        raise UsageError(f"history copy: SRC and DST are the same store ({source})")
    with open_store(source, create=False) as src, open_store(target) as dst:
        done = copy_store(src, dst)
    print(f"copied {done.copied} run{'s' if done.copied != 1 else ''} ({done.values} values) from {source} to "
          f"{target}; {done.present} already there")
    return EXIT_OK


_HISTORY = {"add": _history_add, "list": _history_list, "prune": _history_prune, "detect": _history_detect,
            "accept": _history_accept, "report": _history_report, "export": _history_export}
_HISTORY["copy"] = _history_copy


def _history(args: argparse.Namespace) -> int:
    return _HISTORY[args.history_command](args)


def _check_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="profiles to check instead of the suite's (one suite), or with --expect")
    parser.add_argument("--config", metavar="FILE", help="config file (default: perfcheck.toml or pyproject.toml "
                        "with [tool.perfcheck], from the working directory up)")
    parser.add_argument("--suite", action="append", metavar="NAME", help="check only this suite (repeatable)")
    parser.add_argument("--expect", nargs=2, action="append", metavar=("PATTERN", "EXPECTATION"),
                        help="kernel pattern and expectation, e.g. --expect 'EOClover*' 'occupancy >= 40%%' (repeatable)")
    parser.add_argument("--arch", metavar="NAME", help="GPU the profiles were taken on (arch id or device)")
    parser.add_argument("--peaks", nargs="+", metavar="FILE", help="empirical peaks or a machine file")
    parser.add_argument("--format", metavar="NAME", help="profile reader to use (see `perfcheck formats`)")
    parser.add_argument("--baseline-dir", metavar="DIR", help="where baselines are kept (default: baselines/ next to the config)")
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    parser.add_argument("--markdown", metavar="FILE", help="write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set)")
    parser.add_argument("--json", metavar="FILE", help="write a JSON results file")
    parser.add_argument("--openmetrics", metavar="FILE", help="write a GitLab metrics report (OpenMetrics text)")
    parser.add_argument("--roofline", metavar="DIR", help="write roofline plots (PNG and SVG per suite) into DIR")
    parser.add_argument("--bencher", metavar="FILE", help="write the observed values in Bencher Metric Format (JSON)")
    parser.add_argument("--github-benchmark", metavar="FILE",
                        help="write the observed values for github-action-benchmark (customSmallerIsBetter and "
                        "customBiggerIsBetter: FILE gets the smaller-is-better metrics, FILE with -bigger before "
                        "the suffix the bigger-is-better ones)")
    parser.add_argument("--junit-flavour", choices=("xunit", "gitlab"), metavar="NAME",
                        help="xunit (default: valid against Jenkins' junit-10.xsd, file on <testsuite>) or "
                        "gitlab (also file and line on every <testcase>: GitLab's test report reads the file, "
                        "mikepenz/action-junit-report both)")
    parser.add_argument("--history", metavar="PATH|URL", help="history store (an SQLite file or postgresql://"
                        "user@host/db): baseline-relative checks use this machine's recent runs, and this run is "
                        "appended (unless --history-read-only)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--history-mode", choices=("append", "read-only"), metavar="MODE",
                      help="append (default): this run is added to the store; read-only: the checks read the "
                      "store and nothing is written (pull requests naming the nightly store)")
    mode.add_argument("--history-read-only", dest="history_mode", action="store_const", const="read-only",
                      help="the same as --history-mode read-only")


def _warn(oddities: Sequence[object]) -> None:
    from perfcheck.report.text import printable

    for oddity in oddities:
        print(f"perfcheck: warning: {printable(oddity)}", file=sys.stderr)


def _inspect_timeline(args: argparse.Namespace) -> int:
    from perfcheck.ingest.timeline import read_timeline
    from perfcheck.metrics.timeline import timeline_metrics
    from perfcheck.report.timeline import timeline_document, timeline_text

    if args.plot is None and (args.step is not None or args.baseline_trace):
        raise UsageError("--step and --baseline-trace say what --plot draws: add --plot STEM")
    if args.plot is not None and not args.plot.name:
        raise UsageError(f"--plot {str(args.plot)!r}: give a file stem (STEM.png and STEM.svg are written), e.g. out/steps")
    step = "ProfilerStep" if args.step is None else args.step
    timeline = read_timeline(args.paths, format=args.format)
    _warn(timeline.oddities)
    metrics = timeline_metrics(timeline)
    if args.plot is not None:
        from perfcheck.metrics.timeline import step_breakdown
        from perfcheck.report.stepchart import step_chart

        steps = step_breakdown(timeline, step)
        if steps.empty:
            raise UsageError(f"--plot: no {step!r} ranges in the timeline; name the step's range with --step")
        base = None
        if args.baseline_trace:
            base = step_breakdown(read_timeline(args.baseline_trace, format=args.format), step)
            if base.empty:  # else the chart would show the current steps alone, as if nothing were compared
                raise UsageError(f"--baseline-trace: no {step!r} ranges in the baseline's timeline; "
                                 "give traces of the same program (the same --step)")
        try:
            written = step_chart(steps, args.plot, baseline=base, title=f"time per {step}")
        except OSError as exc:  # a directory named STEM.png, a file where a folder belongs: the user's to fix
            raise UsageError(f"cannot write the step chart {args.plot}: {exc.strerror or exc}") from None
        print(f"perfcheck: step chart: {', '.join(str(p) for p in written)}", file=sys.stderr)
    if args.json:
        json.dump(timeline_document(metrics, timeline.sources), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        full = args.full_names or not sys.stdout.isatty()  # a pipe or a file gets whole names
        print(timeline_text(metrics, timeline.sources, width=None if full else 36))
    return EXIT_OK


def _inspect(args: argparse.Namespace) -> int:
    if args.timeline:
        return _inspect_timeline(args)
    if args.plot is not None or args.baseline_trace or args.step is not None:
        raise UsageError("--plot, --step and --baseline-trace draw the timeline: add --timeline")
    from perfcheck.analysis import analyse
    from perfcheck.ingest import read_peaks
    from perfcheck.report.jsonreport import inspect_document
    from perfcheck.report.text import inspect_text

    peaks = read_peaks(args.peaks) if args.peaks else None
    analysis = analyse(args.paths, format=args.format, arch=args.arch, peaks=peaks)
    _warn(analysis.oddities)
    if args.kernel:
        from perfcheck.expect import only_kernels

        analysis = only_kernels(analysis, args.kernel)
    if args.json:
        json.dump(inspect_document(analysis), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        from perfcheck.terminal import output_width

        # a pipe or a file gets whole lines (output_width None); a terminal, what fits
        print(inspect_text(analysis, width=output_width(sys.stdout), full_names=bool(args.full_names)))
    return EXIT_OK


def _peaks(args: argparse.Namespace) -> int:
    from perfcheck.ingest import read_peaks
    from perfcheck.report.jsonreport import peaks_document
    from perfcheck.report.text import peaks_table

    peaks = read_peaks(args.paths, args.format)
    _warn(peaks.oddities)
    if args.save:
        from pathlib import Path

        from perfcheck.machine import machine_from_peaks, write_machine

        device = None
        if args.device:
            from perfcheck.arch import lookup

            target = lookup(args.device)  # validates the name; records the canonical one
            device = target.device.name if target.device is not None else target.arch.name
        write_machine(args.save, machine_from_peaks(Path(args.save).stem, peaks, device))
        print(f"perfcheck: wrote machine file {args.save}", file=sys.stderr)
    if args.json:
        json.dump(peaks_document(peaks), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        from perfcheck.terminal import output_width

        print(peaks_table(peaks, width=output_width(sys.stdout)))
    return EXIT_OK


def _byte_size(text: str) -> int:
    """--size: bytes, optionally with a unit (256MiB, 1GB)."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    number = text.strip().rstrip("bBiIkKmMgG")
    unit = text.strip()[len(number):].upper()
    if not number.isdigit() or unit not in units:
        raise argparse.ArgumentTypeError(f"expected bytes such as 268435456 or 256MiB, not {text!r}")
    return int(number) * units[unit]


def _peaks_measure_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="perfcheck peaks measure",
        description="Measure this machine's peaks with perfcheck's built-in micro-benchmarks: streaming "
        "copy and triad for bandwidth (bytes counted the STREAM way: 2 and 3 words per element, "
        "write-allocate traffic not counted), a matrix multiply (CPU: NumPy's BLAS) or an FMA loop "
        "(CUDA with CuPy) for FLOP/s. On CPU the streaming kernels are NumPy ufuncs on one thread; "
        "the output says how many threads each figure used. BabelStream, mixbench or ERT outputs "
        "remain the recommended source for GPUs: --merge puts them in the same machine file.",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu (NumPy) or cuda (PyTorch or CuPy, whichever is installed); default cpu")
    parser.add_argument("--size", type=_byte_size, metavar="BYTES",
                        help="bytes per array of the streaming kernels (default: 4x the last-level cache, "
                        "32 MiB to 512 MiB on CPU; 4x the L2, at least 256 MiB, on CUDA)")
    parser.add_argument("--repeat", type=int, default=10, metavar="N",
                        help="timed calls per benchmark after a warm-up call; the fastest counts, as in STREAM, and "
                        "the spread (median, slowest, N) is kept in the machine file, with a warning when the "
                        "median call is more than 10%% below the best (default 10)")
    parser.add_argument("--save", metavar="TOML",
                        help="write the peaks and the machine's fingerprint as a machine file "
                        "(e.g. baselines/machines/NAME.toml) for --peaks")
    parser.add_argument("--merge", nargs="+", metavar="FILE", default=[],
                        help="benchmark outputs (BabelStream, mixbench, ERT, a machine file, ...) whose figures "
                        "replace the measured ones for the peaks they give; all are kept as details")
    parser.add_argument("--json", action="store_true", help="print JSON (values in base units) instead of a table")
    return parser


def _peaks_measure(args: argparse.Namespace) -> int:
    from perfcheck.report.jsonreport import peaks_document
    from perfcheck.report.text import peaks_table
    from perfcheck.run.microbench import measure_peaks, merge, summary_lines

    ingested = None
    if args.merge:  # read first: a bad file fails before minutes of measuring
        from perfcheck.ingest import read_peaks

        ingested = read_peaks(args.merge)
        _warn(ingested.oddities)
    measured = measure_peaks(args.device, size=args.size, repeat=args.repeat)
    _warn(measured.peaks().oddities)  # a busy machine: the spread of the repeats
    peaks = measured.peaks() if ingested is None else merge(measured.peaks(), ingested)
    if args.save:
        from pathlib import Path

        from perfcheck.machine import machine_from_peaks, write_machine

        write_machine(args.save, machine_from_peaks(Path(args.save).stem, peaks, fingerprint=measured.fingerprint))
        print(f"perfcheck: wrote machine file {args.save}", file=sys.stderr)
    if args.json:
        doc = peaks_document(peaks)
        doc.update(device=measured.device, array_bytes=measured.array_bytes, fingerprint=dict(measured.fingerprint),
                   benchmarks=[r.as_dict() for r in measured.results])
        json.dump(doc, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print("\n".join(summary_lines(measured)))
        print()
        print(peaks_table(peaks))
    return EXIT_OK


def _arch(args: argparse.Namespace) -> int:
    from perfcheck import arch

    if args.arch_command == "list":
        arches, devices = arch.known()
        print("arches:  " + ", ".join(arches))
        print("devices: " + ", ".join(devices))
        return EXIT_OK
    doc = arch.describe(arch.lookup(args.name))
    if args.json:
        json.dump(doc, sys.stdout, indent=2, sort_keys=True, allow_nan=False)
        sys.stdout.write("\n")
    else:
        from perfcheck.report.text import arch_text

        print(arch_text(doc))
    return EXIT_OK


def _occupancy(args: argparse.Namespace) -> int:
    from perfcheck.arch import lookup
    from perfcheck.arch.occupancy import occupancy

    target = lookup(args.arch)
    largest = target.arch.max_workgroup_size
    if args.block < 1 or (largest is not None and args.block > largest):
        from perfcheck.errors import UsageError

        raise UsageError(f"--block {args.block}: a workgroup/block on {target.arch.name} holds 1 to "
                         f"{largest or 'the arch maximum of'} threads")
    result = occupancy(
        target.arch,
        args.block,
        vgpr=args.vgpr,
        agpr=args.agpr,
        sgpr=args.sgpr,
        lds=args.lds,
        registers=args.registers,
        shared=args.shared,
    )
    doc = result.as_dict()
    if args.json:
        json.dump(doc, sys.stdout, indent=2, sort_keys=True, allow_nan=False)
        sys.stdout.write("\n")
    else:
        per = "waves/CU" if result.waves_per_cu is not None else "warps/SM"
        resident = result.waves_per_cu if result.waves_per_cu is not None else result.warps_per_sm
        print(
            f"{target.arch.name}: occupancy {result.occupancy_pct:.1f}% ({resident} {per}, "
            f"{result.workgroups_per_cu} workgroups), limited by {result.limiter}"
        )
        for name, value in sorted(result.limits.items()):
            print(f"  {name:<12} allows {value} workgroups")
    return EXIT_OK


def _run_checks(args: argparse.Namespace, *, update: bool | None) -> "Run":
    """check / baseline update: settings -> suites -> baselines and reports -> text."""
    from perfcheck.checking import evaluate_suite, finish
    from perfcheck.config import resolver
    from perfcheck.report.text import print_run

    options: dict[str, object] = {k: getattr(args, k) for k in (
        "config", "arch", "peaks", "format", "baseline_dir", "junit", "markdown", "json", "openmetrics", "roofline",
        "history")}
    options["history_mode"] = getattr(args, "history_mode", None)
    if getattr(args, "junit_flavour", None):
        options["junit_flavour"] = args.junit_flavour
    options["update_baseline"] = update
    options["strict_baseline"] = getattr(args, "strict_baseline", None)
    expect: dict[str, list[str]] = {}
    for pattern, text in args.expect or []:
        expect.setdefault(pattern, []).append(text)
    settings = resolver(cli=options).settings(args.suite, profiles=args.paths or None, expect=expect or None)
    runs = [evaluate_suite(suite, record_command=_record_command(args, name)) for name, suite in settings.suites.items()]
    for suite_run in runs:
        suite_run.merge = bool(getattr(args, "merge", False))
    run = finish(runs, settings)  # every report is written here, before the exit status
    for suite_run in run.suites:
        _warn(suite_run.analysis.oddities if suite_run.analysis is not None else ())
        _warn(suite_run.notices)
    _exports(args, run)
    from perfcheck.terminal import output_width

    print_run(run, out=sys.stdout, err=sys.stderr, width=output_width(sys.stdout))
    _github_step(run)
    if run.history_error:  # the reports are out; the exit status (2) says the history is not
        print(f"perfcheck: error: {run.history_error}", file=sys.stderr)
    return run


def _exports(args: argparse.Namespace, run: "Run") -> None:
    from perfcheck.errors import UsageError
    from perfcheck.report.exports import write_bencher, write_github_benchmark

    # An unwritable path is the user's to fix (exit 2, one line), as for every other report.
    kind, path = "", None
    try:
        if getattr(args, "bencher", None):
            kind, path = "bencher", args.bencher
            run.reports.setdefault("bencher", []).append(write_bencher(path, run))
        if getattr(args, "github_benchmark", None):
            kind, path = "github-benchmark", args.github_benchmark
            run.reports.setdefault("github-benchmark", []).extend(write_github_benchmark(path, run))
    except OSError as exc:
        raise UsageError(f"cannot write the {kind} report {path}: {exc.strerror or exc}") from None


def _github_step(run: "Run") -> None:
    """In GitHub Actions: annotations on the expectations' lines, and step outputs."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    from perfcheck.report.github import annotations, run_outputs, step_outputs

    for line in annotations(run.checks):
        print(line)
    target = os.environ.get("GITHUB_OUTPUT")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(step_outputs(run_outputs(run)))


def _github(args: argparse.Namespace) -> int:
    from pathlib import Path

    from perfcheck.errors import UsageError
    from perfcheck.report.github import post_comment, pull_request_number

    number = args.pr or pull_request_number()
    if number is None:
        print("perfcheck: not a pull request: no comment posted", file=sys.stderr)
        return EXIT_OK
    repository = args.repository or os.environ.get("GITHUB_REPOSITORY")
    token = os.environ.get("GITHUB_TOKEN")
    if not repository or not token:
        raise UsageError("perfcheck github comment needs GITHUB_REPOSITORY (or --repository) and GITHUB_TOKEN "
                         "(env: GITHUB_TOKEN: ${{ github.token }}, with permissions: pull-requests: write)")
    try:
        body = Path(args.markdown).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the Markdown summary {args.markdown}: {exc.strerror or exc}") from None
    result = post_comment(body, repository=repository, number=number, token=token,
                          api_url=os.environ.get("GITHUB_API_URL") or "https://api.github.com", key=args.key)
    print(f"perfcheck: {result.action} comment {result.comment_id} on {repository}#{number}"
          + (f": {result.url}" if result.url else ""))
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    from perfcheck.report.results import results_schema_text

    sys.stdout.write(results_schema_text())
    return EXIT_OK


# Options of `check` that name what the job writes, left out of the recording command.
_JOB_OUTPUTS = ("--junit", "--markdown", "--json", "--openmetrics", "--roofline", "--bencher", "--github-benchmark",
                "--junit-flavour", "--history", "--history-mode")


def _record_command(args: argparse.Namespace, suite: str) -> str:
    """This invocation as ``perfcheck baseline update ...`` (named in strict-baseline
    errors): the same options, for the one suite when suites come from the config."""
    import shlex

    argv = [a for a in getattr(args, "perfcheck_argv", []) if a not in ("--strict-baseline", "--no-strict-baseline")]
    rest = argv[argv.index("check") + 1:] if "check" in argv else argv
    # Reports and the history are the CI job's: recording a baseline on a developer's
    # machine must not rewrite them (or append a run to the team's history).
    kept: list[str] = []
    skip = False
    for arg in rest:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _JOB_OUTPUTS:
            skip = "=" not in arg
            continue
        kept.append(arg)
    rest = kept
    if not args.paths and not args.expect and not args.suite:
        rest += ["--suite", suite]
    return shlex.join(["perfcheck", "baseline", "update", *rest])


def _check(args: argparse.Namespace) -> int:
    return _run_checks(args, update=args.update_baseline).exit_code


def _baseline(args: argparse.Namespace) -> int:
    _run_checks(args, update=True)
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from perfcheck.checking import comparison_side, write_comparison
    from perfcheck.comparison import compare
    from perfcheck.report.comparison import comparison_text
    from perfcheck.terminal import output_width

    options = {"config": args.config, "arch": args.arch, "peaks": args.peaks}
    before, after = comparison_side(args.before, options), comparison_side(args.after, options)
    for side in (before, after):
        _warn(side.analysis.oddities)
    comparison = compare(before, after)
    written = write_comparison(comparison, roofline=Path(args.roofline) if args.roofline else None,
                               markdown=Path(args.markdown) if args.markdown else None)
    width = None if args.full_names else output_width(sys.stdout)
    print(comparison_text(comparison, width=width))
    from perfcheck.suiterun import display_path

    for kind, paths in written.items():
        print(f"perfcheck: {kind}: {', '.join(display_path(p) for p in paths)}", file=sys.stderr)
    return EXIT_OK


def _formats(args: argparse.Namespace) -> int:
    from perfcheck.ingest import FORMATS
    from perfcheck.report.text import formats_text
    from perfcheck.terminal import output_width

    print(formats_text(FORMATS, width=min(output_width(sys.stdout) or 100, 100)))
    return EXIT_OK


def _metrics(args: argparse.Namespace) -> int:
    from perfcheck.report.text import metrics_text
    from perfcheck.vocabulary import catalog

    infos = catalog(args.names)
    if args.json:
        json.dump([info.as_dict() for info in infos], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        from perfcheck.terminal import output_width

        print(metrics_text(infos, counters=bool(args.names or args.counters), width=output_width(sys.stdout)))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from perfcheck.cli_run import command

    return command(args)


_COMMANDS = {
    "inspect": _inspect, "peaks": _peaks, "formats": _formats, "arch": _arch, "occupancy": _occupancy,
    "check": _check, "baseline": _baseline, "peaks-measure": _peaks_measure, "run": _run,
    "metrics": _metrics, "compare": _compare,
    "github": _github, "schema": _schema,
    "history": _history,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["peaks", "measure"]:
        # A subcommand of `peaks`, whose other form takes files (a file named
        # "measure" is ./measure): its own parser, its own options.
        args = _peaks_measure_parser().parse_args(argv[2:])
        args.command = "peaks-measure"
    else:
        args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_INPUT
    args.perfcheck_argv = argv
    try:
        return _COMMANDS[args.command](args)
    except PerfcheckError as exc:
        print(f"perfcheck: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except MemoryError as exc:  # ArrowMemoryError too: a large input, not a bug
        print(f"perfcheck: error: {OutOfMemory(exc, f'`perfcheck {args.command}`')}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:  # `perfcheck inspect ... | head`
        return EXIT_OK
    except KeyboardInterrupt:
        print("perfcheck: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug in perfcheck: still one line, with a way to see more
        if os.environ.get("PERFCHECK_DEBUG"):
            raise
        print(
            f"perfcheck: internal error: {type(exc).__name__}: {exc} "
            "(please report it; set PERFCHECK_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
