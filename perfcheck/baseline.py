"""Baselines: what a suite's kernels measured on one machine, and the regression
decision against them.

API (what ``expect``, ``checking``, the CLI and the pytest plugin call)::

    FORMAT_VERSION = 1
    Samples(n, median, mean, std, mad, min, max, values, run_medians)   # one sample series
    KernelBaseline(metrics: Mapping[str, float], samples: Mapping[str, Samples], runs: int)
    Baseline(suite, fingerprint: Mapping[str, str], kernels: Mapping[str, KernelBaseline], path)
    Decision(passed: bool, reference, observed, baseline, detail, change=None, interval=None, clear=None)

    fingerprint(analysis) -> dict[str, str]            # device, arch, tool, tool_version
    baseline_path(baseline_dir, suite, fingerprint) -> Path   # <dir>/<suite>/<fingerprint slug>.json
    lookup(baseline_dir, suite, fingerprint) -> Lookup(path, baseline | None, warnings)
                                                       # this machine's baseline only, else warnings
    other_baselines(baseline_dir, suite, fingerprint) -> list[Path]  # same suite, other machines
    mismatch(baseline, fingerprint) -> str | None      # why a baseline must not be compared
    fingerprint_changes(old, new) -> str               # "tool_version '1.0' -> '1.1'" (arrows)
    nearest_other(baseline_dir, suite, fingerprint) -> Baseline | None  # closest other machine's
    changes(old, new, watched) -> list[KernelChange]   # what an update changes, per kernel and metric
    load(path) -> Baseline | None                      # None when absent; InputError(file:line)
    from_analysis(suite, analysis) -> Baseline         # runs=1
    merge(old, new) -> Baseline                        # accumulate repeated runs (same machine)
    write(path, baseline) -> bool                      # atomic; False when the file already says it
    summarise(samples) -> Samples                      # exact statistics + bounded sketch
    is_exact(metric) -> bool
    compare(metric, relation, allowance_fraction, allowance_absolute, current_value,
            current_samples, kernel_baseline, *, exact) -> Decision

``current_samples`` are the kernel's per-dispatch durations of this run (an array,
or a ``Samples``); pass them for every timing-derived metric (duration*, bandwidths,
rates, their ``_pct``), not only ``duration``: a rate's noise is its duration's noise.
Without them the current run is assumed as noisy as the baseline run.

File layout (reviewable diffs: keys sorted, indent 2, floats as ``repr``, number
lists wrapped, no timestamps; rewriting an unchanged baseline leaves the file alone)::

    {"format_version": 1, "written_by": "perfcheck X", "suite": ..., "fingerprint": {...},
     "kernels": {name: {"metrics": {...}, "runs": 1,
                        "samples": {"duration": {"n", "median", "mean", "std", "mad",
                                                 "min", "max", "values": [...], "run_medians": [...]}}}}}

Statistics (why this rule; ``benchmarks/decisions.py`` measures it): a timing
fails only when it is worse than the user's allowance (the literal comparison the
message shows: current median vs baseline median x (1 + allowance)) AND the
worsening is statistically clear: the 95% interval of the ratio current/baseline
excludes 1 on the bad side. The interval's width comes from

* within-run noise: the distribution-free confidence interval of each median
  (order statistics at ranks n/2 +- z*sqrt(n)/2), read off the stored quantile
  sketch with the TRUE dispatch count n, converted to a standard error of the log
  median. Deterministic (no resampling, no seed to get wrong), O(1) per decision,
  robust to outliers and skew (GPU timings: warm-up, preemption), and honest for a
  10M-dispatch kernel whose baseline keeps only a bounded sketch; a bootstrap over
  the sketch would see 256 samples, not 10M, and cost resamples x n per decision.
* run-to-run noise, which no single run shows (clocks, thermals, placement): when
  the baseline merged >= 2 runs, the spread of its run medians.

Because the allowance is compared literally, a run 2% slower never fails a 5%
budget however many dispatches make its slowness "significant"; the "clear" half
stops noisy kernels with few dispatches from failing on an unlucky median (5%
jitter with outliers: 0% false alarms where a plain mean rule has 22%). A shift
between runs that one baseline run cannot show is only seen once runs are merged.
A seeded bootstrap of the ratio of medians, simulated on the same samples, has the
same false-alarm and detection rates within a few points, at a higher cost and
needing every raw sample. With fewer than ``MIN_SAMPLES`` dispatches on a side
(and a baseline of one run) there is no noise estimate: the comparison is literal
and the detail says so.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfcheck import __version__
from perfcheck.atomicfile import clean_stale_temps, write_atomic
from perfcheck.documents import json_loads
from perfcheck.errors import InputError, UsageError
from perfcheck.kernelkey import KernelMap
from perfcheck.schema import metric_unit

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis

FORMAT_VERSION = 1
# Sample values kept per series: a quantile sketch (evenly spaced order statistics)
# once a kernel has more dispatches. 256 points place every quantile within 0.4%
# of its rank, which is all the median intervals need (they use the true n), and
# keep a kernel's entry near 6 KB whether it ran 300 or 10 million times.
MAX_SAMPLES = 256
MAX_RUN_MEDIANS = 32  # the latest runs' medians kept for the run-to-run spread
MIN_SAMPLES = 5  # below this a median's interval is [min, max]: no noise estimate
Z = 1.959963984540054  # 95% two-sided normal quantile
EXACT_TOLERANCE = 1e-9  # relative: float round-off of quantities that are integers at heart
_UNKNOWN = "unknown"


# ------------------------------------------------------------------ records


@dataclass(frozen=True)
class Samples:
    """One sample series (per-dispatch durations, s) of a kernel.

    ``n``, ``mean``, ``std`` (population), ``min`` and ``max`` are exact over every
    dispatch of every merged run; ``median`` and ``mad`` are exact for one run and
    read off the pooled sketch once runs are merged. ``values`` are sorted order
    statistics at evenly spaced ranks (all samples while n <= MAX_SAMPLES), so
    ``values[i]`` is the quantile ``i / (len(values) - 1)``. ``run_medians`` are the
    latest runs' medians, oldest first.
    """

    n: int
    median: float
    mean: float
    std: float
    mad: float
    min: float
    max: float
    values: tuple[float, ...]
    run_medians: tuple[float, ...] = ()

    def quantile(self, p: float | np.ndarray) -> np.ndarray:
        values = np.asarray(self.values, dtype="float64")
        if len(values) == 1:
            return np.full(np.shape(p), values[0])
        return np.interp(p, np.linspace(0.0, 1.0, len(values)), values)


@dataclass(frozen=True)
class KernelBaseline:
    metrics: Mapping[str, float]  # every numeric metric of the kernel row, base units
    samples: Mapping[str, Samples] = field(default_factory=dict)  # "duration"
    runs: int = 1  # runs merged into this entry


@dataclass(frozen=True)
class Baseline:
    suite: str
    fingerprint: Mapping[str, str]
    kernels: Mapping[str, KernelBaseline]
    path: str | None = None

    def __post_init__(self) -> None:
        # Kernels are kept under their canonical key (perfcheck.kernelkey), so a rebuild
        # that adds "[clone .kd]" or a hash suffix keeps its baseline; files written
        # with raw names are migrated as they are read (and written keyed next time).
        if not isinstance(self.kernels, KernelMap):
            object.__setattr__(self, "kernels", KernelMap(self.kernels))

    def renamed(self, aliases: Mapping[str, str]) -> "Baseline":
        """The same baseline with the config's ``aliases`` (old name -> new name)
        applied: an old name's entry is found under the new name."""
        return replace(self, kernels=KernelMap(self.kernels, aliases))


@dataclass(frozen=True)
class Decision:
    passed: bool
    reference: float | None  # the threshold compared against (baseline x (1 + allowance) + absolute)
    observed: float | None
    baseline: float | None  # the stored value
    detail: str  # one line: the statistics behind the decision
    change: float | None = None  # observed / baseline - 1
    interval: tuple[float, float] | None = None  # 95% interval of observed / baseline
    clear: bool | None = None  # worse than the baseline beyond noise (None: exact or no noise estimate)


# ------------------------------------------------------------------ classification

# Theoretical figures from launch resources: exact although the unit is a percentage.
_EXACT_NAMES = {"occupancy_pct"}
# Measured by counters, not timing-derived, and not exact either: sampled occupancy;
# the clocks a kernel ran at, and the roofs scaled to them (attainable, peak_gips:
# theoretical figures x the profiled clock, docs/clocks.md), which vary in the last
# digits from run to run (ncu's base-clock rate: 764,999,990 then 764,999,998 Hz).
_MEASURED_NAMES = {"achieved_occupancy_pct", "sm_clock", "mem_clock", "attainable", "peak_gips"}


# Per-second quantities the unit registry leaves unitless, and roofline_pct
# (flop_rate / attainable).
_RATE_NAMES = {"gips", "instruction_rate", "roofline"}


def _timing_derived(metric: str) -> bool:
    """Durations and anything divided by one: bandwidths, rates, their % of a ceiling."""
    if metric in _EXACT_NAMES or metric in _MEASURED_NAMES or metric.startswith("raw."):
        return False
    if metric.startswith("duration"):
        return True
    base = metric[: -len("_pct")] if metric.endswith("_pct") else metric
    return base in _RATE_NAMES or base.endswith("_rate") or metric_unit(base).endswith("/s")


def is_exact(metric: str) -> bool:
    """Bytes, instructions, FLOPs, registers, LDS, scratch, calls, grid, theoretical
    occupancy, arithmetic intensity: deterministic for a given build and input, so
    compared with a relative tolerance of 1e-9 plus the user's allowance. Timings,
    bandwidths, rates and measured counters (raw.*) are not."""
    if metric.startswith("raw.") or metric in _MEASURED_NAMES:
        return False
    return not _timing_derived(metric)


# ------------------------------------------------------------------ fingerprint and paths

FINGERPRINT_KEYS = ("device", "arch", "tool", "tool_version")


def _distinct(values: Sequence[str | None]) -> str:
    seen = sorted({str(v).strip() for v in values if v is not None and str(v).strip()})
    return "+".join(seen) if seen else _UNKNOWN


def fingerprint(analysis: "Analysis") -> dict[str, str]:
    """The machine and profiler a run measured: GPU device and arch (the resolved
    target wins over what files wrote, so spellings of one GPU agree), profiler
    family and version. No hostname, path or date: two CI runners with the same GPU
    and tool share a baseline; a different GPU or profiler version never does."""
    target = analysis.target
    sources = analysis.sources
    if target is not None and target.device is not None:
        device = target.device.name
    else:
        device = _distinct([s.device for s in sources])
    arch = target.arch.name if target is not None else _distinct([s.arch for s in sources])
    doc = {
        "device": device,
        "arch": arch,
        "tool": _distinct([s.tool for s in sources]),
        "tool_version": _distinct([s.tool_version for s in sources]),
    }
    # ncu's clock control of a perfcheck run: times at the base clock and at boost
    # clocks are different machines as far as a baseline goes. Only when recorded, so
    # the baselines of other tools and of ingested files keep their fingerprint.
    if any(s.clock_control for s in sources):
        doc["clock_control"] = _distinct([s.clock_control for s in sources])
    return doc


def _slug(text: str, *, lower: bool) -> str:
    text = text.lower() if lower else text
    slug = re.sub(r"[^A-Za-z0-9._+]+", "-", text).strip("-.")
    return slug or "default"


def baseline_path(baseline_dir: str | Path, suite: str, fingerprint: Mapping[str, str]) -> Path:
    """``<baseline_dir>/<suite>/<device>_<arch>_<tool>-<version>.json`` (unknown parts
    left out), e.g. ``baselines/stencil/mi100_gfx908_rocprofv3-1.0.0.json``."""
    parts = [fingerprint.get("device", _UNKNOWN), fingerprint.get("arch", _UNKNOWN)]
    tool, version = fingerprint.get("tool", _UNKNOWN), fingerprint.get("tool_version", _UNKNOWN)
    parts.append(tool if version == _UNKNOWN else f"{tool}-{version}")
    name = "_".join(_slug(p, lower=True) for p in parts if p and p != _UNKNOWN) or "unknown-machine"
    return Path(baseline_dir) / _slug(suite, lower=False) / f"{name[:120]}.json"


def mismatch(baseline: Baseline, fingerprint: Mapping[str, str]) -> str | None:
    """Why ``baseline`` must not be compared with a run on ``fingerprint`` (None: it may)."""
    keys = sorted(set(baseline.fingerprint) | set(fingerprint))
    diffs = [
        f"{k} {baseline.fingerprint.get(k, _UNKNOWN)!r} != {fingerprint.get(k, _UNKNOWN)!r}"
        for k in keys
        if baseline.fingerprint.get(k, _UNKNOWN) != fingerprint.get(k, _UNKNOWN)
    ]
    if not diffs:
        return None
    where = baseline.path or "the baseline"
    return f"{where} was recorded on another machine or profiler ({', '.join(diffs)}); not compared"


def fingerprint_changes(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """``tool_version '1.0.0' -> '1.1.0', arch 'gfx90a' -> 'gfx942'``: the fields that
    differ between a stored baseline's fingerprint and this run's ("" when none)."""
    keys = [k for k in FINGERPRINT_KEYS if k in old or k in new]
    keys += sorted(k for k in set(old) | set(new) if k not in FINGERPRINT_KEYS)
    return ", ".join(
        f"{k} {old.get(k, _UNKNOWN)!r} \u2192 {new.get(k, _UNKNOWN)!r}"
        for k in keys if old.get(k, _UNKNOWN) != new.get(k, _UNKNOWN)
    )


def nearest_other(baseline_dir: str | Path, suite: str, fingerprint: Mapping[str, str]) -> Baseline | None:
    """Of the suite's baselines recorded under other fingerprints, the one that differs
    from ``fingerprint`` in the fewest fields (a profiler update: only tool_version),
    to say what changed; unreadable ones are passed over."""
    best: tuple[int, str, Baseline] | None = None
    for path in other_baselines(baseline_dir, suite, fingerprint):
        try:
            found = load(path)
        except InputError:
            continue
        if found is None:
            continue
        keys = set(found.fingerprint) | set(fingerprint)
        score = sum(found.fingerprint.get(k, _UNKNOWN) != fingerprint.get(k, _UNKNOWN) for k in keys)
        if best is None or (score, str(path)) < best[:2]:
            best = (score, str(path), found)
    return best[2] if best is not None else None


def other_baselines(baseline_dir: str | Path, suite: str, fingerprint: Mapping[str, str]) -> list[Path]:
    """Baselines of ``suite`` recorded on other machines: a run that finds none for its
    own fingerprint but some of these should warn that it did not compare across hardware."""
    mine = baseline_path(baseline_dir, suite, fingerprint)
    folder = mine.parent
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if p != mine)


@dataclass(frozen=True)
class Lookup:
    path: Path  # where this machine's baseline of the suite lives (to record or update)
    baseline: Baseline | None  # None: nothing to compare with on this machine
    warnings: tuple[str, ...] = ()  # one line each, for the run's output


def lookup(baseline_dir: str | Path, suite: str, fingerprint: Mapping[str, str]) -> Lookup:
    """This machine's baseline of ``suite``, never another's: a file at this
    fingerprint's path whose stored fingerprint differs (a slug collision, a copied
    file) is not compared, and baselines recorded only on other machines are named
    in a warning so a silent re-record on new hardware cannot pass unnoticed."""
    path = baseline_path(baseline_dir, suite, fingerprint)
    found = load(path)
    warnings: list[str] = []
    if found is not None:
        why = mismatch(found, fingerprint)
        if why is None:
            return Lookup(path, found)
        warnings.append(why)
    others = other_baselines(baseline_dir, suite, fingerprint)
    if others:
        machine = ", ".join(f"{k}={v}" for k, v in sorted(fingerprint.items()))
        warnings.append(
            f"no baseline of suite {suite!r} for this machine ({machine}); "
            f"baselines of other machines not compared: {', '.join(str(p) for p in others)}"
        )
    return Lookup(path, None, tuple(warnings))


# ------------------------------------------------------------------ building


def summarise(samples: np.ndarray | Sequence[float] | Samples) -> Samples:
    """Exact statistics of one run's samples (NaN and non-positive values dropped)
    plus a bounded sketch of sorted order statistics at evenly spaced ranks."""
    if isinstance(samples, Samples):
        return samples
    x = np.asarray(samples, dtype="float64").ravel()
    x = x[np.isfinite(x) & (x > 0)]
    n = len(x)
    if n == 0:
        raise ValueError("no samples")
    if n <= MAX_SAMPLES:
        values = np.sort(x)
    else:
        ranks = np.unique(np.rint(np.linspace(0, n - 1, MAX_SAMPLES)).astype(np.int64))
        values = np.partition(x, ranks)[ranks]
    median = float(np.median(x))
    return Samples(
        n=n,
        median=median,
        mean=float(x.mean()),
        std=float(x.std()),
        mad=float(np.median(np.abs(x - median))),
        min=float(values[0]),
        max=float(values[-1]),
        values=tuple(float(v) for v in values),
        run_medians=(median,),
    )


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def from_analysis(suite: str, analysis: "Analysis") -> Baseline:
    """One run's baseline: every numeric metric of each kernel row (missing ones left
    out) and a summary of its dispatch durations."""
    table = analysis.kernels
    kernels: dict[str, KernelBaseline] = {}
    if len(table):
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        numeric = [
            c for c in table.columns if c != "kernel" and is_numeric_dtype(table[c]) and not is_bool_dtype(table[c])
        ]
        # A per-kernel table: a few hundred rows at most, one entry each.
        for row in table[["kernel", *numeric]].to_dict("records"):
            name = str(row.pop("kernel"))
            metrics = {k: v for k, v in ((k, _number(v)) for k, v in row.items()) if v is not None}
            samples = analysis.duration_samples.get(name)
            series = {}
            if samples is not None and np.any(np.isfinite(samples) & (np.asarray(samples) > 0)):
                series["duration"] = summarise(samples)
            kernels[name] = KernelBaseline(metrics=metrics, samples=series, runs=1)
    return Baseline(suite=suite, fingerprint=fingerprint(analysis), kernels=kernels, path=None)


def _merge_samples(old: Samples, new: Samples) -> Samples:
    n = old.n + new.n
    mean = (old.n * old.mean + new.n * new.mean) / n
    var = (old.n * (old.std**2 + (old.mean - mean) ** 2) + new.n * (new.std**2 + (new.mean - mean) ** 2)) / n
    runs = (old.run_medians + new.run_medians)[-MAX_RUN_MEDIANS:]
    a, b = np.asarray(old.values), np.asarray(new.values)
    if len(a) == old.n and len(b) == new.n and n <= MAX_SAMPLES:  # both complete: the exact union
        values = np.sort(np.concatenate([a, b]))
        weights = np.ones(len(values))
        median = float(np.median(values))
        mad = float(np.median(np.abs(values - median)))
    else:
        # Pool the sketches: each point stands for n/len(values) dispatches of its run.
        values = np.concatenate([a, b])
        weights = np.concatenate([np.full(len(a), old.n / len(a)), np.full(len(b), new.n / len(b))])
        order = np.argsort(values, kind="stable")
        values, weights = values[order], weights[order]
        median = _weighted_quantile(values, weights, np.array([0.5]))[0]
        dev = np.abs(values - median)
        dorder = np.argsort(dev, kind="stable")
        mad = _weighted_quantile(dev[dorder], weights[dorder], np.array([0.5]))[0]
        if len(values) > MAX_SAMPLES:
            values = _weighted_quantile(values, weights, np.linspace(0.0, 1.0, MAX_SAMPLES))
    return Samples(
        n=n,
        median=float(median),
        mean=float(mean),
        std=float(math.sqrt(max(var, 0.0))),
        mad=float(mad),
        min=min(old.min, new.min),
        max=max(old.max, new.max),
        values=tuple(float(v) for v in values),
        run_medians=runs,
    )


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Sorted ``values`` with ``weights``: the value whose cumulative weight first
    reaches each probability (an observed value, so it keeps its short repr)."""
    cum = np.cumsum(weights)
    cum /= cum[-1]
    idx = np.searchsorted(cum, p - 1e-12, side="left")
    return values[np.clip(idx, 0, len(values) - 1)]


def merge(old: Baseline, new: Baseline) -> Baseline:
    """Accumulate another run of the same suite on the same machine: run counts add,
    timing-derived metrics become the mean over runs, exact ones take the new value,
    duration samples pool and remember each run's median (the run-to-run spread
    that makes later decisions noise-aware). Kernels only in ``old`` are kept."""
    if old.suite != new.suite:
        raise UsageError(f"cannot merge baselines of suites {old.suite!r} and {new.suite!r}")
    why = mismatch(old, new.fingerprint)
    if why:
        raise UsageError(f"cannot merge: {why}")
    kernels = dict(old.kernels)
    for name, cur in new.kernels.items():
        prev = kernels.get(name)
        if prev is None:
            kernels[name] = cur
            continue
        runs = prev.runs + cur.runs
        metrics = dict(prev.metrics)
        for metric, value in cur.metrics.items():
            if metric in prev.metrics and not is_exact(metric):
                metrics[metric] = (prev.metrics[metric] * prev.runs + value * cur.runs) / runs
            else:
                metrics[metric] = value
        samples = dict(prev.samples)
        for key, series in cur.samples.items():
            samples[key] = _merge_samples(prev.samples[key], series) if key in prev.samples else series
        kernels[name] = KernelBaseline(metrics=metrics, samples=samples, runs=runs)
    return Baseline(suite=new.suite, fingerprint=dict(new.fingerprint), kernels=kernels, path=old.path or new.path)


# ------------------------------------------------------------------ JSON writing


def _dump(value: Any, indent: int = 0) -> str:
    """Deterministic JSON: sorted keys, indent 2, floats by repr (shortest exact),
    integral values as integers, lists of numbers wrapped about 8 to a line so a
    256-value sketch is 32 lines of diff, not 256."""
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [
            f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {_dump(value[k], indent + 2)}"
            for k in sorted(value, key=str)
        ]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            words = [_number_text(v) for v in value]
            lines, line = [], ""
            for word in words:
                if line and len(line) + len(word) + 2 > 96:
                    lines.append(line + ",")
                    line = ""
                line = f"{line}, {word}" if line else word
            lines.append(line)
            return "[\n" + "\n".join(inner + ln for ln in lines) + "\n" + pad + "]"
        return "[\n" + ",\n".join(inner + _dump(v, indent + 2) for v in value) + "\n" + pad + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _number_text(value)
    return json.dumps(str(value), ensure_ascii=False)


def _number_text(value: float) -> str:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"non-finite number {number!r} in a baseline")
    if number.is_integer() and abs(number) < 2**53:
        return str(int(number))
    return repr(number)


def _to_json(baseline: Baseline) -> dict[str, Any]:
    kernels = {}
    for name, entry in baseline.kernels.items():
        samples = {
            key: {
                "n": s.n, "median": s.median, "mean": s.mean, "std": s.std, "mad": s.mad,
                "min": s.min, "max": s.max, "values": list(s.values), "run_medians": list(s.run_medians),
            }
            for key, s in entry.samples.items()
        }
        kernels[name] = {"metrics": dict(entry.metrics), "runs": entry.runs, "samples": samples}
    return {
        "format_version": FORMAT_VERSION,
        "written_by": f"perfcheck {__version__}",
        "suite": baseline.suite,
        "fingerprint": dict(baseline.fingerprint),
        "kernels": kernels,
    }


def render(baseline: Baseline) -> str:
    """The exact text ``write`` puts in the file."""
    return _dump(_to_json(baseline)) + "\n"


def write(path: str | Path, baseline: Baseline) -> bool:
    """Write ``baseline`` to ``path`` atomically: a temp file in the same directory,
    flushed and fsync-ed, then ``os.replace`` (and the directory fsync-ed), so a
    reader or a killed writer sees the old complete file or the new one, never a
    part. Returns False and leaves the file (and its mtime) alone when it already
    holds exactly this text. Temp files of killed writers in the folder are
    removed first, also when nothing changes; they are named ``.<file>.<pid>.<random>.tmp``, so
    ``load`` and ``baselines/*/*.json`` globs never see them."""
    path = Path(path)
    text = render(baseline)
    # Killed writers' temp files go first, also when this write changes nothing.
    clean_stale_temps(path.parent)
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise InputError(path, f"cannot write the baseline ({exc.strerror or exc})") from None
    return True


@contextmanager
def folder_lock(folder: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (``flock`` on the directory itself, so no
    lock file is left among the baselines a team commits). Sessions on one host that
    write baselines of one folder take turns; where the platform or the file system
    has no such lock (Windows, some network file systems) the write goes on unlocked."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # NFS without flock: no lock, as before
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


def write_merged(path: str | Path, fresh: Baseline, *, ours: set[str], dropped: set[str] = frozenset(),
                 aliases: Mapping[str, str] | None = None) -> bool:
    """Write ``fresh`` to ``path`` without losing what another session wrote there since
    this one read it: under ``folder_lock``, the file is read again, and a baseline of
    the same machine keeps its kernels except ``dropped`` (the ones this session
    deliberately left out: an update of kernels no longer run), with this session's
    own kernels (``ours``) taken from ``fresh``. Two ``pytest --perf`` sessions
    recording one suite at once so keep both sessions' kernels, as the xdist workers
    of one session always did. A file of another machine is replaced, as before."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(path.parent):
        current = load(path)
        if current is not None and aliases:
            current = current.renamed(aliases)
        if current is not None and mismatch(current, fresh.fingerprint) is None:
            kernels = {k: v for k, v in current.kernels.items() if k not in dropped}
            kernels.update({k: v for k, v in fresh.kernels.items() if k in ours})
            fresh = replace(fresh, kernels=kernels)
        return write(path, fresh)


# ------------------------------------------------------------------ JSON reading


def _line_of(text: str, *keys: str) -> int | None:
    """1-based line of the last of ``keys`` found in order (each a JSON object key),
    so a structural error names the line a reviewer would edit."""
    pos, found = 0, None
    for key in keys:
        at = text.find(json.dumps(key, ensure_ascii=False) + ":", pos)
        if at < 0:
            at = text.find(json.dumps(key) + ":", pos)
        if at < 0:
            break
        pos, found = at, at
    return None if found is None else text.count("\n", 0, found) + 1


class _Reader:
    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text

    def fail(self, what: str, *keys: str) -> InputError:
        return InputError(
            self.path, what, line=_line_of(self.text, *keys) if keys else None,
            hint="fix it, or record a new baseline (perfcheck check --update-baseline)",
        )

    def number(self, value: Any, *keys: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(f"{keys[-1]!r} must be a number, not {json.dumps(value)[:40]}", *keys)
        return float(value)

    def obj(self, value: Any, *keys: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{keys[-1]!r} must be an object", *keys)
        return value

    def samples(self, value: Any, *keys: str) -> Samples:
        data = self.obj(value, *keys)
        missing = [k for k in ("n", "median", "mean", "std", "mad", "min", "max", "values") if k not in data]
        if missing:
            raise self.fail(f"sample series {keys[-1]!r} lacks {', '.join(missing)}", *keys)
        n = data["n"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise self.fail("'n' must be a positive integer", *keys, "n")
        lists = {}
        for name in ("values", "run_medians"):
            items = data.get(name, [])
            if not isinstance(items, list) or (name == "values" and not items):
                raise self.fail(f"{name!r} must be a non-empty list of numbers", *keys, name)
            lists[name] = tuple(self.number(v, *keys, name) for v in items)
        if len(lists["values"]) > n or list(lists["values"]) != sorted(lists["values"]):
            raise self.fail("'values' must be sorted and no more than 'n'", *keys, "values")
        stats = {k: self.number(data[k], *keys, k) for k in ("median", "mean", "std", "mad", "min", "max")}
        return Samples(n=n, values=lists["values"], run_medians=lists["run_medians"] or (stats["median"],), **stats)


def load(path: str | Path) -> Baseline | None:
    """The baseline at ``path``; None when there is none. Anything malformed is an
    InputError naming the file and line; a format_version this perfcheck does not
    read says which perfcheck wrote the file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a baseline file") from None
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(path, "is not UTF-8 text (binary or corrupted baseline)", line=line) from None
    if not text.strip():
        raise InputError(path, "is empty, not a baseline", line=1, hint="delete it and record a new baseline")
    try:
        data = json_loads(text, path, hint="delete it and record a new baseline")
    except json.JSONDecodeError as exc:
        raise InputError(
            path, f"is not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno,
            hint="fix it or delete it and record a new baseline (perfcheck check --update-baseline)",
        ) from None
    reader = _Reader(path, text)
    if not isinstance(data, dict) or "format_version" not in data:
        raise InputError(path, "is JSON but not a perfcheck baseline (no format_version)", line=1)
    version = data["format_version"]
    if version != FORMAT_VERSION:
        writer = data.get("written_by") or "an unknown perfcheck"
        raise InputError(
            path,
            f"baseline format_version {version!r}, written by {writer}; this is perfcheck {__version__}, "
            f"which reads format_version {FORMAT_VERSION}",
            line=_line_of(text, "format_version"),
            hint=f"use the perfcheck that wrote it, or re-record the baseline with perfcheck {__version__}",
        )
    suite = data.get("suite")
    if not isinstance(suite, str):
        raise reader.fail("'suite' must be a string", "suite")
    fp = reader.obj(data.get("fingerprint"), "fingerprint")
    if not all(isinstance(v, str) for v in fp.values()):
        raise reader.fail("fingerprint values must be strings", "fingerprint")
    kernels: dict[str, KernelBaseline] = {}
    for name, entry in reader.obj(data.get("kernels"), "kernels").items():
        keys = ("kernels", name)
        entry = reader.obj(entry, *keys)
        table = reader.obj(entry.get("metrics", {}), *keys, "metrics")
        metrics = {m: reader.number(v, *keys, "metrics", m) for m, v in table.items()}
        runs = entry.get("runs", 1)
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise reader.fail("'runs' must be a positive integer", *keys, "runs")
        samples = {
            key: reader.samples(series, *keys, "samples", key)
            for key, series in reader.obj(entry.get("samples", {}), *keys, "samples").items()
        }
        kernels[name] = KernelBaseline(metrics=metrics, samples=samples, runs=runs)
    return Baseline(suite=suite, fingerprint=dict(fp), kernels=kernels, path=str(path))


# ------------------------------------------------------------------ decisions


def _log_se_median(s: Samples) -> float | None:
    """Standard error of log(median) from the distribution-free interval of the
    median: order statistics at ranks n/2 -/+ z*sqrt(n)/2 (normal approximation of
    the binomial), evaluated on the sketch at the true n."""
    if s.n < MIN_SAMPLES:
        return None
    delta = Z / (2.0 * math.sqrt(s.n))
    lo, hi = s.quantile(np.array([max(0.0, 0.5 - delta), min(1.0, 0.5 + delta)]))
    if lo <= 0:
        return None
    return float(math.log(hi / lo) / (2.0 * Z))


def _log_se_mean(s: Samples) -> float | None:
    if s.n < MIN_SAMPLES or s.mean <= 0:
        return None
    return s.std / math.sqrt(s.n - 1) / s.mean


def _run_spread(s: Samples) -> float | None:
    medians = np.asarray(s.run_medians, dtype="float64")
    medians = medians[medians > 0]
    if len(medians) < 2:
        return None
    return float(np.std(np.log(medians), ddof=1))


_LAST_SUMMARY: list[Any] = [None, None]  # (array, Samples): one kernel's samples serve several expectations


def _summary_of(current: Any) -> Samples | None:
    if current is None:
        return None
    if isinstance(current, Samples):
        return current
    if _LAST_SUMMARY[0] is current:
        return _LAST_SUMMARY[1]
    try:
        summary = summarise(current)
    except ValueError:
        return None
    _LAST_SUMMARY[:] = [current, summary]  # holds the array, so its id cannot be reused
    return summary


def _noise(metric: str, base: KernelBaseline, current: Samples | None) -> tuple[float | None, str]:
    """Standard error of log(observed / baseline) for a timing-derived metric, and a
    description of where it came from; None when there is nothing to judge noise by."""
    series = base.samples.get("duration")
    se_of = _log_se_mean if metric in ("duration_mean", "duration_total") else _log_se_median
    se_base = se_of(series) if series is not None else None
    se_cur = se_of(current) if current is not None else se_base  # assume the baseline's noise
    spread = _run_spread(series) if series is not None and base.runs >= 2 else None
    n_cur = current.n if current is not None else None
    n_base = series.n if series is not None else None
    counts = f"{n_cur if n_cur is not None else '?'} vs {n_base if n_base is not None else '?'} dispatches"
    runs = f"baseline of {base.runs} run{'s' if base.runs != 1 else ''}"
    if spread is not None:
        # Across runs: the current run's median strays from the runs' centre by the
        # run-to-run spread (which contains its within-run noise) unless its own
        # within-run noise is larger; the centre (mean of all runs) by spread / sqrt(runs).
        var = max(spread**2, (se_cur or 0.0) ** 2) + spread**2 / base.runs
        return math.sqrt(var), f"{counts}, {runs}, run-to-run spread {100 * spread:.2g}%"
    if se_base is None or se_cur is None:
        return None, f"{counts}, {runs}"
    return math.sqrt(se_base**2 + se_cur**2), f"{counts}, {runs}"


def _literal(observed: float, relation: str, reference: float, tol: float) -> bool:
    if relation == "<=":
        return observed <= reference + tol
    if relation == "<":
        return observed < reference - tol
    if relation == ">=":
        return observed >= reference - tol
    if relation == ">":
        return observed > reference + tol
    if relation == "==":
        return abs(observed - reference) <= tol
    if relation == "!=":
        return abs(observed - reference) > tol
    raise UsageError(f"unknown relation {relation!r}")


def _pct(x: float) -> str:
    return f"{100 * x:+.3g}%"


def compare(
    metric: str,
    relation: str,
    allowance_fraction: float | None,
    allowance_absolute: float | None,
    current_value: float | None,
    current_samples: np.ndarray | Sequence[float] | Samples | None,
    kernel_baseline: KernelBaseline,
    *,
    exact: bool,
) -> Decision:
    """Judge ``metric RELATION baseline x (1 + allowance_fraction) + allowance_absolute``.

    Exact quantities: the literal comparison with a relative tolerance of 1e-9.
    Timing-derived ones: fail only when the literal comparison fails AND the 95%
    interval of observed/baseline lies entirely on the bad side of 1 (see the
    module docstring). Other measured quantities: literal, said in the detail.
    """
    current = _summary_of(current_samples)
    series = kernel_baseline.samples.get("duration")
    observed = current_value
    if (observed is None or not math.isfinite(observed)) and metric == "duration" and current is not None:
        observed = current.median
    stored = kernel_baseline.metrics.get(metric)
    if stored is None and metric == "duration" and series is not None:
        stored = series.median
    if observed is None or not math.isfinite(observed) or stored is None:
        missing = "no current value" if stored is not None else f"the baseline has no {metric}"
        return Decision(False, None, observed, stored, f"{missing}: nothing to compare")
    fraction = allowance_fraction or 0.0
    reference = stored * (1.0 + fraction) + (allowance_absolute or 0.0)
    change = observed / stored - 1.0 if stored != 0 else None
    said = f"{_pct(change)} vs baseline" if change is not None else f"{observed!r} vs baseline 0"
    if exact:
        tol = EXACT_TOLERANCE * max(abs(reference), abs(stored))
        ok = _literal(observed, relation, reference, tol)
        return Decision(ok, reference, observed, stored, f"{said}; exact quantity (relative tolerance 1e-9)", change)
    ok = _literal(observed, relation, reference, 0.0)
    if not _timing_derived(metric):
        detail = f"{said}; no dispatch samples for {metric}: compared directly"
        return Decision(ok, reference, observed, stored, detail, change)
    se, basis = _noise(metric, kernel_baseline, current)
    if se is None or stored <= 0 or observed <= 0:
        why = "" if se is not None else f" (fewer than {MIN_SAMPLES} dispatch samples and one baseline run)"
        detail = f"{said}; noise unknown{why}: compared directly [{basis}]"
        return Decision(ok, reference, observed, stored, detail, change)
    log_ratio = math.log(observed / stored)
    interval = (math.exp(log_ratio - Z * se), math.exp(log_ratio + Z * se))
    worse_lower = relation in ("<=", "<")  # lower is better: worse means a larger value
    if relation in ("==", "!="):
        target = reference / stored
        clear = not (interval[0] <= target <= interval[1])
    else:
        clear = interval[0] > 1.0 if worse_lower else interval[1] < 1.0
    ci = f"95% CI {_pct(interval[0] - 1)} to {_pct(interval[1] - 1)}"
    if relation == "!=":
        passed, verdict = ok, "compared directly"
    elif ok:
        passed, verdict = True, "within the allowance"
    elif clear:
        passed, verdict = False, "beyond the allowance and clearly worse than the noise"
    else:
        passed, verdict = True, "beyond the allowance but within the noise: not a clear regression"
    return Decision(passed, reference, observed, stored, f"{said} ({ci}; {basis}): {verdict}", change, interval, clear)


# ------------------------------------------------------------------ what an update changed


@dataclass(frozen=True)
class MetricChange:
    metric: str
    old: float | None  # None: the old baseline had no value
    new: float | None  # None: this run has none


@dataclass(frozen=True)
class KernelChange:
    """What rewriting a baseline changes for one kernel: ``added``, ``removed`` or
    ``changed`` (``metrics``: the watched metrics that moved; ``others``: how many
    further metrics moved, left out so the account stays readable)."""

    kernel: str
    status: str
    metrics: tuple[MetricChange, ...] = ()
    others: int = 0


def changes(old: Baseline | None, new: Baseline, watched: Mapping[str, Sequence[str]] | None = None) -> list[KernelChange]:
    """Per kernel and metric, old -> new, of replacing ``old`` by ``new`` (for the review
    of the baseline diff). ``watched``: kernel -> the metrics its checks use; those are
    listed one by one (every changed metric when None), the rest only counted."""
    before = old.kernels if old is not None else {}
    out: list[KernelChange] = []
    for kernel in sorted(set(before) | set(new.kernels)):
        if kernel not in before:
            out.append(KernelChange(kernel, "added"))
            continue
        if kernel not in new.kernels:
            out.append(KernelChange(kernel, "removed"))
            continue
        a, b = before[kernel].metrics, new.kernels[kernel].metrics
        moved = [m for m in sorted(set(a) | set(b)) if a.get(m) != b.get(m)]
        shown = moved if watched is None else [m for m in moved if m in watched.get(kernel, ())]
        if moved:
            out.append(KernelChange(kernel, "changed", tuple(MetricChange(m, a.get(m), b.get(m)) for m in shown),
                                    len(moved) - len(shown)))
    return out
