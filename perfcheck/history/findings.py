"""One finding per change: the change points of one kernel at one run, grouped, with
the diagnosis of why it changed.

A kernel that gets 30% slower moves a dozen stored series at the same run: duration
and duration_min/max/mean/total (the same samples), hbm_bw, flop_rate, gips and
instruction_rate (constants over the duration; gips *is* instruction_rate in other
units), their ``_pct`` of a peak, roofline_pct. Those are one change seen many times.
``findings`` makes one ``Finding`` per machine x suite x kernel x change run: its
headline is the change point of the metric a person asked about (``duration`` first,
then the metrics a check watches, worst first), the others of that run are listed
inside it as "also moved" with their own %, and ``diagnosis`` says why, from the
kernel's values before and after the change (``perfcheck.diagnosis``).

Which findings are reported (``select``): by default those whose kernel changed on
a metric a check watches (a stored ``outcome``) or on ``duration``; ``"all"``: any
metric; a set of names: those metrics. A derived metric whose change point starts one
run off its kernel's headline (the two sides of a noisy step) is grouped into that
finding too.

The run-wide series (``detect(relative=True)``, kernel ``RUN_WIDE``) is a finding of
its own; a kernel's change at the same run says "whole run moved" in its diagnosis.
Without it, a change that every kernel of the suite (at least
``perfcheck.diagnosis.WHOLE_RUN_KERNELS``) shows at the same run in the same direction is "whole run moved" too (most, but not
all, is a change several kernels share: the stencil sprint's four kernels and the
unchanged reduction beside them).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfcheck.diagnosis import Diagnosis, Sides, diagnose_many, whole_run, with_run, with_whole_run
from perfcheck.history.changepoints import RUN_WIDE, ChangePoint

if TYPE_CHECKING:
    import pandas as pd

    from perfcheck.history.lifecycle import State
    from perfcheck.history.partindex import PartIndex

ALL = "all"
HEADLINE_FIRST = "duration"


@dataclass(frozen=True)
class Finding:
    """One kernel's change at one run: the headline change point, the same change on
    other metrics, and why."""

    headline: ChangePoint
    also: tuple[ChangePoint, ...] = ()  # other metrics of the kernel that moved at the same run
    diagnosis: Diagnosis | None = None
    new: bool = False  # a regression starting in the latest runs (``recent_regressions``)
    status: str | None = None  # the lifecycle state where known (open | accepted | recovered)
    accepted_reason: str | None = None  # the accepted file's reason (status accepted)
    recovered_at: str | None = None  # the run of the recovery (status recovered)
    open_metrics: tuple[str, ...] = ()  # the metrics of this change still open (headline and also moved)

    @property
    def machine(self) -> str:
        return self.headline.machine

    @property
    def suite(self) -> str:
        return self.headline.suite

    @property
    def kernel(self) -> str:
        return self.headline.kernel

    @property
    def regression(self) -> bool:
        return self.headline.regression

    def as_dict(self) -> dict[str, object]:
        doc = self.headline.as_dict()
        doc["new"] = self.new
        doc["recent"] = self.new  # the name before findings were grouped
        # the lifecycle (None for an improvement, or where it was not computed)
        doc["status"] = self.status
        doc["accepted_reason"] = self.accepted_reason
        doc["recovered_at"] = self.recovered_at
        doc["open_metrics"] = list(self.open_metrics)
        doc["also_moved"] = [{"metric": cp.metric, "unit": cp.unit, "before": cp.before, "after": cp.after,
                              "change_pct": cp.change_pct, "direction": cp.direction, "run_id": cp.run_id}
                             for cp in self.also]
        doc["diagnosis"] = self.diagnosis.as_dict() if self.diagnosis is not None else None
        return _finite(doc)


def _finite(value: object) -> object:
    """JSON has no inf: a change from 0 (a resource that was not used) is null, with
    its before and after values beside it. (A call per dict or list, not per value: a
    year of nights lists thousands of findings of some sixty values each.)"""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: ((v if math.isfinite(v) else None) if isinstance(v, float)
                    else _finite(v) if isinstance(v, (dict, list)) else v) for k, v in value.items()}
    if isinstance(value, list):
        return [((v if math.isfinite(v) else None) if isinstance(v, float)
                 else _finite(v) if isinstance(v, (dict, list)) else v) for v in value]
    return value


def watched(frame: "pd.DataFrame", index: "PartIndex | None" = None) -> set[tuple[str, str, str, str]]:
    """The series a person asked about: those a check judged in some run (a stored
    ``outcome``) and every ``duration``; a kernel with none of those: all its series.
    ``index``: ``frame``'s ``PartIndex``, where the caller has it already."""
    if frame is None or not len(frame):
        return set()
    from perfcheck.history.partindex import PartIndex

    index = index if index is not None else PartIndex.of(frame)
    series = index.series
    if not len(series):
        return set()
    checked = frame["metric"] == HEADLINE_FIRST
    if "outcome" in frame.columns:
        checked |= frame["outcome"].notna() & (frame["outcome"].astype(str) != "")
    checked = checked.to_numpy(dtype=bool, na_value=False)
    # any row of a series; any series of a kernel (the groups' rows are never empty)
    flags = np.logical_or.reduceat(checked[series.rows], series.bounds[:-1])
    kernel = np.asarray([index.kernels.number[key[:3]] for key in series.keys], dtype=np.int64)
    kernel_has = np.bincount(kernel, weights=flags, minlength=len(index.kernels))[kernel] > 0
    return {key for key, keep in zip(series.keys, (flags | ~kernel_has).tolist()) if keep}


def _eligible(cp: ChangePoint, select: str | Iterable[str] | None, asked: set[tuple[str, str, str, str]]) -> bool:
    if select == ALL:
        return True
    if select is not None:
        return cp.metric in set(select)
    return cp.kernel == RUN_WIDE and cp.metric == HEADLINE_FIRST or (cp.machine, cp.suite, cp.kernel, cp.metric) in asked


def _rank(cp: ChangePoint) -> tuple[int, int, float]:
    """Headline order: duration, then regressions, then the largest change."""
    return (cp.metric != HEADLINE_FIRST, not cp.regression, -abs(cp.change_pct))


def run_positions(frame: "pd.DataFrame | None") -> dict[tuple[str, str], dict[str, int]]:
    """(machine, suite) -> run id -> position of the run in time order. ``frame`` may
    be the first row of each machine x suite x run of a series frame (same answer)."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    if frame is None or not len(frame):
        return out
    runs = frame.drop_duplicates(["machine", "suite", "run_id"]).sort_values("time", kind="stable")
    for (machine, suite), group in runs.groupby(["machine", "suite"], sort=False, observed=True):
        out[(str(machine), str(suite))] = {str(r): i for i, r in enumerate(group["run_id"])}
    return out


def findings(
    points: Sequence[ChangePoint],
    frame: "pd.DataFrame",
    *,
    recent: Sequence[ChangePoint] = (),
    select: str | Iterable[str] | None = None,
    arches: Mapping[str, str] | None = None,
    context: "Context | None" = None,
) -> list[Finding]:
    """``points`` (``detect`` over ``frame`` or its relative form) as findings, worst
    first: regressions, new ones first, by size. ``frame``: the store's series of the
    kernels (every metric: the diagnosis reads them all); ``recent``: the regressions
    to mark new; ``arches``: machine -> arch id, to derive the occupancy limiter.
    ``context``: what the whole store says beyond ``frame`` (``perfcheck.history.scan``
    passes part of the store at a time); by default it is ``frame``'s."""
    from perfcheck.history.partindex import PartIndex

    index = PartIndex.of(frame) if frame is not None and len(frame) else None
    asked = watched(frame, index)
    context = context if context is not None else Context.of(points, frame)
    grouped = group(points, asked, select, context.positions)
    heads = [head for head, _ in grouped if head.kernel != RUN_WIDE]
    why = dict(zip(map(id, heads), explain(heads, frame, context.positions, arches, index)))
    return assemble(grouped, [why.get(id(head)) for head, _ in grouped], context, recent)


def group(points: Sequence[ChangePoint], asked: set[tuple[str, str, str, str]],
          select: str | Iterable[str] | None, positions: Mapping[tuple[str, str], Mapping[str, int]]
          ) -> list[tuple[ChangePoint, list[ChangePoint]]]:
    """Each kernel's change points as (headline, also moved) pairs, kernel by kernel in
    the order of ``points``: the change points of one run, and of a run next to a
    headline's, are one finding. ``asked``: the series a person asked about (``watched``)."""
    select = list(select) if select is not None and not isinstance(select, str) else select
    grouped: list[tuple[ChangePoint, list[ChangePoint]]] = []
    for (machine, suite, _), mine in _by_kernel(points).items():
        where = positions.get((machine, suite), {})
        runs = _by_run(mine)
        # the strongest headline first; a run one run away from a headline's joins it
        best = {r: _best(cps, select, asked) for r, cps in runs.items()}
        order = sorted(runs, key=lambda r: (best[r] is None, _rank(best[r]) if best[r] is not None else (0, 0, 0.0)))
        heads: dict[str, ChangePoint] = {}
        members: dict[str, list[ChangePoint]] = {}
        for run_id in order:
            home = _nearest(run_id, heads, where)
            if home is not None and any(cp.metric == heads[home].metric for cp in runs[run_id]):
                home = None  # the headline's own series stepped again (--min-after 1): a change of its own
            if home is None and best[run_id] is not None:
                heads[run_id], members[run_id], home = best[run_id], [], run_id
            if home is None:
                continue  # no metric asked about changed here: not reported (select="all" shows it)
            members[home].extend(cp for cp in runs[run_id] if cp is not heads[home])
        grouped.extend((heads[r], sorted(members[r], key=lambda cp: -abs(cp.change_pct))) for r in heads)
    return grouped


def headline_candidates(points: Sequence[ChangePoint], asked: set[tuple[str, str, str, str]],
                        select: str | Iterable[str] | None) -> list[ChangePoint]:
    """Every change point that may head a finding (``group`` picks its headlines among
    them: of each kernel's runs, the strongest one a person asked about), without the
    order of the runs: what a part of the store can diagnose before the rest is read."""
    select = list(select) if select is not None and not isinstance(select, str) else select
    out = []
    for mine in _by_kernel(points).values():
        out.extend(best for best in (_best(cps, select, asked) for cps in _by_run(mine).values()) if best is not None)
    return out


def _by_kernel(points: Sequence[ChangePoint]) -> dict[tuple[str, str, str], list[ChangePoint]]:
    by_kernel: dict[tuple[str, str, str], list[ChangePoint]] = {}
    for cp in points:
        by_kernel.setdefault((cp.machine, cp.suite, cp.kernel), []).append(cp)
    return by_kernel


def _by_run(points: Sequence[ChangePoint]) -> dict[str, list[ChangePoint]]:
    runs: dict[str, list[ChangePoint]] = {}
    for cp in points:
        runs.setdefault(cp.run_id, []).append(cp)
    return runs


def _best(cps: Sequence[ChangePoint], select: str | list[str] | None,
          asked: set[tuple[str, str, str, str]]) -> ChangePoint | None:
    return min((cp for cp in cps if _eligible(cp, select, asked)), key=_rank, default=None)


def explain(heads: Sequence[ChangePoint], frame: "pd.DataFrame | None",
            positions: Mapping[tuple[str, str], Mapping[str, int]],
            arches: Mapping[str, str] | None = None, index: "PartIndex | None" = None) -> list[Diagnosis | None]:
    """The diagnosis of each of ``heads`` (not of the run-wide series) from ``frame``
    (its kernel's rows: every metric), without the whole run's move (``assemble`` adds
    it), all of them at once (``perfcheck.diagnosis.diagnose_many``). ``index``:
    ``frame``'s ``PartIndex``, where the caller has it already."""
    out: list[Diagnosis | None] = [None] * len(heads)
    if frame is None or not len(frame) or not heads:
        return out
    from perfcheck.history.partindex import PartIndex

    machines = arches or {}
    # each kernel's rows, its series and its runs as codes, found once a part: a mask over
    # the frame per finding cost O(findings x rows), a factorize per finding a hash of its rows
    index = index if index is not None else PartIndex.of(frame)
    kernels = index.kernels
    series = index.series.of_rows(len(frame))
    metrics = [key[3] for key in index.series.keys]
    value = frame["value"].to_numpy(dtype="float64")
    places: dict[tuple[str, str], np.ndarray] = {}  # machine x suite -> each run's place (by code): once, not per head
    cases, at_case = [], []
    for n, head in enumerate(heads):
        k = kernels.number.get((head.machine, head.suite, head.kernel))
        if k is None:
            continue
        at = kernels.at(k)
        where = positions.get((head.machine, head.suite), {})
        if head.kernel.startswith("range:"):  # a step: the run's timeline rows beside it
            timeline = [kernels.at(j) for j, (m, s, name) in enumerate(kernels.keys)
                        if m == head.machine and s == head.suite and name.startswith("@run")]
            at = np.concatenate([at, *timeline]) if timeline else at
            sides = _sides(head, frame[["machine", "suite", "kernel", "metric", "run_id", "value"]].iloc[at], positions)
        elif head.run_id not in where:
            sides = None  # a run the store's order does not know: nothing to compare
        else:  # the kernel's own rows: its names are the head's (no copy of a long kernel name per row)
            if (head.machine, head.suite) not in places:
                places[(head.machine, head.suite)] = run_places(where, index.run_names)
            sides = _own_sides(head, series[at], metrics, index.run_code[at], places[(head.machine, head.suite)],
                               value[at], where[head.run_id])
        if sides is not None:
            cases.append(Sides(*sides, subject=head.metric, arch=machines.get(head.machine)))
            at_case.append(n)
    for n, diagnosis in zip(at_case, diagnose_many(cases)):
        out[n] = diagnosis
    return out


def assemble(grouped: Sequence[tuple[ChangePoint, Sequence[ChangePoint]]], why: Sequence[Diagnosis | None],
             context: "Context", recent: Collection[ChangePoint] = ()) -> list[Finding]:
    """The findings of ``group``'s pairs with their diagnoses (``explain``; None: none),
    each with the whole run's move at its run where there was one, worst first.
    ``recent``: the regressions to mark new (a set: ``scan`` asks once per kernel)."""
    wide = context.whole_run
    marked = recent if isinstance(recent, (set, frozenset)) else set(recent)
    out = []
    for (head, also), diagnosis in zip(grouped, why):
        if diagnosis is not None:
            diagnosis = with_whole_run(diagnosis, wide.get((head.machine, head.suite, head.metric, head.run_id)))
        out.append(Finding(head, tuple(also), diagnosis, new=head in marked))
    out.sort(key=worst_first)
    return out


def worst_first(f: Finding) -> tuple[bool, bool, float, str, str, float]:
    """The order findings are listed in: regressions, new ones first, by size."""
    return (not f.regression, not f.new, -abs(f.headline.change_pct), f.suite, f.kernel, f.headline.time)


def _nearest(run_id: str, heads: Mapping[str, ChangePoint], where: Mapping[str, int]) -> str | None:
    """The headline run one run away from ``run_id`` (a derived series' step seen a run
    early or late), else None."""
    at = where.get(run_id)
    if at is None:
        return None
    if run_id in heads:
        return run_id
    close = [(abs(where[r] - at), r) for r in heads if r in where and abs(where[r] - at) <= 1]
    return min(close)[1] if close else None


def kernel_counts(frame: "pd.DataFrame | None") -> dict[tuple[str, str, str], int]:
    """(machine, suite, metric) -> how many kernels ``frame`` has values of."""
    if frame is None or not len(frame):
        return {}
    counts = frame.groupby(["machine", "suite", "metric"], sort=False, observed=True)["kernel"].nunique()
    return {tuple(map(str, k)): int(v) for k, v in counts.items()}  # type: ignore[misc]


@dataclass(frozen=True)
class Context:
    """What grouping and the diagnosis read beyond one kernel's own values: the order
    of the runs of each machine x suite (``run_positions``) and the change of the
    whole run at each run (``whole_runs``), from every change point."""

    positions: Mapping[tuple[str, str], Mapping[str, int]]
    whole_run: Mapping[tuple[str, str, str, str], float]

    @staticmethod
    def of(points: Sequence[ChangePoint], frame: "pd.DataFrame | None") -> "Context":
        return Context(run_positions(frame), whole_runs(points, kernel_counts(frame)))


def whole_runs(points: Sequence[ChangePoint],
               kernels: Mapping[tuple[str, str, str], int]) -> dict[tuple[str, str, str, str], float]:
    """(machine, suite, metric, run id) -> the change of the whole run there: the
    run-wide series' change point, or the median change when most kernels moved.
    ``kernels``: how many kernels each machine x suite x metric has (``kernel_counts``)."""
    out: dict[tuple[str, str, str, str], float] = {}
    moves: dict[tuple[str, str, str, str], list[float]] = {}
    for cp in points:
        key = (cp.machine, cp.suite, cp.metric, cp.run_id)
        if cp.kernel == RUN_WIDE:
            out[key] = cp.change_pct
        else:
            moves.setdefault(key, []).append(cp.change_pct)
    for key, changes in moves.items():
        # a kernel without a change point at that run did not move: 0
        found = whole_run([*changes, *[0.0] * (kernels.get(key[:3], 0) - len(changes))])
        if key not in out and found is not None:
            out[key] = found
    return out


def run_places(where: Mapping[str, int], run_names: Sequence[str]) -> np.ndarray:
    """The place of each of ``run_names`` in the order of its machine x suite's runs
    (``where``: ``run_positions``' of it), -1 where it has none."""
    return np.asarray([where.get(r, -1) for r in run_names], dtype=np.int64)


def _own_sides(head: ChangePoint, series: np.ndarray, metrics: Sequence[str], run_code: np.ndarray,
               places: np.ndarray, value: np.ndarray, start: int
               ) -> tuple[Mapping[str, object], Mapping[str, object]] | None:
    """``_sides`` of a head whose kernel is not a step, from its kernel's rows alone: their
    series (numbers, named by ``metrics``; -1: none), runs (codes, placed in the store's
    order by ``places``, ``run_places``; -1: none) and ``value``; ``start``: the place of
    the head's run. The same sides, found by codes rather than a loop over the rows (a
    year of nights is 6,000 rows a kernel) or a sort of run names per head."""
    if not len(value):
        return None
    seen = np.zeros(len(places) + 1, dtype=bool)  # the last: a missing run id (code -1)
    seen[run_code] = True
    runs = np.flatnonzero(seen[:-1])
    runs = runs[places[runs] >= 0]
    runs = runs[np.argsort(places[runs], kind="stable")]  # the kernel's runs in the store's order
    before = runs[places[runs] < start][-max(head.runs_before, 1):]
    after = runs[places[runs] >= start][:max(head.runs_after, 1)]

    def side(chosen: np.ndarray) -> Mapping[str, object]:
        wanted = np.zeros(len(places) + 1, dtype=bool)
        wanted[chosen] = True
        keep = np.flatnonzero(wanted[run_code] & (series >= 0))
        return _by_metric(series[keep], keep, metrics, value)

    return side(before), side(after)


def _by_metric(codes: np.ndarray, keep: np.ndarray, metrics: Sequence[str], value: np.ndarray) -> Mapping[str, object]:
    """Metric -> its values among the rows ``keep`` (``codes``: their series, named by
    ``metrics``): the metrics in the order of their first row, each its values in row order."""
    if not len(codes):
        return {}
    if (codes[1:] >= codes[:-1]).all():  # the store's order: each series' rows together, by first row
        cut = np.flatnonzero(codes[1:] != codes[:-1]) + 1
        lo, hi = np.append(0, cut), np.append(cut, len(codes))
        return {metrics[code]: value[keep[a:b]] for code, a, b in zip(codes[lo].tolist(), lo, hi)}
    # any other order: a stable sort by series
    _, first = np.unique(codes, return_index=True)
    named = codes[np.sort(first)]
    by_metric = np.argsort(codes, kind="stable")
    ordered = codes[by_metric]
    lo, hi = np.searchsorted(ordered, named, side="left"), np.searchsorted(ordered, named, side="right")
    return {metrics[code]: value[keep[by_metric[a:b]]] for code, a, b in zip(named.tolist(), lo, hi)}


def _sides(head: ChangePoint, frame: "pd.DataFrame", positions: Mapping[tuple[str, str], Mapping[str, int]]
           ) -> tuple[Mapping[str, object], Mapping[str, object]] | None:
    """What the diagnosis of one finding compares: every metric of the kernel in the runs
    before the change (as many as the change point compared) and in the runs after it
    (metric -> values, ``diagnosis.with_run``); None where there is nothing to compare.
    ``frame``: the kernel's rows (or more)."""
    if frame is None or not len(frame):
        return None
    where = positions.get((head.machine, head.suite), {})
    start = where.get(head.run_id)
    ours = (frame["machine"].astype(str) == head.machine) & (frame["suite"].astype(str) == head.suite)
    kernel = frame["kernel"].astype(str).to_numpy(dtype=object)[ours]
    run_id = frame["run_id"].astype(str).to_numpy(dtype=object)[ours]
    mine = kernel == head.kernel
    if start is None or not mine.any():
        return None
    runs = sorted({r for r in run_id[mine].tolist() if r in where}, key=lambda r: where[r])
    before_runs = set([r for r in runs if where[r] < start][-max(head.runs_before, 1):])
    after_runs = set([r for r in runs if where[r] >= start][:max(head.runs_after, 1)])
    # a range row (a step) is read with the run's timeline rows beside it (``with_run``)
    near = mine | (head.kernel.startswith("range:") & np.asarray([k.startswith("@run") for k in kernel], dtype=bool))
    # numpy and dicts, not a groupby per side: this runs for every finding (a year of nights
    # of 2,000 kernels spent half of `history detect` in pandas' group splitting here)
    kernel, run_id = kernel[near].tolist(), run_id[near].tolist()
    metric = frame["metric"].astype(str).to_numpy(dtype=object)[ours][near].tolist()
    value = frame["value"].to_numpy(dtype="float64")[ours][near]

    def side(chosen: set[str]) -> Mapping[str, object]:
        rows: dict[tuple[str, str], list[int]] = {}
        for i, (r, k, m) in enumerate(zip(run_id, kernel, metric)):
            if r in chosen:  # kernels and metrics in the order of their first row, as groupby(sort=False) gave them
                rows.setdefault((k, m), []).append(i)
        values: dict[str, dict[str, np.ndarray]] = {}
        for (k, m), at in rows.items():
            values.setdefault(k, {})[m] = value[at]
        return with_run(head.kernel, values) or {}

    return side(before_runs), side(after_runs)


def with_states(found: Sequence[Finding], states: Mapping[ChangePoint, "State"],
                named: Iterable[str] | None = None) -> list[Finding]:
    """``found`` with their lifecycle (``perfcheck.history.lifecycle.states``): a finding is
    open while its headline or a metric that moved with it is an open regression (one
    change: accepting part of it leaves it open), else the headline's status. ``named``:
    the metrics asked for by name (--metric): only those count."""
    from dataclasses import replace

    asked = set(named) if named is not None else None
    out = []
    for f in found:
        members = [f.headline, *f.also]
        if asked is not None:
            members = [cp for cp in members if cp.metric in asked] or [f.headline]
        mine = [states[cp] for cp in members if cp in states]
        opened = [s for s in mine if s.open]
        head = states.get(f.headline)
        if opened:
            status, new = "open", any(s.new for s in opened)
        elif head is not None:
            status, new = head.status, head.new
        else:
            status, new = next((s.status for s in mine if s.status is not None), None), f.new
        out.append(replace(
            f, status=status, new=new, open_metrics=tuple(dict.fromkeys(s.point.metric for s in opened)),
            accepted_reason=head.accepted_by.reason if head is not None and head.accepted_by is not None else None,
            recovered_at=head.closed_by.run_id if head is not None and head.closed_by is not None else None))
    return out


def describe_start(cp: ChangePoint) -> str:
    """"0a1b2c3d4e (2026-01-06)": where a change starts."""
    when = dt.datetime.fromtimestamp(cp.time, dt.timezone.utc).strftime("%Y-%m-%d")
    return f"{(cp.commit or cp.run_id)[:10]} ({when})"
