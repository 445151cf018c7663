"""Markdown summary for $GITHUB_STEP_SUMMARY, a PR comment or a GitLab note.

What a reviewer reads, top to bottom:

* a headline with a status icon, the counts and the device;
* base and head refs and a link to the CI run (GitHub: ``GITHUB_SERVER_URL/
  GITHUB_REPOSITORY/actions/runs/GITHUB_RUN_ID``; GitLab: ``CI_JOB_URL``);
* per suite, the checks that failed or could not be evaluated, then new baselines,
  then the other checks in a collapsed <details> (a failed row is shown once), then
  the suite's roofline plots (``--roofline``), linked relative to the Markdown file.
  Each row: a status icon, the kernel, the expectation, observed vs expected, the
  change against the stored baseline (for every metric the baseline has, not only baseline-relative expectations), and
  the percentage of which peak, or the occupancy limiter. Six columns at most, so
  the table fits GitHub's 1012 px column without scrolling; long kernel names are
  shortened in the middle (the JSON results and JUnit carry the full name).

Everything taken from a profile (kernel and device names) is escaped: no control
character can split a row, no HTML renders, no Markdown emphasis or link forms.
The text never exceeds GitHub's 65,536 characters (a comment body's limit, and
the step summary's per-step display): the passed rows go first, then failed rows
beyond those that fit, and the summary says how many were left out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, XFAILED, XPASSED, Check
from perfcheck.report import mdescape
from perfcheck.report.results import (
    BaselineStatus,
    change_pct,
    count_outcomes,
    device_label,
    devices_label,
    expected_text,
    observed_text,
    write_atomic,
)
from perfcheck.units import format_value

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis

# GitHub's limit on a comment body and on what a step summary shows (docs.github.com:
# "job summaries": 1 MiB per step, but a PR comment takes 65,536 characters).
MAX_CHARS = 65536
# Nobody reads past a few hundred rows (the JSON file has them all).
MAX_DETAIL_ROWS = 400
MAX_NAME_CHARS = 72

# pytest xfail outcomes: an expected failure is not a pass (pytest counts it apart)
ICON = {PASSED: "✅", FAILED: "❌", ERROR: "⚠️", RECORDED: "🆕", XFAILED: "➖", XPASSED: "❗"}

# Every name from outside goes through one escaping (perfcheck.report.mdescape).
_cell = mdescape.text
_code = mdescape.code


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    align = ["---:" if i in right else ":---:" if h == "" else "---" for i, h in enumerate(header)]
    return [_row(header), _row(align), *(_row(r) for r in rows)]


# --- where the run happened -------------------------------------------------------------


@dataclass(frozen=True)
class CiContext:
    """Base and head refs and a link to the CI run, from the CI's environment."""

    base: str | None = None
    head: str | None = None
    sha: str | None = None
    run_url: str | None = None
    run_label: str = "run"

    def line(self) -> str | None:
        bits = []
        if self.base and self.head:
            bits.append(f"base {_code(self.base, table=False)} ← head {_code(self.head, table=False)}")
        elif self.head:
            bits.append(f"ref {_code(self.head, table=False)}")
        if self.sha:
            bits.append(f"commit {_code(self.sha[:12], table=False)}")
        if self.run_url and re.match(r"^https?://[^\s()<>]+$", self.run_url):
            bits.append(f"[{self.run_label}]({self.run_url})")
        return " · ".join(bits) or None


def ci_context(environ: Mapping[str, str] | None = None) -> CiContext:
    """GitHub Actions (GITHUB_*) or GitLab CI (CI_*) variables; empty elsewhere."""
    env = os.environ if environ is None else environ
    if env.get("GITHUB_ACTIONS") == "true" or env.get("GITHUB_RUN_ID"):
        url = None
        if env.get("GITHUB_SERVER_URL") and env.get("GITHUB_REPOSITORY") and env.get("GITHUB_RUN_ID"):
            url = f"{env['GITHUB_SERVER_URL'].rstrip('/')}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
        return CiContext(base=env.get("GITHUB_BASE_REF") or None,
                         head=env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or None,
                         sha=env.get("GITHUB_SHA") or None, run_url=url,
                         run_label=f"run {env['GITHUB_RUN_ID']}" if env.get("GITHUB_RUN_ID") else "run")
    if env.get("GITLAB_CI") == "true" or env.get("CI_JOB_URL"):
        return CiContext(base=env.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME") or None,
                         head=env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME") or env.get("CI_COMMIT_REF_NAME") or None,
                         sha=env.get("CI_COMMIT_SHA") or None, run_url=env.get("CI_JOB_URL") or None,
                         run_label=f"job {env['CI_JOB_ID']}" if env.get("CI_JOB_ID") else "job")
    return CiContext()


# --- cells ----------------------------------------------------------------------------------

# metric -> (the kernel-table column with its percentage, the ceiling it is a percentage of)
_PERCENT_OF = {"flop_rate": ("roofline_pct", None), "gips": ("gips_pct", "gips")}


def _kernel_rows(analysis: "Analysis | None", kernels: set[str]) -> dict[str, dict[str, object]]:
    """The kernel-table rows of the checked kernels (selected on the whole column, not
    the whole table turned into dicts: it may hold thousands of kernels and counters)."""
    if analysis is None or not len(analysis.kernels) or not kernels:
        return {}
    table = analysis.kernels
    picked = table[table["kernel"].astype(str).isin(kernels)]
    return {str(r["kernel"]): r for r in picked.to_dict("records")}


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if number != number else number


# A timeline time -> its share of the device's span (perfcheck.metrics.timeline).
_SHARE_OF_SPAN = {"idle": "idle_pct", "busy": "gpu_busy_pct", "compute_time": "compute_pct",
                  "comm_time": "comm_share_pct"}


def _timeline_cell(check: Check, row: Mapping[str, object]) -> str:
    """The last column of a timeline row: what a reviewer reads beside the number. A
    range: its calls and p90 ("50 calls, p90 493.5 us"); the run: a time's share of
    the span ("13.3% of span"), a whole-run count or size per training step
    ("2 per step"); no peak: a timeline has none."""
    from perfcheck.metrics.timeline import RANGE_PREFIX

    if check.kernel.startswith(RANGE_PREFIX):
        calls, p90 = _number(row.get("calls")), _number(row.get("duration_p90"))
        parts = ([f"{format_value(calls, 'count')} calls"] if calls is not None else []) + (
            [f"p90 {format_value(p90, 's')}"] if p90 is not None and check.metric.startswith("duration") else [])
        return _cell(", ".join(parts)) if parts else "-"
    share = _number(row.get(_SHARE_OF_SPAN.get(check.metric, "")))
    if share is not None:
        return f"{share:.1f}% of span"
    per_step = _number(row.get(f"{check.metric}_per_step"))
    if per_step is not None:
        return _cell(f"{format_value(per_step, check.unit or 'count')} per step")
    return "-"


def _peak_cell(check: Check, row: Mapping[str, object] | None, analysis: "Analysis | None") -> str:
    """"44.9% of empirical 1.075 TB/s", "limited by lds", or "-"."""
    if row is None:
        return "-"
    from perfcheck.metrics.timeline import is_timeline_name

    if is_timeline_name(check.kernel):
        return _timeline_cell(check, row)
    metric = check.metric
    # Occupancy and the launch resources that set it; scratch (spills) does not limit it.
    if metric in ("occupancy_pct", "achieved_occupancy_pct", "vgpr", "agpr", "sgpr", "registers",
                  "lds_per_workgroup"):
        limiter = row.get("occupancy_limiter")
        if isinstance(limiter, str) and limiter:
            return f"limited by {_cell(limiter)}"
        return "-"
    column, ceiling_name = _PERCENT_OF.get(metric, (f"{metric}_pct", metric))
    if metric == "duration":  # where the time goes: the kernel's main-memory bandwidth position
        column, ceiling_name = ("hbm_bw_pct", "hbm_bw") if "hbm_bw_pct" in row else ("mem_bw_pct", "mem_bw")
    pct = _number(row.get(column))
    if pct is None:
        return "-"
    ceilings = analysis.ceilings if analysis is not None else {}
    ceiling = ceilings.get(ceiling_name) if ceiling_name else None
    prefix = f"{ceiling_name} " if metric == "duration" else ""
    if column == "roofline_pct":
        roof = row.get("roofline_ceiling")
        return f"{pct:.1f}% of roofline" + (f" ({_cell(str(roof))})" if isinstance(roof, str) and roof else "")
    if ceiling is None:
        return f"{prefix}{pct:.1f}% of peak"
    from perfcheck.metrics.roofline import kernel_ceiling  # here: an analysis means pandas is loaded

    ceiling = kernel_ceiling(ceiling, row)  # the figure the percentage used: at this kernel's clock
    clock = f" at {format_value(ceiling.clock_hz, 'Hz')}" if ceiling.datasheet is not None else ""
    return f"{prefix}{pct:.1f}% of {ceiling.kind} {_cell(format_value(ceiling.value, ceiling.unit))}{clock}"


def _observed_cell(check: Check) -> str:
    if check.outcome == ERROR:
        return _cell(check.message)
    expected = expected_text(check)
    if expected == "-":
        return _cell(observed_text(check))
    return f"{_cell(observed_text(check))} vs {_cell(expected)}"


def _change_cell(check: Check) -> str:
    if check.baseline is None:
        return "-"
    base = _cell(format_value(check.baseline, check.unit))
    change = change_pct(check)
    if change is None:
        return base
    return f"{base} ({'+' if change >= 0 else '−'}{abs(change):.1f}%)"


HEADER = ["", "kernel", "expectation", "observed vs expected", "baseline (change)", "of peak / limiter"]


def _rows(checks: Sequence[Check], analysis: "Analysis | None", rows: Mapping[str, Mapping[str, object]]) -> list[list[str]]:
    return [
        [ICON.get(c.outcome, c.outcome), _code(c.kernel, MAX_NAME_CHARS), _code(c.expression),
         _observed_cell(c), _change_cell(c), _peak_cell(c, rows.get(c.kernel), analysis)]
        for c in checks
    ]


# --- the document --------------------------------------------------------------------------


def _checks(n: int) -> str:
    return f"{n} check" if n == 1 else f"{n} checks"


def _every(n: int) -> str:
    return "The 1 check" if n == 1 else f"All {n} checks"


def _headline(checks: Sequence[Check], device: str, recorded: bool) -> str:
    counts = count_outcomes(checks)
    where = _cell(device)
    if not checks:
        return f"### perfcheck: no checks ran on {where}"
    # Expected failures (pytest xfail) are counted as pytest counts them, not as passes.
    expected = "".join(f", {counts[k]} {k}" for k in (XFAILED, XPASSED) if counts.get(k))
    if counts["ok"]:
        tail = "; new baseline values were written" if recorded else ""
        passed = counts[PASSED] + counts[RECORDED]
        return (f"### {ICON[PASSED]} perfcheck: {_checks(passed)} passed{expected} "
                f"on {where}{tail}")
    bad = [f"{counts[FAILED]} failed"] if counts[FAILED] else []
    bad += [f"{counts[ERROR]} could not be evaluated"] if counts[ERROR] else []
    icon = ICON[FAILED] if counts[FAILED] else ICON[ERROR]
    return f"### {icon} perfcheck: {' and '.join(bad)}{expected} of {_checks(counts['total'])} on {where}"


def _baseline_notice(name: str, checks: Sequence[Check], status: BaselineStatus | None) -> str | None:
    recorded = sum(c.outcome == RECORDED for c in checks)
    if not recorded and not (status is not None and status.action == "updated"):
        return None
    where = f" in {_code(status.path, table=False)}" if status is not None and status.path else ""
    verb = "updated" if status is not None and status.action == "updated" else "recorded"
    what = f"{recorded} value{'s' if recorded != 1 else ''}" if recorded else "all values"
    return f"{ICON[RECORDED]} baseline {verb}{where} ({what}); review it like code before committing"


def _suite_section(name: str, checks: Sequence[Check], analysis: "Analysis | None",
                   status: BaselineStatus | None, several: bool, bad_limit: int, detail_limit: int,
                   rows: Mapping[str, Mapping[str, object]], images: Sequence[str] = ()) -> tuple[list[str], int, int]:
    """Lines of one suite; returns (lines, bad rows left out, detail rows left out).
    ``rows``: the kernel-table row of each checked kernel (``_kernel_rows``); ``images``:
    its roofline plots, as paths relative to the Markdown file, shown under its tables."""
    lines: list[str] = []
    counts = count_outcomes(checks)
    if several:
        state = ICON[PASSED] if counts["ok"] else ICON[FAILED] if counts[FAILED] else ICON[ERROR]
        lines += [f"#### {state} suite {_code(name or '-', table=False)} on {_cell(device_label(analysis))}: "
                  f"{counts[PASSED] + counts[RECORDED]} of {counts['total']} passed", ""]
    bad = [c for c in checks if c.outcome in (FAILED, ERROR)]
    shown_bad = bad[:bad_limit]
    if shown_bad:
        lines += [*_table(HEADER, _rows(shown_bad, analysis, rows)), ""]
        # why each failing kernel changed: one line per kernel (its checks share it)
        why = dict.fromkeys((c.kernel, c.diagnosis) for c in shown_bad if c.diagnosis)
        lines += [f"Why {_code(kernel, table=False)} changed: {_cell(text)}  " for kernel, text in why]
        if why:
            lines.append("")
    if len(bad) > len(shown_bad):
        left = len(bad) - len(shown_bad)
        lines += [f"… and {left} more failed {'check' if left == 1 else 'checks'}, left out to stay within GitHub's "
                  "65,536 characters (the JSON results and the job log list them all).", ""]
    notice = _baseline_notice(name, checks, status)
    if notice:
        lines += [notice, ""]
    # A failed row is shown once: in the table above; the collapsed table holds the rest.
    rest = [c for c in checks if c.outcome not in (FAILED, ERROR)] if bad else list(checks)
    shown = rest[:detail_limit]
    title = _every(len(rest)) if not bad else "The other check" if len(rest) == 1 else f"The other {len(rest)} checks"
    if shown:
        lines += ["<details>", f"<summary>{title}{' of ' + mdescape.html(name) if several else ''}</summary>", "",
                  *_table(HEADER, _rows(shown, analysis, rows)), ""]
        if len(rest) > len(shown):
            lines += [f"… and {len(rest) - len(shown)} more (see the JSON results file).", ""]
        lines += ["</details>", ""]
    elif rest:
        lines += [f"{title} {'is' if len(rest) == 1 else 'are'} in the JSON results file (left out "
                  "here to stay within GitHub's 65,536 characters).", ""]
    for image in images:
        what = "instruction roofline" if image.rsplit("/", 1)[-1].endswith("-instructions.png") else "roofline"
        lines += [f"![{what} of {_cell(name or 'the suite')}]({image.replace(' ', '%20')})", ""]
    return lines, len(bad) - len(shown_bad), len(rest) - len(shown)


def history_line(store: str, *, read_only: bool, judged: int, runs: int | None) -> str:
    """Which history store the verdicts read and how much of it: a reviewer of a pull
    request sees whether the gate used the nightly store, and how many runs backed it."""
    mode = " (read-only: this run was not added)" if read_only else ""
    if runs is None:
        used = "no check is judged on history"
    elif judged:
        used = (f"{judged} check{'s' if judged != 1 else ''} judged on up to {runs} run{'s' if runs != 1 else ''} "
                "of this machine's history")
    else:
        used = f"too little history to judge (at most {runs} comparable run{'s' if runs != 1 else ''}), baseline files decided"
    return f"History: {_code(store, table=False)}{mode}: {used}."


def markdown_summary(
    suites: Mapping[str, Sequence[Check]],
    analyses: Mapping[str, "Analysis"] | None = None,
    *,
    baselines: Mapping[str, BaselineStatus] | None = None,
    context: CiContext | None = None,
    limit: int = MAX_CHARS,
    history: str | None = None,
    images: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The summary text (ends with a newline, at most ``limit`` characters).
    ``history``: the ``history_line`` of the store the gate read, shown under the CI line.
    ``images``: suite -> its roofline plots (paths relative to where the text is written)."""
    analyses = analyses or {}
    baselines = baselines or {}
    checks = [c for cs in suites.values() for c in cs]
    recorded = any(_baseline_notice(n, cs, baselines.get(n)) for n, cs in suites.items())
    head = [_headline(checks, devices_label(analyses), recorded), ""]
    where = (context or CiContext()).line()
    if where:
        head += [where, ""]
    if history:
        head += [history, ""]
    if not checks:
        return "\n".join(head).rstrip() + "\n"
    several = len(suites) > 1
    # read once: the loop below renders the suites again with fewer rows until they fit
    kernel_rows = {name: _kernel_rows(analyses.get(name), {c.kernel for c in cs}) for name, cs in suites.items()}
    bad_limit, detail_limit = len(checks), MAX_DETAIL_ROWS
    while True:
        body: list[str] = []
        for name, cs in suites.items():
            section, _, _ = _suite_section(name, cs, analyses.get(name), baselines.get(name), several,
                                           bad_limit, detail_limit, kernel_rows[name], (images or {}).get(name, ()))
            body += section
        text = "\n".join(head + body).rstrip() + "\n"
        if len(text) <= limit:
            return text
        # too long: fewer passed rows first, then fewer failed rows
        if detail_limit > 0:
            detail_limit //= 2
        elif bad_limit > 0:
            bad_limit //= 2
        else:
            return text[: limit - 2].rstrip() + "\n"


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
