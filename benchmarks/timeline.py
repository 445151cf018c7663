"""Timeline benchmark: reading a Kineto trace's timeline against a plain ``json.load``
+ pandas of the same file, and the seeded regressions the timeline gate must catch.

A synthetic training trace of --steps steps x --kernels kernels (default 1,000 x 200,
the issue's size): per step an H2D copy (1 MB), the kernels (four GEMM names), an
NCCL all-reduce under the last three kernels, and a ``ProfilerStep#N`` host range.
Two planted variants: ``sync`` (an idle wait of 5% of a step before the kernels: a
host synchronisation) and ``copy`` (a second H2D copy per step).

1. Read: ``perfcheck inspect --timeline --json`` (read, metrics, rendering) and the
   kernel table, ``perfcheck inspect --json`` (what ``check`` reads), against
   ``json.load`` + ``pandas.DataFrame(traceEvents)`` (the peer: what a script would
   do, computing nothing), each in its own process (peak RSS from ``os.wait4``).
   Prints the time and RSS ratios. Goals: time ratio <= 2; the kernel table's peak
   RSS under 1/3 of the peer's (both readers stream the trace).
2. Gate: ``perfcheck baseline update`` records a baseline on the clean trace, then
   ``perfcheck check`` checks each
   planted trace with ``"@run" = ["idle <= baseline + 3%", "memcpy_h2d_calls <=
   baseline"]``, ``"range:ProfilerStep*" = ["duration <= baseline + 3%"]`` and
   ``"*gemm*" = ["duration <= baseline + 5%"]``. Goal: both fail, no kernel check does.

    python benchmarks/timeline.py [--steps N] [--kernels N] [--workdir DIR] [--keep]

A 1 GB trace is --steps 29500 at the default kernels (34 kB a step). perfcheck
reads it as a stream (about 1.5x the file in memory); json.load of it needs about
9x the file, more than a shared box gives one job, so the peer is measured only up
to --peer-max-mb, and the gate (three more reads, each planted trace written anew)
is left out with --no-gate:

    python benchmarks/timeline.py --steps 29500 --no-gate
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

KERNEL_US, GAP_US, COPY_US, TAIL_US = 20.0, 2.0, 10.0, 20.0

PEER = ("import json, sys, pandas as pd\n"
        "with open(sys.argv[1]) as fh:\n"
        "    doc = json.load(fh)\n"
        "frame = pd.DataFrame(doc['traceEvents'])\n"
        "print(len(frame))\n")


def write_trace(out: IO[str], steps: int, kernels: int, *, sync: bool = False, copy: bool = False) -> int:
    """Write the trace event by event; returns the number of events."""
    out.write('{"schemaVersion": 1, "distributedInfo": {"rank": 0}, "deviceProperties": [{"id": 0, '
              '"name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}], "traceEvents": [\n')
    step_us = COPY_US + kernels * (KERNEL_US + GAP_US) + TAIL_US
    wait = 0.05 * step_us if sync else 0.0
    t, count, first = 1_000.0, 0, True

    def emit(event: dict) -> None:
        nonlocal first, count
        out.write(("" if first else ",\n") + json.dumps(event))
        first = False
        count += 1

    copy_event = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
                  "args": {"device": 0, "stream": 7, "bytes": 1_000_000}}
    for s in range(steps):
        start = t
        for _ in range(2 if copy else 1):
            emit({**copy_event, "ts": round(t, 3), "dur": COPY_US})
            t += COPY_US
        t += wait
        for k in range(kernels):
            emit({"ph": "X", "cat": "kernel", "name": f"void gemm_{k % 4}<float>(float*, float const*)", "pid": 0,
                  "tid": 7, "ts": round(t, 3), "dur": KERNEL_US, "args": {"device": 0, "stream": 7}})
            t += KERNEL_US + GAP_US
        emit({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs)",
              "pid": 0, "tid": 20, "ts": round(t - 3 * (KERNEL_US + GAP_US), 3),
              "dur": 3 * (KERNEL_US + GAP_US) + 10.0, "args": {"device": 0, "stream": 20}})
        t += TAIL_US
        emit({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
              "ts": round(start, 3), "dur": round(t - start, 3), "args": {}})
    out.write("\n]}\n")
    return count


def measure(argv: list[str]) -> tuple[float, int, str]:
    """Wall time, the child's own peak RSS (bytes) and its stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's rusage alone
        seconds = time.perf_counter() - start
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        stdout = out.read().decode()
    if code not in (0, 1):
        sys.exit(f"benchmarks/timeline.py: {' '.join(argv)} failed ({code}):\n{err}")
    return seconds, usage.ru_maxrss * 1024, stdout + err


CONFIG = """
[tool.perfcheck]
baseline_dir = "baselines"

[tool.perfcheck.suites.train]
profiles = ["trace.json"]

[tool.perfcheck.suites.train.expect]
"@run" = ["idle <= baseline + 3%", "memcpy_h2d_calls <= baseline"]
"range:ProfilerStep*" = ["duration <= baseline + 3%"]
"*gemm*" = ["duration <= baseline + 5%"]
"""


def gate(folder: Path, steps: int, kernels: int) -> list[str]:
    (folder / "perfcheck.toml").write_text(CONFIG)
    lines = []
    config = ["--config", str(folder / "perfcheck.toml")]
    for plant in ("", "sync", "copy"):
        with open(folder / "trace.json", "w") as fh:
            write_trace(fh, steps, kernels, sync=plant == "sync", copy=plant == "copy")
        # the clean trace records the baseline explicitly (as in CI, where check never records)
        command = ["check", *config] if plant else ["baseline", "update", *config]
        seconds, _, text = measure([sys.executable, "-m", "perfcheck", *command])
        failed = sorted(set(re.findall(r"perfcheck: FAILED train: (\S+) \[([^\]]+)\]", text)))
        kernel_failed = [f for f in failed if not f[0].startswith(("@run", "range:"))]
        verdict = "clean (baseline recorded)" if not plant else ("CAUGHT" if failed and not kernel_failed
                                                                 else "MISSED")
        lines.append(f"  {plant or 'clean':5}  {verdict:26} {seconds:6.1f} s  failed: "
                     + (", ".join(f"{k} [{e}]" for k, e in failed) or "none"))
        if plant and (not failed or kernel_failed):
            lines.append("  goal not met: the planted change must fail the gate and no kernel check")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--kernels", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--peer-max-mb", type=float, default=400.0,
                        help="measure the peer only up to this trace size (json.load needs ~9x the file: keep "
                             "it under the box's memory)")
    parser.add_argument("--no-gate", action="store_true", help="only the read (the gate's kernel path loads "
                        "the whole trace)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="perfcheck-timeline-", dir=args.workdir))
    try:
        trace = folder / "read.json"
        with open(trace, "w") as fh:
            events = write_trace(fh, args.steps, args.kernels)
        size = trace.stat().st_size
        print(f"trace: {args.steps} steps x {args.kernels} kernels, {events:,} events, {size / 1e6:.1f} MB")
        ours = measure([sys.executable, "-m", "perfcheck", "inspect", "--timeline", "--json", str(trace)])
        doc = json.loads(ours[2])
        assert doc["devices"][0]["metrics"]["kernels"] == args.steps * (args.kernels + 1), "kernel count"
        print(f"  perfcheck inspect --timeline --json  {ours[0]:7.2f} s  {ours[1] / 2**20:7.0f} MiB"
              f"   ({ours[1] / size:.2f} x the file; goal: a 1 GB trace under ~2 GB)")
        table = measure([sys.executable, "-m", "perfcheck", "inspect", "--json", str(trace)])
        calls = sum(k["calls"] for k in json.loads(table[2])["kernels"])
        assert calls == args.steps * (args.kernels + 1), "kernel table: dispatch count"
        print(f"  perfcheck inspect --json (kernels)   {table[0]:7.2f} s  {table[1] / 2**20:7.0f} MiB"
              f"   ({table[1] / size:.2f} x the file)")
        if size <= args.peer_max_mb * 1e6:
            peer = measure([sys.executable, "-c", PEER, str(trace)])
            print(f"  json.load + pandas.DataFrame         {peer[0]:7.2f} s  {peer[1] / 2**20:7.0f} MiB"
                  f"   ({peer[1] / size:.2f} x the file)")
            print(f"  ratio (timeline / peer)              {ours[0] / peer[0]:7.2f}    {ours[1] / peer[1]:7.2f}"
                  f"   goal: time <= 2")
            print(f"  ratio (kernel table / peer)          {table[0] / peer[0]:7.2f}    {table[1] / peer[1]:7.2f}"
                  f"   goal: RSS < 0.33")
        else:
            print(f"  json.load + pandas.DataFrame         not run: above --peer-max-mb {args.peer_max_mb:g}")
        if not args.no_gate:
            print("gate (perfcheck check, planted change vs the clean trace's baseline):")
            for line in gate(folder, args.steps, args.kernels):
                print(line)
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
