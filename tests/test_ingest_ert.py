"""Empirical Roofline Tool readers: roofline.json (both metadata styles) and sum files."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PROFILES, profile
from conftest import one_line_error as _one_line_error
from perfcheck.errors import InputError
from perfcheck.ingest import detect, read_peaks
from perfcheck.ingest.ert import FORMATS

P100_JSON = "ert/weakknight-roofline-p100/roofline.json"
P100_SUM = "ert/weakknight-roofline-p100/sum"
TITAN_JSON = "ert/ebugger-ert-1.1.0-examples/roofline.titan.ccs.ornl.gov.02.json"


# --------------------------------------------------------------------------- real files


def test_p100_json_newer_metadata_style() -> None:
    path = profile(P100_JSON)
    peaks = read_peaks(path)
    # "FP64 GFLOPs" 4258.4; L1 1723.76, L2 1301.09, DRAM 508.35 GB/s; ERT_GPU True -> DRAM is hbm_bw.
    assert peaks.values == {
        "flop_rate_fp64": 4258.4e9,
        "l1_bw": 1723.76e9,
        "l2_bw": 1301.09e9,
        "hbm_bw": 508.35e9,
    }
    assert [(d.name, d.value, d.unit) for d in peaks.details] == [
        ("FP64 GFLOPs", 4258.4e9, "FLOP/s"),
        ("L1", 1723.76e9, "B/s"),
        ("L2", 1301.09e9, "B/s"),
        ("DRAM", 508.35e9, "B/s"),
    ]
    (source,) = peaks.sources
    assert (source.format, source.tool, source.tool_version) == ("ert-json", "ert", "1.1.0")
    assert source.device is None  # only the hostname kp361 is recorded, not the GPU
    assert peaks.oddities == ()


def test_titan_json_older_metadata_style_assumes_fp64() -> None:
    path = profile(TITAN_JSON)
    peaks = read_peaks(path)
    # K20X: 1225.48 GFLOPs (unlabelled), L1 559.13999999999999 (== 559.14) and DRAM 160.66 GB/s.
    assert peaks.values == {"flop_rate_fp64": 1225.48e9, "l1_bw": 559.14e9, "hbm_bw": 160.66e9}
    assert [d.name for d in peaks.details] == ["GFLOPs", "L1", "DRAM"]
    assert peaks.sources[0].tool_version == "1.1.0"  # from empirical.metadata.ERT_VERSION
    assert peaks.sources[0].device is None
    (oddity,) = peaks.oddities
    assert "precision not recorded" in oddity.what and "FP64" in oddity.what


def test_p100_sum_file() -> None:
    path = profile(P100_SUM)
    peaks = read_peaks(path)
    # 2907.99 FP64 GFLOPs, Weight 4729.06 (not a peak), L1 727.00 and DRAM 439.42 GB/s.
    assert peaks.values == {"flop_rate_fp64": 2907.99e9, "l1_bw": 727.00e9, "hbm_bw": 439.42e9}
    assert [(d.name, d.value) for d in peaks.details] == [
        ("FP64 GFLOPs", 2907.99e9),
        ("L1", 727.00e9),
        ("DRAM", 439.42e9),
    ]
    assert (peaks.sources[0].format, peaks.sources[0].tool_version) == ("ert-sum", "1.1.0")
    assert peaks.oddities == ()


def test_json_and_sum_together_keep_the_higher_figure() -> None:
    peaks = read_peaks([profile(P100_JSON), profile(P100_SUM)])
    assert peaks.values["l1_bw"] == 1723.76e9
    assert peaks.values["hbm_bw"] == 508.35e9
    assert len(peaks.details) == 7


def test_cli_peaks_json(cli) -> None:
    result = cli("peaks", profile(P100_JSON), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["peaks"] == {
        "flop_rate_fp64": 4258400000000,
        "hbm_bw": 508350000000,
        "l1_bw": 1723760000000,
        "l2_bw": 1301090000000,
    }
    assert doc["units"]["hbm_bw"] == "B/s" and doc["units"]["flop_rate_fp64"] == "FLOP/s"
    assert doc["sources"][0]["format"] == "ert-json"


def test_cli_peaks_sum(cli) -> None:
    result = cli("peaks", profile(P100_SUM), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["peaks"] == {"flop_rate_fp64": 2907990000000, "hbm_bw": 439420000000, "l1_bw": 727000000000}
    assert doc["sources"][0]["format"] == "ert-sum"
    assert doc["warnings"] == []


def test_cli_titan_warns_about_assumed_precision(cli) -> None:
    result = cli("peaks", profile(TITAN_JSON), "--json")
    assert result.code == 0
    assert result.json()["peaks"]["flop_rate_fp64"] == 1225480000000
    assert "perfcheck: warning:" in result.err and "assumed FP64" in result.err


def test_sniffers_pick_the_right_format() -> None:
    assert detect(profile(P100_JSON), "peaks").name == "ert-json"
    assert detect(profile(TITAN_JSON), "peaks").name == "ert-json"
    assert detect(profile(P100_SUM), "peaks").name == "ert-sum"


def test_sniffers_reject_other_tools_files() -> None:
    from perfcheck.ingest.formats import Sniff

    if not PROFILES.exists():
        pytest.skip("real profile data not available")
    others = [p for p in PROFILES.rglob("*") if p.is_file() and "ert" not in p.relative_to(PROFILES).parts[:1]]
    assert others
    for path in others:
        sniff = Sniff(path)
        assert not any(fmt.sniff(sniff) for fmt in FORMATS), path


# --------------------------------------------------------------------------- synthetic variants


SUM_CPU = """    11.03 GFLOPs

  1458.88 Weight

   176.44 L1
   102.18 L2
    45.70 L3
    22.90 L4
    18.30 DRAM

META_DATA
ERT_VERSION  1.1.0
MPI_PROCS      1
OPENMP_THREADS 1
CONFIG  {'ERT_PRECISION': ['FP32'], 'ERT_GPU': [False], 'ERT_OPENMP': ['True']}
FLOPS          1
"""


def test_cpu_sum_maps_dram_to_mem_bw_and_keeps_unknown_levels_in_details(tmp_path: Path) -> None:
    path = tmp_path / "sum"
    path.write_text(SUM_CPU)
    peaks = read_peaks(path)
    assert peaks.values == {
        "flop_rate_fp32": 11.03e9,  # bare "GFLOPs" + ERT_PRECISION FP32
        "l1_bw": 176.44e9,
        "l2_bw": 102.18e9,
        "l3_bw": 45.70e9,
        "mem_bw": 18.30e9,
    }
    assert ("L4", 22.90e9) in [(d.name, d.value) for d in peaks.details]
    assert any("'L4'" in o.what for o in peaks.oddities)


def test_concatenated_sum_files_keep_the_maximum(tmp_path: Path) -> None:
    path = tmp_path / "sums.txt"
    path.write_text(SUM_CPU + SUM_CPU.replace("176.44 L1", "180.00 L1"))
    peaks = read_peaks(path, format="ert-sum")
    assert peaks.values["l1_bw"] == 180.0e9
    assert len(peaks.details) == 12


# --------------------------------------------------------------------------- malformed input




def test_truncated_json(cli, tmp_path: Path) -> None:
    text = profile(P100_JSON).read_text()
    path = tmp_path / "roofline.json"
    path.write_text(text[: len(text) // 2])
    result = cli("peaks", path, "--json")
    _one_line_error(result, path)
    assert "cut short" in result.err
    with pytest.raises(InputError) as info:
        read_peaks(path)
    assert info.value.line is not None


def test_json_without_empirical_section(cli, tmp_path: Path) -> None:
    path = tmp_path / "roofline.json"
    path.write_text('{"spec": {"gflops": {"data": []}, "gbytes": {"data": []}}}')
    result = cli("peaks", path, "--format", "ert-json")
    _one_line_error(result, path)
    assert "'empirical'" in result.err


def test_json_with_non_number_ceiling(cli, tmp_path: Path) -> None:
    path = tmp_path / "roofline.json"
    path.write_text('{"empirical": {"gbytes": {"data": [["DRAM", "fast"]]}, "gflops": {"data": []}}}')
    result = cli("peaks", path)
    _one_line_error(result, path)
    assert "'DRAM'" in result.err and "not a positive number" in result.err


@pytest.mark.parametrize("fmt", ["ert-json", "ert-sum"])
def test_empty_file(cli, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "empty"
    path.write_text("")
    _one_line_error(cli("peaks", path), path)
    result = cli("peaks", path, "--format", fmt)
    _one_line_error(result, path)
    assert "empty" in result.err


@pytest.mark.parametrize("fmt", ["ert-json", "ert-sum"])
def test_binary_garbage(cli, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(range(256)) * 8)
    _one_line_error(cli("peaks", path), path)
    result = cli("peaks", path, "--format", fmt)
    _one_line_error(result, path)
    assert "binary" in result.err


def test_sum_cut_before_its_bandwidth_data(cli, tmp_path: Path) -> None:
    path = tmp_path / "sum"
    path.write_text("".join(profile(P100_SUM).read_text().splitlines(keepends=True)[:4]))  # GFLOPs + Weight only
    result = cli("peaks", path, "--json")
    _one_line_error(result, path)
    assert "no bandwidth lines" in result.err


def test_sum_cut_inside_a_ceiling_line(cli, tmp_path: Path) -> None:
    path = tmp_path / "sum"
    path.write_text("  2907.99 FP64 GFLOPs\n\n  4729.06 Weight\n\n   727.00 L1\n   439")
    result = cli("peaks", path)
    _one_line_error(result, path)
    assert f"{path}:6:" in result.err


def test_sum_cut_before_meta_data(cli, tmp_path: Path) -> None:
    path = tmp_path / "sum"
    path.write_text("  2907.99 FP64 GFLOPs\n\n  4729.06 Weight\n\n   727.00 L1\n   439.42 DRAM\n")
    result = cli("peaks", path)
    _one_line_error(result, path)
    assert "META_DATA" in result.err


def test_sum_cut_inside_config(cli, tmp_path: Path) -> None:
    text = profile(P100_SUM).read_text()
    path = tmp_path / "sum"
    path.write_text(text[: text.index("'ERT_GPU'")])
    result = cli("peaks", path)
    _one_line_error(result, path)
    assert "CONFIG line is cut off" in result.err


def test_inf_ceilings_are_missing_figures(tmp_path: Path) -> None:
    # ERT prints its ceilings with printf: inf/nan where a precision could not run;
    # that ceiling is left out, said once, and the rest of the file still reads.
    text = profile("ert/weakknight-roofline-p100/sum").read_text()
    path = tmp_path / "sum"
    path.write_text(text.replace("  2907.99 FP64 GFLOPs", "      inf FP64 GFLOPs").replace("   727.00 L1", "      nan L1"))
    peaks = read_peaks([path])
    assert peaks.values == {"hbm_bw": 439.42e9}
    assert [str(o) for o in peaks.oddities if "inf/nan" in o.what] == [
        f"{path}: ceiling 'FP64 GFLOPs' is inf/nan (a precision the device does not support?); no ceiling for it",
        f"{path}: bandwidth ceiling 'L1' is inf/nan; left out"]
