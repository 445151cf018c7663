"""The architecture database: lookup, detection from real profiles, describe/CLI,
and the data's own consistency (every figure cited, peaks = units x rate x clock)."""

from __future__ import annotations

import json
import math
import re

import pytest

from conftest import profile
from perfcheck.arch import ArchSpec, Target, describe, detect, known, lookup
from perfcheck.errors import UsageError
from perfcheck.ingest import open_profile, read_peaks, read_profile
from perfcheck.model import Source

ARCHES = ["gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "sm_70", "sm_80", "sm_89", "sm_90", "sm_100"]
DEVICES = ["mi50", "mi60", "mi100", "mi210", "mi250", "mi250x", "mi300a", "mi300x", "mi325x", "mi350x", "mi355x",
           "v100", "a100", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "l40s", "b200"]
B200_CSV = "ncu/meinie0826-roofline-analysis/torch_sdpa_flash__mha_bf16_b16_ctx4k_p64.ncu.csv"


def test_known_lists_every_required_arch_and_device() -> None:
    arches, devices = known()
    assert arches == ARCHES
    assert devices == DEVICES


@pytest.mark.parametrize(
    ("spelling", "arch", "device"),
    [
        ("gfx90a", "gfx90a", None),
        ("GFX942", "gfx942", None),
        ("gfx90a:sramecc+:xnack-", "gfx90a", None),  # target features name the same rules
        ("sm_90a", "sm_90", None),
        ("sm80", "sm_80", None),
        ("mi300x", "gfx942", "mi300x"),
        ("AMD Instinct MI300X", "gfx942", "mi300x"),
        ("MI300X_A1", "gfx942", "mi300x"),
        ("h100-sxm", "sm_90", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "sm_90", "h100-sxm"),
        ("Tesla V100-SXM2-32GB", "sm_70", "v100"),
        ("nvidia b200", "sm_100", "b200"),
        ("MI250X", "gfx90a", "mi250x"),
    ],
)
def test_lookup_accepts_arch_ids_devices_and_aliases(spelling: str, arch: str, device: str | None) -> None:
    target = lookup(spelling)
    assert target.arch.name == arch
    assert (target.device.name if target.device else None) == device


def test_lookup_unknown_name_lists_known_names_and_a_close_match() -> None:
    with pytest.raises(UsageError) as err:
        lookup("mi300xx")
    text = str(err.value)
    assert "unknown GPU 'mi300xx'" in text and "did you mean mi300x" in text
    assert all(name in text for name in ARCHES + DEVICES)
    assert "\n" not in text


def test_lookup_family_name_asks_for_a_device() -> None:
    with pytest.raises(UsageError, match=r"'mi200' names several devices \(mi210, mi250, mi250x\).*gfx90a"):
        lookup("mi200")
    with pytest.raises(UsageError, match="h100-sxm, h100-pcie"):
        lookup("h100")


# ------------------------------------------------------------------ detect() on real profiles

# (relative path, "profile" | "peaks", expected): expected is a device name, "arch:<id>"
# when only the arch is certain, or None. Source.device / Source.arch as the readers
# fill them are noted where they are not obvious.
DETECT_CASES = [
    ("babelstream/mi300a-cpx/device_0.txt", "peaks", "mi300a"),  # whole-device figures: the CPX partition is not visible
    ("babelstream/techercise-mi100/babelstream_results_MI100.txt", "peaks", "mi100"),  # "Device 738c" (PCI id)
    ("babelstream/techercise-mi60/babelstream_results_MI60.txt", "peaks", "arch:gfx906"),  # "Vega 20": MI50 or MI60
    ("babelstream/uob-babelstream-v2.0-k20x/cuda.txt", "peaks", None),  # Tesla K20X: not in the database
    ("babelstream/uob-babelstream-v3.3-titanxp/cuda.txt", "peaks", None),
    ("ert/ebugger-ert-1.1.0-examples/roofline.titan.ccs.ornl.gov.02.json", "peaks", None),
    ("ert/weakknight-roofline-p100/roofline.json", "peaks", None),
    ("ert/weakknight-roofline-p100/sum", "peaks", None),
    ("likwid/goghino-likwid-bench-triad-mem/proc_0.out", "peaks", None),  # a CPU
    ("likwid/rubens-zan-likwid-optimization/FLOPS_DP_1024.log", "peaks", None),
    ("likwid/rubens-zan-likwid-optimization/L3_1024.log", "peaks", None),
    ("mixbench/converged-computing-performance-study-aws-v100/null-1020709044224.out", "peaks", "v100"),
    ("mixbench/pawsey-mulan-mi100/mixbench-log.txt", "peaks", None),  # the log names no device
    ("mixbench/pawsey-noether-mi210/mixbench-log.txt", "peaks", "mi210"),
    ("mixbench/pawsey-setonix-mi250x/mixbench-log.txt", "peaks", None),
    ("mixbench/pawsey-topaz-v100/mixbench-log.txt", "peaks", "arch:sm_70"),  # V100 PCIe: not the SXM2 figures
    ("omniperf/omniperf-v1-TCC-mi200/roofline.csv", "peaks", "arch:gfx90a"),
    ("omniperf/rocprofiler-compute-vcopy-MI200/roofline.csv", "peaks", "arch:gfx90a"),
    ("stream/uob-babelstream-v2.0-broadwell/mccalpin-cray.txt", "peaks", None),
    ("ncu/cyanguwa-deeplearningprofiling-deepcam-lamb-opt", "profile", None),
    ("ncu/gardenia-learningnote4dev/gemm.csv", "profile", "arch:sm_80"),  # CC 8.0, no device name
    (B200_CSV, "profile", "b200"),
    ("nvprof/leimingyu-magus/matrixMul_metrics.csv", "profile", None),  # GeForce GTX 1080 Ti
    ("nvprof/leimingyu-magus/matrixMul_trace.csv", "profile", None),
    ("nvprof/nanzifan-nvprof-result-cfd/print-gpu-summary.csv", "profile", None),
    ("nvprof/weakknight-roofline/slurm-9186634.out", "profile", None),  # Tesla P100
    ("omniperf/omniperf-v1-TCC-mi200", "profile", "arch:gfx90a"),  # "mi200": MI210 or a GCD of MI250/MI250X
    ("omniperf/rocm-systems-vcopy-MI350", "profile", "arch:gfx950"),  # "MI350": MI350X or MI355X
    ("omniperf/rocprofiler-compute-vcopy-MI200", "profile", "arch:gfx90a"),
    ("omniperf/rocprofiler-compute-vcopy-MI300X", "profile", "mi300x"),  # "MI300X_A1"
    ("rocprof-v1/batched_gemm-mi300x/results.copy_stats.csv", "profile", "mi300x"),
    ("rocprof-v1/batched_gemm-mi300x/results.db", "profile", "mi300x"),
    ("rocprof-v1/batched_gemm-mi300x/results.hip_stats.csv", "profile", "mi300x"),
    ("rocprof-v1/batched_gemm-mi300x/results.stats.csv", "profile", "mi300x"),
    ("rocprof-v1/batched_gemm-mi300x/results.sysinfo.txt", "profile", "mi300x"),
    ("rocprof-v1/kokkos-gfx906/results.copy_stats.csv", "profile", "arch:gfx906"),  # "Vega 20" + gfx906
    ("rocprof-v1/kokkos-gfx906/results.db", "profile", "arch:gfx906"),
    ("rocprof-v1/kokkos-gfx906/results.hip_stats.csv", "profile", "arch:gfx906"),
    ("rocprof-v1/kokkos-gfx906/results.json", "profile", "arch:gfx906"),
    ("rocprof-v1/kokkos-gfx906/results.stats.csv", "profile", "arch:gfx906"),
    ("rocprof-v1/kokkos-gfx906/results.sysinfo.txt", "profile", "arch:gfx906"),
    ("rocprof-v1/omniperf-SQ-mi100/SQ_LEVEL_WAVES.csv", "profile", None),
    ("rocprofv3/batched_gemm-mi300x-rocpd/15_results.db", "profile", "mi300x"),
    ("rocprofv3/rocprofiler-sdk-docs-2024/counter_collection.csv", "profile", None),
    ("rocprofv3/rocprofiler-sdk-docs-2024/kernel_trace.csv", "profile", None),
    ("rocprofv3/rocprofiler-sdk-docs-2025/kernel_trace.csv", "profile", None),
    ("rocprofv3/rocprofiler-sdk-docs-2025/summary.txt", "profile", None),
]


def _expected(target: Target | None) -> str | None:
    if target is None:
        return None
    return target.device.name if target.device is not None else f"arch:{target.arch.name}"


@pytest.mark.parametrize(("relative", "kind", "expected"), DETECT_CASES)
def test_detect_on_real_profile_sources(relative: str, kind: str, expected: str | None) -> None:
    path = profile(relative)
    source = open_profile(path).source if kind == "profile" else read_peaks(path).sources[0]
    assert _expected(detect([source])) == expected


def test_detect_combines_sources() -> None:
    mi300x = Source("a", "x", "x", device="AMD Instinct MI300X", arch="gfx942")
    arch_only = Source("b", "x", "x", arch="gfx942")
    nothing = Source("c", "x", "x")
    assert _expected(detect([mi300x, arch_only, nothing])) == "mi300x"
    assert _expected(detect([arch_only])) == "arch:gfx942"
    # Files from two different GPUs in one profile: nothing can be assumed.
    assert detect([mi300x, Source("d", "x", "x", arch="gfx90a")]) is None
    # A marketing name that contradicts the ISA string: the ISA wins, the device is dropped.
    assert _expected(detect([Source("e", "x", "x", device="MI300X", arch="gfx90a")])) == "arch:gfx90a"
    assert detect([]) is None


# ------------------------------------------------------------------ describe / CLI


@pytest.mark.parametrize(("name", "gips"), [("v100", 489.6), ("mi60", 115.2), ("mi100", 180.24)])
def test_peak_gips_of_seed_000(cli, name: str, gips: float) -> None:
    # Seed 000 (Leinhauser et al.) Tables 1-2: peak GIPS 489.60 (V100: 80 SM x 4 x 1 x 1.53 GHz),
    # 115.20 (MI60: 64 CU x 1 x 1 x 1.8 GHz), 180.24 (MI100: 120 CU x 1 x 1 x 1.502 GHz).
    assert lookup(name).device.peak_gips == pytest.approx(gips, rel=1e-12)
    result = cli("arch", "show", name, "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["peak_gips"] == pytest.approx(gips, rel=1e-12)
    assert doc["device"]["peak_gips"] == pytest.approx(gips, rel=1e-12)
    assert doc["sources"]["peak_gips"].startswith("D: compute_units x schedulers")


def test_arch_show_device_json_has_figures_in_base_units_and_sources(cli) -> None:
    doc = cli("arch", "show", "mi300x", "--json").json()
    assert (doc["name"], doc["kind"], doc["vendor"]) == ("mi300x", "device", "amd")
    device, arch = doc["device"], doc["arch"]
    assert device["compute_units"] == 304 and device["clock_hz"] == 2.1e9
    assert device["mem_bw"] == 5.3e12 and device["peaks"]["hbm_bw"] == 5.3e12
    assert device["peaks"]["flop_rate_fp64"] == 81.7e12
    assert device["peaks"]["mfma_rate_fp16"] == 1307.4e12
    assert device["l2_bytes"] == 32 * 2**20 and device["l3_bytes"] == 256 * 2**20
    assert device["peak_gips"] == pytest.approx(638.4)
    assert arch["name"] == "gfx942" and arch["max_waves_per_cu"] == 32 and arch["vgpr_granule"] == 8
    sources = doc["sources"]
    assert "[S3]" in sources["device"]["peaks"]["flop_rate_fp64"]
    assert "[S7]" in sources["device"]["clock_hz"]
    assert "§5.2" in sources["arch"]["vgpr_granule"]  # the documented MI300X granule conflict
    assert "[S8 getMaxWavesPerEU" in sources["arch"]["max_waves_per_simd"]


def test_arch_show_arch_only(cli) -> None:
    doc = cli("arch", "show", "sm_80", "--json").json()
    assert (doc["kind"], doc["device"], doc["peak_gips"]) == ("arch", None, None)
    assert doc["arch"]["shared_per_sm"] == 167936 and doc["arch"]["shared_granule"] == 128
    assert doc["arch"]["shared_carveouts"][-1] == 164 * 1024
    assert "device" not in doc["sources"]


def test_arch_show_text_cites_sources(cli) -> None:
    result = cli("arch", "show", "mi100")
    assert result.code == 0
    assert "compute_units: 120    [arch-specs.md §1.2 V [S1],[S5]]" in result.out
    assert "peak_gips: 180.2 Ginst/s" in result.out


def test_arch_show_formats_figures_with_units_and_lists_its_sources(cli) -> None:
    out = cli("arch", "show", "a100").out
    for line in ("  clock_hz: 1410 MHz    [", "  mem_bw: 1.555 TB/s    [", "  l2_bytes: 40 MiB    [",
                 "    flop_rate_fp32: 19.5 TFLOP/s    [", "    tensor_rate_int8: 624 TOP/s    [",
                 "  shared_per_sm: 164 KiB    [", "    tensor_rate_fp16: 2,048 FLOP/clk    ["):
        assert line in out, line
    assert "19500000000000.0" not in out and "1410000000.0" not in out
    # what the citations refer to, for a pip user without the reference file
    sources = out[out.index("\nsources: "):]
    assert "  §2.3 NVIDIA: per-SM per-clock rates and peak TFLOP/s" in sources
    assert "  [S22] stas00/ml-engineering @ 744d01e18b79" in sources
    assert "      https://github.com/stas00/ml-engineering/blob/744d01e18b79/compute/accelerator/README.md" in sources
    assert "[S1]" not in sources  # an AMD document, not cited by an NVIDIA device
    doc = cli("arch", "show", "a100", "--json").json()
    assert [d["tag"] for d in doc["cited"]["documents"]] == ["S22", "S23", "S24", "S25", "S26", "S29"]
    assert doc["device"]["peaks"]["flop_rate_fp32"] == 19.5e12  # JSON stays in base units


@pytest.mark.parametrize("name", ARCHES + DEVICES)
def test_every_cited_document_and_section_is_described_in_the_package(name: str) -> None:
    from perfcheck.arch import citations, reference_sections

    texts = _flatten(describe(lookup(name))["sources"])
    tags = {t for text in texts for t in re.findall(r"\[(S\d+)\b", text)}
    found = citations(texts)
    assert {c.tag for c in found} >= tags and all(c.document and c.table and c.url for c in found)
    named = {m for text in texts for m in re.findall(r"§(\d+(?:\.\d+)?)", text)}
    assert {s.lstrip("§") for s, _ in reference_sections(texts)} == named
    if name == "b200":
        assert any(c.tag == "B200 ncu CSV" and "meinie0826/Roofline-Analysis" in c.url for c in found)


def test_arch_list(cli) -> None:
    result = cli("arch", "list")
    assert result.code == 0
    assert result.out.splitlines() == ["arches:  " + ", ".join(ARCHES), "devices: " + ", ".join(DEVICES)]


def test_arch_show_unknown_is_one_line_error(cli) -> None:
    result = cli("arch", "show", "gfx9999")
    assert result.code == 2
    assert result.err.startswith("perfcheck: error: unknown GPU 'gfx9999'") and result.err.count("\n") == 1
    assert "Traceback" not in result.err


# ------------------------------------------------------------------ the data itself


def _figures(mapping) -> dict[str, object]:
    """Numbers and lists of numbers (aliases are names, not figures)."""
    return {k: v for k, v in mapping.items()
            if (isinstance(v, (int, float)) and not isinstance(v, bool)) or (isinstance(v, list) and k != "aliases")}


@pytest.mark.parametrize("name", ARCHES + DEVICES)
def test_every_figure_cites_a_source(name: str) -> None:
    doc = describe(lookup(name))
    for part in ("arch", "device"):
        figures, sources = doc[part], doc["sources"].get(part)
        if figures is None:
            continue
        for key in _figures(figures):
            assert isinstance(sources.get(key), str) and sources[key], f"{name}: {part}.{key} has no source"
        for nested in ("rates_per_clock", "peaks"):
            for key in figures.get(nested, {}):
                assert sources[nested].get(key), f"{name}: {part}.{nested}.{key} has no source"
        # every citation names the reference or the real file it was read from
        for text in _flatten(sources):
            assert "arch-specs.md" in text or "B200 ncu CSV" in text or text.startswith("D:"), text


def _flatten(mapping) -> list[str]:
    out = []
    for value in mapping.values():
        out.extend(_flatten(value) if isinstance(value, dict) else [value])
    return out


def test_unverified_and_conflicting_figures_say_so() -> None:
    mi50 = lookup("mi50").device
    assert "U:" in mi50.sources["clock_hz"] and "U:" in mi50.sources["mem_bw"]
    assert "U:" in lookup("gfx950").arch.sources["lds_granule"]
    assert "U:" in lookup("l40s").device.sources["l2_bytes"] and "§5.9" in lookup("l40s").device.sources["l2_bytes"]
    b200 = lookup("b200").device
    assert all("provisional (§5.10)" in b200.sources["peaks"][k] for k in b200.peaks if k != "hbm_bw")
    assert "§5.8" in lookup("v100").device.sources["clock_hz"]
    assert "§5.3" in lookup("gfx908").arch.sources["sgpr_wave_thresholds"]


# Datasheet figures that do not follow from one clock (arch-specs §5.9, §5.10): L40S FP16
# tensor 362 TF implies 2.49 GHz; the B200 figures are provisional and imply other clocks
# than the 1965 MHz the device reports.
_NOT_ONE_CLOCK = {("l40s", "tensor_rate_fp16"), ("l40s", "tensor_rate_bf16")}


@pytest.mark.parametrize("name", [d for d in DEVICES if d != "b200"])
def test_device_peaks_are_units_times_rate_times_clock(name: str) -> None:
    device = lookup(name).device
    arch = lookup(device.arch).arch
    for key, rate in arch.rates.items():
        if (name, key) in _NOT_ONE_CLOCK or key not in device.peaks:
            continue
        # H100/H200: the TF32..INT8 tensor figures follow 1830 (1620) MHz, FP64 tensor the boost clock (§5.7)
        tensor = key.startswith("tensor_rate") and key != "tensor_rate_fp64"
        clock = device.tensor_clock_hz if tensor and device.tensor_clock_hz else device.clock_hz
        # the tables round to 0.1 TF (3 significant digits on MI50/MI60)
        assert device.peaks[key] == pytest.approx(device.compute_units * rate * clock, rel=5e-3), key


def test_every_device_peak_has_a_per_clock_rate() -> None:
    for name in DEVICES:
        device = lookup(name).device
        rates = lookup(device.arch).arch.rates
        assert set(device.peaks) - {"hbm_bw"} <= set(rates), name


def test_b200_figures_are_what_the_device_reports() -> None:
    # arch-specs §5.10 calls every B200 figure provisional; the ncu CSV's device attributes
    # are what a real B200 reports, so the database takes those.
    frame = read_profile(profile(B200_CSV)).dispatches
    attr = {c.removeprefix("raw.device__attribute_"): frame[c].iloc[0] for c in frame.columns if "device__attribute_" in c}
    b200, sm100 = lookup("b200").device, lookup("sm_100").arch
    assert b200.compute_units == attr["multiprocessor_count"] == 148
    assert b200.clock_hz == attr["max_gpu_frequency_khz"] * 1e3 == 1.965e9
    assert b200.l2_bytes == attr["l2_cache_size"] == 132644864
    assert b200.memory_bytes == attr["total_memory"]
    assert b200.mem_bw == pytest.approx(2 * attr["memory_clock_rate"] * 1e3 * attr["global_memory_bus_width"] / 8)
    assert b200.peak_gips == pytest.approx(148 * 4 * 1.965)
    assert sm100.max_warps_per_sm == attr["max_warps_per_multiprocessor"] == 64
    assert sm100.max_blocks_per_sm == attr["max_blocks_per_multiprocessor"] == 32
    assert sm100.registers_per_sm == attr["max_registers_per_multiprocessor"]
    assert sm100.max_registers_per_block == attr["max_registers_per_block"]
    assert sm100.max_registers_per_thread == attr["max_registers_per_thread"] == 255
    assert sm100.shared_per_sm == attr["max_shared_memory_per_multiprocessor"] == 233472
    assert sm100.max_shared_per_block_optin == attr["max_shared_memory_per_block_optin"] == 232448
    assert sm100.max_shared_per_block == attr["max_shared_memory_per_block"]
    assert sm100.shared_reserved_per_block == attr["reserved_shared_memory_per_block"] == 1024
    assert sm100.max_threads_per_block == attr["max_threads_per_block"]
    assert sm100.schedulers == attr["num_schedulers_per_multiprocessor"] == 4
    assert sm100.ipc == attr["max_ipc_per_scheduler"] == 1
    assert sm100.wave_size == attr["warp_size"]
    # the configured carve-out the driver picked is one of the assumed sm_100 carve-outs
    assert frame["raw.launch__shared_mem_config_size"].iloc[0] in sm100.shared_carveouts


def test_arch_spec_vendor_fields() -> None:
    amd, nvidia = lookup("gfx90a").arch, lookup("sm_90").arch
    assert isinstance(amd, ArchSpec) and amd.max_warps_per_sm is None and nvidia.vgpr_granule is None
    assert amd.max_waves_per_cu == 32 and lookup("gfx908").arch.max_waves_per_cu == 40
    assert nvidia.max_waves_per_cu is None
    assert json.loads(json.dumps(describe(lookup("h100-sxm"))))["device"]["tensor_clock_hz"] == 1.83e9
    assert math.isclose(lookup("h100-sxm").device.peak_gips, 1045.44)


def test_board_part_number_of_a_real_trace_resolves() -> None:
    from perfcheck.analysis import analyse

    # HTA's AlexNet Kineto trace names its GPU "NVIDIA A100-PG509-200" (CC 8.0, 40 GB)
    a = analyse([profile("kineto/hta-critical-path-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz")])
    assert (a.target.name, a.target_origin, a.target.assumed) == ("a100", "detected", None)


@pytest.mark.parametrize(("name", "arch", "device"), [
    ("NVIDIA A100-SXM4-64GB", "sm_80", "a100"),
    ("AMD Instinct MI300X-HF", "gfx942", "mi300x"),
])
def test_unknown_board_of_a_known_chip_is_assumed_with_a_warning(name: str, arch: str, device: str) -> None:
    import pandas as pd

    from perfcheck.analysis import analyse_profile
    from perfcheck.model import Profile

    source = Source("trace.json", "kineto", "kineto", device=name, arch=arch)
    target = detect([source])
    assert target.device.name == device and target.arch.name == arch
    assert target.assumed.startswith(f"device {name!r} is not in the architecture database; taken as {device}")
    a = analyse_profile(Profile(pd.DataFrame({"kernel": ["k"], "duration": [1e-3]}), (source,)))
    assert [str(o) for o in a.oddities] == [f"trace.json: {target.assumed}"]


@pytest.mark.parametrize(("name", "arch"), [
    ("Tesla V100-PCIE-16GB", "sm_70"),  # the database's V100 is the SXM2 part (another clock)
    ("NVIDIA H100 NVL", "sm_90"),  # no product of sm_90 named in it
    ("AMD Radeon Graphics", "gfx90a"),
])
def test_no_guess_without_a_product_name_or_against_the_form_factor(name: str, arch: str) -> None:
    target = detect([Source("p", "f", "t", device=name, arch=arch)])
    assert (target.arch.name, target.device, target.assumed) == (arch, None, None)
