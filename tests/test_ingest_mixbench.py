"""mixbench reader, on the real logs in ../shared/profiles/mixbench.

Expected figures are the maxima of the log's columns (GB/sec, GFLOPS, GIOPS) times
10**9, read from the files by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import profile
from conftest import one_line_error as assert_one_line_error
from perfcheck.errors import InputError
from perfcheck.ingest import detect, read_peaks

G = 1e9
MI100 = "mixbench/pawsey-mulan-mi100/mixbench-log.txt"


def figures(peaks) -> dict[str, float]:
    return {d.name: d.value for d in peaks.details}


def exactly(expected: dict[str, float]) -> dict[str, object]:
    return {k: pytest.approx(v, rel=1e-12) for k, v in expected.items()}


def group_figures(prefix: str, **groups: tuple[float, float]) -> dict[str, float]:
    out = {}
    for group, (bandwidth, compute) in groups.items():
        name = group.replace("_", " ")
        out[f"{prefix}{name} bandwidth"] = bandwidth * G
        out[f"{prefix}{name} compute"] = compute * G
    return out




def test_mi100_hip_five_groups() -> None:
    path = profile(MI100)
    assert detect(path, "peaks").name == "mixbench"
    peaks = read_peaks(path)
    # 1075.46 GB/s is the "Empirical Peak (mixbench fp32)" the stencil study (seed 001) quotes for MI100.
    assert peaks.values == exactly({
        "hbm_bw": 1075.46 * G, "flop_rate_fp32": 21988.38 * G, "flop_rate_fp64": 10887.83 * G,
        "flop_rate_fp16": 44537.11 * G, "iop_rate_int32": 7485.93 * G,
    })
    assert figures(peaks) == exactly(group_figures(
        "",
        single_precision=(1075.46, 21988.38),
        packed_single_precision=(1119.97, 22471.08),
        double_precision=(1096.55, 10887.83),
        half_precision=(1076.85, 44537.11),
        integer=(1075.47, 7485.93),
    ))
    units = {d.name: d.unit for d in peaks.details}
    assert units["integer compute"] == "OP/s" and units["half precision compute"] == "FLOP/s"
    assert units["single precision bandwidth"] == "B/s"
    (source,) = peaks.sources
    assert (source.format, source.tool, source.tool_version, source.device, source.arch) == (
        "mixbench", "mixbench", "79c4ef5", None, None)  # "Device:" is empty in this log
    assert peaks.oddities == ()


def test_mi210_agrees_with_the_third_party_parse() -> None:
    path = profile("mixbench/pawsey-noether-mi210/mixbench-log.txt")
    peaks = read_peaks(path)
    got = figures(peaks)
    assert peaks.sources[0].device == "AMD Instinct MI210"
    assert peaks.sources[0].tool_version == "df6cb55"
    assert peaks.values == exactly({
        "hbm_bw": 1492.62 * G, "flop_rate_fp32": 34476.0 * G, "flop_rate_fp64": 20100.72 * G,
        "flop_rate_fp16": 41175.59 * G, "iop_rate_int32": 19757.09 * G,
    })
    parsed = json.loads((path.parent / "mixbench-log.txt.json").read_text())
    single = parsed["singlePrecision"]
    assert got["single precision bandwidth"] == pytest.approx(single["maxBandwidth"] * G, rel=1e-12)
    assert got["single precision compute"] == pytest.approx(max(single["GFLOPS"]) * G, rel=1e-12)
    # Pawsey's mixbench-report.py assumes the CUDA layout (single, double, half,
    # integer), so on this HIP log its "doublePrecision" is the packed-single group
    # and its "integer" is the double group. Our groups follow the header.
    assert got["packed single precision bandwidth"] == pytest.approx(parsed["doublePrecision"]["maxBandwidth"] * G)
    assert got["packed single precision compute"] == pytest.approx(max(parsed["doublePrecision"]["GFLOPS"]) * G)
    assert got["double precision bandwidth"] == pytest.approx(parsed["integer"]["maxBandwidth"] * G)
    assert got["double precision compute"] == pytest.approx(max(parsed["integer"]["GIOPS"]) * G)
    table = pd.read_csv(path.parent / "mixbench-log.txt.csv", skipinitialspace=True)
    float32 = table[table["Data Type"] == "float32"]
    assert got["single precision bandwidth"] == pytest.approx(float32["Bandwidth (GB/s)"].max() * G)
    assert got["single precision compute"] == pytest.approx(float32["GFLOPS"].max() * G)


def test_third_party_parses_are_not_a_peaks_format(cli) -> None:
    for name in ("mixbench-log.txt.csv", "mixbench-log.txt.json"):
        path = profile(f"mixbench/pawsey-noether-mi210/{name}")
        assert_one_line_error(cli("peaks", path), path, "not a peaks format", "tried: ", "mixbench")


def test_mi250x_gcd() -> None:
    peaks = read_peaks(profile("mixbench/pawsey-setonix-mi250x/mixbench-log.txt"))
    # 1310.72 GB/s: seed 001's "Empirical Peak (mixbench fp32)" for MI250X.
    assert peaks.values == exactly({
        "hbm_bw": 1310.72 * G, "flop_rate_fp32": 29056.15 * G, "flop_rate_fp64": 20346.29 * G,
        "flop_rate_fp16": 42156.99 * G, "iop_rate_int32": 10417.69 * G,
    })
    assert figures(peaks)["packed single precision compute"] == pytest.approx(40420.90 * G, rel=1e-12)
    assert peaks.sources[0].tool_version == "3537115"


def test_topaz_v100_cuda_four_groups(cli) -> None:
    path = profile("mixbench/pawsey-topaz-v100/mixbench-log.txt")
    result = cli("peaks", path, "--json")
    assert result.code == 0
    doc = result.json()
    # 851.12 GB/s: seed 001's "Empirical Peak (mixbench fp32)" for V100.
    assert doc["peaks"] == {
        "flop_rate_fp16": 24683680000000, "flop_rate_fp32": 12378770000000, "flop_rate_fp64": 6233150000000,
        "hbm_bw": 851120000000, "iop_rate_int32": 10472290000000,
    }
    assert doc["units"]["iop_rate_int32"] == "OP/s"
    assert [(d["name"], d["value"], d["unit"]) for d in doc["details"]] == [
        ("single precision bandwidth", 851120000000, "B/s"),
        ("single precision compute", 12378770000000, "FLOP/s"),
        ("double precision bandwidth", 870910000000, "B/s"),
        ("double precision compute", 6233150000000, "FLOP/s"),
        ("half precision bandwidth", 849220000000, "B/s"),
        ("half precision compute", 24683680000000, "FLOP/s"),
        ("integer bandwidth", 847510000000, "B/s"),
        ("integer compute", 10472290000000, "OP/s"),
    ]
    source = doc["sources"][0]
    assert (source["device"], source["arch"], source["tool_version"]) == ("Tesla V100-PCIE-16GB", "sm_70", "79c4ef5")
    assert doc["warnings"] == []


def test_aws_v100_interleaved_concurrent_runs_are_pooled() -> None:
    # 8 runs wrote to one file at once: each run's first 17 rows sit under its
    # header, the other 18 rows of 7 runs follow later without a header, so rows
    # cannot be attributed to runs. The Flux job-spec/event-log JSON lines after
    # the tables are ignored.
    path = profile("mixbench/converged-computing-performance-study-aws-v100/null-1020709044224.out")
    peaks = read_peaks(path)
    assert peaks.values == exactly({
        "hbm_bw": 60.88 * G, "flop_rate_fp32": 378.13 * G, "flop_rate_fp64": 188.94 * G,
        "flop_rate_fp16": 744.08 * G, "iop_rate_int32": 315.93 * G,
    })
    assert figures(peaks) == exactly(group_figures(
        "runs 1-8 (interleaved): ",
        single_precision=(60.88, 378.13),
        double_precision=(22.00, 188.94),
        half_precision=(52.30, 744.08),
        integer=(27.66, 315.93),
    ))
    (oddity,) = peaks.oddities
    assert "8 runs are interleaved" in oddity.what and "7 continuations" in oddity.what
    source = peaks.sources[0]
    assert (source.device, source.arch, source.tool_version) == ("Tesla V100-SXM2-32GB", "sm_70", "v0.04-13-g597b700")


# --- several runs and malformed input, written at test time ------------------------


def lines_of(relative: str) -> list[str]:
    return profile(relative).read_text().splitlines(keepends=True)


def test_sequential_runs_get_per_run_details(tmp_path: Path) -> None:
    mi100 = lines_of(MI100)
    v100 = lines_of("mixbench/pawsey-topaz-v100/mixbench-log.txt")
    path = tmp_path / "two-runs.txt"
    path.write_text("".join(mi100 + v100))
    peaks = read_peaks(path)
    got = figures(peaks)
    assert got["run 1: single precision bandwidth"] == pytest.approx(1075.46 * G, rel=1e-12)
    assert got["run 2: single precision bandwidth"] == pytest.approx(851.12 * G, rel=1e-12)
    assert got["run 2: integer compute"] == pytest.approx(10472.29 * G, rel=1e-12)
    assert "run 2: packed single precision bandwidth" not in got
    assert peaks.values["hbm_bw"] == pytest.approx(1075.46 * G, rel=1e-12)  # the best run
    assert peaks.values["iop_rate_int32"] == pytest.approx(10472.29 * G, rel=1e-12)
    assert peaks.sources[0].device is None  # the two runs name different devices
    assert peaks.oddities == ()


def test_cut_off_last_row_is_dropped_not_misread(tmp_path: Path) -> None:
    # Rows 0..10 complete (file lines 21-31), then row 11 cut inside its last number:
    # "...,5688.07, 989.23" becomes "...,5688.07, 98" -- the right number of fields,
    # but the value would be wrong.
    mi100 = lines_of(MI100)
    path = tmp_path / "cut.txt"
    path.write_text("".join(mi100[:31]) + mi100[31].rstrip("\n")[:-4])
    peaks = read_peaks(path)
    assert peaks.values["hbm_bw"] == pytest.approx(1075.46 * G, rel=1e-12)  # row 6
    assert peaks.values["flop_rate_fp32"] == pytest.approx(5617.37 * G, rel=1e-12)  # row 10: a lower bound
    assert figures(peaks)["integer bandwidth"] == pytest.approx(1075.47 * G, rel=1e-12)
    dropped, stopped = peaks.oddities
    assert "cut-off table rows dropped" in dropped.what and "line 32" in dropped.what
    assert "stops after 11 rows" in stopped.what and "lower bounds" in stopped.what


def test_cut_mid_row_is_dropped(tmp_path: Path, cli) -> None:
    mi100 = lines_of(MI100)
    path = tmp_path / "cut.txt"
    path.write_text("".join(mi100[:31]) + mi100[31][:60])
    result = cli("peaks", path, "--json")
    assert result.code == 0
    assert result.json()["peaks"]["flop_rate_fp32"] == 5617370000000
    assert "cut-off table rows dropped (first at line 32)" in result.err


def test_cut_before_the_table(tmp_path: Path, cli) -> None:
    path = tmp_path / "cut.txt"
    path.write_text("".join(lines_of(MI100)[:17]))
    assert_one_line_error(cli("peaks", path), f"{path}:17", "no CSV data table; the run was cut off")


def test_header_without_rows(tmp_path: Path, cli) -> None:
    path = tmp_path / "cut.txt"
    path.write_text("".join(lines_of(MI100)[:20]))
    assert_one_line_error(cli("peaks", path), f"{path}:20", "result table has no rows")


def test_damaged_row_inside_the_table_is_an_error(tmp_path: Path, cli) -> None:
    mi100 = lines_of(MI100)
    mi100[24] = mi100[24].replace("2410.52", "24x0.52")
    path = tmp_path / "bad.txt"
    path.write_text("".join(mi100))
    with pytest.raises(InputError) as info:
        read_peaks(path)
    assert (info.value.line, info.value.column) == (25, 4)
    assert_one_line_error(cli("peaks", path), f"{path}:25", "'24x0.52' is not a number")


def test_wrong_delimiter(tmp_path: Path, cli) -> None:
    path = tmp_path / "semicolons.txt"
    path.write_text("".join(lines_of(MI100)).replace(",", ";"))
    assert detect(path, "peaks").name == "mixbench"  # the banner still says what it is
    assert_one_line_error(cli("peaks", path), f"{path}:20", "not comma-separated", "';'")


def test_missing_group_titles(tmp_path: Path, cli) -> None:
    mi100 = lines_of(MI100)
    del mi100[18]  # the "Experiment ID, Single Precision ops,,,, ..." line
    path = tmp_path / "no-titles.txt"
    path.write_text("".join(mi100))
    assert_one_line_error(cli("peaks", path), path, "'Experiment ID, ...' line", "missing")


def test_empty_file(tmp_path: Path, cli) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("")
    assert_one_line_error(cli("peaks", path), path, "file is empty")
    assert_one_line_error(cli("peaks", path, "--format", "mixbench"), path, "file is empty")


def test_binary_garbage(tmp_path: Path, cli) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(range(256)) * 8)
    assert_one_line_error(cli("peaks", path), path, "not a peaks format")
    assert_one_line_error(cli("peaks", path, "--format", "mixbench"), path, "binary data")


def test_other_text_forced_as_mixbench(tmp_path: Path, cli) -> None:
    path = tmp_path / "other.txt"
    path.write_text("hello\nworld\n")
    assert_one_line_error(cli("peaks", path, "--format", "mixbench"), path, "no mixbench 'Compute iters, ...' table")


TOPAZ = "mixbench/pawsey-topaz-v100/mixbench-log.txt"


def _with_cells(lines: list[str], fields: range, token: str, rows: slice = slice(None)) -> list[str]:
    """The log with ``fields`` of the data rows in ``rows`` printed as ``token``."""
    out = list(lines)
    data = [i for i, line in enumerate(lines) if line.lstrip()[:1].isdigit() and "," in line][rows]
    for i in data:
        parts = out[i].rstrip("\n").split(",")
        for f in fields:
            parts[f] = token.rjust(len(parts[f]))
        out[i] = ",".join(parts) + "\n"
    return out


def test_inf_columns_are_an_unsupported_precision(tmp_path: Path, cli) -> None:
    # mixbench-ocl on a device without fp64 prints inf/nan in every fp64 field: that
    # precision has no ceiling (said once); every other figure is read as before.
    lines = _with_cells(lines_of(TOPAZ), range(5, 9), "inf")
    lines = _with_cells(lines, range(7, 8), "-nan", slice(0, 3))
    path = tmp_path / "no-fp64.txt"
    path.write_text("".join(lines))
    result = cli("peaks", path, "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["peaks"] == {"flop_rate_fp16": 24683680000000, "flop_rate_fp32": 12378770000000,
                            "hbm_bw": 851120000000, "iop_rate_int32": 10472290000000}
    assert not any(d["name"].startswith("double") for d in doc["details"])
    assert [w["message"] for w in doc["warnings"] if "inf/nan" in w["message"]] == [
        "double precision: every value is inf/nan (a precision the device does not support?); no ceiling for it"]
    assert result.err.count("inf/nan") == 1  # said once


def test_single_inf_value_is_missing_not_an_error(tmp_path: Path) -> None:
    lines = _with_cells(lines_of(TOPAZ), range(12, 13), "inf", slice(4, 5))  # one half-precision GB/sec
    path = tmp_path / "one-inf.txt"
    path.write_text("".join(lines))
    peaks = read_peaks(path)
    assert peaks.values["flop_rate_fp32"] == 12378770000000
    assert [str(o) for o in peaks.oddities] == [f"{path}: inf/nan values left out"]


def test_the_reported_gpu_clock_is_the_clock_of_the_peaks(tmp_path: Path) -> None:
    # "GPU clock rate:      1380 MHz" in the device block: the compute peaks' clock,
    # against which a profile at another clock is warned about (docs/clocks.md).
    assert read_peaks([profile(TOPAZ)]).clocks == {"sm_clock": 1380e6}
    assert read_peaks([profile(MI100)]).clocks == {"sm_clock": 1502e6}
    # two files that disagree: no clock for the merged figures
    assert read_peaks([profile(TOPAZ), profile(MI100)]).clocks == {}


def test_peaks_json_shows_the_clock(cli) -> None:
    result = cli("peaks", profile(TOPAZ), "--json")
    assert result.code == 0 and result.json()["clocks"] == {"sm_clock": 1380000000}
