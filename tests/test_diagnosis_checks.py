"""Why it changed, on a failing baseline-relative check: against the stored baseline
(``perfcheck check``) and against the history (``check --history``), in the terminal
line, the JUnit failure message, the Markdown summary (the PR comment) and the JSON.

The stencil example's register version is the reference (the baseline, or the nights
in the store) and this run is its LDS version: the kernels are 90% slower because the
occupancy halved, limited by LDS."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from perfcheck.history import Result, RunRecord, open_store

pytestmark = pytest.mark.usefixtures("local_run")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "stencil"
EO = "EOCloverFBCGPU(float*, float const*, int)"
WHY = "occupancy 40.0% -> 20.0% (limiter vgpr -> lds; lds_per_workgroup 0 B -> 24 KiB, vgpr 64 -> 52)"
T0 = 1_767_225_600.0


@pytest.fixture
def lds_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A suite "stencil" reading the LDS version, its baseline the register version's."""
    shutil.copytree(EXAMPLE / "machines", tmp_path / "machines")
    shutil.copy(EXAMPLE / "results-before.csv", tmp_path)
    baseline = tmp_path / "baselines" / "stencil"
    baseline.mkdir(parents=True)
    for path in (EXAMPLE / "baselines" / "after").glob("*.json"):
        doc = json.loads(path.read_text())
        doc["suite"] = "stencil"
        (baseline / path.name).write_text(json.dumps(doc, indent=2, sort_keys=True))
    (tmp_path / "perfcheck.toml").write_text(
        '[tool.perfcheck]\ndevice = "mi100"\npeaks = ["machines/mulan-mi100.toml"]\nbaseline_dir = "baselines"\n'
        '[tool.perfcheck.suites.stencil]\nprofiles = ["results-before.csv"]\n'
        '[tool.perfcheck.suites.stencil.expect]\n"*Clover*FBCGPU*" = ["duration <= baseline + 5%", "occupancy >= 10%"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFCHECK_HISTORY", raising=False)
    return tmp_path


def test_a_failing_baseline_check_says_why(lds_run: Path, cli) -> None:  # noqa: ANN001
    result = cli("check", "--json", "out.json", "--junit", "junit.xml", "--markdown", "summary.md")
    assert result.code == 1
    line = next(x for x in result.err.splitlines() if "FAILED" in x and EO in x)
    assert f"; why: duration +89.4%: {WHY}; hbm_bytes unchanged; hbm_bw 85.2% -> 44.9% of peak" in line
    checks = json.loads(Path("out.json").read_text())["suites"]["stencil"]["checks"]
    duration = next(c for c in checks if c["kernel"] == EO and c["metric"] == "duration")
    assert WHY in duration["diagnosis"]
    occupancy = next(c for c in checks if c["kernel"] == EO and c["metric"] == "occupancy_pct")
    assert occupancy["outcome"] == "passed" and occupancy["diagnosis"] == ""  # only failures are explained
    failure = next(case.find("failure") for case in ET.parse("junit.xml").iter("testcase")
                   if case.find("failure") is not None and EO in case.get("name", "") + case.get("classname", ""))
    assert WHY in failure.get("message") and "why:" in failure.text
    summary = Path("summary.md").read_text()
    assert summary.count("changed: duration") == 4  # one line per failing kernel, below the table
    assert "limiter vgpr -\\> lds" in summary or "limiter vgpr -> lds" in summary


def test_the_history_gate_failure_says_why_against_the_recent_runs(lds_run: Path, cli) -> None:  # noqa: ANN001
    """Eight nights of the register version in the store (all of its metrics); this
    run, the LDS version, fails the history gate, and says why from those nights."""
    from perfcheck import baseline as baselines
    from perfcheck.analysis import analyse
    from perfcheck.history.runs import measurements
    from perfcheck.history.store import machine_key

    registers = analyse([EXAMPLE / "results-after.csv"], arch="mi100")
    machine = machine_key(baselines.fingerprint(registers))
    values = measurements(registers)
    with open_store("h.sqlite") as store:
        for night in range(8):
            jitter = 1.0 + 0.002 * ((night % 3) - 1)
            store.add(RunRecord(f"night-{night}", T0 + night * 86400, commit=f"{night:07d}"), [
                Result(machine, "stencil", kernel, metric, value * (jitter if metric.startswith("duration") else 1.0))
                for kernel, metrics in values.items() for metric, value in metrics.items()])
    result = cli("check", "--history", "h.sqlite", "--json", "out.json")
    assert result.code == 1
    checks = json.loads(Path("out.json").read_text())["suites"]["stencil"]["checks"]
    duration = next(c for c in checks if c["kernel"] == EO and c["metric"] == "duration")
    assert "vs history" in duration["message"] and duration["outcome"] == "failed"
    assert duration["diagnosis"].startswith("duration +89.") and WHY in duration["diagnosis"]
    line = next(x for x in result.err.splitlines() if "FAILED" in x and EO in x)
    assert "vs history" in line and WHY in line


def test_pytest_perf_failure_says_why(lds_run: Path) -> None:
    """The plugin's failure text and its JUnit message (pytest's own report)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--perf", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "--junitxml", "junit.xml", str(lds_run)],
                          cwd=lds_run, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"why:      duration +89.4%: {WHY}" in done.stdout
    failures = [case.find("failure") for case in ET.parse(lds_run / "junit.xml").iter("testcase")]
    assert any(f is not None and WHY in f.get("message", "") for f in failures)


def test_whole_run_moved_when_every_kernel_is_slower_than_its_baseline(lds_run: Path, cli) -> None:  # noqa: ANN001
    """The register version's profile with every dispatch 20% longer: same counters,
    every kernel slower, the reduction too: the run moved, not the code."""
    import csv

    rows = list(csv.DictReader((EXAMPLE / "results-after.csv").open()))
    for row in rows:
        begin, end = int(row["BeginNs"]), int(row["EndNs"])
        row["EndNs"] = str(begin + round((end - begin) * 1.2))
    with (lds_run / "results-before.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert cli("check", "--json", "out.json").code == 1
    checks = json.loads(Path("out.json").read_text())["suites"]["stencil"]["checks"]
    duration = next(c for c in checks if c["kernel"] == EO and c["metric"] == "duration")
    assert duration["diagnosis"] == ("duration +20.0%: whole run moved (+20.0%, every kernel); no counter moved: "
                                     "time only (clocks, placement, contention?)")
