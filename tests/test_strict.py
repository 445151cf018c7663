"""A gate that cannot lie: strict baselines in CI (a missing or re-fingerprinted
baseline is an ERROR, never a silent recording), updates that say what changed,
paths that do not depend on the working directory, bad config values as one-line
errors, and no temp files of killed writers left in baselines/."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from perfcheck import baseline as baselines
from perfcheck import checking
from perfcheck.config import anchor_dir, read_config, resolver

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"
CONFIG = EXAMPLE / "perfcheck.toml"
AFTER = "after/mi100_gfx908_rocprof.json"
EO = "EOCloverFBCGPU(float*, float const*, int)"


def _errors(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("perfcheck: ERROR ")]


# --- the setting: CI > defaults, opt-outs above it ---------------------------------------------


@pytest.mark.parametrize(("env", "cli", "strict", "origin"), [
    ({}, None, False, "default"),
    ({"CI": "true"}, None, True, "CI=true"),
    ({"CI": "1"}, None, True, "CI=1"),
    ({"CI": "false"}, None, False, "default"),
    ({"CI": "0"}, None, False, "default"),
    ({"CI": "true"}, False, False, "--strict-baseline"),  # --no-strict-baseline
    ({"CI": "true", "PERFCHECK_STRICT_BASELINE": "0"}, None, False, "PERFCHECK_STRICT_BASELINE"),
    ({"PERFCHECK_STRICT_BASELINE": "yes"}, None, True, "PERFCHECK_STRICT_BASELINE"),
    ({}, True, True, "--strict-baseline"),
])
def test_strict_baseline_setting(env, cli, strict, origin, tmp_path: Path) -> None:
    suite = resolver(cli={"strict_baseline": cli}, env=env, config=CONFIG, cwd=tmp_path).suite("after")
    assert suite.strict_baseline is strict
    assert suite.origin("strict_baseline") == origin


def test_strict_baseline_in_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "perfcheck.toml"
    config.write_text(CONFIG.read_text().replace('tolerances = {', 'strict_baseline = true\ntolerances = {')
                      .replace('"machines/', f'"{EXAMPLE}/machines/').replace('"results-', f'"{EXAMPLE}/results-'))
    suite = resolver(env={}, config=config, cwd=tmp_path).suite("after")
    assert suite.strict_baseline is True
    assert suite.origin("strict_baseline").endswith("strict_baseline")
    # the command line still opts out
    assert resolver(cli={"strict_baseline": False}, env={"CI": "true"}, config=config,
                    cwd=tmp_path).suite("after").strict_baseline is False


# --- the CLI under CI=true ---------------------------------------------------------------------


@pytest.mark.usefixtures("ci_run")
def test_missing_baseline_in_ci_is_an_error_naming_file_and_command(cli, tmp_path: Path) -> None:
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)
    assert result.code == 1, result.err
    assert "perfcheck: 12 passed, 4 errors" in result.out
    assert "recorded" not in result.out.split("perfcheck: ")[-1]
    assert not list(tmp_path.rglob("*.json")), "nothing is recorded in CI"
    errors = _errors(result.err)
    assert len(errors) == 4
    command = f"perfcheck baseline update --config {CONFIG} --suite after --baseline-dir {tmp_path}"
    for line in errors:
        assert f"no baseline at {tmp_path / AFTER}" in line
        assert "strict baselines: CI=true" in line
        assert f"`{command}`" in line
    assert "baseline missing: after: " in result.out
    # the command named records it, and the next CI run compares and passes
    recorded = cli(*command.split()[1:])
    assert recorded.code == 0, recorded.err
    again = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)
    assert again.code == 0, again.err
    assert "perfcheck: 16 passed" in again.out and "baseline compared: after" in again.out


@pytest.mark.usefixtures("ci_run")
def test_the_command_named_leaves_the_jobs_reports_and_history_out(cli, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path / "b",
                 "--junit", out / "junit.xml", f"--markdown={out / 'summary.md'}", "--history", out / "h.sqlite")
    assert result.code == 1, result.err
    command = f"perfcheck baseline update --config {CONFIG} --suite after --baseline-dir {tmp_path / 'b'}"
    assert all(f"`{command}`" in line for line in _errors(result.err)), result.err


@pytest.mark.usefixtures("ci_run")
def test_recording_stays_explicit_in_ci(cli, tmp_path: Path) -> None:
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path, "--update-baseline")
    assert result.code == 0, result.err
    assert (tmp_path / AFTER).is_file()
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path / "other",
                 "--no-strict-baseline")
    assert result.code == 0 and "4 recorded" in result.out


@pytest.mark.usefixtures("ci_run")
def test_another_gpu_in_ci_names_the_fingerprint_fields_that_differ(cli, tmp_path: Path) -> None:
    """A stray PERFCHECK_ARCH: the run looks for another file, finds the suite's
    baseline of another GPU, and says what changed instead of recording a new one."""
    assert cli("baseline", "update", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path).code == 0
    os.environ["PERFCHECK_ARCH"] = "mi250x"
    try:
        result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)
    finally:
        del os.environ["PERFCHECK_ARCH"]
    assert result.code == 1
    errors = _errors(result.err)
    assert len(errors) == 4
    assert f"no baseline for this machine at {tmp_path / 'after' / 'mi250x_gfx90a_rocprof.json'}" in errors[0]
    assert f"{tmp_path / AFTER} was recorded with another fingerprint" in errors[0]
    assert "device 'mi100' \u2192 'mi250x', arch 'gfx908' \u2192 'gfx90a'" in errors[0]
    assert sorted(p.name for p in (tmp_path / "after").glob("*.json")) == ["mi100_gfx908_rocprof.json"]


@pytest.mark.usefixtures("ci_run")
def test_profiler_version_bump_at_the_same_path_is_an_error(cli, tmp_path: Path) -> None:
    assert cli("baseline", "update", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path).code == 0
    path = tmp_path / AFTER
    doc = json.loads(path.read_text())
    doc["fingerprint"]["tool_version"] = "1.0.0"  # recorded by an older rocprof; this file says no version
    path.write_text(json.dumps(doc))
    before = path.read_text()
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)
    assert result.code == 1
    errors = _errors(result.err)
    assert len(errors) == 4 and "tool_version '1.0.0' \u2192 'unknown'" in errors[0]
    assert "baseline fingerprint-mismatch: after" in result.out
    assert path.read_text() == before


@pytest.mark.usefixtures("ci_run")
def test_a_kernel_the_baseline_lacks_is_an_error_in_ci(cli, tmp_path: Path) -> None:
    assert cli("baseline", "update", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path).code == 0
    path = tmp_path / AFTER
    doc = json.loads(path.read_text())
    del doc["kernels"][EO]
    path.write_text(json.dumps(doc))
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)
    assert result.code == 1
    (error,) = _errors(result.err)
    assert f"no baseline for kernel {EO!r}: {tmp_path / AFTER} lacks it" in error
    assert EO not in json.loads(path.read_text())["kernels"]


@pytest.mark.usefixtures("local_run")
def test_locally_the_first_run_records_loudly(cli, tmp_path: Path) -> None:
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)
    assert result.code == 0
    assert f"no baseline at {tmp_path / AFTER}: RECORDED this run's values as the new baseline" in result.err
    assert (tmp_path / AFTER).is_file()
    strict = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path / "b2", "--strict-baseline")
    assert strict.code == 1 and len(_errors(strict.err)) == 4


@pytest.mark.usefixtures("ci_run")
def test_readme_command_passes_the_same_in_ci(cli, tmp_path: Path) -> None:
    """The README's main command compares with the committed baselines: CI=true
    changes nothing (their fingerprints match this data)."""
    result = cli("check", "--config", CONFIG, "--junit", tmp_path / "junit.xml")
    assert result.code == 1  # the "before" suite fails on purpose
    assert "ERROR" not in result.out + result.err
    assert "baseline compared: before" in result.out and "baseline compared: after" in result.out
    assert "perfcheck: 24 passed, 8 failed" in result.out


# --- updates say what changed ----------------------------------------------------------------------


def test_update_prints_old_to_new_per_kernel_and_metric(cli, tmp_path: Path) -> None:
    # the slow "before" profile recorded as suite after's baseline, then the real one
    first = cli("baseline", "update", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path,
                EXAMPLE / "results-before.csv")
    assert first.code == 0, first.err
    result = cli("baseline", "update", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    at = lines.index(f"perfcheck: baseline updated: after: {tmp_path / AFTER}")
    changes = [line for line in lines[at + 1:] if line.startswith("perfcheck:   ")]
    assert any(re.fullmatch(rf"perfcheck:   {re.escape(EO)}: duration 2\.\d+ ms \u2192 1\.\d+ ms \(-4\d\.\d%\)", c)
               for c in changes), changes
    assert f"perfcheck:   {EO}: occupancy_pct 20.0% \u2192 40.0% (+100.0%)" in changes
    assert any(c.startswith(f"perfcheck:   {EO}: ") and "other metrics changed" in c for c in changes)


def test_changes_records() -> None:
    old = baselines.Baseline("s", {}, {"a": baselines.KernelBaseline({"duration": 1.0, "vgpr": 8}),
                                       "gone": baselines.KernelBaseline({"duration": 1.0})})
    new = baselines.Baseline("s", {}, {"a": baselines.KernelBaseline({"duration": 1.5, "vgpr": 16}),
                                       "new": baselines.KernelBaseline({"duration": 1.0})})
    found = {c.kernel: c for c in baselines.changes(old, new, {"a": ["duration"]})}
    assert found["a"].metrics == (baselines.MetricChange("duration", 1.0, 1.5),) and found["a"].others == 1
    assert (found["gone"].status, found["new"].status) == ("removed", "added")
    assert baselines.changes(new, new) == []


# --- paths -------------------------------------------------------------------------------------------


def test_config_paths_resolve_against_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj"
    (project / "conf").mkdir(parents=True)
    config = project / "conf" / "perfcheck.toml"
    config.write_text(
        '[tool.perfcheck]\ndevice = "mi100"\npeaks = ["../machines/m.toml"]\nbaseline_dir = "../baselines"\n'
        '[tool.perfcheck.suites.s]\nprofiles = ["../profiles/p.csv"]\n'
        '[tool.perfcheck.suites.s.expect]\n"*" = ["duration <= baseline + 5%"]\n')
    for where in (tmp_path, project, project / "conf"):
        monkeypatch.chdir(where)
        suite = resolver(env={}, config=config).suite("s", validate=False)
        assert suite.baseline_dir == project / "baselines"
        assert suite.peaks == (project / "machines" / "m.toml",)
        assert suite.profiles == (project / "profiles" / "p.csv",)


def test_default_baselines_are_anchored_not_in_the_working_directory(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "mlproj"
    (project / "tests" / "perf").mkdir(parents=True)
    assert anchor_dir(project / "tests" / "perf") == project / "tests" / "perf"  # nothing above: the test's own
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    for where in (tmp_path, project, project / "tests"):
        monkeypatch.chdir(where)
        assert anchor_dir(project / "tests" / "perf") == project
        suite = resolver(env={}, search_from=project / "tests" / "perf").suite(
            "t", profiles=[EXAMPLE / "results-after.csv"], expect={"*": ["duration <= baseline"]}, validate=False)
        assert suite.baseline_dir == project / "baselines"


# --- expectation lines -------------------------------------------------------------------------------


def test_expectation_lines_of_the_example() -> None:
    text = CONFIG.read_text().splitlines()
    lines = read_config(CONFIG).expectation_lines("after")
    for expectation, line in lines["*Clover*FBCGPU*"].items():
        assert f'"{expectation}"' in text[line - 1]
        header = max(i for i, t in enumerate(text[:line]) if t.startswith("[tool.perfcheck.suites."))
        assert text[header].startswith("[tool.perfcheck.suites.after")
    suite = resolver(env={}, config=CONFIG).suite("after")
    run = checking.evaluate_suite(suite)
    assert {(c.source_file, text[c.source_line - 1].strip().rstrip(",")) for c in run.checks} == {
        (str(CONFIG), f'"{c.expression}"') for c in run.checks}


# --- bad values: one line, exit 2 ------------------------------------------------------------------


@pytest.mark.parametrize(("line", "fragment"), [
    ('baseline_dir = "base\\u0000lines"', "baseline_dir: contains a NUL byte"),
    ('peaks = ["machines/mulan\\u0000.toml"]', "peaks: contains a NUL byte"),
    (f'baseline_dir = "{"d" * 300}"', "baseline_dir: path too long: a name of 300 bytes (at most 255)"),
    (f'peaks = ["{"/d" * 2100}"]', "peaks: path too long: 4200 bytes"),
    ('arch = "mi\\u0000100"', "arch: contains a NUL byte"),
])
def test_nul_bytes_and_long_paths_are_one_line_config_errors(cli, tmp_path: Path, line: str, fragment: str) -> None:
    config = tmp_path / "perfcheck.toml"
    config.write_text(f'{line}\n[suites.s]\nprofiles = ["{EXAMPLE / "results-after.csv"}"]\n'
                      '[suites.s.expect]\n"*" = ["occupancy >= 1%"]\n')
    result = cli("check", "--config", config)
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfcheck: error: perfcheck.toml ") or \
        lines[0].startswith(f"perfcheck: error: {config} "), result.err
    assert fragment in lines[0]


def test_nul_byte_on_the_command_line(cli, tmp_path: Path) -> None:
    result = cli("check", "--config", CONFIG, "--baseline-dir", "a\0b")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "perfcheck: error: --baseline-dir: contains a NUL byte" in result.err


# --- temp files of killed writers --------------------------------------------------------------------


def _dead_pid() -> int:
    pid = 2**22 - 1  # above the default pid_max of most systems
    while pid > 1:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1
    raise RuntimeError("no free pid")


@pytest.mark.usefixtures("local_run")
def test_killed_writers_temp_files_go_when_nothing_changes(cli, tmp_path: Path) -> None:
    assert cli("baseline", "update", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path).code == 0
    folder = (tmp_path / AFTER).parent
    (tmp_path / "before").mkdir()
    stale = [folder / f".mi100_gfx908_rocprof.json.{_dead_pid()}.0badc0de.tmp",
             folder / f".other-machine.json.{_dead_pid()}.12345678.tmp",
             tmp_path / "before" / f".mi100_gfx908_rocprof.json.{_dead_pid()}.87654321.tmp"]
    for path in stale:
        path.write_text('{"format_version": 1, "kern')  # what a killed writer leaves
    live = folder / f".mi100_gfx908_rocprof.json.{os.getpid()}.aaaaaaaa.tmp"
    live.write_text("{")  # a writer still at work: never touched
    result = cli("check", "--config", CONFIG, "--suite", "after", "--baseline-dir", tmp_path)  # compares, writes nothing
    assert result.code == 0, result.err
    assert not any(p.exists() for p in stale)
    assert live.exists()
    live.unlink()
    # the same through baseline.write when the file already says it
    stale[0].write_text("{")
    assert baselines.write(tmp_path / AFTER, baselines.load(tmp_path / AFTER)) is False
    assert not stale[0].exists()
