"""``history report --html`` of a store with thousands of series (``perfcheck.history.site``):
an overview per suite that lists only what moved and stays small however many series
there are, a page per kernel, links that resolve, a site replaced whole or not at all."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import one_line_error
from dashboard_data import Page, fill_store
from perfcheck.history import Result, RunRecord, open_store
from perfcheck.history import dashboard as board
from perfcheck.history import site as site_module
from perfcheck.history.site import kernel_file, kernels_file, write_report

T0 = 1_767_225_600.0
DAY = 86400.0
KERNELS = 200
METRICS = 10  # 2,000 series
RUNS = 6
STEP_AT = 3  # every kernel 10% slower from here (the whole run moved), every 30th 40%


def kernel(k: int) -> str:
    return f"void ck::kernel_gemm<ck::half_t, {k}, ck::tensor_layout::gemm::RowMajor>(ck::Argument) [clone .kd]"


def fill_large(path: Path) -> Path:
    rng = np.random.default_rng(3)
    with open_store(path) as store:
        for run in range(RUNS):
            rows = []
            for k in range(KERNELS):
                step = (1.4 if k % 30 == 0 else 1.1) if run >= STEP_AT else 1.0
                duration = 1e-4 * (1 + k % 7) * step * float(np.exp(rng.normal(0, 0.005)))
                rows += [Result("mi300x", "big", kernel(k), "duration", duration, "s", outcome="passed",
                                high=1.25e-4 * (1 + k % 7)),
                         Result("mi300x", "big", kernel(k), "occupancy", 40.0 + rng.normal(0, 0.2), "%",
                                outcome="passed"),
                         Result("mi300x", "big", kernel(k), "hbm_bw", 1e9 / duration, "B/s")]
                rows += [Result("mi300x", "big", kernel(k), f"counter_{m}", float(100 + m), "count")
                         for m in range(METRICS - 3)]
            store.add(RunRecord(f"night-{run:02d}", T0 + run * DAY, commit=f"{run + 1:040x}"), rows)
    return path


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fill_large(tmp_path_factory.mktemp("large") / "history.sqlite")


@pytest.fixture(scope="module")
def written(large: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site") / "site"
    with open_store(large, create=False) as store:
        done = write_report(store, target, where={})
    assert done.kernel_pages == KERNELS
    return target


def _links(page: Path) -> list[str]:
    return [a.attrs["href"] for a in Page(page.read_text()).find("a")]


def test_the_overview_lists_what_moved_and_stays_small(written: Path) -> None:
    overview = written / board.suite_file("big")
    size = overview.stat().st_size
    assert size < 400_000, size  # 3,000 series; a page of every chart would be tens of MB
    text = overview.read_text()
    page = Page(text)
    assert not page.find("svg", "trend") and not page.find("script")
    # every kernel moved at STEP_AT: the lists hold the worst OVERVIEW_ROWS, and say so
    regressions = [e for e in page.elements if e.tag == "td" and e.attrs.get("data-label") == "change"]
    assert len(regressions) == site_module.OVERVIEW_ROWS
    listed = re.search(rf"The worst {site_module.OVERVIEW_ROWS} of (\d+):", text)
    assert listed and int(listed[1]) > KERNELS * 0.9, listed  # about every kernel's duration
    assert "+40.0%" in text or "+39." in text or "+40." in text  # the worst first: the 40% kernels
    changed = [e for e in page.find("table", "changed")]
    assert changed and "Series that changed (" in text and "largest latest changes of" in text
    assert "Outside budget in the latest run" in text
    kernels = (written / kernels_file("big")).read_text()
    assert kernels.count('class="kernel"') == KERNELS


def test_every_link_resolves(written: Path) -> None:
    pages = [written / "index.html", written / board.suite_file("big"), written / kernels_file("big"),
             written / kernel_file("big", "mi300x", kernel(0)), written / kernel_file("big", "mi300x", kernel(7))]
    for page in pages:
        for href in _links(page):
            target, _, anchor = href.partition("#")
            assert (written / target).is_file(), (page.name, href)
            if anchor:
                assert f'id="{anchor}"' in (written / target).read_text(), (page.name, href)
    kernel_pages = sorted(p.name for p in written.glob("kernel-*.html"))
    assert len(kernel_pages) == KERNELS
    assert {p.name for p in written.iterdir()} == {"index.html", board.suite_file("big"), kernels_file("big"),
                                                    *kernel_pages}


def test_a_kernel_page_charts_its_series(written: Path) -> None:
    text = (written / kernel_file("big", "mi300x", kernel(30))).read_text()
    page = Page(text)
    ids = {e.attrs["id"] for e in page.find("figure")}
    assert board.kernel_anchor("mi300x", kernel(30), "duration") in ids
    assert board.kernel_anchor("mi300x", kernel(30), "occupancy") in ids
    assert len(page.find("circle", "run")) >= 2 * RUNS
    assert page.find("g", "regression")  # the 40% step marked
    assert f"the same in all {RUNS} runs: counter_0 100" in text
    assert not page.find("script")


def test_the_site_is_replaced_whole_or_not_at_all(written: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import shutil

    target = tmp_path / "site"
    shutil.copytree(written, target)  # a large site written before
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    small = fill_store(tmp_path / "small.sqlite")
    real = board.suite_html

    def failing(*args: object, **kwargs: object) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(board, "suite_html", failing)
    with open_store(small, create=False) as store, pytest.raises(OSError, match="disk full"):
        write_report(store, target, where={})
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before  # the old site, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "small.sqlite"]  # no half-built folder left
    monkeypatch.setattr(board, "suite_html", real)
    killed = tmp_path / ".site.999999999.0badc0de.tmp"  # a run killed while building (its pid is gone)
    killed.mkdir()
    (killed / "index.html").write_text("half")
    with open_store(small, create=False) as store:
        write_report(store, target, where={})
    # the new site whole, the old one's pages gone with it
    assert sorted(p.name for p in target.iterdir()) == ["index.html", board.suite_file("cpu"),
                                                        board.suite_file("stencil")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "small.sqlite"]


def test_a_folder_of_other_files_is_not_replaced(cli, large: Path, tmp_path: Path) -> None:  # noqa: ANN001
    (tmp_path / "notes.txt").write_text("mine")
    one_line_error(cli("history", "report", "--history", large, "--html", tmp_path), None, "holds other files")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_the_site_of_a_store_on_either_backend(store_at, tmp_path: Path) -> None:  # noqa: ANN001
    """SQLite and PostgreSQL: the site written part by part is the whole view's site."""
    from perfcheck.history.dashboard import history_view_of, write_site

    location = fill_store(store_at())  # type: ignore[arg-type]
    with open_store(location, create=False) as store:
        done = write_report(store, tmp_path / "site", where={}, rows=30)  # a part per kernel
        expected = write_site(history_view_of(store.series(), arches={}), tmp_path / "whole")
    assert [p.name for p in done.pages] == [p.name for p in expected]
    for page in expected:
        assert (tmp_path / "site" / page.name).read_text() == page.read_text(), page.name


def test_many_series_of_few_runs_get_the_overview_too(large: Path, tmp_path: Path) -> None:
    """2,000 series of 3 runs are 6,000 values, but 2,000 charts on one page (1.6 MB): a
    suite is kept on one page only while it has few series too."""
    with open_store(large, create=False) as store:
        done = write_report(store, tmp_path / "site", where={}, last=3)
    assert done.kernel_pages == KERNELS
    assert (tmp_path / "site" / board.suite_file("big")).stat().st_size < 400_000


@pytest.mark.parametrize("where", [".", ".."])
def test_the_current_folder_or_one_above_it_is_refused(cli, large: Path, tmp_path: Path, where: str,  # noqa: ANN001
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The site is built beside its folder and renamed onto it: `--html .` (in an empty
    folder) cannot be, and once gave an internal error; now one line, nothing written."""
    inside = tmp_path / "empty"
    inside.mkdir()
    monkeypatch.chdir(inside)
    one_line_error(cli("history", "report", "--history", large, "--html", where), None, "is the current folder",
                   "--html site")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"] and not any(inside.iterdir())


def test_a_folder_that_cannot_be_written_is_one_line(cli, large: Path, tmp_path: Path) -> None:  # noqa: ANN001
    """An OSError while the site or an export is written (here: its folder read-only)
    is the user's to fix: exit 2, one line naming the path, nothing left behind."""
    from contextlib import nullcontext

    from tests.test_hardening_history import _read_only

    parent = tmp_path / "reports"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        # root writes through permission bits: a read-only mount then (skips where none)
        with _read_only(parent) if os.access(parent, os.W_OK) else nullcontext(parent):
            one_line_error(cli("history", "report", "--history", large, "--html", parent / "site"), parent,
                           "cannot write")
            one_line_error(cli("history", "export", "--history", large, "--openmetrics", parent / "om.txt"), parent,
                           "cannot write")
    finally:
        parent.chmod(0o755)
    assert not any(parent.iterdir())


def test_the_list_of_every_kernel_is_split_into_pages(large: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of every kernel grew with the suite (1.2 MB at 2,000 kernels, ~6 MB at
    10,000): the list is split, KERNELS_PER_PAGE a page, each page linking to the others,
    together every kernel once, in (machine, name) order."""
    monkeypatch.setattr(site_module, "KERNELS_PER_PAGE", 64)
    with open_store(large, create=False) as store:
        write_report(store, tmp_path / "site", where={})
    site = tmp_path / "site"
    names = [kernels_file("big", i) for i in range(4)]  # 200 kernels: 64 + 64 + 64 + 8
    assert names[0] == kernels_file("big") and sorted(p.name for p in site.glob("kernels-*")) == sorted(names)
    listed: list[str] = []
    for i, name in enumerate(names):
        text = (site / name).read_text()
        page = Page(text)
        links = [a.attrs["href"] for a in page.find("a")]
        rows = page.find("a", "kernel")
        assert len(rows) == (64 if i < 3 else 8), name
        listed += [a.text for a in rows]
        hrefs = [a.attrs["href"] for a in rows]
        assert hrefs == [kernel_file("big", "mi300x", a.text) for a in rows]
        # the other pages linked (above and below the list), this one named
        assert {h for h in links if h.startswith("kernels-")} == set(names) - {name}, name
        assert f"kernels {i * 64 + 1:,} to {i * 64 + len(rows):,} of 200" in text and f"page {i + 1} of 4" in text
        assert "<h1>Kernels of suite big (200)</h1>" in text
        for href in links:
            assert (site / href.partition("#")[0]).is_file(), (name, href)
    assert listed == sorted(kernel(k) for k in range(KERNELS))
    assert {p.name for p in site.glob("kernel-*")} == {kernel_file("big", "mi300x", k) for k in listed}
    # the overview's "every kernel" link is the first page
    assert f'href="{kernels_file("big")}"' in (site / board.suite_file("big")).read_text()


def test_a_kernel_page_shows_the_stored_values(large: Path, written: Path) -> None:
    """The numbers on a kernel page are the store's: each chart's runs table (newest
    first, with their commits) and its caption's latest value."""
    from html import unescape

    from perfcheck.units import format_value

    name = kernel(30)
    text = (written / kernel_file("big", "mi300x", name)).read_text()
    with open_store(large, create=False) as store:
        frame = store.series(kernel=name)
    for metric in ("duration", "occupancy"):
        stored = frame[frame["metric"] == metric].sort_values("time")
        unit = str(stored["unit"].iloc[-1])
        figure = text.split(f'id="{board.kernel_anchor("mi300x", name, metric)}"')[1].split("</figure>")[0]
        shown = [unescape(v) for v in re.findall(r'data-label="value">([^<]*)<', figure)]
        assert shown == [format_value(v, unit) for v in stored["value"].tolist()[::-1]], metric
        assert f"latest {format_value(float(stored['value'].iloc[-1]), unit)}," in unescape(figure)
        commits = re.findall(r'data-label="commit"><code>([0-9a-f]+)</code>', figure)
        assert commits == [c[:12] for c in stored["commit"].tolist()[::-1]]


def test_kernel_pages_of_names_as_categoricals(large: Path) -> None:
    """The read path may give a part's names as Categoricals: the same kernel pages and
    digest facts as of text (no pandas warning about unobserved categories)."""
    import warnings

    import pandas as pd

    from perfcheck.history import detect

    with open_store(large, create=False) as store:
        frame = store.series()
    points = detect(frame)
    coded = frame.copy()
    for column in ("machine", "suite", "kernel", "metric", "run_id"):
        coded[column] = coded[column].astype(pd.CategoricalDtype(sorted(coded[column].unique())))

    def made(part: pd.DataFrame) -> tuple[list[str], str]:
        prepared = board.prepare(board.history_view(part, points))
        facts = board.DigestFacts.of_prepared(prepared)
        return ([p.html for p in board.kernel_pages(prepared, suite="big", back=board.suite_file("big"))],
                board.digest_text(facts, title="t"))

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert made(coded) == made(frame)
