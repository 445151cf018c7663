"""Machine-readable documents. Numbers stay in base units; ``units`` says which."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from perfcheck.kernelkey import kernel_key
from perfcheck.model import PeakDetail, Peaks
from perfcheck.schema import PEAK_UNITS, metric_unit

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis


def _number(value: object) -> float | int | None:
    """A JSON number, or None (null) for a missing or non-finite value: JSON has no
    NaN or Infinity, and a strict parser refuses Python's ``NaN`` tokens."""
    if value is None or value is pd.NA:
        return None
    as_float = float(value)  # type: ignore[arg-type]
    if not math.isfinite(as_float):
        return None
    return int(as_float) if as_float.is_integer() and abs(as_float) < 2**53 else as_float


def inspect_document(analysis: "Analysis") -> dict:
    """``perfcheck inspect --json``: numbers under ``metrics`` (base units, see
    ``units``), text labels (``bound``, ``occupancy_limiter``) under ``labels``."""
    summary = analysis.kernels
    numeric = [c for c in summary.columns if c not in ("kernel", "calls") and pd.api.types.is_numeric_dtype(summary[c])]
    labels = [c for c in summary.columns if c not in ("kernel", "calls") and c not in numeric]
    kernels = []
    for record in summary.to_dict("records"):
        entry = {
            "kernel": str(record["kernel"]),
            "key": kernel_key(str(record["kernel"])),  # what baselines and history key on
            "calls": _number(record["calls"]),  # null when a statistics file gave no count
            "metrics": {c: _number(record[c]) for c in numeric},
        }
        if labels:
            entry["labels"] = {c: (None if pd.isna(record[c]) else str(record[c])) for c in labels}
        kernels.append(entry)
    target = analysis.target
    return {
        "profiles": [s.as_dict() for s in analysis.sources],
        "target": {
            "arch": target.arch.name if target else None,
            "device": target.device.name if target and target.device else None,
            "origin": analysis.target_origin,
        },
        "ceilings": [
            {"name": c.name, "value": _number(c.value), "unit": c.unit, "kind": c.kind, "source": c.source}
            for c in analysis.ceilings.values()
        ],
        "units": {c: metric_unit(c) for c in ["calls", *numeric]},
        "kernels": kernels,
        "warnings": [{"path": o.path, "message": o.what, "count": o.count} for o in analysis.oddities],
    }


def _detail(d: PeakDetail) -> dict:
    doc = {"source": d.source, "name": d.name, "value": _number(d.value), "unit": d.unit}
    if d.repeats is not None:  # perfcheck's own measurement: the spread of its repeats
        doc.update(median=_number(d.median), min=_number(d.minimum), max=_number(d.maximum), repeats=d.repeats)
    return doc


def peaks_document(peaks: Peaks) -> dict:
    return {
        "peaks": {k: _number(v) for k, v in sorted(peaks.values.items())},
        "units": {k: PEAK_UNITS.get(k, "") for k in sorted(peaks.values)},
        "details": [_detail(d) for d in peaks.details],
        "sources": [s.as_dict() for s in peaks.sources],
        "clocks": {k: _number(v) for k, v in sorted(peaks.clocks.items())},  # Hz the peaks were measured at
        "warnings": [{"path": o.path, "message": o.what, "count": o.count} for o in peaks.oddities],
    }
