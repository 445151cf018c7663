"""Itanium demangling for Proton's names (perfcheck.ingest.demangle)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import profile
from perfcheck.ingest import demangle as dm
from perfcheck.ingest import read_profile

# Two names from the real Proton profile (tritonbench softmax, H100) and a plain one.
MANGLED = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_6MaxOpsIfEEjfLi4EEEEEvT1_"
GNU = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, "
       "float, 4> >(at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, float, 4>)")


def test_runtime_demangles_and_leaves_other_names() -> None:
    assert dm.demangle([MANGLED, "softmax_kernel", "_Znot-a-name"]) == ([GNU, "softmax_kernel", "_Znot-a-name"], True)


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) not installed")
def test_cxxfilt_fallback_gives_the_same_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dm, "_runtime", lambda: None)
    assert dm.demangle([MANGLED, "softmax_kernel"]) == ([GNU, "softmax_kernel"], True)


def test_without_a_demangler_names_stay_mangled_with_a_warning(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setattr(dm, "_runtime", lambda: None)
    monkeypatch.setattr(dm.shutil, "which", lambda name: None)
    assert dm.demangle([MANGLED]) == ([MANGLED], False)
    p = read_profile(profile("proton/tritonbench-softmax-sm90/proton.hatchet"))
    assert p.dispatches["kernel"].str.contains("/_ZN2at6native").sum() == 15
    assert any("no C++ demangler found" in o.what for o in p.oddities)
