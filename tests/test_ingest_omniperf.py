"""Omniperf / rocprof-compute readers on the tools' own test workloads (1.x, 2.0 RC,
2.0, 3.1) and on malformed copies made in tmp_path."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import profile
from conftest import one_line_error
from perfcheck.errors import InputError
from perfcheck.ingest import open_profile, read_peaks, read_profile
from perfcheck.metrics.summary import SUMMARY_WANT

V1 = "omniperf/omniperf-v1-TCC-mi200"
MI200 = "omniperf/rocprofiler-compute-vcopy-MI200"
MI300X = "omniperf/rocprofiler-compute-vcopy-MI300X"
MI350 = "omniperf/rocm-systems-vcopy-MI350"
VCOPY = "vecCopy(double*, double*, double*, int, int)"




def first(table: pd.DataFrame, column: str) -> object:
    return table[column].iloc[0]


# --------------------------------------------------------------------------- real workloads


def test_omniperf_1x_tcc_mi200() -> None:
    prof = read_profile(profile(V1))
    table = prof.dispatches
    assert prof.source.format == "omniperf-workload"
    assert (prof.source.device, prof.source.arch, prof.source.tool_version) == ("mi200", "gfx90a", None)
    assert len(table) == 167 and table["kernel"].nunique() == 167
    # rocprof v1 names: ".kd" and " [clone .kd]" removed
    assert first(table, "kernel") == "__amd_rocclr_fillBufferAligned"
    assert table["kernel"].iloc[1] == "void benchmark_func<short, 256, 8u, 0u>(short, short*)"
    assert table["kernel"].iloc[-1] == "void benchmark_func<int, 256, 8u, 512u>(int, int*)"
    assert (first(table, "grid_size"), first(table, "workgroup_size")) == (33554432, 256)
    assert (first(table, "vgpr"), first(table, "sgpr")) == (4, 32)
    assert (first(table, "lds_per_workgroup"), first(table, "scratch_per_thread")) == (0, 0)
    assert "agpr" not in table  # no accum_vgpr column before ROCm 5.3
    # BeginNs 16307555332228, EndNs 16307555571270
    assert first(table, "start_ns") == 16307555332228
    assert first(table, "duration") == pytest.approx(239042e-9, rel=1e-12)
    assert table["duration"].iloc[-1] == pytest.approx((16307608840075 - 16307605481175) * 1e-9, rel=1e-12)
    assert first(table, "raw.TCC_HIT_sum") == 2097594.0
    assert first(table, "raw.SQ_WAVES") == 524288.0
    # identity and host-clock columns are not counters
    for name in ("fbar", "obj", "sig", "queue-index", "DispatchNs", "CompleteNs", "KernelName"):
        assert f"raw.{name}" not in table


def test_omniperf_2_0_rc_vcopy_mi200() -> None:
    directory = profile(MI200)
    prof = read_profile(directory)
    table = prof.dispatches
    assert (prof.source.device, prof.source.arch, prof.source.tool_version) == ("MI200", "gfx90a", "2.0.0-RC1")
    assert len(table) == 3 and set(table["kernel"]) == {VCOPY}  # " [clone .kd]" removed
    row = table.iloc[0]
    assert (row["grid_size"], row["workgroup_size"], row["wave_size"]) == (1048576, 256, 64)
    assert (row["vgpr"], row["agpr"], row["sgpr"]) == (8, 0, 16)
    assert (row["lds_per_workgroup"], row["scratch_per_thread"], row["device_id"]) == (0, 0, 2)
    # Start_Timestamp 1411551767635712, End_Timestamp 1411551767656192
    assert row["duration"] == pytest.approx(20480e-9, rel=1e-12)
    assert list(table["duration"] * 1e9) == pytest.approx([20480, 16320, 15520])
    assert row["raw.TCC_EA_WRREQ[0]"] == 4096.0 and row["raw.TCC_EA_WRREQ[15]"] == 4096.0
    assert row["raw.SQ_WAVES"] == 16384.0
    # the pass copies of identity columns are not counters
    assert not [c for c in table.columns if c.startswith(("raw.wave_size", "raw.obj"))]
    # timestamps.csv holds the same timing pass the tool copied into pmc_perf.csv
    stamps = pd.read_csv(directory / "timestamps.csv")
    assert list(table["start_ns"]) == list(stamps["Start_Timestamp"])
    assert list(table["end_ns"]) == list(stamps["End_Timestamp"])


def test_omniperf_2_0_vcopy_mi300x_lossy_timestamps() -> None:
    prof = read_profile(profile(MI300X))
    table = prof.dispatches
    assert (prof.source.device, prof.source.arch, prof.source.tool_version) == ("MI300X_A1", "gfx942", "2.0.0")
    assert len(table) == 3 and set(table["kernel"]) == {VCOPY}  # rocprofv2's " (.kd)" removed
    row = table.iloc[0]
    assert (row["grid_size"], row["workgroup_size"], row["wave_size"]) == (1048576, 256, 64)
    assert (row["vgpr"], row["agpr"], row["sgpr"], row["lds_per_workgroup"], row["scratch_per_thread"]) == (4, 4, 16, 0, 0)
    # 8.1097E+14 resolves 10^10 ns: no duration rather than a wrong one
    assert table["duration"].isna().all() and table["start_ns"].isna().all()
    [oddity] = [o for o in prof.oddities if "E-notation" in o.what]
    assert oddity.count == 3
    assert row["raw.TCC_CYCLE[0]"] == 50979.0
    assert row["raw.SQ_WAVES"] == 16384.0
    assert not [c for c in table.columns if c.startswith(("raw.XCC_Index", "raw.Correlation_ID"))]


def test_rocprof_compute_3_1_vcopy_mi350_pass_means() -> None:
    directory = profile(MI350)
    prof = read_profile(directory)
    table = prof.dispatches
    assert (prof.source.device, prof.source.arch, prof.source.tool_version) == ("MI350", "gfx950", "3.1.0")
    assert len(table) == 3 and set(table["kernel"]) == {VCOPY}
    row = table.iloc[0]
    assert (row["grid_size"], row["workgroup_size"], row["wave_size"]) == (1048576, 256, 64)
    assert (row["vgpr"], row["agpr"], row["sgpr"], row["lds_per_workgroup"], row["scratch_per_thread"]) == (4, 0, 16, 0, 0)
    # 1248227792639148.5 - 1248227792617386.5 and 1248227793220373.0 - 1248227793203453.2 ns
    assert row["duration"] == pytest.approx(21762e-9, rel=1e-12)
    assert table["duration"].iloc[1] == pytest.approx(16919.8e-9, abs=0.3e-9)
    assert row["raw.TCC_EA0_WRREQ[0]"] == 4096.0 and row["raw.SQ_WAVES"] == 16384.0
    assert not [c for c in table.columns if c.startswith("raw.Kernel_ID")]
    # The timestamps are the tool's means over its 13 passes (pmc_perf_N.csv, SQ_*.csv).
    passes = sorted(directory.glob("pmc_perf_*.csv")) + sorted(directory.glob("SQ_*.csv"))
    starts = np.array([pd.read_csv(p)["Start_Timestamp"].to_numpy(dtype=np.float64) for p in passes])
    assert len(passes) == 13
    assert table["start_ns"].iloc[0] == round(starts[:, 0].mean())


@pytest.mark.parametrize("relative", [V1, MI200, MI350])
def test_pmc_dispatch_info_agrees(relative: str) -> None:
    directory = profile(relative)
    table = read_profile(directory).dispatches
    info = pd.read_csv(directory / "pmc_dispatch_info.csv")
    id_col = "Dispatch_ID" if "Dispatch_ID" in info else "Index"
    name_col = "Kernel_Name" if "Kernel_Name" in info else "KernelName"
    assert list(table["dispatch_id"]) == list(info[id_col])
    cleaned = info[name_col].str.replace(r"(?: \[clone \.kd\]|\.kd)$", "", regex=True)
    assert list(table["kernel"]) == list(cleaned)


def test_summary_want_converts_no_counters() -> None:
    scan = open_profile(profile(MI200), want=SUMMARY_WANT)
    [chunk] = list(scan.chunks)
    assert not [c for c in chunk.columns if c.startswith("raw.")]
    assert {"kernel", "duration", "vgpr", "grid_size"} <= set(chunk.columns)


def test_bare_pmc_perf_file_uses_sibling_sysinfo() -> None:
    prof = read_profile(profile(MI200) / "pmc_perf.csv")
    assert prof.source.format == "omniperf-pmc-perf"
    assert (prof.source.device, prof.source.tool_version) == ("MI200", "2.0.0-RC1")
    assert len(prof.dispatches) == 3 and first(prof.dispatches, "raw.TCC_EA_WRREQ[0]") == 4096.0


def test_per_pass_file_is_read() -> None:
    prof = read_profile(profile(MI350) / "pmc_perf_0.csv")
    table = prof.dispatches
    assert prof.source.format == "omniperf-pmc-perf"
    assert first(table, "duration") == pytest.approx((1248227257293723 - 1248227257271964) * 1e-9, rel=1e-12)
    assert (first(table, "pid"), first(table, "queue_id")) == (15772, 1)


@pytest.mark.parametrize("relative, duration", [(V1, 239042e-9), (MI200, 16320e-9), (MI350, 16919.8e-9)])
def test_cli_inspect(cli, relative: str, duration: float) -> None:
    result = cli("inspect", profile(relative), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "omniperf-workload"
    kernels = {k["kernel"]: k for k in doc["kernels"]}
    name = "__amd_rocclr_fillBufferAligned" if relative == V1 else VCOPY
    assert kernels[name]["calls"] == (1 if relative == V1 else 3)
    assert kernels[name]["metrics"]["duration"] == pytest.approx(duration, abs=0.3e-9)  # median


def test_cli_inspect_warns_about_e_notation(cli) -> None:
    result = cli("inspect", profile(MI300X), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["kernels"][0]["calls"] == 3 and doc["kernels"][0]["metrics"]["duration"] is None
    assert doc["profiles"][0]["device"] == "MI300X_A1"
    assert "E-notation" in result.err


# --------------------------------------------------------------------------- roofline.csv


def test_roofline_peaks_one_device() -> None:
    peaks = read_peaks(profile(V1) / "roofline.csv")
    assert peaks.values["hbm_bw"] == pytest.approx(1404.1036e9, rel=1e-12)
    assert peaks.values["flop_rate_fp64"] == pytest.approx(20418.004e9, rel=1e-12)
    assert peaks.values["mfma_rate_bf16"] == pytest.approx(170456.72e9, rel=1e-12)
    assert peaks.values["mfma_rate_int8"] == pytest.approx(166561.98e9, rel=1e-12)
    assert len(peaks.details) == 33  # every column but "device", Low/High included
    assert peaks.sources[0].arch == "gfx90a"


def test_roofline_peaks_mean_over_devices() -> None:
    peaks = read_peaks(profile(MI200) / "roofline.csv")
    # HBMBw of devices 0-3: (1388.9302 + 1389.3043 + 1389.0227 + 1389.0236) / 4 GB/s
    assert peaks.values["hbm_bw"] == pytest.approx(1389.0702e9, rel=1e-12)
    assert peaks.values["lds_bw"] == pytest.approx((17717.834 + 18243.783 + 18220.432 + 18326.717) / 4 * 1e9, rel=1e-12)
    assert peaks.values["flop_rate_fp32"] == pytest.approx((20941.971 + 20985.506 + 21053.373 + 21032.83) / 4 * 1e9, rel=1e-12)
    assert set(peaks.values) == {"hbm_bw", "l2_bw", "l1_bw", "lds_bw", "flop_rate_fp32", "flop_rate_fp64", "mfma_rate_bf16",
                                 "mfma_rate_fp16", "mfma_rate_fp32", "mfma_rate_fp64", "mfma_rate_int8"}
    assert len(peaks.details) == 4 * 33
    [detail] = [d for d in peaks.details if d.name == "device 3 hbmBwHigh"]
    assert (detail.value, detail.unit) == (pytest.approx(1389.5585e9, rel=1e-12), "B/s")
    assert peaks.sources[0].tool_version == "2.0.0-RC1"


def test_cli_peaks(cli) -> None:
    result = cli("peaks", profile(MI200) / "roofline.csv", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["peaks"]["hbm_bw"] == pytest.approx(1389.0702e9, rel=1e-12)
    assert doc["units"]["hbm_bw"] == "B/s" and doc["units"]["mfma_rate_fp16"] == "FLOP/s"
    assert doc["sources"][0]["format"] == "omniperf-roofline"


# --------------------------------------------------------------------------- malformed and odd input


def copy_workload(tmp_path: Path, relative: str = MI200) -> Path:
    """The small files of a real workload, copied into tmp_path to be damaged."""
    dest = tmp_path / "workload"
    dest.mkdir()
    for name in ("pmc_perf.csv", "sysinfo.csv", "timestamps.csv"):
        if (profile(relative) / name).exists():
            shutil.copyfile(profile(relative) / name, dest / name)
    return dest


def test_truncated_mid_row(cli, tmp_path: Path) -> None:
    work = copy_workload(tmp_path)
    data = (work / "pmc_perf.csv").read_bytes()
    (work / "pmc_perf.csv").write_bytes(data[: len(data) - 1000])  # rows are ~4.5 kB
    line = one_line_error(cli("inspect", work))
    assert f"{work}/pmc_perf.csv:4:" in line and "cut off" in line


def test_row_with_missing_fields(cli, tmp_path: Path) -> None:
    work = copy_workload(tmp_path)
    lines = (work / "pmc_perf.csv").read_text().splitlines(keepends=True)
    lines[2] = lines[2][: len(lines[2]) // 2] + "\n"  # a row cut short, the file goes on
    (work / "pmc_perf.csv").write_text("".join(lines))
    line = one_line_error(cli("inspect", work))
    assert f"{work}/pmc_perf.csv:3:" in line and "fields" in line


def test_not_a_number_is_located(cli, tmp_path: Path) -> None:
    work = copy_workload(tmp_path)
    lines = (work / "pmc_perf.csv").read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace(",4096,", ",40x96,", 1)  # first 4096: TCC_EA_RDREQ[0] of dispatch 2
    (work / "pmc_perf.csv").write_text("".join(lines))
    # inspect converts the counters its work formulas use (HBM bytes need TCC_EA_RDREQ[n]),
    # so the bad cell is reported there too, located.
    line = one_line_error(cli("inspect", work))
    assert f"{work}/pmc_perf.csv:4: column 'TCC_EA_RDREQ[0]': '40x96' is not a number" in line
    with pytest.raises(InputError) as error:
        read_profile(work)
    assert str(error.value).startswith(f"{work}/pmc_perf.csv:4: column 'TCC_EA_RDREQ[0]': '40x96' is not a number")
    lines[2] = lines[2].replace(",1048576,", ",1048x576,", 1)  # Grid_Size of dispatch 1
    (work / "pmc_perf.csv").write_text("".join(lines))
    line = one_line_error(cli("inspect", work))
    assert f"{work}/pmc_perf.csv:3: column 'Grid_Size': '1048x576' is not a number" in line


def test_missing_kernel_name_column(cli, tmp_path: Path) -> None:
    work = copy_workload(tmp_path)
    text = (work / "pmc_perf.csv").read_text()
    (work / "pmc_perf.csv").write_text(text.replace("Kernel_Name", "Kernel", 1))
    line = one_line_error(cli("inspect", work))
    assert "pmc_perf.csv:1:" in line and "'Kernel_Name' missing" in line


def test_wrong_delimiter(cli, tmp_path: Path) -> None:
    work = copy_workload(tmp_path)
    text = (work / "pmc_perf.csv").read_text()
    (work / "pmc_perf.csv").write_text(text.replace(",", ";"))
    line = one_line_error(cli("inspect", work))
    assert "pmc_perf.csv" in line and "missing" in line


def test_empty_directory_is_not_a_workload(cli, tmp_path: Path) -> None:
    line = one_line_error(cli("inspect", tmp_path))
    assert str(tmp_path) in line and "tried:" in line and "omniperf-workload" in line


def test_empty_pmc_perf(cli, tmp_path: Path) -> None:
    (tmp_path / "pmc_perf.csv").write_text("")
    line = one_line_error(cli("inspect", tmp_path))
    assert "pmc_perf.csv" in line and "empty" in line


def test_binary_garbage(cli, tmp_path: Path) -> None:
    (tmp_path / "pmc_perf.csv").write_bytes(bytes(range(256)) * 16)
    line = one_line_error(cli("inspect", tmp_path))
    assert f"{tmp_path}/pmc_perf.csv" in line


def test_header_only_holds_no_dispatches(cli, tmp_path: Path) -> None:
    work = copy_workload(tmp_path)
    header = (work / "pmc_perf.csv").read_text().splitlines()[0]
    (work / "pmc_perf.csv").write_text(header + "\n")
    result = cli("inspect", work, "--json")
    assert result.code == 0 and result.json()["kernels"] == []
    assert "no kernel dispatches" in result.err


def test_repeated_column_names(tmp_path: Path) -> None:
    (tmp_path / "pmc_perf.csv").write_text(
        "Dispatch_ID,Kernel_Name,Start_Timestamp,End_Timestamp,SQ_WAVES,SQ_WAVES\n"
        '0,"k(int, int)",1000,1500,64,65\n'
    )
    prof = read_profile(tmp_path)
    row = prof.dispatches.iloc[0]
    assert (row["raw.SQ_WAVES"], row["raw.SQ_WAVES.1"]) == (64.0, 65.0)
    assert row["duration"] == pytest.approx(500e-9, rel=1e-12)
    assert any("repeats column names (SQ_WAVES)" in o.what for o in prof.oddities)


def test_timestamps_csv_joined_by_dispatch_id(tmp_path: Path) -> None:
    # A pmc_perf.csv without timestamps: timing from timestamps.csv, matched by id, not position.
    (tmp_path / "pmc_perf.csv").write_text(
        'Dispatch_ID,Kernel_Name,Grid_Size,SQ_WAVES\n0,"a",64,1\n1,"b",64,2\n2,"c",64,3\n'
    )
    (tmp_path / "timestamps.csv").write_text(
        "Dispatch_ID,Kernel_Name,Start_Timestamp,End_Timestamp\n2,c,500,800\n0,a,100,150\n1,b,200,270\n"
    )
    table = read_profile(tmp_path).dispatches
    assert list(table["duration"] * 1e9) == pytest.approx([50, 70, 300])
    assert list(table["start_ns"]) == [100, 200, 500]


def test_timestamps_beyond_float_precision(tmp_path: Path) -> None:
    # After 104 days of uptime (2^53 ns) float64 cannot tell neighbouring ns apart.
    (tmp_path / "pmc_perf.csv").write_text(
        'Dispatch_ID,Kernel_Name,Start_Timestamp,End_Timestamp\n0,"a",9007199254740993,9007199254741000\n'
    )
    table = read_profile(tmp_path).dispatches
    assert (table["start_ns"].iloc[0], table["end_ns"].iloc[0]) == (9007199254740993, 9007199254741000)
    assert table["duration"].iloc[0] == pytest.approx(7e-9, rel=1e-12)  # float64 would say 8 ns


def test_no_timestamps_anywhere(tmp_path: Path) -> None:
    (tmp_path / "pmc_perf.csv").write_text('Dispatch_ID,Kernel_Name,SQ_WAVES\n0,"a",1\n')
    prof = read_profile(tmp_path)
    assert "duration" not in prof.dispatches and any("no start/end timestamps" in o.what for o in prof.oddities)


def test_roofline_truncated(cli, tmp_path: Path) -> None:
    data = (profile(MI200) / "roofline.csv").read_bytes()
    bad = tmp_path / "roofline.csv"
    bad.write_bytes(data[:-20])
    line = one_line_error(cli("peaks", bad))
    assert f"{bad}:5:" in line and "cut off" in line
    bad.write_bytes(data[: data.index(b"\n", data.index(b"\n") + 1) - 40] + b"\n")
    line = one_line_error(cli("peaks", bad))
    assert f"{bad}:2:" in line and "fields" in line


def test_roofline_not_a_number(cli, tmp_path: Path) -> None:
    bad = tmp_path / "roofline.csv"
    bad.write_text((profile(V1) / "roofline.csv").read_text().replace("1404.1036", "14o4.1036"))
    line = one_line_error(cli("peaks", bad))
    assert f"{bad}:2:" in line and "'HBMBw'" in line and "not a number" in line


def test_roofline_header_only(cli, tmp_path: Path) -> None:
    bad = tmp_path / "roofline.csv"
    bad.write_text((profile(V1) / "roofline.csv").read_text().splitlines()[0] + "\n")
    line = one_line_error(cli("peaks", bad))
    assert "no device rows" in line


def test_roofline_wrong_format_named(cli, tmp_path: Path) -> None:
    bad = tmp_path / "roofline.csv"
    bad.write_text("device;HBMBw;L2Bw\n0;1;2\n")
    line = one_line_error(cli("peaks", bad, "--format", "omniperf-roofline"))
    assert str(bad) in line and "missing" in line


# rocprof-compute 3.3 roofline.csv header (the roofline binaries of ROCm/rocm-systems
# 1b1610fc2, projects/rocprofiler-compute/src/utils/rooflines: "device,HBMBw,HBMBwLow,
# hbmBwHigh,MALLBw,...,MFMAF4Flops,...,MFMAI8Ops,..."). No real 3.3 file is among the
# shared profiles, so this one is written here with MI300X-like figures: F4/F6 are 0
# (no such unit before MI350), which means unsupported.
_ROOFLINE_33 = {
    "HBMBw": 4200.0, "MALLBw": 11000.0, "L2Bw": 14000.0, "L1Bw": 21000.0, "LDSBw": 60000.0,
    "FP64Flops": 70000.0, "FP32Flops": 120000.0, "FP16Flops": 150000.0, "BF16Flops": 150000.0,
    "I32Ops": 70000.0, "I8Ops": 0.0,
    "MFMAF4Flops": 0.0, "MFMAF6Flops": 0.0, "MFMAF8Flops": 1900000.0, "MFMAF16Flops": 950000.0,
    "MFMABF16Flops": 940000.0, "MFMAF32Flops": 140000.0, "MFMAF64Flops": 140000.0, "MFMAI8Ops": 1800000.0,
}


def test_roofline_csv_3_3_reads_every_ceiling_and_zero_is_missing(tmp_path: Path) -> None:
    from perfcheck.ingest import read_peaks

    header, row = ["device"], ["0"]
    for name, value in _ROOFLINE_33.items():
        high = "hbmBwHigh" if name == "HBMBw" else f"{name}High"
        header += [name, f"{name}Low", high]
        row += [f"{value:.2f}", f"{value * 0.99:.2f}", f"{value * 1.01:.2f}"]
    path = tmp_path / "roofline.csv"
    path.write_text(",".join(header) + "\n" + ",".join(row) + "\n")
    peaks = read_peaks(path)
    assert peaks.values["hbm_bw"] == 4200e9 and peaks.values["mall_bw"] == 11000e9
    assert peaks.values["mfma_rate_fp8"] == 1.9e15 and peaks.values["mfma_rate_bf16"] == 9.4e14
    assert peaks.values["mfma_rate_int8"] == 1.8e15 and peaks.values["mfma_rate_fp64"] == 1.4e14
    # Zero = unsupported: no ceiling at all (never a zero roof), and a warning naming it.
    for missing in ("mfma_rate_f4", "mfma_rate_f6", "mfma_rate_f6f4", "iop_rate_int8"):
        assert missing not in peaks.values
    assert not any(d.value == 0 for d in peaks.details)
    warned = " ".join(o.what for o in peaks.oddities)
    assert "MFMAF4Flops" in warned and "MFMAF6Flops" in warned and "unsupported" in warned
    assert "device 0 hbmBwHigh" in {d.name for d in peaks.details}


def test_roofline_csv_f6_f4_share_the_lower_roof(tmp_path: Path) -> None:
    from perfcheck.ingest import read_peaks

    path = tmp_path / "roofline.csv"
    path.write_text("device,HBMBw,MFMAF6Flops,MFMAF4Flops\n0,8000,5000000,9000000\n")
    peaks = read_peaks(path)
    assert peaks.values["mfma_rate_f6f4"] == 5e15 == peaks.values["mfma_rate_f6"]
    assert peaks.values["mfma_rate_f4"] == 9e15
