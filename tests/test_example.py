"""The committed example profile is what its generator writes, and inspect reads it."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "stencil"


def test_generator_reproduces_committed_file(tmp_path: Path) -> None:
    generator = runpy.run_path(str(EXAMPLE / "generate.py"))
    out = tmp_path / "kernel_trace.csv"
    generator["write"](out)
    assert out.read_bytes() == (EXAMPLE / "kernel_trace.csv").read_bytes()


def test_inspect_example(cli) -> None:
    result = cli("inspect", EXAMPLE / "kernel_trace.csv", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    kernels = {k["kernel"]: k for k in doc["kernels"]}
    assert set(kernels) >= {"EOCloverFBCGPU", "EOCloverDagFBCGPU", "OECloverDagFBCGPU", "OECloverFBCGPU"}
    eo = kernels["EOCloverFBCGPU"]
    assert eo["calls"] == 20
    assert eo["metrics"]["duration"] == pytest.approx(2.671374e-3, rel=0.01)
    assert eo["metrics"]["vgpr"] == 52 and eo["metrics"]["sgpr"] == 64
    assert eo["metrics"]["lds_per_workgroup"] == 24 * 1024
    assert doc["units"]["duration"] == "s"
    assert doc["profiles"][0]["format"] == "rocprofv3-kernel-trace"


def test_pytest_perf_collects_every_example_from_the_repository_root() -> None:
    # `pytest --perf examples/` as a newcomer types it: every config suite is collected
    # (the Slurm template names the run directory its job writes and is skipped, with
    # the reason, until one exists), and the skip reasons are in the summary (-rs).
    import os
    import subprocess
    import sys

    environment = {k: v for k, v in os.environ.items() if not k.startswith("PERFCHECK_") and k != "CI"}
    result = subprocess.run([sys.executable, "-m", "pytest", "--perf", "examples/", "-p", "no:cacheprovider", "-q", "--co"],
                            cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error" not in result.stdout.lower(), result.stdout
    assert "examples/slurm/perfcheck.toml::nightly::*[duration <= baseline + 5%]" in result.stdout
    assert "examples/stencil/perfcheck.toml::after::" in result.stdout
    assert "examples/cpu/test_numpy_kernels.py::test_copy" in result.stdout
    run = subprocess.run([sys.executable, "-m", "pytest", "--perf", "examples/slurm", "-p", "no:cacheprovider", "-q"],
                         cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SKIPPED [2] examples/slurm/perfcheck.toml: profile not available:" in run.stdout
    assert "perfcheck-runs/nightly (skip_if_missing)" in run.stdout
