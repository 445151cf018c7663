"""McCalpin STREAM reader, on the real output in ../shared/profiles/stream.

Expected figures are the "Best Rate MB/s" column times 10**6 (stream.c prints
1.0E-06 * bytes / time), typed from the file by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import profile
from conftest import one_line_error as assert_one_line_error
from perfcheck.errors import InputError
from perfcheck.ingest import detect, read_peaks
from perfcheck.schema import PEAK_UNITS

MB = 1e6
CRAY = "stream/uob-babelstream-v2.0-broadwell/mccalpin-cray.txt"


def figures(peaks) -> dict[str, float]:
    return {d.name: d.value for d in peaks.details}


def exactly(expected: dict[str, float]) -> dict[str, object]:
    return {k: pytest.approx(v, rel=1e-12) for k, v in expected.items()}




def test_stream_5_10_cray_broadwell() -> None:
    path = profile(CRAY)
    assert detect(path, "peaks").name == "stream"
    peaks = read_peaks(path)
    assert figures(peaks) == exactly({
        "Copy": 92980.4 * MB, "Scale": 97951.2 * MB, "Add": 123058.1 * MB, "Triad": 124799.5 * MB,
    })
    # A CPU has no HBM: STREAM's best kernel is the main-memory peak.
    assert peaks.values == exactly({"mem_bw": 124799.5 * MB})
    assert PEAK_UNITS["mem_bw"] == "B/s"
    assert all(d.unit == "B/s" and d.source == str(path) for d in peaks.details)
    (source,) = peaks.sources
    assert (source.format, source.tool, source.tool_version, source.device) == ("stream", "stream", "5.10", None)
    assert peaks.oddities == ()  # the trailing Cray ALPS "Application ... resources" line is launcher output


def test_cli_peaks_json(cli) -> None:
    path = profile(CRAY)
    result = cli("peaks", path, "--json")
    assert result.code == 0
    doc = result.json()
    assert doc["peaks"] == {"mem_bw": 124799500000}
    assert doc["units"] == {"mem_bw": "B/s"}
    assert [(d["name"], d["value"], d["unit"]) for d in doc["details"]] == [
        ("Copy", 92980400000, "B/s"), ("Scale", 97951200000, "B/s"),
        ("Add", 123058100000, "B/s"), ("Triad", 124799500000, "B/s"),
    ]
    assert doc["sources"][0]["tool_version"] == "5.10"
    assert doc["warnings"] == [] and result.err == ""


# --- malformed input, written at test time -------------------------------------------


def real_lines() -> list[str]:
    return profile(CRAY).read_text().splitlines(keepends=True)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "stream.txt"
    path.write_text(text)
    return path


def test_cut_off_last_row_is_dropped_with_an_oddity(tmp_path: Path) -> None:
    lines = real_lines()  # table header at line 26, Copy..Triad at 27..30
    peaks = read_peaks(write(tmp_path, "".join(lines[:29]) + "Triad:          124799.5     0.00"))
    assert figures(peaks) == exactly({"Copy": 92980.4 * MB, "Scale": 97951.2 * MB, "Add": 123058.1 * MB})
    assert peaks.values == exactly({"mem_bw": 123058.1 * MB})
    (oddity,) = peaks.oddities
    assert "3 of STREAM's 4 kernels" in oddity.what and "line 30" in oddity.what


def test_cut_inside_a_label(tmp_path: Path) -> None:
    lines = real_lines()
    peaks = read_peaks(write(tmp_path, "".join(lines[:29]) + "Tri"))
    assert set(figures(peaks)) == {"Copy", "Scale", "Add"}
    assert "line 30" in peaks.oddities[0].what


def test_short_row_inside_the_table_is_an_error(tmp_path: Path, cli) -> None:
    lines = real_lines()
    lines[27] = "Scale:          97951.2\n"
    path = write(tmp_path, "".join(lines))
    assert_one_line_error(cli("peaks", path), f"{path}:28", "cut short")


def test_cut_before_the_table(tmp_path: Path, cli) -> None:
    path = write(tmp_path, "".join(real_lines()[:20]))
    with pytest.raises(InputError) as info:
        read_peaks(path)
    assert info.value.line == 20
    assert_one_line_error(cli("peaks", path), f"{path}:20", "no result table; the run was cut off")


def test_not_a_number(tmp_path: Path, cli) -> None:
    path = write(tmp_path, "".join(real_lines()).replace("123058.1", "123O58.1"))
    assert_one_line_error(cli("peaks", path), f"{path}:29", "column 2", "'123O58.1' is not a number")


def test_failed_validation_and_stray_text_are_oddities(tmp_path: Path) -> None:
    lines = real_lines()
    lines[31] = "Failed Validation on array a[], AvgRelAbsErr > epsilon (1.000000e-13)\n"
    lines.append("my job script says hello\n")
    peaks = read_peaks(write(tmp_path, "".join(lines)))
    failed, stray = peaks.oddities
    assert "failed validation" in failed.what and "line 32" in failed.what
    assert "line 35" in stray.what and stray.count == 1


def test_empty_file(tmp_path: Path, cli) -> None:
    path = write(tmp_path, "")
    assert_one_line_error(cli("peaks", path), path, "file is empty")
    assert_one_line_error(cli("peaks", path, "--format", "stream"), path, "file is empty")


def test_binary_garbage(tmp_path: Path, cli) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(range(256)) * 8)
    assert_one_line_error(cli("peaks", path), path, "not a peaks format")
    assert_one_line_error(cli("peaks", path, "--format", "stream"), path, "binary data")


def test_other_text_forced_as_stream(tmp_path: Path, cli) -> None:
    path = write(tmp_path, "hello\nworld\n")
    assert_one_line_error(cli("peaks", path, "--format", "stream"), path, "no STREAM result table")


# --------------------------------------------------------------------------- the CUDA/HIP ports

# No log of a CUDA STREAM port is among ../shared/profiles: this one is written here in the
# layout the port prints (its banner, "output in IEC units", "Rate (GiB/s)", "Avg time(s)",
# a dashed rule under the header), with figures of our own, two runs concatenated and the
# one-line JSON job records a Flux-run job appends.
CUDA_RUN = """STREAM Benchmark implementation in CUDA
 Array size (double precision) = 1073.74 MB
 using 1024 threads per block, 131072 blocks
 output in IEC units (KiB = 1024 B)

Function      Rate (GiB/s)  Avg time(s)  Min time(s)  Max time(s)
-----------------------------------------------------------------
Copy:         {copy:.4f}      0.00165302   0.00165200   0.00165500
Scale:        1208.2500      0.00165610   0.00165500   0.00165800
Add:          1265.0000      0.00237200   0.00237100   0.00237400
Triad:        {triad:.4f}      0.00236900   0.00236800   0.00237100
"""
JOB_RECORDS = ('{"jobspec": {"resources": [{"type": "node", "count": 1}]}}\n'
               '{"timestamp": 1700000000.1, "name": "finish", "context": {"status": 0}}\n')
GIB = 2.0**30


def test_cuda_port_gib_per_second_runs_and_job_records(tmp_path: Path) -> None:
    path = tmp_path / "cuda-stream.out"
    path.write_text(CUDA_RUN.format(copy=1210.5, triad=1266.75) + CUDA_RUN.format(copy=1211.0, triad=1267.25)
                    + JOB_RECORDS)
    assert detect(path, "peaks").name == "stream"
    peaks = read_peaks(path)
    # a GPU's device memory, GiB = 2**30 B; the best rate of any kernel in any run (run 2, Triad)
    assert peaks.values == {"hbm_bw": pytest.approx(1267.25 * GIB, rel=1e-12)}
    got = figures(peaks)
    assert got["run 1: Triad"] == pytest.approx(1266.75 * GIB, rel=1e-12)
    assert got["run 2: Copy"] == pytest.approx(1211.0 * GIB, rel=1e-12)
    assert len(got) == 8  # every run is kept in the details
    assert peaks.oddities == ()  # the JSON job records are not STREAM's and are skipped quietly
    assert peaks.sources[0].tool_version == "CUDA port"


def test_cuda_port_stray_text_still_warns(tmp_path: Path) -> None:
    path = tmp_path / "cuda-stream.out"
    path.write_text(CUDA_RUN.format(copy=1.0, triad=2.0) + "{not json}\n")
    assert [o.what.split(" (")[0] for o in read_peaks(path).oddities] == ["text STREAM does not write was ignored after its table"]


def test_nan_rate_is_missing_not_the_whole_peak(tmp_path: Path) -> None:
    text = profile("stream/uob-babelstream-v2.0-broadwell/mccalpin-cray.txt").read_text()
    path = tmp_path / "nan.txt"
    path.write_text(text.replace("Triad:         124799.5", "Triad:              nan"))
    peaks = read_peaks([path])
    assert [d.name for d in peaks.details] == ["Copy", "Scale", "Add"]
    assert peaks.values == {"mem_bw": max(d.value for d in peaks.details)}
    assert [str(o) for o in peaks.oddities] == [f"{path}: inf/nan rates left out: Triad"]
