"""Baselines: the regression rules (exact, timing, rates), bounded samples with exact
statistics, merged runs, machine fingerprints, reviewable and atomic files, and
one-line errors for malformed or foreign baselines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import profile

from perfcheck import __version__
from perfcheck import baseline as bl
from perfcheck.analysis import Analysis
from perfcheck.errors import InputError, UsageError
from perfcheck.expect import evaluate
from perfcheck.model import FAILED, PASSED, Source

ROOT = Path(__file__).resolve().parent.parent


def _lognormal(seed: int, n: int = 200, noise: float = 0.02, median: float = 1e-3) -> np.ndarray:
    return median * np.exp(np.random.default_rng(seed).normal(0.0, noise, n))


def _entry(samples: np.ndarray, **metrics: float) -> bl.KernelBaseline:
    summary = bl.summarise(samples)
    return bl.KernelBaseline(metrics={"duration": summary.median, **metrics}, samples={"duration": summary}, runs=1)


def _duration(entry: bl.KernelBaseline, current: np.ndarray, fraction: float = 0.05) -> bl.Decision:
    return bl.compare("duration", "<=", fraction, None, float(np.median(current)), current, entry, exact=False)


# ------------------------------------------------------------------ exact quantities


def test_exact_quantity_three_percent_more_fails_even_with_zero_allowance() -> None:
    entry = bl.KernelBaseline(metrics={"hbm_bytes": 4_000_000.0})
    for fraction in (None, 0.0):
        more = bl.compare("hbm_bytes", "<=", fraction, None, 4_120_000.0, None, entry, exact=True)
        assert not more.passed and more.reference == 4_000_000.0 and more.change == pytest.approx(0.03)
        assert "exact" in more.detail
    assert bl.compare("hbm_bytes", "<=", 0.0, None, 4_000_000.0, None, entry, exact=True).passed
    # float round-off of an integer quantity (a mean over dispatches) is not a regression
    assert bl.compare("hbm_bytes", "<=", 0.0, None, 4_000_000.0 * (1 + 1e-12), None, entry, exact=True).passed
    assert bl.compare("hbm_bytes", "==", 0.0, None, 4_000_001.0, None, entry, exact=True).passed is False
    # an allowance is honoured exactly: +3% within "+ 5%", not within "+ 2%"
    assert bl.compare("hbm_bytes", "<=", 0.05, None, 4_120_000.0, None, entry, exact=True).passed
    assert not bl.compare("hbm_bytes", "<=", 0.02, None, 4_120_000.0, None, entry, exact=True).passed


def test_exact_zero_baseline_scratch() -> None:
    entry = bl.KernelBaseline(metrics={"scratch_per_thread": 0.0})
    assert bl.compare("scratch_per_thread", "==", 0.0, None, 0.0, None, entry, exact=True).passed
    spill = bl.compare("scratch_per_thread", "==", 0.0, None, 16.0, None, entry, exact=True)
    assert not spill.passed and spill.change is None


def test_is_exact_classification() -> None:
    for metric in ("hbm_bytes", "instructions", "flops", "flops_fp64", "vgpr", "registers", "lds_per_workgroup",
                   "scratch_per_thread", "calls", "grid_size", "occupancy_pct", "ai_hbm"):
        assert bl.is_exact(metric), metric
    for metric in ("duration", "duration_mean", "hbm_bw", "hbm_bw_pct", "flop_rate", "gips", "roofline_pct",
                   "achieved_occupancy_pct", "raw.GRBM_GUI_ACTIVE"):
        assert not bl.is_exact(metric), metric


# ------------------------------------------------------------------ timings


def test_duration_scaled_by_110_fails_and_102_passes() -> None:
    base = _lognormal(1)
    entry = _entry(base)
    slow = _duration(entry, base * 1.10)
    assert not slow.passed and slow.clear is True
    assert slow.observed == pytest.approx(1.10 * entry.metrics["duration"], rel=1e-12)
    assert slow.reference == pytest.approx(1.05 * entry.metrics["duration"], rel=1e-12)
    assert slow.interval[0] > 1.0 and "beyond the allowance" in slow.detail and "200 vs 200 dispatches" in slow.detail
    ok = _duration(entry, base * 1.02)
    assert ok.passed and ok.change == pytest.approx(0.02) and "within the allowance" in ok.detail
    # an independent run that is 10% slower, not merely the same samples scaled
    assert not _duration(entry, _lognormal(2) * 1.10).passed
    # absolute allowance: "duration <= baseline + 0.1 ms" on a 1 ms kernel
    assert bl.compare("duration", "<=", 0.0, 1e-4, float(np.median(base * 1.08)), base * 1.08, entry, exact=False).passed
    assert not bl.compare("duration", "<=", 0.0, 1e-4, float(np.median(base * 1.12)), base * 1.12, entry, exact=False).passed


def test_two_percent_noise_does_not_fail_a_five_percent_budget() -> None:
    # 40 independent pairs of runs, 2% lognormal jitter and a 2% run-to-run shift
    # drawn per run: no regression, so none may fail.
    rng = np.random.default_rng(7)
    for _ in range(40):
        base = _lognormal(int(rng.integers(1 << 30)), n=100) * np.exp(rng.normal(0, 0.02))
        cur = _lognormal(int(rng.integers(1 << 30)), n=100) * np.exp(rng.normal(0, 0.02))
        assert _duration(_entry(base), cur).passed


def test_noisy_few_dispatches_need_a_clear_regression() -> None:
    # 20 dispatches with 15% jitter: a median 8% above the baseline is noise, not a verdict
    base = _lognormal(11, n=20, noise=0.15)
    cur = base * 1.08
    decision = _duration(_entry(base), np.random.default_rng(3).permutation(cur))
    assert decision.passed and decision.clear is False and "within the noise" in decision.detail
    assert decision.interval[0] < 1.0 < decision.interval[1]
    # ... while 40% slower is clear even with that noise
    assert not _duration(_entry(base), base * 1.4).passed


def test_too_few_dispatches_compare_directly_and_say_so() -> None:
    base = np.array([1.552e-05, 1.632e-05, 2.048e-05])  # three dispatches: no noise estimate
    entry = _entry(base)
    slow = _duration(entry, base * 1.10)
    assert not slow.passed and slow.clear is None and "noise unknown" in slow.detail
    assert _duration(entry, base * 1.02).passed


def test_duration_mean_uses_the_mean_and_its_standard_error() -> None:
    base = _lognormal(5, n=400)
    entry = _entry(base, duration_mean=float(base.mean()))
    cur = base * 1.10
    decision = bl.compare("duration_mean", "<=", 0.05, None, float(cur.mean()), cur, entry, exact=False)
    assert not decision.passed and decision.change == pytest.approx(0.10)


def test_missing_values_do_not_pass() -> None:
    entry = bl.KernelBaseline(metrics={"duration": 1e-3})
    assert not bl.compare("duration", "<=", 0.05, None, None, None, entry, exact=False).passed
    assert not bl.compare("hbm_bw", ">=", -0.03, None, 1e12, None, entry, exact=False).passed


# ------------------------------------------------------------------ rates (higher is better)


def test_bandwidth_mirrors_duration() -> None:
    base = _lognormal(21)
    bytes_moved = 4e6
    entry = _entry(base, hbm_bw=bytes_moved / float(np.median(base)))
    for factor, passed in ((1.10, False), (1.02, True), (0.95, True)):
        cur = base * factor
        bw = bytes_moved / float(np.median(cur))
        decision = bl.compare("hbm_bw", ">=", -0.03, None, bw, cur, entry, exact=False)
        assert decision.passed is passed, (factor, decision.detail)
        assert decision.reference == pytest.approx(0.97 * entry.metrics["hbm_bw"])
    # no current samples (the caller only has the rate): the baseline's noise is assumed
    slow = bl.compare("hbm_bw", ">=", -0.03, None, bytes_moved / (1.10 * float(np.median(base))), None, entry, exact=False)
    assert not slow.passed and slow.clear is True and "? vs 200 dispatches" in slow.detail
    assert bl.compare("hbm_bw_pct", ">=", -0.03, None, 60.0, None, _entry(base, hbm_bw_pct=61.0), exact=False).passed


# ------------------------------------------------------------------ through the expectation language


def _analysis(durations: np.ndarray, **metrics: float) -> Analysis:
    kernels = pd.DataFrame({"kernel": ["k"], "calls": [len(durations)], "duration": [float(np.median(durations))],
                            **{k: [v] for k, v in metrics.items()}})
    return Analysis(sources=(Source(path="p.csv", format="rocprofv3-kernel-trace", tool="rocprofv3"),), oddities=(),
                    kernels=kernels, target=None, target_origin="unknown", duration_samples={"k": durations})


def test_evaluate_with_a_recorded_baseline() -> None:
    base = _lognormal(31)
    stored = bl.from_analysis("s", _analysis(base, hbm_bytes=4e6))
    exprs = {"k": ["duration <= baseline + 5%", "hbm_bytes <= baseline"]}
    same = evaluate("s", exprs, _analysis(base * 1.02, hbm_bytes=4e6), stored)
    assert [c.outcome for c in same] == [PASSED, PASSED]
    worse = evaluate("s", exprs, _analysis(base * 1.10, hbm_bytes=4.12e6), stored)
    assert [c.outcome for c in worse] == [FAILED, FAILED]
    assert worse[0].baseline == pytest.approx(float(np.median(base)))


# ------------------------------------------------------------------ bounded samples, merged runs


def test_a_million_dispatches_keep_exact_statistics_in_a_small_entry(tmp_path: Path) -> None:
    x = _lognormal(41, n=1_000_003, noise=0.05)
    series = bl.summarise(x)
    assert series.n == 1_000_003 and len(series.values) == bl.MAX_SAMPLES
    assert series.median == float(np.median(x)) and series.mean == pytest.approx(float(x.mean()), rel=1e-12)
    assert series.mad == float(np.median(np.abs(x - np.median(x))))
    assert series.min == float(x.min()) and series.max == float(x.max())
    assert list(series.values) == sorted(series.values)
    path = tmp_path / "b.json"
    bl.write(path, bl.Baseline("s", {"device": "d"}, {"k": bl.KernelBaseline({"duration": series.median}, {"duration": series})}))
    assert path.stat().st_size < 12_000
    # the interval uses the true n (not the 256 kept): a million dispatches resolve a 0.2% shift
    entry = bl.load(path).kernels["k"]
    decision = bl.compare("duration", "<=", 0.0, None, series.median * 1.002, series, entry, exact=False)
    assert decision.interval[1] - decision.interval[0] < 1e-3


def test_merging_runs_adds_counts_and_makes_run_to_run_noise_count() -> None:
    runs = [_lognormal(50 + i, n=300, median=1e-3 * f) for i, f in enumerate((1.00, 1.04, 0.97))]
    merged = bl.from_analysis("s", _analysis(runs[0], hbm_bytes=4e6))
    for run in runs[1:]:
        merged = bl.merge(merged, bl.from_analysis("s", _analysis(run, hbm_bytes=4e6)))
    entry = merged.kernels["k"]
    series = entry.samples["duration"]
    pooled = np.concatenate(runs)
    assert entry.runs == 3 and series.n == 900
    assert series.mean == pytest.approx(float(pooled.mean()), rel=1e-12)
    assert series.std == pytest.approx(float(pooled.std()), rel=1e-9)
    assert series.min == float(pooled.min()) and series.max == float(pooled.max())
    assert series.run_medians == tuple(float(np.median(r)) for r in runs)
    assert abs(series.median / float(np.median(pooled)) - 1) < 0.003  # from the pooled sketch
    assert entry.metrics["duration"] == pytest.approx(np.mean([np.median(r) for r in runs]))
    # 6% slower than the runs' centre: beyond 5% and clear against one run's jitter, but
    # these runs wander by ~3.5% between themselves, so it is within the noise
    cur = runs[0] * (1.06 * entry.metrics["duration"] / float(np.median(runs[0])))
    single = bl.from_analysis("s", _analysis(runs[0])).kernels["k"]
    single = replace(single, metrics={"duration": entry.metrics["duration"]})
    assert not _duration(single, cur).passed
    decision = _duration(entry, cur)
    assert decision.passed and "run-to-run spread" in decision.detail
    assert not _duration(entry, cur * 1.10).passed
    with pytest.raises(UsageError, match="another machine"):
        bl.merge(merged, replace(merged, fingerprint={**merged.fingerprint, "device": "mi300x"}))


# ------------------------------------------------------------------ fingerprint and paths


def test_fingerprint_and_path_are_machine_specific(tmp_path: Path) -> None:
    sources = (
        Source(path="a.csv", format="rocprofv3-kernel-trace", tool="rocprofv3", tool_version="0.6.0",
               device="AMD Instinct MI300X", arch="gfx942", rank=0),
        Source(path="/elsewhere/b.csv", format="rocprofv3-kernel-trace", tool="rocprofv3", tool_version="0.6.0",
               device="AMD Instinct MI300X", arch="gfx942", rank=1),
    )
    analysis = Analysis(sources=sources, oddities=(), kernels=pd.DataFrame(), target=None, target_origin="unknown")
    fp = bl.fingerprint(analysis)
    assert fp == {"device": "AMD Instinct MI300X", "arch": "gfx942", "tool": "rocprofv3", "tool_version": "0.6.0"}
    path = bl.baseline_path(tmp_path, "stencil", fp)
    assert path == tmp_path / "stencil" / "amd-instinct-mi300x_gfx942_rocprofv3-0.6.0.json"
    other = {**fp, "device": "NVIDIA B200", "arch": "sm_100"}
    assert bl.baseline_path(tmp_path, "stencil", other) != path
    assert bl.baseline_path(tmp_path, "", {}) == tmp_path / "default" / "unknown-machine.json"
    stored = bl.Baseline("stencil", other, {}, path=str(path))
    why = bl.mismatch(stored, fp)
    assert why is not None and "'NVIDIA B200' != 'AMD Instinct MI300X'" in why and "not compared" in why
    assert bl.mismatch(replace(stored, fingerprint=fp), fp) is None
    bl.write(bl.baseline_path(tmp_path, "stencil", other), stored)
    assert bl.other_baselines(tmp_path, "stencil", fp) == [bl.baseline_path(tmp_path, "stencil", other)]
    assert bl.other_baselines(tmp_path, "stencil", other) == []


def test_lookup_never_compares_across_hardware(tmp_path: Path) -> None:
    mi100 = {"device": "mi100", "arch": "gfx908", "tool": "rocprofv3", "tool_version": "1.0.0"}
    b200 = {"device": "b200", "arch": "sm_100", "tool": "ncu", "tool_version": "2025.1"}
    first = bl.lookup(tmp_path, "stencil", mi100)
    assert first.baseline is None and first.warnings == () and first.path.name == "mi100_gfx908_rocprofv3-1.0.0.json"
    bl.write(first.path, bl.Baseline("stencil", mi100, {}))
    found = bl.lookup(tmp_path, "stencil", mi100)
    assert found.baseline is not None and found.baseline.fingerprint == mi100 and found.warnings == ()
    elsewhere = bl.lookup(tmp_path, "stencil", b200)
    assert elsewhere.baseline is None and len(elsewhere.warnings) == 1
    assert "device=b200" in elsewhere.warnings[0] and str(first.path) in elsewhere.warnings[0]
    # a file at this machine's path that was recorded elsewhere (copied, or a slug collision)
    bl.write(bl.baseline_path(tmp_path, "stencil", b200), bl.Baseline("stencil", {**b200, "tool_version": "2024.3"}, {}))
    copied = bl.lookup(tmp_path, "stencil", b200)
    assert copied.baseline is None and "'2024.3' != '2025.1'" in copied.warnings[0]


def test_fingerprint_of_a_real_profile() -> None:
    from perfcheck.analysis import analyse

    analysis = analyse([profile("omniperf/rocprofiler-compute-vcopy-MI200")])
    assert bl.fingerprint(analysis) == {"device": "MI200", "arch": "gfx90a", "tool": "omniperf", "tool_version": "2.0.0-RC1"}
    entry = bl.from_analysis("vcopy", analysis).kernels["vecCopy(double*, double*, double*, int, int)"]
    # the file's three dispatches: 20480, 16320, 15520 ns
    assert entry.samples["duration"].values == (1.552e-05, 1.632e-05, 2.048e-05)
    assert entry.metrics["duration"] == 1.632e-05 and entry.metrics["calls"] == 3
    assert entry.metrics["vgpr"] == 8 and entry.metrics["hbm_write_bytes"] == 6682816


# ------------------------------------------------------------------ files


def _baseline(kernels: int = 2, marker: float = 1.0) -> bl.Baseline:
    entries = {}
    for i in range(kernels):
        x = _lognormal(i, n=400) * marker
        entries[f"kernel_{i:05d}<float>(float*, int)"] = _entry(x, hbm_bytes=4e6 + i, marker=marker, vgpr=32)
    return bl.Baseline("suite", {"device": "mi100", "arch": "gfx908", "tool": "rocprofv3", "tool_version": "1.0.0"}, entries)


def test_round_trip_and_reviewable_format(tmp_path: Path) -> None:
    original = _baseline()
    path = tmp_path / "nested" / "b.json"
    assert bl.write(path, original) is True
    text = path.read_text()
    loaded = bl.load(path)
    assert loaded == replace(original, path=str(path))
    assert text.endswith("}\n") and text.startswith('{\n  "fingerprint": {')
    data = json.loads(text)
    assert data["format_version"] == bl.FORMAT_VERSION and data["written_by"] == f"perfcheck {__version__}"
    assert list(data) == sorted(data) and list(data["kernels"]) == sorted(data["kernels"])
    assert "\"vgpr\": 32\n" in text and '"hbm_bytes": 4000001' in text  # integral values stay integers
    value = loaded.kernels["kernel_00001<float>(float*, int)"].samples["duration"].values[7]
    assert repr(value) in text  # floats written by repr: exact and stable
    # writing the same content again leaves the file alone
    before = path.stat().st_mtime_ns
    time.sleep(0.01)
    assert bl.write(path, loaded) is False and path.stat().st_mtime_ns == before
    assert bl.load(tmp_path / "absent.json") is None


def test_write_refuses_nan_without_touching_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    bl.write(path, _baseline())
    before = path.read_text()
    broken = bl.Baseline("suite", {}, {"k": bl.KernelBaseline({"duration": float("nan")})})
    with pytest.raises(ValueError):
        bl.write(path, broken)
    assert path.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["b.json"]


def _error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        bl.load(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


def test_malformed_baselines_name_file_and_line(tmp_path: Path) -> None:
    good = bl.render(_baseline())
    path = tmp_path / "b.json"
    lines = good.splitlines(keepends=True)
    path.write_text("".join(lines[:40]))  # truncated mid-file
    assert _error(path).startswith(f"{path}:41: is not valid JSON")
    path.write_text(good.replace('"vgpr": 32', '"vgpr": 32,,', 1))
    line = good[: good.index('"vgpr": 32')].count("\n") + 1
    assert _error(path).startswith(f"{path}:{line}: is not valid JSON (Expecting")
    path.write_text(good.replace('"vgpr": 32', '"vgpr": "32"', 1))
    assert _error(path).startswith(f"{path}:{line}: 'vgpr' must be a number")
    path.write_text("")
    assert "is empty" in _error(path)
    path.write_bytes(b"\x00\xff\xfe garbage")
    assert "not UTF-8" in _error(path)
    path.write_text("[1, 2]\n")
    assert "not a perfcheck baseline" in _error(path)
    path.write_text(good.replace('"runs": 1', '"runs": 0', 1))
    assert "'runs' must be a positive integer" in _error(path)


def test_unknown_format_version_says_who_wrote_it(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    data = json.loads(bl.render(_baseline()))
    data.update(format_version=2, written_by="perfcheck 2.3.0")
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    message = _error(path)
    assert "format_version 2, written by perfcheck 2.3.0" in message
    assert f"this is perfcheck {__version__}, which reads format_version 1" in message


# ------------------------------------------------------------------ atomic writes


_WRITER = textwrap.dedent(
    """
    import os, time
    import numpy as np
    from perfcheck import baseline as bl

    def make(marker):
        rng = np.random.default_rng(0)
        kernels = {}
        for i in range(300):
            s = bl.summarise(marker * 1e-3 * np.exp(rng.normal(0, 0.02, 400)))
            kernels[f"kernel_{i:05d}"] = bl.KernelBaseline({"duration": s.median, "marker": marker}, {"duration": s})
        return bl.Baseline("suite", {"device": "mi100"}, kernels)

    a, b = make(1.0), make(2.0)
    # Spend the time where a kill hurts: rendering is cached and the disk is slow
    # (every write() takes at most 64 KiB, 5 ms apart), so kills land while a file
    # is half written.
    texts = {id(a): bl.render(a), id(b): bl.render(b)}
    bl.render = lambda baseline: texts[id(baseline)]
    real_write = os.write

    def slow_write(fd, data):
        time.sleep(0.005)
        return real_write(fd, bytes(data[:65536]))

    os.write = slow_write
    print("ready", flush=True)
    while True:
        for item in (a, b):
            bl.write(%r, item)
    """
)


def test_killed_writer_leaves_a_complete_baseline(tmp_path: Path) -> None:
    path = tmp_path / "suite" / "big.json"
    bl.write(path, _baseline(300, 1.0))
    assert path.stat().st_size > 1_500_000  # large enough that a write takes a while
    script = _WRITER % str(path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    strays = 0
    for delay in (0.05, 0.17, 0.31):
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, cwd=ROOT)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        loaded = bl.load(path)  # never a partial file
        markers = {entry.metrics["marker"] for entry in loaded.kernels.values()}
        assert len(loaded.kernels) == 300 and markers in ({1.0}, {2.0})
        strays += any(p.name.endswith(".tmp") for p in path.parent.iterdir())
    assert strays  # the kills did land mid-write
    # the killed writers' temp files are removed by the next write (their pid is dead);
    # load() and *.json globs never see them meanwhile (".big.json.<pid>.<random>.tmp")
    bl.write(path, _baseline(3, 3.0))
    assert sorted(p.name for p in path.parent.iterdir()) == ["big.json"]


def test_unwritable_location_is_a_one_line_error(tmp_path: Path) -> None:
    target = tmp_path / "b.json"
    target.mkdir()  # a directory where the file should go
    with pytest.raises(InputError, match=r"b\.json: cannot write the baseline"):
        bl.write(target, _baseline())
    assert [p.name for p in target.parent.iterdir()] == ["b.json"]  # no temp file left behind
