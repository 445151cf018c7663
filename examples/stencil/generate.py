"""Write the stencil example's inputs, shaped like the study in ../shared/seeds/001_*.txt
(a 4-D stencil, four Clover kernels, on Pawsey's MI100 "Mulan"):

* ``kernel_trace.csv``: a rocprofv3 kernel trace in the 2025 column layout (inspect's example);
* ``results-before.csv`` / ``results-after.csv``: rocprof v1 per-dispatch results
  (``rocprof -i input.txt -o results.csv`` of ROCm 4.5, as on Mulan) of the two versions
  of the study, with the FETCH_SIZE/WRITE_SIZE counters the study used for bandwidth
  and the VALU FP32 counters a roofline needs;
* ``machines/mulan-mi100.toml``: the machine file with Mulan's empirical peak.

The story the check suites in perfcheck.toml tell: "before" keeps 12 floats per work-item
in a 24 KiB LDS array per 256-thread workgroup, which on MI100 (64 KiB LDS per CU) leaves
room for 2 workgroups = 8 of 40 wave slots: 20% occupancy by the hardware's rules
(`perfcheck occupancy --arch mi100 --block 256 --vgpr 52 --sgpr 64 --lds 24576`), and the
study measured 44.9% of the empirical bandwidth (TOTAL_RW 1.29009797 GB in 2.671374 ms).
"after" keeps them in registers: no LDS, 64 VGPRs, held to 4 workgroups = 40% by the
VGPR file (the study's "78%" ignored the allocation rules), and the kernels run 1.9x faster:
~85% of the peak, as the study's final version reached. The numbers are synthetic; a fixed
seed makes every file identical on every run, and the tests check the committed files
are exactly what this script writes.

    python examples/stencil/generate.py [OUTPUT]     # OUTPUT: the kernel trace only
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


# --- rocprof v1 results ----------------------------------------------------------------

# ROCm 4.x rocprof v1 columns (register columns vgpr,sgpr,fbar,sig,obj; ROCm 5 renamed them),
# then the counters of the input file in its order, then the four timestamps.
COUNTERS = [
    "FETCH_SIZE", "WRITE_SIZE", "SQ_INSTS_VALU", "SQ_INSTS_SALU",
    "SQ_INSTS_VALU_ADD_F32", "SQ_INSTS_VALU_MUL_F32", "SQ_INSTS_VALU_FMA_F32", "SQ_INSTS_VALU_TRANS_F32",
]
RESULTS_HEADER = [
    "Index", "KernelName", "gpu-id", "queue-id", "queue-index", "pid", "tid", "grd", "wgr", "lds", "scr",
    "vgpr", "sgpr", "fbar", "sig", "obj", *COUNTERS, "DispatchNs", "BeginNs", "EndNs", "CompleteNs",
]
# rocprof v1 prints the demangled signature with the code object's " [clone .kd]".
CLOVER_ARGS = "(float*, float const*, int)"
REDUCE = "void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int)"
# The study: TOTAL_RW = FETCH_SIZE + WRITE_SIZE = 1.29009797 GB per EOCloverFBCGPU call on the
# 32x32x32x64 lattice. rocprof's "kilobytes" are KiB (1024 B; perfcheck.metrics.counters).
TOTAL_RW_KIB = 1.29009797e9 / 1024
FETCH_SHARE = 0.75  # 12 complex components read per site and neighbour terms, 4 written
WAVES = GRID // 64
# FP32 VALU instructions per wavefront of one Clover call: ~615 FLOP per site, an
# arithmetic intensity of ~0.5 FLOP/B: deep in the memory-bound part of the roofline.
VALU_F32 = {"ADD": 75, "MUL": 40, "FMA": 250, "TRANS": 0}
SPEEDUP = 1.9  # registers instead of LDS: 44.9% -> ~85% of the empirical peak

# version -> (LDS bytes per workgroup, VGPRs) of the Clover kernels
VERSIONS = {"before": (LDS_BYTES, 52), "after": (0, 64)}


def _kib(value: float) -> str:
    # rocprof v1 writes derived metrics with six decimals
    return f"{value:.6f}"


def results_rows(version: str, seed: int = 2022) -> list[list[object]]:
    lds, vgpr = VERSIONS[version]
    rng = np.random.default_rng(seed + (version == "after"))
    clock = 12_074_903_397_207_541
    out: list[list[object]] = []
    index = 0
    for _ in range(ITERATIONS):
        for name, _kernel_id, typical, _vgpr, sgpr in KERNELS:
            clover = "Clover" in name
            speed = SPEEDUP if clover and version == "after" else 1.0
            duration = int(round(typical / speed * (1 + 0.005 * rng.standard_normal())))
            dispatch = clock + int(rng.integers(3_000, 9_000))
            begin = dispatch + int(rng.integers(150_000, 350_000))  # rocprof v1's dispatch-to-begin gap
            end = begin + duration
            complete = end + int(rng.integers(60_000, 160_000))
            clock = complete
            if clover:
                kernel = f"{name}{CLOVER_ARGS} [clone .kd]"
                fetch, write = TOTAL_RW_KIB * FETCH_SHARE, TOTAL_RW_KIB * (1 - FETCH_SHARE)
                valu = {op: WAVES * n for op, n in VALU_F32.items()}
                grid, regs, lds_bytes = GRID, vgpr, lds
            else:
                kernel = f"{REDUCE} [clone .kd]"
                fetch, write = 1024 * WORKGROUP * 4 / 1024, 4.0
                valu = {"ADD": 1024 * 4 * 12, "MUL": 0, "FMA": 0, "TRANS": 0}
                grid, regs, lds_bytes = 1024 * WORKGROUP, _vgpr, 0
            valu_total = sum(valu.values()) + (WAVES * 20 if clover else 1024 * 4 * 20)
            salu = WAVES * 30 if clover else 1024 * 4 * 12
            out.append([
                index, kernel, 0, 0, index, 71_234, 71_234, grid, WORKGROUP, lds_bytes, 0, regs, sgpr, 0,
                "0x0", "0x7f3a5c0b8000", _kib(fetch), _kib(write), valu_total, salu,
                valu["ADD"], valu["MUL"], valu["FMA"], valu["TRANS"], dispatch, begin, end, complete,
            ])
            index += 1
    return out


def write_results(path: Path, version: str) -> None:
    with open(path, "w", newline="") as fh:
        # rocprof v1 quotes the kernel name only (csv.QUOTE_MINIMAL would quote it too,
        # as it holds commas, but also any other field that needed it: none does).
        fh.write(",".join(RESULTS_HEADER) + "\n")
        for row in results_rows(version):
            cells = [f'"{c}"' if i == 1 else str(c) for i, c in enumerate(row)]
            fh.write(",".join(cells) + "\n")


# --- the machine file ----------------------------------------------------------------------

# Seed 001, Table 1: mixbench fp32 on Mulan (MI100), 2023-03-17: 1075.46 GB/s (decimal GB).
MULAN_HBM_BW = 1075.46e9
# The same log's peak of the fp32 sweep (mixbench-log.txt, "single precision" GFLOPS column
# at its highest: 21988.38 GFLOPS): the measured compute roof, below the 23.1 TFLOP/s of the
# datasheet (and of mixbench's own "theoretical" line, 23070.72 GFlops).
MULAN_FP32 = 21988.38e9


def write_machine_file(path: Path) -> None:
    from perfcheck.machine import machine_from_peaks, write_machine
    from perfcheck.model import PeakDetail, Peaks, Source

    source = "mixbench-log.txt (Pawsey Mulan, 2023-03-17; seed 001 Table 1)"
    peaks = Peaks(
        values={"hbm_bw": MULAN_HBM_BW, "flop_rate_fp32": MULAN_FP32},
        details=(PeakDetail(source=source, name="single precision bandwidth", value=MULAN_HBM_BW, unit="B/s"),
                 PeakDetail(source=source, name="single precision compute", value=MULAN_FP32, unit="FLOP/s")),
        sources=(Source(path=source, format="mixbench", tool="mixbench", device="AMD Instinct MI100"),),
    )
    write_machine(path, machine_from_peaks("mulan-mi100", peaks, "mi100"))


def write_all(directory: Path = HERE) -> list[Path]:
    written = [directory / "kernel_trace.csv"]
    write(written[0])
    for version in VERSIONS:
        written.append(directory / f"results-{version}.csv")
        write_results(written[-1], version)
    written.append(directory / "machines" / "mulan-mi100.toml")
    write_machine_file(written[-1])
    return written


if __name__ == "__main__":
    if len(sys.argv) > 1:
        write(Path(sys.argv[1]))
        print(f"wrote {sys.argv[1]}")
    else:
        for path in write_all():
            print(f"wrote {path}")
