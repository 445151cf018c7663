"""``perfcheck history report --html`` over a store of any size: the dashboard written
part by part (issue 22: one frame of every series of 2,000 kernels took minutes and a
page of tens of MB).

The site:

* ``index.html``: every suite in a line, the open regressions across suites (the
  worst ``OVERVIEW_ROWS``).
* a page per suite (``dashboard.suite_file``). A small suite (at most
  ``INLINE_VALUES`` values) keeps today's page: every kernel's charts on it. A larger
  one gets an overview that lists only what moved (open regressions, the series with
  change points, values outside their budget, each list the worst ``OVERVIEW_ROWS``)
  and a page per kernel (``kernel_file``) with that kernel's charts, plus a list of
  every kernel (``kernels_file``, ``KERNELS_PER_PAGE`` a page). The overview and each
  page of the list stay a few hundred KB however many series the suite has.

Memory: one part of the store (``HistoryStore.batches``) at a time, plus the small
suites' values and a line per kernel and per change point. One read of the store
(``scan.ReportPass``), each part made ready once for the digest's facts and its kernel
pages (``dashboard.prepare``; the pages drawn from its arrays, no frame per chart),
then the kernels whose findings a page shows read again for their diagnosis. The
site is built in a hidden folder beside the target and renamed onto it when complete
(``atomicfile.publish_directory``): a reader or a killed run never sees half a site.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from perfcheck.atomicfile import new_directory_beside, publish_directory
from perfcheck.errors import UsageError
from perfcheck.history import dashboard as board
from perfcheck.history.scan import ReportPass, digest_facts, grouping
from perfcheck.history.store import BATCH_ROWS
from perfcheck.progress import Progress

if TYPE_CHECKING:
    from perfcheck.history.accepted import Acceptance
    from perfcheck.history.backend import HistoryStore
    from perfcheck.history.dashboard import DigestFacts

# A suite of at most this many values (series x runs) and series keeps one page with
# every chart: about 200 bytes a drawn run and 3 KB a chart (its axes, its runs table's
# head), so at most ~2 MB. (2,000 series of 3 runs made a page of 1.6 MB.)
INLINE_VALUES = 10_000
INLINE_SERIES = 150
# Rows of each list on an overview page (worst first); the kernel pages have the rest.
OVERVIEW_ROWS = 100
# Kernels a page of the list of every kernel holds: ~600 bytes a line with long C++
# template names, so ~0.3 MB a page (one page of 2,000 kernels was 1.2 MB, and it grew
# with the suite: 10,000 kernels would be 6 MB).
KERNELS_PER_PAGE = 500
# What a site folder may hold: the pages this module writes. A folder with anything
# else is not replaced (``--html .`` must not remove a checkout).
_SITE_NAME = re.compile(r"^(index\.html|(suite|kernel|kernels)-[A-Za-z0-9_.-]+\.html)$")
_KEY = ["machine", "suite", "kernel", "metric", "run_id"]


@dataclass(frozen=True)
class Site:
    pages: list[Path]  # index.html first, then the suite pages (kernel pages not listed)
    kernel_pages: int
    facts: "DigestFacts"  # what the Markdown digest says of the same store


def kernel_file(suite: str, machine: str, kernel: str) -> str:
    """``kernel-<suite>-<digest>.html``: a kernel's page (names too long for a file)."""
    return board.suite_file(suite).replace("suite-", "kernel-", 1)[:-5] + "-" + \
        board.kernel_anchor(machine, kernel)[2:] + ".html"


def kernels_file(suite: str, page: int = 0) -> str:
    """``kernels-<suite>.html``: the list of every kernel of a large suite; its ``page``-th
    page (from 0) after the first is ``kernels-<suite>-<page + 1>.html``."""
    first = board.suite_file(suite).replace("suite-", "kernels-", 1)
    return first if page == 0 else f"{first[:-5]}-{page + 1}.html"


def digest_inside(directory: str | Path, digest: str | Path | None) -> str | None:
    """The digest's file name when ``digest`` (``--markdown``) is a file of the site's
    folder (``--html DIR --markdown DIR/nightly.md``): it is written with the site."""
    if digest is None:
        return None
    path = Path(digest)
    return path.name if path.parent.resolve() == Path(directory).resolve() else None


def check_target(directory: str | Path, digest: str | Path | None = None) -> Path:
    """``directory`` may be written: absent, empty, or a site this module wrote (with
    the digest ``digest`` in it, see ``digest_inside``)."""
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise UsageError(f"--html {target}: not a directory")
    # the site is built beside its folder and renamed onto it: the current folder (or
    # one above it) cannot be replaced under the shell that sits in it
    try:
        here, there = Path.cwd().resolve(), target.resolve()
    except (RuntimeError, OSError) as exc:  # a loop of links (RuntimeError before Python 3.13)
        raise UsageError(f"--html {directory}: cannot be written ({exc})") from None
    if there == here or there in here.parents:
        raise UsageError(f"--html {directory}: is the current folder or holds it; give the site a folder of its own "
                         "(e.g. --html site)")
    if target.is_dir():
        own = digest_inside(target, digest)
        foreign = [p.name for p in target.iterdir() if not _SITE_NAME.match(p.name) and p.name != own]
        if foreign:
            raise UsageError(f"--html {target}: the directory holds other files ({', '.join(sorted(foreign)[:3])}"
                             f"{', ...' if len(foreign) > 3 else ''}); give a new or empty directory, or a site "
                             "written before")
    return target


def write_report(store: "HistoryStore", directory: str | Path, *, where: Mapping[str, object],
                 chosen: pd.DataFrame | None = None, last: int | None = None, accepted: "Sequence[Acceptance]" = (),
                 title: str = "perfcheck history", rows: int = BATCH_ROWS, inline_values: int = INLINE_VALUES,
                 digest: str | Path | None = None, link: str | None = None) -> Site:
    """The site of the series ``where`` selects (``store.batches`` filters; ``chosen``:
    their names, ``store.series_keys()`` filtered) in ``directory``, and the digest's facts.
    ``digest``: the Markdown digest's path, written into the site when it is in its folder
    (``link``: the digest's link to the site)."""
    target = check_target(directory, digest)
    own = digest_inside(target, digest)
    keys = chosen if chosen is not None else store.series_keys()  # type: ignore[attr-defined]
    runs = len(store.runs())  # type: ignore[attr-defined]
    runs = min(runs, last) if last is not None else runs
    per_suite = keys.groupby("suite", observed=True).size()
    inline = {str(s) for s, n in per_suite.items() if n <= INLINE_SERIES and n * runs <= inline_values}
    built = new_directory_beside(target)
    try:
        # minutes at a year of nights: "writing the dashboard: 6,400 of 32,000 series (20%), 41 s" on a terminal
        with Progress("writing the dashboard", total=len(keys), unit="series") as progress:
            writer = _Writer(built, inline, title, progress)
            report = ReportPass(store, where=where, last=last, accepted=accepted, rows=rows)
            facts = digest_facts(report, title=title, each=writer.part)
            pages = writer.finish(report, facts)
            if own is not None:  # published with the pages, never a site without its digest
                (built / own).write_text(board.digest_text(facts, title=title, link=link), encoding="utf-8")
        published = publish_directory(built, target)
    except BaseException:
        shutil.rmtree(built, ignore_errors=True)
        raise
    return Site([published / p for p in pages], writer.kernel_pages, facts)


@dataclass
class _Suite:
    """What a suite's pages need, gathered part by part (a builder, so not frozen)."""

    runs: set
    first: pd.Timestamp | None = None  # the oldest run's time
    machines: set | None = None
    frames: list | None = None  # a small suite's values
    kernels: list | None = None  # a large suite's kernels: (machine, kernel, metrics, change points, open)
    changes: list | None = None  # every change point's record


class _Writer:
    def __init__(self, folder: Path, inline: set[str], title: str, progress: Progress) -> None:
        self.folder, self.inline, self.title, self.progress = folder, inline, title, progress
        self.suites: dict[str, _Suite] = {}
        self.kernel_pages = 0
        self.series = 0

    def _write(self, name: str, text: str) -> None:
        # inside the hidden folder: renamed into place whole, so no temp file per page
        (self.folder / name).write_text(text, encoding="utf-8")

    def part(self, part: pd.DataFrame, records: list[dict[str, object]], prepared: "board.PreparedView") -> None:
        self._pages(part, records, prepared)
        self.series += len(prepared.ends)  # a row per series
        self.progress.update(self.series)

    def _pages(self, part: pd.DataFrame, records: list[dict[str, object]], prepared: "board.PreparedView") -> None:
        changes = board.history_view(part.iloc[:0], records).changes if records else None
        for suite, rows in part.groupby("suite", sort=False, observed=True):
            suite = str(suite)
            mine = self.suites.setdefault(suite, _Suite(set(), machines=set(), frames=[], kernels=[], changes=[]))
            mine.runs.update(map(str, rows["run_id"].unique()))  # unique first: not a string per row of a Categorical
            oldest = rows["time"].min()
            mine.first = oldest if mine.first is None else min(mine.first, oldest)
            here = changes[changes["suite"] == suite] if changes is not None else None
            if here is not None and len(here):
                mine.changes.append(here)
            if suite in self.inline:
                mine.frames.append(rows)
                continue
            # the part's kernels made ready for their charts at once (with the digest's
            # facts of the part), then a page each
            for page in board.kernel_pages(prepared, suite=suite, back=board.suite_file(suite)):
                self._write(kernel_file(suite, page.machine, page.kernel), page.html)
                self.kernel_pages += 1
                mine.kernels.append((page.machine, page.kernel, page.metrics, page.changes, page.open))

    def link(self, row: object) -> str:
        """Where a row (suite, machine, kernel, metric) is charted."""
        suite, machine, kernel, metric = (str(getattr(row, c)) for c in ("suite", "machine", "kernel", "metric"))
        page = board.suite_file(suite) if suite in self.inline else kernel_file(suite, machine, kernel)
        return f"{page}#{board.kernel_anchor(machine, kernel, metric)}"

    def finish(self, report: ReportPass, facts: "DigestFacts") -> list[str]:
        found = report.grouped()
        opened = facts.open
        by_head = {(f.machine, f.suite, f.kernel, f.headline.metric, f.headline.run_id): f for f in found}
        small = [f for f in found if f.suite in self.inline]
        # the rows the pages list get their why: the worst of each large suite and of the
        # index, every finding of a small suite (its page lists them all)
        heads = []
        if len(opened):
            listed = pd.concat([_overview_rows(opened), *(_overview_rows(opened[opened["suite"] == s])
                                                          for s in self.suites if s not in self.inline)])
            heads = [by_head[k] for k in listed[_KEY].itertuples(index=False, name=None) if k in by_head]
        diagnosed = report.diagnosed([*heads, *small])
        if len(opened):
            opened = grouping(opened, found, diagnosed)
        summaries = {s.suite: s for s in board.summaries(facts, {k: len(v.runs) for k, v in self.suites.items()},
                                                        {k: v.first for k, v in self.suites.items()})}
        names = ["index.html"]
        self._write("index.html", board.index_page_html(list(summaries.values()), opened, facts, link=self.link,
                                                        title=self.title, rows=OVERVIEW_ROWS))
        for suite in sorted(self.suites):
            mine = self.suites[suite]
            names.append(board.suite_file(suite))
            if suite in self.inline:
                series = pd.concat(mine.frames, ignore_index=True)
                records = pd.concat(mine.changes, ignore_index=True) if mine.changes else None
                changes = grouping(records, [f for f in small if f.suite == suite], diagnosed) \
                    if records is not None else board.HistoryView(series).changes
                view = board.HistoryView(series.rename(columns={"run_id": "run"}), changes, self.title)
                self._write(names[-1], board.suite_html(view, suite))
                continue
            summary = summaries[suite]
            changed = _changed_series(pd.concat(mine.changes, ignore_index=True) if mine.changes else None)
            latest = facts.latest[facts.latest["suite"] == suite]
            self._write(names[-1], board.overview_html(
                summary, opened[opened["suite"] == suite], changed, latest[latest["outside"]], facts.units,
                link=self.link, kernels_page=kernels_file(suite), title=self.title, rows=OVERVIEW_ROWS))
            kernels = pd.DataFrame(mine.kernels, columns=["machine", "kernel", "metrics", "changes", "open"])
            kernels = kernels.sort_values(["machine", "kernel"], kind="stable")
            count = max(1, -(-len(kernels) // KERNELS_PER_PAGE))
            files = [kernels_file(suite, i) for i in range(count)]
            for i, name in enumerate(files):
                first = i * KERNELS_PER_PAGE
                self._write(name, board.kernels_html(summary, kernels.iloc[first:first + KERNELS_PER_PAGE],
                                                     link=self._kernel_link(suite), title=self.title, pages=files,
                                                     page=i, first=first, total=len(kernels)))
        return names

    def _kernel_link(self, suite: str):  # noqa: ANN202
        return lambda row: kernel_file(suite, str(row.machine), str(row.kernel))


def _changed_series(changes: pd.DataFrame | None) -> pd.DataFrame:
    """A row per series with change points: how many, how many regressions, the latest one."""
    columns = ["suite", "machine", "kernel", "metric", "changes", "time", "commit", "latest_pct", "latest_kind"]
    if changes is None or not len(changes):
        return pd.DataFrame(columns=columns)
    ordered = changes.sort_values(["machine", "kernel", "metric", "time"], kind="stable")
    grouped = ordered.groupby(["suite", "machine", "kernel", "metric"], sort=False, observed=True)
    latest = grouped.tail(1).set_index(["suite", "machine", "kernel", "metric"])
    out = latest.assign(changes=grouped.size(), latest_pct=latest["change_pct"], latest_kind=latest["kind"])
    out["commit"] = out["commit"].fillna("").astype(str)
    out["time"] = pd.to_datetime(out["time"], utc=True)
    return out.reset_index()[columns]


def _overview_rows(opened: pd.DataFrame) -> pd.DataFrame:
    """The open regressions an overview lists: the worst OVERVIEW_ROWS on checked metrics
    and duration, and the worst OVERVIEW_ROWS on the others."""
    worst = board.largest_first(opened)
    return pd.concat([worst[worst["headline"]].head(OVERVIEW_ROWS), worst[~worst["headline"]].head(OVERVIEW_ROWS)])
