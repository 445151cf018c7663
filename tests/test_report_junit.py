"""JUnit XML: valid against Jenkins' junit-10.xsd (read in place from ../shared),
and complete for readers that show only a test case's name, failure message and
failure text (GitLab, GitHub test-report actions)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import SHARED, profile
from perfcheck.analysis import analyse
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, Check
from perfcheck.report.junit import junit_xml, case_name, write_junit
from perfcheck.report.results import BaselineStatus

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil" / "kernel_trace.csv"
XSD = SHARED / "reference" / "junit" / "jenkins-xunit-junit-10.xsd"

FAILED_CHECK = Check(
    "stencil", "OECloverDagFBCGPU", "OEClover*", "duration <= baseline + 5%", "duration", "<=",
    0.002936, 0.00267 * 1.05, "s", FAILED, "baseline",
    "duration 2.936 ms (+10.0%) vs baseline 2.67 ms; expected <= baseline + 5% = 2.804 ms",
    baseline=0.00267, detail="median ratio 1.0996, 95% CI [1.091, 1.108]",
)
PASSED_CHECK = Check(
    "stencil", "EOCloverFBCGPU", "EOClover*FBCGPU*", "hbm_bw >= 85% of peak", "hbm_bw", ">=",
    1.1e12, 0.85 * 1.2288e12, "B/s", PASSED, "expectation",
    "hbm_bw 1.1 TB/s (89.5% of peak); expected >= 1.044 TB/s = 85% of theoretical hbm_bw 1.229 TB/s",
)
ERROR_CHECK = Check(
    "stencil", "Nope*", "Nope*", "occupancy >= 40%", "occupancy_pct", ">=", None, None, "%", ERROR,
    "expectation", "pattern 'Nope*' matched no kernel of 5 (closest: 'OECloverFBCGPU')",
)
RECORDED_CHECK = Check(
    "stencil", "void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int)", "*Reduce*",
    "duration <= baseline + 5%", "duration", "<=", 4.1e-05, None, "s", RECORDED, "baseline",
    "duration 41 us: no baseline yet; recorded as the new baseline",
)
VCOPY_FAILED = Check(
    "vcopy", "vecCopy(double*, double*, double*, int, int)", "vecCopy*", "hbm_bw >= 85% of peak", "hbm_bw", ">=",
    864239755351.682, 0.85 * 1389070200000.0, "B/s", FAILED, "expectation",
    "hbm_bw 864.2 GB/s (62.2% of peak); expected >= 1.181 TB/s = 85% of empirical hbm_bw 1.389 TB/s",
)


@pytest.fixture(scope="module")
def analyses() -> dict:
    if not STENCIL.exists():
        pytest.skip(f"example profile missing: {STENCIL}")
    return {
        "stencil": analyse([STENCIL], arch="mi100"),
        "vcopy": analyse([profile("omniperf/rocprofiler-compute-vcopy-MI200")]),
    }


@pytest.fixture(scope="module")
def report(analyses, tmp_path_factory) -> Path:
    suites = {"stencil": [PASSED_CHECK, FAILED_CHECK, ERROR_CHECK, RECORDED_CHECK], "vcopy": [VCOPY_FAILED]}
    path = tmp_path_factory.mktemp("junit") / "reports" / "perf.xml"  # parent created by the writer
    write_junit(
        path, suites, analyses=analyses,
        baselines={"stencil": BaselineStatus("baselines/stencil/amd-instinct-mi100.json", "compared")},
        properties={"config": "pyproject.toml"},
    )
    return path


def _cases(root: ET.Element) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in root.iter("testcase")}


def test_validates_against_jenkins_junit_10_xsd(report: Path) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    if not XSD.exists():
        pytest.skip(f"JUnit schema not available: {XSD}")
    schema = xmlschema.XMLSchema(str(XSD))
    schema.validate(str(report))  # raises with the offending element on failure


def test_structure_and_counts(report: Path) -> None:
    root = ET.parse(report).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("5", "2", "1")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["stencil", "vcopy"]
    assert [(s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [("4", "1", "1"), ("1", "1", "0")]
    stencil = suites[0]
    assert [c.get("name") for c in stencil.findall("testcase")] == [
        "EOCloverFBCGPU :: hbm_bw >= 85% of peak",
        "OECloverDagFBCGPU :: duration <= baseline + 5%",
        "Nope* :: occupancy >= 40%",
        "void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int) :: duration <= baseline + 5%",
    ]
    assert {c.get("classname") for c in stencil.findall("testcase")} == {"perfcheck.stencil"}


def test_suite_properties_carry_context_and_every_check(report: Path) -> None:
    root = ET.parse(report).getroot()
    stencil, vcopy = root.findall("testsuite")
    props = {p.get("name"): p.get("value") for p in stencil.find("properties")}
    assert props["config"] == "pyproject.toml"
    assert props["device"] == "AMD Instinct MI100"
    assert props["arch"] == "gfx908"
    assert props["ceiling.hbm_bw"].startswith("1.229 TB/s (theoretical: arch database: mi100")
    assert props["ceiling.flop_rate_fp64"].startswith("11.5 TFLOP/s at the datasheet 1502 MHz (theoretical")
    assert props["baseline.path"] == "baselines/stencil/amd-instinct-mi100.json"
    assert props["baseline.action"] == "compared"
    assert props["check: OECloverDagFBCGPU :: duration <= baseline + 5%"] == (
        "failed: duration: observed 2.936 ms, expected <= 2.804 ms, baseline 2.67 ms (change +10.0%)"
    )
    assert props["check: Nope* :: occupancy >= 40%"].startswith("error: pattern 'Nope*' matched no kernel")
    vprops = {p.get("name"): p.get("value") for p in vcopy.find("properties")}
    assert vprops["device"] == "MI200 (gfx90a)"
    assert vprops["ceiling.hbm_bw"].startswith("1.389 TB/s (empirical: roofline.csv")
    assert "baseline.action" not in vprops  # no baseline-relative check in that suite


def test_a_name_message_text_reader_sees_every_figure(report: Path) -> None:
    """What GitLab / GitHub test reports show of a failed case: its name, the
    failure message and the failure text. Observed, expected, baseline, units."""
    cases = _cases(ET.parse(report).getroot())
    failure = cases["OECloverDagFBCGPU :: duration <= baseline + 5%"].find("failure")
    assert failure.get("type") == "perfcheck.regression"
    message = failure.get("message")
    assert message == "duration: observed 2.936 ms, expected <= 2.804 ms, baseline 2.67 ms (change +10.0%)"
    text = failure.text
    assert text.startswith(FAILED_CHECK.message)
    for line in ("observed:    2.936 ms", "expected:    <= 2.804 ms", "baseline:    2.67 ms", "change:      +10.0%",
                 "detail:      median ratio 1.0996, 95% CI [1.091, 1.108]",
                 f"base units:  observed=0.002936 reference={0.00267 * 1.05!r} baseline=0.00267 unit=s"):
        assert line in text.splitlines()
    vcopy = cases["vecCopy(double*, double*, double*, int, int) :: hbm_bw >= 85% of peak"].find("failure")
    assert vcopy.get("type") == "perfcheck.expectation"
    assert vcopy.get("message") == "hbm_bw: observed 864.2 GB/s, expected >= 1.181 TB/s"


def test_error_recorded_and_passed_cases(report: Path) -> None:
    cases = _cases(ET.parse(report).getroot())
    error = cases["Nope* :: occupancy >= 40%"]
    assert error.find("failure") is None
    assert error.find("error").get("message") == ERROR_CHECK.message
    recorded = cases[case_name(RECORDED_CHECK)]
    assert recorded.find("failure") is None and recorded.find("error") is None
    assert recorded.find("system-out").text.startswith(
        "baseline recorded (no stored baseline to compare with): duration: observed 41 us, expected -, baseline none stored"
    )
    passed = cases["EOCloverFBCGPU :: hbm_bw >= 85% of peak"]
    assert passed.find("system-out").text.startswith("passed: hbm_bw: observed 1.1 TB/s, expected >= 1.044 TB/s")


def test_awkward_kernel_names_stay_well_formed(tmp_path: Path) -> None:
    odd = Check("", 'k<"a" & \'b\'>\x01\x1f', "k*", "duration <= 1 ms", "duration", "<=", 0.002, 0.001, "s",
                FAILED, "expectation", "duration 2 ms; expected <= 1 ms")
    text = junit_xml({"": [odd]})
    root = ET.fromstring(text)  # control characters would make this raise
    case = root.find("testsuite/testcase")
    assert root.find("testsuite").get("name") == "perfcheck"
    assert case.get("classname") == "perfcheck"
    assert case.get("name") == "k<\"a\" & 'b'>?? :: duration <= 1 ms"
    xmlschema = pytest.importorskip("xmlschema")
    if XSD.exists():
        xmlschema.XMLSchema(str(XSD)).validate(text)


def test_empty_run_is_valid(tmp_path: Path) -> None:
    path = write_junit(tmp_path / "empty.xml", {})
    root = ET.parse(path).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("0", "0", "0")
    xmlschema = pytest.importorskip("xmlschema")
    if XSD.exists():
        xmlschema.XMLSchema(str(XSD)).validate(str(path))


def test_schema_check_can_fail(report: Path) -> None:
    """The validation above is real: <properties> under a <testcase>, which the
    Jenkins schema forbids, is rejected."""
    xmlschema = pytest.importorskip("xmlschema")
    if not XSD.exists():
        pytest.skip(f"JUnit schema not available: {XSD}")
    root = ET.parse(report).getroot()
    case = root.find("testsuite/testcase")
    ET.SubElement(ET.SubElement(case, "properties"), "property", name="observed", value="2.936 ms")
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        xmlschema.XMLSchema(str(XSD)).validate(ET.tostring(root, encoding="unicode"))


def _sourced(check: Check, line: int) -> Check:
    from dataclasses import replace

    return replace(check, source_file="examples/stencil/perfcheck.toml", source_line=line)


def test_where_the_expectation_is_declared(tmp_path: Path) -> None:
    """mikepenz/action-junit-report: file from <testsuite file>, line from the last
    ' FILE:N' in the failure text; dorny/test-reporter: a Java frame whose package is
    the file's folders. Without them both guessed 'out/roofline/before.svg:1' from the
    classname perfcheck.before."""
    suites = {"before": [_sourced(FAILED_CHECK, 26), _sourced(PASSED_CHECK, 27)]}
    path = write_junit(tmp_path / "j.xml", suites, attachments={"before": "out/roofline/before.png"})
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite.get("file") == "examples/stencil/perfcheck.toml"
    failed = _cases(root)[case_name(FAILED_CHECK)]
    text = failed.find("failure").text
    assert "declared at: examples/stencil/perfcheck.toml:26" in text
    assert "\nat examples.stencil.Expectation(perfcheck.toml:26)" in text
    import re

    # mikepenz's own pattern: ` [^ ]*{file}.*?:\d+`, last match
    found = re.findall(r" [^ ]*examples/stencil/perfcheck\.toml.*?:\d+", text)
    assert found[-1].endswith(":26")
    # dorny's java-junit frame pattern
    assert any(re.match(r"^at (.*)\((.*):(\d+)\)$", line) for line in text.splitlines())
    # GitLab shows [[ATTACHMENT|...]] from a failing case's system-out; passed cases get none
    assert failed.find("system-out").text == "[[ATTACHMENT|out/roofline/before.png]]"
    passed = _cases(root)[case_name(PASSED_CHECK)]
    assert "ATTACHMENT" not in passed.find("system-out").text
    assert failed.get("file") is None  # not in junit-10.xsd
    if XSD.exists():
        xmlschema = pytest.importorskip("xmlschema")
        xmlschema.XMLSchema(str(XSD)).validate(str(path))


def test_gitlab_flavour_puts_file_and_line_on_each_testcase(tmp_path: Path) -> None:
    suites = {"before": [_sourced(FAILED_CHECK, 26), _sourced(PASSED_CHECK, 27), ERROR_CHECK]}
    path = write_junit(tmp_path / "j.xml", suites, flavour="gitlab")
    cases = _cases(ET.parse(path).getroot())
    assert (cases[case_name(FAILED_CHECK)].get("file"), cases[case_name(FAILED_CHECK)].get("line")) == (
        "examples/stencil/perfcheck.toml", "26")
    assert cases[case_name(PASSED_CHECK)].get("line") == "27"
    assert cases[case_name(ERROR_CHECK)].get("file") is None
    with pytest.raises(ValueError):
        write_junit(tmp_path / "k.xml", suites, flavour="surefire")


def test_xfail_outcomes_say_what_they_are() -> None:
    """An xpassed case's system-out said "passed:"; an xfailed case is pytest's skipped."""
    from perfcheck.model import XFAILED, XPASSED

    xpass, xfail = (Check("s", "k", "k", "occupancy >= 40%", "occupancy_pct", ">=", 50.0, 40.0, "%", outcome,
                          "expectation", "m") for outcome in (XPASSED, XFAILED))
    root = ET.fromstring(junit_xml({"s": [xpass, xfail]}).split("\n", 1)[1])
    xpassed, xfailed = root.findall(".//testcase")
    assert xpassed.find("system-out").text.startswith("xpassed: occupancy_pct: observed 50.0%")
    assert xfailed.find("skipped").get("type") == "pytest.xfail"
    assert root.find("testsuite").get("skipped") == "1"
