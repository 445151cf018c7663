"""The JSON results file and the helpers every check report shares (atomic writes,
device label, expected/baseline/change figures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import profile
from perfcheck.analysis import analyse
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, Check
from perfcheck.report import results
from perfcheck.report.results import BaselineStatus, write_atomic, write_results

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil" / "kernel_trace.csv"


def checks() -> list[Check]:
    """The four kinds of check a run produces, with MI100 stencil figures."""
    return [
        Check("stencil", "EOCloverFBCGPU", "EOClover*FBCGPU*", "hbm_bw >= 85% of peak", "hbm_bw", ">=",
              1.1e12, 0.85 * 1.2288e12, "B/s", PASSED, "expectation",
              "hbm_bw 1.1 TB/s (89.5% of peak); expected >= 1.044 TB/s = 85% of theoretical hbm_bw 1.229 TB/s",
              detail="hbm_bw: theoretical, arch database: mi100"),
        Check("stencil", "OECloverDagFBCGPU", "OEClover*", "duration <= baseline + 5%", "duration", "<=",
              0.002936, 0.00267 * 1.05, "s", FAILED, "baseline",
              "duration 2.936 ms (+10.0%) vs baseline 2.67 ms; expected <= baseline + 5% = 2.804 ms",
              baseline=0.00267, detail="median ratio 1.0996, 95% CI [1.091, 1.108]"),
        Check("stencil", "Nope*", "Nope*", "occupancy >= 40%", "occupancy_pct", ">=", None, None, "%", ERROR,
              "expectation", "pattern 'Nope*' matched no kernel of 5 (closest: 'OECloverFBCGPU')"),
        Check("stencil", "void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int)", "*Reduce*",
              "duration <= baseline + 5%", "duration", "<=", 4.1e-05, None, "s", RECORDED, "baseline",
              "duration 41 us: no baseline yet; recorded as the new baseline"),
    ]


@pytest.fixture(scope="module")
def stencil():
    if not STENCIL.exists():
        pytest.skip(f"example profile missing: {STENCIL}")
    return analyse([STENCIL], arch="mi100")


def test_write_atomic_creates_parents_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.txt"
    write_atomic(target, "one\n")
    write_atomic(target, b"two\n")
    assert target.read_text() == "two\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.txt"]


def test_write_atomic_failure_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "results.json"
    target.write_text("old\n")

    def broken(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_figures_of_a_baseline_failure() -> None:
    failed = checks()[1]
    assert results.observed_text(failed) == "2.936 ms"
    assert results.expected_text(failed) == "<= 2.804 ms"
    assert results.baseline_text(failed) == "2.67 ms"
    assert results.change_pct(failed) == pytest.approx((0.002936 - 0.00267) / 0.00267 * 100)
    assert results.change_text(failed) == "+10.0%"
    assert results.figures_line(failed) == (
        "duration: observed 2.936 ms, expected <= 2.804 ms, baseline 2.67 ms (change +10.0%)"
    )
    passed, error, recorded = checks()[0], checks()[2], checks()[3]
    assert results.figures_line(passed) == "hbm_bw: observed 1.1 TB/s, expected >= 1.044 TB/s"
    assert results.figures_line(error) == "occupancy_pct: observed -, expected -"
    assert results.figures_line(recorded) == "duration: observed 41 us, expected -, baseline none stored"


def test_two_sided_expected_is_the_expression() -> None:
    two = Check("", "k", "k", "1 ms <= duration <= 2 ms", "duration", "<=..<=", 0.0025, 0.002, "s", FAILED,
                "expectation", "duration 2.5 ms; expected 1 ms <= duration <= 2 ms")
    assert results.expected_text(two) == "1 ms <= duration <= 2 ms"


def test_device_labels_from_database_profile_or_arch(stencil) -> None:
    assert results.device_label(stencil) == "AMD Instinct MI100"
    vcopy = analyse([profile("omniperf/rocprofiler-compute-vcopy-MI200")])
    assert results.device_label(vcopy) == "MI200 (gfx90a)"  # sysinfo.csv names the family, no product
    gemm = analyse([profile("ncu/gardenia-learningnote4dev/gemm.csv")])
    assert results.device_label(gemm) == "sm_80"
    assert results.device_label(None) == "unknown device"


def test_results_document(stencil, tmp_path: Path) -> None:
    suites = {"stencil": checks()}
    path = write_results(tmp_path / "out" / "results.json", suites, analyses={"stencil": stencil})
    text = path.read_text()
    assert text.endswith("}\n")
    doc = json.loads(text)
    assert doc["format_version"] == 1
    assert doc["summary"] == {"total": 4, "passed": 1, "failed": 1, "recorded": 1, "error": 1, "ok": False}
    suite = doc["suites"]["stencil"]
    assert suite["target"] == {"arch": "gfx908", "device": "AMD Instinct MI100", "label": "AMD Instinct MI100",
                               "origin": "given"}
    hbm = next(c for c in suite["ceilings"] if c["name"] == "hbm_bw")
    assert (hbm["value"], hbm["unit"], hbm["kind"]) == (1.2288e12, "B/s", "theoretical")
    assert suite["profiles"][0]["format"] == "rocprofv3-kernel-trace"
    # no status given: a recorded baseline check means the suite recorded one
    assert suite["baseline"] == {"path": None, "action": "recorded"}
    failed = suite["checks"][1]
    assert failed == {
        "suite": "stencil", "kernel": "OECloverDagFBCGPU", "pattern": "OEClover*",
        "expression": "duration <= baseline + 5%", "metric": "duration", "relation": "<=",
        "observed": 0.002936, "reference": 0.00267 * 1.05, "unit": "s", "outcome": "failed", "origin": "baseline",
        "message": "duration 2.936 ms (+10.0%) vs baseline 2.67 ms; expected <= baseline + 5% = 2.804 ms",
        "baseline": 0.00267, "detail": "median ratio 1.0996, 95% CI [1.091, 1.108]", "passed": False,
        "source_file": None, "source_line": None, "diagnosis": "",
        "change_pct": pytest.approx(9.962546816479),
    }
    assert suite["checks"][2]["observed"] is None and suite["checks"][2]["passed"] is False
    assert suite["checks"][3]["passed"] is True


def test_results_explicit_baseline_status_and_nan(tmp_path: Path) -> None:
    nan = Check("s", "k", "k", "gips >= 1", "gips", ">=", float("nan"), 1.0, "", ERROR, "expectation", "no gips")
    path = write_results(tmp_path / "r.json", {"s": [nan]},
                         baselines={"s": BaselineStatus("baselines/s/mi100.json", "updated")})
    doc = json.loads(path.read_text())  # strict JSON: NaN became null
    assert "NaN" not in path.read_text()
    assert doc["suites"]["s"]["checks"][0]["observed"] is None
    assert doc["suites"]["s"]["baseline"] == {"path": "baselines/s/mi100.json", "action": "updated"}
    assert doc["suites"]["s"]["target"] is None


def test_report_modules_import_nothing_heavy() -> None:
    """The CLI and the pytest plugin import these; pandas and matplotlib load only
    when a report or plot is actually written."""
    code = (
        "import sys\n"
        "import perfcheck.report.results, perfcheck.report.junit, perfcheck.report.markdown\n"
        "import perfcheck.report.openmetrics, perfcheck.report.roofline\n"
        "print(sorted(m for m in ('pandas', 'matplotlib', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_results_validate_against_the_published_schema(stencil, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(results.results_schema_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    path = write_results(tmp_path / "results.json", {"stencil": checks(), "empty": []}, analyses={"stencil": stencil},
                         baselines={"stencil": results.BaselineStatus("baselines/stencil/x.json", "compared")})
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, schema)
    # the schema is strict enough to catch a broken document
    doc["suites"]["stencil"]["checks"][0]["outcome"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)
    del doc["summary"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_schema_command_prints_the_shipped_schema(capsys) -> None:
    from perfcheck.cli import main

    assert main(["schema", "results"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["title"] == "perfcheck check results"
    assert printed == json.loads(results.results_schema_text())


def test_figures_line_leaves_out_a_change_it_cannot_compute() -> None:
    from perfcheck.model import PASSED, Check
    from perfcheck.report.results import figures_line

    spills = Check("s", "k", "k", "scratch_per_thread == 0", "scratch_per_thread", "==", 0.0, 0.0, "B", PASSED,
                   "expectation", "m", baseline=0.0)
    assert figures_line(spills) == "scratch_per_thread: observed 0 B, expected == 0 B, baseline 0 B"
    slower = Check("s", "k", "k", "duration <= baseline + 5%", "duration", "<=", 0.0022, 0.0021, "s", PASSED,
                   "baseline", "m", baseline=0.002)
    assert figures_line(slower).endswith("baseline 2 ms (change +10.0%)")



def test_a_check_run_results_file_validates(tmp_path: Path) -> None:
    """``perfcheck check --json`` adds a top-level "run" block, which the published schema
    (additionalProperties false) rejected: the file perfcheck writes did not validate."""
    jsonschema = pytest.importorskip("jsonschema")
    from perfcheck.cli import main

    config = ROOT / "examples" / "stencil" / "perfcheck.toml"
    main(["check", "--config", str(config), "--suite", "after", "--json", str(tmp_path / "r.json")])
    doc = json.loads((tmp_path / "r.json").read_text())
    assert "run" in doc and doc["suites"]["after"]["measurements"]
    jsonschema.validate(doc, json.loads(results.results_schema_text()))



def test_xfail_outcomes_validate() -> None:
    """A pytest run with an xfail test counts "xfailed" in its summaries, which the
    schema's summary (additionalProperties false) rejected."""
    jsonschema = pytest.importorskip("jsonschema")
    from dataclasses import replace

    from perfcheck.model import XFAILED, XPASSED

    cs = checks()
    doc = results.results_document({"s": [replace(cs[0], outcome=XFAILED), replace(cs[1], outcome=XPASSED)]})
    assert doc["summary"]["xfailed"] == 1 and doc["summary"]["xpassed"] == 1
    jsonschema.validate(doc, json.loads(results.results_schema_text()))
