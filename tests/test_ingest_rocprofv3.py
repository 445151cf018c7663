"""rocprofv3 readers (CSV, --stats, --summary, rocpd SQLite) on the real files in
../shared/profiles/rocprofv3. Expected numbers are computed by hand from the
files' own fields (durations = End_Timestamp - Start_Timestamp, in ns, / 1e9)."""

from __future__ import annotations

import math
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from conftest import profile
from conftest import one_line_error
from perfcheck.errors import InputError
from perfcheck.ingest import read_profile, rank_from_path
from perfcheck.ingest import rocpd as rocpd_reader
from perfcheck.ingest import rocprofv3 as v3
from perfcheck.ingest.formats import Sniff

DOCS_2024 = "rocprofv3/rocprofiler-sdk-docs-2024"
DOCS_2025 = "rocprofv3/rocprofiler-sdk-docs-2025"
ROCPD_DB = "rocprofv3/batched_gemm-mi300x-rocpd/15_results.db"

ADD = "void addition_kernel<float>(float*, float const*, float const*, int, int)"
SUB = "subtract_kernel(float*, float const*, float const*, int, int)"
MUL = "multiply_kernel(float*, float const*, float const*, int, int)"
DIV = "divide_kernel(float*, float const*, float const*, int, int)"
GEMM = (
    "void batched_matrix_multiplication_matrix_core_64x64x4<64u, 64u, 8u>(unsigned int, unsigned int, "
    "unsigned int, unsigned int, std::bfloat16_t const*, std::bfloat16_t const*, std::bfloat16_t*, "
    "dim3, dim3, dim3, int)"
)
FILL = "__amd_rocclr_fillBufferAligned"




def by_dispatch(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index("dispatch_id")


def kernels(result) -> dict[str, dict]:
    assert result.code == 0, result.err
    return {k["kernel"]: {"calls": k["calls"], **k["metrics"]} for k in result.json()["kernels"]}


# --------------------------------------------------------------------------- kernel trace


def test_kernel_trace_2024() -> None:
    path = profile(f"{DOCS_2024}/kernel_trace.csv")
    p = read_profile(path)
    assert p.source.format == "rocprofv3-kernel-trace"
    d = by_dispatch(p.dispatches)
    # 7 data lines (PROVENANCE says 8; the file holds 7) and a trailing blank line.
    assert sorted(d.index) == [1, 2, 3, 5, 6, 9, 13]
    assert d["kernel"].value_counts().to_dict() == {ADD: 4, SUB: 2, MUL: 1}
    # dispatch 1: 8819330200116308 - 8819330200067564
    assert d.loc[1, "duration"] == pytest.approx(48744e-9, rel=1e-12)
    assert d.loc[3, "duration"] == pytest.approx((8819330200369359 - 8819330200229796) * 1e-9, rel=1e-12)
    assert d.loc[13, "start_ns"] == 8819330200187127 and d.loc[13, "end_ns"] == 8819330200320468
    assert set(d["device_id"]) == {1}  # 2024 files write the bare agent number
    assert d.loc[5, "queue_id"] == 2 and d.loc[2, "correlation_id"] == 1459
    # Group_Segment_Size / Private_Segment_Size, no register columns in this generation
    assert set(d["lds_per_workgroup"]) == {0} and set(d["scratch_per_thread"]) == {0}
    assert "vgpr" not in d.columns
    assert (d.loc[1, ["grid_x", "grid_y", "grid_z"]].tolist()) == [1024, 1024, 1]
    assert d.loc[1, "grid_size"] == 1048576 and d.loc[1, "workgroup_size"] == 64
    assert d.loc[1, "workgroups"] == 16 * 1024


def test_kernel_trace_2025() -> None:
    d = by_dispatch(read_profile(profile(f"{DOCS_2025}/kernel_trace.csv")).dispatches)
    assert len(d) == 9
    assert d["kernel"].value_counts().to_dict() == {ADD: 3, DIV: 2, MUL: 2, SUB: 2}
    assert d.loc[1, "duration"] == pytest.approx(12800e-9, rel=1e-12)  # ...042437 - ...029637
    assert d.loc[12, "duration"] == pytest.approx(12440e-9, rel=1e-12)  # ...160837 - ...148397
    assert d.loc[2, "duration"] == pytest.approx(8240e-9, rel=1e-12)
    assert set(d["device_id"]) == {4}  # "Agent 4"
    assert d.loc[4, ["vgpr", "agpr", "sgpr"]].tolist() == [12, 4, 16]  # divide_kernel
    assert d.loc[1, ["vgpr", "agpr", "sgpr"]].tolist() == [8, 0, 16]
    assert d.loc[13, "stream_id"] == 4 and d.loc[13, "queue_id"] == 4 and d.loc[13, "tid"] == 834304
    assert d.loc[1, "lds_per_workgroup"] == 0 and d.loc[1, "scratch_per_thread"] == 0
    assert d.loc[11, "grid_size"] == 1048576 and d.loc[11, "workgroup_size"] == 64


def test_kernel_trace_truncated_names() -> None:
    d = by_dispatch(read_profile(profile(f"{DOCS_2025}/kernel_trace_truncated.csv")).dispatches)
    assert d["kernel"].to_dict() == {1: "addition_kernel", 4: "divide_kernel", 3: "multiply_kernel", 2: "subtract_kernel"}
    assert d.loc[4, "duration"] == pytest.approx(13080e-9, rel=1e-12)  # ...709678 - ...696598
    assert d.loc[2, "duration"] == pytest.approx(8680e-9, rel=1e-12)
    assert d.loc[4, ["vgpr", "agpr", "sgpr"]].tolist() == [12, 4, 16]


def test_kernel_trace_cli(cli) -> None:
    ks = kernels(cli("inspect", profile(f"{DOCS_2024}/kernel_trace.csv"), "--json"))
    # addition: 48744, 100895, 130526, 133341 ns
    assert ks[ADD]["calls"] == 4
    assert ks[ADD]["duration_total"] == pytest.approx(413506e-9, rel=1e-12)
    assert ks[ADD]["duration"] == pytest.approx((100895 + 130526) / 2 * 1e-9, rel=1e-12)
    assert ks[MUL]["duration"] == pytest.approx(139563e-9, rel=1e-12)
    ks = kernels(cli("inspect", profile(f"{DOCS_2025}/kernel_trace.csv"), "--json"))
    assert ks[ADD]["calls"] == 3 and ks[ADD]["duration_total"] == pytest.approx((12800 + 11400 + 9840) * 1e-9)
    assert ks[DIV]["vgpr"] == 12 and ks[DIV]["agpr"] == 4


def test_rocpd_csv_export_kernel_trace(tmp_path: Path) -> None:
    """rocpd's CSV export writes kernel_trace.csv with a leading Guid column."""
    lines = profile(f"{DOCS_2025}/kernel_trace.csv").read_text().splitlines()
    guid = '"0000ddb5-8903-7903-b269-cd8d3745bb8a"'
    path = tmp_path / "kernel_trace.csv"
    path.write_text("\n".join(['"Guid",' + lines[0]] + [f"{guid},{line}" for line in lines[1:]]) + "\n")
    p = read_profile(path)
    assert p.source.format == "rocprofv3-kernel-trace"
    d = by_dispatch(p.dispatches)
    assert len(d) == 9 and d.loc[1, "duration"] == pytest.approx(12800e-9, rel=1e-12)


def _cut_last_line(source: Path, target: Path, keep: int = 30) -> int:
    """Copy ``source`` with its last line cut after ``keep`` characters; return that line's number."""
    lines = source.read_text().rstrip("\n").split("\n")
    lines[-1] = lines[-1][:keep]
    target.write_text("\n".join(lines))
    return len(lines)


def test_kernel_trace_cut_off(cli, tmp_path: Path) -> None:
    path = tmp_path / "kernel_trace.csv"
    _cut_last_line(profile(f"{DOCS_2025}/kernel_trace.csv"), path, keep=60)
    one_line_error(cli("inspect", path), path)


def test_kernel_trace_cut_off_names_the_line(cli, tmp_path: Path) -> None:
    path = tmp_path / "kernel_trace.csv"
    line = _cut_last_line(profile(f"{DOCS_2025}/kernel_trace.csv"), path, keep=60)
    assert f"{path}:{line}:" in one_line_error(cli("inspect", path), path)


def test_kernel_trace_type_relative_agent(tmp_path: Path) -> None:
    """rocprofv3 --agent-index=type-relative writes Agent_Id as "GPU N"."""
    text = profile(f"{DOCS_2025}/kernel_trace.csv").read_text().replace('"Agent 4"', '"GPU 0"')
    path = tmp_path / "kernel_trace.csv"
    path.write_text(text)
    assert set(read_profile(path).dispatches["device_id"]) == {0}


def test_kernel_trace_malformed(cli, tmp_path: Path) -> None:
    real = profile(f"{DOCS_2025}/kernel_trace.csv")
    empty = tmp_path / "kernel_trace.csv"
    empty.write_text("")
    assert "empty" in one_line_error(cli("inspect", empty), empty)
    junk = tmp_path / "junk_kernel_trace.csv"
    junk.write_bytes(bytes(range(256)) * 16)
    one_line_error(cli("inspect", junk), junk)
    semi = tmp_path / "semicolon_kernel_trace.csv"
    semi.write_text(real.read_text().replace(",", ";"))
    assert "not a profile format" in one_line_error(cli("inspect", semi), semi)
    no_name = tmp_path / "no_name_kernel_trace.csv"
    frame = pd.read_csv(real, dtype=str).drop(columns=["Kernel_Name"])
    frame.to_csv(no_name, index=False)
    one_line_error(cli("inspect", no_name), no_name)  # not recognised at all
    line = one_line_error(cli("inspect", no_name, "--format", "rocprofv3-kernel-trace"), no_name)
    assert "'Kernel_Name'" in line and "missing" in line


# --------------------------------------------------------------------------- multi-rank


def test_rank_files_combine(cli, tmp_path: Path) -> None:
    real = profile(f"{DOCS_2025}/kernel_trace.csv")
    paths = []
    for rank in (0, 1):
        (tmp_path / f"rank_{rank}").mkdir()
        paths.append(shutil.copy(real, tmp_path / f"rank_{rank}" / "kernel_trace.csv"))
    paths.append(shutil.copy(real, tmp_path / "results_rank3_kernel_trace.csv"))
    p = read_profile(paths)
    assert [s.rank for s in p.sources] == [0, 1, 3]
    assert p.dispatches["rank"].value_counts().sort_index().to_dict() == {0: 9, 1: 9, 3: 9}
    one = kernels(cli("inspect", real, "--json"))
    two = kernels(cli("inspect", paths[0], paths[1], "--json"))
    for name, row in one.items():
        assert two[name]["calls"] == 2 * row["calls"]
        assert two[name]["duration_total"] == pytest.approx(2 * row["duration_total"])
    assert two[ADD]["calls"] == 6


def test_rank_from_rocprofv3_nesting() -> None:
    # rocprofv3 -d rank_%rank% nests <hostname>/pmc_N/<pid>_counter_collection.csv below it
    assert rank_from_path(Path("out/rank_12/node001/pmc_1/4711_counter_collection.csv")) == 12
    assert rank_from_path(Path("rank_2/node001/4711_kernel_trace.csv")) == 2
    assert rank_from_path(Path("out/results_rank3_kernel_trace.csv")) == 3
    assert rank_from_path(Path("frank7/node001/4711_kernel_trace.csv")) is None


# --------------------------------------------------------------------------- counter collection


def test_counter_collection_2024(cli) -> None:
    path = profile(f"{DOCS_2024}/counter_collection.csv")
    p = read_profile(path)
    assert p.source.format == "rocprofv3-counter-collection"
    d = by_dispatch(p.dispatches)
    assert list(d.index) == [1, 2, 5, 9, 13, 3, 6]  # file order
    assert d["kernel"].value_counts().to_dict() == {ADD: 4, SUB: 2, MUL: 1}
    assert set(d["raw.SQ_WAVES"]) == {16384.0}
    assert d.loc[5, "queue_id"] == 2 and d.loc[13, "correlation_id"] == 13 and d.loc[1, "pid"] == 19396
    assert set(d["device_id"]) == {1}
    assert d.loc[3, ["grid_size", "workgroup_size", "vgpr", "sgpr"]].tolist() == [1048576, 64, 8, 16]
    assert d.loc[3, "lds_per_workgroup"] == 0 and d.loc[3, "scratch_per_thread"] == 0
    assert "duration" not in d.columns and "start_ns" not in d.columns  # no timestamps in 2024
    ks = kernels(cli("inspect", path, "--json"))
    assert ks[ADD]["calls"] == 4 and ks[ADD]["duration"] is None and ks[ADD]["vgpr"] == 8


def _counter_variant(tmp_path: Path, name: str = "counter_collection.csv") -> Path:
    """The 2024 counter file in the later column layout (as the rocpd CSV export
    writes it: leading Pid, "Agent N", Accum_VGPR_Count, timestamps), with a
    second counter per dispatch. Timestamps: start = 1000 * dispatch, 500 ns long."""
    real = pd.read_csv(profile(f"{DOCS_2024}/counter_collection.csv"), dtype=str)
    real.insert(0, "Pid", "1")
    real["Agent_Id"] = "Agent " + real["Agent_Id"]
    real.insert(real.columns.get_loc("SGPR_Count"), "Accum_VGPR_Count", "4")
    start = real["Dispatch_Id"].astype(int) * 1000
    real["Start_Timestamp"] = start.astype(str)
    real["End_Timestamp"] = (start + 500).astype(str)
    grbm = real.assign(Counter_Name="GRBM_COUNT", Counter_Value=(real["Dispatch_Id"].astype(int) * 10).astype(str) + ".5")
    both = pd.concat([real, grbm]).sort_index(kind="stable")  # a dispatch's counters stay together
    path = tmp_path / name
    both.to_csv(path, index=False)
    return path


def test_counter_collection_later_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _counter_variant(tmp_path)
    whole = by_dispatch(read_profile(path).dispatches)
    assert list(whole.index) == [1, 2, 5, 9, 13, 3, 6]
    assert whole.loc[9, "raw.GRBM_COUNT"] == 90.5 and whole.loc[9, "raw.SQ_WAVES"] == 16384.0
    assert [c for c in whole.columns if c.startswith("raw.")] == ["raw.SQ_WAVES", "raw.GRBM_COUNT"]
    assert set(whole["device_id"]) == {1} and set(whole["agpr"]) == {4}
    assert whole.loc[13, "duration"] == pytest.approx(500e-9)
    assert whole.loc[13, "start_ns"] == 13000
    # The same table when a dispatch's two rows straddle chunk boundaries.
    monkeypatch.setattr(v3, "COUNTER_CHUNK_ROWS", 5)  # 14 rows: pairs split at 5 and 10
    chunked = by_dispatch(read_profile(path).dispatches)
    pd.testing.assert_frame_equal(whole, chunked)


def test_counter_collection_malformed(cli, tmp_path: Path) -> None:
    real = profile(f"{DOCS_2024}/counter_collection.csv")
    cut = tmp_path / "cut_counter_collection.csv"
    line = _cut_last_line(real, cut, keep=40)  # inside the quoted kernel name
    assert f"{cut}:{line}:" in one_line_error(cli("inspect", cut), cut)
    short = tmp_path / "short_counter_collection.csv"
    last = real.read_text().rstrip("\n").split("\n")[-1]
    line = _cut_last_line(real, short, keep=len(last) - len(",16384"))  # the value is missing
    message = one_line_error(cli("inspect", short), short)
    assert f"{short}:{line}:" in message and "fewer fields" in message
    # The same dispatch and counter twice: two files concatenated, not dimensions.
    text = real.read_text().rstrip("\n").split("\n")
    doubled = tmp_path / "doubled_counter_collection.csv"
    doubled.write_text("\n".join([*text, text[3]]) + "\n")
    message = one_line_error(cli("inspect", doubled), doubled)
    assert f"{doubled}:9:" in message and "appears" in message
    bad = tmp_path / "bad_counter_collection.csv"
    bad.write_text("\n".join([*text[:3], text[3].replace(",16384", ",16k"), *text[4:]]) + "\n")
    with pytest.raises(InputError) as error:  # inspect does not convert counters it does not show
        read_profile(bad)
    assert str(error.value).startswith(f"{bad}:4: column 'Counter_Value': '16k' is not a number")
    semi = tmp_path / "semicolon_counter_collection.csv"
    semi.write_text(real.read_text().replace(",", ";"))
    one_line_error(cli("inspect", semi), semi)
    no_value = tmp_path / "no_value_counter_collection.csv"
    pd.read_csv(real, dtype=str).drop(columns=["Counter_Value"]).to_csv(no_value, index=False)
    line = one_line_error(cli("inspect", no_value, "--format", "rocprofv3-counter-collection"), no_value)
    assert "'Counter_Value'" in line


# --------------------------------------------------------------------------- stats


def test_hip_api_stats_hold_no_kernels(cli) -> None:
    path = profile(f"{DOCS_2025}/hip_api_stats.csv")
    p = read_profile(path)
    assert p.source.format == "rocprofv3-stats" and p.dispatches.empty
    assert [o.what for o in p.oddities] == ["holds no kernel dispatches (HIP API statistics)"]
    result = cli("inspect", path, "--json")
    assert result.code == 0 and result.json()["kernels"] == []
    assert "HIP API statistics" in result.err


def test_stats_sniffer_is_specific() -> None:
    assert v3._is_stats(Sniff(profile(f"{DOCS_2025}/hip_api_stats.csv")))
    # rocprof v1's 5-column stats belong to another reader.
    assert not v3._is_stats(Sniff(profile("rocprof-v1/batched_gemm-mi300x/results.stats.csv")))
    assert not v3._is_stats(Sniff(profile("rocprof-v1/kokkos-gfx906/results.hip_stats.csv")))


KERNEL_STATS = """\
"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"
"void addition_kernel<float>(float*, float const*, float const*, int, int)",3,34040,11346.666667,35.96,9840,12800,1.48093e+03
"divide_kernel(float*, float const*, float const*, int, int)",2,23640,11820.000000,24.97,11200,12440,876.812409
"""


def test_kernel_stats(cli, tmp_path: Path) -> None:
    # No real kernel_stats.csv is in the shared data; these lines follow the
    # writer's layout (hip_api_stats.csv above) with the 2025 trace's figures.
    path = tmp_path / "4711_kernel_stats.csv"
    path.write_text(KERNEL_STATS)
    p = read_profile(path)
    assert p.level == "kernel" and p.source.format == "rocprofv3-stats"
    d = p.dispatches.set_index("kernel")
    assert d.loc[ADD, "calls"] == 3
    assert d.loc[ADD, "duration_total"] == pytest.approx(34040e-9)
    assert d.loc[ADD, "duration_std"] == pytest.approx(1.48093e-6)
    assert d.loc[DIV, "duration_min"] == pytest.approx(11200e-9)
    assert d.loc[DIV, "duration_max"] == pytest.approx(12440e-9)
    ks = kernels(cli("inspect", path, "--json"))
    assert ks[DIV]["calls"] == 2 and ks[DIV]["duration_mean"] == pytest.approx(11820e-9)


def test_stats_malformed(cli, tmp_path: Path) -> None:
    cut = tmp_path / "kernel_stats.csv"
    cut.write_text(KERNEL_STATS.rstrip("\n")[:-30])
    message = one_line_error(cli("inspect", cut), cut)
    assert f"{cut}:3:" in message
    unknown = tmp_path / "renamed.csv"
    unknown.write_text(KERNEL_STATS)
    assert "file name" in one_line_error(cli("inspect", unknown), unknown)
    bad = tmp_path / "bad_kernel_stats.csv"
    bad.write_text(KERNEL_STATS.replace(",34040,", ",34O40,"))
    assert f"{bad}:2:" in one_line_error(cli("inspect", bad), bad)


# --------------------------------------------------------------------------- summary


def test_summary(cli) -> None:
    path = profile(f"{DOCS_2025}/summary.txt")
    p = read_profile(path)
    assert p.level == "kernel" and p.source.format == "rocprofv3-summary"
    d = p.dispatches.set_index("kernel")
    assert list(d.index) == [ADD, DIV, MUL, SUB]
    assert d["calls"].tolist() == [8, 8, 8, 8]
    assert d.loc[ADD, "duration_total"] == pytest.approx(184324e-9)
    assert d.loc[ADD, "duration_mean"] == pytest.approx(2.304e-5)  # printed as 2.304e+04 ns
    assert d.loc[ADD, "duration_min"] == pytest.approx(11200e-9)
    assert d.loc[ADD, "duration_max"] == pytest.approx(98802e-9)
    assert d.loc[ADD, "duration_std"] == pytest.approx(3.062e-5)
    assert d.loc[SUB, "duration_total"] == pytest.approx(82521e-9)
    assert d.loc[MUL, "duration_std"] == pytest.approx(9.417e-7)
    ks = kernels(cli("inspect", path, "--json"))
    assert ks[DIV]["calls"] == 8
    assert ks[DIV]["duration_total"] == pytest.approx(94482e-9)
    assert ks[DIV]["duration_mean"] == pytest.approx(94482e-9 / 8)
    assert ks[DIV]["duration"] is None  # a median is not in the file


def test_summary_units_and_domains(tmp_path: Path) -> None:
    lines = profile(f"{DOCS_2025}/summary.txt").read_text().split("\n")
    usec = tmp_path / "summary_usec.txt"
    usec.write_text("\n".join(lines).replace("(nsec)", "(usec)"))
    d = read_profile(usec).dispatches.set_index("kernel")
    assert d.loc[ADD, "duration_total"] == pytest.approx(184324e-6)
    # -S without -D writes only the all-domain table: its kernel rows are used.
    combined = tmp_path / "summary_all.txt"
    combined.write_text("\n".join(lines[89:]))
    d = read_profile(combined).dispatches.set_index("kernel")
    assert d.loc[SUB, "calls"] == 8 and d.loc[SUB, "duration_max"] == pytest.approx(12920e-9)
    hip_only = tmp_path / "summary_hip.txt"
    hip_only.write_text("\n".join(lines[:63]))
    p = read_profile(hip_only)
    assert p.dispatches.empty
    assert [o.what for o in p.oddities] == ["holds no kernel dispatches (summary of HSA_API, HIP_API)"]


def test_summary_malformed(cli, tmp_path: Path) -> None:
    lines = profile(f"{DOCS_2025}/summary.txt").read_text().split("\n")
    cut = tmp_path / "summary.txt"
    cut.write_text("\n".join([*lines[:69], lines[69][:120]]))
    assert f"{cut}:70:" in one_line_error(cli("inspect", cut), cut)
    bad = tmp_path / "bad_summary.txt"
    bad.write_text("\n".join(lines).replace("184324", "18x324", 1))
    message = one_line_error(cli("inspect", bad), bad)
    assert f"{bad}:69:" in message and "'18x324'" in message


# --------------------------------------------------------------------------- no dispatches


@pytest.mark.parametrize(
    ("relative", "format_name", "what"),
    [
        (f"{DOCS_2024}/memory_copy_trace.csv", "rocprofv3-memory-copy-trace", "memory copy trace"),
        (f"{DOCS_2025}/memory_copy_trace.csv", "rocprofv3-memory-copy-trace", "memory copy trace"),
        (f"{DOCS_2025}/rocpd-to-csv.csv", "rocprofv3-api-trace", "API call trace"),
    ],
)
def test_traces_without_dispatches(cli, relative: str, format_name: str, what: str) -> None:
    path = profile(relative)
    p = read_profile(path)
    assert p.source.format == format_name and p.dispatches.empty
    assert [o.what for o in p.oddities] == [f"holds no kernel dispatches ({what})"]
    result = cli("inspect", path, "--json")
    assert result.code == 0 and result.json()["kernels"] == []
    assert result.json()["warnings"][0]["message"] == f"holds no kernel dispatches ({what})"


def test_trace_without_dispatches_named_wrongly(cli, tmp_path: Path) -> None:
    path = tmp_path / "memory_copy_trace.csv"
    path.write_text('"Kind","Direction","Stream_Id"\n"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",0\n')
    line = one_line_error(cli("inspect", path, "--format", "rocprofv3-memory-copy-trace"), path)
    assert "'Source_Agent_Id'" in line


# --------------------------------------------------------------------------- rocpd SQLite


def test_rocpd_database(cli) -> None:
    path = profile(ROCPD_DB)
    p = read_profile(path)
    assert p.source.format == "rocpd"
    assert (p.source.device, p.source.arch) == ("AMD Instinct MI300X", "gfx942")
    assert p.oddities == ()
    d = by_dispatch(p.dispatches)
    assert len(d) == 301 and list(d.index[:3]) == [1, 2, 3]
    assert d["kernel"].value_counts().to_dict() == {FILL: 151, GEMM: 150}
    assert d.loc[1, "duration"] == pytest.approx(6977e-9, rel=1e-12)  # 127395708311676 - 127395708304699
    assert d.loc[301, "duration"] == pytest.approx((127395734518028 - 127395734452758) * 1e-9, rel=1e-12)
    assert d.loc[3, ["grid_x", "grid_y", "grid_z", "grid_size"]].tolist() == [2048, 2, 128, 524288]
    assert d.loc[3, ["workgroup_x", "workgroup_size", "workgroups"]].tolist() == [256, 256, 8 * 2 * 128]
    assert d.loc[3, ["vgpr", "agpr", "sgpr", "lds_per_workgroup", "scratch_per_thread"]].tolist() == [44, 20, 32, 2048, 0]
    assert d.loc[1, ["vgpr", "agpr", "sgpr", "lds_per_workgroup"]].tolist() == [12, 4, 48, 0]
    assert set(d["device_id"]) == {2} and set(d["pid"]) == {15} and set(d["queue_id"]) == {16}
    ks = kernels(cli("inspect", path, "--json"))
    assert ks[GEMM]["calls"] == 150
    assert ks[GEMM]["duration_total"] == pytest.approx(9949989e-9, rel=1e-12)
    assert ks[GEMM]["duration"] == pytest.approx(65751e-9, rel=1e-12)  # 75th and 76th of 150 both 65751 ns
    assert ks[GEMM]["duration_min"] == pytest.approx(65270e-9) and ks[GEMM]["duration_max"] == pytest.approx(100712e-9)
    assert ks[FILL]["calls"] == 151 and ks[FILL]["duration_total"] == pytest.approx(1079254e-9, rel=1e-12)


def test_rocpd_sniffer_is_specific() -> None:
    assert rocpd_reader._is_rocpd(Sniff(profile(ROCPD_DB)))
    for other in ("rocprof-v1/batched_gemm-mi300x/results.db", "rocprof-v1/kokkos-gfx906/results.db"):
        assert not rocpd_reader._is_rocpd(Sniff(profile(other)))


def _guid_table(db: Path, stem: str) -> str:
    with sqlite3.connect(db) as connection:
        (name,) = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?", (stem + "_0%",)
        ).fetchone()
    return name


def test_rocpd_counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the real database with PMC values added for dispatches 1 and 250:
    SQ_WAVES in two instances (summed, as the database's counters_collection view does)."""
    db = Path(shutil.copy(profile(ROCPD_DB), tmp_path / "pmc_results.db"))
    pmc, events = _guid_table(db, "rocpd_info_pmc"), _guid_table(db, "rocpd_pmc_event")
    with sqlite3.connect(db) as connection:
        for pmc_id, name in ((1, "SQ_WAVES"), (2, "FETCH_SIZE")):
            connection.execute(f"INSERT INTO {pmc} (id, nid, pid, name, symbol) VALUES (?, 2534770223, 15, ?, ?)",
                               (pmc_id, name, name))
        event = dict(connection.execute("SELECT dispatch_id, event_id FROM rocpd_kernel_dispatch WHERE dispatch_id IN (1, 250)"))
        rows = [(event[250], 2, 64.5), (event[1], 1, 1000.0), (event[250], 1, 2048.0), (event[1], 1, 216.0)]
        connection.executemany(f"INSERT INTO {events} (event_id, pmc_id, value) VALUES (?, ?, ?)", rows)
    # Chunks of 100 dispatches: counters in the first and third chunk, none in the second.
    monkeypatch.setattr(rocpd_reader, "CHUNK_ROWS", 100)
    d = by_dispatch(read_profile(db).dispatches)
    assert len(d) == 301
    assert d.loc[1, "raw.SQ_WAVES"] == 1216.0 and math.isnan(d.loc[1, "raw.FETCH_SIZE"])
    assert d.loc[250, "raw.SQ_WAVES"] == 2048.0 and d.loc[250, "raw.FETCH_SIZE"] == 64.5
    assert d["raw.SQ_WAVES"].notna().sum() == 2 and d["raw.FETCH_SIZE"].notna().sum() == 1


def test_rocpd_without_dispatches(cli, tmp_path: Path) -> None:
    db = Path(shutil.copy(profile(ROCPD_DB), tmp_path / "api_only.db"))
    with sqlite3.connect(db) as connection:
        connection.execute(f"DELETE FROM {_guid_table(db, 'rocpd_kernel_dispatch')}")
    result = cli("inspect", db, "--json")
    assert result.code == 0 and result.json()["kernels"] == []
    assert result.json()["warnings"][0]["message"] == "holds no kernel dispatches (623 API regions, 0 memory copies)"


def test_rocpd_malformed(cli, tmp_path: Path) -> None:
    real = profile(ROCPD_DB)
    cut = tmp_path / "cut_results.db"
    cut.write_bytes(real.read_bytes()[: 600 * 1024])
    assert "cannot read the rocpd database" in one_line_error(cli("inspect", cut), cut)
    no_view = Path(shutil.copy(real, tmp_path / "no_view_results.db"))
    with sqlite3.connect(no_view) as connection:
        connection.execute("DROP VIEW kernels")
    assert "'kernels' view" in one_line_error(cli("inspect", no_view), no_view)
    empty = tmp_path / "empty_results.db"
    empty.write_bytes(b"")
    assert "empty" in one_line_error(cli("inspect", empty), empty)
    junk = tmp_path / "junk_results.db"
    junk.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 8)
    one_line_error(cli("inspect", junk), junk)
