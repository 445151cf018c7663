"""Regression decisions on simulated kernel timings: how often does a rule fail a run?

Each trial simulates a baseline run and a current run of one kernel: per-dispatch
durations with lognormal jitter, a multiplicative run-to-run shift per run (clocks,
thermals, placement), optionally outliers (preemption, warm-up: a few dispatches
1.5-4x slower), and the current run slowed by the regression size. The expectation
is ``duration <= baseline + 5%``. Failing when the true regression is <= 5% is a
false alarm; failing when it is > 5% is a detection (at exactly 5% either is fair).

Rules, on the same samples:

* perfcheck: ``perfcheck.baseline.compare`` as ``expect`` calls it (median beyond
  the allowance AND the 95% interval of the ratio clear of 1, within-run noise from
  the order-statistic interval of each median, run-to-run noise from merged runs).
* mean: a plain "mean worse by more than 5%".
* bootstrap: the alternative considered for perfcheck (median beyond the allowance
  AND the seeded 95% percentile-bootstrap interval of the ratio of medians, 200
  resamples, clear of 1). It needs the raw samples and resamples x n work per
  decision; the table shows it buys nothing over the order-statistic interval.

Seeded (every cell has its own seed), so the table is the same on every run.

    python benchmarks/decisions.py [--trials N] [--seed S]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfcheck import baseline as bl  # noqa: E402

BUDGET = 0.05
REGRESSIONS = (0.0, 0.02, 0.05, 0.08, 0.10, 0.20)
BOOT_RESAMPLES = 200


@dataclass(frozen=True)
class Noise:
    label: str
    n: int  # dispatches per run
    jitter: float  # lognormal sigma per dispatch
    shift: float  # lognormal sigma of the per-run factor
    outliers: float = 0.0  # fraction of dispatches 1.5-4x slower
    baseline_runs: int = 1  # runs merged into the baseline


SCENARIOS = (
    Noise("quiet: 0.5% jitter, 0.5% run-to-run", 50, 0.005, 0.005),
    Noise("2% jitter, 0.5% run-to-run", 50, 0.02, 0.005),
    Noise("1% jitter, 2% run-to-run", 50, 0.01, 0.02),
    Noise("1% jitter, 2% run-to-run, base 5 runs", 50, 0.01, 0.02, baseline_runs=5),
    Noise("5% jitter, 2% outliers x1.5-4", 50, 0.05, 0.01, outliers=0.02),
    Noise("10% jitter, 1% run-to-run", 20, 0.10, 0.01),
    Noise("15% jitter, 10 dispatches", 10, 0.15, 0.01),
    Noise("3% jitter, 3 dispatches", 3, 0.03, 0.005),
)


def _runs(rng: np.random.Generator, noise: Noise, trials: int, runs: int, slowdown: float) -> np.ndarray:
    """(trials, runs, n) durations in seconds around 1 ms."""
    shape = (trials, runs, noise.n)
    x = 1e-3 * np.exp(rng.normal(0.0, noise.jitter, shape))
    x *= np.exp(rng.normal(0.0, noise.shift, (trials, runs, 1)))
    if noise.outliers:
        hit = rng.random(shape) < noise.outliers
        x = np.where(hit, x * rng.uniform(1.5, 4.0, shape), x)
    return x * (1.0 + slowdown)


def _perfcheck(base: np.ndarray, cur: np.ndarray) -> bool:
    """One decision exactly as perfcheck makes it: a baseline of the merged runs."""
    entry = None
    for run in base:
        series = bl.summarise(run)
        one = bl.KernelBaseline({"duration": series.median}, {"duration": series}, runs=1)
        if entry is None:
            entry = one
        else:
            merged = bl.merge(bl.Baseline("s", {}, {"k": entry}), bl.Baseline("s", {}, {"k": one}))
            entry = merged.kernels["k"]
    decision = bl.compare("duration", "<=", BUDGET, None, float(np.median(cur)), cur, entry, exact=False)
    return not decision.passed


def _bootstrap(rng: np.random.Generator, base: np.ndarray, cur: np.ndarray) -> np.ndarray:
    """Vectorised over trials: base (T, m), cur (T, n) -> failed (T,)."""
    t, m = base.shape
    n = cur.shape[1]
    bi = rng.integers(0, m, (t, BOOT_RESAMPLES, m))
    ci = rng.integers(0, n, (t, BOOT_RESAMPLES, n))
    rows = np.arange(t)[:, None, None]
    ratio = np.median(cur[rows, ci], axis=2) / np.median(base[rows, bi], axis=2)
    lower = np.quantile(ratio, 0.025, axis=1)
    point = np.median(cur, axis=1) / np.median(base, axis=1)
    return (point > 1.0 + BUDGET) & (lower > 1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400, help="trials per cell (default 400)")
    parser.add_argument("--seed", type=int, default=20240604)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    spent = {"perfcheck": 0.0, "bootstrap": 0.0}
    decisions = 0
    width = max(len(s.label) for s in SCENARIOS)
    head = " | ".join(f"{f'+{100 * r:g}%':>12}" for r in REGRESSIONS)
    print(f"Failure rate (%) of `duration <= baseline + {100 * BUDGET:g}%`, {args.trials} trials per cell, "
          "cells perfcheck/mean/bootstrap")
    print(f"columns <= +{100 * BUDGET:g}%: false alarms; > +{100 * BUDGET:g}%: detections\n")
    print(f"{'noise (dispatches per run)':<{width + 6}} | {head}")
    print(f"{'-' * (width + 6)}-|-" + "-|-".join("-" * 12 for _ in REGRESSIONS))
    for row, noise in enumerate(SCENARIOS):
        cells = []
        for col, regression in enumerate(REGRESSIONS):
            rng = np.random.default_rng([args.seed, row, col])
            base_runs = _runs(rng, noise, args.trials, noise.baseline_runs, 0.0)
            cur = _runs(rng, noise, args.trials, 1, regression)[:, 0]
            t0 = time.perf_counter()
            ours = np.array([_perfcheck(base_runs[i], cur[i]) for i in range(args.trials)])
            spent["perfcheck"] += time.perf_counter() - t0
            base_pooled = base_runs.reshape(args.trials, -1)
            mean = cur.mean(axis=1) > base_pooled.mean(axis=1) * (1.0 + BUDGET)
            t0 = time.perf_counter()
            boot = _bootstrap(rng, base_pooled, cur)
            spent["bootstrap"] += time.perf_counter() - t0
            decisions += args.trials
            cells.append(f"{100 * ours.mean():>3.0f}/{100 * mean.mean():>3.0f}/{100 * boot.mean():>3.0f}".rjust(12))
        print(f"{noise.label:<{width}} ({noise.n:>3}) | " + " | ".join(cells))
    print(
        f"\n{decisions} decisions per rule; per decision: perfcheck {1e6 * spent['perfcheck'] / decisions:.0f} us "
        f"(summarise + merge + compare), bootstrap {1e6 * spent['bootstrap'] / decisions:.0f} us "
        f"({BOOT_RESAMPLES} resamples, vectorised over trials); total {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
