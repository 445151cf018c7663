"""The stencil story as pytest tests, next to the config suites of perfcheck.toml.

    pytest --perf examples/stencil

The device and the machine file come from perfcheck.toml beside this file (the nearest
config file from a test's directory up); paths are relative to this directory. Without
--perf these tests are skipped.
"""

import pytest


def test_registers_reach_the_bandwidth(perf):
    perf.load("results-after.csv")
    perf.expect("EOCloverFBCGPU*", "hbm_bw >= 80% of peak", "occupancy >= 40%", "scratch_per_thread == 0")


@pytest.mark.perf(arch="mi100", peaks=["machines/mulan-mi100.toml"])
def test_reduction_stays_short(perf):
    perf.load("results-after.csv")
    perf.expect("*DeviceReduceKernel*", "duration <= 50 us", "lds <= 0 B")


@pytest.mark.xfail(reason="24 KiB of LDS per workgroup leaves 2 workgroups per CU: 20% occupancy", strict=True)
def test_lds_version_is_occupancy_limited(perf):
    perf.load("results-before.csv")
    perf.expect("EOCloverFBCGPU*", "occupancy >= 40%")
