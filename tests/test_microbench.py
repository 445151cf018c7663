"""perfcheck.run.microbench and `perfcheck peaks measure`: STREAM byte counting, the
peak chosen, FLOP counting, threads said honestly, the machine file with its
fingerprint, merging ingested peaks, one-line errors."""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from perfcheck.errors import UsageError
from perfcheck.machine import read_machine
from perfcheck.model import PeakDetail, Peaks, Source
from perfcheck.run import microbench
from perfcheck.run.microbench import measure_peaks, merge

from conftest import one_line_error, profile

SIZE = 4 * 2**20  # bytes per array: small and fast (cache-resident: the counting is what is tested)
STREAM = "stream/uob-babelstream-v2.0-broadwell/mccalpin-cray.txt"


@pytest.fixture(autouse=True)
def _small_matmul(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(microbench, "MATMUL_TARGET_S", 0.0)  # n = 512: a few ms


@pytest.fixture(scope="module")
def measured() -> microbench.Measured:
    import perfcheck.run.microbench as mb

    old, mb.MATMUL_TARGET_S = mb.MATMUL_TARGET_S, 0.0
    try:
        return measure_peaks("cpu", size=SIZE, repeat=3)
    finally:
        mb.MATMUL_TARGET_S = old


def test_bandwidth_counted_the_stream_way(measured: microbench.Measured) -> None:
    n = SIZE // 8
    results = {r.benchmark: r for r in measured.results}
    assert list(results) == ["copy", "triad", "sum", "matmul-fp64", "matmul-fp32"]
    # McCalpin: copy 2 words, triad 3 words per element; the reduction reads 1
    assert results["copy"].work == 16 * n and results["triad"].work == 24 * n and results["sum"].work == 8 * n
    for name in ("copy", "triad", "sum"):
        r = results[name]
        assert r.value == r.work / r.best and r.unit == "B/s" and r.calls == 3
        assert r.best <= r.median
    assert "write-allocate not counted" in results["copy"].how and "1 thread" in results["triad"].how
    peaks = measured.peaks()
    # the peak is the better STREAM kernel; the read-only sum is a detail only
    assert peaks.values["mem_bw"] == max(results["copy"].value, results["triad"].value)
    assert results["sum"].peak is None
    assert [d.name.split(":")[0] for d in peaks.details] == list(results)
    assert "hbm_bw" not in peaks.values


def test_flops_of_the_matrix_multiplies(measured: microbench.Measured) -> None:
    peaks = measured.peaks()
    for precision in ("fp64", "fp32"):
        (r,) = [r for r in measured.results if r.benchmark == f"matmul-{precision}"]
        size = int(re.search(r"n=(\d+)", r.how).group(1))  # type: ignore[union-attr]
        assert size == 512
        assert r.work == 2 * 512**3 and r.unit == "FLOP/s"
        assert peaks.values[f"flop_rate_{precision}"] == r.work / r.best
        threads = measured.fingerprint["blas_threads"]
        assert f"{threads} BLAS thread(s)" in r.how


def test_fingerprint_says_what_ran_and_not_the_host(measured: microbench.Measured) -> None:
    fp = measured.fingerprint
    assert fp["numpy"] == np.__version__
    assert fp["cpus"].isdigit() and fp["blas_threads"].isdigit()
    assert fp["blas_threads_from"]
    assert fp["cpu"] and fp["machine"]
    assert socket.gethostname() not in fp.values()
    assert measured.source.device is None  # a CPU is not a device --arch knows
    assert measured.array_bytes == SIZE


def test_blas_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    for name in microbench._THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert microbench.blas_threads() == (3, "$OMP_NUM_THREADS")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "5")
    assert microbench.blas_threads() == (5, "$OPENBLAS_NUM_THREADS")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS")
    threads, how = microbench.blas_threads()
    assert threads >= 1 and how.startswith("assumed")


def test_default_array_size_follows_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    import perfcheck.measure as measuring

    for llc, expected in ((32 * 2**20, 128 * 2**20), (2**20, 32 * 2**20), (2**30, 512 * 2**20), (None, 256 * 2**20)):
        monkeypatch.setattr(measuring, "last_level_cache_bytes", lambda llc=llc: llc)
        assert microbench.default_array_bytes("cpu") == expected


def test_ingested_peaks_win_when_merged() -> None:
    own = Peaks({"mem_bw": 20e9, "flop_rate_fp64": 1e11}, (PeakDetail("perfcheck", "copy", 20e9, "B/s"),),
                (Source("a", "perfcheck-microbench", "perfcheck"),))
    stream = Peaks({"mem_bw": 12e9}, (PeakDetail("stream.txt", "Triad", 12e9, "B/s"),), (Source("b", "stream", "stream"),))
    merged = merge(own, stream)
    assert merged.values == {"mem_bw": 12e9, "flop_rate_fp64": 1e11}
    assert [d.name for d in merged.details] == ["copy", "Triad"]
    assert len(merged.sources) == 2


def test_bad_arguments() -> None:
    with pytest.raises(UsageError, match="--device must be cpu or cuda"):
        measure_peaks("gpu")
    with pytest.raises(UsageError, match="--repeat must be a positive integer"):
        measure_peaks("cpu", repeat=0)
    with pytest.raises(UsageError, match="--size must be at least 8192"):
        measure_peaks("cpu", size=100)


# --- the command line ------------------------------------------------------------------------


def test_cli_measure_save_and_read_back(cli, tmp_path: Path) -> None:
    machine = tmp_path / "machines" / "ci-runner.toml"
    result = cli("peaks", "measure", "--size", "4MiB", "--repeat", "2", "--save", machine, "--json")
    assert result.code == 0, result.err
    assert f"wrote machine file {machine}" in result.err
    doc = result.json()
    assert doc["device"] == "cpu" and doc["array_bytes"] == SIZE
    assert set(doc["peaks"]) == {"mem_bw", "flop_rate_fp64", "flop_rate_fp32"}
    assert [b["benchmark"] for b in doc["benchmarks"]] == ["copy", "triad", "sum", "matmul-fp64", "matmul-fp32"]
    saved = read_machine(machine)
    assert saved.name == "ci-runner" and saved.device is None and saved.arch is None
    assert dict(saved.fingerprint) == doc["fingerprint"]
    assert saved.peaks.values == pytest.approx(doc["peaks"], rel=1e-15)
    assert "# perfcheck machine file" in machine.read_text() and "[fingerprint]" in machine.read_text()
    # a machine file is a peaks source like any benchmark output
    again = cli("peaks", machine, "--json")
    assert again.code == 0, again.err
    assert again.json()["peaks"] == doc["peaks"]


def test_cli_text_says_how_many_threads(cli) -> None:
    result = cli("peaks", "measure", "--size", "4MiB", "--repeat", "2")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("perfcheck peaks measure: cpu: ")
    assert "NumPy ufuncs on 1 thread" in lines[1]
    assert re.search(r"FLOP/s: numpy.matmul through BLAS on \d+ thread\(s\)", lines[2])
    assert any(line.startswith("mem_bw") for line in lines)


def test_cli_merge_a_stream_run(cli, tmp_path: Path) -> None:
    stream = profile(STREAM)
    machine = tmp_path / "box.toml"
    result = cli("peaks", "measure", "--size", "4MiB", "--repeat", "2", "--merge", stream, "--save", machine, "--json")
    assert result.code == 0, result.err
    # STREAM's best rate (Triad 124799.5 MB/s, decimal) replaces perfcheck's own figure
    assert result.json()["peaks"]["mem_bw"] == 124_799_500_000
    saved = read_machine(machine)
    assert saved.peaks.values["mem_bw"] == 124_799_500_000.0
    names = [d.name for d in saved.peaks.details]
    assert "Triad" in names and any(n.startswith("copy: numpy.copyto") for n in names)


def test_cli_errors_are_one_line(cli, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # as on this machine, wherever the test runs
    monkeypatch.setitem(sys.modules, "cupy", None)
    missing = tmp_path / "nope.txt"
    one_line_error(cli("peaks", "measure", "--merge", missing), missing)
    one_line_error(cli("peaks", "measure", "--device", "cuda"), None, "PyTorch or CuPy")
    with pytest.raises(SystemExit) as exit_:  # argparse's usage errors, like every subcommand's
        cli("peaks", "measure", "--size", "12x")
    assert exit_.value.code == 2
    assert "perfcheck: error: argument --size: expected bytes such as 268435456 or 256MiB" in capsys.readouterr().err
    garbage = tmp_path / "broken.toml"
    garbage.write_text('format_version = 1\n[machine]\nname = "x"\n[fingerprint]\ncpus = 2\n')
    line = one_line_error(cli("peaks", garbage), garbage, "[fingerprint] cpus must be a string")
    assert f"{garbage}:5:" in line


def test_each_figure_keeps_the_spread_of_its_repeats(measured: microbench.Measured, tmp_path: Path) -> None:
    peaks = measured.peaks()
    for r, d in zip(measured.results, peaks.details):
        assert d.value == d.maximum == r.value and d.repeats == r.calls
        assert d.minimum <= d.median <= d.maximum
        assert d.median == pytest.approx(r.work / r.median) and d.minimum == pytest.approx(r.work / r.worst)
    path = tmp_path / "m.toml"
    from perfcheck.machine import machine_from_peaks, write_machine

    write_machine(path, machine_from_peaks("m", peaks, fingerprint=measured.fingerprint))
    text = path.read_text()
    assert "\nrepeats = 3\n" in text and "\nmedian = " in text and "\nmin = " in text and "\nmax = " in text
    back = read_machine(path).peaks.details
    assert [(d.median, d.minimum, d.maximum, d.repeats) for d in back] == [
        (d.median, d.minimum, d.maximum, d.repeats) for d in peaks.details]


def _result(best: float, median: float, peak: str | None = "mem_bw") -> microbench.Result:
    return microbench.Result("copy", peak, 1e9 / best, "B/s", 1e9, best, median, 10, "test", median * 2)


def test_a_spread_over_ten_percent_is_a_warning() -> None:
    source = Source("s", "f", "t")
    quiet = microbench.Measured("cpu", (_result(1.0, 1.05),), {}, 1, source)
    assert quiet.peaks().oddities == ()
    busy = microbench.Measured("cpu", (_result(1.0, 1.5), _result(1.0, 2.0, peak=None)), {}, 1, source)
    (warning,) = busy.peaks().oddities  # only benchmarks that give a peak are judged
    assert "copy (mem_bw): the median of 10 calls ran 33% below the best; a busy machine?" in warning.what


def test_cuda_repeats_with_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # --device cuda times with CUDA events through perfcheck.measure; the stand-in
    # PyTorch's kernel takes 1.5 ms, then 3 ms per call after the first timed one.
    from test_measure import _FakeTorch

    torch = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    calls = []

    def kernel() -> None:
        calls.append(1)
        torch.gpu_ms += 1.5 if len(calls) <= 2 else 3.0  # warm-up and first timed call fast

    r = microbench._bandwidth("copy", kernel, 2**20, "hbm_bw", 5, "cuda", "stand-in")
    assert (r.best, r.median, r.worst, r.calls) == (1.5e-3, 3e-3, 3e-3, 5)
    measured = microbench.Measured("cuda", (r,), {}, 8 * 2**20, Source("s", "f", "t"))
    (warning,) = measured.peaks().oddities
    assert "copy (hbm_bw): the median of 5 calls ran 50% below the best" in warning.what
    assert measured.peaks().details[0].median == pytest.approx(16 * 2**20 / 3e-3)
