"""Shared parsing of the delimited text that profilers write.

The quirks handled here are common to several tools: preambles (``==PROF==``
lines, application stdout) before the header, units rows, thousands separators,
and pandas parser errors that must become one-line located errors.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError


def split_csv_line(line: str) -> list[str]:
    """Fields of one CSV line, honouring quotes. Never raises: the csv module refuses
    a field over its 128 KiB limit and a bare CR inside a field (CR-only line endings
    read as one line), so such a line is split by hand with the same quoting rules
    (an unclosed quote runs to the end of the line), and the reader's own checks
    then say what is wrong with its fields."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return _split_by_hand(line)


def _split_by_hand(line: str, delimiter: str = ",") -> list[str]:
    """The csv module's default dialect: a quote opens a quoted field only at the
    field's start; inside one, ``""`` is a quote."""
    if not line:
        return []
    fields: list[str] = []
    field: list[str] = []
    quoted = False
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if quoted:
            if ch == '"':
                if i + 1 < n and line[i + 1] == '"':  # "" inside quotes is one quote
                    field.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                field.append(ch)
        elif ch == '"' and not field:
            quoted = True
        elif ch == delimiter:
            fields.append("".join(field))
            field = []
        else:
            field.append(ch)
        i += 1
    fields.append("".join(field))
    return fields


def locate_header(
    path: Path,
    lines: Sequence[str],
    is_header: Callable[[list[str]], bool],
    *,
    what: str,
    hint: str,
) -> int:
    """0-based index of the first line whose fields satisfy ``is_header``.

    ``lines`` is usually ``Sniff.lines`` (the head of the file): preambles are short.
    """
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            fields = split_csv_line(line)
        except csv.Error:
            continue
        if is_header([f.strip() for f in fields]):
            return i
    raise InputError(path, f"no {what} header found", hint=hint)


def require_columns(path: Path, header: Sequence[str], required: Sequence[str], *, line: int | None = None, hint: str | None = None) -> None:
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            path,
            f"required column{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} missing",
            line=line,
            hint=hint or "was the file cut short or written by another tool version?",
        )


_LINE_RE = re.compile(r"line (\d+)")


def read_csv(path: Path, *, header_line: int = 0, skip_after_header: int = 0, **kwargs: object) -> pd.DataFrame:
    """``pandas.read_csv`` whose errors name the file and the line.

    ``header_line`` is the 0-based line of the header; ``skip_after_header`` skips
    that many lines after it (units rows). Everything is read as text unless
    ``dtype`` says otherwise, so numbers are converted deliberately, column by
    column, with located errors (see ``to_number``).
    """
    skip = list(range(header_line)) + list(range(header_line + 1, header_line + 1 + skip_after_header))
    kwargs.setdefault("dtype", str)
    kwargs.setdefault("keep_default_na", False)
    try:
        return pd.read_csv(path, skiprows=skip, header=0, **kwargs)  # type: ignore[arg-type]
    except pd.errors.EmptyDataError:
        raise InputError(path, "file is empty", hint="was the profiler run cut off?") from None
    except pd.errors.ParserError as exc:
        # pandas counts lines from the header it was given; turn that into a file line.
        match = _LINE_RE.search(str(exc))
        line = int(match.group(1)) + header_line + skip_after_header if match else None
        detail = str(exc).split("C error: ")[-1].strip().rstrip(".")
        raise InputError(
            path, f"malformed CSV ({detail})", line=line, hint="check the delimiter and that the file is complete"
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not text (byte {exc.start} is not UTF-8)", hint="is this the right file?") from None


_ROW_RE = re.compile(r"starting at row (\d+)")


def iter_csv(
    path: Path, *, header_line: int = 0, chunksize: int = 1_000_000, **kwargs: object
) -> Iterator[tuple[int, pd.DataFrame]]:
    """``pandas.read_csv`` in chunks, as text, with located errors: yields
    ``(file line of the chunk's first row, chunk)``.

    Blank lines are kept as rows of empty strings, so a row's position maps to
    its file line exactly (callers drop them, see ``blank_rows``); a row with
    fewer fields than the header gets empty strings in the missing cells.
    """
    kwargs.setdefault("dtype", str)
    kwargs.setdefault("keep_default_na", False)
    kwargs.setdefault("na_filter", False)
    kwargs.setdefault("skip_blank_lines", False)
    first = header_line + 2
    try:
        with pd.read_csv(path, skiprows=list(range(header_line)), header=0, chunksize=chunksize, **kwargs) as reader:  # type: ignore[call-overload]
            for chunk in reader:
                yield first, chunk.fillna("")
                first += len(chunk)
    except pd.errors.EmptyDataError:
        raise InputError(path, "file is empty", hint="was the profiler run cut off?") from None
    except pd.errors.ParserError as exc:
        text = str(exc)
        # "line N" counts file lines from the header pandas was given; "starting
        # at row N" (an unclosed quote) counts rows from 0 at that header.
        line_match, row_match = _LINE_RE.search(text), _ROW_RE.search(text)
        line = None
        if line_match:
            line = int(line_match.group(1)) + header_line
        elif row_match:
            line = int(row_match.group(1)) + 1 + header_line
        detail = text.split("C error: ")[-1].strip().rstrip(".")
        raise InputError(
            path, f"malformed CSV ({detail})", line=line, hint="check the delimiter and that the file is complete"
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not text (byte {exc.start} is not UTF-8)", hint="is this the right file?") from None


def blank_rows(frame: pd.DataFrame) -> pd.Series:
    """Rows of a text frame (``iter_csv``) that came from blank lines."""
    return (frame == "").all(axis=1)


def to_number(series: pd.Series, *, path: Path, column: str, first_line: int, thousands: bool = False) -> pd.Series:
    """Text column -> float64. Empty cells become NaN; anything else that is not a
    number is an error naming the file line (``first_line`` is the file line of the
    first data row, 1-based)."""
    text = series.astype(str).str.strip()
    if thousands:
        text = text.str.replace(",", "", regex=False)
    text = text.mask(text.isin(["", "nan", "NaN", "n/a", "N/A", "-"]))
    values = pd.to_numeric(text, errors="coerce")
    bad = values.isna() & text.notna()
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(
            path,
            f"{text.iloc[pos]!r} is not a number",
            line=first_line + pos,
            column=column,
            hint="is the file complete and written by the tool named?",
        )
    return values.astype("float64")


def to_integer(series: pd.Series, *, path: Path, column: str, lines: Sequence[int]) -> pd.Series:
    """Text column -> Int64, exactly (timestamps in ns exceed float64's 2**53 after
    ~104 days of uptime, so they must not pass through float). Empty cells become
    <NA>; anything else that is not an integer is an error naming ``lines[i]``, the
    file line of row i."""
    text = series.astype(str).str.strip()
    valid = text.str.fullmatch(r"[+-]?\d+")
    bad = ~valid & (text != "")
    # No 64-bit clock or counter holds 2**63 or more (float64 is exact enough to tell:
    # the limit itself is a power of two).
    huge = valid & (pd.to_numeric(text.where(valid), errors="coerce").abs() >= 2.0**63)
    if bad.any() or huge.any():
        pos = int(np.flatnonzero((bad | huge).to_numpy())[0])
        what = "is beyond the 64-bit range" if huge.iloc[pos] else "is not an integer"
        raise InputError(
            path,
            f"{text.iloc[pos]!r} {what}",
            line=int(lines[pos]),
            column=column,
            hint="is the file complete and written by the tool named?",
        )
    values = pd.to_numeric(text.where(valid), errors="raise", dtype_backend="numpy_nullable")
    return values.astype("Int64")


def coerce_numbers(values: pd.Series) -> pd.Series:
    """Values parsed from JSON or SQLite -> numbers; a list, an object, a boolean or text
    where a number belongs becomes NaN (pandas' own coercion raises on containers)."""
    if values.dtype == bool:  # JSON true/false where a number belongs
        return pd.Series(np.nan, index=values.index)
    if values.dtype == object:
        values = values.map(lambda v: v if v is None or (isinstance(v, (int, float, str)) and not isinstance(v, bool))
                            else "not a number")
    return pd.to_numeric(values, errors="coerce")


def coerce_integers(values: pd.Series) -> tuple[pd.Series, int]:
    """Values parsed from JSON or SQLite (numbers, maybe text or floats in a damaged file)
    -> Int64, and how many present values were not integers (those become <NA>: a float
    such as 1e308 or 2**70 must not wrap around in the cast)."""
    numbers = coerce_numbers(values)
    if numbers.dtype.kind in "iu":  # the common case: exact, no detour through float
        return pd.Series(pd.array(numbers, dtype="Int64"), index=values.index), 0
    floats = numbers.astype("float64")
    ok = np.isfinite(floats) & (floats == np.floor(floats)) & (floats.abs() < 2.0**62)
    bad = int((values.notna() & ~ok).sum())
    return pd.Series(pd.array(floats.where(ok), dtype="Int64"), index=values.index), bad



def cuda_arch(major: object, minor: object) -> str | None:
    """``sm_XY`` from a CUDA compute capability as a JSON or SQLite export records it
    (Kineto's deviceProperties, Nsight Systems' TARGET_INFO_GPU: integers, perhaps as
    text). None when a part is missing or is no small whole number: in a damaged file
    8.5 must not become sm_80, nor 1e300 a 300-digit architecture."""
    parts = []
    for value, limit in ((major, 100), (minor, 10)):
        if value is None or isinstance(value, (bool, np.bool_)):
            return None
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        if not (math.isfinite(number) and number.is_integer() and 0 <= number < limit):
            return None
        parts.append(int(number))
    return f"sm_{parts[0]}{parts[1]}"

def text_lines(path: Path) -> list[str]:
    """All lines of a small text file, with a located error for non-text input."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror})") from None
    if b"\x00" in data[:4096]:
        raise InputError(path, "binary data where text was expected", hint="is this the right file?")
    return io.StringIO(data.decode("utf-8", errors="replace")).read().splitlines()
