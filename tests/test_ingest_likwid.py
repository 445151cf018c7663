"""likwid readers: likwid-bench (with integrated perfctr tables) and likwid-perfctr -O CSV."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PROFILES, profile
from conftest import one_line_error as _one_line_error
from perfcheck.errors import InputError
from perfcheck.ingest import detect, read_peaks
from perfcheck.ingest.likwid import FORMATS, read_timeline

BENCH = "likwid/goghino-likwid-bench-triad-mem/proc_0.out"
FLOPS_DP = "likwid/rubens-zan-likwid-optimization/FLOPS_DP_1024.log"
L3 = "likwid/rubens-zan-likwid-optimization/L3_1024.log"
I5 = "Intel(R) Core(TM) i5-7500 CPU @ 3.40GHz"


# --------------------------------------------------------------------------- real files


def test_bench_triad_on_epyc() -> None:
    peaks = read_peaks(profile(BENCH))
    # "MByte/s: 23149.90" over a 1e9-byte working set; "MFlops/s: 1446.87"; triad is double
    # (Cycles per cacheline 22.074285 / Cycles per update 2.759286 = 8 doubles per line).
    assert peaks.values == {"mem_bw": 23149.90e6, "flop_rate_fp64": 1446.87e6}
    assert [(d.name, d.value, d.unit) for d in peaks.details] == [
        ("likwid-bench triad: MByte/s", 23149.90e6, "B/s"),
        ("likwid-bench triad: MFlops/s", 1446.87e6, "FLOP/s"),
        ("likwid-perfctr Memory read bandwidth [MBytes/s] (MEM)", 10.5305e6, "B/s"),
        ("likwid-perfctr Memory write bandwidth [MBytes/s] (MEM)", 10.1549e6, "B/s"),
        ("likwid-perfctr Memory bandwidth [MBytes/s] (MEM)", 20.6854e6, "B/s"),
    ]
    (source,) = peaks.sources
    assert (source.format, source.tool, source.device) == ("likwid-bench", "likwid", "AMD EPYC 7702 64-Core Processor")
    # The MEM group's 20.6854 MB/s is three orders below the benchmark's figure: warned about.
    (oddity,) = peaks.oddities
    assert "20.6854 MB/s" in oddity.what and "23149.9 MB/s" in oddity.what


def test_perfctr_flops_dp_regions() -> None:
    peaks = read_peaks(profile(FLOPS_DP))
    # DP MFLOP/s per region: 2167.9876, 3150.0709, 2213.0920, 2177.2787 -> max of the four.
    assert peaks.values == {"flop_rate_fp64": 3150.0709e6}
    dp = {d.name: d.value for d in peaks.details if d.name.startswith("DP ")}
    assert dp == {
        "DP MFLOP/s (FLOPS_DP, region multMatVet_NAO_OTIM)": 2167.9876e6,
        "DP MFLOP/s (FLOPS_DP, region multMatVet_COM_OTIM)": 3150.0709e6,
        "DP MFLOP/s (FLOPS_DP, region multMatMat_NAO_OTIM)": 2213.0920e6,
        "DP MFLOP/s (FLOPS_DP, region multMatMat_COM_OTIM)": 2177.2787e6,
    }
    # AVX DP MFLOP/s (all 0) are listed, CPI / MUOPS/s are not FLOP rates.
    assert len(peaks.details) == 8
    assert all(d.unit == "FLOP/s" for d in peaks.details)
    assert peaks.sources[0].device == I5 and peaks.sources[0].format == "likwid-perfctr"
    assert peaks.oddities == ()


def test_perfctr_l3_regions() -> None:
    peaks = read_peaks(profile(L3))
    # L3 bandwidth [MBytes/s]: 14428.1813, 16224.3810, 20871.8879, 20966.1357.
    assert peaks.values == {"l3_bw": 20966.1357e6}
    details = {d.name: d.value for d in peaks.details}
    assert len(details) == 12  # load, evict and total bandwidth for 4 regions
    assert details["L3 load bandwidth [MBytes/s] (L3, region multMatMat_COM_OTIM)"] == 20928.3138e6
    assert details["L3 evict bandwidth [MBytes/s] (L3, region multMatVet_NAO_OTIM)"] == 1381.7353e6
    assert details["L3 bandwidth [MBytes/s] (L3, region multMatVet_COM_OTIM)"] == 16224.3810e6
    assert peaks.sources[0].device == I5


def test_cli_peaks_bench(cli) -> None:
    result = cli("peaks", profile(BENCH), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["peaks"] == {"flop_rate_fp64": 1446870000, "mem_bw": 23149900000}
    assert doc["units"] == {"flop_rate_fp64": "FLOP/s", "mem_bw": "B/s"}
    assert doc["sources"][0]["format"] == "likwid-bench"
    assert len(doc["warnings"]) == 1


def test_cli_peaks_perfctr(cli) -> None:
    result = cli("peaks", profile(FLOPS_DP), profile(L3), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["peaks"] == {"flop_rate_fp64": 3150070900, "l3_bw": 20966135700}
    assert [s["format"] for s in doc["sources"]] == ["likwid-perfctr", "likwid-perfctr"]
    assert doc["warnings"] == []


def test_sniffers_pick_the_right_format() -> None:
    assert detect(profile(BENCH), "peaks").name == "likwid-bench"
    assert detect(profile(FLOPS_DP), "peaks").name == "likwid-perfctr"
    assert detect(profile(L3), "peaks").name == "likwid-perfctr"


def test_sniffers_reject_other_tools_files() -> None:
    from perfcheck.ingest.formats import Sniff

    if not PROFILES.exists():
        pytest.skip("real profile data not available")
    others = [p for p in PROFILES.rglob("*") if p.is_file() and "likwid" not in p.relative_to(PROFILES).parts[:1]]
    assert others
    for path in others:
        sniff = Sniff(path)
        assert not any(fmt.sniff(sniff) for fmt in FORMATS), path


# --------------------------------------------------------------------------- synthetic variants

ASCII_PERFCTR = """--------------------------------------------------------------------------------
CPU name:\tIntel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
--------------------------------------------------------------------------------
Region triad, Group 1: MEM_DP
+-------------------+------------+------------+
|    Region Info    | HWThread 0 | HWThread 1 |
+-------------------+------------+------------+
| RDTSC Runtime [s] |   0.500000 |   0.500000 |
|     call count    |          1 |          1 |
+-------------------+------------+------------+

+-----------------------------------+------------+------------+
|               Metric              | HWThread 0 | HWThread 1 |
+-----------------------------------+------------+------------+
|            DP [MFLOP/s]           |  1000.5000 |  1200.2500 |
|        AVX DP [MFLOP/s]           |  9000.0000 |  9000.0000 |
|    Memory bandwidth [MBytes/s]    | 50000.1250 |          - |
+-----------------------------------+------------+------------+

+----------------------------------------+------------+------------+------------+------------+
|                 Metric                 |     Sum    |     Min    |     Max    |     Avg    |
+----------------------------------------+------------+------------+------------+------------+
|          DP [MFLOP/s] STAT             |  2200.7500 |  1000.5000 |  1200.2500 |  1100.3750 |
+----------------------------------------+------------+------------+------------+------------+
"""


def test_perfctr_ascii_tables_max_over_threads(tmp_path: Path) -> None:
    path = tmp_path / "perfctr.txt"
    path.write_text(ASCII_PERFCTR)
    assert detect(path, "peaks").name == "likwid-perfctr"
    peaks = read_peaks(path)
    # AVX DP is a part of DP, not the DP rate; the STAT table is skipped.
    assert peaks.values == {"flop_rate_fp64": 1200.25e6, "mem_bw": 50000.125e6}
    assert peaks.sources[0].device == "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"
    assert [d.name for d in peaks.details] == [
        "DP [MFLOP/s] (MEM_DP, region triad)",
        "AVX DP [MFLOP/s] (MEM_DP, region triad)",
        "Memory bandwidth [MBytes/s] (MEM_DP, region triad)",
    ]


def test_bench_small_working_set_is_not_mem_bw(tmp_path: Path) -> None:
    text = profile(BENCH).read_text().replace("Size (Byte):\t\t1000000000", "Size (Byte):\t\t32000")
    path = tmp_path / "bench.out"
    path.write_text(text)
    peaks = read_peaks(path)
    assert "mem_bw" not in peaks.values
    assert peaks.values == {"flop_rate_fp64": 1446.87e6}
    assert any("cache-resident" in o.what for o in peaks.oddities)


def test_bench_single_precision_kernel(tmp_path: Path) -> None:
    text = (profile(BENCH).read_text().replace("Test: triad", "Test: triad_sp")
            .replace("Cycles per update:\t2.759286", "Cycles per update:\t1.379643"))
    path = tmp_path / "bench.out"
    path.write_text(text)
    assert read_peaks(path).values == {"mem_bw": 23149.90e6, "flop_rate_fp32": 1446.87e6}


# --------------------------------------------------------------------------- malformed input




def test_perfctr_missing_table_block(cli, tmp_path: Path) -> None:
    lines = profile(FLOPS_DP).read_text().splitlines(keepends=True)
    path = tmp_path / "FLOPS_DP.log"
    path.write_text("".join(lines[:10]))  # CPU header and the STRUCT,Info block, no TABLE
    result = cli("peaks", path, "--json")
    _one_line_error(result, path)
    assert "no metric TABLE block" in result.err


def test_perfctr_metric_table_cut_short(cli, tmp_path: Path) -> None:
    lines = profile(L3).read_text().splitlines(keepends=True)
    path = tmp_path / "L3.log"
    path.write_text("".join(lines[:27]))  # inside the first region's Metric table
    result = cli("peaks", path)
    _one_line_error(result, path)
    assert "cut short" in result.err and f"{path}:21:" in result.err  # its TABLE line


def test_perfctr_non_number(cli, tmp_path: Path) -> None:
    text = profile(FLOPS_DP).read_text().replace("DP MFLOP/s,3150.0709,", "DP MFLOP/s,31x0.0709,")
    path = tmp_path / "FLOPS_DP.log"
    path.write_text(text)
    result = cli("peaks", path)
    _one_line_error(result, path)
    # the second region's "DP MFLOP/s" row is file line 54
    assert f"{path}:54:" in result.err and "'31x0.0709'" in result.err


def test_perfctr_wrong_delimiter(cli, tmp_path: Path) -> None:
    text = profile(FLOPS_DP).read_text().replace(",", ";")
    path = tmp_path / "FLOPS_DP.log"
    path.write_text(text)
    _one_line_error(cli("peaks", path), path)  # not recognised
    result = cli("peaks", path, "--format", "likwid-perfctr")
    _one_line_error(result, path)


def test_bench_cut_before_results(cli, tmp_path: Path) -> None:
    text = profile(BENCH).read_text()
    path = tmp_path / "proc_0.out"
    path.write_text(text[: text.index("MByte/s:")])
    result = cli("peaks", path, "--json")
    _one_line_error(result, path)
    assert "no 'MByte/s:' result line" in result.err


def test_bench_perfctr_table_cut_short(cli, tmp_path: Path) -> None:
    text = profile(BENCH).read_text()
    path = tmp_path / "proc_0.out"
    path.write_text(text[: text.index("|    Memory bandwidth [MBytes/s]")])
    result = cli("peaks", path)
    _one_line_error(result, path)
    assert "cut short" in result.err


@pytest.mark.parametrize("fmt", ["likwid-bench", "likwid-perfctr"])
def test_empty_file(cli, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "empty.out"
    path.write_text("")
    _one_line_error(cli("peaks", path), path)
    result = cli("peaks", path, "--format", fmt)
    _one_line_error(result, path)
    assert "empty" in result.err


@pytest.mark.parametrize("fmt", ["likwid-bench", "likwid-perfctr"])
def test_binary_garbage(cli, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(range(256)) * 8)
    _one_line_error(cli("peaks", path), path)
    result = cli("peaks", path, "--format", fmt)
    _one_line_error(result, path)
    assert "binary" in result.err


def test_bench_reader_rejects_perfctr_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="LIKWID MICRO BENCHMARK"):
        read_peaks(profile(FLOPS_DP), format="likwid-bench")


# --------------------------------------------------------------------------- likwid-perfctr -t (timeline mode)

# No timeline run is among ../shared/profiles: the two files below follow what
# likwid-perfctr.lua (RRZE-HPC/likwid, master 2026) writes in timeline mode -- the legend
# print()ed on stdout, one sample per interval print_stderr()ed: GID, metric count, thread
# count, seconds since the start, then each metric's value on each thread, metric by metric,
# '-' for a value likwid did not have. Figures are our own: group MEM on 4 hardware threads of
# a two-socket Zen2 node, memory bandwidth counted on the first thread of each socket.
TIMELINE_STDOUT = """\
--------------------------------------------------------------------------------
CPU name:\tAMD EPYC 7702 64-Core Processor
CPU type:\tAMD K17 (Zen2) architecture
--------------------------------------------------------------------------------
# HWThreads: 0|1|64|65
# GID|MetricsCount|CpuCount|Total runtime [s]|Runtime (RDTSC) [s]|Clock [MHz]|Memory bandwidth [MBytes/s]|Memory data volume [GBytes]
"""


def _sample(seconds: float, socket0: str, socket1: str) -> str:
    metrics = [["1.0"] * 4, ["2000"] * 4, [socket0, "0", socket1, "0"], ["1.5", "0", "1.5", "0"]]
    return " ".join(["1", "4", "4", str(seconds)] + [v for m in metrics for v in m])


TIMELINE_STDERR = "\n".join([_sample(1.001, "20000.5", "18000.25"), _sample(2.002, "41000.0", "39500.5"),
                             _sample(3.003, "30000.0", "-")]) + "\n"


def test_timeline_pair_memory_bandwidth_over_time(tmp_path: Path, cli) -> None:
    (tmp_path / "run.out").write_text(TIMELINE_STDOUT)
    (tmp_path / "run.err").write_text(TIMELINE_STDERR)
    for given in ("run.err", "run.out"):  # either file of the pair finds the other
        assert detect(tmp_path / given, "peaks").name == "likwid-timeline"
        peaks = read_peaks(tmp_path / given)
        # interval 2: 41000.0 + 39500.5 MBytes/s over the two sockets, decimal mega
        assert peaks.values == {"mem_bw": pytest.approx(80500.5e6, rel=1e-12)}
        assert peaks.sources[0].device == "AMD EPYC 7702 64-Core Processor"
        assert [o.what for o in peaks.oddities] == ["timeline values likwid left empty ('-'); left out"]
    table, files, _ = read_timeline(tmp_path / "run.err")
    assert [f.name for f in files] == ["run.out", "run.err"]
    bandwidth = table[table["metric"] == "Memory bandwidth [MBytes/s]"]
    assert bandwidth["time"].tolist() == [1.001, 2.002, 3.003]
    # summed over threads; the third interval lacks socket 1 and is only a lower bound
    assert bandwidth["value"].tolist() == pytest.approx([38000.75e6, 80500.5e6, 30000.0e6], rel=1e-12)
    assert table[table["metric"] == "Clock [MHz]"]["value"].tolist() == [8000.0] * 3  # not a rate: as printed
    # both files given: one set of figures
    result = cli("peaks", "--json", tmp_path / "run.out", tmp_path / "run.err")
    assert result.code == 0, result.err
    assert len(result.json()["details"]) == 1


def test_timeline_in_one_log(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(TIMELINE_STDOUT + TIMELINE_STDERR + "application output\n")
    assert detect(path, "peaks").name == "likwid-timeline"
    assert read_peaks(path).values["mem_bw"] == pytest.approx(80500.5e6, rel=1e-12)


def test_timeline_samples_without_legend_or_mismatched(tmp_path: Path, cli) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "run.err").write_text(TIMELINE_STDERR)
    _one_line_error(cli("peaks", alone / "run.err"), alone / "run.err", "without their legend")
    other = tmp_path / "other"
    other.mkdir()
    (other / "run.out").write_text(TIMELINE_STDOUT.replace("|Memory data volume [GBytes]", ""))
    (other / "run.err").write_text(TIMELINE_STDERR)
    _one_line_error(cli("peaks", other / "run.err"), other / "run.err", "the legend (run.out) names 3")
