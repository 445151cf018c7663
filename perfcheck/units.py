"""Formatting of base-unit values (and long names) for people (the units themselves
are registered in ``perfcheck.schema``).

On the ground floor because the check records carry their messages already written
(``expect`` and the history gate say "2.671 ms > 2.5 ms") as well as the reports
rendering them; values stay in base units everywhere else."""

from __future__ import annotations

import math

_SCALES: dict[str, list[tuple[float, str]]] = {
    "s": [(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")],
    "B": [(1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB"), (1.0, "B")],
    "B/s": [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")],
    "FLOP/s": [(1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1.0, "FLOP/s")],
    # Clocks in MHz even above 1 GHz, as datasheets and profilers print them ("1410 MHz").
    "Hz": [(1e6, "MHz"), (1e3, "kHz"), (1.0, "Hz")],
    "OP/s": [(1e12, "TOP/s"), (1e9, "GOP/s"), (1e6, "MOP/s"), (1.0, "OP/s")],
    # the spellings the expectation grammar reads back (perfcheck.expect: Ginst/s ...)
    "inst/s": [(1e12, "Tinst/s"), (1e9, "Ginst/s"), (1e6, "Minst/s"), (1.0, "inst/s")],
}
# Plain counts: no unit word after the number.
_UNITLESS = ("", "count")


def format_value(value: float | int | None, unit: str) -> str:
    """``0.002671374, "s"`` -> ``"2.671 ms"``; counts get thousands separators; every
    other unit is kept after the number, whole or not (``4 cycles``, ``4.5 cycles``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit in _SCALES:
        for scale, label in _SCALES[unit]:
            if abs(value) >= scale or scale == _SCALES[unit][-1][0]:
                scaled = value / scale
                if unit == "B" and label == "B" and float(value).is_integer():
                    return f"{int(value):,} B"
                return f"{scaled:.4g} {label}"
    if unit == "%":
        return f"{value:.1f}%"
    suffix = "" if unit in _UNITLESS else f" {unit}"
    if float(value).is_integer():
        return f"{int(value):,}{suffix}"
    return f"{value:.4g}{suffix}"


def shorten_middle(text: str, width: int, ellipsis: str = "...") -> str:
    """``text`` cut to ``width`` characters in the middle: kernels of one template
    differ at the end of the name, so both ends are kept."""
    if len(text) <= width:
        return text
    tail = (width - len(ellipsis)) // 2
    return text[: width - len(ellipsis) - tail] + ellipsis + text[-tail:]
