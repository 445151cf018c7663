"""The pytest plugin loses nothing: strict baselines in CI, baselines that do not move
with the directory pytest starts in, tests sharing a suite keep each other's kernels
(serially and under pytest-xdist), --perf-config beside the collected paths, xfail
counted as pytest counts it, and pytest's JUnit pointing at the expectation."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_plugin import SUITES  # the stencil example's two suites, as the plugin tests use them

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"
MACHINE = EXAMPLE / "machines" / "mulan-mi100.toml"
EO = "EOCloverFBCGPU(float*, float const*, int)"


@pytest.fixture(autouse=True)
def _heavy_modules_loaded_once() -> None:
    """numpy cannot be imported twice in one process: load what perf items need once."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401

    import perfcheck.analysis  # noqa: F401
    import perfcheck.baseline  # noqa: F401
    import perfcheck.checking  # noqa: F401
    import perfcheck.ingest  # noqa: F401
    import perfcheck.measure  # noqa: F401
    import perfcheck.metrics.counters  # noqa: F401
    import perfcheck.report.roofline  # noqa: F401


def _slower(source: Path, target: Path, factor: float) -> Path:
    """``source`` with every dispatch ``factor`` times longer (EndNs moved)."""
    with source.open(newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    begin, end = header.index("BeginNs"), header.index("EndNs")
    for row in rows[1:]:
        row[end] = str(int(row[begin]) + round((int(row[end]) - int(row[begin])) * factor))
    with target.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    return target


# --- strict baselines --------------------------------------------------------------------------------

TIMING_TEST = f"""
import os
import pytest

@pytest.mark.perf(arch="mi100")
def test_timing(perf):
    perf.load(os.environ.get("STRICT_PROFILE", "{EXAMPLE / 'results-after.csv'}"))
    perf.expect("EOCloverFBCGPU*", "duration <= baseline + 5%")
"""


@pytest.mark.usefixtures("ci_run")
def test_fixture_without_baseline_in_ci_is_an_error_with_the_command(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k=TIMING_TEST)
    result = pytester.runpytest("--perf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        f"*ERROR: {EO} [[]duration <= baseline + 5%[]]: duration 1.408 ms: no baseline at baselines/test_k.test_timing/"
        "mi100_gfx908_rocprof.json; not recorded (strict baselines: CI=true); record it with "
        "`pytest --perf --perf-update-baseline test_k.py::test_timing`, review and commit it*",
        "perfcheck: 1 error",
    ])
    assert not (pytester.path / "baselines").exists()
    # the command named records it; then CI compares
    pytester.runpytest("--perf", "--perf-update-baseline", "test_k.py::test_timing").assert_outcomes(passed=1)
    result = pytester.runpytest("--perf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["perfcheck: baseline compared: *", "perfcheck: 1 passed"])


@pytest.mark.usefixtures("ci_run")
def test_config_suite_in_ci_and_the_opt_outs(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES)
    result = pytester.runpytest("--perf", "--perf-suite", "after")
    result.assert_outcomes(passed=4, failed=4)
    result.stdout.fnmatch_lines(["*record it with `pytest --perf --perf-update-baseline perfcheck.toml "
                                 "--perf-suite after`*"])
    assert not (pytester.path / "baselines").exists()
    result = pytester.runpytest("--perf", "--perf-suite", "after", "--perf-no-strict-baseline")
    result.assert_outcomes(passed=8)
    assert (pytester.path / "baselines" / "after" / "mi100_gfx908_rocprof.json").is_file()


@pytest.mark.usefixtures("local_run")
def test_ini_and_option_make_a_local_run_strict(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k=TIMING_TEST)
    pytester.makeini("[pytest]\nperf_strict_baseline = true\n")
    pytester.runpytest("--perf").assert_outcomes(failed=1)
    pytester.runpytest("--perf", "--perf-no-strict-baseline").assert_outcomes(passed=1)


# --- baselines anchored to the test, not the working directory -------------------------------------


@pytest.mark.usefixtures("local_run")
def test_baseline_does_not_move_with_where_pytest_starts(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    project = pytester.mkdir("mlproj")
    (project / "test_k.py").write_text(TIMING_TEST)
    monkeypatch.chdir(project)
    first = pytester.runpytest("--perf", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=1)
    recorded = project / "baselines" / "test_k.test_timing" / "mi100_gfx908_rocprof.json"
    assert recorded.is_file()
    # from the parent, 10% slower: compared with the same file, and caught
    monkeypatch.chdir(pytester.path)
    monkeypatch.setenv("STRICT_PROFILE", str(_slower(EXAMPLE / "results-after.csv", pytester.path / "slow.csv", 1.10)))
    result = pytester.runpytest("--perf", "-p", "no:cacheprovider", "mlproj")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FAILED: EOCloverFBCGPU* (+10.0%) vs baseline 1.408 ms*"])
    assert not (pytester.path / "baselines").exists()


# --- tests sharing a suite keep each other's kernels ------------------------------------------------

SHARED_SUITE = """
import pytest

def work(n):
    return sum(range(n))

@pytest.mark.perf(suite="shared")
def test_one(perf):
    perf.measure(work, 1000, name="kernel_one", repeat=5, warmup=1)
    perf.expect("kernel_one", "duration <= baseline + 1000%")

@pytest.mark.perf(suite="shared")
def test_two(perf):
    perf.measure(work, 1000, name="kernel_two", repeat=5, warmup=1)
    perf.expect("kernel_two", "duration <= baseline + 1000%")
"""


def _kernels(root: Path) -> list[list[str]]:
    return [sorted(json.loads(p.read_text())["kernels"]) for p in sorted((root / "baselines" / "shared").glob("*.json"))]


@pytest.mark.usefixtures("local_run")
@pytest.mark.parametrize("workers", [None, "2"])
def test_tests_sharing_a_suite_keep_both_kernels(pytester: pytest.Pytester, workers: str | None) -> None:
    if workers:
        pytest.importorskip("xdist")
    pytester.makepyfile(test_shared=SHARED_SUITE)
    extra = ["-n", workers] if workers else []

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(*extra, "--perf", *args) if workers else pytester.runpytest("--perf", *args)

    run().assert_outcomes(passed=2)  # recorded
    assert _kernels(pytester.path) == [["kernel_one", "kernel_two"]]
    result = run("--perf-update-baseline")
    result.assert_outcomes(passed=2)
    assert _kernels(pytester.path) == [["kernel_one", "kernel_two"]]
    result = run()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["perfcheck: baseline compared: *", "perfcheck: 2 passed"])


# --- --perf-config beside the collected paths ---------------------------------------------------------


@pytest.mark.usefixtures("local_run")
def test_perf_config_in_the_rootdir_with_a_test_path(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES)
    tests = pytester.mkdir("tests")
    (tests / "test_x.py").write_text("def test_plain():\n    assert True\n")
    result = pytester.runpytest("--perf", "--perf-config", "perfcheck.toml", "tests")
    result.assert_outcomes(passed=10, failed=1)
    result.stdout.fnmatch_lines(["*perfcheck summary*"])


# --- xfail ---------------------------------------------------------------------------------------------

XFAIL_TESTS = f"""
import pytest

@pytest.mark.xfail(strict=True, reason="LDS caps occupancy until the rewrite")
@pytest.mark.perf(arch="mi100")
def test_before(perf):
    perf.load("{EXAMPLE / 'results-before.csv'}")
    perf.expect("EOCloverFBCGPU*", "occupancy >= 40%", "scratch_per_thread == 0")

@pytest.mark.xfail(reason="may pass")
@pytest.mark.perf(arch="mi100")
def test_after(perf):
    perf.load("{EXAMPLE / 'results-after.csv'}")
    perf.expect("EOCloverFBCGPU*", "occupancy >= 40%")
"""


def test_xfail_counts_as_pytest_counts_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x=XFAIL_TESTS)
    out = pytester.path / "out"
    result = pytester.runpytest("--perf", f"--perf-junit={out / 'junit.xml'}", f"--perf-markdown={out / 'summary.md'}",
                                f"--perf-json={out / 'results.json'}")
    result.assert_outcomes(xfailed=1, xpassed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["perfcheck: 1 passed, 1 xfailed, 1 xpassed"])
    result.stdout.no_fnmatch_line("perfcheck: *[0-9] failed*")
    root = ET.parse(out / "junit.xml").getroot()
    assert root.get("failures") == "0" and root.get("errors") == "0"
    skipped = root.findall(".//testcase/skipped")
    assert len(skipped) == 1 and skipped[0].get("type") == "pytest.xfail"
    assert skipped[0].get("message").startswith("xfailed: ")
    summary = (out / "summary.md").read_text()
    # as the terminal counts them: the xfailed and xpassed checks are not among the passed
    assert summary.startswith("### ✅ perfcheck: 1 check passed, 1 xfailed, 1 xpassed on ")
    assert "fail" not in summary.replace("xfailed", "")
    doc = json.loads((out / "results.json").read_text())
    assert doc["summary"]["failed"] == 0 and doc["summary"]["xfailed"] == 1


def test_strict_xpass_fails_in_perfcheck_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x=XFAIL_TESTS.replace('reason="may pass"', 'strict=True, reason="may pass"'))
    result = pytester.runpytest("--perf")
    result.assert_outcomes(xfailed=1, failed=1)
    result.stdout.fnmatch_lines(["perfcheck: 1 passed, 1 failed, 1 xfailed"])


# --- pytest's own JUnit XML ---------------------------------------------------------------------------


@pytest.mark.usefixtures("local_run")
def test_junitxml_points_at_the_expectation_with_a_one_line_message(pytester: pytest.Pytester) -> None:
    config = pytester.makefile(".toml", perfcheck=SUITES)
    text = config.read_text().splitlines()
    pytester.runpytest("--perf", "--junitxml=junit.xml", "-o", "junit_family=xunit1")
    cases = ET.parse(pytester.path / "junit.xml").getroot().findall(".//testcase")
    assert len(cases) == 10
    for case in cases:
        assert case.get("file") == "perfcheck.toml"
        # pytest's JUnit line is 0-based (reportinfo), as for test functions
        line = text[int(case.get("line"))]
        expression = case.get("name").rsplit("[", 1)[1].rstrip("]")
        assert f'"{expression}"' in line, (case.get("name"), line)
    (failure,) = [f for case in cases for f in case.findall("failure")]
    message = failure.get("message")
    assert "\n" not in message
    assert message == (f"FAILED: {EO} [occupancy >= 40%]: occupancy_pct 20.0%; expected >= 40.0%")
    pytester.runpytest("--perf", "--junitxml=junit2.xml", "-o", "junit_family=xunit1", "-k", "hbm_bw",
                       "--perf-arch", "mi100", "--perf-suite", "after",
                       "--perf-peaks", str(MACHINE))
    # without --perf the skipped items point at their expectations too
    pytester.runpytest("--junitxml=junit3.xml", "-o", "junit_family=xunit1")
    for case in ET.parse(pytester.path / "junit3.xml").getroot().findall(".//testcase"):
        expression = case.get("name").rsplit("[", 1)[1].rstrip("]")
        assert f'"{expression}"' in text[int(case.get("line"))]


@pytest.mark.usefixtures("local_run")
def test_junitxml_failure_message_names_the_peak(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES.replace('"occupancy >= 40%", ', '"hbm_bw >= 80% of peak", '))
    pytester.runpytest("--perf", "--perf-suite", "before", "--junitxml=junit.xml")
    failures = ET.parse(pytester.path / "junit.xml").getroot().findall(".//failure")
    messages = [f.get("message") for f in failures]
    assert messages == [f"FAILED: {EO} [hbm_bw >= 80% of peak]: hbm_bw 483.1 GB/s (44.9% of peak); "
                        "expected >= 860.4 GB/s = 80% of empirical hbm_bw 1.075 TB/s"]


@pytest.mark.usefixtures("local_run")
def test_fixture_checks_carry_the_line_of_their_expect_call(pytester: pytest.Pytester) -> None:
    path = pytester.makepyfile(test_k=TIMING_TEST)
    out = pytester.path / "results.json"
    pytester.runpytest("--perf", f"--perf-json={out}").assert_outcomes(passed=1)
    (check,) = [c for suite in json.loads(out.read_text())["suites"].values() for c in suite["checks"]]
    assert check["source_file"] == str(path)
    assert path.read_text().splitlines()[check["source_line"] - 1].strip().startswith('perf.expect("EOCloverFBCGPU*"')
