"""No input can crash, hang or lie: one test per class of damage the fuzzer found
(tests/fuzzing.py), each on a real file with one small edit.

The rules: a non-finite or impossible value is missing (NaN, null in JSON) with one
warning per file naming the column and the count, or a located one-line error when
the row is unusable; peaks are positive and finite; JSON output is strict JSON.
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fuzzing
from conftest import one_line_error, profile
from perfcheck.ingest.tabular import split_csv_line

KERNEL_TRACE = "rocprofv3/rocprofiler-sdk-docs-2025/kernel_trace.csv"
SQ_WAVES = "omniperf/rocprofiler-compute-vcopy-MI200/SQ_LEVEL_WAVES.csv"
PMC_PERF = "omniperf/rocm-systems-vcopy-MI350/pmc_perf_0.csv"
STATS = "rocprof-v1/batched_gemm-mi300x/results.stats.csv"
NVPROF_TRACE = "nvprof/leimingyu-magus/matrixMul_trace.csv"
NVPROF_METRICS = "nvprof/leimingyu-magus/matrixMul_metrics.csv"
ROOFLINE = "omniperf/omniperf-v1-TCC-mi200/roofline.csv"
MIXBENCH = "mixbench/pawsey-mulan-mi100/mixbench-log.txt"
ROCPD = "rocprofv3/batched_gemm-mi300x-rocpd/15_results.db"


def edited(tmp_path: Path, relative: str, old: str, new: str, *, count: int = 1, line: int | None = None) -> Path:
    """A copy of a real file with ``old`` replaced by ``new`` (``count`` times, or on
    the 1-based ``line`` only)."""
    text = profile(relative).read_bytes().decode("utf-8")
    if line is not None:
        lines = text.split("\n")
        assert old in lines[line - 1], lines[line - 1]
        lines[line - 1] = lines[line - 1].replace(old, new, 1)
        text = "\n".join(lines)
    else:
        assert text.count(old) >= count, (old, text.count(old))
        text = text.replace(old, new, count)
    path = tmp_path / Path(relative).name
    path.write_text(text)
    return path


def strict(out: str) -> dict:
    def refuse(token: str) -> object:
        raise AssertionError(f"{token} is not JSON")

    return json.loads(out, parse_constant=refuse)


def warned(result, path: Path, *fragments: str) -> str:
    lines = [line for line in result.err.splitlines() if str(path) in line and all(f in line for f in fragments)]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("perfcheck: warning: ")
    return lines[0]


# --- the tabular splitter ----------------------------------------------------------


def test_splitter_takes_fields_over_128_kib_and_bare_cr() -> None:
    long = "x" * (200 * 1024)
    assert split_csv_line(f'a,"{long}",c') == ["a", long, "c"]
    assert split_csv_line(f"a,{long},c") == ["a", long, "c"]
    assert split_csv_line('"k\r1",2\r3') == ["k\r1", "2\r3"]
    assert split_csv_line('"a ""q"", b",c') == ['a "q", b', "c"]
    assert split_csv_line("") == []


@pytest.mark.parametrize("relative", [KERNEL_TRACE, PMC_PERF, NVPROF_METRICS])
def test_long_field_and_cr_only_endings_end_in_a_result_or_one_line(cli, tmp_path: Path, relative: str) -> None:
    lines = profile(relative).read_text().split("\n")
    lines[1] = lines[1] + ",".join(["", "y" * (140 * 1024)])
    long = tmp_path / ("long-" + Path(relative).name)
    long.write_text("\n".join(lines))
    cr = tmp_path / ("cr-" + Path(relative).name)
    cr.write_text(profile(relative).read_text().replace("\r\n", "\n").replace("\n", "\r"))
    for path in (long, cr):
        result = cli("inspect", "--json", path)
        if result.code != 0:
            one_line_error(result, path)
        else:
            strict(result.out)


# --- impossible values in integer and counter columns --------------------------------


def test_inf_and_1e308_in_omniperf_launch_columns_are_missing_with_one_warning(cli, tmp_path: Path) -> None:
    # SQ_LEVEL_WAVES.csv row 2: ...,Grid_Size 1048576, Workgroup_Size 256, LDS 0, Scratch 0, Arch_VGPR 8,...
    # every dispatch of the kernel (a resource is the maximum over its dispatches)
    dispatches = profile(SQ_WAVES).read_text().count(",1048576,256,0,0,8,0,16,")
    path = edited(tmp_path, SQ_WAVES, ",1048576,256,0,0,8,0,16,", ",1048576,256,0,0,inf,0,1e308,", count=dispatches)
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    doc = strict(result.out)
    kernel = doc["kernels"][0]
    assert kernel["metrics"]["vgpr"] is None and kernel["metrics"]["sgpr"] is None
    line = warned(result, path, "left empty")
    assert f"{dispatches} in 'vgpr'" in line and f"{dispatches} in 'sgpr'" in line
    assert [w["count"] for w in doc["warnings"] if "left empty" in w["message"]] == [dispatches]  # rows


def test_inf_in_omniperf_pmc_perf_timestamps_and_counts(cli, tmp_path: Path) -> None:
    text = profile(PMC_PERF).read_text().split("\n")
    header = split_csv_line(text[0])
    row = split_csv_line(text[1])
    row[header.index("Start_Timestamp")] = "inf"
    row[header.index("Grid_Size")] = "-inf"
    text[1] = ",".join(f'"{f}"' if "," in f else f for f in row)
    path = tmp_path / "pmc_perf_0.csv"
    path.write_text("\n".join(text))
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    strict(result.out)
    line = warned(result, path, "left empty")
    assert "'grid_size'" in line and "'start_ns'" in line


def test_negative_registers_and_sizes_are_missing(cli, tmp_path: Path) -> None:
    # rocprofv3 kernel trace, first dispatch: LDS 0, scratch 0, VGPR 8, AGPR 0, SGPR 16
    path = edited(tmp_path, KERNEL_TRACE, ",0,0,8,0,16,64,1,1,1024,1024,1", ",-1,0,-8,0,16,64,1,1,1024,1024,1")
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    doc = strict(result.out)
    for kernel in doc["kernels"]:
        for name, value in kernel["metrics"].items():
            assert value is None or value >= 0, (kernel["kernel"], name, value)
    line = warned(result, path, "left empty")
    assert "1 in 'vgpr'" in line and "1 in 'lds_per_workgroup'" in line


def test_fractional_and_infinite_grid_through_conform(cli, tmp_path: Path) -> None:
    # nvprof: the first kernel row's grid (20,10,1) -> (2.5, inf, 1); was a TypeError in schema.conform
    path = edited(tmp_path, NVPROF_TRACE, ",20,10,1,32,32,1,27,", ",2.5,inf,1,32,32,1,27,")
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    strict(result.out)
    warned(result, path, "left empty")


def test_huge_timestamp_digits_are_a_located_error(cli, tmp_path: Path) -> None:
    path = edited(tmp_path, KERNEL_TRACE, "1550151853029637", "99999999999999999999999")
    one_line_error(cli("inspect", path), path, ":2:", "99999999999999999999999")


def test_to_integer_beyond_64_bits_is_located_not_overflow() -> None:
    from perfcheck.errors import InputError
    from perfcheck.ingest.tabular import to_integer

    exact = to_integer(pd.Series(["12074903646084267", ""]), path=Path("t.csv"), column="c", lines=[2, 3])
    assert exact.tolist() == [12074903646084267, pd.NA]
    with pytest.raises(InputError, match=r"t.csv:3: column 'c': '99999999999999999999999' is beyond the 64-bit range"):
        to_integer(pd.Series(["1", "99999999999999999999999"]), path=Path("t.csv"), column="c", lines=[2, 3])


def test_rocpd_text_and_huge_values_in_dispatch_columns(cli, tmp_path: Path) -> None:
    import shutil
    import sqlite3

    source = profile(ROCPD)
    huge = tmp_path / "huge.db"
    shutil.copyfile(source, huge)
    def table(db: sqlite3.Connection) -> str:  # rocpd_kernel_dispatch is a view over rocpd_kernel_dispatch_<guid>
        return db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_kernel_dispatch%'").fetchone()[0]

    with sqlite3.connect(huge) as db:
        db.execute(f'UPDATE "{table(db)}" SET grid_size_x = 1e308')
    result = cli("inspect", "--json", huge)
    assert result.code == 0, result.err
    strict(result.out)
    assert "'grid_x'" in warned(result, huge, "left empty")

    text = tmp_path / "text.db"
    shutil.copyfile(source, text)
    with sqlite3.connect(text) as db:
        db.execute(f'UPDATE "{table(db)}" SET workgroup_size_x = \'abc\'')
    one_line_error(cli("inspect", text), text, "'abc' is not a number")


# --- per-kernel statistics ---------------------------------------------------------


def test_empty_call_count_gives_no_count_and_no_mean(cli, tmp_path: Path) -> None:
    # results.stats.csv: "name",1,331634184678,331634184678,100.0 -> an empty Calls cell
    path = edited(tmp_path, STATS, ")\",1,331634184678,", ")\",,331634184678,")
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    kernel = strict(result.out)["kernels"][0]
    assert kernel["calls"] is None
    assert kernel["metrics"]["duration_mean"] is None
    assert kernel["metrics"]["duration_total"] == pytest.approx(331.634184678)


def test_zero_or_negative_calls_are_missing(cli, tmp_path: Path) -> None:
    path = edited(tmp_path, STATS, ")\",1,331634184678,", ")\",0,331634184678,")
    result = cli("inspect", "--json", path)
    assert result.code == 0, result.err
    assert strict(result.out)["kernels"][0]["calls"] is None
    assert "1 in 'calls'" in warned(result, path, "left empty")


def test_summary_of_statistics_without_counts() -> None:
    from perfcheck.metrics.summary import summarise

    chunk = pd.DataFrame({"kernel": pd.array(["k", "k"], dtype="string"), "calls": pd.array([pd.NA, pd.NA], dtype="Int64"),
                          "duration_total": [1.0, 2.0]})
    table = summarise([chunk])
    assert pd.isna(table.loc[0, "calls"])
    assert math.isnan(table.loc[0, "duration_mean"])
    assert table.loc[0, "duration_total"] == 3.0


# --- peaks -------------------------------------------------------------------------


def test_zero_negative_and_infinite_peaks_are_left_out_with_a_warning(cli, tmp_path: Path) -> None:
    # roofline.csv: HBMBw 1404.1036 -> 0, L2Bw 4980.9141 -> -1, FP32Flops 21041.855 -> inf
    path = edited(tmp_path, ROOFLINE, "0,1404.1036,", "0,0,")
    text = path.read_text().replace(",4980.9141,", ",-1,").replace(",21041.855,", ",inf,")
    path.write_text(text)
    result = cli("peaks", "--json", path)
    assert result.code == 0, result.err
    doc = strict(result.out)
    assert all(v > 0 for v in doc["peaks"].values())
    assert not {"hbm_bw", "l2_bw", "flop_rate_fp32"} & set(doc["peaks"])
    assert all(d["value"] >= 0 for d in doc["details"])
    warned(result, path, "not positive and finite")
    # used as the ceilings of an analysis, no percentage is infinite
    result = cli("inspect", "--json", profile("omniperf/rocprofiler-compute-vcopy-MI200/pmc_perf.csv"), "--peaks", path)
    assert result.code == 0, result.err
    for ceiling in strict(result.out)["ceilings"]:
        assert ceiling["value"] > 0 and math.isfinite(ceiling["value"])


def test_mixbench_negative_figure_is_a_located_error(cli, tmp_path: Path) -> None:
    lines = profile(MIXBENCH).read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.count(",") > 8 and line.strip()[:1].isdigit())
    fields = lines[at].split(",")
    fields[3] = "-1.00"
    lines[at] = ",".join(fields)
    path = tmp_path / "mixbench-log.txt"
    path.write_text("\n".join(lines))
    one_line_error(cli("peaks", path), path, f":{at + 1}:", "'-1.00' is not a finite, non-negative number")
    # printf's inf is no damage but a missing value (issue 17; test_ingest_mixbench)
    fields[3] = "inf"
    lines[at] = ",".join(fields)
    path.write_text("\n".join(lines))
    result = cli("peaks", path)
    assert result.code == 0 and "inf/nan values left out" in result.err


# --- output and stderr -------------------------------------------------------------


def test_json_numbers_are_never_nan_or_infinity() -> None:
    from perfcheck.report.jsonreport import _number

    assert _number(float("inf")) is None and _number(float("-inf")) is None and _number(np.float64("nan")) is None
    assert _number(np.float64(2.5)) == 2.5 and _number(3.0) == 3


def test_nvprof_row_wider_than_its_header_is_an_error_not_a_warning(cli, tmp_path: Path) -> None:
    path = edited(tmp_path, NVPROF_METRICS, '"Device","Kernel",', '"Device",')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        line = one_line_error(cli("inspect", path), path, "more fields than the header")
    assert f"{path}:7:" in line


def test_non_utf8_malformed_omniperf_row_prints_no_traceback(cli, tmp_path: Path, monkeypatch) -> None:
    import sys

    unraisable: list = []  # Python prints these as "Exception ignored in ..." with a traceback
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    # Five bytes the fuzzer flipped (seed 1, case 3438): two commas of a data row became
    # "x" and 0x89, so pyarrow meets a row that is two fields short and not UTF-8.
    data = bytearray(profile("omniperf/rocprofiler-compute-vcopy-MI300X/pmc_perf.csv").read_bytes())
    for position, byte in ((3396, 0o72), (37431, 0o22), (63258, 0o170), (65640, 0o211), (76162, 0o104)):
        data[position - 1] = byte  # 1-based positions, as cmp -l prints them
    path = tmp_path / "pmc_perf.csv"
    path.write_bytes(bytes(data))
    result = cli("inspect", path)
    one_line_error(result, path)
    assert unraisable == []


@pytest.mark.parametrize("relative", [NVPROF_METRICS, NVPROF_TRACE])
def test_nvprof_cr_only_and_crlf_line_ends_read_as_the_original(cli, tmp_path: Path, relative: str) -> None:
    original = strict(cli("inspect", "--json", profile(relative)).out)["kernels"]
    for name, ending in (("cr", b"\r"), ("crlf", b"\r\n")):
        path = tmp_path / f"{name}-{Path(relative).name}"
        path.write_bytes(profile(relative).read_bytes().replace(b"\r\n", b"\n").replace(b"\n", ending))
        result = cli("inspect", "--json", path)
        assert result.code == 0, result.err
        assert strict(result.out)["kernels"] == original


def test_nvprof_header_with_repeated_names_is_located(cli, tmp_path: Path) -> None:
    path = edited(tmp_path, NVPROF_METRICS, '"Min","Max"', '"Min","Min"')
    one_line_error(cli("inspect", path), path, f"{path}:6:", "header repeats column names ('Min')")


def test_mixbench_figure_overflowing_to_inf_is_left_out(cli, tmp_path: Path) -> None:
    # 1e308 GB/s is a finite number in the log, but inf once in B/s: was an OverflowError
    lines = profile(MIXBENCH).read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.count(",") > 8 and line.strip()[:1].isdigit())
    fields = lines[at].split(",")
    fields[4] = "1e308".rjust(len(fields[4]))
    lines[at] = ",".join(fields)
    path = tmp_path / "mixbench-log.txt"
    path.write_text("\n".join(lines))
    result = cli("peaks", "--json", path)
    assert result.code == 0, result.err
    doc = strict(result.out)
    assert all(0 < v < 1e300 for v in doc["peaks"].values())
    warned(result, path, "not positive and finite")


# --- hostile SQLite profiles (issue 16) ----------------------------------------------


@pytest.mark.parametrize("operation", [*fuzzing.HOSTILE_SQLITE, "null"])
@pytest.mark.parametrize("relative", list(fuzzing.SQLITE_SOURCES))
def test_hostile_sqlite_profiles_end_in_a_result_or_a_clean_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  relative: str, operation: str) -> None:
    """Every table or view a reader reads, made hostile one at a time: a view that never
    ends, 80 MB strings, 1,500 extra columns, a column named with a quote, NULLs.
    Each ends in exit 0 with possible values or in one line naming the file."""
    from perfcheck.ingest import sqlitefile

    # The step budget scaled down so that a runaway view ends in about a second (the
    # real one takes a few on these 2 MB files): what is tested is that it ends.
    monkeypatch.setattr(sqlitefile, "MIN_STEPS", 10_000_000)
    monkeypatch.setattr(sqlitefile, "STEPS_PER_BYTE", 1)
    outcomes = {}
    for name in fuzzing.SQLITE_SOURCES[relative]:
        path = tmp_path / name / Path(relative).name
        path.parent.mkdir()
        shutil.copyfile(profile(relative), path)
        path.chmod(0o644)
        fuzzing.hostile_sqlite(path, operation, name)
        outcome = fuzzing.run_cli(["inspect", "--json", str(path)], named=path, judge=fuzzing._judge_inspect, bound=60.0)
        outcomes[name] = (outcome.outcome, outcome.detail)
    assert all(o in ("ok", "error") for o, _ in outcomes.values()), outcomes


# --- JSON and TOML nested past Python's recursion limit (perfcheck/documents.py) ------------
# Every decoder of a file from outside recursed once per level and raised RecursionError:
# `inspect` ended in exit 3 on a 200 KB file of brackets. Each reader is tested on a real
# file with one deep value added where its sniffer still takes it for what it is.


def _deep(depth: int, leaf: str = "0") -> str:
    return "[" * depth + leaf + "]" * depth


def _with_deep_value(tmp_path: Path, relative: str, depth: int, leaf: str = "0") -> Path:
    """A copy of a real JSON document with one more top-level member (an object's key
    "x", or an array's last item) nested ``depth`` deep."""
    text = profile(relative).read_text(encoding="utf-8").rstrip()
    closer = text[-1]
    member = f', "x": {_deep(depth, leaf)}' if closer == "}" else f", {_deep(depth, leaf)}"
    path = tmp_path / Path(relative).name
    path.write_text(text[:-1] + member + closer)
    return path


DEEP_READERS = {
    # reader: (real file, command before the path)
    "kineto": ("kineto/pytorch-kineto-unittest-h100-sync-fix-pair/after_fix_trace.json", ("inspect", "--json")),
    "kineto-timeline": ("kineto/pytorch-kineto-unittest-h100-sync-fix-pair/after_fix_trace.json", ("inspect", "--timeline")),
    "rocprof-json": ("rocprof-v1/kokkos-gfx906/results.json", ("inspect", "--json")),
    "proton": ("proton/tritonbench-softmax-sm90/proton.hatchet", ("inspect", "--json")),
    "ert-json": ("ert/weakknight-roofline-p100/roofline.json", ("peaks", "--json")),
}


@pytest.mark.parametrize("depth", [5_000, 100_000])
@pytest.mark.parametrize("reader", sorted(DEEP_READERS))
def test_json_profiles_nested_too_deep_are_one_line_errors(cli, tmp_path: Path, reader: str, depth: int) -> None:
    relative, command = DEEP_READERS[reader]
    path = _with_deep_value(tmp_path, relative, depth)
    one_line_error(cli(*command, path), path, "JSON nested deeper than Python can read")


def test_deep_value_with_a_lone_surrogate_is_an_error_not_a_crash(cli, tmp_path: Path) -> None:
    # Shallow enough to decode (600 levels), but the walk that shows lone surrogates as
    # U+FFFD recursed per level too.
    path = _with_deep_value(tmp_path, DEEP_READERS["kineto"][0], 600, leaf='"\\ud800"')
    one_line_error(cli("inspect", "--json", path), path, "nested deeper than Python can read")


def test_stream_output_followed_by_a_deep_json_line_still_reads(cli, tmp_path: Path) -> None:
    # A line after STREAM's table that looks like a scheduler's one-line JSON record.
    path = tmp_path / "stream.txt"
    path.write_text(profile("stream/uob-babelstream-v2.0-broadwell/mccalpin-cray.txt").read_text()
                    + '{"job": ' + _deep(100_000) + "}\n")
    result = cli("peaks", "--json", path)
    assert result.code == 0, result.err
    assert strict(result.out)["peaks"]
    assert "Traceback" not in result.err and "internal error" not in result.err


def test_toml_nested_too_deep_is_a_one_line_error(cli, tmp_path: Path) -> None:
    config = tmp_path / "perfcheck.toml"
    config.write_text(f"profiles = {_deep(100_000, '1')}\n")
    one_line_error(cli("check", "--config", config), config, "TOML nested deeper than Python can read")
    machine = tmp_path / "gpu.toml"
    machine.write_text(f"[device]\nname = {_deep(100_000, '1')}\n")
    one_line_error(cli("peaks", "--format", "perfcheck-machine", machine), machine, "TOML nested deeper")


def test_other_json_and_toml_files_nested_too_deep_are_input_errors(tmp_path: Path) -> None:
    from perfcheck import baseline
    from perfcheck.errors import InputError
    from perfcheck.history import accepted
    from perfcheck.ingest.runs import MANIFEST, read_manifest
    from perfcheck.report.github import pull_request_number

    deep = tmp_path / "deep.json"
    deep.write_text(_deep(100_000))
    with pytest.raises(InputError, match="deep.json: JSON nested deeper than Python can read"):
        baseline.load(deep)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / MANIFEST).write_text('{"format_version": ' + _deep(100_000) + "}")
    with pytest.raises(InputError, match=f"{MANIFEST}: JSON nested deeper"):
        read_manifest(run_dir)
    toml = tmp_path / "accepted.toml"
    toml.write_text(f"[[accepted]]\nreason = {_deep(100_000, '1')}\n")
    with pytest.raises(InputError, match="accepted.toml: TOML nested deeper"):
        accepted.read(toml)
    # A CI event payload nobody can read falls back on GITHUB_REF, as any unreadable one does.
    assert pull_request_number({"GITHUB_EVENT_PATH": str(deep), "GITHUB_REF": "refs/pull/7/merge"}) == 7


def test_compare_of_a_results_file_nested_too_deep(cli, tmp_path: Path) -> None:
    from conftest import ROOT

    deep = tmp_path / "deep.json"
    deep.write_text('{"suites": ' + _deep(100_000) + "}")
    stencil = ROOT / "examples" / "stencil"
    one_line_error(cli("compare", deep, "after", "--config", stencil / "perfcheck.toml"), deep, "nested deeper")


# Decoding that is not of a file from outside: perfcheck's own packaged data, and its own
# document read back.
_OWN_DATA = {"perfcheck/arch/__init__.py", "perfcheck/history/runs.py:json.loads(json.dumps"}


def test_every_json_and_toml_decoder_call_is_bounded() -> None:
    """The one path: a decoder called anywhere but perfcheck/documents.py sits in a
    ``try`` that handles RecursionError, or decodes perfcheck's own data."""
    import ast

    from conftest import ROOT

    unbounded = []
    for source in sorted((ROOT / "perfcheck").rglob("*.py")):
        relative = source.relative_to(ROOT).as_posix()
        if relative == "perfcheck/documents.py" or relative in _OWN_DATA:
            continue
        text = source.read_text(encoding="utf-8")
        tree = ast.parse(text)
        guarded: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any("RecursionError" in ast.unparse(h.type or ast.Name("")) for h in node.handlers):
                guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and ast.unparse(node.func) in ("json.loads", "json.load", "tomllib.loads", "tomllib.load")
                    and id(node) not in guarded):
                call = ast.unparse(node)
                if not any(f"{relative}:{call}".startswith(own) for own in _OWN_DATA):
                    unbounded.append(f"{relative}:{node.lineno}: {call[:60]}")
    assert not unbounded, "decode through perfcheck.documents:\n" + "\n".join(unbounded)


def test_timeline_times_outside_a_clock_are_left_out_with_a_warning(cli, tmp_path: Path) -> None:
    """-1e308 as a copy's start and end (the fuzzer's number-line edit): cast to int64 it
    was a garbage time and a numpy RuntimeWarning on stderr; now the row is left out,
    counted, like a missing time."""
    relative = "rocprofv3/rocprofiler-sdk-docs-2024/memory_copy_trace.csv"
    path = edited(tmp_path, relative, "14955952733485,14955953315285", "-1e308,-1e308")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy warning fails the test
        result = cli("inspect", "--timeline", "--json", path)
    assert result.code == 0, result.err
    warned(result, path, "missing or impossible time", "left out")
    for device in strict(result.out)["devices"]:
        assert all(v is None or 0 <= v < 1e12 for k, v in device["metrics"].items() if k.endswith("_time"))


def test_unusable_times_are_the_ones_no_clock_reads() -> None:
    from perfcheck.ingest.timeline import unusable_times

    start = pd.Series([0, 5, np.nan, -1, 1e308, 2.0**63, 5, 9])
    end = pd.Series([1, 5, 3, 2, 1e308, 2.0**63, 4, np.inf])
    assert unusable_times(start, end).tolist() == [False, False, True, True, True, True, True, True]
