"""What a reader is: a named format with a sniffer and a scanner.

A *profile* reader turns a file (or a tool's output directory) into a stream of
canonical dispatch-table chunks (see ``perfcheck.schema``); a *peaks* reader turns
a micro-benchmark's output into a ``Peaks`` record. Readers only parse, rename and
normalise units; they compute no metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from perfcheck.model import Oddity, Peaks, Source

# ``Want`` (which columns a caller needs) is a reader's argument, so the readers take
# it from here; it is defined with the columns in ``perfcheck.schema``, below ingest,
# because callers below ingest (arch's occupancy rules) name their columns with it.
from perfcheck.schema import ALL, Want  # noqa: F401

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Sniff:
    """What a sniffer may look at: the path and, for files, the first 64 KiB as text."""

    path: Path

    @property
    def is_dir(self) -> bool:
        return self.path.is_dir()

    @cached_property
    def raw_head(self) -> bytes:
        if self.is_dir:
            return b""
        with open(self.path, "rb") as fh:
            return fh.read(HEAD_BYTES)

    @cached_property
    def head(self) -> str:
        return self.raw_head.decode("utf-8", errors="replace")

    @cached_property
    def is_binary(self) -> bool:
        return b"\x00" in self.raw_head[:4096]

    @cached_property
    def is_sqlite(self) -> bool:
        return self.raw_head.startswith(b"SQLite format 3\x00")

    @cached_property
    def lines(self) -> list[str]:
        """Complete lines of the head (the last, possibly cut, line is dropped
        unless the head is the whole file)."""
        lines = self.head.splitlines()
        if len(self.raw_head) == HEAD_BYTES and lines:
            lines = lines[:-1]
        return lines


@dataclass(frozen=True)
class Grouped:
    """A chunk of dispatches in compact form, given only to callers that ask for it
    (``Want.grouped``: the per-kernel summary). A dispatch table repeats a kernel's
    name and launch configuration on every row; here each distinct (kernel,
    configuration) is one row of ``rows`` and a dispatch is its row number and the
    few values that differ on every row, so the summary groups integers and never
    builds a frame per dispatch.

    ``rows``: canonical columns, one row per configuration, in the order of each
    one's first dispatch, each used by at least one dispatch. ``group``: per
    dispatch, in file order, its row (int64). ``series``: per-dispatch columns, each
    as long as ``group``: ``duration`` in s (the SQLite readers have SQLite subtract
    the timestamps), or ``start_ns`` and ``end_ns`` for ``dispatch.finish`` to
    derive it from (NaN where there is none, once finish has run).
    ``frame()`` gives the same dispatches as an ordinary per-dispatch chunk."""

    rows: "pd.DataFrame"
    group: "np.ndarray"
    series: dict[str, "np.ndarray | pd.api.extensions.ExtensionArray"] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.group)

    def frame(self) -> "pd.DataFrame":
        """One row per dispatch, columns as the reader or ``finish`` would give them."""
        from perfcheck.schema import conform

        frame = self.rows.take(self.group).reset_index(drop=True)
        for name, values in self.series.items():
            frame[name] = values
        return conform(frame)


@dataclass
class Scan:
    """An open profile: its provenance and an iterator of canonical chunks.

    ``oddities`` may grow while ``chunks`` is consumed; read it afterwards.
    """

    source: Source
    # DataFrames; ``Grouped`` chunks too, when the caller's Want says grouped.
    chunks: Iterator["pd.DataFrame | Grouped"]
    oddities: list[Oddity] = field(default_factory=list)
    # "dispatch": one row per kernel dispatch (the canonical dispatch table).
    # "kernel": one row per kernel, pre-aggregated by the tool (rocprof --stats);
    #   columns kernel, calls, duration_total, duration_mean, duration_min,
    #   duration_max (seconds) -- the per-dispatch samples are not in the file.
    level: Literal["dispatch", "kernel"] = "dispatch"
    # Peaks files the tool wrote next to this profile (Omniperf's roofline.csv):
    # the workload's own empirical ceilings, used when the user names none.
    companion_peaks: tuple[Path, ...] = ()


ProfileScanner = Callable[[Path, Want], Scan]
PeaksReader = Callable[[Path], Peaks]


@dataclass(frozen=True)
class Format:
    name: str  # stable, user-facing: --format NAME
    tool: str
    kind: Literal["profile", "peaks"]
    description: str
    sniff: Callable[[Sniff], bool]
    scan: ProfileScanner | None = None
    read_peaks: PeaksReader | None = None

    def __post_init__(self) -> None:
        if (self.kind == "profile") != (self.scan is not None) or (self.kind == "peaks") != (
            self.read_peaks is not None
        ):
            raise AssertionError(f"format {self.name}: kind and reader function disagree")


def single_chunk(frames: Iterable["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    """Iterator over already-built frames (small files are read in one go)."""
    yield from frames
