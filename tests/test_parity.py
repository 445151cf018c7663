"""perfcheck against rocprof-compute's own analyzer on the Omniperf workloads in
../shared/profiles/omniperf (the oracle: ``rocprof-compute analyze -p WORKLOAD``,
run outside the project, no GPU needed).

Analyzer versions used (its numbers quoted below, nothing of its code):

* rocprofiler-compute 3.0.0 (ROCm/rocprofiler-compute 95b600ea) for the MI200 and
  MI300X vcopy workloads (3.3 refuses them: "Detected mismatch in sysinfo versioning");
* rocprofiler-compute 3.3.0 (ROCm/rocm-systems 1b1610fc2, projects/rocprofiler-compute)
  for the MI350 workload (3.0 says "gfx950 is an unsupported SoC");
* neither reads omniperf-v1-TCC-mi200 (1.x sysinfo: "Detected mismatch in sysinfo
  versioning. You need to reprofile"), so it has no oracle here.

Tolerances: bytes per level +-0.2 %, bandwidth (total bytes / total time) +-0.2 %,
occupancy +-2 % (relative), ceilings exact to the printed two decimals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import profile
from perfcheck.analysis import analyse
from perfcheck.ingest import read_peaks


def _kernel(workload: str) -> dict[str, object]:
    result = analyse([profile(f"omniperf/{workload}")])
    table = result.kernels if hasattr(result, "kernels") else result
    row = table.iloc[0]
    return {k: row[k] for k in table.columns}


def test_mi200_vcopy_against_rocprof_compute_3_0() -> None:
    k = _kernel("rocprofiler-compute-vcopy-MI200")
    # 2.1.15 Wavefront Occupancy: 1765.97 Wavefronts of 3328.00 = 53.06 % (SQ_ACCUM_PREV_HIRES
    # from SQ_LEVEL_WAVES.csv over pmc_perf.csv's GRBM_GUI_ACTIVE / num_xcd, peak
    # max_waves_per_cu 32 x cu_per_gpu 104 from sysinfo.csv; the device, MI210 or one
    # MI250 GCD, is not known to perfcheck's database, and need not be).
    assert k["achieved_occupancy_pct"] == pytest.approx(53.06, rel=0.02)
    assert k["achieved_occupancy_pct"] == pytest.approx(100 * 1765.97 / 3328, rel=1e-4)
    # What the per-level files make cheap: 11.2.9 VMEM Latency 1697.15 cycles, 11.2.10
    # SMEM Latency 362.52, 13.2.5 Instruction Fetch Latency 18.50; 12.2.2 LDS Latency
    # empty (no LDS instructions): missing here too.
    assert k["vmem_latency"] == pytest.approx(1697.15, rel=1e-5)
    assert k["smem_latency"] == pytest.approx(362.52, rel=1e-5)
    assert k["ifetch_latency"] == pytest.approx(18.50, rel=1e-3)
    assert math.isnan(k["lds_latency"])
    # Top Stats: 3 dispatches, Sum 52320 ns, Mean 17440 ns.
    assert k["calls"] == 3 and k["duration_total"] == pytest.approx(52320e-9, rel=1e-9)
    # Roofline bytes (roofline_calc.py, MI200 branch) per dispatch, the mean over the 3:
    # its "HBM Rd"/"HBM Wr" mem-chart entries are per-request; the byte sums are from its
    # formulas on pmc_perf.csv: TCC_EA_RDREQ/_32B and TCC_EA_WRREQ/_64B, TCP_TCC_*_REQ x 64,
    # TCP_TOTAL_CACHE_ACCESSES x 64.
    assert k["hbm_read_bytes"] == pytest.approx(8_389_525.33, rel=0.002)
    assert k["hbm_write_bytes"] == pytest.approx(6_682_816, rel=0.002)
    assert k["l2_bytes"] == pytest.approx(16_777_216, rel=0.002)
    assert k["l1_bytes"] == pytest.approx(33_554_432, rel=0.002)
    # Bandwidth as total bytes over total time (the roofline's hbm_data / totalDuration).
    assert k["hbm_bw"] == pytest.approx(3 * 15_072_341.33 / 52320e-9, rel=0.002)
    # The speed-of-light "L2-Fabric Read BW" 488.09 GB/s is AVG(bytes / duration) per
    # dispatch, another statistic: total/total is 481.05 GB/s here.
    assert k["hbm_read_bytes"] * 3 / k["duration_total"] == pytest.approx(481.05e9, rel=0.002)


def test_mi200_roofline_ceilings_against_rocprof_compute_3_0() -> None:
    peaks = read_peaks(profile("omniperf/rocprofiler-compute-vcopy-MI200/roofline.csv"))
    # "4. Roofline" table, devices 0-3: HBMBw 1388.93 1389.30 1389.02 1389.02 GB/s,
    # MFMABF16Flops 170483.16 170928.06 171150.41 171040.98 GFLOP/s.
    assert peaks.values["hbm_bw"] == pytest.approx(np.mean([1388.93, 1389.30, 1389.02, 1389.02]) * 1e9, abs=1e7)
    assert peaks.values["mfma_rate_bf16"] == pytest.approx(
        np.mean([170483.16, 170928.06, 171150.41, 171040.98]) * 1e9, abs=1e7)
    assert peaks.values["mfma_rate_int8"] == pytest.approx(
        np.mean([166402.27, 166923.81, 166970.84, 166994.86]) * 1e9, abs=1e7)
    details = {d.name: d.value for d in peaks.details}
    assert details["device 2 hbmBwHigh"] == pytest.approx(1389.63e9, abs=1e7)


def test_mi300x_vcopy_against_rocprof_compute_3_0() -> None:
    k = _kernel("rocprofiler-compute-vcopy-MI300X")
    # 2.1.15 Wavefront Occupancy: 456.70 of 9728.00 Wavefronts = 4.69 % (sysinfo: 304 CUs,
    # 32 waves per CU, 8 XCDs).
    assert k["achieved_occupancy_pct"] == pytest.approx(4.69, rel=0.02)
    # The analyzer prints "inf" for every bandwidth (2.1.21-2.1.23: the rocprofv2 backend
    # wrote timestamps as 8.1097E+14, so End - Start = 0): perfcheck says missing, with
    # the reader's warning about the lossy timestamps.
    assert math.isnan(k["duration"]) and math.isnan(k["hbm_bw"])
    # 11.2.9 VMEM Latency 1038.78, 11.2.10 SMEM Latency 4446.79, 13.2.5 Instruction
    # Fetch Latency 27.19 cycles (these need no time either).
    assert k["vmem_latency"] == pytest.approx(1038.78, rel=1e-5)
    assert k["smem_latency"] == pytest.approx(4446.79, rel=1e-5)
    assert k["ifetch_latency"] == pytest.approx(27.19, rel=1e-3)
    # Bytes do not need the time: bubble formula (roofline_calc.py, non-MI200 branch).
    assert k["hbm_bytes"] == pytest.approx(np.mean([16_792_512, 16_791_744, 16_791_424]), rel=0.002)


def test_mi350_vcopy_against_rocprof_compute_3_3() -> None:
    k = _kernel("rocm-systems-vcopy-MI350")
    # roofline_calc.py (3.3, every non-MI200 series, gfx950 included):
    # 128 TCC_BUBBLE + 32 TCC_EA0_RDREQ_32B + 64 (TCC_EA0_RDREQ - TCC_BUBBLE - 32B) + writes
    # = 12,588,373 B per dispatch; 2.1.24 "L2-Fabric Read BW" 230.07 GB/s is its read
    # part per dispatch (AVG of bytes / duration).
    assert k["hbm_bytes"] == pytest.approx(12_588_373, rel=0.002)
    assert k["hbm_read_bytes"] == pytest.approx(4_199_765.33, rel=0.002)
    # Top Stats: Sum 55545.75 ns over 3 dispatches.
    assert k["duration_total"] == pytest.approx(55545.75e-9, rel=1e-6)
    assert k["hbm_bw"] == pytest.approx(3 * 12_588_373.33 / 55545.75e-9, rel=0.002)
    # 2.1.17 Wavefront Occupancy is empty in the analyzer: the rocprofv3 backend's
    # SQ_LEVEL_WAVES.csv holds no accumulator. perfcheck leaves it missing too.
    assert math.isnan(k["achieved_occupancy_pct"]) if "achieved_occupancy_pct" in k else True
