"""Triton Proton hatchet files on the real file in ../shared/profiles/proton. Expected values
are the leaves' own metrics, quoted below."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import one_line_error, profile
from perfcheck.ingest import detect, jsonsniff, read_profile

SOFTMAX = "proton/tritonbench-softmax-sm90/proton.hatchet"
SCOPE = "tritonbench_run_op_softmax/x_val_[4096, 256]"
# The driver's mangled name, as the file holds it, demangled (GNU, c++filt's spelling):
# _ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_11sum_functorIfffE
# clERNS_14TensorIteratorEEUlffE_EEjfLi4EEEEEvT1_
REDUCE_SUM = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
              "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
              "unsigned int, float, 4>>(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
              "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
              "unsigned int, float, 4>)")


def test_leaves_keyed_by_path():
    path = profile(SOFTMAX)
    assert path.read_bytes().startswith(b"\n[")  # the leading newline the brief warns about
    p = read_profile(path)
    # device map {"CUDA": {"0": {"arch": "90", ...}}}: the arch, no model name
    assert (p.source.format, p.source.tool, p.source.arch, p.source.device) == ("proton", "proton", "sm_90", None)
    assert p.level == "kernel"
    d = p.dispatches.set_index("kernel")
    assert len(d) == 18 and d.index.is_unique  # 18 leaves; the same name under 3 scopes, keyed by path
    # ROOT -> tritonbench_run_op_softmax -> x_val_[4096, 256] -> triton_softmax -> softmax_kernel:
    # {"count": 1, "device_id": "0", "device_type": "CUDA", "time (ns)": 4671}
    triton = d.loc[f"{SCOPE}/triton_softmax/softmax_kernel"]
    assert (triton["calls"], triton["device_id"]) == (1, 0)
    assert triton["duration_total"] == pytest.approx(4671e-9) and triton["duration_mean"] == pytest.approx(4671e-9)
    # ... naive_softmax -> reduce_kernel<512, 1, sum>: "time (ns)": 3807 (mangled in the file, demangled here)
    assert d.loc[f"{SCOPE}/naive_softmax/{REDUCE_SUM}", "duration_total"] == pytest.approx(3807e-9)
    # the three triton softmax leaves: 4671 + 4672 + 4768 ns
    assert d[d.index.str.endswith("/softmax_kernel")]["duration_total"].sum() == pytest.approx(14111e-9)
    # ROOT says count 0 / time 0 (no roll-up) and is not a kernel
    assert not any(k.startswith("ROOT") for k in d.index)


def test_optional_flops_and_bytes_pass_through(tmp_path: Path):
    doc = json.loads(profile(SOFTMAX).read_text())
    leaf = doc[0]["children"][0]["children"][0]["children"][1]["children"][0]  # triton_softmax/softmax_kernel
    assert leaf["frame"]["name"] == "softmax_kernel"
    leaf["metrics"].update({"flops32": 1.5e7, "bytes": 8388608})
    path = tmp_path / "with-flops.hatchet"
    path.write_text("\n" + json.dumps(doc))
    d = read_profile(path).dispatches.set_index("kernel")
    row = d.loc[f"{SCOPE}/triton_softmax/softmax_kernel"]
    assert row["raw.flops32"] == 1.5e7 and row["raw.bytes"] == 8388608
    assert d["raw.bytes"].isna().sum() == 17


def test_inspect_and_errors(cli, tmp_path: Path):
    result = cli("inspect", "--json", profile(SOFTMAX))
    assert result.code == 0, result.err
    kernels = {k["kernel"]: k for k in result.json()["kernels"]}
    assert kernels[f"{SCOPE}/triton_softmax/softmax_kernel"]["metrics"]["duration_total"] == pytest.approx(4671e-9)
    cut = tmp_path / "cut.hatchet"
    cut.write_text(profile(SOFTMAX).read_text()[:5000])
    assert detect(cut, "profile").name == "proton"
    one_line_error(cli("inspect", cut), cut, "not valid JSON")


def test_impossible_leaves_become_missing_with_a_warning(tmp_path: Path):
    path = tmp_path / "odd.hatchet"
    path.write_text('\n[{"frame": {"name": "ROOT"}, "metrics": {}, "children": ['
                    '{"frame": {"name": "neg"}, "metrics": {"count": 1, "time (ns)": -5}, "children": []},'
                    '{"frame": {"name": "idle"}, "metrics": {"count": 0, "time (ns)": 0}, "children": []},'
                    '{"frame": {"name": "ok"}, "metrics": {"count": 2, "time (ns)": 10}, "children": []}]},'
                    ' {"CUDA": {"0": {"arch": "80"}}}]')
    p = read_profile(path)
    d = p.dispatches.set_index("kernel")
    assert list(d.index) == ["neg", "ok"]  # the leaf that never ran is no kernel
    assert pd.isna(d.loc["neg", "duration_total"]) and d.loc["ok", "duration_mean"] == pytest.approx(5e-9)
    assert p.source.arch == "sm_80"
    hip = path.read_text().replace("{\"CUDA\": {\"0\": {\"arch\": \"80\"}}}", "{\"HIP\": {\"0\": {\"arch\": \"gfx942\"}}}")
    path.write_text(hip)
    assert read_profile(path).source.arch == "gfx942"
    assert [o.what.split(" (")[0] for o in p.oddities] == ["impossible 'count' or 'time"]


def test_children_not_a_list_is_a_located_error(cli, tmp_path: Path):
    path = tmp_path / "odd.hatchet"
    path.write_text('\n[{"frame": {"name": "ROOT"}, "metrics": {}, "children": [{"frame": {"name": "s"}, '
                    '"metrics": {}, "children": 7}]}, {}]')
    one_line_error(cli("inspect", path), path, "call-tree node 'ROOT/s': 'children' is not a list")


def test_a_name_with_the_separator_is_still_a_name(tmp_path: Path):
    """The leaf ``operator/`` was left out as a leaf without a name (the joined path's
    last piece after '/' is empty); only a leaf whose own frame name is empty is."""
    path = tmp_path / "names.hatchet"
    path.write_text('\n[{"frame": {"name": "ROOT"}, "metrics": {}, "children": ['
                    '{"frame": {"name": "operator/"}, "metrics": {"count": 1, "time (ns)": 5}, "children": []},'
                    '{"frame": {"name": ""}, "metrics": {"count": 1, "time (ns)": 5}, "children": []}]}, {}]')
    p = read_profile(path)
    assert list(p.dispatches["kernel"]) == ["operator/"]
    assert [(o.what, o.count) for o in p.oddities] == [("call-tree leaf without a frame name left out", 1)]


@pytest.mark.parametrize(("devices", "arch"), [
    ('{"CUDA": {"0": {"arch": "90"}}}', "sm_90"), ('{"CUDA": {"0": {"arch": 80}}}', "sm_80"),
    ('{"HIP": {"0": {"arch": "gfx90a"}}}', "gfx90a"), ('{"CUDA": {"0": {"arch": "abc"}}}', None),
    ('{"CUDA": {"0": {"arch": "9.0"}}}', None), ('{"HIP": {"0": {"arch": "gfx90a; rm"}}}', None),
])
def test_device_map_arch(tmp_path: Path, devices: str, arch: str | None):
    """'sm_abc' and the like were taken as the architecture; now they are none, with a warning."""
    path = tmp_path / "arch.hatchet"
    path.write_text('\n[{"frame": {"name": "ROOT"}, "metrics": {}, "children": [{"frame": {"name": "k"}, '
                    '"metrics": {"count": 1, "time (ns)": 5}, "children": []}]}, ' + devices + "]")
    p = read_profile(path)
    assert p.source.arch == arch
    assert any("names no architecture" in o.what for o in p.oddities) == (arch is None)


def test_a_lone_surrogate_escape_in_a_frame_name_is_shown_not_fatal(tmp_path: Path):
    path = tmp_path / "surrogate.hatchet"
    path.write_text('\n[{"frame": {"name": "ROOT"}, "metrics": {}, "children": [{"frame": {"name": "k\\ud800"}, '
                    '"metrics": {"count": 1, "time (ns)": 5}, "children": []}]}, {}]')
    assert list(read_profile(path).dispatches["kernel"]) == ["k\ufffd"]


def test_sniffed_by_structure_past_a_long_first_name(tmp_path: Path) -> None:
    # A scope name longer than any head window before the node's other keys.
    path = tmp_path / "long.hatchet"
    path.write_text('[{"frame": {"name": "' + "x" * 100_000 + '", "type": "function"}, "metrics": {}, '
                    '"children": [{"frame": {"name": "k"}, "metrics": {"count": 1, "time (ns)": 5}, "children": []}]},'
                    ' {"CUDA": {"0": {"arch": "90"}}}]')
    assert detect(path, "profile").name == "proton"
    # the same structure behind a lone "{" inside a string is not confused
    other = tmp_path / "other.json"
    other.write_text('{"note": "[{\\"frame\\": 1, \\"metrics\\": 2, \\"children\\": 3}]"}')
    assert jsonsniff.keys(other, depth=64).keys == {"note": 1}


def test_mangled_names_are_demangled_to_the_key_other_tools_give(tmp_path: Path):
    import sqlite3

    # The real Proton profile: PyTorch kernels arrive mangled.
    kernels = {k.rsplit("/", 1)[-1] for k in read_profile(profile(SOFTMAX)).dispatches["kernel"]}
    assert not [k for k in kernels if k.startswith("_Z")]
    assert ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>, "
            "unsigned int, float, 4>>(at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, "
            "float, 4>)") in kernels
    # The same kernel in two formats: the Nsight Systems export keeps each kernel's
    # mangled name next to its demangled one; a Proton leaf named by the mangled one
    # gets the key the nsys reader gives that kernel. (Where NVIDIA's demangler left a
    # parameter list unexpanded, "(int, T2, T3)", the spellings cannot agree; see
    # perfcheck.ingest.names.)
    import re

    from perfcheck.ingest.names import gnu_style

    nsys = profile("nsys/nvidia-fuser-h200-nsys2025.1/report1.sqlite")
    with sqlite3.connect(f"file:{nsys}?mode=ro", uri=True) as con:
        pairs = con.execute(
            "SELECT DISTINCT M.value, D.value FROM CUPTI_ACTIVITY_KIND_KERNEL K JOIN StringIds M ON M.id = "
            "K.mangledName JOIN StringIds D ON D.id = K.demangledName WHERE M.value LIKE '_Z%' ORDER BY M.value"
        ).fetchall()
    con.close()
    pairs = [(m, gnu_style(pd.Series([d], dtype="string"))[0]) for m, d in pairs]
    comparable = [(m, d) for m, d in pairs if not re.search(r"\bT\d+\b", d)]
    assert len(comparable) >= 3
    leaves = ", ".join('{"frame": {"name": ' + json.dumps(m) + '}, "metrics": {"count": 1, "time (ns)": 10}, '
                       '"children": []}' for m, _ in comparable)
    path = tmp_path / "same.hatchet"
    path.write_text('[{"frame": {"name": "ROOT"}, "metrics": {}, "children": [' + leaves + ']}, {}]')
    assert read_profile(path).dispatches["kernel"].tolist() == [d for _, d in comparable]
    assert {d for _, d in comparable} <= set(read_profile(nsys).dispatches["kernel"])
