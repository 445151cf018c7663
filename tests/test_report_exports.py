"""Benchmark-tracker exports of a real check run (the stencil example), checked
against the formats their tools document: Bencher Metric Format (bencher.dev,
"Bencher Metric Format": an object of benchmarks, each an object of measures with
a numeric ``value`` and optional ``lower_value``/``upper_value``; benchmark names up
to 1024 characters, measure slugs up to 64; the built-in ``latency`` measure is in
nanoseconds) and github-action-benchmark's ``customSmallerIsBetter`` /
``customBiggerIsBetter`` (a list of objects with ``name``, ``unit`` and a numeric
``value``; ``range`` and ``extra`` optional strings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfcheck.model import FAILED, Check
from perfcheck.report.exports import bencher_document, bigger_path, github_benchmark_documents

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "stencil" / "perfcheck.toml"

BMF_SCHEMA = {
    "type": "object",
    "propertyNames": {"maxLength": 1024, "minLength": 1},
    "additionalProperties": {
        "type": "object",
        "propertyNames": {"maxLength": 64, "minLength": 1},
        "additionalProperties": {
            "type": "object",
            "properties": {"value": {"type": "number"}, "lower_value": {"type": "number"},
                           "upper_value": {"type": "number"}},
            "required": ["value"],
            "additionalProperties": False,
        },
    },
}
BENCHMARK_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "unit": {"type": "string"}, "value": {"type": "number"},
                       "range": {"type": "string"}, "extra": {"type": "string"}},
        "required": ["name", "unit", "value"],
        "additionalProperties": False,
    },
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    from perfcheck.cli import main

    out = tmp_path_factory.mktemp("exports")
    code = main(["check", "--config", str(CONFIG), "--suite", "before", "--baseline-dir", str(CONFIG.parent / "baselines"),
                 "--bencher", str(out / "bencher.json"), "--github-benchmark", str(out / "bench.json")])
    assert code == 1
    return out


def test_bencher_metric_format(exported: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads((exported / "bencher.json").read_text())
    jsonschema.validate(doc, BMF_SCHEMA)
    name = "before::OECloverFBCGPU(float*, float const*, int)"
    latency = doc[name]["latency"]
    # the stencil example's median dispatch is about 2.67 ms: in nanoseconds
    assert 2.5e6 < latency["value"] < 2.9e6
    assert latency["lower_value"] <= latency["value"] <= latency["upper_value"]
    assert 4.5e11 < doc[name]["hbm-bw"]["value"] < 5e11  # B/s
    assert doc[name]["occupancy-pct"]["value"] == pytest.approx(20.0)


def test_github_action_benchmark_formats(exported: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    smaller = json.loads((exported / "bench.json").read_text())
    bigger = json.loads(bigger_path(exported / "bench.json").read_text())
    jsonschema.validate(smaller, BENCHMARK_SCHEMA)
    jsonschema.validate(bigger, BENCHMARK_SCHEMA)
    assert {e["name"].rsplit(" / ", 1)[1] for e in smaller} == {"duration", "scratch_per_thread"}
    assert {e["name"].rsplit(" / ", 1)[1] for e in bigger} == {"hbm_bw", "occupancy_pct"}
    assert all(e["unit"] == "s" for e in smaller if e["name"].endswith("/ duration"))
    assert len({e["name"] for e in smaller + bigger}) == len(smaller) + len(bigger)


def test_long_names_and_missing_values() -> None:
    long = "k" * 3000
    checks = [Check("s", long, "*", "duration <= 1 ms", "duration", "<=", 0.002, 0.001, "s", FAILED, "expectation", "m"),
              Check("s", "x", "*", "hbm_bw >= 1 TB/s", "hbm_bw", ">=", None, None, "B/s", FAILED, "expectation", "m")]
    doc = bencher_document(checks)
    assert len(doc) == 1 and all(len(name) <= 1024 for name in doc)
    smaller, bigger = github_benchmark_documents(checks)
    assert len(smaller) == 1 and bigger == []


@pytest.mark.parametrize("option", ["--bencher", "--github-benchmark"])
def test_an_unwritable_export_is_a_one_line_error(cli, tmp_path: Path, option: str) -> None:
    """Was an internal error (exit 3, FileExistsError) where every other report says which file."""
    from conftest import one_line_error

    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "bench.json"
    result = cli("check", "--config", CONFIG, "--suite", "after", option, target)
    one_line_error(result, target, f"cannot write the {option[2:]} report")
