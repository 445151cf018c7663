"""Work from counters: bytes per memory level, FLOPs, instructions and achieved
occupancy of every dispatch, from the raw counters the readers pass through.

The formulas are data: ``FORMULAS`` lists, per quantity, the ways the supported
tools let it be computed, each with the counters it needs (the tool's exact names)
and its source. ``work()`` evaluates them on a dispatch chunk, vectorised: the
first formula whose counters a row has gives the value, later ones fill rows the
earlier ones could not. A quantity none of whose formulas has its counters in the
chunk is not a column; a formula whose counters are present but NaN in a row
leaves that row NaN. Nothing is ever estimated from anything else.

Counter names follow three naming schemes for AMD per-instance counters:

* ``X_sum``: the tool's own aggregate (Omniperf/rocprof-compute ``pmc_perf.csv``,
  rocprof derived metrics), used when present;
* ``X[0]`` ... ``X[n]``: one column per L2 channel / instance (rocprof v1,
  Omniperf), summed over ``n`` when ``X_sum`` is absent;
* ``X``: rocprofv3, which sums a counter's dimension instances itself and writes
  one value per dispatch (see ``perfcheck.ingest.rocprofv3``).

Quantities are per dispatch in base units (B, FLOP, instructions; a percentage
0-100 for ``achieved_occupancy_pct``). On kernel-level tables (nvprof
``--metrics``: the tool's per-kernel averages) they are per-dispatch means.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from perfcheck.errors import UsageError
from perfcheck.ingest.formats import Want
from perfcheck.schema import RAW_PREFIX

if TYPE_CHECKING:
    from perfcheck.arch import Target

# Tool families whose counter names the formulas use. rocprof covers every AMD
# collector (rocprof v1/v2, rocprofv3, Omniperf/rocprof-compute): same counters.
ROCPROF, NCU, NVPROF = "rocprof", "ncu", "nvprof"
# perf.measure: no profiler, the caller declares the work of one call.
PERFCHECK = "perfcheck"
_VENDOR_TOOLS = {"amd": (ROCPROF,), "nvidia": (NCU, NVPROF)}

# --- quantities ---------------------------------------------------------------------

# Extensive quantities: they add up over dispatches (a kernel's total is their sum,
# its rate the sum over the summed duration).
EXTENSIVE: tuple[str, ...] = (
    "hbm_bytes",
    "hbm_read_bytes",
    "hbm_write_bytes",
    # host main memory (DRAM of a CPU): perf.measure(device="cpu", bytes=...) only;
    # hbm_bytes is a GPU's device memory
    "mem_bytes",
    "l2_bytes",
    "l1_bytes",
    "lds_bytes",
    # vector (AMD VALU, NVIDIA CUDA-core) FLOPs per precision
    "flops_fp64",
    "flops_fp32",
    "flops_fp16",
    # AMD matrix cores (MFMA), per precision
    "mfma_flops_fp64",
    "mfma_flops_fp32",
    "mfma_flops_fp16",
    "mfma_flops_bf16",
    "mfma_flops_fp8",
    "mfma_flops_f6f4",
    "mfma_iops_int8",  # integer ops: not part of ``flops``
    # NVIDIA tensor cores: the tensor-pipe instruction counter says nothing about precision
    "tensor_flops",
    "flops",  # every FLOP quantity above that was collected, summed
    "instructions",  # wavefront (AMD) / warp (NVIDIA) instructions
)
# Intensive: averaged over dispatches (as rocprof-compute's AVG), never summed.
# The latencies are cycles per instruction (per fetch), from the per-level passes.
INTENSIVE: tuple[str, ...] = (
    "achieved_occupancy_pct", "vmem_latency", "smem_latency", "lds_latency", "ifetch_latency",
    # The clocks the dispatch ran at (Hz): the SM / shader engine clock and the
    # memory (DRAM) clock, where the profile records them (``CLOCK_FORMULAS``).
    "sm_clock", "mem_clock",
)
# The clock quantities, by the ceiling domain they scale (perfcheck.metrics.roofline).
CLOCKS: tuple[str, ...] = ("sm_clock", "mem_clock")
QUANTITIES: tuple[str, ...] = EXTENSIVE + INTENSIVE

# The FLOP quantities ``flops`` adds up (MFMA int8 counts integer operations).
FLOP_QUANTITIES: tuple[str, ...] = tuple(
    q for q in EXTENSIVE if q.startswith(("flops_", "mfma_flops_", "tensor_flops"))
)

# --- formula table ------------------------------------------------------------------

# Raw counters of perf.measure: "raw.perfcheck.mem_bytes", ... (see the last formulas).
DECLARED_PREFIX = "perfcheck."

Values = Mapping[str, np.ndarray]  # counter name -> float64 per dispatch


@dataclass(frozen=True)
class Context:
    """What a formula may need besides counters."""

    rows: int
    target: "Target | None"
    wave_size: np.ndarray  # lanes per wavefront, per dispatch


@dataclass(frozen=True)
class Formula:
    quantity: str
    tool: str  # ROCPROF | NCU | NVPROF
    counters: tuple[str, ...]  # the tool's names; "X_sum" also matches X[n] and X
    compute: Callable[[Values, Context], np.ndarray]
    source: str
    # What to tell a user to collect when this formula is the suggested one
    # (counters_for); default: ``counters``.
    collect: tuple[str, ...] | None = None
    suggested: bool = False
    # Counters whose presence in the chunk makes the formula meaningless (skipped).
    unless: tuple[str, ...] = ()


def _amd_valu(precision: str) -> tuple[str, ...]:
    return tuple(f"SQ_INSTS_VALU_{op}_{precision}" for op in ("ADD", "MUL", "FMA", "TRANS"))


def _valu_flops(precision: str) -> Callable[[Values, Context], np.ndarray]:
    add, mul, fma, trans = _amd_valu(precision)
    # One VALU instruction works on every lane of the wavefront: x wave size (64 on
    # every CDNA/GCN part; rocprof-compute >= 3 writes $wave_size, older configs 64).
    # An FMA is two FLOPs, a transcendental one.
    return lambda c, ctx: ctx.wave_size * (c[add] + c[mul] + c[trans] + 2.0 * c[fma])


def _scaled(counter: str, factor: float) -> Callable[[Values, Context], np.ndarray]:
    return lambda c, ctx: factor * c[counter]


def _clock(counter: str, factor: float = 1.0) -> Callable[[Values, Context], np.ndarray]:
    """A clock in Hz (``factor`` 1e6 for MHz); zero, negative or infinite is
    missing, not a clock."""
    return lambda c, ctx: np.where(np.isfinite(c[counter]) & (c[counter] > 0), c[counter] * factor, np.nan)


def _total(*counters: str, factor: float = 1.0) -> Callable[[Values, Context], np.ndarray]:
    return lambda c, ctx: factor * np.sum([c[k] for k in counters], axis=0)


def _add_mul_fma(prefix: str, letter: str) -> tuple[tuple[str, ...], Callable[[Values, Context], np.ndarray]]:
    names = tuple(f"{prefix}__sass_thread_inst_executed_op_{letter}{op}_pred_on.sum" for op in ("add", "mul", "fma"))
    add, mul, fma = names
    # Thread-level, predicated-on instructions: one FLOP each, FMA two.
    return names, lambda c, ctx: c[add] + c[mul] + 2.0 * c[fma]


# AMD HBM traffic. Requests leave the L2 (TCC) for memory through the EA interface
# in 32-, 64- or (gfx942+) 128-byte units; bytes = sum of units x size.
# gfx908/gfx90a counter names (seed 003, slide "Empirical Hierarchical Roofline on
# MI200 - Arithmetic"; rocprof-compute src/utils/roofline_calc.py, MI200 branch):
#   read  = 32 x TCC_EA_RDREQ_32B + 64 x (TCC_EA_RDREQ - TCC_EA_RDREQ_32B)
#   write = 32 x (TCC_EA_WRREQ - TCC_EA_WRREQ_64B) + 64 x TCC_EA_WRREQ_64B
_RD_90A = ("TCC_EA_RDREQ_sum", "TCC_EA_RDREQ_32B_sum")
_WR_90A = ("TCC_EA_WRREQ_sum", "TCC_EA_WRREQ_64B_sum")
_WR_942 = ("TCC_EA0_WRREQ_sum", "TCC_EA0_WRREQ_64B_sum")
# gfx942/gfx950 (MI300, MI350) renamed the interface EA0 and added 128-byte reads.
# rocprof-compute counts them with TCC_BUBBLE on MI300 (roofline_calc.py non-MI200
# branch; analysis_configs/gfx942/0200 "L2-Fabric Read BW"; gfx950/0400_roofline.yaml
# "Total HBM Data" @ rocm-systems 10d7b26):
#   read = 128 x TCC_BUBBLE + 64 x (TCC_EA0_RDREQ - TCC_BUBBLE - TCC_EA0_RDREQ_32B)
#          + 32 x TCC_EA0_RDREQ_32B
# That is also rocprof-compute 3.3's formula on gfx950 (rocm-systems 1b1610fc2,
# utils/roofline_calc.py: every non-MI200 series; gfx950 0200 speed-of-light
# "L2-Fabric Read BW"), and perfcheck follows the analyzer: on its MI350 vcopy
# workload it gives 4,199,765 B read + 8,388,608 B written = 12,588,373 B per
# dispatch (tests/test_parity.py). Known disagreement, kept visible here: that
# copy reads 8 MiB, and ROCm/rocm-systems PR #2501 (2026-01) calls TCC_BUBBLE "a
# workaround for MI300 ... fixed in MI350 with introduction of TCC_EA0_RDREQ_128B";
# where TCC_EA0_RDREQ_128B was collected, that count is used instead (_RD_950 first).
_RD_942 = ("TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum", "TCC_BUBBLE_sum")
_RD_950 = ("TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum", "TCC_EA0_RDREQ_128B_sum")


def _read_90a(c: Values) -> np.ndarray:
    rd, rd32 = (c[k] for k in _RD_90A)
    return 32.0 * rd32 + 64.0 * (rd - rd32)


def _write(c: Values, names: tuple[str, str]) -> np.ndarray:
    wr, wr64 = (c[k] for k in names)
    return 32.0 * (wr - wr64) + 64.0 * wr64


def _read_128(c: Values, names: tuple[str, str, str]) -> np.ndarray:
    rd, rd32, rd128 = (c[k] for k in names)
    return 128.0 * rd128 + 64.0 * (rd - rd128 - rd32) + 32.0 * rd32


def _read_bubble(c: Values, ctx: Context) -> np.ndarray:
    return _read_128(c, _RD_942)


# FETCH_SIZE / WRITE_SIZE: rocprof's derived metrics, "the total kilobytes fetched
# from / written to the video memory" with KB = 1024 B: rocprof's gfx9 metrics
# define FETCH_SIZE = (32 x TCC_EA_RDREQ_32B_sum + 64 x (TCC_EA_RDREQ_sum -
# TCC_EA_RDREQ_32B_sum)) / 1024. Seed 001 (stencil sprint) converts "from KBs to bytes".
_KIB = 1024.0

# Level counters other than SQ_LEVEL_WAVES that SQ_ACCUM_PREV_HIRES can accumulate
# (rocprof-compute perfmon passes SQ_IFETCH_LEVEL, SQ_INST_LEVEL_{LDS,SMEM,VMEM}).
_OTHER_LEVELS = ("SQ_IFETCH_LEVEL", "SQ_INST_LEVEL_LDS", "SQ_INST_LEVEL_SMEM", "SQ_INST_LEVEL_VMEM")

# rocprof-compute sysinfo.csv figures, as the Omniperf reader passes them on.
_SYSINFO = ("sysinfo.cu_per_gpu", "sysinfo.max_waves_per_cu", "sysinfo.num_xcd")

_SEED_003 = "seed 003 (AMD, Hierarchical Roofline on MI200, 2023)"
_RCP_ROOF = "rocprof-compute roofline (roofline_calc.py; analysis_configs/gfx950/0400_roofline.yaml)"
_NERSC = "NERSC roofline-on-nvidia-gpus (Yang, Kurth & Williams 2020) ncu metric set"
_NVPROF_DOC = "nvprof metrics reference (CUDA Profiler User's Guide)"
_DING = "Ding & Williams, PMBS'19 instruction roofline (nvprof transactions of 32 B)"

FORMULAS: tuple[Formula, ...] = (
    # ---- HBM / device memory -----------------------------------------------------
    Formula("hbm_read_bytes", ROCPROF, _RD_90A, lambda c, ctx: _read_90a(c), f"{_SEED_003}; {_RCP_ROOF}"),
    Formula("hbm_read_bytes", ROCPROF, _RD_950, lambda c, ctx: _read_128(c, _RD_950),
            "rocm-systems PR #2501 (gfx950 TCC_EA0_RDREQ_128B)"),
    Formula("hbm_read_bytes", ROCPROF, _RD_942, _read_bubble, _RCP_ROOF),
    Formula("hbm_read_bytes", ROCPROF, ("FETCH_SIZE",), _scaled("FETCH_SIZE", _KIB),
            "rocprof derived metric FETCH_SIZE (KiB); seed 001", suggested=True),
    Formula("hbm_write_bytes", ROCPROF, _WR_90A, lambda c, ctx: _write(c, _WR_90A), f"{_SEED_003}; {_RCP_ROOF}"),
    Formula("hbm_write_bytes", ROCPROF, _WR_942, lambda c, ctx: _write(c, _WR_942), _RCP_ROOF),
    Formula("hbm_write_bytes", ROCPROF, ("WRITE_SIZE",), _scaled("WRITE_SIZE", _KIB),
            "rocprof derived metric WRITE_SIZE (KiB); seed 001", suggested=True),
    Formula("hbm_bytes", ROCPROF, _RD_90A + _WR_90A, lambda c, ctx: _read_90a(c) + _write(c, _WR_90A),
            f"{_SEED_003}; {_RCP_ROOF}"),
    Formula("hbm_bytes", ROCPROF, _RD_950 + _WR_942, lambda c, ctx: _read_128(c, _RD_950) + _write(c, _WR_942),
            "rocm-systems PR #2501 (gfx950 TCC_EA0_RDREQ_128B)"),
    Formula("hbm_bytes", ROCPROF, _RD_942 + _WR_942, lambda c, ctx: _read_bubble(c, ctx) + _write(c, _WR_942),
            _RCP_ROOF),
    Formula("hbm_bytes", ROCPROF, ("FETCH_SIZE", "WRITE_SIZE"), _total("FETCH_SIZE", "WRITE_SIZE", factor=_KIB),
            "rocprof derived metrics FETCH_SIZE + WRITE_SIZE (KiB); seed 001 TOTAL_RW", suggested=True),
    # ncu: DRAM bytes (NERSC metric set; seed 000 section 6.1 uses the same for V100)
    Formula("hbm_bytes", NCU, ("dram__bytes.sum",), _scaled("dram__bytes.sum", 1.0), _NERSC, suggested=True),
    Formula("hbm_bytes", NCU, ("dram__bytes_read.sum", "dram__bytes_write.sum"),
            _total("dram__bytes_read.sum", "dram__bytes_write.sum"), "ncu dram__bytes_read/_write"),
    Formula("hbm_read_bytes", NCU, ("dram__bytes_read.sum",), _scaled("dram__bytes_read.sum", 1.0),
            "ncu dram__bytes_read.sum"),
    Formula("hbm_write_bytes", NCU, ("dram__bytes_write.sum",), _scaled("dram__bytes_write.sum", 1.0),
            "ncu dram__bytes_write.sum"),
    # nvprof: DRAM transactions are 32-byte sectors (P100 slurm-9186634.out: 6 and
    # 1,135 transactions = dram_read_bytes 192 and dram_write_bytes 36,320).
    Formula("hbm_read_bytes", NVPROF, ("dram_read_transactions",), _scaled("dram_read_transactions", 32.0),
            f"{_DING}; {_NVPROF_DOC}", suggested=True),
    Formula("hbm_read_bytes", NVPROF, ("dram_read_bytes",), _scaled("dram_read_bytes", 1.0), _NVPROF_DOC),
    Formula("hbm_write_bytes", NVPROF, ("dram_write_transactions",), _scaled("dram_write_transactions", 32.0),
            f"{_DING}; {_NVPROF_DOC}", suggested=True),
    Formula("hbm_write_bytes", NVPROF, ("dram_write_bytes",), _scaled("dram_write_bytes", 1.0), _NVPROF_DOC),
    Formula("hbm_bytes", NVPROF, ("dram_read_transactions", "dram_write_transactions"),
            _total("dram_read_transactions", "dram_write_transactions", factor=32.0), _DING, suggested=True),
    Formula("hbm_bytes", NVPROF, ("dram_read_bytes", "dram_write_bytes"),
            _total("dram_read_bytes", "dram_write_bytes"), _NVPROF_DOC),
    # ---- L2 -------------------------------------------------------------------------
    # AMD: requests from the vector L1 (TCP) to the L2 (TCC), 64 B each, on every
    # arch in rocprof-compute's roofline (seed 003 L2_BW; gfx950 0400_roofline.yaml
    # "Total L2 Cache Data").
    Formula("l2_bytes", ROCPROF,
            ("TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum",
             "TCP_TCC_ATOMIC_WITH_RET_REQ_sum", "TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum"),
            _total("TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum",
                   "TCP_TCC_ATOMIC_WITH_RET_REQ_sum", "TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum", factor=64.0),
            f"{_SEED_003}; {_RCP_ROOF}"),
    Formula("l2_bytes", NCU, ("lts__t_bytes.sum",), _scaled("lts__t_bytes.sum", 1.0), _NERSC),
    # nvprof: L2 transactions are 32-byte sectors too (matrixMul_metrics.csv: l2 read
    # and write throughputs imply the same kernel time as the DRAM ones with x32).
    Formula("l2_bytes", NVPROF, ("l2_read_transactions", "l2_write_transactions"),
            _total("l2_read_transactions", "l2_write_transactions", factor=32.0), _DING),
    # ---- vector L1 ------------------------------------------------------------------
    # AMD: vL1D (TCP) cache-line accesses x 64 B: seed 003 vL1D_BW and rocprof-compute's
    # roofline on every arch (gfx950 0400_roofline.yaml "Total L1 Cache Data";
    # ROCm/rocprofiler-compute#598: "multiplied by 64 because the cache line on MI250X
    # is 64 bytes"). Its gfx942 speed-of-light panel uses 128 B (the MI300 line); the
    # roofline's 64 is followed here because these bytes feed the roofline.
    Formula("l1_bytes", ROCPROF, ("TCP_TOTAL_CACHE_ACCESSES_sum",), _scaled("TCP_TOTAL_CACHE_ACCESSES_sum", 64.0),
            f"{_SEED_003}; {_RCP_ROOF}"),
    Formula("l1_bytes", NCU, ("l1tex__t_bytes.sum",), _scaled("l1tex__t_bytes.sum", 1.0), _NERSC),
    # (nvprof: no L1 bytes. gld/gst transactions are not a fixed 32 B: in
    # matrixMul_metrics.csv (GTX 1080 Ti) 1,024,000 gld transactions moved 16.4 MB.)
    # ---- LDS ------------------------------------------------------------------------
    # (SQ_LDS_IDX_ACTIVE - SQ_LDS_BANK_CONFLICT) x 4 B x banks per CU; 32 banks on
    # every CDNA part (rocprof-compute soc_gfx90a/942/950 lds_banks_per_cu = 32;
    # seed 003 writes the product as 32 x 4).
    Formula("lds_bytes", ROCPROF, ("SQ_LDS_IDX_ACTIVE", "SQ_LDS_BANK_CONFLICT"),
            lambda c, ctx: 4.0 * 32.0 * (c["SQ_LDS_IDX_ACTIVE"] - c["SQ_LDS_BANK_CONFLICT"]),
            f"{_SEED_003}; {_RCP_ROOF}"),
    # ---- FLOPs ----------------------------------------------------------------------
    Formula("flops_fp64", ROCPROF, _amd_valu("F64"), _valu_flops("F64"), f"{_SEED_003}; {_RCP_ROOF}"),
    Formula("flops_fp32", ROCPROF, _amd_valu("F32"), _valu_flops("F32"), f"{_SEED_003}; {_RCP_ROOF}"),
    Formula("flops_fp16", ROCPROF, _amd_valu("F16"), _valu_flops("F16"), f"{_SEED_003}; {_RCP_ROOF}"),
    # MFMA: SQ_INSTS_VALU_MFMA_MOPS_* count 512-FLOP units (seed 003; rocprof-compute).
    *(
        Formula(quantity, ROCPROF, (counter,), _scaled(counter, 512.0), f"{_SEED_003}; {_RCP_ROOF}")
        for quantity, counter in (
            ("mfma_flops_fp64", "SQ_INSTS_VALU_MFMA_MOPS_F64"),
            ("mfma_flops_fp32", "SQ_INSTS_VALU_MFMA_MOPS_F32"),
            ("mfma_flops_fp16", "SQ_INSTS_VALU_MFMA_MOPS_F16"),
            ("mfma_flops_bf16", "SQ_INSTS_VALU_MFMA_MOPS_BF16"),
            ("mfma_flops_fp8", "SQ_INSTS_VALU_MFMA_MOPS_F8"),  # gfx942+
            ("mfma_flops_f6f4", "SQ_INSTS_VALU_MFMA_MOPS_F6F4"),  # gfx950
            ("mfma_iops_int8", "SQ_INSTS_VALU_MFMA_MOPS_I8"),
        )
    ),
    # ncu: sm__ (NERSC) and smsp__ (Nsight Compute's roofline sections) names count
    # the same thread instructions summed over the GPU.
    *(
        Formula(quantity, NCU, names, compute, f"{_NERSC}; Nsight Compute SpeedOfLight_Hierarchical*RooflineChart "
                "sections (FMA x 2)", suggested=prefix == "sm")
        for prefix in ("sm", "smsp")
        for quantity, letter in (("flops_fp64", "d"), ("flops_fp32", "f"), ("flops_fp16", "h"))
        for names, compute in (_add_mul_fma(prefix, letter),)
    ),
    # Tensor pipe: 512 FLOPs per tensor instruction, Nsight Compute's own convention
    # (SpeedOfLight_HierarchicalTensorRooflineChart.section:
    # derived__sm__inst_executed_pipe_tensor_x512) and NERSC's (V100 HMMA).
    Formula("tensor_flops", NCU, ("sm__inst_executed_pipe_tensor.sum",),
            _scaled("sm__inst_executed_pipe_tensor.sum", 512.0), _NERSC, suggested=True),
    Formula("tensor_flops", NCU, ("smsp__inst_executed_pipe_tensor.sum",),
            _scaled("smsp__inst_executed_pipe_tensor.sum", 512.0), _NERSC),
    # nvprof's own totals count an FMA as 2 and leave special functions out
    # (flop_count_sp_special is separate): flop_count_sp = add + mul + 2 x fma.
    Formula("flops_fp64", NVPROF, ("flop_count_dp",), _scaled("flop_count_dp", 1.0), _NVPROF_DOC, suggested=True),
    Formula("flops_fp32", NVPROF, ("flop_count_sp",), _scaled("flop_count_sp", 1.0), _NVPROF_DOC, suggested=True),
    Formula("flops_fp16", NVPROF, ("flop_count_hp",), _scaled("flop_count_hp", 1.0), _NVPROF_DOC, suggested=True),
    *(
        Formula(quantity, NVPROF, (f"{p}_add", f"{p}_mul", f"{p}_fma"),
                (lambda p: lambda c, ctx: c[f"{p}_add"] + c[f"{p}_mul"] + 2.0 * c[f"{p}_fma"])(p), _NVPROF_DOC)
        for quantity, p in (("flops_fp64", "flop_count_dp"), ("flops_fp32", "flop_count_sp"),
                            ("flops_fp16", "flop_count_hp"))
    ),
    # ---- instructions ---------------------------------------------------------------
    # AMD, seed 000 eq. 1 counts VALU + SALU instructions. SQ_INSTS_VALU and
    # SQ_INSTS_SALU are wavefront-level counts summed over every SIMD: rocprof
    # defines VALUInsts = SQ_INSTS_VALU / SQ_WAVES, "the average number of vector ALU
    # instructions executed per work-item", and the MI200 vecCopy workload gives
    # exactly 10 VALU + 3 SALU per wavefront. Seed 000's x 4 ("issued per SIMD") and
    # its / 64 ("64 threads constitute a wavefront", eq. 2 and 4) do not apply to
    # these counters: (4 x VALU + SALU) / 64 would be 0.67 instructions per
    # wavefront there. perfcheck counts SQ_INSTS_VALU + SQ_INSTS_SALU (see
    # tests/test_counters.py).
    Formula("instructions", ROCPROF, ("SQ_INSTS_VALU", "SQ_INSTS_SALU"), _total("SQ_INSTS_VALU", "SQ_INSTS_SALU"),
            "seed 000 eq. 1 (counter semantics: rocprof VALUInsts/SALUInsts)"),
    # NVIDIA: warp-level instructions executed (Ding & Williams use inst_executed).
    Formula("instructions", NCU, ("smsp__inst_executed.sum",), _scaled("smsp__inst_executed.sum", 1.0),
            "ncu smsp__inst_executed.sum (warp instructions)", suggested=True),
    Formula("instructions", NCU, ("sm__inst_executed.sum",), _scaled("sm__inst_executed.sum", 1.0),
            "ncu sm__inst_executed.sum (warp instructions)"),
    Formula("instructions", NVPROF, ("inst_executed",), _scaled("inst_executed", 1.0), f"{_DING}; {_NVPROF_DOC}"),
    # ---- achieved occupancy -----------------------------------------------------------
    # rocprof-compute "Wavefront Occupancy" (analysis_configs/gfx90a|gfx942/0200
    # speed-of-light, coll_level SQ_LEVEL_WAVES): the accumulator adds SQ_LEVEL_WAVES
    # (waves resident) every cycle, so / GRBM_GUI_ACTIVE_PER_XCD (= GRBM_GUI_ACTIVE /
    # num_xcd, rocprof-compute's built-in variable) is the mean number of resident
    # waves on the GPU, and its percentage is of max_waves_per_cu x cu_per_gpu.
    # rocprofiler-sdk names the accumulator SQ_LEVEL_WAVES_ACCUM (= accumulate(
    # SQ_LEVEL_WAVES, HIGH_RES)); rocprof v1/v2 call every accumulator
    # SQ_ACCUM_PREV_HIRES, which then means waves only in a pass that collected
    # SQ_LEVEL_WAVES and no other *_LEVEL counter (Omniperf's SQ_IFETCH_LEVEL.csv and
    # SQ_INST_LEVEL_*.csv passes accumulate fetch and instruction latencies instead).
    # rocprof-compute workloads: the device's figures from its own sysinfo.csv, as the
    # analyzer uses them (the reader passes them on as raw.sysinfo.*), first.
    Formula("achieved_occupancy_pct", ROCPROF, ("SQ_LEVEL_WAVES_ACCUM", "GRBM_GUI_ACTIVE") + _SYSINFO,
            lambda c, ctx: _sysinfo_occupancy(c), "rocprof-compute speed-of-light 'Wavefront Occupancy' "
            "(accumulator from SQ_LEVEL_WAVES.csv, GRBM_GUI_ACTIVE from pmc_perf.csv, figures from sysinfo.csv)"),
    Formula("achieved_occupancy_pct", ROCPROF, ("SQ_LEVEL_WAVES_ACCUM", "GRBM_GUI_ACTIVE"),
            lambda c, ctx: _amd_occupancy(c["SQ_LEVEL_WAVES_ACCUM"], c, ctx),
            "rocprof-compute speed-of-light 'Wavefront Occupancy'", suggested=True),
    Formula("achieved_occupancy_pct", ROCPROF, ("SQ_ACCUM_PREV_HIRES", "GRBM_GUI_ACTIVE", "SQ_LEVEL_WAVES"),
            lambda c, ctx: _amd_occupancy(c["SQ_ACCUM_PREV_HIRES"], c, ctx),
            "rocprof-compute speed-of-light 'Wavefront Occupancy' (rocprof v1/v2 names)",
            unless=_OTHER_LEVELS),
    # ---- latencies (rocprof-compute 11.2.9 VMEM, 11.2.10 SMEM, 12.2.2 LDS, 13.2.5
    # Instruction Fetch Latency; coll_level SQ_INST_LEVEL_* / SQ_IFETCH_LEVEL): the pass's
    # accumulator of instructions in flight over the instructions issued = mean cycles
    # each spent in flight. The instruction counts come from pmc_perf.csv, where the
    # analyzer takes them from the level file: the same counts of the same dispatch
    # (the MI200 vcopy workload: 32,768 VMEM, 65,536 SMEM instructions in both). No
    # instructions, no latency (the analyzer's "else None").
    *(
        Formula(quantity, ROCPROF, (f"{level}_ACCUM", count),
                (lambda level, count: lambda c, ctx: np.where(c[count] > 0, c[f"{level}_ACCUM"] / c[count], np.nan))(
                    level, count),
                f"rocprof-compute '{label}' ({level}.csv accumulator / {count})", suggested=True)
        for quantity, level, count, label in (
            ("vmem_latency", "SQ_INST_LEVEL_VMEM", "SQ_INSTS_VMEM", "VMEM Latency"),
            ("smem_latency", "SQ_INST_LEVEL_SMEM", "SQ_INSTS_SMEM", "SMEM Latency"),
            ("lds_latency", "SQ_INST_LEVEL_LDS", "SQ_INSTS_LDS", "LDS Latency"),
            ("ifetch_latency", "SQ_IFETCH_LEVEL", "SQ_IFETCH", "Instruction Fetch Latency"),
        )
    ),
    # ncu: warps active per active cycle as % of the SM's maximum (Occupancy section
    # "Achieved Occupancy"); the details page may name it by that label.
    Formula("achieved_occupancy_pct", NCU, ("sm__warps_active.avg.pct_of_peak_sustained_active",),
            _scaled("sm__warps_active.avg.pct_of_peak_sustained_active", 1.0),
            "ncu Occupancy section 'Achieved Occupancy'", suggested=True),
    Formula("achieved_occupancy_pct", NCU, ("Achieved Occupancy",), _scaled("Achieved Occupancy", 1.0),
            "ncu Occupancy section label (details page)"),
    # nvprof prints achieved_occupancy as a 0-1 fraction ("0.935178").
    Formula("achieved_occupancy_pct", NVPROF, ("achieved_occupancy",), _scaled("achieved_occupancy", 100.0),
            _NVPROF_DOC),
    # ---- clocks the dispatch ran at (Hz) ------------------------------------------------
    # Nsight Compute locks the GPU to its base clock by default (--clock-control base,
    # Nsight Compute CLI guide "Clock Control"), so the rate its cycle counters ran at
    # is the clock to hold the kernel against, not the datasheet boost clock.
    # ``X__cycles_elapsed.avg.per_second`` is cycles per second of that unit's clock
    # (ncu "Metrics Structure": .per_second divides by gpu__time_duration).
    *(
        Formula("sm_clock", NCU, (f"{p}__cycles_elapsed.avg.per_second",),
                _clock(f"{p}__cycles_elapsed.avg.per_second"), "ncu metrics reference: cycles_elapsed rate",
                suggested=p == "smsp")
        for p in ("smsp", "sm", "gpc")
    ),
    # The same from the GPC's elapsed cycles over the kernel time (ns in ncu's base unit).
    Formula("sm_clock", NCU, ("gpc__cycles_elapsed.max", "gpu__time_duration.sum"),
            lambda c, ctx: _clock("hz")({"hz": c["gpc__cycles_elapsed.max"] / (c["gpu__time_duration.sum"] * 1e-9)}, ctx),
            "ncu: gpc__cycles_elapsed.max / gpu__time_duration.sum"),
    Formula("mem_clock", NCU, ("dram__cycles_elapsed.avg.per_second",),
            _clock("dram__cycles_elapsed.avg.per_second"), "ncu metrics reference: DRAM cycles_elapsed rate",
            suggested=True),
    # No AMD formula, on the evidence of the real workloads (docs/clocks.md):
    # sysinfo.csv's cur_sclk is read once, outside the kernels (Omniperf 1.x on MI200
    # says 800 MHz while the same workload's roofline.csv measured FP64 at 20.4
    # TFLOP/s, 1.8x what 800 MHz allows), and GRBM_GUI_ACTIVE / duration exceeds the
    # peak clock (1439-2681 MHz on a 1700 MHz MI200): neither is the kernel's clock.
    # ---- perf.measure: work the caller declares ---------------------------------------
    # A timed Python function has no counters: perfcheck.measure records what the test
    # declares one call moves and computes as raw.perfcheck.<quantity> (base units, one
    # value per dispatch), and each maps to its quantity one to one. bytes= is
    # mem_bytes on device="cpu" (host main memory) and hbm_bytes on "cuda" (device
    # memory); flops= is flops_<precision> when a precision is given, else plain flops.
    *(
        Formula(quantity, PERFCHECK, (f"{DECLARED_PREFIX}{quantity}",), _scaled(f"{DECLARED_PREFIX}{quantity}", 1.0),
                "declared to perf.measure(bytes=..., flops=...)")
        for quantity in ("mem_bytes", "hbm_bytes", "flops_fp64", "flops_fp32", "flops_fp16", "flops")
    ),
)

# ncu kernel time when gpu__time_duration is not collected: elapsed cycles over the
# cycle rate (NERSC roofline-on-nvidia-gpus: "time = sm__cycles_elapsed.avg /
# sm__cycles_elapsed.avg.per_second"). Gives the canonical ``duration`` (s).
DURATION_FORMULAS: tuple[Formula, ...] = tuple(
    Formula("duration", NCU, (f"{p}__cycles_elapsed.avg", f"{p}__cycles_elapsed.avg.per_second"),
            (lambda p: lambda c, ctx: c[f"{p}__cycles_elapsed.avg"] / c[f"{p}__cycles_elapsed.avg.per_second"])(p),
            _NERSC, suggested=p == "sm")
    for p in ("sm", "smsp")
)

# --- target-dependent figures ------------------------------------------------------

# CUs per XCD where one GPU (as profiled) spans several XCDs: MI300A/X and MI325X
# (gfx942) have 38 active CUs per XCD, MI350X/MI355X (gfx950) 32 (arch-specs.md
# §1.2 [S1][S2][S3]). Older parts are one XCD per GCD.
_CUS_PER_XCD = {"gfx942": 38, "gfx950": 32}


def _arch_name(target: "Target | None") -> str | None:
    arch = getattr(target, "arch", None)
    return getattr(arch, "name", None)


def _wave_slots_per_cu(arch: object) -> float | None:
    per_simd = getattr(arch, "max_waves_per_simd", None)
    simds = getattr(arch, "simds_per_cu", None)
    return float(per_simd * simds) if per_simd and simds else None


def _xcds(target: "Target") -> float | None:
    """XCDs of the profiled device (rocprof-compute's $num_xcd): the device's own
    figure if the database gives one, else CUs / CUs per XCD."""
    device = target.device
    if getattr(device, "xcds", None):
        return float(device.xcds)  # type: ignore[union-attr]
    per_xcd = _CUS_PER_XCD.get(_arch_name(target) or "")
    if per_xcd is None:
        return 1.0
    xcds, rest = divmod(device.compute_units, per_xcd)  # type: ignore[union-attr]
    return float(xcds) if xcds and not rest else None


def _sysinfo_occupancy(c: Values) -> np.ndarray:
    cus, waves, xcds = (c[k] for k in _SYSINFO)
    per_xcd = c["GRBM_GUI_ACTIVE"] / xcds  # the analyzer's $GRBM_GUI_ACTIVE_PER_XCD
    return 100.0 * (c["SQ_LEVEL_WAVES_ACCUM"] / per_xcd) / (waves * cus)


def _amd_occupancy(accumulated: np.ndarray, c: Values, ctx: Context) -> np.ndarray:
    """Percentage of the GPU's wave slots occupied on average; NaN without a device
    (the CU count and wave slots come from the arch database, not the counters)."""
    target = ctx.target
    if target is None or getattr(target, "device", None) is None:
        return np.full(ctx.rows, np.nan)
    slots = _wave_slots_per_cu(target.arch)
    xcds = _xcds(target)
    cus = getattr(target.device, "compute_units", None)
    if not slots or not xcds or not cus:
        return np.full(ctx.rows, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        waves = accumulated / (c["GRBM_GUI_ACTIVE"] / xcds)
    return 100.0 * waves / (slots * cus)


# --- evaluation ----------------------------------------------------------------------

_CHANNEL = re.compile(r"^(?P<base>.+)\[\d+\]$")


class _Counters:
    """Counter lookup in a chunk: exact raw column, else (for ``X_sum``) the sum of
    the per-channel columns ``X[n]``, else rocprofv3's accumulated ``X``."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame
        self._channels: dict[str, list[str]] = {}
        for column in frame.columns:
            if isinstance(column, str) and column.startswith(RAW_PREFIX):
                match = _CHANNEL.match(column[len(RAW_PREFIX):])
                if match:
                    self._channels.setdefault(match.group("base"), []).append(column)
        self._cache: dict[str, np.ndarray | None] = {}

    def _array(self, columns: list[str]) -> np.ndarray:
        block = self._frame[columns].to_numpy(dtype="float64", na_value=np.nan)
        return block.sum(axis=1)  # a NaN channel makes the row NaN: no partial sums

    def get(self, name: str) -> np.ndarray | None:
        if name not in self._cache:
            self._cache[name] = self._lookup(name)
        return self._cache[name]

    def _lookup(self, name: str) -> np.ndarray | None:
        column = RAW_PREFIX + name
        if column in self._frame.columns:
            return self._array([column])
        if name.endswith("_sum"):
            base = name[: -len("_sum")]
            if base in self._channels:
                return self._array(self._channels[base])
            if RAW_PREFIX + base in self._frame.columns:
                return self._array([RAW_PREFIX + base])
        return None


def _evaluate(formulas: tuple[Formula, ...], counters: _Counters, ctx: Context) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for formula in formulas:
        values = {name: counters.get(name) for name in formula.counters}
        if any(v is None for v in values.values()) or any(counters.get(name) is not None for name in formula.unless):
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            result = np.asarray(formula.compute(values, ctx), dtype="float64")  # type: ignore[arg-type]
        previous = out.get(formula.quantity)
        # Earlier formulas win; later ones only fill the rows they left empty.
        out[formula.quantity] = result if previous is None else np.where(np.isnan(previous), result, previous)
    return out


def _wave_size(dispatches: pd.DataFrame, target: "Target | None") -> np.ndarray:
    fallback = float(getattr(getattr(target, "arch", None), "wave_size", None) or 64)
    if "wave_size" in dispatches.columns:
        sizes = dispatches["wave_size"].to_numpy(dtype="float64", na_value=np.nan)
        return np.where(np.isnan(sizes), fallback, sizes)
    return np.full(len(dispatches), fallback)


def work(dispatches: pd.DataFrame, target: "Target | None") -> pd.DataFrame:
    """Per-dispatch quantities (``QUANTITIES``, base units) of a dispatch chunk.

    Same index as ``dispatches``; one column per quantity whose counters the chunk
    holds, in ``QUANTITIES`` order. ``flops`` is the sum of the FLOP quantities
    present (NaN in a row where one of them is NaN). ``target`` supplies what
    counters cannot: CU count, wave slots and XCDs for AMD achieved occupancy when
    the profile does not give them (rocprof-compute's sysinfo does). The dispatch
    duration is not a quantity: see ``cycles_duration`` for ncu files without one.
    """
    counters = _Counters(dispatches)
    ctx = Context(rows=len(dispatches), target=target, wave_size=_wave_size(dispatches, target))
    values = _evaluate(FORMULAS, counters, ctx)
    present = [q for q in FLOP_QUANTITIES if q in values]
    if present:
        values["flops"] = np.sum([values[q] for q in present], axis=0)
    columns = {q: values[q] for q in QUANTITIES if q in values}
    return pd.DataFrame(columns, index=dispatches.index, dtype="float64")


def cycles_duration(dispatches: pd.DataFrame) -> pd.Series | None:
    """Per-dispatch kernel time (s) from ncu's elapsed cycles and cycle rate
    (``DURATION_FORMULAS``), for chunks whose reader found no ``duration`` (ncu runs
    without gpu__time_duration, e.g. NERSC-style ``--metrics`` lists); None when the
    cycle counters are absent too. The caller decides whether to use it as the
    chunk's ``duration``; it never replaces a measured one."""
    ctx = Context(rows=len(dispatches), target=None, wave_size=np.full(len(dispatches), np.nan))
    values = _evaluate(DURATION_FORMULAS, _Counters(dispatches), ctx)
    if "duration" not in values:
        return None
    return pd.Series(values["duration"], index=dispatches.index, name="duration")


# --- what to collect ------------------------------------------------------------------


def counters_for(quantity: str, vendor: str) -> list[str]:
    """The counters to collect for ``quantity`` on ``vendor`` ("amd", "nvidia", or a
    tool family: "rocprof", "ncu", "nvprof"), for messages such as "collect
    FETCH_SIZE, WRITE_SIZE". Empty when no supported tool gives that quantity."""
    if quantity not in QUANTITIES and quantity != "duration":
        raise UsageError(f"unknown quantity {quantity!r}; known: {', '.join(QUANTITIES)}")
    key = vendor.lower()
    tools = _VENDOR_TOOLS.get(key, (key,) if key in (ROCPROF, NCU, NVPROF) else None)
    if tools is None:
        raise UsageError(f"unknown vendor {vendor!r}; use amd, nvidia, rocprof, ncu or nvprof")
    if quantity == "flops":
        names = [name for q in FLOP_QUANTITIES for name in counters_for(q, key)]
        return list(dict.fromkeys(names))
    for tool in tools:
        candidates = [f for f in FORMULAS + DURATION_FORMULAS if f.quantity == quantity and f.tool == tool]
        if candidates:
            chosen = next((f for f in candidates if f.suggested), candidates[0])
            return list(chosen.collect or chosen.counters)
    return []


def wanted() -> Want:
    """Every raw counter (and canonical column) a formula may read, for readers of
    wide files: exact names, plus ``raw.X[`` prefixes for per-channel counters."""
    columns = {"duration", "wave_size"}
    prefixes = []
    for formula in FORMULAS + DURATION_FORMULAS:
        for name in formula.counters:
            columns.add(RAW_PREFIX + name)
            if name.endswith("_sum"):
                base = name[: -len("_sum")]
                columns.add(RAW_PREFIX + base)
                prefixes.append(f"{RAW_PREFIX}{base}[")
    return Want(frozenset(columns), tuple(dict.fromkeys(prefixes)))
