"""The lifecycle of a regression: open until a person accepts it or it recovers.

A change point that is a regression (by the metric's better direction, worse than
the accepted level by more than ``OPEN_K`` run-to-run sigmas of its series: beyond
the noise) is **open** from the run where it starts until either

* an entry of the accepted file covers it (``perfcheck history accept``, ``perfcheck
  baseline update``): **accepted**, and its new level becomes the series' level; or
* a later change point brings the series back to within the noise of the last
  accepted level (``RECOVERY_K`` run-to-run sigmas, or better) and nearer it than the
  regressed level: **recovered**, closed by itself.

How old it is does not matter: a nightly job stays red until someone decides, never
turns green because the change slid out of a "last N runs" window. ``new`` only says
that the change point (for a recovered one: its recovery) starts in the last ``last``
runs of its series, so a digest can mark what happened since yesterday.

The **accepted level** of a series is where the gate takes its reference from: the
runs after the last change point that set a level (an accepted regression, an
improvement, a recovery) and before the first open regression. An unaccepted
regression never becomes the level; an improvement does by itself (a stricter
reference needs nobody's consent).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfcheck.history.changepoints import KEY, LOWER, RUN_WIDE, better

if TYPE_CHECKING:
    from pathlib import Path

    from perfcheck.storeurl import StoreURL

    import pandas as pd

    from perfcheck.history.accepted import Acceptance
    from perfcheck.history.changepoints import ChangePoint

OPEN, ACCEPTED, RECOVERED = "open", "accepted", "recovered"
RECOVERY_K = 3.0  # a level within this many run-to-run sigmas of the accepted one is "back"
# An accepted change point may be found a run or two earlier or later as more runs
# arrive (where a step starts is an estimate, and noise moves it): an entry covers the
# regression nearest its run within this many runs when none starts at its run exactly.
MATCH_RUNS = 3
# A regression is open when it is worse than the accepted level by more than this many
# run-to-run sigmas (widened for levels seen on few runs): "beyond the noise". The
# detector's p-value alone is not enough once a change stays open until someone decides:
# a false change point then alarms every night after it, and at p = 0.001 over many
# windows and nights that is about 8 false alarms per 1,000 nightly decisions instead of
# 1 (benchmarks/decisions.py, after a step); 2 sigmas bring it back under 1.
OPEN_K = 2.0


@dataclass(frozen=True)
class State:
    """Where one change point stands. ``status`` is OPEN, ACCEPTED or RECOVERED for a
    regression and None for an improvement; ``new``: it starts (recovered: its
    recovery starts) in the last runs of its series."""

    point: "ChangePoint"
    status: str | None
    new: bool
    level: float  # the accepted level of the series just before this change point (base units)
    closed_by: "ChangePoint | None" = None  # the recovery (RECOVERED)
    accepted_by: "Acceptance | None" = None  # the entry (ACCEPTED)

    @property
    def open(self) -> bool:
        return self.status == OPEN

    def as_dict(self) -> dict[str, object]:
        doc = self.point.as_dict()
        doc.update(status=self.status, new=self.new, level=self.level,
                   recovered_at=None if self.closed_by is None else self.closed_by.run_id,
                   accepted_reason=None if self.accepted_by is None else self.accepted_by.reason)
        return doc


@dataclass(frozen=True)
class Level:
    """The accepted level of one series: the runs ``start:end`` (positions in the
    series), and the first open regression after them (None: nothing open)."""

    start: int
    end: int
    open: "State | None"


def series_sigma(values: np.ndarray) -> float:
    """Run-to-run sigma of log values from successive differences (level shifts and
    spikes barely move it); 0 for exact quantities."""
    x = np.asarray(values, dtype="float64")
    x = x[np.isfinite(x) & (x > 0)]
    if len(x) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(np.diff(np.log(x)))) / math.sqrt(2.0))


def _worse_by(level: float, value: float, lower_better: bool) -> float:
    """How much worse ``value`` is than ``level``, as a log ratio (negative: better)."""
    if not (level > 0 and value > 0):
        return (value - level) * (1 if lower_better else -1)
    ratio = math.log(value / level)
    return ratio if lower_better else -ratio


def _beyond_noise(level: float, cp: "ChangePoint", lower: bool, sigma: float) -> bool:
    """Whether regression ``cp`` is worse than the accepted level by more than OPEN_K
    run-to-run sigmas, the uncertainty of a level seen on few runs included."""
    few = math.sqrt(1.0 + 1.0 / max(cp.runs_before, 1) + 1.0 / max(cp.runs_after, 1))
    return _worse_by(level, cp.after, lower) > OPEN_K * sigma * few


def _entry_for(cp: "ChangePoint", accepted: Sequence["Acceptance"], where: dict[str, int]) -> "Acceptance | None":
    exact = next((a for a in accepted if a.covers(cp)), None)
    if exact is not None:
        return exact
    near = [(abs(where[a.run] - cp.index), n) for n, a in enumerate(accepted)
            if a.same_series(cp) and a.run in where and abs(where[a.run] - cp.index) <= MATCH_RUNS]
    return accepted[min(near)[1]] if near else None


def series_states(points: Sequence["ChangePoint"], values: np.ndarray, size: int, accepted: Sequence["Acceptance"],
                  last: int, run_ids: Sequence[str] = ()) -> list[State]:
    """The states of the change points of ONE series (oldest first): ``values`` its
    values (for its noise), ``size`` its length (for ``new``), ``run_ids`` its runs in
    order (to find an accepted change point that moved by a run or two)."""
    if not points:
        return []
    where = {str(run): n for n, run in enumerate(run_ids)}
    lower = better(points[0].metric, points[0].unit) == LOWER
    sigma = series_sigma(values)
    tolerance = RECOVERY_K * sigma + 1e-9
    level = points[0].before
    states: list[State | None] = [None] * len(points)
    opened: list[int] = []
    for i, cp in enumerate(points):
        recent = cp.index >= size - last
        if cp.regression and not _beyond_noise(level, cp, lower, sigma):
            # within the noise of the accepted level: not open, and not the level either
            # (small steps that add up open a regression once they are beyond it together)
            states[i] = State(cp, None, recent, level)
            continue
        if cp.regression:
            entry = _entry_for(cp, accepted, where)
            if entry is not None:
                states[i] = State(cp, ACCEPTED, recent, level, accepted_by=entry)
                if not opened:  # an older open regression still holds the level where it was
                    level = cp.after
            else:
                states[i] = State(cp, OPEN, recent, level)
                opened.append(i)
            continue
        # back: within the noise of the accepted level, and nearer it than the regressed
        # level it leaves (with 3% drift, 3 sigmas are 9%: a 10% regression that improves
        # by 2% is not back)
        if opened and _worse_by(level, cp.after, lower) <= min(tolerance, 0.5 * _worse_by(level, cp.before, lower)):
            for j in opened:  # back to the accepted level (or better): every open one closes
                old = states[j]
                states[j] = State(old.point, RECOVERED, recent, old.level, closed_by=cp)  # type: ignore[union-attr]
            opened = []
        states[i] = State(cp, None, recent, level)
        if not opened:
            level = cp.after
    return [s for s in states if s is not None]


def states(points: Sequence["ChangePoint"], frame: "pd.DataFrame", accepted: Sequence["Acceptance"] = (),
           last: int = 3) -> list[State]:
    """The state of every change point of ``points`` (``detect(frame)``), in their order.
    ``frame``: the series they were found in (for each series' length and noise)."""
    if not points:
        return []
    # each series' rows as positions: a sub-frame per series cost more than judging it
    groups = frame.groupby(list(KEY), sort=False, observed=True).indices
    runs = frame.groupby(["machine", "suite", "metric"], sort=False, observed=True)["run_id"].nunique().to_dict()
    value, run_id = frame["value"].to_numpy(dtype="float64"), frame["run_id"]
    by_series: dict[tuple, list[int]] = {}
    for i, cp in enumerate(points):
        by_series.setdefault((cp.machine, cp.suite, cp.kernel, cp.metric), []).append(i)
    out: list[State | None] = [None] * len(points)
    for key, where in by_series.items():
        group = groups.get(key)
        run_ids: Sequence[str] = ()
        if group is not None:
            values, size, run_ids = value[group], len(group), list(run_id.iloc[group])
        else:  # the run-wide offset series (detect(relative=True)): one value per run, ratios near 1
            values, size = np.array([]), int(runs.get((key[0], key[1], key[3]), 0)) if key[2] == RUN_WIDE else 0
        mine = [points[i] for i in where]
        for i, state in zip(where, series_states(mine, values, size, accepted, last, run_ids)):
            out[i] = state
    return [s for s in out if s is not None]


def level(points: Sequence["ChangePoint"], values: np.ndarray, accepted: Sequence["Acceptance"] = (),
          run_ids: Sequence[str] = ()) -> Level:
    """The accepted level of one series (``points``: its change points, oldest first;
    ``run_ids``: its runs in order)."""
    size = len(values)
    if not points:
        return Level(0, size, None)
    found = series_states(points, np.asarray(values, dtype="float64"), size, accepted, 1, run_ids)
    first_open = next((s for s in found if s.open), None)
    end = first_open.point.index if first_open is not None else size
    # the change points that set a level: accepted regressions, improvements, recoveries
    # (not a regression within the noise, nor a recovered one: its recovery is later)
    setters = [s.point.index for s in found if s.point.index < end
               and (s.status == ACCEPTED or (s.status is None and not s.point.regression))]
    return Level(max(setters, default=0), end, first_open)


def open_regressions(found: Sequence[State]) -> list[State]:
    return [s for s in found if s.open]


def shown(found: Sequence[State]) -> list[State]:
    """The states a listing shows: every change point but a recovered regression whose
    recovery is old news (reported once, the night it recovered)."""
    return [s for s in found if s.status != RECOVERED or s.new]


def open_in_store(store_path: "str | Path | StoreURL", machine: str, suite: str, kernels: Sequence[str],
                  accepted: Sequence["Acceptance"] = (), *, read_only: bool = False) -> list[State]:
    """The open regressions of ``kernels`` of ``suite`` on ``machine`` in the store (every
    metric); none when the store does not exist yet. Read part by part (a part holds
    whole kernels, so each series' states are complete in it): a baseline update of a
    suite of thousands of kernels never holds a year of their values at once.
    ``read_only``: the history's read-only mode (a store of an older schema is refused,
    never migrated)."""
    from perfcheck.history.changepoints import detect
    from perfcheck.history.store import open_store, store_exists

    if not kernels or not store_exists(store_path):
        return []
    found: list[State] = []
    with open_store(store_path, create=False, read_only=read_only) as store:
        for part in store.batches(machine=machine, suite=suite, kernel=list(kernels)):
            found.extend(open_regressions(states(detect(part), part, accepted)))
    return found
