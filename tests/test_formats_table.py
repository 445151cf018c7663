"""The table of supported inputs (docs/formats.md) is the reader registry, row for row."""

from __future__ import annotations

from conftest import ROOT
from perfcheck.ingest import FORMATS

HEADER = "| format | kind | reads |\n|---|---|---|\n"


def test_formats_table_lists_every_reader():
    text = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    start = text.index(HEADER) + len(HEADER)
    table = text[start:text.index("\n\n", start)].splitlines()
    # Regenerate with: the rows below, written from perfcheck.ingest.FORMATS (`perfcheck formats`).
    expected = [f"| `{f.name}` | {f.kind} | {f.description} |" for f in FORMATS]
    assert table == expected
