"""`perfcheck inspect --timeline` on the real traces: the table fits 80 columns on a
terminal, --json has the same numbers in base units."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import one_line_error, profile
from test_timeline_metrics import HTA, comm_trace

A100 = "kineto/hta-critical-path-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz"
FUSER = "nsys/nvidia-fuser-h200-nsys2025.1/report1.sqlite"


def test_text_breakdown_and_top_ranges(cli):
    result = cli("inspect", "--timeline", profile(A100))
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("rank  gpu") and "span" in line)
    # span 12.92 s from the first to the last GPU activity; busy 0.5%, idle 99.5% (HTA: 99.488)
    assert lines[header + 2].split()[:5] == ["0", "0", "12.92", "s", "0.5%"]
    assert "99.5%" in lines[header + 2]
    copy = next(line for line in lines if " H2D " in line)
    assert copy.split()[3:5] == ["16", "233.1"]  # 16 copies, 244,403,360 B
    assert any(line.startswith("[param|cuda]") for line in lines)


def test_terminal_width(cli, monkeypatch: pytest.MonkeyPatch):
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    result = cli("inspect", "--timeline", profile(FUSER))
    assert result.code == 0, result.err
    body = result.out.splitlines()[1:]  # the first line names the file
    assert max(len(line) for line in body) <= 80
    assert "range (top 10 of 188 by total)" in result.out


def test_json_in_base_units(cli, tmp_path: Path):
    paths = []
    for rank, stretch in ((0, 1.0), (1, 1.5)):
        paths.append(tmp_path / f"r{rank}.json")
        paths[-1].write_text(json.dumps(comm_trace(rank, stretch)))
    result = cli("inspect", "--timeline", "--json", *paths)
    assert result.code == 0, result.err
    doc = result.json()
    assert [(d["rank"], d["device_id"]) for d in doc["devices"]] == [(0, 0), (1, 0)]
    assert doc["devices"][0]["metrics"]["span"] == pytest.approx(550e-6)
    assert doc["devices"][0]["metrics"]["memcpy_d2h_bw"] is None  # no D2H copy: null, not NaN
    assert doc["ranks"]["span"]["straggler"] == 1 and doc["units"]["gpu_busy_pct"] == "%"
    step = next(r for r in doc["ranges"] if r["range"] == "ProfilerStep" and r["on"] == "host")
    assert step["metrics"]["calls"] == 4 and doc["units"]["duration_p90"] == "s"


def test_real_trace_json_matches_hta(cli):
    doc = cli("inspect", "--timeline", "--json", profile(A100)).json()
    assert abs(doc["devices"][0]["metrics"]["idle_pct"] - HTA[A100]["idle_pct"]) < 0.1


def test_profile_without_timeline_is_a_clean_error(cli):
    result = cli("inspect", "--timeline", profile("nvprof/leimingyu-magus/matrixMul_trace.csv"))
    assert result.code == 2
    assert "timelines come from: kineto, nsys-sqlite" in one_line_error(result)


def test_step_chart_baseline_beside_current(cli, tmp_path: Path):
    from test_timeline_checks import training_trace

    good, slow = tmp_path / "good.json", tmp_path / "slow.json"
    good.write_text(json.dumps(training_trace(6)))
    slow.write_text(json.dumps(training_trace(6, extra_sync=True)))
    result = cli("inspect", "--timeline", slow, "--plot", tmp_path / "steps", "--baseline-trace", good)
    assert result.code == 0, result.err
    assert f"step chart: {tmp_path / 'steps.png'}, {tmp_path / 'steps.svg'}" in result.err
    assert (tmp_path / "steps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "steps.svg").read_text()
    assert "idle (baseline)" in svg and "idle (current)" in svg and "rank 0, GPU 0" in svg


def test_step_chart_needs_steps_and_the_timeline(cli, tmp_path: Path):
    result = cli("inspect", "--timeline", profile(A100), "--plot", tmp_path / "steps")
    assert "no 'ProfilerStep' ranges" in one_line_error(result)
    result = cli("inspect", profile(A100), "--plot", tmp_path / "steps")
    assert "add --timeline" in one_line_error(result)
    result = cli("inspect", "--timeline", profile(A100), "--plot", tmp_path / "steps", "--step", "[param|cuda]")
    assert result.code == 0 and (tmp_path / "steps.svg").is_file()
