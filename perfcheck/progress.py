"""One progress line on stderr for work that takes a while.

Shown only where a person watches (``perfcheck.terminal.interactive``: a terminal,
not CI, not a pipe) and only once the work has run ``delay`` seconds, so quick
commands print nothing extra; redrawn at most every ``interval`` seconds in place
(carriage return, then the line erased with ESC [K), and erased when the work ends.
A few dozen lines of our own rather than tqdm or rich: one line of text is all it
draws, and the dependency list stays short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

from perfcheck.terminal import interactive
from perfcheck.units import format_value

DELAY_S = 2.0  # "work that takes longer than about two seconds" (issue 18 §3)
INTERVAL_S = 0.25


def elapsed_text(seconds: float) -> str:
    """"7 s", "2 min 05 s", "1 h 02 min"."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class Progress:
    """``with Progress("reading", total=size, unit="B") as p: ... p.update(done, rows=n)``.

    ``total`` and ``done`` are in ``unit`` (bytes "B", or a word for counts: "pages");
    ``rows``: how many rows (dispatches, runs) were read so far, when counted.
    ``enabled``: None asks the stream (``perfcheck.terminal.interactive``)."""

    def __init__(self, what: str, *, total: float | None = None, unit: str = "B", stream: IO[str] | None = None,
                 enabled: bool | None = None, delay: float = DELAY_S, interval: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = interactive(self.stream) if enabled is None else enabled
        self.delay, self.interval, self.clock = delay, interval, clock
        self.started = clock()
        self.done: float = 0.0
        self.rows: int | None = None
        self._drawn_at: float | None = None
        self._width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self) -> str:
        """The text drawn now: "reading kernel_trace.csv: 1.2 GiB of 3.4 GiB (35%), 2,345,678 rows, 14 s"."""
        parts = []
        if self.total:
            share = min(self.done / self.total, 1.0) * 100
            if self.unit == "B":  # "1.2 GiB of 3.4 GiB"
                parts.append(f"{format_value(self.done, 'B')} of {format_value(self.total, 'B')} ({share:.0f}%)")
            else:  # "12 of 41 pages"
                parts.append(f"{int(self.done):,} of {int(self.total):,} {self.unit} ({share:.0f}%)".replace("  ", " "))
        elif self.done:
            parts.append(format_value(self.done, self.unit))
        if self.rows is not None:
            parts.append(f"{self.rows:,} rows")
        parts.append(elapsed_text(self.clock() - self.started))
        return f"perfcheck: {self.what}: " + ", ".join(parts)

    def update(self, done: float | None = None, *, rows: int | None = None) -> None:
        if done is not None:
            self.done = done
        if rows is not None:
            self.rows = rows
        if not self.enabled:
            return
        now = self.clock()
        if now - self.started < self.delay or (self._drawn_at is not None and now - self._drawn_at < self.interval):
            return
        self._drawn_at = now
        text = self.line()
        self._width = len(text)
        try:
            self.stream.write("\r" + text + "\x1b[K")
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, keep working
            self.enabled = False

    def close(self) -> None:
        """Erase the line (the result that follows is printed on a clean line)."""
        if self.enabled and self._drawn_at is not None:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
        self._drawn_at = None
