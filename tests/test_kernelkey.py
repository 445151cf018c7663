"""A kernel keeps its baseline across builds and toolchains: the canonical key
(perfcheck.kernelkey), baseline files migrated on load, config ``aliases``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfcheck import baseline as baselines
from perfcheck import checking
from perfcheck.config import resolver
from perfcheck.expect import PASSED, RECORDED
from perfcheck.kernelkey import KernelMap, kernel_key, resolve

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "stencil"


@pytest.mark.parametrize("spellings", [
    # AMD descriptor and clone suffixes: rocprof v1 / Omniperf 1.x, Omniperf 2.0 on MI300X, the symbol
    ("vecCopy(double*, double*, double*, int, int) [clone .kd]", "vecCopy(double*, double*, double*, int, int) (.kd)",
     "vecCopy(double *, double *, double *, int, int)", "vecCopy(double*,double*,double*,int,int)"),
    ("_Z7vecCopyPdS_S_ii.kd", "_Z7vecCopyPdS_S_ii"),
    # GCC/Clang clones and hash suffixes of a rebuild
    ("stencil(float*) [clone .cold]", "stencil(float*) [clone .constprop.0]", "stencil(float*).llvm.8345123456",
     "stencil(float*).__uniq.1234567890", "stencil(float*)$1", "stencil(float*)"),
    # nvcc's file-static prefix carries the translation unit's hash
    ("__nv_static_27__14_coords_cpp1_ii_7126c51d_halo(float*)", "__nv_static_27__14_coords_cpp1_ii_0badf00d_halo(float*)",
     "halo(float*)"),
    # template spellings and anonymous namespaces
    ("void gemm<(int)128, float>(float const*)", "void gemm<128u,float>(float const *)", "void gemm<128, float>(float const*)"),
    ("void (anonymous namespace)::k<4>(int)", "void <unnamed>::k<4>(int)", "void {anonymous}::k<4>(int)",
     "void _GLOBAL__N__7a1b2c3d::k<4>(int)"),
    ("a<b<int> >(int)", "a<b<int>>(int)", "a< b<int> >( int )"),
    # every integer argument, not only the first (NVIDIA casts, GNU suffixes)
    ("void copy<float, (unsigned long)2, (int)4>(float*)", "void copy<float, 2ul, 4>(float*)",
     "void copy<float,2UL,4>(float *)", "void copy<float, 2, 4>(float*)"),
])
def test_spellings_of_one_kernel_share_a_key(spellings: tuple[str, ...]) -> None:
    keys = {kernel_key(s) for s in spellings}
    assert len(keys) == 1, keys
    key = keys.pop()
    assert kernel_key(key) == key  # a key is its own key


def test_different_kernels_keep_different_keys() -> None:
    # lambda numbering is kept: two lambdas of one function are two kernels
    assert kernel_key("f()::{lambda()#1}::operator()() const") != kernel_key("f()::{lambda()#2}::operator()() const")
    assert kernel_key("gemm<128>(float*)") != kernel_key("gemm<64>(float*)")
    assert kernel_key("k(float*)") != kernel_key("k(double*)")
    # c++filt's spelling is the key's: the baselines written before keep their keys
    assert kernel_key("EOCloverFBCGPU(float*, float const*, int)") == "EOCloverFBCGPU(float*, float const*, int)"


def test_aliases_follow_renames_by_key_and_never_loop() -> None:
    assert resolve("old_name(float*) [clone .kd]", {"old_name(float *)": "new_name(float*)"}) == "new_name(float*)"
    assert resolve("a", {"a": "b", "b": "c"}) == "c"
    assert resolve("a", {"a": "b", "b": "a"}) == "b"


def test_kernel_map_migrates_raw_names_and_keeps_the_entry_of_more_runs() -> None:
    old = baselines.KernelBaseline(metrics={"duration": 2.0}, runs=5)
    newer = baselines.KernelBaseline(metrics={"duration": 1.0}, runs=1)
    kernels = KernelMap({"k(float*) [clone .kd]": old, "k(float *)": newer})
    assert list(kernels) == ["k(float*)"] and kernels["k(float*).llvm.1"] is old
    assert "k(float*) (.kd)" in kernels and kernels.get("other") is None


def _make(tmp_path: Path, **cli: object):  # noqa: ANN202
    common = dict(arch="mi100", baseline_dir=str(tmp_path / "b"), **cli)
    return resolver(cli=common, env={}, discover=False, cwd=tmp_path).settings(
        ["s"], profiles=[EXAMPLE / "results-after.csv"], expect={"EOCloverFBCGPU*": ["duration <= baseline + 5%"]})


def test_a_baseline_file_with_raw_names_is_migrated_on_load(tmp_path: Path) -> None:
    first = checking.run_suites(_make(tmp_path))
    path = first.suites[0].baseline_path
    doc = json.loads(path.read_text())
    name = "EOCloverFBCGPU(float*, float const*, int)"
    # as an older perfcheck (or another build's profile) spelled it
    doc["kernels"]["EOCloverFBCGPU(float *, float const *, int) [clone .kd]"] = doc["kernels"].pop(name)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    run = checking.run_suites(_make(tmp_path))
    assert [c.outcome for c in run.checks] == [PASSED]  # compared, not recorded as a new kernel
    loaded = baselines.load(path)
    assert name in list(loaded.kernels) and not any("clone" in k for k in loaded.kernels)
    baselines.write(path, loaded)  # written keyed
    written = list(json.loads(path.read_text())["kernels"])
    assert name in written and not any("clone" in k for k in written)


def test_config_aliases_keep_a_renamed_kernels_baseline(tmp_path: Path) -> None:
    first = checking.run_suites(_make(tmp_path))
    path = first.suites[0].baseline_path
    doc = json.loads(path.read_text())
    name = "EOCloverFBCGPU(float*, float const*, int)"
    doc["kernels"]["EOCloverFBCGPU_v1(float*, float const*, int)"] = doc["kernels"].pop(name)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    # without the alias the renamed kernel has no baseline ...
    assert [c.outcome for c in checking.run_suites(_make(tmp_path)).checks] == [RECORDED]
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    # ... with it, the old entry is its baseline
    run = checking.run_suites(_make(tmp_path, aliases={"EOCloverFBCGPU_v1(float *, float const *, int)": name}))
    assert [c.outcome for c in run.checks] == [PASSED]


def test_inspect_json_shows_the_raw_name_and_the_key(cli) -> None:  # noqa: ANN001
    from conftest import profile

    result = cli("inspect", "--json", profile("omniperf/rocprofiler-compute-vcopy-MI200"))
    entry = json.loads(result.out)["kernels"][0]
    assert entry["kernel"] == "vecCopy(double*, double*, double*, int, int)" == entry["key"]
