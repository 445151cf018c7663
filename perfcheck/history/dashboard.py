"""The history dashboard: a static site a person opens in a browser, and a
Markdown digest for a nightly issue or chat message.

``write_site(view, DIR)`` writes ``DIR/index.html`` (open regressions across
all suites, one line per suite) and one page per suite (a trend chart per
kernel x metric with its budget band and change points, the runs behind each
chart in a table with their commits). Everything a page needs is inside it:
inline CSS and inline SVG charts (``perfcheck.history.chart``), no script, no
font or stylesheet from a CDN, so the site works from a file on an air-gapped
cluster and can be copied anywhere as a directory. The layout is one column on
a narrow screen (tables scroll sideways inside their box, long C++ kernel names
wrap) and a grid of charts on a wide one.

``markdown_digest(view)`` is the same story in a few lines: the latest run,
the open regressions, the kernels outside their budget.

Both render a ``HistoryView``: plain pandas frames of the series and the
change points, so this module depends on no storage format (the CLI builds the
view from the history store).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from perfcheck import __version__
from perfcheck.atomicfile import write_atomic
from perfcheck.history.chart import Runs, Steps, legend_svg, trend_svg_of, utc_minutes
from perfcheck.metrics.timeline import is_timeline_name
from perfcheck.report import mdescape
from perfcheck.units import format_value

if TYPE_CHECKING:
    from perfcheck.history.findings import Finding

SERIES_KEY = ["suite", "machine", "kernel", "metric"]
SERIES_COLUMNS = ["suite", "kernel", "metric", "unit", "time", "value"]
CHANGE_COLUMNS = ["suite", "kernel", "metric", "time", "before", "after", "change_pct", "kind"]
REGRESSION, IMPROVEMENT = "regression", "improvement"

# Rows of the runs table under each chart: the latest ones (the chart shows all).
MAX_RUN_ROWS = 60
# Rows of the Markdown digest's tables: a chat message or an issue stays short;
# the HTML report and the store have the rest.
MAX_DIGEST_ROWS = 20


@dataclass(frozen=True)
class HistoryView:
    """What the dashboard shows, as frames.

    ``series``: one row per run x suite x kernel x metric. Required columns
    ``suite, kernel, metric, unit, time`` (UTC), ``value`` (base units); optional
    ``machine``, ``commit``, ``run`` (the run's id in the store), ``low`` and
    ``high`` (the budget band the run was checked against, NaN where unbounded).

    ``changes``: one row per change point. Required columns ``suite, kernel,
    metric, time`` (of the first run after the shift), ``before``, ``after``
    (levels, base units), ``change_pct``, ``kind`` ("regression" or
    "improvement"); optional ``machine``, ``commit`` and ``open`` (a regression
    still in force; without the column a regression is open when it is the
    latest change point of its series), ``also`` (the same change on other
    metrics: "duration_max +31.0%, hbm_bw -23.1%"), ``why`` (its diagnosis) and
    ``member`` (True: a change listed inside another one's ``also``, no row of
    its own; ``perfcheck.history.findings``).
    """

    series: pd.DataFrame
    changes: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CHANGE_COLUMNS))
    title: str = "perfcheck history"


def history_view(frame: pd.DataFrame, points: Iterable[object] = (), *, title: str = "perfcheck history",
                 found: Iterable["Finding"] = ()) -> HistoryView:
    """The view of a history: ``frame`` as ``Store.series()`` gives it, ``points``
    the ``ChangePoint`` records ``perfcheck.history.detect`` found in it, ``found``
    the findings they make (``perfcheck.history.findings``: one per kernel x change,
    with what also moved and why).

    The budget band comes from ``low``/``high`` columns when the store has them;
    without them the charts draw none."""
    series = frame.rename(columns={"run_id": "run"}).copy()
    records = [p.as_dict() if hasattr(p, "as_dict") else dict(p) for p in points]  # type: ignore[call-overload]
    extra = ["open"] if records and "open" in records[0] else []  # the lifecycle's verdict, when known
    changes = pd.DataFrame(records, columns=[*CHANGE_COLUMNS, "machine", "commit", "direction", "run_id", *extra]) if records else \
        pd.DataFrame(columns=[*CHANGE_COLUMNS, "machine", "commit"])
    if records:
        changes["kind"] = changes["direction"]
        changes["time"] = pd.to_datetime(changes["time"].astype(float), unit="s", utc=True)
        changes = changes.drop(columns=["direction"])
        changes = _grouped(changes, list(found))
    return HistoryView(series, changes, title)


def _grouped(changes: pd.DataFrame, found: list["Finding"]) -> pd.DataFrame:
    """``also``, ``why`` and ``member`` columns from the findings (see HistoryView)."""
    from perfcheck.history.listing import also_text, why_text

    if not found:
        return changes
    key = ["machine", "suite", "kernel", "metric", "run_id"]
    heads = pd.DataFrame([(f.machine, f.suite, f.kernel, f.headline.metric, f.headline.run_id, also_text(f),
                           why_text(f)) for f in found], columns=[*key, "also", "why"])
    members = pd.DataFrame([(cp.machine, cp.suite, cp.kernel, cp.metric, cp.run_id) for f in found for cp in f.also],
                           columns=key).assign(member=True)
    out = changes.merge(heads.drop_duplicates(key), on=key, how="left").merge(members.drop_duplicates(key), on=key,
                                                                             how="left")
    out["member"] = out["member"].fillna(False).astype(bool)
    return out


def load_view(store: object, *, suites: Iterable[str] | None = None, machine: str | None = None,
              last: int | None = None, title: str = "perfcheck history") -> HistoryView:
    """The view of an open ``Store``: its series (``suites``/``machine`` filters,
    the ``last`` N runs of each series) and the change points found in them."""
    frame = store.series(machine=machine, suite=list(suites) if suites else None, last=last)  # type: ignore[attr-defined]
    arches = {slug: fp.get("arch", "") for slug, fp in store.machines().items()}  # type: ignore[attr-defined]
    return history_view_of(frame, arches=arches, title=title)


def history_view_of(frame: pd.DataFrame, *, arches: Mapping[str, str] | None = None, accepted: Sequence[object] = (),
                    title: str = "perfcheck history") -> HistoryView:
    """The view of ``frame`` (``Store.series``): its change points, grouped into findings,
    each regression open, accepted or recovered by the ``accepted`` entries
    (``perfcheck.history.lifecycle``: open until a person accepts it or it recovers)."""
    from perfcheck.history.changepoints import detect
    from perfcheck.history.findings import ALL, findings, with_states
    from perfcheck.history.lifecycle import states

    points = detect(frame)
    known = {s.point: s for s in states(points, frame, accepted)}  # type: ignore[arg-type]
    # every change in some finding (a metric no check watches still heads one: the
    # dashboard shows those below the checked ones)
    found = with_states(findings(points, frame, select=ALL, arches=arches or {}), known)
    records = [{**cp.as_dict(), "open": known[cp].open if cp in known else False} for cp in points]
    return history_view(frame, records, title=title, found=found)


def _normalised(view: HistoryView) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both frames with every optional column present, times as UTC timestamps."""
    series, changes, _ = _prepared(view)
    return series, changes


@dataclass(frozen=True)
class PreparedView:
    """A view's frames made ready once (``prepare``: ``_normalised``, and the position
    of each series' newest row) for both the digest's facts and the pages of a part."""

    series: pd.DataFrame
    changes: pd.DataFrame
    ends: np.ndarray
    title: str


def prepare(view: HistoryView) -> PreparedView:
    return PreparedView(*_prepared(view), view.title)


def _prepared(view: HistoryView) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """``_normalised``, and the position of each series' newest row (``latest_runs``).

    The series rows are ordered by series, then time, and each series and kernel told
    apart by integer codes (one factorisation per name column): grouping the rows by
    their four name columns (arrow strings, whose every row is hashed) made this most
    of a large report's time beside the charts."""
    series = _filled(view.series)
    order, series_id, kernel_id = _series_order(series)
    series = series.take(order).reset_index(drop=True)
    series["headline"] = _headline(series, series_id, kernel_id)
    _mark_outside(series)
    starts = np.flatnonzero(np.diff(series_id, prepend=-1))
    ends = np.append(starts[1:] - 1, len(series) - 1) if len(series) else starts
    changes = _changes_of(view.changes, series.iloc[starts][[*SERIES_KEY, "headline"]])  # each series' first row
    return series, changes, ends


def _filled(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of the series rows ``frame`` with every optional column present, times as
    UTC timestamps, machine and commit as text."""
    missing = [c for c in SERIES_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"history series frame lacks columns {missing}")
    series = frame.copy()
    for name, default in (("machine", ""), ("commit", ""), ("run", ""), ("low", np.nan), ("high", np.nan)):
        if name not in series.columns:
            series[name] = default
    series["time"] = pd.to_datetime(series["time"], utc=True)
    series["machine"] = series["machine"].astype(object).fillna("").astype(str)  # a Categorical takes no new ""
    series["commit"] = series["commit"].fillna("").astype(str)
    return series


def _mark_outside(series: pd.DataFrame) -> None:
    """The ``failed`` and ``outside`` columns of ``_filled`` rows, in place: outside its
    budget is beyond the stored limits, or a check of that run failed on it (a store
    without limits still knows the outcome)."""
    value, low, high = (series[c].astype(float) for c in ("value", "low", "high"))
    failed = series["outcome"].astype(str).eq("failed") if "outcome" in series.columns else False
    series["failed"] = failed
    series["outside"] = (low.notna() & (value < low)) | (high.notna() & (value > high)) | series["failed"]


def _changes_of(frame: pd.DataFrame | None, flags: pd.DataFrame) -> pd.DataFrame:
    """The change rows ``frame`` normalised (``_normalised``): every optional column, in
    series then time order, ``open`` decided, each row's ``headline`` from ``flags`` (a
    row per series: its names and ``headline``)."""
    changes = frame.copy() if frame is not None else pd.DataFrame(columns=CHANGE_COLUMNS)
    missing = [c for c in CHANGE_COLUMNS if c not in changes.columns]
    if missing:
        raise ValueError(f"history change-point frame lacks columns {missing}")
    for name in ("machine", "commit", "also", "why"):
        if name not in changes.columns:
            changes[name] = ""
        changes[name] = changes[name].fillna("").astype(str)
    changes["member"] = changes["member"].fillna(False).astype(bool) if "member" in changes.columns else False
    changes["time"] = pd.to_datetime(changes["time"], utc=True)
    changes = changes.sort_values([*SERIES_KEY, "time"], kind="stable").reset_index(drop=True)
    if "open" not in changes.columns:
        latest = ~changes.duplicated(SERIES_KEY, keep="last")
        changes["open"] = latest & (changes["kind"] == REGRESSION)
    changes["open"] = changes["open"].fillna(False).astype(bool) & (changes["kind"] == REGRESSION)
    changes = changes.drop(columns=["headline"], errors="ignore").merge(flags, on=SERIES_KEY, how="left")
    changes["headline"] = changes["headline"].fillna(True).astype(bool)
    return changes


def _series_order(series: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order of ``series.sort_values([*SERIES_KEY, "time"], kind="stable")`` (names
    by their sorted codes, a missing one last; ties in their order) and, in that order,
    each row's series and kernel (suite x machine x kernel) as a number from 0."""
    codes = []
    for column in SERIES_KEY:
        code, names = pd.factorize(series[column], sort=True)
        codes.append(np.where(code < 0, len(names), code))
    time = series["time"].to_numpy(dtype="datetime64[ns]").view("i8")
    time = np.where(time == np.iinfo(np.int64).min, np.iinfo(np.int64).max, time)  # NaT last, as pandas sorts it
    order = np.lexsort((time, *reversed(codes)))
    ranked = [c[order] for c in codes]
    n = len(order)

    def numbered(columns: list[np.ndarray]) -> np.ndarray:
        new = np.zeros(n, dtype=bool)
        if n:
            new[0] = True
            for column in columns:
                new[1:] |= column[1:] != column[:-1]
        return np.cumsum(new) - 1

    return order, numbered(ranked), numbered(ranked[:3])


def _headline(series: pd.DataFrame, series_id: np.ndarray, kernel_id: np.ndarray) -> pd.Series:
    """Per row: is its series one to show first? A store keeps every metric of every
    kernel (calls, duration_min/mean/max/total, grid size, ...); the ones a person
    asked about are those an expectation checked (an ``outcome`` in some run), and
    ``duration``. Without an ``outcome`` column every series is shown first, and so
    is every series of a kernel that has none of those. ``series_id``, ``kernel_id``:
    each row's series and kernel as numbers (``_series_order``)."""
    if "outcome" not in series.columns or series.empty:
        return pd.Series(True, index=series.index)
    checked = (series["outcome"].notna() & (series["outcome"].astype(str) != "")).to_numpy(dtype=bool)
    any_checked = np.bincount(series_id, weights=checked)[series_id] > 0
    headline = any_checked | (series["metric"] == "duration").to_numpy(dtype=bool)
    # a kernel with none of those (nothing checked, no duration) shows all it has
    kernel_any = np.bincount(kernel_id, weights=headline)[kernel_id] > 0
    return pd.Series(headline | ~kernel_any, index=series.index)


def open_regressions(view: HistoryView) -> pd.DataFrame:
    """The change points that are regressions still in force, worst first; the
    ``headline`` column tells those on checked metrics (and duration) from the rest."""
    _, changes = _normalised(view)
    found = changes[changes["open"] & ~changes["member"]]
    order = found["change_pct"].abs().fillna(0.0).sort_values(ascending=False, kind="stable").index
    return found.loc[order].reset_index(drop=True)


def latest_runs(series: pd.DataFrame) -> pd.DataFrame:
    """The newest row of every series (``outside``: beyond its band, or its check failed)."""
    return series[~series.duplicated(SERIES_KEY, keep="last")].copy()


# --- names and links ---------------------------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def suite_file(suite: str) -> str:
    """``suite-<name>.html``, file-system safe; a digest keeps two names that clean
    to the same text (``a/b``, ``a b``) apart."""
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", suite).strip("-.").lower()[:60]
    return f"suite-{clean or 'unnamed'}-{_digest(suite)[:6]}.html"


def kernel_anchor(machine: str, kernel: str, metric: str | None = None) -> str:
    """Element id of a kernel's section (or one chart): C++ signatures are too long
    and too full of punctuation for an id, so a digest of the name."""
    return "k-" + _digest(f"{machine}\0{kernel}" + (f"\0{metric}" if metric else ""))


# --- HTML pieces ---------------------------------------------------------------------------

_CSS = """
:root { --fg: #1d2329; --muted: #5b6570; --line: #d9dde3; --bad: #c62828; --good: #2e7d32; --bg: #ffffff; --alt: #f5f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header, main, footer { max-width: 1200px; margin: 0 auto; padding: 0 16px; }
header { padding-top: 16px; }
h1 { font-size: 1.5rem; margin: 0.3em 0; }
h2 { font-size: 1.2rem; margin: 1.4em 0 0.5em; border-bottom: 1px solid var(--line); padding-bottom: 0.2em; }
h3 { font-size: 1rem; margin: 0.2em 0; }
a { color: #1f5fa8; }
p.meta, footer, figcaption .sub { color: var(--muted); }
.kernel { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; width: 100%; font-size: 0.92em; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--alt); }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.bad { color: var(--bad); font-weight: 600; }
.good { color: var(--good); }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 460px), 1fr)); gap: 16px; }
figure { margin: 0; padding: 8px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); min-width: 0; }
figcaption { margin-bottom: 4px; }
svg.trend { display: block; height: auto; }
svg.legend { max-width: 100%; height: auto; }
details { margin-top: 6px; }
details.more > summary { margin: 8px 0; }
summary { cursor: pointer; color: var(--muted); }
nav.toc ul { padding-left: 1.2em; }
footer { margin-top: 2em; padding-bottom: 2em; font-size: 0.85em; }
@media (max-width: 600px) {
  body { font-size: 14px; }
  svg.trend { font-size: 15px; }
  table, tbody, tr, td { display: block; width: 100%; }
  thead { display: none; }
  tr { border: 1px solid var(--line); border-radius: 6px; margin-bottom: 8px; padding: 4px 0; }
  td, td.num { border: 0; text-align: left; white-space: normal; padding: 2px 8px; }
  td::before { content: attr(data-label) ": "; color: var(--muted); }
}
"""


def _page(title: str, body: Iterable[str]) -> str:
    # <link rel="icon" href="data:,">: a page opened from a file otherwise asks for
    # /favicon.ico, which the console reports as a failed load.
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        *body,
        f'<footer>Written by perfcheck {escape(__version__)}. Values in each chart\'s unit; hover a point '
        "or a change marker for its run, commit and value.</footer>",
        "</body>",
        "</html>",
        "",
    ])


def _table(header: list[str], rows: list[list[str]], numeric: Iterable[int] = (), cls: str = "") -> str:
    numeric = set(numeric)
    head = "".join(f'<th{" class=num" if i in numeric else ""} scope="col">{h}</th>' for i, h in enumerate(header))
    # data-label: on a narrow screen each row becomes a card of "label: value"
    # lines (CSS below), so a long kernel name does not squeeze every column.
    labels = [escape(re.sub(r"<[^>]+>", "", h), quote=True) for h in header]
    # each column's opening tag once: a large site writes millions of cells
    opening = [f'<td{" class=num" if i in numeric else ""} data-label="{label}">' for i, label in enumerate(labels)]
    body = "".join(
        "<tr>" + "".join(f"{tag}{cell}</td>" for tag, cell in zip(opening, row)) + "</tr>"
        for row in rows
    )
    return f'<div class="scroll"><table{f" class={cls}" if cls else ""}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _when(ts: pd.Timestamp) -> str:
    return ts.strftime("%Y-%m-%d %H:%M") if pd.notna(ts) else "-"


def _commit(commit: str) -> str:
    return f"<code>{escape(commit[:12])}</code>" if commit else "-"


def _change(pct: float, kind: str) -> str:
    if pd.isna(pct):
        return "-"
    cls = "bad" if kind == REGRESSION else "good"
    return f'<span class="{cls}">{pct:+.1f}%</span>'


def budget_text(low: float, high: float, unit: str) -> str:
    """"<= 2.8 ms", ">= 800 GB/s", "1 ms .. 2 ms", or "-" without a limit."""
    has_low, has_high = pd.notna(low), pd.notna(high)
    if has_low and has_high:
        return f"{format_value(low, unit)} .. {format_value(high, unit)}"
    if has_high:
        return f"<= {format_value(high, unit)}"
    if has_low:
        return f">= {format_value(low, unit)}"
    return "-"


def _regressions_section(found: pd.DataFrame, units: Mapping[tuple[str, str, str, str], str], *, with_suite: bool,
                         link: "Callable[[object], str] | None" = None, total: tuple[int, int] | None = None) -> str:
    """The open regressions on headline metrics as a table; those on the other
    metrics (a slower kernel also moves its duration_max, duration_total, ...) in a
    collapsed table below it."""
    if found.empty:
        return '<p class="good">No open regressions.</p>'
    main, other = found[found["headline"]], found[~found["headline"]]
    # ``total``: the counts of which ``found`` lists the worst (an overview page)
    n_main, n_other = total if total is not None else (len(main), len(other))
    html = _regressions_table(main, units, with_suite=with_suite, link=link) if len(main) else \
        '<p class="good">No open regressions on checked metrics.</p>'
    if n_main > len(main):
        html += f'<p class="sub">The worst {len(main)} of {n_main}: the kernel pages have the rest.</p>'
    if len(other):
        names = ", ".join(sorted(other["metric"].astype(str).unique()))
        shown = f"{n_other} more on other metrics" + (f", the worst {len(other)} listed" if n_other > len(other) else "")
        html += (f'<details class="more"><summary>{shown} ({escape(names)})</summary>'
                 + _regressions_table(other, units, with_suite=with_suite, link=link) + "</details>")
    return html


def _regressions_table(found: pd.DataFrame, units: Mapping[tuple[str, str, str, str], str], *, with_suite: bool,
                       link: "Callable[[object], str] | None" = None) -> str:
    rows = []
    for row in found.itertuples(index=False):  # the table's rows: one string each
        unit = units.get((row.suite, row.machine, row.kernel, row.metric), "")
        href = link(row) if link is not None else \
            f"{suite_file(row.suite)}#{kernel_anchor(row.machine, row.kernel, row.metric)}"
        cells = [f'<a class="kernel" href="{escape(href)}">{escape(row.kernel)}</a>', escape(row.metric)]
        if with_suite:
            cells.insert(0, f'<a href="{escape(suite_file(row.suite))}">{escape(row.suite)}</a>')
        also = f'<br><span class="sub">also moved: {escape(row.also)}</span>' if row.also else ""
        cells += [escape(row.machine) or "-", f"{_when(row.time)} {_commit(row.commit)}",
                  escape(format_value(row.before, unit)), escape(format_value(row.after, unit)),
                  _change(row.change_pct, row.kind) + also, escape(row.why) or "-"]
        rows.append(cells)
    header = (["suite"] if with_suite else []) + ["kernel", "metric", "machine", "since (run, commit)", "before",
                                                  "after", "change", "why"]
    first_num = 5 if with_suite else 4
    return _table(header, rows, numeric=range(first_num, first_num + 3), cls="regressions")


def _units(series: pd.DataFrame) -> dict[tuple[str, str, str, str], str]:
    return _units_of(series[~series.duplicated(SERIES_KEY, keep="last")])


def _units_of(latest: pd.DataFrame) -> dict[tuple[str, str, str, str], str]:
    """Each series' unit (``latest``: its newest row, ``latest_runs``)."""
    return dict(zip(map(tuple, latest[SERIES_KEY].to_numpy().tolist()), latest["unit"].astype(str)))


@dataclass(frozen=True)
class _Rows:
    """Normalised series rows (``_normalised``) as arrays: a chart, a runs table or a
    kernel's section reads positions of them, no frame per chart (a year of nights of
    2,000 kernels is tens of thousands of charts, and pandas' fixed costs per frame were
    most of their time). Rows sorted by series, then time: a series is a run of positions."""

    metric: np.ndarray  # codes into ``metrics``
    metrics: list[str]
    unit: "_Coded"
    times: np.ndarray  # datetime64[ns], UTC
    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    failed: np.ndarray
    outside: np.ndarray
    headline: np.ndarray
    outcome: np.ndarray  # a check's outcome is recorded (judged even without limits)
    commit: "_Coded"
    run: "_Coded"  # the run's id in the store, or ""

    @staticmethod
    def of(series: pd.DataFrame) -> "_Rows":
        outcome = series["outcome"].notna().to_numpy(dtype=bool) if "outcome" in series.columns else \
            np.zeros(len(series), dtype=bool)
        codes, names = pd.factorize(series["metric"])
        return _Rows(codes, [str(m) for m in names], _Coded.of(series["unit"], str),
                     series["time"].to_numpy(dtype="datetime64[ns]"), series["value"].to_numpy(dtype=float),
                     series["low"].to_numpy(dtype=float), series["high"].to_numpy(dtype=float),
                     series["failed"].to_numpy(dtype=bool), series["outside"].to_numpy(dtype=bool),
                     series["headline"].to_numpy(dtype=bool), outcome, _Coded.of(series["commit"]),
                     _Coded.of(series["run"]))

    def runs(self, at: np.ndarray) -> Runs:
        return Runs(self.times[at], self.values[at], self.low[at], self.high[at], self.failed[at],
                    self.commit[at].tolist())


@dataclass(frozen=True)
class _Coded:
    """A column of few distinct values (units, commits, run ids) as codes into them:
    ``coded[i]`` and ``coded[positions]`` as of the column's values. Factorising an
    arrow string column is a third of the time of making it Python objects."""

    codes: np.ndarray
    names: np.ndarray  # object

    @staticmethod
    def of(column: pd.Series, kind: "Callable[[object], object] | None" = None) -> "_Coded":
        codes, names = pd.factorize(column, use_na_sentinel=False)
        values = [kind(v) for v in names] if kind is not None else list(names)
        return _Coded(codes, np.array(values + [None], dtype=object)[:-1])  # [None]: never a 2-d array

    def __getitem__(self, at: "int | np.ndarray") -> object:
        return self.names[self.codes[at]]


@dataclass(frozen=True)
class _Changes:
    """Normalised change rows (``_normalised``) as arrays, the positions of each series'
    (machine, kernel, metric) in ``at``, oldest first."""

    at: Mapping[tuple[str, str, str], np.ndarray]
    times: np.ndarray  # datetime64[ns], UTC
    before: np.ndarray
    after: np.ndarray
    change_pct: np.ndarray
    kind: np.ndarray  # object (str)
    commit: np.ndarray  # object (str)
    open: np.ndarray

    @staticmethod
    def of(changes: pd.DataFrame) -> "_Changes":
        at = changes.groupby(["machine", "kernel", "metric"], sort=False, observed=True).indices if len(changes) else {}
        return _Changes({tuple(map(str, k)): v for k, v in at.items()},  # type: ignore[misc]
                        changes["time"].to_numpy(dtype="datetime64[ns]"), changes["before"].to_numpy(dtype=float),
                        changes["after"].to_numpy(dtype=float), changes["change_pct"].to_numpy(dtype=float),
                        changes["kind"].astype(str).to_numpy(dtype=object), changes["commit"].to_numpy(dtype=object),
                        changes["open"].to_numpy(dtype=bool))

    def of_series(self, machine: str, kernel: str, metric: str) -> np.ndarray:
        return self.at.get((machine, kernel, metric), _NONE)

    def steps(self, at: np.ndarray) -> Steps:
        return Steps(self.times[at], self.before[at], self.after[at], self.change_pct[at],
                     self.kind[at].tolist(), self.commit[at].tolist())


_NONE = np.array([], dtype=np.intp)


def _runs_table(rows: _Rows, at: np.ndarray, unit: str) -> str:
    """The runs of a chart (``at``: its rows, oldest first), the latest MAX_RUN_ROWS, newest first."""
    recent = at[::-1][:MAX_RUN_ROWS]
    times = rows.times[recent]
    # _when of each time at numpy's speed (utc_minutes: strftime was a third of the table)
    whens = [w[:-4] for w in utc_minutes(times)] if not np.isnat(times).any() else \
        [_when(pd.Timestamp(t, tz="UTC")) for t in times]
    table = []
    budgets: dict[tuple[float | None, float | None], str] = {}  # the band is mostly the same run after run
    # the table's columns taken at once, then a row each (the cells are text)
    for when, value, low, high, outcome, failed, outside, commit, run in zip(
            whens, rows.values[recent].tolist(), rows.low[recent].tolist(), rows.high[recent].tolist(),
            rows.outcome[recent].tolist(), rows.failed[recent].tolist(), rows.outside[recent].tolist(),
            rows.commit[recent].tolist(), rows.run[recent].tolist()):
        judged = not math.isnan(low) or not math.isnan(high) or outcome
        state = ('<span class="bad">failed</span>' if failed else '<span class="bad">outside</span>'
                 if outside else "ok" if judged else "-")
        band = (None if math.isnan(low) else low, None if math.isnan(high) else high)
        budget = budgets.get(band) or budgets.setdefault(band, escape(budget_text(low, high, unit)))
        table.append([when, _commit(commit), escape(str(run)) if run != "" else "-",
                      escape(format_value(value, unit)), budget, state])
    more = f" (latest {MAX_RUN_ROWS} of {len(at)})" if len(at) > MAX_RUN_ROWS else ""
    return (f"<details><summary>runs{more}</summary>"
            + _table(["time (UTC)", "commit", "run", "value", "budget", "status"], table, numeric=(3,))
            + "</details>")


def _chart_figure(rows: _Rows, at: np.ndarray, changes: _Changes, here: np.ndarray, *, machine: str, kernel: str,
                  metric: str, runs: bool = True) -> str:
    """One chart with its caption (``at``: its rows, ``here``: its change points);
    ``runs``: and the table of its runs (the charts a person asked about; the others'
    values are on hover)."""
    last = int(at[-1])
    unit = rows.unit[last]
    status = ('<br><span class="bad">its check failed in the latest run</span>' if rows.failed[last] else
              '<br><span class="bad">outside its budget</span>' if rows.outside[last] else "")
    open_here = here[changes.open[here]]
    if len(open_here):
        worst = int(open_here[-1])
        status += (f'<br><span class="bad">regression {changes.change_pct[worst]:+.1f}% since '
                   f'{_commit(changes.commit[worst])}</span>')
    budget = budget_text(rows.low[last], rows.high[last], unit)
    budget = "no budget recorded" if budget == "-" else f"budget {budget}"
    caption = (f"<h3>{escape(metric)}</h3><span class=sub>latest {escape(format_value(float(rows.values[last]), unit))}"
               f", {escape(budget)}, {len(at)} runs</span>{status}")
    label = f"{metric} of {kernel}" + (f" on {machine}" if machine else "") + ", per run"
    svg = trend_svg_of(rows.runs(at), changes.steps(here), unit=unit, label=label)
    return (f'<figure id="{kernel_anchor(machine, kernel, metric)}"><figcaption>{caption}</figcaption>'
            f"{svg}{_runs_table(rows, at, unit) if runs else ''}</figure>")


def _follows_duration(rows: pd.DataFrame, tolerance: float = 1e-6) -> set[str]:
    """Metrics of one kernel that are a constant times its duration or a constant over
    it in every run (bandwidths and rates of fixed bytes and FLOPs, percentages of a
    fixed peak): their charts would repeat the duration chart's shape."""
    table = rows.pivot_table(index="time", columns="metric", values="value", aggfunc="last", observed=True)
    if "duration" not in table.columns or len(table) < 2:
        return set()
    duration = table["duration"].astype(float)
    others = table.drop(columns=["duration"]).astype(float)

    def constant(frame: pd.DataFrame) -> pd.Series:
        spread = (frame.max() - frame.min()).abs() / frame.abs().mean()
        return frame.notna().all() & (spread <= tolerance)

    steady = constant(others)  # the same every run: not "in step", just unchanged
    follows = (constant(others.mul(duration, axis=0)) | constant(others.div(duration, axis=0))) & ~steady
    return set(follows[follows].index.astype(str))


def _unchanged(values: np.ndarray, outside: np.ndarray, changed: bool) -> bool:
    """The same value in every run (registers, bytes moved, calls of an unchanged build),
    never outside its budget, no change point: a line of text says it, not a chart."""
    return bool(not np.isnan(values).any() and (values == values[0]).all() and not outside.any() and not changed)


def _metrics(rows: _Rows, at: np.ndarray) -> list[tuple[bool, str, np.ndarray]]:
    """(headline, metric, its rows) of one kernel's rows ``at`` (sorted by metric, then
    time), the other metrics first, each part by metric name."""
    codes = rows.metric[at]
    starts = [0, *(np.flatnonzero(codes[1:] != codes[:-1]) + 1).tolist()]
    ends = [*starts[1:], len(at)]
    found = [(bool(rows.headline[at[a]]), rows.metrics[codes[a]], at[a:b]) for a, b in zip(starts, ends)]
    return sorted(found, key=lambda g: (g[0], g[1]))


# --- pages ----------------------------------------------------------------------------------


def suite_html(view: HistoryView, suite: str) -> str:
    series, changes = _normalised(view)
    mine = series[series["suite"] == suite]
    my_changes = changes[changes["suite"] == suite]
    if mine.empty:
        raise ValueError(f"no series of suite {suite!r} in the history")
    machines = sorted(mine["machine"].unique())
    runs = mine["run"].nunique() if (mine["run"] != "").any() else mine["time"].nunique()
    body = [
        "<header>",
        '<p><a href="index.html">&larr; all suites</a></p>',
        f"<h1>Suite {escape(suite)}</h1>",
        f'<p class="meta">{runs} runs, {_when(mine["time"].min())} to {_when(mine["time"].max())} UTC'
        + (f"; machines: {escape(', '.join(m for m in machines if m))}" if any(machines) else "")
        + "</p>",
        "</header>",
        "<main>",
        "<h2>Open regressions</h2>",
        _regressions_section(open_regressions(HistoryView(mine, my_changes)), _units(mine), with_suite=False),
    ]
    # The program's timeline ("@run", "@ranks", "range:NAME") first, under its own
    # heading: it is the run's picture, not one kernel among the others.
    mine = mine.reset_index(drop=True)
    every = [((str(m), str(k)), at)
             for (m, k), at in mine.groupby(["machine", "kernel"], sort=True, observed=True).indices.items()]
    timeline = [g for g in every if is_timeline_name(g[0][1])]
    kernels = [g for g in every if not is_timeline_name(g[0][1])]
    rows, changed = _Rows.of(mine), _Changes.of(my_changes)
    legend = [legend_svg()]  # once, under the first heading
    for title, groups in (("Timeline: the run and its ranges", timeline), ("Kernels", kernels)):
        if groups or title == "Kernels" and not timeline:
            derived = {key: _follows_duration(mine.iloc[at]) for key, at in groups}
            body += [f"<h2>{title}</h2>", *legend, *_sections(rows, groups, changed, machines, derived=derived)]
            legend = []
    body.append("</main>")
    return _page(f"{suite} - {view.title}", body)


def _sections(rows: _Rows, groups: "list[tuple[tuple[str, str], np.ndarray]]", changes: _Changes,
              machines: list[str], *, headings: bool = True,
              derived: "Mapping[tuple[str, str], set[str]] | None" = None) -> list[str]:
    """A table of contents and one section per (machine, kernel) of ``groups`` (each
    with its positions in ``rows``; ``headings``: each under its kernel's name; a
    kernel's own page has it as its title). ``derived``: per kernel, the metrics in step
    with its duration (``_follows_duration``), whose quiet charts are left out; the
    other quiet metrics (no change point, never outside their budget) are charted too.
    Without it, they are a line each in a table (latest, lowest, highest): a kernel page
    of a large store, where their charts were most of the time."""
    quiet_charts = derived is not None
    toc = "".join(
        f'<li><a class="kernel" href="#{kernel_anchor(machine, kernel)}">{escape(kernel)}</a>'
        + (f" ({escape(machine)})" if len(machines) > 1 else "") + "</li>"
        for (machine, kernel), _ in groups
    )
    body = [f'<nav class="toc"><ul>{toc}</ul></nav>']
    for (machine, kernel), at in groups:
        heading = escape(kernel) + (f' <span class="sub">on {escape(machine)}</span>' if len(machines) > 1 else "")
        figures: dict[bool, list[str]] = {True: [], False: []}
        names: list[str] = []
        steady: list[str] = []  # "vgpr 52": the same in every run, no chart
        quiet: list[list[str]] = []  # without quiet_charts: "hbm_bw, latest, lowest, highest"
        # hbm_bw, flop_rate, ...: the duration chart says it
        follows = derived.get((machine, kernel), set()) if derived is not None else set()
        for headline, metric, points in _metrics(rows, at):
            here = changes.of_series(machine, kernel, metric)
            values, outside = rows.values[points], rows.outside[points]
            if not headline:
                names.append(metric)
                if _unchanged(values, outside, len(here) > 0):
                    value = format_value(float(values[-1]), rows.unit[points[-1]])
                    steady.append(f"{escape(metric)} {escape(value)}")
                    continue
                if not quiet_charts and not len(here) and not outside.any():
                    unit = rows.unit[points[-1]]
                    finite = values[~np.isnan(values)]
                    low, high = (float(finite.min()), float(finite.max())) if finite.size else (math.nan, math.nan)
                    quiet.append([escape(metric)] + [escape(format_value(float(v), unit))
                                                     for v in (values[-1], low, high)])
                    continue
                if metric in follows and not len(here) and not outside.any():
                    continue  # its own change point or a value out of budget still gets a chart
            # Only the charts a person asked about, or with a change point or a value out
            # of its budget, carry their runs table (the commits): a page of 5 kernels x
            # 30 metrics x 8 runs was 1 MB of tables repeating one another.
            runs = headline or len(here) > 0 or bool(outside.any())
            figures[headline].append(_chart_figure(rows, points, changes, here, machine=machine, kernel=kernel,
                                                   metric=metric, runs=runs))
        section = f'<div class="charts">{"".join(figures[True])}</div>'
        if names:
            n_runs = len(np.unique(rows.times[at]))
            same = f'<p class="sub">the same in all {n_runs} runs: {", ".join(steady)}</p>' if steady else ""
            drawn = "".join(figures[False])
            shown = [m for m in names if m in follows and kernel_anchor(machine, kernel, m) not in drawn]
            if shown:
                same += (f'<p class="sub">in step with duration (a constant times it or over it, so its chart is '
                         f'the duration chart\'s): {escape(", ".join(shown))}</p>')
            if quiet:
                same += (f'<p class="sub">no change point, within budget in all {n_runs} runs:</p>'
                         + _table(["metric", "latest", "lowest", "highest"], quiet, numeric=(1, 2, 3), cls="quiet"))
            section += (f'<details class="more"><summary>{len(names)} more metrics ({escape(", ".join(names))})'
                        f'</summary>{same}<div class="charts">{"".join(figures[False])}</div></details>')
        body.append(f'<section id="{kernel_anchor(machine, kernel)}">'
                    + (f'<h2 class="kernel">{heading}</h2>' if headings else "") + f"{section}</section>")
    return body


def index_html(view: HistoryView) -> str:
    series, changes = _normalised(view)
    found = open_regressions(view)
    latest = latest_runs(series)
    runs = series["run"].nunique() if (series["run"] != "").any() else series["time"].nunique()
    newest = series.loc[series["time"].idxmax()] if len(series) else None
    rows = []
    for suite, mine in series.groupby("suite", sort=True, observed=True):
        last = latest[latest["suite"] == suite]
        n_open = int(((found["suite"] == suite) & found["headline"]).sum())
        n_out = int(last["outside"].sum())
        newest_row = mine.loc[mine["time"].idxmax()]
        rows.append([
            f'<a href="{escape(suite_file(str(suite)))}">{escape(str(suite))}</a>',
            str(mine.loc[~mine["kernel"].astype(str).map(is_timeline_name), ["machine", "kernel"]]
                .drop_duplicates().shape[0]),
            str(len(last)),
            str(mine["run"].nunique() if (mine["run"] != "").any() else mine["time"].nunique()),
            f"{_when(newest_row['time'])} {_commit(newest_row['commit'])}",
            f'<span class="bad">{n_open}</span>' if n_open else "0",
            f'<span class="bad">{n_out}</span>' if n_out else "0",
        ])
    meta = f"{runs} runs" + (f", {_when(series['time'].min())} to {_when(series['time'].max())} UTC" if len(series) else "")
    if newest is not None:
        meta += f"; latest: {_when(newest['time'])}" + (f", commit {_commit(newest['commit'])}" if newest["commit"] else "")
    body = [
        "<header>",
        f"<h1>{escape(view.title)}</h1>",
        f'<p class="meta">{meta}</p>',
        "</header>",
        "<main>",
        f"<h2>Open regressions ({int(found['headline'].sum())})</h2>",
        _regressions_section(found, _units(series), with_suite=True),
        "<h2>Suites</h2>",
        _table(["suite", "kernels", "series", "runs", "latest run", "open regressions", "outside budget"], rows,
               numeric=(1, 2, 3, 5, 6), cls="suites") if rows else "<p>No runs recorded yet.</p>",
        "</main>",
    ]
    return _page(view.title, body)


# --- the pages of a large store's site (``perfcheck.history.site`` writes them part by part) ---


@dataclass(frozen=True)
class KernelPage:
    """One kernel's page (``kernel_pages``) and its line on the list of every kernel."""

    machine: str
    kernel: str
    html: str
    metrics: int
    changes: int  # change points
    open: int  # open regressions


def kernel_pages(view: PreparedView, *, suite: str, back: str) -> "Iterator[KernelPage]":
    """The page of each kernel of suite ``suite`` in ``view``, in (machine, kernel) order:
    its charts as a suite page draws them, the quiet metrics in a table; ``back``: its
    suite's page. The frames are made ready once for a part (``prepare``) and turned
    into arrays once: per kernel, pandas' fixed costs were most of a page's time."""
    series, changes = view.series, view.changes
    if len(series) and not (series["suite"].iloc[0] == suite and series["suite"].iloc[-1] == suite):
        series = series[series["suite"] == suite].reset_index(drop=True)  # the rows are ordered by suite first
    if len(changes) and not (changes["suite"] == suite).all():
        changes = changes[changes["suite"] == suite].reset_index(drop=True)
    rows, changed = _Rows.of(series), _Changes.of(changes)
    is_open = changes["open"].to_numpy(dtype=bool)
    changes_of = changes.groupby(["machine", "kernel"], sort=False, observed=True).indices if len(changes) else {}
    for (machine, kernel), at in series.groupby(["machine", "kernel"], sort=True, observed=True).indices.items():
        machine, kernel = str(machine), str(kernel)
        mine = changes_of.get((machine, kernel), _NONE)
        runs = set(rows.run[at].tolist())  # run ids (str), "" where the view has none
        times = rows.times[at]
        count = len(runs) if runs != {""} else len(np.unique(times))
        body = [
            "<header>",
            f'<p><a href="index.html">&larr; all suites</a> &middot; <a href="{escape(back)}">suite {escape(suite)}</a></p>',
            f'<h1 class="kernel">{escape(kernel)}</h1>',
            f'<p class="meta">suite {escape(suite)}' + (f" on {escape(machine)}" if machine else "")
            + f"; {count} runs, {_when(pd.Timestamp(times.min(), tz='UTC'))} to "
              f"{_when(pd.Timestamp(times.max(), tz='UTC'))} UTC</p>",
            "</header>",
            "<main>",
            legend_svg(),
            # no table of contents; the quiet metrics in a table (a page per kernel of a large store)
            *_sections(rows, [((machine, kernel), at)], changed, [machine], headings=False)[1:],
            "</main>",
        ]
        yield KernelPage(machine, kernel, _page(f"{kernel} - {suite} - {view.title}", body),
                         len(np.unique(rows.metric[at])), len(mine), int(is_open[mine].sum()))


@dataclass(frozen=True)
class SuiteSummary:
    """A suite's line on the index and the head of its overview, summed part by part."""

    suite: str
    runs: int
    first: pd.Timestamp
    latest: pd.Timestamp
    machines: tuple[str, ...]
    kernels: int  # not counting the run's timeline rows (@run, range:...)
    series: int
    outside: int  # series whose latest value is outside its budget
    newest_commit: str


def summaries(facts: "DigestFacts", runs: Mapping[str, int], firsts: Mapping[str, pd.Timestamp]) -> list[SuiteSummary]:
    """Each suite's summary from the digest's facts (the newest row of every series),
    its number of runs and the time of its oldest."""
    latest = facts.latest
    out = []
    for suite, mine in latest.groupby("suite", sort=True, observed=True):
        newest = mine.loc[mine["time"].idxmax()]
        kernels = mine.loc[~mine["kernel"].astype(str).map(is_timeline_name), ["machine", "kernel"]].drop_duplicates()
        out.append(SuiteSummary(str(suite), int(runs.get(str(suite), 0)), firsts[str(suite)], mine["time"].max(),
                                tuple(sorted(m for m in mine["machine"].unique() if m)), len(kernels), len(mine),
                                int(mine["outside"].sum()), str(newest["commit"])))
    return out


def index_page_html(suites: Sequence[SuiteSummary], opened: pd.DataFrame, facts: "DigestFacts", *,
                    link: "Callable[[object], str]", title: str, rows: int) -> str:
    """``index_html`` from summed facts: the open regressions (the worst ``rows``
    listed; ``opened``: every open regression, ``why`` filled where listed), a line per suite."""
    latest = facts.latest
    lines = []
    for s in suites:
        n_open = int(((opened["suite"] == s.suite) & opened["headline"]).sum())
        lines.append([f'<a href="{escape(suite_file(s.suite))}">{escape(s.suite)}</a>', str(s.kernels), str(s.series),
                      str(s.runs), f"{_when(s.latest)} {_commit(s.newest_commit)}",
                      f'<span class="bad">{n_open}</span>' if n_open else "0",
                      f'<span class="bad">{s.outside}</span>' if s.outside else "0"])
    meta = f"{len(facts.runs)} runs"
    if len(latest):
        newest = latest.loc[latest["time"].idxmax()]
        meta += f", {_when(min(s.first for s in suites))} to {_when(latest['time'].max())} UTC"
        meta += f"; latest: {_when(newest['time'])}" + (f", commit {_commit(newest['commit'])}" if newest["commit"] else "")
    worst = largest_first(opened)
    listed = pd.concat([worst[worst["headline"]].head(rows), worst[~worst["headline"]].head(rows)])
    n_main = int(opened["headline"].sum())
    body = [
        "<header>", f"<h1>{escape(title)}</h1>", f'<p class="meta">{meta}</p>', "</header>", "<main>",
        f"<h2>Open regressions ({n_main})</h2>",
        _regressions_section(listed, facts.units, with_suite=True, link=link, total=(n_main, len(opened) - n_main)),
        "<h2>Suites</h2>",
        _table(["suite", "kernels", "series", "runs", "latest run", "open regressions", "outside budget"], lines,
               numeric=(1, 2, 3, 5, 6), cls="suites") if lines else "<p>No runs recorded yet.</p>",
        "</main>",
    ]
    return _page(title, body)


def overview_html(summary: SuiteSummary, opened: pd.DataFrame, changed: pd.DataFrame, outside: pd.DataFrame,
                  units: Mapping[tuple[str, str, str, str], str], *, link: "Callable[[object], str]",
                  kernels_page: str, title: str, rows: int) -> str:
    """A large suite's page: only what moved. ``opened``: its open regressions (``why``
    where listed), ``changed``: a row per series with change points (``changes``,
    ``regressions``, ``latest_pct``, ``latest_kind``, ``time``, ``commit``), ``outside``:
    the newest rows outside their budget. Each list: the worst ``rows``."""
    worst = largest_first(opened)
    listed = pd.concat([worst[worst["headline"]].head(rows), worst[~worst["headline"]].head(rows)])
    n_main = int(opened["headline"].sum())
    moved = changed.assign(size=changed["latest_pct"].abs().fillna(0.0)).sort_values(
        "size", ascending=False, kind="stable").head(rows)
    moved_rows = [[f'<a class="kernel" href="{escape(link(r))}">{escape(r.kernel)}</a>', escape(r.metric),
                   escape(r.machine) or "-", str(r.changes), f"{_when(r.time)} {_commit(r.commit)}",
                   _change(r.latest_pct, r.latest_kind)] for r in moved.itertuples(index=False)]
    out_rows = [[f'<a class="kernel" href="{escape(link(r))}">{escape(r.kernel)}</a>', escape(r.metric),
                 escape(format_value(r.value, r.unit)), escape(budget_text(r.low, r.high, r.unit)),
                 '<span class="bad">failed</span>' if r.failed else '<span class="bad">outside</span>']
                for r in outside.head(rows).itertuples(index=False)]
    body = [
        "<header>",
        '<p><a href="index.html">&larr; all suites</a></p>',
        f"<h1>Suite {escape(summary.suite)}</h1>",
        f'<p class="meta">{summary.runs} runs, {_when(summary.first)} to {_when(summary.latest)} UTC'
        + (f"; machines: {escape(', '.join(summary.machines))}" if summary.machines else "")
        + f'; {summary.kernels} kernels, {summary.series} series: <a href="{escape(kernels_page)}">every kernel</a>'
        + "</p>",
        "</header>",
        "<main>",
        f"<h2>Open regressions ({n_main})</h2>",
        _regressions_section(listed, units, with_suite=False, link=link, total=(n_main, len(opened) - n_main)),
        f"<h2>Series that changed ({len(changed)})</h2>",
        (_table(["kernel", "metric", "machine", "change points", "latest since (run, commit)", "latest change"],
                moved_rows, numeric=(3, 5), cls="changed")
         + (f'<p class="sub">The {len(moved)} largest latest changes of {len(changed)}.</p>'
            if len(changed) > len(moved) else "")) if len(changed) else '<p class="good">No change points.</p>',
        f"<h2>Outside budget in the latest run ({len(outside)})</h2>",
        (_table(["kernel", "metric", "value", "budget", "status"], out_rows, numeric=(2,), cls="outside")
         + (f'<p class="sub">The first {rows} of {len(outside)}.</p>' if len(outside) > rows else ""))
        if len(outside) else '<p class="good">Every latest value within its budget.</p>',
        "</main>",
    ]
    return _page(f"{summary.suite} - {title}", body)


def kernels_html(summary: SuiteSummary, kernels: pd.DataFrame, *, link: "Callable[[object], str]", title: str,
                 pages: Sequence[str] = (), page: int = 0, first: int = 0, total: int | None = None) -> str:
    """Kernels of a large suite, a line each (``kernels``: ``machine``, ``kernel``,
    ``metrics``, ``changes``, ``open``), linked to its page. The list of every kernel is
    split over ``pages`` (their file names; this one is ``pages[page]``, its first line
    the ``first``-th of ``total``), so that no page grows with the number of kernels."""
    total = len(kernels) if total is None else total
    rows = [[f'<a class="kernel" href="{escape(link(r))}">{escape(r.kernel)}</a>', escape(r.machine) or "-",
             str(r.metrics), str(r.changes), f'<span class="bad">{r.open}</span>' if r.open else "0"]
            for r in kernels.itertuples(index=False)]
    nav = ""
    if len(pages) > 1:
        links = " ".join(f'<strong aria-current="page">{i + 1}</strong>' if i == page else
                         f'<a href="{escape(name)}">{i + 1}</a>' for i, name in enumerate(pages))
        nav = (f'<nav class="pages"><p>kernels {first + 1:,} to {first + len(kernels):,} of {total:,} '
               f"(by machine and name), page {page + 1} of {len(pages)}: {links}</p></nav>")
    body = [
        "<header>",
        f'<p><a href="index.html">&larr; all suites</a> &middot; <a href="{escape(suite_file(summary.suite))}">'
        f"suite {escape(summary.suite)}</a></p>",
        f"<h1>Kernels of suite {escape(summary.suite)} ({total})</h1>",
        nav,
        "</header>",
        "<main>",
        _table(["kernel", "machine", "metrics", "change points", "open regressions"], rows, numeric=(2, 3, 4),
               cls="kernels"),
        nav,
        "</main>",
    ]
    return _page(f"kernels of {summary.suite} - {title}" + (f" ({page + 1}/{len(pages)})" if len(pages) > 1 else ""),
                 [line for line in body if line])


def write_site(view: HistoryView, directory: str | Path) -> list[Path]:
    """index.html and a page per suite in ``directory`` (created), each written
    atomically; returns the paths, index first."""
    from perfcheck.progress import Progress

    target = Path(directory)
    suites = sorted(view.series["suite"].astype(str).unique())
    # a large store's site takes a while: "writing the dashboard: 12 of 40 pages, 5 s" on a terminal
    with Progress("writing the dashboard", total=len(suites) + 1, unit="pages") as progress:
        written = [write_atomic(target / "index.html", index_html(view))]
        progress.update(1)
        for suite in suites:
            written.append(write_atomic(target / suite_file(suite), suite_html(view, suite)))
            progress.update(len(written))
    return written


# --- Markdown digest -------------------------------------------------------------------------


# Names from the store are escaped as the check summary and the PR comment escape them.
_md = mdescape.text
_md_code = mdescape.code


@dataclass(frozen=True)
class DigestFacts:
    """What the Markdown digest says, from the whole view or summed part by part
    (``DigestFacts.joined``): the open regressions (``changes`` rows, in the order of
    ``_normalised``), the newest row of every series, their units, the runs."""

    open: pd.DataFrame
    latest: pd.DataFrame
    units: dict[tuple[str, str, str, str], str]
    runs: frozenset[object]

    @staticmethod
    def of(view: HistoryView) -> "DigestFacts":
        return DigestFacts.of_prepared(prepare(view))

    @staticmethod
    def of_prepared(prepared: PreparedView) -> "DigestFacts":
        series, changes, ends = prepared.series, prepared.changes, prepared.ends
        runs = series["run"] if (series["run"] != "").any() else series["time"]
        latest = series.iloc[ends].copy()  # latest_runs(series), the rows already ordered
        return DigestFacts(changes[changes["open"] & ~changes["member"]], latest, _units_of(latest),
                           frozenset(runs.unique()))

    def with_budgets(self, low: np.ndarray, high: np.ndarray) -> "DigestFacts":
        """These facts with ``low`` and ``high`` the budget of each ``latest`` row (in its
        order) and whether it is outside it (``_mark_outside``): the digest reads the
        budgets of the newest rows alone (``perfcheck.history.scan``)."""
        from dataclasses import replace

        latest = self.latest.assign(low=np.asarray(low, dtype=float), high=np.asarray(high, dtype=float))
        _mark_outside(latest)
        return replace(self, latest=latest)

    @staticmethod
    def of_newest(newest: pd.DataFrame, headline: np.ndarray, changes: pd.DataFrame | None,
                  runs: frozenset[object]) -> "DigestFacts":
        """``of_prepared`` from what the digest shows of a view, without ordering and
        numbering every row of it (``prepare``, most of the digest's own time at a year
        of nights): ``newest`` the newest row of each series (``HistoryView.series``
        columns), ``headline`` each one's ``_headline`` flag (found over every row of its
        series and kernel), ``changes`` the view's change rows, ``runs`` its runs."""
        latest = _filled(newest)
        order, _, _ = _series_order(latest)
        latest = latest.take(order).reset_index(drop=True)
        latest["headline"] = np.asarray(headline, dtype=bool)[order]
        _mark_outside(latest)
        changes = _changes_of(changes, latest[[*SERIES_KEY, "headline"]])
        return DigestFacts(changes[changes["open"] & ~changes["member"]], latest, _units_of(latest), runs)

    @staticmethod
    def joined(parts: Iterable["DigestFacts"]) -> "DigestFacts":
        """The facts of a view made of the parts' series (each series whole in one part)."""
        parts = list(parts)
        if not parts:
            return DigestFacts.of(HistoryView(pd.DataFrame(columns=SERIES_COLUMNS)))
        found = pd.concat([p.open for p in parts], ignore_index=True)
        latest = pd.concat([p.latest for p in parts], ignore_index=True)
        return DigestFacts(found.sort_values([*SERIES_KEY, "time"], kind="stable").reset_index(drop=True),
                           latest.sort_values(SERIES_KEY, kind="stable").reset_index(drop=True),
                           {k: v for p in parts for k, v in p.units.items()}, frozenset().union(*(p.runs for p in parts)))


def markdown_digest(view: HistoryView, *, link: str | None = None) -> str:
    """A few lines for a nightly issue or a chat message: the latest run, the
    open regressions on checked metrics and duration (worst first; those on other
    metrics are counted), the kernels whose latest value is outside its budget.
    ``link``: where the HTML report is published."""
    return digest_text(DigestFacts.of(view), title=view.title, link=link)


def largest_first(found: pd.DataFrame) -> pd.DataFrame:
    """Change rows by the size of their change, largest first (ties keep their order)."""
    order = found["change_pct"].abs().fillna(0.0).sort_values(ascending=False, kind="stable").index
    return found.loc[order].reset_index(drop=True)


def shown_in_digest(found: pd.DataFrame) -> pd.DataFrame:
    """The open regressions (``DigestFacts.open``) the digest's table lists, with their
    why: those on checked metrics and duration, worst first, the first MAX_DIGEST_ROWS
    (``perfcheck.history.scan`` diagnoses only these)."""
    everything = largest_first(found)
    return everything[everything["headline"]].head(MAX_DIGEST_ROWS)


def digest_text(facts: DigestFacts, *, title: str, link: str | None = None) -> str:
    """``markdown_digest`` of ``facts`` (``perfcheck.history.scan.digest`` sums them
    over a store part by part)."""
    everything = largest_first(facts.open)
    found, other = everything[everything["headline"]], everything[~everything["headline"]]
    latest = facts.latest
    outside = latest[latest["outside"]]
    units = facts.units
    lines = [f"## {_md(title)}", ""]
    if latest.empty:
        return "\n".join([*lines, "No runs recorded yet.", ""])
    newest = latest.loc[latest["time"].idxmax()]
    runs = len(facts.runs)
    head = (f"Latest run {_when(newest['time'])} UTC" + (f", commit {_md_code(newest['commit'][:12], table=False)}"
                                                          if newest["commit"] else "")
            + f"; {runs} runs, {latest.shape[0]} series. ")
    if found.empty and outside.empty:
        head += "No open regressions, every latest value within its budget."
    else:
        head += f"**{len(found)} open regression{'s' if len(found) != 1 else ''}**, " \
                f"**{len(outside)} outside budget**."
    lines.append(head)
    if link:
        lines += ["", f"Charts: {link}"]
    if not found.empty:
        lines += ["", "### Open regressions", "",
                  "| suite | kernel | metric | since | before | after | change | why |",
                  "|---|---|---|---|---:|---:|---:|---|"]
        for row in shown_in_digest(facts.open).itertuples(index=False):
            unit = units.get((row.suite, row.machine, row.kernel, row.metric), "")
            since = _when(row.time) + (f" {_md_code(row.commit[:12])}" if row.commit else "")
            lines.append(f"| {_md(row.suite)} | {_md_code(row.kernel)} | {_md(row.metric)} | {since} | "
                         f"{_md(format_value(row.before, unit))} | {_md(format_value(row.after, unit))} | "
                         f"{row.change_pct:+.1f}%{' ' + _md('(also ' + row.also + ')') if row.also else ''} | "
                         f"{_md(row.why) or '-'} |")
        if len(found) > MAX_DIGEST_ROWS:
            lines.append(f"\n...and {len(found) - MAX_DIGEST_ROWS} more.")
    if not other.empty:
        names = ", ".join(sorted(other["metric"].astype(str).unique()))
        lines += ["", f"Also {len(other)} open regression{'s' if len(other) != 1 else ''} on metrics no "
                  f"expectation checks ({_md(names)}): see the report."]
    if not outside.empty:
        lines += ["", "### Outside budget in the latest run", "",
                  "| suite | kernel | metric | value | budget |", "|---|---|---|---:|---|"]
        for row in outside.head(MAX_DIGEST_ROWS).itertuples(index=False):
            lines.append(f"| {_md(row.suite)} | {_md_code(row.kernel)} | {_md(row.metric)} | "
                         f"{_md(format_value(row.value, row.unit))} | {_md(budget_text(row.low, row.high, row.unit))} |")
        if len(outside) > MAX_DIGEST_ROWS:
            lines.append(f"\n...and {len(outside) - MAX_DIGEST_ROWS} more.")
    return "\n".join(lines) + "\n"
