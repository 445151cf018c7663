"""Change points: lasting shifts in a series of runs, not one-night spikes.

The method (numpy only; each step says why):

1. Work on log values, so a change is a ratio (a 3% slowdown is the same step on a
   1 us and a 1 s kernel) and multiplicative noise (clocks) is additive.
2. Single-run spikes (a preempted job, a throttled node) are set aside before any
   test: a run that stands out from BOTH neighbours in the same direction by more
   than ``SPIKE_K`` robust standard deviations of the run-to-run differences, and
   by more than twice the neighbours differ from each other (so the first run of a
   shift, whose neighbours sit on two levels, is not one). Peers
   that test spikes along with the data report them as changes or lose power to
   their variance; a real shift moves its neighbours too, so it is never a spike.
   The first and the newest run have one neighbour: they are set aside when far
   from it while it agrees with its own other neighbour (the newest run cannot
   start a change alone anyway: persistence, below).
3. Candidates by E-divisive means (Matteson & James 2014, energy statistic with
   alpha = 1), by binary segmentation inside sliding windows of ``window`` runs
   (half-overlapping), so an old change or a slow drift far away neither hides nor
   fakes a recent one.
4. Significance by Student's t-test between the two segments around a candidate,
   with the variance pooled (the run-to-run noise is the machine's, not the
   segment's: pooling gives short new segments their power) instead of the
   permutation test of the original method: deterministic, and thousands of times
   cheaper. A candidate whose p-value is not below ``p`` is dropped; then the
   survivors are re-tested against their final neighbours (each side at most
   ``window`` runs) and the weakest is dropped until all pass.
5. Persistence: a change needs at least ``min_after`` runs at its new level (the
   run where it starts counts), each nearer the new level than the old, so one
   spike is never a change point and the newest run alone never starts one; a
   jump as large as a spike needs one run more unless its runs agree within 3
   sigmas (two spikes in a row happen, and differ).

Run-relative detection (``detect(frame, relative=True)``, ``history detect
--relative``): on a GPU much of a run's drift (clocks, thermals, placement) is
shared by every kernel of that run on that machine. Each run's **run-wide offset**
is the median, over the kernels of the run, of each kernel's deviation from its
own recent level (``run_offsets``; a kernel that really changed is one vote of
many; a second pass centres each kernel on its level between its own change
points, so that many kernels changing at different times do not add up to a
run-wide drift). Each kernel is then tested on its values divided by that offset, which
takes the shared drift out of its noise (a kernel whose values are quieter as they
are, its drift its own, is tested as it is); and the offset itself is tested as a
series of its own, reported as the kernel ``RUN_WIDE`` ("(run-wide)"), so a change
that hits every kernel at once (a driver, a clock policy) is still found there
instead of being divided away; such a change point is kept when at least ``BROAD``
(3/4) of the kernels moved the same way across it (``broad``).

Every change point records the run and commit where it starts, the medians
before and after, the change in % and whether it is a regression by the metric's
better direction (``better``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from perfcheck.history.partindex import PartIndex

P_VALUE = 0.001
MIN_AFTER = 2
WINDOW = 30
MIN_BEFORE = 3  # runs before a change: fewer say nothing about the old level
SPIKE_K = 5.0
MIN_KERNELS = 5  # kernels of one run needed to estimate its run-wide offset
BROAD = 0.75  # share of the kernels that must move with a run-wide change point
RUN_WIDE = "(run-wide)"  # the kernel name of the run-wide offset series (relative=True); values are ratios
REGRESSION, IMPROVEMENT = "regression", "improvement"
LOWER, HIGHER = "lower", "higher"
KEY = ("machine", "suite", "kernel", "metric")


@dataclass(frozen=True)
class ChangePoint:
    """A lasting shift in one series (machine x suite x kernel x metric)."""

    machine: str
    suite: str
    kernel: str
    metric: str
    unit: str
    run_id: str  # the first run at the new level
    commit: str | None  # that run's commit
    time: float  # that run's time, Unix seconds UTC
    index: int  # position of that run in the series given (0 = oldest)
    before: float  # median of the runs before (base units, at most ``window`` runs)
    after: float  # median of the runs after, up to the next change point
    change_pct: float  # after / before - 1, in %
    direction: str  # "regression" | "improvement"
    p: float  # two-sided p-value of the t-test between the two segments
    runs_before: int
    runs_after: int

    @property
    def regression(self) -> bool:
        return self.direction == REGRESSION

    def as_dict(self) -> dict[str, object]:
        import datetime as dt

        doc = asdict(self)
        doc["time_iso"] = dt.datetime.fromtimestamp(self.time, dt.timezone.utc).isoformat(timespec="seconds")
        return doc


@dataclass(frozen=True)
class Split:
    """A change point in a bare array: ``index`` is the first value at the new level."""

    index: int
    p: float


# --- the better direction of a metric ------------------------------------------------------

_HIGHER_NAMES = {"gips", "occupancy_pct", "achieved_occupancy_pct", "roofline_pct", "attainable"}


def better(metric: str, unit: str = "") -> str:
    """"lower" (durations, bytes, instructions, registers, spills) or "higher"
    (bandwidths, rates, % of a ceiling, occupancy)."""
    if metric in _HIGHER_NAMES or metric.endswith(("_bw", "_rate", "_bw_pct", "_rate_pct")) or metric == "bw":
        return HIGHER
    if unit.endswith("/s") or (unit == "%" and not metric.startswith("rank_")):
        return HIGHER
    return LOWER


# --- statistics ----------------------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_pvalue(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom."""
    if not math.isfinite(t):
        return 0.0 if not math.isnan(t) else 1.0
    if df <= 0:
        return 1.0
    return min(1.0, _betainc(df / 2.0, 0.5, df / (df + t * t)))


def _ttest(a: np.ndarray, b: np.ndarray, floor: float = 0.0) -> float:
    """Pooled-variance two-sample t-test, two-sided p; ``floor``: the standard deviation
    used is at least this."""
    na, nb = len(a), len(b)
    df = na + nb - 2
    if na < 1 or nb < 1 or df < 1:
        return 1.0
    mean_a, mean_b = a.mean(), b.mean()
    diff = float(mean_b - mean_a)
    ss = float(((a - mean_a) ** 2).sum() + ((b - mean_b) ** 2).sum())
    scale = math.sqrt(max(ss / df, floor * floor) * (1.0 / na + 1.0 / nb))
    if scale == 0.0:
        # noiseless (exact quantities): any difference is a change, none is none
        return 0.0 if abs(diff) > 1e-12 * max(1.0, abs(float(mean_a))) else 1.0
    return t_pvalue(diff / scale, df)


def _robust_sigma(y: np.ndarray) -> float:
    """Run-to-run standard deviation from the median absolute successive difference:
    level shifts and spikes barely move it."""
    if len(y) < 3:
        return 0.0
    d = np.abs(np.diff(y))
    return float(1.4826 * np.median(d) / math.sqrt(2.0))


def _robust_sigmas(rows: np.ndarray) -> np.ndarray:
    """``_robust_sigma`` of the finite values of each row of ``rows``: the rows without a
    missing value at once (a median along rows is each row's own median, so the same
    floats), the others one by one."""
    out = np.zeros(len(rows))
    finite = np.isfinite(rows)
    full = finite.all(axis=1)
    if rows.shape[1] >= 3 and full.any():
        out[full] = 1.4826 * np.median(np.abs(np.diff(rows[full], axis=1)), axis=1) / math.sqrt(2.0)
    for k in np.flatnonzero(~full):
        out[k] = _robust_sigma(rows[k][finite[k]])
    return out


def spikes(y: np.ndarray, k: float = SPIKE_K) -> np.ndarray:
    """Mask of single-run spikes: points beyond ``k`` robust sigmas from both
    neighbours, on the same side of both, and twice as far from each as the
    neighbours are from each other. An end point has one neighbour: it is a
    spike when it is that far from it while that neighbour agrees with its own next
    one (the newest run is thereby set aside until the next run says whether it
    started a shift; it could not start a change point alone anyway)."""
    y = np.asarray(y, dtype="float64")
    mask = np.zeros(len(y), dtype=bool)
    if len(y) < 3:
        return mask
    sigma = _robust_sigma(y)
    limit = max(k * sigma, 1e-12 * float(np.max(np.abs(y))))
    prev, nxt = y[1:-1] - y[:-2], y[1:-1] - y[2:]
    same_side = np.sign(prev) == np.sign(nxt)
    # the neighbours agree, relative to the jump: the first run of a shift has a neighbour
    # on each level; a spike on the first run of a shift stands out from both levels
    jump = np.minimum(np.abs(prev), np.abs(nxt))
    agree = np.abs(y[2:] - y[:-2]) * 2.0 < jump
    mask[1:-1] = same_side & agree & (jump > limit) & (prev != 0)
    # an end: far from its neighbour, which agrees with its own, and far from the level
    # of the runs next to it (a run back at the old level after two spikes is no spike)
    mask[0] = (abs(y[0] - y[1]) > limit and abs(y[1] - y[2]) <= limit
               and abs(y[0] - np.median(y[1:6])) > limit)
    mask[-1] = (abs(y[-1] - y[-2]) > limit and abs(y[-2] - y[-3]) <= limit
                and abs(y[-1] - np.median(y[-6:-1])) > limit)
    return mask


def _edivisive_best(y: np.ndarray, min_before: int, min_after: int) -> int | None:
    """The split of ``y`` maximising the E-divisive energy statistic (alpha = 1)."""
    n = len(y)
    lo, hi = min_before, n - min_after  # candidate tau: y[:tau] | y[tau:]
    if hi < lo:
        return None
    dist = np.abs(y[:, None] - y[None, :])
    cum = np.zeros((n + 1, n + 1))
    cum[1:, 1:] = dist.cumsum(0).cumsum(1)
    tau = np.arange(lo, hi + 1)
    m, k = tau.astype("float64"), (n - tau).astype("float64")
    between = cum[tau, n] - cum[tau, tau] - cum[0, n] + cum[0, tau]  # rows :tau, cols tau:
    within_x = cum[tau, tau]  # both orders of each pair
    within_y = cum[n, n] - cum[tau, n] - cum[n, tau] + cum[tau, tau]
    with np.errstate(divide="ignore", invalid="ignore"):
        ex = np.where(m > 1, within_x / (m * (m - 1)), 0.0)
        ey = np.where(k > 1, within_y / (k * (k - 1)), 0.0)
        q = (m * k / (m + k)) * (2.0 * between / (m * k) - ex - ey)
    if not np.isfinite(q).any():
        return None
    return int(tau[int(np.nanargmax(q))])


def _candidates(y: np.ndarray, start: int, p: float, min_after: int, out: set[int], depth: int = 0) -> None:
    """Binary segmentation of y: significant splits, as indices offset by ``start``."""
    if depth > 32 or len(y) < MIN_BEFORE + min_after:
        return
    tau = _edivisive_best(y, MIN_BEFORE, min_after)
    if tau is None or _ttest(y[:tau], y[tau:]) >= p:
        return
    out.add(start + tau)
    _candidates(y[:tau], start, p, min_after, out, depth + 1)
    _candidates(y[tau:], start + tau, p, min_after, out, depth + 1)


def _prune(y: np.ndarray, cps: list[int], p: float, window: int, min_after: int) -> list[Split]:
    """Re-test each change point against its final neighbours; drop the weakest until all pass."""
    cps = sorted(set(cps))
    sigma = _robust_sigma(y)
    # a change point's test depends on its neighbours alone: each round re-tests only those
    # next to the one dropped or moved (the rest are looked up, the same floats)
    judged: dict[tuple[int, int, int, bool], tuple[int | None, float]] = {}
    while cps:
        bounds = [0, *cps, len(y)]
        pvalues = []
        for i, cp in enumerate(cps):
            key = (bounds[i], cp, bounds[i + 2], i + 1 == len(cps))
            if key not in judged:
                judged[key] = _retest(y, cp, bounds[i], bounds[i + 2], key[3], sigma, window, min_after)
            moved_to, pvalue = judged[key]
            if moved_to is not None:
                moved = (i, moved_to)
                break
            pvalues.append(pvalue)
        else:
            moved = None
        if moved is not None:
            cps[moved[0]] = moved[1]
            continue
        worst = int(np.argmax(pvalues))
        if pvalues[worst] < p:
            return [Split(cp, pv) for cp, pv in zip(cps, pvalues)]
        del cps[worst]
    return []


def _retest(y: np.ndarray, cp: int, before: int, after: int, last: bool, sigma: float, window: int,
            min_after: int) -> tuple[int | None, float]:
    """``_prune``'s test of change point ``cp`` between its neighbours ``before`` and
    ``after`` (``last``: it is the newest change point): (where it moves to, or None;
    its p-value, 1 where its new level is too short to tell)."""
    left = y[max(before, cp - window):cp]
    right = y[cp:min(after, cp + window)]
    too_short = len(left) < MIN_BEFORE and before == 0 or len(right) < min_after
    # a new level seen on two runs only must agree with itself: two different
    # outliers in a row (two spikes) are not one shift
    if not too_short and len(right) == 2 and abs(right[1] - right[0]) > SPIKE_K * sigma:
        too_short = True
    # a jump as large as a spike, seen on min_after runs only, could be that many
    # spikes in a row: unless those runs agree closely (spikes differ), it needs
    # one run more
    newest_level = after == len(y)
    means = None
    if not too_short and newest_level and len(right) == min_after:
        means = (left.mean(), right.mean())
        if abs(means[1] - means[0]) > SPIKE_K * sigma and np.ptp(right) > 3.0 * sigma:
            too_short = True
    # persistence: each of the first min_after runs is nearer the new level than the
    # old; and while the newest level is short, every run of it (an excursion of two
    # spikes that came back is not a shift)
    if not too_short:
        mean_left, mean_right = means if means is not None else (left.mean(), right.mean())
        mid = (mean_left + mean_right) / 2.0
        side = np.sign(mean_right - mean_left)
        newest = after == len(y) and len(right) <= min_after + 2
        nearer = side * ((right if newest else right[:min_after + 1]) - mid) > 0
        # the estimate of where a step starts is off by one when its first run is
        # still nearer the old level (noise): the step starts a run later, where the
        # runs that follow are all at the new level (without this, a blatant step
        # found once is dropped for good when more runs move the estimate back)
        taken = after == cp + 1 and not last  # cp + 1 is the next change point
        if not newest and len(nearer) > min_after and not nearer[0] and nearer[1:].all() and not taken \
                and min(after, cp + 1 + window) - (cp + 1) >= min_after:
            return cp + 1, 1.0
        too_short = not bool((nearer if newest else nearer[:min_after]).all())
    return None, 1.0 if too_short else _ttest(left, right)


def split_points(
    values: Sequence[float] | np.ndarray,
    *,
    p: float = P_VALUE,
    min_after: int = MIN_AFTER,
    window: int = WINDOW,
) -> list[Split]:
    """Change points of one series (oldest first). NaN values are ignored; spikes are
    set aside (see the module docstring). Indices refer to ``values``."""
    x = np.asarray(values, dtype="float64")
    keep = np.flatnonzero(np.isfinite(x))
    x = x[keep]
    if len(x) < MIN_BEFORE + min_after:
        return []
    y = np.log(x) if (x > 0).all() else x / max(float(np.median(np.abs(x))), 1e-300)
    clean = ~spikes(y)
    keep, y = keep[clean], y[clean]
    if len(y) < MIN_BEFORE + min_after:
        return []
    window = max(int(window), MIN_BEFORE + min_after)
    found: set[int] = set()
    step = max(1, window // 2)
    starts = list(range(0, max(1, len(y) - window + 1), step))
    if starts[-1] + window < len(y):
        starts.append(len(y) - window)
    for start in starts:
        _candidates(y[start:start + window], start, p, min_after, found)
    return [Split(int(keep[s.index]), s.p) for s in _prune(y, sorted(found), p, window, min_after)]


# --- many series at once ----------------------------------------------------------------------
# ``split_points`` costs a few dozen small numpy calls per window of a series; a year of
# nights of 2,000 kernels x 16 metrics is ~800,000 windows, so ``history detect`` spent most
# of its time in Python overhead (issue 22). ``split_points_many`` runs the same steps on
# stacks of equal-length arrays. The answer is the same to the bit: every step computes
# the same float operations (element-wise, cumulative sums, and sums and medians along
# the last axis of a row, which numpy reduces row by row as it reduces a 1-D array), and
# the one step that needs a scalar function (the t-test's p-value) compares |t| with the
# t at the significance level, calling ``t_pvalue`` itself where the two are within 1e-9.

_SEGMENT_CELLS = 250_000  # float64 cells of one (n x n x segments) distance stack: 2 MB, more saves no time
_T_MARGIN = 1e-9  # |t| this close (relative) to the critical t: the exact p-value decides


def split_points_many(
    series: Sequence[Sequence[float] | np.ndarray],
    *,
    p: float = P_VALUE,
    min_after: int = MIN_AFTER,
    window: int = WINDOW,
) -> list[list[Split]]:
    """``split_points`` of each of ``series``, the same answer, with the windows of all of
    them searched together (see the comment above)."""
    if not 0.0 < p < 0.5 or min_after < 0:  # outside what the bulk screen handles: one by one
        return [split_points(s, p=p, min_after=min_after, window=window) for s in series]
    out: list[list[Split]] = [[] for _ in series]
    need = MIN_BEFORE + min_after
    window = max(int(window), need)
    rows: list[tuple[int, np.ndarray, np.ndarray]] = []  # (series, positions kept, clean log values)
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(series):
        by_length.setdefault(len(s), []).append(i)
    for n, members in by_length.items():
        if n < need:
            continue
        matrix = np.asarray([np.asarray(series[i], dtype="float64") for i in members]).reshape(len(members), n)
        finite = np.isfinite(matrix)
        counts = finite.sum(axis=1)
        for count in np.unique(counts):
            if count < need:
                continue
            chosen = counts == count
            x = matrix[chosen][finite[chosen]].reshape(-1, count)
            kept = np.nonzero(finite[chosen])[1].reshape(-1, count)
            y = _scaled_logs(x)
            clean = ~spikes_rows(y)
            for at, i in enumerate(np.asarray(members)[chosen]):
                mask = clean[at]
                if mask.sum() >= need:
                    rows.append((int(i), kept[at][mask], y[at][mask]))
    if not rows:
        return out
    found = _candidates_many([y for _, _, y in rows], p, min_after, window)
    for (i, kept, y), cps in zip(rows, found):
        if cps:
            out[i] = [Split(int(kept[s.index]), s.p) for s in _prune(y, sorted(cps), p, window, min_after)]
    return out


def _scaled_logs(x: np.ndarray) -> np.ndarray:
    """``split_points``' working values of each row: logs, or values over their median
    magnitude for a row with a value <= 0."""
    positive = (x > 0).all(axis=1)
    y = np.empty_like(x)
    if positive.any():
        y[positive] = np.log(x[positive])
    if not positive.all():
        rest = x[~positive]
        y[~positive] = rest / np.maximum(np.median(np.abs(rest), axis=1), 1e-300)[:, None]
    return y


def spikes_rows(y: np.ndarray, k: float = SPIKE_K) -> np.ndarray:
    """``spikes`` of each row of ``y`` (rows of at least 3 values)."""
    mask = np.zeros(y.shape, dtype=bool)
    if y.shape[1] < 3:
        return mask
    sigma = 1.4826 * np.median(np.abs(np.diff(y, axis=1)), axis=1) / math.sqrt(2.0)
    limit = np.maximum(k * sigma, 1e-12 * np.max(np.abs(y), axis=1))[:, None]
    prev, nxt = y[:, 1:-1] - y[:, :-2], y[:, 1:-1] - y[:, 2:]
    same_side = np.sign(prev) == np.sign(nxt)
    jump = np.minimum(np.abs(prev), np.abs(nxt))
    agree = np.abs(y[:, 2:] - y[:, :-2]) * 2.0 < jump
    mask[:, 1:-1] = same_side & agree & (jump > limit) & (prev != 0)
    limit = limit[:, 0]
    mask[:, 0] = ((np.abs(y[:, 0] - y[:, 1]) > limit) & (np.abs(y[:, 1] - y[:, 2]) <= limit)
                  & (np.abs(y[:, 0] - np.median(y[:, 1:6], axis=1)) > limit))
    mask[:, -1] = ((np.abs(y[:, -1] - y[:, -2]) > limit) & (np.abs(y[:, -2] - y[:, -3]) <= limit)
                   & (np.abs(y[:, -1] - np.median(y[:, -6:-1], axis=1)) > limit))
    return mask


def _candidates_many(ys: Sequence[np.ndarray], p: float, min_after: int, window: int) -> list[set[int]]:
    """``_candidates`` over the windows of each of ``ys`` (as ``split_points`` lays them
    out), segment by segment in rounds of equal depth rather than recursively."""
    found: list[set[int]] = [set() for _ in ys]
    longest = max(len(y) for y in ys)
    padded = np.full((len(ys), longest), np.nan)
    for r, y in enumerate(ys):
        padded[r, :len(y)] = y
    step = max(1, window // 2)
    row_l, start_l, size_l = [], [], []
    lengths = np.asarray([len(y) for y in ys])
    for n in np.unique(lengths):
        members = np.flatnonzero(lengths == n)
        starts = list(range(0, max(1, int(n) - window + 1), step))
        if starts[-1] + window < n:
            starts.append(int(n) - window)
        sizes = [min(window, int(n) - s) for s in starts]
        row_l.append(np.repeat(members, len(starts)))
        start_l.append(np.tile(starts, len(members)))
        size_l.append(np.tile(sizes, len(members)))
    rows, starts, sizes = (np.concatenate(v).astype(np.int64) for v in (row_l, start_l, size_l))
    depth = 0
    while len(rows) and depth <= 32:
        keep = sizes >= MIN_BEFORE + min_after
        rows, starts, sizes = rows[keep], starts[keep], sizes[keep]
        next_rows, next_starts, next_sizes = [], [], []
        for n in np.unique(sizes):
            at = np.flatnonzero(sizes == n)
            chunk = max(1, _SEGMENT_CELLS // int((n + 1) * (n + 1)))
            split: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # (values, tau, row, start)
            for lo in range(0, len(at), chunk):
                part = at[lo:lo + chunk]
                r, s = rows[part], starts[part]
                values = padded[r[:, None], s[:, None] + np.arange(n)]
                tau = _best_splits(values, p, min_after)
                hit = np.flatnonzero(tau >= 0)
                if len(hit):
                    split.append((values[hit], tau[hit], r[hit], s[hit]))
            if not split:
                continue
            # the t-tests of all the segments of this length at once (a loop over their cuts each)
            values, tau, r, s = (np.concatenate(v) for v in zip(*split))
            hit = np.flatnonzero(_significant_rows(values, tau, p))
            for row, begin, cut in zip(r[hit].tolist(), s[hit].tolist(), tau[hit].tolist()):
                found[row].add(begin + cut)
            next_rows += [r[hit], r[hit]]
            next_starts += [s[hit], s[hit] + tau[hit]]
            next_sizes += [tau[hit], n - tau[hit]]
        if not next_rows:
            break
        rows, starts, sizes = (np.concatenate(v).astype(np.int64) for v in (next_rows, next_starts, next_sizes))
        depth += 1
    return found


def _best_splits(y: np.ndarray, p: float, min_after: int) -> np.ndarray:
    """``_edivisive_best_rows`` of each row of ``y``, or -1 where whichever split it
    chose would fail ``_significant_rows``' t-test (``_hopeless``): most windows of a
    series are noise, and their search is most of the time of ``split_points_many``.
    The candidates are the same: a window whose split fails gives none either way. A
    constant row (E-divisive's statistic is 0 at every split) takes the first split
    without the search, as ``nanargmax`` takes the first of equal values."""
    tau = np.full(len(y), -1)
    finite = np.isfinite(y).all(axis=1)
    flat = finite & (y == y[:, :1]).all(axis=1)
    tau[flat] = MIN_BEFORE
    searched = np.flatnonzero(~flat & ~_hopeless(y, p, min_after))
    if len(searched):
        tau[searched] = _edivisive_best_rows(y[searched], MIN_BEFORE, min_after)
    return tau


def _hopeless(y: np.ndarray, p: float, min_after: int) -> np.ndarray:
    """Rows of ``y`` (finite) where no split from ``MIN_BEFORE`` to ``min_after`` before
    the end can pass ``_significant_rows``' t-test: at each, an upper bound of its |t|
    is below the critical t. The bound takes the means and sums of squares from prefix
    sums of the values less the row's mean (a few operations a value, where the search
    is a few per pair of values), and widens them by more than the rounding of both
    computations can make them differ (for n values within M of 0 and S the sum of
    squares about the mean: the difference of means by 64 n eps M, a sum of squares by
    64 n eps S + 64 n^3 eps^2 M^2, each several times the error bounds of summing n
    terms); where a side's sum of squares could be 0 (exact quantities: any step is a
    change) it decides nothing."""
    count, n = y.shape
    lo, hi, df = MIN_BEFORE, n - min_after, n - 2
    if hi < lo or df < 1 or count == 0:
        return np.zeros(count, dtype=bool)
    eps = float(np.finfo("float64").eps)
    tau = np.arange(lo, hi + 1)
    na, nb = tau.astype("float64"), (n - tau).astype("float64")
    with np.errstate(all="ignore"):
        centre = y.mean(axis=1, keepdims=True)
        c = y - centre
        s1, s2 = np.cumsum(c, axis=1), np.cumsum(c * c, axis=1)
        a1, a2 = s1[:, tau - 1], s2[:, tau - 1]
        b1, b2 = s1[:, -1:] - a1, s2[:, -1:] - a2
        ss = (a2 - a1 * a1 / na) + (b2 - b1 * b1 / nb)
        size = np.max(np.abs(y), axis=1, keepdims=True) + np.abs(centre)
        low = ss - (64.0 * n * eps * s2[:, -1:] + 64.0 * n ** 3 * eps * eps * size * size)
        diff = np.abs(b1 / nb - a1 / na) + 64.0 * n * eps * size
        t = diff / np.sqrt(np.where(low > 1e-200, low, np.nan) / df * (1.0 / na + 1.0 / nb))
        below = (t < _critical_t(df, p) * (1.0 - 1e-6)).all(axis=1)  # NaN (no bound) is not below
    return below & np.isfinite(y).all(axis=1)


def _edivisive_best_rows(y: np.ndarray, min_before: int, min_after: int) -> np.ndarray:
    """``_edivisive_best`` of each row of ``y``; -1 where it is None. The distance
    matrices are laid out runs x runs x rows, so each cumulative sum runs over whole
    planes of rows at once (the sums are the same, each element added in the same order)."""
    count, n = y.shape
    lo, hi = min_before, n - min_after
    if hi < lo:
        return np.full(count, -1)
    runs = np.ascontiguousarray(y.T)
    cum = runs[:, None, :] - runs[None, :, :]
    np.abs(cum, out=cum)  # cum[i, j, row] = |y_i - y_j| of that row
    np.cumsum(cum, axis=0, out=cum)
    np.cumsum(cum, axis=1, out=cum)  # cum[i, j] = the sum over rows <= i, columns <= j

    def at(i: np.ndarray | int, j: np.ndarray | int) -> np.ndarray:
        """``_edivisive_best``'s cum[i, j] (zero-padded: sums over rows < i, columns < j), rows x taus."""
        return cum[np.asarray(i) - 1, np.asarray(j) - 1].T if np.ndim(i) or np.ndim(j) else cum[i - 1, j - 1][:, None]

    tau = np.arange(lo, hi + 1)
    m, k = tau.astype("float64"), (n - tau).astype("float64")
    zero = np.zeros((count, 1))  # cum[0, j]: the padding row
    between = at(tau, n) - at(tau, tau) - zero + zero  # rows :tau, cols tau:
    within_x = at(tau, tau)
    within_y = at(n, n) - at(tau, n) - at(n, tau) + at(tau, tau)
    with np.errstate(divide="ignore", invalid="ignore"):
        ex = np.where(m > 1, within_x / (m * (m - 1)), 0.0)
        ey = np.where(k > 1, within_y / (k * (k - 1)), 0.0)
        q = (m * k / (m + k)) * (2.0 * between / (m * k) - ex - ey)
    usable = np.isfinite(q).any(axis=1)
    best = np.argmax(np.where(np.isnan(q), -np.inf, q), axis=1)  # nanargmax: the first largest
    return np.where(usable, tau[best], -1)


def _significant_rows(y: np.ndarray, tau: np.ndarray, p: float) -> np.ndarray:
    """Whether ``_ttest(row[:tau], row[tau:]) < p`` for each row and its split."""
    count, n = y.shape
    out = np.zeros(count, dtype=bool)
    df = n - 2
    if df < 1:
        return out
    for cut in np.unique(tau):
        at = np.flatnonzero(tau == cut)
        a, b = y[at, :cut], y[at, cut:]
        na, nb = a.shape[1], b.shape[1]
        if na < 1 or nb < 1:
            continue
        mean_a, mean_b = a.mean(axis=1), b.mean(axis=1)
        diff = mean_b - mean_a
        ss = ((a - mean_a[:, None]) ** 2).sum(axis=1) + ((b - mean_b[:, None]) ** 2).sum(axis=1)
        scale = np.sqrt(np.maximum(ss / df, 0.0) * (1.0 / na + 1.0 / nb))
        noiseless = scale == 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.abs(diff / np.where(noiseless, 1.0, scale))
        # noiseless (exact quantities): any difference is a change, none is none (``_ttest``)
        steps = np.abs(diff) > 1e-12 * np.maximum(1.0, np.abs(mean_a))
        critical = _critical_t(df, p)
        sure = (t > critical * (1.0 + _T_MARGIN)) | np.isposinf(t)
        unsure = ~sure & (t >= critical * (1.0 - _T_MARGIN)) & ~np.isnan(t)
        decided = np.where(noiseless, steps & (p > 0.0), sure)
        for j in np.flatnonzero(unsure & ~noiseless):
            decided[j] = t_pvalue(float(diff[j] / scale[j]), df) < p
        out[at] = decided
    return out


@functools.lru_cache(maxsize=256)
def _critical_t(df: int, p: float) -> float:
    """The |t| whose two-sided p-value (``t_pvalue``) is ``p``, by bisection: p falls as |t| grows."""
    lo, hi = 0.0, 1.0
    while t_pvalue(hi, df) >= p and hi < 1e300:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if t_pvalue(mid, df) >= p:
            lo = mid
        else:
            hi = mid
    return hi


# --- over a series frame --------------------------------------------------------------------

def detect(
    frame: "pd.DataFrame",
    *,
    p: float = P_VALUE,
    min_after: int = MIN_AFTER,
    window: int = WINDOW,
    min_change_pct: float = 0.0,
    relative: bool = False,
) -> list[ChangePoint]:
    """Change points of every series in ``frame`` (``Store.series``: columns KEY, unit,
    run_id, time, commit, value; sorted by series then time), oldest first per series.
    ``min_change_pct``: ignore shifts smaller than this (in %). ``relative``: test each
    kernel relative to its run's run-wide offset and the offset as the series
    ``RUN_WIDE`` (see the module docstring); the medians reported are then of the
    kernel's values divided by the offset (for ``RUN_WIDE``: the offset, a ratio)."""
    if frame is None or not len(frame):
        return []
    if not relative:
        return _detect_in(frame, False, p, min_after, window, min_change_pct)
    out: list[ChangePoint] = []
    # each machine x suite x metric and its run-wide series on its own (not concatenated:
    # a copy of a year of every kernel's values and names), then listed as one frame's
    # would be: by series, each oldest first (the sort is stable)
    for part, wide in _relative_parts(frame, window=window, p=p, min_after=min_after, min_change_pct=min_change_pct):
        out.extend(_detect_in(part, True, p, min_after, window, min_change_pct))
        out.extend(wide)
    out.sort(key=lambda cp: (cp.machine, cp.suite, cp.kernel, cp.metric))
    return out


def detect_relative_to(frame: "pd.DataFrame", offsets: "Mapping[tuple[str, str, str], RunWide]", *,
                       p: float = P_VALUE, min_after: int = MIN_AFTER, window: int = WINDOW,
                       min_change_pct: float = 0.0, index: "PartIndex | None" = None) -> list[ChangePoint]:
    """``detect(frame, relative=True)``'s change points of the kernels of ``frame``, which
    may hold some of the kernels of a machine x suite x metric only: each value divided by
    the run-wide offsets ``offsets`` found beforehand over the whole slice (``run_wide``);
    the offset series is not in them (``run_wide`` finds its change points); ``index``: the
    part's ``PartIndex``, where the caller has it."""
    if frame is None or not len(frame):
        return []
    return _detect_in(frame.assign(value=relative_values(frame, offsets, index)), True, p, min_after, window,
                      min_change_pct)


def _detect_in(frame: "pd.DataFrame", relative: bool, p: float, min_after: int, window: int,
               min_change_pct: float) -> list[ChangePoint]:
    """``detect`` over ``frame`` (``relative``: values already divided by their run-wide
    offsets, each series' rows taken by time)."""
    out: list[ChangePoint] = []
    if not len(frame):
        return out
    # the series in the order groupby(sort=True) gives them, each its rows in frame order,
    # found as positions (a sub-frame per series cost more than testing it)
    number = np.asarray(frame.groupby(list(KEY), sort=True, observed=True).ngroup(), dtype="float64")
    rows = np.flatnonzero(np.isfinite(number))  # a row with a missing name is in no series
    if relative:  # each series' rows by time, ties in frame order (the offsets leave them as they came)
        rows = rows[np.lexsort((_time_order(frame["time"])[rows], number[rows]))]
    else:
        rows = rows[np.argsort(number[rows], kind="stable")]
    bounds = np.flatnonzero(np.diff(number[rows])) + 1
    members = np.split(rows, bounds) if len(rows) else []
    value = frame["value"].to_numpy(dtype="float64")
    found = split_points_many([value[at] for at in members], p=p, min_after=min_after, window=window)
    seconds = _unix_seconds(frame["time"])
    changed = [n for n, splits in enumerate(found) if splits]
    # the names of the series that changed only (every row's, as text objects, was a copy of the part)
    keys = frame[list(KEY)].iloc[[int(members[n][0]) for n in changed]].itertuples(index=False, name=None)
    for n, key in zip(changed, keys):
        at = members[n]
        out.extend(_records(dict(zip(KEY, key)), frame, at, value[at], seconds[at], found[n], window, min_change_pct))
    return out


def run_offsets(logs: np.ndarray, window: int = WINDOW, cuts: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """Run-wide offset of each run from a kernels x runs matrix of log values (NaN where
    a kernel has no value): the median over kernels of each kernel's deviation from its
    own level, the median of its last ``window`` runs. ``cuts``: per kernel, the runs
    where its own change points start; each stretch between them is then centred on
    its own median, so a kernel that changed votes as if it had not. NaN for a run with
    fewer than ``MIN_KERNELS`` kernels. The median over kernels keeps a kernel that
    really changed from moving the offset of the others (one vote of many)."""
    logs = np.asarray(logs, dtype="float64")
    out = np.full(logs.shape[1] if logs.ndim == 2 else 0, np.nan)
    if logs.ndim != 2 or logs.shape[1] == 0:
        return out
    finite = np.isfinite(logs)
    window = max(1, int(window))
    recent = logs[:, -window:]
    has = np.isfinite(recent).any(axis=1)
    level = np.zeros(logs.shape)
    level[has] = np.nanmedian(recent[has], axis=1)[:, None]
    bounds_of = [[0, *sorted(int(c) for c in kernel_cuts if 0 < c < logs.shape[1]), logs.shape[1]]
                 for kernel_cuts in (cuts or ())]
    # a kernel without a change point is one stretch, its last ``window`` runs: where they
    # are all finite, their medians at once (a median along rows is each row's own median:
    # the same floats as one kernel at a time, which cost most of the offsets' time)
    uncut = np.array([len(bounds) == 2 for bounds in bounds_of], dtype=bool)
    together = np.flatnonzero(uncut & np.isfinite(recent[:len(uncut)]).all(axis=1))
    if len(together):
        level[together] = np.median(recent[together], axis=1)[:, None]
    alone = np.ones(len(bounds_of), dtype=bool)
    alone[together] = False
    for k in np.flatnonzero(alone):
        bounds = bounds_of[k]
        for a, b in zip(bounds[:-1], bounds[1:]):
            stretch = logs[k, max(a, b - window):b]
            if np.isfinite(stretch).any():
                level[k, a:b] = np.nanmedian(stretch)
    dev = np.where(finite, logs - level, np.nan)
    enough = (finite & has[:, None]).sum(axis=0) >= MIN_KERNELS
    if enough.any():
        out[enough] = _column_medians(dev[:, enough])
    return out


def _column_medians(dev: np.ndarray) -> np.ndarray:
    """``np.nanmedian(dev, axis=0)``: the columns without a NaN at once (a median along
    an axis partitions each column as its own 1-D median does, then averages the same
    middle pair: the same floats; ``nanmedian`` of a tall matrix went column by column
    through ``apply_along_axis``, a Python call per run), the others as ``nanmedian``."""
    out = np.empty(dev.shape[1])
    whole = ~np.isnan(dev).any(axis=0)
    if whole.any():
        out[whole] = np.median(dev[:, whole], axis=0)
    if not whole.all():
        out[~whole] = np.nanmedian(dev[:, ~whole], axis=0)
    return out


def relative_logs(logs: np.ndarray, window: int = WINDOW, p: float = P_VALUE,
                  min_after: int = MIN_AFTER) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, kernels x runs log values less their run's offset; a kernel whose run-to-
    run spread is smaller without it keeps its values). Two passes: the
    offsets of ``run_offsets``; then each kernel's own change points in its values less
    those offsets, and the offsets again with each kernel centred stretch by stretch
    (without this, a quarter of the kernels regressing moves the median of all and
    looks like a small run-wide change). A run without an offset keeps its values."""
    offsets, adjusted, _ = _relative_logs(logs, window, p, min_after)
    return offsets, adjusted


def _relative_logs(logs: np.ndarray, window: int, p: float,
                   min_after: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``relative_logs``, and which kernels keep their values (quieter as they are)."""
    logs = np.asarray(logs, dtype="float64")
    first = run_offsets(logs, window)
    adjusted = logs - np.nan_to_num(first)[None, :]
    cuts = [[s.index for s in splits]
            for splits in split_points_many([np.exp(row) for row in adjusted], p=p, min_after=min_after, window=window)]
    offsets = run_offsets(logs, window, cuts)
    adjusted = logs - np.nan_to_num(offsets)[None, :]
    # a kernel whose values are quieter as they are (its drift is its own, not the run's)
    # is tested as it is: dividing by the offset would only add the offset's noise
    quieter = _robust_sigmas(logs) <= _robust_sigmas(adjusted)
    adjusted[quieter] = logs[quieter]
    return offsets, adjusted, quieter


def broad(logs: np.ndarray, splits: Sequence[Split], window: int = WINDOW) -> list[Split]:
    """The change points of a run-wide offset series that most kernels share: at each,
    each kernel's mean log value after it (up to the next) minus before it (at most
    ``window`` runs, back to the previous) moves the way most do in at least ``BROAD``
    of the kernels with values on both sides. A driver or clock change moves every
    kernel; a median over kernels also moves a little when a quarter of them change
    on different nights, and where the kernels drift on their own that small move is
    all too significant in an offset averaged over many of them."""
    logs = np.asarray(logs, dtype="float64")
    bounds = [0, *[s.index for s in splits], logs.shape[1]]
    kept = []
    for i, split in enumerate(splits):
        before = logs[:, max(bounds[i], split.index - window):split.index]
        after = logs[:, split.index:bounds[i + 2]]
        both = np.isfinite(before).any(axis=1) & np.isfinite(after).any(axis=1)
        if not both.any():
            continue
        diff = np.nanmean(after[both], axis=1) - np.nanmean(before[both], axis=1)
        if (np.sign(diff) == np.sign(np.median(diff))).mean() >= BROAD:
            kept.append(split)
    return kept


@dataclass(frozen=True, eq=False)
class RunWide:
    """The run-wide offsets of one machine x suite x metric (``detect(relative=True)``):
    what its kernels' values are divided by, kept so that a part of its kernels (``history
    detect --relative`` reads whole kernels, every metric) is divided as the whole slice
    would be (``relative_values``) without holding the slice."""

    kernels: "pd.Index"  # the kernels with a positive value, sorted: the rows of the log matrix
    runs: "pd.Index"  # the run ids with a value, by time: its columns
    offsets: np.ndarray  # each run's offset, a log (NaN: fewer than MIN_KERNELS kernels in it)
    quieter: np.ndarray  # each kernel: tested as it is (its values are quieter than divided)

    def rows_of(self, names: Sequence[str]) -> np.ndarray:
        """The row of each kernel of ``names`` (-1: none), as ``kernels.get_indexer``."""
        return np.fromiter((self._places[0].get(name, -1) for name in names), dtype=np.int64, count=len(names))

    def columns_of(self, run_ids: Sequence[str]) -> np.ndarray:
        """The column of each run id of ``run_ids`` (-1: none), as ``runs.get_indexer``."""
        return np.fromiter((self._places[1].get(r, -1) for r in run_ids), dtype=np.int64, count=len(run_ids))

    @functools.cached_property
    def _places(self) -> tuple[dict[str, int], dict[str, int]]:
        """Each kernel's row and each run's column (unique names), found once: every part of
        a store looks up its own few, and an Index lookup cost more than dividing them."""
        return ({str(k): i for i, k in enumerate(self.kernels)}, {str(r): i for i, r in enumerate(self.runs)})

    def adjusted(self, value: np.ndarray, kernel: np.ndarray, run: np.ndarray) -> np.ndarray:
        """``value`` divided by its run's offset: ``kernel`` and ``run`` are each value's row
        and column (-1: none). A value <= 0 or missing, of a run without an offset (divided
        by 1), or of a quieter kernel, keeps its value, as ``_relative_parts`` gives them
        (the same float operations: the log, less the offset, its exp)."""
        out = np.array(value, dtype="float64")
        with np.errstate(invalid="ignore"):
            ok = np.flatnonzero((kernel >= 0) & (run >= 0) & np.isfinite(out) & (out > 0))
        log = np.log(out[ok])
        shifted = np.where(self.quieter[kernel[ok]], log, log - np.nan_to_num(self.offsets)[run[ok]])
        with np.errstate(over="ignore"):
            out[ok] = np.where(np.isfinite(shifted), np.exp(shifted), out[ok])
        return out


def run_wide(kernels: "pd.Index", kernel: np.ndarray, runs: "pd.DataFrame", run: np.ndarray, value: np.ndarray, *,
             key: tuple[str, str, str], unit: "Callable[[int], str]", window: int = WINDOW, p: float = P_VALUE,
             min_after: int = MIN_AFTER, min_change_pct: float = 0.0) -> tuple[RunWide, list[ChangePoint]]:
    """The run-wide offsets of the values of one machine x suite x metric ``key``: each
    value's ``kernel`` (a row of ``kernels``, sorted; -1: none) and ``run`` (a row of
    ``runs``: run_id, time and, where known, commit; in time order, -1: none), ``value``.
    Also the change points of the offset series (``RUN_WIDE``) that most kernels share
    (``broad``); ``unit(r)``: the unit of run ``r``'s first value."""
    import pandas as pd

    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.where(value > 0, np.log(np.where(value > 0, value, 1.0)), np.nan)
    # the kernels x runs matrix of logs by codes (a pivot table and its stacked lookup held
    # several copies of a year of every kernel's names): kernels sorted, each cell its
    # last finite log, a kernel without one left out, the runs in time order
    named = (kernel >= 0) & (run >= 0)  # a missing name is in no cell (as in a pivot table)
    full = np.full((len(kernels), len(runs)), np.nan)
    finite = np.isfinite(log) & named
    full[kernel[finite], run[finite]] = log[finite]
    kept = np.isfinite(full).any(axis=1)
    logs = full[kept]
    offsets, _, quieter = _relative_logs(logs, window, p, min_after)
    wide = RunWide(kernels[kept], pd.Index(runs["run_id"]), offsets, quieter)
    # the offset series: one value per run with an offset, in time order (ties as they came)
    ratio = np.exp(offsets)
    at = np.flatnonzero(np.isfinite(ratio))
    splits = split_points_many([ratio[at]], p=p, min_after=min_after, window=window)[0] if len(at) else []
    # kept where most kernels moved with it (the kernels' own logs, not less the offsets)
    splits = broad(logs[:, at], splits, window) if splits else []
    if not splits:
        return wide, []
    # the unit stays the metric's, so the better direction is the metric's; the values are ratios
    frame = runs.iloc[at].assign(unit=unit(int(at[0])))
    name = {"machine": key[0], "suite": key[1], "kernel": RUN_WIDE, "metric": key[2]}
    return wide, _records(name, frame, np.arange(len(at)), ratio[at], _unix_seconds(frame["time"]), splits,
                                    window, min_change_pct)


def relative_values(frame: "pd.DataFrame", offsets: "Mapping[tuple[str, str, str], RunWide]",
                    index: "PartIndex | None" = None) -> np.ndarray:
    """The values of ``frame`` divided by their run-wide offsets, where its machine x suite
    x metric has them (``offsets``: each slice's ``run_wide``), as the whole slice's
    ``detect(relative=True)`` divides them. The rows of each slice are its series' rows
    (``index``: where they lie, ``PartIndex.of(frame)`` when not given: ``scan`` has it
    already; a groupby over the part's names was half of this), the kernels and run ids
    looked up once per slice; a row with a missing name is in no series and keeps its value."""
    value = frame["value"].to_numpy(dtype="float64", copy=True)
    if not offsets or not len(frame):
        return value
    if index is None:
        from perfcheck.history.partindex import PartIndex

        index = PartIndex.of(frame)
    chosen: dict[tuple[str, str, str], list[int]] = {}  # the series of each slice with offsets
    for n, (machine, suite, _, metric) in enumerate(index.series.keys):
        if (machine, suite, metric) in offsets:
            chosen.setdefault((machine, suite, metric), []).append(n)
    sizes = index.series.sizes()
    for key, numbers in chosen.items():
        wide = offsets[key]
        rows = np.concatenate([index.series.at(n) for n in numbers])
        kernel = np.repeat(wide.rows_of([index.series.keys[n][2] for n in numbers]), sizes[numbers])
        # a run code of -1 (a missing run id) takes the -1 appended: no column
        run = np.append(wide.columns_of(index.run_names), -1)[index.run_code[rows]]
        value[rows] = wide.adjusted(value[rows], kernel, run)
    return value


def _relative_parts(frame: "pd.DataFrame", *, window: int, p: float, min_after: int,
                    min_change_pct: float) -> "Iterator[tuple[pd.DataFrame, list[ChangePoint]]]":
    """Each machine x suite x metric of ``frame`` with its values divided by its run-wide
    offsets (``run_wide``; a group of fewer than ``MIN_KERNELS`` kernels as it is), and
    the change points of its offset series. Not sorted (a copy of every value): ``detect``
    takes each series' rows by time."""
    import pandas as pd

    group_key = ["machine", "suite", "metric"]
    grouped = frame.groupby(group_key, sort=True, observed=True)
    # one machine x suite x metric: the frame itself, not a copy of it
    whole = grouped.ngroups == 1 and not frame[group_key].isna().to_numpy().any()
    for _, group in [(None, frame)] if whole else grouped:
        if len(group["kernel"].unique()) < MIN_KERNELS:
            yield group, []
            continue
        runs = group.drop_duplicates("run_id").sort_values("time")
        kernel_code, kernels = pd.factorize(group["kernel"], sort=True)
        run_at = pd.Index(runs["run_id"]).get_indexer(group["run_id"])
        value = group["value"].to_numpy(dtype="float64")
        first = group[["machine", "suite", "metric"]].iloc[0]
        wide, found = run_wide(
            pd.Index(kernels), kernel_code, runs[[c for c in ("run_id", "time", "commit") if c in runs]], run_at, value,
            key=(str(first["machine"]), str(first["suite"]), str(first["metric"])),
            unit=lambda r: str(runs["unit"].iloc[r]) if "unit" in runs else "", window=window, p=p,
            min_after=min_after, min_change_pct=min_change_pct)
        # a code of -1 (a missing name) takes the -1 appended: no row
        adjusted = wide.adjusted(value, np.append(wide.kernels.get_indexer(kernels), -1)[kernel_code], run_at)
        yield group.assign(value=adjusted), found


def levels(values: np.ndarray, splits: Sequence[Split], window: int = WINDOW) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each split, the finite values before it (at most ``window``, back to the
    previous split) and after it (up to the next split)."""
    values = np.asarray(values, dtype="float64")
    bounds = [0, *[s.index for s in splits], len(values)]
    out = []
    for i, split in enumerate(splits):
        before = values[max(bounds[i], split.index - window):split.index]
        after = values[split.index:bounds[i + 2]]
        out.append((before[np.isfinite(before)], after[np.isfinite(after)]))
    return out


def _records(key: dict, frame: "pd.DataFrame", at: np.ndarray, values: np.ndarray, seconds: np.ndarray,
             splits: list[Split], window: int, min_change_pct: float) -> list[ChangePoint]:
    """The change points of one series: its rows ``at`` of ``frame``, their ``values``
    and times in Unix ``seconds``."""
    unit = str(frame["unit"].iloc[at[0]]) if "unit" in frame else ""
    direction_better = better(key["metric"], unit)
    records = []
    for split, (before_vals, after_vals) in zip(splits, levels(values, splits, window)):
        before, after = float(np.median(before_vals)), float(np.median(after_vals))
        change = (after / before - 1.0) * 100.0 if before != 0 else math.copysign(math.inf, after)
        if abs(change) < min_change_pct:
            continue
        worse = change > 0 if direction_better == LOWER else change < 0
        row = int(at[split.index])
        commit = frame["commit"].iloc[row] if "commit" in frame else None
        records.append(ChangePoint(
            **key, unit=unit, run_id=str(frame["run_id"].iloc[row]),
            commit=None if commit is None or (isinstance(commit, float) and math.isnan(commit)) else str(commit),
            time=float(seconds[split.index]), index=int(split.index), before=before, after=after,
            change_pct=float(change), direction=REGRESSION if worse else IMPROVEMENT, p=float(split.p),
            runs_before=len(before_vals), runs_after=len(after_vals),
        ))
    return records


def _time_order(times: "pd.Series") -> np.ndarray:
    """Numbers in the order of a time column (timestamps of any resolution, or floats),
    missing ones last, as sorting the column puts them."""
    import pandas as pd

    if isinstance(times.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_any_dtype(times):
        stamps = pd.to_datetime(times, utc=True)
        order = stamps.array.asi8.copy()
        order[stamps.isna().to_numpy()] = np.iinfo(np.int64).max
        return order
    return times.to_numpy(dtype="float64")


def _unix_seconds(times: "pd.Series") -> np.ndarray:
    """Unix seconds of a timestamp column (any resolution) or of a float column."""
    import pandas as pd

    if isinstance(times.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_any_dtype(times):
        stamps = pd.to_datetime(times, utc=True)
        return ((stamps - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)).to_numpy(dtype="float64")
    return times.to_numpy(dtype="float64")


def recent_in(points: Sequence[ChangePoint], size: int, last: int = 3) -> list[ChangePoint]:
    """``recent_regressions`` of the change points of one series of ``size`` runs."""
    return [cp for cp in points if _recent(cp, size, last)]


def _recent(cp: ChangePoint, size: int, last: int) -> bool:
    return cp.regression and cp.index >= size - last


def recent_regressions(points: Sequence[ChangePoint], frame: "pd.DataFrame", last: int = 3) -> list[ChangePoint]:
    """Regression change points that start in the last ``last`` runs of their series."""
    if not points:
        return []
    sizes = frame.groupby(list(KEY), sort=False, observed=True).size().to_dict()
    # the run-wide series (relative=True) has one value per run of its machine x suite x metric
    runs = frame.groupby(["machine", "suite", "metric"], sort=False, observed=True)["run_id"].nunique().to_dict()

    def size(cp: ChangePoint) -> int:
        if cp.kernel == RUN_WIDE and (cp.machine, cp.suite, cp.kernel, cp.metric) not in sizes:
            return int(runs.get((cp.machine, cp.suite, cp.metric), 0))
        return int(sizes.get((cp.machine, cp.suite, cp.kernel, cp.metric), 0))

    return [cp for cp in points if _recent(cp, size(cp), last)]
