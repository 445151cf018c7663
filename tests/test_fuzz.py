"""Fuzzing: seeded mutations of the real inputs end in success with finite,
possible values or in a one-line PerfcheckError naming the file (see fuzzing.py).

A few hundred cases run in the normal suite; set PERFCHECK_FUZZ_CASES=5000 (and
PERFCHECK_FUZZ_SEED to draw other cases) for the long run. A failing case is
replayed with ``python tests/fuzzing.py --seed S --case N --keep DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import fuzzing

CASES = int(os.environ.get("PERFCHECK_FUZZ_CASES", "300"))
SEED = int(os.environ.get("PERFCHECK_FUZZ_SEED", "20261124"))


def test_mutated_real_inputs_never_crash_hang_or_lie(tmp_path: Path) -> None:
    if not fuzzing.PROFILES.is_dir():
        pytest.skip(f"real profile data not available: {fuzzing.PROFILES}")
    report = fuzzing.run(CASES, SEED, tmp_path, bound=30.0)
    assert len(report.cases) == CASES
    if report.bad:
        pytest.fail(report.summary(SEED), pytrace=False)
    # The fuzzer reaches both sides: real successes and clean errors.
    counts = report.counts()
    assert counts["ok"] > CASES // 10 and counts["error"] > CASES // 10, counts


def test_the_judge_catches_what_it_is_for(tmp_path: Path) -> None:
    """The outcome classes themselves: a lie, a crash and a leak are told apart
    from a clean error."""
    assert fuzzing._judge_inspect({"kernels": [{"calls": 0, "metrics": {}}]}) == ["calls 0"]
    assert fuzzing._judge_inspect({"kernels": [{"calls": 2, "metrics": {"duration": -1.0}}]}) == ["negative duration"]
    assert fuzzing._judge_peaks({"peaks": {"hbm_bw": 0}}) == ["peak hbm_bw = 0"]
    assert fuzzing._judge_timeline({"devices": [{"metrics": {"gpu_busy_pct": 140.0, "idle": -1, "span": None}}],
                                    "ranks": {"busy": {"min": float("nan"), "straggler": 3}}}) == [
        "gpu_busy_pct over 100%", "negative idle", "ranks busy.min = nan"]
    with pytest.raises(ValueError):
        fuzzing._strict_json('{"a": NaN}')
    missing = tmp_path / "absent.csv"
    outcome = fuzzing.run_cli(["inspect", "--json", str(missing)], named=missing, judge=fuzzing._judge_inspect, bound=10)
    assert outcome.outcome == "error" and str(missing) in outcome.detail
