"""The history dashboard's HTML and Markdown, parsed: what a person finds on the
pages (regressions, charts, commits, budget bands) and what must never be there
(a script, a resource from the network, unescaped kernel names)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard_data import COPY, NIGHTS, STENCIL, STEP_AT, Page, commit, fill_store
from perfcheck.history import detect, open_store
from perfcheck.history.chart import nice_ticks, trend_svg
from perfcheck.history.dashboard import (
    HistoryView,
    history_view,
    index_html,
    kernel_anchor,
    markdown_digest,
    open_regressions,
    suite_file,
    suite_html,
    write_site,
)


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> HistoryView:
    path = fill_store(tmp_path_factory.mktemp("history") / "history.sqlite")
    with open_store(path, create=False) as store:
        frame = store.series()
    return history_view(frame, detect(frame))


def _no_outside_world(text: str) -> None:
    """Works offline: no script, no stylesheet or image from anywhere, no web font."""
    page = Page(text)
    assert not page.find("script")
    assert not [e for e in page.find("link") if e.attrs.get("rel") != "icon"]
    for element in page.elements:
        for name in ("src", "href", "xlink:href"):
            value = element.attrs.get(name, "")
            assert not re.match(r"^(https?:)?//", value), (element.tag, value)
    assert "@import" not in text and "url(" not in text


def test_index_lists_the_open_regression_and_links_every_suite(view: HistoryView, tmp_path: Path) -> None:
    paths = write_site(view, tmp_path / "site")
    assert [p.name for p in paths] == ["index.html", suite_file("cpu"), suite_file("stencil")]
    index = (tmp_path / "site" / "index.html").read_text()
    page = Page(index)
    assert page.doctype.lower() == "doctype html"
    assert page.find("meta") and any(e.attrs.get("name") == "viewport" for e in page.find("meta"))
    rows = [e for e in page.find("tr") if "table" in e.parents]
    regression_rows = [e for e in page.elements if e.tag == "td" and e.attrs.get("data-label") == "change"]
    assert len(regression_rows) == 1  # the stencil duration step; the bandwidth step is an improvement
    assert "Open regressions (1)" in index
    assert STENCIL.replace("<", "&lt;").replace(">", "&gt;") in index
    assert re.search(r"\+1[12]\.\d%", index)
    assert commit(STEP_AT)[:12] in index
    # every link leads to a page that was written, to an anchor that exists there
    for link in page.find("a"):
        target, _, anchor = link.attrs["href"].partition("#")
        assert (tmp_path / "site" / target).is_file(), target
        if anchor:
            assert f'id="{anchor}"' in (tmp_path / "site" / target).read_text()
    assert len(rows) >= 3
    _no_outside_world(index)


def test_suite_page_has_a_chart_per_kernel_and_metric(view: HistoryView) -> None:
    text = suite_html(view, "stencil")
    page = Page(text)
    charts = page.find("svg", "trend")
    assert len(charts) == 3  # stencil: duration, hbm_bw; copy: duration
    figures = {e.attrs["id"] for e in page.find("figure")}
    machine = view.series["machine"].iloc[0]
    assert figures == {kernel_anchor(machine, STENCIL, "duration"), kernel_anchor(machine, STENCIL, "hbm_bw"),
                       kernel_anchor(machine, COPY, "duration")}
    # one point per run, each with its commit on hover
    points = page.find("circle", "run")
    assert len(points) == 3 * NIGHTS
    titles = [e.text for e in page.find("title") if "circle" in e.parents]
    assert sum(commit(STEP_AT) in t for t in titles) == 3
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC, commit [0-9a-f]{40}: ", t) for t in titles)
    # change points marked: one regression, one improvement, each with its commit on hover
    assert len(page.find("g", "regression")) == 1
    assert len(page.find("g", "improvement")) == 1
    tips = [e.text for e in page.find("title") if "g" in e.parents and "circle" not in e.parents]
    assert any(t.startswith("regression at") and commit(STEP_AT) in t for t in tips)
    # the runs behind every chart, newest first, with their commits
    tables = [e for e in page.find("table") if "details" in e.parents]
    assert len(tables) == 3
    commits = [e.text for e in page.find("code") if "td" in e.parents and "details" in e.parents]
    assert commits[0] == commit(NIGHTS - 1)[:12]
    _no_outside_world(text)


def test_budget_band_and_points_outside_it() -> None:
    times = pd.date_range("2026-11-01", periods=6, freq="D", tz="UTC")
    points = pd.DataFrame({"time": times, "value": [1.0, 1.1, 0.9, 1.0, 1.6, 1.0], "low": np.nan,
                           "high": [1.5] * 6, "commit": [f"c{i}" for i in range(6)]})
    svg = trend_svg(points, unit="s", label="duration of k")
    page = Page(svg)
    band = page.find("polygon", "band")
    assert len(band) == 1
    ys = [float(p.split(",")[1]) for p in band[0].attrs["points"].split()]
    circles = page.find("circle", "run")
    cys = [float(c.attrs["cy"]) for c in circles]
    # the band runs from the 1.5 s limit (above every point but the 1.6 s one) to the bottom
    assert min(ys) > cys[4] and min(ys) < min(cys[:4] + cys[5:])
    assert [c.attrs["fill"] for c in circles].count("#c62828") == 1  # the one point outside its budget
    assert "outside its budget" in [e.text for e in page.find("title") if "circle" in e.parents][4]


def test_points_higher_values_higher_and_gaps_break_the_line() -> None:
    times = pd.date_range("2026-11-01", periods=5, freq="D", tz="UTC")
    points = pd.DataFrame({"time": times, "value": [1e-3, 2e-3, np.nan, 3e-3, 4e-3]})
    page = Page(trend_svg(points, unit="s", label="x"))
    circles = page.find("circle", "run")
    assert len(circles) == 4  # the missing value is not drawn as zero
    cys = [float(c.attrs["cy"]) for c in circles]
    cxs = [float(c.attrs["cx"]) for c in circles]
    assert cys == sorted(cys, reverse=True) and cxs == sorted(cxs)
    path = page.find("path", "series")[0].attrs["d"]
    assert path.count("M") == 2  # the line breaks at the gap
    labels = [e.text for e in page.find("text")]
    assert "1 ms" in labels and "4 ms" in labels  # y ticks in the metric's unit


def test_a_single_run_and_no_values_still_draw() -> None:
    one = pd.DataFrame({"time": [pd.Timestamp("2026-11-01", tz="UTC")], "value": [5.0], "low": [4.0], "high": [np.nan]})
    page = Page(trend_svg(one, unit="%", label="occupancy"))
    assert len(page.find("circle", "run")) == 1 and len(page.find("polygon", "band")) == 1
    empty = pd.DataFrame({"time": [pd.Timestamp("2026-11-01", tz="UTC")], "value": [np.nan]})
    assert "no value recorded" in trend_svg(empty, unit="s", label="d")


def test_nice_ticks() -> None:
    assert nice_ticks(0.0, 10.0).tolist() == [0.0, 2.5, 5.0, 7.5, 10.0]
    assert nice_ticks(2.61e-3, 3.02e-3).tolist() == pytest.approx([2.7e-3, 2.8e-3, 2.9e-3, 3.0e-3])
    assert nice_ticks(1.0, 1.0).tolist() == [1.0]


def test_kernel_names_are_escaped_everywhere(tmp_path: Path) -> None:
    evil = 'k<script>alert("x")</script>&"quoted"'
    times = pd.date_range("2026-11-01", periods=3, freq="D", tz="UTC")
    series = pd.DataFrame({"suite": "s<b>", "kernel": evil, "metric": "duration", "unit": "s", "time": times,
                           "value": [1.0, 1.0, 1.0], "commit": ['"><img src=x>', "b", "c"]})
    for path in write_site(HistoryView(series), tmp_path):
        text = path.read_text()
        assert "<script" not in text and "<img" not in text and "<b>" not in text
        Page(text)  # well formed
    assert "`" not in evil and "<script" not in markdown_digest(HistoryView(series)).replace("&lt;script", "")


def test_a_regression_followed_by_a_recovery_is_not_open() -> None:
    times = pd.date_range("2026-11-01", periods=3, freq="D", tz="UTC")
    series = pd.DataFrame({"suite": "s", "kernel": "k", "metric": "duration", "unit": "s", "time": times,
                           "value": [1.0, 1.2, 1.0]})
    changes = pd.DataFrame({"suite": "s", "kernel": "k", "metric": "duration", "time": times[1:],
                            "before": [1.0, 1.2], "after": [1.2, 1.0], "change_pct": [20.0, -16.7],
                            "kind": ["regression", "improvement"]})
    assert open_regressions(HistoryView(series, changes)).empty
    assert len(open_regressions(HistoryView(series, changes.iloc[:1]))) == 1
    assert "No open regressions" in index_html(HistoryView(series, changes))


def test_markdown_digest(view: HistoryView) -> None:
    text = markdown_digest(view, link="https://perf.example/nightly/")
    lines = text.splitlines()
    assert lines[0] == "## perfcheck history"
    assert "**1 open regression**" in text
    assert "Charts: https://perf.example/nightly/" in text
    table = [line for line in lines if line.startswith("| stencil |")]
    assert len(table) == 1
    assert f"`{STENCIL}`" in table[0] and "duration" in table[0]
    assert re.search(r"\| 2\.\d+ ms \| 2\.\d+ ms \| \+1[12]\.\d% \| - \|$", table[0])  # why: no findings given
    assert commit(STEP_AT)[:12] in table[0]
    quiet = markdown_digest(HistoryView(view.series[view.series["suite"] == "cpu"], view.changes.iloc[:0]))
    assert "No open regressions, every latest value within its budget." in quiet
    assert "###" not in quiet


def test_view_needs_the_columns_it_draws() -> None:
    with pytest.raises(ValueError, match="lacks columns"):
        index_html(HistoryView(pd.DataFrame({"suite": ["s"]})))


def test_runs_are_spaced_evenly_and_labelled_with_their_time() -> None:
    from perfcheck.history.chart import run_ticks

    nights = pd.Series(pd.date_range("2026-10-01 02:00", periods=30, freq="D", tz="UTC"))
    ticks = run_ticks(nights)
    assert [i for i, _ in ticks] == [0, 7, 14, 22, 29] and ticks[0][1] == "Oct 01" and ticks[-1][1] == "Oct 30"
    burst = pd.Series(pd.to_datetime(["2026-10-01 02:00:00", "2026-10-01 02:00:09", "2026-10-01 02:00:30"], utc=True))
    assert [t for _, t in run_ticks(burst)] == ["02:00:00", "02:00:09", "02:00:30"]
    # a weekend without runs takes no room: equal steps between runs, whatever the dates
    irregular = pd.DataFrame({"time": pd.to_datetime(["2026-10-01", "2026-10-02", "2026-10-05", "2026-10-06"], utc=True),
                              "value": [1.0, 1.0, 1.0, 1.0]})
    cxs = [float(c.attrs["cx"]) for c in Page(trend_svg(irregular, unit="s", label="x")).find("circle", "run")]
    assert np.diff(cxs) == pytest.approx([cxs[1] - cxs[0]] * 3, abs=0.25)  # coordinates are rounded to 0.1


def test_checked_metrics_first_the_others_collapsed() -> None:
    """A store keeps every metric of a kernel; a slower kernel moves duration_max and
    duration_total too. The charts and regressions of checked metrics (and duration)
    come first; the rest are one click away, counted."""
    times = pd.date_range("2026-11-01", periods=6, freq="D", tz="UTC")
    rows = []
    for metric, outcome in (("duration", "passed"), ("hbm_bw", "passed"), ("duration_max", None), ("calls", None)):
        rows.append(pd.DataFrame({"suite": "s", "kernel": "k", "metric": metric, "unit": "s", "time": times,
                                  "value": [1.0, 1.0, 1.0, 2.0, 2.0, 2.0], "outcome": outcome}))
    series = pd.concat(rows, ignore_index=True)
    changes = pd.DataFrame({"suite": "s", "kernel": "k", "metric": ["duration", "duration_max"], "time": times[3],
                            "before": 1.0, "after": 2.0, "change_pct": 100.0, "kind": "regression"})
    view = HistoryView(series, changes)
    index = Page(index_html(view))
    assert any(e.text == "Open regressions (1)" for e in index.find("h2"))
    more = index.find("details", "more")
    assert len(more) == 1
    assert [e.text for e in index.elements if e.tag == "summary"] == ["1 more on other metrics (duration_max)"]
    page = Page(suite_html(view, "s"))
    collapsed = [e for e in page.find("svg", "trend") if "details" in e.parents]
    # calls moves exactly with duration (a constant times it): named, not drawn again;
    # duration_max has a change point of its own: drawn
    assert len(page.find("svg", "trend")) == 3 and len(collapsed) == 1
    assert "in step with duration (a constant times it or over it, so its chart is the duration chart's): calls" in \
        suite_html(view, "s")
    digest = markdown_digest(view)
    assert "**1 open regression**" in digest and "Also 1 open regression on metrics no expectation checks" in digest


def test_constant_and_whole_number_series_get_distinct_ticks() -> None:
    times = pd.date_range("2026-11-01", periods=4, freq="D", tz="UTC")
    zero = Page(trend_svg(pd.DataFrame({"time": times, "value": [0.0] * 4}), unit="B", label="scratch"))
    labels = [e.text for e in zero.find("text") if e.attrs.get("text-anchor") == "end"]
    assert labels == ["0 B", "1 B"]
    assert nice_ticks(0.0, 3.2, integer=True).tolist() == [0.0, 1.0, 2.0, 3.0]
    flat = Page(trend_svg(pd.DataFrame({"time": times, "value": [2e-3] * 4}), unit="s", label="d"))
    assert len({e.text for e in flat.find("text") if e.attrs.get("text-anchor") == "end"}) >= 3


def test_a_failed_check_counts_as_outside_the_budget_without_stored_limits() -> None:
    times = pd.date_range("2026-11-01", periods=3, freq="D", tz="UTC")
    series = pd.DataFrame({"suite": "s", "kernel": "k", "metric": "duration", "unit": "s", "time": times,
                           "value": [1e-3, 1e-3, 2e-3], "outcome": ["passed", "passed", "failed"]})
    view = HistoryView(series)
    index = index_html(view)
    assert [e.text for e in Page(index).find("span", "bad")] == ["1"]  # the suite's "outside budget" cell
    page = Page(suite_html(view, "s"))
    assert [c.attrs["fill"] for c in page.find("circle", "run")] == ["#1f5fa8", "#1f5fa8", "#c62828"]
    assert "its check failed in the latest run" in suite_html(view, "s")
    states = [e.text for e in page.find("span", "bad") if "td" in e.parents]
    assert states == ["failed"]
    assert "**1 outside budget**" in markdown_digest(view)


# --- issue 18 §5: x labels that never overlap, a suite page of a sensible size ------------


@pytest.mark.parametrize("runs", [2, 5, 8, 12, 30, 61])
@pytest.mark.parametrize("every", ["10s", "1h", "1D"])
def test_x_labels_never_overlap(runs: int, every: str) -> None:
    """8 runs on one day put "Sep 21 18:13" over "Sep 21 19:13" (53 units per run, a
    70-unit label): labels now keep their own width apart; the first and last run stay."""
    from perfcheck.history.chart import FONT, _CHAR_EM, _LEFT, _RIGHT, WIDTH

    frame = pd.DataFrame({"time": pd.date_range("2026-09-21 14:13", periods=runs, freq=every, tz="UTC"),
                          "value": np.linspace(1.0, 2.0, runs)})
    page = Page(trend_svg(frame, unit="s", label="x"))
    labels = [t for t in page.find("text") if t.attrs.get("text-anchor") == "middle" and t.text.strip()]
    xs = [float(t.attrs["x"]) for t in labels]
    widths = [len(t.text) * FONT * _CHAR_EM for t in labels]
    assert len(labels) >= 2
    for (x0, w0), (x1, w1) in zip(zip(xs, widths), zip(xs[1:], widths[1:])):
        assert x1 - x0 >= (w0 + w1) / 2, (runs, every, [t.text for t in labels])
    step = (WIDTH - _LEFT - _RIGHT) / runs
    assert xs[0] == pytest.approx(_LEFT + step / 2, abs=0.1)
    assert xs[-1] == pytest.approx(_LEFT + step * (runs - 0.5), abs=0.1)


def _wide_history(runs: int = 8, kernels: int = 5) -> HistoryView:
    """A store as `check --history` fills it: every metric of every kernel each run
    (resources the same every run, rates in step with the duration, one checked)."""
    rng = np.random.default_rng(1)
    steady = {"calls": (20, "count"), "vgpr": (52, "count"), "sgpr": (64, "count"), "hbm_bytes": (1.29e9, "B"),
              "flops": (6.4e8, "FLOP"), "lds_per_workgroup": (24576, "B"), "workgroup_size": (256, "count"),
              "grid_size": (1048576, "count"), "instructions": (6.8e6, "count"), "occupancy_pct": (20.0, "%")}
    rows = []
    for night in range(runs):
        for k in range(kernels):
            kernel = f"void kernel_{k}<float>(float const*, float*, int)"
            duration = 2.67e-3 * (1 + 0.01 * rng.standard_normal()) * (1.12 if night >= 5 else 1.0)
            metrics = {name: (value, unit) for name, (value, unit) in steady.items()}
            metrics.update({"duration": (duration, "s"), "hbm_bw": (1.29e9 / duration, "B/s"),
                            "hbm_bw_pct": (1.29e9 / duration / 1.075e12 * 100, "%"),
                            "flop_rate": (6.4e8 / duration, "FLOP/s"), "gips": (6.8e6 / duration / 1e9, "GIPS"),
                            "roofline_pct": (1.29e9 / duration / 1.075e12 * 100, "%"),
                            "duration_total": (20 * duration, "s"),
                            "duration_max": (duration * (1.02 + 0.005 * rng.standard_normal()), "s")})
            for metric, (value, unit) in metrics.items():
                rows.append({"suite": "stencil", "machine": "mi100", "kernel": kernel, "metric": metric, "unit": unit,
                             "time": pd.Timestamp("2026-09-21", tz="UTC") + pd.Timedelta(days=night),
                             "value": float(value), "commit": f"{night:040x}", "run": f"run-{night}",
                             "outcome": "passed" if metric == "hbm_bw" else None})
    return HistoryView(pd.DataFrame(rows))


def test_a_suite_page_of_8_runs_stays_small() -> None:
    """A page for 5 kernels x 18 metrics x 8 runs was ~1 MB (a chart and a runs table per
    series). Now: charts for what was checked and duration; unchanged series one line,
    rates in step with the duration named, not drawn; runs tables only under the charts
    a person asked about."""
    view = _wide_history()
    html = suite_html(view, "stencil")
    assert len(html.encode()) < 120_000, len(html.encode())
    page = Page(html)
    assert len(page.find("svg", "trend")) == 5 * 3  # duration, hbm_bw (checked), duration_max (noisy on its own)
    assert "the same in all 8 runs: calls 20, flops 6" in html and "vgpr 52" in html
    assert ("in step with duration (a constant times it or over it, so its chart is the duration chart's): "
            "duration_total, flop_rate, gips, hbm_bw_pct, roofline_pct") in html
    assert html.count("<summary>runs") == 5 * 2  # the runs tables of duration and hbm_bw only


def test_chart_times_are_strftime_at_numpy_speed() -> None:
    from perfcheck.history.chart import utc_minutes

    times = pd.Series(pd.to_datetime([0.0, 1.5e9, 1.5e9 + 59.999, 1_767_225_599.5, 7.2e9], unit="s", utc=True))
    assert utc_minutes(times) == [t.strftime("%Y-%m-%d %H:%M UTC") for t in times.tolist()]


def test_a_long_series_draws_its_line_and_only_the_points_that_matter() -> None:
    """365 nightly runs in 426 viewBox units overlap: no point can be hovered; the chart
    draws the line, the points outside the budget, the latest run and a lone value."""
    runs = 365
    values = np.full(runs, 1e-3)
    values[100] = 2e-3  # outside the 1.5 ms budget
    values[[199, 201]] = np.nan  # run 200 alone between two gaps
    frame = pd.DataFrame({"time": pd.date_range("2026-01-01 02:00", periods=runs, freq="D", tz="UTC"),
                          "value": values, "high": 1.5e-3, "low": np.nan})
    page = Page(trend_svg(frame, unit="s", label="d"))
    circles = page.find("circle", "run")
    tips = [e.text for e in page.find("title") if "circle" in e.parents]
    assert len(circles) == 3 and [c.attrs["fill"] for c in circles].count("#c62828") == 1
    assert tips[0].startswith("2026-04-11 02:00 UTC: 2 ms (outside") and tips[-1].startswith("2026-12-31 02:00 UTC")
    assert page.find("path", "series")[0].attrs["d"].count("M") == 3  # the line, broken at each gap
    short = Page(trend_svg(frame.iloc[:120], unit="s", label="d"))
    assert len(short.find("circle", "run")) == 120  # room for every point


def test_series_are_ordered_and_told_apart_as_sorting_and_grouping_by_name_do() -> None:
    """``_series_order`` (integer codes, one factorisation a name column) gives the rows
    the order of ``sort_values([suite, machine, kernel, metric, time], kind="stable")``
    and each row's series and kernel as ``groupby(...).ngroup()`` of the sorted rows."""
    from perfcheck.history.dashboard import SERIES_KEY, _series_order

    rng = np.random.default_rng(5)
    n = 3_000
    names = ["k<a, 2>", "k<a, 10>", "Ünïcode", "z", "A", "k"]
    frame = pd.DataFrame({
        "suite": rng.choice(["nightly", "Nightly", "b"], n), "machine": rng.choice(["", "mi300x", "h100"], n),
        "kernel": rng.choice(names, n), "metric": rng.choice(["duration", "duration_max", "hbm_bw"], n),
        # few distinct times: many ties, which keep their order
        "time": pd.to_datetime(rng.integers(0, 5, n) * 86400.0, unit="s", utc=True),
        "value": np.arange(n, dtype=float)})
    order, series_id, kernel_id = _series_order(frame)
    expected = frame.sort_values([*SERIES_KEY, "time"], kind="stable")
    assert order.tolist() == expected.index.tolist()
    ordered = expected.reset_index(drop=True)
    assert series_id.tolist() == ordered.groupby(SERIES_KEY, sort=False).ngroup().tolist()
    assert kernel_id.tolist() == ordered.groupby(["suite", "machine", "kernel"], sort=False).ngroup().tolist()


def test_the_headline_series_as_grouping_by_name_finds_them() -> None:
    """A series is shown first when an expectation checked it in some run or it is the
    duration; a kernel with none shows all its series first."""
    from perfcheck.history.dashboard import _normalised

    rows = []
    for kernel, metrics in (("checked", {"occupancy": "passed", "hbm_bw": None, "calls": None}),
                            ("timed", {"duration": None, "vgpr": None}),
                            ("neither", {"calls": None, "grid": None})):
        for night in range(3):
            for metric, outcome in metrics.items():
                rows.append({"suite": "s", "machine": "m", "kernel": kernel, "metric": metric, "unit": "count",
                             "time": pd.Timestamp(1.79e9 + night * 86400, unit="s", tz="UTC"), "value": 1.0,
                             "outcome": outcome if night == 1 else None})
    series, _ = _normalised(HistoryView(pd.DataFrame(rows).sample(frac=1.0, random_state=1)))
    shown = series.drop_duplicates(["kernel", "metric"]).set_index(["kernel", "metric"])["headline"].to_dict()
    assert shown == {("checked", "calls"): False, ("checked", "hbm_bw"): False, ("checked", "occupancy"): True,
                     ("neither", "calls"): True, ("neither", "grid"): True,
                     ("timed", "duration"): True, ("timed", "vgpr"): False}


def test_a_kernel_page_tables_its_quiet_metrics() -> None:
    """On a kernel's own page (a large store's site) a metric nobody checks, without a
    change point and never outside its budget, is a line of its latest, lowest and
    highest value (a missing value skipped), not a chart; a constant one is a word."""
    from perfcheck.history.dashboard import kernel_pages, prepare

    times = pd.date_range("2026-11-01 02:00", periods=8, freq="D", tz="UTC")
    bandwidth = [9.1e11, 9.4e11, np.nan, 8.7e11, 9.0e11, 9.3e11, 8.9e11, 9.2e11]
    frame = pd.concat([
        pd.DataFrame({"metric": "duration", "unit": "s", "value": 2e-3, "outcome": "passed"}, index=range(8)),
        pd.DataFrame({"metric": "hbm_bw", "unit": "B/s", "value": bandwidth, "outcome": None}, index=range(8)),
        pd.DataFrame({"metric": "vgpr", "unit": "count", "value": 52.0, "outcome": None}, index=range(8)),
    ]).assign(suite="s", machine="m", kernel=STENCIL, run=[f"r{i}" for i in range(8)] * 3,
              time=list(times) * 3)
    pages = list(kernel_pages(prepare(HistoryView(frame)), suite="s", back=suite_file("s")))
    assert [(p.machine, p.kernel, p.metrics, p.changes, p.open) for p in pages] == [("m", STENCIL, 3, 0, 0)]
    text = pages[0].html
    page = Page(text)
    assert len(page.find("svg", "trend")) == 1  # duration only
    row = re.search(r">hbm_bw</td>(.*?)</tr>", text.split("<table class=quiet>")[1])
    assert row and re.findall(r'data-label="[a-z]+">([^<]*)<', row[1]) == ["920 GB/s", "870 GB/s", "940 GB/s"]
    assert "the same in all 8 runs: vgpr 52" in text
    assert "8 runs, 2026-11-01 02:00 to 2026-11-08 02:00 UTC" in text


def test_a_budget_band_is_drawn_from_its_corners() -> None:
    """A year of nights under one limit drew the band through 730 points; the points in
    the middle of a level stretch are left out: the same shape, from its corners."""
    runs = 365
    high = np.where(np.arange(runs) < 200, 1.5e-3, 2e-3)  # the limit raised at run 200
    frame = pd.DataFrame({"time": pd.date_range("2026-01-01 02:00", periods=runs, freq="D", tz="UTC"),
                          "value": np.linspace(0.6e-3, 1.8e-3, runs), "high": high, "low": np.nan})
    band = Page(trend_svg(frame, unit="s", label="d")).find("polygon", "band")[0].attrs["points"].split()
    points = [tuple(map(float, p.split(","))) for p in band]
    top, bottom = points[:4], points[4:]
    # the upper edge: the frame's left side, the last run under 1.5 ms, the first under 2 ms, the right side
    assert len(points) == 6 and len({y for _, y in top}) == 2 and len({y for _, y in bottom}) == 1
    assert top[0][1] == top[1][1] > top[2][1] == top[3][1]  # higher limit, higher on the chart (smaller y)
    xs = [x for x, _ in top]
    assert xs == sorted(xs) and xs[0] == 80.0 and xs[-1] == 506.0
    step = (506.0 - 80.0) / runs
    assert xs[1] == pytest.approx(80.0 + 199.5 * step, abs=0.05) and xs[2] == pytest.approx(80.0 + 200.5 * step, abs=0.05)
