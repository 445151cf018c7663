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
