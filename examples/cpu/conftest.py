"""Fixtures of the CPU example: this machine's peaks, measured once per session, and
the arrays the kernels stream.

The peaks are measured in the same session as the kernels, not read from a file
recorded some other day: on a shared CI machine the bandwidth a core gets moves
with its neighbours' load, and a kernel compared with a peak measured under the
same conditions keeps its percentage when both move together.

Knobs (environment variables, for trying the example and for its own test):

* ``PERFCHECK_EXAMPLE_BYTES``: bytes per array (default: what ``perfcheck peaks
  measure`` uses, four times the last-level cache, 32 MiB to 512 MiB), the same for
  the peaks and the kernels;
* ``PERFCHECK_EXAMPLE_REPEAT``: timed calls per kernel (default 15);
* ``PERFCHECK_EXAMPLE_SLOW``: kernel names (``copy,triad``) made deliberately
  slower: they repeat their work four times, as a regression would.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise pytest.UsageError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


@pytest.fixture(scope="session")
def array_bytes() -> int:
    from perfcheck.run.microbench import default_array_bytes

    return _int_env("PERFCHECK_EXAMPLE_BYTES", default_array_bytes("cpu"))


@pytest.fixture(scope="session")
def repeat() -> int:
    return _int_env("PERFCHECK_EXAMPLE_REPEAT", 15)


@pytest.fixture(scope="session")
def slow() -> frozenset[str]:
    return frozenset(k.strip() for k in os.environ.get("PERFCHECK_EXAMPLE_SLOW", "").split(",") if k.strip())


@pytest.fixture(scope="session")
def machine_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, array_bytes: int) -> Path:
    """A machine file with the peaks measured now, on this machine (perfcheck's own
    micro-benchmarks, as ``perfcheck peaks measure --save`` writes them)."""
    if not request.config.getoption("--perf"):
        pytest.skip("performance test: run with --perf")
    from perfcheck.machine import machine_from_peaks, write_machine
    from perfcheck.run.microbench import measure_peaks

    measured = measure_peaks("cpu", size=array_bytes, repeat=5)
    path = tmp_path_factory.mktemp("machine") / "this-machine.toml"
    write_machine(path, machine_from_peaks("this-machine", measured.peaks(), fingerprint=measured.fingerprint))
    return path


@pytest.fixture(scope="session")
def arrays(array_bytes: int):  # noqa: ANN201 - three numpy arrays
    import numpy as np

    n = array_bytes // 8
    # np.full writes every page now: no first-touch page faults in the timed calls.
    return np.full(n, 1.0), np.full(n, 2.0), np.full(n, 0.5)
