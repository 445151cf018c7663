"""Markdown summary: one quiet line when nothing changed, failures first when
something did, every check in a collapsed <details>; $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostile_names import HOSTILE_NAMES
from perfcheck.analysis import analyse
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, Check
from perfcheck.report import markdown
from perfcheck.report.markdown import markdown_summary, write_markdown, write_step_summary
from perfcheck.report.results import BaselineStatus

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil" / "kernel_trace.csv"

PASS_BW = Check(
    "stencil", "EOCloverFBCGPU", "EOClover*FBCGPU*", "hbm_bw >= 85% of peak", "hbm_bw", ">=",
    1.1e12, 0.85 * 1.2288e12, "B/s", PASSED, "expectation", "hbm_bw 1.1 TB/s; expected >= 1.044 TB/s",
)
PASS_OCC = Check(
    "stencil", "EOCloverFBCGPU", "EOClover*FBCGPU*", "occupancy >= 40%", "occupancy_pct", ">=",
    40.0, 40.0, "%", PASSED, "expectation", "occupancy_pct 40.0%; expected >= 40.0%",
)
FAIL_DURATION = Check(
    "stencil", "OECloverDagFBCGPU", "OEClover*", "duration <= baseline + 5%", "duration", "<=",
    0.002936, 0.00267 * 1.05, "s", FAILED, "baseline",
    "duration 2.936 ms (+10.0%) vs baseline 2.67 ms; expected <= baseline + 5% = 2.804 ms", baseline=0.00267,
)
ERROR_PATTERN = Check(
    "stencil", "Nope|*", "Nope|*", "occupancy >= 40%", "occupancy_pct", ">=", None, None, "%", ERROR,
    "expectation", "pattern 'Nope|*' matched no kernel of 5",
)
RECORDED_REDUCE = Check(
    "stencil", "void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int)", "*Reduce*",
    "duration <= baseline + 5%", "duration", "<=", 4.1e-05, None, "s", RECORDED, "baseline",
    "duration 41 us: no baseline yet; recorded as the new baseline",
)


@pytest.fixture(scope="module")
def analyses() -> dict:
    if not STENCIL.exists():
        pytest.skip(f"example profile missing: {STENCIL}")
    return {"stencil": analyse([STENCIL], arch="mi100")}


def _render(text: str) -> str:
    """GitHub-flavoured Markdown as GitHub renders tables (markdown-it-py, CommonMark
    plus the GFM table rule); raw HTML stays enabled, as on GitHub, so a name that
    would render as HTML shows up as an element here."""
    markdown_it = pytest.importorskip("markdown_it")
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def _table_rows(html: str) -> list[list[str]]:
    import re

    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", html, flags=re.S):
        rows.append(re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, flags=re.S))
    return rows


def test_quiet_when_nothing_changed(analyses) -> None:
    text = markdown_summary({"stencil": [PASS_BW, PASS_OCC]}, analyses)
    lines = text.splitlines()
    assert lines[0] == "### ✅ perfcheck: 2 checks passed on AMD Instinct MI100"
    # no failure table: every check is behind a collapsed <details>
    assert lines[2] == "<details>" and "<summary>All 2 checks</summary>" in text
    assert text.count("<table>") == 0 and text.count("| ✅ |") == 2


def test_new_baseline_is_announced_with_its_file(analyses) -> None:
    text = markdown_summary(
        {"stencil": [PASS_BW, RECORDED_REDUCE]}, analyses,
        baselines={"stencil": BaselineStatus("baselines/stencil/mi100_gfx908_rocprof.json", "recorded")},
    )
    lines = text.splitlines()
    assert lines[0] == "### ✅ perfcheck: 2 checks passed on AMD Instinct MI100; new baseline values were written"
    assert ("🆕 baseline recorded in `baselines/stencil/mi100_gfx908_rocprof.json` (1 value); "
            "review it like code before committing") in lines
    assert "| 🆕 | `void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int)` |" in text


def test_loud_when_a_check_failed(analyses) -> None:
    text = markdown_summary({"stencil": [PASS_BW, FAIL_DURATION, ERROR_PATTERN, PASS_OCC]}, analyses)
    lines = text.splitlines()
    assert lines[0] == "### ❌ perfcheck: 1 failed and 1 could not be evaluated of 4 checks on AMD Instinct MI100"
    header = lines.index("|  | kernel | expectation | observed vs expected | baseline (change) | of peak / limiter |")
    assert lines[header + 2].startswith(
        "| ❌ | `OECloverDagFBCGPU` | `duration <= baseline + 5%` | 2.936 ms vs \\<= 2.804 ms | 2.67 ms (+10.0%) |")
    assert lines[header + 3].startswith("| ⚠️ | `Nope\\|*` | `occupancy >= 40%` | pattern \\'Nope\\|\\*\\' matched no kernel of 5 |")
    assert header < lines.index("<details>")
    html = _render(text)
    rows = _table_rows(html)
    assert all(len(r) == 6 for r in rows)  # six columns, every row
    # a failed row is shown once: the collapsed table holds only the other checks
    assert "<summary>The other 2 checks</summary>" in html
    assert text.count("`OECloverDagFBCGPU` | `duration <= baseline + 5%`") == 1
    assert text.count("matched no kernel of 5") == 1


def test_every_metric_with_a_baseline_gets_its_change_and_its_peak(analyses) -> None:
    from dataclasses import replace

    dropped = replace(PASS_BW, observed=818e9, baseline=916e9, outcome=FAILED)
    text = markdown_summary({"stencil": [dropped, replace(PASS_OCC, kernel="EOCloverFBCGPU")]}, analyses)
    assert "| 916 GB/s (−10.7%) |" in text
    occ_row = next(line for line in text.splitlines() if "`occupancy >= 40%`" in line)
    assert occ_row.endswith("| limited by lds |")


def test_percent_of_which_peak() -> None:
    from perfcheck.ingest import read_peaks

    before = ROOT / "examples" / "stencil" / "results-before.csv"
    analysis = analyse([before], arch="mi100", peaks=read_peaks([ROOT / "examples" / "stencil" / "machines" / "mulan-mi100.toml"]))
    kernel = str(analysis.kernels["kernel"].iloc[0])
    check = Check("before", kernel, "*", "hbm_bw >= 80% of peak", "hbm_bw", ">=", 4.8e11, 8.6e11, "B/s", FAILED,
                  "expectation", "m")
    text = markdown_summary({"before": [check]}, {"before": analysis})
    row = next(line for line in text.splitlines() if line.startswith("| ❌"))
    assert row.endswith("% of empirical 1.075 TB/s |"), row


def test_ci_context_links_the_run_and_names_the_refs() -> None:
    github = markdown.ci_context({
        "GITHUB_ACTIONS": "true", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r",
        "GITHUB_RUN_ID": "123", "GITHUB_BASE_REF": "main", "GITHUB_HEAD_REF": "faster", "GITHUB_SHA": "abcdef1234567890",
    })
    line = github.line()
    assert line == "base `main` ← head `faster` · commit `abcdef123456` · [run 123](https://github.com/o/r/actions/runs/123)"
    gitlab = markdown.ci_context({"GITLAB_CI": "true", "CI_JOB_URL": "https://gitlab.example/g/p/-/jobs/9",
                                  "CI_JOB_ID": "9", "CI_COMMIT_REF_NAME": "topic"})
    assert gitlab.line() == "ref `topic` · [job 9](https://gitlab.example/g/p/-/jobs/9)"
    assert markdown.ci_context({}).line() is None
    text = markdown_summary({"s": [FAIL_DURATION]}, context=github)
    assert '<a href="https://github.com/o/r/actions/runs/123">run 123</a>' in _render(text)


HOSTILE = HOSTILE_NAMES


def test_no_kernel_or_device_name_breaks_a_row_or_renders_html(analyses) -> None:
    checks = [Check("s", name, name, "duration <= 1 ms", "duration", "<=", 0.002, 0.001, "s", FAILED,
                    "expectation", f"{name} took 2 ms") for name in HOSTILE]
    errors = [Check("s", name, name, "duration <= 1 ms", "duration", "<=", None, None, "s", ERROR,
                    "expectation", f"pattern {name} matched nothing") for name in HOSTILE]
    text = markdown_summary({"s": checks + errors})
    for line in text.splitlines():
        assert "\r" not in line and "\x1b" not in line and "\x00" not in line and "\u202e" not in line
    html = _render(text)
    assert "<img" not in html and "<script" not in html and "<a href=\"http://x\"" not in html
    assert "<strong>" not in html
    rows = _table_rows(html)
    assert rows and all(len(r) == 6 for r in rows), [r for r in rows if len(r) != 6]
    # every check failed: one table, a row per check (shown once), plus its header
    assert len(rows) == len(checks) + len(errors) + 1


def test_never_longer_than_github_allows() -> None:
    many = [Check("s", f"kernel_{i}_" + "x" * 150, "k*", "duration <= 1 ms", "duration", "<=", 0.002, 0.001, "s",
                  FAILED if i % 3 else PASSED, "expectation", "m") for i in range(3000)]
    text = markdown_summary({"s": many})
    assert len(text) <= markdown.MAX_CHARS
    assert "more failed checks, left out to stay within GitHub's 65,536 characters" in text
    assert text.splitlines()[0] == "### ❌ perfcheck: 2000 failed of 3000 checks on unknown device"
    rows = _table_rows(_render(text))
    assert rows and all(len(r) == 6 for r in rows)


def test_many_checks_are_cut_in_details() -> None:
    many = [PASS_BW] * (markdown.MAX_DETAIL_ROWS + 6) + [FAIL_DURATION]
    text = markdown_summary({"stencil": many})
    assert "… and 6 more (see the JSON results file)." in text  # the passed ones; the failure is above
    assert text.splitlines()[0] == f"### ❌ perfcheck: 1 failed of {markdown.MAX_DETAIL_ROWS + 7} checks on unknown device"


def test_no_checks() -> None:
    assert markdown_summary({}) == "### perfcheck: no checks ran on unknown device\n"


def test_step_summary_appends_when_set(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    assert write_step_summary("x\n", environ={}) is None
    target.write_text("earlier step\n")
    assert write_step_summary("perfcheck: 2 checks passed on AMD Instinct MI100", {"GITHUB_STEP_SUMMARY": str(target)}) == target
    write_step_summary("second\n", {"GITHUB_STEP_SUMMARY": str(target)})
    assert target.read_text() == "earlier step\nperfcheck: 2 checks passed on AMD Instinct MI100\nsecond\n"


def test_step_summary_reads_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "gh" / "step_summary"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    write_step_summary("hello\n")
    assert target.read_text() == "hello\n"


def test_write_markdown_is_atomic_and_makes_parents(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "out" / "summary.md", "text\n")
    assert path.read_text() == "text\n"
    assert [p.name for p in path.parent.iterdir()] == ["summary.md"]


def test_xfail_outcomes_are_not_counted_as_passes() -> None:
    from dataclasses import replace

    from perfcheck.model import XFAILED, XPASSED

    checks = [PASS_OCC, replace(PASS_OCC, outcome=XFAILED), replace(PASS_OCC, outcome=XPASSED)]
    assert markdown_summary({"s": checks}).splitlines()[0] == (
        "### ✅ perfcheck: 1 check passed, 1 xfailed, 1 xpassed on unknown device")
    assert markdown_summary({"s": [PASS_OCC, PASS_BW]}).startswith("### ✅ perfcheck: 2 checks passed on")


def test_backticks_and_pipes_show_as_written() -> None:
    names = ["a`b", "`lead", "x|y", "t``u`"]
    checks = [Check("s", n, n, "duration <= 1 ms", "duration", "<=", 0.002, 0.001, "s", FAILED, "expectation", "m")
              for n in names]
    context = markdown.CiContext(head="feat/a|b`c", sha="abc")
    html = _render(markdown_summary({"s": checks}, context=context))
    # the real name (no look-alike for the backtick), no backslash before a pipe
    assert '<p>ref <code>feat/a|b`c</code> · commit <code>abc</code></p>' in html
    cells = [row[1] for row in _table_rows(html)[1:len(names) + 1]]
    assert cells == [f"<code>{n}</code>" for n in names]


def test_scratch_is_not_given_an_occupancy_limiter(analyses) -> None:
    scratch = Check("stencil", "EOCloverFBCGPU", "EOClover*", "scratch_per_thread == 0", "scratch_per_thread", "==",
                    0.0, 0.0, "B", PASSED, "expectation", "m")
    text = markdown_summary({"stencil": [scratch, PASS_OCC]}, analyses)
    rows = [line for line in text.splitlines() if line.startswith("| ✅")]
    assert rows[0].endswith("| - |") and rows[1].endswith("| limited by lds |")


def test_one_check_is_one_check() -> None:
    text = markdown_summary({"stencil": [ERROR_PATTERN]})
    assert text.splitlines()[0] == "### ⚠️ perfcheck: 1 could not be evaluated of 1 check on unknown device"
    assert "<details>" not in text and "1 checks" not in text  # the one check is the failure shown above
    text = markdown_summary({"stencil": [PASS_BW]})
    assert "<summary>The 1 check</summary>" in text and "1 checks" not in text
    text = markdown_summary({"stencil": [PASS_BW, ERROR_PATTERN]})
    assert "<summary>The other check</summary>" in text


def test_roofline_images_are_linked_under_their_suite(analyses) -> None:
    """Issue 18 §4: the summary shows the plots (paths relative to the Markdown file)."""
    text = markdown_summary({"stencil": [PASS_BW, FAIL_DURATION]}, analyses,
                            images={"stencil": ["plots/stencil.png", "plots/stencil-instructions.png"]})
    lines = text.splitlines()
    assert "![roofline of stencil](plots/stencil.png)" in lines
    assert "![instruction roofline of stencil](plots/stencil-instructions.png)" in lines
    assert lines.index("![roofline of stencil](plots/stencil.png)") > lines.index("</details>")
    assert "![" not in markdown_summary({"stencil": [PASS_BW]}, analyses)


def test_check_links_the_plots_it_wrote_relative_to_the_summary(cli, tmp_path) -> None:
    from conftest import ROOT

    config = ROOT / "examples" / "stencil" / "perfcheck.toml"
    result = cli("check", "--config", config, "--roofline", tmp_path / "plots", "--markdown",
                 tmp_path / "out" / "summary.md", "--baseline-dir", tmp_path / "b")
    assert result.code == 1, result.err  # "before" fails, as the story says
    text = (tmp_path / "out" / "summary.md").read_text()
    for suite in ("before", "after"):
        assert f"![roofline of {suite}](../plots/{suite}.png)" in text
        assert (tmp_path / "plots" / f"{suite}.png").exists()
    failed = [line for line in text.splitlines() if line.startswith("| \u274c")]
    assert len(failed) == len(set(failed)) == 8  # each failed check once
