"""Fixtures of the CPU example: the arrays the kernels stream, and the knobs.

Knobs (environment variables, for trying the example and for its own test):

* ``PERFCHECK_EXAMPLE_BYTES``: bytes per array (default: what ``perfcheck peaks
  measure`` uses, four times the last-level cache, 32 MiB to 512 MiB);
* ``PERFCHECK_EXAMPLE_REPEAT``: timed calls per kernel (default 15);
* ``PERFCHECK_EXAMPLE_SLOW``: kernel names (``copy,triad``) made deliberately
  slower: they repeat their work four times, as a regression would.
"""

from __future__ import annotations

import os
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
def arrays(array_bytes: int):  # noqa: ANN201 - three numpy arrays
    import numpy as np

    n = array_bytes // 8
    # np.full writes every page now: no first-touch page faults in the timed calls.
    return np.full(n, 1.0), np.full(n, 2.0), np.full(n, 0.5)
