"""Ceilings and roofline metrics: per-kernel sums turned into rates, percentages of
the machine's ceilings and a position under its roofline.

Roofline (Williams et al. 2009; Hager's formulation in seed 002): a kernel doing N
FLOPs while moving V bytes has intensity I = N / V and can at best reach
``attainable = min(P_peak, I x b)``: the slowest bottleneck wins. With several
memory levels every level is a sloped roof of its own (hierarchical roofline,
Yang, Kurth & Williams 2020), so ``attainable`` is the lowest of the compute roof
and every level's ``I_level x b_level`` that is known, and the output always names
the roof that bounds it (``roofline_ceiling``) and whether it is a bandwidth
(``bound = "memory"``) or the compute peak (``bound = "compute"``). At the ridge
point exactly, the kernel counts as compute-bound.

Instruction roofline (Ding & Williams 2019; Leinhauser et al. 2022, seed 000):
``instructions`` are wavefront/warp-level instructions as ``metrics.counters``
derives them (see there for the counters). A count scaled to threads, as seed 000's
Tables 1-2 print it, is divided by the threads per wavefront/warp first (the paper's
eq. 4: / 64 on AMD; Ding & Williams: thread instructions / 32 on NVIDIA).
``instruction_rate`` is in instructions per second (base unit); ``gips`` is the same
divided by 10**9, the unit the papers plot, and ``peak_gips`` the device's
``CUs x schedulers x IPC x clock`` in the same unit. The ceiling itself, named
``gips`` like the metric, holds instructions per second like every other ceiling.

Ceilings come in two kinds, and every percentage can say which it used:
*empirical* (measured: BabelStream, mixbench, ERT, roofline.csv, a machine file)
and *theoretical* (the arch database's datasheet figures for the device). The
empirical figure wins where both exist; the theoretical one stays available on
``Ceiling.theoretical``.

Clocks (docs/clocks.md). A datasheet figure holds at the boost clock; Nsight
Compute profiles at the base clock by default, so a kernel table that records the
clock each kernel ran at (``sm_clock``, ``mem_clock`` from ``metrics.counters``)
gets theoretical roofs scaled to it: ``peak x measured / datasheet clock``, per
kernel. Empirical figures are never scaled (they were measured at some clock, which
a machine file may record; ``analysis`` warns when it differs from the profile's).
"""

from __future__ import annotations

import math

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from perfcheck.schema import PEAK_UNITS
from perfcheck.units import format_value

if TYPE_CHECKING:
    from perfcheck.arch import Target
    from perfcheck.model import Peaks

EMPIRICAL = "empirical"
THEORETICAL = "theoretical"

# The instruction-roofline ceiling. Its value is in base units like every other
# ceiling (instructions per second); ``peak_gips`` divides by 10**9.
GIPS = "gips"

# Memory levels: (quantity of bytes per dispatch, bandwidth metric = its ceiling's
# name, arithmetic-intensity metric). Innermost last. ``mem`` is a CPU's main memory
# (perf.measure on device="cpu"): the same place in the hierarchy as a GPU's HBM.
LEVELS: tuple[tuple[str, str, str], ...] = (
    ("hbm_bytes", "hbm_bw", "ai_hbm"),
    ("mem_bytes", "mem_bw", "ai_mem"),
    ("l2_bytes", "l2_bw", "ai_l2"),
    ("l1_bytes", "l1_bw", "ai_l1"),
    ("lds_bytes", "lds_bw", "ai_lds"),
)

# FLOPs of one precision class -> the flat roof that class runs against:
# vector (VALU / CUDA-core) flops_fp64 -> flop_rate_fp64; AMD matrix cores
# mfma_flops_fp16 -> mfma_rate_fp16; NVIDIA tensor cores tensor_flops_fp16 -> tensor_rate_fp16.
_VECTOR_CLASS = re.compile(r"^flops_(fp64|fp32|fp16|bf16|tf32|fp8)$")
# The precision is one token (fp16, bf16, f6f4): the kernel table also holds the
# quantities' rates (mfma_flops_bf16_rate), which are no precision class of their own.
_MATRIX_CLASS = re.compile(r"^(mfma|tensor)_flops_([a-z0-9]+)$")
# ncu's tensor-pipe counter has no precision; metrics.counters counts 512 FLOPs per
# tensor instruction, the FP16 HMMA convention of Nsight Compute and NERSC (V100),
# so those FLOPs are FP16-tensor-equivalent and run against the FP16 tensor roof.
_FIXED_CLASSES = {"tensor_flops": "tensor_rate_fp16"}


@dataclass(frozen=True)
class Ceiling:
    """One roof: a peak bandwidth, FLOP/s rate or instruction rate, in base units."""

    name: str  # "hbm_bw", "l2_bw", "flop_rate_fp64", "mfma_rate_fp16", "gips", ...
    value: float  # base units: B/s, FLOP/s, OP/s, inst/s
    unit: str
    kind: str  # "empirical" | "theoretical"
    source: str  # where the figure comes from, for reports
    # When ``kind`` is empirical: the datasheet figure for the same ceiling, if the
    # device is known (reports can show "44.9 % of measured, 37.5 % of datasheet").
    theoretical: "Ceiling | None" = None
    # The clock (Hz) the figure holds at, when known: the datasheet clock of a
    # theoretical figure, the profiled clock of one scaled to it (``at_clock``), the
    # clock a machine file says its peaks were measured at.
    clock_hz: float | None = None
    # A theoretical figure scaled to the profiled clock keeps the datasheet one here.
    datasheet: "Ceiling | None" = None

    @property
    def domain(self) -> str | None:
        """Which clock the figure follows: "sm_clock", "mem_clock" or None."""
        return clock_domain(self.name)

    def at_clock(self, clock_hz: float | None) -> "Ceiling":
        """This theoretical figure at the clock a kernel ran at: peak x measured /
        datasheet clock (FLOPs per clock and bytes per clock are fixed by the
        hardware; the clock is what boost, power capping and ncu's clock control
        change). Empirical figures stay as measured; a figure without a datasheet
        clock, or an unknown clock, stays as it is."""
        base = self.datasheet or self
        if (self.kind != THEORETICAL or base.clock_hz is None or clock_hz is None
                or not math.isfinite(clock_hz) or clock_hz <= 0):
            return self
        if clock_hz == base.clock_hz:
            return base
        return replace(base, value=base.value * clock_hz / base.clock_hz, clock_hz=float(clock_hz), datasheet=base)

    def clock_text(self) -> str:
        """Which clock the figure is at, for messages: "at the profiled 765 MHz;
        datasheet 19.5 TFLOP/s at 1410 MHz", "at the datasheet 1410 MHz", "measured
        at 1410 MHz", or "" (clock unknown)."""
        if self.datasheet is not None and self.clock_hz is not None:
            ds = self.datasheet
            return (f"at the profiled {format_value(self.clock_hz, 'Hz')}; datasheet "
                    f"{format_value(ds.value, ds.unit)} at {format_value(ds.clock_hz, 'Hz')}")
        if self.clock_hz is not None:
            what = "measured at" if self.kind == EMPIRICAL else "at the datasheet"
            return f"{what} {format_value(self.clock_hz, 'Hz')}"
        return ""

    def as_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "kind": self.kind,
            "source": self.source,
        }
        if self.theoretical is not None:
            doc["theoretical"] = self.theoretical.as_dict()
        if self.clock_hz is not None:
            doc["clock_hz"] = self.clock_hz
        if self.datasheet is not None:
            doc["datasheet"] = self.datasheet.as_dict()
        return doc


def clock_domain(name: str) -> str | None:
    """The clock a ceiling follows. Compute roofs and the on-chip levels (L1, LDS,
    L2 run in the SM / shader-engine clock domain) follow the SM clock; device
    memory follows the memory clock. A CPU's main memory and AMD's MALL (Infinity
    Fabric clock) follow neither clock a GPU profile records."""
    if name == "hbm_bw":
        return "mem_clock"
    if name in ("mem_bw", "mall_bw", "l3_bw"):
        return None
    return "sm_clock"


def ceiling_unit(name: str) -> str:
    """Unit of a ceiling by name (the peak registry, else the naming convention)."""
    if name in PEAK_UNITS:
        return PEAK_UNITS[name]
    if name == GIPS:
        return "inst/s"
    if name.endswith("_bw"):
        return "B/s"
    if re.search(r"_int\d+$", name):
        return "OP/s"
    return "FLOP/s"


# --- ceilings ----------------------------------------------------------------------


def _empirical_source(name: str, value: float, peaks: "Peaks") -> str:
    """"mixbench-log.txt (hbm_bw: single precision bandwidth)": the file(s) and, when
    one reported figure is exactly the peak, which one it was."""
    unit = ceiling_unit(name)
    matches = [d for d in peaks.details if d.value == value and d.unit == unit]
    near = matches
    if not near:  # a peak derived from several figures: the file whose figure is closest
        same = [d for d in peaks.details if d.unit == unit and d.value > 0]
        near = [min(same, key=lambda d: abs(math.log(d.value / value)))] if same else []
    files = sorted({Path(d.source).name for d in near} or {Path(s.path).name for s in peaks.sources})
    where = ", ".join(files) or "peaks"
    what = matches[0].name if len(matches) == 1 else "measured"
    return f"{where} ({name}: {what})"


def _theoretical_source(name: str, device: object) -> str:
    """"arch database: mi100 (arch-specs.md §1.2 V [S1],[S5] ...)": the device and the
    citation the database keeps for that figure (``sources[name]``, or nested under
    ``sources["peaks"]``; HBM bandwidth may be cited as ``mem_bw``)."""
    sources: Mapping[str, object] = getattr(device, "sources", None) or {}
    nested = sources.get("peaks")
    cited: object = None
    if isinstance(nested, Mapping):
        cited = nested.get(name)
    if cited is None:
        cited = sources.get(name)
    if cited is None and name == "hbm_bw":
        cited = sources.get("mem_bw")
    if cited is None and name == GIPS:
        cited = "compute_units x schedulers x ipc x clock_hz, arch-specs.md §3"
    prefix = f"arch database: {getattr(device, 'name', '?')}"
    return f"{prefix} ({cited})" if isinstance(cited, str) and cited else prefix


def _theoretical(target: "Target | None") -> dict[str, Ceiling]:
    device = getattr(target, "device", None) if target is not None else None
    if device is None:
        return {}
    figures: dict[str, float] = {}
    for name, value in (getattr(device, "peaks", None) or {}).items():
        if value is not None:
            figures[name] = float(value)
    mem_bw = getattr(device, "mem_bw", None)
    if mem_bw and "hbm_bw" not in figures:
        figures["hbm_bw"] = float(mem_bw)
    peak_gips = getattr(device, "peak_gips", None)
    if peak_gips:
        figures[GIPS] = float(peak_gips) * 1e9
    return {
        name: Ceiling(name, value, ceiling_unit(name), THEORETICAL, _theoretical_source(name, device),
                      clock_hz=_datasheet_clock(name, device))
        for name, value in figures.items()
        if np.isfinite(value) and value > 0
    }


def _datasheet_clock(name: str, device: object) -> float | None:
    """The clock a datasheet figure was computed at: the boost clock for compute and
    on-chip roofs (the tensor clock for the tensor figures that imply another, H100
    §5.7), the memory clock for device memory when the database gives it."""
    domain = clock_domain(name)
    if domain == "mem_clock":
        clock = getattr(device, "mem_clock_hz", None)
    elif domain == "sm_clock":
        tensor = getattr(device, "tensor_clock_hz", None)
        clock = tensor if tensor and name.startswith("tensor_rate_") and name != "tensor_rate_fp64" else None
        clock = clock or getattr(device, "clock_hz", None)
    else:
        clock = None
    return float(clock) if clock else None


def ceilings(target: "Target | None", peaks: "Peaks | None") -> dict[str, Ceiling]:
    """Every ceiling known for this run, by name: the empirical figure (from
    ``peaks``) where one was measured, else the theoretical one (from
    ``target.device``). An empirical ceiling carries the theoretical one, when the
    device is known, on ``.theoretical``. An arch without a device (or no target)
    gives no theoretical ceilings: figures like bandwidth belong to a product."""
    theoretical = _theoretical(target)
    out: dict[str, Ceiling] = dict(theoretical)
    if peaks is not None:
        for name, value in peaks.values.items():
            value = float(value)
            if not (np.isfinite(value) and value > 0):
                continue
            domain = clock_domain(name)
            out[name] = Ceiling(
                name, value, ceiling_unit(name), EMPIRICAL, _empirical_source(name, value, peaks),
                theoretical=theoretical.get(name),
                clock_hz=peaks.clocks.get(domain) if domain else None,
            )
    return dict(sorted(out.items()))


# Profile and peaks clocks closer than this are the same clock (ncu's base-clock
# rate reads 764,999,990 Hz on one launch and 764,999,998 Hz on the next).
CLOCK_TOLERANCE = 0.02


def profile_clocks(table: pd.DataFrame) -> dict[str, float]:
    """The clocks a kernel table records, one figure per domain: the median over the
    kernels that have one (every kernel of an ncu run at its base clock shares it)."""
    out = {}
    for domain in ("sm_clock", "mem_clock"):
        clocks = _column(table, domain)
        if clocks is not None:
            known = clocks[np.isfinite(clocks) & (clocks > 0)]
            if len(known):
                out[domain] = float(known.median())
    return out


def at_profile_clocks(ceilings: Mapping[str, Ceiling], clocks: Mapping[str, float]) -> dict[str, Ceiling]:
    """Every theoretical ceiling at the profile's clock (for reports that draw one
    roof for all kernels: the roofline, ``inspect``'s header, JUnit properties)."""
    return {name: c.at_clock(clocks.get(c.domain)) if c.domain else c for name, c in ceilings.items()}


def clocks_note(ceilings: Mapping[str, Ceiling]) -> str:
    """One phrase for a report that draws all roofs once: "theoretical roofs at the
    profiled SM clock 765 MHz (datasheet 1410 MHz)"; "" when nothing was scaled."""
    seen: dict[tuple[str, float], set[float]] = {}
    for c in ceilings.values():
        if c.datasheet is not None and c.clock_hz is not None and c.datasheet.clock_hz is not None and c.domain:
            seen.setdefault((c.domain, c.clock_hz), set()).add(c.datasheet.clock_hz)
    parts = []
    for (domain, clock), datasheet in sorted(seen.items()):
        label = "SM" if domain == "sm_clock" else "memory"
        was = ", ".join(format_value(d, "Hz") for d in sorted(datasheet))
        parts.append(f"{label} clock {format_value(clock, 'Hz')} (datasheet {was})")
    return "theoretical roofs at the profiled " + " and ".join(parts) if parts else ""


def clock_mismatch(ceiling: Ceiling, clock_hz: float | None) -> str | None:
    """Why an empirical ceiling may not fit a kernel: measured at another clock than
    the kernel ran at (the figure is kept as measured). None when they agree or
    either clock is unknown."""
    if ceiling.kind != EMPIRICAL or ceiling.clock_hz is None or clock_hz is None or not math.isfinite(clock_hz):
        return None
    if abs(clock_hz - ceiling.clock_hz) <= CLOCK_TOLERANCE * ceiling.clock_hz:
        return None
    return (f"{ceiling.name} was measured at {format_value(ceiling.clock_hz, 'Hz')} but the profile ran at "
            f"{format_value(clock_hz, 'Hz')}; the measured figure is used unscaled")


def clock_mismatches(ceilings: Mapping[str, Ceiling], clocks: Mapping[str, float]) -> list[tuple[str, str]]:
    """``(file, sentence)`` per peaks file and clock pair whose measured ceilings were
    taken at another clock than the profile ran at: one warning names them all."""
    groups: dict[tuple[str, float, float], list[str]] = {}
    for c in ceilings.values():
        profiled = clocks.get(c.domain or "")
        if clock_mismatch(c, profiled) is not None:
            groups.setdefault((c.source.split(" (", 1)[0], c.clock_hz, profiled), []).append(c.name)  # type: ignore[arg-type]
    out = []
    for (where, measured, profiled), names in groups.items():
        were = "was" if len(names) == 1 else "were"
        out.append((where, f"{', '.join(names)} {were} measured at {format_value(measured, 'Hz')} but the profile ran "
                           f"at {format_value(profiled, 'Hz')}; the measured figure{'s are' if len(names) > 1 else ' is'} "
                           "used unscaled"))
    return out


# --- kernel metrics ----------------------------------------------------------------


def _column(table: pd.DataFrame, name: str) -> pd.Series | None:
    if name not in table.columns:
        return None
    return pd.to_numeric(table[name], errors="coerce").astype("float64")


def _divide(numerator: pd.Series, denominator: pd.Series) -> pd.Series:
    """numerator / denominator, NaN where the denominator is not positive (a zero
    duration or zero bytes gives no rate or intensity rather than inf)."""
    return (numerator / denominator).where(denominator > 0)


def _rate(table: pd.DataFrame, quantity: str) -> pd.Series | None:
    """Per-second rate of an extensive quantity.

    The summary's ``q_rate`` (sum of q / sum of duration over the dispatches that
    have both) when present. Otherwise mean q over mean duration, which is the same
    ratio when both means cover the same dispatches (seed 001: "dividing TOTAL_RW
    by the average kernel runtime"); on a dispatch table (no ``calls`` column) or for
    a kernel that ran once, the dispatch's own duration. Never q over the *median*
    duration: that would mix two different statistics."""
    rate = _column(table, f"{quantity}_rate")
    if rate is not None:
        return rate
    amount = _column(table, quantity)
    if amount is None:
        return None
    duration = _column(table, "duration_mean")
    if duration is None:
        duration = _column(table, "duration")
        calls = _column(table, "calls")
        if duration is None:
            return pd.Series(np.nan, index=table.index)
        if calls is not None:
            duration = duration.where(calls == 1)
    return _divide(amount, duration)


def _at_clocks(ceiling: Ceiling, table: pd.DataFrame) -> pd.Series:
    """Per kernel: the ceiling at the clock that kernel ran at (``Ceiling.at_clock``,
    vectorised); the figure as it is where the kernel's clock is unknown."""
    values = pd.Series(ceiling.value, index=table.index, dtype="float64")
    base = ceiling.datasheet or ceiling
    domain = ceiling.domain
    clocks = _column(table, domain) if domain else None
    if ceiling.kind != THEORETICAL or base.clock_hz is None or clocks is None:
        return values
    known = np.isfinite(clocks) & (clocks > 0)
    return (base.value * clocks / base.clock_hz).where(known, ceiling.value)


def kernel_ceiling(ceiling: Ceiling, row: Mapping[str, object]) -> Ceiling:
    """The ceiling for one kernel of the table: at the clock its row records."""
    domain = ceiling.domain
    value = row.get(domain) if domain else None
    try:
        clock = float(value) if value is not None else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        clock = None
    return ceiling.at_clock(clock if clock is not None and math.isfinite(clock) else None)


def _percent(value: pd.Series, ceiling: Ceiling | None, table: pd.DataFrame) -> pd.Series:
    if ceiling is None:
        return pd.Series(np.nan, index=value.index)
    return value / _at_clocks(ceiling, table) * 100.0


def _precision_classes(table: pd.DataFrame) -> dict[str, str]:
    """FLOP columns by precision class present in the table -> their ceiling's name."""
    classes = {}
    for name in sorted(table.columns):
        vector = _VECTOR_CLASS.match(name)
        matrix = _MATRIX_CLASS.match(name)
        if name in _FIXED_CLASSES:
            classes[name] = _FIXED_CLASSES[name]
        elif vector:
            classes[name] = f"flop_rate_{vector.group(1)}"
        elif matrix:
            classes[name] = f"{matrix.group(1)}_rate_{matrix.group(2)}"
    return classes


def _compute_roof(table: pd.DataFrame, ceilings: Mapping[str, Ceiling]) -> tuple[pd.Series, pd.Series]:
    """Per kernel: the flat roof of the precision class that does most of its FLOPs
    (a DGEMM on matrix cores runs against mfma_rate_fp64, not the vector FP64 rate)
    and that roof's value. A class whose ceiling is unknown leaves the value NaN but
    still names the ceiling, so a report can say which peak is missing."""
    classes = _precision_classes(table)
    names = pd.Series(pd.NA, index=table.index, dtype="string")
    values = pd.Series(np.nan, index=table.index)
    if not classes:
        return names, values
    flops = np.column_stack([_column(table, c).to_numpy() for c in classes])  # type: ignore[union-attr]
    known = ~np.isnan(flops) & (flops > 0)
    best = np.argmax(np.where(known, flops, -np.inf), axis=1)
    has_class = known.any(axis=1)
    roof_names = np.array(list(classes.values()), dtype=object)
    # Each roof at the clock each kernel ran at: one column per roof.
    roof_values = np.column_stack([
        _at_clocks(ceilings[r], table).to_numpy() if r in ceilings else np.full(len(table), np.nan) for r in roof_names
    ])
    names[:] = np.where(has_class, roof_names[best], None)
    values[:] = np.where(has_class, roof_values[np.arange(len(table)), best], np.nan)
    return names, values


def kernel_metrics(kernels: pd.DataFrame, ceilings: Mapping[str, Ceiling]) -> pd.DataFrame:
    """``kernels`` with the derived metrics appended (same index, same rows).

    Input: one row per kernel (or per dispatch) with ``calls``, ``duration`` and,
    for each quantity q of ``metrics.counters``, ``q`` (mean per dispatch) and
    ``q_rate`` (duration-weighted rate); see ``_rate`` for the fallbacks.

    Output columns (DESIGN.md section 4), each added only when the quantity it is
    derived from is a column, and NaN for a kernel whose inputs (or whose ceiling)
    are missing -- never invented:

    * per memory level: ``hbm_bw`` (``mem_bw`` for a CPU's main memory) ``l2_bw``
      ``l1_bw`` ``lds_bw`` (B/s) and ``*_bw_pct`` (% of that level's ceiling);
    * ``flop_rate`` (FLOP/s), ``ai_hbm`` (``ai_mem``) ``ai_l2`` ``ai_l1`` ``ai_lds`` (FLOP/B);
    * ``compute_ceiling`` (the flat roof of the dominant precision class),
      ``attainable`` (FLOP/s), ``roofline_pct``, ``roofline_ceiling`` (the roof
      that bounds ``attainable``) and ``bound`` ("memory" | "compute");
    * ``instruction_rate`` (inst/s), ``gips`` (= instruction_rate / 1e9),
      ``instruction_intensity_hbm`` (inst/B), ``peak_gips``, ``gips_pct``.
    """
    table = kernels.copy()
    index = table.index
    out: dict[str, pd.Series] = {}

    flops = _column(table, "flops")
    flop_rate = _rate(table, "flops")
    for quantity, bw, ai in LEVELS:
        rate = _rate(table, quantity)
        if rate is None:
            continue
        out[bw] = rate
        out[f"{bw}_pct"] = _percent(rate, ceilings.get(bw), table)
        amount = _column(table, quantity)
        if flops is not None and amount is not None:
            out[ai] = _divide(flops, amount)

    if flop_rate is not None:
        out["flop_rate"] = flop_rate
        compute_name, compute_value = _compute_roof(table, ceilings)
        # Start from the flat roof, then lower it by every sloped roof that is known.
        # The main-memory roof is required (HBM on a GPU, else a CPU's DRAM): without
        # it the bound would ignore the usual limit.
        attainable = compute_value.copy()
        binding = compute_name.copy()
        main_ai = None
        for _quantity, bw, ai in LEVELS[:2]:
            if bw in ceilings and ai in out:
                main_ai = out[ai] if main_ai is None else main_ai.fillna(out[ai])
        if main_ai is None:
            attainable[:] = np.nan
        else:
            attainable = attainable.where(main_ai.notna())
        for _quantity, bw, ai in LEVELS:
            ceiling = ceilings.get(bw)
            if ceiling is None or ai not in out:
                continue
            roof = out[ai] * _at_clocks(ceiling, table)
            lower = (roof < attainable).fillna(False)
            attainable = attainable.where(~lower, roof)
            binding = binding.mask(lower, bw)
        valid = attainable.notna()
        binding = binding.where(valid, pd.NA)
        out["compute_ceiling"] = compute_name
        out["attainable"] = attainable
        out["roofline_pct"] = _divide(flop_rate, attainable) * 100.0
        out["roofline_ceiling"] = binding
        out["bound"] = pd.Series(
            np.where(binding.str.endswith("_bw").fillna(False), "memory", "compute"), index=index, dtype="string"
        ).where(valid, pd.NA)

    instruction_rate = _rate(table, "instructions")
    if instruction_rate is not None:
        gips = ceilings.get(GIPS)
        out["instruction_rate"] = instruction_rate
        out["gips"] = instruction_rate / 1e9
        instructions, hbm_bytes = _column(table, "instructions"), _column(table, "hbm_bytes")
        if instructions is not None and hbm_bytes is not None:
            out["instruction_intensity_hbm"] = _divide(instructions, hbm_bytes)
        out["peak_gips"] = (_at_clocks(gips, table) / 1e9 if gips is not None
                            else pd.Series(np.nan, index=index))
        out["gips_pct"] = _percent(instruction_rate, gips, table)

    for name, series in out.items():
        table[name] = series
    return table
