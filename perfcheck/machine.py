"""Machine files: a device's empirical peaks, saved once, reused by ``--peaks``.

``perfcheck peaks FILE... --save baselines/machines/NAME.toml`` measures nothing
itself: it keeps what BabelStream, mixbench, ERT or rocprof-compute's roofline
benchmark reported, so later runs compare kernels with the peaks *that* machine
reached instead of datasheet figures. The file is TOML, meant to be reviewed in a
pull request like code::

    # perfcheck machine file: empirical peaks measured on one machine.
    format_version = 1

    [machine]
    arch = "gfx908"
    created-by = "perfcheck peaks"
    device = "mi100"
    name = "mulan"

    [clocks]                   # optional: the clocks the peaks were measured at
    sm_clock = 1502000000.0  # Hz

    [peaks]
    hbm_bw = 1075460000000.0  # B/s

    [[details]]
    name = "single precision bandwidth"
    source = "mixbench-log.txt"
    unit = "B/s"
    value = 1075460000000.0

A machine file written by ``perfcheck peaks measure`` also has a ``[fingerprint]``
table of strings saying what the peaks were measured on and with (CPU model,
usable CPUs, NumPy and BLAS versions and threads, GPU and CUDA library); no host
name, so machines of one kind share a file.

Keys are sorted and no timestamp is written, so saving the same peaks twice gives
the same bytes and a diff shows only what changed. Values are in base units
(B/s, FLOP/s, OP/s), written with Python's shortest round-trip float repr, so a
value read back is bit-identical. The writer is our own (TOML writing is not in the
standard library and the format is small); reading uses ``tomllib`` (``tomli``
before Python 3.11).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfcheck.atomicfile import write_atomic
from perfcheck.documents import toml_loads
from perfcheck.errors import InputError, UsageError
from perfcheck.model import PeakDetail, Peaks, Source
from perfcheck.schema import PEAK_UNITS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

FORMAT = "perfcheck-machine"
# The clocks a machine file may say its peaks were measured at ([clocks], Hz): the
# SM / shader clock and the memory clock. A profile that ran at another clock gets a
# warning; the measured figures are never scaled (docs/clocks.md).
CLOCKS = ("sm_clock", "mem_clock")
FORMAT_VERSION = 1
CREATED_BY = "perfcheck peaks"

__all__ = ["FORMAT", "FORMAT_VERSION", "Machine", "dumps", "machine_from_peaks", "read_machine", "write_machine"]


@dataclass(frozen=True)
class Machine:
    """A named machine: the device it is (when known) and the peaks measured on it.

    ``path`` is the file it was read from (None for a machine not yet saved)."""

    name: str
    device: str | None
    arch: str | None
    peaks: Peaks
    path: str | None = None
    # What the peaks were measured on and with (``perfcheck peaks measure``): plain
    # strings, written as the [fingerprint] table. Empty for ingested peaks.
    fingerprint: Mapping[str, str] = field(default_factory=dict)


# --- building --------------------------------------------------------------------


def machine_from_peaks(
    name: str, peaks: Peaks, device: str | None = None, *, fingerprint: Mapping[str, str] | None = None
) -> Machine:
    """The machine record ``perfcheck peaks --save`` writes.

    ``device`` may be a device name or alias, or an arch id, as ``--arch`` takes them
    (an unknown name raises the arch database's UsageError). Without it, the device is
    taken from the peaks files themselves when they name one the database knows
    (BabelStream and mixbench print the device); a name it does not know is kept as
    the file spelled it, with no arch.
    """
    if not name or not name.strip():
        raise UsageError("a machine needs a name (the machine file's name without .toml)")
    from perfcheck import arch as archdb

    arch_id: str | None = None
    if device is not None:
        target = archdb.lookup(device)
        arch_id = target.arch.name
        device = target.device.name if target.device is not None else None
    else:
        target = archdb.detect(peaks.sources)
        if target is not None:
            arch_id = target.arch.name
            device = target.device.name if target.device is not None else None
        if device is None:
            named = {s.device for s in peaks.sources if s.device}
            device = named.pop() if len(named) == 1 else None
    return Machine(name=name.strip(), device=device, arch=arch_id, peaks=peaks, path=None,
                   fingerprint=dict(fingerprint or {}))


# --- writing ---------------------------------------------------------------------

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _number(value: float, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"machine file: {what} must be a number, not {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"machine file: {what} is {value}; a peak must be a finite, positive number")
    # repr is the shortest string that reads back as the same double, and its forms
    # ("1075460000000.0", "1e+16", "2.5e-05") are all valid TOML floats.
    return repr(value)


def _count(value: object, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"machine file: {what} must be a positive whole number, not {value!r}")
    return str(value)


def _value(value: object, what: str) -> str:
    if isinstance(value, str):
        return _string(value)
    return _number(value, what)  # type: ignore[arg-type]


def _unit_comment(name: str) -> str:
    unit = PEAK_UNITS.get(name)
    return f"  # {unit}" if unit else ""


def dumps(machine: Machine) -> str:
    """The machine file's text (what ``write_machine`` writes)."""
    lines = [
        "# perfcheck machine file: empirical peaks measured on one machine.",
        "# Written by `perfcheck peaks --save`; values in base units. Use it with --peaks.",
        f"format_version = {FORMAT_VERSION}",
        "",
        "[machine]",
    ]
    table: dict[str, object] = {"name": machine.name, "created-by": CREATED_BY}
    if machine.device is not None:
        table["device"] = machine.device
    if machine.arch is not None:
        table["arch"] = machine.arch
    for key in sorted(table):
        lines.append(f"{_key(key)} = {_value(table[key], key)}")
    if machine.fingerprint:
        lines += ["", "[fingerprint]"]
        for key in sorted(machine.fingerprint):
            value = machine.fingerprint[key]
            if not isinstance(value, str):
                raise UsageError(f"machine file: fingerprint {key} must be a string, not {value!r}")
            lines.append(f"{_key(key)} = {_string(value)}")
    if machine.peaks.clocks:
        lines += ["", "[clocks]"]
        for name in sorted(machine.peaks.clocks):
            lines.append(f"{_key(name)} = {_number(machine.peaks.clocks[name], f'clock {name}')}  # Hz")
    lines += ["", "[peaks]"]
    for name in sorted(machine.peaks.values):
        lines.append(f"{_key(name)} = {_number(machine.peaks.values[name], f'peak {name}')}{_unit_comment(name)}")
    for detail in machine.peaks.details:
        entry: dict[str, object] = {"source": detail.source, "name": detail.name, "value": detail.value,
                                    "unit": detail.unit}
        # perfcheck's own measurements: the spread of the repeats behind the figure.
        entry.update({k: v for k, v in (("median", detail.median), ("min", detail.minimum),
                                         ("max", detail.maximum)) if v is not None})
        lines += ["", "[[details]]"]
        for key in sorted(entry):
            lines.append(f"{_key(key)} = {_value(entry[key], f'detail {detail.name!r} {key}')}")
        if detail.repeats is not None:
            lines.append(f"repeats = {_count(detail.repeats, f'detail {detail.name!r} repeats')}")
    return "\n".join(lines) + "\n"


def _relative_sources(machine: Machine, path: Path) -> Machine:
    """``machine`` with each detail's source that is a file on this machine written
    relative to the machine file's folder (``../runs/mixbench-log.txt``, '/'
    separated): the file is committed and read on other machines and checkouts,
    where an absolute path names someone else's home directory. Sources that are
    not files (``perfcheck peaks measure (...)``) stay as they are."""
    folder = path.resolve().parent
    details = []
    for detail in machine.peaks.details:
        source = Path(detail.source)
        if detail.source and source.exists():
            relative = Path(os.path.relpath(source.resolve(), folder)).as_posix()
            detail = replace(detail, source=relative)
        details.append(detail)
    return replace(machine, peaks=replace(machine.peaks, details=tuple(details)))


def write_machine(path: str | Path, machine: Machine) -> None:
    """Write ``machine`` to ``path`` atomically (the old file stays intact on failure);
    sources that are files are written relative to ``path``'s folder."""
    path = Path(path)
    text = dumps(_relative_sources(machine, path))  # every value is checked before any file is touched
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write machine file {path}: {exc.strerror or exc}") from None


# --- reading ---------------------------------------------------------------------

_AT = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)\s*$")
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def _syntax_error(path: Path, text: str, exc: Exception) -> InputError:
    """tomllib says where in its message: "... (at line 3, column 5)" or
    "... (at end of document)"; turn that into the file:line of our errors."""
    message = str(exc)
    match = _AT.search(message)
    line: int | None = None
    column: int | None = None
    if match:
        message = message[: match.start()]
        if match.group(1):
            line, column = int(match.group(1)), int(match.group(2))
        else:
            line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    return InputError(
        path, f"not valid TOML: {message}", line=line, column=column,
        hint="fix the file or write it again with `perfcheck peaks ... --save`",
    )


def _line_of(text: str, table: str | None, key: str, occurrence: int = 0) -> int | None:
    """File line of ``key = ...`` inside ``[table]`` (or the ``occurrence``-th
    ``[[table]]``; top level when table is None), for errors about values tomllib
    accepted as TOML but that make no sense as a machine file."""
    current: str | None = None
    seen = -1
    key_re = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            current = header.group(1)
            if current == table:
                seen += 1
            continue
        if current == table and (table is None or seen == occurrence) and key_re.match(line):
            return number
    return None


def read_machine(path: str | Path) -> Machine:
    """Read a machine file; anything malformed is an InputError naming the file and line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "no such file or directory") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a machine file") from None
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not raw.strip():
        raise InputError(path, "file is empty", hint="write it with `perfcheck peaks FILE... --save PATH`")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(path, "not UTF-8 text (a binary file?); a machine file is TOML", line=line) from None
    try:
        doc = toml_loads(text, path, hint="write it with `perfcheck peaks FILE... --save PATH`")
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(path, text, exc) from None
    if not text.endswith("\n"):
        # The writer ends every line with a newline. Without one the last line may be
        # cut off, and "hbm_bw = 10754" cut from "hbm_bw = 1075460000000.0" is still
        # valid TOML: a wrong number, so refuse rather than guess.
        raise InputError(
            path, "last line has no newline: the file may be cut off", line=text.count("\n") + 1,
            hint="check the file is complete (add a newline at its end if you edited it by hand)",
        )
    return _machine(path, text, doc)


def _bad(path: Path, what: str, line: int | None, column: str | None = None) -> InputError:
    return InputError(path, what, line=line, column=column, hint="a machine file is written by `perfcheck peaks ... --save`")


def _machine(path: Path, text: str, doc: Mapping[str, object]) -> Machine:
    version = doc.get("format_version")
    if version is None:
        raise _bad(path, "no format_version: not a perfcheck machine file", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise _bad(path, f"format_version must be an integer, not {version!r}", _line_of(text, None, "format_version"))
    if version > FORMAT_VERSION:
        raise InputError(
            path, f"format_version {version} is newer than this perfcheck reads ({FORMAT_VERSION})",
            line=_line_of(text, None, "format_version"), hint="upgrade perfcheck",
        )
    if version < 1:
        raise _bad(path, f"format_version {version} is not a machine file version", _line_of(text, None, "format_version"))

    table = doc.get("machine")
    if not isinstance(table, dict):
        raise _bad(path, "no [machine] table", None)
    strings: dict[str, str | None] = {}
    for key in ("name", "device", "arch"):
        value = table.get(key)
        if value is not None and not isinstance(value, str):
            raise _bad(path, f"[machine] {key} must be a string, not {value!r}", _line_of(text, "machine", key), key)
        strings[key] = value
    if not strings["name"]:
        raise _bad(path, "[machine] has no name", _nth_header(text, "machine", 0), "name")

    values = _numbers(path, text, doc, "peaks", "peak", sorted(PEAK_UNITS))

    details_table = doc.get("details", [])
    if not isinstance(details_table, list):
        raise _bad(path, "details must be an array of tables ([[details]])", _line_of(text, None, "details"))
    details: list[PeakDetail] = []
    for index, entry in enumerate(details_table):
        if not isinstance(entry, dict):
            raise _bad(path, "details must be an array of tables ([[details]])", None)
        for key in ("source", "name", "unit"):
            if not isinstance(entry.get(key), str):
                line = _line_of(text, "details", key, index) or _nth_header(text, "details", index)
                raise _bad(path, f"[[details]] entry {index + 1}: {key} must be a string, not {entry.get(key)!r}", line, key)
        line = _line_of(text, "details", "value", index) or _nth_header(text, "details", index)
        value = _finite(path, entry.get("value"), f"[[details]] entry {index + 1} value", line, "value")
        spread: dict[str, float] = {}
        for key in ("median", "min", "max"):
            if key in entry:
                at = _line_of(text, "details", key, index) or _nth_header(text, "details", index)
                spread[key] = _finite(path, entry[key], f"[[details]] entry {index + 1} {key}", at, key)
        repeats = entry.get("repeats")
        if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
            at = _line_of(text, "details", "repeats", index) or _nth_header(text, "details", index)
            raise _bad(path, f"[[details]] entry {index + 1} repeats must be a positive whole number, not {repeats!r}",
                       at, "repeats")
        source = entry["source"]
        beside = path.parent / source  # written relative to this file (write_machine)
        if source and not Path(source).is_absolute() and beside.exists():
            source = os.path.normpath(beside)
        details.append(PeakDetail(source=source, name=entry["name"], value=value, unit=entry["unit"],
                                  median=spread.get("median"), minimum=spread.get("min"), maximum=spread.get("max"),
                                  repeats=repeats))

    fingerprint = doc.get("fingerprint", {})
    if not isinstance(fingerprint, dict):
        raise _bad(path, "fingerprint must be a table ([fingerprint])", _line_of(text, None, "fingerprint"))
    for key, value in fingerprint.items():
        if not isinstance(value, str):
            raise _bad(path, f"[fingerprint] {key} must be a string, not {value!r}", _line_of(text, "fingerprint", key), key)

    clocks = _numbers(path, text, doc, "clocks", "clock", list(CLOCKS))

    source = Source(path=str(path), format=FORMAT, tool="perfcheck", tool_version=str(version),
                    device=strings["device"], arch=strings["arch"])
    peaks = Peaks(values=values, details=tuple(details), sources=(source,), clocks=clocks)
    return Machine(name=strings["name"], device=strings["device"], arch=strings["arch"], peaks=peaks, path=str(path),
                   fingerprint=dict(fingerprint))


def _nth_header(text: str, table: str, index: int) -> int | None:
    seen = -1
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header and header.group(1) == table:
            seen += 1
            if seen == index:
                return number
    return None


def _numbers(path: Path, text: str, doc: Mapping[str, object], table: str, what: str, known: list[str]) -> dict[str, float]:
    """The ``[table]`` of ``doc`` (``[peaks]``, ``[clocks]``): each name one of ``known``
    (listed in that order when it is not), each value a finite number."""
    raw = doc.get(table, {})
    if not isinstance(raw, dict):
        raise _bad(path, f"{table} must be a table ([{table}])", _line_of(text, None, table))
    out: dict[str, float] = {}
    for name, value in raw.items():
        line = _line_of(text, table, name)
        if name not in known:
            raise _bad(path, f"unknown {what} {name!r} (known: {', '.join(known)})", line, name)
        out[name] = _finite(path, value, f"{what} {name}", line, name)
    return out


def _finite(path: Path, value: object, what: str, line: int | None, column: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(path, f"{what} must be a number in base units, not {value!r}", line, column)
    number = float(value)
    if not math.isfinite(number) or number <= 0:  # a zero peak makes every percentage of it infinite
        raise _bad(path, f"{what} is {number}; a peak must be a finite, positive number", line, column)
    return number
