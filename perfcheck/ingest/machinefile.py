"""perfcheck's own machine files (``perfcheck peaks ... --save``) -> ``Peaks``.

A machine file is a peaks source like any benchmark output, so
``perfcheck inspect PROFILE --peaks baselines/machines/mulan.toml`` just works.
The format itself (TOML, written and read by ``perfcheck.machine``) is described
there; this module only registers it with the readers.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfcheck.ingest.formats import Format, Sniff
from perfcheck.model import Peaks

# Both marks the writer always puts in: the top-level version and the [machine] table.
_VERSION = re.compile(r"^\s*format_version\s*=\s*\d+\s*(?:#.*)?$", re.MULTILINE)
_TABLE = re.compile(r"^\s*\[\s*machine\s*\]\s*(?:#.*)?$", re.MULTILINE)


def _sniff(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    head = sniff.head
    return bool(_VERSION.search(head) and _TABLE.search(head))


def _read_peaks(path: Path) -> Peaks:
    from perfcheck.machine import read_machine

    return read_machine(path).peaks


FORMATS: tuple[Format, ...] = (
    Format(
        name="perfcheck-machine",
        tool="perfcheck",
        kind="peaks",
        description="perfcheck machine file (TOML): a device's empirical peaks saved by `perfcheck peaks --save`",
        sniff=_sniff,
        read_peaks=_read_peaks,
    ),
)
