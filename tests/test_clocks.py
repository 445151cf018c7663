"""Clocks in profiles and clock-scaled ceilings (issue 17 §1, docs/clocks.md).

The real ncu gemm profile was taken at Nsight Compute's default base-clock lock:
``smsp__cycles_elapsed.avg.per_second`` reads 764,999,990 Hz on an A100 whose
datasheet figures hold at its 1410 MHz boost clock.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import profile
from perfcheck.analysis import analyse, analyse_profile
from perfcheck.arch import lookup
from perfcheck.expect import evaluate
from perfcheck.machine import Machine, dumps, read_machine, write_machine
from perfcheck.metrics.counters import work
from perfcheck.metrics.roofline import ceilings, clock_mismatch, kernel_metrics
from perfcheck.model import PeakDetail, Peaks, Profile, Source

GEMM = "ncu/gardenia-learningnote4dev/gemm.csv"
GEMM_KERNEL = "void gemm_v0<float>(T1*, T1*, T1*, int, int, int)"
# gemm.csv, ID 2: smsp__cycles_elapsed.avg.per_second "764,999,997.55"
GEMM_CLOCK = 764999997.55


def test_ncu_gemm_records_its_base_clock_per_kernel() -> None:
    a = analyse([profile(GEMM)], arch="a100")
    row = a.kernels.set_index("kernel").loc[GEMM_KERNEL]
    assert row["sm_clock"] == pytest.approx(GEMM_CLOCK, rel=1e-12)
    assert np.isnan(row["mem_clock"]) if "mem_clock" in row else True


def test_theoretical_roofs_scale_to_the_profiled_clock() -> None:
    a = analyse([profile(GEMM)], arch="a100")
    row = a.kernels.set_index("kernel").loc[GEMM_KERNEL]
    fp32 = a.ceilings["flop_rate_fp32"]
    # 19.5 TFLOP/s x 765 MHz / 1410 MHz = 10.58 TFLOP/s (the kernels share the clock)
    assert fp32.value == pytest.approx(19.5e12 * 765e6 / 1410e6, rel=1e-6)
    assert (fp32.datasheet.value, fp32.datasheet.clock_hz) == (19.5e12, 1410e6)
    assert fp32.clock_text() == "at the profiled 765 MHz; datasheet 19.5 TFLOP/s at 1410 MHz"
    # gemm_v0 is compute-bound (AI 15.65 FLOP/B > ridge): its roofline % is of the
    # FP32 roof at its own clock, 1.8x what it was against the boost-clock figure.
    flop_rate = row["flops"] / row["duration"]
    assert row["bound"] == "compute"
    assert row["roofline_pct"] == pytest.approx(100 * flop_rate / (19.5e12 * GEMM_CLOCK / 1410e6), rel=1e-9)
    assert row["roofline_pct"] == pytest.approx(17.58, abs=0.01)
    # no memory clock in gemm.csv: the HBM roof stays the datasheet figure
    assert a.ceilings["hbm_bw"].value == 1555e9 and a.ceilings["hbm_bw"].datasheet is None


def test_check_message_and_inspect_name_the_clock(cli) -> None:
    a = analyse([profile(GEMM)], arch="a100")
    [check] = evaluate("s", {"*gemm_v0*": ["flop_rate >= 20% of peak"]}, a)
    assert check.message.endswith(
        "20% of theoretical flop_rate_fp32 10.58 TFLOP/s at the profiled 765 MHz; datasheet 19.5 TFLOP/s at 1410 MHz")
    assert check.outcome == "failed"  # 17.6% of the 765 MHz roof
    result = cli("inspect", str(profile(GEMM)), "--arch", "a100")
    assert result.code == 0
    # the compact ceilings block (one line of figures, then the clock each is at)
    assert "flop_rate_fp32 10.58 TFLOP/s*" in result.out
    assert "clock of flop_rate_fp32: at the profiled 765 MHz; datasheet 19.5 TFLOP/s at 1410 MHz" in result.out


def _kernels(**clocks: list[float]) -> pd.DataFrame:
    """Two kernels, same work and time, at the clocks given."""
    return pd.DataFrame({"kernel": ["a", "b"], "calls": [1, 1], "duration": [1e-3, 1e-3],
                         "flops_fp32": [1e9, 1e9], "flops": [1e9, 1e9], "hbm_bytes": [1e6, 1e6], **clocks})


def test_each_kernel_against_its_own_clock() -> None:
    target = lookup("a100")
    roofs = ceilings(target, None)
    table = kernel_metrics(_kernels(sm_clock=[1410e6, 705e6], mem_clock=[1215e6, 607.5e6]), roofs)
    # 1 TFLOP/s against 19.5 (boost) and 9.75 TFLOP/s (half the clock)
    assert table["roofline_pct"].tolist() == pytest.approx([100 / 19.5, 200 / 19.5])
    # 1 GB/s against 1555 GB/s at 1215 MHz and half that at half the memory clock
    assert table["hbm_bw_pct"].tolist() == pytest.approx([100 / 1555, 200 / 1555])
    # a kernel without a recorded clock: the datasheet figures
    table = kernel_metrics(_kernels(sm_clock=[np.nan, 705e6]), roofs)
    assert table["roofline_pct"].tolist() == pytest.approx([100 / 19.5, 200 / 19.5])
    assert table["hbm_bw_pct"].tolist() == pytest.approx([100 / 1555] * 2)


def test_ncu_memory_and_gpc_clocks_from_counters() -> None:
    d = pd.DataFrame({"raw.dram__cycles_elapsed.avg.per_second": [1.2e9, 0.0],
                      "raw.gpc__cycles_elapsed.max": [1410.0, 1410.0], "raw.gpu__time_duration.sum": [1000.0, 0.0]})
    w = work(d, None)
    assert w["mem_clock"].tolist()[0] == 1.2e9 and np.isnan(w["mem_clock"][1])  # 0 Hz is no clock
    assert w["sm_clock"].tolist()[0] == pytest.approx(1.41e9) and np.isnan(w["sm_clock"][1])


def test_omniperf_sysinfo_clock_is_not_taken_for_the_kernels_clock() -> None:
    # sysinfo.csv says cur_sclk 800 (sclk 1700), but the workload's own roofline.csv
    # measured FP64 at 20.42 TFLOP/s, more than 800 MHz allows (23.95 x 800/1700):
    # an idle reading, so no clock and no scaled roof (docs/clocks.md).
    a = analyse([profile("omniperf/omniperf-v1-TCC-mi200")], arch="mi250x")
    assert "sm_clock" not in a.kernels
    assert a.ceilings["flop_rate_fp64"].value == pytest.approx(20.42e12, rel=1e-3)
    assert a.ceilings["gips"].datasheet is None


def _machine_peaks(tmp_path: Path, clock: float) -> Peaks:
    peaks = Peaks(values={"flop_rate_fp32": 18.9e12}, sources=(Source("m", "x", "x"),),
                  details=(PeakDetail("m", "fp32", 18.9e12, "FLOP/s"),), clocks={"sm_clock": clock})
    path = tmp_path / "a100.toml"
    write_machine(path, Machine(name="a100", device="a100", arch="sm_80", peaks=peaks))
    return read_machine(path).peaks


def test_machine_file_clocks_round_trip(tmp_path: Path) -> None:
    peaks = _machine_peaks(tmp_path, 1410e6)
    assert peaks.clocks == {"sm_clock": 1410e6}
    assert "[clocks]\nsm_clock = 1410000000.0  # Hz\n" in (tmp_path / "a100.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text((tmp_path / "a100.toml").read_text().replace("sm_clock", "core_clock"))
    with pytest.raises(Exception, match="unknown clock 'core_clock'"):
        read_machine(bad)


def test_empirical_peak_at_another_clock_is_said_not_scaled(tmp_path: Path) -> None:
    peaks = _machine_peaks(tmp_path, 1410e6)
    a = analyse([profile(GEMM)], arch="a100", peaks=peaks)
    fp32 = a.ceilings["flop_rate_fp32"]
    assert (fp32.kind, fp32.value, fp32.clock_hz) == ("empirical", 18.9e12, 1410e6)
    said = [str(o) for o in a.oddities if "measured at" in o.what]
    # named by the file the figure came from (the detail's source, "m")
    assert said == ["m: flop_rate_fp32 was measured at 1410 MHz but the profile ran at "
                    "765 MHz; the measured figure is used unscaled"]
    [check] = evaluate("s", {"*gemm_v0*": ["flop_rate >= 5% of peak"]}, a)
    assert check.message.endswith("of empirical flop_rate_fp32 18.9 TFLOP/s measured at 1410 MHz "
                                  "(flop_rate_fp32 was measured at 1410 MHz but the profile ran at 765 MHz; "
                                  "the measured figure is used unscaled)")
    # the same clock (within 2%): nothing to say
    assert clock_mismatch(fp32, 1400e6) is None
    a = analyse([profile(GEMM)], arch="a100", peaks=_machine_peaks(tmp_path, 765e6))
    assert not [o for o in a.oddities if "measured at" in o.what]


def test_profile_without_clocks_is_unchanged() -> None:
    d = pd.DataFrame({"kernel": ["k"], "duration": [1e-3], "raw.perfcheck.flops_fp32": [1e9],
                      "raw.perfcheck.hbm_bytes": [1e6]})
    a = analyse_profile(Profile(d, (Source("p", "perfcheck", "perfcheck"),)), arch="a100")
    assert a.ceilings["flop_rate_fp32"].value == 19.5e12
    assert a.ceilings["flop_rate_fp32"].clock_text() == "at the datasheet 1410 MHz"
    assert "sm_clock" not in a.kernels


def test_clock_is_a_metric_with_a_unit(cli) -> None:
    a = analyse([profile(GEMM)], arch="a100")
    [check] = evaluate("s", {"*gemm_v0*": ["sm_clock >= 1 GHz"]}, a)
    assert (check.outcome, check.message) == ("failed", "sm_clock 765 MHz; expected >= 1000 MHz")
    result = cli("metrics", "sm_clock")
    assert result.code == 0 and "thresholds: Hz, kHz, MHz, GHz" in result.out
    assert "ncu: smsp__cycles_elapsed.avg.per_second" in result.out


def test_memory_clock_scales_the_hbm_roof_and_markdown_says_it() -> None:
    from perfcheck.model import FAILED, Check
    from perfcheck.report.markdown import markdown_summary

    # A dispatch at half the A100's 1215 MHz memory clock (ncu's DRAM cycle rate).
    d = pd.DataFrame({"kernel": ["k"], "duration": [1e-3], "raw.perfcheck.hbm_bytes": [5e8],
                      "raw.dram__cycles_elapsed.avg.per_second": [607.5e6]})
    a = analyse_profile(Profile(d, (Source("p", "perfcheck", "perfcheck"),)), arch="a100")
    hbm = a.ceilings["hbm_bw"]
    assert hbm.value == pytest.approx(777.5e9) and hbm.clock_text() == (
        "at the profiled 607.5 MHz; datasheet 1.555 TB/s at 1215 MHz")
    assert a.kernels["hbm_bw_pct"].iloc[0] == pytest.approx(100 * 5e11 / 777.5e9)
    check = Check("s", "k", "k", "hbm_bw >= 80% of peak", "hbm_bw", ">=", 5e11, 6.2e11, "B/s", FAILED, "expectation", "m")
    row = next(line for line in markdown_summary({"s": [check]}, {"s": a}).splitlines() if line.startswith("| ❌"))
    assert row.endswith("64.3% of theoretical 777.5 GB/s at 607.5 MHz |"), row


def test_clocks_and_clock_scaled_ceilings_are_measured_not_exact() -> None:
    # ncu's base-clock rate reads 764,999,990 Hz on one launch and 764,999,998 on the
    # next: a baseline of sm_clock, or of a roof scaled by it, must not demand 1e-9.
    from perfcheck.baseline import is_exact

    assert not is_exact("sm_clock") and not is_exact("mem_clock")
    assert not is_exact("attainable") and not is_exact("peak_gips")
    assert is_exact("occupancy_pct") and is_exact("flops")


def test_mixbench_peaks_at_their_reported_clock_are_said_once() -> None:
    from perfcheck.ingest import read_peaks

    peaks = read_peaks([profile("mixbench/pawsey-topaz-v100/mixbench-log.txt")])  # GPU clock rate: 1380 MHz
    a = analyse([profile(GEMM)], arch="a100", peaks=peaks)
    said = [o.what for o in a.oddities if "measured at" in o.what]
    assert said == ["flop_rate_fp16, flop_rate_fp32, flop_rate_fp64, iop_rate_int32 were measured at 1380 MHz but "
                    "the profile ran at 765 MHz; the measured figures are used unscaled"]
    assert a.ceilings["hbm_bw"].clock_hz is None  # no memory clock in the log: nothing to compare
