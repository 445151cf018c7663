"""Configuration: the issue's TOML shape, one precedence order, errors that say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcheck.config import ConfigError, Layer, find_config, read_config, resolver

ISSUE_SHAPE = """\
[tool.perfcheck]
device = "mi100"                      # or arch; a machine file may be given instead
peaks = ["peaks/mixbench-log.txt"]    # anything `perfcheck peaks` reads, or a machine file
baseline_dir = "baselines"

[tool.perfcheck.suites.stencil]
profiles = ["profiles/results.csv"]

[tool.perfcheck.suites.stencil.expect]
"EOClover*FBCGPU*" = ["hbm_bw >= 85% of peak", "occupancy >= 40%", "duration <= baseline + 5%"]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the issue's pyproject.toml; the working directory is its root."""
    (tmp_path / "peaks").mkdir()
    (tmp_path / "peaks" / "mixbench-log.txt").write_text("placeholder\n")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "results.csv").write_text("placeholder\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n' + ISSUE_SHAPE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_issue_shape_works_as_written(project: Path) -> None:
    settings = resolver(env={}).settings()
    assert settings.config == project / "pyproject.toml"
    suite = settings.suites["stencil"]
    assert suite.profiles == (project / "profiles" / "results.csv",)
    assert suite.peaks == (project / "peaks" / "mixbench-log.txt",)
    assert suite.arch == "mi100"
    assert suite.baseline_dir == project / "baselines"
    assert dict(suite.expect) == {
        "EOClover*FBCGPU*": ("hbm_bw >= 85% of peak", "occupancy >= 40%", "duration <= baseline + 5%")
    }
    assert suite.origin("arch") == "pyproject.toml [tool.perfcheck] arch"
    assert suite.origin("profiles") == "pyproject.toml [tool.perfcheck.suites.stencil] profiles"
    assert settings.junit is None and settings.reports == {}


def test_relative_paths_follow_the_config_file_not_the_working_directory(project: Path, monkeypatch) -> None:
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")
    suite = resolver(env={}).settings().suites["stencil"]  # found by walking up
    assert suite.profiles == (project / "profiles" / "results.csv",)
    # on the command line, paths are relative to the working directory
    (project / "sub" / "other.txt").write_text("x\n")
    suite = resolver(cli={"peaks": ["other.txt"]}, env={}).settings().suites["stencil"]
    assert suite.peaks == (project / "sub" / "other.txt",)
    assert suite.origin("peaks") == "--peaks"


def test_bare_perfcheck_toml(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a.csv").write_text("x\n")
    (tmp_path / "perfcheck.toml").write_text(
        'arch = "gfx90a"\ntolerances = { duration = "5%", occupancy = "2.5%" }\n'
        '[suites.s]\nprofiles = ["a.csv"]\nexpect = { "k*" = "duration <= baseline" }\n'
    )
    monkeypatch.chdir(tmp_path)
    suite = resolver(env={}).settings().suites["s"]
    assert suite.arch == "gfx90a"
    assert suite.expect == {"k*": ("duration <= baseline",)}
    assert suite.tolerances == {"duration": 0.05, "occupancy_pct": 0.025}
    assert suite.origin("arch") == "perfcheck.toml arch"


def test_precedence_marker_cli_environment_config_default(project: Path) -> None:
    def arch(**kwargs) -> tuple[str | None, str]:
        suite = resolver(**kwargs).settings().suites["stencil"]
        return suite.arch, suite.origin("arch")

    assert arch(env={}) == ("mi100", "pyproject.toml [tool.perfcheck] arch")
    assert arch(env={"PERFCHECK_ARCH": "mi250x"}) == ("mi250x", "PERFCHECK_ARCH")
    assert arch(env={"PERFCHECK_DEVICE": "mi250x"}) == ("mi250x", "PERFCHECK_DEVICE")
    assert arch(cli={"arch": "a100"}, env={"PERFCHECK_ARCH": "mi250x"}) == ("a100", "--arch")
    marker = Layer.from_mapping("marker", {"arch": "h100-sxm"}, lambda k: f"@pytest.mark.perf({k}=...)", project)
    assert arch(cli={"arch": "a100"}, env={"PERFCHECK_ARCH": "mi250x"}, overrides=marker) == (
        "h100-sxm", "@pytest.mark.perf(arch=...)")
    # the default: no value at all
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace('device = "mi100"', ""))
    assert arch(env={}) == (None, "default")


def test_suite_keys_win_within_the_config_but_not_over_the_environment(project: Path) -> None:
    text = ISSUE_SHAPE.replace('profiles = ["profiles/results.csv"]', 'profiles = ["profiles/results.csv"]\narch = "gfx90a"')
    (project / "pyproject.toml").write_text(text)
    suite = resolver(env={}).settings().suites["stencil"]
    assert (suite.arch, suite.origin("arch")) == ("gfx90a", "pyproject.toml [tool.perfcheck.suites.stencil] arch")
    suite = resolver(env={"PERFCHECK_ARCH": "mi100"}).settings().suites["stencil"]
    assert suite.arch == "mi100"


def test_baseline_dir_default_and_environment(project: Path) -> None:
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace('baseline_dir = "baselines"', ""))
    assert resolver(env={}).settings().suites["stencil"].baseline_dir == project / "baselines"
    suite = resolver(env={"PERFCHECK_BASELINE_DIR": "ci/base", "PERFCHECK_UPDATE_BASELINE": "1"}).settings().suites["stencil"]
    assert suite.baseline_dir == project / "ci" / "base"
    assert suite.update_baseline is True
    assert suite.origin("update_baseline") == "PERFCHECK_UPDATE_BASELINE"


def test_environment_lists_and_reports(project: Path) -> None:
    import os

    env = {"PERFCHECK_PEAKS": os.pathsep.join(["peaks/mixbench-log.txt", "profiles/results.csv"]),
           "PERFCHECK_JUNIT": "out/junit.xml", "PERFCHECK_TOLERANCES": "duration=5%,hbm_bw=3%"}
    settings = resolver(env=env).settings()
    assert settings.suites["stencil"].peaks == (project / "peaks" / "mixbench-log.txt", project / "profiles" / "results.csv")
    assert settings.suites["stencil"].tolerances == {"duration": 0.05, "hbm_bw": 0.03}
    assert settings.junit == project / "out" / "junit.xml"
    assert settings.origins["junit"] == "PERFCHECK_JUNIT"


# --- errors name where the bad value came from -----------------------------------------------------


def _error(**kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        resolver(**kwargs).settings()
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_profile_names_the_table_and_key(project: Path) -> None:
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace("profiles/results.csv", "profiles/x.csv"))
    assert _error(env={}) == "pyproject.toml [tool.perfcheck.suites.stencil] profiles: no such file 'profiles/x.csv'"


def test_missing_peaks_file_from_the_environment(project: Path) -> None:
    assert _error(env={"PERFCHECK_PEAKS": "nope.txt"}) == "PERFCHECK_PEAKS: no such file 'nope.txt'"


def test_bad_tolerance_names_its_origin(project: Path) -> None:
    assert _error(env={"PERFCHECK_TOLERANCES": "duration=5"}) == (
        "PERFCHECK_TOLERANCES.duration: tolerance must be a percentage such as \"5%\", not '5'")
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace('baseline_dir = "baselines"', 'tolerances = { duraton = "5%" }'))
    assert _error(env={}) == "pyproject.toml [tool.perfcheck] tolerances: unknown metric 'duraton'; did you mean 'duration'?"


def test_bad_expectation_points_at_the_column(project: Path) -> None:
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace("85% of peak", "85% of peek"))
    message = _error(env={})
    assert message.startswith("pyproject.toml [tool.perfcheck.suites.stencil.expect] 'EOClover*FBCGPU*': "
                              "expectation 'hbm_bw >= 85% of peek', column 18: unknown ceiling 'peek'")


def test_unknown_device_names_its_origin(project: Path) -> None:
    message = _error(cli={"arch": "mi1000"}, env={})
    assert message.startswith("--arch: ") and "mi1000" in message


def test_unknown_key_suggests_the_right_one(project: Path) -> None:
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace("baseline_dir", "baselines_dir"))
    assert _error(env={}) == "pyproject.toml [tool.perfcheck] baselines_dir: unknown key; did you mean 'baseline_dir'?"
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace('profiles = ["', 'profile = ["'))
    assert _error(env={}) == "pyproject.toml [tool.perfcheck.suites.stencil] profile: unknown key; did you mean 'profiles'?"


def test_wrong_types_name_the_key(project: Path) -> None:
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace('device = "mi100"', "device = 100"))
    assert _error(env={}) == "pyproject.toml [tool.perfcheck] arch: expected a non-empty string, not 100"
    (project / "pyproject.toml").write_text(ISSUE_SHAPE.replace('["hbm_bw >= 85% of peak", "occupancy >= 40%", '
                                                                '"duration <= baseline + 5%"]', "3"))
    assert _error(env={}) == ("pyproject.toml [tool.perfcheck.suites.stencil.expect] 'EOClover*FBCGPU*': "
                              "expected a list of expectation strings, not 3")


def test_toml_syntax_error_is_one_line_naming_the_file(project: Path) -> None:
    (project / "pyproject.toml").write_text('[project]\n\n' + ISSUE_SHAPE.replace('"baselines"', "baselines"))
    message = _error(env={})
    assert message.startswith("pyproject.toml: not valid TOML: ") and "(at line 6, column 16)" in message


def test_unknown_suite_suggests(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"no suite 'stencl'; did you mean 'stencil'\?"):
        resolver(env={}).settings(["stencl"])


def test_missing_config_from_the_environment(project: Path) -> None:
    assert _error(env={"PERFCHECK_CONFIG": "nope.toml"}) == "PERFCHECK_CONFIG: no such config file 'nope.toml'"


def test_skip_if_missing_marks_the_suite(project: Path) -> None:
    text = ISSUE_SHAPE.replace("profiles/results.csv", "profiles/absent.csv").replace(
        '[tool.perfcheck.suites.stencil]\n', '[tool.perfcheck.suites.stencil]\nskip_if_missing = true\n')
    (project / "pyproject.toml").write_text(text)
    suite = resolver(env={}).settings().suites["stencil"]
    assert suite.missing is not None and "absent.csv" in suite.missing


def test_pyproject_without_table_is_not_a_config(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_config(tmp_path, stop=tmp_path) is None
    with pytest.raises(ConfigError, match="has no \\[tool.perfcheck\\] table"):
        read_config(tmp_path / "pyproject.toml")
    (tmp_path / "perfcheck.toml").write_text("")
    assert find_config(tmp_path, stop=tmp_path) == tmp_path / "perfcheck.toml"


def test_suite_settings_round_trip(project: Path) -> None:
    from perfcheck.config import SuiteSettings

    suite = resolver(env={}).settings().suites["stencil"]
    assert SuiteSettings.from_dict(suite.as_dict()) == suite


def test_no_suites_is_a_usage_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    message = _error(env={}, discover=False)
    assert message.startswith("no config file found: no suites to check")
