"""The gate's bulk paths: every judged series' reference at once, the lean read of named
metrics and whole kernels, the diagnosis' recent values (issue 22: check --history at a
year of nights). Each is compared with the one-at-a-time or frame-based way it replaces."""

from __future__ import annotations

import math

import numpy as np

from perfcheck.history import Result, RunRecord, open_store
from perfcheck.history.changepoints import spikes
from perfcheck.history.gate import MIN_RUNS, RECENT_RUNS, WINDOW, Reference

T0 = 1_767_225_600.0


def reference(values: np.ndarray, *, stretch: tuple[int, int]) -> Reference:
    """The reference of one series alone, with numpy's one-series functions (the oracle
    ``reference_rows`` is held to): the stretch's finite positive values, single-run
    spikes set aside, the median of the latest runs, the largest of three spreads."""
    tail = values[stretch[0]:stretch[1]]
    tail = tail[np.isfinite(tail) & (tail > 0)]
    if len(tail) >= 3:
        tail = tail[~spikes(np.log(tail))]
    if len(tail) < MIN_RUNS:
        return Reference(None, 0.0, 0, len(tail), stretch[0])
    logs = np.log(tail[-WINDOW:])
    spread = float(max(1.4826 * float(np.median(np.abs(np.diff(logs)))) / math.sqrt(2.0),
                       1.4826 * float(np.median(np.abs(logs - np.median(logs)))), np.std(logs, ddof=1)))
    recent = tail[-RECENT_RUNS:]
    return Reference(float(np.median(recent)), spread, len(recent), len(tail), stretch[0])


def test_the_references_of_many_series_are_each_ones_own_to_the_bit() -> None:
    # The gate takes a suite's 2,000 references at once (``reference_rows``; ``gate.reference``
    # is its one-series case): each must be its series' own, computed alone with numpy's
    # one-series functions, float for float, whatever the series hold (spikes, a step,
    # NaN, inf, zero and negative values, constant runs, too few runs) and whichever
    # stretch the accepted level names.
    from perfcheck.history import gate
    from perfcheck.history.gate import reference_rows

    rng = np.random.default_rng(22)
    series, stretches = [], []
    for _ in range(2500):
        n = int(rng.integers(0, 70))
        x = rng.lognormal(0.0, rng.choice([1e-3, 0.02, 0.3]), n) * rng.choice([1e-6, 1.0, 1e9])
        if n and rng.random() < 0.3:
            x[rng.integers(0, n, 3)] *= rng.choice([3.0, 0.2])
        if n and rng.random() < 0.2:
            x[rng.integers(0, n, 2)] = rng.choice([np.nan, np.inf, -1.0, 0.0])
        if n and rng.random() < 0.1:
            x[:] = x[0]
        if n > 10 and rng.random() < 0.3:
            x[n // 2:] *= 1.3
        start = int(rng.integers(0, max(1, n))) if rng.random() < 0.4 else 0
        end = int(rng.integers(start, n + 1)) if rng.random() < 0.3 else n
        series.append(x)
        stretches.append((start, end))
    first = np.cumsum([0] + [len(x) for x in series])[:-1]
    lo = first + np.asarray([s for s, _ in stretches])
    hi = first + np.asarray([e for _, e in stretches])
    medians, spreads, runs, comparable = reference_rows(np.concatenate(series), lo, hi)
    kinds = set()
    for i, x in enumerate(series):
        ref = reference(x, stretch=stretches[i])
        kinds.add((ref.usable, ref.comparable < len(x[stretches[i][0]:stretches[i][1]])))
        got = (None if np.isnan(medians[i]) else float(medians[i]), float(spreads[i]), int(runs[i]), int(comparable[i]))
        assert got == (ref.value, ref.spread, ref.runs, ref.comparable), i
        assert gate.reference(x, stretch=stretches[i]) == ref, i  # the one-series case alike
    assert kinds == {(True, True), (True, False), (False, True), (False, False)}  # each case was met


def test_latest_reads_named_metrics_and_whole_kernels_together(store_at) -> None:  # noqa: ANN001 (both backends)
    # The gate asks for (kernel, metric) pairs, the diagnosis for every metric of a kernel
    # (metric None), sometimes both of one kernel: each series is read once, in series
    # order, whichever way it was asked for.
    with open_store(store_at()) as store:
        for i in range(4):
            store.add(RunRecord(f"r{i}", T0 + i * 86400.0),
                      [Result("m", "s", k, metric, 1.0 + i, "s") for k in ("a", "b", "c")
                       for metric in ("duration", "occupancy", "hbm_bw")])
        pairs = [("b", None), ("b", "duration"), ("a", "occupancy"), ("c", "hbm_bw"), ("c", "nope"), ("d", None)]
        frame = store.latest(machine="m", suite="s", pairs=pairs, last=3)
        got = store.latest_values(machine="m", suite="s", pairs=pairs, last=3)
    series = list(dict.fromkeys(zip(frame["kernel"], frame["metric"])))
    assert series == [("a", "occupancy"), ("b", "duration"), ("b", "hbm_bw"), ("b", "occupancy"), ("c", "hbm_bw")]
    assert list(zip(got.kernels, got.metrics)) == series and len(frame) == 15 and len(got.values) == 15


def test_recent_values_are_the_latest_runs_since_the_references_start(store_at) -> None:  # noqa: ANN001 (both backends)
    # What the diagnosis compares a failed run with: each metric's values of its latest
    # RECENT_RUNS runs since the kernel's reference started. Read as numbers from the last
    # RECENT_RUNS runs, it is what every column of the last SERIES_RUNS runs gave (two
    # runs at one time, a missing value, a kernel with a metric fewer, a start later than
    # every run, a kernel not stored, no start at all).
    import pandas as pd

    from perfcheck.history.gate import RECENT_RUNS, SERIES_RUNS, recent_values

    path = store_at()
    with open_store(path) as store:
        for i in range(16):
            rows = [Result("m", "s", k, metric, 1.0 + i + 0.1 * j if (i, j) != (12, 1) else None, "s")
                    for j, k in enumerate(("k1", "k2", "k3")) for metric in ("duration", "occupancy")[:2 - (k == "k3")]]
            # digits below the microsecond, as time.time() gives: the reference's start
            # (``Timestamp.timestamp()``) is then rounded, and r08 must still be in
            store.add(RunRecord(f"r{i:02d}", T0 + min(i, 14) * 86400.0 + 0.123456789), rows)
        frame = store.latest(machine="m", suite="s", pairs=[(k, None) for k in ("k1", "k2", "k3", "nope")],
                             last=SERIES_RUNS)
    stamp = frame.loc[frame["run_id"] == "r08", "time"].iloc[0].timestamp()  # as the gate's reference gives it
    seconds = np.asarray([t.timestamp() for t in frame["time"]], dtype="float64")
    for k1 in (stamp, stamp - 3600.0):
        since = {"k1": k1, "k2": None, "k3": T0 + 40 * 86400.0, "nope": None}
        got = recent_values(path, "m", "s", since)
        start = frame["kernel"].map({k: v for k, v in since.items() if v is not None}).astype("float64").fillna(-np.inf)
        want: dict[str, dict[str, np.ndarray]] = {}
        for (kernel, metric), group in frame[seconds >= start.to_numpy()].groupby(["kernel", "metric"], sort=False):
            want.setdefault(kernel, {})[metric] = group["value"].to_numpy(dtype="float64")[-RECENT_RUNS:]
        assert list(got) == list(want) == ["k1", "k2"]
        for kernel in want:
            assert list(got[kernel]) == list(want[kernel])
            for metric in want[kernel]:
                np.testing.assert_array_equal(got[kernel][metric], want[kernel][metric])
    assert len(got["k1"]["duration"]) == 8 and len(got["k2"]["duration"]) == RECENT_RUNS  # r08-r15; the last 10
    assert np.isnan(got["k2"]["duration"]).sum() == 1
