"""History exports: Bencher Metric Format per run, OpenMetrics and Prometheus text
with timestamps, from a real store."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard_data import COPY, MACHINE, NIGHTS, START, STENCIL, commit, fill_store
from perfcheck.history import open_store
from perfcheck.history.export import (
    LATENCY,
    benchmark_name,
    bencher_documents,
    timestamped_metrics,
    write_bencher,
)


@pytest.fixture(scope="module")
def frame(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    path = fill_store(tmp_path_factory.mktemp("history") / "history.sqlite")
    with open_store(path, create=False) as store:
        return store.series()


def _bmf_valid(document: object) -> None:
    """The BMF JSON schema (bencher.dev/bmf.json): benchmark -> measure -> {value
    required, lower_value, upper_value numbers}, nothing else."""
    assert isinstance(document, dict) and document
    for benchmark, measures in document.items():
        assert isinstance(benchmark, str) and 0 < len(benchmark) <= 1024
        assert isinstance(measures, dict) and measures
        for measure, metric in measures.items():
            assert isinstance(measure, str) and 0 < len(measure) <= 64
            assert set(metric) <= {"value", "lower_value", "upper_value"} and "value" in metric
            assert all(isinstance(v, float) and math.isfinite(v) for v in metric.values())


def test_bencher_one_file_per_run_with_a_manifest(frame: pd.DataFrame, tmp_path: Path) -> None:
    paths = write_bencher(frame, tmp_path / "bencher")
    assert len(paths) == NIGHTS + 1
    manifest = json.loads((tmp_path / "bencher" / "manifest.json").read_text())
    assert [m["commit"] for m in manifest] == [commit(n) for n in range(NIGHTS)]  # oldest first
    assert {m["machine"] for m in manifest} == {MACHINE}
    assert manifest[0]["time"].startswith("2026-09-2")
    first = json.loads((tmp_path / "bencher" / manifest[0]["file"]).read_text())
    _bmf_valid(first)
    assert set(first) == {f"stencil::{STENCIL}", f"stencil::{COPY}", "cpu::copyto"}
    latency = first[f"stencil::{STENCIL}"][LATENCY]
    stored = frame[(frame["run_id"] == "run-000") & (frame["kernel"] == STENCIL) & (frame["metric"] == "duration")]
    assert latency["value"] == pytest.approx(float(stored["value"].iloc[0]) * 1e9)  # Bencher's latency is in ns
    assert latency["lower_value"] == pytest.approx(latency["value"] * 0.99)  # the run's 1% spread
    assert latency["upper_value"] == pytest.approx(latency["value"] * 1.01)
    bandwidth = first[f"stencil::{STENCIL}"]["hbm_bw (B/s)"]
    assert set(bandwidth) == {"value"}  # no spread stored: no made-up interval
    assert 8e11 < bandwidth["value"] < 1e12


def test_bencher_leaves_missing_values_out_and_keeps_long_names_apart(frame: pd.DataFrame) -> None:
    holes = frame.copy()
    holes.loc[(holes["run_id"] == "run-001") & (holes["metric"] == "hbm_bw"), "value"] = float("nan")
    documents = dict((entry["run_id"], doc) for entry, doc in bencher_documents(holes))
    assert "hbm_bw (B/s)" not in documents["run-001"][f"stencil::{STENCIL}"]
    long_a, long_b = benchmark_name("s", "k" * 2000 + "a"), benchmark_name("s", "k" * 2000 + "b")
    assert len(long_a) == 1024 and long_a != long_b


_SAMPLE = re.compile(r'^(?P<name>[a-z_:][a-z0-9_:]*)\{(?P<labels>[^}]*)\} (?P<value>\S+) (?P<ts>\S+)$')


def _parse(text: str) -> tuple[list[str], list[dict[str, str]]]:
    meta, samples = [], []
    for line in text.splitlines():
        if line.startswith("#"):
            meta.append(line)
            continue
        match = _SAMPLE.match(line)
        assert match, line
        samples.append(match.groupdict())
    return meta, samples


def test_openmetrics_with_timestamps(frame: pd.DataFrame) -> None:
    text = timestamped_metrics(frame)
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    meta, samples = _parse(text)
    duration = [s for s in samples if s["name"] == "perfcheck_duration_seconds"]
    assert len(duration) == 2 * NIGHTS
    assert "# UNIT perfcheck_duration_seconds seconds" in meta
    assert "# TYPE perfcheck_run info" in meta
    stencil = [s for s in duration if STENCIL in s["labels"]]
    assert [float(s["ts"]) for s in stencil] == [START + n * 86400.0 for n in range(NIGHTS)]  # seconds, in order
    assert f'machine="{MACHINE}"' in stencil[0]["labels"] and 'suite="stencil"' in stencil[0]["labels"]
    runs = [s for s in samples if s["name"] == "perfcheck_run_info"]
    assert len(runs) == NIGHTS and f'commit="{commit(0)}"' in runs[0]["labels"]
    # a family's lines are contiguous (OpenMetrics requires it)
    names = [s["name"] for s in samples]
    assert all(names.index(n) + names.count(n) - 1 == len(names) - 1 - names[::-1].index(n) for n in set(names))
    assert "commit" not in " ".join(s["labels"] for s in duration)  # not a label of the value series


def test_prometheus_text_has_millisecond_timestamps(frame: pd.DataFrame) -> None:
    text = timestamped_metrics(frame, timestamps="ms")
    assert "# EOF" not in text and "# UNIT" not in text and " info" not in text
    _, samples = _parse(text)
    stamps = {int(s["ts"]) for s in samples}
    assert min(stamps) == int(START * 1000)
    with pytest.raises(ValueError):
        timestamped_metrics(frame, timestamps="us")


def test_the_prometheus_projects_parsers_read_both_exports(frame: pd.DataFrame) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
    from prometheus_client.parser import text_string_to_metric_families as prometheus

    families = {f.name: f for f in openmetrics(timestamped_metrics(frame))}  # raises on any violation
    duration = families["perfcheck_duration_seconds"]
    assert duration.type == "gauge" and duration.unit == "seconds"
    assert len(duration.samples) == 2 * NIGHTS
    first = duration.samples[0]
    assert float(first.timestamp.sec) + first.timestamp.nsec / 1e9 == START
    assert families["perfcheck_run"].type == "info" and len(families["perfcheck_run"].samples) == NIGHTS
    text_families = {f.name: f for f in prometheus(timestamped_metrics(frame, timestamps="ms"))}
    samples = text_families["perfcheck_duration_seconds"].samples
    assert samples[0].timestamp == START  # the parser turns milliseconds back into seconds
    assert [s.value for s in samples] == [s.value for s in duration.samples]


def _one_sample_at_a_time(series: pd.DataFrame, timestamps: str) -> str:
    """The family lines as first written (before issue 22): sort the whole frame, then
    every sample's labels, value and time stamp made on its own (the oracle)."""
    from perfcheck.report.openmetrics import escape_label, metric_name

    frame = series[np.isfinite(series["value"].astype(float))].copy()
    frame["unit"] = frame["unit"].fillna("").astype(str)
    frame["family"] = [metric_name(m, u) for m, u in zip(frame["metric"].astype(str), frame["unit"])]
    frame = frame.sort_values(["family", "machine", "suite", "kernel", "time"], kind="stable")
    out = []
    for family, rows in frame.groupby("family", sort=False):
        first = rows.iloc[0]
        out.append(f"# TYPE {family} gauge\n")
        unit = {"s": "seconds", "B": "bytes", "B/s": "bytes_per_second", "%": "percent"}.get(first["unit"], "")
        if timestamps == "s" and unit and family.endswith(unit):
            out.append(f"# UNIT {family} {unit}\n")
        out.append(f"# HELP {family} perfcheck history: {first['metric']} per run, in {first['unit'] or 'count'}\n")
        for _, row in rows.iterrows():
            labels = ",".join(f'{k}="{escape_label(str(row[k]))}"' for k in ("machine", "suite", "kernel"))
            value = float(row["value"])
            number = str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
            ns = pd.Timestamp(row["time"]).as_unit("ns").value
            stamp = (str(ns // 1_000_000) if timestamps == "ms" else
                     str(ns // 1_000_000_000) if ns % 1_000_000_000 == 0 else repr(ns / 1e9))
            out.append(f"{family}{{{labels}}} {number} {stamp}\n")
    return "".join(out)


@pytest.mark.parametrize("timestamps", ["s", "ms"])
def test_the_text_export_is_the_sample_by_sample_text_on_awkward_series(timestamps: str) -> None:
    """Samples made per series, kernel and run (issue 22) write what making each sample
    on its own wrote: two metrics in one family interleaved by time, runs at one time,
    an unsorted frame, missing and infinite values, whole numbers, -0.0, 2**53, names
    that need escaping or shortening, machines that differ only in case."""
    from perfcheck.history.export import _family_lines

    rng = np.random.default_rng(3)
    kernels = ["k#1", 'q"uote', "ü<λ>", "x" * 300, "X" * 300 + "y", "plain"]
    metrics = [("occupancy_pct", "%"), ("occupancy", "%"), ("duration", "s"), ("calls", "count"), ("odd name!", ""),
               ("hbm_bw", "B/s")]
    times = pd.to_datetime([1.7e9, 1.7e9, 1.7e9 + 0.25, 1.7e9 + 86400, 1.7e9 + 86400.5], unit="s", utc=True)
    rows = []
    for machine in ("m", "M"):
        for kernel in kernels:
            for metric, unit in metrics:
                for run, time in enumerate(times):
                    value = rng.choice([rng.normal(1e3, 1.0), float(rng.integers(-5, 5)), -0.0, 2.0**53, 1e-7,
                                        float("nan"), float("inf"), 1e300])
                    rows.append({"machine": machine, "suite": "s", "kernel": kernel, "metric": metric,
                                 "unit": unit if run != 2 else None, "run_id": f"r{run}", "time": time, "value": value})
    frame = pd.DataFrame(rows).sample(frac=1.0, random_state=4).reset_index(drop=True)  # no order to rely on
    got = "".join(header + body for _, header, body in _family_lines(frame, timestamps, timestamps == "s"))
    assert got == _one_sample_at_a_time(frame, timestamps)
    assert "perfcheck_occupancy_percent" in got and got.count("# TYPE perfcheck_occupancy_percent") == 1


class _Counting:
    """A store whose ``series`` records what it was asked and how many values it gave."""

    def __init__(self, store) -> None:  # noqa: ANN001
        self._store, self.calls = store, []

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._store, name)

    def series(self, **where):  # noqa: ANN003, ANN201
        frame = self._store.series(**where)
        self.calls.append((where, len(frame)))
        return frame


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_the_bencher_export_read_run_by_run_writes_the_files_of_the_whole(store_at, tmp_path: Path) -> None:  # noqa: ANN001
    """``history export --bencher`` reads a few runs at a time (issue 22: it read every
    value at once): the same files, byte for byte, while no read holds more than the
    part size asked for (4 values a run here, so 2 runs a part)."""
    from perfcheck.history import Machine, Result, RunRecord
    from perfcheck.history.backend import run_parts

    location = fill_store(store_at())
    with open_store(location) as store:
        store.add(RunRecord("empty", START - 86400.0), [])  # a run without values: no file
        store.add(RunRecord("two machines", START + 0.5), [Result("other", "stencil", STENCIL, "duration", 1e-3, "s"),
                                                             Result(MACHINE, "cpu", "copyto", "mem_bw", 1e10, "B/s")],
                  [Machine("other", {"arch": "gfx90a"})])
        whole = write_bencher(store.series(), tmp_path / "whole")
        counting = _Counting(store)
        parts = write_bencher((part for _, part in run_parts(counting, rows=9)), tmp_path / "parts")
        since = START + 10 * 86400.0
        recent = write_bencher(store.series(since=since, suite="stencil"), tmp_path / "recent")
        recent_parts = write_bencher((part for _, part in run_parts(store, rows=9, since=since, suite="stencil")),
                                     tmp_path / "recent-parts")
    assert [p.name for p in parts] == [p.name for p in whole] and len(whole) == NIGHTS + 3  # 2 files for 2 machines
    assert _files(tmp_path / "parts") == _files(tmp_path / "whole")
    assert [p.name for p in recent_parts] == [p.name for p in recent]
    assert _files(tmp_path / "recent-parts") == _files(tmp_path / "recent") and len(recent) == NIGHTS - 10 + 1
    assert len(counting.calls) >= NIGHTS // 2 and all("run_id" in where and size <= 9
                                                      for where, size in counting.calls)


def test_history_copy_reads_a_few_runs_at_a_time_and_copies_what_one_read_copied(store_at, tmp_path: Path) -> None:  # noqa: ANN001
    from perfcheck.history import RunRecord
    from perfcheck.history.transfer import copy_store

    source = fill_store(tmp_path / "source.sqlite")
    with open_store(source) as store:
        store.add(RunRecord("empty", START - 86400.0), [])
        counting = _Counting(store)
        with open_store(store_at("parts")) as target:
            target.add(RunRecord("run-003", START + 3 * 86400.0), [])  # already there: left alone
            done = copy_store(counting, target, rows=9)
            copied = target.series()
            runs = target.runs()
        expected = store.series()
    assert (done.copied, done.present, done.values) == (NIGHTS, 1, 4 * (NIGHTS - 1))
    assert copied.equals(expected[expected["run_id"] != "run-003"].reset_index(drop=True))
    assert runs["run_id"].tolist() == ["empty", *[f"run-{n:03d}" for n in range(NIGHTS)]]
    assert all("run_id" in where and size <= 9 for where, size in counting.calls)
    assert len(counting.calls) >= NIGHTS // 2


def test_history_copy_keeps_each_runs_time_to_the_bit(store_at, tmp_path: Path) -> None:  # noqa: ANN001
    # time.time() gives digits below the microsecond; the copy's runs keep them (it
    # rounded them to the microsecond before, moving a run by up to half of one)
    from perfcheck.history import Result, RunRecord
    from perfcheck.history.transfer import copy_store

    # 40 times to the float's last bit (a division of the nanoseconds by 1e9 got 7% of them
    # a unit in the last place off)
    times = sorted((START + np.random.default_rng(7).random(40) * 3e7).tolist())
    with open_store(tmp_path / "source.sqlite") as source, open_store(store_at("copy")) as target:
        for i, time in enumerate(times):
            source.add(RunRecord(f"r{i}", time), [Result("m", "s", "k", "duration", 1.0 + i, "s")])
        copy_store(source, target)
        got = target.runs()["time"]
        assert got.equals(source.runs()["time"])
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        assert [t for (t,) in db.execute("SELECT time FROM runs ORDER BY run")] == times
    nanoseconds = got.dt.as_unit("ns").array.asi8
    assert (nanoseconds // 10**9 + (nanoseconds % 10**9) / 1e9).tolist() == times


def _bencher_one_value_at_a_time(series: pd.DataFrame) -> list:
    """The documents as first made (before issue 22): names made for every value, every
    row of the sorted frame read on its own (the oracle)."""
    from perfcheck.history.export import _text, measure_name

    frame = series[np.isfinite(series["value"].astype(float))].copy()
    frame["benchmark"] = [benchmark_name(s, k) for s, k in zip(frame["suite"].astype(str), frame["kernel"].astype(str))]
    frame["measure"] = [measure_name(m, u) for m, u in zip(frame["metric"].astype(str), frame["unit"].fillna("").astype(str))]
    frame["bmf_value"] = frame["value"].astype(float) * np.where(frame["measure"] == LATENCY, 1e9, 1.0)
    frame = frame[np.isfinite(frame["bmf_value"])].copy()
    frame["bmf_lower"] = frame["bmf_value"] * (1.0 - frame["spread"].astype(float))
    frame["bmf_upper"] = frame["bmf_value"] * (1.0 + frame["spread"].astype(float))
    out = []
    for (run_id, machine), rows in frame.sort_values(["time", "run_id", "machine"], kind="stable").groupby(
            ["run_id", "machine"], sort=False):
        document: dict = {}
        for _, row in rows.iterrows():
            metric = {"value": float(row["bmf_value"])}
            if math.isfinite(row["bmf_lower"]) and math.isfinite(row["bmf_upper"]):
                metric.update(lower_value=float(row["bmf_lower"]), upper_value=float(row["bmf_upper"]))
            document.setdefault(row["benchmark"], {})[row["measure"]] = metric
        first = rows.iloc[0]
        out.append(({"run_id": str(run_id), "machine": str(machine), "commit": _text(first["commit"]),
                     "branch": _text(first["branch"]), "time": pd.Timestamp(first["time"]).isoformat()}, document))
    return out


def test_bencher_documents_and_their_text_are_the_value_by_value_ones_on_awkward_series() -> None:
    """Names made once per suite x kernel and metric x unit, and the documents written
    without json's indenting encoder (issue 22), give what the value-by-value documents
    and ``json.dumps(indent=2, sort_keys=True)`` gave: runs at one time on two machines,
    a metric whose measure is also "latency" (the last one read wins, as before), a
    latency that overflows in ns, missing spreads and commits, names to escape."""
    from perfcheck.history.export import _bmf_json

    rng = np.random.default_rng(5)
    rows = []
    for run, (run_id, time) in enumerate([("b", 1.7e9), ("a", 1.7e9), ("c", 1.7e9 + 3600.5), ("d", 1.8e9)]):
        for machine in ("m2", "m1"):
            for suite, kernel in (("s", "k\"1\"\n"), ("s", "ü<λ>"), ("t", "x" * 1100), ("t", "x" * 1100 + "y")):
                for metric, unit in (("duration", "s"), ("latency", ""), ("hbm_bw", "B/s"), ("calls", "count"),
                                     ("a" * 70, "%")):
                    value = rng.choice([rng.normal(1e-3, 1e-5), 3.0, -0.0, 1e300, float("nan"), 1e-7, 2.0**60])
                    rows.append({"machine": machine, "suite": suite, "kernel": kernel, "metric": metric,
                                 "unit": unit if run != 2 else None, "run_id": run_id, "value": value,
                                 "time": pd.Timestamp(time, unit="s", tz="UTC"), "spread": rng.choice([0.01, np.nan]),
                                 "commit": None if run == 1 else f"c{run}", "branch": "main"})
    frame = pd.DataFrame(rows).sample(frac=1.0, random_state=6).reset_index(drop=True)
    got = bencher_documents(frame)
    expected = _bencher_one_value_at_a_time(frame)
    assert got == expected and len(got) == 8
    assert any("latency" in doc[bench] for _, doc in got for bench in doc)
    for _, document in got:
        assert _bmf_json(document) == json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"
    assert _bmf_json({}) == "{}\n" and _bmf_json({"b": {}}) == json.dumps({"b": {}}, indent=2) + "\n"
    with pytest.raises(ValueError):
        _bmf_json({"b": {"m": {"value": float("nan")}}})
