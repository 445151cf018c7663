"""The expectation language: parsing (never eval), units, errors that point at the
offending character, kernel patterns, and evaluation against an analysis."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from perfcheck.analysis import Analysis
from perfcheck.expect import ExpectationError, evaluate, match_kernels, parse
from perfcheck.metrics.roofline import Ceiling
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("text", "metric", "relation", "kind", "value", "delta"),
    [
        ("hbm_bw >= 85% of peak", "hbm_bw", ">=", "of_peak", 0.85, None),
        ("occupancy >= 75%", "occupancy_pct", ">=", "absolute", 75.0, None),
        ("scratch_per_thread == 0", "scratch_per_thread", "==", "absolute", 0.0, None),
        ("duration <= 2.7 ms", "duration", "<=", "absolute", 2.7e-3, None),
        ("duration <= baseline + 5%", "duration", "<=", "baseline", 0.05, None),
        ("hbm_bw >= baseline - 3%", "hbm_bw", ">=", "baseline", -0.03, None),
        ("duration<=baseline+5%", "duration", "<=", "baseline", 0.05, None),
        ("hbm_bytes == baseline", "hbm_bytes", "==", "baseline", 0.0, None),
        ("duration <= baseline + 100 us", "duration", "<=", "baseline", 0.0, 1e-4),
        ("hbm_bw >= 1.2 TB/s", "hbm_bw", ">=", "absolute", 1.2e12, None),
        ("hbm_bw > 900 GiB/s", "hbm_bw", ">", "absolute", 900 * 2**30, None),
        ("lds_per_workgroup <= 24 KiB", "lds_per_workgroup", "<=", "absolute", 24576.0, None),
        ("flop_rate >= 20 TFLOP/s", "flop_rate", ">=", "absolute", 20e12, None),
        ("duration < 1e-3 s", "duration", "<", "absolute", 1e-3, None),
        ("vgpr != 256", "vgpr", "!=", "absolute", 256.0, None),
    ],
)
def test_parse(text: str, metric: str, relation: str, kind: str, value: float, delta: float | None) -> None:
    (e,) = parse(text)
    assert (e.metric, e.relation, e.kind) == (metric, relation, kind)
    assert e.value == pytest.approx(value)
    assert e.absolute_delta == (pytest.approx(delta) if delta is not None else None)


def test_two_sided() -> None:
    lower, upper = parse("1 ms <= duration <= 2.5 ms")
    assert (lower.metric, lower.relation, lower.value) == ("duration", ">=", pytest.approx(1e-3))
    assert (upper.metric, upper.relation, upper.value) == ("duration", "<=", pytest.approx(2.5e-3))


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("hbm_bw >= 85%", 13, "not a percentage"),
        ("hbm_bw >= 85% of peek", 18, "did you mean 'peak'"),
        ("duration <= 2.7 GB", 17, "not a unit of duration"),
        ("hbm_bwx >= 1", 1, "did you mean 'hbm_bw'"),
        ("duration <=", 12, "expected a number"),
        ("duration <= baseline * 2", 22, "unexpected character '*'"),
        ("duration = 5 ms", 10, "compare with =="),
        ("occupancy >= 75% of peak", 21, "has no peak"),
        ("hbm_bw >= 1 TB/s extra", 18, "unexpected 'extra'"),
        ("duration <= 3 parsecs", 15, "unknown unit"),
        ("__import__('os') >= 1", 11, "unexpected character"),
    ],
)
def test_errors_point_at_the_offending_character(text: str, column: int, words: str) -> None:
    with pytest.raises(ExpectationError) as error:
        parse(text)
    assert f"column {column}:" in str(error.value)
    assert words in str(error.value)
    assert "\n" not in str(error.value)  # one line for the CLI; the caret is separate
    assert error.value.pointer.splitlines()[1] == " " * (column - 1) + "^"


def test_patterns() -> None:
    kernels = ["EOCloverFBCGPU", "EOCloverDagFBCGPU", "OECloverFBCGPU", "void k<float>(float*)"]
    assert match_kernels("EOClover*", kernels) == ["EOCloverFBCGPU", "EOCloverDagFBCGPU"]
    assert match_kernels("*Clover*FBCGPU", kernels) == kernels[:3]
    assert match_kernels("EOClover", kernels) == []  # globs match the whole name
    assert match_kernels("re:^OE", kernels) == ["OECloverFBCGPU"]
    assert match_kernels("/Dag/", kernels) == ["EOCloverDagFBCGPU"]
    assert match_kernels("void k<float>*", kernels) == ["void k<float>(float*)"]  # [ ] are not special here
    # a glob need not spell NVIDIA's return type: "void " is ignored in front of a name
    assert match_kernels("k<float>*", kernels) == ["void k<float>(float*)"]
    assert match_kernels("k*", ["void k<float>(float*)", "kv(int)", "avoid k()"]) == ["void k<float>(float*)", "kv(int)"]
    assert match_kernels("*float*", kernels) == ["void k<float>(float*)"]


def _analysis(**columns: list) -> Analysis:
    kernels = pd.DataFrame({"kernel": ["a", "b"], "calls": [10, 10], **columns})
    ceilings = {
        "hbm_bw": Ceiling("hbm_bw", 1.0e12, "B/s", "empirical", "mixbench-log.txt"),
        "flop_rate_fp64": Ceiling("flop_rate_fp64", 10e12, "FLOP/s", "theoretical", "arch database"),
    }
    return Analysis(sources=(), oddities=(), kernels=kernels, target=None, target_origin="unknown", ceilings=ceilings)


def test_evaluate_absolute_and_of_peak() -> None:
    analysis = _analysis(hbm_bw=[900e9, 500e9], duration=[2e-3, 3e-3], occupancy_pct=[40.0, 20.0])
    checks = evaluate("s", {"*": ["hbm_bw >= 85% of peak", "duration <= 2.7 ms", "occupancy >= 40%"]}, analysis)
    outcome = {(c.kernel, c.expression): c for c in checks}
    a_bw = outcome[("a", "hbm_bw >= 85% of peak")]
    assert a_bw.outcome == PASSED and a_bw.reference == pytest.approx(850e9) and a_bw.observed == 900e9
    assert "85% of empirical hbm_bw" in a_bw.message and "900 GB/s" in a_bw.message
    b_bw = outcome[("b", "hbm_bw >= 85% of peak")]
    assert b_bw.outcome == FAILED and "500 GB/s" in b_bw.message and "850 GB/s" in b_bw.message
    assert outcome[("a", "duration <= 2.7 ms")].outcome == PASSED
    assert outcome[("b", "duration <= 2.7 ms")].outcome == FAILED
    assert outcome[("a", "occupancy >= 40%")].outcome == PASSED
    assert outcome[("b", "occupancy >= 40%")].outcome == FAILED
    assert all(c.origin == "expectation" and c.suite == "s" for c in checks)


def test_pattern_matching_nothing_is_an_error_not_a_pass() -> None:
    checks = evaluate("s", {"EOClover*": ["duration <= 1 ms"]}, _analysis(duration=[1e-3, 1e-3]))
    (check,) = checks
    assert check.outcome == ERROR and not check.passed
    assert "matched no kernel" in check.message


def test_missing_metric_names_the_counters_to_collect() -> None:
    (check, _) = evaluate("s", {"*": ["hbm_bw >= 85% of peak"]}, _analysis(duration=[1e-3, 1e-3]))
    assert check.outcome == ERROR
    assert "FETCH_SIZE" in check.message and "dram__bytes" in check.message


def test_missing_peak_is_an_error() -> None:
    analysis = _analysis(l2_bw=[1e12, 1e12])
    (check, _) = evaluate("s", {"*": ["l2_bw >= 50% of peak"]}, analysis)
    assert check.outcome == ERROR and "--peaks" in check.message


def test_no_ceiling_for_a_known_arch_lists_its_devices_and_the_config_key() -> None:
    from dataclasses import replace as replaced

    from perfcheck.arch import Target, lookup

    analysis = replaced(_analysis(hbm_bw=[1e12, 1e12]), ceilings={},
                        target=Target(lookup("sm_80").arch), target_origin="detected")
    (check, _) = evaluate("s", {"*": ["hbm_bw >= 50% of peak"]}, analysis)
    assert check.outcome == ERROR
    assert ("no ceiling for it: the profile says sm_80 but not which device; name it with "
            'device = "a100" in [tool.perfcheck] (or --arch a100), one of: a100, a100-80gb; '
            "or give measured peaks with --peaks") in check.message


def test_baseline_expectation_without_baseline_records() -> None:
    (check, _) = evaluate("s", {"*": ["duration <= baseline + 5%"]}, _analysis(duration=[1e-3, 2e-3]))
    assert check.outcome == RECORDED and check.passed and check.origin == "baseline"


def test_bad_expectation_fails_before_anything_is_compared() -> None:
    with pytest.raises(ExpectationError):
        evaluate("s", {"*": ["duration <= 1 ms", "hbm_bw >= 85%"]}, _analysis(duration=[1e-3, 1e-3]))


def test_evaluate_real_stencil_example() -> None:
    from perfcheck.analysis import analyse

    analysis = analyse([ROOT / "examples" / "stencil" / "kernel_trace.csv"], arch="mi100")
    checks = evaluate("stencil", {"*Clover*FBCGPU": ["occupancy >= 40%", "lds_per_workgroup <= 24 KiB"]}, analysis)
    assert len(checks) == 8
    occupancy = [c for c in checks if c.metric == "occupancy_pct"]
    assert all(c.outcome == FAILED and c.observed == pytest.approx(20.0) for c in occupancy)
    assert all(c.outcome == PASSED for c in checks if c.metric == "lds_per_workgroup")


def test_glob_without_void_matches_a_real_rocprofv3_kernel(cli, tmp_path) -> None:
    import json

    from conftest import profile

    trace = profile("rocprofv3/rocprofiler-sdk-docs-2025/kernel_trace.csv")
    result = cli("check", trace, "--expect", "addition_kernel*", "calls == 3", "--json", tmp_path / "r.json")
    assert result.code == 0, result.out + result.err
    assert "perfcheck: 1 passed" in result.out
    (suite,) = json.loads((tmp_path / "r.json").read_text())["suites"].values()
    assert [c["kernel"] for c in suite["checks"]] == ["void addition_kernel<float>(float*, float const*, float const*, int, int)"]
