"""Reader(s) for likwid output. (Being written.)"""

from __future__ import annotations

from perfcheck.ingest.formats import Format

FORMATS: tuple[Format, ...] = ()
