"""history detect: one finding per kernel x change, the same change on other metrics
inside it, and why (perfcheck.history.findings, perfcheck.history.listing).

The scenario is the stencil example's (examples/stencil): five nights of the register
version, then the LDS version (the change the seed's sprint undid) for five nights:
each of the four kernels gets slower because its occupancy halves, limited by LDS.
The store is filled through the CLI (check --json, history add), as a nightly job does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from perfcheck.history import Result, RunRecord, open_store
from perfcheck.history.changepoints import ChangePoint
from perfcheck.history.findings import ALL, findings, watched
from perfcheck.history.listing import text

pytestmark = pytest.mark.usefixtures("local_run")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "stencil"
T0 = 1_767_225_600.0
DAY = 86400.0
KERNELS = 4
# Metrics that are the duration's change seen again: never a row of their own.
SAME_CHANGE = {"duration_min", "duration_max", "duration_mean", "duration_total", "hbm_bw", "hbm_bw_pct", "gips",
               "instruction_rate", "gips_pct", "flop_rate", "roofline_pct"}


@pytest.fixture(autouse=True)
def _here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PERFCHECK_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)


def _config(tmp_path: Path, profile: str) -> Path:
    """One suite "stencil" (the same series every night) reading ``profile``."""
    path = tmp_path / f"{profile}.toml"
    path.write_text(
        f'[tool.perfcheck]\ndevice = "mi100"\npeaks = ["{EXAMPLE / "machines" / "mulan-mi100.toml"}"]\n'
        f'baseline_dir = "{tmp_path / "baselines"}"\n'
        f'[tool.perfcheck.suites.stencil]\nprofiles = ["{EXAMPLE / profile}"]\n'
        '[tool.perfcheck.suites.stencil.expect]\n"*Clover*FBCGPU*" = ["duration <= baseline + 5%", '
        '"occupancy >= 20%"]\n')
    return path


@pytest.fixture
def store(cli, tmp_path: Path) -> Path:  # noqa: ANN001
    """Ten nights: the register version, then the LDS version from night 5."""
    docs = {}
    for level in ("results-after.csv", "results-before.csv"):
        out = tmp_path / f"{level}.json"
        cli("check", "--config", _config(tmp_path, level), "--json", out)
        docs[level] = json.loads(out.read_text())
    files = []
    rng = np.random.default_rng(7)
    for night in range(10):
        doc = json.loads(json.dumps(docs["results-after.csv" if night < 5 else "results-before.csv"]))
        doc["run"].update(id=f"night-{night:02d}", time=T0 + night * DAY, commit=f"{night:02d}" + "c" * 38)
        # a night's own timing noise (0.5%), the same for every timing of a kernel
        for kernel, values in doc["suites"]["stencil"]["measurements"].items():
            jitter = float(np.exp(rng.normal(0.0, 0.005)))
            for metric in list(values):
                if metric.startswith("duration"):
                    values[metric] *= jitter
        path = tmp_path / f"night-{night:02d}.json"
        path.write_text(json.dumps(doc))
        files.append(path)
    assert cli("history", "add", *files, "--history", "h.sqlite").code == 0
    return tmp_path / "h.sqlite"


def test_one_finding_per_kernel_with_the_rest_inside_and_why(cli, store: Path) -> None:  # noqa: ANN001
    doc = cli("history", "detect", "--history", store, "--json").json()
    found = doc["findings"]
    assert len(found) == KERNELS and doc["recent_regressions"] == 0  # it started 5 runs ago
    for finding in found:
        assert (finding["metric"], finding["direction"], finding["run_id"]) == ("duration", "regression", "night-05")
        also = {m["metric"] for m in finding["also_moved"]}
        assert SAME_CHANGE & also and "occupancy_pct" in also and "lds_per_workgroup" in also
        assert all(m["run_id"] == "night-05" for m in finding["also_moved"])
        why = finding["diagnosis"]["text"]
        assert re.match(r"duration \+(89|90)\.\d%: occupancy", why) and "whole run moved" not in why and \
            "occupancy 40.0% -> 20.0% (limiter vgpr -> lds; lds_per_workgroup 0 B -> 24 KiB, vgpr 64 -> 52)" in why
        assert "hbm_bytes unchanged" in why and re.search(r"hbm_bw 8\d\.\d% -> 4\d\.\d% of peak$", why)


def test_the_text_has_one_row_per_kernel_within_80_columns(cli, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    with open_store(store, create=False) as opened:
        frame = opened.series()
        arches = {m: fp["arch"] for m, fp in opened.machines().items()}
    from perfcheck.history import detect

    found = findings(detect(frame), frame, arches=arches)
    out = text(found, width=80)
    assert max(len(line) for line in out.splitlines()) <= 80, out
    rows = [line for line in out.splitlines() if line.startswith("  ") and not line.startswith("    ")]
    assert len(rows) == 2 + KERNELS  # the header, its rule, one row per kernel
    assert all(" duration " in row for row in rows[2:])
    assert "why: occupancy 40.0% -> 20.0% (limiter vgpr -> lds;" in out
    whole = text(found)  # a pipe: whole names, one line per detail
    assert "EOCloverDagFBCGPU(float*, float const*, int)" in whole
    piped = cli("history", "detect", "--history", store)  # captured: not a terminal
    assert piped.out.count("% regression") == KERNELS and "4 findings in" in piped.out


def test_metric_selects_the_headline_and_all_widens(cli, store: Path) -> None:  # noqa: ANN001
    named = cli("history", "detect", "--history", store, "--metric", "hbm_bw", "--json").json()["findings"]
    assert {f["metric"] for f in named} == {"hbm_bw"}
    # the reduction beside the stencils: its bandwidth moved, its duration did not, no check watches it
    named = [f for f in named if "Clover" in f["kernel"]]
    assert len(named) == KERNELS
    assert all("duration" in {m["metric"] for m in f["also_moved"]} for f in named)
    everything = cli("history", "detect", "--history", store, "--metric", ALL, "--json").json()["findings"]
    clover = [f for f in everything if "Clover" in f["kernel"]]
    assert len(clover) == KERNELS and {f["metric"] for f in clover} == {"duration"}
    assert len(everything) > KERNELS  # the reduction's own change, hidden by default


def _point(kernel: str, metric: str, run: str, change: float, index: int = 10) -> ChangePoint:
    return ChangePoint("m", "s", kernel, metric, "s", run, None, T0 + index * DAY, index, 1.0, 1.0 + change / 100,
                       change, "regression" if change > 0 else "improvement", 1e-6, 10, 5)


def _frame(kernels: list[str], metrics: list[str], watched_metric: str | None = None):  # noqa: ANN202
    with open_store(":memory:") as store:  # an in-memory store builds the frame as the real one does
        for i in range(15):
            store.add(RunRecord(f"r{i:02d}", T0 + i * DAY), [
                Result("m", "s", k, m, 1.0, "s", outcome="passed" if m == watched_metric else None)
                for k in kernels for m in metrics])
        return store.series()


def test_default_selection_is_what_a_check_watches_and_duration() -> None:
    frame = _frame(["k"], ["duration", "hbm_bw", "hbm_bytes"], watched_metric="hbm_bw")
    assert watched(frame) == {("m", "s", "k", "duration"), ("m", "s", "k", "hbm_bw")}
    only_bytes = [_point("k", "hbm_bytes", "r10", 20.0)]
    assert findings(only_bytes, frame) == []  # a metric nobody asked about moved alone: --metric all shows it
    assert len(findings(only_bytes, frame, select=ALL)) == 1
    # a derived series that stepped one run late is the same change
    late = [_point("k", "duration", "r10", 10.0), _point("k", "hbm_bw", "r11", -9.0, index=11)]
    (one,) = findings(late, frame)
    assert one.headline.metric == "duration" and [cp.metric for cp in one.also] == ["hbm_bw"]


def test_whole_run_moved_when_most_kernels_moved_at_the_same_run() -> None:
    kernels = [f"k{i}" for i in range(6)]
    frame = _frame(kernels, ["duration"])
    points = [_point(k, "duration", "r10", 12.0 + i) for i, k in enumerate(kernels)]
    found = findings(points, frame)
    assert len(found) == 6
    assert all("whole run moved (+14.5%, every kernel)" in f.diagnosis.text() for f in found)
    one = findings(points[:1], frame)[0]
    assert "whole run moved" not in one.diagnosis.text()
    most = findings(points[:5], frame)  # five of six: changes they share, not the run's
    assert not any("whole run moved" in f.diagnosis.text() for f in most)


def test_the_dashboard_and_digest_group_and_say_why(cli, store: Path) -> None:  # noqa: ANN001
    assert cli("history", "report", "--history", store, "--markdown", "digest.md", "--html", "site").code == 0
    digest = Path("digest.md").read_text()
    regressions = digest.split("### Open regressions")[1].split("###")[0]
    rows = [line for line in regressions.splitlines() if line.startswith("| stencil |")]
    assert len(rows) == KERNELS  # one per kernel: duration_max, hbm_bw, ... are inside it
    for row in rows:
        assert "| duration |" in row and re.search(r"\\\(also [^)]*hbm\\_bw[^;]* -4\d\.\d%", row), row  # Markdown-escaped
        assert r"occupancy 40.0% -\> 20.0% \(limiter vgpr -\> lds; lds\_per\_workgroup 0 B -\> 24 KiB" in row
    assert "**4 open regressions**" in digest
    index = Path("site/index.html").read_text()
    assert index.count("limiter vgpr -&gt; lds") == KERNELS and "also moved: " in index


def test_a_run_wide_change_point_at_the_same_run_is_whole_run_moved() -> None:
    from perfcheck.history.changepoints import RUN_WIDE

    frame = _frame(["k"], ["duration"])
    wide = _point(RUN_WIDE, "duration", "r10", 8.0)
    found = findings([wide, _point("k", "duration", "r10", 9.0)], frame)
    assert sorted(f.kernel for f in found) == sorted(["k", RUN_WIDE])
    kernel = next(f for f in found if f.kernel == "k")
    # (the frame's values are flat: only the change points say what moved)
    assert kernel.diagnosis.reason() == "whole run moved (+8.0%, every kernel); no counter moved: time only " \
        "(clocks, placement, contention?)"
    assert next(f for f in found if f.kernel == RUN_WIDE).diagnosis is None  # the run itself: nothing to compare


def test_the_headline_series_stepping_again_next_run_is_a_finding_of_its_own() -> None:
    frame = _frame(["k"], ["duration"])
    steps = [_point("k", "duration", "r10", 10.0), _point("k", "duration", "r11", 10.0, index=11)]
    assert [f.headline.run_id for f in findings(steps, frame)] == ["r10", "r11"]


def test_a_kernels_own_sides_are_those_of_the_general_path() -> None:
    # _own_sides (history detect's, by codes) against _sides (a loop over the rows): the same
    # runs on each side, the metrics in the order of their first row among them, values in row
    # order; the names as text or as categoricals (the read path may give either)
    import pandas as pd

    from perfcheck.history.findings import _own_sides, _sides, run_places
    from perfcheck.history.partindex import PartIndex

    rng = np.random.default_rng(11)
    runs = [f"run-{i:02d}" for i in range(20)]
    rows = [(m, r, float(rng.normal(1.0, 0.1))) for r in runs for m in ("duration", "vgpr", "hbm_bytes", "calls")
            if not (m == "vgpr" and r < "run-05") and not (m == "calls" and r in ("run-09", "run-10"))]
    order = rng.permutation(len(rows))  # metrics and runs in no particular order
    frame = pd.DataFrame([rows[i] for i in order], columns=["metric", "run_id", "value"]).assign(
        machine="m1", suite="nightly", kernel="k<1>")
    positions = {("m1", "nightly"): {r: i for i, r in enumerate(runs)}}

    def own(head: ChangePoint, names: pd.DataFrame, where: dict) -> object:
        index = PartIndex.of(names)
        at = index.kernels.at(0)
        mine = where.get(("m1", "nightly"), {})
        if head.run_id not in mine:  # (explain does not ask)
            return None
        return _own_sides(head, index.series.of_rows(len(names))[at], [key[3] for key in index.series.keys],
                          index.run_code[at], run_places(mine, index.run_names), names["value"].to_numpy()[at],
                          mine[head.run_id])

    coded = frame.astype({c: "category" for c in ("machine", "suite", "kernel", "metric", "run_id")})
    stored = frame.sort_values(["metric", "run_id"], kind="stable").reset_index(drop=True)  # the store's order
    for run, before, after in (("run-10", 4, 3), ("run-03", 1, 30), ("run-19", 30, 1), ("run-00", 2, 2)):
        head = ChangePoint("m1", "nightly", "k<1>", "duration", "s", run, None, 0.0, 0, 1.0, 1.1, 10.0, "regression",
                           1e-5, before, after)
        for names in (frame, coded, stored):
            general = _sides(head, names, positions)
            mine = own(head, names, positions)
            if general is None:
                assert mine is None
                continue
            assert [list(side) for side in mine] == [list(side) for side in general]  # type: ignore[attr-defined]
            assert all(np.array_equal(a[m], b[m]) for a, b in zip(mine, general) for m in a)  # type: ignore[call-overload]
    assert _sides(head, frame, {}) is None
