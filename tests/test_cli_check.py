"""`perfcheck check` and `perfcheck baseline update`: exit codes, reports, one-line errors,
and the example's committed inputs being what examples/stencil/generate.py writes."""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PERFCHECK_SHARED", ROOT.parent / "shared"))
EXAMPLE = ROOT / "examples" / "stencil"
CONFIG = EXAMPLE / "perfcheck.toml"
XSD = SHARED / "reference" / "junit" / "jenkins-xunit-junit-10.xsd"


def _one_line_error(result) -> str:
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfcheck: error: "), result.err
    assert "Traceback" not in result.err
    return lines[0]


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_after_passes(cli, tmp_path: Path) -> None:
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)
    assert result.code == 0, result.err
    assert "perfcheck: 12 passed, 4 recorded" in result.out
    assert "baseline recorded: after: " in result.out


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_before_fails(cli, tmp_path: Path) -> None:
    result = cli("check", "--config", CONFIG, "--suite", "before", "--baseline-dir", tmp_path)
    assert result.code == 1
    assert "perfcheck: 4 passed, 8 failed, 4 recorded" in result.out
    failed = [line for line in result.err.splitlines() if line.startswith("perfcheck: FAILED before: ")]
    assert len(failed) == 8
    assert any("occupancy_pct 20.0%; expected >= 40.0%" in line for line in failed)
    assert any("(44.9% of peak); expected >= 860.4 GB/s = 80% of empirical hbm_bw 1.075 TB/s" in line for line in failed)


def test_committed_baselines_compare_without_writing(cli, tmp_path: Path) -> None:
    committed = sorted((EXAMPLE / "baselines").rglob("*.json"))
    assert [p.relative_to(EXAMPLE).as_posix() for p in committed] == [
        "baselines/after/mi100_gfx908_rocprof.json", "baselines/before/mi100_gfx908_rocprof.json"]
    stamps = [p.stat().st_mtime_ns for p in committed]
    result = cli("check", "--config", CONFIG)
    assert result.code == 1
    assert "baseline compared: before: " in result.out and "baseline compared: after: " in result.out
    assert "perfcheck: 24 passed, 8 failed" in result.out
    assert [p.stat().st_mtime_ns for p in committed] == stamps


def test_readme_command_writes_every_report(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("check", "--config", CONFIG, "--junit", "out/junit.xml", "--markdown", "out/summary.md",
                 "--roofline", "out/roofline", "--json", "out/results.json", "--openmetrics", "out/metrics.txt")
    assert result.code == 1
    assert "perfcheck: JUnit XML: out/junit.xml" in result.out
    assert "perfcheck: Markdown summary: out/summary.md" in result.out
    assert "perfcheck: roofline plots: out/roofline/before.png, out/roofline/before.svg" in result.out
    for name in ("junit.xml", "summary.md", "results.json", "metrics.txt", "roofline/after.png", "roofline/after.svg"):
        assert (tmp_path / "out" / name).is_file(), name
    if not XSD.exists():
        pytest.skip(f"JUnit schema not available: {XSD}")
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(str(tmp_path / "out" / "junit.xml"))


def test_paths_and_expectations_on_the_command_line(cli, tmp_path: Path) -> None:
    result = cli("check", EXAMPLE / "results-after.csv", "--arch", "mi100", "--baseline-dir", tmp_path,
                 "--peaks", EXAMPLE / "machines" / "mulan-mi100.toml",
                 "--expect", "EOCloverFBCGPU*", "occupancy >= 40%", "--expect", "EOCloverFBCGPU*", "hbm_bw >= 80% of peak")
    assert result.code == 0, result.err
    assert "perfcheck: 2 passed" in result.out
    assert not (tmp_path / "check").exists()  # no baseline-relative expectation: nothing recorded


def test_path_replaces_the_suites_profiles(cli, tmp_path: Path) -> None:
    result = cli("check", "--config", CONFIG, "--suite", "after", EXAMPLE / "results-before.csv", "--baseline-dir", tmp_path)
    assert result.code == 1  # the before profile under the after suite's expectations


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_environment_sets_what_the_command_line_does_not(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PERFCHECK_CONFIG", str(CONFIG))
    monkeypatch.setenv("PERFCHECK_SUITES", "after")
    monkeypatch.setenv("PERFCHECK_BASELINE_DIR", str(tmp_path / "env"))
    result = cli("check")
    assert result.code == 0, result.err
    assert (tmp_path / "env" / "after" / "mi100_gfx908_rocprof.json").is_file()
    result = cli("check", "--baseline-dir", tmp_path / "cli")  # the option wins
    assert (tmp_path / "cli" / "after" / "mi100_gfx908_rocprof.json").is_file()


def test_baseline_update_writes_and_exits_zero(cli, tmp_path: Path) -> None:
    result = cli("baseline", "update", "--config", CONFIG, "--baseline-dir", tmp_path)
    assert result.code == 0, result.err
    assert "baseline updated: before: " in result.out and "baseline updated: after: " in result.out
    path = tmp_path / "after" / "mi100_gfx908_rocprof.json"
    assert json.loads(path.read_text())["kernels"]["EOCloverFBCGPU(float*, float const*, int)"]["runs"] == 1
    result = cli("baseline", "update", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path, "--merge")
    assert result.code == 0, result.err
    assert json.loads(path.read_text())["kernels"]["EOCloverFBCGPU(float*, float const*, int)"]["runs"] == 2


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_update_baseline_option(cli, tmp_path: Path) -> None:
    assert cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path).code == 0
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path, "--update-baseline")
    assert result.code == 0
    assert "baseline updated: after: " in result.out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--config", "nope.toml"), "perfcheck: error: --config: no such config file 'nope.toml'"),
        (("--config", CONFIG, "--suite", "aftr"), "no suite 'aftr'; did you mean 'after'?"),
        (("--config", CONFIG, "--arch", "mi1000"), "perfcheck: error: --arch: "),
        ((EXAMPLE / "results-after.csv", "--expect", "*", "occupancy >= 40 %% of peak"), "column"),
        ((EXAMPLE / "results-after.csv", "--expect", "*", "occupancy >= 40%", "--peaks", "nope.txt"),
         "perfcheck: error: --peaks: no such file 'nope.txt'"),
        (("--config", CONFIG, EXAMPLE / "results-after.csv"), "apply to one suite; the config has 2 (before, after)"),
    ],
)
def test_usage_errors_are_one_line(cli, tmp_path: Path, monkeypatch, args, expected) -> None:
    monkeypatch.chdir(tmp_path)
    assert expected in _one_line_error(cli("check", *args))


def test_no_config_no_suites(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFCHECK_CONFIG", raising=False)
    assert "no suites to check" in _one_line_error(cli("check"))


def test_malformed_profile_is_exit_2(cli, tmp_path: Path) -> None:
    bad = tmp_path / "results.csv"
    text = (EXAMPLE / "results-after.csv").read_text()
    bad.write_text(text[: len(text) // 2])  # cut off mid-row
    line = _one_line_error(cli("check", bad, "--arch", "mi100", "--expect", "*", "occupancy >= 40%"))
    assert str(bad) in line


# --- the example's inputs ---------------------------------------------------------------------------


def test_generator_reproduces_committed_example_files(tmp_path: Path) -> None:
    generator = runpy.run_path(str(EXAMPLE / "generate.py"))
    written = generator["write_all"](tmp_path)
    names = sorted(p.relative_to(tmp_path).as_posix() for p in written)
    assert names == ["kernel_trace.csv", "machines/mulan-mi100.toml", "results-after.csv", "results-before.csv"]
    for name in names:
        assert (tmp_path / name).read_bytes() == (EXAMPLE / name).read_bytes(), name


def test_example_profiles_read_as_rocprof_v1(cli) -> None:
    result = cli("inspect", EXAMPLE / "results-before.csv", "--arch", "mi100",
                 "--peaks", EXAMPLE / "machines" / "mulan-mi100.toml", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "rocprof-results"
    kernels = {k["kernel"]: k for k in doc["kernels"]}
    eo = kernels["EOCloverFBCGPU(float*, float const*, int)"]  # " [clone .kd]" stripped
    assert eo["calls"] == 20
    assert eo["metrics"]["lds_per_workgroup"] == 24576 and eo["metrics"]["vgpr"] == 52
    assert eo["metrics"]["hbm_bytes"] == pytest.approx(1.29009797e9)
    assert eo["metrics"]["occupancy_pct"] == 20.0
    result = cli("peaks", EXAMPLE / "machines" / "mulan-mi100.toml", "--json")
    # mixbench's measured bandwidth and fp32 compute (the roofline's solid compute roof)
    assert result.code == 0 and result.json()["peaks"] == {"hbm_bw": 1075.46e9, "flop_rate_fp32": 21988.38e9}


def test_example_story_under_the_occupancy_calculator(cli) -> None:
    before = cli("occupancy", "--arch", "mi100", "--block", "256", "--vgpr", "52", "--sgpr", "64", "--lds", "24576", "--json")
    after = cli("occupancy", "--arch", "mi100", "--block", "256", "--vgpr", "64", "--sgpr", "64", "--json")
    assert (before.json()["occupancy_pct"], before.json()["limiter"]) == (20.0, "lds")
    assert (after.json()["occupancy_pct"], after.json()["limiter"]) == (40.0, "vgpr")
