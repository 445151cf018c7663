"""The bounded-memory reader of a JSON document's one large array
(perfcheck.ingest.jsonstream): the same elements and keys as json.load, whatever the
read size, on the real Kineto traces; located errors on broken files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

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
