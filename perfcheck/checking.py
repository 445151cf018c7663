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
  suite's profiles are absent and it says ``skip_if_missing``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.config import ConfigError, Settings, SuiteSettings
from perfcheck.errors import PerfcheckError, UsageError
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, Check

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis
    from perfcheck.baseline import Baseline
    from perfcheck.history.store import RunRecord
    from perfcheck.model import Peaks, Profile

COMPARED, RECORDED_ACTION, UPDATED = "compared", "recorded", "updated"
MISMATCH, NONE, SKIPPED = "fingerprint-mismatch", "none", "skipped"


@dataclass
class SuiteRun:
    """One suite's analysis, checks and baseline."""

    settings: SuiteSettings
    analysis: "Analysis | None" = None
    checks: list[Check] = field(default_factory=list)
    baseline: "Baseline | None" = None  # the stored baseline the checks compare against
    baseline_path: Path | None = None
    action: str = NONE
    notices: list[str] = field(default_factory=list)  # warnings for the user (stderr, pytest summary)
    merge: bool = False  # update by merging this run into the stored baseline (repeated runs)
    profile: "Profile | None" = None  # measured in memory (perf.measure) instead of read from files

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def skipped(self) -> bool:
        return self.action == SKIPPED


@dataclass
class Run:
    """The result of ``run_suites``/``finish``: suites in order, and the reports written."""

    suites: list[SuiteRun]
    reports: dict[str, list[Path]] = field(default_factory=dict)

    @property
    def checks(self) -> list[Check]:
        return [c for s in self.suites for c in s.checks]

    def counts(self) -> dict[str, int]:
        counts = {PASSED: 0, FAILED: 0, RECORDED: 0, ERROR: 0}
        for check in self.checks:
            counts[check.outcome] = counts.get(check.outcome, 0) + 1
        return counts

    @property
    def exit_code(self) -> int:
        """0 when every check passed or recorded; 1 when one failed or errored."""
        return 0 if all(c.passed for c in self.checks) else 1


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
        from perfcheck.run.runner import run_suite

        suite, ran = run_suite(suite, arch)
    if profile is not None:
        analysis = analyse_profile(profile, arch=arch, peaks=peaks)
    else:
        analysis = analyse(list(suite.profiles), format=suite.format, arch=arch, peaks=peaks)
    run = SuiteRun(suite, analysis, profile=profile)
    if ran is not None:
        run.notices.append(f"suite {suite.name!r}: profiled with {ran.describe()}")
    if suite.arch is None and arch is not None:
        run.notices.append(f"suite {suite.name!r}: GPU {arch!r} from the machine file (no device set)")
    fingerprint = baselines.fingerprint(analysis)
    run.baseline_path = baselines.baseline_path(suite.baseline_dir, suite.name, fingerprint)
    stored = baselines.load(run.baseline_path)
    if stored is not None and (why := baselines.mismatch(stored, fingerprint)):
        run.action = MISMATCH
        run.notices.append(f"suite {suite.name!r}: {why}")
    elif stored is None:
        others = baselines.other_baselines(suite.baseline_dir, suite.name, fingerprint)
        if others:
            run.notices.append(
                f"suite {suite.name!r}: no baseline for this machine ({_fingerprint_text(fingerprint)}); "
                f"not compared with those of other machines: {', '.join(p.name for p in others)}"
            )
    else:
        run.baseline = stored
        run.action = COMPARED
    return run


def _fingerprint_text(fingerprint: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in fingerprint.items())


def check(run: SuiteRun, expectations: Mapping[str, Sequence[str]] | None = None) -> list[Check]:
    """Evaluate ``expectations`` (default: the suite's) and add the checks to ``run``.
    With update_baseline, a baseline-relative failure is accepted: the new value
    becomes the baseline, and the check says what changed."""
    from perfcheck.expect import evaluate

    if run.analysis is None:
        raise UsageError(f"suite {run.name!r} was not read (skipped: {run.settings.missing})")
    expectations = run.settings.expect if expectations is None else expectations
    checks = evaluate(run.name, expectations, run.analysis, run.baseline, tolerances=run.settings.tolerances)
    if run.settings.history is not None and not run.settings.update_baseline:
        checks = _history_gate(run, checks)
    if run.settings.update_baseline:
        checks = [_accepted(c) for c in checks]
    run.checks.extend(checks)
    return checks


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


def evaluate_suite(suite: SuiteSettings) -> SuiteRun:
    """``prepare`` + ``check`` with the suite's own expectations."""
    run = prepare(suite)
    if not run.skipped:
        check(run)
    return run


# --- baselines ---------------------------------------------------------------------------------

def settle_baseline(run: SuiteRun, *, write: bool = True) -> None:
    """Set ``run.action`` and write the baseline file when this run records or updates it."""
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
        fresh = baselines.from_analysis(run.name, run.analysis)
        run.action = RECORDED_ACTION
    else:
        run.action = COMPARED
        new = sorted({c.kernel for c in run.checks if c.outcome == RECORDED and c.kernel not in run.baseline.kernels})
        if new:
            current = baselines.from_analysis(run.name, run.analysis)
            kernels = {**run.baseline.kernels, **{k: current.kernels[k] for k in new if k in current.kernels}}
            fresh = replace(run.baseline, kernels=kernels)
            run.notices.append(f"suite {run.name!r}: added {len(new)} new kernel(s) to the baseline: {', '.join(new)}")
    if fresh is not None and write:
        try:
            baselines.write(run.baseline_path, fresh)
        except OSError as exc:
            raise UsageError(f"cannot write baseline {run.baseline_path}: {exc.strerror or exc}") from None


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

    if settings.junit is not None:
        from perfcheck.report.junit import write_junit

        guarded("junit", settings.junit, lambda: write_junit(
            settings.junit, suites, analyses=analyses, baselines=statuses, properties=properties))
    from perfcheck.report.markdown import markdown_summary, write_markdown, write_step_summary

    text = markdown_summary(suites, analyses, baselines=statuses)
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
    if settings.roofline is not None:
        from perfcheck.report.roofline import plot_instruction_roofline, plot_roofline

        for run in active:
            if run.analysis is None or not len(run.analysis.kernels):
                continue
            stem = settings.roofline / _slug(run.name)
            guarded("roofline", stem, lambda run=run, stem=stem: plot_roofline(
                run.analysis, stem, suite=run.name, baseline=run.baseline))
            inst = settings.roofline / f"{_slug(run.name)}-instructions"
            guarded("roofline", inst, lambda run=run, inst=inst: plot_instruction_roofline(
                run.analysis, inst, suite=run.name, baseline=run.baseline))
    return {k: v for k, v in written.items() if v}


def finish(runs: Sequence[SuiteRun], settings: Settings) -> Run:
    """Settle baselines (written only when ``settings.write_baselines``), then write
    every report; the caller exits with ``Run.exit_code`` after this returns."""
    for run in runs:
        settle_baseline(run, write=settings.write_baselines)
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


def display_path(path: Path) -> str:
    """``path`` as a user reads it: relative to the working directory when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
