"""Roofline plots from real analyses: the points and roofs they draw (values
computed from the profiles), files written (PNG + SVG, labelled), baseline arrows."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import profile
from perfcheck import baseline as bl
from perfcheck.analysis import analyse
from perfcheck.metrics.roofline import LEVELS
from perfcheck.model import PeakDetail, Peaks, Source
from perfcheck.report import roofline
from perfcheck.report.roofline import (
    baseline_moves,
    instruction_points,
    plot_instruction_roofline,
    plot_roofline,
    roofline_points,
    roofs,
    short_name,
)

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil" / "kernel_trace.csv"
GEMM = "ncu/gardenia-learningnote4dev/gemm.csv"
VCOPY = "omniperf/rocprofiler-compute-vcopy-MI200"
GEMM_KERNEL = "void gemm_v0<float>(T1*, T1*, T1*, int, int, int)"
INIT_KERNEL = "void randomInit<float>(T1*, int, int, unsigned int)"

# Hand-made measured peaks (a BabelStream Triad and a mixbench SP figure) so the
# A100 plot has empirical roofs with datasheet twins.
MEASURED = Peaks(
    values={"hbm_bw": 1.36e12, "flop_rate_fp32": 18.9e12},
    details=(PeakDetail("babelstream.txt", "Triad", 1.36e12, "B/s"),
             PeakDetail("mixbench-log.txt", "single precision", 18.9e12, "FLOP/s")),
    sources=(Source("babelstream.txt", "babelstream", "babelstream"),),
)


@pytest.fixture(scope="module")
def gemm():
    return analyse([profile(GEMM)], arch="a100", peaks=MEASURED)


@pytest.fixture(scope="module")
def vcopy():
    return analyse([profile(VCOPY)])


def _svg_texts(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_levels_match_the_metrics_module() -> None:
    assert list(roofline._LEVEL_CEILING.items()) == [(q, bw) for q, bw, _ai in LEVELS]


def test_gemm_points_are_the_profiles_intensities(gemm) -> None:
    points = {(p.kernel, p.level): p for p in roofline_points(gemm)}
    assert sorted(points) == sorted((k, lv) for k in (GEMM_KERNEL, INIT_KERNEL) for lv in ("HBM", "L2", "L1"))
    row = gemm.kernels.set_index("kernel").loc[GEMM_KERNEL]
    hbm = points[(GEMM_KERNEL, "HBM")]
    # FLOPs and bytes as ncu counted them in gemm.csv (one dispatch): 6.87798747136e13 FLOP, 4.394965922944e12 B
    assert row["flops"] == 68779874713600.0 and row["hbm_bytes"] == 4394965922944.0
    assert hbm.intensity == pytest.approx(68779874713600.0 / 4394965922944.0)
    assert hbm.intensity == pytest.approx(15.6497, rel=1e-5)
    assert hbm.rate == pytest.approx(68779874713600.0 / row["duration"])
    assert points[(GEMM_KERNEL, "L1")].intensity == pytest.approx(68779874713600.0 / 171805402726400.0)
    # share of kernel time: gemm 36.984 s of 36.984 + 2 x 6.715 s
    assert hbm.share == pytest.approx(36.984391 / (36.984391 + 13.42953), rel=1e-5)
    assert points[(INIT_KERNEL, "HBM")].share == pytest.approx(1 - hbm.share)


def test_gemm_roofs_empirical_with_datasheet_twins(gemm) -> None:
    drawn = {r.name: r for r in roofs(gemm)}
    assert list(drawn) == ["hbm_bw", "tensor_rate_fp16", "flop_rate_fp32"]
    hbm = drawn["hbm_bw"]
    assert (hbm.sloped, hbm.value, hbm.kind, hbm.theoretical) == (True, 1.36e12, "empirical", 1.555e12)
    assert hbm.label() == "HBM 1.36 TB/s (empirical)\nHBM 1.555 TB/s (theoretical, dashed)"
    fp32 = drawn["flop_rate_fp32"]
    assert (fp32.sloped, fp32.value, fp32.theoretical) == (False, 18.9e12, 19.5e12)
    # ncu's tensor-pipe FLOPs run against the FP16 tensor roof (metrics.roofline)
    assert drawn["tensor_rate_fp16"].label() == "FP16 tensor core 312 TFLOP/s (theoretical)"


def test_gemm_plot_files(gemm, tmp_path: Path) -> None:
    written = plot_roofline(gemm, tmp_path / "plots" / "gemm", suite="gemm")
    assert written == [tmp_path / "plots" / "gemm.png", tmp_path / "plots" / "gemm.svg"]
    png = written[0].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    texts = _svg_texts(written[1])
    assert "Roofline: suite gemm on NVIDIA A100 40GB" in texts
    assert "HBM 1.36 TB/s (empirical)" in texts and "HBM 1.555 TB/s (theoretical, dashed)" in texts
    assert "FP32 18.9 TFLOP/s (empirical)" in texts
    assert "FP16 tensor core 312 TFLOP/s (theoretical)" in texts
    assert "1  gemm_v0<float>  (73%)" in texts
    assert "2  randomInit<float>  (27%)" in texts
    assert any(t.startswith("ceilings: empirical from babelstream.txt, mixbench-log.txt; theoretical from arch database")
               for t in texts)
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["gemm.png", "gemm.svg"]
    # same data, same bytes (no dates in the files)
    again = plot_roofline(gemm, tmp_path / "again", suite="gemm")
    assert again[0].read_bytes() == png


def test_baseline_arrows_from_stored_metrics(gemm, tmp_path: Path) -> None:
    # The stored run was 25% slower at the same FLOPs and bytes.
    slower = gemm.kernels.copy()
    slower["flop_rate"] = slower["flop_rate"] / 1.25
    stored = bl.from_analysis("gemm", dataclasses.replace(gemm, kernels=slower))
    moves = {(new.kernel, new.level): (old, new) for old, new in baseline_moves(gemm, stored)}
    assert len(moves) == 6
    old, new = moves[(GEMM_KERNEL, "HBM")]
    assert old.intensity == pytest.approx(new.intensity)
    assert old.rate == pytest.approx(new.rate / 1.25)
    written = plot_roofline(gemm, tmp_path / "gemm", suite="gemm", baseline=stored)
    assert "baseline → current (hollow marker: baseline)" in _svg_texts(written[1])
    assert baseline_moves(gemm, None) == []


def test_vcopy_has_no_flops_but_an_instruction_roofline(vcopy, tmp_path: Path) -> None:
    assert roofline_points(vcopy) == []
    written = plot_roofline(vcopy, tmp_path / "vcopy", suite="vcopy")
    texts = _svg_texts(written[1])
    assert "not plotted: vecCopy (0 flops)" in texts
    assert "no kernel has flops and byte counts to place here" in texts
    # roofline.csv's measured ceilings, every memory level labelled
    for label in ("HBM 1.389 TB/s (empirical)", "L2 5.03 TB/s (empirical)", "L1 9.242 TB/s (empirical)",
                  "LDS 18.13 TB/s (empirical)", "FP64 20.31 TFLOP/s (empirical)", "FP32 21 TFLOP/s (empirical)"):
        assert label in texts

    points = {p.level: p for p in instruction_points(vcopy)}
    assert sorted(points) == ["HBM", "L1", "L2"]
    # 212992 wavefront instructions per dispatch; HBM bytes 15072341.33, L2 16777216, L1 33554432
    assert points["HBM"].intensity == pytest.approx(212992 / 15072341.333333, rel=1e-9)
    assert points["L2"].intensity == pytest.approx(212992 / 16777216)
    assert points["L1"].intensity == pytest.approx(212992 / 33554432)
    assert points["HBM"].rate == pytest.approx(12212844036.697248)
    inst = plot_instruction_roofline(vcopy, tmp_path / "vcopy-instructions", suite="vcopy")
    assert [p.name for p in inst] == ["vcopy-instructions.png", "vcopy-instructions.svg"]
    texts = _svg_texts(inst[1])
    assert "Instruction roofline: suite vcopy on MI200 (gfx90a)" in texts
    assert any("no peak instruction rate" in t for t in texts)


def test_stencil_trace_has_no_counters(tmp_path: Path) -> None:
    if not STENCIL.exists():
        pytest.skip(f"example profile missing: {STENCIL}")
    stencil = analyse([STENCIL], arch="mi100")
    assert plot_instruction_roofline(stencil, tmp_path / "inst") == []
    assert list(tmp_path.iterdir()) == []
    written = plot_roofline(stencil, tmp_path / "stencil", suite="stencil")
    texts = _svg_texts(written[1])
    assert "HBM 1.229 TB/s (theoretical)" in texts
    assert "FP64 11.5 TFLOP/s (theoretical)" in texts and "FP32 23.1 TFLOP/s (theoretical)" in texts
    assert any(t.startswith("not plotted: OECloverDagFBCGPU (no flops counted)") for t in texts)


def test_short_names() -> None:
    assert short_name(GEMM_KERNEL) == "gemm_v0<float>"
    assert short_name("void hipcub::DeviceReduceKernel<float, 256>(float const*, float*, int)") == (
        "hipcub::DeviceReduceKernel<float, 256>"
    )
    assert short_name("vecCopy(double*, double*, double*, int, int)") == "vecCopy"
    assert short_name("k" * 60) == "k" * 39 + "…"


def test_crowded_suite_shares_tags_and_names_what_is_left_out(gemm, tmp_path: Path) -> None:
    """Twelve kernels: the ten longest-running are drawn (numbered as in the legend),
    two at the very same spot share one tag instead of overprinting."""
    base = gemm.kernels[gemm.kernels["kernel"] == GEMM_KERNEL]
    rows = []
    for i in range(12):
        row = base.copy()
        row["kernel"] = f"void variant_{i:02d}<float>(float*)"
        row["duration_total"] = 100.0 - i  # variant_00 is the longest-running
        if i != 1:  # variant_00 and variant_01 stay on the same spot
            row["flop_rate"] = row["flop_rate"] / (i + 1) ** 2
        rows.append(row)
    import pandas as pd

    crowded = dataclasses.replace(gemm, kernels=pd.concat(rows, ignore_index=True))
    texts = _svg_texts(plot_roofline(crowded, tmp_path / "crowded")[1])
    assert "1, 2" in texts and "3" in texts and "10" in texts and "11" not in texts
    assert "1  variant_00<float>  (9%)" in texts
    assert "(2 shorter kernels not shown)" in texts
