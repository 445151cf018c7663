"""Two runs side by side, kernel by kernel: what ``perfcheck compare A B`` shows.

A side is an Analysis: a suite's profiles read now (``perfcheck.checking.comparison_side``)
or a results file written earlier (``perfcheck check --json``, read here by
``results_analysis``). Kernels are matched by name; for each kernel found on both sides
``explain`` lists what moved: the median duration (the verdict), the main-memory
bandwidth as a percentage of its peak, the roofline position, the theoretical
occupancy and the resource that limits it, and every launch resource that changed
(VGPRs, LDS per workgroup, ...): the "why" of a faster or slower kernel, as the
stencil story of seed 001 tells it (LDS-limited 20% occupancy -> VGPR-limited 40%,
45% -> 85% of the bandwidth).

``explain`` is one function on two kernel-table rows, so a fuller diagnosis (the
history's "why it changed") can take its place without touching the rest.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.documents import json_loads
from perfcheck.errors import InputError
from perfcheck.kernelkey import kernel_key
from perfcheck.schema import metric_unit

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis

# What ``explain`` compares, in the order a reader asks: how fast, how close to the
# roof, how full the machine, and the launch resources that decide the occupancy.
VERDICT = "duration"
POSITION = ("hbm_bw_pct", "mem_bw_pct", "roofline_pct", "gips_pct")
OCCUPANCY = ("occupancy_pct", "occupancy_limiter", "achieved_occupancy_pct")
RESOURCES = ("vgpr", "agpr", "sgpr", "registers", "lds_per_workgroup", "scratch_per_thread", "workgroup_size")
# A percentage that moved less than this (points) or a duration less than this
# (relative) is "unchanged": run-to-run noise of a trace is about 1% (seed 001's
# twenty dispatches spread 2.65-2.70 ms).
SAME_POINTS = 0.5
SAME_RELATIVE = 0.01


@dataclass(frozen=True)
class Change:
    """One quantity of one kernel, before and after (base units; a label for the limiter)."""

    metric: str
    before: float | str | None
    after: float | str | None
    unit: str

    @property
    def moved(self) -> bool:
        """Changed beyond noise (a resource or label: changed at all)."""
        if isinstance(self.before, str) or isinstance(self.after, str):
            return self.before != self.after
        if self.before is None or self.after is None:
            return self.before is not self.after
        if self.unit == "%":
            return abs(self.after - self.before) >= SAME_POINTS
        if self.metric in RESOURCES:
            return self.after != self.before
        return self.before == 0 or abs(self.after / self.before - 1.0) >= SAME_RELATIVE


@dataclass(frozen=True)
class KernelComparison:
    kernel: str
    changes: tuple[Change, ...]  # duration first, then position, occupancy, resources
    share: float  # of the after side's kernel time, 0..1

    def change(self, metric: str) -> Change | None:
        return next((c for c in self.changes if c.metric == metric), None)

    @property
    def speedup(self) -> float | None:
        """before / after median duration (2.0: twice as fast)."""
        d = self.change(VERDICT)
        if d is None or not isinstance(d.before, float) or not isinstance(d.after, float) or d.after <= 0:
            return None
        return d.before / d.after


@dataclass(frozen=True)
class Side:
    label: str  # "suite before", "results-main.json"
    analysis: "Analysis"


@dataclass(frozen=True)
class Comparison:
    before: Side
    after: Side
    kernels: tuple[KernelComparison, ...]  # longest-running (after) first
    only_before: tuple[str, ...]
    only_after: tuple[str, ...]


def _value(row: Mapping[str, object], metric: str) -> float | str | None:
    value = row.get(metric)
    if isinstance(value, str):
        return value or None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def explain(before: Mapping[str, object], after: Mapping[str, object]) -> tuple[Change, ...]:
    """What moved between two kernel-table rows of one kernel: the duration always
    (the verdict), the other quantities where either side has them; the launch
    resources only where they changed (an unchanged VGPR count explains nothing)."""
    changes = []
    for metric in (VERDICT, *POSITION, *OCCUPANCY, *RESOURCES):
        a, b = _value(before, metric), _value(after, metric)
        if a is None and b is None:
            continue
        change = Change(metric, a, b, "" if metric == "occupancy_limiter" else metric_unit(metric))
        if metric in RESOURCES and (a is None or b is None or not change.moved):
            continue  # unchanged, or not known on one side: explains nothing
        changes.append(change)
    return tuple(changes)


_RETURN_TYPE = re.compile(r"^(?:__global__ )?void\s+")


def without_signature(name: str) -> str:
    """"void k<float, 256>(float const*, int)" -> "k<float, 256>": a demangled name
    without its return type and its parameter list (from the first "(" outside the
    template arguments; "(anonymous namespace)::k" keeps its leading bracket)."""
    text = _RETURN_TYPE.sub("", name.strip())
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0 and i > 0:
            return text[:i]
    return text


def bare_name(name: str) -> str:
    """The canonical key without return type and parameter list. A kernel trace
    (rocprofv3) and a counter run (rocprof v1) of one build spell the same kernel
    with and without them."""
    return without_signature(kernel_key(name))


def _matches(before: Sequence[str], after: Sequence[str]) -> dict[str, str]:
    """after name -> before name: the same canonical key, else the same bare name where
    that is unique on both sides (overloads are never guessed)."""
    keys = {kernel_key(k): k for k in before}
    out = {k: keys[kernel_key(k)] for k in after if kernel_key(k) in keys}
    left_a = [k for k in before if k not in out.values()]
    left_b = [k for k in after if k not in out]
    bare_a, bare_b = {}, {}
    for names, bare in ((left_a, bare_a), (left_b, bare_b)):
        for name in names:
            bare.setdefault(bare_name(name), []).append(name)
    for short, names in bare_b.items():
        if len(names) == 1 and len(bare_a.get(short, [])) == 1:
            out[names[0]] = bare_a[short][0]
    return out


def compare(before: Side, after: Side) -> Comparison:
    """Kernels matched by name (``_matches``); those on one side only are listed apart.
    A kernel is shown by its name on the after side."""
    a, b = before.analysis.kernels, after.analysis.kernels
    rows_a = {str(r["kernel"]): r for r in a.to_dict("records")} if len(a) else {}
    rows_b = {str(r["kernel"]): r for r in b.to_dict("records")} if len(b) else {}
    time = {k: float(r.get("duration_total") or 0.0) for k, r in rows_b.items()}
    total = sum(t for t in time.values() if math.isfinite(t)) or 1.0
    pairs = _matches(list(rows_a), list(rows_b))
    both = sorted(pairs, key=lambda k: -time[k])
    kernels = tuple(KernelComparison(k, explain(rows_a[pairs[k]], rows_b[k]), time[k] / total) for k in both)
    matched = set(pairs.values())
    return Comparison(before, after, kernels, tuple(k for k in rows_a if k not in matched),
                      tuple(k for k in rows_b if k not in pairs))


# --- a results file as a side ------------------------------------------------------------------


def results_analysis(path: str | Path, suite: str | None = None) -> tuple[str, "Analysis"]:
    """(suite name, its Analysis) from a results file (``perfcheck check --json``): the
    kernels' measurements, occupancy limiters, ceilings and device as that run saw them.
    ``suite``: which suite, needed when the file holds several."""
    import pandas as pd

    from perfcheck.analysis import Analysis

    path = Path(path)
    try:
        doc = json_loads(path.read_text(encoding="utf-8"), path,
                         hint="a results file is written by `perfcheck check --json`")
    except FileNotFoundError:
        raise InputError(path, "no such results file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot be read as a results file ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno,
                         hint="a results file is written by `perfcheck check --json`") from None
    suites = doc.get("suites") if isinstance(doc, dict) else None
    if not isinstance(suites, dict) or not suites:
        raise InputError(path, "is not a perfcheck results file with a suite (no 'suites')",
                         hint="a results file is written by `perfcheck check --json`")
    if suite is None:
        if len(suites) > 1:
            raise InputError(path, f"holds {len(suites)} suites ({', '.join(sorted(suites))})",
                             hint=f"name one: {path}:SUITE")
        suite = next(iter(suites))
    entry = suites.get(suite)
    if not isinstance(entry, dict):
        raise InputError(path, f"has no suite {suite!r} (it has {', '.join(sorted(suites))})")
    measured = entry.get("measurements")
    if not isinstance(measured, dict) or not measured:
        raise InputError(path, f"suite {suite!r} has no per-kernel measurements",
                         hint="written by a perfcheck older than `compare`: run `perfcheck check --json` again")
    labels = entry.get("labels") if isinstance(entry.get("labels"), dict) else {}
    records = [{"kernel": str(k), **(v if isinstance(v, dict) else {}), **(labels.get(k) or {})}
               for k, v in measured.items()]
    kernels = pd.DataFrame.from_records(records)
    return str(suite), Analysis(sources=(), oddities=(), kernels=kernels, target=_target(entry.get("target")),
                                target_origin="results file", ceilings=_ceilings(entry.get("ceilings")))


def _target(block: object):  # noqa: ANN202 - perfcheck.arch.Target | None
    from perfcheck.arch import lookup
    from perfcheck.errors import PerfcheckError

    if not isinstance(block, dict):
        return None
    for name in (block.get("device"), block.get("arch")):
        if isinstance(name, str) and name:
            try:
                return lookup(name)
            except PerfcheckError:  # a device this perfcheck does not know: the arch, else none
                continue
    return None


def _ceiling(doc: Mapping[str, object]):  # noqa: ANN202 - perfcheck.metrics.roofline.Ceiling | None
    from perfcheck.metrics.roofline import Ceiling

    value = doc.get("value")
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    twin = doc.get("theoretical")
    return Ceiling(str(doc.get("name")), float(value), str(doc.get("unit", "")), str(doc.get("kind", "")),
                   str(doc.get("source", "")), _ceiling(twin) if isinstance(twin, dict) else None)


def _ceilings(block: object) -> dict:
    out = {}
    for doc in block if isinstance(block, list) else []:
        ceiling = _ceiling(doc) if isinstance(doc, dict) else None
        if ceiling is not None:
            out[ceiling.name] = ceiling
    return out


def kernel_labels(analysis: "Analysis", columns: Sequence[str] = ("occupancy_limiter", "bound", "roofline_ceiling",
                                                                  "compute_ceiling")) -> dict[str, dict[str, str]]:
    """kernel -> {column: label} of the text columns a results file keeps beside the
    numbers (``perfcheck check --json``: per suite ``"labels"``), so a later compare
    can say which resource limited the occupancy."""
    table = analysis.kernels
    present = [c for c in columns if c in table.columns]
    if not len(table) or not present:
        return {}
    frame = table[["kernel", *present]].set_index(table["kernel"].astype(str))[present]
    stacked = frame.stack().dropna()
    stacked = stacked[stacked.map(lambda v: isinstance(v, str) and bool(v))]
    out: dict[str, dict[str, str]] = {}
    for (kernel, column), value in stacked.items():
        out.setdefault(str(kernel), {})[str(column)] = str(value)
    return out
