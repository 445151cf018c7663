"""The metric vocabulary of the expectation language, for ``perfcheck metrics``: every
name an expectation may check, its unit, the unit words a threshold on it takes, what
it means, and what it is computed from.

Nothing here is retyped from elsewhere where the code already knows it: the names are
``expect.known_metrics()``, the units ``schema.metric_unit``, the unit words the
parser's own table, the meanings of launch resources ``schema.COLUMNS``, the counter
quantity of a metric ``expect.NEEDS``, and the counters per profiler come from the
formulas of ``perfcheck.metrics.counters``: for rocprofv3, rocprof and ncu the ones
``perfcheck run`` collects (``run.plan.needs_for``), for nvprof the suggested
formula's, and for Omniperf/rocprof-compute (which collects every counter itself)
the hardware-counter formulas its ``pmc_perf.csv`` feeds, one alternative per GPU
generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from perfcheck.errors import UsageError

# Tools whose counter names are listed, per vendor, in this order.
TOOLS: tuple[tuple[str, str], ...] = (
    ("amd", "rocprofv3"), ("amd", "rocprof"), ("amd", "omniperf"), ("nvidia", "ncu"), ("nvidia", "nvprof"),
)
# perf.measure: no profiler; the test declares the work of one call.
DECLARED = "perf.measure"

_TRACE = "kernel trace"
_RESOURCES = "kernel trace (launch resources)"
_GPU = "launch resources and the GPU (--arch)"
_TIMELINE = "a timeline (Kineto trace, Nsight Systems export), under \"@run\" or \"range:NAME\""

# What each metric means. Launch resources and the aggregate durations take their
# meaning from the column registry (schema.COLUMNS) instead.
MEANINGS: dict[str, str] = {
    "bw": "main-memory bandwidth: mem_bw where the kernel has it (a CPU's DRAM), else hbm_bw",
    "hbm_bw": "achieved device-memory (HBM/DRAM) bandwidth: hbm_bytes / duration",
    "mem_bw": "achieved host main-memory bandwidth of a CPU kernel (perf.measure): mem_bytes / duration",
    "l2_bw": "achieved L2 cache bandwidth: l2_bytes / duration",
    "l1_bw": "achieved vector L1 cache bandwidth: l1_bytes / duration",
    "lds_bw": "achieved LDS / shared-memory bandwidth: lds_bytes / duration",
    "hbm_bw_pct": "hbm_bw as a percentage of the HBM ceiling (empirical peak if given, else theoretical)",
    "mem_bw_pct": "mem_bw as a percentage of the main-memory ceiling",
    "l2_bw_pct": "l2_bw as a percentage of the L2 ceiling",
    "l1_bw_pct": "l1_bw as a percentage of the L1 ceiling",
    "lds_bw_pct": "lds_bw as a percentage of the LDS ceiling",
    "ai_hbm": "arithmetic intensity at HBM: flops / hbm_bytes",
    "ai_mem": "arithmetic intensity at main memory: flops / mem_bytes",
    "ai_l2": "arithmetic intensity at L2: flops / l2_bytes",
    "ai_l1": "arithmetic intensity at L1: flops / l1_bytes",
    "ai_lds": "arithmetic intensity at LDS: flops / lds_bytes",
    "flop_rate": "achieved floating-point rate: flops / duration",
    "attainable": "roofline bound at the kernel's intensities: min(compute peak, intensity x bandwidth) over the levels",
    "roofline_pct": "flop_rate as a percentage of attainable",
    "instruction_rate": "wavefront/warp instructions per second",
    "gips": "instruction_rate in 10**9 instructions per second (the instruction roofline's unit)",
    "peak_gips": "the device's peak GIPS: CUs x schedulers x IPC x clock (arch database)",
    "gips_pct": "instruction_rate as a percentage of the device's peak",
    "instruction_intensity_hbm": "instructions per HBM byte",
    "occupancy_pct": "theoretical occupancy from launch resources (registers, LDS, workgroup size), by the vendor's rules",
    "achieved_occupancy_pct": "measured occupancy: resident waves/warps as a percentage of the maximum",
    "vmem_latency": "mean latency of a vector memory instruction, in cycles (rocprof-compute's VMEM Latency)",
    "smem_latency": "mean latency of a scalar memory instruction, in cycles (rocprof-compute's SMEM Latency)",
    "lds_latency": "mean latency of an LDS instruction, in cycles (rocprof-compute's LDS Latency)",
    "ifetch_latency": "mean latency of an instruction fetch, in cycles (rocprof-compute's Instruction Fetch Latency)",
    "sm_clock": "SM / shader clock the kernel ran at (mean over its dispatches); theoretical roofs scale to it "
                "(docs/clocks.md)",
    "mem_clock": "memory (DRAM) clock the kernel ran at (mean over its dispatches); scales the theoretical "
                 "HBM roof where the datasheet memory clock is known",
    "waves_per_cu": "resident wavefronts per CU that the launch resources allow (AMD)",
    "warps_per_sm": "resident warps per SM that the launch resources allow (NVIDIA)",
    "workgroups_per_cu": "resident workgroups / blocks per CU or SM that the launch resources allow",
    "duration": "median duration of one dispatch (of a range under \"range:NAME\": one run of it)",
    "duration_p90": "90th percentile of a range's duration (\"range:NAME\")",
    "calls": "dispatches of the kernel",
    "ranks": "MPI ranks that ran the kernel",
    "rank_duration_min": "least time one rank spent in the kernel (sum of its dispatches there)",
    "rank_duration_median": "median over the ranks of the time each spent in the kernel",
    "rank_duration_max": "most time one rank spent in the kernel",
    "rank_imbalance": "rank_duration_max / mean over the ranks (1 is perfect balance)",
    "hbm_bytes": "bytes moved between the last-level cache and device memory, per dispatch",
    "hbm_read_bytes": "bytes read from device memory, per dispatch",
    "hbm_write_bytes": "bytes written to device memory, per dispatch",
    "mem_bytes": "bytes a CPU kernel moves to and from main memory per call (declared to perf.measure)",
    "l2_bytes": "bytes moved between the L1 and the L2, per dispatch",
    "l1_bytes": "bytes accessed in the vector L1 cache, per dispatch",
    "lds_bytes": "bytes accessed in LDS / shared memory, per dispatch",
    "flops_fp64": "FP64 vector floating-point operations per dispatch (FMA = 2)",
    "flops_fp32": "FP32 vector floating-point operations per dispatch (FMA = 2)",
    "flops_fp16": "FP16 vector floating-point operations per dispatch (FMA = 2)",
    "mfma_flops_fp64": "FP64 matrix-core (MFMA) FLOPs per dispatch (AMD)",
    "mfma_flops_fp32": "FP32 matrix-core (MFMA) FLOPs per dispatch (AMD)",
    "mfma_flops_fp16": "FP16 matrix-core (MFMA) FLOPs per dispatch (AMD)",
    "mfma_flops_bf16": "BF16 matrix-core (MFMA) FLOPs per dispatch (AMD)",
    "mfma_flops_fp8": "FP8 matrix-core (MFMA) FLOPs per dispatch (AMD gfx942+)",
    "mfma_flops_f6f4": "FP6/FP4 matrix-core (MFMA) FLOPs per dispatch (AMD gfx950)",
    "mfma_iops_int8": "INT8 matrix-core (MFMA) integer operations per dispatch (AMD; not in flops)",
    "tensor_flops": "tensor-core FLOPs per dispatch (NVIDIA; 512 per tensor-pipe instruction)",
    "flops": "all floating-point operations per dispatch: every FLOP quantity collected, summed",
    "instructions": "wavefront (AMD) / warp (NVIDIA) instructions executed per dispatch",
}

# Needs of the metrics computed without counters.
_TRACE_ONLY = {
    **{m: _TRACE for m in ("duration", "duration_mean", "duration_min", "duration_max", "duration_total", "calls",
                           "ranks", "rank_duration_min", "rank_duration_median", "rank_duration_max", "rank_imbalance")},
    **{m: _GPU for m in ("occupancy_pct", "waves_per_cu", "warps_per_sm", "workgroups_per_cu")},
    "peak_gips": "the GPU (--arch)",
}


@dataclass(frozen=True)
class MetricInfo:
    """One metric of the expectation language."""

    name: str
    unit: str  # base unit; "count" or "" for plain numbers
    units: tuple[str, ...]  # the unit words a threshold on it takes; () for plain numbers
    meaning: str
    aliases: tuple[str, ...]  # other names an expectation may use for it
    of_peak: bool  # whether "N% of peak" applies
    quantity: str | None  # the counter quantity it is computed from (metrics.counters)
    needs: str  # what it is computed from, in words
    # tool -> alternatives, each the counters one way of computing it needs; () when the
    # tool needs no counters for it (kernel trace); None when the tool cannot give it
    counters: Mapping[str, tuple[tuple[str, ...], ...] | None]

    @property
    def plain(self) -> bool:
        """A bare number is a threshold on it (a count or a ratio)."""
        return not self.units

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name, "unit": self.unit, "units": list(self.units), "meaning": self.meaning,
            "aliases": list(self.aliases), "of_peak": self.of_peak, "quantity": self.quantity, "needs": self.needs,
            "counters": {tool: None if alts is None else [list(a) for a in alts] for tool, alts in self.counters.items()},
        }


def _gpu_metric(name: str) -> str:
    """The metric a per-kernel name stands for on a GPU ("bw" -> "hbm_bw")."""
    from perfcheck.expect import PER_KERNEL

    return PER_KERNEL.get(name, (name,))[-1]


def _quantity(name: str) -> str | None:
    from perfcheck.run.plan import quantity_of

    return quantity_of(_gpu_metric(name))


def _profiler_counters(name: str, profiler: str, family: str) -> tuple[tuple[str, ...], ...] | None:
    from perfcheck.run.plan import needs_for

    # The newest arch on which every counter of the formulas exists (MFMA F8 and F6F4
    # are gfx942+/gfx950 only); `perfcheck run` drops those a given GPU lacks.
    arch = "gfx950" if family == "rocprof" else None
    try:
        needs = needs_for(profiler, family, [name], arch=arch)
    except UsageError:
        return None
    names = tuple(dict.fromkeys(c for need in needs for c in need.counters))
    return (names,) if names else ()


def _formula_counters(quantity: str, tool: str, *, hardware_only: bool = False) -> tuple[tuple[str, ...], ...] | None:
    from perfcheck.metrics.counters import FLOP_QUANTITIES, FORMULAS, counters_for
    from perfcheck.run.plan import AMD_DERIVED

    if not hardware_only:
        names = tuple(counters_for(quantity, tool))
        return (names,) if names else None
    parts = FLOP_QUANTITIES if quantity == "flops" else (quantity,)
    sets = [f.counters for f in FORMULAS
            if f.tool == tool and f.quantity in parts and not set(f.counters) & set(AMD_DERIVED)]
    if not sets:
        return None
    if quantity == "flops":  # every precision's counters, summed: one set
        return (tuple(dict.fromkeys(c for s in sets for c in s)),)
    return tuple(dict.fromkeys(sets))


def _declared(quantity: str | None) -> tuple[tuple[str, ...], ...] | None:
    from perfcheck.metrics.counters import FORMULAS, PERFCHECK

    declared = {f.quantity for f in FORMULAS if f.tool == PERFCHECK}
    if quantity is None or quantity not in declared:
        return None
    return (("flops=..." if quantity.startswith("flops") else "bytes=...",),)


def _needs(name: str, quantity: str | None, unit: str) -> str:
    from perfcheck.schema import RANK_SPREAD_METRICS, TIMELINE_METRICS

    if name in RANK_SPREAD_METRICS:
        return "the timelines of several ranks, under \"@ranks\""
    if name in TIMELINE_METRICS or name == "duration_p90":
        return _TIMELINE
    if name in _TRACE_ONLY:
        return _TRACE_ONLY[name]
    if quantity is None:
        return _RESOURCES
    declared = _declared(quantity)
    parts = [f"{quantity} counters" + (" (or declared to perf.measure)" if declared else "")]
    if declared and _formula_counters(quantity, "rocprof") is None and _formula_counters(quantity, "ncu") is None:
        parts = [f"{quantity} declared to perf.measure({declared[0][0]})"]
    if unit.endswith("/s") or unit == "GIPS" or name.endswith("_pct") and name != "achieved_occupancy_pct":
        parts.append("durations")
    if name.endswith("_pct") and name != "achieved_occupancy_pct" or name in ("attainable", "roofline_pct"):
        parts.append("a ceiling (--peaks, or the GPU's figures with --arch)")
    if name == "achieved_occupancy_pct":
        parts.append("the GPU (--arch) on AMD")
    return ", ".join(parts)


def _meaning(name: str) -> str:
    from perfcheck.schema import COLUMNS

    from perfcheck.schema import RANK_SPREAD_METRICS, TIMELINE_METRICS

    if name in RANK_SPREAD_METRICS:
        return RANK_SPREAD_METRICS[name][1] + " (\"@ranks\")"
    if name in MEANINGS:
        return MEANINGS[name]
    if name in TIMELINE_METRICS:
        return TIMELINE_METRICS[name][1] + " (per device, \"@run\")"
    if name in COLUMNS:
        return COLUMNS[name].meaning + (" (per kernel: the largest over its dispatches)"
                                        if COLUMNS[name].group == "launch" else "")
    raise AssertionError(f"metric {name!r} has no meaning in perfcheck.vocabulary.MEANINGS")


def describe(name: str) -> MetricInfo:
    """One metric (or alias) of the expectation language."""
    from perfcheck.expect import ALIASES, DIMENSIONLESS, PEAK_METRICS, known_metrics, metric_unit_of, units_of

    canonical = ALIASES.get(name, name)
    known = known_metrics()
    if canonical not in known:
        import difflib

        close = difflib.get_close_matches(name, [*known, *ALIASES], n=1)
        raise UsageError(f"unknown metric {name!r}" + (f"; did you mean {close[0]!r}?" if close else
                                                          "; `perfcheck metrics` lists them all"))
    unit = metric_unit_of(canonical)
    quantity = _quantity(canonical)
    counters: dict[str, tuple[tuple[str, ...], ...] | None] = {}
    for _vendor, tool in TOOLS:
        if quantity is None:
            counters[tool] = ()
        elif tool == "omniperf":
            counters[tool] = _formula_counters(quantity, "rocprof", hardware_only=True)
        elif tool == "nvprof":
            counters[tool] = _formula_counters(quantity, "nvprof")
        else:
            counters[tool] = _profiler_counters(canonical, tool, "rocprof" if tool.startswith("rocprof") else "ncu")
    counters[DECLARED] = _declared(quantity) if quantity is not None else None
    return MetricInfo(
        name=canonical,
        unit=unit,
        units=() if unit in DIMENSIONLESS else units_of(unit),
        meaning=_meaning(canonical),
        aliases=tuple(a for a, target in ALIASES.items() if target == canonical),
        of_peak=canonical in PEAK_METRICS,
        quantity=quantity,
        needs=_needs(canonical, quantity, unit),
        counters=counters,
    )


def catalog(names: Iterable[str] | None = None) -> list[MetricInfo]:
    """Every metric an expectation may check (or those named), in the registry's order."""
    from perfcheck.expect import known_metrics

    chosen: Sequence[str] = list(names) if names else known_metrics()
    return [describe(n) for n in chosen]
