"""metrics.counters: every formula on small hand-computed frames, then the real
profiles (Omniperf/rocprof-compute vecCopy, ncu, nvprof) against values computed
by hand from their counters and against the tools' own derived figures."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from conftest import profile
from perfcheck.errors import UsageError
from perfcheck.ingest import read_profile
from perfcheck.metrics.counters import (
    EXTENSIVE,
    FORMULAS,
    QUANTITIES,
    counters_for,
    cycles_duration,
    wanted,
    work,
)
from perfcheck.metrics.summary import SUMMARY_WANT


# Stand-ins for perfcheck.arch's Target/ArchSpec/Device with only the fields work()
# reads; figures from ../shared/reference/arch-specs.md §1.1 (4 SIMDs per CU; 8 waves
# per SIMD on gfx90a/gfx942, 10 on gfx908) and §1.2 (CU counts).
@dataclass(frozen=True)
class _Arch:
    name: str
    wave_size: int = 64
    simds_per_cu: int = 4
    max_waves_per_simd: int = 8


@dataclass(frozen=True)
class _Device:
    compute_units: int


@dataclass(frozen=True)
class _Target:
    arch: _Arch
    device: _Device | None


MI210 = _Target(_Arch("gfx90a"), _Device(104))
MI300X = _Target(_Arch("gfx942"), _Device(304))
MI100 = _Target(_Arch("gfx908", max_waves_per_simd=10), _Device(120))
GFX950 = _Target(_Arch("gfx950"), None)


def frame(**columns: list[float]) -> pd.DataFrame:
    """A dispatch chunk with raw counters: frame(**{"FETCH_SIZE": [...]})."""
    return pd.DataFrame({f"raw.{k}": np.asarray(v, dtype="float64") for k, v in columns.items()})


def raw(**columns: list[float]) -> dict[str, list[float]]:
    return columns


# --------------------------------------------------------------------------- AMD HBM


def test_mi200_hbm_from_tcc_ea_requests() -> None:
    # seed 003: 32 x RDREQ_32B + 64 x (RDREQ - RDREQ_32B) + 32 x (WRREQ - WRREQ_64B) + 64 x WRREQ_64B
    w = work(frame(**{"TCC_EA_RDREQ_sum": [100, 0], "TCC_EA_RDREQ_32B_sum": [10, 0],
                      "TCC_EA_WRREQ_sum": [50, 3], "TCC_EA_WRREQ_64B_sum": [20, 3]}), None)
    assert w["hbm_read_bytes"].tolist() == [32 * 10 + 64 * 90, 0.0]
    assert w["hbm_write_bytes"].tolist() == [32 * 30 + 64 * 20, 64 * 3]
    assert w["hbm_bytes"].tolist() == [6080 + 2240, 192.0]


def test_per_channel_counters_are_summed_when_no_sum_column() -> None:
    chunk = frame(**{"TCC_EA_RDREQ[0]": [10], "TCC_EA_RDREQ[1]": [5], "TCC_EA_RDREQ[10]": [1],
                     "TCC_EA_RDREQ_32B[0]": [2], "TCC_EA_RDREQ_32B[1]": [0], "TCC_EA_RDREQ_32B[10]": [0]})
    assert work(chunk, None)["hbm_read_bytes"].tolist() == [32 * 2 + 64 * 14]


def test_sum_column_wins_over_channels() -> None:
    # rocprof-compute 3.1 (MI350 vcopy) drops channels: TCC_EA0_RDREQ has 61 of 64
    # columns summing to 65,652 next to TCC_EA0_RDREQ_sum = 65,640. The tool's sum is used.
    chunk = frame(**{"TCC_EA_RDREQ_sum": [100], "TCC_EA_RDREQ[0]": [7], "TCC_EA_RDREQ_32B_sum": [0]})
    assert work(chunk, None)["hbm_read_bytes"].tolist() == [6400.0]


def test_rocprofv3_accumulated_counter_stands_for_the_sum() -> None:
    # rocprofv3 writes one value per counter, summed over its instances.
    chunk = frame(TCC_EA0_RDREQ=[10], TCC_EA0_RDREQ_32B=[2], TCC_BUBBLE=[3])
    assert work(chunk, None)["hbm_read_bytes"].tolist() == [128 * 3 + 64 * 5 + 32 * 2]


def test_a_nan_channel_makes_the_row_nan_not_a_partial_sum() -> None:
    chunk = frame(**{"TCC_EA_RDREQ[0]": [10, 10], "TCC_EA_RDREQ[1]": [np.nan, 1], "TCC_EA_RDREQ_32B_sum": [0, 0]})
    got = work(chunk, None)["hbm_read_bytes"]
    assert np.isnan(got[0]) and got[1] == 64 * 11


def test_mi300_hbm_counts_bubbles_as_128_byte_reads() -> None:
    # rocprof-compute roofline_calc.py, non-MI200 branch
    w = work(frame(**{"TCC_EA0_RDREQ_sum": [100], "TCC_EA0_RDREQ_32B_sum": [10], "TCC_BUBBLE_sum": [40],
                      "TCC_EA0_WRREQ_sum": [50], "TCC_EA0_WRREQ_64B_sum": [20]}), MI300X)
    assert w["hbm_read_bytes"].tolist() == [128 * 40 + 64 * 50 + 32 * 10]
    assert w["hbm_write_bytes"].tolist() == [32 * 30 + 64 * 20]
    assert w["hbm_bytes"].tolist() == [8640 + 2240]


def test_gfx950_uses_rdreq_128b_where_collected_else_the_analyzers_bubble_formula() -> None:
    both = {"TCC_EA0_RDREQ_sum": [100], "TCC_EA0_RDREQ_32B_sum": [10], "TCC_BUBBLE_sum": [0],
            "TCC_EA0_RDREQ_128B_sum": [40], "TCC_EA0_WRREQ_sum": [0], "TCC_EA0_WRREQ_64B_sum": [0]}
    assert work(frame(**both), GFX950)["hbm_read_bytes"].tolist() == [128 * 40 + 64 * 50 + 32 * 10]
    # Without TCC_EA0_RDREQ_128B: rocprof-compute 3.3's own formula (roofline_calc.py counts
    # TCC_BUBBLE on gfx950 too), the same with or without the arch.
    bubble_only = {k: v for k, v in both.items() if k != "TCC_EA0_RDREQ_128B_sum"}
    assert work(frame(**bubble_only), GFX950)["hbm_read_bytes"].tolist() == [64 * 90 + 32 * 10]
    assert work(frame(**bubble_only), None)["hbm_read_bytes"].tolist() == [64 * 90 + 32 * 10]


def test_fetch_size_write_size_are_kib() -> None:
    w = work(frame(FETCH_SIZE=[1.5, 0.03125], WRITE_SIZE=[2.0, 0.0]), None)
    assert w["hbm_read_bytes"].tolist() == [1536.0, 32.0]
    assert w["hbm_write_bytes"].tolist() == [2048.0, 0.0]
    assert w["hbm_bytes"].tolist() == [3584.0, 32.0]


def test_seed_001_total_rw_arithmetic() -> None:
    # Stencil sprint, 32x32x32x64 problem on MI100: TOTAL_RW = FETCH_SIZE + WRITE_SIZE
    # = 1.29009797 GB (decimal: 1.29009797e9 B / 2.671374 ms = 482.934 GB/s as the seed
    # prints), i.e. 1,259,861.298828125 KiB. The seed gives only the total; any split does.
    w = work(frame(FETCH_SIZE=[1_000_000.0], WRITE_SIZE=[259_861.298828125]), None)
    assert w["hbm_bytes"][0] == 1_290_097_970.0
    assert w["hbm_bytes"][0] / 2.671374e-3 == pytest.approx(482.934e9, rel=1e-6)


def test_counter_formula_fills_only_rows_an_earlier_one_left_empty() -> None:
    chunk = frame(**{"TCC_EA_RDREQ_sum": [100, np.nan], "TCC_EA_RDREQ_32B_sum": [0, np.nan],
                     "FETCH_SIZE": [999.0, 2.0]})
    assert work(chunk, None)["hbm_read_bytes"].tolist() == [6400.0, 2048.0]


# ------------------------------------------------------------- AMD caches, LDS, FLOPs


def test_l2_l1_lds_bytes() -> None:
    w = work(frame(TCP_TCC_READ_REQ_sum=[10], TCP_TCC_WRITE_REQ_sum=[5], TCP_TCC_ATOMIC_WITH_RET_REQ_sum=[1],
                   TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum=[2], TCP_TOTAL_CACHE_ACCESSES_sum=[40],
                   SQ_LDS_IDX_ACTIVE=[300], SQ_LDS_BANK_CONFLICT=[100]), None)
    assert w["l2_bytes"].tolist() == [64 * 18]
    assert w["l1_bytes"].tolist() == [64 * 40]
    assert w["lds_bytes"].tolist() == [32 * 4 * 200]  # seed 003: 32 banks x 4 B


def _valu(precision: str, add: float, mul: float, fma: float, trans: float) -> dict[str, list[float]]:
    return {f"SQ_INSTS_VALU_{op}_{precision}": [v] for op, v in
            (("ADD", add), ("MUL", mul), ("FMA", fma), ("TRANS", trans))}


def test_valu_and_mfma_flops() -> None:
    counters = {**_valu("F64", 1, 2, 3, 4), **_valu("F32", 10, 0, 5, 0), **_valu("F16", 0, 0, 1, 0),
                "SQ_INSTS_VALU_MFMA_MOPS_F64": [2], "SQ_INSTS_VALU_MFMA_MOPS_F32": [0],
                "SQ_INSTS_VALU_MFMA_MOPS_F16": [1], "SQ_INSTS_VALU_MFMA_MOPS_BF16": [3],
                "SQ_INSTS_VALU_MFMA_MOPS_I8": [7]}
    w = work(frame(**counters), None)
    # seed 003: 64 x (ADD + MUL + TRANS + 2 x FMA) per precision, 512 x MFMA MOPS
    assert w["flops_fp64"].tolist() == [64 * (1 + 2 + 4 + 6)]
    assert w["flops_fp32"].tolist() == [64 * 20]
    assert w["flops_fp16"].tolist() == [128.0]
    assert w["mfma_flops_fp64"].tolist() == [1024.0]
    assert w["mfma_flops_bf16"].tolist() == [1536.0]
    assert w["mfma_iops_int8"].tolist() == [3584.0]
    # flops: every FLOP quantity present; MFMA int8 operations are not FLOPs
    assert w["flops"].tolist() == [64 * 13 + 64 * 20 + 128 + 1024 + 0 + 512 + 1536]
    assert "mfma_flops_fp8" not in w.columns  # gfx942+ counter not collected


def test_valu_flops_use_the_dispatch_wave_size() -> None:
    chunk = frame(**_valu("F32", 1, 0, 0, 0)).assign(wave_size=pd.array([32], dtype="Int64"))
    assert work(chunk, None)["flops_fp32"].tolist() == [32.0]


def test_flops_is_nan_where_a_collected_precision_is_nan() -> None:
    chunk = frame(**{**_valu("F32", 1, 0, 0, 0), "SQ_INSTS_VALU_MFMA_MOPS_F64": [np.nan]})
    assert np.isnan(work(chunk, None)["flops"][0])


def test_amd_instructions_are_wavefront_level_valu_plus_salu() -> None:
    w = work(frame(SQ_INSTS_VALU=[163840], SQ_INSTS_SALU=[49152]), None)
    assert w["instructions"].tolist() == [212992.0]


# ---------------------------------------------------------------- AMD achieved occupancy


def test_amd_achieved_occupancy_needs_the_device() -> None:
    chunk = frame(SQ_LEVEL_WAVES_ACCUM=[3328 * 100 / 2], GRBM_GUI_ACTIVE=[100])
    # mean resident waves 1664 of 104 CUs x 4 SIMDs x 8 waves = 3328
    assert work(chunk, MI210)["achieved_occupancy_pct"].tolist() == [50.0]
    assert np.isnan(work(chunk, None)["achieved_occupancy_pct"][0])
    assert np.isnan(work(chunk, _Target(_Arch("gfx90a"), None))["achieved_occupancy_pct"][0])


def test_amd_achieved_occupancy_divides_gui_active_by_xcds() -> None:
    # MI300X: GRBM_GUI_ACTIVE adds up 8 XCDs (304 CUs / 38 per XCD); per-XCD cycles = /8
    chunk = frame(SQ_LEVEL_WAVES_ACCUM=[9728 * 100], GRBM_GUI_ACTIVE=[800])
    assert work(chunk, MI300X)["achieved_occupancy_pct"].tolist() == [100.0]


def test_sq_accum_prev_hires_means_waves_only_in_a_sq_level_waves_pass() -> None:
    waves = frame(SQ_ACCUM_PREV_HIRES=[3328 * 100 / 4], GRBM_GUI_ACTIVE=[100], SQ_LEVEL_WAVES=[0])
    assert work(waves, MI210)["achieved_occupancy_pct"].tolist() == [25.0]
    # without SQ_LEVEL_WAVES, or next to another level counter, the accumulator is not waves
    assert "achieved_occupancy_pct" not in work(waves.drop(columns=["raw.SQ_LEVEL_WAVES"]), MI210).columns
    fetch = waves.assign(**{"raw.SQ_IFETCH_LEVEL": [0.0]})
    assert "achieved_occupancy_pct" not in work(fetch, MI210).columns


# --------------------------------------------------------------------------- ncu


def test_ncu_bytes_flops_instructions_occupancy() -> None:
    chunk = frame(**{
        "dram__bytes.sum": [1000], "lts__t_bytes.sum": [2000], "l1tex__t_bytes.sum": [3000],
        "sm__sass_thread_inst_executed_op_dadd_pred_on.sum": [1],
        "sm__sass_thread_inst_executed_op_dmul_pred_on.sum": [2],
        "sm__sass_thread_inst_executed_op_dfma_pred_on.sum": [3],
        "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": [10],
        "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": [20],
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": [30],
        "sm__sass_thread_inst_executed_op_hadd_pred_on.sum": [0],
        "sm__sass_thread_inst_executed_op_hmul_pred_on.sum": [0],
        "sm__sass_thread_inst_executed_op_hfma_pred_on.sum": [5],
        "sm__inst_executed_pipe_tensor.sum": [2],
        "smsp__inst_executed.sum": [77],
        "sm__warps_active.avg.pct_of_peak_sustained_active": [61.5],
    })
    w = work(chunk, None)
    assert w["hbm_bytes"].tolist() == [1000.0] and "hbm_read_bytes" not in w.columns
    assert w["l2_bytes"].tolist() == [2000.0] and w["l1_bytes"].tolist() == [3000.0]
    assert w["flops_fp64"].tolist() == [9.0]  # dadd + dmul + 2 x dfma (NERSC)
    assert w["flops_fp32"].tolist() == [90.0]
    assert w["flops_fp16"].tolist() == [10.0]
    assert w["tensor_flops"].tolist() == [1024.0]  # 512 per tensor instruction
    assert w["flops"].tolist() == [9 + 90 + 10 + 1024.0]
    assert w["instructions"].tolist() == [77.0]
    assert w["achieved_occupancy_pct"].tolist() == [61.5]
    assert "lds_bytes" not in w.columns


def test_ncu_read_write_bytes_and_section_label() -> None:
    w = work(frame(**{"dram__bytes_read.sum": [10], "dram__bytes_write.sum": [5], "Achieved Occupancy": [40.0]}),
             None)
    assert (w["hbm_read_bytes"][0], w["hbm_write_bytes"][0], w["hbm_bytes"][0]) == (10.0, 5.0, 15.0)
    assert w["achieved_occupancy_pct"].tolist() == [40.0]


def test_ncu_duration_from_cycles() -> None:
    chunk = frame(**{"sm__cycles_elapsed.avg": [1.5e6], "sm__cycles_elapsed.avg.per_second": [1.5e9]})
    assert cycles_duration(chunk).tolist() == [1e-3]
    assert "duration" not in work(chunk, None).columns  # a dispatch property, not a quantity
    assert cycles_duration(frame(**{"dram__bytes.sum": [1]})) is None


# --------------------------------------------------------------------------- nvprof


def test_nvprof_transactions_are_32_bytes() -> None:
    w = work(frame(dram_read_transactions=[6], dram_write_transactions=[1135], l2_read_transactions=[12596],
                   l2_write_transactions=[6263]), None)
    assert (w["hbm_read_bytes"][0], w["hbm_write_bytes"][0]) == (192.0, 36320.0)
    assert w["hbm_bytes"].tolist() == [36512.0]
    assert w["l2_bytes"].tolist() == [32.0 * (12596 + 6263)]


def test_nvprof_flops_instructions_occupancy() -> None:
    w = work(frame(flop_count_sp=[100], flop_count_dp_add=[1], flop_count_dp_mul=[2], flop_count_dp_fma=[3],
                   inst_executed=[55], achieved_occupancy=[0.935178]), None)
    assert w["flops_fp32"].tolist() == [100.0]
    assert w["flops_fp64"].tolist() == [9.0]  # nvprof: each multiply-accumulate contributes 2
    assert w["instructions"].tolist() == [55.0]
    assert w["achieved_occupancy_pct"].tolist() == [pytest.approx(93.5178)]


def test_nvprof_bytes_metrics_when_no_transactions() -> None:
    w = work(frame(dram_read_bytes=[192], dram_write_bytes=[36320]), None)
    assert w["hbm_bytes"].tolist() == [36512.0]


# ------------------------------------------------------------------- table and API


def test_no_counters_no_columns() -> None:
    chunk = pd.DataFrame({"kernel": ["k"], "duration": [1.0]}, index=[7])
    w = work(chunk, None)
    assert list(w.columns) == [] and list(w.index) == [7]


def test_index_and_column_order_are_kept() -> None:
    chunk = frame(SQ_INSTS_VALU=[1, 2], SQ_INSTS_SALU=[0, 0], FETCH_SIZE=[1, 1], WRITE_SIZE=[1, 1])
    chunk.index = [10, 20]
    w = work(chunk, None)
    assert list(w.index) == [10, 20]
    assert list(w.columns) == [q for q in QUANTITIES if q in w.columns]


def test_formula_table_is_well_formed() -> None:
    for formula in FORMULAS:
        assert formula.quantity in QUANTITIES and formula.source
    # No profiler counter gives plain flops (a sum of the per-precision ones) or a
    # CPU's main-memory bytes: only what a test declares to perf.measure does.
    profiled = {f.quantity for f in FORMULAS if f.tool != "perfcheck"}
    assert set(QUANTITIES) - profiled == {"flops", "mem_bytes"}
    assert "achieved_occupancy_pct" not in EXTENSIVE


def test_counters_for() -> None:
    assert counters_for("hbm_bytes", "amd") == ["FETCH_SIZE", "WRITE_SIZE"]
    assert counters_for("hbm_bytes", "nvidia") == ["dram__bytes.sum"]
    assert counters_for("hbm_bytes", "nvprof") == ["dram_read_transactions", "dram_write_transactions"]
    assert counters_for("achieved_occupancy_pct", "AMD") == ["SQ_LEVEL_WAVES_ACCUM", "GRBM_GUI_ACTIVE"]
    assert counters_for("lds_bytes", "nvidia") == []
    assert counters_for("tensor_flops", "amd") == []
    assert "SQ_INSTS_VALU_MFMA_MOPS_F64" in counters_for("flops", "amd")
    assert "sm__inst_executed_pipe_tensor.sum" in counters_for("flops", "nvidia")
    with pytest.raises(UsageError, match="unknown quantity"):
        counters_for("hbm_bandwidth", "amd")
    with pytest.raises(UsageError, match="unknown vendor"):
        counters_for("hbm_bytes", "intel")


def test_wanted_names_every_counter_and_channel_prefix() -> None:
    want = wanted()
    for name in ("raw.FETCH_SIZE", "raw.TCC_EA_RDREQ_sum", "raw.TCC_EA_RDREQ[13]", "raw.TCC_EA0_WRREQ",
                 "raw.dram__bytes.sum", "raw.achieved_occupancy", "duration", "wave_size"):
        assert name in want
    assert "raw.TCC_EA_RDREQ_LEVEL[3]" not in want and "raw.SQ_WAVES" not in want


# ------------------------------------------------------------ real Omniperf workloads


def test_omniperf_mi200_veccopy_hbm_bytes() -> None:
    # vecCopy(a, b, c, n, stride): c[id] = a[id] for n = 1,048,576 doubles: 8 MiB read,
    # 8 MiB written (rocprof-compute tests/vcopy.cpp), 3 dispatches on MI210 (gfx90a).
    d = read_profile(profile("omniperf/rocprofiler-compute-vcopy-MI200")).dispatches
    w = work(d, MI210)
    # TCC_EA_RDREQ_sum 131086 / 131086 / 131087, none 32 B; TCC_EA_WRREQ_sum 131072 /
    # 91072 / 91113, all 64 B (the later dispatches leave part of c in the L2).
    assert w["hbm_read_bytes"].tolist() == [131086 * 64, 131086 * 64, 131087 * 64]
    assert w["hbm_write_bytes"].tolist() == [131072 * 64, 91072 * 64, 91113 * 64]
    assert w["hbm_bytes"].tolist() == [16_778_112.0, 14_218_112.0, 14_220_800.0]
    assert w["hbm_bytes"][0] == pytest.approx(2 * 8 * 1048576, rel=1e-4)
    assert w["l2_bytes"].tolist() == [(131072 + 131072) * 64.0] * 3
    assert w["l1_bytes"].tolist() == [524288 * 64.0] * 3
    assert w["flops"].tolist() == [0.0] * 3
    # 16,384 wavefronts x (10 VALU + 3 SALU). Seed 000's (4 x VALU + SALU) / 64 would
    # give 11,008, i.e. 0.67 instructions per wavefront: its x4 and /64 do not apply to
    # these wavefront-level counters (see the comment in metrics/counters.py).
    assert w["instructions"].tolist() == [16384 * 13.0] * 3
    assert (4 * 163840 + 49152) / 64 == 11008
    # Achieved occupancy needs SQ_ACCUM_PREV_HIRES: in SQ_LEVEL_WAVES.csv, joined by dispatch
    # as rocprof-compute 3.0's analyzer does (7.2.7 Wavefront Occupancy: min 1520.42, max
    # 1915.80 waves; of 32 x 104 slots): accumulator / (pmc_perf.csv's GRBM_GUI_ACTIVE / 1 XCD).
    assert w["achieved_occupancy_pct"].tolist() == pytest.approx(
        [100 * 1520.42 / 3328, 100 * 1861.67 / 3328, 100 * 1915.80 / 3328], rel=1e-5)


def test_omniperf_mi200_veccopy_achieved_occupancy() -> None:
    d = read_profile(profile("omniperf/rocprofiler-compute-vcopy-MI200/SQ_LEVEL_WAVES.csv")).dispatches
    got = work(d, MI210)["achieved_occupancy_pct"]
    # 100 x SQ_ACCUM_PREV_HIRES / GRBM_GUI_ACTIVE / (32 waves x 104 CUs)
    expected = [100 * 44799316 / 27964 / 3328, 100 * 77475332 / 40878 / 3328, 100 * 79703012 / 40812 / 3328]
    assert got.tolist() == pytest.approx(expected, rel=1e-12)
    assert got[0] == pytest.approx(48.138, abs=1e-3)
    # The instruction-fetch pass of the same workload accumulates fetch latency instead.
    fetch = read_profile(profile("omniperf/rocprofiler-compute-vcopy-MI200/SQ_IFETCH_LEVEL.csv")).dispatches
    assert "achieved_occupancy_pct" not in work(fetch, MI210).columns


def test_omniperf_mi300x_veccopy() -> None:
    d = read_profile(profile("omniperf/rocprofiler-compute-vcopy-MI300X")).dispatches
    w = work(d, MI300X)
    # dispatch 0: TCC_BUBBLE_sum 65536 (128 B), TCC_EA0_RDREQ_sum 65775, no 32 B;
    # TCC_EA0_WRREQ_sum = TCC_EA0_WRREQ_64B_sum = 131072
    assert w["hbm_read_bytes"][0] == 65536 * 128 + (65775 - 65536) * 64 == 8_403_904
    assert w["hbm_write_bytes"][0] == 131072 * 64
    assert w["hbm_bytes"].tolist() == [16_792_512.0, 16_791_744.0, 16_791_424.0]
    assert w["instructions"].tolist() == [16384 * (6 + 3.0)] * 3
    occ = work(read_profile(profile("omniperf/rocprofiler-compute-vcopy-MI300X/SQ_LEVEL_WAVES.csv")).dispatches,
               MI300X)["achieved_occupancy_pct"]
    assert occ[0] == pytest.approx(100 * 155189876 / (486977 / 8) / (32 * 304), rel=1e-12)  # 26.21 %


def test_omniperf_mi350_bubble_formula_as_the_analyzer() -> None:
    # rocprof-compute 3.1 workload, gfx950: TCC_BUBBLE_sum = 0 although the 65,640 reads
    # are 128-byte ones (TCC_READ_sum 66,936 ~ 8 MiB / 128 B), so the analyzer's formula
    # gives 4.2 MB for an 8 MiB read; perfcheck reports the analyzer's figure (parity,
    # tests/test_parity.py) and uses TCC_EA0_RDREQ_128B where it was collected.
    d = read_profile(profile("omniperf/rocm-systems-vcopy-MI350")).dispatches
    assert work(d, None)["hbm_read_bytes"][0] == 65640 * 64
    w = work(d, GFX950)
    assert w["hbm_read_bytes"][0] == 65640 * 64
    assert w["hbm_write_bytes"].tolist() == [131072 * 64.0] * 3


def test_omniperf_1x_tcc_workload() -> None:
    d = read_profile(profile("omniperf/omniperf-v1-TCC-mi200")).dispatches
    w = work(d, None)
    assert list(w.columns) == ["hbm_bytes", "hbm_read_bytes", "hbm_write_bytes"]
    # dispatch 1, benchmark_func<short, 256, 8u, 0u>: TCC_EA_RDREQ_sum 8260, no 32 B, no writes
    assert (w["hbm_read_bytes"][1], w["hbm_write_bytes"][1]) == (8260 * 64.0, 0.0)


def test_rocprof_v1_mi100_achieved_occupancy() -> None:
    d = read_profile(profile("rocprof-v1/omniperf-SQ-mi100/SQ_LEVEL_WAVES.csv")).dispatches
    occ = work(d, MI100)["achieved_occupancy_pct"]
    # __amd_rocclr_fillBuffer: 1,482,807,932 / 503,727 cycles / (40 waves x 120 CUs)
    assert occ[0] == pytest.approx(100 * 1482807932 / 503727 / 4800, rel=1e-12)  # 61.33 %


def test_reading_only_wanted_columns_gives_the_same_work() -> None:
    path = profile("omniperf/rocprofiler-compute-vcopy-MI300X")
    narrow = read_profile(path, want=wanted() | SUMMARY_WANT).dispatches
    full = read_profile(path).dispatches
    assert narrow.shape[1] < full.shape[1] / 3  # per-channel copies of the wanted counters remain
    pd.testing.assert_frame_equal(work(narrow, MI300X), work(full, MI300X))


# ------------------------------------------------------------------ real ncu profiles


def test_ncu_a100_gemm() -> None:
    d = read_profile(profile("ncu/gardenia-learningnote4dev/gemm.csv")).dispatches
    w = work(d, None)
    gemm = w.iloc[2]  # void gemm_v0<float>: smsp__ metric names (Nsight Compute sections)
    assert gemm["hbm_bytes"] == 4_394_965_922_944.0
    assert gemm["l2_bytes"] == 13_077_104_026_080.0
    assert gemm["l1_bytes"] == 171_805_402_726_400.0
    assert gemm["flops_fp32"] == 2 * 34_359_738_368_000.0
    assert gemm["flops_fp16"] == 2 * 3_355_443_200.0
    assert gemm["tensor_flops"] == 512 * 104_857_600.0
    assert gemm["flops"] == 2 * 34_359_738_368_000 + 2 * 3_355_443_200 + 512 * 104_857_600.0
    assert w["flops_fp32"][0] == 2 * 838_860_800.0  # randomInit
    duration = cycles_duration(d)
    assert duration[2] == 28_293_058_736.76 / 764_999_997.55  # 36.98 s (clock locked at 765 MHz)


def test_ncu_v100_deepcam_per_metric_directory() -> None:
    d = read_profile(profile("ncu/cyanguwa-deeplearningprofiling-deepcam-lamb-opt")).dispatches
    w = work(d, None)
    assert len(w) == 35
    one = w.iloc[1]  # multi_tensor_apply_kernel<..., L2NormFunctor<float>, ...>
    assert (one["hbm_bytes"], one["l2_bytes"], one["l1_bytes"]) == (44_450_464.0, 41_451_104.0, 41_403_872.0)
    assert one["flops_fp32"] == 693_762 + 2 * 10_346_840.0
    assert one["flops_fp16"] == 0.0 and one["tensor_flops"] == 0.0
    assert "flops_fp64" not in w.columns  # no d* metric file in that run
    assert cycles_duration(d)[1] == 78_359.88 / 1_305_671_112.0


def test_ncu_b200_raw_page_has_no_work_counters() -> None:
    path = profile("ncu/meinie0826-roofline-analysis/torch_sdpa_flash__mha_bf16_b16_ctx4k_p64.ncu.csv")
    d = read_profile(path).dispatches
    w = work(d, None)
    assert list(w.columns) == [] and len(w) == 16
    assert cycles_duration(d) is None  # the file has gpu__time_duration instead


# --------------------------------------------------------------- real nvprof profiles


def test_nvprof_matrixmul_metrics_agree_with_its_own_throughputs() -> None:
    d = read_profile(profile("nvprof/leimingyu-magus/matrixMul_metrics.csv")).dispatches
    w = work(d, None).iloc[0]
    # Avg over 301 invocations as nvprof prints them
    assert w["hbm_read_bytes"] == 11963 * 32.0 and w["hbm_write_bytes"] == 25956 * 32.0
    assert w["l2_bytes"] == (512276 + 25613) * 32.0
    assert w["flops_fp32"] == 131_072_000.0  # = 2 x flop_count_sp_fma 65,536,000
    assert w["instructions"] == 6_176_000.0
    assert w["achieved_occupancy_pct"] == pytest.approx(93.5178, abs=5e-5)
    # The file has no kernel time. nvprof's dram_read_throughput 4.455447 GB/s (GB = 2**30)
    # fixes the metric run's time; perfcheck's bytes then reproduce its other three
    # throughputs to the printed precision (ratio of means vs mean of ratios over 301 runs).
    row = d.iloc[0]
    time = w["hbm_read_bytes"] / row["raw.dram_read_throughput"]  # 80.02 us
    assert w["hbm_write_bytes"] / time == pytest.approx(row["raw.dram_write_throughput"], rel=2e-4)
    l2_read = 512276 * 32.0 / time
    assert l2_read == pytest.approx(row["raw.l2_read_throughput"], rel=2e-4)
    assert w["l2_bytes"] / time == pytest.approx(row["raw.l2_read_throughput"] + row["raw.l2_write_throughput"],
                                                 rel=2e-4)
    assert w["flops_fp32"] == 2 * row["raw.flop_count_sp_fma"]
    # The same app's trace run (matrixMul_trace.csv) times the kernel at 76.5 us on
    # average: a separate run without metric replay, so its bandwidth is 4.6 % higher.
    trace = read_profile(profile("nvprof/leimingyu-magus/matrixMul_trace.csv")).dispatches
    assert trace["duration"].mean() == pytest.approx(76.515e-6, rel=1e-4)
    assert w["hbm_read_bytes"] / trace["duration"].mean() == pytest.approx(row["raw.dram_read_throughput"],
                                                                            rel=0.05)


def test_nvprof_components_agree_with_the_totals() -> None:
    d = read_profile(profile("nvprof/leimingyu-magus/matrixMul_metrics.csv")).dispatches
    only_components = d.drop(columns=["raw.flop_count_sp", "raw.flop_count_dp", "raw.flop_count_hp"])
    assert work(only_components, None)[["flops_fp32", "flops_fp64", "flops_fp16"]].iloc[0].tolist() == [
        131_072_000.0, 0.0, 0.0]


def test_nvprof_p100_log_bytes_equal_nvprof_bytes_metrics() -> None:
    d = read_profile(profile("nvprof/weakknight-roofline/slurm-9186634.out")).dispatches
    w = work(d, None).iloc[0]
    row = d.iloc[0]
    # 32-byte transactions = nvprof's own dram_read_bytes / dram_write_bytes
    assert (w["hbm_read_bytes"], w["hbm_write_bytes"]) == (row["raw.dram_read_bytes"], row["raw.dram_write_bytes"])
    assert (w["hbm_read_bytes"], w["hbm_write_bytes"]) == (192.0, 36320.0)
    # Every throughput implies the same metric-run kernel time, 3.1950 us (57.310 MB/s,
    # 10.587 GB/s, 117.49 GB/s, 58.420 GB/s: 5 digits); the summary's 2.624 us is
    # another (uninstrumented) run.
    times = [w["hbm_read_bytes"] / row["raw.dram_read_throughput"],
             w["hbm_write_bytes"] / row["raw.dram_write_throughput"],
             12596 * 32 / row["raw.l2_read_throughput"], 6263 * 32 / row["raw.l2_write_throughput"]]
    assert times == pytest.approx([3.195e-6] * 4, rel=1e-4)
    assert w["l2_bytes"] == (12596 + 6263) * 32.0
    assert w["flops_fp32"] == 50_000.0 and w["instructions"] == 35_994.0
    assert w["achieved_occupancy_pct"] == pytest.approx(32.9553)


# ------------------------------------------------------------ with the arch database


def test_with_the_arch_database() -> None:
    arch = pytest.importorskip("perfcheck.arch")
    if not hasattr(arch, "lookup"):
        pytest.skip("perfcheck.arch not finished")
    chunk = frame(SQ_LEVEL_WAVES_ACCUM=[44799316], GRBM_GUI_ACTIVE=[27964])
    assert work(chunk, arch.lookup("mi210"))["achieved_occupancy_pct"][0] == pytest.approx(48.138, abs=1e-3)
    chunk = frame(SQ_LEVEL_WAVES_ACCUM=[155189876], GRBM_GUI_ACTIVE=[486977])
    assert work(chunk, arch.lookup("mi300x"))["achieved_occupancy_pct"][0] == pytest.approx(26.207, abs=1e-3)
    assert np.isnan(work(chunk, arch.lookup("gfx942"))["achieved_occupancy_pct"][0])  # arch only: no CU count
