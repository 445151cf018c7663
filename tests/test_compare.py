"""`perfcheck compare A B` (issue 18 §4): the stencil story told in one picture and one
table: before -> after, per kernel, with why it changed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ROOT, one_line_error
from perfcheck.comparison import Change, explain
from perfcheck.report import roofline

STENCIL = ROOT / "examples" / "stencil"
CONFIG = STENCIL / "perfcheck.toml"


def test_stencil_before_after_table_tells_the_story(cli, tmp_path: Path) -> None:
    result = cli("compare", "before", "after", "--config", CONFIG, "--roofline", tmp_path / "plots",
                 "--markdown", tmp_path / "compare.md")
    assert result.code == 0, result.err
    out = result.out
    assert out.startswith("compare: suite before on AMD Instinct MI100 \u2192 suite after on AMD Instinct MI100")
    row = next(line for line in out.splitlines() if line.startswith("EOCloverFBCGPU("))
    assert "2.666 ms \u2192 1.408 ms" in row and "1.89x faster" in row and "44.9% \u2192 85.2%" in row
    assert "20.0% \u2192 40.0% (lds \u2192 vgpr)" in row
    assert "vgpr 52 \u2192 64, lds/wg 24 KiB \u2192 0 B" in row
    hipcub = next(line for line in out.splitlines() if "hipcub" in line)
    assert "same" in hipcub and "(waves)" in hipcub and hipcub.rstrip().endswith("-")  # nothing changed
    for name in ("compare.png", "compare.svg", "compare-instructions.png", "compare-instructions.svg"):
        assert (tmp_path / "plots" / name).stat().st_size > 0
    md = (tmp_path / "compare.md").read_text()
    assert "![roofline: arrows from before to after](plots/compare.png)" in md
    assert "![instruction roofline: arrows from before to after](plots/compare-instructions.png)" in md
    assert "4 faster, 0 slower, 1 the same" in md
    assert "| `EOCloverFBCGPU(float*, float const*, int)` | 2.666 ms \u2192 1.408 ms | 1.89x faster |" in md


def test_the_roofline_has_an_arrow_from_before_to_after(cli, tmp_path: Path) -> None:
    assert cli("compare", "before", "after", "--config", CONFIG, "--roofline", tmp_path).code == 0
    svg = (tmp_path / "compare.svg").read_text()
    assert "before \u2192 after, faster (hollow marker: before)" in svg
    assert f"stroke: {roofline.ARROW_BETTER}" in svg and f"stroke: {roofline.ARROW_WORSE}" not in svg
    assert "Roofline: suite before \u2192 suite after on AMD Instinct MI100" in svg


def test_results_files_compare_as_the_suites_do(cli, tmp_path: Path) -> None:
    """Results files of `check --json` carry the measurements and the limiter labels:
    comparing them gives the table the suites give."""
    for suite in ("before", "after"):
        cli("check", "--config", CONFIG, "--suite", suite, "--json", tmp_path / f"{suite}.json",
            "--baseline-dir", tmp_path / "baselines")
    doc = json.loads((tmp_path / "before.json").read_text())
    assert doc["suites"]["before"]["labels"]["EOCloverFBCGPU(float*, float const*, int)"]["occupancy_limiter"] == "lds"
    files = cli("compare", tmp_path / "before.json", tmp_path / "after.json", "--roofline", tmp_path / "plots")
    suites = cli("compare", "before", "after", "--config", CONFIG)
    assert files.code == 0, files.err
    table = lambda text: text.split("\n", 1)[1]  # noqa: E731 - the first line names the sides
    assert table(files.out) == table(suites.out)
    assert files.out.startswith("compare: before.json on AMD Instinct MI100 \u2192 after.json on AMD Instinct MI100")
    assert (tmp_path / "plots" / "compare.png").exists()
    mixed = cli("compare", tmp_path / "before.json", "after", "--config", CONFIG)
    assert mixed.code == 0 and table(mixed.out) == table(suites.out)


def test_a_results_file_of_several_suites_needs_one_named(cli, tmp_path: Path) -> None:
    cli("check", "--config", CONFIG, "--json", tmp_path / "both.json", "--baseline-dir", tmp_path / "b")
    line = one_line_error(cli("compare", tmp_path / "both.json", tmp_path / "both.json"), tmp_path / "both.json")
    assert "holds 2 suites (after, before)" in line and "both.json:SUITE" in line
    named = cli("compare", f"{tmp_path / 'both.json'}:before", f"{tmp_path / 'both.json'}:after")
    assert named.code == 0, named.err
    assert "lds \u2192 vgpr" in named.out
    line = one_line_error(cli("compare", f"{tmp_path / 'both.json'}:nope", "after", "--config", CONFIG))
    assert "has no suite 'nope'" in line


def test_unknown_suite_and_bad_files_are_one_line_errors(cli, tmp_path: Path) -> None:
    line = one_line_error(cli("compare", "befor", "after", "--config", CONFIG))
    assert "'befor' is not a results file (FILE.json), a profile or a suite of the config" in line
    assert "suites before, after" in line
    bad = tmp_path / "bad.json"
    bad.write_text('{"suites": ')
    one_line_error(cli("compare", bad, "after", "--config", CONFIG), bad, "not valid JSON")
    one_line_error(cli("compare", tmp_path / "missing.json", "after", "--config", CONFIG), None, "no such results file")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format_version": 1, "suites": {"s": {"checks": []}}, "summary": {}}))
    one_line_error(cli("compare", old, "after", "--config", CONFIG), old, "no per-kernel measurements")


def test_explain_lists_what_moved_and_leaves_out_unchanged_resources() -> None:
    before = {"duration": 2e-3, "hbm_bw_pct": 45.0, "occupancy_pct": 20.0, "occupancy_limiter": "lds", "vgpr": 52,
              "sgpr": 64, "lds_per_workgroup": 24576}
    after = {"duration": 1e-3, "hbm_bw_pct": 85.0, "occupancy_pct": 40.0, "occupancy_limiter": "vgpr", "vgpr": 64,
             "sgpr": 64, "lds_per_workgroup": 0}
    changes = {c.metric: c for c in explain(before, after)}
    assert list(changes) == ["duration", "hbm_bw_pct", "occupancy_pct", "occupancy_limiter", "vgpr",
                             "lds_per_workgroup"]  # sgpr did not change: it explains nothing
    assert changes["occupancy_limiter"] == Change("occupancy_limiter", "lds", "vgpr", "")
    assert all(c.moved for c in changes.values())
    same = explain({"duration": 1e-3, "hbm_bw_pct": 50.0}, {"duration": 1.004e-3, "hbm_bw_pct": 50.3})
    assert [c.moved for c in same] == [False, False]  # within the noise of a trace
    nan = explain({"duration": float("nan")}, {"duration": 1e-3})
    assert nan[0].before is None and nan[0].moved


def test_a_trace_and_a_counter_run_match_by_bare_name(cli, tmp_path: Path) -> None:
    """rocprofv3's trace writes "EOCloverFBCGPU", rocprof v1 "EOCloverFBCGPU(float*, float
    const*, int)": one kernel, matched (the name without parameters is unique on both)."""
    config = tmp_path / "perfcheck.toml"
    config.write_text(
        f'[tool.perfcheck]\ndevice = "mi100"\n'
        f'[tool.perfcheck.suites.trace]\nprofiles = ["{(STENCIL / "kernel_trace.csv").as_posix()}"]\n'
        f'[tool.perfcheck.suites.results]\nprofiles = ["{(STENCIL / "results-after.csv").as_posix()}"]\n')
    result = cli("compare", "trace", "results", "--config", config)
    assert result.code == 0, result.err
    row = next(line for line in result.out.splitlines() if line.startswith("EOCloverFBCGPU("))
    assert "1.90x faster" in row and "(lds \u2192 vgpr)" in row
    assert "only in" not in result.out


def test_kernels_on_one_side_only_are_listed_apart() -> None:
    import pandas as pd

    from perfcheck.analysis import Analysis
    from perfcheck.comparison import Side, compare
    from perfcheck.report.comparison import comparison_text

    def side(label: str, names: list[str], durations: list[float]) -> Side:
        kernels = pd.DataFrame({"kernel": names, "duration": durations, "duration_total": durations})
        return Side(label, Analysis((), (), kernels, None, "unknown"))

    before = side("A", ["k(int)", "k(float)", "gone"], [1.0, 1.0, 1.0])
    after = side("B", ["k(int)", "k(float)", "new"], [2.0, 0.5, 1.0])
    result = compare(before, after)
    assert [k.kernel for k in result.kernels] == ["k(int)", "k(float)"]  # overloads kept apart, by name
    assert [round(k.speedup, 2) for k in result.kernels] == [0.5, 2.0]
    assert result.only_before == ("gone",) and result.only_after == ("new",)
    text = comparison_text(result, width=80)
    assert "2.00x slower" in text and "2.00x faster" in text
    assert "only in A: gone" in text and "only in B: new" in text


def test_profiles_compare_directly_with_arch_and_peaks(cli) -> None:
    result = cli("compare", STENCIL / "results-before.csv", STENCIL / "results-after.csv", "--arch", "mi100",
                 "--peaks", STENCIL / "machines" / "mulan-mi100.toml")
    assert result.code == 0, result.err
    assert result.out.startswith("compare: results-before.csv on AMD Instinct MI100 \u2192 results-after.csv")
    row = next(line for line in result.out.splitlines() if line.startswith("EOCloverFBCGPU("))
    assert "44.9% \u2192 85.2%" in row and "(lds \u2192 vgpr)" in row


def test_profiles_written_as_json_are_compared_as_profiles(cli) -> None:
    """A Kineto trace ends in .json like a results file: it was read as one before ("is
    not a perfcheck results file"), so two traces could not be compared."""
    from conftest import profile

    before = profile("kineto/pytorch-kineto-unittest-h100-sync-fix-pair/before_fix_trace.json")
    after = before.with_name("after_fix_trace.json")
    result = cli("compare", before, after)
    assert result.code == 0, result.err
    assert result.out.startswith("compare: before_fix_trace.json on NVIDIA H100 (sm_90) \u2192 after_fix_trace.json")
    assert any(line.startswith("Kernel ") for line in result.out.splitlines())


@pytest.mark.parametrize(("name", "bare"), [
    ("void k<float, 256>(float const*, int)", "k<float, 256>"),
    ("__global__ void k(int)", "k"),
    ("void at::native::f<4>(at::TensorIteratorBase&)::{lambda(int)#1}", "at::native::f<4>"),
    ("void g<(anonymous namespace)::op<int>>(int)", "g<(anonymous namespace)::op<int>>"),
    ("(anonymous namespace)::k(float*)", "(anonymous namespace)::k"),
    ("vecCopy", "vecCopy"),
    ("  void padded(int)  ", "padded"),
])
def test_one_signature_cut_for_matching_and_for_display(name: str, bare: str) -> None:
    """comparison's bare-name matching and the roofline's short labels cut a name at the
    same place (one function, comparison.without_signature); matching takes the
    canonical key first, display keeps the profile's spelling."""
    from perfcheck.comparison import bare_name, without_signature
    from perfcheck.kernelkey import kernel_key
    from perfcheck.report.roofline import short_name

    assert without_signature(name) == bare
    assert short_name(name, width=len(name)) == bare
    assert bare_name(name) == without_signature(kernel_key(name))
