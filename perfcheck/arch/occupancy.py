"""Theoretical occupancy from launch resources, by the vendors' rules.

AMD follows LLVM AMDGPU (arch-specs.md §1.5), NVIDIA the CUDA occupancy calculator
``cuda_occupancy.h`` (arch-specs.md §2.4). Every constant comes from the ``ArchSpec``
(package data); this module holds only the rules.

``occupancy`` evaluates one launch step by step, written to be read against the
reference; ``occupancy_table`` evaluates a whole dispatch chunk with numpy. The two
are independent implementations of the same rules and are tested against each other.

Limiter labels (the resource that bounds the resident workgroups; on a tie the first
of the list below, so a hardware slot limit wins over a resource that merely reaches
it, since lowering that resource would not help):

* AMD: ``waves`` (wave slots per CU), ``workgroups`` (16 barrier slots per CU, for
  workgroups of more than one wave), ``vgpr``, ``sgpr``, ``lds``;
* NVIDIA: ``warps`` (warp slots per SM), ``blocks`` (block slots per SM), ``registers``,
  ``shared``, ``barriers`` (block barriers, cc 9.0+);
* both: ``block_size`` when the workgroup is larger than the arch allows.

A kernel that cannot launch (too many registers for the block, more LDS/shared memory
than a workgroup may have) gets 0 % with the resource that fails as limiter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcheck.arch import ArchSpec
from perfcheck.errors import UsageError
from perfcheck.schema import Want, raw

AMD_LIMITERS = ("block_size", "waves", "workgroups", "vgpr", "sgpr", "lds")
NVIDIA_LIMITERS = ("block_size", "warps", "blocks", "registers", "shared", "barriers")

# Nsight Compute launch attributes the calculator uses when a profile has them: the
# named barriers a block uses and the shared-memory carve-out the driver actually
# configured (it may pick a smaller one than the default preference: the B200 ncu CSV
# shows 132 KiB where the default is 228 KiB, which changes the shared-memory limit).
BARRIERS_COLUMN = raw("launch__barrier_count")
SHARED_CONFIG_COLUMN = raw("launch__shared_mem_config_size")

# Columns occupancy_table reads; a caller streaming a profile asks the reader for them.
WANT = Want(
    frozenset(
        {"workgroup_size", "vgpr", "agpr", "sgpr", "registers", "lds_per_workgroup",
         BARRIERS_COLUMN, SHARED_CONFIG_COLUMN}
    )
)

# Stands for "this resource sets no limit" in the vectorised code.
_UNLIMITED = np.iinfo(np.int64).max // 4


@dataclass(frozen=True)
class Occupancy:
    occupancy_pct: float  # 0-100; 0 when the kernel cannot launch
    limiter: str  # see the module docstring
    waves_per_cu: int | None  # AMD
    warps_per_sm: int | None  # NVIDIA
    workgroups_per_cu: int  # workgroups / blocks resident per CU / SM
    # Workgroups per CU/SM each resource alone allows. A resource that sets no limit
    # (no LDS, no barriers, 1-wave workgroups and barrier slots) is absent.
    limits: Mapping[str, int]

    def as_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "occupancy_pct": self.occupancy_pct,
            "limiter": self.limiter,
            "workgroups_per_cu": self.workgroups_per_cu,
            "limits": dict(self.limits),
        }
        if self.waves_per_cu is not None:
            doc["waves_per_cu"] = self.waves_per_cu
        if self.warps_per_sm is not None:
            doc["warps_per_sm"] = self.warps_per_sm
        return doc


def _align(value: int, granule: int) -> int:
    return -(-value // granule) * granule


def _choose(limits: Mapping[str, int], order: tuple[str, ...]) -> tuple[int, str]:
    resident = min(limits.values())
    return resident, next(name for name in order if limits.get(name) == resident)


def _check_count(name: str, value: int | None, minimum: int = 0) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum):
        raise UsageError(f"{name} must be an integer >= {minimum}, got {value!r}")


# ------------------------------------------------------------------ one launch


def _sgpr_waves(arch: ArchSpec, sgpr: int) -> int:
    """LLVM getOccupancyWithNumSGPRs, gfx8/9 branch (arch-specs §1.5 step 4)."""
    assert arch.sgpr_wave_thresholds is not None and arch.sgpr_wave_counts is not None
    for threshold, waves in zip(arch.sgpr_wave_thresholds, arch.sgpr_wave_counts):
        if sgpr <= threshold:
            return waves
    return arch.sgpr_wave_counts[-1]


def _amd(arch: ArchSpec, block: int, vgpr: int, agpr: int, sgpr: int | None, lds: int) -> Occupancy:
    simds, per_simd = arch.simds_per_cu, arch.max_waves_per_simd
    assert simds is not None and per_simd is not None and arch.max_waves_per_cu is not None
    if block > arch.max_workgroup_size:
        return Occupancy(0.0, "block_size", 0, None, 0, {"block_size": 0})
    # 1. waves per workgroup
    waves = -(-block // arch.wave_size)
    # 2. VGPRs per lane for occupancy: separate files (max) before gfx90a, one
    #    unified file from gfx90a (AGPRs start at the 4-aligned end of the VGPRs)
    if arch.unified_vgpr_agpr:
        total = _align(vgpr, 4) + agpr if agpr > 0 else vgpr
    else:
        total = max(vgpr, agpr)
    # 3. VGPR-limited waves per SIMD (LLVM getNumWavesPerEUWithNumVGPRs)
    if total < arch.vgpr_granule:
        vgpr_waves = per_simd
    else:
        vgpr_waves = min(max(arch.vgprs_per_simd_lane // _align(total, arch.vgpr_granule), 1), per_simd)
    # 6. workgroups per CU allowed by each resource (waves of a workgroup spread over the SIMDs)
    limits = {"waves": arch.max_waves_per_cu // waves, "vgpr": vgpr_waves * simds // waves}
    if sgpr is not None:  # 4./5. SGPR-limited waves per SIMD
        limits["sgpr"] = min(_sgpr_waves(arch, sgpr), per_simd) * simds // waves
    if waves > 1:
        limits["workgroups"] = arch.max_workgroups_per_cu
    if lds > 0:
        fits = lds <= arch.max_lds_per_workgroup
        limits["lds"] = arch.lds_per_cu // _align(lds, arch.lds_granule) if fits else 0
    # 7. resident workgroups and waves
    workgroups, limiter = _choose(limits, AMD_LIMITERS)
    resident = workgroups * waves
    return Occupancy(100.0 * resident / arch.max_waves_per_cu, limiter, resident, None, workgroups, limits)


def _carveout(arch: ArchSpec, at_least: int) -> int:
    """Smallest supported shared-memory carve-out of at least ``at_least`` bytes."""
    assert arch.shared_carveouts is not None
    return next((c for c in arch.shared_carveouts if c >= at_least), arch.shared_carveouts[-1])


def _nvidia(arch: ArchSpec, block: int, registers: int, shared: int, barriers: int, shared_config: int | None) -> Occupancy:
    if block > arch.max_threads_per_block:  # 1.
        return Occupancy(0.0, "block_size", None, 0, 0, {"block_size": 0})
    warps = -(-block // arch.wave_size)
    limits = {
        "warps": arch.max_warps_per_sm // warps,  # 2.
        "blocks": arch.max_blocks_per_sm,  # 4.
    }
    if registers > 0:  # 3. registers per warp, allocated per sub-partition
        per_warp = _align(registers * arch.wave_size, arch.register_granule)
        subparts = arch.register_subpartitions
        launches = (
            registers <= arch.max_registers_per_thread
            and per_warp * _align(warps, subparts) <= arch.max_registers_per_block
            and per_warp * warps <= arch.max_registers_per_block
        )
        per_subpart = (arch.registers_per_sm // subparts) // per_warp
        limits["registers"] = per_subpart * subparts // warps if launches else 0
    # 5. shared memory: the driver reserve is part of every block's allocation
    reserve = arch.shared_reserved_per_block
    needed = _align(shared + reserve, arch.shared_granule)
    if needed > 0:
        # A launch from a profile did happen, so a block above 48 KiB opted in:
        # the per-block limit is the opt-in one (plus the reserve from cc 8.0).
        if needed > arch.max_shared_per_block_optin + reserve:
            limits["shared"] = 0
        else:
            per_sm = shared_config if shared_config else _carveout(arch, arch.shared_per_sm)
            if per_sm < needed:
                per_sm = _carveout(arch, needed)
            limits["shared"] = per_sm // needed
    if barriers > 0 and arch.barriers_per_sm:  # 7. block barriers (cc 9.0+)
        limits["barriers"] = arch.barriers_per_sm // barriers
    blocks, limiter = _choose(limits, NVIDIA_LIMITERS)  # 6.
    resident = blocks * warps
    return Occupancy(100.0 * resident / arch.max_warps_per_sm, limiter, None, resident, blocks, limits)  # 8.


def occupancy(
    arch: ArchSpec,
    block: int,
    *,
    vgpr: int | None = None,
    agpr: int = 0,
    sgpr: int | None = None,
    lds: int = 0,
    registers: int | None = None,
    shared: int = 0,
    barriers: int = 0,
    shared_config: int | None = None,
) -> Occupancy:
    """Theoretical occupancy of one launch of ``block`` work-items per workgroup.

    AMD: ``vgpr`` (architected VGPRs per work-item, required), ``agpr``, ``sgpr`` (per
    wave, including VCC/flat-scratch/XNACK; None = not limiting), ``lds`` (bytes per
    workgroup, static + dynamic). NVIDIA: ``registers`` per thread (required), ``shared``
    (static + dynamic bytes per block; the driver reserve is added here), ``barriers``
    (named barriers per block, ncu ``launch__barrier_count``) and ``shared_config``
    (the carve-out the driver configured, ncu ``launch__shared_mem_config_size``;
    default: the calculator's default preference).
    """
    _check_count("block", block, minimum=1)
    for name, value in (("vgpr", vgpr), ("agpr", agpr), ("sgpr", sgpr), ("lds", lds), ("registers", registers),
                        ("shared", shared), ("barriers", barriers), ("shared_config", shared_config)):
        _check_count(name, value)
    if arch.vendor == "amd":
        wrong = [n for n, v, default in (("registers", registers, None), ("shared", shared, 0), ("barriers", barriers, 0),
                                          ("shared_config", shared_config, None)) if v != default]
        if wrong:
            raise UsageError(
                f"{', '.join(wrong)} describe NVIDIA launches; {arch.name} is an AMD arch: give vgpr, agpr, sgpr and lds"
            )
        if vgpr is None:
            raise UsageError(f"occupancy on {arch.name} needs the VGPRs per work-item (--vgpr)")
        if vgpr > arch.max_vgprs_per_wave or agpr > arch.max_agprs_per_wave:
            raise UsageError(
                f"{arch.name} addresses at most {arch.max_vgprs_per_wave} VGPRs and {arch.max_agprs_per_wave} AGPRs "
                f"per work-item, got vgpr={vgpr}, agpr={agpr}"
            )
        return _amd(arch, block, vgpr, agpr, sgpr, lds)
    wrong = [n for n, v, default in (("vgpr", vgpr, None), ("agpr", agpr, 0), ("sgpr", sgpr, None), ("lds", lds, 0))
             if v != default]
    if wrong:
        raise UsageError(
            f"{', '.join(wrong)} describe AMD launches; {arch.name} is an NVIDIA arch: give registers and shared"
        )
    if registers is None:
        raise UsageError(f"occupancy on {arch.name} needs the registers per thread (--registers)")
    return _nvidia(arch, block, registers, shared, barriers, shared_config)


# ------------------------------------------------------------------ a dispatch table


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """A column as float64 with NaN for missing values (all NaN when absent)."""
    if name not in frame.columns:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def _ints(values: np.ndarray, known: np.ndarray, fill: int = 0) -> np.ndarray:
    return np.where(known, values, fill).astype(np.int64)


def _valign(values: np.ndarray, granule: int) -> np.ndarray:
    return -(-values // granule) * granule


def _resolve(limits: np.ndarray, labels: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the smallest limit and the index (into ``labels``) of the first that reaches it."""
    resident = limits.min(axis=1)
    first = np.argmax(limits == resident[:, None], axis=1)
    return resident, first


def _frame(index: pd.Index, known: np.ndarray, pct: np.ndarray, labels: tuple[str, ...], which: np.ndarray,
           resident_name: str, resident: np.ndarray, workgroups: np.ndarray) -> pd.DataFrame:
    limiter = np.asarray(labels, dtype=object)[which]
    limiter[~known] = None
    return pd.DataFrame(
        {
            "occupancy_pct": np.where(known, pct, np.nan),
            "occupancy_limiter": pd.array(limiter, dtype="string"),
            resident_name: pd.arrays.IntegerArray(resident.astype(np.int64), ~known),
            "workgroups_per_cu": pd.arrays.IntegerArray(workgroups.astype(np.int64), ~known),
        },
        index=index,
    )


def _amd_table(arch: ArchSpec, frame: pd.DataFrame) -> pd.DataFrame:
    assert arch.max_waves_per_cu is not None and arch.simds_per_cu is not None
    block_f, vgpr_f, lds_f = _column(frame, "workgroup_size"), _column(frame, "vgpr"), _column(frame, "lds_per_workgroup")
    sgpr_f = _column(frame, "sgpr")
    known = np.isfinite(block_f) & np.isfinite(vgpr_f) & np.isfinite(lds_f) & (block_f >= 1)
    block = _ints(block_f, known, 1)
    vgpr = _ints(vgpr_f, known)
    agpr = _ints(np.nan_to_num(_column(frame, "agpr"), nan=0.0), known)
    lds = _ints(lds_f, known)
    has_sgpr = np.isfinite(sgpr_f)
    sgpr = _ints(sgpr_f, has_sgpr)
    per_simd, simds = arch.max_waves_per_simd, arch.simds_per_cu

    waves = -(-block // arch.wave_size)
    if arch.unified_vgpr_agpr:
        total = np.where(agpr > 0, _valign(vgpr, 4) + agpr, vgpr)
    else:
        total = np.maximum(vgpr, agpr)
    granules = np.maximum(_valign(total, arch.vgpr_granule), 1)
    vgpr_waves = np.where(total < arch.vgpr_granule, per_simd,
                          np.clip(arch.vgprs_per_simd_lane // granules, 1, per_simd))
    counts = np.asarray(arch.sgpr_wave_counts)
    sgpr_waves = np.minimum(counts[np.searchsorted(np.asarray(arch.sgpr_wave_thresholds), sgpr, side="left")], per_simd)
    lds_fits = lds <= arch.max_lds_per_workgroup
    lds_limit = np.where(lds_fits, arch.lds_per_cu // np.maximum(_valign(lds, arch.lds_granule), 1), 0)
    limits = np.stack(
        [
            np.zeros_like(block) + _UNLIMITED,  # block_size: handled below
            arch.max_waves_per_cu // waves,
            np.where(waves > 1, arch.max_workgroups_per_cu, _UNLIMITED),
            vgpr_waves * simds // waves,
            np.where(has_sgpr, sgpr_waves * simds // waves, _UNLIMITED),
            np.where(lds > 0, lds_limit, _UNLIMITED),
        ],
        axis=1,
    )
    too_big = block > arch.max_workgroup_size
    limits[too_big, 0] = 0
    workgroups, which = _resolve(limits, AMD_LIMITERS)
    resident = workgroups * waves
    pct = 100.0 * resident / arch.max_waves_per_cu
    return _frame(frame.index, known, pct, AMD_LIMITERS, which, "waves_per_cu", resident, workgroups)


def _nvidia_table(arch: ArchSpec, frame: pd.DataFrame) -> pd.DataFrame:
    block_f, regs_f, shared_f = _column(frame, "workgroup_size"), _column(frame, "registers"), _column(frame, "lds_per_workgroup")
    known = np.isfinite(block_f) & np.isfinite(regs_f) & np.isfinite(shared_f) & (block_f >= 1)
    block = _ints(block_f, known, 1)
    registers = _ints(regs_f, known)
    shared = _ints(shared_f, known)
    barriers = _ints(np.nan_to_num(_column(frame, BARRIERS_COLUMN), nan=0.0), known)
    config_f = _column(frame, SHARED_CONFIG_COLUMN)
    has_config = np.isfinite(config_f) & (config_f > 0)
    config = _ints(config_f, has_config)

    warps = -(-block // arch.wave_size)
    subparts = arch.register_subpartitions
    per_warp = _valign(registers * arch.wave_size, arch.register_granule)
    reg_launches = (
        (registers <= arch.max_registers_per_thread)
        & (per_warp * _valign(warps, subparts) <= arch.max_registers_per_block)
        & (per_warp * warps <= arch.max_registers_per_block)
    )
    reg_limit = (arch.registers_per_sm // subparts) // np.maximum(per_warp, 1) * subparts // warps
    reg_limit = np.where(registers > 0, np.where(reg_launches, reg_limit, 0), _UNLIMITED)

    carveouts = np.asarray(arch.shared_carveouts, dtype=np.int64)
    last = len(carveouts) - 1
    reserve = arch.shared_reserved_per_block
    needed = _valign(shared + reserve, arch.shared_granule)
    default_sm = carveouts[min(int(np.searchsorted(carveouts, arch.shared_per_sm, side="left")), last)]
    per_sm = np.where(has_config, config, default_sm)
    per_sm = np.where(per_sm < needed, carveouts[np.minimum(np.searchsorted(carveouts, needed, side="left"), last)], per_sm)
    shared_limit = np.where(needed > arch.max_shared_per_block_optin + reserve, 0, per_sm // np.maximum(needed, 1))
    shared_limit = np.where(needed > 0, shared_limit, _UNLIMITED)

    if arch.barriers_per_sm:
        barrier_limit = np.where(barriers > 0, arch.barriers_per_sm // np.maximum(barriers, 1), _UNLIMITED)
    else:
        barrier_limit = np.full(len(block), _UNLIMITED)
    limits = np.stack(
        [
            np.where(block > arch.max_threads_per_block, 0, _UNLIMITED),
            arch.max_warps_per_sm // warps,
            np.full(len(block), arch.max_blocks_per_sm),
            reg_limit,
            shared_limit,
            barrier_limit,
        ],
        axis=1,
    ).astype(np.int64)
    blocks, which = _resolve(limits, NVIDIA_LIMITERS)
    resident = blocks * warps
    pct = 100.0 * resident / arch.max_warps_per_sm
    return _frame(frame.index, known, pct, NVIDIA_LIMITERS, which, "warps_per_sm", resident, blocks)


def occupancy_table(arch: ArchSpec, dispatches: pd.DataFrame) -> pd.DataFrame:
    """Theoretical occupancy of every dispatch, vectorised; same index as ``dispatches``.

    Columns: ``occupancy_pct`` (float, NaN where a needed resource is missing),
    ``occupancy_limiter`` (string, NA there), ``waves_per_cu`` (AMD) or ``warps_per_sm``
    (NVIDIA) and ``workgroups_per_cu`` (Int64). Needed: ``workgroup_size``, ``vgpr`` and
    ``lds_per_workgroup`` (AMD) or ``registers`` and ``lds_per_workgroup`` (NVIDIA,
    static + dynamic shared memory). ``agpr`` missing counts as 0 and ``sgpr`` missing
    as not limiting, as in ``occupancy``; on NVIDIA the ncu columns named in ``WANT``
    are used when present.
    """
    if arch.vendor == "amd":
        return _amd_table(arch, dispatches)
    return _nvidia_table(arch, dispatches)
