"""PyTorch profiler (Kineto) Chrome traces on the real files in ../shared/profiles/kineto.
Expected values are read by hand from the traces' own events (quoted below)."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pandas as pd
import pytest

from conftest import one_line_error, profile
from perfcheck.errors import InputError
from perfcheck.ingest import detect, read_profile
from perfcheck.ingest.formats import Sniff
from perfcheck.schema import ALL

A100 = "kineto/hta-critical-path-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz"
MI250 = "kineto/hta-amd-mi250-rocm6.2-minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
H100_BEFORE = "kineto/pytorch-kineto-unittest-h100-sync-fix-pair/before_fix_trace.json"
H100_AFTER = "kineto/pytorch-kineto-unittest-h100-sync-fix-pair/after_fix_trace.json"


def test_a100_gzip_trace_nvidia_launch_args():
    p = read_profile(profile(A100))
    src = p.source
    # deviceProperties: 8 x "NVIDIA A100-PG509-200", computeMajor 8 / computeMinor 0; distributedInfo rank 0
    assert (src.format, src.tool, src.device, src.arch, src.rank) == ("kineto", "kineto", "NVIDIA A100-PG509-200",
                                                                      "sm_80", 0)
    d = p.dispatches
    assert len(d) == 79 and d["kernel"].nunique() == 16  # 79 cat:"kernel" events, 16 distinct names
    assert set(d["device_id"]) == {0} and set(d["stream_id"]) == {7, 20}
    # {"name": "void cask_cudnn::computeOffsetsKernel<false, false>(...)", "ts": 1695835583881571, "dur": 4,
    #  "args": {"device": 0, "context": 1, "stream": 7, "correlation": 5110, "registers per thread": 16,
    #  "shared memory": 0, "blocks per SM": 0.11111111, "warps per SM": 0.8888889, "grid": [12, 1, 1],
    #  "block": [256, 1, 1], "est. achieved occupancy %": 1}}
    row = d.set_index("correlation_id").loc[5110]
    assert row["kernel"].startswith("void cask_cudnn::computeOffsetsKernel<false, false>(")
    assert row["duration"] == pytest.approx(4e-6)
    assert row["start_ns"] == 1695835583881571000 and row["end_ns"] == 1695835583881575000  # integer µs kept exact
    assert (row["grid_x"], row["workgroup_x"], row["workgroups"], row["grid_size"]) == (12 * 256, 256, 12, 3072)
    assert (row["registers"], row["lds_per_workgroup"], row["wave_size"], row["context_id"]) == (16, 0, 32, 1)
    assert row["raw.est. achieved occupancy %"] == 1
    assert row["raw.blocks per SM"] == pytest.approx(0.11111111)
    # ampere_sgemm_32x32_sliced1x4_tn: 6 launches, dur 822+... µs summing to 2621 µs
    sgemm = d[d["kernel"] == "ampere_sgemm_32x32_sliced1x4_tn"]
    assert len(sgemm) == 6 and sgemm["duration"].sum() == pytest.approx(2621e-6)
    assert set(sgemm["lds_per_workgroup"]) == {32768} and set(sgemm["registers"]) == {86}
    # GNU demangler spelling kept: "(anonymous namespace)" and "4ul"
    assert any("(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, " in k for k in d["kernel"])


def test_amd_trace_joins_the_launch_call():
    p = read_profile(profile(MI250))
    # deviceProperties say only "AMD Radeon Graphics" 9.0; Tensile names carry ISA90a
    assert (p.source.device, p.source.arch) == ("AMD Radeon Graphics", "gfx90a")
    d = p.dispatches.set_index("correlation_id")
    assert len(d) == 14 and set(d["device_id"]) == {2} and set(d["wave_size"]) == {64}
    assert "registers" not in d.columns  # AMD kernel events carry no register counts
    # correlation 125: kernel event {"dur": 11.04, "args": {"device": 2, "stream": 0, "kind": "Dispatch Kernel"}};
    # its hipLaunchKernel: {"grid": [1, 1, 1], "block": [128, 1, 1], "shared memory": 512, "kernel": "void
    # at::native::reduce_kernel<512, 1, ...>"}
    reduce = d.loc[125]
    assert reduce["kernel"].startswith("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, ")
    assert (reduce["grid_x"], reduce["workgroup_x"], reduce["workgroups"], reduce["lds_per_workgroup"]) == (128, 128, 1, 512)
    assert reduce["duration"] == pytest.approx(11.04e-6)
    # float µs with ns decimals: ts 4203669604337.731 -> 4203669604337731 ns
    assert reduce["start_ns"] == 4203669604337731
    # correlation 121: hipExtModuleLaunchKernel {"grid": [512, 1, 1], "block": [256, 1, 1]}: a global size in
    # work-items (HIP API), so 2 workgroups, not 512
    gemm = d.loc[121]
    assert gemm["kernel"].startswith("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_")
    assert (gemm["grid_x"], gemm["workgroups"]) == (512, 2)
    assert gemm["duration"] == pytest.approx(17.6e-6)
    # hipLaunchKernel {"grid": [3, 1, 1], "block": [128, 1, 1]} (correlation 118): blocks, like CUDA
    assert (d.loc[118, "grid_x"], d.loc[118, "workgroups"]) == (384, 3)


@pytest.mark.parametrize("relative", [H100_BEFORE, H100_AFTER])
def test_h100_unit_test_recording_schema(relative):
    """Mock events in a real writer's output: schema only (no timing is checked)."""
    p = read_profile(profile(relative))
    assert (p.source.device, p.source.arch) == ("NVIDIA H100", "sm_90")
    assert p.source.tool_version == "schema 1, CUPTI 28"
    d = p.dispatches
    assert d["kernel"].tolist() == ["Kernel"]
    assert (d.loc[0, "grid_size"], d.loc[0, "workgroup_size"], d.loc[0, "registers"]) == (1, 1, 0)
    occupancy = [c for c in d.columns if c.startswith("raw.occupancy.")]
    if relative == H100_BEFORE:
        # "occupancy": {"activeBlocksPerMultiprocessor": 32, "blockLimitRegs": 2147483647, "blockLimitSharedMem": 228, ...}
        assert d.loc[0, "raw.occupancy.activeBlocksPerMultiprocessor"] == 32
        assert d.loc[0, "raw.occupancy.blockLimitSharedMem"] == 228
        assert math.isnan(d.loc[0, "raw.occupancy.blockLimitRegs"])  # INT_MAX = no limit, not a number
        assert "raw.occupancy.limitingFactors" not in d.columns  # text ("BLOCKS")
    else:
        assert occupancy == []  # the nested object is optional


def test_sniffed_by_magic_bytes_not_by_name(tmp_path: Path):
    gz = profile(A100)
    renamed = tmp_path / "trace.bin"
    renamed.write_bytes(gz.read_bytes())
    assert detect(renamed, "profile").name == "kineto"
    plain = tmp_path / "trace.txt"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    assert detect(plain, "profile").name == "kineto"
    assert len(read_profile(plain).dispatches) == 79
    # rocprof v1's Chrome trace is another reader's
    rocprof_json = profile("rocprof-v1/kokkos-gfx906/results.json")
    assert detect(rocprof_json, "profile").name == "rocprof-json"


def test_kernel_category_is_case_insensitive(tmp_path: Path):
    """2021 traces write "cat": "Kernel"."""
    text = gzip.decompress(profile(A100).read_bytes()).decode().replace('"cat": "kernel"', '"cat": "Kernel"')
    path = tmp_path / "old.json"
    path.write_text(text)
    assert len(read_profile(path).dispatches) == 79


def test_cut_off_traces_are_one_line_errors(cli, tmp_path: Path):
    data = profile(A100).read_bytes()
    cut_gz = tmp_path / "cut.json.gz"
    cut_gz.write_bytes(data[: len(data) // 2])
    one_line_error(cli("inspect", cut_gz), cut_gz, "gzip")
    cut = tmp_path / "cut.json"
    cut.write_bytes(gzip.decompress(data)[:100_000])
    line = one_line_error(cli("inspect", cut), cut, "not valid JSON")
    assert f"{cut}:" in line
    with pytest.raises(InputError):
        read_profile(cut)


def test_inspect_end_to_end(cli):
    result = cli("inspect", "--json", profile(A100))
    assert result.code == 0, result.err
    kernels = {k["kernel"]: k for k in result.json()["kernels"]}
    sgemm = kernels["ampere_sgemm_32x32_sliced1x4_tn"]
    assert sgemm["calls"] == 6 and sgemm["metrics"]["duration_total"] == pytest.approx(2621e-6)
    # sm_80, 128 threads, 86 registers, 32 KiB shared memory per block: 33 KiB with the 1 KiB the
    # driver reserves per block, 4 blocks in 164 KiB = 16 of 64 warps; Kineto's own
    # "est. achieved occupancy %" for these launches says 25 as well.
    assert sgemm["metrics"]["occupancy_pct"] == pytest.approx(25.0)
    assert sgemm["labels"]["occupancy_limiter"] == "shared"


def test_impossible_values_become_missing_with_a_warning(tmp_path: Path, cli):
    path = tmp_path / "odd.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": ['
                    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e400, "dur": 1e400, "args": {"device": 0}},'
                    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 10, "dur": -1, "args": {"device": 0}},'
                    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 20, "dur": 2.5, "args": {"device": 0, "grid": "x"}},'
                    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 30, "dur": 1, "args": {"grid": [1, 2, 3], '
                    '"block": [0, 0, 0]}}]}')
    p = read_profile(path)
    assert p.dispatches["duration"].isna().tolist() == [True, True, False, False]
    assert p.dispatches["workgroups"].isna().all()  # block [0, 0, 0] is no launch geometry
    assert p.dispatches["duration"].iloc[2] == pytest.approx(2.5e-6)
    whats = [o.what for o in p.oddities]
    assert "kernel event without a finite numeric 'dur'; duration left empty" in whats
    assert any(w.startswith("end timestamp before begin") for w in whats)
    assert "grid or block with a dimension below 1; launch geometry left empty" in whats
    assert cli("inspect", path).code == 0


def test_h100_occupancy_agrees_with_the_recorded_calculator(cli):
    """before_fix's nested occupancy object (CUDA's occupancy calculator, as Kineto recorded it):
    activeBlocksPerMultiprocessor 32, limitingFactors "BLOCKS". perfcheck's own rules for
    sm_90 on the same launch (1 thread, 0 registers, 0 B shared): 32 one-warp blocks, limited by
    the block count, 32 of 64 warps."""
    result = cli("inspect", "--json", profile(H100_BEFORE))
    assert result.code == 0, result.err
    (kernel,) = result.json()["kernels"]
    assert kernel["metrics"]["workgroups_per_cu"] == 32
    assert kernel["labels"]["occupancy_limiter"] == "blocks"
    assert kernel["metrics"]["occupancy_pct"] == pytest.approx(50.0)


def test_trace_without_schema_version(tmp_path: Path):
    """Early Kineto traces: no schemaVersion, capitalised categories."""
    text = gzip.decompress(profile(A100).read_bytes()).decode()
    text = text.replace('"schemaVersion": 1,', "").replace('"cat": "kernel"', '"cat": "Kernel"')
    path = tmp_path / "early.json"
    path.write_text(text)
    assert detect(path, "profile").name == "kineto"
    assert len(read_profile(path).dispatches) == 79


def test_arguments_that_are_not_integers_become_missing(tmp_path: Path):
    path = tmp_path / "odd-args.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": ['
                    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"device": [0], '
                    '"correlation": {"a": 1}, "registers per thread": 1e308, "shared memory": 1180591620717411303424, '
                    '"grid": [1, true, 1], "block": [32, 1, 1], "blocks per SM": [1]}},'
                    '{"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "ts": 0, "dur": 1, '
                    '"args": {"correlation": [5], "grid": [1, 1, 1]}}]}')
    p = read_profile(path)
    row = p.dispatches.iloc[0]
    for column in ("device_id", "correlation_id", "registers", "lds_per_workgroup", "grid_y", "workgroups"):
        assert pd.isna(row[column]), column
    assert math.isnan(row["raw.blocks per SM"]) and row["workgroup_x"] == 32
    assert any(o.what.startswith("kernel arguments that are not integers") and o.count == 5 for o in p.oddities)  # device, correlation, registers, shared memory, grid y


@pytest.mark.parametrize("major", ["8.5", '"x"', "1e400", "true", "-1"])
def test_a_damaged_compute_capability_is_no_architecture(tmp_path: Path, cli, major: str):
    """computeMajor 8.5 read as sm_80, 1e400 and text ended in an internal error or a
    bare ValueError: now the architecture is unknown, with a warning."""
    path = tmp_path / "cc.json"
    path.write_text('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "X", "computeMajor": '
                    + major + ', "computeMinor": 0, "warpSize": 32}], "traceEvents": [{"ph": "X", "cat": "kernel", '
                    '"name": "k", "ts": 1, "dur": 1, "args": {"device": 0}}]}')
    p = read_profile(path)
    assert p.source.arch is None
    assert any("no compute capability" in o.what for o in p.oddities)
    assert cli("inspect", path).code == 0


def test_a_rank_that_is_not_a_number_is_no_rank(tmp_path: Path):
    path = tmp_path / "rank.json"
    path.write_text('{"schemaVersion": 1, "distributedInfo": {"rank": true}, "traceEvents": [{"ph": "X", '
                    '"cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {}}]}')
    assert read_profile(path).source.rank is None


def test_a_lone_surrogate_escape_in_a_name_is_shown_not_fatal(tmp_path: Path, cli):
    """JSON allows '\\ud800' alone; Python decodes it to a character no UTF-8 writer can
    encode, and the whole trace failed to read (UnicodeEncodeError from pyarrow)."""
    path = tmp_path / "surrogate.json"
    path.write_text('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU \\udc80", "computeMajor": 9, '
                    '"computeMinor": 0}], "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\\ud800x", '
                    '"ts": 1, "dur": 2, "args": {"device": 0, "kind": "\\udc00"}}, {"ph": "X", "cat": "kernel", '
                    '"name": "\\ud83d\\ude00", '
                    '"ts": 3, "dur": 2, "args": {"device": 0}}]}')
    p = read_profile(path)
    assert list(p.dispatches["kernel"]) == ["k\ufffdx", "\U0001f600"] and p.source.device == "GPU \ufffd"
    result = cli("check", path, "--expect", "k*", "duration <= 1 s", "--junit", tmp_path / "j.xml",
                 "--markdown", tmp_path / "s.md")
    assert result.code == 0, result.err


@pytest.mark.parametrize("compress", [False, True])
def test_traceevents_after_large_metadata_is_sniffed(tmp_path: Path, compress: bool) -> None:
    # Real traces (a BERT run on H100 and MI300X) put 20-30 KiB of deviceProperties /
    # distributedInfo before "traceEvents", and may have no schemaVersion near the top.
    import json

    real = json.loads(gzip.decompress(profile(A100).read_bytes()))
    doc = {"deviceProperties": real["deviceProperties"] * 24, "distributedInfo": real["distributedInfo"],
           "traceEvents": real["traceEvents"], "schemaVersion": real["schemaVersion"]}
    text = json.dumps(doc, indent=1)
    assert text.index('"traceEvents"') > 30 * 1024 and text.index('"schemaVersion"') > 64 * 1024
    path = tmp_path / ("trace.json.gz" if compress else "trace.json")
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    assert detect(path, "profile").name == "kineto"
    assert len(read_profile(path).dispatches) == 79


def _table(path: Path):
    p = read_profile(path)
    return p.dispatches, p.oddities, p.sources


# AMD-like kernels joined to their launch calls, with damaged arguments on either side,
# some batches without an argument that others have: what the columns fill in must be
# what a whole-document read would have had.
_DAMAGED = ('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "AMD Radeon Graphics", "warpSize": 64, '
            '"computeMajor": 9, "computeMinor": 0}], "traceEvents": ['
            + ",\n".join(
                '{"ph": "X", "cat": "cuda_runtime", "name": "%s", "ts": %d, "dur": 1, "args": {"correlation": %s, '
                '"grid": %s, "block": [64, 1, 1], "shared memory": %s, "kernel": "%s"}},\n'
                '{"ph": "X", "cat": "kernel", "name": "k%d", "ts": %d, "dur": 2, "args": {"device": 0, "stream": %s, '
                '"correlation": %d%s}}'
                % ("hipExtModuleLaunchKernel" if i % 3 == 0 else "hipLaunchKernel", 10 * i,
                   '"x"' if i % 17 == 5 else str(i), "[1, true, 1]" if i % 13 == 4 else "[%d, 1, 1]" % (64 * i + 64),
                   "1.5" if i % 11 == 3 else "1024", "" if i % 7 == 2 else "Cijk_ISA90a_%d" % (i % 4), i % 5,
                   10 * i + 1, '"0x0"' if i % 19 == 7 else "0", i,
                   ', "grid": [2, 2, 1], "block": [0, 1, 1]' if 40 <= i < 60 else "")
                for i in range(120))
            + "]}")


@pytest.mark.parametrize("trace", [A100, MI250, H100_BEFORE, H100_AFTER, "damaged"])
def test_any_read_size_and_chunk_size_give_the_same_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          trace: str):
    """The kernel table streams the trace: reads that end anywhere (inside a name, between
    an AMD kernel and the launch call it is joined to) and chunks of a few kernels give
    the table, warnings and source of one read in one chunk."""
    from perfcheck.ingest import jsonstream, kineto

    if trace == "damaged":
        path = tmp_path / "damaged.json"
        path.write_text(_DAMAGED)
    else:
        path = profile(trace)
    expected = _table(path)
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 997)
    monkeypatch.setattr(kineto, "CHUNK_ROWS", 5)
    frames, oddities, sources = _table(path)
    pd.testing.assert_frame_equal(frames, expected[0])
    assert oddities == expected[1] and sources == expected[2]
    assert len(list(kineto._scan(path, ALL).chunks)) == -(-len(expected[0]) // 5)


def _synthetic_trace(path: Path, kernels: int) -> None:
    """A Kineto-like trace: NVIDIA kernel events with every launch argument, each after its
    cudaLaunchKernel call and a cpu_op, as torch.profiler writes them."""
    import json

    with open(path, "w") as out:
        out.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", '
                  '"computeMajor": 8, "computeMinor": 0, "warpSize": 32}], "traceEvents": [\n')
        for i in range(kernels):
            ts = 1_000.0 + 10.0 * i
            events = [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 5.0,
                 "args": {"External id": i, "Sequence number": i, "Fwd thread id": 0}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 1,
                 "dur": 2.0, "args": {"cbid": 211, "correlation": i, "External id": i}},
                {"ph": "X", "cat": "kernel", "name": f"void gemm_{i % 7}<float>(float*, float const*)", "pid": 0,
                 "tid": 7, "ts": ts + 3, "dur": 4.25, "args": {
                     "External id": i, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": i,
                     "registers per thread": 86, "shared memory": 32768, "blocks per SM": 2.5,
                     "warps per SM": 10.0, "grid": [160, 1, 1], "block": [128, 1, 1],
                     "est. achieved occupancy %": 25}},
            ]
            out.write(("" if i == 0 else ",\n") + ",\n".join(json.dumps(e) for e in events))
        out.write("\n]}\n")


def test_the_kernel_table_is_read_in_bounded_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """json.load of a trace holds every event as Python objects, several times the file
    (about 9x for a 1 GB trace); the streamed read holds a batch of events, the typed
    columns and one chunk of the table at a time. Measured with tracemalloc (allocations,
    not timing) against json.load of the same file, the chunks consumed as ``check``
    and ``inspect`` consume them: under a fifth of it, with batches of 64 KiB of text."""
    import json
    import tracemalloc

    from perfcheck.ingest import jsonstream, kineto, open_profile

    path, warm = tmp_path / "trace.json", tmp_path / "warm.json"
    _synthetic_trace(path, 4_000)
    _synthetic_trace(warm, 10)
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 1 << 16)
    monkeypatch.setattr(kineto, "CHUNK_ROWS", 1_000, raising=False)  # without chunks, the bound is what fails
    list(open_profile(warm).chunks)  # the modules a first read imports are no part of the read

    def peak(read):  # noqa: ANN001, ANN202 - a callable and its traced peak
        tracemalloc.start()
        try:
            result = read()
            return result, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    rows, ours = peak(lambda: sum(len(chunk) for chunk in open_profile(path).chunks))
    loaded, theirs = peak(lambda: json.loads(path.read_bytes()))
    assert rows == 4_000 == sum(e["cat"] == "kernel" for e in loaded["traceEvents"])
    assert ours < theirs / 5, (ours, theirs)
    frames, oddities, sources = _table(path)
    assert frames["workgroups"].eq(160).all() and not oddities and sources[0].arch == "sm_80"
