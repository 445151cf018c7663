"""``perfcheck history detect`` over a whole store in bounded memory: change points and
findings read part by part (``HistoryStore.batches``: whole kernels, about
``store.BATCH_ROWS`` values each), never every value at once (issue 22: a year of
nightly runs of 2,000 kernels took 20 GB as one frame).

The answer is the one ``detect`` + ``recent_regressions`` + ``findings`` give over the
whole ``series()`` frame, because each step needs only:

* a series' change points: that series (a part holds it whole);
* ``--relative``: every kernel of one machine x suite x metric (the run-wide offset is
  a median over kernels): first the values alone (``HistoryStore.values``), one such
  slice at a time, keeping only what a kernel's values are divided by (``RunWide``: a
  number per run and per kernel); then the parts as above, their values divided;
* grouping and diagnosis: the kernel's own series, plus two small things from the
  whole store, gathered on the first pass (``findings.Context``): the order of the
  runs of each machine x suite, and how many kernels each machine x suite x metric
  has with the change points of all of them (whether the whole run moved).

So the values are read twice (with ``--relative``, their numbers once more): once to find the
change points, then again only for the kernels that have one, to group and diagnose.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from perfcheck.history.changepoints import (MIN_KERNELS, RUN_WIDE, ChangePoint, RunWide, detect,
                                            detect_relative_to, recent_in, run_wide)
from perfcheck.history.findings import (Context, Finding, assemble, explain, findings, group, headline_candidates,
                                        run_positions, watched, whole_runs, with_states, worst_first)
from perfcheck.history.partindex import PartIndex
from perfcheck.history.store import BATCH_ROWS

if TYPE_CHECKING:
    import pandas as pd

    from perfcheck.history.dashboard import DigestFacts, PreparedView
    from perfcheck.history.accepted import Acceptance
    from perfcheck.diagnosis import Diagnosis
    from perfcheck.history.backend import HistoryStore
    from perfcheck.history.lifecycle import State


@dataclass(frozen=True)
class Scan:
    found: list[Finding]  # worst first, as ``findings`` orders them, with their lifecycle (``with_states``)
    points: list[ChangePoint]  # every change point, per series oldest first
    series: int  # how many series were tested
    states: dict[ChangePoint, "State"] = field(default_factory=dict)  # each change point's lifecycle


def scan(
    store: "HistoryStore",
    *,
    machine: str | None = None,
    suite: Sequence[str] | str | None = None,
    kernel: Sequence[str] | str | None = None,
    metric: Sequence[str] | str | None = None,
    since: float | None = None,
    p: float,
    min_after: int,
    window: int,
    min_change_pct: float = 0.0,
    relative: bool = False,
    last: int | None = 3,
    tail: int | None = None,
    select: str | Iterable[str] | None = None,
    arches: Mapping[str, str] | None = None,
    accepted: "Sequence[Acceptance]" = (),
    named: Sequence[str] | None = None,
    hide_recovered: bool = False,
    rows: int = BATCH_ROWS,
) -> Scan:
    """The findings of every series the filters select (see the module docstring);
    ``last``: regressions in the last N runs of their series are new (None: none is);
    ``tail``: test only the latest N runs of each series; ``rows``: about how many
    values a part holds. Each change point's lifecycle (``lifecycle.states``: open,
    accepted by an ``accepted`` entry, recovered) is found in its part (a part holds whole
    kernels, so a series' states are complete in it); ``hide_recovered``: leave out the
    recovered regressions ``lifecycle.shown`` hides (as ``history detect`` lists them);
    ``named``: the metrics asked for by name (``with_states``)."""
    import pandas as pd

    from perfcheck.history import lifecycle

    where = {"machine": machine, "suite": suite, "kernel": kernel, "metric": metric, "since": since, "last": tail,
             "rows": rows}
    select = list(select) if select is not None and not isinstance(select, str) else select  # asked once a part
    states: dict[ChangePoint, State] = {}
    level = last if last is not None else 3

    def judged(found: list[ChangePoint], here: "list[State]") -> list[ChangePoint]:
        states.update((st.point, st) for st in here)
        if not hide_recovered:
            return found
        listed = {id(st.point) for st in lifecycle.shown(here)}
        return [cp for cp in found if cp not in states or id(cp) in listed]

    options = {"p": p, "min_after": min_after, "window": window, "min_change_pct": min_change_pct}
    points: list[ChangePoint] = []
    recent: list[ChangePoint] = []
    firsts = []  # the first row of each machine x suite x run, in frame order (run_positions)
    kernels: Counter[tuple[str, str, str]] = Counter()
    timelines: dict[tuple[str, str], set[str]] = {}  # the run's timeline rows (@run...) of each machine x suite
    order: dict[tuple[str, str, str], int] = {}  # each kernel's place in the store's order (its parts')
    early = _Early()
    series = 0

    def gather(part: "pd.DataFrame", index: PartIndex | None = None) -> int:
        """What a part says of the whole store (the module docstring); its number of series."""
        index = index if index is not None else PartIndex.of(part)
        _gathered(part, index, firsts, kernels, timelines)
        keys = index.series.keys  # each series' names, in the order of its first row
        for m, s, k, _ in keys:
            order.setdefault((m, s, k), len(order))
        return len(keys)

    offsets: dict[tuple[str, str, str], RunWide] = {}
    if relative:
        # the run-wide offsets first: every kernel of a machine x suite x metric at once (the
        # offset is a median over kernels), from its values alone, one such slice at a time;
        # what is kept of each is a number per run and per kernel (``RunWide``), and the
        # change points of its offset series (a series of no stored kernel)
        for key in _slices(store, machine=machine, suite=suite, kernel=kernel, metric=metric):
            wide, found, size = _run_wide(store, key, kernel=kernel, since=since, last=tail, options=options)
            if wide is not None:
                offsets[key] = wide
            found = judged(found, lifecycle.series_states(found, np.array([]), size, accepted, level))
            points.extend(found)
            recent.extend(recent_in(found, size, last) if last is not None else [])
    # then every kernel, part by part in the store's order, its values divided by those
    # offsets where --relative asks it: the change points, and their diagnoses from the part
    for part in store.batches(**where, columns=DETECTED):  # type: ignore[attr-defined]
        index = PartIndex.of(part)  # where its kernels and series lie, for every step below
        series += gather(part, index)
        found = detect_relative_to(part, offsets, index=index, **options) if relative else detect(part, **options)
        found = judged(found, lifecycle.states(found, part, accepted, last=level, index=index))
        points.extend(found)
        # the regressions in the last runs of their series (``recent_regressions``), each
        # series' length from the index (not the states' ``new``: a recovered regression's
        # ``new`` is its recovery's, which may be recent while the regression is not)
        if last is not None and found:
            sizes, number = index.series.sizes(), index.series.number
            recent.extend(cp for cp in found
                          if recent_in([cp], int(sizes[number[(cp.machine, cp.suite, cp.kernel, cp.metric)]]), last))
        early.diagnose(found, part, firsts[-1], index, select=select, arches=arches)
    if relative:  # as detect over the whole frame lists them: by series, each oldest first (sort is stable)
        points.sort(key=lambda cp: (cp.machine, cp.suite, cp.kernel, cp.metric))
    if not points:
        return Scan([], [], series, states)
    context = Context(run_positions(pd.concat(firsts, ignore_index=True)), whole_runs(points, kernels))
    by_kernel: dict[tuple[str, str, str], list[ChangePoint]] = {}
    for cp in points:
        by_kernel.setdefault((cp.machine, cp.suite, cp.kernel), []).append(cp)
    common = {"recent": recent, "select": select, "arches": arches, "context": context}
    out: list[Finding] = []
    wide = [cp for cp in points if cp.kernel == RUN_WIDE]
    if wide:  # a series of no stored kernel: nothing to read, no diagnosis
        out.extend(findings(wide, None, **common))  # type: ignore[arg-type]
    # each kernel's findings: from what its own part diagnosed on the first pass where it could
    # (``_Early``), else from the kernel read again
    done: dict[tuple[str, str, str], list[Finding]] = {}
    marked = set(recent)
    for key, mine in by_kernel.items():
        if key[2] != RUN_WIDE:
            found_early = early.findings(mine, context, recent=marked, select=select)
            if found_early is not None:
                done[key] = found_early
    again = {key for key in by_kernel if key[2] != RUN_WIDE and key not in done}
    if again:
        for part in store.batches(machine=machine, suite=suite, kernel=sorted({k for _, _, k in again}),  # type: ignore[attr-defined]
                                  metric=metric, since=since, last=tail, rows=rows, columns=DETECTED):
            here = part.drop_duplicates(["machine", "suite", "kernel"])[["machine", "suite", "kernel"]]
            for key in here.itertuples(index=False, name=None):
                order.setdefault(tuple(map(str, key)), len(order))  # type: ignore[arg-type]
            mine = [cp for key in here.itertuples(index=False, name=None) if key in again for cp in by_kernel[key]]
            if mine:
                for f in findings(mine, _with_timeline(store, part, mine, timelines, since=since, last=tail),
                                  **common):  # type: ignore[arg-type]
                    done.setdefault((f.machine, f.suite, f.kernel), []).append(f)
    for key in sorted(done, key=lambda key: order.get(key, len(order))):
        out.extend(done[key])
    # the order findings() gives over the whole store: its sort key, ties in series order (stable)
    out.sort(key=worst_first)
    return Scan(with_states(out, states, named=named), points, series, states)


# What the first pass and the findings read of a part (``detect``, ``gather``,
# ``lifecycle.states``, ``findings``: ``watched`` reads the outcome): each part need
# not carry the other columns (n, median, spread, low, high, branch, CI job and URL)
DETECTED = ("machine", "suite", "kernel", "metric", "unit", "run_id", "time", "commit", "value", "outcome")
# What the Markdown digest reads of a part: the change points' columns (the outcome: which
# series are checked, which newest values failed). A budget (low, high) counts only in each
# series' newest row: read for those rows alone after the pass (``ReportPass.budgets``), as
# reading them with every value cost a fifth of the read (two more columns fetched and made)
DIGESTED = DETECTED
# What ``ReportPass.budgets`` reads of the newest rows
BUDGETED = ("machine", "suite", "kernel", "metric", "run_id", "low", "high")
# Run ids bound in one query of ``ReportPass.budgets`` (``HistoryStore.batches(run_id=...)``)
BUDGET_RUNS = 100


def _slices(store: "HistoryStore", *, machine: Sequence[str] | str | None, suite: Sequence[str] | str | None,
            kernel: Sequence[str] | str | None, metric: Sequence[str] | str | None) -> list[tuple[str, str, str]]:
    """The machine x suite x metric of every series the filters select (as the store's
    filters take them: exact names), sorted; from the names alone, no value read."""
    keys = store.series_keys()  # type: ignore[attr-defined]
    for column, wanted in (("machine", machine), ("suite", suite), ("kernel", kernel), ("metric", metric)):
        if wanted is not None:
            keys = keys[keys[column].isin([wanted] if isinstance(wanted, str) else list(wanted))]
    # the distinct slices first: a Python tuple of each of a year's 32,000 series cost 0.2 s
    slices = keys[["machine", "suite", "metric"]].drop_duplicates()
    return sorted({(str(m), str(s), str(x)) for m, s, x in slices.itertuples(index=False, name=None)})


def _gathered(part: "pd.DataFrame", index: PartIndex, firsts: "list[pd.DataFrame]",
              kernels: Counter[tuple[str, str, str]], timelines: dict[tuple[str, str], set[str]]) -> None:
    """What a part says of the whole store (the module docstring), for ``scan`` and
    ``ReportPass``: its runs' first rows (``_firsts``), how many kernels each machine x
    suite x metric has (parts hold whole kernels), its run timeline rows (@run...)."""
    firsts.append(_firsts(part, index))
    kernels.update(Counter((m, s, x) for m, s, _, x in index.series.keys))
    for m, s, k in index.kernels.keys:
        if k.startswith("@run"):
            timelines.setdefault((m, s), set()).add(k)


def _firsts(part: "pd.DataFrame", index: PartIndex) -> "pd.DataFrame":
    """The first row of each machine x suite x run of ``part`` (of its kernels' rows: a
    store's names are never missing), in frame order: ``drop_duplicates`` on codes, not names."""
    pair: dict[tuple[str, ...], int] = {}  # machine x suite -> a number
    of_kernel = np.asarray([pair.setdefault(key[:2], len(pair)) for key in index.kernels.keys], dtype=np.int64)
    kernel = index.kernels.of_rows(len(part))
    rows = np.flatnonzero(kernel >= 0)
    together = of_kernel[kernel[rows]] * (len(index.run_names) + 1) + (index.run_code[rows] + 1)
    _, first = np.unique(together, return_index=True)
    return part.iloc[rows[np.sort(first)]][["machine", "suite", "run_id", "time"]]


def _run_wide(store: "HistoryStore", key: tuple[str, str, str], *, kernel: Sequence[str] | str | None,
              since: float | None, last: int | None,
              options: Mapping[str, float]) -> tuple[RunWide | None, list[ChangePoint], int]:
    """The run-wide offsets of one machine x suite x metric (``changepoints.run_wide``;
    None where it has fewer than ``MIN_KERNELS`` kernels), the change points of its offset
    series and its number of runs, from its values alone (``HistoryStore.values``: a year
    of 2,000 kernels' values of one metric is 6 MB of numbers), as ``detect(relative=True)``
    finds them in the slice's frame."""
    import pandas as pd

    machine, suite, metric = key
    got = store.values(machine=machine, suite=suite, kernel=kernel, metric=metric, since=since,  # type: ignore[attr-defined]
                       last=last)
    # the runs in the order the slice's frame first shows them (series by series, each by
    # time), then by time: the frame's ``drop_duplicates("run_id").sort_values("time")``;
    # ``pd.unique`` keeps the order of first sight with a hash table (``np.unique`` sorted
    # every value of the slice, twice)
    seen = np.asarray(pd.unique(got.run), dtype=np.int64)
    present = np.sort(pd.unique(got.series))  # the slice's series with a value: one per kernel, in name order
    if len(present) < MIN_KERNELS:
        return None, [], len(seen)
    runs = got.runs.iloc[seen].reset_index(drop=True).sort_values("time")
    sighted = runs.index.to_numpy()
    place = np.empty(len(got.runs), dtype=np.int64)
    place[seen[sighted]] = np.arange(len(runs))
    runs = runs.reset_index(drop=True)
    names = got.keys["kernel"].to_numpy(dtype=object)

    def unit(r: int) -> str:
        """The unit of the first value of run ``r`` (of the offset series' first run): read alone."""
        at = int(np.flatnonzero(got.run == seen[sighted[r]])[0])  # its first value in the slice
        one = store.series(machine=machine, suite=suite, metric=metric,  # type: ignore[attr-defined]
                           kernel=str(names[got.series[at]]), run_id=str(runs["run_id"].iloc[r]))
        return str(one["unit"].iloc[0])

    wide, found = run_wide(pd.Index(names[present]), np.searchsorted(present, got.series), runs, place[got.run],
                           got.value, key=key, unit=unit, **options)  # type: ignore[arg-type]
    return wide, found, len(seen)


class _Early:
    """The diagnoses ``scan`` makes on its first pass, each from the part that holds its
    kernel, so that the kernels need not be read twice (half of ``history detect``'s
    reading at a year of nights, where every kernel has a finding at a run-wide step).

    A part can diagnose every change point that may head a finding
    (``findings.headline_candidates``; which of them do is decided once every change point
    is known). A diagnosis depends on the store beyond the part only through the order of
    the runs: the part's own order of its runs is the store's wherever the two agree on the
    runs the part holds, which ``findings`` checks; it does not where runs share a time (a
    tie is broken by where a run is first seen). Those kernels, and the steps (``range:``
    rows, read with the run's timeline rows that another part may hold), are read again."""

    def __init__(self) -> None:
        self.why: dict[int, Diagnosis | None] = {}  # id(candidate headline) -> its diagnosis (no whole run)
        self.asked: set[tuple[str, str, str, str]] = set()  # the watched series of the kernels diagnosed
        self.runs: dict[tuple[str, str, str], tuple[str, ...]] = {}  # kernel -> its part's runs of its machine x suite
        self.heads: list[ChangePoint] = []  # keeps the candidates (and so their ids) alive
        # id(a part's runs, in ``runs``) -> whether the store orders them as the part does:
        # every kernel of a part shares the answer (a year of runs, asked for each kernel)
        self.agrees: dict[int, bool] = {}

    def diagnose(self, found: Sequence[ChangePoint], part: "pd.DataFrame", firsts: "pd.DataFrame",
                 index: PartIndex, *, select: str | Iterable[str] | None, arches: Mapping[str, str] | None) -> None:
        mine = [cp for cp in found if cp.kernel != RUN_WIDE and not cp.kernel.startswith("range:")]
        if not mine:
            return
        asked = watched(part, index)
        local = run_positions(firsts)
        heads = headline_candidates(mine, asked, select)
        self.why.update(zip(map(id, heads), explain(heads, part, local, arches, index)))
        self.heads.extend(heads)
        runs = {key: tuple(sorted(where, key=where.__getitem__)) for key, where in local.items()}
        for cp in mine:
            self.runs[(cp.machine, cp.suite, cp.kernel)] = runs.get((cp.machine, cp.suite), ())
        self.asked |= {key for key in asked if (key[0], key[1], key[2]) in self.runs}

    def findings(self, points: Sequence[ChangePoint], context: Context, *, recent: set[ChangePoint],
                 select: str | Iterable[str] | None) -> list[Finding] | None:
        """The findings of one kernel's ``points``, or None where its part could not say."""
        head = points[0]
        runs = self.runs.get((head.machine, head.suite, head.kernel))
        if runs is None:
            return None
        agrees = self.agrees.get(id(runs))
        if agrees is None:
            where = context.positions.get((head.machine, head.suite), {})
            at = [where.get(r, -1) for r in runs]
            agrees = self.agrees[id(runs)] = not (any(b <= a for a, b in zip(at, at[1:])) or (at and at[0] < 0))
        if not agrees:
            return None  # the part ordered its runs otherwise than the whole store does
        grouped = group(points, self.asked, select, context.positions)
        if any(id(h) not in self.why for h, _ in grouped):
            return None
        return assemble(grouped, [self.why[id(h)] for h, _ in grouped], context, recent)


def _with_timeline(store: "HistoryStore", part: "pd.DataFrame", points: Sequence[ChangePoint],
                   timelines: Mapping[tuple[str, str], set[str]], *, since: float | None,
                   last: int | None) -> "pd.DataFrame":
    """``part`` with the run's timeline rows (``@run``...) of each machine x suite where a
    ``range:`` kernel changed: its diagnosis reads them beside the range (``diagnosis.with_run``),
    and they may be stored in another part."""
    import pandas as pd

    extra = []
    for m, s in sorted({(cp.machine, cp.suite) for cp in points if cp.kernel.startswith("range:")}):
        present = set(part.loc[(part["machine"] == m) & (part["suite"] == s), "kernel"].astype(str))
        wanted = sorted(timelines.get((m, s), set()) - present)
        if wanted:
            extra.append(store.series(machine=m, suite=s, kernel=wanted, since=since, last=last))  # type: ignore[attr-defined]
    return pd.concat([part, *extra], ignore_index=True) if extra else part


class ReportPass:
    """One read of the store for ``history report``: each part (``HistoryStore.batches``)
    with its change points and their lifecycle, as ``scan`` finds them; then, from what
    the pass gathered, the findings' grouping (``grouped``) and the diagnosis of just the
    findings a page shows (``diagnosed``).

    ``scan`` reads the store twice and diagnoses every finding (a whole-run step is one
    per kernel: 2,000 at 2,000 kernels) although the digest shows 20; a report reads it
    once, groups every change point (no values needed) and diagnoses only what it shows,
    reading those kernels again."""

    def __init__(self, store: "HistoryStore", *, where: Mapping[str, object], last: int | None,
                 accepted: "Sequence[Acceptance]" = (), rows: int = BATCH_ROWS,
                 columns: Sequence[str] | None = None) -> None:
        self.store, self.where, self.last, self.accepted, self.rows = store, dict(where), last, accepted, rows
        # None: every column (the HTML pages show them all); else only these (the digest's facts
        # take the columns they show: a copy of each part with the others empty cost a second)
        self.columns = columns
        self.points: list[ChangePoint] = []
        self.states: dict[ChangePoint, State] = {}
        self._firsts: list[pd.DataFrame] = []
        self._kernels: Counter[tuple[str, str, str]] = Counter()
        self._timelines: dict[tuple[str, str], set[str]] = {}
        self._context: Context | None = None
        self._grouped: list[Finding] | None = None

    def parts(self) -> "Iterator[tuple[pd.DataFrame, list[ChangePoint], PartIndex]]":
        """Each part, its change points (lifecycle in ``states``), as ``scan`` finds them,
        and its index (``PartIndex``: where its kernels and series lie)."""
        from perfcheck.history import lifecycle
        from perfcheck.history.changepoints import MIN_AFTER, P_VALUE, WINDOW

        read = {} if self.columns is None else {"columns": self.columns}
        for part in self.store.batches(**self.where, last=self.last, rows=self.rows, **read):  # type: ignore[attr-defined]
            index = PartIndex.of(part)  # as ``scan``'s first pass: the kernels and series found once
            _gathered(part, index, self._firsts, self._kernels, self._timelines)
            found = detect(part, p=P_VALUE, min_after=MIN_AFTER, window=WINDOW)
            if found:
                self.states.update((st.point, st) for st in lifecycle.states(found, part, self.accepted, last=3,
                                                                             index=index))
            self.points.extend(found)
            yield part, found, index

    def budgets(self, latest: "pd.DataFrame") -> tuple[np.ndarray, np.ndarray]:
        """The budget (low, high) of each of the ``latest`` rows (``DigestFacts.latest``:
        a series' newest row; names and ``run``) in their order, NaN where none is stored:
        read by those rows' runs (a nightly store's newest rows are mostly of its latest
        run), each value by the primary key's (series, run) lookup, and only the rows asked
        for kept of each part."""
        import pandas as pd

        key = ["machine", "suite", "kernel", "metric", "run_id"]
        wanted = pd.DataFrame({c: latest["run" if c == "run_id" else c].astype(object) for c in key})
        runs = sorted(set(wanted["run_id"].tolist()), key=str)
        found: list[pd.DataFrame] = []
        for at in range(0, len(runs), BUDGET_RUNS):
            chosen = runs[at:at + BUDGET_RUNS]
            for part in self.store.batches(**self.where, run_id=chosen, rows=self.rows,  # type: ignore[attr-defined]
                                           columns=BUDGETED):
                part = part.assign(**{c: part[c].astype(object) for c in key})
                found.append(part.merge(wanted, on=key, how="inner"))
        if not found:  # no newest rows (or their runs pruned since the pass)
            return np.full(len(wanted), np.nan), np.full(len(wanted), np.nan)
        # (no empty frame of other dtypes in the concat: pandas 2 warns that it will count)
        out = wanted.merge(pd.concat(found, ignore_index=True), on=key, how="left")  # a (series, run) once: in order
        return out["low"].to_numpy(dtype=float), out["high"].to_numpy(dtype=float)

    def records(self, points: Sequence[ChangePoint]) -> list[dict[str, object]]:
        """``points`` as the dashboard's change rows, each regression open or not."""
        return [{**cp.as_dict(), "open": self.states[cp].open if cp in self.states else False} for cp in points]

    @property
    def context(self) -> Context:
        import pandas as pd

        if self._context is None:
            self._context = Context(run_positions(pd.concat(self._firsts, ignore_index=True) if self._firsts else None),
                                    whole_runs(self.points, self._kernels))
        return self._context

    def grouped(self) -> list[Finding]:
        """Every change point of the pass in its finding (headline, also moved), not diagnosed."""
        from perfcheck.history.findings import ALL

        if self._grouped is None:
            self._grouped = findings(self.points, None, select=ALL, context=self.context)  # type: ignore[arg-type]
        return self._grouped

    def diagnosed(self, heads: Iterable[Finding]) -> dict[ChangePoint, Finding]:
        """The findings ``heads`` (from ``grouped``) with their diagnosis, by headline:
        their kernels read again (with the run's timeline rows a range's diagnosis reads),
        each kernel's findings made as ``scan`` makes them."""
        from perfcheck.history.findings import ALL

        heads = list(heads)
        by_kernel: dict[tuple[str, str, str], list[ChangePoint]] = {}
        for cp in self.points:
            by_kernel.setdefault((cp.machine, cp.suite, cp.kernel), []).append(cp)
        wanted = sorted({(f.machine, f.suite, f.kernel) for f in heads if f.kernel != RUN_WIDE})
        out: dict[ChangePoint, Finding] = {}
        if not wanted:
            return out
        arches = {slug: fp.get("arch", "") for slug, fp in self.store.machines().items()}  # type: ignore[attr-defined]
        names = sorted({k for _, _, k in wanted})
        chosen = set(wanted)
        where = {**self.where, "kernel": names}
        for part in self.store.batches(**where, last=self.last, rows=self.rows):  # type: ignore[attr-defined]
            here = part.drop_duplicates(["machine", "suite", "kernel"])[["machine", "suite", "kernel"]]
            mine = [cp for key in here.itertuples(index=False, name=None) if key in chosen
                    for cp in by_kernel.get(key, [])]
            if mine:
                frame = _with_timeline(self.store, part, mine, self._timelines, since=None, last=self.last)
                for f in findings(mine, frame, select=ALL, arches=arches, context=self.context):
                    out[f.headline] = f
        return out


def grouping(changes: "pd.DataFrame", found: Sequence[Finding],
             diagnosed: Mapping[ChangePoint, Finding] | None = None) -> "pd.DataFrame":
    """``changes`` (the dashboard's change rows, with ``run_id``) with the ``also``,
    ``why`` and ``member`` columns ``dashboard.history_view`` gives them from ``found``
    (``why``: of the findings in ``diagnosed``, else empty)."""
    import pandas as pd

    from perfcheck.history.listing import also_text, why_text

    key = ["machine", "suite", "kernel", "metric", "run_id"]
    done = diagnosed or {}
    heads = pd.DataFrame([(f.machine, f.suite, f.kernel, f.headline.metric, f.headline.run_id, also_text(f),
                           why_text(done[f.headline]) if f.headline in done else "") for f in found],
                         columns=[*key, "also", "why"])
    members = pd.DataFrame([(cp.machine, cp.suite, cp.kernel, cp.metric, cp.run_id) for f in found for cp in f.also],
                           columns=key).assign(member=True)
    out = changes.drop(columns=["also", "why", "member"], errors="ignore")
    out = out.merge(heads.drop_duplicates(key), on=key, how="left").merge(members.drop_duplicates(key), on=key,
                                                                         how="left")
    out["member"] = out["member"].fillna(False).astype(bool)
    for name in ("also", "why"):
        out[name] = out[name].fillna("").astype(str)
    return out


def digest(store: "HistoryStore", *, suites: Sequence[str] | None = None, machine: Sequence[str] | str | None = None,
           kernel: Sequence[str] | None = None, metric: Sequence[str] | None = None, last: int | None = None,
           accepted: "Sequence[Acceptance]" = (), title: str = "perfcheck history", link: str | None = None,
           rows: int = BATCH_ROWS) -> str:
    """``dashboard.markdown_digest(dashboard.history_view_of(...))`` in one read of the
    store (``ReportPass``): of each part, its newest rows and change rows (``Newest``),
    made the digest's facts once (``DigestFacts``: open regressions, newest rows, units,
    runs) with the budgets of the newest rows alone (``ReportPass.budgets``), then the
    findings' grouping over every change point (which open regressions are listed inside
    another one's "also moved"), then the diagnosis of the rows the digest shows only."""
    from perfcheck.history.dashboard import digest_text

    where = {"machine": machine, "suite": list(suites) if suites else None, "kernel": kernel, "metric": metric}
    report = ReportPass(store, where=where, last=last, accepted=accepted, rows=rows, columns=DIGESTED)
    facts = digest_facts(report, title=title)
    return digest_text(facts, title=title, link=link)


def digest_facts(report: ReportPass, *, title: str = "perfcheck history",
                 each: "Callable[[pd.DataFrame, list[dict[str, object]], PreparedView], None] | None" = None,
                 ) -> "DigestFacts":
    """The digest's facts of the store ``report`` reads (see ``digest``); ``each``: also
    called with every part, its change points' records (``records``) and its view made
    ready (``dashboard.prepare``, once for both; the HTML report writes its pages).
    Without ``each``, each part gives only what the digest shows (``Newest``); where
    ``report`` reads no budget columns, those of the newest rows are read after the pass."""
    from dataclasses import replace

    from perfcheck.history.dashboard import DigestFacts, history_view, prepare, shown_in_digest

    facts: list[DigestFacts] = []
    newest: list[Newest] = []
    for part, points, index in report.parts():
        records = report.records(points)
        if each is None:  # the digest alone: what it shows of the part from its index, no view made ready
            piece = Newest.of(part, records, index)
            if piece is not None:
                newest.append(piece)
                continue
        prepared = prepare(history_view(part, records, title=title))
        facts.append(DigestFacts.of_prepared(prepared))
        if each is not None:
            each(part, records, prepared)
    if newest:  # normalised once for the whole store: a few pandas calls, not a few per part
        facts.append(Newest.facts(newest))
    joined = DigestFacts.joined(facts)
    if report.columns is not None and not {"low", "high"} <= set(report.columns):
        joined = joined.with_budgets(*report.budgets(joined.latest))
    if not len(joined.open):
        return joined
    found = report.grouped()
    opened = grouping(joined.open, found)
    opened = opened[~opened["member"]].reset_index(drop=True)
    by_head = {(f.machine, f.suite, f.kernel, f.headline.metric, f.headline.run_id): f for f in found}
    shown = shown_in_digest(opened)
    heads = [by_head[k] for k in shown[["machine", "suite", "kernel", "metric", "run_id"]].itertuples(index=False,
                                                                                                   name=None)
             if k in by_head]
    return replace(joined, open=grouping(opened, found, report.diagnosed(heads)))


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class Newest:
    """What the Markdown digest shows of a part (``Newest.of``): the newest row of each
    series, whether it is a headline series (``dashboard._headline``, over every row of
    its series and kernel), the part's change rows (``ReportPass.records``) and runs.
    The pieces of a store make its ``DigestFacts`` (``Newest.facts``), normalising only
    those rows: ``prepare`` ordered, numbered and normalised every row of every part (a
    year of nights: 365 rows a series) for those few facts, most of the digest's own time."""

    rows: "pd.DataFrame"  # the newest row of each series as the part holds it
    headline: np.ndarray  # bool, a row's
    records: list[Mapping[str, object]]
    runs: frozenset[object]

    @staticmethod
    def of(part: "pd.DataFrame", records: Sequence[Mapping[str, object]],
           index: PartIndex | None = None) -> "Newest | None":
        """``part``'s piece, from its ``index`` (``PartIndex``: where its series and kernels
        lie, found once by the pass); None for a frame no store gives (a missing name, no
        run ids), whose facts ``prepare`` gives."""
        import pandas as pd

        index = index if index is not None else PartIndex.of(part)
        groups = index.series
        runs = part["run_id"] if "run_id" in part.columns else None
        if not len(part) or len(groups.rows) != len(part) or runs is None or not (runs != "").any():
            return None
        group = np.repeat(np.arange(len(groups), dtype=np.int64), groups.sizes())  # of each of ``groups.rows``
        time = pd.to_datetime(part["time"], utc=True).to_numpy(dtype="datetime64[ns]").view("i8")  # as ``_filled``
        time = np.where(time == np.iinfo(np.int64).min, np.iinfo(np.int64).max, time)  # NaT last, as pandas sorts it
        rows = groups.rows
        if np.any((time[rows][1:] < time[rows][:-1]) & (group[1:] == group[:-1])):  # a series out of time order
            rows = rows[np.lexsort((time[rows], group))]  # stable: rows of one time keep the frame's order
        if "outcome" in part.columns:
            # a series an expectation checked in some run, or duration; every series of a
            # kernel with none of those
            outcome = part["outcome"]
            checked = (outcome.notna() & (outcome.astype(str) != "")).to_numpy(dtype=bool)
            headline = (np.add.reduceat(checked[groups.rows], groups.bounds[:-1]) > 0) | \
                np.asarray([key[3] == "duration" for key in groups.keys], dtype=bool)
            kernel = np.asarray([index.kernels.number[key[:3]] for key in groups.keys], dtype=np.int64)
            headline |= ~(np.bincount(kernel, weights=headline, minlength=len(index.kernels))[kernel] > 0)
        else:
            headline = np.ones(len(groups), dtype=bool)
        return Newest(part.iloc[rows[groups.bounds[1:] - 1]], headline, list(records), frozenset(runs.unique()))

    @staticmethod
    def facts(pieces: "Sequence[Newest]") -> "DigestFacts":
        """The ``DigestFacts`` of the parts of ``pieces`` (``DigestFacts.joined`` of each
        part's ``of_prepared``)."""
        import pandas as pd

        from perfcheck.history.dashboard import DigestFacts, history_view

        rows = pd.concat([p.rows for p in pieces], ignore_index=True)
        rows = rows.rename(columns={"run_id": "run"})  # as ``history_view`` names it
        changes = history_view(rows.iloc[:0], [r for p in pieces for r in p.records]).changes
        return DigestFacts.of_newest(rows, np.concatenate([p.headline for p in pieces]), changes,
                                     frozenset().union(*(p.runs for p in pieces)))
