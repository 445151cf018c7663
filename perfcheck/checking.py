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

from collections.abc import Mapping, Sequence
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
    from perfcheck.baseline import Baseline
    from perfcheck.history.store import RunRecord
    from perfcheck.model import Peaks, Profile
    from perfcheck.run.runner import RunResult

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
        profiler=suite.profiler, launcher=suite.launcher, timeout=suite.timeout, runs_dir=parent,
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
    if run.settings.history is not None and not run.settings.update_baseline:
        checks = _history_gate(run, checks)
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


def _history_gate(run: SuiteRun, checks: list[Check]) -> list[Check]:
    """Baseline-relative checks judged on this machine's recent history (read only)."""
    from perfcheck import baseline as baselines
    from perfcheck.history import gate
    from perfcheck.history.store import machine_key

    machine = machine_key(baselines.fingerprint(run.analysis))
    refs = gate.references(run.settings.history, machine, run.name, gate.gated_pairs(checks))
    return gate.rejudge(checks, refs, run.analysis, run.settings.tolerances)


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
    try:
        baselines.write(path, fresh)
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


def write_reports(runs: Sequence[SuiteRun], settings: Settings, record: "RunRecord | None" = None) -> dict[str, list[Path]]:
    """Write every report ``settings`` asks for (and $GITHUB_STEP_SUMMARY when set);
    ``record``: the run's identity, carried by the JSON results file."""
    from perfcheck.report.results import BaselineStatus

    active = [r for r in runs if not r.skipped]
    suites = {r.name: r.checks for r in active}
    analyses = {r.name: r.analysis for r in active if r.analysis is not None}
    statuses = {
        r.name: BaselineStatus(display_path(r.baseline_path) if r.baseline_path else None, r.action)
        for r in active if r.action != NONE
    }
    properties = {"config": str(settings.config)} if settings.config else {}
    written: dict[str, list[Path]] = {}

    def guarded(kind: str, path: Path, action) -> None:  # noqa: ANN001
        try:
            result = action()
        except OSError as exc:
            raise UsageError(f"cannot write the {kind} report {path}: {exc.strerror or exc}") from None
        paths = result if isinstance(result, list) else [result] if result is not None else []
        written.setdefault(kind, []).extend(Path(p) for p in paths)

    from perfcheck.report.markdown import ci_context, markdown_summary, write_markdown, write_step_summary

    text = markdown_summary(suites, analyses, baselines=statuses, context=ci_context())
    if settings.markdown is not None:
        guarded("markdown", settings.markdown, lambda: write_markdown(settings.markdown, text))
    guarded("step-summary", Path("$GITHUB_STEP_SUMMARY"), lambda: write_step_summary(text))
    if settings.json is not None:
        from perfcheck.report.results import write_results

        from perfcheck.history.runs import run_dict, suite_extras

        extras = {r.name: suite_extras(r.analysis) for r in active if r.analysis is not None}
        guarded("json", settings.json, lambda: write_results(
            settings.json, suites, analyses=analyses, baselines=statuses,
            run=run_dict(record) if record is not None else None, extras=extras))
    if settings.openmetrics is not None:
        from perfcheck.report.openmetrics import write_openmetrics

        guarded("openmetrics", settings.openmetrics, lambda: write_openmetrics(settings.openmetrics, suites))
    attachments: dict[str, str] = {}  # suite -> its roofline PNG, attached to failing JUnit cases
    if settings.roofline is not None:
        from perfcheck.report.roofline import plot_instruction_roofline, plot_roofline, why_not_plotted

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
                continue
            plotted[key] = run.name
            reason = why_not_plotted(run.analysis)
            if reason is not None:
                run.notices.append(f"suite {run.name!r}: no roofline plot: {reason}")
                continue
            stem = settings.roofline / _slug(run.name)
            before = len(written.get("roofline", []))
            guarded("roofline", stem, lambda run=run, stem=stem: plot_roofline(
                run.analysis, stem, suite=run.name, baseline=run.baseline))
            png = next((p for p in written.get("roofline", [])[before:] if p.suffix == ".png"), None)
            if png is not None:
                attachments[run.name] = display_path(png)
            inst = settings.roofline / f"{_slug(run.name)}-instructions"
            guarded("roofline", inst, lambda run=run, inst=inst: plot_instruction_roofline(
                run.analysis, inst, suite=run.name, baseline=run.baseline))
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
    from perfcheck.history.runs import current_run

    record = current_run() if settings.json is not None or settings.history is not None else None
    if settings.history is not None and settings.write_baselines and record is not None:
        append_history(runs, settings.history, record)
    return Run(list(runs), write_reports(runs, settings, record))


def append_history(runs: Sequence[SuiteRun], path: Path, record: "RunRecord") -> None:
    """Append this run's values to the history store: once, at the end of a run."""
    from perfcheck.history.runs import results_of
    from perfcheck.history.store import open_store

    results, machines = results_of([(r.name, r.analysis, r.checks) for r in runs if not r.skipped and r.analysis is not None])
    with open_store(path) as store:
        store.add(record, results, machines)


def run_suites(settings: Settings) -> Run:
    """Check every suite of ``settings`` and write the reports."""
    return finish([evaluate_suite(suite) for suite in settings.suites.values()], settings)
