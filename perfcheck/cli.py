"""Command line: a thin shell over the library.

Exit status: 0 success, 1 a check failed (later subcommands), 2 input or usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from perfcheck import __version__
from perfcheck.errors import PerfcheckError

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as perfcheck's one-line errors (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"perfcheck: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="perfcheck",
        description="GPU kernel performance, testable in CI. Reads rocprof, rocprofv3, "
        "Omniperf/rocprof-compute, Nsight Compute and nvprof profiles and micro-benchmark peaks.",
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

    peaks = sub.add_parser(
        "peaks",
        help="read measured peaks from benchmark outputs",
        description="Read peak bandwidth and FLOP/s from BabelStream, mixbench, ERT, "
        "Omniperf roofline.csv, STREAM or likwid outputs. Where several files report the "
        "same peak the highest is kept; every figure is listed with its source.",
    )
    peaks.add_argument("paths", nargs="+", metavar="PATH", help="benchmark output file")
    peaks.add_argument("--format", metavar="NAME", help="reader to use (see `perfcheck formats`)")
    peaks.add_argument("--json", action="store_true", help="print JSON (values in base units) instead of a table")

    sub.add_parser("formats", help="list the formats perfcheck reads", description="List every reader, its kind and what it reads.")
    return parser


def _warn(oddities: Sequence[object]) -> None:
    for oddity in oddities:
        print(f"perfcheck: warning: {oddity}", file=sys.stderr)


def _inspect(args: argparse.Namespace) -> int:
    from perfcheck.ingest import open_profile
    from perfcheck.metrics.summary import SUMMARY_WANT, KernelSummary
    from perfcheck.report.jsonreport import inspect_document
    from perfcheck.report.text import describe_sources, kernel_table

    summary = KernelSummary()
    sources, oddities = [], []
    for path in args.paths:
        scan = open_profile(path, args.format, SUMMARY_WANT)
        for chunk in scan.chunks:
            summary.add(chunk)
        sources.append(scan.source)
        oddities.extend(scan.oddities)
    table = summary.frame()
    _warn(oddities)
    if args.json:
        json.dump(inspect_document(sources, table, oddities), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(describe_sources(sources))
        print()
        print(kernel_table(table) if len(table) else "no kernel dispatches in this profile")
    return EXIT_OK


def _peaks(args: argparse.Namespace) -> int:
    from perfcheck.ingest import read_peaks
    from perfcheck.report.jsonreport import peaks_document
    from perfcheck.report.text import peaks_table

    peaks = read_peaks(args.paths, args.format)
    _warn(peaks.oddities)
    if args.json:
        json.dump(peaks_document(peaks), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(peaks_table(peaks))
    return EXIT_OK


def _formats(args: argparse.Namespace) -> int:
    from perfcheck.ingest import FORMATS

    width = max(len(f.name) for f in FORMATS)
    for fmt in FORMATS:
        print(f"{fmt.name.ljust(width)}  {fmt.kind:<7}  {fmt.description}")
    return EXIT_OK


_COMMANDS = {"inspect": _inspect, "peaks": _peaks, "formats": _formats}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_INPUT
    try:
        return _COMMANDS[args.command](args)
    except PerfcheckError as exc:
        print(f"perfcheck: error: {exc}", file=sys.stderr)
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
