"""Markdown summary for $GITHUB_STEP_SUMMARY, a PR comment or a GitLab note.

Quiet when nothing changed: one line. Loud when a check failed or could not be
evaluated: the failures first (what was observed, what was expected, the
baseline and the change), then every check in a collapsed <details>. New
baselines are worth a reviewer's look, so they get a short notice of their own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, XFAILED, XPASSED, Check
from perfcheck.report.results import (
    BaselineStatus,
    baseline_text,
    change_text,
    count_outcomes,
    devices_label,
    expected_text,
    observed_text,
    write_atomic,
)

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis

# GitHub caps a step summary at 1 MiB; a suite over thousands of kernels would
# not fit, and nobody reads past a few hundred rows (the JSON file has them all).
MAX_DETAIL_ROWS = 400

_OUTCOME_LABEL = {PASSED: "pass", RECORDED: "recorded", FAILED: "**FAIL**", ERROR: "**ERROR**",
                  XFAILED: "xfail", XPASSED: "xpass"}


def _cell(text: str) -> str:
    """Plain table cell: one line, no column breaks, no accidental HTML."""
    return text.replace("\n", " ").replace("|", "\\|").replace("<", "&lt;")


def _code(text: str) -> str:
    """Kernel names and expressions as code spans: C++ signatures are full of
    ``<``, ``*`` and ``_`` that Markdown would eat. GFM splits table cells on ``|``
    even inside a code span unless it is escaped."""
    text = text.replace("\n", " ").replace("`", "'").replace("|", "\\|")
    return f"`{text}`"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    align = ["---:" if i in right else "---" for i in range(len(header))]
    return [_row(header), _row(align), *(_row(r) for r in rows)]


def _suite_cell(check: Check) -> str:
    return _cell(check.suite or "-")


def _figure_cells(check: Check) -> list[str]:
    return [
        _cell(observed_text(check)),
        _cell(expected_text(check)),
        _cell(baseline_text(check)),
        _cell(change_text(check)),
    ]


def _failures(checks: Sequence[Check]) -> list[str]:
    rows = [
        [_suite_cell(c), _code(c.kernel), _code(c.expression), *_figure_cells(c)]
        for c in checks
        if c.outcome == FAILED
    ]
    if not rows:
        return []
    header = ["suite", "kernel", "expectation", "observed", "expected", "baseline", "change"]
    return ["**Failed**", "", *_table(header, rows, right=(3, 4, 5, 6)), ""]


def _errors(checks: Sequence[Check]) -> list[str]:
    rows = [
        [_suite_cell(c), _code(c.kernel), _code(c.expression), _cell(c.message)]
        for c in checks
        if c.outcome == ERROR
    ]
    if not rows:
        return []
    return ["**Could not be evaluated**", "", *_table(["suite", "kernel", "expectation", "problem"], rows), ""]


def _all_checks(checks: Sequence[Check]) -> list[str]:
    shown = checks[:MAX_DETAIL_ROWS]
    rows = [
        [_OUTCOME_LABEL.get(c.outcome, c.outcome), _suite_cell(c), _code(c.kernel), _code(c.expression), *_figure_cells(c)]
        for c in shown
    ]
    header = ["outcome", "suite", "kernel", "expectation", "observed", "expected", "baseline", "change"]
    lines = [
        "<details>",
        f"<summary>All {len(checks)} checks</summary>",
        "",
        *_table(header, rows, right=(4, 5, 6, 7)),
    ]
    if len(checks) > len(shown):
        lines += ["", f"... and {len(checks) - len(shown)} more (see the JSON results file)."]
    return [*lines, "", "</details>"]


def _recorded_notice(suites: Mapping[str, Sequence[Check]], baselines: Mapping[str, BaselineStatus]) -> list[str]:
    lines = []
    for name, checks in suites.items():
        recorded = sum(c.outcome == RECORDED for c in checks)
        status = baselines.get(name)
        if not recorded and not (status is not None and status.action == "updated"):
            continue
        where = f" in `{status.path}`" if status is not None and status.path else ""
        verb = "updated" if status is not None and status.action == "updated" else "recorded"
        what = f"{recorded} value{'s' if recorded != 1 else ''}" if recorded else "all values"
        lines.append(f"- suite {_code(name or '-')}: baseline {verb}{where} ({what}); review it like code before committing")
    return lines


def markdown_summary(
    suites: Mapping[str, Sequence[Check]],
    analyses: Mapping[str, "Analysis"] | None = None,
    *,
    baselines: Mapping[str, BaselineStatus] | None = None,
) -> str:
    """The summary text (ends with a newline)."""
    baselines = baselines or {}
    checks = [c for cs in suites.values() for c in cs]
    counts = count_outcomes(checks)
    device = devices_label(analyses)
    recorded = _recorded_notice(suites, baselines)
    if not checks:
        return f"perfcheck: no checks ran on {device}\n"
    # Expected failures (pytest xfail) are counted as pytest counts them, not as passes.
    expected = "".join(f", {counts[k]} {k}" for k in (XFAILED, XPASSED) if counts.get(k))
    if counts["ok"] and not recorded:
        return f"perfcheck: {counts['total']} checks passed{expected} on {device}\n"
    if counts["ok"]:
        head = f"perfcheck: {counts['total']} checks passed{expected} on {device}; new baseline values were written"
        return "\n".join([head, "", *recorded, "", *_all_checks(checks)]) + "\n"
    bad = [f"{counts[FAILED]} failed"] if counts[FAILED] else []
    bad += [f"{counts[ERROR]} could not be evaluated"] if counts[ERROR] else []
    lines = [f"### perfcheck: {' and '.join(bad)} of {counts['total']} checks on {device}", ""]
    lines += _failures(checks)
    lines += _errors(checks)
    if recorded:
        lines += ["**Baselines**", "", *recorded, ""]
    lines += _all_checks(checks)
    return "\n".join(lines) + "\n"


def write_markdown(path: str | Path, text: str) -> Path:
    """Write the summary to a file atomically (``perfcheck check --markdown F``)."""
    return write_atomic(path, text)


def write_step_summary(text: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Append ``text`` to the file $GITHUB_STEP_SUMMARY names, when set.

    GitHub collects the step's summary from that file after the step; other steps
    may have written to it already, so this appends (the one report that is not
    replaced atomically: the runner owns the file). Returns the path, or None."""
    env = os.environ if environ is None else environ
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text if text.endswith("\n") else text + "\n")
    return path
