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
    # ncu's tensor-pipe FLOPs run against the FP16 tensor roof (metrics.roofline), at
    # the clock gemm.csv records (smsp__cycles_elapsed.avg.per_second: 765 MHz, ncu's
    # base-clock lock): 312 TFLOP/s x 765 / 1410 MHz; the measured FP32 roof stays.
    assert drawn["tensor_rate_fp16"].label() == "FP16 tensor core 169.3 TFLOP/s (theoretical)"


def test_gemm_plot_files(gemm, tmp_path: Path) -> None:
    written = plot_roofline(gemm, tmp_path / "plots" / "gemm", suite="gemm")
    assert written == [tmp_path / "plots" / "gemm.png", tmp_path / "plots" / "gemm.svg"]
    png = written[0].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    texts = _svg_texts(written[1])
    assert "Roofline: suite gemm on NVIDIA A100 40GB" in texts
    assert "HBM 1.36 TB/s (empirical)" in texts and "HBM 1.555 TB/s (theoretical, dashed)" in texts
    assert "FP32 18.9 TFLOP/s (empirical)" in texts
    assert "FP16 tensor core 169.3 TFLOP/s (theoretical)" in texts
    assert "1  gemm_v0<float>  (73%)" in texts
    assert "2  randomInit<float>  (27%)" in texts
    assert any(t.startswith("ceilings: empirical from babelstream.txt, mixbench-log.txt; theoretical from arch database")
               and t.endswith("; theoretical roofs at the profiled SM clock 765 MHz (datasheet 1410 MHz)")
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
    # the stored run was slower: the kernel got faster, a green arrow
    assert "baseline → current, faster (hollow marker: baseline)" in _svg_texts(written[1])
    assert baseline_moves(gemm, None) == []


def test_vcopy_has_no_flops_but_an_instruction_roofline(vcopy, tmp_path: Path) -> None:
    assert roofline_points(vcopy) == []
    # no empty plot: nothing is written, and the reason is given instead
    assert plot_roofline(vcopy, tmp_path / "vcopy", suite="vcopy") == []
    assert not (tmp_path / "vcopy.png").exists()
    assert roofline.why_not_plotted(vcopy) == "no kernel has flops and byte counts (vecCopy (0 flops))"

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
    # roofline.csv's measured ceilings, every memory level labelled
    for label in ("HBM 1.389 TB/s (empirical)", "L2 5.03 TB/s (empirical)", "L1 9.242 TB/s (empirical)",
                  "LDS 18.13 TB/s (empirical)"):
        assert label in texts


def test_stencil_trace_has_no_counters(tmp_path: Path) -> None:
    if not STENCIL.exists():
        pytest.skip(f"example profile missing: {STENCIL}")
    stencil = analyse([STENCIL], arch="mi100")
    assert plot_instruction_roofline(stencil, tmp_path / "inst") == []
    assert list(tmp_path.iterdir()) == []
    assert plot_roofline(stencil, tmp_path / "stencil", suite="stencil") == []
    assert list(tmp_path.iterdir()) == []
    assert roofline.why_not_plotted(stencil).startswith("no kernel has flops and byte counts (OECloverDagFBCGPU (no flops counted)")


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


def _arrows(svg: Path) -> list[tuple[str, float]]:
    """(colour, length in pt) of every arrow shaft in the SVG (matplotlib writes an
    annotation's arrow as a quadratic path stroked in the arrow's colour, then its head)."""
    import re

    text = svg.read_text()
    out = []
    for colour in (roofline.ARROW_BETTER, roofline.ARROW_WORSE):
        pattern = r'<path d="M ([\d.-]+) ([\d.-]+) \nQ [\d.-]+ [\d.-]+ ([\d.-]+) ([\d.-]+) \n" style="fill: none; stroke: '
        for match in re.finditer(pattern + colour, text):
            x0, y0, x1, y1 = map(float, match.groups())
            out.append((colour, ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5))
    return out


@pytest.mark.parametrize("factor, colour", [(1.05, roofline.ARROW_WORSE), (1 / 1.05, roofline.ARROW_BETTER)])
def test_five_percent_change_draws_a_visible_arrow(gemm, tmp_path: Path, factor: float, colour: str) -> None:
    """A 5% change moves a point ~3 px on this log axis: the arrow is lengthened to
    stay visible, coloured by direction (the stored run was faster: slower now, red)."""
    stored_kernels = gemm.kernels.copy()
    stored_kernels["flop_rate"] = stored_kernels["flop_rate"] * factor
    stored = bl.from_analysis("gemm", dataclasses.replace(gemm, kernels=stored_kernels))
    written = plot_roofline(gemm, tmp_path / "gemm", suite="gemm", baseline=stored)
    arrows = _arrows(written[1])
    assert len(arrows) == 6 and {c for c, _ in arrows} == {colour}
    assert min(length for _, length in arrows) >= 12  # pt; the move itself is ~2 pt
    what = "slower" if colour == roofline.ARROW_WORSE else "faster"
    assert f"baseline → current, {what} (hollow marker: baseline)" in _svg_texts(written[1])


def test_unchanged_kernels_get_no_arrow(gemm, tmp_path: Path) -> None:
    stored = bl.from_analysis("gemm", gemm)
    written = plot_roofline(gemm, tmp_path / "gemm", suite="gemm", baseline=stored)
    assert _arrows(written[1]) == []


def test_flat_roofs_span_every_levels_ridge(gemm) -> None:
    """Hierarchical roofline: the compute roof starts at the fastest level's ridge, so
    L1's and L2's ridges lie on it, not only HBM's."""
    from matplotlib.figure import Figure

    peaks = Peaks(values={"hbm_bw": 1.36e12, "l2_bw": 4.5e12, "l1_bw": 14e12, "flop_rate_fp32": 18.9e12},
                  details=(), sources=(Source("ert.json", "ert-json", "ert"),))
    analysis = analyse([profile(GEMM)], arch="a100", peaks=peaks)
    drawn = [r for r in roofs(analysis) if r.name in ("hbm_bw", "l2_bw", "l1_bw", "flop_rate_fp32")]
    fig = Figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    limits = (1e-5, 1e3, 1e7, 1e15)
    ax.set_xlim(*limits[:2])
    ax.set_ylim(*limits[2:])
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    roofline._draw_roofs(ax, drawn, limits, 1.0, roofline._Labeller(ax, renderer, []))
    flat = [line for line in ax.get_lines() if line.get_ydata()[0] == line.get_ydata()[1] == 18.9e12]
    assert flat and flat[0].get_xdata()[0] == pytest.approx(18.9e12 / 14e12)  # the L1 ridge


def test_config_peaks_merge_with_the_workloads_roofline_csv() -> None:
    """A machine file with only HBM bandwidth does not drop roofline.csv's L1/L2/LDS
    ceilings: the user's figure wins where it has one, each ceiling names its file."""
    machine = ROOT / "examples" / "stencil" / "machines" / "mulan-mi100.toml"
    from perfcheck.ingest import read_peaks

    merged = analyse([profile(VCOPY)], peaks=read_peaks([machine]))
    own = analyse([profile(VCOPY)])
    assert merged.ceilings["hbm_bw"].value == pytest.approx(1.07546e12)
    assert "mixbench" in merged.ceilings["hbm_bw"].source or "mulan" in merged.ceilings["hbm_bw"].source
    for level in ("l2_bw", "l1_bw", "lds_bw"):
        assert merged.ceilings[level].value == own.ceilings[level].value
        assert merged.ceilings[level].source.startswith("roofline.csv")
    levels = {p.level for p in instruction_points(merged)}
    assert levels == {"HBM", "L2", "L1"}


def test_points_from_whole_columns_in_order_with_reasons() -> None:
    """Which kernels are drawn (the ten longest-running with FLOPs, a rate and bytes), in
    which order, and why the others are not: decided on whole columns."""
    from types import SimpleNamespace

    import numpy as np
    import pandas as pd

    from perfcheck.report import roofline

    n = 12
    placed = pd.DataFrame({"kernel": [f"k{i}" for i in range(n)], "duration_total": np.arange(1.0, n + 1),
                           "flops": 1e9, "flop_rate": 1e12, "hbm_bytes": 1e8, "l2_bytes": np.nan})
    odd = pd.DataFrame({"kernel": ["none", "zero", "still", "nobytes"], "duration_total": [50.0, 40.0, 30.0, 20.0],
                        "flops": [np.nan, 0.0, 1e9, 1e9], "flop_rate": [1e12, 1e12, np.nan, 1e12],
                        "hbm_bytes": [1e8, 1e8, 1e8, np.nan], "l2_bytes": np.nan})
    table = pd.concat([placed, odd], ignore_index=True)
    table.loc[n - 1, "l2_bytes"] = 2e8  # the longest-running placed kernel: an L2 point too
    points, missing, left_out = roofline._points(SimpleNamespace(kernels=table), roofline._FLOP)
    assert [p.kernel for p in points] == ["k11", "k11", *(f"k{i}" for i in range(10, 1, -1))]
    assert [(p.level, p.intensity) for p in points[:2]] == [("HBM", 10.0), ("L2", 5.0)]
    assert missing == ["none (no flops counted)", "zero (0 flops)", "still (no duration)", "nobytes (no byte counts)"]
    assert left_out == 2


# --- issue 18 §4: arrows read from before to after, every kernel visible, shared axes -------

from perfcheck.report.roofline import MIN_ARROW_PX, arrow_ends, axis_limits, spread  # noqa: E402


def _outside(point: tuple[float, float], centre: tuple[float, float], radius: float) -> bool:
    return ((point[0] - centre[0]) ** 2 + (point[1] - centre[1]) ** 2) ** 0.5 >= radius


@pytest.mark.parametrize("move", [(0.0, -20.0), (0.0, -60.0), (3.0, 4.0), (-80.0, 10.0), (0.0, 2.0)])
def test_arrow_starts_at_the_baseline_marker_and_its_head_stays_outside_both(move: tuple[float, float]) -> None:
    """A 30% slowdown is ~20 px on a log axis: the arrow used to start at the baseline's
    centre and end inside its marker, reading backwards. Now it leaves the baseline marker,
    points the way the kernel moved and its head touches no marker from inside."""
    old, r = (200.0, 300.0), 10.0
    new = (old[0] + move[0], old[1] + move[1])
    tail, head = arrow_ends(old, new, r, r)
    for end in (tail, head):
        assert _outside(end, old, r) and _outside(end, new, r), (tail, head)
    shaft = (head[0] - tail[0], head[1] - tail[1])
    assert shaft[0] * move[0] + shaft[1] * move[1] > 0  # from before to after
    assert (shaft[0] ** 2 + shaft[1] ** 2) ** 0.5 >= MIN_ARROW_PX - 1e-9
    if (move[0] ** 2 + move[1] ** 2) ** 0.5 > 2 * r + MIN_ARROW_PX + 2:  # room between: on the line, edge to edge
        assert abs(((tail[0] - old[0]) ** 2 + (tail[1] - old[1]) ** 2) ** 0.5 - (r + 1)) < 1e-6
        assert abs(((head[0] - new[0]) ** 2 + (head[1] - new[1]) ** 2) ** 0.5 - (r + 1)) < 1e-6
    assert arrow_ends(old, old, r, r) is None


def test_markers_on_one_spot_are_spread_so_each_shows() -> None:
    offsets = spread([(100.0, 100.0)] * 4 + [(300.0, 100.0)], [10.0] * 5)
    assert offsets[4] == (0.0, 0.0)  # alone: stays put
    placed = {(round(x, 6), round(y, 6)) for x, y in offsets[:4]}
    assert len(placed) == 4 and all(4.0 < (x * x + y * y) ** 0.5 < 10.0 for x, y in placed)


def test_four_kernels_on_one_point_are_four_markers(tmp_path: Path) -> None:
    """The stencil's four kernels sit on one point: four markers at four places in the
    SVG (not one red dot over the others), one shared tag."""
    from perfcheck.ingest import read_peaks

    stencil = ROOT / "examples" / "stencil"
    analysis = analyse([stencil / "results-after.csv"], arch="mi100",
                       peaks=read_peaks([stencil / "machines" / "mulan-mi100.toml"]))
    svg = plot_roofline(analysis, tmp_path / "after", suite="after")[1]
    import re

    text = svg.read_text()
    # each scatter marker is a <use> of its path at x/y; the four stencil kernels' markers
    uses = {(m[0], m[1]) for m in re.findall(r'<use xlink:href="#[^"]+" x="([\d.]+)" y="([\d.]+)"', text)}
    assert len(uses) >= 5  # four stencil kernels + hipcub, each at its own place
    assert "1, 2, 3, 4" in _svg_texts(svg)


def test_a_measured_compute_peak_is_the_compute_roof() -> None:
    """The stencil machine file has mixbench's fp32 21.99 TFLOP/s: the solid FP32 roof,
    with the datasheet's 23.1 dashed beside it."""
    from perfcheck.ingest import read_peaks

    stencil = ROOT / "examples" / "stencil"
    analysis = analyse([stencil / "results-after.csv"], arch="mi100",
                       peaks=read_peaks([stencil / "machines" / "mulan-mi100.toml"]))
    fp32 = next(r for r in roofs(analysis) if r.name == "flop_rate_fp32")
    assert fp32.kind == "empirical" and fp32.value == pytest.approx(21.98838e12)
    assert fp32.theoretical == pytest.approx(23.1e12)
    assert "FP32 21.99 TFLOP/s (empirical)" in fp32.label()


def test_plots_of_one_device_share_their_axes(tmp_path: Path) -> None:
    """`check --roofline` of the stencil's before and after suites: both pictures (FLOP and
    instruction) have the same axes, so the move reads from one to the other."""
    import re

    from perfcheck.cli import main

    config = ROOT / "examples" / "stencil" / "perfcheck.toml"
    assert main(["check", "--config", str(config), "--roofline", str(tmp_path), "--baseline-dir",
                 str(tmp_path / "b")]) in (0, 1)
    for stem in ("{}", "{}-instructions"):
        ticks = []
        for suite in ("before", "after"):
            texts = _svg_texts(tmp_path / f"{stem.format(suite)}.svg")
            ticks.append([t for t in texts if re.fullmatch(r"\$10\^\{-?\d+\}\$|[\d.]+( [kMGT]?FLOP/s)?", t)])
        assert ticks[0] == ticks[1] and ticks[0], stem


def test_axis_limits_hold_every_plot(gemm) -> None:
    alone = axis_limits([(gemm, None)])
    scaled = dataclasses.replace(gemm, kernels=gemm.kernels.assign(flop_rate=gemm.kernels["flop_rate"] / 1e4))
    both = axis_limits([(gemm, None), (scaled, None)])
    assert both is not None and alone is not None and both[2] < alone[2] and both[3] == alone[3]
