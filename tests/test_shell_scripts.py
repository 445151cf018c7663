"""The shell scripts perfcheck ships run on the bash of older clusters.

RHEL/CentOS 7 still ship bash 4.2: there, under ``set -u``, expanding an empty
array ("${arr[@]}") is an "unbound variable" error (fixed in bash 4.4), which would
end the nightly job before it profiled anything. Every array that can be empty is
expanded as ${arr[@]+"${arr[@]}"}, which is nothing when it is empty. This bash is
newer, so the rule is checked on the text, and the job is run with stand-ins to
show the guarded form passes exactly the arguments the plain one would."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [ROOT / "examples" / "slurm" / "nightly.sbatch", ROOT / ".ci" / "run"]


def _unguarded(text: str) -> list[str]:
    """Expansions of arrays that start empty (``name=()``) other than the guarded form."""
    empty = set(re.findall(r"\b(\w+)=\(\)", text)) | {"app"}  # read -a of an empty APP
    bad = []
    for name in sorted(empty):
        guarded = f'${{{name}[@]+"${{{name}[@]}}"}}'
        rest = text.replace(guarded, "")
        bad += re.findall(rf"\$\{{{name}\[[@*]\][^}}]*\}}", rest)
    return bad


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_empty_arrays_are_expanded_safely_for_bash_before_4_4(script: Path) -> None:
    text = script.read_text()
    assert "set -euo pipefail" in text or "set -u" in text
    assert _unguarded(text) == []
    # the check itself finds the form that breaks on bash 4.2/4.3
    assert _unguarded('x=()\nrun "${x[@]}"\n') == ['${x[@]}']


def _stub(path: Path, log: Path) -> None:
    path.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" "--end--" >> "{log}"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("counters", [(), ("FETCH_SIZE", "WRITE_SIZE")])
def test_nightly_job_passes_exactly_its_arguments(tmp_path: Path, counters: tuple[str, ...]) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    log = tmp_path / "calls.txt"
    perfcheck = tmp_path / "perfcheck"
    _stub(perfcheck, log)
    script = (ROOT / "examples" / "slurm" / "nightly.sbatch").read_text()
    script = script.replace("COUNTERS=()", f"COUNTERS=({' '.join(counters)})", 1)
    job = tmp_path / "nightly.sbatch"
    job.write_text(script)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "SLURM_JOB_ID": "7", "SLURM_NTASKS": "2",
           "SLURM_SUBMIT_DIR": str(tmp_path), "PERF_ROOT": str(tmp_path / "perf"), "PERFCHECK": str(perfcheck),
           "APP": "./app --size 8", "PERFCHECK_COMMIT": "abc", "PERFCHECK_BRANCH": "main"}
    import subprocess

    done = subprocess.run(["bash", str(job)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [c.strip("\n").split("\n") for c in log.read_text().split("--end--\n") if c.strip()]
    counter_args = [a for c in counters for a in ("--counter", c)]
    assert calls[0] == ["run", "--profiler", "rocprofv3", "--launcher", "srun -n 2", "--run-dir",
                        str(tmp_path / "perf" / "runs" / "7"), *counter_args, "--", "./app", "--size", "8"]
    assert [c[0] for c in calls] == ["run", "check", "history", "history", "history", "history"]
