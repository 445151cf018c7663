"""examples/slurm/nightly.sbatch end to end on a real single-node Slurm cluster
(loopback, started and stopped by the test; skipped with the reason when the
slurmctld, slurmd, slurm-client and munge packages are absent).

Six "nights" are submitted with sbatch, one after another: each profiles the
stand-in application on two ranks started by Slurm's own srun under the stand-in
rocprofv3, checks the suite, appends the run to the history store, runs change
detection and writes the dashboard. From the fourth night the kernel is 30%
slower: the last three nights fail their check (the job ends FAILED) and the report
lists the regression, with the commit where it began.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

import slurm_cluster
from perfcheck.history import open_store

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "slurm" / "nightly.sbatch"
STANDINS = Path(__file__).resolve().parent / "standins"
NIGHTS = 6
SLOW_FROM = 3
# A hand-written rocprofv3 kernel trace: two kernels, three dispatches each (10 us and 4 us).
TRACE = """\
"Kind","Agent_Id","Queue_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"
"KERNEL_DISPATCH",1,1,7,1,3,"stencil_step(double const*, double*)",1,1000,11000,0,0,256,1,1,1048576,1,1
"KERNEL_DISPATCH",1,1,7,2,4,"halo_pack(double const*, double*)",2,12000,16000,0,0,256,1,1,65536,1,1
"KERNEL_DISPATCH",1,1,7,3,3,"stencil_step(double const*, double*)",3,20000,30000,0,0,256,1,1,1048576,1,1
"KERNEL_DISPATCH",1,1,7,4,4,"halo_pack(double const*, double*)",4,31000,35000,0,0,256,1,1,65536,1,1
"KERNEL_DISPATCH",1,1,7,5,3,"stencil_step(double const*, double*)",5,40000,50000,0,0,256,1,1,1048576,1,1
"KERNEL_DISPATCH",1,1,7,6,4,"halo_pack(double const*, double*)",6,51000,55000,0,0,256,1,1,65536,1,1
"""
CONFIG = """\
[tool.perfcheck]
device = "mi250x"

[tool.perfcheck.suites.nightly.expect]
"stencil_step*" = ["duration <= 12 us", "scratch_per_thread == 0"]
"halo_pack*" = ["duration <= 6 us"]
"""
# per night, the factor on every duration (a little run-to-run noise; 30% slower from
# SLOW_FROM, for three nights: a change point needs a few runs at its new level)
SCALES = [1.0, 1.004, 0.997, 1.3, 1.302, 1.298]


@pytest.fixture(scope="module")
def cluster():
    reason = slurm_cluster.missing()
    if reason:
        pytest.skip(reason)
    started = slurm_cluster.start()
    try:
        yield started
    finally:
        started.stop()  # every daemon it started, by PID
        shutil.rmtree(started.root, ignore_errors=True)


def _commit(night: int) -> str:
    return f"{night + 1:x}" * 40


def test_nightly_sbatch_end_to_end(cluster: slurm_cluster.Cluster, tmp_path: Path) -> None:
    assert cluster.startup_s < 10, f"Slurm took {cluster.startup_s:.1f} s to come up"
    work, bin_dir, data, perf = (tmp_path / d for d in ("work", "bin", "data", "perf"))
    for directory in (work, bin_dir, data):
        directory.mkdir()
    # the stand-in profilers (not srun: the job uses Slurm's own), and perfcheck itself
    for source in STANDINS.iterdir():
        if source.name in ("README.md", "srun", "app") or source.name.startswith((".", "__")):
            continue
        text = source.read_text(encoding="utf-8")
        if source.suffix != ".py":
            text = f"#!{sys.executable}\n" + text.split("\n", 1)[1]
        (bin_dir / source.name).write_text(text, encoding="utf-8")
        (bin_dir / source.name).chmod(0o755)
    app = STANDINS / "app"
    (work / "app").write_text(f"#!{sys.executable}\n" + app.read_text().split("\n", 1)[1])
    (work / "app").chmod(0o755)
    perfcheck = bin_dir / "perfcheck"
    perfcheck.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m perfcheck "$@"\n')
    perfcheck.chmod(0o755)
    (data / "kernel_trace.csv").write_text(TRACE)
    (work / "perfcheck.toml").write_text(CONFIG)
    calls = tmp_path / "calls.jsonl"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "STANDIN_DATA": str(data), "STANDIN_LOG": str(calls),
        "PERF_ROOT": str(perf), "APP": "./app --size 1024", "CONFIG": str(work / "perfcheck.toml"),
        "PROFILER": "rocprofv3", "PERFCHECK": str(perfcheck), "PERFCHECK_BRANCH": "main",
    }
    jobs: list[str] = []
    began = time.monotonic()
    for night, scale in enumerate(SCALES):
        job, status = cluster.submit(SCRIPT, cwd=work, env={**env, "STANDIN_RANK_SCALE": f"{scale},{scale}",
                                                           "PERFCHECK_COMMIT": _commit(night)})
        log = work / f"perfcheck-nightly-{job}.out"
        text = log.read_text() if log.exists() else "(no job log)"
        expected = 1 if night >= SLOW_FROM else 0  # a failed check fails the job, after recording
        assert status == expected, f"night {night}: job {job} exit {status}\n{text}\n{cluster.logs()}"
        assert f"perfcheck nightly: job {job}, 2 ranks, commit {_commit(night)}" in text, text
        assert "perfcheck nightly: report in" in text, text
        jobs.append(job)
    elapsed = time.monotonic() - began
    print(f"{NIGHTS} nightly jobs in {elapsed:.1f} s; Slurm up in {cluster.startup_s:.1f} s")

    # profiled on two ranks started by Slurm's srun (SLURM_PROCID 0 and 1), every night
    entries = [json.loads(line) for line in calls.read_text().splitlines()]
    assert {e["tool"] for e in entries} == {"rocprofv3"}
    assert sorted(e["rank"] for e in entries) == sorted([0, 1] * NIGHTS)
    for job in jobs:
        assert sorted(p.name for p in (perf / "runs" / job).glob("rank_*")) == ["rank_0", "rank_1"]
        results = json.loads((perf / "results" / f"{job}.json").read_text())
        assert list(results["suites"]) == ["nightly"]

    # one writer appended each night to the store on the "shared filesystem"
    with open_store(perf / "history.sqlite", create=False) as store:
        runs = store.runs()
        frame = store.series(suite="nightly", metric="duration")
    assert runs["commit"].tolist() == [_commit(n) for n in range(NIGHTS)]
    assert set(runs["ci_system"]) == {"slurm"}
    assert [j.split(":")[-1] for j in runs["ci_job"]] == jobs
    stencil = frame[frame["kernel"].str.startswith("stencil_step")]
    assert stencil["value"].tolist() == pytest.approx([10e-6 * s for s in SCALES], rel=1e-3)

    # the dashboard and the digest name the regression and where it began
    report = perf / "report"
    pages = sorted(p.name for p in report.glob("*.html"))
    assert "index.html" in pages and any(p.startswith("suite-nightly") for p in pages), pages
    index = (report / "index.html").read_text()
    assert "Open regressions (" in index and "stencil_step" in index
    digest = (report / "nightly.md").read_text()
    rows = [line for line in digest.splitlines() if line.startswith("| nightly |") and "stencil_step" in line]
    assert rows, digest
    assert _commit(SLOW_FROM)[:12] in rows[0] and re.search(r"\+30\.\d%", rows[0]), rows[0]

    from headless_chromium import Chromium, find_chromium

    chromium = find_chromium()
    if chromium:  # the job's own report, in a browser
        with Chromium(chromium) as browser:
            for page in sorted(report.glob("*.html")):
                for width in (1024, 400):
                    loaded = browser.load(page.as_uri(), width=width)
                    assert loaded.errors == [] and not loaded.overflows, (page.name, width, loaded.errors)
                    if os.environ.get("PERFCHECK_SCREENSHOTS"):
                        keep = Path(os.environ["PERFCHECK_SCREENSHOTS"])
                        keep.mkdir(parents=True, exist_ok=True)
                        (keep / f"slurm-{page.stem}-{width}.png").write_bytes(loaded.png)
