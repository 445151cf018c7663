"""The timeline readers (kernels, copies, memsets, ranges) on the real traces in
../shared/profiles; expected values read by hand from the files' own events (quoted)
or computed by plain SQL over the same tables (what `nsys stats` nvtx_sum and
cuda_gpu_mem_size_sum add up)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import profile
from perfcheck.errors import InputError, UsageError
from perfcheck.ingest import read_profile
from perfcheck.ingest.timeline import ACTIVITY_COLUMNS, RANGE_COLUMNS, read_timeline

A100 = "kineto/hta-critical-path-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz"
MI250 = "kineto/hta-amd-mi250-rocm6.2-minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
H100 = "kineto/pytorch-kineto-unittest-h100-sync-fix-pair/before_fix_trace.json"
FUSER = "nsys/nvidia-fuser-h200-nsys2025.1/report1.sqlite"
NO_CUDA = "nsys/jacc-jl-4xa100-nsys2026.1-no-cuda-trace/report1.sqlite"


def test_a100_kineto_copies_memsets_kernels():
    t = read_timeline(profile(A100))
    a = t.activities
    assert tuple(a.columns) == ACTIVITY_COLUMNS and tuple(t.ranges.columns) == RANGE_COLUMNS
    assert t.sources[0].rank == 0  # distributedInfo.rank
    assert a["kind"].value_counts().to_dict() == {"kernel": 79, "memcpy": 16, "memset": 3}
    assert set(a["rank"]) == {0} and set(a["device_id"]) == {0}
    # {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 1695835572943613, "dur": 12,
    #  "args": {"device": 0, "stream": 7, "bytes": 92928, ...}}
    first = a[a["kind"] == "memcpy"].sort_values("start_ns").iloc[0]
    assert (first["direction"], first["bytes"], first["stream_id"]) == ("H2D", 92928, 7)
    assert (first["start_ns"], first["end_ns"]) == (1695835572943613000, 1695835572943625000)
    assert not a["comm"].any()
    # 41 cuda_sync events are host waits, not device activity
    assert len(a) == 79 + 16 + 3


def test_mi250_kineto_rocm_copies_without_bytes_and_gpu_ranges():
    t = read_timeline(profile(MI250))
    a = t.activities
    copies = a[a["kind"] == "memcpy"]
    # roctracer: {"name": "Memcpy HtoD (Host -> Device)", "args": {"device": 2, "stream": 0, "kind": "HtoD"}}: no bytes
    assert list(copies["direction"]) == ["H2D", "H2D"] and copies["bytes"].isna().all()
    assert set(a["device_id"]) == {2}
    r = t.ranges
    # user_annotation ProfilerStep#1 on the host; its gpu_user_annotation on device 2 (pid 2, tid 0):
    # "ts": 4203669603454.205, "dur": 1031.368 (µs with ns decimals)
    step = r[(r["group"] == "ProfilerStep") & (r["on"] == "device")].iloc[0]
    assert step["name"] == "ProfilerStep#1" and step["device_id"] == 2
    assert step["end_ns"] - step["start_ns"] == 1031368
    assert set(r.loc[r["on"] == "host", "group"]) == {"ProfilerStep", "Optimizer.step#SGD.step"}


def test_nsys_copy_bytes_and_nvtx_totals_equal_plain_sql():
    path = profile(FUSER)
    t = read_timeline(path)
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
        by_kind = dict(db.execute("SELECT copyKind, SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"))
        nvtx = dict(db.execute("SELECT text, SUM(end - start) FROM NVTX_EVENTS WHERE end IS NOT NULL "
                               "AND eventType = 59 GROUP BY 1"))
        kernels, = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        sets, = db.execute("SELECT SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchone()
    a = t.activities
    copies = a[a["kind"] == "memcpy"].groupby("direction")["bytes"].sum().to_dict()
    assert copies == {"H2D": by_kind[1], "D2D": by_kind[8]}  # ENUM_CUDA_MEMCPY_OPER 1 HtoD, 8 DtoD
    assert a.loc[a["kind"] == "memset", "bytes"].sum() == sets
    assert (a["kind"] == "kernel").sum() == kernels
    r = t.ranges
    assert len(r) == 13513  # the count of NVTX ranges in this export
    totals = (r["end_ns"] - r["start_ns"]).groupby(r["name"]).sum().to_dict()
    assert totals == nvtx


def test_nsys_without_cuda_trace_is_an_empty_timeline_with_a_warning():
    t = read_timeline(profile(NO_CUDA))
    assert t.activities.empty and len(t.oddities) == 1 and "CUDA tracing" in t.oddities[0].what


def test_h100_kineto_single_kernel():
    t = read_timeline(profile(H100))
    assert list(t.activities["kind"]) == ["kernel"] and t.ranges.empty


def test_several_ranks_concatenate(tmp_path: Path):
    paths = []
    for rank in (0, 1):
        doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank}, "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "ts": 10, "dur": 5,
             "args": {"device": rank, "stream": 7}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 12, "dur": 5, "args": {"device": rank, "stream": 8}}]}
        paths.append(tmp_path / f"r{rank}.json")
        paths[-1].write_text(json.dumps(doc))
    t = read_timeline(paths)
    a = t.activities
    assert list(a["rank"]) == [0, 0, 1, 1] and list(a["comm"]) == [True, False, True, False]


def test_profile_without_a_timeline_reader_is_a_usage_error():
    with pytest.raises(UsageError, match="timelines come from: kineto, nsys-sqlite"):
        read_timeline(profile("nvprof/leimingyu-magus/matrixMul_trace.csv"))


def test_malformed_event_is_a_warning_not_a_traceback(tmp_path: Path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 1, "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 3, "dur": -1, "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": 1, "args": {"device": 0, "stream": 7}}]}))
    t = read_timeline(path)
    assert len(t.activities) == 1 and t.oddities[0].count == 2


def test_cut_trace_is_a_located_error(tmp_path: Path):
    path = tmp_path / "t.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "kernel"')
    with pytest.raises(InputError, match="t.json"):
        read_timeline(path)


def test_kernel_path_reads_no_timeline_tables(monkeypatch: pytest.MonkeyPatch):
    """read_profile never calls the timeline readers (the kernel path stays as fast)."""
    import perfcheck.ingest.timeline_kineto as tk

    def boom(path: Path) -> None:
        raise AssertionError("timeline read on the kernel path")

    monkeypatch.setattr(tk, "read", boom)
    assert len(read_profile(profile(A100)).dispatches) == 79


V3_2025 = "rocprofv3/rocprofiler-sdk-docs-2025"
V3_2024 = "rocprofv3/rocprofiler-sdk-docs-2024"


def test_rocprofv3_kernel_and_copy_traces():
    kernels = read_timeline(profile(f"{V3_2025}/kernel_trace.csv")).activities
    # "KERNEL_DISPATCH","Agent 4",1,1,834304,1,10,"void addition_kernel<float>(...)",1,1550151853029637,1550151853042437
    first = kernels.iloc[0]
    assert (first["kind"], first["device_id"], first["stream_id"]) == ("kernel", 4, 1)
    assert (first["start_ns"], first["end_ns"]) == (1550151853029637, 1550151853042437)
    copies = read_timeline(profile(f"{V3_2025}/memory_copy_trace.csv")).activities
    # H2D from "Agent 0" to "Agent 4", D2H from "Agent 4" to "Agent 0": the GPU is agent 4 for both
    assert list(copies["direction"]) == ["H2D", "H2D", "D2H", "D2H"] and set(copies["device_id"]) == {4}
    assert copies["bytes"].isna().all()  # the trace records no sizes
    old = read_timeline(profile(f"{V3_2024}/kernel_trace.csv")).activities  # integer agents, no Stream_Id
    assert set(old["device_id"]) == {1} and set(old["stream_id"]) == {1, 2, 3, 4}  # Queue_Id


def test_files_on_different_clocks_are_refused():
    """The documentation's kernel and copy traces come from different runs (their
    timestamps lie 5.7 days apart): one span across them would be meaningless."""
    with pytest.raises(InputError, match="not the same run's clock"):
        read_timeline([profile(f"{V3_2025}/kernel_trace.csv"), profile(f"{V3_2025}/memory_copy_trace.csv")])


def test_rocpd_kernels_against_its_own_kernels_view():
    path = profile("rocprofv3/batched_gemm-mi300x-rocpd/15_results.db")
    t = read_timeline(path)
    a = t.activities
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
        view = db.execute("SELECT name, start, end, agent_type_index FROM kernels ORDER BY start").fetchall()
        copies, = db.execute("SELECT COUNT(*) FROM memory_copies").fetchone()
    assert copies == 0 and (a["kind"] == "kernel").all() and t.ranges.empty  # the run traced no copies or markers
    ours = a.sort_values("start_ns")
    assert list(zip(ours["name"], ours["start_ns"], ours["end_ns"], ours["device_id"])) == view
    assert ours["end_ns"].max() - ours["start_ns"].min() == 26213329  # 127395734518028 - 127395708304699 ns


def test_rocpd_copy_directions(tmp_path: Path):
    """A database written here with rocpd's column names (the shared run traced no
    copies): the direction from the agents' types, the device at the GPU end."""
    path = tmp_path / "results.db"
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE rocpd_info_agent (id, guid, type, type_index);
            INSERT INTO rocpd_info_agent VALUES (0, 'g', 'CPU', 0), (2, 'g', 'GPU', 0), (3, 'g', 'GPU', 1);
            CREATE TABLE rocpd_kernel_dispatch (start, "end", agent_id, stream_id, kernel_id, guid);
            CREATE TABLE rocpd_info_kernel_symbol (id, guid, display_name);
            CREATE TABLE rocpd_memory_copy (start, "end", size, stream_id, src_agent_id, dst_agent_id, guid);
            INSERT INTO rocpd_memory_copy VALUES (0, 10, 100, 1, 0, 3, 'g'), (10, 20, 200, 1, 3, 0, 'g'),
                                                 (20, 30, 300, 1, 2, 2, 'g'), (30, 40, 400, 1, 2, 3, 'g');
            CREATE TABLE rocpd_region (start, "end", tid, name_id, event_id, guid);
            INSERT INTO rocpd_region VALUES (0, 40, 7, 1, 1, 'g'), (5, 6, 7, 2, 2, 'g');
            CREATE TABLE rocpd_event (id, guid, category_id);
            INSERT INTO rocpd_event VALUES (1, 'g', 10), (2, 'g', 11);
            CREATE TABLE rocpd_string (id, guid, string);
            INSERT INTO rocpd_string VALUES (1, 'g', 'step'), (2, 'g', 'hipMemcpy'), (10, 'g', 'MARKER_CORE_API'),
                                            (11, 'g', 'HIP_RUNTIME_API');
            CREATE TABLE rocpd_metadata (tag, value);
        """)
    t = read_timeline(path, format="rocpd")
    a = t.activities
    assert list(zip(a["direction"], a["device_id"], a["bytes"])) == [("H2D", 1, 100), ("D2H", 1, 200),
                                                                      ("D2D", 0, 300), ("P2P", 1, 400)]
    assert list(t.ranges["name"]) == ["step"]  # the MARKER region; the HIP API call is no range


def test_rocprof_v1_database_copies_fills_and_roctx():
    path = profile("rocprof-v1/kokkos-gfx906/results.db")
    t = read_timeline(path)
    a = t.activities
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
        by_name = dict(db.execute('SELECT Name, COUNT(*) FROM "COPY" GROUP BY 1'))
        kernels, = db.execute("SELECT COUNT(*) FROM OPS WHERE Name != 'Unknown command type'").fetchone()
        marks = db.execute("SELECT Name, EndNs - BeginNs FROM rocTX ORDER BY BeginNs").fetchall()
    assert by_name == {"CopyDeviceToHost": 14, "CopyHostToDevice": 10, "FillBuffer": 6}
    assert a["kind"].value_counts().to_dict() == {"memcpy": 24, "kernel": kernels, "memset": 6}
    assert list(a.loc[a["kind"] == "memcpy", "direction"].value_counts().sort_index().items()) == [("D2H", 14),
                                                                                                 ("H2D", 10)]
    assert t.oddities[0].what.startswith("'Unknown command type' GPU packets left out")
    r = t.ranges.sort_values("start_ns")
    # rocTX names are stored quoted: "Kokkos::View::initialization [V]"
    assert list(zip(r["name"], r["end_ns"] - r["start_ns"])) == [(n.strip('"'), d) for n, d in marks]


def _nsys_copy(tmp_path: Path, name: str, *sql: str) -> Path:
    """A copy of the real FUSER export, with ``sql`` run on it (an MPI rank table, a
    launcher's environment): what nsys writes under mpirun."""
    import shutil

    path = tmp_path / name
    shutil.copyfile(profile(FUSER), path)
    path.chmod(0o644)
    with sqlite3.connect(path) as db:
        for statement in sql:
            db.execute(statement)
    return path


def test_nsys_rank_from_the_exports_own_tables(tmp_path: Path):
    # the real export ran alone: no MPI_RANKS, no rank variable in DeviceEnvironment
    assert read_timeline(profile(FUSER)).sources[0].rank is None
    env = ("UPDATE TARGET_INFO_SYSTEM_ENV SET value = value || ';OMPI_COMM_WORLD_RANK=3;OMPI_COMM_WORLD_SIZE=4' "
           "WHERE name = 'DeviceEnvironment'")
    t = read_timeline(_nsys_copy(tmp_path, "report1.sqlite", env))  # the file's name says nothing
    assert t.sources[0].rank == 3 and set(t.activities["rank"]) == {3} and set(t.ranges["rank"]) == {3}
    mpi = ["CREATE TABLE MPI_RANKS (globalTid INTEGER NOT NULL, rank INTEGER NOT NULL)",
           "INSERT INTO MPI_RANKS VALUES (282332292448257, 2)"]
    assert read_timeline(_nsys_copy(tmp_path, "mpi.sqlite", env, *mpi)).sources[0].rank == 2  # MPI_RANKS first
    several = _nsys_copy(tmp_path, "all.sqlite", *mpi, "INSERT INTO MPI_RANKS VALUES (282332292448258, 5)")
    t = read_timeline(several)
    assert t.sources[0].rank is None and any("several ranks" in o.what for o in t.oddities)


# A --marker-trace file in rocprofv3's documented layout (rocprofiler-sdk docs,
# using-rocprofv3 "Marker trace"): ROCTx calls, control rows, a mark (start == end)
# and ranges whose Function is the message; the 7.x domain spelling on one row.
MARKER_TRACE = '''"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"
"MARKER_CORE_API","roctxGetThreadId",4100,4100,1,1000,1200
"MARKER_CONTROL_API","roctxProfilerPause",4100,4100,2,1300,1400
"MARKER_CORE_API","step start",4100,4100,3,1500,1500
"MARKER_CORE_API","train/step#0",4100,4100,4,2000,9000
"MARKER_CORE_RANGE_API","train/step#1",4100,4101,5,9000,17000
"MARKER_CORE_API","halo exchange",4100,4101,6,10000,10000x
'''


def test_rocprofv3_marker_trace_ranges(tmp_path: Path):
    path = tmp_path / "4100_marker_api_trace.csv"
    path.write_text(MARKER_TRACE)
    t = read_timeline(path)
    r = t.ranges
    assert t.sources[0].format == "rocprofv3-api-trace" and t.activities.empty
    assert list(r["name"]) == ["train/step#0", "train/step#1"] and set(r["group"]) == {"train/step"}
    assert list(r["end_ns"] - r["start_ns"]) == [7000, 8000] and list(r["thread"]) == [4100, 4101]
    assert [o.what for o in t.oddities] == ["ROCTx row with a missing time or an end before its start left out"]


def test_rocprofv3_api_trace_without_markers_is_empty_with_a_warning():
    # the real rocpd CSV export of a HIP API trace (Guid column first): no ROCTx rows
    t = read_timeline(profile("rocprofv3/rocprofiler-sdk-docs-2025/rocpd-to-csv.csv"))
    assert t.ranges.empty and t.activities.empty
    assert [o.what for o in t.oddities] == ["no ROCTx ranges (not a --marker-trace file)"]


def test_rocprof_v1_json_reads_as_its_database():
    # results.json and results.db of the same Kokkos run: the same lanes, row for row
    folder = "rocprof-v1/kokkos-gfx906/"
    from_json, from_db = read_timeline(profile(folder + "results.json")), read_timeline(profile(folder + "results.db"))
    assert from_json.sources[0].format == "rocprof-json"
    assert from_json.activities["kind"].value_counts().to_dict() == {"memcpy": 24, "kernel": 8, "memset": 6}

    def rows(frame):
        return frame.sort_values(["start_ns", "end_ns", "name"]).reset_index(drop=True)

    import pandas as pd

    pd.testing.assert_frame_equal(rows(from_json.activities), rows(from_db.activities))
    pd.testing.assert_frame_equal(rows(from_json.ranges), rows(from_db.ranges))
    # {"ph":"X","name":"Kokkos::View::initialization [V]","pid":"0","tid":"216796",
    #  "args":{"BeginNs":"84118800570944","EndNs":"84118802676312", ...}}
    view = from_json.ranges[from_json.ranges["name"] == "Kokkos::View::initialization [V]"].iloc[0]
    assert view["end_ns"] - view["start_ns"] == 84118802676312 - 84118800570944 and view["thread"] == 216796
    assert [o.what for o in from_json.oddities] == ["'Unknown command type' GPU packets left out (not kernels)"]


def test_rocprof_v1_json_cut_short_is_a_located_error(tmp_path: Path):
    text = profile("rocprof-v1/kokkos-gfx906/results.json").read_text()
    path = tmp_path / "results.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(InputError, match="malformed JSON"):
        read_timeline(path, format="rocprof-json")
