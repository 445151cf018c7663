"""rocprof v1 readers on the real files in ../shared/profiles (rocprof-v1/ and the
SQ_*.csv passes Omniperf keeps), plus malformed variants written into tmp_path.

Expected numbers are read off the files by hand (durations are EndNs - BeginNs)."""

from __future__ import annotations

import csv
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from conftest import profile
from conftest import one_line_error
from perfcheck.errors import InputError
from perfcheck.ingest import detect, read_profile, rocprof
from perfcheck.ingest.formats import Sniff
from perfcheck.ingest.rocprof import device_from_rocminfo, read_counter_groups

KOKKOS = "rocprof-v1/kokkos-gfx906"
GEMM = "rocprof-v1/batched_gemm-mi300x"
MI100_SQ = "rocprof-v1/omniperf-SQ-mi100/SQ_LEVEL_WAVES.csv"
MI200 = "omniperf/rocprofiler-compute-vcopy-MI200"
MI300X = "omniperf/rocprofiler-compute-vcopy-MI300X"
MI350 = "omniperf/rocm-systems-vcopy-MI350"
SQ_PASSES = ["SQ_IFETCH_LEVEL", "SQ_INST_LEVEL_LDS", "SQ_INST_LEVEL_SMEM", "SQ_INST_LEVEL_VMEM", "SQ_LEVEL_WAVES"]

GEMM_KERNEL = (
    "batched_matrix_multiplication(unsigned int, unsigned int, unsigned int, unsigned int, "
    "float const*, float const*, float*, unsigned int, unsigned int, unsigned int)"
)
ATOMIC_LOOP = (
    "void Kokkos::Experimental::Impl::hip_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<"
    "atomic_loop<Kokkos::Experimental::HIP>(Kokkos::Experimental::HIP const&, Kokkos::View<int**>, "
    "Kokkos::View<int*, Kokkos::MemoryTraits<4u> >)::{lambda(int)#1}, Kokkos::RangePolicy<Kokkos::Experimental::HIP>, "
    "Kokkos::Experimental::HIP>, 1024u, 1u>(Kokkos::Impl::ParallelFor<atomic_loop<Kokkos::Experimental::HIP>("
    "Kokkos::Experimental::HIP const&, Kokkos::View<int**>, Kokkos::View<int*, Kokkos::MemoryTraits<4u> >)::"
    "{lambda(int)#1}, Kokkos::RangePolicy<Kokkos::Experimental::HIP>, Kokkos::Experimental::HIP> const*)"
)
VIEW_VALUE = (
    "void Kokkos::Experimental::Impl::hip_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<"
    "Kokkos::Impl::ViewValueFunctor<Kokkos::Experimental::HIP, int, true>, Kokkos::RangePolicy<"
    "Kokkos::Experimental::HIP, Kokkos::IndexType<long> >, Kokkos::Experimental::HIP>, 1024u, 1u>("
    "Kokkos::Impl::ParallelFor<Kokkos::Impl::ViewValueFunctor<Kokkos::Experimental::HIP, int, true>, "
    "Kokkos::RangePolicy<Kokkos::Experimental::HIP, Kokkos::IndexType<long> >, Kokkos::Experimental::HIP> const*)"
)
LOCK_ATOMIC = "Kokkos::(anonymous namespace)::init_lock_array_kernel_atomic()"
UNKNOWN = "Unknown command type"




def by_kernel(table: pd.DataFrame, name: str) -> pd.Series:
    rows = table[table["kernel"] == name]
    assert len(rows) == 1, (name, len(rows))
    return rows.iloc[0]


# --------------------------------------------------------------------------- results CSV

def test_mi100_results_old_header() -> None:
    p = read_profile(profile(MI100_SQ))
    assert p.source.format == "rocprof-results" and p.source.tool == "rocprof"
    assert (p.source.device, p.source.arch) == (None, None)
    assert p.oddities == ()
    t = p.dispatches
    assert len(t) == 167
    first = t.iloc[0]
    assert first["kernel"] == "__amd_rocclr_fillBuffer"  # ".kd" removed centrally
    assert first["dispatch_id"] == 0 and first["pid"] == 852909 and first["tid"] == 852914
    assert first["grid_size"] == 33554432 and first["workgroup_size"] == 256
    assert first["vgpr"] == 8 and first["sgpr"] == 32
    assert first["lds_per_workgroup"] == 0 and first["scratch_per_thread"] == 0
    # 17-digit timestamps beyond float64's 2**53 survive exactly.
    assert first["start_ns"] == 12074903646084267 and first["end_ns"] == 12074903646407785
    assert first["duration"] == pytest.approx((12074903646407785 - 12074903646084267) / 1e9, rel=1e-12)
    assert first["raw.SQ_WAVES"] == 524288.0 and first["raw.SQ_WAVE_CYCLES"] == 367002422.0
    second = t.iloc[1]
    assert second["kernel"] == "void benchmark_func<short, 256, 8u, 0u>(short, short*)"
    assert second["grid_size"] == 32768 and second["vgpr"] == 24 and second["sgpr"] == 24
    assert second["duration"] == pytest.approx(6400e-9, rel=1e-12)
    # Handles, fbarrier and packet-side times are metadata, not counters.
    for dropped in ("raw.sig", "raw.obj", "raw.fbar", "raw.DispatchNs", "raw.CompleteNs", "raw.queue-index"):
        assert dropped not in t.columns


def test_mi200_renamed_header() -> None:
    t = read_profile(profile(f"{MI200}/SQ_LEVEL_WAVES.csv")).dispatches
    assert len(t) == 3
    first = t.iloc[0]
    assert first["kernel"] == "vecCopy(double*, double*, double*, int, int)"
    assert first["device_id"] == 2 and first["grid_size"] == 1048576 and first["workgroup_size"] == 256
    assert (first["vgpr"], first["agpr"], first["sgpr"], first["wave_size"]) == (8, 0, 16, 64)
    assert first["start_ns"] == 1411551767635712
    assert first["duration"] == pytest.approx(20480e-9, rel=1e-12)
    assert first["raw.SQ_WAVES"] == 16384.0 and first["raw.SQ_WAVE_CYCLES"] == 11075620.0


def test_mi300x_e_notation_timestamps_are_dropped_with_an_oddity() -> None:
    path = profile(f"{MI300X}/SQ_LEVEL_WAVES.csv")
    p = read_profile(path)
    t = p.dispatches
    assert len(t) == 3
    assert t["start_ns"].isna().all() and t["end_ns"].isna().all() and t["duration"].isna().all()
    [odd] = p.oddities
    assert "E-notation" in odd.what and odd.count == 3 and odd.path == str(path)
    first = t.iloc[0]
    assert first["kernel"].startswith("vecCopy(double*, double*, double*, int, int)")
    assert (first["vgpr"], first["agpr"], first["sgpr"], first["device_id"], first["correlation_id"]) == (4, 4, 16, 2, 0)
    assert first["raw.SQ_WAVE_CYCLES"] == 38712781.0 and first["raw.SQ_LEVEL_WAVES"] == 0.0


def test_mi350_rocprofv3_backend_columns() -> None:
    t = read_profile(profile(f"{MI350}/SQ_LEVEL_WAVES.csv")).dispatches
    assert len(t) == 3
    first = t.iloc[0]
    assert first["kernel"] == "vecCopy(double*, double*, double*, int, int)"
    assert first["correlation_id"] == 1 and first["pid"] == 15765 and first["queue_id"] == 1
    assert first["duration"] == pytest.approx((1248226695452112 - 1248226695430472) / 1e9, rel=1e-12)
    assert first["raw.SPI_CS0_BUSY"] == 146248.0 and first["raw.SQ_WAVE_CYCLES"] == 6406528.0
    assert "raw.TCC_EA0_ATOMIC_LEVEL[0]" in t.columns  # per-channel names verbatim
    assert "raw.Kernel_ID" not in t.columns


@pytest.mark.parametrize("workload", [MI200, MI300X, MI350])
@pytest.mark.parametrize("name", SQ_PASSES)
def test_every_omniperf_sq_pass_loads(workload: str, name: str) -> None:
    p = read_profile(profile(f"{workload}/{name}.csv"))
    assert p.source.format == "rocprof-results"
    assert len(p.dispatches) == 3
    assert (p.dispatches["grid_size"] == 1048576).all()
    assert f"raw.{name}" in p.dispatches.columns


def test_results_cli(cli) -> None:
    path = profile(MI100_SQ)
    result = cli("inspect", path, "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "rocprof-results"
    assert len(doc["kernels"]) == 167
    fill = next(k for k in doc["kernels"] if k["kernel"] == "__amd_rocclr_fillBuffer")
    assert fill["calls"] == 1
    assert fill["metrics"]["duration"] == pytest.approx(323518e-9, rel=1e-12)
    assert fill["metrics"]["vgpr"] == 8 and fill["metrics"]["grid_size"] == 33554432


def test_repeated_columns_and_db_style_layout(tmp_path: Path) -> None:
    """Counters repeated by a merge keep their suffixed names; repeated metadata is dropped."""
    path = tmp_path / "merged.csv"
    path.write_text(
        "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,sgpr,wave_size,"
        "sig,obj,SQ_WAVES,SQ_WAVES_1,wave_size_1,obj_1,DispatchNs,BeginNs,EndNs,CompleteNs\n"
        '0,"k(int, int) [clone .kd]",1,0,0,7,8,2048,64,1024,16,12,4,32,64,0x0,0x7f00,32,32,64,0x7f00,5,10,25,30\n'
    )
    t = read_profile(path).dispatches
    row = t.iloc[0]
    assert row["kernel"] == "k(int, int)"
    assert (row["vgpr"], row["agpr"], row["sgpr"], row["wave_size"]) == (12, 4, 32, 64)
    assert row["lds_per_workgroup"] == 1024 and row["scratch_per_thread"] == 16
    assert row["raw.SQ_WAVES"] == 32.0 and row["raw.SQ_WAVES_1"] == 32.0
    assert "raw.wave_size_1" not in t.columns and "raw.obj_1" not in t.columns
    assert row["duration"] == pytest.approx(15e-9)


# --------------------------------------------------------------------------- stats CSV

def test_mi300x_stats() -> None:
    p = read_profile(profile(f"{GEMM}/results.stats.csv"))
    assert p.level == "kernel"
    assert (p.source.format, p.source.device, p.source.arch) == ("rocprof-stats", "AMD Instinct MI300X", "gfx942")
    t = p.dispatches
    assert len(t) == 1
    row = t.iloc[0]
    assert row["kernel"] == GEMM_KERNEL  # quoted name with commas
    assert row["calls"] == 1
    assert row["duration_total"] == pytest.approx(331.634184678, rel=1e-12)
    assert row["duration_mean"] == pytest.approx(331.634184678, rel=1e-12)


def test_kokkos_stats_unquoted_names_with_commas() -> None:
    path = profile(f"{KOKKOS}/results.stats.csv")
    p = read_profile(path)
    assert (p.source.device, p.source.arch) == ("Vega 20", "gfx906")
    t = p.dispatches
    assert len(t) == 7  # 8 data rows, "Unknown command type" dropped
    assert UNKNOWN not in set(t["kernel"])
    atomic = by_kernel(t, ATOMIC_LOOP)
    assert atomic["calls"] == 1 and atomic["duration_total"] == pytest.approx(535519e-9, rel=1e-12)
    value = by_kernel(t, VIEW_VALUE)
    assert value["calls"] == 2
    assert value["duration_total"] == pytest.approx(161120e-9, rel=1e-12)
    assert value["duration_mean"] == pytest.approx(80560e-9, rel=1e-12)
    lock = by_kernel(t, LOCK_ATOMIC)
    assert lock["calls"] == 1 and lock["duration_total"] == pytest.approx(10720e-9, rel=1e-12)
    [odd] = p.oddities
    assert UNKNOWN in odd.what and "6 non-kernel" in odd.what


def test_stats_cli(cli) -> None:
    path = profile(f"{KOKKOS}/results.stats.csv")
    result = cli("inspect", path, "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["device"] == "Vega 20" and doc["profiles"][0]["arch"] == "gfx906"
    assert len(doc["kernels"]) == 7
    value = next(k for k in doc["kernels"] if k["kernel"] == VIEW_VALUE)
    assert value["calls"] == 2 and value["metrics"]["duration_total"] == pytest.approx(161120e-9, rel=1e-12)
    assert [w["message"] for w in doc["warnings"] if UNKNOWN in w["message"]]


@pytest.mark.parametrize("run", [KOKKOS, GEMM])
@pytest.mark.parametrize(
    "name, what",
    [("results.hip_stats.csv", "HIP API statistics"), ("results.copy_stats.csv", "memory copy statistics")],
)
def test_api_and_copy_stats_hold_no_kernels(cli, run: str, name: str, what: str) -> None:
    path = profile(f"{run}/{name}")
    p = read_profile(path)
    assert p.dispatches.empty
    assert [o.what for o in p.oddities] == [f"holds no kernel dispatches ({what})"]
    result = cli("inspect", path, "--json")
    assert result.code == 0 and result.json()["kernels"] == []
    assert "holds no kernel dispatches" in result.err


# --------------------------------------------------------------------------- JSON trace

def test_kokkos_json_gpu_lane() -> None:
    path = profile(f"{KOKKOS}/results.json")
    p = read_profile(path)
    assert (p.source.format, p.source.device, p.source.arch) == ("rocprof-json", "Vega 20", "gfx906")
    t = p.dispatches
    # 14 GPU0 events: 8 kernels (the stats count 1+1+1+2+1+1+1) and 6 barrier packets.
    assert len(t) == 8 and t["kernel"].nunique() == 7
    [odd] = p.oddities
    assert UNKNOWN in odd.what and odd.count == 6
    atomic = by_kernel(t, ATOMIC_LOOP)
    assert atomic["start_ns"] == 84119015881114 and atomic["end_ns"] == 84119016416633
    assert atomic["duration"] == pytest.approx(535519e-9, rel=1e-12)
    assert atomic["queue_id"] == 1 and atomic["device_id"] == 0 and atomic["pid"] == 216796
    assert (t[t["kernel"] == VIEW_VALUE]["duration"].sum()) == pytest.approx(161120e-9, rel=1e-12)


def test_json_without_sysinfo_takes_arch_from_other_data(tmp_path: Path) -> None:
    copy = tmp_path / "results.json"
    shutil.copy(profile(f"{KOKKOS}/results.json"), copy)
    source = read_profile(copy).source
    assert source.arch == "gfx906" and source.device is None  # otherData squeezes spaces out


def test_json_cli(cli) -> None:
    result = cli("inspect", profile(f"{KOKKOS}/results.json"), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["format"] == "rocprof-json"
    atomic = next(k for k in doc["kernels"] if k["kernel"] == ATOMIC_LOOP)
    assert atomic["calls"] == 1 and atomic["metrics"]["duration"] == pytest.approx(535519e-9, rel=1e-12)


def test_json_with_api_lanes_only(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(
        '{ "traceEvents":[{}\n,{"args":{"name":"CPU HIP API"},"ph":"M","pid":2,"name":"process_name"}\n'
        ',{"ph":"X","name":"hipMalloc","pid":"2","tid":"1","ts":"1","dur":"1",'
        '"args":{"BeginNs":"100","EndNs":"200","Name":"hipMalloc"}}\n]}\n'
    )
    p = read_profile(path)
    assert p.dispatches.empty
    assert [o.what for o in p.oddities] == ["holds no kernel dispatches (HIP/HSA API and copy trace only)"]


# --------------------------------------------------------------------------- SQLite db

def test_kokkos_db_reads_gpu_ops() -> None:
    p = read_profile(profile(f"{KOKKOS}/results.db"))
    assert (p.source.format, p.source.device, p.source.arch) == ("rocprof-db", "Vega 20", "gfx906")
    t = p.dispatches
    assert len(t) == 8
    assert [o.count for o in p.oddities if UNKNOWN in o.what] == [6]
    lock = by_kernel(t, LOCK_ATOMIC)
    assert lock["start_ns"] == 84118793119821 and lock["end_ns"] == 84118793130541
    assert lock["duration"] == pytest.approx(10720e-9, rel=1e-12)
    assert lock["pid"] == 216796 and lock["device_id"] == 0


def test_mi300x_db(cli) -> None:
    path = profile(f"{GEMM}/results.db")
    p = read_profile(path)
    assert (p.source.device, p.source.arch) == ("AMD Instinct MI300X", "gfx942")
    [row] = p.dispatches.to_dict("records")
    assert row["kernel"] == GEMM_KERNEL
    assert row["start_ns"] == 3497798443427445 and row["end_ns"] == 3498130077612123
    assert row["duration"] == pytest.approx(331.634184678, rel=1e-12)
    assert (row["device_id"], row["queue_id"], row["stream_id"], row["pid"]) == (2, 0, 1, 894)
    result = cli("inspect", path, "--json")
    assert result.code == 0, result.err
    [kernel] = result.json()["kernels"]
    assert kernel["kernel"] == GEMM_KERNEL and kernel["metrics"]["duration"] == pytest.approx(331.634184678)


def _make_db(path: Path, kernel_rows: list[tuple], ops_rows: list[tuple]) -> None:
    con = sqlite3.connect(path)
    con.execute('CREATE TABLE HIP ("BeginNs" INTEGER, "EndNs" INTEGER, "Name" TEXT)')
    con.execute('INSERT INTO HIP VALUES (1, 2, "hipMalloc")')
    con.execute('CREATE TABLE OPS ("BeginNs" INTEGER, "EndNs" INTEGER, "dev-id" INTEGER, "Name" TEXT)')
    con.executemany("INSERT INTO OPS VALUES (?, ?, ?, ?)", ops_rows)
    con.execute('CREATE TABLE A ("Index" INTEGER, "KernelName" TEXT, "grd" INTEGER, "wgr" INTEGER, '
                '"SQ_WAVES" INTEGER, "BeginNs" INTEGER, "EndNs" INTEGER)')
    con.executemany("INSERT INTO A VALUES (?, ?, ?, ?, ?, ?, ?)", kernel_rows)
    con.commit()
    con.close()


def test_db_prefers_filled_kernel_table(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    _make_db(path, [(0, "k [clone .kd]", 4096, 256, 64, 12074903646084267, 12074903646407785)],
             [(5, 9, 0, "k")])
    [row] = read_profile(path).dispatches.to_dict("records")
    assert row["kernel"] == "k" and row["grid_size"] == 4096 and row["raw.SQ_WAVES"] == 64.0
    assert row["start_ns"] == 12074903646084267 and row["duration"] == pytest.approx(323518e-9, rel=1e-12)


def test_db_with_no_kernels(cli, tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    _make_db(path, [], [(5, 5, 0, UNKNOWN)])
    p = read_profile(path)
    assert p.dispatches.empty
    assert any(o.what == "holds no kernel dispatches (tables with rows: HIP, OPS)" for o in p.oddities)
    result = cli("inspect", path)
    assert result.code == 0 and "no kernel dispatches" in result.out


# --------------------------------------------------------------------------- rocminfo

@pytest.mark.parametrize(
    "run, device, arch", [(KOKKOS, "Vega 20", "gfx906"), (GEMM, "AMD Instinct MI300X", "gfx942")]
)
def test_device_from_rocminfo(cli, run: str, device: str, arch: str) -> None:
    path = profile(f"{run}/results.sysinfo.txt")
    assert device_from_rocminfo(path) == (device, arch)
    result = cli("inspect", path, "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0] | {"path": None} == {
        "path": None, "format": "rocprof-sysinfo", "tool": "rocprof", "tool_version": None,
        "device": device, "arch": arch, "rank": None,
    }
    assert doc["kernels"] == []
    assert doc["warnings"][0]["message"] == "holds no kernel dispatches (rocminfo system information)"


def test_rocminfo_without_gpu_and_broken_sibling(tmp_path: Path) -> None:
    cpu_only = tmp_path / "cpu.sysinfo.txt"
    cpu_only.write_text("HSA Agents\n*******\nAgent 1\n*******\n  Name:   AMD EPYC\n  Device Type:   CPU\n")
    assert device_from_rocminfo(cpu_only) == (None, None)
    with pytest.raises(InputError, match="no 'Agent N' sections"):
        device_from_rocminfo(_write(tmp_path / "x.txt", "hello\n"))
    stats = tmp_path / "results.stats.csv"
    shutil.copy(profile(f"{GEMM}/results.stats.csv"), stats)
    _write(tmp_path / "results.sysinfo.txt", "CMD: rocminfo\nnothing here\n")
    p = read_profile(stats)
    assert p.source.device is None and len(p.dispatches) == 1
    assert any("device not read" in o.what for o in p.oddities)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- counter input files

@pytest.mark.parametrize(
    "relative, expected",
    [
        ("rocprof-v1/pawsey-emprism-cola-mi100/rocprof_input.txt",
         [["FETCH_SIZE", "WRITE_SIZE"], ["L2CacheHit"], ["MemUnitBusy"], ["MemUnitStalled"],
          ["WriteUnitStalled"], ["Wavefronts"], ["ALUStalledByLDS"]]),
        ("rocprof-v1/pawsey-s3d-setonix/rocprof-events.txt", [["FETCH_SIZE", "WRITE_SIZE"], ["L2CacheHit"]]),
        ("rocprof-v1/techercise-picongpu/rocprof_input_file.txt",
         [["FetchSize", "SQ_INSTS_VALU"], ["WriteSize", "SQ_INSTS_SALU"]]),
        ("rocprof-v1/omniperf-SQ-mi100/SQ_LEVEL_WAVES.txt",
         [["GRBM_COUNT", "GRBM_GUI_ACTIVE", "CPC_ME1_BUSY_FOR_PACKET_DECODE", "SQ_CYCLES", "SQ_WAVES",
           "SQ_WAVE_CYCLES", "SQ_BUSY_CYCLES", "SQ_LEVEL_WAVES", "SQ_ACCUM_PREV_HIRES"]]),
        (f"{MI200}/perfmon/SQ_INST_LEVEL_LDS.txt", [["SQ_INSTS_LDS", "SQ_INST_LEVEL_LDS", "SQ_ACCUM_PREV_HIRES"]]),
        (f"{MI200}/perfmon/timestamps.txt", [[]]),
        (f"{MI300X}/perfmon/pmc_perf_12.txt", [["SQC_DCACHE_REQ_READ_2", "SQC_DCACHE_REQ_READ_4"]]),
        (f"{MI350}/perfmon/pmc_perf_7.txt",
         [["SQC_DCACHE_REQ", "SQ_INSTS_SALU", "SQ_ACTIVE_INST_FLAT", "SQ_IFETCH", "SQ_ACTIVE_INST_SCA",
           "SQ_INSTS", "SQ_INSTS_VALU_MFMA_F32", "SQ_INSTS_VALU_ADD_F32"]]),
        ("omniperf/omniperf-v1-TCC-mi200/perfmon/pmc_perf.txt",
         [["SQ_CYCLES", "SQ_BUSY_CYCLES", "SQ_WAVES", "GRBM_COUNT", "GRBM_GUI_ACTIVE", "TCC_CYCLE_sum",
           "TCC_BUSY_sum", "TCC_PROBE_sum", "TCC_PROBE_ALL_sum"],
          ["TCC_NC_REQ_sum", "TCC_UC_REQ_sum", "TCC_CC_REQ_sum", "TCC_RW_REQ_sum"],
          ["TCC_REQ_sum", "TCC_STREAMING_REQ_sum", "TCC_HIT_sum", "TCC_MISS_sum"],
          ["TCC_READ_sum", "TCC_WRITE_sum", "TCC_ATOMIC_sum", "TCC_WRITEBACK_sum"],
          ["TCC_EA_WRREQ_sum", "TCC_EA_WRREQ_64B_sum", "TCC_EA_WR_UNCACHED_32B_sum", "TCC_EA_WRREQ_STALL_sum"],
          ["TCC_EA_WRREQ_IO_CREDIT_STALL_sum", "TCC_EA_WRREQ_GMI_CREDIT_STALL_sum",
           "TCC_EA_WRREQ_DRAM_CREDIT_STALL_sum", "TCC_TOO_MANY_EA_WRREQS_STALL_sum"],
          ["TCC_EA_ATOMIC_sum", "TCC_EA_RDREQ_sum", "TCC_EA_RDREQ_32B_sum", "TCC_EA_RD_UNCACHED_32B_sum"],
          ["TCC_EA_RDREQ_IO_CREDIT_STALL_sum", "TCC_EA_RDREQ_GMI_CREDIT_STALL_sum",
           "TCC_EA_RDREQ_DRAM_CREDIT_STALL_sum", "TCC_TAG_STALL_sum"],
          ["TCC_NORMAL_WRITEBACK_sum", "TCC_ALL_TC_OP_WB_WRITEBACK_sum", "TCC_NORMAL_EVICT_sum",
           "TCC_ALL_TC_OP_INV_EVICT_sum"],
          ["TCC_EA_RDREQ_DRAM_sum", "TCC_EA_WRREQ_DRAM_sum", "TCC_EA_RDREQ_LEVEL_sum", "TCC_EA_WRREQ_LEVEL_sum"],
          ["TCC_EA_ATOMIC_LEVEL_sum"]]),
    ],
)
def test_counter_groups(relative: str, expected: list[list[str]]) -> None:
    assert read_counter_groups(profile(relative)) == expected


@pytest.mark.parametrize("workload", [MI200, MI300X])
def test_counter_groups_match_the_passes_they_produced(workload: str) -> None:
    """Every perfmon/*.txt parses; each SQ_*.txt names exactly the counters its SQ_*.csv holds."""
    perfmon = profile(f"{workload}/perfmon")
    for txt in sorted(perfmon.glob("*.txt")):
        groups = read_counter_groups(txt)
        assert len(groups) == 1, txt
        csv = perfmon.parent / f"{txt.stem}.csv"
        if txt.stem.startswith("SQ_"):
            columns = read_profile(csv).dispatches.columns
            assert [f"raw.{c}" for c in groups[0]] == [c for c in columns if c.startswith("raw.")], txt
    assert len(read_counter_groups(perfmon / "pmc_perf_13.txt")[0]) == (128 if workload == MI200 else 64)


def test_counter_groups_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no 'pmc:' line") as info:
        read_counter_groups(_write(tmp_path / "in.txt", "# only a comment\nrange: 1:3\ngpu: 0\n"))
    assert str(tmp_path / "in.txt") in str(info.value)
    with pytest.raises(InputError, match=r"in2.txt:2: unexpected line 'SQ_WAVES'"):
        read_counter_groups(_write(tmp_path / "in2.txt", "pmc: GRBM_COUNT\nSQ_WAVES\n"))
    (tmp_path / "bin.txt").write_bytes(b"pmc\x00\x01\x02")
    with pytest.raises(InputError, match="binary"):
        read_counter_groups(tmp_path / "bin.txt")


# --------------------------------------------------------------------------- sniffing

@pytest.mark.parametrize(
    "relative",
    [
        "rocprofv3/rocprofiler-sdk-docs-2024/kernel_trace.csv",
        "rocprofv3/rocprofiler-sdk-docs-2025/hip_api_stats.csv",
        "rocprofv3/batched_gemm-mi300x-rocpd/15_results.db",
        "omniperf/omniperf-v1-TCC-mi200/pmc_perf.csv",
        f"{MI200}/pmc_perf.csv",
        f"{MI350}/pmc_perf_0.csv",
        f"{MI350}/sysinfo.csv",
        "rocprof-v1/pawsey-s3d-setonix/rocprof-events.txt",
    ],
)
def test_sniffers_leave_other_files_alone(relative: str) -> None:
    sniff = Sniff(profile(relative))
    assert [f.name for f in rocprof.FORMATS if f.sniff(sniff)] == []


def test_omniperf_timing_pass_is_plain_rocprof(tmp_path: Path) -> None:
    """timestamps.csv is rocprof's timing pass; a pmc_perf.csv is Omniperf's even on its own."""
    p = read_profile(profile("omniperf/omniperf-v1-TCC-mi200/timestamps.csv"))
    assert p.source.format == "rocprof-results" and len(p.dispatches) == 167
    first = p.dispatches.iloc[0]
    assert first["kernel"] == "__amd_rocclr_fillBufferAligned" and first["vgpr"] == 4 and first["sgpr"] == 32
    assert first["duration"] == pytest.approx((16307555571270 - 16307555332228) / 1e9, rel=1e-12)
    copy = tmp_path / "pmc_perf.csv"
    shutil.copy(profile("omniperf/omniperf-v1-TCC-mi200/pmc_perf.csv"), copy)
    assert [f.name for f in rocprof.FORMATS if f.sniff(Sniff(copy))] == []


# --------------------------------------------------------------------------- malformed input

def _cut(source: Path, target: Path, drop_bytes: int) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[:-drop_bytes])
    return target


def test_results_truncated_last_row(cli, tmp_path: Path) -> None:
    path = _cut(profile(MI100_SQ), tmp_path / "SQ_LEVEL_WAVES.csv", 10)
    line = one_line_error(cli("inspect", path), path)
    assert f"{path}:168:" in line and "cut off" in line


def test_results_short_row(cli, tmp_path: Path) -> None:
    lines = profile(MI100_SQ).read_text().splitlines()
    path = _write(tmp_path / "results.csv", "\n".join([lines[0], lines[1], lines[2].rsplit(",", 3)[0]]) + "\n")
    line = one_line_error(cli("inspect", path), path)
    assert f"{path}:3:" in line and "row has 26 fields, the header 29" in line


def test_results_bad_number_is_located(cli, tmp_path: Path) -> None:
    lines = profile(MI100_SQ).read_text().splitlines()
    bad_counter = lines[2].replace(",219536,512,", ",219536,5l2,", 1)
    path = _write(tmp_path / "results.csv", "\n".join([lines[0], lines[1], bad_counter]) + "\n")
    with pytest.raises(InputError, match=r"results.csv:3: column 'SQ_WAVES': '5l2' is not a number"):
        read_profile(path)
    bad_grid = lines[2].replace(",32768,256,", ",32k,256,", 1)
    path = _write(tmp_path / "results.csv", "\n".join([lines[0], lines[1], bad_grid]) + "\n")
    line = one_line_error(cli("inspect", path), path)
    assert f"{path}:3:" in line and "column 'grd': '32k' is not a number" in line


def test_results_bad_timestamp_is_located(cli, tmp_path: Path) -> None:
    path = _write(tmp_path / "results.csv", 'Index,KernelName,grd,BeginNs,EndNs\n0,"k",64,10,20\n1,"k",64,3O,40\n')
    line = one_line_error(cli("inspect", path), path)
    assert f"{path}:3:" in line and "'BeginNs'" in line and "'3O'" in line


def test_results_wrong_delimiter(cli, tmp_path: Path) -> None:
    text = profile(MI100_SQ).read_text().splitlines()[:3]
    path = _write(tmp_path / "results.csv", "\n".join(l.replace(",", ";") for l in text) + "\n")
    line = one_line_error(cli("inspect", path), path)
    assert "not a profile format" in line
    line = one_line_error(cli("inspect", "--format", "rocprof-results", path), path)
    assert "'KernelName'" in line and "missing" in line


def test_results_missing_required_column(cli, tmp_path: Path) -> None:
    path = _write(tmp_path / "results.csv", "Index,gpu-id,grd,BeginNs,EndNs\n0,0,64,10,20\n")
    line = one_line_error(cli("inspect", "--format", "rocprof-results", path), path)
    assert "required column 'KernelName' missing" in line


@pytest.mark.parametrize("fmt", ["rocprof-results", "rocprof-stats", "rocprof-json", "rocprof-db", "rocprof-sysinfo"])
def test_empty_and_binary_files(cli, tmp_path: Path, fmt: str) -> None:
    empty = _write(tmp_path / "results.csv", "")
    assert "empty" in one_line_error(cli("inspect", empty), empty)
    line = one_line_error(cli("inspect", "--format", fmt, empty), empty)
    assert "empty" in line or "not an SQLite database" in line or "no 'Agent N'" in line
    junk = tmp_path / "junk.csv"
    junk.write_bytes(bytes(range(256)) * 4)
    one_line_error(cli("inspect", junk), junk)
    line = one_line_error(cli("inspect", "--format", fmt, junk), junk)
    assert "binary" in line or "not an SQLite database" in line


def test_stats_truncated(cli, tmp_path: Path) -> None:
    path = _cut(profile(f"{KOKKOS}/results.stats.csv"), tmp_path / "results.stats.csv", 5)
    line = one_line_error(cli("inspect", path), path)
    assert f"{path}:9:" in line and "cut off" in line


def test_stats_short_row_and_bad_number(cli, tmp_path: Path) -> None:
    header = '"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n'
    path = _write(tmp_path / "results.stats.csv", header + "a(int, int),1,10,10,50.0\nb,1,10\n")
    line = one_line_error(cli("inspect", path), path)
    assert f"{path}:3:" in line and "fewer than 5 fields" in line
    path = _write(tmp_path / "results.stats.csv", header + "a(int, int),1,10,10,50.0\nb(int, int),one,10,10,50.0\n")
    line = one_line_error(cli("inspect", path), path)
    assert f"{path}:3:" in line and "'Calls'" in line and "'one' is not a number" in line


def test_stats_wrong_delimiter(cli, tmp_path: Path) -> None:
    path = _write(tmp_path / "results.stats.csv", "Name;Calls;TotalDurationNs;AverageNs;Percentage\na;1;10;10;100\n")
    one_line_error(cli("inspect", path), path)
    line = one_line_error(cli("inspect", "--format", "rocprof-stats", path), path)
    assert "missing" in line and "'Calls'" in line


def test_json_truncated(cli, tmp_path: Path) -> None:
    path = _cut(profile(f"{KOKKOS}/results.json"), tmp_path / "results.json", 60000)
    line = one_line_error(cli("inspect", path), path)
    assert "malformed JSON" in line and f"{path}:" in line


def test_json_without_trace_events(cli, tmp_path: Path) -> None:
    path = _write(tmp_path / "trace.json", '{"otherData": {}}\n')
    line = one_line_error(cli("inspect", "--format", "rocprof-json", path), path)
    assert "no 'traceEvents' list" in line


def test_db_truncated_or_garbage(cli, tmp_path: Path) -> None:
    cut = _cut(profile(f"{KOKKOS}/results.db"), tmp_path / "results.db", 30000)
    line = one_line_error(cli("inspect", "--format", "rocprof-db", cut), cut)
    assert "malformed" in line
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"SQLite format 3\x00" + b"garbage" * 20)
    one_line_error(cli("inspect", garbage), garbage)
    line = one_line_error(cli("inspect", "--format", "rocprof-db", garbage), garbage)
    assert "cannot read the rocprof database" in line


def test_sysinfo_not_rocminfo(cli, tmp_path: Path) -> None:
    path = _write(tmp_path / "results.sysinfo.txt", "CMD: rocminfo\nROCk module is NOT loaded\n")
    line = one_line_error(cli("inspect", "--format", "rocprof-sysinfo", path), path)
    assert "no 'Agent N' sections" in line


# --------------------------------------------------------------------------- an output directory as one profile


def test_output_directory_reads_as_one_profile(cli):
    kokkos = profile("rocprof-v1/kokkos-gfx906")
    p = read_profile(kokkos)
    # results.db, results.json and results.stats.csv hold the same 8 dispatches; the database is read
    assert (p.source.format, Path(p.source.path).name, p.source.arch) == ("rocprof-db", "results.db", "gfx906")
    assert p.level == "dispatch" and len(p.dispatches) == 8
    assert p.dispatches["duration"].sum() == pytest.approx(read_profile(kokkos / "results.db").dispatches["duration"].sum())
    gemm = read_profile(profile("rocprof-v1/batched_gemm-mi300x"))
    assert (gemm.source.device, len(gemm.dispatches)) == ("AMD Instinct MI300X", 1)
    # Omniperf's kept pass CSV in a folder of its own: the per-dispatch CSV (167 rows, counters)
    sq = read_profile(profile("rocprof-v1/omniperf-SQ-mi100"))
    assert sq.source.format == "rocprof-results" and len(sq.dispatches) == 167 and "raw.SQ_WAVES" in sq.dispatches
    result = cli("inspect", kokkos)
    assert result.code == 0 and "results.db: rocprof-db" in result.out


def test_output_directory_with_two_runs_is_a_one_line_error(cli, tmp_path):
    source = profile("rocprof-v1/omniperf-SQ-mi100/SQ_LEVEL_WAVES.csv")
    for name in ("a.csv", "b.csv"):
        (tmp_path / name).write_bytes(source.read_bytes())
    one_line_error(cli("inspect", tmp_path), tmp_path, "holds 2 rocprof runs (a.csv, b.csv)")
    # a folder with only an input file is not a profile
    assert cli("inspect", profile("rocprof-v1/pawsey-s3d-setonix")).code == 2


def test_barrier_and_copy_packets_are_not_kernels_in_any_amd_format(tmp_path) -> None:
    # rocprofv3 kernel trace and rocprof v1 results: a "<barrier packet>" row (what
    # rocprof lists for the AQL barriers HIP inserts) and a copy operation are
    # dropped with a warning and a count; the kernels are read as before.
    v3 = profile("rocprofv3/rocprofiler-sdk-docs-2025/kernel_trace.csv").read_text().splitlines(keepends=True)
    row = next(csv.reader([v3[1]]))

    def line(name: str) -> str:
        return ",".join(f'"{v}"' if i in (0, 1, 7) else v for i, v in enumerate([*row[:7], name, *row[8:]])) + "\n"

    barrier, copy = line("<barrier packet>"), line("CopyHostToDevice")
    path = tmp_path / "kernel_trace.csv"
    path.write_text("".join([v3[0], barrier, *v3[1:], copy]))
    profile_ = read_profile(path)
    assert len(profile_.dispatches) == len(v3) - 1
    assert not profile_.dispatches["kernel"].str.contains("packet|Copy").any()
    assert [str(o) for o in profile_.oddities if "not kernels" in o.what] == [
        f"{path}: GPU packets that are not kernels dropped ('<barrier packet>', 'CopyHostToDevice') (2 rows)"]

    v1 = profile("rocprof-v1/omniperf-SQ-mi100/SQ_LEVEL_WAVES.csv").read_text().splitlines(keepends=True)
    row = v1[1].split(",")
    path = tmp_path / "results.csv"
    path.write_text("".join([v1[0], *v1[1:], ",".join([str(len(v1) - 1), '"<barrier packet>"', *row[2:]])]))
    profile_ = read_profile(path)
    assert len(profile_.dispatches) == len(v1) - 1
    assert any("'<barrier packet>'" in o.what for o in profile_.oddities)


def test_results_db_with_only_a_kern_table_is_sniffed(tmp_path: Path) -> None:
    # `rocprof --stats` without API tracing: results.db holds the kernel table alone
    # (KERN, results.csv's columns). Here filled with a real results.csv's rows.
    csv_path = profile("rocprof-v1/omniperf-SQ-mi100/SQ_LEVEL_WAVES.csv")
    rows = pd.read_csv(csv_path, dtype=str)
    path = tmp_path / "results.db"
    with sqlite3.connect(path) as con:
        rows.to_sql("KERN", con, index=False)
    con.close()
    assert detect(path, "profile").name == "rocprof-db"
    from_db, from_csv = read_profile(path).dispatches, read_profile(csv_path).dispatches
    assert len(from_db) == len(from_csv) == len(rows)
    assert from_db["kernel"].tolist() == from_csv["kernel"].tolist()
    assert from_db["duration"].tolist() == from_csv["duration"].tolist()
