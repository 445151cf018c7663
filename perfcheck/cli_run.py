"""``perfcheck run [OPTIONS] -- CMD...``: profile a command, summarise (and check)
what it measured. Registered by ``perfcheck.cli``; imports nothing heavy until run.

Output: the per-kernel summary (``--json``: the same document as ``perfcheck inspect
--json``, read from the run directory) on stdout; progress, the plan and the run
directory on stderr. With ``--expect`` the checks follow (on stderr with ``--json``)
and the exit status is that of ``perfcheck check``: 0 passed, 1 a check failed.
A profiler error is one line and exit status 2, like any perfcheck error.
"""

from __future__ import annotations

import argparse
import json
import sys

PROFILER_NAMES = ("rocprofv3", "rocprof", "ncu")


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "run",
        help="profile a command and summarise (or check) what it measured",
        description="Run CMD under a profiler (rocprofv3, rocprof v1 or Nsight Compute), collecting only the "
        "counters the --expect expectations need (a duration or occupancy check needs just the kernel trace, "
        "a bandwidth check the byte counters), in as few passes as the GPU allows. The raw outputs stay in a "
        "run directory (perfcheck-runs/ by default) that `perfcheck inspect` and `perfcheck check` read; "
        "its logs/ hold the command's output. With --launcher each rank writes its own outputs and the "
        "summary adds the ranks' spread per kernel (rank_imbalance = slowest rank / mean).",
        epilog="Example: perfcheck run --profiler rocprofv3 --expect 'stencil*' 'hbm_bw >= 80% of peak' -- ./app -n 1024",
    )
    parser.add_argument("--profiler", choices=PROFILER_NAMES,
                        help="profiler to run (default: rocprofv3, rocprof or ncu, whichever is installed; "
                        "the vendor's with --arch)")
    parser.add_argument("--clock-control", choices=("base", "none"),
                        help="ncu only: 'base' locks the GPU to its base clock while profiling (stable numbers; the "
                        "default), 'none' lets it boost. Recorded in the run and in the baselines' fingerprint: times "
                        "at base and at boost clocks are never compared")
    parser.add_argument("--launcher", metavar='"CMD"',
                        help='launcher for several ranks, e.g. "srun -n 4" or "mpirun -np 4"')
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds for the whole run; then the command's process group is killed")
    parser.add_argument("--run-dir", metavar="DIR",
                        help="directory for the outputs (new or empty; default: a fresh one under perfcheck-runs/)")
    parser.add_argument("--expect", nargs=2, action="append", metavar=("PATTERN", "EXPECTATION"),
                        help="kernel pattern and expectation to check; also decides the counters (repeatable)")
    parser.add_argument("--counter", action="append", default=[], metavar="NAME",
                        help="also collect this raw counter, in the profiler's own name (repeatable)")
    parser.add_argument("--rank", type=int, metavar="R", help="summarise and check rank R only (with --launcher)")
    parser.add_argument("--arch", metavar="NAME",
                        help="GPU it runs on (arch id or device): picks the vendor's profiler and the counters its "
                        "architecture has; default: detected from the outputs")
    parser.add_argument("--peaks", nargs="+", metavar="FILE", help="empirical peaks or a machine file")
    parser.add_argument("--show-output", action="store_true",
                        help="show the command's output as it runs (it is always kept in the run directory's logs/)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON (as `perfcheck inspect --json`)")
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command to profile")
    return parser


def _warn(items: object) -> None:
    for item in items:  # type: ignore[attr-defined]
        print(f"perfcheck: warning: {item}", file=sys.stderr)


def command(args: argparse.Namespace) -> int:
    from perfcheck.errors import UsageError
    from perfcheck.run.runner import run

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("no command to profile: give it after --, e.g. perfcheck run --profiler rocprofv3 -- ./app")
    if args.rank is not None and not args.launcher:
        raise UsageError("--rank needs --launcher: without one the command runs as a single process")
    expect: dict[str, list[str]] = {}
    for pattern, text in args.expect or []:
        expect.setdefault(pattern, []).append(text)
    peaks = None
    if args.peaks:  # read before the run: a bad file must not cost a GPU run
        from perfcheck.ingest import read_peaks

        peaks = read_peaks(args.peaks)
        _warn(peaks.oddities)
    result = run(argv, profiler=args.profiler, clock_control=args.clock_control, launcher=args.launcher, timeout=args.timeout, run_dir=args.run_dir,
                 expect=expect, counters=args.counter, arch=args.arch, echo=sys.stderr if args.show_output else None)
    path = result.path(args.rank)
    if expect:
        return _check(args, path, expect)
    from perfcheck.analysis import analyse

    analysis = analyse([path], arch=args.arch, peaks=peaks)
    _show(args, analysis)
    return 0


def _show(args: argparse.Namespace, analysis: object) -> None:
    from perfcheck.report.jsonreport import inspect_document
    from perfcheck.report.text import inspect_text

    _warn(analysis.oddities)  # type: ignore[attr-defined]
    if args.json:
        json.dump(inspect_document(analysis), sys.stdout, indent=2, allow_nan=False)  # type: ignore[arg-type]
        sys.stdout.write("\n")
    else:
        from perfcheck.terminal import output_width

        print(inspect_text(analysis, width=output_width(sys.stdout)))  # type: ignore[arg-type]


def _check(args: argparse.Namespace, path: object, expect: dict[str, list[str]]) -> int:
    """The expectations on what was measured, as `perfcheck check RUN_DIR --expect ...`
    would check them (an ad-hoc suite named "run"; baselines under ./baselines)."""
    from perfcheck import checking
    from perfcheck.config import resolver
    from perfcheck.report.text import print_run

    settings = resolver(cli={"arch": args.arch, "peaks": args.peaks}, discover=False)
    suite = settings.suite("run", profiles=[path], expect=expect)  # type: ignore[list-item]
    # What records this run's baseline (named by a strict-baseline error in CI): the run
    # directory is kept, so `perfcheck check` can record from it.
    import shlex

    argv = ["perfcheck", "check", str(path), *(a for p, texts in expect.items() for t in texts for a in ("--expect", p, t))]
    argv += [a for flag, value in (("--arch", args.arch),) if value for a in (flag, value)]
    argv += ["--peaks", *(str(peak) for peak in args.peaks)] if args.peaks else []
    record = shlex.join([*argv, "--update-baseline"])
    run = checking.finish([checking.evaluate_suite(suite, record_command=record)], settings.report_settings({"run": suite}))
    analysis = run.suites[0].analysis
    if analysis is not None:
        _show(args, analysis)
    out = sys.stderr if args.json else sys.stdout
    for notice in run.suites[0].notices:
        print(f"perfcheck: warning: {notice}", file=sys.stderr)
    from perfcheck.terminal import output_width

    print_run(run, out=out, err=sys.stderr, reports=False, width=output_width(out))
    return run.exit_code
