"""Machine-readable documents. Numbers stay in base units; ``units`` says which."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from perfcheck.model import Oddity, Peaks, Source
from perfcheck.schema import METRIC_UNITS, PEAK_UNITS


def _number(value: object) -> float | int | None:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    as_float = float(value)  # type: ignore[arg-type]
    return int(as_float) if as_float.is_integer() and abs(as_float) < 2**53 else as_float


def inspect_document(sources: Sequence[Source], summary: pd.DataFrame, oddities: Sequence[Oddity]) -> dict:
    metric_columns = [c for c in summary.columns if c not in ("kernel", "calls")]
    kernels = []
    for record in summary.to_dict("records"):
        kernels.append(
            {
                "kernel": str(record["kernel"]),
                "calls": int(record["calls"]),
                "metrics": {c: _number(record[c]) for c in metric_columns},
            }
        )
    return {
        "profiles": [s.as_dict() for s in sources],
        "units": {c: METRIC_UNITS.get(c, "") for c in ["calls", *metric_columns]},
        "kernels": kernels,
        "warnings": [{"path": o.path, "message": o.what, "count": o.count} for o in oddities],
    }


def peaks_document(peaks: Peaks) -> dict:
    return {
        "peaks": {k: _number(v) for k, v in sorted(peaks.values.items())},
        "units": {k: PEAK_UNITS.get(k, "") for k in sorted(peaks.values)},
        "details": [{"source": d.source, "name": d.name, "value": _number(d.value), "unit": d.unit} for d in peaks.details],
        "sources": [s.as_dict() for s in peaks.sources],
        "warnings": [{"path": o.path, "message": o.what, "count": o.count} for o in peaks.oddities],
    }
