"""BabelStream / GPU-STREAM reader, on the real outputs in ../shared/profiles/babelstream.

Expected figures are the file's MBytes/sec column times 10**6 (BabelStream's
1.0E-6 convention), typed from the files by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import profile
from conftest import one_line_error as assert_one_line_error
from perfcheck.errors import InputError
from perfcheck.ingest import detect, read_peaks

MB = 1e6


def figures(peaks) -> dict[str, float]:
    return {d.name: d.value for d in peaks.details}


def exactly(expected: dict[str, float]) -> dict[str, object]:
    return {k: pytest.approx(v, rel=1e-12) for k, v in expected.items()}




def test_mi60_babelstream_3_4_hip() -> None:
    path = profile("babelstream/techercise-mi60/babelstream_results_MI60.txt")
    peaks = read_peaks(path)
    assert figures(peaks) == exactly({
        "Copy": 808975.476 * MB, "Mul": 813472.822 * MB, "Add": 782056.607 * MB,
        "Triad": 781403.243 * MB, "Dot": 606510.441 * MB,
    })
    assert peaks.values == exactly({"hbm_bw": 813472.822 * MB})  # Mul is the best streaming kernel
    assert all(d.unit == "B/s" and d.source == str(path) for d in peaks.details)
    (source,) = peaks.sources
    assert (source.format, source.tool, source.tool_version, source.device) == ("babelstream", "babelstream", "3.4", "Vega 20")
    assert peaks.oddities == ()


def test_mi100_ignores_hand_added_table_with_an_oddity() -> None:
    path = profile("babelstream/techercise-mi100/babelstream_results_MI100.txt")
    peaks = read_peaks(path)
    # The hand-added "Matt's Additions" GBytes/sec table repeats the same figures;
    # only BabelStream's own MBytes/sec table is read.
    assert figures(peaks) == exactly({
        "Copy": 933355.781 * MB, "Mul": 935144.115 * MB, "Add": 933167.051 * MB,
        "Triad": 933881.274 * MB, "Dot": 709712.057 * MB,
    })
    assert figures(peaks)["Copy"] == pytest.approx(933355.781e6, rel=1e-12)
    assert peaks.values == exactly({"hbm_bw": 935144.115 * MB})
    assert peaks.sources[0].device == "Device 738c"  # as the file writes it (MI100's PCI id)
    (oddity,) = peaks.oddities
    assert oddity.count == 7  # "Matt's Additions:", its header and five rows
    assert "line 19" in oddity.what and "Matt's Additions" in oddity.what


def test_mi300a_babelstream_5_0_keeps_init_and_read_as_details_only() -> None:
    path = profile("babelstream/mi300a-cpx/device_0.txt")
    peaks = read_peaks(path)
    assert figures(peaks) == exactly({
        "Init": 693.935257 * MB, "Read": 40782.464132 * MB,
        "Copy": 710954.938 * MB, "Mul": 711345.222 * MB, "Add": 715118.207 * MB,
        "Triad": 715119.755 * MB, "Dot": 644523.738 * MB,
    })
    assert peaks.values == exactly({"hbm_bw": 715119.755 * MB})
    source = peaks.sources[0]
    assert (source.tool_version, source.device) == ("5.0", "AMD Instinct MI300A")
    assert peaks.oddities == ()


def test_titan_xp_babelstream_3_3_cuda() -> None:
    peaks = read_peaks(profile("babelstream/uob-babelstream-v3.3-titanxp/cuda.txt"))
    assert figures(peaks) == exactly({
        "Copy": 433182.244 * MB, "Mul": 431744.565 * MB, "Add": 436451.083 * MB,
        "Triad": 436491.299 * MB, "Dot": 435969.304 * MB,
    })
    assert peaks.values == exactly({"hbm_bw": 436491.299 * MB})
    assert (peaks.sources[0].tool_version, peaks.sources[0].device) == ("3.3", "TITAN Xp")


def test_k20x_gpu_stream_2_0_without_dot_and_with_cray_footer() -> None:
    path = profile("babelstream/uob-babelstream-v2.0-k20x/cuda.txt")
    assert detect(path, "peaks").name == "babelstream"
    peaks = read_peaks(path)
    assert figures(peaks) == exactly({
        "Copy": 181833.763 * MB, "Mul": 181354.354 * MB, "Add": 179955.484 * MB, "Triad": 179798.066 * MB,
    })
    assert peaks.values == exactly({"hbm_bw": 181833.763 * MB})
    # "Using OpenCL device" in a CUDA build is that version's slip; the name is still the GPU.
    assert (peaks.sources[0].tool_version, peaks.sources[0].device) == ("2.0", "Tesla K20X")
    assert peaks.oddities == ()  # the ALPS "Application ... resources" line is launcher output


def test_cli_peaks_json(cli) -> None:
    path = profile("babelstream/techercise-mi100/babelstream_results_MI100.txt")
    result = cli("peaks", path, "--json")
    assert result.code == 0
    doc = result.json()
    assert doc["peaks"] == {"hbm_bw": 935144115000}
    assert doc["units"] == {"hbm_bw": "B/s"}
    assert [(d["name"], d["value"], d["unit"]) for d in doc["details"]] == [
        ("Copy", 933355781000, "B/s"), ("Mul", 935144115000, "B/s"), ("Add", 933167051000, "B/s"),
        ("Triad", 933881274000, "B/s"), ("Dot", 709712057000, "B/s"),
    ]
    assert doc["sources"][0]["format"] == "babelstream"
    assert doc["warnings"][0]["count"] == 7
    assert "perfcheck: warning:" in result.err and "Matt's Additions" in result.err


def test_truncated_after_header_is_a_clear_error(cli) -> None:
    path = profile("babelstream/mi300a-cpx/device_5.txt")
    with pytest.raises(InputError) as info:
        read_peaks(path)
    assert info.value.line == 10
    assert_one_line_error(cli("peaks", path), path, "no result table; the run was cut off")


# --- malformed input, written at test time -------------------------------------------

HEADER = """BabelStream
Version: 3.4
Implementation: HIP
Running kernels 100 times
Precision: double
Array size: 268.4 MB (=0.3 GB)
Total size: 805.3 MB (=0.8 GB)
Using HIP device Vega 20
Driver: 320400
Function    MBytes/sec  Min (sec)   Max         Average
Copy        808975.476  0.00066     0.00071     0.00067
Mul         813472.822  0.00066     0.00068     0.00067
"""


def write(tmp_path: Path, text: str, name: str = "babelstream.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_cut_off_last_row_is_dropped_with_an_oddity(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "Add         782056.607  0.00103")  # cut after its Min column
    peaks = read_peaks(path)
    assert figures(peaks) == exactly({"Copy": 808975.476 * MB, "Mul": 813472.822 * MB})
    (oddity,) = peaks.oddities
    assert "cut-off last result row" in oddity.what and "line 13" in oddity.what


def test_cut_inside_a_label_is_dropped_too(tmp_path: Path) -> None:
    peaks = read_peaks(write(tmp_path, HEADER + "Ad"))
    assert set(figures(peaks)) == {"Copy", "Mul"}
    assert "line 13" in peaks.oddities[0].what


def test_short_row_inside_the_table_is_an_error(tmp_path: Path, cli) -> None:
    path = write(tmp_path, HEADER.replace("813472.822  0.00066     0.00068     0.00067", "813472.822")
                 + "Add         782056.607  0.00103     0.00104     0.00104\n")
    assert_one_line_error(cli("peaks", path), f"{path}:12", "cut short")


def test_header_without_rows(tmp_path: Path, cli) -> None:
    path = write(tmp_path, "\n".join(HEADER.splitlines()[:10]) + "\n")
    assert_one_line_error(cli("peaks", path), f"{path}:10", "result table has no rows")


def test_not_a_number(tmp_path: Path, cli) -> None:
    path = write(tmp_path, HEADER.replace("808975.476", "80897x.476"))
    assert_one_line_error(cli("peaks", path), f"{path}:11", "column 2", "'80897x.476' is not a number")


def test_unknown_unit(tmp_path: Path, cli) -> None:
    path = write(tmp_path, HEADER.replace("MBytes/sec", "KBytes/sec"))
    assert_one_line_error(cli("peaks", path), f"{path}:10", "unknown bandwidth unit 'KBytes/sec'")


def test_empty_file(tmp_path: Path, cli) -> None:
    path = write(tmp_path, "")
    assert_one_line_error(cli("peaks", path), path, "file is empty")
    assert_one_line_error(cli("peaks", path, "--format", "babelstream"), path, "file is empty")


def test_binary_garbage(tmp_path: Path, cli) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(range(256)) * 8)
    assert_one_line_error(cli("peaks", path), path, "not a peaks format")
    assert_one_line_error(cli("peaks", path, "--format", "babelstream"), path, "binary data")


def test_other_text_forced_as_babelstream(tmp_path: Path, cli) -> None:
    path = write(tmp_path, "hello\nworld\n")
    assert_one_line_error(cli("peaks", path, "--format", "babelstream"), path, "no BabelStream banner")


def test_failed_validation_is_an_oddity(tmp_path: Path) -> None:
    text = HEADER.replace("Function", "Validation failed on c[]. Average error 3.2e-05\nFunction")
    peaks = read_peaks(write(tmp_path, text))
    assert "failed validation" in peaks.oddities[0].what


def test_host_run_in_mibytes_gives_mem_bw_and_skips_dot(tmp_path: Path) -> None:
    # --mibibytes prints MiBytes/sec (2**20 B/s); an OpenMP build names no device.
    text = (
        "BabelStream\nVersion: 5.0\nImplementation: OpenMP\n"
        "Function    MiBytes/sec  Min (sec)   Max         Average\n"
        "Copy        150000.000  0.00358     0.00400     0.00370\n"
        "Triad       161000.000  0.00500     0.00600     0.00520\n"
        "Dot         170000.000  0.00316     0.00400     0.00330\n"
    )
    peaks = read_peaks(write(tmp_path, text))
    assert peaks.values == exactly({"mem_bw": 161000.0 * 2**20})  # Dot (a reduction) is not a bandwidth peak
    assert figures(peaks)["Dot"] == pytest.approx(170000.0 * 2**20, rel=1e-12)
    assert "mem_bw" in peaks.oddities[0].what


def test_csv_output(tmp_path: Path) -> None:
    # --csv: no banner; column names as BabelStream 5.0's main.cpp prints them.
    text = (
        "Using HIP device AMD Instinct MI250X\n"
        "phase,n_elements,sizeof,max_mbytes_per_sec,runtime\n"
        "Init,33554432,8,10252.8,0.0785\n"
        "Read,33554432,8,25671.1,0.0314\n"
        "function,num_times,n_elements,sizeof,max_mbytes_per_sec,min_runtime,max_runtime,avg_runtime\n"
        "Copy,100,33554432,8,1336530.5,0.000401,0.000412,0.000405\n"
        "Triad,100,33554432,8,1309817.4,0.000615,0.000627,0.000619\n"
        "Dot,100,33554432,8,1135476.8,0.000473,0.000512,0.000489\n"
    )
    path = write(tmp_path, text, "babelstream.csv")
    assert detect(path, "peaks").name == "babelstream"
    peaks = read_peaks(path)
    assert figures(peaks) == exactly({
        "Init": 10252.8 * MB, "Read": 25671.1 * MB, "Copy": 1336530.5 * MB,
        "Triad": 1309817.4 * MB, "Dot": 1135476.8 * MB,
    })
    assert peaks.values == exactly({"hbm_bw": 1336530.5 * MB})
    assert peaks.sources[0].device == "AMD Instinct MI250X"


def test_triad_only_summary(tmp_path: Path) -> None:
    text = (
        "BabelStream\nVersion: 5.0\nImplementation: CUDA\nRunning triad 100 times\n"
        "--------------------------------\nRuntime (seconds): 0.06166\nBandwidth (GB/s):  1306.218\n"
    )
    peaks = read_peaks(write(tmp_path, text))
    assert peaks.values == exactly({"hbm_bw": 1306.218e9})


def test_inf_rate_is_missing_not_the_whole_peak(tmp_path: Path) -> None:
    # A zero time prints "inf" MBytes/sec: that row is missing; the best of the others
    # (Triad 436491.299 MB/s) is still the peak.
    text = profile("babelstream/uob-babelstream-v3.3-titanxp/cuda.txt").read_text()
    path = tmp_path / "inf.txt"
    path.write_text(text.replace("Copy        433182.244", "Copy               inf"))
    peaks = read_peaks([path])
    assert peaks.values == {"hbm_bw": 436491.299e6}
    assert [d.name for d in peaks.details] == ["Mul", "Add", "Triad", "Dot"]
    assert [str(o) for o in peaks.oddities] == [f"{path}: inf/nan rates left out: Copy"]
