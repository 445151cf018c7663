"""The CPU example (examples/cpu) end to end, for real on this machine: the first
``pytest --perf`` run records baselines, the second compares an unchanged kernel
with them, and a kernel made deliberately four times slower (PERFCHECK_EXAMPLE_SLOW)
fails its baseline check. Runs in subprocesses (each measures this machine's peaks
and its kernels) with the baselines in a temporary directory.

The test asserts only what holds on any machine in any state (a shared CI runner,
two busy neighbours): no share of a peak (examples/cpu/README.md has those), and
an unchanged kernel's change between two runs is bounded by the allowance widened
by the spread of its calls measured in those same runs, not by the allowance alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cpu"
KERNELS = ("copy", "triad", "reduce_sum")
EXPECT = "duration <= baseline + 50%"
ALLOWANCE = 1.5  # the example's 50%


def _run(baselines: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # A developer's first run records the baselines: not CI (CI=true makes them strict).
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PERFCHECK_") and k != "CI"}
    # 64 MiB arrays, 8 timed calls: a few seconds per run.
    environment.update(PERFCHECK_EXAMPLE_BYTES=str(64 * 2**20), PERFCHECK_EXAMPLE_REPEAT="8", **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--perf", str(EXAMPLE), "-p", "no:cacheprovider",
         "--perf-baseline-dir", str(baselines), "--perf-json", str(baselines.parent / "results.json")],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300,
    )


def _suites(results: Path) -> dict[str, dict[str, Any]]:
    """kernel -> {"check": its one check, "calls": its measured duration statistics}."""
    doc = json.loads(results.read_text())
    out = {}
    for suite in doc["suites"].values():
        (check,) = suite["checks"]
        out[check["kernel"]] = {"check": check, "calls": suite["measurements"][check["kernel"]]}
    return out


def _spread(calls: dict[str, float]) -> float:
    """How far apart this run's calls of one kernel were: slowest / fastest."""
    return calls["duration_max"] / calls["duration_min"]


def _assert_judged_by_spread(kernel: str, recorded: dict[str, Any], current: dict[str, Any]) -> None:
    """An unchanged kernel: its median moved by at most the allowance widened by the
    spread of the calls in the two runs; within the bare allowance it passed."""
    ratio = current["calls"]["duration"] / recorded["calls"]["duration"]
    budget = ALLOWANCE * max(_spread(recorded["calls"]), _spread(current["calls"]))
    assert ratio <= budget, (kernel, ratio, budget)
    if ratio <= ALLOWANCE:
        assert current["check"]["outcome"] == "passed", current["check"]
    else:  # beyond the allowance: fails only when clearly beyond the noise, and says so
        assert current["check"]["outcome"] in ("passed", "failed"), current["check"]
        assert "noise" in current["check"]["detail"], current["check"]


def test_record_compare_and_catch_a_slower_kernel(tmp_path: Path) -> None:
    baselines = tmp_path / "baselines"
    results = tmp_path / "results.json"

    first = _run(baselines)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "perfcheck: 3 recorded" in first.stdout
    files = sorted(baselines.rglob("*.json"))
    assert [f.parent.name for f in files] == [f"test_numpy_kernels.test_{k}" for k in ("copy", "reduce_sum", "triad")]
    for path in files:  # one kernel each, with its per-call samples, on this machine's fingerprint
        doc = json.loads(path.read_text())
        assert len(doc["kernels"]) == 1 and doc["fingerprint"]["tool"] == "perfcheck.measure[thread]"
    recorded = _suites(results)
    assert {recorded[k]["check"]["outcome"] for k in KERNELS} == {"recorded"}
    for path in files:  # the baseline holds the median the results report
        ((kernel, entry),) = json.loads(path.read_text())["kernels"].items()
        assert entry["samples"]["duration"]["median"] == recorded[kernel]["calls"]["duration"]
    # the declared bytes give a bandwidth; no peak is given, so no share of one is invented
    assert all(recorded[k]["calls"]["mem_bw"] > 0 and "mem_bw_pct" not in recorded[k]["calls"] for k in KERNELS)

    second = _run(baselines)
    assert second.returncode in (0, 1), second.stdout + second.stderr
    assert second.stdout.count("baseline compared:") == 3
    compared = _suites(results)
    assert {k: compared[k]["check"]["baseline"] for k in KERNELS} == {k: recorded[k]["calls"]["duration"] for k in KERNELS}
    for kernel in KERNELS:
        _assert_judged_by_spread(kernel, recorded[kernel], compared[kernel])
    assert (second.returncode == 0) == all(compared[k]["check"]["passed"] for k in KERNELS)

    written = {path: path.read_bytes() for path in sorted(baselines.rglob("*.json"))}
    slower = _run(baselines, PERFCHECK_EXAMPLE_SLOW="copy")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    outcome = _suites(results)
    # four times the work: beyond the 50% and beyond the noise of the calls, however busy
    assert outcome["copy"]["check"]["outcome"] == "failed", outcome["copy"]["check"]
    assert "clearly worse than the noise" in outcome["copy"]["check"]["detail"]
    assert f"FAILED: copy: {EXPECT}" in slower.stdout
    for kernel in ("triad", "reduce_sum"):
        _assert_judged_by_spread(kernel, recorded[kernel], outcome[kernel])
    # a failing run does not overwrite the baselines it was compared with
    assert {path: path.read_bytes() for path in sorted(baselines.rglob("*.json"))} == written


def test_skipped_without_perf() -> None:
    result = subprocess.run([sys.executable, "-m", "pytest", str(EXAMPLE), "-p", "no:cacheprovider", "-q"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 skipped" in result.stdout
    assert "SKIPPED [3] examples/cpu/test_numpy_kernels.py" in result.stdout and "run with --perf" in result.stdout  # -rs
