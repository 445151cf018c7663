"""Nsight Compute CSV readers on real outputs (../shared/profiles/ncu) and on
malformed copies written into tmp_path.

Expected numbers are read off the files by hand. ncu grids count blocks, so
grid_* = grid x block; its Kbyte/usecond prefixes are decimal (1.02 Kbyte = 1024
bytes rounded, see the module docstring of perfcheck.ingest.ncu).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfcheck.errors import InputError
from perfcheck.ingest import read_profile
from perfcheck.ingest.formats import Want
from perfcheck.ingest.ncu import base_unit
from tests.conftest import profile
from conftest import one_line_error as _assert_one_line_error

B200 = "ncu/meinie0826-roofline-analysis/torch_sdpa_flash__mha_bf16_b16_ctx4k_p64.ncu.csv"
FAILED = "ncu/meinie0826-roofline-analysis/flashinfer_paged_decode__gqa_bf16_b128_ctx8k_p64.ncu.csv"
GEMM = "ncu/gardenia-learningnote4dev/gemm.csv"
DEEPCAM = "ncu/cyanguwa-deeplearningprofiling-deepcam-lamb-opt"

FLASH = (
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, 0, 0, bfloat16_t, "
    "Flash_kernel_traits<128, 128, 64, 4, bfloat16_t>>, 0, 0, 0, 0, 0, 1, 0, 0>(Flash_fwd_params)"
)
# ncu writes "T1 *" (NVIDIA's demangler); perfcheck spells names the GNU way (ingest.names).
RANDOM_INIT_AS_WRITTEN = "void randomInit<float>(T1 *, int, int, unsigned int)"
RANDOM_INIT = "void randomInit<float>(T1*, int, int, unsigned int)"
GEMM_V0 = "void gemm_v0<float>(T1*, T1*, T1*, int, int, int)"
# The 2020 file writes "Array<char*, 1> >" (GNU demangler of the time); perfcheck closes it ">>".
FILL = (
    "void at::native::modern::vectorized_elementwise_kernel<4, at::native::fill_kernel_cuda(at::TensorIterator&, "
    "c10::Scalar)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda()#1}, "
    "at::detail::Array<char*, 1>>(int, at::native::fill_kernel_cuda(at::TensorIterator&, c10::Scalar)::"
    "{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda()#1}, at::detail::Array<char*, 1>)"
)
L2NORM = (
    "void multi_tensor_apply_kernel<TensorListMetadata<1>, L2NormFunctor<float>, float*, float*, bool, int>"
    "(int, int volatile*, TensorListMetadata<1>, L2NormFunctor<float>, float*, float*, bool, int)"
)
LAMB2 = (
    "void multi_tensor_apply_kernel<TensorListMetadata<2>, LAMBStage2Functor<float>, float*, float*, float>"
    "(int, int volatile*, TensorListMetadata<2>, LAMBStage2Functor<float>, float*, float*, float)"
)
CLEANUP = "cleanup(float*, float*, float*, float*, bool, int)"

# Each DeepCAM file: one metric; values of launch ID 1 (file line 51) and ID 34 (line 84).
DEEPCAM_METRICS = {
    "dram__bytes.sum": (44450464, 27392832),
    "l1tex__t_bytes.sum": (41403872, 27436032),
    "lts__t_bytes.sum": (41451104, 27428608),
    "sm__cycles_elapsed.avg": (78359.88, 56394.38),
    "sm__cycles_elapsed.avg.per_second": (1305671112.00, 1303905121.03),
    "sm__inst_executed_pipe_tensor.sum": (0, 0),
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": (693762, 0),
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": (10346840, 2282496),
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": (0, 46080),
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum": (0, 0),
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum": (0, 0),
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum": (0, 0),
}


def _kernel(document: dict, name: str) -> dict:
    (found,) = [k for k in document["kernels"] if k["kernel"] == name]
    return found




# --------------------------------------------------------------------------- raw page (B200)


def test_raw_page_b200():
    prof = read_profile(profile(B200))
    src = prof.source
    assert (src.format, src.tool, src.device, src.arch) == ("ncu-raw", "ncu", "NVIDIA B200", "sm_100")
    table = prof.dispatches
    assert len(table) == 16
    assert set(table["kernel"]) == {FLASH}
    assert table["dispatch_id"].tolist() == list(range(16))
    first = table.iloc[0]
    assert (first["pid"], first["context_id"], first["stream_id"], first["device_id"]) == (233513, 1, 7, 0)
    # gpu__time_duration.sum, units row "ns": 685280 ns; the last launch 685568 ns.
    assert first["duration"] == pytest.approx(685280e-9, rel=1e-12)
    assert table["duration"].iloc[-1] == pytest.approx(685568e-9, rel=1e-12)
    assert table["duration"].sum() == pytest.approx(10_995_072e-9, rel=1e-12)
    assert first["raw.gpu__time_duration.sum"] == 685280.0
    # Block (128, 1, 1), grid (1, 16, 32) blocks.
    assert (first["workgroup_x"], first["workgroup_y"], first["workgroup_z"], first["workgroup_size"]) == (128, 1, 1, 128)
    assert (first["grid_x"], first["grid_y"], first["grid_z"]) == (128, 16, 32)
    assert first["grid_size"] == 65536 and first["workgroups"] == 512
    assert first["registers"] == 255
    # byte/block: static 0, dynamic 65536 (the 1024-byte driver reserve is not the kernel's).
    assert (first["lds_static"], first["lds_dynamic"], first["lds_per_workgroup"]) == (0, 65536, 65536)
    assert not prof.oddities


def test_raw_page_launch_metrics_are_numbers():
    """The later occupancy work needs launch__* as numbers."""
    table = read_profile(profile(B200)).dispatches
    first = table.iloc[0]
    limits = {c: first[c] for c in table.columns if c.startswith("raw.launch__occupancy_limit_")}
    assert limits == {
        "raw.launch__occupancy_limit_barriers": 32.0,
        "raw.launch__occupancy_limit_blocks": 32.0,
        "raw.launch__occupancy_limit_registers": 2.0,
        "raw.launch__occupancy_limit_shared_mem": 2.0,
        "raw.launch__occupancy_limit_warps": 16.0,
    }
    assert first["raw.launch__waves_per_multiprocessor"] == 1.73
    assert first["raw.launch__shared_mem_per_block_driver"] == 1024.0
    assert first["raw.launch__registers_per_thread_allocated"] == 256.0
    assert first["raw.launch__sm_count"] == 148.0
    assert first["raw.device__attribute_max_shared_memory_per_multiprocessor"] == 233472.0
    assert first["raw.nvlink__bandwidth"] == 49064297103360.0
    assert table["raw.sm__inst_executed.sum.per_cycle_elapsed"].iloc[0] == 213.05
    assert all(table[c].dtype == np.float64 for c in table.columns if c.startswith("raw."))
    # Text attributes are not counters: SIMT, PolicySpread, No-CC, the device name.
    for text in ("launch__execution_model", "launch__cluster_scheduling_policy",
                 "device__attribute_confidential_computing_mode", "device__attribute_display_name"):
        assert f"raw.{text}" not in table.columns
    # 475 columns: 11 identity columns, 6 text metrics, 458 numeric metrics.
    assert sum(c.startswith("raw.") for c in table.columns) == 458


def test_raw_page_without_raw_wanted():
    prof = read_profile(profile(B200), want=Want(frozenset({"kernel", "duration", "registers"})))
    table = prof.dispatches
    assert not any(c.startswith("raw.") for c in table.columns)
    assert table["registers"].iloc[0] == 255
    assert prof.source.device == "NVIDIA B200"


def test_raw_page_cli(cli):
    result = cli("inspect", profile(B200), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "ncu-raw"
    assert doc["profiles"][0]["device"] == "NVIDIA B200"
    assert doc["profiles"][0]["arch"] == "sm_100"
    flash = _kernel(doc, FLASH)
    assert flash["calls"] == 16
    m = flash["metrics"]
    # median of 16: (687072 + 687296) / 2 ns
    assert m["duration"] == pytest.approx(687184e-9, rel=1e-12)
    assert m["duration_min"] == pytest.approx(683808e-9, rel=1e-12)
    assert m["duration_max"] == pytest.approx(690080e-9, rel=1e-12)
    assert m["duration_total"] == pytest.approx(10_995_072e-9, rel=1e-12)
    assert (m["registers"], m["lds_per_workgroup"], m["workgroup_size"], m["grid_size"]) == (255, 65536, 128, 65536)


# --------------------------------------------------------------------------- details (A100 gemm)


def test_details_gemm():
    prof = read_profile(profile(GEMM))
    src = prof.source
    assert (src.format, src.tool, src.device, src.arch) == ("ncu-details", "ncu", None, "sm_80")
    table = prof.dispatches
    assert table["kernel"].tolist() == [RANDOM_INIT, RANDOM_INIT, GEMM_V0]
    assert table["dispatch_id"].tolist() == [0, 1, 2]
    # "5,318,969,728.00": thousands separators.
    assert table["raw.dram__bytes.sum"].tolist() == [5318969728.0, 5419659136.0, 4394965922944.0]
    assert table["raw.l1tex__t_bytes.sum"].iloc[2] == 171805402726400.0
    assert table["raw.lts__t_bytes.sum"].iloc[2] == 13077104026080.0
    assert table["raw.smsp__cycles_elapsed.avg"].iloc[0] == 5143174222.52
    assert table["raw.smsp__cycles_elapsed.avg.per_second"].iloc[0] == 764999989.86
    assert table["raw.smsp__sass_thread_inst_executed_op_hfma_pred_on.sum"].iloc[2] == 3355443200.0
    # 15 metrics per kernel.
    assert sum(c.startswith("raw.") for c in table.columns) == 15
    # Grid (640, 1280, 1) blocks of (32, 32, 1): one FFMA per thread of randomInit.
    first = table.iloc[0]
    assert (first["grid_x"], first["grid_y"], first["grid_z"]) == (20480, 40960, 1)
    assert first["grid_size"] == 838_860_800 == first["raw.smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"]
    assert first["workgroups"] == 819_200 and first["workgroup_size"] == 1024
    assert (table.iloc[1]["grid_x"], table.iloc[1]["grid_y"]) == (40960, 20480)  # (1280, 640, 1) blocks
    assert table.iloc[2]["grid_size"] == 1280 * 1280 * 1024
    # No gpu__time_duration.sum collected: no duration (cycles / rate is a metric, not a reading).
    assert "duration" not in table.columns
    assert not prof.oddities


def test_details_gemm_cli(cli):
    result = cli("inspect", profile(GEMM), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "ncu-details"
    assert doc["profiles"][0]["arch"] == "sm_80"
    assert _kernel(doc, RANDOM_INIT)["calls"] == 2
    gemm = _kernel(doc, GEMM_V0)
    assert gemm["calls"] == 1
    assert gemm["metrics"]["grid_size"] == 1_677_721_600
    assert gemm["metrics"]["workgroup_size"] == 1024
    # The file has no gpu__time_duration; inspect times the kernel from its elapsed
    # cycles at the recorded cycle rate (NERSC metric set): 28,293,058,736.76 cycles
    # at 764,999,997.55 cycles/s.
    assert gemm["metrics"]["duration"] == pytest.approx(28_293_058_736.76 / 764_999_997.55, rel=1e-9)


# --------------------------------------------------------------------------- details (2020, V100 DeepCAM)


@pytest.mark.parametrize("metric", sorted(DEEPCAM_METRICS))
def test_details_2020_one_metric_per_file(metric):
    prof = read_profile(profile(f"{DEEPCAM}/out.{metric}"))
    assert prof.source.format == "ncu-details"
    assert (prof.source.device, prof.source.arch) == (None, None)  # no Device/CC columns yet
    table = prof.dispatches
    assert len(table) == 35
    assert table["dispatch_id"].tolist() == list(range(35))
    assert (table.iloc[0]["kernel"], table.iloc[1]["kernel"], table.iloc[5]["kernel"]) == (FILL, L2NORM, CLEANUP)
    assert table.iloc[34]["kernel"] == LAMB2
    assert [c for c in table.columns if c.startswith("raw.")] == [f"raw.{metric}"]
    assert (table[f"raw.{metric}"].iloc[1], table[f"raw.{metric}"].iloc[34]) == DEEPCAM_METRICS[metric]
    # "Kernel Time" is a date ("2020-Jun-09 20:05:31"), not a duration; no launch geometry.
    for absent in ("duration", "workgroup_size", "grid_size", "device_id"):
        assert absent not in table.columns
    assert (table.iloc[0]["context_id"], table.iloc[0]["stream_id"]) == (1, 7)


def test_details_2020_dram_bytes():
    table = read_profile(profile(f"{DEEPCAM}/out.dram__bytes.sum")).dispatches
    assert table["raw.dram__bytes.sum"].iloc[:6].tolist() == [6976, 44450464, 61147712, 75700640, 56782144, 10176]
    assert table["pid"].iloc[0] == 60518


def test_directory_of_metric_files_merged_by_id(cli):
    prof = read_profile(profile(DEEPCAM))
    assert prof.source.format == "ncu-details"
    table = prof.dispatches
    assert len(table) == 35
    assert table["dispatch_id"].tolist() == list(range(35))
    assert table.iloc[0]["kernel"] == FILL and table.iloc[34]["kernel"] == LAMB2
    for metric, (id1, id34) in DEEPCAM_METRICS.items():
        assert (table[f"raw.{metric}"].iloc[1], table[f"raw.{metric}"].iloc[34]) == (id1, id34)
    # Every file is another process: no one pid belongs to a merged row.
    assert "pid" not in table.columns
    assert not prof.oddities

    result = cli("inspect", profile(DEEPCAM), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert {k["kernel"]: k["calls"] for k in doc["kernels"]}[L2NORM] == 12
    assert {k["kernel"]: k["calls"] for k in doc["kernels"]}[CLEANUP] == 3
    assert sum(k["calls"] for k in doc["kernels"]) == 35


def test_directory_runs_that_differ_are_not_merged(cli, tmp_path):
    source = profile(GEMM).read_text()
    (tmp_path / "a.csv").write_text(source)
    swapped = source.replace(RANDOM_INIT_AS_WRITTEN, "void other(int)")
    (tmp_path / "b.csv").write_text(swapped)
    _assert_one_line_error(cli("inspect", tmp_path), tmp_path / "b.csv", "kernel ID 0 is 'void other(int)' here")


# --------------------------------------------------------------------------- units and hand-written layouts


def test_base_units():
    assert base_unit("Kbyte") == (1e3, "byte")
    assert base_unit("Kbyte/block") == (1e3, "byte/block")
    assert base_unit("Gbyte/second") == (1e9, "byte/second")
    assert base_unit("usecond") == (1e3, "nsecond")
    assert base_unit("ms") == (1e6, "nsecond")
    assert base_unit("second") == (1e9, "nsecond")
    assert base_unit("cycle/nsecond") == (1e9, "cycle/second")
    assert base_unit("cycle/usecond") == (1e6, "cycle/second")
    assert base_unit("Ghz") == (1e9, "hz")
    for unchanged in ("cycle", "inst", "%", "register/thread", "inst/cycle", ""):
        assert base_unit(unchanged) == (1.0, unchanged)


HEADER = '"ID","Process ID","Kernel Name","Block Size","Grid Size","Section Name","Metric Name","Metric Unit","Metric Value"\n'


def _details(rows: list[tuple[int, str, str, str, str]]) -> str:
    return HEADER + "".join(
        f'"{i}","42","{k}","(256, 1, 1)","(4, 2, 1)","S","{name}","{unit}","{value}"\n' for i, k, name, unit, value in rows
    )


def test_details_scaled_units_and_section_labels(tmp_path):
    """--print-units auto picks a unit per value; sectioned pages use labels."""
    path = tmp_path / "auto.csv"
    path.write_text(
        "==PROF== Connected to process 42 (/bin/app)\n"
        + _details([
            (0, "a", "Duration", "usecond", "41.28"),
            (0, "a", "Registers Per Thread", "register/thread", "40"),
            (0, "a", "Static Shared Memory Per Block", "Kbyte/block", "1.02"),
            (0, "a", "Dynamic Shared Memory Per Block", "byte/block", "0"),
            (0, "a", "dram__bytes_read.sum", "Mbyte", "2.50"),
            (1, "b", "Duration", "msecond", "1,234.50"),
            (1, "b", "Registers Per Thread", "register/thread", "32"),
            (1, "b", "Static Shared Memory Per Block", "Kbyte/block", "4.10"),
            (1, "b", "Dynamic Shared Memory Per Block", "Kbyte/block", "49.15"),
            (1, "b", "dram__bytes_read.sum", "Gbyte", "1.5"),
        ])
        + "==PROF== Disconnected from process 42\n"
    )
    prof = read_profile(path)
    table = prof.dispatches
    assert table["kernel"].tolist() == ["a", "b"]
    assert table["duration"].tolist() == pytest.approx([41.28e-6, 1.2345], rel=1e-12)
    assert table["raw.Duration"].tolist() == pytest.approx([41280.0, 1_234_500_000.0], rel=1e-12)
    assert table["registers"].tolist() == [40, 32]
    assert table["lds_static"].tolist() == [1020, 4100]
    assert table["lds_dynamic"].tolist() == [0, 49150]
    assert table["lds_per_workgroup"].tolist() == [1020, 53250]
    assert table["raw.dram__bytes_read.sum"].tolist() == pytest.approx([2.5e6, 1.5e9], rel=1e-12)
    assert table["grid_x"].tolist() == [1024, 1024] and table["workgroups"].tolist() == [8, 8]
    (odd,) = prof.oddities
    assert "scaled units" in odd.what and "--print-units base" in odd.what and odd.count == 7


def test_details_text_and_missing_values(tmp_path):
    path = tmp_path / "text.csv"
    path.write_text(_details([
        (0, "a", "device__attribute_display_name", "", "NVIDIA A100-SXM4-40GB"),
        (0, "a", "launch__execution_model", "", "SIMT"),
        (0, "a", "lts__t_sector_hit_rate.pct", "%", "n/a"),
        (0, "a", "odd__metric", "", "12"),
        (1, "a", "device__attribute_display_name", "", "NVIDIA A100-SXM4-40GB"),
        (1, "a", "launch__execution_model", "", "SIMT"),
        (1, "a", "lts__t_sector_hit_rate.pct", "%", "87.5"),
        (1, "a", "odd__metric", "", "oops"),
    ]))
    prof = read_profile(path)
    assert prof.source.device == "NVIDIA A100-SXM4-40GB"
    table = prof.dispatches
    assert "raw.launch__execution_model" not in table.columns
    assert "raw.device__attribute_display_name" not in table.columns
    assert np.isnan(table["raw.lts__t_sector_hit_rate.pct"].iloc[0])
    assert table["raw.lts__t_sector_hit_rate.pct"].iloc[1] == 87.5
    assert table["raw.odd__metric"].iloc[0] == 12 and np.isnan(table["raw.odd__metric"].iloc[1])
    (odd,) = prof.oddities
    assert "odd__metric" in odd.what and odd.count == 1


def test_no_kernels_profiled_is_an_empty_profile(cli, tmp_path):
    path = tmp_path / "none.csv"
    path.write_text("==PROF== Connected to process 7 (/bin/app)\n==PROF== Disconnected from process 7\n"
                    "==WARNING== No kernels were profiled.\n")
    result = cli("inspect", path, "--json")
    assert result.code == 0, result.err
    assert result.json()["kernels"] == []
    assert "holds no kernel dispatches" in result.err


def test_header_only_is_an_empty_profile(cli, tmp_path):
    path = tmp_path / "header.csv"
    path.write_text(HEADER)
    result = cli("inspect", path)
    assert result.code == 0, result.err
    assert "holds no kernel dispatches" in result.err


# --------------------------------------------------------------------------- malformed input


def test_failed_run(cli):
    path = profile(FAILED)
    _assert_one_line_error(
        cli("inspect", path), path,
        f"{path}:3: no Nsight Compute CSV header; the run failed: The application returned an error code (1)",
    )


def test_failed_run_named_format(cli):
    path = profile(FAILED)
    _assert_one_line_error(cli("inspect", path, "--format", "ncu-raw"), path, "the run failed")


def test_empty_file(cli, tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    _assert_one_line_error(cli("inspect", path), path, "empty")
    _assert_one_line_error(cli("inspect", path, "--format", "ncu-raw"), path, "empty")


def test_binary_garbage(cli, tmp_path):
    path = tmp_path / "garbage.csv"
    path.write_bytes(bytes(range(256)) * 8)
    _assert_one_line_error(cli("inspect", path), path)
    _assert_one_line_error(cli("inspect", path, "--format", "ncu-details"), path, "binary")


def test_raw_truncated_mid_row(cli, tmp_path):
    text = profile(B200).read_text()
    path = tmp_path / "cut.csv"
    path.write_text(text[: len(text) - 2000])  # inside the last kernel row (line 20)
    _assert_one_line_error(cli("inspect", path), path, f"{path}:20:", "cut off")


def test_details_truncated_mid_value(cli, tmp_path):
    text = profile(GEMM).read_text()
    path = tmp_path / "cut.csv"
    path.write_text(text[: text.rindex("3,355,443,200") + 5])  # '"3,355' on line 45
    _assert_one_line_error(cli("inspect", path), path, f"{path}:45:", "cut off")


def test_raw_units_row_missing(cli, tmp_path):
    lines = profile(B200).read_text().splitlines(keepends=True)
    path = tmp_path / "nounits.csv"
    path.write_text("".join(lines[:3] + lines[4:]))
    _assert_one_line_error(cli("inspect", path), path, f"{path}:4:", "no units row")


def test_wrong_delimiter(cli, tmp_path):
    path = tmp_path / "semicolon.csv"
    path.write_text(profile(GEMM).read_text().replace('","', '";"'))
    _assert_one_line_error(cli("inspect", path), path, "not a profile format")
    _assert_one_line_error(cli("inspect", path, "--format", "ncu-details"), path, "no Nsight Compute CSV header")


def test_missing_required_column(cli, tmp_path):
    lines = profile(GEMM).read_text().splitlines()
    path = tmp_path / "nounit.csv"
    # Drop the "Metric Unit" column (second to last) from every line.
    path.write_text("\n".join('","'.join(line.split('","')[:-2] + line.split('","')[-1:]) for line in lines) + "\n")
    _assert_one_line_error(cli("inspect", path), path, f"{path}:1:", "'Metric Unit' missing")


def test_not_a_number_in_duration(cli, tmp_path):
    lines = profile(B200).read_text().splitlines(keepends=True)
    lines[6] = lines[6].replace('"687040"', '"fast"', 1)  # launch ID 2's gpu__time_duration.sum
    path = tmp_path / "text.csv"
    path.write_text("".join(lines))
    _assert_one_line_error(cli("inspect", path), path, f"{path}:7:", "gpu__time_duration.sum", "'fast' is not a number")


def test_bad_block_size(cli, tmp_path):
    path = tmp_path / "block.csv"
    path.write_text(_details([(0, "a", "x__y", "", "1")]).replace("(256, 1, 1)", "256x1x1"))
    _assert_one_line_error(cli("inspect", path), path, f"{path}:2:", "Block Size")


def test_details_rows_without_rule_results_are_shorter(tmp_path):
    # ncu 2023+ details pages: the rule columns are written only on rows with a rule
    # result, so metric rows have fewer fields than the header; the last row is one.
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
              '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name",'
              '"Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"')
    ident = '"0","1","app","h","k(float *)","1","7","(256, 1, 1)","(40, 1, 1)","0","8.0"'
    rows = [f'{ident},"GPU Speed Of Light Throughput","Duration","usecond","12.5"',
            f'{ident},"GPU Speed Of Light Throughput","","","","SOLBottleneck","OPT","Low utilisation","global","50"',
            f'{ident},"Launch Statistics","Registers Per Thread","register/thread","32"']
    path = tmp_path / "details.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    d = read_profile(path).dispatches
    assert d["duration"].tolist() == [12.5e-6] and d["registers"].tolist() == [32]
    # the same row cut inside its quoted value at the end of the file is still refused
    path.write_text("\n".join([header, *rows])[:-3])
    with pytest.raises(InputError, match="last row is cut off"):
        read_profile(path)
    # and so is a row that ends before its Metric Value
    path.write_text("\n".join([header, *rows[:2], f'{ident},"Launch Statistics","Registers Per Thread"']) + "\n")
    with pytest.raises(InputError, match="last row is cut off"):
        read_profile(path)
