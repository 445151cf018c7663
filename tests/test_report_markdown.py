"""Markdown summary: one quiet line when nothing changed, failures first when
something did, every check in a collapsed <details>; $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_quiet_when_nothing_changed(analyses) -> None:
    text = markdown_summary({"stencil": [PASS_BW, PASS_OCC]}, analyses)
    assert text == "perfcheck: 2 checks passed on AMD Instinct MI100\n"


def test_new_baseline_is_announced_with_its_file(analyses) -> None:
    text = markdown_summary(
        {"stencil": [PASS_BW, RECORDED_REDUCE]}, analyses,
        baselines={"stencil": BaselineStatus("baselines/stencil/amd-instinct-mi100.json", "recorded")},
    )
    lines = text.splitlines()
    assert lines[0] == "perfcheck: 2 checks passed on AMD Instinct MI100; new baseline values were written"
    assert lines[2] == (
        "- suite `stencil`: baseline recorded in `baselines/stencil/amd-instinct-mi100.json` (1 value); "
        "review it like code before committing"
    )
    assert "<summary>All 2 checks</summary>" in text
    assert "| recorded | stencil | `void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int)` |" in text


def test_loud_when_a_check_failed(analyses) -> None:
    suites = {"stencil": [PASS_BW, FAIL_DURATION, ERROR_PATTERN, RECORDED_REDUCE]}
    text = markdown_summary(suites, analyses)
    lines = text.splitlines()
    assert lines[0] == "### perfcheck: 1 failed and 1 could not be evaluated of 4 checks on AMD Instinct MI100"
    failed_at = lines.index("**Failed**")
    assert lines[failed_at + 2] == "| suite | kernel | expectation | observed | expected | baseline | change |"
    assert lines[failed_at + 4] == (
        "| stencil | `OECloverDagFBCGPU` | `duration <= baseline + 5%` | 2.936 ms | &lt;= 2.804 ms | 2.67 ms | +10.0% |"
    )
    errors_at = lines.index("**Could not be evaluated**")
    # a pipe in a kernel pattern is escaped so the table keeps its columns
    assert lines[errors_at + 4] == (
        "| stencil | `Nope\\|*` | `occupancy >= 40%` | pattern 'Nope\\|*' matched no kernel of 5 |"
    )
    assert failed_at < errors_at < lines.index("<details>")
    assert "<summary>All 4 checks</summary>" in lines
    assert lines[-1] == "</details>"
    detail_rows = [line for line in lines[lines.index("<details>"):] if line.startswith("| ")]
    assert len(detail_rows) == 2 + 4  # header, alignment, one row per check
    assert detail_rows[3].startswith("| **FAIL** | stencil | `OECloverDagFBCGPU` |")


def test_many_checks_are_cut_in_details() -> None:
    many = [PASS_BW] * (markdown.MAX_DETAIL_ROWS + 5) + [FAIL_DURATION]
    text = markdown_summary({"stencil": many})
    assert f"... and 6 more (see the JSON results file)." in text
    assert text.splitlines()[0] == f"### perfcheck: 1 failed of {markdown.MAX_DETAIL_ROWS + 6} checks on unknown device"


def test_no_checks() -> None:
    assert markdown_summary({}) == "perfcheck: no checks ran on unknown device\n"


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
