"""Why a kernel changed: a one-line diagnosis from what else moved between two
levels of the same kernel.

Given a kernel's values before and after a change (per metric, one value per run
on each side: the runs around a change point in the history store, or the stored
baseline against this run), ``diagnose`` names the quantities that moved beyond
their own noise, largest effect first, grouped the way a performance engineer reads
them::

    duration +30.1%: occupancy 40.0% -> 20.0% (limiter vgpr -> lds; lds_per_workgroup 0 B -> 24 KiB,
    vgpr 64 -> 52); hbm_bytes unchanged; hbm_bw 85.0% -> 65.0% of peak

* launch resources (VGPRs, AGPRs, SGPRs, registers, LDS/shared memory, scratch,
  workgroup and grid size) under the occupancy they set, with the limiter; alone
  when the occupancy stayed;
* theoretical and achieved occupancy;
* bytes per memory level, FLOPs, instructions, calls per run; the roofline bound
  and binding roof (when labels are given);
* the consequence a reader checks first: the main-memory bandwidth as % of peak;
* "no counter moved: time only (clocks, placement, contention?)" when nothing
  but timings moved: a kernel that does the same work with the same resources and
  runs slower lost its time outside the kernel's code;
* "whole run moved" when the caller says the run-wide series changed at the same
  run (every kernel moved: a driver, a clock policy, another node).

Noise (why these rules): with several runs on a side, a metric moved when its
change is larger than ``NOISE_K`` times its run-to-run spread (robust: 1.4826 x MAD
of the log values, pooled over both sides) and larger than ``MIN_CHANGE``;
with one value per side the spread is what the caller knows (``noise``: the
within-run spread of the durations for timing-derived quantities), else only
``MIN_CHANGE`` applies. Launch resources and call counts are exact integers set by
the compiler and the application: any change is a change.

The limiter, the roofline bound and the binding roof are labels, which the history
store and the baseline files do not keep (they keep numbers); they are derived from
the numbers they do keep: the limiter from the launch resources and the arch
(``arch``) by the occupancy rules (``perfcheck.arch.occupancy``), the same ones that
computed it when the run was analysed; the binding roof from each level's intensity,
bandwidth and % of its ceiling against ``attainable`` (``roof_labels``).

This module sits below the baselines, the checks and the history (see
``tests/test_layering.py``) so that all of them can say why.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from perfcheck.schema import metric_unit
from perfcheck.units import format_value

NOISE_K = 3.0  # a change this many run-to-run sigmas away is not noise (3 sigma: ~0.3% by chance)
MIN_CHANGE = 0.02  # relative: counters read through sampled hardware (FETCH_SIZE) wobble by about 1%
TIME_ONLY = "no counter moved: time only (clocks, placement, contention?)"
WHOLE_RUN_KERNELS = 3  # fewer kernels all moving at once: a shared cause and a coincidence look alike
NOTHING_ELSE = "nothing else moved"  # a count (bytes, instructions) changed alone

# Launch resources, in the order a reader looks for them: they set the occupancy.
RESOURCES = ("vgpr", "agpr", "sgpr", "registers", "lds_per_workgroup", "scratch_per_thread", "workgroup_size",
             "grid_size")
OCCUPANCY = ("occupancy_pct", "achieved_occupancy_pct")
WORK = ("flops", "instructions", "calls")
# Label columns of the kernel table (``perfcheck.metrics``): the occupancy limiter,
# the roofline bound (memory | compute) and the roof that binds.
LABELS = ("occupancy_limiter", "bound", "roofline_ceiling")
# Exact by construction: any change counts.
_EXACT = frozenset(RESOURCES) | {"calls", "steps"}
# The bandwidth a reader checks first, as % of peak where known, else as a rate.
_CONTEXT = (("hbm_bw_pct", "hbm_bw"), ("mem_bw_pct", "mem_bw"))
_NAMES = {"occupancy_pct": "occupancy", "achieved_occupancy_pct": "achieved occupancy",
          "roofline_ceiling": "binding roof", "bound": "bound"}


@dataclass(frozen=True)
class Move:
    """One quantity that moved: its medians before and after (base units) or labels."""

    metric: str
    before: float | str
    after: float | str
    unit: str = ""

    @property
    def change_pct(self) -> float | None:
        if isinstance(self.before, str) or isinstance(self.after, str) or not self.before:
            return None
        return (float(self.after) / float(self.before) - 1.0) * 100.0

    @property
    def effect(self) -> float:
        """Size of the move for ordering: |log ratio| (a label change counts as a doubling)."""
        if isinstance(self.before, str) or isinstance(self.after, str):
            return math.log(2.0)
        b, a = float(self.before), float(self.after)
        if b > 0 and a > 0:
            return abs(math.log(a / b))
        return math.inf if a != b else 0.0

    def text(self) -> str:
        name = _NAMES.get(self.metric, self.metric)
        if isinstance(self.before, str) or isinstance(self.after, str):
            return f"{name} {self.before} -> {self.after}"
        return f"{name} {format_value(float(self.before), self.unit)} -> {format_value(float(self.after), self.unit)}"

    def as_dict(self) -> dict[str, object]:
        return {"metric": self.metric, "before": self.before, "after": self.after, "unit": self.unit,
                "change_pct": self.change_pct}


@dataclass(frozen=True)
class Diagnosis:
    """What moved with a kernel's change; ``text()`` is the one line."""

    subject: str  # the metric whose change is explained (``duration``)
    change_pct: float | None  # its change, in %
    moved: tuple[Move, ...]  # the quantities named (causes, then the bandwidth), largest effect first
    items: tuple[str, ...]  # the line's parts, in order
    time_only: bool  # nothing but timings moved (for a count as subject: nothing else moved)
    whole_run_pct: float | None = None  # the run-wide series' change at the same run, when it moved
    timeline: bool = False  # a timeline row's diagnosis (``_timeline``): the whole run's move is named last

    def reason(self) -> str:
        """The line without its subject: where the subject's change is already shown."""
        return "; ".join(self.items)

    def text(self) -> str:
        head = self.subject + (f" {self.change_pct:+.1f}%" if self.change_pct is not None else "")
        return f"{head}: {self.reason()}"

    def as_dict(self) -> dict[str, object]:
        return {"text": self.text(), "subject": self.subject, "change_pct": self.change_pct,
                "moved": [m.as_dict() for m in self.moved], "time_only": self.time_only,
                "whole_run_pct": self.whole_run_pct}


def whole_run(changes_pct: Sequence[float]) -> float | None:
    """The run's own change when every kernel of it (at least ``WHOLE_RUN_KERNELS``)
    changed the same way by more than ``MIN_CHANGE``: their median change, in %; else
    None. Most but not all is a change several kernels share, not the run's: the
    stencil sprint's four kernels moved, the reduction beside them did not."""
    x = np.asarray(changes_pct, dtype="float64")
    if len(x) < WHOLE_RUN_KERNELS or not np.isfinite(x).all():
        return None
    moved_all = (np.abs(x) > 100.0 * MIN_CHANGE).all() and (np.all(x > 0) or np.all(x < 0))
    return float(np.median(x)) if moved_all else None


def timed(metric: str) -> bool:
    """A duration or a quantity divided by one (a rate, its % of a peak, the roofline %):
    what changes when only the time does."""
    base = metric[: -len("_pct")] if metric.endswith("_pct") else metric
    return (metric.startswith("duration") or base in ("gips", "roofline") or metric_unit(base).endswith("/s"))


def _finite(values: Iterable[float] | float | None) -> np.ndarray:
    if values is None:
        return np.empty(0)
    x = np.atleast_1d(np.asarray(values, dtype="float64"))
    return x[np.isfinite(x)]


def _spread(x: np.ndarray) -> float | None:
    """Robust relative spread of one side (1.4826 x MAD of log values); None under two runs."""
    if len(x) < 2 or not (x > 0).all():
        return None
    logs = np.log(x)
    return float(1.4826 * np.median(np.abs(logs - np.median(logs))))


def moved(metric: str, before: Sequence[float] | float, after: Sequence[float] | float,
          noise: float | None = None) -> Move | None:
    """The move of one metric, or None when it stayed within its noise (see the module
    docstring). ``noise``: a relative run-to-run sigma known from elsewhere."""
    b_stats, a_stats = _summaries([{metric: before}, {metric: after}])
    return _moved(metric, b_stats.get(metric), a_stats.get(metric), noise)


Summary = tuple[float, "float | None"]  # the median of a side's finite values, and their spread (``_spread``)


def _summaries(sides: Sequence[Mapping[str, Sequence[float] | float]]) -> list[dict[str, Summary]]:
    """Each side's metric -> (median, ``_spread``) of its finite values, in the side's
    order, leaving out a metric without one: what ``moved`` needs, computed for many
    sides at once in stacks of equal-length values (history detect diagnoses thousands
    of findings of 16 metrics each; numpy's median of a row of a stack is that of the
    row alone, and the logs are taken value by value). Every side's values are checked
    for being finite in one array, not a cell at a time."""
    cells = [(i, metric, values) for i, side in enumerate(sides) for metric, values in side.items()]
    arrays = [np.empty(0) if values is None else np.atleast_1d(np.asarray(values, dtype="float64")).ravel()
              for _, _, values in cells]
    out: list[dict[str, Summary]] = [{} for _ in sides]
    if not cells:
        return out
    flat = np.concatenate(arrays)
    finite = np.isfinite(flat)
    kept = np.concatenate([[0], np.cumsum(finite)])  # finite values before each position
    sizes = np.asarray([len(x) for x in arrays], dtype=np.int64)
    ends = np.cumsum(sizes)
    start = kept[ends - sizes]  # each cell's first finite value in ``values``
    count = kept[ends] - start
    values = flat[finite]
    found: list[Summary | None] = [None] * len(cells)
    for length in np.unique(count[count > 0]).tolist():
        members = np.flatnonzero(count == length)
        stack = values[start[members][:, None] + np.arange(length)]
        median = np.median(stack, axis=1)
        spread = np.full(len(members), np.nan)
        positive = (stack > 0).all(axis=1) & (length >= 2)
        if positive.any():
            logs = np.log(stack[positive])
            spread[positive] = 1.4826 * np.median(np.abs(logs - np.median(logs, axis=1)[:, None]), axis=1)
        for j, n in enumerate(members.tolist()):
            found[n] = (float(median[j]), float(spread[j]) if positive[j] else None)
    for (i, metric, _), summary in zip(cells, found):
        if summary is not None:
            out[i][metric] = summary
    return out


def _moved(metric: str, before: Summary | None, after: Summary | None, noise: float | None) -> Move | None:
    """``moved`` from the two sides' summaries (None: no finite value)."""
    if before is None or after is None:
        return None
    (b, b_spread), (a, a_spread) = before, after
    move = Move(metric, b, a, metric_unit(metric))
    if metric in _EXACT:
        return move if a != b else None
    spreads = [s for s in (b_spread, a_spread) if s is not None]
    sigma = max(float(np.mean(spreads)) if spreads else 0.0, noise or 0.0)
    if b > 0 and a > 0:
        size = abs(math.log(a / b))
    else:
        size = abs(a - b) / max(abs(b), abs(a), 1e-300)
    return move if size > max(NOISE_K * sigma, MIN_CHANGE) else None


def limiter(resources: Mapping[str, float], arch: str | None) -> str | None:
    """The occupancy limiter of these launch resources on ``arch`` (an arch id or
    device name), by the occupancy rules; None when the arch or a resource is unknown."""
    if not arch:
        return None
    return _limiter(arch, tuple(sorted((k, float(resources[k])) for k in RESOURCES if k in resources)))


def limiters(resources: Sequence[Mapping[str, float]], arch: str | None) -> list[str | None]:
    """``limiter`` of each of ``resources`` on ``arch``, from one occupancy table: the
    history's diagnoses derive one for each side of each finding, and their medians
    differ (an occupancy table per side was a quarter of ``history detect``). The table
    is row by row, and a resource a side lacks is NaN there, as a column it lacks is."""
    if not arch or not resources:
        return [None] * len(resources)
    import pandas as pd

    from perfcheck.arch import lookup
    from perfcheck.arch.occupancy import occupancy_table
    from perfcheck.errors import UsageError

    try:
        target = lookup(arch)
    except UsageError:
        return [None] * len(resources)
    rows = [{k: float(r[k]) for k in RESOURCES if k in r} for r in resources]
    labels = occupancy_table(target.arch, pd.DataFrame(rows, index=range(len(rows)), dtype="float64"))
    return [None if pd.isna(label) else str(label) for label in labels["occupancy_limiter"]]


@functools.lru_cache(maxsize=1024)
def _limiter(arch: str, resources: tuple[tuple[str, float], ...]) -> str | None:
    """``limiter``, once per arch and resources (a suite's failing checks share them)."""
    import pandas as pd

    from perfcheck.arch import lookup
    from perfcheck.arch.occupancy import occupancy_table
    from perfcheck.errors import UsageError

    try:
        target = lookup(arch)
    except UsageError:
        return None
    label = occupancy_table(target.arch, pd.DataFrame([dict(resources)]))["occupancy_limiter"].iloc[0]
    return None if pd.isna(label) else str(label)


def roof_labels(values: Mapping[str, float]) -> dict[str, str]:
    """``bound`` and ``roofline_ceiling`` of a kernel from its numbers alone, for a side
    whose labels were not kept (the history store keeps numbers): each memory level's
    roof is its intensity times its ceiling, and the ceiling is the level's bandwidth
    over its % of it; the level whose roof is the ``attainable`` rate binds
    (``perfcheck.metrics.roofline`` lowers the flat roof by every sloped one), else
    the flat compute roof does. Empty when ``attainable`` is not known."""
    from perfcheck.metrics.roofline import LEVELS

    attainable = values.get("attainable")
    if attainable is None or not math.isfinite(attainable) or attainable <= 0:
        return {}
    for _, bw, ai in LEVELS:
        intensity, rate, pct = values.get(ai), values.get(bw), values.get(f"{bw}_pct")
        if None in (intensity, rate, pct) or not pct:
            continue
        roof = float(intensity) * float(rate) * 100.0 / float(pct)
        if math.isfinite(roof) and abs(roof / attainable - 1.0) < 1e-6:
            return {"bound": "memory", "roofline_ceiling": bw}
    return {"bound": "compute", "roofline_ceiling": "compute"}


def _medians(values: Mapping[str, Sequence[float] | float]) -> dict[str, float]:
    out = {}
    for metric, vals in values.items():
        x = _finite(vals)
        if len(x):
            out[metric] = float(np.median(x))
    return out


def diagnose(
    before: Mapping[str, Sequence[float] | float],
    after: Mapping[str, Sequence[float] | float],
    *,
    subject: str = "duration",
    labels_before: Mapping[str, str] | None = None,
    labels_after: Mapping[str, str] | None = None,
    noise: Mapping[str, float] | None = None,
    arch: str | None = None,
    whole_run_pct: float | None = None,
) -> Diagnosis:
    """Why ``subject`` changed from ``before`` to ``after`` (metric -> values, one per
    run, base units). ``labels_*``: text labels (``LABELS``) of each side where known;
    a missing limiter is derived from the resources when ``arch`` is given. ``noise``:
    metric -> relative sigma for sides of one value. ``whole_run_pct``: the change of
    the run-wide series at the same run, when it changed."""
    return with_whole_run(_explain(before, after, subject=subject, labels_before=labels_before,
                                   labels_after=labels_after, noise=noise,
                                   derive=lambda side, medians: limiter(medians, arch)), whole_run_pct)


@dataclass(frozen=True)
class Sides:
    """One change to explain (``diagnose_many``): the kernel's values before and after it."""

    before: Mapping[str, Sequence[float] | float]
    after: Mapping[str, Sequence[float] | float]
    subject: str = "duration"
    arch: str | None = None
    # as ``diagnose`` takes them (a check's diagnosis: the run's labels and within-run noise)
    labels_before: Mapping[str, str] | None = None
    labels_after: Mapping[str, str] | None = None
    noise: Mapping[str, float] | None = None


def diagnose_many(cases: Sequence[Sides]) -> list[Diagnosis]:
    """``diagnose`` of each case (without the whole run's move: ``with_whole_run``), the
    occupancy limiters of every side derived together, one table per arch (``limiters``)."""
    summaries = _summaries([side for c in cases for side in (c.before, c.after)])
    stats = [(summaries[2 * i], summaries[2 * i + 1]) for i in range(len(cases))]
    medians = [{"before": _of(b, 0), "after": _of(a, 0)} for b, a in stats]
    wanted: dict[str, list[tuple[int, str]]] = {}
    for i, c in enumerate(cases):
        if c.arch and not (TIMELINE_MARK in c.before and TIMELINE_MARK in c.after):  # a timeline row has none
            wanted.setdefault(c.arch, []).extend((i, side) for side in ("before", "after"))
    derived: dict[tuple[int, str], str | None] = {}
    for arch, sides in wanted.items():
        derived.update(zip(sides, limiters([medians[i][side] for i, side in sides], arch)))
    return [_explain(c.before, c.after, subject=c.subject, stats=stats[i], labels_before=c.labels_before,
                     labels_after=c.labels_after, noise=c.noise,
                     derive=lambda side, _, i=i: derived.get((i, side)))  # type: ignore[misc]
            for i, c in enumerate(cases)]


def _of(summaries: Mapping[str, Summary], at: int) -> dict[str, float]:
    return {metric: summary[at] for metric, summary in summaries.items()}  # type: ignore[misc]


def with_whole_run(diagnosis: Diagnosis, whole_run_pct: float | None) -> Diagnosis:
    """``diagnosis`` with the run-wide change at the same run, where it moved: first
    when nothing of the kernel's own moved (the likeliest cause: what moved every kernel
    of the run), else last."""
    if whole_run_pct is None:
        return diagnosis
    whole = f"whole run moved ({whole_run_pct:+.1f}%, every kernel)"
    first = diagnosis.time_only and not diagnosis.timeline
    items = (whole, *diagnosis.items) if first else (*diagnosis.items, whole)
    return dataclasses.replace(diagnosis, items=items, whole_run_pct=whole_run_pct)


def _explain(
    before: Mapping[str, Sequence[float] | float],
    after: Mapping[str, Sequence[float] | float],
    *,
    subject: str,
    derive: Callable[[str, Mapping[str, float]], str | None],
    labels_before: Mapping[str, str] | None = None,
    labels_after: Mapping[str, str] | None = None,
    noise: Mapping[str, float] | None = None,
    stats: tuple[Mapping[str, Summary], Mapping[str, Summary]] | None = None,
) -> Diagnosis:
    """``diagnose`` without the whole run; ``derive(side, its medians)``: the occupancy
    limiter of a side whose labels lack it; ``stats``: each side's ``_summaries``, where known."""
    noise = noise or {}
    summary = stats or tuple(_summaries([before, after]))
    moves: dict[str, Move] = {}
    for metric in set(before) & set(after):
        if metric == subject or metric.startswith("raw."):
            continue
        found = _moved(metric, summary[0].get(metric), summary[1].get(metric), noise.get(metric))
        if found is not None:
            moves[metric] = found
    if TIMELINE_MARK in before and TIMELINE_MARK in after:
        return _timeline(subject, before, after, moves)
    labels = {"before": dict(labels_before or {}), "after": dict(labels_after or {})}
    medians = {"before": _of(summary[0], 0), "after": _of(summary[1], 0)}
    for side in labels:
        if "occupancy_limiter" not in labels[side]:
            derived = derive(side, medians[side])
            if derived is not None:
                labels[side]["occupancy_limiter"] = derived
    # where a side's roofline labels are not known, both sides are derived alike (a
    # derived "compute" beside a kept "fp32" roof name would be a change that is none)
    if any("roofline_ceiling" not in labels[side] for side in labels):
        roofs = {side: roof_labels(medians[side]) for side in labels}
        for side in labels:
            for name in ("bound", "roofline_ceiling"):
                labels[side].pop(name, None)
                if name in roofs[side]:
                    labels[side][name] = roofs[side][name]
    label_moves = {name: Move(name, labels["before"][name], labels["after"][name])
                   for name in LABELS
                   if labels["before"].get(name) and labels["after"].get(name)
                   and labels["before"][name] != labels["after"][name]}

    items: list[tuple[float, str]] = []
    # occupancy with the limiter and the resources that set it
    resources = sorted((moves[r] for r in RESOURCES if r in moves), key=lambda m: -m.effect)
    inner = ([label_moves["occupancy_limiter"].text().replace("occupancy_limiter", "limiter")]
             if "occupancy_limiter" in label_moves else [])
    if resources:
        inner.append(", ".join(m.text() for m in resources))
    occupancy = moves.get("occupancy_pct")
    if occupancy is not None:
        items.append((occupancy.effect, occupancy.text() + (f" ({'; '.join(inner)})" if inner else "")))
    elif inner:
        items.append((max([m.effect for m in resources] or [0.0]), "; ".join(inner)))
    if "achieved_occupancy_pct" in moves:
        items.append((moves["achieved_occupancy_pct"].effect, moves["achieved_occupancy_pct"].text()))
    # work: bytes per memory level (a level's total, else its read and write parts), FLOPs, instructions, calls
    levels = sorted(m for m in set(before) | set(after) if m.endswith("_bytes"))
    totals = [m for m in levels if "_read_" not in m and "_write_" not in m]
    parts = [m for m in levels if m not in totals and not any(m.startswith(t[: -len("bytes")]) for t in totals)]
    work = [m for m in (*totals, *parts, *WORK) if m in moves]
    items.extend((moves[m].effect, moves[m].text()) for m in work)
    if "roofline_ceiling" in label_moves:  # the roof that binds, and the bound when it changed with it
        bound = f" (bound {label_moves['bound'].before} -> {label_moves['bound'].after})" if "bound" in label_moves else ""
        items.append((label_moves["roofline_ceiling"].effect / 2.0, label_moves["roofline_ceiling"].text() + bound))
    items.sort(key=lambda item: -item[0])
    causes = [text for _, text in items]
    time_only = not causes
    line: list[str] = []
    if time_only:  # (the whole run's move goes first: ``with_whole_run``)
        line.append(TIME_ONLY if timed(subject) else NOTHING_ELSE)
    else:
        line.extend(causes)
        steady = [m for m in totals if m in before and m in after and m not in moves]
        if steady and subject not in levels and not any(m in moves for m in levels):
            line.append(f"{steady[0]} unchanged")
        for pct, rate in _CONTEXT:
            if pct in moves:
                line.append(f"{rate} {format_value(float(moves[pct].before), '%')} -> "
                            f"{format_value(float(moves[pct].after), '%')} of peak")
                break
            if rate in moves:
                line.append(moves[rate].text())
                break
        # (every kernel moved, but this one's own counters say why: the whole run goes last)
    shown = [moves[m] for m in (*RESOURCES, *OCCUPANCY, *work) if m in moves]
    shown += [m for m in label_moves.values()]
    shown += [moves[m] for pair in _CONTEXT for m in pair if m in moves and not time_only][:1]
    return Diagnosis(subject, _change(subject, before, after, summary),
                     tuple(sorted(shown, key=lambda m: -m.effect)), tuple(line), time_only)


def _change(subject: str, before: Mapping[str, Sequence[float] | float],
            after: Mapping[str, Sequence[float] | float],
            stats: tuple[Mapping[str, Summary], Mapping[str, Summary]] | None = None) -> float | None:
    """The subject's change in %, from the medians of both sides (``stats``: their
    ``_summaries``, where known: the same medians)."""
    if stats is not None:
        if subject in before and subject in after and subject in stats[0] and subject in stats[1]:
            b, a = stats[0][subject][0], stats[1][subject][0]
            return (a / b - 1.0) * 100.0 if b else None
        return None
    if subject in before and subject in after:
        sides = _medians({"before": before[subject], "after": after[subject]})
        if len(sides) == 2 and sides["before"]:
            return (sides["after"] / sides["before"] - 1.0) * 100.0
    return None


# --- the program's timeline: "@run" rows, and "range:" rows read with their "@run" row -------
# A row of the timeline carries the device metrics (perfcheck.metrics.timeline); "span"
# is the one every such row has and no kernel row does.
TIMELINE_MARK = "span"
TIMELINE_UNCHANGED = "no device timeline metric moved (time on the host?)"
_DIRECTIONS = ("h2d", "d2h", "d2d", "p2p", "h2h")
# Times named by their change per step (or over the run): what a step lost or gained.
_TIMES = (("idle", "idle"), ("comm_time", "communication"), ("compute_time", "compute"))


def _signed(seconds: float) -> str:
    return ("+" if seconds >= 0 else "-") + format_value(abs(seconds), "s")


def _timeline(subject: str, before: Mapping[str, Sequence[float] | float],
              after: Mapping[str, Sequence[float] | float], moves: Mapping[str, Move]) -> Diagnosis:
    """The diagnosis of a timeline row: what moved on the device's timeline, per
    ProfilerStep where the trace has steps (``*_per_step``), else over the run:
    "idle +23.5 us per step; H2D copies 1 -> 2 per step (977 KiB -> 1.9 MiB)";
    the largest idle gap; the number of steps when it changed."""

    def pick(name: str) -> tuple[Move | None, str]:
        """The per-step form of ``name`` where both sides have it, else the total."""
        step = f"{name}_per_step"
        if len(_finite(before.get(step))) and len(_finite(after.get(step))):
            return moves.get(step), " per step"
        return moves.get(name), ""

    items: list[tuple[Move, str]] = []
    for name, word in _TIMES:
        found, per = pick(name)
        if found is not None:
            items.append((found, f"{word} {_signed(float(found.after) - float(found.before))}{per}"))
    for direction in _DIRECTIONS:
        calls, per = pick(f"memcpy_{direction}_calls")
        size, per_bytes = pick(f"memcpy_{direction}_bytes")
        head = direction.upper()
        if calls is not None:
            fmt = functools.partial(format_value, unit="count")
            bytes_part = (f" ({format_value(float(size.before), 'B')} -> {format_value(float(size.after), 'B')})"
                          if size is not None else "")
            items.append((calls, f"{head} copies {fmt(float(calls.before))} -> {fmt(float(calls.after))}{per}"
                          + bytes_part))
        elif size is not None:
            items.append((size, f"{head} bytes {format_value(float(size.before), 'B')} -> "
                                f"{format_value(float(size.after), 'B')}{per_bytes}"))
    items.sort(key=lambda item: -item[0].effect)
    # after what the steps spent: the largest gap (where the idle time went) and the step count
    gap = moves.get("idle_gap_max")
    if gap is not None:
        items.append((gap, gap.text().replace("idle_gap_max", "largest idle gap")))
    if "steps" in moves:
        items.append((moves["steps"], moves["steps"].text()))
    line = [text for _, text in items]
    time_only = not line
    if time_only:
        line.append(TIMELINE_UNCHANGED if timed(subject) else NOTHING_ELSE)
    return Diagnosis(subject, _change(subject, before, after), tuple(m for m, _ in items), tuple(line), time_only,
                     timeline=True)



def with_run(subject: str, rows: Mapping[str, Mapping[str, Sequence[float] | float]]
             ) -> Mapping[str, Sequence[float] | float] | None:
    """A ``range:`` row's values with those of the run's timeline row (``@run``) beside
    them, so that a step's change is explained by what moved on the device (a range row
    keeps only calls and durations); the row itself for any other subject; None when
    ``rows`` lacks it. With several devices (``@run:rank0:gpu1`` ...) no one device
    speaks for the step and the range row stays alone."""
    from perfcheck.metrics.timeline import RANGE_PREFIX, RUN

    own = rows.get(subject)
    if own is None or not subject.startswith(RANGE_PREFIX):
        return own
    runs = [name for name in rows if name == RUN or name.startswith(RUN + ":")]
    if runs != [RUN]:
        return own
    return {**rows[RUN], **own}
