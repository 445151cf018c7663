"""What a check run produced: per suite its analysis, checks and baseline action
(``SuiteRun``), and the whole run with the reports written (``Run``).

``perfcheck.checking`` (the suite runner) fills these records in; the reports render
them (``report.text``, ``report.github``, ``report.exports``), so they sit below both,
and the reports never import the runner. The baseline actions are described in
``perfcheck.checking``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, Check

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis
    from perfcheck.baseline import Baseline
    from perfcheck.config import SuiteSettings
    from perfcheck.model import Profile

COMPARED, RECORDED_ACTION, UPDATED = "compared", "recorded", "updated"
MISMATCH, NONE, SKIPPED, MISSING = "fingerprint-mismatch", "none", "skipped", "missing"


@dataclass
class SuiteRun:
    """One suite's analysis, checks and baseline."""

    settings: "SuiteSettings"
    analysis: "Analysis | None" = None
    checks: list[Check] = field(default_factory=list)
    baseline: "Baseline | None" = None  # the stored baseline the checks compare against
    baseline_path: Path | None = None
    action: str = NONE
    notices: list[str] = field(default_factory=list)  # warnings for the user (stderr, pytest summary)
    merge: bool = False  # update by merging this run into the stored baseline (repeated runs)
    profile: "Profile | None" = None  # measured in memory (perf.measure) instead of read from files
    fingerprint: dict[str, str] = field(default_factory=dict)  # this run's machine and profiler
    # The baseline on file before this run, even when not compared (recorded on another
    # machine or profiler version: the nearest such): for messages and update diffs.
    previous: "Baseline | None" = None
    record_command: str | None = None  # what records or updates this baseline (strict messages)
    fresh: "Baseline | None" = None  # what settle_baseline would write (finish writes it)
    changes: list = field(default_factory=list)  # baseline.KernelChange of an update or recording
    # The history gate's use of the store (None: no store): checks it judged, and the
    # most comparable runs any of their verdicts was taken over (the PR comment says so)
    history_judged: int = 0
    history_runs: int | None = None
    store_error: str | None = None  # the history store could not be read for the gate (one line)

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
    # The history store could not be read or written (one line); the reports were written.
    history_error: str | None = None

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
        """0 when every check passed or recorded; 1 when one failed or errored; 2 (an
        input error, as the CLI's) when the history store could not be used."""
        if self.history_error is not None:
            return 2
        return 0 if all(c.passed for c in self.checks) else 1


# How the records' paths (baselines, reports) are named to the user, by the runner's
# messages and the terminal report alike.
def display_path(path: Path) -> str:
    """``path`` as a user reads it: relative to the working directory when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
