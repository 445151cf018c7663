"""checking.run_suites: the stencil story, baselines recorded / compared / updated /
mismatched, regressions that respect the allowance, reports written before the exit."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from perfcheck import checking
from perfcheck.config import resolver
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED
from perfcheck.report.text import totals

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"
CONFIG = EXAMPLE / "perfcheck.toml"


def _settings(tmp_path: Path, suites=None, **cli):
    cli.setdefault("baseline_dir", str(tmp_path / "baselines"))
    return resolver(cli=cli, env={}, config=CONFIG, cwd=tmp_path).settings(suites)


def _by(run: checking.Run, suite: str, expression: str) -> list:
    return [c for c in run.checks if c.suite == suite and c.expression == expression]


def test_stencil_story(tmp_path: Path) -> None:
    run = checking.run_suites(_settings(tmp_path))
    assert run.exit_code == 1
    clover = {"EOCloverFBCGPU", "EOCloverDagFBCGPU", "OECloverDagFBCGPU", "OECloverFBCGPU"}
    for suite in ("before", "after"):
        assert {c.kernel.split("(")[0] for c in _by(run, suite, "occupancy >= 40%")} == clover
    # before: LDS-limited: 24 KiB per 256-thread workgroup -> 2 workgroups of 4 waves on
    # an MI100 CU = 8 of 40 wave slots; 1.29009797 GB in ~2.67 ms of 1075.46 GB/s
    before_occ = _by(run, "before", "occupancy >= 40%")
    assert {c.outcome for c in before_occ} == {FAILED}
    assert {c.observed for c in before_occ} == {20.0}
    before_bw = _by(run, "before", "hbm_bw >= 80% of peak")
    assert {c.outcome for c in before_bw} == {FAILED}
    assert all(c.reference == pytest.approx(0.8 * 1075.46e9) for c in before_bw)
    assert all(0.44 < c.observed / 1075.46e9 < 0.46 for c in before_bw)
    # after: 64 VGPRs -> 4 workgroups = 16 waves = 40%; 1.9x faster: ~85% of the peak
    after = [c for c in run.checks if c.suite == "after"]
    assert {c.outcome for c in after} == {PASSED, RECORDED}
    assert {c.observed for c in _by(run, "after", "occupancy >= 40%")} == {40.0}
    assert all(0.84 < c.observed / 1075.46e9 < 0.86 for c in _by(run, "after", "hbm_bw >= 80% of peak"))
    assert {c.outcome for c in _by(run, "after", "duration <= baseline + 5%")} == {RECORDED}
    assert [s.action for s in run.suites] == ["recorded", "recorded"]
    for suite in run.suites:
        assert suite.baseline_path == tmp_path / "baselines" / suite.name / "mi100_gfx908_rocprof.json"
        assert suite.baseline_path.is_file()


def test_after_alone_passes_and_compares_with_the_committed_baseline(tmp_path: Path) -> None:
    committed = EXAMPLE / "baselines" / "after" / "mi100_gfx908_rocprof.json"
    before = committed.read_bytes()
    settings = resolver(cli={}, env={}, config=CONFIG, cwd=tmp_path).settings(["after"])
    run = checking.run_suites(settings)
    assert run.exit_code == 0
    assert run.suites[0].action == "compared"
    assert {c.outcome for c in _by(run, "after", "duration <= baseline + 5%")} == {PASSED}
    assert committed.read_bytes() == before  # comparing never rewrites


def _scaled_copy(source: Path, target: Path, factor: float) -> Path:
    """The profile with every dispatch's duration scaled by ``factor``."""
    with open(source, newline="") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    begin, end = header.index("BeginNs"), header.index("EndNs")
    for row in rows[1:]:
        row[end] = str(int(row[begin]) + round((int(row[end]) - int(row[begin])) * factor))
    with open(target, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return target


def _regression_run(tmp_path: Path, factor: float, expect: str, **cli) -> checking.Run:
    baseline_dir = tmp_path / "baselines"
    common = dict(arch="mi100", baseline_dir=str(baseline_dir), **cli)
    first = resolver(cli=common, env={}, discover=False, cwd=tmp_path).settings(
        ["s"], profiles=[EXAMPLE / "results-after.csv"], expect={"EOCloverFBCGPU*": [expect]})
    recorded = checking.run_suites(first)
    assert [c.outcome for c in recorded.checks] == [RECORDED]
    slower = _scaled_copy(EXAMPLE / "results-after.csv", tmp_path / "results.csv", factor)
    settings = resolver(cli=common, env={}, discover=False, cwd=tmp_path).settings(
        ["s"], profiles=[slower], expect={"EOCloverFBCGPU*": [expect]})
    return checking.run_suites(settings)


def test_ten_percent_slower_fails_a_five_percent_budget(tmp_path: Path) -> None:
    run = _regression_run(tmp_path, 1.10, "duration <= baseline + 5%")
    [check] = run.checks
    assert check.outcome == FAILED and check.origin == "baseline"
    assert check.observed / check.baseline == pytest.approx(1.10, rel=2e-3)
    assert run.exit_code == 1 and run.suites[0].action == "compared"


def test_two_percent_slower_passes_a_five_percent_budget(tmp_path: Path) -> None:
    run = _regression_run(tmp_path, 1.02, "duration <= baseline + 5%")
    assert [c.outcome for c in run.checks] == [PASSED]
    assert run.exit_code == 0


def _more_bytes_copy(source: Path, target: Path, factor: float) -> Path:
    """The profile with every dispatch's FETCH_SIZE and WRITE_SIZE scaled by ``factor``."""
    with open(source, newline="") as fh:
        rows = list(csv.reader(fh))
    columns = [rows[0].index("FETCH_SIZE"), rows[0].index("WRITE_SIZE")]
    for row in rows[1:]:
        for i in columns:
            row[i] = repr(float(row[i]) * factor)
    with open(target, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return target


@pytest.mark.parametrize("expect", ["hbm_bytes <= baseline", "hbm_bytes == baseline", "hbm_bytes <= baseline + 2%"])
def test_three_percent_more_bytes_fails_an_exact_comparison(tmp_path: Path, expect: str) -> None:
    common = dict(arch="mi100", baseline_dir=str(tmp_path / "baselines"))
    first = resolver(cli=common, env={}, discover=False, cwd=tmp_path).settings(
        ["s"], profiles=[EXAMPLE / "results-after.csv"], expect={"EOCloverFBCGPU*": [expect]})
    assert [c.outcome for c in checking.run_suites(first).checks] == [RECORDED]
    more = _more_bytes_copy(EXAMPLE / "results-after.csv", tmp_path / "results.csv", 1.03)
    settings = resolver(cli=common, env={}, discover=False, cwd=tmp_path).settings(
        ["s"], profiles=[more], expect={"EOCloverFBCGPU*": [expect]})
    [check] = checking.run_suites(settings).checks
    assert check.outcome == FAILED and check.origin == "baseline"
    assert check.observed / check.baseline == pytest.approx(1.03)
    # the same bytes again pass
    same = resolver(cli=common, env={}, discover=False, cwd=tmp_path).settings(
        ["s"], profiles=[EXAMPLE / "results-after.csv"], expect={"EOCloverFBCGPU*": [expect]})
    assert [c.outcome for c in checking.run_suites(same).checks] == [PASSED]


def test_configured_tolerance_applies_without_an_allowance(tmp_path: Path) -> None:
    run = _regression_run(tmp_path, 1.02, "duration <= baseline", tolerances={"duration": "5%"})
    assert [c.outcome for c in run.checks] == [PASSED]
    run = _regression_run(tmp_path / "x", 1.10, "duration <= baseline", tolerances={"duration": "5%"})
    assert [c.outcome for c in run.checks] == [FAILED]


def test_update_accepts_a_regression_and_rewrites_the_baseline(tmp_path: Path) -> None:
    run = _regression_run(tmp_path, 1.10, "duration <= baseline + 5%", update_baseline=True)
    [check] = run.checks
    assert check.outcome == RECORDED and "accepted: baseline updated" in check.message
    assert run.exit_code == 0 and run.suites[0].action == "updated"
    stored = json.loads(run.suites[0].baseline_path.read_text())
    median = stored["kernels"]["EOCloverFBCGPU(float*, float const*, int)"]["samples"]["duration"]["median"]
    assert median == pytest.approx(check.observed)


def test_fingerprint_mismatch_warns_and_does_not_compare(tmp_path: Path) -> None:
    settings = _settings(tmp_path, ["after"])
    first = checking.run_suites(settings)
    path = first.suites[0].baseline_path
    doc = json.loads(path.read_text())
    doc["fingerprint"]["tool_version"] = "4.5.0"  # recorded with another profiler version
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tampered = path.read_bytes()
    run = checking.run_suites(_settings(tmp_path, ["after"]))
    suite = run.suites[0]
    assert suite.action == "fingerprint-mismatch"
    assert any("not compared" in n and "tool_version" in n for n in suite.notices)
    assert {c.outcome for c in _by(run, "after", "duration <= baseline + 5%")} == {RECORDED}
    assert path.read_bytes() == tampered  # another machine's baseline is not overwritten


def test_other_machines_baselines_are_not_compared(tmp_path: Path) -> None:
    other = tmp_path / "baselines" / "after" / "mi250x_gfx90a_rocprof.json"
    other.parent.mkdir(parents=True)
    other.write_text("{}\n")
    run = checking.run_suites(_settings(tmp_path, ["after"]))
    assert run.suites[0].action == "recorded"
    assert any("mi250x_gfx90a_rocprof.json" in n for n in run.suites[0].notices)


def test_new_kernel_is_added_to_an_existing_baseline(tmp_path: Path) -> None:
    common = dict(arch="mi100", baseline_dir=str(tmp_path / "b"))
    make = lambda pattern: resolver(cli=common, env={}, discover=False, cwd=tmp_path).settings(  # noqa: E731
        ["s"], profiles=[EXAMPLE / "results-after.csv"], expect={pattern: ["duration <= baseline + 5%"]})
    first = checking.run_suites(make("EOCloverFBCGPU*"))
    path = first.suites[0].baseline_path
    doc = json.loads(path.read_text())
    del doc["kernels"]["OECloverFBCGPU(float*, float const*, int)"]
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    run = checking.run_suites(make("*Clover*FBCGPU*"))
    assert sorted(c.outcome for c in run.checks) == [PASSED, PASSED, PASSED, RECORDED]
    assert any("added 1 new kernel" in n for n in run.suites[0].notices)
    assert "OECloverFBCGPU(float*, float const*, int)" in json.loads(path.read_text())["kernels"]


def test_reports_are_written_before_a_failing_exit(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = checking.run_suites(_settings(
        tmp_path, junit=str(out / "junit.xml"), markdown=str(out / "summary.md"), json=str(out / "results.json"),
        openmetrics=str(out / "metrics.txt"), roofline=str(out / "roofline")))
    assert run.exit_code == 1
    assert sorted(run.reports) == ["json", "junit", "markdown", "openmetrics", "roofline"]
    results = json.loads((out / "results.json").read_text())
    assert results["summary"]["failed"] == 8
    assert results["suites"]["before"]["baseline"]["action"] == "recorded"
    assert (out / "summary.md").read_text().startswith("### ❌ perfcheck: 8 failed of 32 checks on AMD Instinct MI100")
    assert 'perfcheck_occupancy' in (out / "metrics.txt").read_text()
    for name in ("before", "after"):
        assert (out / "roofline" / f"{name}.png").stat().st_size > 10_000
        assert (out / "roofline" / f"{name}.svg").is_file()
    junit = (out / "junit.xml").read_text()
    assert junit.count("<testcase ") == 32 and junit.count("<failure ") == 8


def test_step_summary_is_appended_when_set(tmp_path: Path, monkeypatch) -> None:
    summary = tmp_path / "step.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run = checking.run_suites(resolver(cli={}, env={}, config=CONFIG, cwd=tmp_path).settings(["after"]))
    assert summary.read_text().startswith("earlier step\n### ✅ perfcheck: 16 checks passed on AMD Instinct MI100\n")
    assert run.reports["step-summary"] == [summary]


def test_pattern_matching_nothing_is_an_error(tmp_path: Path) -> None:
    settings = resolver(cli={"arch": "mi100"}, env={}, discover=False, cwd=tmp_path).settings(
        ["s"], profiles=[EXAMPLE / "results-after.csv"], expect={"EOCloverFBCPU*": ["occupancy >= 40%"]})
    run = checking.run_suites(settings)
    [check] = run.checks
    assert check.outcome == ERROR and "matched no kernel" in check.message
    assert run.exit_code == 1


def test_skipped_suite_passes_with_a_notice(tmp_path: Path) -> None:
    (tmp_path / "perfcheck.toml").write_text(
        '[suites.real]\nprofiles = ["absent/results.csv"]\nskip_if_missing = true\n'
        '[suites.real.expect]\n"*" = ["occupancy >= 40%"]\n')
    run = checking.run_suites(resolver(env={}, cwd=tmp_path).settings())
    assert run.exit_code == 0 and run.checks == []
    assert run.suites[0].action == "skipped"
    assert "absent" in run.suites[0].notices[0]
    assert totals(run) == "1 suite(s) skipped"


def test_one_roofline_per_set_of_profiles_and_a_reason_instead_of_an_empty_plot(tmp_path: Path) -> None:
    """pytest: tests that load the same profile (each an ad-hoc suite) get one plot,
    not one each; a suite with nothing to place writes none and says why."""
    from dataclasses import replace

    settings = resolver(cli={"arch": "mi100", "roofline": str(tmp_path / "roof"), "junit": str(tmp_path / "j.xml")},
                        env={}, discover=False, cwd=tmp_path).settings(
        ["t1"], profiles=[EXAMPLE / "results-before.csv"], expect={"*": ["occupancy >= 40%"]})
    first = settings.suites["t1"]
    trace = replace(first, name="trace", profiles=(EXAMPLE / "kernel_trace.csv",))
    suites = {"t1": first, "t2": replace(first, name="t2"), "trace": trace}
    runs = [checking.evaluate_suite(s) for s in suites.values()]
    run = checking.finish(runs, replace(settings, suites=suites))
    pngs = sorted(p.name for p in run.reports["roofline"] if p.suffix == ".png")
    assert pngs == ["t1-instructions.png", "t1.png"]
    assert any("suite 'trace': no roofline plot: no kernel has flops and byte counts" in n for n in runs[2].notices)
    junit = (tmp_path / "j.xml").read_text()
    assert junit.count("[[ATTACHMENT|") == sum(c.outcome == FAILED for r in runs[:2] for c in r.checks)
