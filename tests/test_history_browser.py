"""The dashboard in a real browser: headless Chromium (Debian package ``chromium``)
loads every page at a desktop width and at 400 CSS pixels, and the test checks
that the console has no errors, that the page is no wider than the window, and
that the screenshot shows the charts (not a blank page). Skipped, with the
reason, where Chromium is not installed (``.ci/run`` installs it when apt is there).

Set ``PERFCHECK_SCREENSHOTS=DIR`` to keep the screenshots for a person to look at.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from dashboard_data import fill_store
from headless_chromium import Chromium, find_chromium
from perfcheck.history import detect, open_store
from perfcheck.history.chart import LINE, REGRESSION
from perfcheck.history.dashboard import history_view, write_site

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

WIDTHS = (1280, 400)


def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image  # matplotlib's own dependency

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def _share_of(pixels: np.ndarray, color: str, tolerance: int = 40) -> float:
    rgb = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return float((np.abs(pixels - rgb).sum(axis=2) <= tolerance).mean())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("dashboard")
    store = fill_store(root / "history.sqlite")
    with open_store(store, create=False) as opened:
        frame = opened.series()
    return write_site(history_view(frame, detect(frame)), root / "site")


@pytest.fixture(scope="module")
def browser() -> Chromium:
    with Chromium(CHROMIUM) as chromium:  # type: ignore[arg-type]
        yield chromium


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_render_without_errors_and_fit_the_window(site: list[Path], browser: Chromium, width: int) -> None:
    keep = os.environ.get("PERFCHECK_SCREENSHOTS")
    for page in site:
        loaded = browser.load(page.as_uri(), width=width)
        assert loaded.errors == [], (page.name, loaded.errors)
        assert not loaded.overflows, f"{page.name} is {loaded.scroll_width}px wide in a {loaded.inner_width}px window"
        pixels = _pixels(loaded.png)
        assert pixels.shape[1] == width
        not_white = float((pixels.min(axis=2) < 235).mean())
        assert not_white > 0.02, f"{page.name} at {width}px looks blank ({not_white:.1%} of pixels drawn)"
        if page.name != "index.html":
            # the charts are drawn: the series' blue line and points
            assert _share_of(pixels, LINE) > 0.001, page.name
        if page.name.startswith("suite-stencil"):
            assert _share_of(pixels, REGRESSION) > 0.0002  # the regression's marker and points
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / f"{page.stem}-{width}.png").write_bytes(loaded.png)


def test_the_browser_check_sees_console_errors(tmp_path: Path, browser: Chromium) -> None:
    """The harness itself: a page with a script error, a console.error and a missing
    image reports all three (so an empty error list above means something)."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
                    '<link rel="icon" href="data:,"></head><body><img src="missing.png">'
                    '<div style="width:900px">wide</div>'
                    '<script>console.error("drawn wrong"); notDefined();</script></body></html>')
    loaded = browser.load(page.as_uri(), width=400)
    text = " | ".join(loaded.errors)
    assert "drawn wrong" in text and "notDefined" in text and "missing.png" in text, text
    assert loaded.overflows
    assert shutil.which(CHROMIUM)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def large_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site of 2,000 series (perfcheck.history.site): an overview per suite, a page per
    kernel, the list of every kernel on pages of 64."""
    from test_history_site import fill_large

    from perfcheck.history import site
    from perfcheck.history.site import write_report

    root = tmp_path_factory.mktemp("large")
    with open_store(fill_large(root / "history.sqlite"), create=False) as store, pytest.MonkeyPatch.context() as patch:
        patch.setattr(site, "KERNELS_PER_PAGE", 64)
        write_report(store, root / "site", where={})
    return root / "site"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_pages_of_a_large_store_render(large_site: Path, browser: Chromium, width: int) -> None:
    from test_history_site import kernel

    from perfcheck.history.dashboard import suite_file
    from perfcheck.history.site import kernel_file, kernels_file

    keep = os.environ.get("PERFCHECK_SCREENSHOTS")
    for name in ("index.html", suite_file("big"), kernels_file("big"), kernels_file("big", 3),
                 kernel_file("big", "mi300x", kernel(30))):
        loaded = browser.load((large_site / name).as_uri(), width=width)
        assert loaded.errors == [], (name, loaded.errors)
        assert not loaded.overflows, f"{name} is {loaded.scroll_width}px wide in a {loaded.inner_width}px window"
        pixels = _pixels(loaded.png)
        assert float((pixels.min(axis=2) < 235).mean()) > 0.02, f"{name} at {width}px looks blank"
        if name.startswith("kernel-"):
            assert _share_of(pixels, LINE) > 0.001 and _share_of(pixels, REGRESSION) > 0.0002, name
        else:
            assert _share_of(pixels, REGRESSION) > 0.0002, name  # the open regressions, in red
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / f"large-{name.rsplit('.', 1)[0]}-{width}.png").write_bytes(loaded.png)
