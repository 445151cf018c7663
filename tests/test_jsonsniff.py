"""perfcheck.ingest.jsonsniff: object keys by structure, streamed and bounded."""

from __future__ import annotations

import gzip
from pathlib import Path

from perfcheck.ingest import jsonsniff


def test_keys_across_pieces_and_escapes(tmp_path: Path) -> None:
    # A string longer than one 64 KiB read, holding escaped quotes and brackets, then
    # the key that matters; the same gzip-compressed.
    filler = 'x\\"{[' * 40_000
    text = '{"meta": {"note": "' + filler + '", "inner": 1}, "traceEvents": [{"cat": "kernel"}]}'
    for path, data in ((tmp_path / "t.json", text.encode()), (tmp_path / "t.json.gz", gzip.compress(text.encode()))):
        path.write_bytes(data)
        top = jsonsniff.keys(path, until=frozenset({"traceEvents"}), depth=2)
        assert top is not None and top.opener == "{"
        assert top.keys == {"meta": 1, "note": 2, "inner": 2, "traceEvents": 1}


def test_bounded_and_not_json(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"a": [' + "1, " * (jsonsniff.LIMIT // 2) + '1], "late": 0}')
    top = jsonsniff.keys(path, until=frozenset({"late"}))
    assert top is not None and "late" not in top.keys and len(top.text) <= jsonsniff.LIMIT + 64 * 1024
    (tmp_path / "csv").write_text("a,b\n1,2\n")
    assert jsonsniff.keys(tmp_path / "csv") is None
    assert jsonsniff.keys(path, brackets="[") is None  # an object where an array is wanted: not read
