"""Reader(s) for stream output. (Being written.)"""

from __future__ import annotations

from perfcheck.ingest.formats import Format

FORMATS: tuple[Format, ...] = ()
