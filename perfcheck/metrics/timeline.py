"""Metrics of the program's timeline: how busy each device was, where the idle time
is, what copies and communication cost, and how long the user's ranges (a training
step) took; then the spread of each over the ranks.

Conventions, those of Holistic Trace Analysis (HTA 0.5.0, hta/analyzers/
breakdown_analysis.py and communication_analysis.py) where HTA defines the number:

* The **span** of a device runs from its first to its last activity (kernel, copy,
  memset), not over the trace window: host-only time before the first launch is
  not GPU idle time.
* Intervals are merged before they are summed (overlapping streams count once);
  intervals that touch merge (HTA merges on ``start > running max end``).
* **Busy** is the union of kernels, copies and memsets; ``idle = span - busy``.
  **Compute** is the union of non-communication kernels (HTA's COMPUTATION),
  ``non_compute = busy - compute`` (copies, memsets, communication not hidden
  under compute).
* ``comm_overlap_pct`` is the time communication runs under compute, over the
  union of communication time (HTA's comp_comm_overlap).
* Host waits (Kineto ``cuda_sync``) are not device activity; HTA counts them as GPU
  events, so the oracle tests compare on traces without them.

All durations in seconds, bytes in B, rates in B/s, percentages 0-100.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcheck.ingest.timeline import DIRECTIONS, KERNEL, MEMCPY, MEMSET, Timeline
from perfcheck.schema import PER_STEP_OF, RANK_SPREAD_OF, TIMELINE_METRICS

# A range's metrics take the names of a kernel's: calls, duration (the median),
# duration_p90, duration_total.
RANGE_METRICS = ("calls", "duration", "duration_p90", "duration_total")
DEVICE_METRICS = TIMELINE_METRICS

# The spread of a device metric over ranks: <metric>_<stat>.
SPREAD = ("min", "median", "max", "imbalance")
_NS = 1e-9


@dataclass(frozen=True)
class TimelineMetrics:
    """``devices``: one row per (rank, device), DEVICE_METRICS columns; ``ranges``: one
    row per (range group, on), RANGE_METRICS columns; ``ranks``: one row per device
    metric, its min/median/max over the ranks, imbalance (max / mean) and the
    straggler (the rank with the largest span)."""

    devices: pd.DataFrame
    ranges: pd.DataFrame
    ranks: pd.DataFrame


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint intervals."""
    if len(starts) == 0:
        return np.zeros(0, dtype=starts.dtype), np.zeros(0, dtype=ends.dtype)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # a new interval begins where the start lies beyond everything before it
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    s, e = merge(starts, ends)
    return int((e - s).sum())


def _device(start: np.ndarray, end: np.ndarray, kind: np.ndarray, comm: np.ndarray, size: np.ndarray,
            direction: np.ndarray) -> dict[str, float]:
    """The device metrics of one device's activities, given as arrays (masks select
    the kinds: a 1 GB trace's activities are not copied once per kind)."""
    merged_s, merged_e = merge(start, end)
    span = int(merged_e[-1] - merged_s[0]) if len(merged_s) else 0
    busy = int((merged_e - merged_s).sum())
    gaps = merged_s[1:] - merged_e[:-1]
    kernels = kind == KERNEL
    compute, communication = kernels & ~comm, kernels & comm

    def union(mask: np.ndarray) -> int:
        return union_length(start[mask], end[mask])

    kernel_ns, compute_ns, comm_ns = union(kernels), union(compute), union(communication)
    hidden = compute_ns + comm_ns - kernel_ns  # compute and communication together are the kernels
    pct = (lambda ns: 100.0 * ns / span) if span > 0 else (lambda ns: np.nan)
    copies = kind == MEMCPY
    took = (end - start).astype("float64") * _NS

    def moved(mask: np.ndarray) -> float:
        picked = size[mask]
        return float(np.nansum(picked)) if np.isfinite(picked).any() else np.nan

    copy_bytes, copy_dur = moved(copies), float(took[copies].sum())
    out: dict[str, float] = {
        "span": span * _NS, "busy": busy * _NS, "gpu_busy_pct": pct(busy), "idle": (span - busy) * _NS,
        "idle_pct": pct(span - busy), "idle_gap_max": float(gaps.max()) * _NS if len(gaps) else 0.0,
        "kernel_time": kernel_ns * _NS, "compute_time": compute_ns * _NS, "compute_pct": pct(compute_ns),
        "non_compute_pct": pct(busy - compute_ns), "kernels": float(kernels.sum()),
        "memcpy_time": union(copies) * _NS, "memcpy_calls": float(copies.sum()), "memcpy_bytes": copy_bytes,
        "memcpy_bw": copy_bytes / copy_dur if copy_dur > 0 else np.nan,
        "memset_time": union(kind == MEMSET) * _NS,
        "comm_time": comm_ns * _NS, "comm_share_pct": pct(comm_ns),
        "comm_overlap_pct": 100.0 * hidden / comm_ns if comm_ns > 0 else np.nan,
    }
    for name in DIRECTIONS:
        low = name.lower()
        these = copies & (direction == name)
        bytes_moved, seconds = moved(these), float(took[these].sum())
        out[f"memcpy_{low}_time"] = union(these) * _NS
        out[f"memcpy_{low}_calls"] = float(these.sum())
        out[f"memcpy_{low}_bytes"] = bytes_moved
        out[f"memcpy_{low}_bw"] = bytes_moved / seconds if seconds > 0 else np.nan
    return out


STEP_GROUP = "ProfilerStep"  # the range group torch.profiler writes per step (ProfilerStep#N)


def _per_step(table: pd.DataFrame, timeline: Timeline) -> pd.DataFrame:
    """``table`` (one row per rank, device) with ``steps`` (the host ProfilerStep ranges
    of its rank; a trace without ranks counts all of them) and each PER_STEP_OF metric
    over them; missing where the rank recorded no step."""
    r = timeline.ranges
    steps = r[(r["group"] == STEP_GROUP) & (r["on"] == "host")]
    per_rank = steps.groupby(steps["rank"].fillna(-1), sort=False).size()
    ranks = pd.Series(table.index.get_level_values("rank"), index=table.index).fillna(-1)
    count = ranks.map(per_rank).astype("float64")
    table = table.copy()
    table["steps"] = count
    divisor = count.where(count > 0)
    for name in PER_STEP_OF:
        table[f"{name}_per_step"] = table[name] / divisor
    return table


def device_metrics(timeline: Timeline) -> pd.DataFrame:
    """One row per (rank, device) of the timeline's activities."""
    a = timeline.activities
    keys = ["rank", "device_id"]
    rows = []
    index = []
    start, end = a["start_ns"].to_numpy(dtype="int64"), a["end_ns"].to_numpy(dtype="int64")
    kind = a["kind"].to_numpy(dtype=object, na_value="")
    comm = a["comm"].to_numpy(dtype=bool)
    size = a["bytes"].to_numpy(dtype="float64")
    direction = a["direction"].to_numpy(dtype=object, na_value="")
    # one group per device of a rank: a handful, each computed with array operations
    for key, at in a.groupby(keys, dropna=False, sort=True).indices.items():
        index.append(key)
        rows.append(_device(start[at], end[at], kind[at], comm[at], size[at], direction[at]))
    names = list(DEVICE_METRICS)
    if not rows:
        return pd.DataFrame(columns=names, index=pd.MultiIndex.from_tuples([], names=keys))
    table = pd.DataFrame(rows, index=pd.MultiIndex.from_tuples(index, names=keys))
    return _per_step(table, timeline)[names]


def range_metrics(timeline: Timeline) -> pd.DataFrame:
    """One row per (range group, on): calls and duration statistics, in seconds."""
    r = timeline.ranges
    duration = (r["end_ns"] - r["start_ns"]).astype("float64") * _NS
    grouped = duration.groupby([r["group"], r["on"]], sort=True)
    out = pd.DataFrame({
        "calls": grouped.size().astype("float64"),
        "duration": grouped.median(),
        "duration_p90": grouped.quantile(0.9),
        "duration_total": grouped.sum(),
    })
    out.index.names = ["range", "on"]
    return out


def rank_spread(devices: pd.DataFrame) -> pd.DataFrame:
    """Each device metric's min / median / max over the ranks (a rank's value: its
    devices summed for times and counts, the mean for percentages and rates),
    imbalance (max / mean; 1 is perfect balance) and the straggler rank (largest span)."""
    if devices.empty:
        return pd.DataFrame(columns=[*SPREAD, "straggler"])
    ranks = devices.index.get_level_values("rank")
    # a rank's devices share its steps: the count is not summed over them
    additive = [m for m, (unit, _) in DEVICE_METRICS.items() if unit in ("s", "B", "count") and m != "steps"]
    averaged = [m for m in DEVICE_METRICS if m not in additive]
    per_rank = pd.concat([devices[additive].groupby(ranks, dropna=False).sum(min_count=1),
                          devices[averaged].groupby(ranks, dropna=False).mean()], axis=1)[list(DEVICE_METRICS)]
    mean = per_rank.mean()
    spread = pd.DataFrame({
        "min": per_rank.min(), "median": per_rank.median(), "max": per_rank.max(),
        "imbalance": per_rank.max() / mean.where(mean != 0),
    })
    span = per_rank["span"]
    spread["straggler"] = span.idxmax() if span.notna().any() else pd.NA
    return spread


def timeline_metrics(timeline: Timeline) -> TimelineMetrics:
    devices = device_metrics(timeline)
    return TimelineMetrics(devices=devices, ranges=range_metrics(timeline), ranks=rank_spread(devices))


# HTA's kernel types, in the order its labels name them.
TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY")


def _types(activities: pd.DataFrame) -> np.ndarray:
    return np.where(activities["kind"] != KERNEL, "MEMORY",
                    np.where(activities["comm"], "COMMUNICATION", "COMPUTATION"))


def _covered(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each point lies inside one of the disjoint, sorted intervals."""
    at = np.searchsorted(starts, points, side="right") - 1
    return (at >= 0) & (points < ends[np.clip(at, 0, None)]) if len(starts) else np.zeros(len(points), dtype=bool)


def type_breakdown(timeline: Timeline) -> pd.DataFrame:
    """HTA's GPU kernel breakdown, per rank: the device time cut where any merged
    interval of a type begins or ends, each piece labelled by the types running in it
    ("COMPUTATION", "COMPUTATION overlapping MEMORY", ...), summed per label in
    seconds, with its share of the total in percent. (HTA truncates each piece to
    whole µs; here it stays in ns.)"""
    a = timeline.activities
    kinds = _types(a)
    rows = []
    for rank, frame in a.groupby("rank", dropna=False, sort=True):
        these = kinds[a.index.get_indexer(frame.index)]
        merged = {t: merge(frame["start_ns"].to_numpy()[these == t], frame["end_ns"].to_numpy()[these == t])
                  for t in TYPES}
        cuts = np.unique(np.concatenate([np.concatenate(m) for m in merged.values()]))
        if len(cuts) < 2:
            continue
        left, length = cuts[:-1], np.diff(cuts)
        label = np.full(len(left), "", dtype=object)
        for t in TYPES:
            inside = _covered(left, *merged[t])
            label = np.where(inside, np.where(label == "", t, label + " overlapping " + t), label)
        pieces = pd.Series(length * _NS).groupby(label).sum()
        pieces = pieces[pieces.index != ""]
        for name, seconds in pieces.items():
            rows.append((rank, name, seconds))
    out = pd.DataFrame(rows, columns=["rank", "type", "time"]).set_index(["rank", "type"])
    out["pct"] = 100.0 * out["time"] / out["time"].groupby(level=0, dropna=False).transform("sum")
    return out


# --- the timeline as subjects of expectations ---------------------------------------------
# "@run" names the devices' rows, "range:NAME" a user range's. Neither can be a kernel
# name: demangled names start with a letter, "_" or a return type, never "@", and
# no compiler emits "range:" (a C++ name would need "::").
RUN = "@run"
RANKS = "@ranks"
RANGE_PREFIX = "range:"


def is_timeline_name(name: str) -> bool:
    """Whether an expectation's pattern (or a row of the kernel table) is ``@run``,
    ``@run:...`` or ``range:...``: a timeline subject, not a kernel."""
    return name in (RUN, RANKS) or name.startswith((RUN + ":", RANGE_PREFIX))


def match_subjects(pattern: str, names: list[str], match: "Callable[[str, list[str]], list[str]]") -> list[str]:
    """The timeline subjects ``pattern`` names: ``@run`` every device, ``@run:GLOB``
    the devices whose ``rank0:gpu2`` part matches, ``range:GLOB`` (or ``range:re:...``)
    the ranges whose name matches; ``match`` is the kernel-pattern matcher."""
    runs = [n for n in names if n == RUN or n.startswith(RUN + ":")]
    if pattern == RUN:
        return runs
    if pattern == RANKS:
        return [n for n in names if n == RANKS]
    prefix = RUN + ":" if pattern.startswith(RUN + ":") else RANGE_PREFIX
    pool = runs if prefix != RANGE_PREFIX else [n for n in names if n.startswith(RANGE_PREFIX)]
    found = set(match(pattern[len(prefix):], [n[len(prefix):] for n in pool if n.startswith(prefix)]))
    return [n for n in pool if n[len(prefix):] in found]


def _run_subject(rank: object, device: object, single: bool) -> str:
    if single:
        return RUN
    parts = [RUN]
    if not pd.isna(rank):
        parts.append(f"rank{int(rank)}")  # type: ignore[call-overload]
    if not pd.isna(device):
        parts.append(f"gpu{int(device)}")  # type: ignore[call-overload]
    return ":".join(parts)


def subjects(timeline: Timeline, metrics: TimelineMetrics) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Rows to check expectations on, keyed like kernels (column ``kernel``): one per
    device (``@run``, or ``@run:rank0:gpu2`` when there are several) with the device
    metrics, one per host range group (``range:ProfilerStep``) with calls and duration
    statistics, and with several ranks ``@ranks``, the spread over them; and each range's per-call durations (s), the samples a baseline
    comparison judges noise by. (Device projections of ranges are not subjects: the
    host range is the step time users mean.)"""
    devices = metrics.devices
    single = len(devices) == 1
    run_rows = devices.reset_index()
    run_rows.insert(0, "kernel", [_run_subject(r, d, single) for r, d in zip(run_rows["rank"], run_rows["device_id"])])
    run_rows = run_rows.drop(columns=["rank", "device_id"])
    ranges = metrics.ranges
    on_host = ranges[ranges.index.get_level_values("on") == "host"]
    if on_host.empty:  # a trace with only device ranges
        on_host = ranges
    range_rows = on_host.reset_index(level="on", drop=True).reset_index()
    range_rows = range_rows.drop_duplicates("range")
    names = RANGE_PREFIX + range_rows["range"].astype(str)
    range_rows = range_rows.drop(columns=["range"])
    range_rows.insert(0, "kernel", names.to_numpy())
    frames = [run_rows, range_rows]
    ranks = devices.index.get_level_values("rank").dropna().unique() if len(devices) else []
    if len(ranks) > 1:  # "@ranks": the spread of RANK_SPREAD_OF over the ranks
        spread = metrics.ranks.loc[list(RANK_SPREAD_OF)]
        row = {f"{m}_{stat}": float(spread.loc[m, stat]) for m in RANK_SPREAD_OF
               for stat in ("min", "median", "max", "imbalance")}
        row["straggler"] = float(spread.loc["span", "straggler"])
        frames.append(pd.DataFrame([{"kernel": RANKS, **row}]))
    table = pd.concat(frames, ignore_index=True)
    r = timeline.ranges
    chosen = r[r["on"] == "host"] if (r["on"] == "host").any() else r
    durations = (chosen["end_ns"] - chosen["start_ns"]).to_numpy(dtype="float64") * _NS
    groups = (RANGE_PREFIX + chosen["group"].astype(str)).to_numpy()
    order = np.argsort(groups, kind="stable")
    cuts = np.flatnonzero(groups[order][1:] != groups[order][:-1]) + 1
    samples = {str(group[0]): values for group, values in
               zip(np.split(groups[order], cuts), np.split(durations[order], cuts)) if len(group)}
    return table, samples


# --- what each step spent its time on ---------------------------------------------------
STEP_PARTS = ("compute", "communication", "copies", "idle")


def _covered_until(starts: np.ndarray, ends: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Covered length of the disjoint, sorted intervals up to each point (ns)."""
    if not len(starts):
        return np.zeros(len(points), dtype="float64")
    before = np.concatenate([[0], np.cumsum(ends - starts)])
    at = np.searchsorted(starts, points, side="right") - 1
    inside = np.clip(points - starts[np.clip(at, 0, None)], 0, (ends - starts)[np.clip(at, 0, None)])
    return np.where(at >= 0, before[np.clip(at, 0, None)] + inside, 0).astype("float64")


def step_breakdown(timeline: Timeline, group: str = "ProfilerStep") -> pd.DataFrame:
    """Each run of the host range ``group`` (a training step) on each device of its
    rank, its time split into compute (kernels that are not communication),
    communication not under compute, copies and memsets under neither, and idle
    (seconds; the four add up to the step's duration). Columns: rank, device_id,
    step (0, 1, ... in time order), start_ns, duration, and STEP_PARTS."""
    r = timeline.ranges
    steps = r[(r["group"] == group) & (r["on"] == "host")].sort_values("start_ns")
    a = timeline.activities
    out = []
    for (rank, device), frame in a.groupby(["rank", "device_id"], dropna=False, sort=True):
        mine = steps[steps["rank"].isna()] if pd.isna(rank) else steps[steps["rank"] == rank]
        if mine.empty:
            continue
        lo, hi = mine["start_ns"].to_numpy(), mine["end_ns"].to_numpy()
        kernels = frame["kind"] == KERNEL
        layers = [frame[kernels & ~frame["comm"]], frame[kernels], frame]  # compute, + comm, + copies
        covered = []
        for layer in layers:
            s, e = merge(layer["start_ns"].to_numpy(), layer["end_ns"].to_numpy())
            covered.append(_covered_until(s, e, hi) - _covered_until(s, e, lo))
        length = (hi - lo).astype("float64")
        out.append(pd.DataFrame({
            "rank": rank, "device_id": device, "step": np.arange(len(mine)), "start_ns": lo,
            "duration": length * _NS, "compute": covered[0] * _NS, "communication": (covered[1] - covered[0]) * _NS,
            "copies": (covered[2] - covered[1]) * _NS, "idle": (length - covered[2]) * _NS,
        }))
    columns = ["rank", "device_id", "step", "start_ns", "duration", *STEP_PARTS]
    return pd.concat(out, ignore_index=True)[columns] if out else pd.DataFrame(columns=columns)
