"""Theoretical occupancy: the worked examples of arch-specs.md §1.7 / §2.5 through the API
and the CLI, seed 001's MI100 figures against the rules, Nsight Compute's own limits on a
real B200 profile, and the vectorised table against the one-launch calculator."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import profile
from perfcheck.arch import known, lookup
from perfcheck.arch.occupancy import (
    AMD_LIMITERS,
    BARRIERS_COLUMN,
    NVIDIA_LIMITERS,
    SHARED_CONFIG_COLUMN,
    WANT,
    occupancy,
    occupancy_table,
)
from perfcheck.errors import UsageError
from perfcheck.ingest import read_profile

B200_CSV = "ncu/meinie0826-roofline-analysis/torch_sdpa_flash__mha_bf16_b16_ctx4k_p64.ncu.csv"

# (id, arch or device, block, resources, occupancy %, waves per CU, workgroups per CU, limiter)
AMD_EXAMPLES = [
    # A4: 170 VGPRs -> 176 -> 2 waves/SIMD (176 x 3 > 512) [S6]
    ("A4", "gfx942", 256, {"vgpr": 170}, 25.0, 8, 2, "vgpr"),
    ("A4-1wave", "gfx942", 64, {"vgpr": 170}, 25.0, 8, 8, "vgpr"),
    # A5: <= 168 VGPRs -> 3 waves/SIMD, 12 waves/CU [S6 table]
    ("A5", "gfx942", 256, {"vgpr": 168}, 37.5, 12, 3, "vgpr"),
    # A6: gfx908 separate files, total = max(32, 32) = 32 -> 8 waves/SIMD [S12]
    ("A6", "gfx908", 64, {"vgpr": 32, "agpr": 32}, 80.0, 32, 32, "vgpr"),
    # A7: gfx90a unified, total = align4(32) + 32 = 64 -> 8 waves/SIMD [S12]
    ("A7", "gfx90a", 64, {"vgpr": 32, "agpr": 32}, 100.0, 32, 32, "waves"),
    # A8: default WG 1024 = 16 waves: 40 // 16 = 2 WG -> 32 waves -> compiler occupancy 8, not 10 [S17]
    ("A8", "gfx906", 1024, {"vgpr": 24, "sgpr": 80}, 80.0, 32, 2, "waves"),
    # A9: 52 VGPRs -> 256 // 52 = 4 waves/SIMD -> 16 of 40
    ("A9", "mi100", 256, {"vgpr": 52, "sgpr": 64}, 40.0, 16, 4, "vgpr"),
    # A10: 65536 // 24576 = 2 WG -> 8 of 40
    ("A10", "mi100", 256, {"vgpr": 32, "lds": 24576}, 20.0, 8, 2, "lds"),
    # A11: the same kernel on gfx90a / gfx942: 8 of 32
    ("A11-gfx90a", "gfx90a", 256, {"vgpr": 32, "lds": 24576}, 25.0, 8, 2, "lds"),
    ("A11-gfx942", "gfx942", 256, {"vgpr": 32, "lds": 24576}, 25.0, 8, 2, "lds"),
    # A12: 64 VGPRs -> 4 waves/SIMD -> 16 of 40
    ("A12", "mi100", 256, {"vgpr": 64}, 40.0, 16, 4, "vgpr"),
    # A14: 128 + 128 -> 256 -> 2 waves/SIMD -> 8 of 32
    ("A14", "gfx90a", 256, {"vgpr": 128, "agpr": 128}, 25.0, 8, 2, "vgpr"),
    # A15: 160 KiB LDS on gfx950: 163840 // 65536 = 2 WG; gfx942 (64 KiB) fits 1
    ("A15", "gfx950", 256, {"vgpr": 64, "lds": 65536}, 25.0, 8, 2, "lds"),
    ("A15-gfx942", "gfx942", 256, {"vgpr": 64, "lds": 65536}, 12.5, 4, 1, "lds"),
    # A19: 1-wave workgroups are not barrier-limited: 40 WGs, 10 waves/SIMD
    ("A19", "gfx906", 64, {"vgpr": 24}, 100.0, 40, 40, "waves"),
]

# (id, arch or device, block, registers, shared, occupancy %, warps per SM, blocks, limiter, limits)
NVIDIA_EXAMPLES = [
    ("N1", "a100", 256, 32, 0, 100.0, 64, 8, "warps", {"warps": 8, "registers": 8, "blocks": 32, "shared": 164}),
    # 33 x 32 = 1056 -> 1280 registers/warp -> 12 warps per sub-partition
    ("N2", "a100", 256, 33, 0, 75.0, 48, 6, "registers", {"warps": 8, "registers": 6, "blocks": 32, "shared": 164}),
    ("N3", "a100", 256, 64, 0, 50.0, 32, 4, "registers", {"warps": 8, "registers": 4, "blocks": 32, "shared": 164}),
    ("N4", "a100", 128, 255, 0, 12.5, 8, 2, "registers", {"warps": 16, "registers": 2, "blocks": 32, "shared": 164}),
    ("N5", "a100", 32, 16, 0, 50.0, 32, 32, "blocks", {"warps": 64, "registers": 128, "blocks": 32, "shared": 164}),
    ("N6", "a100", 1024, 64, 0, 50.0, 32, 1, "registers", {"warps": 2, "registers": 1, "blocks": 32, "shared": 164}),
    # 65 x 32 = 2080 -> 2304 registers/warp x 32 warps = 73728 > 65536: cannot launch
    ("N7", "a100", 1024, 65, 0, 0.0, 0, 0, "registers", {"warps": 2, "registers": 0, "blocks": 32, "shared": 164}),
    ("N13", "l40s", 256, 32, 0, 100.0, 48, 6, "warps", {"warps": 6, "registers": 8, "blocks": 24, "shared": 100}),
]


def _flags(resources: dict[str, int]) -> list[str]:
    return [part for name, value in resources.items() for part in (f"--{name}", str(value))]


@pytest.mark.parametrize(("case", "name", "block", "resources", "pct", "waves", "wgs", "limiter"), AMD_EXAMPLES)
def test_amd_worked_examples(cli, case, name, block, resources, pct, waves, wgs, limiter) -> None:
    result = occupancy(lookup(name).arch, block, **resources)
    assert (result.occupancy_pct, result.waves_per_cu, result.workgroups_per_cu, result.limiter) == (pct, waves, wgs, limiter)
    assert result.warps_per_sm is None
    run = cli("occupancy", "--arch", name, "--block", block, *_flags(resources), "--json")
    assert run.code == 0, run.err
    assert run.json() == result.as_dict()
    assert run.json()["waves_per_cu"] == waves and run.json()["occupancy_pct"] == pct


def test_amd_compiler_view_of_a8() -> None:
    # LLVM reports occupancy in waves per SIMD: 32 waves over 4 SIMDs = 8 (D139468).
    result = occupancy(lookup("gfx906").arch, 1024, vgpr=24, sgpr=80)
    assert result.waves_per_cu // lookup("gfx906").arch.simds_per_cu == 8


@pytest.mark.parametrize(("case", "name", "block", "registers", "shared", "pct", "warps", "blocks", "limiter", "limits"),
                         NVIDIA_EXAMPLES)
def test_nvidia_worked_examples(cli, case, name, block, registers, shared, pct, warps, blocks, limiter, limits) -> None:
    result = occupancy(lookup(name).arch, block, registers=registers, shared=shared)
    assert (result.occupancy_pct, result.warps_per_sm, result.workgroups_per_cu, result.limiter) == (pct, warps, blocks, limiter)
    assert dict(result.limits) == limits and result.waves_per_cu is None
    run = cli("occupancy", "--arch", name, "--block", block, "--registers", registers, "--shared", shared, "--json")
    assert run.code == 0, run.err
    assert run.json() == result.as_dict()


def test_cli_text_output(cli) -> None:
    result = cli("occupancy", "--arch", "mi100", "--block", "256", "--vgpr", "52", "--sgpr", "64")
    assert result.code == 0
    assert result.out.splitlines()[0] == "gfx908: occupancy 40.0% (16 waves/CU, 4 workgroups), limited by vgpr"
    assert "  vgpr         allows 4 workgroups" in result.out


def test_seed_001_mi100_figures_differ_from_the_rules() -> None:
    """Seed 001 (the stencil sprint) estimates MI100 occupancy with '128K VGPRs per CU'
    (128 000 / 2560 threads = 50 VGPRs per thread) and floors waves before whole
    workgroups. LLVM's rules (arch-specs §1.5, §5.1) give A9/A10/A12 instead."""
    mi100 = lookup("mi100").arch
    # 52 VGPRs, 64 SGPRs: the seed's floor(min(1, 50/52) x 40) = 38 waves (96.2 %) ...
    assert int(min(1.0, (128000 / 2560) / 52) * 40) == 38
    # ... the rules: 256 // 52 = 4 waves per SIMD = 16 of 40 (A9)
    a9 = occupancy(mi100, 256, vgpr=52, sgpr=64)
    assert (a9.waves_per_cu, a9.occupancy_pct) == (16, 40.0)
    # 24 KB LDS per 256-thread workgroup: the seed's floor(64/24 x 4) = 10 waves = 25 % ...
    assert int(64 / 24 * 4) == 10
    # ... whole workgroups only: 2 x 4 = 8 waves = 20 % (A10; 25 % is the gfx90a answer, A11)
    a10 = occupancy(mi100, 256, vgpr=32, lds=24 * 1024)
    assert (a10.waves_per_cu, a10.occupancy_pct, a10.limiter) == (8, 20.0, "lds")
    # after removing the LDS array, 64 VGPRs: the seed's 50 / 64 = 78 % ...
    assert round(50 / 64 * 100) == 78
    # ... the rules: 256 // 64 = 4 waves per SIMD = 40 % (A12); on gfx90a it is 100 %
    assert occupancy(mi100, 256, vgpr=64).occupancy_pct == 40.0
    assert occupancy(lookup("gfx90a").arch, 256, vgpr=64).occupancy_pct == 100.0


def test_sgpr_rules_llvm_table() -> None:
    gfx906 = lookup("gfx906").arch
    # 81-88 SGPRs give 9 waves per SIMD in LLVM (the hardware-view formula would give 8, §5.3)
    assert occupancy(gfx906, 64, vgpr=0, sgpr=88).limits["sgpr"] == 9 * 4
    assert occupancy(gfx906, 64, vgpr=0, sgpr=100).limits["sgpr"] == 8 * 4
    assert occupancy(gfx906, 64, vgpr=0, sgpr=101).limits["sgpr"] == 7 * 4
    # clamped to 8 waves per SIMD on gfx90a+, so SGPRs bind only above 100
    r = occupancy(lookup("gfx90a").arch, 64, vgpr=0, sgpr=80)
    assert (r.limits["sgpr"], r.occupancy_pct) == (32, 100.0)


def test_launch_failures() -> None:
    gfx942, a100 = lookup("gfx942").arch, lookup("a100").arch
    too_big = occupancy(gfx942, 256, vgpr=32, lds=65537)
    assert (too_big.occupancy_pct, too_big.limiter, too_big.workgroups_per_cu) == (0.0, "lds", 0)
    assert occupancy(gfx942, 2048, vgpr=32).limiter == "block_size"
    assert occupancy(a100, 2048, registers=32).as_dict()["limiter"] == "block_size"
    # 163 KiB + 1 KiB reserve fits the opt-in limit; one byte more does not
    assert occupancy(a100, 128, registers=32, shared=166912).limits["shared"] == 1
    assert occupancy(a100, 128, registers=32, shared=166913).limiter == "shared"


def test_shared_memory_granule_reserve_and_carveouts() -> None:
    a100, v100 = lookup("a100").arch, lookup("v100").arch
    # 48 KiB + 1 KiB reserve = 50176 B per block in the 164 KiB default carve-out: 3 blocks
    assert occupancy(a100, 128, registers=32, shared=48 * 1024).limits["shared"] == 3
    # 1 byte rounds to one 128-byte granule on top of the reserve: 167936 // 1152 = 145
    assert occupancy(a100, 128, registers=32, shared=1).limits["shared"] == 145
    # cc 7.0: no reserve, 256-byte granule; no shared memory means no shared limit
    assert occupancy(v100, 128, registers=32, shared=1).limits["shared"] == 98304 // 256
    assert "shared" not in occupancy(v100, 128, registers=32).limits
    # a configured carve-out (ncu launch__shared_mem_config_size) replaces the default
    assert occupancy(a100, 128, registers=32, shared=32 * 1024, shared_config=65536).limits["shared"] == 1


def test_barrier_limit_from_cc_9() -> None:
    assert occupancy(lookup("sm_90").arch, 32, registers=16, barriers=4).limits["barriers"] == 16
    assert "barriers" not in occupancy(lookup("sm_80").arch, 32, registers=16, barriers=4).limits
    r = occupancy(lookup("sm_90").arch, 32, registers=16, barriers=3)
    assert (r.workgroups_per_cu, r.limiter) == (21, "barriers")


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("gfx90a", {"vgpr": 32, "registers": 32}, "registers describe NVIDIA launches; gfx90a is an AMD arch"),
        ("gfx90a", {"vgpr": 32, "shared": 1024}, "shared describe NVIDIA launches"),
        ("a100", {"registers": 32, "vgpr": 32, "lds": 5}, "vgpr, lds describe AMD launches; sm_80 is an NVIDIA arch"),
        ("gfx942", {}, r"needs the VGPRs per work-item \(--vgpr\)"),
        ("sm_90", {}, r"needs the registers per thread \(--registers\)"),
        ("gfx908", {"vgpr": 300}, "addresses at most 256 VGPRs"),
        ("gfx906", {"vgpr": 32, "agpr": 4}, "0 AGPRs"),
        ("gfx942", {"vgpr": -1}, "vgpr must be an integer >= 0"),
    ],
)
def test_usage_errors(name: str, kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        occupancy(lookup(name).arch, 256, **kwargs)


def test_block_must_be_positive() -> None:
    with pytest.raises(UsageError, match="block must be an integer >= 1"):
        occupancy(lookup("gfx942").arch, 0, vgpr=8)


@pytest.mark.parametrize(
    "args",
    [
        ("--arch", "gfx90a", "--block", "256", "--vgpr", "32", "--registers", "40"),
        ("--arch", "h100-sxm", "--block", "256", "--registers", "40", "--lds", "1024"),
        ("--arch", "mi300", "--block", "256", "--vgpr", "32"),
        ("--arch", "gfx9000", "--block", "256", "--vgpr", "32"),
        ("--arch", "gfx942", "--block", "256"),
    ],
)
def test_cli_usage_errors_are_one_line(cli, args) -> None:
    result = cli("occupancy", *args)
    assert result.code == 2
    assert result.err.startswith("perfcheck: error: ") and result.err.count("\n") == 1
    assert "Traceback" not in result.err and result.out == ""


# ------------------------------------------------------------------ the real B200 profile


def _ncu_launch(row: pd.Series) -> dict[str, int]:
    """The kernel's launch__* resources, as occupancy() arguments."""
    return {
        "registers": int(row["raw.launch__registers_per_thread"]),
        "shared": int(row["raw.launch__shared_mem_per_block_static"] + row["raw.launch__shared_mem_per_block_dynamic"]),
        "barriers": int(row["raw.launch__barrier_count"]),
        "shared_config": int(row["raw.launch__shared_mem_config_size"]),
    }


def test_b200_every_kernel_matches_nsight_compute() -> None:
    frame = read_profile(profile(B200_CSV)).dispatches
    sm100 = lookup("sm_100").arch
    assert len(frame) == 16
    for _, row in frame.iterrows():
        result = occupancy(sm100, int(row["raw.launch__block_size"]), **_ncu_launch(row))
        limits = result.limits
        assert limits["registers"] == row["raw.launch__occupancy_limit_registers"] == 2
        assert limits["shared"] == row["raw.launch__occupancy_limit_shared_mem"] == 2
        assert limits["warps"] == row["raw.launch__occupancy_limit_warps"] == 16
        assert limits["blocks"] == row["raw.launch__occupancy_limit_blocks"] == 32
        assert limits["barriers"] == row["raw.launch__occupancy_limit_barriers"] == 32
        assert result.occupancy_pct == row["raw.sm__maximum_warps_per_active_cycle_pct"] == 12.5
        assert result.warps_per_sm == row["raw.sm__maximum_warps_avg_per_active_cycle"] == 8
        assert result.limiter == "registers"
        # the driver reserve the calculator adds is the one ncu reports
        assert sm100.shared_reserved_per_block == row["raw.launch__shared_mem_per_block_driver"]
        # and the register allocation granule reproduces ncu's allocated registers per thread
        registers = int(row["raw.launch__registers_per_thread"])
        allocated = -(-registers * 32 // sm100.register_granule) * sm100.register_granule // 32
        assert allocated == row["raw.launch__registers_per_thread_allocated"] == 256


def test_b200_table_matches_nsight_compute() -> None:
    frame = read_profile(profile(B200_CSV)).dispatches
    table = occupancy_table(lookup("b200").arch, frame)
    assert (table["occupancy_pct"] == frame["raw.sm__maximum_warps_per_active_cycle_pct"]).all()
    assert (table["warps_per_sm"] == frame["raw.sm__maximum_warps_avg_per_active_cycle"]).all()
    assert (table["workgroups_per_cu"] == 2).all() and (table["occupancy_limiter"] == "registers").all()
    # Without the configured carve-out the calculator assumes the default 228 KiB: the
    # shared-memory limit would be 233472 // 66560 = 3 blocks, but registers still bind
    # at 2, so the occupancy is the same.
    default = occupancy_table(lookup("sm_100").arch, frame.drop(columns=[SHARED_CONFIG_COLUMN]))
    assert default["occupancy_pct"].tolist() == [12.5] * 16
    row = frame.iloc[0]
    assert occupancy(lookup("sm_100").arch, 128, registers=255, shared=65536).limits["shared"] == 3
    assert BARRIERS_COLUMN in frame.columns and SHARED_CONFIG_COLUMN in frame.columns and row["raw.launch__block_size"] == 128


# ------------------------------------------------------------------ vectorised table


def test_table_columns_dtypes_index_and_missing_resources() -> None:
    frame = pd.DataFrame(
        {"workgroup_size": pd.array([256, 256, None, 64], dtype="Int64"),
         "vgpr": pd.array([52, None, 32, 24], dtype="Int64"),
         "sgpr": pd.array([64, 64, 64, None], dtype="Int64"),
         "lds_per_workgroup": pd.array([0, 0, 0, 0], dtype="Int64")},
        index=[10, 11, 12, 13],
    )
    table = occupancy_table(lookup("mi100").arch, frame)
    assert list(table.columns) == ["occupancy_pct", "occupancy_limiter", "waves_per_cu", "workgroups_per_cu"]
    assert list(table.index) == [10, 11, 12, 13]
    assert str(table["occupancy_limiter"].dtype) == "string" and str(table["waves_per_cu"].dtype) == "Int64"
    assert table["occupancy_pct"].iloc[0] == 40.0 and table["occupancy_pct"].iloc[3] == 100.0
    assert table["occupancy_pct"].iloc[1:3].isna().all()
    assert table["occupancy_limiter"].iloc[1:3].isna().all() and table["waves_per_cu"].iloc[1:3].isna().all()
    # a needed column absent altogether (here: no LDS column) -> NaN, never a guess
    assert occupancy_table(lookup("mi100").arch, frame.drop(columns=["lds_per_workgroup"]))["occupancy_pct"].isna().all()
    nvidia = occupancy_table(lookup("a100").arch, pd.DataFrame({"workgroup_size": [256], "lds_per_workgroup": [0]}))
    assert list(nvidia.columns) == ["occupancy_pct", "occupancy_limiter", "warps_per_sm", "workgroups_per_cu"]
    assert nvidia["occupancy_pct"].isna().all()
    assert occupancy_table(lookup("a100").arch, pd.DataFrame()).empty


def test_want_names_every_input_column() -> None:
    for name in ("workgroup_size", "vgpr", "agpr", "sgpr", "registers", "lds_per_workgroup", BARRIERS_COLUMN, SHARED_CONFIG_COLUMN):
        assert name in WANT


def _with_missing(values: np.ndarray, missing: np.ndarray) -> pd.arrays.IntegerArray:
    return pd.arrays.IntegerArray(values.astype(np.int64), missing)


def _random_amd(arch, rng: np.random.Generator, n: int) -> pd.DataFrame:
    has_agpr = arch.max_agprs_per_wave > 0
    lds_choices = np.concatenate([np.zeros(n // 4, dtype=np.int64),
                                  rng.integers(1, int(arch.lds_per_cu * 1.1), n - n // 4)])
    return pd.DataFrame({
        "workgroup_size": rng.integers(1, arch.max_workgroup_size + 100, n),  # a few too large
        "vgpr": rng.integers(0, arch.max_vgprs_per_wave + 1, n),
        "agpr": rng.integers(0, arch.max_agprs_per_wave + 1, n) * rng.integers(0, 2, n) if has_agpr else np.zeros(n, dtype=int),
        "sgpr": _with_missing(rng.integers(0, 113, n), rng.random(n) < 0.2),
        "lds_per_workgroup": rng.permutation(lds_choices),
    })


def _random_nvidia(arch, rng: np.random.Generator, n: int) -> pd.DataFrame:
    carveouts = np.asarray(arch.shared_carveouts)
    return pd.DataFrame({
        "workgroup_size": rng.integers(1, arch.max_threads_per_block + 100, n),
        "registers": rng.integers(0, 260, n),  # 256..259 cannot launch
        "lds_per_workgroup": np.where(rng.random(n) < 0.3, 0, rng.integers(0, arch.max_shared_per_block_optin + 4096, n)),
        BARRIERS_COLUMN: np.where(rng.random(n) < 0.5, 0, rng.integers(1, 16, n)),
        SHARED_CONFIG_COLUMN: _with_missing(rng.choice(carveouts[1:], n), rng.random(n) < 0.5),
    })


def _scalar(arch, row: pd.Series):
    if arch.vendor == "amd":
        sgpr = row["sgpr"]
        return occupancy(arch, int(row["workgroup_size"]), vgpr=int(row["vgpr"]), agpr=int(row["agpr"]),
                         sgpr=None if pd.isna(sgpr) else int(sgpr), lds=int(row["lds_per_workgroup"]))
    config = row[SHARED_CONFIG_COLUMN]
    return occupancy(arch, int(row["workgroup_size"]), registers=int(row["registers"]), shared=int(row["lds_per_workgroup"]),
                     barriers=int(row[BARRIERS_COLUMN]), shared_config=None if pd.isna(config) else int(config))


@pytest.mark.parametrize("name", known()[0])
def test_table_agrees_with_occupancy_on_random_launches(name: str) -> None:
    arch = lookup(name).arch
    rng = np.random.default_rng(20240603 + len(name))
    frame = (_random_amd if arch.vendor == "amd" else _random_nvidia)(arch, rng, 1500)
    table = occupancy_table(arch, frame)
    resident = "waves_per_cu" if arch.vendor == "amd" else "warps_per_sm"
    labels = AMD_LIMITERS if arch.vendor == "amd" else NVIDIA_LIMITERS
    seen = set()
    for i, row in frame.iterrows():
        expected = _scalar(arch, row)
        got = table.loc[i]
        assert (got["occupancy_pct"], got["occupancy_limiter"], got[resident], got["workgroups_per_cu"]) == (
            expected.occupancy_pct, expected.limiter, getattr(expected, resident), expected.workgroups_per_cu
        ), (name, dict(row))
        seen.add(expected.limiter)
    # the sample exercises most limiters (barriers only exist from cc 9.0)
    assert len(seen) >= len(labels) - 2, seen
