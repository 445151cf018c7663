"""Nsight Systems SQLite exports on the real files in ../shared/profiles/nsys. Expected values
are read by hand from the databases (sqlite3 -readonly, queries quoted below)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import one_line_error, profile
from perfcheck.errors import InputError
from perfcheck.ingest import detect, read_profile
from perfcheck.ingest.nsys import NO_KERNELS

H200 = "nsys/nvidia-fuser-h200-nsys2025.1/report1.sqlite"
NO_CUDA = "nsys/jacc-jl-4xa100-nsys2026.1-no-cuda-trace/report1.sqlite"
NVJET = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN"


def test_h200_kernels():
    p = read_profile(profile(H200))
    src = p.source
    # META_DATA_EXPORT: EXPORT_PRODUCT_VERSION 2025.1.1.110, EXPORT_SCHEMA_VERSION 3.17.1;
    # TARGET_INFO_GPU: name "NVIDIA H200", computeMajor 9, computeMinor 0
    assert (src.format, src.tool, src.tool_version) == ("nsys-sqlite", "nsys", "2025.1.1.110 (export schema 3.17.1)")
    assert (src.device, src.arch) == ("NVIDIA H200", "sm_90")
    d = p.dispatches
    # SELECT count(*), sum(end-start) FROM CUPTI_ACTIVITY_KIND_KERNEL -> 18 | 10167602
    assert len(d) == 18 and d["kernel"].nunique() == 16
    assert d["duration"].sum() == pytest.approx(10167602e-9)
    # globalPid 282323165642752 >> 24 = 50556, the "pytest" process in PROCESSES
    assert set(d["pid"]) == {50556} and set(d["device_id"]) == {0} and set(d["stream_id"]) == {7}
    # start 8169071368, end 8171259120, registersPerThread 168, grid 2x66x1, block 384x1x1,
    # staticSharedMemory 0, dynamicSharedMemory 213204, localMemoryPerThread 0, correlationId 1473
    row = d.set_index("correlation_id").loc[1473]
    assert row["kernel"] == NVJET
    assert (row["start_ns"], row["end_ns"]) == (8169071368, 8171259120)
    assert row["duration"] == pytest.approx(2187752e-9)
    assert (row["registers"], row["lds_static"], row["lds_dynamic"], row["lds_per_workgroup"]) == (168, 0, 213204, 213204)
    assert (row["grid_x"], row["grid_y"], row["workgroups"], row["workgroup_size"], row["grid_size"]) == \
        (2 * 384, 66, 132, 384, 132 * 384)
    assert (row["scratch_per_thread"], row["wave_size"]) == (0, 32)
    # TARGET_INFO_GPU: memoryBandwidth 4916736000000 B/s, clockRate 1980000000 Hz (nominal, passed through)
    assert row["raw.device.memoryBandwidth"] == 4.916736e12 and row["raw.device.clockRate"] == 1.98e9
    # Names were ids into StringIds, written by NVIDIA's demangler: spelled the GNU way
    assert not any("(int)" in k or "<unnamed>" in k or "[lambda" in k for k in d["kernel"])
    assert "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul>>(int, T2, T3)" \
        in set(d["kernel"])


def test_h200_inspect_occupancy(cli):
    result = cli("inspect", "--json", profile(H200))
    assert result.code == 0, result.err
    kernels = {k["kernel"]: k for k in result.json()["kernels"]}
    nvjet = kernels[NVJET]["metrics"]
    # 168 registers x 384 threads = 64,512 of the SM's 65,536: one block, 12 of 64 warps
    assert nvjet["occupancy_pct"] == pytest.approx(18.75)
    assert kernels[NVJET]["labels"]["occupancy_limiter"] == "registers"
    assert result.json()["target"]["arch"] == "sm_90"


def test_report_without_cuda_trace_is_a_warning_not_damage(cli):
    path = profile(NO_CUDA)
    p = read_profile(path)
    # 2026.1.1.204, schema 3.24.14; no CUPTI_ACTIVITY_KIND_* tables at all (absent, not empty)
    assert p.source.tool_version == "2026.1.1.204 (export schema 3.24.14)"
    assert p.dispatches.empty and [o.what for o in p.oddities] == [NO_KERNELS]
    result = cli("inspect", path)
    assert result.code == 0
    assert "no kernel activity in this report (was it captured with CUDA tracing?)" in result.err


def test_opened_read_only(tmp_path: Path):
    path = profile(H200)
    # The shared copy is read-only on disk; opening it for writing would fail. A copy whose
    # directory cannot be written must read too (no journal or WAL file is created).
    copy = tmp_path / "ro" / "report1.sqlite"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    copy.chmod(0o444)
    copy.parent.chmod(0o555)
    try:
        assert len(read_profile(copy).dispatches) == 18
        assert sorted(p.name for p in copy.parent.iterdir()) == ["report1.sqlite"]
    finally:
        copy.parent.chmod(0o755)


def test_columns_selected_by_name(tmp_path: Path):
    """A schema without the newer columns (greenContextId, graphNodeId, ...) still reads."""
    copy = tmp_path / "old.sqlite"
    copy.write_bytes(profile(H200).read_bytes())
    with sqlite3.connect(copy) as connection:
        for column in ("greenContextId", "graphNodeId", "sharedMemoryLimitConfig", "localMemoryPerThread"):
            connection.execute(f"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN {column}")
    d = read_profile(copy).dispatches
    assert len(d) == 18 and "scratch_per_thread" not in d.columns and "raw.greenContextId" not in d.columns


def test_damaged_file_is_a_one_line_error(cli, tmp_path: Path):
    data = profile(H200).read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 3])
    assert detect(cut, "profile").name == "nsys-sqlite"
    line = one_line_error(cli("inspect", cut), cut)
    assert "no kernel activity" not in line
    with pytest.raises(InputError):
        read_profile(cut)


def test_empty_kernel_table_says_so(tmp_path: Path):
    copy = tmp_path / "empty.sqlite"
    copy.write_bytes(profile(H200).read_bytes())
    with sqlite3.connect(copy) as connection:
        connection.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    p = read_profile(copy)
    assert p.dispatches.empty
    assert [o.what for o in p.oddities] == ["CUPTI_ACTIVITY_KIND_KERNEL is empty: no kernel ran while CUDA was traced"]


@pytest.mark.parametrize("major", ["'x'", "8.5", "1e300"])
def test_a_damaged_compute_capability_is_no_architecture(tmp_path: Path, cli, major: str):
    """computeMajor 8.5 read as sm_80, 1e300 as a 300-digit sm_..., text as a bare ValueError."""
    copy = tmp_path / "cc.sqlite"
    copy.write_bytes(profile(H200).read_bytes())
    with sqlite3.connect(copy) as connection:
        connection.execute(f"UPDATE TARGET_INFO_GPU SET computeMajor = {major}")
    p = read_profile(copy)
    assert p.source.arch is None and p.source.device == "NVIDIA H200"
    assert any("no compute capability" in o.what for o in p.oddities)
    assert cli("inspect", copy).code == 0


def _schema_2x(tmp_path: Path, *, keep_meta: bool, drop: str | None = None) -> Path:
    """The H200 export turned into what nsys 2021-2022 wrote: schema 2.x metadata
    (or none), optionally without a kernel column the reader needs."""
    import shutil

    path = tmp_path / "report2x.sqlite"
    shutil.copy(profile(H200), path)
    con = sqlite3.connect(path)
    with con:
        if keep_meta:
            con.execute("UPDATE META_DATA_EXPORT SET value = '2.7.1' WHERE name = 'EXPORT_SCHEMA_VERSION'")
        else:
            con.execute("DROP TABLE META_DATA_EXPORT")
        if drop:
            con.execute(f"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN {drop}")
    con.close()
    return path


def test_schema_2x_export_is_read(tmp_path: Path) -> None:
    path = _schema_2x(tmp_path, keep_meta=False)
    assert detect(path, "profile").name == "nsys-sqlite"
    p = read_profile(path)
    assert len(p.dispatches) == 18  # the kernel and string tables are those of 3.x
    assert any("no META_DATA_EXPORT table" in o.what for o in p.oddities)


def test_schema_2x_without_a_needed_column_names_version_and_fix(tmp_path: Path, cli) -> None:
    path = _schema_2x(tmp_path, keep_meta=True, drop="globalPid")
    line = one_line_error(cli("inspect", path), path, "export schema 2.7.1")
    assert "nsys export --type sqlite" in line and "newer Nsight Systems" in line
