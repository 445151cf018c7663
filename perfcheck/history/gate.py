"""The gate that knows history: a baseline-relative expectation judged against this
machine's recent runs instead of one stored snapshot.

With a store, ``duration <= baseline + 5%`` takes as its baseline the median of the
last ``RECENT_RUNS`` runs of that kernel and metric on this machine at its last
**accepted level** (``perfcheck.history.lifecycle``: the runs after the last change
point that set a level, an accepted regression, an improvement or a recovery, and
before the first open regression; single-run spikes are set aside), and as its noise
the run-to-run spread measured there. An unaccepted regression never becomes the
reference: while it lasts the check fails and names it (``open regression since
...: accept it with perfcheck history accept ... or fix it``). And the history never
passes what the committed baseline file fails by more than the allowance plus the
same measured noise; when the two disagree, the message gives both figures. Why: one run's dispatches show within-run noise
only, while runs differ by more (clocks, placement, thermals; one project measured
2.8% within a run against 14.8% between jobs), so a snapshot baseline fails merges
on drift alone.

The rule: fail when the run is worse than the allowance with at least 90% confidence,
i.e. beyond ``reference x exp(t x se)`` (``t`` the one-sided 90% Student quantile
with one degree of freedom fewer than the runs the spread was measured on: 1.53
for 5 runs, 1.31 for 30), where
``reference`` is the literal bound (history median x (1 + allowance)) and ``se`` the
standard error of log(observed / history median): the run-to-run spread (or the
run's own within-run noise, whichever is larger) plus the uncertainty of a median of
N runs (pi/2 x spread^2 / N). With 2% drift, a run 2% slower than usual fails a 5%
budget 0.4% of the time instead of 8-16% (``benchmarks/decisions.py``); a 10%
slowdown still fails 85%, a 20% one always.

With fewer than ``MIN_RUNS`` comparable runs since the last change point the check
keeps the baseline file's decision and says that history was too short. Exact
quantities (bytes, instructions, registers) keep the baseline file: they have no
run-to-run noise to learn. Checks only read the store; the suite runner appends.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from perfcheck.history.changepoints import (
    MIN_AFTER,
    P_VALUE,
    WINDOW,
    spikes_rows,
    split_points,
    split_points_many,
    t_pvalue,
)
from perfcheck.model import FAILED, PASSED, RECORDED, Check

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis
    from perfcheck.expect import Expectation
    from perfcheck.storeurl import StoreURL
    from perfcheck.history.changepoints import ChangePoint

RECENT_RUNS = 10  # the baseline is the median of this many latest runs since the last change point
MIN_RUNS = 5  # fewer comparable runs: the baseline file decides
CONFIDENCE = 0.90  # one-sided: fail when 90% sure the run is worse than the allowance
_QUANTILES: dict[int, float] = {}


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """One-sided Student t quantile (the spread is estimated from few runs: with 5 runs
    the 90% quantile is 1.53, not the normal 1.28). Bisection on the CDF, cached."""
    df = max(1, int(df))
    key = df if confidence == CONFIDENCE else -1
    if key in _QUANTILES:
        return _QUANTILES[key]
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if t_pvalue(mid, df) / 2.0 > 1.0 - confidence:
            lo = mid
        else:
            hi = mid
    if key > 0:
        _QUANTILES[key] = hi
    return hi
SERIES_RUNS = 60  # runs read per series to find the last change point and the spread


@dataclass(frozen=True)
class Reference:
    """What history says about one kernel x metric on this machine."""

    value: float | None  # median of the recent runs (base units); None: too little history
    spread: float  # run-to-run standard deviation of log values (0.02 = 2%)
    runs: int  # runs the median is taken over
    comparable: int  # runs since the last change point (spikes set aside)
    since_index: int  # where that stretch starts in the series
    since_run: str | None = None  # the change point's run (None: the series' first run)
    since_commit: str | None = None
    since_time: float | None = None
    # the first open regression of the series (perfcheck.history.lifecycle): the reference
    # is the accepted level before it, never the regressed runs
    open: "ChangePoint | None" = None

    @property
    def usable(self) -> bool:
        return self.value is not None

    def describe(self) -> str:
        start = "since its first run"
        if self.since_run is not None:
            when = dt.datetime.fromtimestamp(self.since_time, dt.timezone.utc).strftime("%Y-%m-%d") if self.since_time else "?"
            start = f"since the change point at {(self.since_commit or self.since_run)[:12]} ({when})"
        until = ""
        if self.open is not None:
            until = f" until the open regression at {_where(self.open)}"
        return (f"history: median of the last {self.runs} runs on this machine {start}{until}, "
                f"run-to-run spread {100 * self.spread:.2g}%")


def _where(cp: "ChangePoint") -> str:
    when = dt.datetime.fromtimestamp(cp.time, dt.timezone.utc).strftime("%Y-%m-%d")
    return f"{(cp.commit or cp.run_id)[:12]} ({when}, run {cp.run_id})"


def open_message(cp: "ChangePoint") -> str:
    """What a check failing on an open regression says: where it started, by how much,
    and the two ways out."""
    return (f"open regression since {_where(cp)}, {cp.change_pct:+.1f}%: accept it with perfcheck history accept "
            f"{_quoted(cp.kernel)} --suite {_quoted(cp.suite)} --metric {cp.metric} --reason TEXT, or fix it")


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


def reference(values: Sequence[float] | np.ndarray, *, recent: int = RECENT_RUNS, min_runs: int = MIN_RUNS,
              p: float = P_VALUE, min_after: int = MIN_AFTER, window: int = WINDOW,
              stretch: tuple[int, int] | None = None) -> Reference:
    """The history reference of one series (oldest first; NaN ignored): the runs since
    its last change point, or ``stretch`` (start, end): the accepted level's runs
    (``perfcheck.history.lifecycle.level``). ``reference_rows`` of the one series."""
    x = np.asarray(values, dtype="float64")
    if stretch is None:
        splits = split_points(x, p=p, min_after=min_after, window=window)
        start, end = (splits[-1].index if splits else 0), len(x)
    else:
        start, end = stretch
    lo, hi, _ = slice(start, end).indices(len(x))  # the stretch as Python slices it
    median, spread, runs, comparable = reference_rows(x, np.array([lo]), np.array([hi]), recent=recent,
                                                      min_runs=min_runs, window=window)
    usable = not np.isnan(median[0])
    return Reference(float(median[0]) if usable else None, float(spread[0]), int(runs[0]), int(comparable[0]), start)


def reference_rows(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, recent: int = RECENT_RUNS,
                   min_runs: int = MIN_RUNS, window: int = WINDOW) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The references of many series at once: series ``i`` is the stretch
    ``values[lo[i]:hi[i]]`` (NaN, inf and values <= 0 ignored; single-run spikes set
    aside in series of at least 3 runs). Returns each one's median of its latest
    ``recent`` runs (NaN: fewer than ``min_runs``), spread (the run-to-run sigma of its
    last ``window`` logs: from successive differences, so a slow trend barely moves it,
    never below the spread around the median, nor, spikes set aside, the standard
    deviation, the steadier estimate when only a few runs are there), runs and
    comparable runs. A suite's 2,000 series one by one were
    a quarter of the gate's time, numpy's overhead on arrays of 60 values; here the
    series of one length are rows of one matrix (a median along a row is that row's
    own median, a sum along a contiguous row the same pairwise sum: each series' floats are
    those of its stretch alone, tested to the bit against numpy's one-series functions)."""
    count = len(lo)
    lengths = np.maximum(np.asarray(hi, dtype=np.int64) - np.asarray(lo, dtype=np.int64), 0)
    owner = np.repeat(np.arange(count), lengths)
    offsets = np.cumsum(lengths) - lengths
    flat = np.asarray(values, dtype="float64")[np.repeat(np.asarray(lo, dtype=np.int64) - offsets, lengths)
                                                + np.arange(int(lengths.sum()))]
    usable = np.isfinite(flat) & (flat > 0)
    flat, owner = flat[usable], owner[usable]
    logs = np.log(flat)  # one contiguous array: the same kernel, the same floats as a series' own np.log
    # single-run spikes, set aside in series of at least 3 runs (``spikes``, row by row)
    kept = np.ones(len(flat), dtype=bool)
    for length, rows, at in _rows_by_length(owner, count):
        if length >= 3:
            kept[at] = ~spikes_rows(logs[at])
    flat, logs, owner = flat[kept], logs[kept], owner[kept]
    median = np.full(count, np.nan)
    spread = np.zeros(count)
    runs = np.zeros(count, dtype=np.int64)
    comparable = np.bincount(owner, minlength=count).astype(np.int64)
    for length, rows, at in _rows_by_length(owner, count):
        if length < min_runs:
            continue
        tail = logs[at[:, -window:]]
        ordered = np.sort(np.abs(np.diff(tail, axis=1)), axis=1)
        spread_diffs = 1.4826 * _middle(ordered) / math.sqrt(2.0)
        centre = _middle(np.sort(tail, axis=1))
        spread_mad = 1.4826 * _middle(np.sort(np.abs(tail - centre[:, None]), axis=1))
        spread[rows] = np.maximum(np.maximum(spread_diffs, spread_mad), np.std(tail, axis=1, ddof=1))
        last = flat[at[:, -recent:]]
        median[rows] = _middle(np.sort(last, axis=1))
        runs[rows] = last.shape[1]
    return median, spread, runs, comparable


def _rows_by_length(owner: np.ndarray, count: int) -> "Iterator[tuple[int, np.ndarray, np.ndarray]]":
    """The series of each length in ``owner`` (each value's series, in series order):
    (length, their numbers, the (series x length) positions of their values)."""
    sizes = np.bincount(owner, minlength=count)
    starts = np.cumsum(sizes) - sizes
    for length in np.unique(sizes).tolist():
        rows = np.flatnonzero(sizes == length)
        yield length, rows, starts[rows][:, None] + np.arange(length)


def _middle(ordered: np.ndarray) -> np.ndarray:
    """Each sorted row's median as ``np.median`` takes it, to the bit (the middle value, or
    the two middle ones' sum halved, as its mean is), without its partitioning machinery."""
    half = ordered.shape[1] // 2
    return ordered[:, half] if ordered.shape[1] % 2 else (ordered[:, half - 1] + ordered[:, half]) / 2.0


def within_run_se(samples: np.ndarray | None) -> float:
    """Standard error of log(median) of one run's dispatch durations: the distribution-
    free interval of the median (order statistics at n/2 -/+ 1.96 sqrt(n)/2)."""
    if samples is None:
        return 0.0
    x = np.asarray(samples, dtype="float64")
    x = x[np.isfinite(x) & (x > 0)]
    if len(x) < 5:
        return 0.0
    delta = 1.959963984540054 / (2.0 * math.sqrt(len(x)))
    lo, hi = np.quantile(x, [max(0.0, 0.5 - delta), min(1.0, 0.5 + delta)])
    return float(math.log(hi / lo) / (2.0 * 1.959963984540054))


@dataclass(frozen=True)
class Judgement:
    passed: bool
    baseline: float
    reference: float  # the literal bound: baseline x (1 + allowance) + absolute
    limit: float  # where it fails: reference widened by the noise
    se: float
    z: float  # the t quantile the limit is widened by (se x z)


def judge(observed: float, relation: str, fraction: float, absolute: float | None, ref: Reference,
          current_se: float = 0.0) -> Judgement | None:
    """Decide ``observed RELATION baseline x (1 + fraction) + absolute`` against the
    history reference; None for relations the gate does not judge (==, !=)."""
    if ref.value is None or relation not in ("<=", "<", ">=", ">") or not (observed > 0) or ref.value <= 0:
        return None
    base = ref.value
    bound = base * (1.0 + fraction) + (absolute or 0.0)
    run_sigma = max(ref.spread, current_se)
    se = math.sqrt(run_sigma**2 + (math.pi / 2.0) * ref.spread**2 / max(ref.runs, 1))
    z = t_quantile(min(ref.comparable, WINDOW) - 1)
    if relation in ("<=", "<"):
        limit = bound * math.exp(z * se)
        passed = observed <= limit if relation == "<=" else observed < limit
    else:
        limit = bound * math.exp(-z * se)
        passed = observed >= limit if relation == ">=" else observed > limit
    return Judgement(passed, base, bound, limit, se, z)


# --- checks against a store ---------------------------------------------------------------------

def references(store_path: "str | Path | StoreURL", machine: str, suite: str, wanted: Sequence[tuple[str, str]],
               accepted_path: str | Path | None = None, *, read_only: bool = False) -> dict[tuple[str, str], Reference]:
    """History references of ``wanted`` (kernel, metric) pairs of ``suite`` on ``machine``:
    each from its series' accepted level (the runs before an open regression; the
    accepted file ``accepted_path`` says which regressions were accepted). A store that
    does not exist yet has no history (the runner creates it at the end). ``read_only``:
    history_mode read-only, the store is opened so (an old schema is refused, not migrated)."""
    from perfcheck.history import accepted, lifecycle
    from perfcheck.history.changepoints import detect
    from perfcheck.history.store import open_store, store_exists

    if not wanted or not store_exists(store_path):
        return {}

    entries = accepted.read(accepted_path) if accepted_path is not None else []
    out: dict[tuple[str, str], Reference] = {}
    with open_store(store_path, create=False, read_only=read_only) as store:
        # values only (perfcheck.history.latest): the frame of every column ``latest``
        # gives was most of the gate's time; that frame is read for the few series
        # with a change point, which ``detect`` describes
        found = store.latest_values(machine=machine, suite=suite, pairs=sorted(set(wanted)), last=SERIES_RUNS)
        if not len(found):
            return out
        values = found.values
        spans = [found.span(i) for i in range(len(found))]
        # detect's change points are where split_points splits (searched for every judged
        # series at once: split_points_many, the same answer): the few series with one go
        # to detect together (one frame), the others have none
        splits = split_points_many([values[start:end] for start, end in spans])
        changed = sorted({(found.kernels[i], found.metrics[i]) for i, split in enumerate(splits) if split})
        points: dict[tuple[str, str], list["ChangePoint"]] = {}
        if changed:
            for point in detect(store.latest(machine=machine, suite=suite, pairs=changed, last=SERIES_RUNS)):
                points.setdefault((point.kernel, point.metric), []).append(point)
    # each series' accepted level (a Python loop, but cheap: most series have no change
    # point), then the references of all of them at once (``reference_rows``)
    levels = []
    for i, (start, end) in enumerate(spans):
        at = points.get((found.kernels[i], found.metrics[i]), [])
        run_ids = [found.run_ids[r] for r in found.runs[start:end].tolist()] if at else []  # only with change points
        levels.append(lifecycle.level(at, values[start:end], entries, run_ids))
    first = np.asarray([start for start, _ in spans], dtype=np.int64)
    size = np.asarray([end - start for start, end in spans], dtype=np.int64)
    since = np.asarray([level.start for level in levels], dtype=np.int64)
    until = np.asarray([level.end for level in levels], dtype=np.int64)
    medians, spreads, runs, comparable = reference_rows(values, first + np.clip(since, 0, size),
                                                        first + np.clip(until, 0, size))
    starts: list[tuple[tuple[str, str], Reference, int]] = []
    for i, level in enumerate(levels):
        key = (found.kernels[i], found.metrics[i])
        usable = not np.isnan(medians[i])
        ref = Reference(float(medians[i]) if usable else None, float(spreads[i]), int(runs[i]), int(comparable[i]),
                        level.start, open=level.open.point if level.open is not None else None)
        if usable and level.start > 0:
            starts.append((key, ref, int(found.runs[first[i] + level.start])))
        out[key] = ref
    if starts:
        import pandas as pd

        # the time as a value of ``latest``'s frame holds it (a UTC timestamp, to the
        # nanosecond), so the reference's start is the same to the bit
        stamps = pd.to_datetime(found.times[[run for _, _, run in starts]], unit="s", utc=True)
        for (key, ref, run), stamp in zip(starts, stamps):
            commit = found.commits[run]
            out[key] = replace(ref, since_run=found.run_ids[run], since_commit=commit or None,
                               since_time=float(stamp.timestamp()))
    return out


def recent_values(store_path: "str | Path | StoreURL", machine: str, suite: str,
                  since: Mapping[str, float | None], *, read_only: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """kernel -> metric -> the values of its latest ``RECENT_RUNS`` runs on this machine,
    since ``since[kernel]`` (Unix seconds: the change point the gate's reference starts
    at; None: all), every metric: what the diagnosis compares this run with."""
    from perfcheck.history.store import open_store, store_exists

    if not since or not store_exists(store_path):
        return {}
    # The values since a time are a series' latest ones (runs by time), so its last
    # RECENT_RUNS runs hold all that is kept; and only numbers are read (``latest_values``).
    # A night when the whole run moved fails every kernel's check: the frame of every
    # column of every metric of 2,000 kernels' last 60 runs, grouped series by series,
    # took 16 s and 3 GB at 365 nights.
    with open_store(store_path, create=False, read_only=read_only) as store:
        found = store.latest_values(machine=machine, suite=suite, pairs=[(kernel, None) for kernel in sorted(since)],
                                    last=RECENT_RUNS)
    out: dict[str, dict[str, np.ndarray]] = {}
    if not len(found):
        return out
    import pandas as pd

    # each run's time as ``latest``'s frame holds it (a UTC timestamp, to the nanosecond),
    # in seconds as the reference's start was taken: ``Timestamp.timestamp()``, which
    # rounds to the microsecond (the runs with a value: others may hold any time). Not
    # (stamp - epoch) / 1 s: for a time with digits below the microsecond (time.time()'s),
    # that is up to half a microsecond under the start, and the run the reference starts
    # at was left out of the values the diagnosis compares with
    used = np.unique(found.runs)
    seconds = np.full(len(found.times), np.nan)
    stamps = pd.to_datetime(found.times[used], unit="s", utc=True)
    seconds[used] = [stamp.timestamp() for stamp in stamps]  # one a run, not a value
    first = {kernel: start for kernel, start in since.items() if start is not None}
    start = np.asarray([first.get(kernel, -np.inf) for kernel in found.kernels], dtype="float64")
    kept = seconds[found.runs] >= np.repeat(start, np.diff(found.starts))  # each row: since its kernel's start
    counts = np.bincount(np.repeat(np.arange(len(found)), np.diff(found.starts))[kept], minlength=len(found))
    for i, values in enumerate(np.split(found.values[kept], np.cumsum(counts)[:-1])):
        if len(values):  # (each series' last RECENT_RUNS runs were read: all of them)
            out.setdefault(found.kernels[i], {})[found.metrics[i]] = values
    return out


@functools.lru_cache(maxsize=1024)
def _first_term(expression: str) -> "Expectation | None":
    """The first expectation of ``expression`` (None: not one): a suite's 2,000 kernels
    share a few expressions, each parsed once."""
    from perfcheck.expect import ExpectationError, parse

    try:
        return parse(expression)[0]
    except ExpectationError:
        return None


def _allowance(check: Check, tolerances: Mapping[str, float]) -> tuple[float, float | None] | None:
    first = _first_term(check.expression)
    if first is None or first.kind != "baseline":
        return None
    fraction = first.value or 0.0
    if fraction == 0.0 and first.absolute_delta is None and check.metric in tolerances:
        fraction = tolerances[check.metric] if check.relation in ("<=", "<") else -tolerances[check.metric]
    return fraction, first.absolute_delta


def _file_verdict(check: Check, allowance: tuple[float, float | None], verdict: Judgement) -> tuple[bool, str] | None:
    """The committed baseline file's side of a gated check: (passes, what it says), the
    file's value widened by the same allowance and the same measured noise (``verdict``'s
    se and t quantile) as the history's. None without a stored value (recorded now)."""
    from perfcheck.units import format_value as fmt

    stored = check.baseline
    if check.outcome == RECORDED or stored is None or not (stored > 0) or check.observed is None:
        return None
    fraction, absolute = allowance
    bound = stored * (1.0 + fraction) + (absolute or 0.0)
    if check.relation in ("<=", "<"):
        limit = bound * math.exp(verdict.z * verdict.se)
        passed = check.observed <= limit if check.relation == "<=" else check.observed < limit
    else:
        limit = bound * math.exp(-verdict.z * verdict.se)
        passed = check.observed >= limit if check.relation == ">=" else check.observed > limit
    change = (check.observed / stored - 1.0) * 100.0
    return passed, (f"vs the baseline file {fmt(stored, check.unit)} ({change:+.1f}%): expected {check.relation} "
                    f"{fmt(bound, check.unit)}, fails beyond {fmt(limit, check.unit)} (allowance + measured noise)"
                    f"{'' if passed else ', failed'}")


def gated_pairs(checks: Sequence[Check]) -> list[tuple[str, str]]:
    """(kernel, metric) of the checks the history may judge: baseline-relative, measured
    (not exact), with an observed value."""
    from perfcheck.baseline import is_exact

    return sorted({(c.kernel, c.metric) for c in checks
                   if c.origin == "baseline" and c.observed is not None and not is_exact(c.metric)
                   and c.relation in ("<=", "<", ">=", ">")})


def rejudge(checks: Sequence[Check], refs: Mapping[tuple[str, str], Reference], analysis: "Analysis | None",
            tolerances: Mapping[str, float]) -> list[Check]:
    """Checks with the baseline-relative ones judged on history where it suffices; the
    others say why the baseline file decided."""
    from perfcheck.baseline import is_exact
    from perfcheck.units import format_value as fmt

    out = []
    for check in checks:
        key = (check.kernel, check.metric)
        gated = check.origin == "baseline" and check.observed is not None and not is_exact(check.metric)
        ref = refs.get(key)
        if not gated or check.relation not in ("<=", "<", ">=", ">"):
            out.append(check)
            continue
        if ref is None or not ref.usable:
            have = 0 if ref is None else ref.comparable
            source = "baseline file" if check.outcome != RECORDED else "no baseline"
            note = f" [{source}: history has {have} comparable run{'s' if have != 1 else ''} on this machine, needs {MIN_RUNS}]"
            message = check.message + note
            if ref is not None and ref.open is not None and check.outcome == FAILED:
                message = f"{open_message(ref.open)}; {message}"
            out.append(replace(check, message=message))
            continue
        allowance = _allowance(check, tolerances)
        samples = analysis.duration_samples.get(check.kernel) if analysis is not None else None
        verdict = judge(check.observed, check.relation, *(allowance or (0.0, None)), ref, within_run_se(samples)) if allowance else None
        if verdict is None:
            out.append(check)
            continue
        change = (check.observed / verdict.baseline - 1.0) * 100.0
        message = (
            f"{check.metric} {fmt(check.observed, check.unit)} ({change:+.1f}%) vs history {fmt(verdict.baseline, check.unit)}; "
            f"expected {check.relation} {fmt(verdict.reference, check.unit)}, fails beyond {fmt(verdict.limit, check.unit)} "
            f"(run-to-run noise) [{ref.describe()}]"
        )
        passed = verdict.passed
        file_side = _file_verdict(check, allowance or (0.0, None), verdict)
        if file_side is not None:
            file_passed, file_text = file_side
            if passed != file_passed or (check.outcome == FAILED) == passed:
                # the two references disagree: say both figures. The history never passes
                # what the reviewed baseline file fails by more than allowance + noise.
                message += f"; {file_text}"
            passed = passed and file_passed
        if not passed and ref.open is not None:
            message = f"{open_message(ref.open)}; {message}"
        detail = (f"{ref.describe()}; se of log ratio {100 * verdict.se:.2g}%; fails when 90% sure the run is worse "
                  f"than the allowance: beyond {fmt(verdict.limit, check.unit)}")
        out.append(replace(check, outcome=PASSED if passed else FAILED, baseline=verdict.baseline,
                           reference=verdict.reference, message=message, detail=detail))
    return out
