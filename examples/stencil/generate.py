"""Write the stencil example's profile: a rocprofv3 kernel trace in the 2025 column
layout, with the four stencil kernels of the study in ../shared/seeds/001_*.txt.

The numbers are synthetic but shaped like the study's MI100 run: 256-thread
workgroups, 24 KiB of LDS per workgroup, 52 VGPRs, EOCloverFBCGPU at about
2.67 ms per call. A fixed seed makes the file identical on every run; the test
suite checks that, so the committed file is exactly what this script writes.

    python examples/stencil/generate.py [OUTPUT]
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_OUTPUT = HERE / "kernel_trace.csv"

HEADER = [
    "Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
    "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size",
    "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X",
    "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z",
]

# name, kernel id, typical duration (ns), VGPRs, SGPRs
KERNELS = [
    ("EOCloverFBCGPU", 11, 2_671_374, 52, 64),
    ("EOCloverDagFBCGPU", 12, 2_671_302, 52, 64),
    ("OECloverDagFBCGPU", 13, 2_668_950, 52, 64),
    ("OECloverFBCGPU", 14, 2_669_880, 52, 64),
    ("void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int)", 15, 41_000, 24, 32),
]
ITERATIONS = 20
LDS_BYTES = 24 * 1024
WORKGROUP = 256
GRID = 32 * 32 * 32 * 64 // 2  # one work-item per even/odd site of the 32x32x32x64 lattice


def rows(seed: int = 2021) -> list[list[object]]:
    rng = np.random.default_rng(seed)
    out: list[list[object]] = []
    clock = 1_550_151_853_029_637
    dispatch = 0
    for _ in range(ITERATIONS):
        for name, kernel_id, typical, vgpr, sgpr in KERNELS:
            dispatch += 1
            # ~0.5% run-to-run noise, as seen on a quiet node
            duration = int(round(typical * (1 + 0.005 * rng.standard_normal())))
            clock += int(rng.integers(3_000, 9_000))  # launch gap
            start, end = clock, clock + duration
            clock = end
            grid = GRID if "Clover" in name else 1024 * WORKGROUP
            out.append([
                "KERNEL_DISPATCH", "Agent 2", 1, 1, 4242, dispatch, kernel_id, name, dispatch,
                start, end, LDS_BYTES if "Clover" in name else 0, 0, vgpr, 0, sgpr,
                WORKGROUP, 1, 1, grid, 1, 1,
            ])
    return out


def write(path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(rows())


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT
    write(target)
    print(f"wrote {target}")
