"""Performance tests of three NumPy kernels, run for real on any machine:

    pytest --perf examples/cpu                      # records baselines on the first run
    pytest --perf examples/cpu                      # compares with them afterwards
    PERFCHECK_EXAMPLE_SLOW=copy pytest --perf examples/cpu   # a regression: fails

Each test times its kernel with ``perf.measure`` (one row per call) on the
thread's CPU clock (``clock="thread"``: a neighbour's share of the core is not
counted), declares the bytes one call must move (counted like STREAM: each array
read or written once, so the results carry ``mem_bw``), and checks ``duration <= baseline + 50%`` against the baseline
recorded on this machine's first run. perfcheck fails it only when the median is beyond the 50%
AND clearly worse than the spread of the calls, so a busy neighbour does not turn
it red and a kernel doing its work four times over does.

There is no ``bw >= N% of peak`` gate here on purpose: on a shared CPU a core's
bandwidth moves with its neighbours' load from one second to the next, so any
fixed share of a peak measured a moment earlier fails some runs of an unchanged
kernel. What the kernels reach on a quiet machine, and the expectation to write on
a dedicated one, are in README.md beside this file.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.perf

# How many times a kernel named in PERFCHECK_EXAMPLE_SLOW repeats its work.
SLOWDOWN = 4


def copy(src: np.ndarray, dst: np.ndarray, times: int = 1) -> None:
    for _ in range(times):
        np.copyto(dst, src)


def triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, scalar: float, times: int = 1) -> None:
    # a = b + scalar * c in two ufunc passes (NumPy has no fused multiply-add)
    for _ in range(times):
        np.multiply(c, scalar, out=a)
        np.add(a, b, out=a)


def reduce_sum(a: np.ndarray, times: int = 1) -> float:
    total = 0.0
    for _ in range(times):
        total = float(a.sum())
    return total


EXPECT = "duration <= baseline + 50%"
# The calling thread's CPU time, not the wall clock: NumPy's ufuncs run on the
# calling thread, and time the OS gives to a busy neighbour is then not part of a
# call (perfcheck.measure: clock="thread").
CLOCK = "thread"


def _times(kernel: str, slow: frozenset[str]) -> int:
    return SLOWDOWN if kernel in slow else 1


def test_copy(perf, arrays, repeat, slow) -> None:
    a, _, c = arrays
    perf.measure(copy, a, c, times=_times("copy", slow), bytes=2 * a.nbytes, repeat=repeat, clock=CLOCK)
    perf.expect("copy", EXPECT)


def test_triad(perf, arrays, repeat, slow) -> None:
    a, b, c = arrays
    perf.measure(triad, a, b, c, 3.0, times=_times("triad", slow), bytes=3 * a.nbytes, flops=2 * a.size,
                 repeat=repeat, clock=CLOCK)
    perf.expect("triad", EXPECT)


def test_reduce_sum(perf, arrays, repeat, slow) -> None:
    a, _, _ = arrays
    perf.measure(reduce_sum, a, times=_times("reduce_sum", slow), bytes=a.nbytes, flops=a.size,
                 repeat=repeat, clock=CLOCK)
    perf.expect("reduce_sum", EXPECT)
