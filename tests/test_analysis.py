"""End-to-end: profiles -> per-kernel metrics through `perfcheck inspect --json`,
checked against values computed by hand from the same files."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import profile
from perfcheck.ingest import read_peaks, read_profile

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil" / "kernel_trace.csv"
VCOPY_MI200 = "omniperf/rocprofiler-compute-vcopy-MI200"
MIXBENCH_MI100 = "mixbench/pawsey-mulan-mi100/mixbench-log.txt"


def kernel(doc: dict, name: str) -> dict:
    matches = [k for k in doc["kernels"] if k["kernel"] == name]
    assert len(matches) == 1, [k["kernel"] for k in doc["kernels"]]
    return matches[0]


def ceiling(doc: dict, name: str) -> dict:
    return next(c for c in doc["ceilings"] if c["name"] == name)


def test_omniperf_vcopy_bandwidth_against_its_own_roofline(cli) -> None:
    workload = profile(VCOPY_MI200)
    doc = cli("inspect", workload, "--json").json()
    vcopy = kernel(doc, "vecCopy(double*, double*, double*, int, int)")
    metrics = vcopy["metrics"]
    # HBM bytes per dispatch from TCC_EA_RDREQ(_32B)/WRREQ(_64B) over the 16
    # channels (tests/test_counters.py checks each dispatch by hand).
    per_dispatch = [16_778_112, 14_218_112, 14_220_800]
    assert metrics["hbm_bytes"] == pytest.approx(sum(per_dispatch) / 3)
    durations = read_profile(workload).dispatches["duration"].tolist()
    assert metrics["hbm_bw"] == pytest.approx(sum(per_dispatch) / sum(durations))
    # The workload's own empirical ceiling: roofline.csv, mean HBM over its devices.
    hbm = ceiling(doc, "hbm_bw")
    assert hbm["kind"] == "empirical" and "roofline.csv" in hbm["source"]
    own = read_peaks(workload / "roofline.csv").values["hbm_bw"]
    assert hbm["value"] == pytest.approx(own)
    assert metrics["hbm_bw_pct"] == pytest.approx(100 * metrics["hbm_bw"] / own)
    # 256-thread workgroups, 8 VGPRs, 16 SGPRs, no LDS on gfx90a: 8 waves per SIMD,
    # the 32 wave slots of a CU are the limit.
    assert metrics["occupancy_pct"] == 100
    assert metrics["waves_per_cu"] == 32
    assert vcopy["labels"]["occupancy_limiter"] == "waves"
    assert doc["target"] == {"arch": "gfx90a", "device": None, "origin": "detected"}


def test_named_peaks_replace_the_workload_roofline(cli) -> None:
    doc = cli("inspect", profile(VCOPY_MI200), "--peaks", profile(MIXBENCH_MI100), "--json").json()
    hbm = ceiling(doc, "hbm_bw")
    assert hbm["value"] == pytest.approx(1075.46e9)
    assert "mixbench-log.txt" in hbm["source"]


def test_mi300x_vcopy_without_timing(cli) -> None:
    # Omniperf 2.0 wrote this workload's timestamps in E-notation: no duration can be
    # trusted, so bytes and occupancy are reported and bandwidth stays empty.
    result = cli("inspect", profile("omniperf/rocprofiler-compute-vcopy-MI300X"), "--json")
    doc = result.json()
    assert "E-notation" in result.err
    metrics = kernel(doc, "vecCopy(double*, double*, double*, int, int)")["metrics"]
    assert metrics["hbm_bytes"] is not None and metrics["hbm_bytes"] > 2 * 8 * 1048576 * 0.9
    assert metrics["hbm_bw"] is None and metrics["duration"] is None
    assert metrics["occupancy_pct"] == 100
    assert doc["target"]["device"] == "mi300x"
    hbm = ceiling(doc, "hbm_bw")
    assert hbm["kind"] == "theoretical" and hbm["value"] == pytest.approx(5.3e12)


def test_stencil_occupancy_follows_the_rules_not_the_seed(cli) -> None:
    # Seed 001 (MI100, 256-thread workgroups, 24 KiB LDS) says 25%; on gfx908 two
    # workgroups of 4 waves fit in 64 KiB of LDS: 8 of 40 wave slots = 20%
    # (arch-specs.md section 1.7, A10).
    doc = cli("inspect", STENCIL, "--arch", "mi100", "--json").json()
    eo = kernel(doc, "EOCloverFBCGPU")
    assert eo["metrics"]["occupancy_pct"] == pytest.approx(20.0)
    assert eo["metrics"]["waves_per_cu"] == 8
    assert eo["labels"]["occupancy_limiter"] == "lds"
    assert doc["target"] == {"arch": "gfx908", "device": "mi100", "origin": "given"}
    # No counters in a kernel trace: no bandwidth, and the device's theoretical ceilings.
    assert eo["metrics"].get("hbm_bw") is None
    assert ceiling(doc, "hbm_bw")["kind"] == "theoretical"


def test_seed_001_bandwidth_from_a_rocprof_results_file(cli, tmp_path: Path) -> None:
    """Seed 001: TOTAL_RW = FETCH_SIZE + WRITE_SIZE = 1.29009797 GB in 2.671374 ms is
    482.9 GB/s, 44.9% of the 1075.46 GB/s mixbench peak (read from the real log)."""
    total_kib = 1.29009797e9 / 1024  # FETCH_SIZE and WRITE_SIZE count KiB
    fetch, write = 1_000_000.0, total_kib - 1_000_000.0
    begin = 1_000_000_000
    end = begin + 2_671_374
    header = "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,fbar,sig,obj,FETCH_SIZE,WRITE_SIZE,DispatchNs,BeginNs,EndNs,CompleteNs"
    row = f'0,"EOCloverFBCGPU",0,0,0,1,1,1048576,256,24576,0,52,64,0,0x0,0x0,{fetch},{write},{begin - 1000},{begin},{end},{end + 1000}'
    results = tmp_path / "results.csv"
    results.write_text(header + "\n" + row + "\n")
    doc = cli("inspect", results, "--arch", "mi100", "--peaks", profile(MIXBENCH_MI100), "--json").json()
    metrics = kernel(doc, "EOCloverFBCGPU")["metrics"]
    assert metrics["hbm_bytes"] == pytest.approx(1.29009797e9)
    assert metrics["hbm_bw"] == pytest.approx(482.934e9, rel=1e-5)
    assert round(metrics["hbm_bw_pct"], 1) == 44.9
    hbm = ceiling(doc, "hbm_bw")
    assert hbm["kind"] == "empirical" and hbm["value"] == pytest.approx(1075.46e9)


def test_b200_occupancy_from_launch_resources(cli) -> None:
    path = profile("ncu/meinie0826-roofline-analysis/torch_sdpa_flash__mha_bf16_b16_ctx4k_p64.ncu.csv")
    doc = cli("inspect", path, "--json").json()
    assert doc["target"]["device"] == "b200"
    (flash,) = doc["kernels"]
    # ncu's own sm__maximum_warps_per_active_cycle_pct for these launches is 12.5.
    assert flash["metrics"]["occupancy_pct"] == pytest.approx(12.5)
    assert flash["metrics"]["warps_per_sm"] == 8


def test_machine_file_round_trip_through_the_cli(cli, tmp_path: Path) -> None:
    machine = tmp_path / "machines" / "mulan-mi100.toml"
    saved = cli("peaks", profile(MIXBENCH_MI100), "--save", machine, "--device", "mi100", "--json")
    assert saved.code == 0, saved.err
    assert machine.is_file()
    assert cli("peaks", machine, "--json").json()["peaks"]["hbm_bw"] == pytest.approx(1075.46e9)
    doc = cli("inspect", STENCIL, "--arch", "mi100", "--peaks", machine, "--json").json()
    hbm = ceiling(doc, "hbm_bw")
    assert hbm["kind"] == "empirical" and hbm["value"] == pytest.approx(1075.46e9)


def test_unknown_arch_is_a_usage_error(cli) -> None:
    result = cli("inspect", STENCIL, "--arch", "mi1000")
    assert result.code == 2
    assert "Traceback" not in result.err and "mi100" in result.err
