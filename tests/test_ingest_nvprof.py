"""nvprof readers on real outputs (../shared/profiles/nvprof) and on malformed copies.

Expected numbers are read off the files by hand; nvprof's KB/MB/GB are binary
(see the module docstring of perfcheck.ingest.nvprof for the evidence).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfcheck.ingest import read_profile
from conftest import profile
from conftest import one_line_error as _assert_input_error

TRACE = "nvprof/leimingyu-magus/matrixMul_trace.csv"
METRICS = "nvprof/leimingyu-magus/matrixMul_metrics.csv"
SUMMARY = "nvprof/nanzifan-nvprof-result-cfd/print-gpu-summary.csv"
LOG = "nvprof/weakknight-roofline/slurm-9186634.out"

MATMUL = "void matrixMulCUDA<32>(float*, float*, float*, int, int)"
VECTOR_ADD = "vectorAdd(float const*, float const*, float*, int)"
GiB, MiB, KiB = 2.0**30, 2.0**20, 2.0**10


def _row(frame, kernel: str):
    rows = frame[frame["kernel"] == kernel]
    assert len(rows) == 1, f"{kernel!r}: {len(rows)} rows"
    return rows.iloc[0]


def _kernel(document: dict, name: str) -> dict:
    (found,) = [k for k in document["kernels"] if k["kernel"] == name]
    return found


# --------------------------------------------------------------------------- trace


def test_trace_dispatches():
    prof = read_profile(profile(TRACE))
    assert prof.level == "dispatch"
    assert prof.source.format == "nvprof-trace"
    assert prof.source.tool == "nvprof"
    assert prof.source.device == "GeForce GTX 1080 Ti"
    table = prof.dispatches
    assert len(table) == 301
    # " [1073]" is the launch's correlation id, not part of the name.
    assert set(table["kernel"]) == {MATMUL}
    first, last = table.iloc[0], table.iloc[-1]
    assert first["correlation_id"] == 1073 and last["correlation_id"] == 3177
    # 587.796940 ms, 0.077602 ms
    assert first["start_ns"] == 587_796_940
    assert first["end_ns"] == 587_796_940 + 77_602
    assert first["duration"] == pytest.approx(77.602e-6, rel=1e-12)
    assert last["start_ns"] == 611_326_221
    assert table["duration"].min() == pytest.approx(75.682e-6, rel=1e-12)
    assert table["duration"].max() == pytest.approx(77.826e-6, rel=1e-12)
    # Grid 20x10x1 blocks of 32x32x1 threads.
    assert (first["grid_x"], first["grid_y"], first["grid_z"]) == (640, 320, 1)
    assert first["grid_size"] == 204_800
    assert (first["workgroup_x"], first["workgroup_y"], first["workgroup_z"]) == (32, 32, 1)
    assert first["workgroup_size"] == 1024
    assert first["workgroups"] == 200
    assert first["registers"] == 27
    # Static SMem 8.000000 KB = two 32x32 float tiles = 8192 B.
    assert first["lds_static"] == 8192
    assert first["lds_dynamic"] == 0
    assert first["lds_per_workgroup"] == 8192
    assert (first["device_id"], first["context_id"], first["stream_id"]) == (0, 1, 7)
    assert [(o.what, o.count) for o in prof.oddities] == [("memory copy/memset rows dropped (not kernels)", 3)]


def test_trace_cli(cli):
    result = cli("inspect", profile(TRACE), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "nvprof-trace"
    assert doc["profiles"][0]["device"] == "GeForce GTX 1080 Ti"
    kernel = _kernel(doc, MATMUL)
    assert kernel["calls"] == 301
    assert kernel["metrics"]["duration_min"] == pytest.approx(75.682e-6, rel=1e-12)
    assert kernel["metrics"]["registers"] == 27
    assert kernel["metrics"]["lds_per_workgroup"] == 8192
    assert kernel["metrics"]["grid_size"] == 204_800
    assert doc["warnings"][0]["count"] == 3


def test_trace_units_row_is_honoured(tmp_path: Path):
    path = tmp_path / "trace.csv"
    path.write_text(
        "==1== Profiling result:\n"
        '"Start","Duration","Grid X","Grid Y","Grid Z","Block X","Block Y","Block Z",'
        '"Registers Per Thread","Static SMem","Dynamic SMem","Device","Context","Stream","Name"\n'
        "s,us,,,,,,,,B,KB,,,,\n"
        '1.5,2.25,4,1,1,256,1,1,32,512,1.5,"Tesla V100-PCIE-16GB (1)","1","Default","k(int) [7]"\n'
    )
    table = read_profile(path).dispatches
    row = table.iloc[0]
    assert row["start_ns"] == 1_500_000_000
    assert row["duration"] == pytest.approx(2.25e-6, rel=1e-12)
    assert row["end_ns"] == 1_500_002_250
    assert row["lds_static"] == 512 and row["lds_dynamic"] == 1536 and row["lds_per_workgroup"] == 2048
    assert row["grid_x"] == 1024 and row["workgroups"] == 4 and row["device_id"] == 1
    assert row["kernel"] == "k(int)" and row["correlation_id"] == 7
    assert table["stream_id"].isna().all()  # "Default" is a label, not an id


def test_trace_without_kernels_loads_empty(tmp_path: Path, cli):
    path = tmp_path / "copies.csv"
    path.write_text(
        "==1== Profiling result:\n"
        '"Start","Duration","Size","Throughput","Device","Context","Stream","Name"\n'
        "ms,us,KB,MB/s,,,,\n"
        '1.0,2.0,4.0,1.0,"TITAN Xp (0)","1","7","[CUDA memcpy HtoD]"\n'
    )
    result = cli("inspect", path, "--json")
    assert result.code == 0, result.err
    assert result.json()["kernels"] == []
    assert "holds no kernel dispatches (1 memory copies/memsets)" in result.err


# --------------------------------------------------------------------------- summary


def test_summary_kernels():
    prof = read_profile(profile(SUMMARY))
    assert prof.level == "kernel"
    assert prof.source.format == "nvprof-summary"
    assert prof.source.device == "TITAN Xp"  # from the Unified Memory section
    table = prof.dispatches
    assert len(table) == 4
    assert not table["kernel"].str.startswith("[").any()
    flux = _row(table, "cuda_compute_flux(int, int*, float*, float*, float*)")
    # Units row ",%,ms,,us,us,ms,": Time ms, Avg us, Min us, Max ms.
    assert flux["calls"] == 6000
    assert flux["duration_total"] == pytest.approx(268.352834e-3, rel=1e-12)
    assert flux["duration_mean"] == pytest.approx(44.725e-6, rel=1e-12)
    assert flux["duration_min"] == pytest.approx(43.106e-6, rel=1e-12)
    assert flux["duration_max"] == pytest.approx(1.791976e-3, rel=1e-12)
    step = _row(table, "cuda_time_step(int, int, float*, float*, float*, float*)")
    assert step["duration_min"] == pytest.approx(14.112e-6, rel=1e-12)
    assert step["duration_max"] == pytest.approx(16.0e-6, rel=1e-12)
    init = _row(table, "cuda_initialize_variables(int, float*)")
    assert init["calls"] == 3 and init["duration_total"] == pytest.approx(0.756862e-3, rel=1e-12)
    assert [(o.what, o.count) for o in prof.oddities] == [("memory copy/memset rows dropped (not kernels)", 3)]


def test_summary_cli(cli):
    result = cli("inspect", profile(SUMMARY), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "nvprof-summary"
    kernel = _kernel(doc, "cuda_compute_step_factor(int, float*, float*, float*)")
    assert kernel["calls"] == 2000
    assert kernel["metrics"]["duration_total"] == pytest.approx(14.094e-3, rel=1e-12)
    assert kernel["metrics"]["duration_max"] == pytest.approx(0.339981e-3, rel=1e-12)


def test_summary_drops_api_rows(tmp_path: Path):
    path = tmp_path / "summary.csv"
    path.write_text(
        "==9== Profiling result:\n"
        '"Type","Time(%)","Time","Calls","Avg","Min","Max","Name"\n'
        ",%,us,,us,us,us,\n"
        '"GPU activities",90.0,30.0,3,10.0,9.0,11.0,"k(float*)"\n'
        '"API calls",99.0,5000.0,2,2500.0,1.0,4999.0,"cudaMalloc"\n'
    )
    prof = read_profile(path)
    assert list(prof.dispatches["kernel"]) == ["k(float*)"]
    assert prof.dispatches["duration_total"].iloc[0] == pytest.approx(30e-6)
    assert [(o.what, o.count) for o in prof.oddities] == [("API call rows dropped (not kernels)", 1)]


# --------------------------------------------------------------------------- metrics


def test_metrics_kernel_row():
    prof = read_profile(profile(METRICS))
    assert prof.level == "kernel"
    assert prof.source.format == "nvprof-metrics"
    assert prof.source.device == "GeForce GTX 1080 Ti"
    table = prof.dispatches
    assert len(table) == 1
    row = _row(table, MATMUL)
    assert row["calls"] == 301 and row["device_id"] == 0
    assert len([c for c in table.columns if c.startswith("raw.")]) == 120
    assert row["raw.achieved_occupancy"] == 0.935178
    assert row["raw.dram_read_transactions"] == 11963
    assert row["raw.flop_count_sp"] == 131_072_000
    assert row["raw.flop_count_sp_fma"] == 65_536_000
    assert row["raw.dram_read_throughput"] == pytest.approx(4.455447 * GiB, rel=1e-12)  # "4.455447GB/s"
    assert row["raw.sysmem_write_throughput"] == pytest.approx(976.5625 * KiB, rel=1e-12)  # "976.562500KB/s"
    assert row["raw.sysmem_read_throughput"] == 0.0  # "0.000000B/s"
    assert row["raw.single_precision_fu_utilization"] == 3  # "Low (3)"
    assert row["raw.shared_utilization"] == 7  # Avg "High (7)"
    assert row["raw.special_fu_utilization"] == 0  # "Idle (0)"
    assert row["raw.l2_tex_write_hit_rate"] == 64.119134  # percent stays a percentage
    assert prof.oddities == ()


def test_metrics_cli(cli):
    result = cli("inspect", profile(METRICS), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "nvprof-metrics"
    assert _kernel(doc, MATMUL)["calls"] == 301


def test_metrics_overflow_is_empty_with_warning(tmp_path: Path):
    path = tmp_path / "metrics.csv"
    path.write_text(
        "==1== Metric result:\n"
        '"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max","Avg"\n'
        '"Tesla K80 (0)","k()",2,"inst_executed","Instructions Executed",1,<OVERFLOW>,<OVERFLOW>\n'
        '"Tesla K80 (0)","k()",2,"dram_read_throughput","Device Memory Read Throughput",1MB/s,3MB/s,2MB/s\n'
    )
    prof = read_profile(path)
    row = prof.dispatches.iloc[0]
    assert np.isnan(row["raw.inst_executed"])
    assert row["raw.dram_read_throughput"] == 2 * MiB
    assert [(o.what, o.count) for o in prof.oddities] == [("<OVERFLOW> metric values left empty", 1)]


# --------------------------------------------------------------------------- text log


def test_log_summary_with_metrics():
    prof = read_profile(profile(LOG))
    assert prof.level == "kernel"
    assert prof.source.format == "nvprof-log"
    assert prof.source.device == "Tesla P100-PCIE-16GB"
    table = prof.dispatches
    assert list(table["kernel"]) == [VECTOR_ADD]
    row = table.iloc[0]
    assert row["calls"] == 1
    for column in ("duration_total", "duration_mean", "duration_min", "duration_max"):
        assert row[column] == pytest.approx(2.6240e-6, rel=1e-12)  # "2.6240us"
    assert len([c for c in table.columns if c.startswith("raw.")]) == 160
    assert row["raw.achieved_occupancy"] == 0.329553
    assert row["raw.dram_read_transactions"] == 6
    assert row["raw.flop_count_sp"] == 50_000
    assert row["raw.inst_per_warp"] == 22.955357
    assert row["raw.gld_throughput"] == pytest.approx(116.60 * GiB, rel=1e-12)  # "116.60GB/s"
    assert row["raw.dram_read_throughput"] == pytest.approx(57.310 * MiB, rel=1e-12)  # "57.310MB/s"
    assert row["raw.shared_load_throughput"] == 0.0  # "0.00000B/s"
    assert row["raw.warp_execution_efficiency"] == 99.98  # "99.98%"
    assert row["raw.dram_utilization"] == 1  # "Low (1)"
    assert row["raw.tex_fu_utilization"] == 2  # "Low (2)"
    assert row["raw.unique_warps_launched"] == 1568  # the last line of the log
    assert [(o.what, o.count) for o in prof.oddities] == [("memory copy/memset rows dropped (not kernels)", 2)]


def test_log_throughput_prefixes_are_binary():
    """Byte counts over throughputs must give one kernel time whatever the prefix
    (MB/s or GB/s); they do only when both are binary."""
    row = read_profile(profile(LOG)).dispatches.iloc[0]
    times = [
        row["raw.dram_read_bytes"] / row["raw.dram_read_throughput"],  # MB/s
        row["raw.sysmem_write_bytes"] / row["raw.sysmem_write_throughput"],  # MB/s
        row["raw.dram_write_bytes"] / row["raw.dram_write_throughput"],  # GB/s
        row["raw.l2_global_load_bytes"] / row["raw.gld_throughput"],  # GB/s
    ]
    assert max(times) / min(times) < 1.0002
    assert times[0] == pytest.approx(3.195e-6, rel=1e-3)


def test_log_cli(cli):
    result = cli("inspect", profile(LOG), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "nvprof-log"
    kernel = _kernel(doc, VECTOR_ADD)
    assert kernel["calls"] == 1
    assert kernel["metrics"]["duration_total"] == pytest.approx(2.624e-6, rel=1e-12)


def test_log_old_style_api_section_and_app_output(tmp_path: Path):
    # CUDA 7-era text summary: no Type column, API calls in their own section.
    path = tmp_path / "job.out"
    path.write_text(
        "==27694== NVPROF is profiling process 27694, command: matrixMul\n"
        "Performance= 35.35 GFlop/s, Time= 3.708 msec\n"
        "==27694== Profiling application: matrixMul\n"
        "==27694== Profiling result:\n"
        "Time(%)      Time     Calls       Avg       Min       Max  Name\n"
        " 99.94%  1.11524s       301  3.7051ms  3.6928ms  3.7174ms  void matrixMulCUDA<int=32>(float*, float*, float*, int, int)\n"
        "  0.04%  406.30us         2  203.15us  136.13us  270.18us  [CUDA memcpy HtoD]\n"
        "\n"
        "==27694== API calls:\n"
        "Time(%)      Time     Calls       Avg       Min       Max  Name\n"
        " 49.81%  285.17ms         3  95.055ms  153.32us  284.86ms  cudaMalloc\n"
        "done\n"
    )
    prof = read_profile(path)
    assert list(prof.dispatches["kernel"]) == [MATMUL]
    row = prof.dispatches.iloc[0]
    assert row["calls"] == 301
    assert row["duration_total"] == pytest.approx(1.11524, rel=1e-12)
    assert row["duration_min"] == pytest.approx(3.6928e-3, rel=1e-12)
    assert {o.what: o.count for o in prof.oddities} == {
        "memory copy/memset rows dropped (not kernels)": 1,
        "API call rows dropped (not kernels)": 1,
    }


# --------------------------------------------------------------------------- malformed input




def _cut(source: Path, dest: Path, line: int, keep_chars: int, newline: bool = False) -> Path:
    """Copy of ``source`` cut ``keep_chars`` into its 1-based ``line``."""
    lines = source.read_text().splitlines(keepends=True)
    dest.write_text("".join(lines[: line - 1]) + lines[line - 1][:keep_chars] + ("\n" if newline else ""))
    return dest


@pytest.mark.parametrize("fmt", ["nvprof-trace", "nvprof-summary", "nvprof-metrics", "nvprof-log"])
def test_empty_file(tmp_path: Path, cli, fmt: str):
    path = tmp_path / "empty.csv"
    path.write_text("")
    _assert_input_error(cli("inspect", path, "--format", fmt), path, "empty")
    _assert_input_error(cli("inspect", path), path, "empty")


@pytest.mark.parametrize("fmt", ["nvprof-trace", "nvprof-summary", "nvprof-metrics", "nvprof-log"])
def test_binary_garbage(tmp_path: Path, cli, fmt: str):
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(range(256)) * 8)
    _assert_input_error(cli("inspect", path, "--format", fmt), path, "binary")
    _assert_input_error(cli("inspect", path), path)


@pytest.mark.parametrize(
    ("relative", "line"),
    [(TRACE, 100), (SUMMARY, 6), (METRICS, 50), (LOG, 120)],
)
def test_truncated_mid_row(tmp_path: Path, cli, relative: str, line: int):
    path = _cut(profile(relative), tmp_path / Path(relative).name, line, 30)
    _assert_input_error(cli("inspect", path, "--json"), path, f":{line}:", "cut off")


def test_trace_cut_row_with_line_end(tmp_path: Path, cli):
    # Cut inside the Name field, then a newline: an unterminated quote.
    path = _cut(profile(TRACE), tmp_path / "trace.csv", 100, 120, newline=True)
    _assert_input_error(cli("inspect", path), path, ":100:", "EOF inside string")
    # Cut before the Name field: too few fields.
    path = _cut(profile(TRACE), tmp_path / "trace2.csv", 100, 30, newline=True)
    _assert_input_error(cli("inspect", path), path, ":100:", "no Name")


def test_summary_cut_row_with_line_end(tmp_path: Path, cli):
    path = _cut(profile(SUMMARY), tmp_path / "summary.csv", 6, 30, newline=True)
    _assert_input_error(cli("inspect", path), path, ":6:", "no Name or Calls")


def test_log_cut_after_header(tmp_path: Path, cli):
    path = _cut(profile(LOG), tmp_path / "slurm.out", 27, 200)  # up to the first "Kernel:" line: no metric rows
    _assert_input_error(cli("inspect", path), path, ":25:", "metrics table has no rows")


@pytest.mark.parametrize(("relative", "units_line"), [(TRACE, 5), (SUMMARY, 5)])
def test_missing_units_row(tmp_path: Path, cli, relative: str, units_line: int):
    lines = profile(relative).read_text().splitlines(keepends=True)
    path = tmp_path / Path(relative).name
    path.write_text("".join(lines[: units_line - 1] + lines[units_line:]))
    _assert_input_error(cli("inspect", path), path, f":{units_line}:", "units row missing")


@pytest.mark.parametrize("relative", [TRACE, SUMMARY, METRICS])
def test_missing_name_column(tmp_path: Path, cli, relative: str):
    text = profile(relative).read_text()
    text = text.replace('"Name"', '"Label"').replace('"Kernel",', '"Label",')
    path = tmp_path / Path(relative).name
    path.write_text(text)
    result = cli("inspect", path)
    _assert_input_error(result, path, "missing")
    assert "'Name'" in result.err or "'Kernel'" in result.err


def test_wrong_delimiter(tmp_path: Path, cli):
    path = tmp_path / "trace.csv"
    path.write_text(profile(TRACE).read_text().replace(",", ";"))
    _assert_input_error(cli("inspect", path), path, "not a profile format")
    _assert_input_error(cli("inspect", path, "--format", "nvprof-trace"), path, "no nvprof --print-gpu-trace header")


def test_non_number_cell(tmp_path: Path, cli):
    lines = profile(TRACE).read_text().splitlines(keepends=True)
    lines[49] = lines[49].replace("0.07", "zero.07", 1)
    path = tmp_path / "trace.csv"
    path.write_text("".join(lines))
    _assert_input_error(cli("inspect", path), path, ":50:", "'Duration'", "not a number")


def test_bad_metric_value(tmp_path: Path, cli):
    text = profile(METRICS).read_text().replace("965.000000,965.000000,965.000000", "965,965,lots", 1)
    path = tmp_path / "metrics.csv"
    path.write_text(text)
    _assert_input_error(cli("inspect", path), path, ":7:", "'Avg'", "'lots'")
    text = profile(METRICS).read_text().replace("3.618547GB/s,4.932952GB/s,4.455447GB/s", "1,2,3furlongs/s", 1)
    path.write_text(text)
    _assert_input_error(cli("inspect", path), path, "unit 'furlongs/s' not understood")


def test_unknown_unit_in_units_row(tmp_path: Path, cli):
    text = profile(SUMMARY).read_text().replace(",%,ms,,us,us,ms,", ",%,ms,,us,xs,ms,", 1)
    path = tmp_path / "summary.csv"
    path.write_text(text)
    _assert_input_error(cli("inspect", path), path, ":5:", "'Min'", "unit 'xs' not understood")


# --------------------------------------------------------------------------- --metrics text cut down to its blocks

# No such file is among ../shared/profiles: the sample keeps the layout of nvprof's --metrics text
# (the metric block of slurm-9186634.out: right-aligned Min/Max/Avg, units inside values) without
# the ==PID== banner, the table header and the Device line, with counts large enough that
# nvprof prints them in scientific notation. Figures are our own.
HEADLESS = """\
    Kernel: void sgemm_kernel<float, int=128>(float const *, float const *, float*, int)
          3                             flop_count_sp           Floating Point Operations(Single Precision)  1.7180e+10  1.7180e+10  1.7180e+10
          3                     dram_read_transactions                 Device Memory Read Transactions   2.1475e+08   2.1475e+08   2.1475e+08
          3                           dram_throughput                       Device Memory Throughput  512.31GB/s  517.08GB/s  514.70GB/s
          3                         achieved_occupancy                              Achieved Occupancy    0.489213    0.491002    0.490117
    Kernel: init(float*, int)
          1                             flop_count_sp           Floating Point Operations(Single Precision)           0           0           0
          1                           dram_throughput                       Device Memory Throughput  402.11GB/s  402.11GB/s  402.11GB/s
"""


def test_metrics_text_starting_at_kernel(tmp_path: Path, cli) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(HEADLESS)
    p = read_profile(path)
    assert (p.source.format, p.source.device, p.level) == ("nvprof-log", None, "kernel")
    d = p.dispatches.set_index("kernel")
    sgemm = d.loc["void sgemm_kernel<float, 128>(float const*, float const*, float*, int)"]
    assert sgemm["calls"] == 3
    assert sgemm["raw.flop_count_sp"] == 1.718e10 and sgemm["raw.dram_read_transactions"] == 2.1475e8
    assert sgemm["raw.dram_throughput"] == pytest.approx(514.70 * 2**30)  # nvprof's GB are 2**30 B (see module doc)
    assert d.loc["init(float*, int)", "raw.flop_count_sp"] == 0
    result = cli("inspect", "--json", "--arch", "v100", path)
    assert result.code == 0, result.err
    kernels = {k["kernel"]: k["metrics"] for k in result.json()["kernels"]}
    assert kernels["void sgemm_kernel<float, 128>(float const*, float const*, float*, int)"][
        "achieved_occupancy_pct"] == pytest.approx(49.0117)


def test_metrics_text_starting_at_kernel_cut_off(tmp_path: Path, cli) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(HEADLESS[: HEADLESS.index("402.11GB/s  402.11GB/s") + 5])
    _assert_input_error(cli("inspect", path), path)
