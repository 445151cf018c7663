"""Thresholds and allowances that mean what they say (issue 8, section 2): a number on a
metric with a unit carries a unit of that metric, a baseline allowance says % or a
unit, absurd numbers are errors; every place expectations come from applies the same
rules; a pattern that matches nothing says what is close; regex patterns cannot hang."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from perfcheck.analysis import Analysis
from perfcheck.config import ConfigError, resolver
from perfcheck.expect import ExpectationError, evaluate, match_kernels, parse
from perfcheck.metrics.roofline import Ceiling
from perfcheck.model import ERROR, FAILED, PASSED

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"


def _error(text: str) -> ExpectationError:
    with pytest.raises(ExpectationError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return info.value


@pytest.mark.parametrize(
    ("text", "column", "words", "fix"),
    [
        # read as "+5 s" until now, so it could never fail
        ("duration <= baseline + 5", 24, "a baseline allowance needs % or a unit of duration",
         "'duration <= baseline + 5%' or 'duration <= baseline + 5 s' or 'duration <= baseline + 5 ms'"),
        ("hbm_bw >= baseline - 3", 22, "needs % or a unit of hbm_bw", "'hbm_bw >= baseline - 3%'"),
        # read as 0.4% until now
        ("occupancy >= 0.4", 14, "occupancy_pct is a percentage (0-100), so the number needs %",
         "'occupancy >= 40%' or 'occupancy >= 0.4%'"),
        ("duration <= 2.7", 13, "duration is in seconds (s), so the number needs a unit",
         "'duration <= 2.7 s' or 'duration <= 2.7 ms'"),
        ("hbm_bw >= 800", 11, "hbm_bw is in bytes per second (B/s)", "'hbm_bw >= 800 GB/s'"),
        ("ai_hbm >= 10", 11, "FLOP per byte", "'ai_hbm >= 10 FLOP/B'"),
        ("flop_rate >= 1.5", 14, "FLOP per second", "'flop_rate >= 1.5 TFLOP/s'"),
        ("gips >= 100", 9, "10**9 instructions per second", "'gips >= 100 GIPS'"),
        ("1 <= duration <= 2 ms", 1, "duration is in seconds", "'1 s <= duration <= 2 ms'"),
        ("hbm_bw >= 0.85 of peak", 16, "a share of a ceiling is a percentage", "'85% of peak'"),
    ],
)
def test_a_number_without_its_unit_is_an_error_with_the_fix(text: str, column: int, words: str, fix: str) -> None:
    error = _error(text)
    assert f"column {column}:" in str(error) and words in str(error)
    assert fix in str(error)
    assert error.pointer.splitlines()[1] == " " * (column - 1) + "^"


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("hbm_bw >= 2.5 ms", 15, "'ms' is not a unit of hbm_bw (which is in bytes per second (B/s)); hbm_bw takes B/s"),
        ("duration <= 800 GB/s", 17, "'GB/s' is not a unit of duration"),
        ("lds_per_workgroup <= 24 GB/s", 25, "takes B, KB"),
        ("vgpr <= 128 ms", 13, "write the number alone"),
        ("flop_rate >= 2 GB/s", 16, "not a unit of flop_rate"),
    ],
)
def test_a_unit_of_another_kind_is_an_error_per_metric(text: str, column: int, words: str) -> None:
    error = _error(text)
    assert f"column {column}:" in str(error) and words in str(error)


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("duration <= 1e999 s", 13, "1e999 is not a finite number"),
        ("duration <= 1e999", 13, "1e999 is not a finite number"),
        ("calls <= 1e999", 10, "not a finite number"),
        ("duration <= baseline + 1e999%", 24, "not a finite number"),
        ("hbm_bw >= 1e999% of peak", 11, "not a finite number"),
        ("hbm_bw >= 1e40 B/s", 11, "absurd"),
        ("occupancy >= 5000%", 14, "absurd for occupancy_pct (beyond 1000%)"),
        ("duration >= -1 ms", 13, "never negative"),
        ("duration <= baseline - 100%", 24, "above -100%"),
        ("hbm_bw >= 2000% of peak", 11, "absurd"),
        ("hbm_bw >= 0% of peak", 11, "above 0%"),
        ("2 ms <= duration <= 1 ms", 1, "the lower bound is above the upper one"),
    ],
)
def test_non_finite_and_absurd_thresholds_are_errors(text: str, column: int, words: str) -> None:
    error = _error(text)
    assert f"column {column}:" in str(error) and words in str(error)


@pytest.mark.parametrize(
    ("text", "value", "delta"),
    [
        ("calls == 10", 10.0, None),  # plain counts take bare numbers
        ("vgpr <= 128", 128.0, None),
        ("registers <= 64", 64.0, None),
        ("instructions <= 1e9", 1e9, None),
        ("waves_per_cu >= 8", 8.0, None),
        ("rank_imbalance <= 1.2", 1.2, None),
        ("calls == baseline + 2", 0.0, 2.0),  # an allowance in calls
        ("scratch_per_thread == 0", 0.0, None),  # 0 is 0 in every unit
        ("duration <= baseline + 0", 0.0, 0.0),
        ("gips >= 100 GIPS", 100.0, None),
        ("instruction_rate >= 2 Ginst/s", 2e9, None),
        ("ai_hbm >= 10 FLOP/B", 10.0, None),
        ("duration <= baseline + 0.1 ms", 0.0, 1e-4),
    ],
)
def test_counts_take_bare_numbers_and_units_convert(text: str, value: float, delta: float | None) -> None:
    (e,) = parse(text)
    assert e.value == pytest.approx(value)
    assert e.absolute_delta == (pytest.approx(delta) if delta is not None else None)


def test_gips_share_of_peak_compares_in_gips() -> None:
    """gips holds 10**9 instructions/s, its ceiling instructions/s: 50% of a 500 GIPS
    peak is 250 GIPS, not 2.5e11 of them (which no kernel could reach)."""
    kernels = pd.DataFrame({"kernel": ["a", "b"], "calls": [1, 1], "gips": [300.0, 200.0]})
    ceilings = {"gips": Ceiling("gips", 500e9, "inst/s", "theoretical", "arch database")}
    analysis = Analysis(sources=(), oddities=(), kernels=kernels, target=None, target_origin="unknown", ceilings=ceilings)
    a, b = evaluate("s", {"*": ["gips >= 50% of peak"]}, analysis)
    assert (a.outcome, b.outcome) == (PASSED, FAILED)
    assert a.reference == pytest.approx(250.0) and "(60.0% of peak)" in a.message


# --- every source of expectations applies the same rules -----------------------------------

CONFIG = """\
[tool.perfcheck]
device = "mi100"

[tool.perfcheck.suites.stencil]
profiles = ["results.csv"]

[tool.perfcheck.suites.stencil.expect]
"EOClover*" = ["duration <= baseline + 5"]
"""


def test_config_file_expectations_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "results.csv").write_text("placeholder\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n' + CONFIG)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        resolver(env={}).settings()
    message = str(info.value)
    assert "'EOClover*'" in message and "column 24" in message and "'duration <= baseline + 5%'" in message


def test_cli_expect_is_checked(cli) -> None:
    result = cli("check", str(EXAMPLE / "results-after.csv"), "--arch", "mi100", "--expect", "EOClover*", "occupancy >= 0.4")
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert line.startswith("perfcheck: error: ") and "'EOClover*'" in line
    assert "column 14" in line and "'occupancy >= 40%'" in line


def test_run_plan_expectations_are_checked() -> None:
    """perf.run(expect=...) and `perfcheck run --expect` plan counters from parsed expectations."""
    from perfcheck.run.plan import metrics_of

    with pytest.raises(ExpectationError, match="column 11"):
        metrics_of({"*": ["hbm_bw >= 800"]})
    assert metrics_of({"*": ["hbm_bw >= 800 GB/s"]}) == ["hbm_bw"]


def test_pytest_perf_expect_is_checked(pytester) -> None:
    pytester.makepyfile(f"""
import pytest

@pytest.mark.perf(arch="mi100")
def test_bare(perf):
    perf.load("{EXAMPLE / 'results-after.csv'}")
    perf.expect("EOClover*", "duration <= baseline + 5")
""")
    result = pytester.runpytest("--perf", "--perf-baseline-dir", str(pytester.path / "b"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expectation 'duration <= baseline + 5', column 24: *'duration <= baseline + 5%'*",
                                 "duration <= baseline + 5", " *^"])


# --- a pattern that matches nothing --------------------------------------------------------

KERNELS = ["void stencil_7pt<double>(double*, double const*, int)", "void stencil_27pt<double>(double*, int)",
           "EOCloverFBCGPU", "EOCloverDagFBCGPU", "__amd_rocclr_fillBuffer.kd"]


def _no_match(pattern: str) -> str:
    kernels = pd.DataFrame({"kernel": KERNELS, "calls": [1] * len(KERNELS), "vgpr": [32] * len(KERNELS)})
    analysis = Analysis(sources=(), oddities=(), kernels=kernels, target=None, target_origin="unknown", ceilings={})
    (check,) = evaluate("s", {pattern: ["vgpr <= 64"]}, analysis)
    assert check.outcome == ERROR and not check.passed
    return check.message


def test_no_match_suggests_the_closest_names_and_the_glob() -> None:
    message = _no_match("stencil")
    assert message == ("pattern 'stencil' matched no kernel of 5; closest: "
                       "'void stencil_7pt<double>(double*, double const*, int)', 'void stencil_27pt<double>(double*, int)'; "
                       "the glob '*stencil*' matches 2 kernels containing it")
    assert "closest: 'EOCloverFBCGPU', 'EOCloverDagFBCGPU'" in _no_match("eoclover*")
    # no name contains it: the message must not claim the glob "would match one"
    assert ("no name contains 'eoclover' (the glob '*eoclover*' would match names containing it; "
            "names are case-sensitive)") in _no_match("eoclover*")
    assert "closest: '__amd_rocclr_fillBuffer.kd'" in _no_match("fillbufer")
    assert "closest" not in _no_match("re:^zzz$")


# --- regular expressions cannot hang --------------------------------------------------------


@pytest.mark.parametrize("pattern", ["re:(a+)+$", "/(a+)+$/", "re:(a|aa)*c", "re:.*x", "re:(.*a){20}x"])
def test_regex_matching_is_linear(pattern: str) -> None:
    """Python's re backtracks exponentially on (a+)+$ and quadratically on .*x (2.8 s
    for a 100,000-character name); RE2 answers at once."""
    name = "a" * 100_000 + "!"
    start = time.perf_counter()
    assert match_kernels(pattern, [name, "EOCloverFBCGPU"]) == []
    assert time.perf_counter() - start < 1.0


def test_regex_still_finds_and_refuses_what_re2_lacks() -> None:
    assert match_kernels(r"re:^EO\w+GPU$", ["EOCloverFBCGPU", "xEOCloverFBCGPU"]) == ["EOCloverFBCGPU"]
    assert match_kernels("re:(?i)clover", ["EOCloverFBCGPU"]) == ["EOCloverFBCGPU"]
    from perfcheck.errors import UsageError

    with pytest.raises(UsageError, match=r"kernel pattern 're:EO\(\?=C\)': invalid regular expression .*no lookarounds"):
        match_kernels("re:EO(?=C)", ["EOCloverFBCGPU"])
    with pytest.raises(UsageError, match="invalid regular expression"):
        match_kernels("re:[", ["EOCloverFBCGPU"])
