"""Running check suites: settings -> analysis -> checks -> baselines -> reports.

``perfcheck check`` and the pytest plugin are thin shells over this module::

    settings = config.resolver(cli=...).settings()
    run = run_suites(settings)          # every report is written before it returns
    sys.exit(run.exit_code)             # 0 all passed (recorded counts), 1 failed/error

The steps are separate for the pytest plugin, whose workers evaluate and whose
controller alone writes (pytest-xdist): ``prepare`` reads a suite's profiles and
its stored baseline, ``check`` evaluates expectations against it (the fixture calls
it once per ``perf.expect``), ``finish`` settles the baseline files and writes the
reports.

Baseline actions, per suite:

* ``compared``: a baseline for this machine exists and the checks used it (kernels
  new since then are added to it, with a notice);
* ``recorded``: there was none and a baseline-relative expectation asked for one:
  this run's values become it (the checks pass as RECORDED);
* ``updated``: ``--update-baseline``: rewritten from this run, baseline-relative
  failures are accepted (RECORDED) and say so; absolute expectations still fail;
* ``fingerprint-mismatch``: the file at this machine's path was recorded on other
  hardware or another profiler version: not compared, not overwritten (warned);
* ``none``: nothing to compare and nothing asked for a baseline; ``skipped``: the
  suite's profiles are absent and it says ``skip_if_missing``;
* ``missing``: strict baselines (``CI`` set, ``--strict-baseline``, ``strict_baseline =
  true``): there was none for this machine, nothing was recorded, and every
  baseline-relative check is an ERROR naming the file looked for, the fingerprint
  fields that differ from the nearest stored baseline, and the command that records
  it. A fingerprint mismatch and a kernel or metric the stored baseline lacks are
  ERRORs too. Recording stays an explicit act (``perfcheck baseline update``,
  ``--update-baseline``, ``--perf-update-baseline``), as ``jest --ci`` never writes a
  snapshot.

Several runs may share one baseline file (pytest tests with the same ``suite=``):
``finish`` writes it once, with the kernels of all of them.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.config import ConfigError, Settings, SuiteSettings
from perfcheck.errors import PerfcheckError, UsageError
from perfcheck.model import ERROR, FAILED, RECORDED, Check
from perfcheck.suiterun import (
    COMPARED,
    MISMATCH,
    MISSING,
    NONE,
    RECORDED_ACTION,
    SKIPPED,
    UPDATED,
    Run,
    SuiteRun,
    display_path,
)

if TYPE_CHECKING:
    import numpy as np

    from perfcheck.baseline import Baseline
    from perfcheck.comparison import Comparison, Side
    from perfcheck.history.store import RunRecord
    from perfcheck.model import Peaks, Profile
    from perfcheck.report.results import BaselineStatus
    from perfcheck.run.runner import RunResult
    from perfcheck.storeurl import StoreLocation

# --- reading ---------------------------------------------------------------------------------

def _read_peaks(suite: SuiteSettings) -> "Peaks | None":
    if not suite.peaks:
        return None
    from perfcheck.ingest import read_peaks

    try:
        return read_peaks(list(suite.peaks))
    except PerfcheckError as exc:
        raise ConfigError(suite.origin("peaks" if "peaks" in suite.origins else "machine"), str(exc)) from None


def _machine_arch(peaks: "Peaks | None") -> str | None:
    """A machine file names its device: with no device set anywhere, it is the GPU."""
    if peaks is None:
        return None
    named = {s.device or s.arch for s in peaks.sources if s.format == "perfcheck-machine" and (s.device or s.arch)}
    return named.pop() if len(named) == 1 else None


def _run_command(suite: SuiteSettings, arch: str | None) -> tuple[SuiteSettings, "RunResult"]:
    """Profile the suite's ``command`` (perfcheck.run) and return the suite reading what
    it measured: its ``profiles`` the run directory, or ``rank``'s directory. Here, not in
    the runner, because the runner knows commands and expectations, not settings."""
    from perfcheck.run import rundir
    from perfcheck.run.runner import run

    parent = suite.runs_dir or (suite.baseline_dir.parent / rundir.RUNS_DIR)
    result = run(
        suite.command,  # type: ignore[arg-type]
        profiler=suite.profiler, clock_control=suite.clock_control, launcher=suite.launcher, timeout=suite.timeout, runs_dir=parent,
        name=suite.name, expect=suite.expect, arch=arch, cwd=suite.workdir,
    )
    return replace(suite, profiles=(result.path(suite.rank),), command=None), result


def prepare(suite: SuiteSettings, profile: "Profile | None" = None) -> SuiteRun:
    """Read the suite's profiles, peaks and stored baseline. Nothing is written.
    ``profile``: a Profile measured in memory (``perf.measure``), analysed instead
    of the suite's profile files."""
    if suite.missing:
        return SuiteRun(suite, action=SKIPPED, notices=[f"suite {suite.name!r} skipped: {suite.missing}"])
    from perfcheck import baseline as baselines
    from perfcheck.analysis import analyse, analyse_profile

    peaks = _read_peaks(suite)
    arch = suite.arch or _machine_arch(peaks)
    ran = None
    if suite.command is not None and profile is None:
        # Profile the suite's command first: the suite then reads the run directory, and
        # its settings say so (a pytest-xdist controller reads it again, never reruns it).
        suite, ran = _run_command(suite, arch)
    if profile is not None:
        analysis = analyse_profile(profile, arch=arch, peaks=peaks)
    else:
        analysis = analyse(list(suite.profiles), format=suite.format, arch=arch, peaks=peaks)
        from perfcheck.metrics.timeline import is_timeline_name

        if any(is_timeline_name(pattern) for pattern in suite.expect):  # @run, range:NAME
            from perfcheck.analysis import with_timeline

            analysis = with_timeline(analysis, list(suite.profiles), format=suite.format)
    run = SuiteRun(suite, analysis, profile=profile)
    if ran is not None:
        run.notices.append(f"suite {suite.name!r}: profiled with {ran.describe()}")
    if suite.arch is None and arch is not None:
        run.notices.append(f"suite {suite.name!r}: GPU {arch!r} from the machine file (no device set)")
    fingerprint = baselines.fingerprint(analysis)
    run.fingerprint = fingerprint
    run.baseline_path = baselines.baseline_path(suite.baseline_dir, suite.name, fingerprint)
    stored = baselines.load(run.baseline_path)
    if stored is not None and suite.aliases:
        stored = stored.renamed(suite.aliases)  # renamed kernels keep their baseline
    if stored is not None and (why := baselines.mismatch(stored, fingerprint)):
        run.action = MISMATCH
        run.previous = stored
        run.notices.append(f"suite {suite.name!r}: {why}")
    elif stored is None:
        others = baselines.other_baselines(suite.baseline_dir, suite.name, fingerprint)
        if others:
            run.previous = baselines.nearest_other(suite.baseline_dir, suite.name, fingerprint)
            run.notices.append(
                f"suite {suite.name!r}: no baseline for this machine ({_fingerprint_text(fingerprint)}); "
                f"not compared with those of other machines: {', '.join(p.name for p in others)}"
            )
    else:
        run.baseline = run.previous = stored
        run.action = COMPARED
    return run


def record_command(settings: SuiteSettings) -> str:
    """The command that records or updates a suite's baseline, when the caller did not
    say (the CLI and the plugin pass the exact one)."""
    import shlex

    argv = ["perfcheck", "baseline", "update"]
    if settings.config_file is not None:
        argv += ["--config", display_path(settings.config_file)]
    argv += ["--suite", settings.name]
    return shlex.join(argv)


def _strict_reason(run: SuiteRun) -> str:
    """Why a baseline-relative check has nothing to compare with, for a strict run: the
    file looked for, what differs from the nearest stored baseline (old \u2192 new), how
    to record it. One line."""
    from perfcheck import baseline as baselines

    where = display_path(run.baseline_path) if run.baseline_path is not None else "the baseline"
    command = run.record_command or record_command(run.settings)
    strict = f"strict baselines: {run.settings.origin('strict_baseline')}"
    if run.baseline is None and run.previous is not None:
        changed = baselines.fingerprint_changes(run.previous.fingerprint, run.fingerprint) or "a different fingerprint"
        old = display_path(Path(run.previous.path)) if run.previous.path else "the stored baseline"
        return (f"no baseline for this machine at {where}; {old} was recorded with another fingerprint "
                f"({changed}); not compared, not recorded ({strict}); if the change is intended, "
                f"update it with `{command}` and commit it")
    if run.baseline is None:
        return (f"no baseline at {where}; not recorded ({strict}); record it with `{command}`, "
                f"review and commit it")
    return f"{where} lacks it; not recorded ({strict}); update it with `{command}` and commit it"


def _refused(run: SuiteRun, check: Check) -> Check:
    """A check that would record a baseline value, in a strict run: an ERROR."""
    if check.origin != "baseline" or check.outcome != RECORDED:
        return check
    from perfcheck.report.results import observed_text

    what = "" if run.baseline is None else (
        f"no baseline for kernel {check.kernel!r}: " if check.kernel not in run.baseline.kernels
        else f"the baseline has no {check.metric}: ")
    return replace(check, outcome=ERROR,
                   message=f"{check.metric} {observed_text(check)}: {what}{_strict_reason(run)}")


def _fingerprint_text(fingerprint: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in fingerprint.items())


def check(run: SuiteRun, expectations: Mapping[str, Sequence[str]] | None = None, *,
          source: tuple[str, int] | None = None) -> list[Check]:
    """Evaluate ``expectations`` (default: the suite's) and add the checks to ``run``.
    With update_baseline, a baseline-relative failure is accepted: the new value
    becomes the baseline, and the check says what changed. With strict_baseline
    (and no update), a value that would be recorded is an ERROR instead.
    ``source``: (file, line) where ``expectations`` were written (a test's
    ``perf.expect`` call); a config suite's come from its file."""
    from perfcheck.expect import evaluate

    if run.analysis is None:
        raise UsageError(f"suite {run.name!r} was not read (skipped: {run.settings.missing})")
    expectations = run.settings.expect if expectations is None else expectations
    checks = evaluate(run.name, expectations, run.analysis, run.baseline, tolerances=run.settings.tolerances)
    checks = [_with_baseline(c, run.baseline) for c in checks]
    history: dict[str, dict[str, "np.ndarray"]] = {}
    if run.settings.history is not None and not run.settings.update_baseline:
        with _collector_paused():
            checks, history = _history_gate(run, checks)
    checks = _explained(run, checks, history)
    if run.settings.update_baseline:
        checks = [_accepted(c) for c in checks]
    elif run.settings.strict_baseline:
        checks = [_refused(run, c) for c in checks]
    checks = [_located(run.settings, c, source) for c in checks]
    run.checks.extend(checks)
    return checks


def _with_baseline(check: Check, stored: "Baseline | None") -> Check:
    """An absolute expectation still shows the stored baseline's value of its metric,
    so a report can say 916 -> 818 GB/s (-10.7%) next to "hbm_bw >= 80% of peak"."""
    if check.baseline is not None or stored is None or check.observed is None:
        return check
    entry = stored.kernels.get(check.kernel)
    value = entry.metrics.get(check.metric) if entry is not None else None
    if value is None or value != value:
        return check
    return replace(check, baseline=float(value))


def _located(settings: SuiteSettings, check: Check, source: tuple[str, int] | None) -> Check:
    if source is not None:
        return replace(check, source_file=str(source[0]), source_line=int(source[1]))
    line = settings.expect_lines.get(check.pattern, {}).get(check.expression)
    if settings.config_file is None:
        return check
    return replace(check, source_file=str(settings.config_file), source_line=line)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a store's read or write, and back as it was.
    Its full passes walk every object the run holds (the analysis, the checks, the results
    document), and the gate's and the append's row tuples set off one or two each: 0.1 s
    of CPU at 2,000 kernels x 16 metrics to find next to no garbage (what they make is
    freed by reference counts; the rest waits for the next pass after them). Left as found: a pytest session (or its caller) may have turned it
    off itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _history_gate(run: SuiteRun, checks: list[Check]) -> tuple[list[Check], dict[str, dict[str, "np.ndarray"]]]:
    """Baseline-relative checks judged on this machine's recent history (read only),
    and, for the kernels whose check the history failed, every metric's values in the
    runs the reference was taken from (the diagnosis compares this run with them)."""
    from perfcheck import baseline as baselines
    from perfcheck.history import gate
    from perfcheck.history.store import machine_key

    machine = machine_key(baselines.fingerprint(run.analysis))
    pairs = gate.gated_pairs(checks)
    try:
        refs = gate.references(run.settings.history, machine, run.name, pairs, run.settings.accepted_file,
                               read_only=run.settings.history_read_only)
    except PerfcheckError as exc:
        # A store that cannot be read must not cost the run its reports: the baseline
        # file decides, and the run ends with this error once every report is written.
        run.store_error = str(exc)
        refs = {}
    run.history_judged = sum(ref.usable for ref in refs.values())
    run.history_runs = max((ref.comparable for ref in refs.values()), default=0) if pairs else None
    judged = gate.rejudge(checks, refs, run.analysis, run.settings.tolerances)
    since = {c.kernel: refs[(c.kernel, c.metric)].since_time for c in judged
             if c.outcome == FAILED and (c.kernel, c.metric) in refs and refs[(c.kernel, c.metric)].usable}
    if run.store_error is not None:
        return judged, {}
    from perfcheck.metrics.timeline import RANGE_PREFIX, RUN

    steps = [t for k, t in since.items() if k.startswith(RANGE_PREFIX)]
    if steps and RUN not in since:  # a step's diagnosis reads the run's timeline row beside it
        since[RUN] = None if None in steps else min(t for t in steps if t is not None)
    try:
        return judged, gate.recent_values(run.settings.history, machine, run.name, since,
                                          read_only=run.settings.history_read_only)
    except PerfcheckError as exc:
        run.store_error = str(exc)
        return judged, {}


def _explained(run: SuiteRun, checks: list[Check], history: Mapping[str, Mapping[str, "np.ndarray"]]) -> list[Check]:
    """Failed baseline-relative checks with the diagnosis of their kernel: this run
    against the history's recent runs where the history judged it, else against the
    stored baseline's values (``perfcheck.diagnosis``)."""
    failed = {id(c) for c in checks if c.origin == "baseline" and c.outcome == FAILED}
    if not failed or run.analysis is None:
        return checks
    from perfcheck.baseline import is_exact
    from perfcheck.diagnosis import LABELS, Sides, diagnose_many, whole_run, with_run, with_whole_run
    from perfcheck.history.runs import duration_samples, measurements

    now = measurements(run.analysis)
    # every kernel's duration against the baseline: did the whole run move?
    stored_kernels = run.baseline.kernels if run.baseline is not None else {}
    ratios = [now[k]["duration"] / b.metrics["duration"] * 100.0 - 100.0 for k, b in stored_kernels.items()
              if k in now and "duration" in now[k] and b.metrics.get("duration")]
    whole = whole_run(ratios)
    table = run.analysis.kernels
    present = [c for c in LABELS if c in table.columns]
    labels = {str(k): {c: str(v) for c, v in row.items() if isinstance(v, str) and v}
              for k, row in table.set_index(table["kernel"].astype(str))[present].to_dict("index").items()}
    spread = duration_samples(run.analysis)
    arch = run.analysis.target.arch.name if run.analysis.target is not None else None
    stored_rows = {k: b.metrics for k, b in stored_kernels.items()}
    cases: dict[int, Sides] = {}
    for at, check in enumerate(checks):
        # a range row (a step) is read with the run's timeline row beside it
        before = with_run(check.kernel, history) or with_run(check.kernel, stored_rows)
        after = with_run(check.kernel, now)
        if id(check) not in failed or not before or not after:
            continue
        # one run a side: a timing's noise is this run's within-run spread of the durations
        sigma = float(spread.get(check.kernel, {}).get("spread", 0.0))
        noise = {m: sigma for m in after if not is_exact(m)}
        cases[at] = Sides(before, after, subject=check.metric, arch=arch, labels_after=labels.get(check.kernel),
                          noise=noise)
    # all at once (one occupancy table for every side): a night when the whole run moved
    # fails every kernel, and with history every side's medians differ, so an occupancy
    # table each (``diagnose``'s cache of them hits on a stored baseline's values only)
    found = dict(zip(cases, diagnose_many(list(cases.values()))))
    return [replace(check, diagnosis=with_whole_run(found[at], whole).text()) if at in found else check
            for at, check in enumerate(checks)]


def _accepted(check: Check) -> Check:
    if check.origin != "baseline" or check.outcome != FAILED:
        return check
    return replace(check, outcome=RECORDED, message=f"{check.message} (accepted: baseline updated)")


def evaluate_suite(suite: SuiteSettings, *, record_command: str | None = None) -> SuiteRun:
    """``prepare`` + ``check`` with the suite's own expectations. ``record_command``:
    the command that records this suite's baseline, for strict-baseline messages."""
    run = prepare(suite)
    run.record_command = record_command
    if not run.skipped:
        check(run)
    return run


# --- baselines ---------------------------------------------------------------------------------

def settle_baseline(run: SuiteRun, *, write: bool = True) -> None:
    """Set ``run.action`` and ``run.fresh`` (the baseline this run records or updates),
    and write it when ``write`` (``finish`` writes the runs sharing a file together)."""
    if run.skipped or run.analysis is None or run.baseline_path is None:
        return
    from perfcheck import baseline as baselines

    fresh = None
    if run.settings.update_baseline:
        fresh = baselines.from_analysis(run.name, run.analysis)
        if run.merge and run.baseline is not None:
            fresh = baselines.merge(run.baseline, fresh)
        if run.action == MISMATCH:
            run.notices.append(f"suite {run.name!r}: {run.baseline_path} replaced by this machine's baseline")
        run.action = UPDATED
    elif run.action == MISMATCH:
        return
    elif run.baseline is None:
        if not any(c.origin == "baseline" for c in run.checks):
            run.action = NONE
            return
        if run.settings.strict_baseline:  # its checks are errors that say how to record it
            run.action = MISSING
            return
        fresh = baselines.from_analysis(run.name, run.analysis)
        run.action = RECORDED_ACTION
        # Loud: nothing was compared, and a CI run would have refused this.
        run.notices.append(
            f"suite {run.name!r}: no baseline at {display_path(run.baseline_path)}: RECORDED this run's values "
            f"as the new baseline, nothing was compared (with CI set or --strict-baseline this is an error); "
            f"review it and commit it")
    else:
        run.action = COMPARED
        new = sorted({c.kernel for c in run.checks if c.outcome == RECORDED and c.kernel not in run.baseline.kernels})
        if new:
            current = baselines.from_analysis(run.name, run.analysis)
            kernels = {**run.baseline.kernels, **{k: current.kernels[k] for k in new if k in current.kernels}}
            fresh = replace(run.baseline, kernels=kernels)
            run.notices.append(f"suite {run.name!r}: added {len(new)} new kernel(s) to the baseline: {', '.join(new)}")
    run.fresh = fresh
    if fresh is not None and write:
        _write_baseline(run.baseline_path, fresh, [run])


def _watched(runs: Sequence[SuiteRun]) -> dict[str, list[str]]:
    watched: dict[str, list[str]] = {}
    for run in runs:
        for c in run.checks:
            if c.metric not in watched.setdefault(c.kernel, []):
                watched[c.kernel].append(c.metric)
    return watched


def _write_baseline(path: Path, fresh: "Baseline", runs: Sequence[SuiteRun]) -> None:
    from perfcheck import baseline as baselines

    if any(r.action == UPDATED for r in runs):  # what the review of the diff should look at
        previous = next((r.previous for r in runs if r.previous is not None), None)
        found = baselines.changes(previous, fresh, _watched(runs))
        for r in runs:
            r.changes = found
    # What this session measured, and what it left out on purpose (an update drops the
    # stored kernels it no longer runs): the rest of the file is whatever is on disk
    # when it is written, so another session recording the same suite meanwhile keeps
    # its kernels.
    ours: set[str] = set()
    stored: set[str] = set()
    for r in runs:
        read = set(r.baseline.kernels) if r.baseline is not None else set()
        stored |= read
        if r.fresh is not None:
            ours |= set(r.fresh.kernels) - (read if r.action == COMPARED else set())
    dropped = stored - set(fresh.kernels)
    aliases = next((r.settings.aliases for r in runs if r.settings.aliases), None)
    try:
        baselines.write_merged(path, fresh, ours=ours, dropped=dropped, aliases=aliases)
    except OSError as exc:
        raise UsageError(f"cannot write baseline {path}: {exc.strerror or exc}") from None


def settle_baselines(runs: Sequence[SuiteRun], *, write: bool = True) -> None:
    """``settle_baseline`` for every run, then one write per baseline file: runs that
    share a file (pytest tests with the same ``suite=``, serially or under
    pytest-xdist) are written together, every run's kernels kept (later runs win for a
    kernel they both measured). Killed writers' temp files in the folders are removed."""
    from perfcheck.atomicfile import clean_stale_temps

    groups: dict[Path, list[SuiteRun]] = {}
    for run in runs:
        settle_baseline(run, write=False)
        if run.baseline_path is not None and not run.skipped:
            groups.setdefault(Path(run.baseline_path), []).append(run)
    if not write:
        return
    # Temp files killed writers left anywhere under the baseline directories (other
    # suites' folders, machines/): a run that writes baselines leaves none behind.
    for folder in {Path(r.settings.baseline_dir) for r in runs if not r.skipped}:
        if folder.is_dir():
            for sub in [folder, *(d for d in folder.iterdir() if d.is_dir())]:
                clean_stale_temps(sub)
    for path, group in groups.items():  # each path's folder was cleaned above
        fresh = [r.fresh for r in group if r.fresh is not None]
        if not fresh:
            continue
        kernels: dict = {}
        for baseline in fresh:
            kernels.update(baseline.kernels)
        combined = replace(fresh[-1], kernels=kernels)
        if len(fresh) > 1:
            kept = [r for r in group if r.baseline is not None and r.fresh is None]
            for r in kept:  # a run that compared without adding kernels: the stored ones stay
                combined = replace(combined, kernels={**r.baseline.kernels, **combined.kernels})
        _write_baseline(path, combined, group)


# --- reports -----------------------------------------------------------------------------------

def _slug(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip("-.") or "suite"


def _statuses(active: Sequence[SuiteRun]) -> dict[str, "BaselineStatus"]:
    from perfcheck.report.results import BaselineStatus

    return {r.name: BaselineStatus(display_path(r.baseline_path) if r.baseline_path else None, r.action)
            for r in active if r.action != NONE}


def results_of_run(runs: Sequence[SuiteRun], record: "RunRecord | None") -> dict[str, object]:
    """The run's results document: what the JSON results file holds, and what the
    history stores of the run (built once for both: its 32,000 values took as long
    to gather as to store)."""
    from perfcheck.history.runs import run_dict, suite_extras
    from perfcheck.report.results import results_document

    active = [r for r in runs if not r.skipped]
    return results_document({r.name: r.checks for r in active},
                            analyses={r.name: r.analysis for r in active if r.analysis is not None},
                            baselines=_statuses(active), run=run_dict(record) if record is not None else None,
                            extras={r.name: suite_extras(r.analysis) for r in active if r.analysis is not None})


def write_reports(runs: Sequence[SuiteRun], settings: Settings, record: "RunRecord | None" = None,
                  document: Mapping[str, object] | None = None) -> dict[str, list[Path]]:
    """Write every report ``settings`` asks for (and $GITHUB_STEP_SUMMARY when set);
    ``record``: the run's identity, carried by the JSON results file; ``document``:
    that file's content when already made (``results_of_run``)."""
    active = [r for r in runs if not r.skipped]
    suites = {r.name: r.checks for r in active}
    analyses = {r.name: r.analysis for r in active if r.analysis is not None}
    statuses = _statuses(active)
    properties = {"config": str(settings.config)} if settings.config else {}
    written: dict[str, list[Path]] = {}

    def guarded(kind: str, path: Path, action) -> None:  # noqa: ANN001
        try:
            result = action()
        except OSError as exc:
            raise UsageError(f"cannot write the {kind} report {path}: {exc.strerror or exc}") from None
        paths = result if isinstance(result, list) else [result] if result is not None else []
        written.setdefault(kind, []).extend(Path(p) for p in paths)

    if settings.json is not None:
        from perfcheck.report.results import write_document

        content = document if document is not None else results_of_run(runs, record)
        guarded("json", settings.json, lambda: write_document(settings.json, content))
    if settings.openmetrics is not None:
        from perfcheck.report.openmetrics import write_openmetrics

        guarded("openmetrics", settings.openmetrics, lambda: write_openmetrics(settings.openmetrics, suites))
    attachments: dict[str, str] = {}  # suite -> its roofline PNG, attached to failing JUnit cases
    pictures: dict[str, list[Path]] = {}  # suite -> its roofline PNGs, linked from the Markdown summary
    if settings.roofline is not None:
        from perfcheck.report.results import device_label
        from perfcheck.report.roofline import axis_limits, plot_instruction_roofline, plot_roofline, why_not_plotted

        # Suites of one device share their axes (FLOP plots, and instruction plots), so
        # "before" and "after" pictures side by side show where the kernels moved.
        devices: dict[str, list[SuiteRun]] = {}
        for run in active:
            if run.analysis is not None and len(run.analysis.kernels):
                devices.setdefault(device_label(run.analysis), []).append(run)
        shared = {(label, inst): axis_limits([(r.analysis, r.baseline) for r in group], instructions=inst)
                  for label, group in devices.items() for inst in (False, True)}
        plotted: dict[tuple[object, ...], str] = {}  # inputs -> suite whose plot shows them
        for run in active:
            if run.analysis is None or not len(run.analysis.kernels):
                continue
            # pytest: tests that load the same profiles are one picture, drawn once
            key = (tuple(sorted(str(p) for p in run.settings.profiles)), run.settings.arch,
                   tuple(str(p) for p in run.settings.peaks))
            if run.profile is None and run.settings.profiles and key in plotted:
                if plotted[key] in attachments:
                    attachments[run.name] = attachments[plotted[key]]
                pictures[run.name] = pictures.get(plotted[key], [])
                continue
            plotted[key] = run.name
            reason = why_not_plotted(run.analysis)
            if reason is not None:
                run.notices.append(f"suite {run.name!r}: no roofline plot: {reason}")
                continue
            stem = settings.roofline / _slug(run.name)
            before = len(written.get("roofline", []))
            device = device_label(run.analysis)
            guarded("roofline", stem, lambda run=run, stem=stem, device=device: plot_roofline(
                run.analysis, stem, suite=run.name, baseline=run.baseline, limits=shared[(device, False)]))
            png = next((p for p in written.get("roofline", [])[before:] if p.suffix == ".png"), None)
            if png is not None:
                attachments[run.name] = display_path(png)
            inst = settings.roofline / f"{_slug(run.name)}-instructions"
            guarded("roofline", inst, lambda run=run, inst=inst, device=device: plot_instruction_roofline(
                run.analysis, inst, suite=run.name, baseline=run.baseline, limits=shared[(device, True)]))
            pictures[run.name] = [p for p in written.get("roofline", [])[before:] if p.suffix == ".png"]
    from perfcheck.report.markdown import ci_context, history_line, markdown_summary, write_markdown, write_step_summary

    gated = [r for r in active if r.settings.history is not None and not r.settings.update_baseline]
    used = [r.history_runs for r in gated if r.history_runs is not None]
    store = gated[0].settings.history if gated else None
    history = history_line(display_path(store) if isinstance(store, Path) else str(store),
                           read_only=settings.history_mode == "read-only",
                           judged=sum(r.history_judged for r in gated), runs=max(used) if used else None) \
        if gated else None
    context = ci_context()
    if settings.markdown is not None:
        # the images relative to the summary, so they show beside it (a PR's files, an artifact)
        here = Path(settings.markdown).resolve().parent
        images = {name: [Path(os.path.relpath(Path(p).resolve(), here)).as_posix() for p in paths]
                  for name, paths in pictures.items()}
        text = markdown_summary(suites, analyses, baselines=statuses, context=context, images=images, history=history)
        guarded("markdown", settings.markdown, lambda: write_markdown(settings.markdown, text))
    # GitHub's step summary cannot show files of the runner: no image links there
    summary = markdown_summary(suites, analyses, baselines=statuses, context=context, history=history)
    guarded("step-summary", Path("$GITHUB_STEP_SUMMARY"), lambda: write_step_summary(summary))
    if settings.junit is not None:
        from perfcheck.report.junit import write_junit

        guarded("junit", settings.junit, lambda: write_junit(
            settings.junit, suites, analyses=analyses, baselines=statuses, properties=properties,
            flavour=settings.junit_flavour, attachments=attachments))
    order = ["junit", "markdown", "step-summary", "json", "openmetrics", "roofline"]
    return {k: written[k] for k in sorted(written, key=lambda k: order.index(k) if k in order else len(order))
            if written[k]}


def finish(runs: Sequence[SuiteRun], settings: Settings) -> Run:
    """Settle baselines (written only when ``settings.write_baselines``), then write
    every report; the caller exits with ``Run.exit_code`` after this returns."""
    settle_baselines(runs, write=settings.write_baselines)
    if settings.write_baselines:
        try:
            accept_open_regressions(runs)
        except PerfcheckError as exc:  # the store: reported after the reports, like the gate's
            for run in runs:
                run.store_error = run.store_error or str(exc)
    from perfcheck.history.runs import current_run

    record = current_run() if settings.json is not None or settings.history is not None else None
    failed = next((r.store_error for r in runs if r.store_error), None)  # the gate could not read it
    appending = failed is None and settings.history is not None and settings.write_baselines and record is not None \
        and settings.history_mode != "read-only"
    # made once for the JSON file and the history when both want it; else the JSON
    # writer makes it and lets it go (it is the size of the run's every value)
    document = results_of_run(runs, record) if settings.json is not None and appending else None
    # The history is committed after every report: a store that cannot be read or written
    # (read-only file system, damaged, newer schema, not a store) costs the run its
    # history entry, never its reports, and the exit status says so (Run.exit_code); a
    # report that cannot be written (or an interrupt) keeps the run out of it. The reports
    # are written by the append, before its commit (``Store.add``'s ``alongside``: SQLite
    # inserts the values meanwhile), or before the append where they hold roofline plots
    # (seconds of drawing: other writers would wait that long for the store), or after it
    # where the store failed first.
    written: list[dict[str, list[Path]]] = []
    started: list[bool] = []

    def reports() -> None:
        started.append(True)
        written.append(write_reports(runs, settings, record, document))

    if appending and settings.history is not None and record is not None:
        if settings.roofline is not None:
            reports()
        try:
            append_history(runs, settings.history, record, document, alongside=None if started else reports)
        except PerfcheckError as exc:
            if started and not written:
                raise  # a report's own error (UsageError), not the store's: the run was rolled back
            failed = str(exc)
    if not started:
        reports()
    run = Run(list(runs), written[0])
    if failed is not None:
        later = f"; the results file {display_path(settings.json)} can be added later with `perfcheck history add`" \
            if settings.json is not None and settings.write_baselines else ""
        run.history_error = f"{failed}; this run was not added to the history{later}"
    return run


ACCEPTED_BY_UPDATE = "baseline updated (perfcheck baseline update)"


def accept_open_regressions(runs: Sequence[SuiteRun]) -> None:
    """A baseline update makes this run the kernels' reference: their open regressions
    in the history (perfcheck.history.lifecycle) are accepted with it, in the accepted
    file, and a notice says so. Read-only for the store; the file is written atomically."""
    from perfcheck import baseline as baselines
    from perfcheck.history import accepted, lifecycle
    from perfcheck.history.store import machine_key

    for run in runs:
        settings = run.settings
        if run.skipped or run.analysis is None or not settings.update_baseline or settings.history is None:
            continue
        path = settings.accepted_file
        kernels = sorted(run.analysis.kernels["kernel"].astype(str).unique())
        machine = machine_key(baselines.fingerprint(run.analysis))
        found = lifecycle.open_in_store(settings.history, machine, run.name, kernels, accepted.read(path),
                                        read_only=settings.history_read_only)
        if not found:
            continue
        entries = accepted.accept(found, reason=ACCEPTED_BY_UPDATE, by=accepted.who(), every_metric=True)
        accepted.append(path, entries)
        names = sorted({s.point.kernel for s in found})
        run.notices.append(
            f"suite {run.name!r}: the baseline update accepted {len(found)} open regression"
            f"{'s' if len(found) != 1 else ''} of {len(names)} kernel{'s' if len(names) != 1 else ''} "
            f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) in {display_path(path)}: commit it with "
            "the baseline")


def append_history(runs: Sequence[SuiteRun], path: "StoreLocation", record: "RunRecord",
                   document: Mapping[str, object] | None = None, *,
                   alongside: "Callable[[], object] | None" = None) -> None:
    """Append this run's values to the history store: once, at the end of a run
    (``document``: the run's results document, when already made; ``alongside``: the
    store's ``add``'s, work done before the commit, while the values are inserted)."""
    from perfcheck.history.runs import results_of
    from perfcheck.history.store import open_store

    document = document if document is not None else results_of_run(runs, record)
    with _collector_paused():
        results, machines = results_of(document, [r.name for r in runs if not r.skipped and r.analysis is not None])
        with open_store(path) as store:
            store.add(record, results, machines, alongside=alongside)


def run_suites(settings: Settings) -> Run:
    """Check every suite of ``settings`` and write the reports."""
    return finish([evaluate_suite(suite) for suite in settings.suites.values()], settings)


# --- perfcheck compare ---------------------------------------------------------------------------

def _json_profile(spec: str) -> bool:
    """Whether ``spec`` names a profile written as JSON (a Kineto trace, a rocprof
    results.json) rather than a results file: those end in .json too."""
    from perfcheck.errors import PerfcheckError
    from perfcheck.ingest import detect

    if not Path(spec).is_file():
        return False
    try:
        return detect(Path(spec), "profile") is not None
    except PerfcheckError:
        return False


def comparison_side(spec: str, options: Mapping[str, object]) -> "Side":
    """One side of ``perfcheck compare``: a results file (``FILE.json``, or
    ``FILE.json:SUITE`` for one of several suites) read as written, a suite of the
    config (``options``: the resolver's command-line values, ``config`` among them)
    whose profiles are read now with its device and peaks, or a profile path read
    with the command's ``--arch``/``--peaks``. Nothing is written."""
    from perfcheck.comparison import Side, results_analysis
    from perfcheck.config import resolver

    path, _, suite = spec.rpartition(":") if spec.rpartition(":")[0].lower().endswith(".json") else (spec, "", "")
    if path.lower().endswith(".json") and not _json_profile(spec):
        name, analysis = results_analysis(path, suite or None)
        return Side(f"{Path(path).name}" + (f" (suite {name})" if suite else ""), analysis)
    resolved = resolver(cli=options)
    if Path(spec).exists() and spec not in resolved.suite_names():
        # a profile (file or tool folder), read with the command's --arch/--peaks/config device
        from perfcheck.analysis import analyse

        peaks_value, arch_value = resolved.get("peaks"), resolved.get("arch")
        peaks = None
        if peaks_value is not None and peaks_value.value:
            from perfcheck.ingest import read_peaks

            peaks = read_peaks(list(peaks_value.value))  # type: ignore[arg-type]
        arch = str(arch_value.value) if arch_value is not None and arch_value.value else _machine_arch(peaks)
        return Side(Path(spec).name, analyse([spec], arch=arch, peaks=peaks))
    known = resolved.suite_names()
    if spec not in known:
        where = resolved.config.display if resolved.config is not None else "no config file found"
        raise UsageError(f"{spec!r} is not a results file (FILE.json), a profile or a suite of the config ({where}"
                         + (f": suites {', '.join(known)}" if known else "") + ")")
    settings = resolved.settings([spec], validate=False)  # expectations are not needed to compare
    run = prepare(settings.suites[spec])
    if run.analysis is None:
        raise UsageError(f"suite {spec!r}: {'; '.join(run.notices) or 'nothing to compare'}")
    return Side(f"suite {spec}", run.analysis)


def write_comparison(comparison: "Comparison", *, roofline: Path | None = None, markdown: Path | None = None,
                     ) -> dict[str, list[Path]]:
    """The comparison's roofline(s) (arrows from A to B) and Markdown, as asked."""
    from perfcheck.report.comparison import comparison_markdown
    from perfcheck.report.roofline import plot_comparison

    written: dict[str, list[Path]] = {}
    # An unwritable path is the user's to fix; the error names the option's path (an
    # atomic write's failure names its temporary file, which the user never gave).
    try:
        if roofline is not None:
            images = plot_comparison(comparison.before.analysis, comparison.after.analysis, Path(roofline) / "compare",
                                     title=f"{comparison.before.label} \u2192 {comparison.after.label}")
            images += plot_comparison(comparison.before.analysis, comparison.after.analysis,
                                      Path(roofline) / "compare-instructions", instructions=True,
                                      title=f"{comparison.before.label} \u2192 {comparison.after.label}")
            written["roofline"] = images
    except OSError as exc:
        raise UsageError(f"cannot write the comparison's roofline in {roofline}: {exc.strerror or exc}") from None
    try:
        if markdown is not None:
            from perfcheck.atomicfile import write_atomic

            pngs = [p for p in written.get("roofline", []) if p.suffix == ".png"]
            text = comparison_markdown(comparison, images=[os.path.relpath(p, Path(markdown).parent) for p in pngs])
            written["markdown"] = [write_atomic(markdown, text)]
    except OSError as exc:
        raise UsageError(f"cannot write the comparison's Markdown {markdown}: {exc.strerror or exc}") from None
    return written
