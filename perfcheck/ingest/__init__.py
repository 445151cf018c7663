"""Readers: every supported profiler output -> ``Profile``; benchmark output -> ``Peaks``.

The table ``FORMATS`` below is the explicit list of readers, in sniffing order
(most specific first). ``--format NAME`` skips sniffing.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from perfcheck.errors import InputError, PerfcheckError, UnknownFormatError, UsageError
from perfcheck.ingest import (
    babelstream,
    ert,
    kineto,
    likwid,
    machinefile,
    mixbench,
    ncu,
    nsys,
    nvprof,
    omniperf,
    proton,
    rocpd,
    rocprof,
    rocprofv3,
    runs,
    stream,
)
from perfcheck.ingest.dispatch import TimingTally, finish
from perfcheck.ingest.formats import ALL, Format, Grouped, Scan, Sniff, Want
from perfcheck.model import Oddity, PeakDetail, Peaks, Profile, Source

FORMATS: tuple[Format, ...] = (
    *runs.FORMATS,
    *rocpd.FORMATS,
    *rocprof.FORMATS,
    *omniperf.FORMATS,
    *rocprof.DIR_FORMATS,
    *rocprofv3.FORMATS,
    *ncu.FORMATS,
    *nvprof.FORMATS,
    *nsys.FORMATS,
    *kineto.FORMATS,
    *proton.FORMATS,
    *babelstream.FORMATS,
    *mixbench.FORMATS,
    *ert.FORMATS,
    *stream.FORMATS,
    *likwid.FORMATS,
    *machinefile.FORMATS,
)

__all__ = ["FORMATS", "Want", "detect", "open_profile", "read_profile", "read_peaks", "format_named"]


def format_named(name: str, kind: str | None = None) -> Format:
    for fmt in FORMATS:
        if fmt.name == name and (kind is None or fmt.kind == kind):
            return fmt
    names = [f.name for f in FORMATS if kind is None or f.kind == kind]
    raise UsageError(f"unknown format {name!r}; choose one of: {', '.join(names)}")


def _check_exists(path: Path) -> None:
    if not path.exists():
        raise InputError(path, "no such file or directory")


def detect(path: Path, kind: str) -> Format:
    """The first reader of ``kind`` whose sniffer accepts ``path``."""
    _check_exists(path)
    sniff = Sniff(path)
    candidates = [f for f in FORMATS if f.kind == kind]
    if not sniff.is_dir and not sniff.raw_head:
        raise InputError(path, "file is empty", hint="was the run cut off before it wrote anything?")
    for fmt in candidates:
        if fmt.sniff(sniff):
            return fmt
    # A file of the other kind (a mixbench log given to `inspect`, a profile given
    # as peaks) is a common mix-up: say what it is and where it belongs.
    other = next((f for f in FORMATS if f.kind != kind and f.sniff(sniff)), None)
    if other is not None:
        where = ("use `perfcheck peaks` or `peaks =` in the config (`--peaks` on the command line)"
                 if other.kind == "peaks" else "use `perfcheck inspect` or a suite's `profiles =`")
        what = other.description.split(" (")[0].split(" ->")[0].split(":")[0]
        wanted = {"profile": "a profile", "peaks": "a peaks file"}.get(kind, kind)
        raise InputError(path, f"this is a {what} ({other.kind}, format {other.name}), not {wanted}: {where}")
    raise UnknownFormatError(path, [f.name for f in candidates], kind=kind)


# Errors a reader may hit on malformed input it did not anticipate. They are
# turned into a located InputError naming the reader, never a traceback.
_INPUT_FAILURES = (
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    sqlite3.Error,
    json.JSONDecodeError,
    UnicodeDecodeError,
    pd.errors.ParserError,
)


def _guarded(fmt: Format, path: Path, chunks: Iterator[pd.DataFrame | Grouped]) -> Iterator[pd.DataFrame | Grouped]:
    try:
        yield from chunks
    except PerfcheckError:
        raise
    except _INPUT_FAILURES as exc:
        raise InputError(path, f"cannot be read as {fmt.name} ({type(exc).__name__}: {exc})",
                         hint="check that the file is complete, or name another --format") from None


_RANK_RE = re.compile(r"(?:^|[^a-z])rank[_.-]?(\d+)(?:[^0-9]|$)", re.IGNORECASE)


def rank_from_path(path: Path) -> int | None:
    """Rank encoded in a per-rank output's name (``rank3``, ``rank_3``, ``results.rank-3.csv``),
    the spelling of MPI launch wrappers and rocprofv3's ``%rank%`` token use.
    Four levels, because rocprofv3 nests ``%hostname%`` and, for counters, ``pmc_N``
    under the ``-d`` directory: ``rank_1/<host>/pmc_1/<pid>_counter_collection.csv``."""
    for part in reversed(path.parts[-4:]):
        match = _RANK_RE.search(part)
        if match:
            return int(match.group(1))
    return None


def open_profile(path: str | Path, format: str | None = None, want: Want = ALL) -> Scan:
    """Open one profile for streaming: canonical chunks, oddities filled as they are read."""
    path = Path(path)
    _check_exists(path)
    fmt = format_named(format, "profile") if format else detect(path, "profile")
    assert fmt.scan is not None
    try:
        inner = fmt.scan(path, want)
    except PerfcheckError:
        raise
    except _INPUT_FAILURES as exc:
        raise InputError(path, f"cannot be read as {fmt.name} ({type(exc).__name__}: {exc})",
                         hint="check that the file is complete, or name another --format") from None
    source = inner.source
    if source.rank is None:
        source = replace(source, rank=rank_from_path(path))
    tally = TimingTally()
    outer = Scan(
        source=source, chunks=iter(()), oddities=inner.oddities, level=inner.level, companion_peaks=inner.companion_peaks
    )

    def chunks() -> Iterator[pd.DataFrame | Grouped]:
        for chunk in _guarded(fmt, path, inner.chunks):
            if source.rank is not None:
                (chunk.rows if isinstance(chunk, Grouped) else chunk)["rank"] = source.rank
            yield finish(chunk, tally)
        outer.oddities.extend(tally.oddities(str(path)))

    outer.chunks = chunks()
    return outer


def read_profile(paths: str | Path | Sequence[str | Path], format: str | None = None, want: Want = ALL) -> Profile:
    """Read one or several profile files into one Profile (ranks get a ``rank`` column)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise UsageError("no profile paths given")
    frames: list[pd.DataFrame] = []
    sources: list[Source] = []
    oddities: list[Oddity] = []
    levels = set()
    for p in paths:
        scan = open_profile(p, format, want)
        # A whole table is asked for: a grouped chunk (only with a Want that says
        # grouped, which no caller of read_profile gives) goes back to a frame.
        frames.extend(c.frame() if isinstance(c, Grouped) else c for c in scan.chunks)
        sources.append(scan.source)
        oddities.extend(scan.oddities)
        levels.add(scan.level)
    if len(levels) > 1:
        raise UsageError(
            "cannot combine per-dispatch profiles with per-kernel statistics files in one profile; "
            "load them separately"
        )
    frames = [f for f in frames if len(f.columns)]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if "kernel" in table.columns:
        # Streamed chunks may keep names dictionary-encoded (categorical, see schema.conform);
        # a whole table gets the registry's string dtype.
        table["kernel"] = table["kernel"].astype("string")
    return Profile(dispatches=table, sources=tuple(sources), oddities=tuple(oddities), level=levels.pop())


def _is_rate(value: object, *, zero: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return value >= 0 if zero else value > 0


def positive_peaks(peaks: Peaks, path: str) -> Peaks:
    """``peaks`` without the figures no machine can reach: a peak is a positive, finite
    rate (a zero or negative peak would make every percentage infinite or negative);
    a detail, one figure the file reported, may be zero (likwid's AVX rate of a run
    without AVX instructions) but not negative or infinite. What a damaged file
    reported that way is left out, with one warning for the file."""
    bad_values = sorted(name for name, value in peaks.values.items() if not _is_rate(value, zero=False))
    bad_details = [d for d in peaks.details if not _is_rate(d.value, zero=True)]
    if not bad_values and not bad_details:
        return peaks
    names = ", ".join(dict.fromkeys([*bad_values, *(d.name for d in bad_details)]))
    oddity = Oddity(path, f"figures that are not positive and finite left out: {names}",
                    len(bad_values) + len(bad_details))
    return replace(
        peaks,
        values={k: v for k, v in peaks.values.items() if k not in bad_values},
        details=tuple(d for d in peaks.details if _is_rate(d.value, zero=True)),
        oddities=(*peaks.oddities, oddity),
    )


def read_peaks(paths: str | Path | Sequence[str | Path], format: str | None = None) -> Peaks:
    """Read one or several peaks files; where two report the same peak, the higher wins
    (a peak is the best the machine was seen to do) and both stay in ``details``."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise UsageError("no peaks paths given")
    values: dict[str, float] = {}
    details: list[PeakDetail] = []
    sources: list[Source] = []
    oddities: list[Oddity] = []
    clocks: list[dict[str, float]] = []
    for p in paths:
        path = Path(p)
        _check_exists(path)
        fmt = format_named(format, "peaks") if format else detect(path, "peaks")
        assert fmt.read_peaks is not None
        try:
            peaks = fmt.read_peaks(path)
        except PerfcheckError:
            raise
        except _INPUT_FAILURES as exc:
            raise InputError(path, f"cannot be read as {fmt.name} ({type(exc).__name__}: {exc})",
                             hint="check that the file is complete, or name another --format") from None
        peaks = positive_peaks(peaks, str(path))
        for name, value in peaks.values.items():
            if name not in values or value > values[name]:
                values[name] = value
        # The two files of a likwid timeline each read as the pair: a figure an earlier
        # file already gave is not repeated (repeats within one file are that file's own).
        earlier = set(details)
        details.extend(d for d in peaks.details if d not in earlier)
        sources.extend(peaks.sources)
        oddities.extend(peaks.oddities)
        clocks.append(peaks.clocks)
    # A clock the peaks were measured at holds for the merged figures only when every
    # file records the same one (docs/clocks.md); else it is unknown.
    agreed = {name: value for name, value in clocks[0].items() if all(c.get(name) == value for c in clocks)}
    return Peaks(values=values, details=tuple(details), sources=tuple(sources), oddities=tuple(oddities),
                 clocks=agreed)
