"""Exports of the history for teams that outgrow a file: Bencher and time-series
databases (Prometheus/Grafana, VictoriaMetrics) take over from the store.

Bencher Metric Format (BMF, bencher.dev/docs/reference/bencher-metric-format): a
JSON object per run, ``{benchmark: {measure: {"value", "lower_value",
"upper_value"}}}``, fed to ``bencher run --adapter json --file F``, one file per
run and machine (Bencher's *testbed*), with a manifest naming each file's run,
commit and machine for ``--hash`` and ``--testbed``. Benchmarks are
``suite::kernel``; ``duration`` goes to Bencher's built-in ``latency`` measure,
which is in nanoseconds; every other metric to a measure named after it and its
base unit (``hbm_bw (B/s)``), which Bencher creates on first sight. Where a run
measured its spread (the robust relative standard deviation of the dispatch
samples) ``lower_value``/``upper_value`` are the value -/+ one such deviation.

OpenMetrics with timestamps: every stored value as a gauge sample at its run's
time, one family per metric (the names of ``perfcheck check --openmetrics``,
``perfcheck_duration_seconds``), labels ``machine``, ``suite``, ``kernel``, and
a ``perfcheck_run`` info family carrying each run's commit and branch. OpenMetrics
timestamps are seconds (``promtool tsdb create-blocks-from openmetrics`` backfills
Prometheus from it, Grafana reads Prometheus); the Prometheus text format's are
milliseconds, as VictoriaMetrics' ``/api/v1/import/prometheus`` takes them
(``prometheus_text``). A commit is not a label of the value series: a label that
changes every night would cut each series into one-point pieces.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd

from perfcheck.atomicfile import write_atomic
from perfcheck.report.openmetrics import escape_label, metric_name

# Bencher's limits: a benchmark name up to 1024 characters, a measure name up to 64.
MAX_BENCHMARK = 1024
MAX_MEASURE = 64
LATENCY = "latency"  # Bencher's built-in measure, nanoseconds
_OM_UNIT = {"s": "seconds", "B": "bytes", "B/s": "bytes_per_second", "%": "percent"}


def benchmark_name(suite: str, kernel: str) -> str:
    """``suite::kernel``; a name over Bencher's limit keeps its start and a digest
    of the whole, so two long C++ signatures stay two benchmarks."""
    name = f"{suite}::{kernel}"
    if len(name) <= MAX_BENCHMARK:
        return name
    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:12]
    return f"{name[: MAX_BENCHMARK - 13]}~{digest}"


def measure_name(metric: str, unit: str) -> str:
    if metric == "duration":
        return LATENCY
    name = f"{metric} ({unit})" if unit and unit != "count" else metric
    return name[:MAX_MEASURE]


def bencher_documents(series: pd.DataFrame) -> list[tuple[dict[str, object], dict[str, object]]]:
    """One BMF document per run x machine, oldest first: ``(manifest entry, document)``.

    ``series``: ``Store.series()`` (machine, suite, kernel, metric, unit, run_id,
    time, commit, value, spread, ...). Missing values are left out, never written
    as zero. Names are made once per suite x kernel and metric x unit, not per value."""
    frame = series[np.isfinite(series["value"].astype(float))].reset_index(drop=True)
    if frame.empty:
        return []
    bench_code, bench_pairs = _pair_codes(frame["suite"], frame["kernel"])
    benches = np.array([benchmark_name(s, k) for s, k in bench_pairs], dtype=object)[bench_code]
    measure_code, measure_pairs = _pair_codes(frame["metric"], frame["unit"].fillna(""))
    names = [measure_name(m, u) for m, u in measure_pairs]
    measures = np.array(names, dtype=object)[measure_code]
    latency = np.array([name == LATENCY for name in names])[measure_code]
    spread = (frame["spread"].to_numpy(dtype="float64", na_value=np.nan) if "spread" in frame
              else np.full(len(frame), np.nan))
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is inf, then left out
        value = frame["value"].to_numpy(dtype="float64", na_value=np.nan) * np.where(latency, 1e9, 1.0)  # ns
        lower, upper = value * (1.0 - spread), value * (1.0 + spread)
    keep = np.isfinite(value)  # a value that overflowed when scaled is missing, not inf
    keys = frame.loc[keep, ["time", "run_id", "machine"]]
    order = keys.sort_values(["time", "run_id", "machine"], kind="stable").index.to_numpy()
    run_ids = frame["run_id"].to_numpy(dtype=object)[order]
    machines = frame["machine"].to_numpy(dtype=object)[order]
    # a run's rows (same id, same time) are contiguous once sorted: one document per stretch
    edges = (np.flatnonzero((run_ids[1:] != run_ids[:-1]) | (machines[1:] != machines[:-1])) + 1).tolist()
    benches, measures = benches[order].tolist(), measures[order].tolist()
    value, lower, upper = value[order].tolist(), lower[order].tolist(), upper[order].tolist()
    out = []
    for start, end in zip([0, *edges], [*edges, len(order)]):
        document: dict[str, dict[str, dict[str, float]]] = {}
        for bench, measure, v, low, high in zip(benches[start:end], measures[start:end], value[start:end],
                                                lower[start:end], upper[start:end]):
            metric: dict[str, float] = {"value": v}
            if math.isfinite(low) and math.isfinite(high):
                metric.update(lower_value=low, upper_value=high)
            document.setdefault(bench, {})[measure] = metric
        first = int(order[start])
        entry = {
            "run_id": str(run_ids[start]),
            "machine": str(machines[start]),
            "commit": _text(frame["commit"].iloc[first]) if "commit" in frame else None,
            "branch": _text(frame["branch"].iloc[first]) if "branch" in frame else None,
            "time": pd.Timestamp(frame["time"].iloc[first]).isoformat(),
        }
        out.append((entry, document))
    return out


def _pair_codes(first: pd.Series, second: pd.Series) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Each row's code among the distinct (first, second) pairs, and those pairs as text."""
    first_code, first_names = pd.factorize(first.astype(str).to_numpy(dtype=object), use_na_sentinel=False)
    second_code, second_names = pd.factorize(second.astype(str).to_numpy(dtype=object), use_na_sentinel=False)
    width = max(1, len(second_names))
    pairs, code = np.unique(first_code * width + second_code, return_inverse=True)
    return code.reshape(-1), [(str(first_names[i // width]), str(second_names[i % width])) for i in pairs.tolist()]


def _bmf_json(document: dict[str, dict[str, dict[str, float]]]) -> str:
    """``json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\\n"``, the
    same text: json writes indented text in Python, not C, one call per key and value,
    which was most of the Bencher export's time (a run's file holds ~100,000 numbers)."""
    if not document or not all(document.values()):  # no document is empty; if one were, json writes it
        return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"
    key = json.encoder.encode_basestring_ascii  # how json.dumps writes a string (ensure_ascii)
    benches = []
    for bench in sorted(document):
        measures = document[bench]
        inner = []
        for measure in sorted(measures):
            fields = measures[measure]
            if not fields:
                return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"
            numbers = []
            for name in sorted(fields):
                number = fields[name]
                if not (isinstance(number, float) and math.isfinite(number)):
                    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"  # json says why
                numbers.append(f"{key(name)}: {float.__repr__(number)}")
            inner.append(f"{key(measure)}: {{\n      " + ",\n      ".join(numbers) + "\n    }")
        benches.append(f"{key(bench)}: {{\n    " + ",\n    ".join(inner) + "\n  }")
    return "{\n  " + ",\n  ".join(benches) + "\n}\n"


def _text(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return str(value)


def _file_name(run_id: str, machine: str) -> str:
    """A portable file name for the run: its id and machine where they are safe as they
    are; where a character had to be replaced or the name shortened, a digest of the
    exact pair is appended, so ``night/1``, ``night 1`` and ``night:1`` get three files."""
    raw = f"{run_id}--{machine}"
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-.")[:120]
    if clean != raw:
        digest = hashlib.sha1(f"{run_id}\0{machine}".encode("utf-8", "surrogatepass")).hexdigest()[:10]
        clean = f"{clean}~{digest}" if clean else digest
    return f"{clean}.json"


def write_bencher(series: "pd.DataFrame | Iterable[pd.DataFrame]", directory: str | Path) -> list[Path]:
    """``DIR/<run>--<machine>.json`` per run and ``DIR/manifest.json`` listing them
    (oldest first) with the commit, branch and machine ``bencher run`` needs.
    ``series`` may be frames of whole runs, oldest runs first (``backend.run_parts``):
    each is written as it comes, so memory holds a few runs, not the history."""
    target = Path(directory)
    manifest = []
    written = []
    for part in [series] if isinstance(series, pd.DataFrame) else series:
        for entry, document in bencher_documents(part):
            name = _file_name(entry["run_id"], entry["machine"])  # type: ignore[arg-type]
            written.append(write_atomic(target / name, _bmf_json(document)))
            manifest.append({**entry, "file": name})
        del part  # not held while the next part is read
    written.append(write_atomic(target / "manifest.json", json.dumps(manifest, indent=2) + "\n"))
    return written


# --- OpenMetrics / Prometheus text with timestamps ----------------------------------------


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in pairs) + "}"


def _timestamps(times: pd.Series, unit: str) -> list[str]:
    # as_unit: a frame's timestamps may be held in s, ms, us or ns (pandas 2)
    return _stamps(pd.DatetimeIndex(pd.to_datetime(times, utc=True)).as_unit("ns").asi8, unit)


def timestamped_metrics(series: pd.DataFrame, *, timestamps: str = "s") -> str:
    """Every stored value as a timestamped gauge sample.

    ``timestamps="s"``: OpenMetrics 1.0 text (``# UNIT`` lines, an info family for
    the runs, ``# EOF``). ``timestamps="ms"``: the Prometheus text format (0.0.4),
    which has no ``# UNIT``, no info type and no ``# EOF``."""
    return b"".join(piece if isinstance(piece, bytes) else piece.encode("utf-8")
                    for piece in timestamped_metric_pieces([series], timestamps=timestamps)).decode("utf-8")


def timestamped_metric_pieces(parts: Iterable[pd.DataFrame], *, timestamps: str = "s") -> Iterator[str | bytes]:
    """``timestamped_metrics`` of the frames ``parts`` (``HistoryStore.batches``: whole
    kernels, in series order) as pieces of text (str, or bytes in UTF-8 as they come
    back from the spool), holding one part in memory at a time.
    The text is grouped by metric family, the parts by kernel: each family's lines are
    spooled to a temporary file as the parts come, then the files are read out in
    family order (families sorted by name, each sorted by machine, suite, kernel,
    time, as one frame's sort puts them)."""
    if timestamps not in ("s", "ms"):
        raise ValueError(f"timestamps must be 's' or 'ms', not {timestamps!r}")
    openmetrics = timestamps == "s"
    headers: dict[str, str] = {}
    runs: dict[str, tuple[object, object, object]] = {}  # run id -> time, commit, branch; first seen first
    wrote = False
    with tempfile.TemporaryDirectory(prefix="perfcheck-export-") as spool:
        files: dict[str, BinaryIO] = {}
        try:
            for series in parts:
                for family, header, body in _family_lines(series, timestamps, openmetrics):
                    if family not in files:
                        headers[family] = header
                        files[family] = open(Path(spool) / f"{len(files)}.txt", "w+b")  # noqa: SIM115
                    files[family].write(body.encode("utf-8"))
                # each run's first row in this part (the order the runs are first seen in)
                firsts = series.drop_duplicates("run_id")
                columns = [firsts[key] if key in firsts else pd.Series(None, index=firsts.index)
                           for key in ("time", "commit", "branch")]
                for run_id, *about in zip(firsts["run_id"], *columns):
                    runs.setdefault(run_id, tuple(about))  # type: ignore[arg-type]
            for family in sorted(files):
                yield headers[family]
                wrote = True
                handle = files[family]
                handle.seek(0)
                while chunk := handle.read(1 << 22):
                    yield chunk
        finally:
            for handle in files.values():
                handle.close()
    if runs:
        table = pd.DataFrame(list(runs.values()), columns=["time", "commit", "branch"], index=list(runs))
        table = table.sort_values("time", kind="stable")
        # OpenMetrics: an info family "perfcheck_run" whose samples are "perfcheck_run_info";
        # the Prometheus text format has no info type: a gauge named as its samples.
        name = "perfcheck_run" if openmetrics else "perfcheck_run_info"
        lines = [f"# TYPE {name} {'info' if openmetrics else 'gauge'}",
                 f"# HELP {name} perfcheck history: one sample per run, its commit and branch"]
        sample = "perfcheck_run_info"
        for run_id, commit, branch, stamp in zip(table.index, table["commit"], table["branch"],
                                                 _timestamps(table["time"], timestamps)):
            pairs = [("run_id", str(run_id))] + [(k, t) for k, t in (("commit", _text(commit)), ("branch", _text(branch))) if t]
            lines.append(f"{sample}{_labels(pairs)} 1 {stamp}")
        yield "\n".join(lines) + "\n"
        wrote = True
    if openmetrics:
        yield "# EOF\n"
    elif not wrote:
        yield "\n"  # as "\n".join of no lines, plus its newline


def _family_lines(series: pd.DataFrame, timestamps: str, openmetrics: bool) -> Iterator[tuple[str, str, str]]:
    """(family, its header lines, its sample lines) of one frame, families in name order,
    each family's samples by machine, suite, kernel, then time (ties in frame order).

    A part holds a few thousand series of a few hundred runs: the names, labels and
    time stamps are made once per series, kernel and run and only picked per sample
    (making them per sample was nine tenths of ``history export``'s time)."""
    values = series["value"].to_numpy(dtype="float64", na_value=np.nan)
    keep = np.flatnonzero(np.isfinite(values))
    if not len(keep):
        return
    frame = series.iloc[keep]
    values = values[keep]
    # the family of each (metric, unit) pair, ranked by name: the first sort key
    pair_code, pair_names = _pair_codes(frame["metric"], frame["unit"].fillna(""))
    families = [metric_name(m, u) for m, u in pair_names]
    names = sorted(set(families))
    family_rank = np.array([names.index(f) for f in families])[pair_code]
    # machine x suite x kernel, ranked as sorting the three names would: the next keys
    kernel_code = frame.groupby(["machine", "suite", "kernel"], sort=True, observed=True).ngroup().to_numpy()
    ns = pd.DatetimeIndex(pd.to_datetime(frame["time"], utc=True)).as_unit("ns").asi8
    order = np.lexsort((ns, kernel_code, family_rank))  # stable: ties keep the frame's order
    firsts = np.unique(kernel_code, return_index=True)[1]
    labels = [_labels((("machine", str(a)), ("suite", str(b)), ("kernel", str(c))))
              for a, b, c in frame[["machine", "suite", "kernel"]].iloc[firsts].itertuples(index=False, name=None)]
    moments, moment = np.unique(ns, return_inverse=True)
    stamps = np.array(_stamps(moments, timestamps), dtype=object)[moment.reshape(-1)[order]]
    # each sample's line without its name and labels: "value stamp\n"
    tails = [f"{number} {stamp}\n" for number, stamp in zip(_numbers(values[order]), stamps.tolist())]
    sorted_rank, sorted_kernel = family_rank[order], kernel_code[order]
    # one slice per family (contiguous once sorted), then one per series of samples within it
    edges = np.flatnonzero(np.diff(sorted_rank)) + 1
    for start, end in zip(np.r_[0, edges].tolist(), np.r_[edges, len(order)].tolist()):
        family = names[int(sorted_rank[start])]
        metric, unit = pair_names[int(pair_code[order[start]])]
        header = [f"# TYPE {family} gauge"]
        om_unit = _OM_UNIT.get(unit, "")
        if openmetrics and om_unit and family.endswith(om_unit):
            header.append(f"# UNIT {family} {om_unit}")
        header.append(f"# HELP {family} perfcheck history: {metric} per run, in {unit or 'count'}")
        kernels = sorted_kernel[start:end]
        cuts = np.flatnonzero(np.diff(kernels)) + 1
        pieces = []
        for a, b in zip(np.r_[start, cuts + start].tolist(), np.r_[cuts + start, end].tolist()):
            head = f"{family}{labels[int(sorted_kernel[a])]} "  # the series' name and labels, once
            pieces.append(head + head.join(tails[a:b]))  # head tail head tail ...: one line per sample
        yield family, "\n".join(header) + "\n", "".join(pieces)


def _stamps(ns: np.ndarray, unit: str) -> list[str]:
    """``_timestamps`` of nanoseconds since the epoch."""
    if unit == "ms":
        return [str(v) for v in (ns // 1_000_000).tolist()]
    # seconds with the fraction OpenMetrics allows; whole seconds without one
    return [str(v // 1_000_000_000) if v % 1_000_000_000 == 0 else repr(v / 1e9) for v in ns.tolist()]


def _numbers(values: np.ndarray) -> list[str]:
    """Each (finite) value as text: whole numbers below 2**53 without a fraction, others
    as Python writes them (the shortest text that reads back as the same float)."""
    whole = (np.floor(values) == values) & (np.abs(values) < 2**53)
    out = np.empty(len(values), dtype=object)
    out[~whole] = list(map(repr, values[~whole].tolist()))
    out[whole] = list(map(str, values[whole].astype(np.int64).tolist()))  # below 2**53: exact in int64
    return out.tolist()  # type: ignore[no-any-return]


def write_timestamped_metrics(series: "pd.DataFrame | Iterable[pd.DataFrame]", path: str | Path, *,
                              timestamps: str = "s") -> Path:
    """``timestamped_metrics`` into ``path`` (atomically); ``series`` may be the parts
    of ``HistoryStore.batches``, written as they come."""
    parts = [series] if isinstance(series, pd.DataFrame) else series
    return write_atomic(path, timestamped_metric_pieces(parts, timestamps=timestamps))
