"""The observed values of a check run for benchmark trackers.

* Bencher Metric Format (bencher.dev, "Bencher Metric Format"): a JSON object
  ``{benchmark: {measure: {"value": v, "lower_value": lo, "upper_value": hi}}}``.
  The benchmark is ``suite::kernel``; the measure is the metric's slug
  (``hbm-bw``), except the duration, which goes to Bencher's built-in ``latency``
  measure in nanoseconds as that measure expects; the bounds are the kernel's
  fastest and slowest dispatch where the profile has them. Other values are in
  perfcheck's base units (B/s, %, B, FLOP/s).
* github-action-benchmark (``tool: customSmallerIsBetter`` / ``customBiggerIsBetter``):
  a JSON list ``[{"name", "unit", "value", "extra"}]`` per direction. A metric
  checked with ``<=``/``<``/``==`` is smaller-is-better, one checked with ``>=``/``>``
  bigger-is-better; each tool reads its own file.

One value per suite x kernel x metric (two bounds on one metric observe one value);
checks that could not be evaluated have no value and are left out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from perfcheck.atomicfile import write_atomic
from perfcheck.model import Check

if TYPE_CHECKING:
    from perfcheck.suiterun import Run

_SMALLER = ("<=", "<", "==")


def _observed(checks: Iterable[Check]) -> dict[tuple[str, str, str], Check]:
    seen: dict[tuple[str, str, str], Check] = {}
    for check in checks:
        if check.observed is None or not math.isfinite(float(check.observed)):
            continue
        seen.setdefault((check.suite, check.kernel, check.metric), check)
    return seen


def _spreads(run: "Run | None") -> dict[tuple[str, str], tuple[float, float]]:
    """(suite, kernel) -> fastest and slowest dispatch in seconds, where the kernel
    table has both as finite numbers; built once from whole columns."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for suite_run in run.suites if run is not None else ():
        table = suite_run.analysis.kernels if suite_run.analysis is not None else None
        if table is None or not {"duration_min", "duration_max"} <= set(table.columns):
            continue
        lo = table["duration_min"].astype("float64").to_numpy()
        hi = table["duration_max"].astype("float64").to_numpy()
        both = np.isfinite(lo) & np.isfinite(hi)
        kernels = table["kernel"].astype(str).to_numpy()
        for kernel, low, high in zip(kernels[both], lo[both], hi[both]):
            out.setdefault((suite_run.name, kernel), (float(low), float(high)))
    return out


# Bencher's limits: a benchmark name up to 1024 characters, a measure slug up to 64.
MAX_BENCHMARK_CHARS = 1024


def _benchmark_name(suite: str, kernel: str) -> str:
    name = f"{suite}::{kernel}" if suite else kernel
    if len(name) <= MAX_BENCHMARK_CHARS:
        return name
    import hashlib

    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:12]
    return f"{name[: MAX_BENCHMARK_CHARS - 15]}...{digest}"


def bencher_document(checks: Sequence[Check], run: "Run | None" = None) -> dict[str, dict[str, dict[str, float]]]:
    doc: dict[str, dict[str, dict[str, float]]] = {}
    spreads = _spreads(run)
    for (suite, kernel, metric), check in sorted(_observed(checks).items()):
        name = _benchmark_name(suite, kernel)
        value = float(check.observed)  # type: ignore[arg-type]
        if metric == "duration":
            entry = {"value": value * 1e9}
            lo, hi = spreads.get((suite, kernel), (math.nan, math.nan))
            if lo <= value <= hi:  # NaN bounds compare false: no bounds
                entry.update(lower_value=lo * 1e9, upper_value=hi * 1e9)
            doc.setdefault(name, {})["latency"] = entry
        else:
            doc.setdefault(name, {})[metric.replace("_", "-")[:64]] = {"value": value}
    return doc


def github_benchmark_documents(checks: Sequence[Check]) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """(customSmallerIsBetter entries, customBiggerIsBetter entries)."""
    smaller: list[dict[str, object]] = []
    bigger: list[dict[str, object]] = []
    for (suite, kernel, metric), check in sorted(_observed(checks).items()):
        entry = {
            "name": f"{suite + ' / ' if suite else ''}{kernel} / {metric}",
            "unit": check.unit or "count",
            "value": float(check.observed),  # type: ignore[arg-type]
            "extra": f"{check.expression}: {check.outcome}",
        }
        (smaller if check.relation.split("..")[0] in _SMALLER else bigger).append(entry)
    return smaller, bigger


def _dump(document: object) -> str:
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_bencher(path: str | Path, run: "Run") -> Path:
    return write_atomic(path, _dump(bencher_document(run.checks, run)))


def bigger_path(path: str | Path) -> Path:
    """``perf/bench.json`` -> ``perf/bench-bigger.json``."""
    path = Path(path)
    return path.with_name(f"{path.stem}-bigger{path.suffix}")


def write_github_benchmark(path: str | Path, run: "Run") -> list[Path]:
    """FILE: the smaller-is-better values; FILE-bigger: the bigger-is-better ones."""
    smaller, bigger = github_benchmark_documents(run.checks)
    return [write_atomic(path, _dump(smaller)), write_atomic(bigger_path(path), _dump(bigger))]
