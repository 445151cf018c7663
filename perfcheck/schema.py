"""Registry of canonical dispatch-table columns and of metric units.

Every reader renames its tool's columns to these names and converts values to the
base unit given here (seconds, bytes, counts; timestamps as integer nanoseconds).
Raw counters keep the tool's own name behind the ``raw.`` prefix
(``raw.FETCH_SIZE``, ``raw.TCC_EA_RDREQ[3]``, ``raw.dram__bytes.sum``) and their
original unit, so nothing the profiler measured is lost.

Launch geometry follows one convention whatever the vendor: ``grid_*`` counts
work-items (threads), as AMD reports them; NVIDIA's grid of blocks is multiplied
by the block size on ingest. ``workgroups`` is the number of workgroups/blocks.

``Want`` is a selection of these columns: what a caller needs a reader to produce.
"""

from __future__ import annotations

from dataclasses import dataclass

RAW_PREFIX = "raw."


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # pandas dtype of the canonical column
    unit: str  # base unit; "" for labels and plain counts of things
    group: str  # identity | launch | timing
    meaning: str


_COLUMNS = [
    # identity
    Column("kernel", "str", "", "identity", "kernel name as the tool reports it, code-object suffixes such as ' [clone .kd]' removed"),
    Column("dispatch_id", "Int64", "", "identity", "dispatch / launch index given by the tool"),
    Column("device_id", "Int64", "", "identity", "GPU / agent index given by the tool"),
    Column("queue_id", "Int64", "", "identity", "HSA queue id (AMD)"),
    Column("stream_id", "Int64", "", "identity", "stream id (HIP or CUDA)"),
    Column("context_id", "Int64", "", "identity", "CUDA context id"),
    Column("pid", "Int64", "", "identity", "process id"),
    Column("tid", "Int64", "", "identity", "thread id that launched the kernel"),
    Column("correlation_id", "Int64", "", "identity", "id linking the dispatch to its API call"),
    Column("rank", "Int64", "", "identity", "MPI rank the dispatch belongs to, when known"),
    # launch
    Column("grid_x", "Int64", "", "launch", "grid size in work-items (threads), x"),
    Column("grid_y", "Int64", "", "launch", "grid size in work-items (threads), y"),
    Column("grid_z", "Int64", "", "launch", "grid size in work-items (threads), z"),
    Column("grid_size", "Int64", "", "launch", "total work-items (threads) in the grid"),
    Column("workgroup_x", "Int64", "", "launch", "workgroup / block size in work-items, x"),
    Column("workgroup_y", "Int64", "", "launch", "workgroup / block size in work-items, y"),
    Column("workgroup_z", "Int64", "", "launch", "workgroup / block size in work-items, z"),
    Column("workgroup_size", "Int64", "", "launch", "work-items per workgroup / threads per block"),
    Column("workgroups", "Int64", "", "launch", "number of workgroups / blocks in the grid"),
    Column("wave_size", "Int64", "", "launch", "wavefront / warp width"),
    Column("vgpr", "Int64", "", "launch", "architected vector registers per work-item (AMD)"),
    Column("agpr", "Int64", "", "launch", "accumulation registers per work-item (AMD gfx908+)"),
    Column("sgpr", "Int64", "", "launch", "scalar registers per wavefront (AMD)"),
    Column("registers", "Int64", "", "launch", "registers per thread (NVIDIA)"),
    Column("lds_per_workgroup", "Int64", "B", "launch", "LDS / shared memory per workgroup, static + dynamic"),
    Column("lds_static", "Int64", "B", "launch", "static shared memory per block (NVIDIA)"),
    Column("lds_dynamic", "Int64", "B", "launch", "dynamic shared memory per block (NVIDIA)"),
    Column("scratch_per_thread", "Int64", "B", "launch", "private / scratch (spill) memory per work-item"),
    # timing
    Column("start_ns", "Int64", "ns", "timing", "begin timestamp, integer nanoseconds in the tool's clock"),
    Column("end_ns", "Int64", "ns", "timing", "end timestamp, integer nanoseconds in the tool's clock"),
    Column("duration", "float64", "s", "timing", "kernel execution time of this dispatch"),
    # aggregate: only in kernel-level tables, where the tool wrote statistics
    # per kernel instead of dispatches (rocprof --stats, rocprofv3 --stats).
    Column("calls", "Int64", "", "aggregate", "dispatches the row summarises"),
    Column("duration_total", "float64", "s", "aggregate", "summed duration of those dispatches"),
    Column("duration_mean", "float64", "s", "aggregate", "mean duration"),
    Column("duration_min", "float64", "s", "aggregate", "shortest duration"),
    Column("duration_max", "float64", "s", "aggregate", "longest duration"),
    Column("duration_std", "float64", "s", "aggregate", "standard deviation of the duration"),
]

COLUMNS: dict[str, Column] = {c.name: c for c in _COLUMNS}

# Units of the per-kernel summary quantities (the vocabulary of DESIGN.md section 4).
METRIC_UNITS: dict[str, str] = {
    "calls": "count",
    # AMD per-level latencies (metrics.counters), in shader-clock cycles
    "vmem_latency": "cycles",
    "smem_latency": "cycles",
    "lds_latency": "cycles",
    "ifetch_latency": "cycles",
    "duration": "s",
    "duration_mean": "s",
    "duration_min": "s",
    "duration_max": "s",
    "duration_total": "s",
    "duration_p90": "s",  # of a timeline range (metrics.timeline)
    "vgpr": "count",
    "agpr": "count",
    "sgpr": "count",
    "registers": "count",
    "workgroup_size": "count",
    "grid_size": "count",
    "lds_per_workgroup": "B",
    "scratch_per_thread": "B",
    "flop_rate": "FLOP/s",
    "attainable": "FLOP/s",
    "occupancy_pct": "%",
    # the clocks a kernel ran at, where the profile records them (metrics.counters)
    "sm_clock": "Hz",
    "mem_clock": "Hz",
    # instruction roofline (perfcheck.metrics.roofline): a rate in instructions per
    # second, gips the same in 10**9 instructions per second (the papers' unit)
    "instruction_rate": "inst/s",
    "gips": "GIPS",
    "peak_gips": "GIPS",
    "instruction_intensity_hbm": "inst/B",
    "mfma_iops_int8": "OP",  # integer matrix-core operations, not FLOPs
    "waves_per_cu": "count",
    "warps_per_sm": "count",
    "workgroups_per_cu": "count",
    # spread of a kernel's time over MPI ranks (perfcheck.metrics.ranks): per-rank totals
    "ranks": "count",
    "rank_duration_min": "s",
    "rank_duration_median": "s",
    "rank_duration_max": "s",
    "rank_imbalance": "",  # max / mean over ranks, a plain ratio
}

# Metrics of a device's timeline (perfcheck.metrics.timeline), name -> (unit, meaning),
# checked under "@run"; the per-direction copy metrics are generated below.
TIMELINE_METRICS: dict[str, tuple[str, str]] = {
    "span": ("s", "first to last GPU activity (kernel, copy, memset) of the device"),
    "busy": ("s", "union of kernel, copy and memset intervals (overlaps counted once)"),
    "gpu_busy_pct": ("%", "busy as a percentage of span"),
    "idle": ("s", "span - busy: time the device ran nothing"),
    "idle_pct": ("%", "idle as a percentage of span"),
    "idle_gap_max": ("s", "the largest stretch of idle time between two activities"),
    "kernel_time": ("s", "union of kernel intervals, communication kernels included"),
    "compute_time": ("s", "union of kernels that are not communication (HTA's compute time)"),
    "compute_pct": ("%", "compute_time as a percentage of span"),
    "non_compute_pct": ("%", "busy time that is not compute (copies, memsets, exposed communication), % of span"),
    "kernels": ("count", "kernel dispatches"),
    "memcpy_time": ("s", "union of memory-copy intervals"),
    "memcpy_calls": ("count", "memory copies"),
    "memcpy_bytes": ("B", "bytes copied (where the tool records them)"),
    "memcpy_bw": ("B/s", "memcpy_bytes over the summed copy durations"),
    "memset_time": ("s", "union of memset intervals"),
    "comm_time": ("s", "union of communication (NCCL/RCCL) kernel intervals"),
    "comm_share_pct": ("%", "comm_time as a percentage of span"),
    "comm_overlap_pct": ("%", "communication time hidden under compute, % of comm_time"),
}
for _direction in ("H2D", "D2H", "D2D", "P2P", "H2H"):  # perfcheck.ingest.timeline.DIRECTIONS
    _low = _direction.lower()
    TIMELINE_METRICS.update({
        f"memcpy_{_low}_time": ("s", f"union of {_direction} copy intervals"),
        f"memcpy_{_low}_calls": ("count", f"{_direction} copies"),
        f"memcpy_{_low}_bytes": ("B", f"bytes copied {_direction}"),
        f"memcpy_{_low}_bw": ("B/s", f"{_direction} bytes over the summed {_direction} copy durations"),
    })
del _direction, _low
# Per training step (the host range "ProfilerStep#N" that torch.profiler writes for each
# step): the device's total over the profiled window divided by the rank's number of
# steps, so that a regression reads "idle +12 ms per step; H2D copies 2 -> 5 per step".
# Missing when the trace has no ProfilerStep ranges. (Totals over steps, not activities
# inside each host range: a kernel launched in a step often runs after its host range ends.)
TIMELINE_METRICS["steps"] = ("count", "host ProfilerStep ranges of the device's rank (the per-step divisor)")
for _name in ("idle", "busy", "compute_time", "comm_time", "memcpy_time", "memcpy_calls", "memcpy_bytes",
              *(f"memcpy_{d}_{q}" for d in ("h2d", "d2h", "d2d", "p2p", "h2h") for q in ("calls", "bytes"))):
    TIMELINE_METRICS[f"{_name}_per_step"] = (TIMELINE_METRICS[_name][0], f"{_name} per ProfilerStep (total / steps)")
del _name
PER_STEP_OF = tuple(m[: -len("_per_step")] for m in TIMELINE_METRICS if m.endswith("_per_step"))

# The spread over ranks of some device metrics, checked under "@ranks": <metric>_min,
# _median, _max (the metric's unit) and _imbalance (max / mean over the ranks).
RANK_SPREAD_OF = ("span", "busy", "idle", "gpu_busy_pct", "kernel_time", "memcpy_time", "comm_time", "comm_share_pct")
RANK_SPREAD_METRICS: dict[str, tuple[str, str]] = {
    **{f"{m}_{stat}": (TIMELINE_METRICS[m][0], f"{word} of {m} over the ranks")
       for m in RANK_SPREAD_OF for stat, word in (("min", "least"), ("median", "median"), ("max", "most"))},
    **{f"{m}_imbalance": ("", f"{m}_max / the mean of {m} over the ranks (1 is perfect balance)")
       for m in RANK_SPREAD_OF},
    "straggler": ("", "the rank with the longest span"),
}


def metric_unit(name: str) -> str:
    """Unit of a per-kernel quantity: the registry above, else the naming rules of
    DESIGN.md section 4 (``_pct`` percent, ``_bytes`` bytes, ``_bw`` bytes per
    second, ``flops*`` FLOP, a ``_rate`` suffix per second, ``ai_*`` FLOP per byte)."""
    if name in METRIC_UNITS:
        return METRIC_UNITS[name]
    if name in TIMELINE_METRICS:
        return TIMELINE_METRICS[name][0]
    if name in RANK_SPREAD_METRICS:
        return RANK_SPREAD_METRICS[name][0]
    if name.endswith("_pct"):
        return "%"
    base, rate = (name[: -len("_rate")], True) if name.endswith("_rate") else (name, False)
    if base.endswith("_bytes"):
        return "B/s" if rate else "B"
    if base.endswith("_bw"):
        return "B/s"
    if "flops" in base or base.startswith("flop"):
        return "FLOP/s" if rate else "FLOP"
    if base.startswith("ai_"):
        return "FLOP/B"
    if base == "instructions" or base.startswith("instructions_"):
        return "1/s" if rate else "count"
    return ""


# Units of the peak figures a Peaks record may carry.
PEAK_UNITS: dict[str, str] = {
    "hbm_bw": "B/s",
    "mem_bw": "B/s",  # host main memory (CPU STREAM); hbm_bw is GPU device memory only
    "l3_bw": "B/s",
    "l2_bw": "B/s",
    "l1_bw": "B/s",
    "lds_bw": "B/s",
    "flop_rate_fp64": "FLOP/s",
    "flop_rate_fp32": "FLOP/s",
    "flop_rate_fp16": "FLOP/s",
    "flop_rate_bf16": "FLOP/s",
    "iop_rate_int32": "OP/s",
    "iop_rate_int8": "OP/s",
    # AMD matrix-core (MFMA) ceilings, a roof of their own above the vector rates
    # (Omniperf/rocprof-compute roofline.csv MFMAF64Flops ... MFMAI8Ops).
    "mfma_rate_fp64": "FLOP/s",
    "mfma_rate_fp32": "FLOP/s",
    "mfma_rate_fp16": "FLOP/s",
    "mfma_rate_bf16": "FLOP/s",
    "mfma_rate_int8": "OP/s",
    # rocprof-compute 3.3 roofline.csv (MI300/MI350 builds): MFMA F8, F6 and F4, and
    # the MALL (Infinity Cache) bandwidth.
    "mfma_rate_fp8": "FLOP/s",
    "mfma_rate_f6": "FLOP/s",
    "mfma_rate_f4": "FLOP/s",
    "mfma_rate_f6f4": "FLOP/s",
    "mall_bw": "B/s",
}


def is_raw(name: str) -> bool:
    return name.startswith(RAW_PREFIX)


def raw(name: str) -> str:
    """Canonical column name for a tool's raw counter."""
    return RAW_PREFIX + name


@dataclass(frozen=True)
class Want:
    """Which canonical columns a caller needs. ``None`` means all, raw counters included.

    Readers may use it to skip columns (the expensive part of a 1,000-column
    Omniperf table is converting counters nobody asked for)."""

    columns: frozenset[str] | None = None
    # Raw counters wanted by prefix, e.g. "raw.TCC_EA_RDREQ[" for every channel
    # of a per-channel counter: formulas name counter families, not channels.
    raw_prefixes: tuple[str, ...] = ()
    # The caller summarises per kernel and takes ``ingest.formats.Grouped`` chunks:
    # a reader of millions of dispatches may then give each distinct (kernel, launch
    # configuration) once and per dispatch only what differs on every row, instead of
    # a frame with every column repeated per dispatch. Never set for callers that
    # keep or concatenate the frames (``read_profile``, timelines). Grouped chunks carry
    # the duration of each dispatch, not necessarily its timestamps.
    grouped: bool = False

    def __contains__(self, name: str) -> bool:
        if self.columns is None or name in self.columns:
            return True
        return bool(self.raw_prefixes) and is_raw(name) and name.startswith(self.raw_prefixes)

    @property
    def raw(self) -> bool:
        """True when raw counters are wanted at all."""
        return self.columns is None or bool(self.raw_prefixes) or any(is_raw(c) for c in self.columns)

    def __or__(self, other: "Want") -> "Want":
        if self.columns is None or other.columns is None:
            return ALL
        return Want(self.columns | other.columns, tuple(dict.fromkeys(self.raw_prefixes + other.raw_prefixes)),
                    grouped=self.grouped and other.grouped)


ALL = Want()


def conform(frame: "pd.DataFrame") -> "pd.DataFrame":  # noqa: F821 - pandas imported lazily
    """Cast known columns to their registry dtype and order them: identity, launch,
    timing, then raw counters in the tool's order. Unknown non-raw columns are a bug
    in the reader, so they raise."""
    import pandas as pd

    unknown = [c for c in frame.columns if c not in COLUMNS and not is_raw(c)]
    if unknown:
        raise AssertionError(f"reader produced non-canonical columns: {unknown}")
    out = {}
    for col in _COLUMNS:
        if col.name in frame.columns:
            series = frame[col.name]
            if col.dtype == "str":
                # Dictionary-encoded names (pandas categorical, as streamed traces give
                # them) stay so: 10M dispatches of a few hundred kernels.
                out[col.name] = series if isinstance(series.dtype, pd.CategoricalDtype) else series.astype("string")
            elif col.dtype == "Int64":
                out[col.name] = pd.array(series, dtype="Int64") if series.dtype != "Int64" else series
            else:
                out[col.name] = series.astype(col.dtype)
    for name in frame.columns:
        if is_raw(name):
            out[name] = frame[name]
    # copy=False: the input is a chunk being finished, dropped once conformed, so its
    # arrays can be shared; copying every column again cost a second per 10M dispatches.
    return pd.DataFrame(out, index=frame.index, copy=False)
