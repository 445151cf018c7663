"""The bounded-memory reader of a JSON document's one large array
(perfcheck.ingest.jsonstream): the same elements and keys as json.load, whatever the
read size, on the real Kineto traces; located errors on broken files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import profile
from perfcheck.errors import InputError
from perfcheck.ingest import jsonstream
from perfcheck.ingest.jsonstream import ArrayStream

TRACES = ["kineto/hta-critical-path-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz",
          "kineto/hta-amd-mi250-rocm6.2-minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
          "kineto/pytorch-kineto-unittest-h100-sync-fix-pair/before_fix_trace.json"]


def _stream(path: Path) -> tuple[list, dict, ArrayStream]:
    stream = ArrayStream(path, "traceEvents", cut_hint="cut", kind_hint="kind")
    events = [e for batch in stream.batches() for e in batch]
    return events, stream.doc, stream


@pytest.mark.parametrize("chunk", [97, 4096, jsonstream.CHUNK_CHARS])
@pytest.mark.parametrize("trace", TRACES)
def test_same_as_json_load(monkeypatch: pytest.MonkeyPatch, trace: str, chunk: int):
    path = profile(trace)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        expected = json.load(fh)
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", chunk)  # reads end anywhere: inside strings, numbers, keys
    events, doc, stream = _stream(path)
    assert stream.found and events == expected["traceEvents"]
    assert doc == {k: v for k, v in expected.items() if k != "traceEvents"}


def test_boundary_text_inside_a_string_takes_the_slow_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    # names holding the text between two events ("}, {") and nested objects: the cut
    # at the last such text is no boundary; the decoded elements are still json.load's
    events = [{"name": f"lambda{{x}}, {{y}} #{i}", "args": {"nested": {"k": [i, {"a": "}, {"}]}}} for i in range(300)]
    doc = {"traceEvents": events, "schemaVersion": 1, "deviceProperties": [{"id": 0}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc, indent=1))
    for chunk in (50, 333, 10_000):
        monkeypatch.setattr(jsonstream, "CHUNK_CHARS", chunk)
        got, rest, _ = _stream(path)
        assert got == events and rest == {"schemaVersion": 1, "deviceProperties": [{"id": 0}]}


@pytest.mark.parametrize("text, where, hint", [
    ('{"schemaVersion": 1, "traceEvents": [{"ph": "X"}, {"ph": "X"', "t.json:3:", "cut"),  # cut off in the array
    ('{"traceEvents": [{"ph": "X"},\n\n {"ph": X}]}', "t.json:3:", "kind"),  # not JSON on the third line
    ('{"traceEvents": [{"ph": "X"}] "other": 1}', "t.json:1:", "kind"),  # a missing comma
])
def test_broken_files_are_located_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, where: str,
                                         hint: str):
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 7)
    path = tmp_path / "t.json"
    path.write_text(text.replace('"X"}, {"ph": "X"', '"X"},\n\n{"ph": "X"'))
    with pytest.raises(InputError) as info:
        _stream(path)
    message = str(info.value)
    assert where in message and "not valid JSON" in message and message.endswith(hint)


def test_document_without_the_array(tmp_path: Path):
    path = tmp_path / "t.json"
    path.write_text('{"schemaVersion": 1}')
    events, doc, stream = _stream(path)
    assert events == [] and doc == {"schemaVersion": 1} and not stream.found


def test_a_byte_order_mark_is_skipped(tmp_path: Path):
    # json.loads of the bytes skips it (the kernel reader read such a trace; the timeline did not)
    path = tmp_path / "t.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"schemaVersion": 1, "traceEvents": [{"ph": "X"}]}')
    events, doc, stream = _stream(path)
    assert events == [{"ph": "X"}] and doc == {"schemaVersion": 1}


@pytest.mark.parametrize("strict", [False, True])
def test_bytes_that_are_not_utf8(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, strict: bool):
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 5)  # the bad byte in a later read
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [{"name": "k\xe9rnel"}]}')
    stream = ArrayStream(path, "traceEvents", cut_hint="cut", kind_hint="kind", strict=strict)
    if not strict:
        assert [e for batch in stream.batches() for e in batch] == [{"name": "k\ufffdrnel"}]
        return
    with pytest.raises(InputError, match=r"t.json: not UTF-8 text \(invalid continuation byte\); kind$"):
        list(stream.batches())


@pytest.mark.parametrize("tail, what", [(' x', "Extra data"), (' {}', "Extra data"),
                                        (', "traceEvents": []}', "a second 'traceEvents' array")])
def test_text_after_the_document_and_a_second_array_are_errors(tmp_path: Path, tail: str, what: str):
    """json.load says "Extra data"; of two arrays it keeps the last silently, where a
    stream has handed out the first: an error either way, not a table of either."""
    path = tmp_path / "t.json"
    text = '{"schemaVersion": 1,\n "traceEvents": [{"ph": "X"}]}'
    path.write_text(text + tail if tail.startswith(" ") else text[:-1] + tail)
    with pytest.raises(InputError, match=f"t.json:2: not valid JSON \\({what}, column"):
        _stream(path)


def test_surrogate_escapes_in_the_other_keys_are_flagged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Only a value written with a "\\udXXX" escape can hold a lone surrogate: the caller
    walks ``doc`` then, and only then (a walk recurses as deep as the value nests)."""
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 3)  # the value read in many pieces
    path = tmp_path / "t.json"
    path.write_text('{"a": [[["x"]]], "traceEvents": [{"name": "\\ud800"}], "b": 1}')
    events, doc, stream = _stream(path)
    assert not stream.surrogates and events == [{"name": "\ud800"}]
    path.write_text('{"a": [[["x"]]], "traceEvents": [], "b": {"name": "GPU \\udc80"}}')
    events, doc, stream = _stream(path)
    assert stream.surrogates and doc["b"] == {"name": "GPU \udc80"}


def test_columns_fill_what_a_batch_lacks():
    columns = jsonstream.Columns()
    columns.add({"a": np.array([1.5, 2.5]), "n": np.array([7, 8])})
    columns.add({"n": np.array([9]), "bad": np.array([True]), "count": np.array([3], dtype="uint8")})
    columns.add({"a": np.array([4.0] * 70_000)})  # past the first capacity
    out = columns.trimmed()
    assert columns.size == 70_003 and all(len(v) == 70_003 for v in out.values())
    assert np.isnan(out["a"][2]) and out["a"][-1] == 4.0 and out["a"][:2].tolist() == [1.5, 2.5]
    assert out["n"][:3].tolist() == [7, 8, 9] and out["n"][3] == np.iinfo("int64").min
    assert out["bad"].tolist() == [False, False, True] + [False] * 70_000
    assert out["count"].sum() == 3
