"""`perfcheck metrics`: every metric an expectation may name, with its unit, meaning and
the counters it needs per vendor and tool, checked against the registries the parser,
the formulas and the runner use (not against a copy typed into the test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfcheck.expect import ALIASES, DIMENSIONLESS, PEAK_METRICS, known_metrics, metric_unit_of, parse, units_of
from perfcheck.metrics.counters import FLOP_QUANTITIES, FORMULAS, QUANTITIES, counters_for
from perfcheck.run.plan import needs_for, quantity_of

ROOT = Path(__file__).resolve().parent.parent


def test_json_lists_every_metric_with_the_registry_unit(cli) -> None:
    result = cli("metrics", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert [m["name"] for m in doc] == list(known_metrics())
    for metric in doc:
        name, unit = metric["name"], metric["unit"]
        assert unit == metric_unit_of(name)
        assert metric["meaning"], name
        assert metric["units"] == ([] if unit in DIMENSIONLESS else list(units_of(unit)))
        assert metric["of_peak"] == (name in PEAK_METRICS)
        assert metric["aliases"] == [a for a, target in ALIASES.items() if target == name]
        # every unit word the table offers parses for that metric, and a plain number
        # is accepted exactly where the table says so
        for word in metric["units"]:
            (e,) = parse(f"{name} >= 2 {word}" if word != "%" else f"{name} >= 2%")
            assert e.value > 0
        bare = f"{name} <= 3"
        if metric["units"]:
            with pytest.raises(Exception, match="needs"):
                parse(bare)
        else:
            assert parse(bare)[0].value == 3.0


def test_counters_come_from_the_formulas_and_the_runner(cli) -> None:
    doc = {m["name"]: m for m in json.loads(cli("metrics", "--json").out)}
    for name, metric in doc.items():
        gpu_name = {"bw": "hbm_bw"}.get(name, name)
        quantity = quantity_of(gpu_name)
        assert metric["quantity"] == quantity
        counters = metric["counters"]
        if quantity is None:  # trace only
            assert all(counters[tool] == [] for tool in ("rocprofv3", "rocprof", "omniperf", "ncu", "nvprof")), name
            continue
        assert quantity in QUANTITIES
        for profiler, family in (("rocprofv3", "rocprof"), ("rocprof", "rocprof"), ("ncu", "ncu")):
            try:
                wanted = [c for n in needs_for(profiler, family, [name], arch="gfx950") for c in n.counters]
            except Exception:
                wanted = None
            assert counters[profiler] == ([list(dict.fromkeys(wanted))] if wanted else None), (name, profiler)
        nvprof = counters_for(quantity, "nvprof")
        assert counters["nvprof"] == ([nvprof] if nvprof else None), name
        parts = FLOP_QUANTITIES if quantity == "flops" else (quantity,)
        formula_sets = [list(f.counters) for f in FORMULAS if f.tool == "rocprof" and f.quantity in parts]
        for alternative in counters["omniperf"] or []:
            if quantity == "flops":
                assert set(alternative) == {c for s in formula_sets for c in s if c not in ("FETCH_SIZE", "WRITE_SIZE")}
            else:
                assert alternative in formula_sets, (name, alternative)


def test_known_counter_names_per_vendor(cli) -> None:
    """A few rows read against the formulas' sources (seed 001/003, NERSC, nvprof docs)."""
    doc = {m["name"]: m for m in json.loads(cli("metrics", "--json").out)}
    hbm = doc["hbm_bw"]["counters"]
    assert hbm["rocprofv3"] == [["FETCH_SIZE", "WRITE_SIZE"]]
    assert ["TCC_EA_RDREQ_sum", "TCC_EA_RDREQ_32B_sum", "TCC_EA_WRREQ_sum", "TCC_EA_WRREQ_64B_sum"] in hbm["omniperf"]
    # what `perfcheck run` collects: with ncu also the DRAM clock the HBM roof scales to
    assert hbm["ncu"] == [["dram__bytes.sum", "dram__cycles_elapsed.avg.per_second"]] and hbm["nvprof"] == [["dram_read_transactions", "dram_write_transactions"]]
    occupancy = doc["achieved_occupancy_pct"]["counters"]
    assert occupancy["rocprofv3"] == [["SQ_LEVEL_WAVES_ACCUM", "GRBM_GUI_ACTIVE"]]
    assert occupancy["rocprof"] == [["SQ_LEVEL_WAVES", "SQ_ACCUM_PREV_HIRES", "GRBM_GUI_ACTIVE"]]
    assert occupancy["nvprof"] == [["achieved_occupancy"]]
    assert doc["mem_bw"]["counters"]["ncu"] is None and doc["mem_bw"]["counters"]["perf.measure"] == [["bytes=..."]]
    assert doc["tensor_flops"]["counters"]["rocprofv3"] is None
    assert doc["duration"]["needs"] == "kernel trace" and doc["vgpr"]["unit"] == "count"
    assert doc["occupancy_pct"]["aliases"] == ["occupancy"] and doc["occupancy_pct"]["unit"] == "%"
    assert doc["gips"]["unit"] == "GIPS" and doc["instruction_rate"]["unit"] == "inst/s"


def test_without_names_one_line_per_metric(cli) -> None:
    """Issue 18 §3: the bare list is name, unit and meaning, one line each; the
    counters only for `metrics NAME` or --counters."""
    result = cli("metrics")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["metric", "unit", "meaning"]
    rows = [line for line in lines[2:] if line and not line.startswith("`")]
    assert [row.split()[0] for row in rows] == list(known_metrics())
    assert "thresholds:" not in result.out and "rocprofv3:" not in result.out and "needs:" not in result.out
    assert "--counters" in lines[-1]


def test_table_shows_every_metric_unit_and_counters(cli) -> None:
    result = cli("metrics", "--counters")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line for line in result.out.splitlines()[5:] if line and not line.startswith(" ")}
    assert list(rows) == list(known_metrics())
    for name, line in rows.items():
        unit = metric_unit_of(name)
        assert line.split()[1 if name not in ALIASES.values() else 1 + len(
            [a for a, t in ALIASES.items() if t == name])] == (unit if unit not in DIMENSIONLESS else "-"), line
    hbm = result.out.split("\nhbm_bw ", 1)[1].split("\nl2_bw ", 1)[0]
    assert "thresholds: B/s, KB/s" in hbm and "'N% of peak'" in hbm
    assert "amd: rocprofv3: FETCH_SIZE, WRITE_SIZE; rocprof: FETCH_SIZE, WRITE_SIZE; omniperf: TCC_EA_RDREQ_sum" in hbm
    assert ("nvidia: ncu: dram__bytes.sum, dram__cycles_elapsed.avg.per_second; nvprof: dram_read_transactions, "
            "dram_write_transactions") in hbm
    calls = result.out.split("\ncalls ", 1)[1].split("\n")[:3]
    assert "thresholds: a plain number" in calls[1] and "needs: kernel trace" in calls[2]


def test_named_metrics_and_unknown_names(cli) -> None:
    result = cli("metrics", "occupancy", "flops")
    assert result.code == 0
    assert "occupancy_pct (occupancy)" in result.out and "\nflops " in result.out and "hbm_bw" not in result.out
    bad = cli("metrics", "occupany")
    assert bad.code == 2
    assert bad.err.strip() == "perfcheck: error: unknown metric 'occupany'; did you mean 'occupancy'?"


def test_check_help_points_to_metrics() -> None:
    out = subprocess.run([sys.executable, "-m", "perfcheck.cli", "check", "--help"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    flat = " ".join(out.split())
    assert "`perfcheck metrics` lists every metric" in flat
    assert "a bare number is only for plain counts" in flat and "'METRIC REL N% of peak'" in flat
