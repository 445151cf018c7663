"""The JSON results file of a check run, and the small pieces every check report
shares: atomic writes, the device a suite ran on, the expected/change figures of a
check.

The document (``format_version`` 1)::

    {"format_version": 1,
     "suites": {name: {"target": {...}, "profiles": [...], "ceilings": [...],
                       "baseline": {"path": ..., "action": "compared|recorded|updated"},
                       "checks": [{every Check field, "change_pct"}, ...],
                       "summary": {...}, "warnings": [...]}},
     "summary": {"total", "passed", "failed", "recorded", "error", "ok"}}

Added without a version change (older readers ignore them, ``perfcheck history add``
imports files without them): a top-level ``"run": {"id", "time", "time_iso", "commit",
"branch", "ci": {"system", "job", "url"}, "host"}`` and per suite ``"fingerprint"``,
``"machine"``, ``"measurements": {kernel: {metric: value}}``, ``"samples": {kernel:
{"n", "median", "spread"}}`` (``perfcheck.history.runs``) and ``"labels": {kernel:
{"occupancy_limiter": "lds", "bound": "memory", ...}}`` (read by ``perfcheck compare``).

Numbers are in base units (each check names its ``unit``); NaN becomes null so
the file is strict JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.atomicfile import write_atomic
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, Check
from perfcheck.units import format_value

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis

FORMAT_VERSION = 1

# What happened to a suite's baseline file in this run.
COMPARED, RECORDED_ACTION, UPDATED = "compared", "recorded", "updated"


@dataclass(frozen=True)
class BaselineStatus:
    """The baseline file of one suite and what this run did with it."""

    path: str | None
    action: str  # COMPARED | RECORDED_ACTION | UPDATED

    def as_dict(self) -> dict[str, str | None]:
        return {"path": self.path, "action": self.action}


# --- shared by the check reports -----------------------------------------------------


def device_label(analysis: "Analysis | None") -> str:
    """"AMD Instinct MI100" from the arch database, else what the profile says
    ("MI200 (gfx90a)"), else the arch, else "unknown device"."""
    if analysis is None:
        return "unknown device"
    target = analysis.target
    if target is not None and target.device is not None:
        return target.device.display_name
    device = next((s.device for s in analysis.sources if s.device), None)
    arch = target.arch.name if target is not None else next((s.arch for s in analysis.sources if s.arch), None)
    if device and arch:
        return f"{device} ({arch})"
    return device or arch or "unknown device"


def devices_label(analyses: Mapping[str, "Analysis"] | None) -> str:
    """The distinct devices of several suites, in suite order: "AMD Instinct MI100, NVIDIA A100 40GB"."""
    labels = list(dict.fromkeys(device_label(a) for a in (analyses or {}).values()))
    return ", ".join(labels) or "unknown device"


def change_pct(check: Check) -> float | None:
    """Relative change of the observed value against the stored baseline, in percent."""
    if check.observed is None or check.baseline is None or not _finite(check.observed) or not _finite(check.baseline):
        return None
    if check.baseline == 0:
        return None
    return (check.observed - check.baseline) / abs(check.baseline) * 100.0


def observed_text(check: Check) -> str:
    return format_value(check.observed, check.unit)


def expected_text(check: Check) -> str:
    """"<= 2.803 ms": the relation and the threshold actually compared against."""
    if ".." in check.relation:  # two-sided ("1 ms <= duration <= 2 ms"): both bounds are in the text
        return check.expression
    if check.reference is None:
        return "-"
    return f"{check.relation} {format_value(check.reference, check.unit)}"


def baseline_text(check: Check) -> str:
    return format_value(check.baseline, check.unit) if check.baseline is not None else "-"


def change_text(check: Check) -> str:
    change = change_pct(check)
    return "-" if change is None else f"{change:+.1f}%"


def figures_line(check: Check) -> str:
    """One line with every figure of a check, values with their units:
    "duration: observed 2.936 ms, expected <= 2.803 ms, baseline 2.67 ms (change +10.0%)".
    Reports that can show a single line (a JUnit failure message) use it so a
    reader sees observed, expected, baseline and units without opening a file."""
    text = f"{check.metric}: observed {observed_text(check)}, expected {expected_text(check)}"
    if check.baseline is not None:
        text += f", baseline {baseline_text(check)}"
        if change_pct(check) is not None:  # none against a zero baseline: no "(change -)"
            text += f" (change {change_text(check)})"
    elif check.origin == "baseline":
        text += ", baseline none stored"
    if check.diagnosis:
        text += f"; why: {check.diagnosis}"
    return text


def source_path(check: Check) -> str | None:
    """Where the expectation was declared, as CI tools want it: relative to the working
    directory (the repository root in CI) when inside it, with forward slashes."""
    if not check.source_file:
        return None
    path = Path(check.source_file)
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(Path.cwd().resolve())
        except (ValueError, OSError):
            pass
    return path.as_posix()


def count_outcomes(checks: Iterable[Check]) -> dict[str, int | bool]:
    counts = {PASSED: 0, FAILED: 0, RECORDED: 0, ERROR: 0}
    total = 0
    for check in checks:
        counts[check.outcome] = counts.get(check.outcome, 0) + 1
        total += 1
    return {"total": total, **counts, "ok": counts[FAILED] == 0 and counts[ERROR] == 0}


def inferred_action(checks: Sequence[Check]) -> str | None:
    """What happened to a suite's baseline when the caller did not say: recorded
    when a baseline check recorded its value, compared when one was compared."""
    relative = [c for c in checks if c.origin == "baseline"]
    if not relative:
        return None
    return RECORDED_ACTION if any(c.outcome == RECORDED for c in relative) else COMPARED


# --- the JSON results file -----------------------------------------------------------


def results_schema_text() -> str:
    """The published JSON Schema of the results file (``perfcheck schema results``),
    shipped in the package as ``perfcheck/report/schemas/results.schema.json``."""
    from importlib.resources import files

    return files("perfcheck.report").joinpath("schemas/results.schema.json").read_text(encoding="utf-8")


def _number(value: object) -> object:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        as_float = float(value)
        if not math.isfinite(as_float):
            return None
        return int(as_float) if isinstance(value, int) else as_float
    try:  # numpy scalars
        return _number(value.item())  # type: ignore[attr-defined]
    except AttributeError:
        return value


def _finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _check_dict(check: Check) -> dict[str, object]:
    doc = {k: _number(v) for k, v in asdict(check).items()}
    doc["passed"] = check.passed
    doc["change_pct"] = _number(change_pct(check))
    return doc


def _analysis_dict(analysis: "Analysis") -> dict[str, object]:
    target = analysis.target
    return {
        "target": {
            "arch": target.arch.name if target is not None else None,
            "device": target.device.display_name if target is not None and target.device is not None else None,
            "label": device_label(analysis),
            "origin": analysis.target_origin,
        },
        "profiles": [s.as_dict() for s in analysis.sources],
        "ceilings": [
            {**c.as_dict(), "value": _number(c.value)} for c in analysis.ceilings.values()
        ],
        "warnings": [{"path": o.path, "message": o.what, "count": o.count} for o in analysis.oddities],
    }


def results_document(
    suites: Mapping[str, Sequence[Check]],
    *,
    analyses: Mapping[str, "Analysis"] | None = None,
    baselines: Mapping[str, BaselineStatus] | None = None,
    run: Mapping[str, object] | None = None,
    extras: Mapping[str, Mapping[str, object]] | None = None,
) -> dict[str, object]:
    """The results file as a dict (see the module docstring)."""
    analyses = analyses or {}
    baselines = baselines or {}
    out: dict[str, object] = {}
    for name, checks in suites.items():
        analysis = analyses.get(name)
        entry: dict[str, object] = (
            _analysis_dict(analysis)
            if analysis is not None
            else {"target": None, "profiles": [], "ceilings": [], "warnings": []}
        )
        status = baselines.get(name)
        if status is None:
            action = inferred_action(checks)
            status = BaselineStatus(None, action) if action else None
        entry["baseline"] = status.as_dict() if status is not None else None
        entry["checks"] = [_check_dict(c) for c in checks]
        entry["summary"] = count_outcomes(checks)
        entry.update((extras or {}).get(name, {}))
        out[name] = entry
    document: dict[str, object] = {
        "format_version": FORMAT_VERSION,
        "suites": out,
        "summary": count_outcomes(c for checks in suites.values() for c in checks),
    }
    if run is not None:
        document["run"] = dict(run)
    return document


def write_results(
    path: str | Path,
    suites: Mapping[str, Sequence[Check]],
    *,
    analyses: Mapping[str, "Analysis"] | None = None,
    baselines: Mapping[str, BaselineStatus] | None = None,
    run: Mapping[str, object] | None = None,
    extras: Mapping[str, Mapping[str, object]] | None = None,
) -> Path:
    """Write the JSON results file atomically (sorted keys, indented, newline at the end)."""
    return write_document(path, results_document(suites, analyses=analyses, baselines=baselines, run=run,
                                                 extras=extras))


def write_document(path: str | Path, document: Mapping[str, object]) -> Path:
    """Write a results document (``results_document``) as the JSON results file."""
    text = json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"
    return write_atomic(path, text)
