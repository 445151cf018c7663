"""The CPU example (examples/cpu) end to end, for real on this machine: the first
``pytest --perf`` run records baselines, the second compares against them and
passes, and a kernel made deliberately slower (PERFCHECK_EXAMPLE_SLOW) fails both
its bandwidth and its baseline check. Runs in subprocesses (each measures this
machine's peaks and its kernels) with the baselines in a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cpu"
KERNELS = ("copy", "triad", "reduce_sum")
# the reduction is held to less: NumPy's summation can be bound by its adds (examples/cpu)
BW = {"copy": "bw >= 50% of peak", "triad": "bw >= 50% of peak", "reduce_sum": "bw >= 25% of peak"}


def _run(baselines: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # A developer's first run records the baselines: not CI (CI=true makes them strict).
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PERFCHECK_") and k != "CI"}
    # 64 MiB arrays, 8 timed calls: a few seconds per run; the kernels and the peaks
    # use the same size, so the percentages mean the same as at the default size.
    environment.update(PERFCHECK_EXAMPLE_BYTES=str(64 * 2**20), PERFCHECK_EXAMPLE_REPEAT="8", **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--perf", str(EXAMPLE), "-p", "no:cacheprovider",
         "--perf-baseline-dir", str(baselines), "--perf-json", str(baselines.parent / "results.json")],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300,
    )


def _outcomes(results: Path) -> dict[tuple[str, str], str]:
    doc = json.loads(results.read_text())
    return {(c["kernel"], c["expression"]): c["outcome"] for suite in doc["suites"].values() for c in suite["checks"]}


def test_record_compare_and_catch_a_slower_kernel(tmp_path: Path) -> None:
    baselines = tmp_path / "baselines"
    results = tmp_path / "results.json"

    first = _run(baselines)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "perfcheck: 3 passed, 3 recorded" in first.stdout
    files = sorted(baselines.rglob("*.json"))
    assert [f.parent.name for f in files] == [f"test_numpy_kernels.test_{k}" for k in ("copy", "reduce_sum", "triad")]
    for path in files:  # one kernel each, with its per-call samples, on this machine's fingerprint
        doc = json.loads(path.read_text())
        assert len(doc["kernels"]) == 1 and doc["fingerprint"]["tool"] == "perfcheck.measure"
    outcomes = _outcomes(results)
    assert {outcomes[(k, BW[k])] for k in KERNELS} == {"passed"}
    assert {outcomes[(k, "duration <= baseline + 50%")] for k in KERNELS} == {"recorded"}

    second = _run(baselines)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "perfcheck: 6 passed" in second.stdout
    assert second.stdout.count("baseline compared:") == 3
    assert set(_outcomes(results).values()) == {"passed"}

    recorded = {path: path.read_bytes() for path in files}
    slower = _run(baselines, PERFCHECK_EXAMPLE_SLOW="copy")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    outcomes = _outcomes(results)
    assert outcomes[("copy", "bw >= 50% of peak")] == "failed"
    assert outcomes[("copy", "duration <= baseline + 50%")] == "failed"
    assert {outcomes[(k, e)] for k in ("triad", "reduce_sum") for e in (BW[k], "duration <= baseline + 50%")} == {"passed"}
    assert "FAILED: copy: bw >= 50% of peak" in slower.stdout
    assert "1 failed, 2 passed" in slower.stdout
    # a failing run does not overwrite the baselines it was compared with
    assert {path: path.read_bytes() for path in sorted(baselines.rglob("*.json"))} == recorded


def test_skipped_without_perf() -> None:
    result = subprocess.run([sys.executable, "-m", "pytest", str(EXAMPLE), "-p", "no:cacheprovider", "-q"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 skipped" in result.stdout
