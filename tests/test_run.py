"""Profiler runners (perfcheck.run): plans, stand-in profilers, ranks, failures.

The stand-ins in tests/standins (test doubles, see its README) check the command
lines perfcheck builds and write recorded real outputs from ../shared/profiles,
copied at test time, or small files the tests write. Tests needing recorded files
skip when ../shared is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from conftest import profile
from perfcheck.errors import ProfilerError, UsageError
from perfcheck.run import rundir
from perfcheck.run.plan import AMD_BLOCK_LIMITS, NCU_TRACE_METRICS, amd_blocks, plan
from perfcheck.metrics.ranks import RankSpread
from perfcheck.run.runner import run

pytest_plugins = ["pytester"]

STANDINS = Path(__file__).resolve().parent / "standins"
ROCPROFV3 = "rocprofv3/rocprofiler-sdk-docs-2024"
SQ_LEVEL_WAVES = "rocprof-v1/omniperf-SQ-mi100/SQ_LEVEL_WAVES.csv"
B200 = "ncu/meinie0826-roofline-analysis/torch_sdpa_flash__mha_bf16_b16_ctx4k_p64.ncu.csv"
ADD = "void addition_kernel<float>(float*, float const*, float const*, int, int)"
SUB = "subtract_kernel(float*, float const*, float const*, int, int)"
MUL = "multiply_kernel(float*, float const*, float const*, int, int)"

# Hand-written outputs (two dispatches of one kernel) for tests that need no recording.
SMALL_TRACE = """\
"Kind","Agent_Id","Queue_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"
"KERNEL_DISPATCH",1,1,7,1,3,"stream_copy(double const*, double*)",1,1000,11000,0,0,256,1,1,1048576,1,1
"KERNEL_DISPATCH",1,1,7,2,3,"stream_copy(double const*, double*)",2,20000,30000,0,0,256,1,1,1048576,1,1
"""
SMALL_COUNTERS = """\
"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","SGPR_Count","Counter_Name","Counter_Value"
1,1,1,1,7,7,1048576,3,"stream_copy(double const*, double*)",256,0,0,8,16,"SQ_WAVES",4096
2,2,1,1,7,7,1048576,3,"stream_copy(double const*, double*)",256,0,0,8,16,"SQ_WAVES",4096
"""
SMALL_RESULTS = """\
Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,fbar,sig,obj,DispatchNs,BeginNs,EndNs,CompleteNs
0,"stream_copy(double const*, double*) [clone .kd]",0,0,0,7,7,1048576,256,0,0,8,16,0,0x0,0x7f00,500,1000,11000,11500
1,"stream_copy(double const*, double*) [clone .kd]",0,0,1,7,7,1048576,256,0,0,8,16,0,0x0,0x7f00,19500,20000,30000,30500
"""


# --- the stand-ins --------------------------------------------------------------------------


@pytest.fixture
def standins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Stand-in profilers first on PATH (their #! line pointed at this Python), an
    empty data directory, ./app in a fresh working directory, and a call log."""
    bin_dir, data, work = tmp_path / "bin", tmp_path / "data", tmp_path / "work"
    for directory in (bin_dir, data, work):
        directory.mkdir()
    for source in STANDINS.iterdir():
        if source.name == "README.md" or source.name.startswith((".", "__")):
            continue
        text = source.read_text(encoding="utf-8")
        if source.suffix != ".py":
            text = f"#!{sys.executable}\n" + text.split("\n", 1)[1]
        target = bin_dir / source.name
        target.write_text(text, encoding="utf-8")
        target.chmod(0o755)
    shutil.copy(bin_dir / "app", work / "app")
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STANDIN_DATA", str(data))
    monkeypatch.setenv("STANDIN_LOG", str(log))
    for name in ("STANDIN_MODE", "STANDIN_UNKNOWN", "STANDIN_APP", "STANDIN_VALUES", "STANDIN_RANK_SCALE",
                 "PERFCHECK_PROFILER", "PERFCHECK_LAUNCHER", "PERFCHECK_TIMEOUT", "PERFCHECK_RUNS_DIR",
                 "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "PALS_RANKID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(work)

    def calls(tool: str | None = None) -> list[dict]:
        entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return [e for e in entries if tool is None or e["tool"] == tool]

    def values(mapping: dict) -> None:
        path = tmp_path / "values.json"
        path.write_text(json.dumps(mapping))
        monkeypatch.setenv("STANDIN_VALUES", str(path))

    return SimpleNamespace(bin=bin_dir, data=data, work=work, calls=calls, values=values)


def _small_amd(data: Path) -> None:
    (data / "kernel_trace.csv").write_text(SMALL_TRACE)
    (data / "counter_collection.csv").write_text(SMALL_COUNTERS)
    (data / "results.csv").write_text(SMALL_RESULTS)


def _runs(work: Path) -> list[Path]:
    parent = work / rundir.RUNS_DIR
    return sorted(parent.iterdir()) if parent.is_dir() else []


def _error_line(result) -> str:  # noqa: ANN001 - conftest.CliResult
    """Exit 2 and one error line (after perfcheck's progress lines), no traceback."""
    assert result.code == 2, (result.code, result.err)
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert lines[-1].startswith("perfcheck: error: "), result.err
    assert all(line.startswith("perfcheck: ") for line in lines), result.err
    assert sum(line.startswith("perfcheck: error: ") for line in lines) == 1
    return lines[-1]


def _kernels(doc: dict) -> dict[str, dict]:
    return {k["kernel"]: k for k in doc["kernels"]}


# --- plans: which counters, how many passes ---------------------------------------------------


def test_duration_and_occupancy_need_only_the_trace() -> None:
    for profiler in ("rocprofv3", "rocprof"):
        p = plan(profiler, "amd", "rocprof", ["duration", "occupancy_pct", "calls", "vgpr", "rank_imbalance"])
        assert [(s.kind, s.counters) for s in p.passes] == [("trace", ())]
    nvidia = plan("ncu", "nvidia", "ncu", ["duration", "occupancy_pct"])
    assert len(nvidia.passes) == 1 and nvidia.passes[0].counters == NCU_TRACE_METRICS


def test_bandwidth_needs_the_byte_counters_in_one_extra_pass() -> None:
    p = plan("rocprofv3", "amd", "rocprof", ["hbm_bw", "duration"])
    assert [(s.index, s.kind, s.counters) for s in p.passes] == [
        (1, "trace", ()), (2, "counters", ("FETCH_SIZE", "WRITE_SIZE"))]
    assert "2 passes" in p.describe() and "FETCH_SIZE, WRITE_SIZE (for hbm_bw)" in p.describe()
    # FETCH_SIZE and WRITE_SIZE are two TCC counters each: the TCC's four, one pass.
    assert amd_blocks("FETCH_SIZE") + amd_blocks("WRITE_SIZE") == {"TCC": 4}
    nvidia = plan("ncu", "nvidia", "ncu", ["hbm_bw"])
    assert len(nvidia.passes) == 1
    # ncu profiles at the base clock: the DRAM clock the HBM roof scales to comes along
    # (docs/clocks.md); a FLOP rate brings the SM clock
    assert nvidia.passes[0].counters == (*NCU_TRACE_METRICS, "dram__bytes.sum", "dram__cycles_elapsed.avg.per_second")
    flops = plan("ncu", "nvidia", "ncu", ["flop_rate"]).passes[0].counters
    assert flops[-1] == "smsp__cycles_elapsed.avg.per_second" and "dram__cycles_elapsed.avg.per_second" not in flops


def test_counters_of_several_blocks_share_a_pass() -> None:
    p = plan("rocprofv3", "amd", "rocprof", ["l2_bw", "hbm_bw", "achieved_occupancy"])
    assert len(p.passes) == 2
    assert set(p.passes[1].counters) == {
        "TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum", "TCP_TCC_ATOMIC_WITH_RET_REQ_sum",
        "TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum", "FETCH_SIZE", "WRITE_SIZE", "SQ_LEVEL_WAVES_ACCUM", "GRBM_GUI_ACTIVE"}


def _usage(counters: tuple[str, ...]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counters:
        for block, n in amd_blocks(c).items():
            total[block] = total.get(block, 0) + n
    return total


@pytest.mark.parametrize(("arch", "passes", "mfma"), [(None, 3, 4), ("gfx942", 4, 5), ("gfx906", 3, 0)])
def test_flop_counters_split_by_precision_within_the_sq_limit(arch: str | None, passes: int, mfma: int) -> None:
    p = plan("rocprofv3", "amd", "rocprof", ["flop_rate"], arch=arch)
    assert len(p.passes) == passes
    for step in p.passes[1:]:
        assert all(n <= AMD_BLOCK_LIMITS.get(b, 1) for b, n in _usage(step.counters).items())
    for precision in ("F64", "F32", "F16"):  # a precision's four VALU counters stay in one pass
        holding = [s.index for s in p.passes if any(c.endswith(f"_{precision}") and "MFMA" not in c for c in s.counters)]
        assert len(holding) == 1
    assert sum(c.startswith("SQ_INSTS_VALU_MFMA_") for c in p.counters) == mfma
    assert len(p.counters) == 12 + mfma


def test_a_group_over_a_block_limit_is_split() -> None:
    names = [f"SQ_COUNTER_{i}" for i in range(9)]
    p = plan("rocprof", "amd", "rocprof", [], counters=names)
    assert [len(s.counters) for s in p.passes] == [0, 8, 1]


def test_rocprof_v1_accumulator_stays_with_its_level_counter_alone() -> None:
    p = plan("rocprof", "amd", "rocprof", ["achieved_occupancy"], counters=["SQ_INST_LEVEL_VMEM"])
    occupancy = next(s for s in p.passes if "SQ_ACCUM_PREV_HIRES" in s.counters)
    assert set(occupancy.counters) == {"SQ_LEVEL_WAVES", "SQ_ACCUM_PREV_HIRES", "GRBM_GUI_ACTIVE"}
    assert any(s.counters == ("SQ_INST_LEVEL_VMEM",) for s in p.passes)


def test_a_metric_the_profiler_cannot_measure_fails_before_running() -> None:
    with pytest.raises(UsageError, match="lds_bw needs lds_bytes, which ncu cannot measure"):
        plan("ncu", "nvidia", "ncu", ["lds_bw"])


# --- rank spread ---------------------------------------------------------------------------------


def test_rank_spread_per_kernel() -> None:
    spread = RankSpread()
    spread.add(pd.DataFrame({"kernel": ["A", "A", "A", "B"], "rank": [0, 0, 1, 0], "duration": [1.0, 1.0, 3.0, 2.0]}))
    spread.add(pd.DataFrame({"kernel": ["A"], "rank": [2], "duration": [4.0]}))
    table = spread.frame()
    # A: rank totals 2, 3, 4 -> max / mean = 4 / 3; B ran on one rank only.
    assert table.loc["A"].to_dict() == pytest.approx(
        {"ranks": 3, "rank_duration_min": 2.0, "rank_duration_median": 3.0, "rank_duration_max": 4.0,
         "rank_imbalance": 4 / 3})
    assert table.loc["B", "ranks"] == 1 and table.loc["B", "rank_imbalance"] == 1.0
    single = RankSpread()
    single.add(pd.DataFrame({"kernel": ["A"], "rank": [0], "duration": [1.0]}))
    assert single.frame().empty


# --- perfcheck run with the stand-ins: recorded outputs in, the same metrics out ---------------------


def test_rocprofv3_run_matches_the_recorded_outputs(standins, cli) -> None:  # noqa: ANN001
    for name in ("kernel_trace.csv", "counter_collection.csv"):
        shutil.copy(profile(f"{ROCPROFV3}/{name}"), standins.data / name)
    standins.values({"FETCH_SIZE": 4096, "WRITE_SIZE": 2048})  # KiB per dispatch: not in the recording
    result = cli("run", "--profiler", "rocprofv3", "--counter", "SQ_WAVES", "--json",
                 "--expect", "*", "hbm_bw >= 1 GB/s", "--", "./app", "--size", "1024")
    assert result.code == 0, result.err
    doc = result.json()
    kernels = _kernels(doc)
    assert {k: v["calls"] for k, v in kernels.items()} == {ADD: 4, SUB: 2, MUL: 1}
    # Durations from the recorded trace: dispatches 1, 5, 9, 13 of addition_kernel.
    add_ns = [8819330200116308 - 8819330200067564, 8819330200219573 - 8819330200118678,
              8819330200283428 - 8819330200152902, 8819330200320468 - 8819330200187127]
    assert kernels[ADD]["metrics"]["duration_total"] == pytest.approx(sum(add_ns) * 1e-9, rel=1e-12)
    assert kernels[ADD]["metrics"]["duration"] == pytest.approx(sum(sorted(add_ns)[1:3]) / 2 * 1e-9, rel=1e-12)
    per_dispatch = (4096 + 2048) * 1024.0
    assert kernels[ADD]["metrics"]["hbm_bytes"] == per_dispatch
    assert kernels[ADD]["metrics"]["hbm_bw"] == pytest.approx(4 * per_dispatch / (sum(add_ns) * 1e-9), rel=1e-12)
    assert kernels[MUL]["metrics"]["hbm_bw"] == pytest.approx(per_dispatch / 139563e-9, rel=1e-12)
    # The same timing metrics as perfcheck inspect of the recorded trace.
    recorded = _kernels(cli("inspect", "--json", profile(f"{ROCPROFV3}/kernel_trace.csv")).json())
    for name, entry in recorded.items():
        for metric, value in entry["metrics"].items():
            assert kernels[name]["metrics"][metric] == value, (name, metric)
    # Two passes: the trace alone, then the byte counters (and the one asked for by name).
    calls = standins.calls("rocprofv3")
    assert len(calls) == 2
    assert calls[0]["argv"][:1] == ["--kernel-trace"] and "--pmc" not in calls[0]["argv"]
    assert calls[1]["argv"][:4] == ["--pmc", "FETCH_SIZE", "WRITE_SIZE", "SQ_WAVES"]
    assert all(c["argv"][-3:] == ["./app", "--size", "1024"] for c in calls)
    assert "pass 2 of 2 (rocprofv3: FETCH_SIZE, WRITE_SIZE, SQ_WAVES" in result.err
    # The merged profile: every dispatch has its counters, matched by kernel and launch order.
    (run_dir,) = _runs(standins.work)
    merged = pd.read_csv(profile(f"{ROCPROFV3}/counter_collection.csv"))
    from perfcheck.ingest import read_profile

    dispatches = read_profile(run_dir).dispatches.sort_values("dispatch_id")
    assert dispatches["dispatch_id"].tolist() == sorted(merged["Dispatch_Id"])
    assert dispatches["raw.SQ_WAVES"].tolist() == [16384.0] * 7
    assert dispatches["raw.FETCH_SIZE"].tolist() == [4096.0] * 7
    # perfcheck inspect reads the run directory afterwards to the same document.
    again = cli("inspect", "--json", run_dir)
    assert again.json()["kernels"] == doc["kernels"]


def test_rocprof_v1_run_matches_the_recorded_outputs(standins, cli) -> None:  # noqa: ANN001
    shutil.copy(profile(SQ_LEVEL_WAVES), standins.data / "results.csv")
    result = cli("run", "--profiler", "rocprof", "--arch", "mi100", "--json",
                 "--expect", "*", "achieved_occupancy >= 0%", "--", "./app")
    assert result.code == 0, result.err
    recorded = cli("inspect", "--arch", "mi100", "--json", profile(SQ_LEVEL_WAVES)).json()
    doc = result.json()
    assert len(doc["kernels"]) == 167
    # Every kernel's every metric, achieved occupancy from the counter pass included.
    assert doc["kernels"] == recorded["kernels"]
    first = _kernels(doc)["void benchmark_func<int, 256, 8u, 512u>(int, int*)"]["metrics"]
    assert first["achieved_occupancy_pct"] == pytest.approx(82.2488834985275, rel=1e-12)
    calls = standins.calls("rocprof")
    assert len(calls) == 2 and "-i" not in calls[0]["argv"]
    input_file = Path(calls[1]["argv"][calls[1]["argv"].index("-i") + 1])
    assert input_file.read_text().splitlines()[-1] == "pmc: SQ_LEVEL_WAVES SQ_ACCUM_PREV_HIRES GRBM_GUI_ACTIVE"
    assert all(["--timestamp", "on"] == c["argv"][c["argv"].index("--timestamp"):][:2] for c in calls)


def test_ncu_run_matches_the_recorded_outputs(standins, cli) -> None:  # noqa: ANN001
    shutil.copy(profile(B200), standins.data / "raw.csv")
    standins.values({"dram__bytes.sum": {"value": 1.5, "unit": "Gbyte"},
                     "dram__cycles_elapsed.avg.per_second": {"value": 3.996, "unit": "cycle/nsecond"}})
    result = cli("run", "--profiler", "ncu", "--json", "--expect", "*", "hbm_bw >= 1 GB/s",
                 "--expect", "*", "occupancy >= 1%", "--", "./app")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["target"] == {"arch": "sm_100", "device": "b200", "origin": "detected"}
    (kernel,) = doc["kernels"]
    recorded = cli("inspect", "--json", profile(B200)).json()["kernels"][0]
    assert kernel["kernel"] == recorded["kernel"] and kernel["calls"] == recorded["calls"] == 16
    for metric in ("duration", "duration_total", "duration_min", "duration_max", "registers", "lds_per_workgroup",
                   "workgroup_size", "grid_size", "occupancy_pct", "warps_per_sm", "workgroups_per_cu"):
        assert kernel["metrics"][metric] == recorded["metrics"][metric], metric
    # 1.5 GB per launch over the recorded gpu__time_duration of the 16 launches.
    assert kernel["metrics"]["hbm_bytes"] == 1.5e9
    assert kernel["metrics"]["hbm_bw"] == pytest.approx(16 * 1.5e9 / recorded["metrics"]["duration_total"], rel=1e-9)
    (call,) = standins.calls("ncu")
    metrics = call["argv"][call["argv"].index("--metrics") + 1].split(",")
    assert metrics == [*NCU_TRACE_METRICS, "dram__bytes.sum", "dram__cycles_elapsed.avg.per_second"]
    # the DRAM clock the run recorded (3.996 cycle/ns, in Hz), per kernel
    assert kernel["metrics"]["mem_clock"] == pytest.approx(3.996e9)
    assert call["argv"][:8] == ["--csv", "--page", "raw", "--target-processes", "all", "--clock-control", "base",
                                "--metrics"]
    # the clock control is stated, recorded in the manifest and in the baselines' fingerprint
    run_dir = Path(doc["profiles"][0]["path"])
    assert json.loads((run_dir / "perfcheck-run.json").read_text())["clock_control"] == "base"
    assert doc["profiles"][0]["clock_control"] == "base"


def test_ncu_clock_control_none_and_not_for_amd(standins, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from perfcheck.analysis import analyse
    from perfcheck.baseline import fingerprint

    shutil.copy(profile(B200), standins.data / "raw.csv")
    result = cli("run", "--profiler", "ncu", "--clock-control", "none", "--run-dir", str(tmp_path / "r"), "--", "./app")
    assert result.code == 0, result.err
    (call,) = standins.calls("ncu")
    assert call["argv"][call["argv"].index("--clock-control") + 1] == "none"
    assert fingerprint(analyse([tmp_path / "r"]))["clock_control"] == "none"
    # an ingested ncu file says nothing of its clock control: no such key
    assert "clock_control" not in fingerprint(analyse([profile(B200)]))
    line = _error_line(cli("run", "--profiler", "rocprofv3", "--clock-control", "base", "--", "./app"))
    assert "clock_control is an ncu setting; rocprofv3 does not lock clocks" in line


# --- ranks ------------------------------------------------------------------------------------------


def test_four_ranks_give_one_profile_with_the_imbalance(standins, cli, monkeypatch) -> None:  # noqa: ANN001
    for name in ("kernel_trace.csv", "counter_collection.csv"):
        shutil.copy(profile(f"{ROCPROFV3}/{name}"), standins.data / name)
    monkeypatch.setenv("STANDIN_RANK_SCALE", "1,1,1,2")  # rank 3 takes twice as long
    result = cli("run", "--profiler", "rocprofv3", "--launcher", "srun -n 4", "--json",
                 "--expect", "*", "rank_imbalance <= 1.5", "--", "./app")
    assert result.code == 1, result.err  # 1.6 > 1.5: the check fails, as it should
    kernels = _kernels(result.json())
    assert {k: v["calls"] for k, v in kernels.items()} == {ADD: 16, SUB: 8, MUL: 4}
    for entry in kernels.values():
        m = entry["metrics"]
        assert m["ranks"] == 4
        assert m["rank_duration_max"] == pytest.approx(2 * m["rank_duration_min"], rel=1e-12)
        assert m["rank_duration_median"] == pytest.approx(m["rank_duration_min"], rel=1e-12)
        assert m["rank_imbalance"] == pytest.approx(2 / 1.25, rel=1e-12)  # max / mean of 1, 1, 1, 2
    assert kernels[MUL]["metrics"]["rank_duration_min"] == pytest.approx(139563e-9, rel=1e-12)
    assert "rank_imbalance <= 1.5" in result.err and "FAILED" in result.err
    # One launch, four profilers, each writing its own rank directory.
    (srun,) = standins.calls("srun")
    assert srun["argv"][:2] == ["-n", "4"]
    profilers = standins.calls("rocprofv3")
    assert sorted(c["rank"] for c in profilers) == [0, 1, 2, 3]
    assert all(f"rank_{c['rank']}/pass_1" in c["argv"][c["argv"].index("-d") + 1] for c in profilers)
    (run_dir,) = _runs(standins.work)
    from perfcheck.ingest import read_profile

    merged = read_profile(run_dir).dispatches
    assert merged.groupby("rank").size().to_dict() == {0: 7, 1: 7, 2: 7, 3: 7}
    # One rank alone: rank 3's directory, its durations twice the recording's.
    rank3 = cli("inspect", "--json", run_dir / "rank_3").json()
    assert _kernels(rank3)[MUL]["metrics"]["duration"] == pytest.approx(2 * 139563e-9, rel=1e-12)
    assert rank3["profiles"][0]["rank"] == 3


def test_run_one_rank(standins, cli) -> None:  # noqa: ANN001
    _small_amd(standins.data)
    result = cli("run", "--profiler", "rocprofv3", "--launcher", "srun -n 2", "--rank", "1", "--json", "--", "./app")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["profiles"][0]["rank"] == 1 and doc["kernels"][0]["calls"] == 2
    assert "rank_imbalance" not in doc["kernels"][0]["metrics"]


# --- failures: one line, the run directory kept ------------------------------------------------------


def test_missing_profiler(standins, cli, monkeypatch, tmp_path) -> None:  # noqa: ANN001
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    line = _error_line(cli("run", "--profiler", "ncu", "--", "./app"))
    assert "ncu is not installed (not found on PATH)" in line and "Nsight Compute" in line
    # nothing ran, so nothing is left behind: no empty run folder per failed try
    assert "raw outputs kept" not in line and _runs(standins.work) == []
    assert not (standins.work / rundir.RUNS_DIR).exists()
    # none named and none installed: says which were looked for
    line = _error_line(cli("run", "--", "./app"))
    assert "no profiler found on PATH: looked for rocprofv3, rocprof, ncu" in line and "--profiler" in line
    assert _runs(standins.work) == []
    line = _error_line(cli("run", "--run-dir", "mine", "--", "./app"))
    assert not (standins.work / "mine").exists()
    line = _error_line(cli("run", "--profiler", "rocprofv3", "--launcher", "srun -n 2", "--", "./app"))
    assert "rocprofv3 is not installed" in line and _runs(standins.work) == []


def test_the_installed_profiler_is_chosen_and_named(standins, cli, monkeypatch, tmp_path) -> None:  # noqa: ANN001
    only_ncu = tmp_path / "only-ncu"
    only_ncu.mkdir()
    (only_ncu / "ncu").symlink_to(standins.bin / "ncu")
    monkeypatch.setenv("PATH", str(only_ncu))
    shutil.copy(profile(B200), standins.data / "raw.csv")
    result = cli("run", "--json", "--", "./app")
    assert result.code == 0, result.err
    assert "perfcheck: profiler ncu: the first installed of rocprofv3, rocprof, ncu (--profiler names one)" in result.err
    assert [c["tool"] for c in standins.calls()] == ["ncu"]


def test_denied_counters(standins, cli, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("STANDIN_MODE", "denied")
    line = _error_line(cli("run", "--profiler", "ncu", "--", "./app"))
    assert "ERR_NVGPUCTRPERM" in line and "NVreg_RestrictProfilingToAdminUsers=0" in line
    assert "https://developer.nvidia.com/ERR_NVGPUCTRPERM" in line
    (run_dir,) = _runs(standins.work)
    assert line.endswith(f"raw outputs kept in {run_dir}")
    assert "ERR_NVGPUCTRPERM" in (run_dir / "pass_1" / "ncu.csv").read_text()


@pytest.mark.parametrize(("profiler", "counter", "expectation", "arch"), [
    ("rocprofv3", "FETCH_SIZE", "hbm_bw >= 1 GB/s", None),
    ("rocprof", "SQ_LEVEL_WAVES", "achieved_occupancy >= 10%", "mi100"),
    ("ncu", "dram__bytes.sum", "hbm_bw >= 1 GB/s", None),
])
def test_unknown_counter(standins, cli, monkeypatch, profiler, counter, expectation, arch) -> None:  # noqa: ANN001
    _small_amd(standins.data)
    monkeypatch.setenv("STANDIN_MODE", "unknown-counter")
    monkeypatch.setenv("STANDIN_UNKNOWN", counter)
    args = ["run", "--profiler", profiler, *(["--arch", arch] if arch else []), "--expect", "*", expectation, "--", "./app"]
    line = _error_line(cli(*args))
    assert f"counter {counter} is unknown to this GPU" in line and f"under {profiler}" in line
    (run_dir,) = _runs(standins.work)
    assert line.endswith(f"raw outputs kept in {run_dir}")
    assert json.loads((run_dir / rundir.MANIFEST).read_text())["status"] == "failed"


def test_unknown_counter_found_in_the_outputs(standins, cli, monkeypatch) -> None:  # noqa: ANN001
    """A counter missing from rocprofv3's output is caught even without its warning."""
    _small_amd(standins.data)
    standins.values({"FETCH_SIZE": 1})
    monkeypatch.setenv("STANDIN_MODE", "silent-unknown")
    monkeypatch.setenv("STANDIN_UNKNOWN", "WRITE_SIZE")
    line = _error_line(cli("run", "--profiler", "rocprofv3", "--expect", "*", "hbm_bw >= 1 GB/s", "--", "./app"))
    assert "counter WRITE_SIZE is unknown to this GPU under rocprofv3" in line
    assert "Unable to find" not in (_runs(standins.work)[0] / "logs" / "pass_2.stderr.log").read_text()


def test_crashing_application(standins, cli, monkeypatch) -> None:  # noqa: ANN001
    _small_amd(standins.data)
    monkeypatch.setenv("STANDIN_APP", "crash")
    line = _error_line(cli("run", "--profiler", "rocprofv3", "--", "./app", "--big"))
    assert "./app --big exited with status 3 under rocprofv3 (pass 1 of 1)" in line
    assert "its stderr ended: app: hipMalloc failed: hipErrorOutOfMemory (out of memory allocating 64 GiB) | " \
           "app: aborting" in line
    (run_dir,) = _runs(standins.work)
    assert line.endswith(f"raw outputs kept in {run_dir}")
    assert "hipErrorOutOfMemory" in (run_dir / "logs" / "pass_1.stderr.log").read_text()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1].startswith("Z")  # a zombie no one reaped is dead too
    except FileNotFoundError:
        return True


def test_timeout_kills_the_process_group(standins, cli, monkeypatch, tmp_path) -> None:  # noqa: ANN001
    _small_amd(standins.data)
    pids = tmp_path / "pids"
    monkeypatch.setenv("STANDIN_APP", "hang")
    monkeypatch.setenv("STANDIN_PIDFILE", str(pids))
    start = time.monotonic()
    line = _error_line(cli("run", "--profiler", "rocprofv3", "--timeout", "1", "--", "./app"))
    assert time.monotonic() - start < 8
    assert "timed out after 1 s in pass 1 of 1 (rocprofv3 running ./app); its process group was killed" in line
    (run_dir,) = _runs(standins.work)
    assert line.endswith(f"raw outputs kept in {run_dir}")
    (pid,) = map(int, pids.read_text().split())
    deadline = time.monotonic() + 3
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid), "the application outlived the timeout"


def test_progress_while_a_pass_runs(standins, monkeypatch, tmp_path) -> None:  # noqa: ANN001
    _small_amd(standins.data)
    monkeypatch.setenv("STANDIN_APP", "hang")
    monkeypatch.setenv("STANDIN_PIDFILE", str(tmp_path / "pids"))
    lines: list[str] = []
    with pytest.raises(ProfilerError, match="timed out after 0.8 s"):
        run("./app", profiler="rocprofv3", timeout=0.8, heartbeat=0.25, progress=lines.append)
    assert lines[0].startswith("pass 1 of 1 (rocprofv3: kernel trace")
    assert any(line.startswith("pass 1 of 1 still running, elapsed ") for line in lines[1:]), lines


def test_bad_expectation_runs_nothing(standins, cli) -> None:  # noqa: ANN001
    result = cli("run", "--profiler", "rocprofv3", "--expect", "*", "hbm_bw >= lots", "--", "./app")
    assert result.code == 2 and "perfcheck: error: expectation 'hbm_bw >= lots'" in result.err
    assert standins.calls() == [] and _runs(standins.work) == []


def test_run_dir_must_be_new(standins, cli) -> None:  # noqa: ANN001
    (standins.work / "out").mkdir()
    (standins.work / "out" / "old.csv").write_text("x")
    result = cli("run", "--profiler", "rocprofv3", "--run-dir", "out", "--", "./app")
    assert result.code == 2 and "already holds files" in result.err
    _small_amd(standins.data)
    assert cli("run", "--profiler", "rocprofv3", "--run-dir", "fresh", "--", "./app").code == 0
    assert (standins.work / "fresh" / "pass_1" / "run_kernel_trace.csv").is_file()


def test_unmatched_launches_are_reported(standins, cli) -> None:  # noqa: ANN001
    _small_amd(standins.data)
    (standins.data / "counter_collection.csv").write_text(SMALL_COUNTERS.rsplit("\n", 2)[0] + "\n")  # one dispatch
    standins.values({"FETCH_SIZE": 8, "WRITE_SIZE": 8})
    result = cli("run", "--profiler", "rocprofv3", "--counter", "FETCH_SIZE", "--json", "--", "./app")
    assert result.code == 0, result.err
    (warning,) = result.json()["warnings"]
    assert warning["count"] == 1 and "pass 2 saw fewer launches than the trace pass" in warning["message"]


# --- suites with a command, and the pytest fixture ----------------------------------------------------


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_config_suite_with_a_command(standins, cli) -> None:  # noqa: ANN001
    _small_amd(standins.data)
    (standins.work / "perfcheck.toml").write_text(
        '[suites.gpu]\ncommand = "./app --n 8"\nprofiler = "rocprofv3"\n'
        '[suites.gpu.expect]\n"stream_copy*" = ["duration <= baseline + 50%", "duration <= 1 ms"]\n')
    first = cli("check", "--config", "perfcheck.toml")
    assert first.code == 0, first.err
    assert "baseline recorded: gpu" in first.out and "profiled with rocprofv3: 1 pass" in first.err
    second = cli("check", "--config", "perfcheck.toml")
    assert second.code == 0 and "baseline compared: gpu" in second.out
    assert len(_runs(standins.work)) == 2  # one run directory per check, both kept
    assert [c["argv"][-3:] for c in standins.calls("rocprofv3")] == [["./app", "--n", "8"]] * 2


def test_xdist_workers_profile_a_command_suite_once(standins) -> None:  # noqa: ANN001
    """Every pytest-xdist worker collects the config suites; the command must still
    run under the profiler once, and every worker check that one run."""
    pytest.importorskip("xdist")
    _small_amd(standins.data)
    (standins.work / "perfcheck.toml").write_text(
        '[suites.gpu]\ncommand = "./app --n 8"\nprofiler = "rocprofv3"\n'
        '[suites.gpu.expect]\n"stream_copy*" = ["duration <= 1 ms", "calls == 2", "duration >= 1 ns"]\n')
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--perf", "-n", "2", "-p", "no:cacheprovider", "-q", "perfcheck.toml"],
        capture_output=True, text=True, cwd=standins.work,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert len(standins.calls("rocprofv3")) == 1
    assert len(_runs(standins.work)) == 1


def test_config_suite_command_and_profiles_conflict(standins, cli) -> None:  # noqa: ANN001
    (standins.work / "perfcheck.toml").write_text(
        '[suites.gpu]\ncommand = "./app"\nprofiles = ["x.csv"]\nprofiler = "rocprofv2"\n'
        '[suites.gpu.expect]\n"*" = ["duration <= 1 ms"]\n')
    (standins.work / "x.csv").write_text(SMALL_RESULTS)
    result = cli("check", "--config", "perfcheck.toml")
    assert result.code == 2 and "give either profiles" in result.err


@pytest.fixture
def _heavy_modules_loaded_once() -> None:
    """pytester's in-process runs drop the modules a run imported; numpy cannot be
    imported twice in one process (as in test_plugin.py)."""
    import perfcheck.analysis  # noqa: F401
    import perfcheck.baseline  # noqa: F401
    import perfcheck.checking  # noqa: F401
    import perfcheck.ingest  # noqa: F401
    import perfcheck.metrics.counters  # noqa: F401
    import perfcheck.ingest.runs  # noqa: F401


def test_perf_run_fixture(standins, pytester, _heavy_modules_loaded_once) -> None:  # noqa: ANN001
    _small_amd(standins.data)
    shutil.copy(standins.work / "app", pytester.path / "app")
    pytester.makepyfile(test_gpu="""
        import os

        def test_profiled(perf):
            perf.run("./app", profiler="rocprofv3", expect={"stream_copy*": ["duration <= 20 us"]})
            assert len(perf.last_run.plan.passes) == 1
            perf.expect("stream_copy*", "calls == 2")

        def test_too_slow(perf):
            perf.run("./app", profiler="rocprofv3", expect={"*": ["duration <= 1 us"]})

        def test_no_profiler(perf, monkeypatch):
            monkeypatch.setenv("PATH", os.devnull)
            perf.run("./app", profiler="ncu")
    """)
    result = pytester.runpytest("--perf", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*ncu is not installed (not found on PATH)*"])
    result.stdout.fnmatch_lines(["*duration 10 us*expected <= 1 us*"])


def test_suite_settings_with_a_command(tmp_path: Path) -> None:
    from perfcheck.config import ConfigError, SuiteSettings, resolver

    config = tmp_path / "perfcheck.toml"
    body = ('[suites.g]\ncommand = ["./app", "--n", 8]\nprofiler = "ncu"\nlauncher = "srun -n 2"\ntimeout = 90\n'
            'rank = 1\n[suites.g.expect]\n"*" = ["duration <= 1 ms"]\n')
    config.write_text(body)
    suite = resolver(config=config, env={}, cwd=tmp_path).suite("g")
    assert (suite.command, suite.profiler, suite.launcher, suite.timeout, suite.rank) == (
        ("./app", "--n", "8"), "ncu", "srun -n 2", 90.0, 1)
    assert suite.profiles == () and suite.workdir == tmp_path.resolve()
    assert SuiteSettings.from_dict(suite.as_dict()) == suite  # what pytest-xdist workers send
    for bad, what in (("timeout = 90", "timeout = -1"), ("rank = 1", 'rank = "first"')):
        config.write_text(body.replace(bad, what))
        with pytest.raises(ConfigError, match=what.split(" ")[0]):
            resolver(config=config, env={}, cwd=tmp_path).suite("g")
    config.write_text(body.replace('profiler = "ncu"', 'profiler = "ncu"\nclock_control = "boost"'))
    with pytest.raises(ConfigError, match="clock_control must be one of base, none, not 'boost'"):
        resolver(config=config, env={}, cwd=tmp_path).suite("g")
    config.write_text(body.replace('profiler = "ncu"', 'profiler = "rocprof"\nclock_control = "none"'))
    with pytest.raises(ConfigError, match="clock_control is an ncu setting"):
        resolver(config=config, env={}, cwd=tmp_path).suite("g")
    config.write_text(body.replace('profiler = "ncu"', 'profiler = "ncu"\nclock_control = "none"'))
    suite = resolver(config=config, env={}, cwd=tmp_path).suite("g")
    assert suite.clock_control == "none" and SuiteSettings.from_dict(suite.as_dict()) == suite
    env = {"PERFCHECK_LAUNCHER": "mpirun -np 2"}  # the environment wins over the file
    config.write_text(body)
    assert resolver(config=config, env=env, cwd=tmp_path).suite("g").launcher == "mpirun -np 2"
