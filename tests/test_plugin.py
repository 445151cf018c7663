"""The pytest plugin: skipped without --perf and light at start-up; config suites as
one item per kernel x expectation; the perf fixture and marker; reports written by the
controller only (pytest-xdist)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"
SHARED = Path(os.environ.get("PERFCHECK_SHARED", ROOT.parent / "shared"))
XSD = SHARED / "reference" / "junit" / "jenkins-xunit-junit-10.xsd"

SUITES = f"""\
[tool.perfcheck]
device = "mi100"
peaks = ["{EXAMPLE / 'machines' / 'mulan-mi100.toml'}"]

[tool.perfcheck.suites.before]
profiles = ["{EXAMPLE / 'results-before.csv'}"]
[tool.perfcheck.suites.before.expect]
"EOCloverFBCGPU*" = ["occupancy >= 40%", "scratch_per_thread == 0"]

[tool.perfcheck.suites.after]
profiles = ["{EXAMPLE / 'results-after.csv'}"]
[tool.perfcheck.suites.after.expect]
"*Clover*FBCGPU*" = ["hbm_bw >= 80% of peak", "duration <= baseline + 5%"]
"""

EO = "EOCloverFBCGPU(float*, float const*, int)"


@pytest.fixture(autouse=True)
def _heavy_modules_loaded_once() -> None:
    """pytester's in-process runs drop the modules a run imported; numpy cannot be
    imported twice in one process, so the outer process loads what perf items need."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401

    import perfcheck.analysis  # noqa: F401
    import perfcheck.baseline  # noqa: F401
    import perfcheck.checking  # noqa: F401
    import perfcheck.ingest  # noqa: F401
    import perfcheck.metrics.counters  # noqa: F401
    import perfcheck.report.roofline  # noqa: F401


def test_perf_tests_skip_without_flag(pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.perf
        def test_fast_kernel():
            assert True

        def test_with_fixture(perf):
            raise AssertionError("never runs without --perf")

        def test_plain():
            assert True
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*run with --perf*"])
    result = pytester.runpytest("--perf")
    result.assert_outcomes(passed=2, failed=1)


def test_option_in_help(pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--perf  *", "*--perf-config=FILE*", "*--perf-update-baseline*", "*--perf-junit=FILE*",
                                 "*--perf-roofline=DIR*", "*perf_baseline_dir*"])


def test_plugin_import_is_light() -> None:
    code = ("import sys, pytest_perfcheck.plugin; "
            "print(*[m in sys.modules for m in ('pandas', 'matplotlib', 'numpy', 'perfcheck.ingest')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "False", "False"]


def test_pytest_start_up_imports_nothing_heavy(pytester) -> None:
    """A whole run without --perf, config suites included, never imports pandas or matplotlib."""
    pytester.makefile(".toml", perfcheck=SUITES)
    pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            heavy = [m for m in ("pandas", "matplotlib", "numpy", "perfcheck.ingest") if m in sys.modules]
            print("HEAVY", heavy)
        """
    )
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines(["*HEAVY []"])


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_config_suites_are_items_per_kernel_and_expectation(pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES)
    result = pytester.runpytest("--perf", "-v", "--perf-baseline-dir", str(pytester.path / "b"))
    # before: EOCloverFBCGPU x 2; after: 4 Clover kernels x 2
    result.assert_outcomes(passed=9, failed=1)
    result.stdout.fnmatch_lines([
        f"perfcheck.toml::before::{EO}[[]occupancy >= 40%[]] FAILED*",
        f"perfcheck.toml::before::{EO}[[]scratch_per_thread == 0[]] PASSED*",
        f"perfcheck.toml::after::{EO}[[]hbm_bw >= 80% of peak[]] PASSED*",
        f"perfcheck.toml::after::OECloverDagFBCGPU(float*, float const*, int)[[]duration <= baseline + 5%[]] PASSED*",
    ])
    # the failure shows observed, expected and units
    result.stdout.fnmatch_lines(["*FAILED: EOCloverFBCGPU*: occupancy >= 40%", "*observed: 20.0%", "*expected: >= 40.0%"])
    # the summary table at the end
    result.stdout.fnmatch_lines(["*perfcheck summary*", "suite*kernel*expectation*observed*expected*baseline*outcome",
                                 "before*EOCloverFBCGPU*occupancy >= 40%*20.0%*>= 40.0%*FAILED",
                                 "*baseline recorded: after: *", "perfcheck: 5 passed, 1 failed, 4 recorded"])
    assert (pytester.path / "b" / "after" / "mi100_gfx908_rocprof.json").is_file()
    assert not (pytester.path / "b" / "before").exists()  # no baseline-relative expectation


def test_config_suite_items_skip_without_perf(pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES)
    result = pytester.runpytest("-v", "-rs")
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["*perfcheck.toml::after::[*]Clover[*]FBCGPU[*][[]hbm_bw >= 80% of peak[]] SKIPPED*",
                                 "*run with --perf*"])


def test_perf_suite_selects(pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES)
    result = pytester.runpytest("--perf", "--perf-suite", "before", "--perf-baseline-dir", str(pytester.path / "b"))
    result.assert_outcomes(passed=1, failed=1)


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_explicit_config_outside_the_collected_paths(pytester) -> None:
    config = pytester.path / "elsewhere" / "perfcheck.toml"
    config.parent.mkdir()
    config.write_text(SUITES)
    tests = pytester.mkdir("tests")
    (tests / "test_x.py").write_text("def test_plain():\n    assert True\n")
    result = pytester.runpytest("--perf", f"--perf-config={config}", "--perf-baseline-dir", str(pytester.path / "b"), "tests")
    result.assert_outcomes(passed=10, failed=1)


def test_bad_config_is_a_one_line_collection_error(pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES.replace("results-before.csv", "results-gone.csv"))
    result = pytester.runpytest("--perf")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "perfcheck: error: perfcheck.toml [[]tool.perfcheck.suites.before[]] profiles: no such file *results-gone.csv'"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_missing_explicit_config_is_a_usage_error(pytester) -> None:
    result = pytester.runpytest("--perf", "--perf-config", "nope.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*perfcheck: error: --perf-config: no such config file 'nope.toml'*"])


FIXTURE_TESTS = f"""
import pytest

MACHINE = "{EXAMPLE / 'machines' / 'mulan-mi100.toml'}"

@pytest.mark.perf(arch="mi100", peaks=[MACHINE])
def test_after(perf):
    perf.load("{EXAMPLE / 'results-after.csv'}")
    checks = perf.expect("EOCloverFBCGPU*", "occupancy >= 40%", "hbm_bw >= 80% of peak")
    assert [c.outcome for c in checks] == ["passed", "passed"]
    assert len(perf.analysis.kernels) == 5

@pytest.mark.perf(arch="mi100", peaks=[MACHINE])
def test_before(perf):
    perf.load("{EXAMPLE / 'results-before.csv'}")
    perf.expect("EOCloverFBCGPU*", "occupancy >= 40%", "hbm_bw >= 80% of peak")

def test_fixture_argument_wins_over_the_marker(perf):
    perf.load("{EXAMPLE / 'results-after.csv'}", arch="mi1000")

@pytest.mark.perf(arch="mi100")
def test_bad_expectation(perf):
    perf.load("{EXAMPLE / 'results-after.csv'}")
    perf.expect("*", "occupancy >= 40 percent")

@pytest.mark.perf(arch="mi100", suite="timing")
def test_baseline(perf):
    perf.load("{EXAMPLE / 'results-after.csv'}")
    perf.expect("EOCloverFBCGPU*", "duration <= baseline + 5%")
"""


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_fixture_and_marker(pytester) -> None:
    pytester.makepyfile(FIXTURE_TESTS)
    result = pytester.runpytest("--perf", "--perf-arch", "a100", "--perf-baseline-dir", str(pytester.path / "b"))
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines([
        "FAILED: EOCloverFBCGPU*: occupancy >= 40%",
        "  occupancy_pct 20.0%; expected >= 40.0%",
        "  observed: 20.0%",
        "  expected: >= 40.0%",
        "FAILED: EOCloverFBCGPU*: hbm_bw >= 80% of peak",
        "*observed: 483.1 GB/s",
        "*expected: >= 860.4 GB/s",
    ])
    result.stdout.fnmatch_lines(["perfcheck: error: perf.load(arch=...): unknown*mi1000*"])
    result.stdout.fnmatch_lines(["perfcheck: error: expectation 'occupancy >= 40 percent', column *", "occupancy >= 40 percent",
                                 " *^"])
    # the marker's arch beat --perf-arch a100 (an NVIDIA part would not give 40% here)
    assert (pytester.path / "b" / "timing" / "mi100_gfx908_rocprof.json").is_file()


def test_missing_path_in_a_test_says_it_is_relative_to_the_test_file(pytester) -> None:
    pytester.makepyfile(pyproject_toml="")
    tests = pytester.mkdir("tests")
    (tests / "test_paths.py").write_text(
        "import pytest\n\n"
        "def test_from_the_root(perf):\n"
        "    perf.load('tests/profiles/x.csv')\n\n"
        "@pytest.mark.perf(peaks='machines/m.toml')\n"
        f"def test_marker_peaks(perf):\n"
        f"    perf.load(r'{EXAMPLE / 'results-after.csv'}')\n"
    )
    result = pytester.runpytest("--perf", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*perfcheck: error: perf.load(...): no such file 'tests/tests/profiles/x.csv' "
        "(paths in a test are relative to the test file, tests/test_paths.py)",
        "*perfcheck: error: @pytest.mark.perf(peaks=...) on test_marker_peaks: no such file 'tests/machines/m.toml' "
        "(paths in a test are relative to the test file, tests/test_paths.py)",
    ])


def test_reports_from_pytest(pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES)
    pytester.makepyfile(FIXTURE_TESTS)
    out = pytester.path / "out"
    result = pytester.runpytest(
        "--perf", "--perf-baseline-dir", str(pytester.path / "b"), f"--perf-junit={out / 'junit.xml'}",
        f"--perf-markdown={out / 'summary.md'}", f"--perf-json={out / 'results.json'}", f"--perf-roofline={out / 'roof'}")
    result.stdout.fnmatch_lines(["perfcheck: JUnit XML: *junit.xml", "perfcheck: Markdown summary: *summary.md",
                                 "perfcheck: roofline plots: *before.png*"])
    doc = json.loads((out / "results.json").read_text())
    module = "test_reports_from_pytest"  # makepyfile names the file after this test
    assert sorted(doc["suites"]) == ["after", "before", f"{module}.test_after", f"{module}.test_before", "timing"]
    assert (out / "summary.md").read_text().startswith("### ❌ perfcheck: ")
    assert (out / "roof" / "after.svg").is_file()
    if XSD.exists():
        xmlschema = pytest.importorskip("xmlschema")
        xmlschema.XMLSchema(str(XSD)).validate(str(out / "junit.xml"))


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_ini_options(pytester) -> None:
    pytester.makefile(".toml", perfcheck=SUITES)
    pytester.makeini("[pytest]\nperf_baseline_dir = from-ini\nperf_markdown = out/summary.md\n")
    result = pytester.runpytest("--perf")
    result.assert_outcomes(passed=9, failed=1)
    assert (pytester.path / "from-ini" / "after" / "mi100_gfx908_rocprof.json").is_file()
    assert (pytester.path / "out" / "summary.md").is_file()


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_xdist_workers_send_the_controller_writes(pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makefile(".toml", perfcheck=SUITES)
    pytester.makepyfile(FIXTURE_TESTS)
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess(
        "-n", "2", "--perf", "--perf-baseline-dir", str(pytester.path / "b"), f"--perf-json={out / 'results.json'}",
        f"--perf-junit={out / 'junit.xml'}")
    result.assert_outcomes(passed=11, failed=4)
    doc = json.loads((out / "results.json").read_text())
    assert doc["summary"]["failed"] == 3 and doc["summary"]["error"] == 0
    assert doc["suites"]["after"]["baseline"]["action"] == "recorded"
    assert len(doc["suites"]["after"]["checks"]) == 8
    assert sorted(p.relative_to(pytester.path / "b").as_posix() for p in (pytester.path / "b").rglob("*.json")) == [
        "after/mi100_gfx908_rocprof.json", "timing/mi100_gfx908_rocprof.json"]
    assert not list((pytester.path / "b").rglob("*.tmp"))
    result.stdout.fnmatch_lines(["*perfcheck summary*", "perfcheck: 7 passed, 3 failed, 5 recorded"])
    # a second run compares with what the controller recorded
    result = pytester.runpytest_subprocess("-n", "2", "--perf", "--perf-baseline-dir", str(pytester.path / "b"))
    result.stdout.fnmatch_lines(["*baseline compared: after: *", "perfcheck: 12 passed, 3 failed"])


# The example's config names ../shared by path (PERFCHECK_SHARED does not move it): without
# that copy its suites skip themselves, so this test skips too instead of failing.
@pytest.mark.skipif(not (ROOT.parent / "shared" / "profiles").is_dir(),
                    reason="real profile data not beside the repository (../shared)")
@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_real_profiles_suite(pytester) -> None:
    config = ROOT / "examples" / "shared-profiles" / "perfcheck.toml"
    result = pytester.runpytest("--perf", f"--perf-config={config}", "--perf-baseline-dir", str(pytester.path / "b"), "-v")
    result.assert_outcomes(passed=11)
    result.stdout.fnmatch_lines([
        "*::mixbench-mi200::void benchmark_func<float, 256, 8u, 0u>(float, float[*])[[]hbm_bw >= 1.3 TB/s[]] PASSED*",
        "*::gemm-ncu::void gemm_v0<float>(T1[*], T1[*], T1[*], int, int, int)[[]flop_rate >= 1.5 TFLOP/s[]] PASSED*",
    ])


def test_running_out_of_memory_is_one_line_not_an_internal_error(pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store or profile too large for the machine: the session's end (reports,
    history) says what ran out in one line and exits as a usage error, not pytest's
    INTERNALERROR (exit 3)."""
    import perfcheck.checking

    def exhausted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise MemoryError()

    monkeypatch.setattr(perfcheck.checking, "finish", exhausted)
    pytester.makefile(".toml", perfcheck=SUITES)
    result = pytester.runpytest("--perf", "--perf-suite", "before", "--perf-baseline-dir", str(pytester.path / "b"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["perfcheck: error: ran out of memory*--since*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
