"""The timeline of a PyTorch profiler (Kineto) trace: kernels, memory copies and
memsets on the device, and the user's ranges. See the kernel reader
(``perfcheck.ingest.kineto``) for the format. The file is read as a stream
(``perfcheck.ingest.jsonstream``): a 1 GB trace (6M events) is read in about 2.2 GB
of memory, where ``json.load`` of it needs about 9 GB.

Seen in real traces (A100 2023, MI250 ROCm 6.2, H100 2026):

* Copies are category ``gpu_memcpy``, named ``Memcpy HtoD (Pageable -> Device)``,
  ``Memcpy DtoD (Device -> Device)``, ``Memcpy PtoP ...``; CUPTI traces give
  ``args.bytes``, roctracer traces (MI250) give no bytes but ``args.kind``
  (``HtoD``). Memsets are ``gpu_memset`` (``Memset (Device)``, ``args.bytes``).
* ``user_annotation`` events are the host side of ``record_function`` ranges and
  of ``ProfilerStep#N``; ``gpu_user_annotation`` their projection on a device
  stream (pid = device, tid = stream), from the first to the last GPU activity the
  range launched.
* ``cuda_sync`` events (stream/event/device synchronisation) are host waits: they
  are not device activity and are not read (HTA counts them as GPU events; see
  docs/timeline.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.jsonstream import ArrayStream, Columns
from perfcheck.ingest.kineto import FORMAT, TOOL, _version
from perfcheck.ingest.names import gnu_style
from perfcheck.ingest.tabular import coerce_integers, coerce_numbers
from perfcheck.ingest.timeline import (DEVICE, HOST, KERNEL, MEMCPY, MEMSET, TraceTimeline, activity_frame,
                                       range_frame)
from perfcheck.model import Oddity, Source

__all__ = ["FORMAT", "read"]

_ACTIVITY = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "gpu_memset": MEMSET}
_RANGES = {"user_annotation": HOST, "gpu_user_annotation": DEVICE}
# "Memcpy HtoD (Pageable -> Device)" (CUPTI) and args.kind "HtoD" (roctracer).
_COPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|PtoP|HtoH)\b")
_DIRECTION = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "PtoP": "P2P", "HtoH": "H2H"}


def _ns(ts: pd.Series) -> pd.Series:
    """µs (int or float with ns decimals) -> Int64 ns, whole and fraction apart so
    that epoch-based values (1.7e15 µs) keep their precision."""
    ts = ts.astype("float64").where(np.isfinite(ts.astype("float64")))
    whole = np.floor(ts)
    return coerce_integers(whole)[0] * 1000 + coerce_integers(np.round((ts - whole) * 1000))[0]


def _numbers(values: list[Any]) -> pd.Series:
    """JSON values -> numbers. The common case (numbers and nulls) is one inference
    pass; anything else (text, lists, booleans in a damaged trace) goes through the
    element-wise coercion, which leaves them missing."""
    series = pd.Series(values, dtype=None if values else "float64")
    if series.dtype.kind in "iuf":
        return series
    return coerce_numbers(series.astype("object"))


_NUMERIC = ("ts", "dur", "device", "stream", "bytes", "pid", "tid")
# The text columns, kept as codes into one dictionary per column while the trace
# streams by: a 1 GB trace repeats a few hundred names millions of times.
_CODED = ("cat", "name", "kind")


def _columns(events: list[dict[str, Any]]) -> dict[str, Any]:
    """One batch of events as columns: the numbers as float64 arrays (what is not a
    number is NaN), the text as lists."""
    args = [e["args"] if isinstance(e.get("args"), dict) else {} for e in events]
    numbers = {
        "ts": [e.get("ts") for e in events], "dur": [e.get("dur") for e in events],
        "device": [a.get("device") for a in args], "stream": [a.get("stream") for a in args],
        "bytes": [a.get("bytes") for a in args],
        "pid": [e.get("pid") for e in events], "tid": [e.get("tid") for e in events],
    }
    out: dict[str, Any] = {name: _numbers(values).astype("float64").to_numpy() for name, values in numbers.items()}
    out["cat"] = [str(e.get("cat", "")).lower() for e in events]
    out["name"] = [n if isinstance(n := e.get("name"), str) else None if n is None else str(n) for e in events]
    out["kind"] = [k if isinstance(k := a.get("kind"), str) else None for a in args]
    return out


_MISSING = np.iinfo("int64").min  # an event time that is not a finite number


def _times(columns: dict[str, Any]) -> None:
    """A batch's ``ts``/``dur`` (µs) -> ``start_ns``/``end_ns`` (int64, ``_MISSING``
    where not finite or the duration is negative), computed per batch so that the
    whole trace never holds its µs floats and their temporaries at once."""
    ts, dur = pd.Series(columns.pop("ts")), pd.Series(columns.pop("dur"))
    start = _ns(ts)
    end = start + _ns(dur).where(dur >= 0)
    columns["start_ns"] = start.to_numpy(dtype="int64", na_value=_MISSING)
    columns["end_ns"] = end.to_numpy(dtype="int64", na_value=_MISSING)


def _events(path: Path) -> tuple[dict[str, np.ndarray], dict[str, list[str]], dict[str, Any]]:
    """The timeline's events of the trace as columns (numbers; ``cat``, ``name`` and
    ``kind`` as int32 codes into the second value's lists, -1 missing), and the
    trace's other top-level keys; read in bounded memory (``perfcheck.ingest.
    jsonstream``): each batch of events is filtered and reduced to numbers and codes
    before the next is decoded."""
    stream = ArrayStream(path, "traceEvents", cut_hint="is the trace complete? a cut-off trace lacks its "
                                                       "closing brackets", kind_hint="is this a Kineto trace?")
    wanted = set(_ACTIVITY) | set(_RANGES)
    codes: dict[str, dict[str, int]] = {column: {} for column in _CODED}
    kept = Columns()
    for batch in stream.batches():
        events = [e for e in batch
                  if isinstance(e, dict) and e.get("ph", "X") == "X" and str(e.get("cat", "")).lower() in wanted]
        if not events:
            continue
        columns = _columns(events)
        for column in _CODED:
            local, uniques = pd.factorize(pd.Series(columns[column], dtype="object"), use_na_sentinel=True)
            known = codes[column]
            to_global = np.array([known.setdefault(str(u), len(known)) for u in uniques] + [-1], dtype="int32")
            columns[column] = to_global[local]
        _times(columns)
        kept.add(columns)
    if not stream.found:
        raise InputError(path, "no 'traceEvents' list", hint="is this a torch.profiler trace (export_chrome_trace)?")
    if not kept.size:
        kept.add({**{c: np.zeros(0) for c in _NUMERIC if c not in ("ts", "dur")},
                  **{c: np.zeros(0, dtype="int32") for c in _CODED},
                  **{c: np.zeros(0, dtype="int64") for c in ("start_ns", "end_ns")}})
    return kept.trimmed(), {c: list(codes[c]) for c in _CODED}, stream.doc


def read(path: Path) -> TraceTimeline:
    columns, categories, doc = _events(path)
    oddities: list[Oddity] = []
    bad = (columns["start_ns"] == _MISSING) | (columns["end_ns"] == _MISSING)
    if bad.any():
        oddities.append(Oddity(str(path), "event without a finite 'ts' or a non-negative 'dur' left out of the "
                                          "timeline", int(bad.sum())))
    cats = np.array(categories["cat"] + [""], dtype=object)[columns["cat"]]  # code -1: the last, ""
    on_device = np.isin(cats, list(_ACTIVITY)) & ~bad
    in_range = np.isin(cats, list(_RANGES)) & ~bad

    # per distinct name (a few hundred), not per event: the GNU spelling of kernels and
    # the copy kind a copy's name says ("Memcpy HtoD (Pageable -> Device)")
    names = pd.Series(categories["name"], dtype="string")
    spelled = np.array(list(gnu_style(names).to_numpy(dtype=object, na_value=None)) + [None], dtype=object)
    plain = np.array(categories["name"] + [None], dtype=object)
    by_name = np.array(list(names.str.extract(_COPY_KIND, expand=False).map(_DIRECTION)
                            .to_numpy(dtype=object, na_value=None)) + [None], dtype=object)
    kinds = pd.Series(categories["kind"], dtype="string")
    by_kind = np.array(list(kinds.str.extract(_COPY_KIND, expand=False).map(_DIRECTION)
                            .to_numpy(dtype=object, na_value=None)) + [None], dtype=object)

    on = np.where(cats[in_range] == "gpu_user_annotation", DEVICE, HOST)
    # gpu_user_annotation: pid is the device, tid the stream; user_annotation: tid is the thread.
    pid = coerce_integers(pd.Series(columns["pid"][in_range]))[0]
    tid = coerce_integers(pd.Series(columns["tid"][in_range]))[0]
    ranges = range_frame({
        "name": plain[columns["name"][in_range]],
        "on": on,
        "device_id": pid.where(on == DEVICE).to_numpy(),
        "thread": tid.where(on == HOST).to_numpy(),
        "start_ns": columns["start_ns"][in_range],
        "end_ns": columns["end_ns"][in_range],
    }, int(in_range.sum()))

    # each whole column is let go once its rows are taken: a 1 GB trace's columns are 400 MB
    del columns["pid"], columns["tid"]
    device_cat = cats[on_device]
    name_code = columns["name"][on_device]
    is_kernel, is_copy = device_cat == "kernel", device_cat == "gpu_memcpy"
    direction = np.where(is_copy, by_name[name_code], None)
    direction = np.where(is_copy & (direction == None), by_kind[columns["kind"][on_device]], direction)  # noqa: E711
    activities = activity_frame({
        "kind": np.where(is_kernel, KERNEL, np.where(is_copy, MEMCPY, MEMSET)).astype(object),
        "name": np.where(is_kernel, spelled[name_code], plain[name_code]),
        "device_id": coerce_integers(pd.Series(columns.pop("device")[on_device]))[0].to_numpy(),
        "stream_id": coerce_integers(pd.Series(columns.pop("stream")[on_device]))[0].to_numpy(),
        "start_ns": columns.pop("start_ns")[on_device],
        "end_ns": columns.pop("end_ns")[on_device],
        "bytes": columns.pop("bytes")[on_device],
        "direction": direction,
    }, int(on_device.sum()))

    info = doc.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
    if activities.empty:
        oddities.append(Oddity(str(path), "holds no kernel, memcpy or memset events; was the profiler run with "
                                          "ProfilerActivity.CUDA?"))
    source = Source(path=str(path), format=FORMAT, tool=TOOL, tool_version=_version(doc), rank=rank)
    return TraceTimeline(activities=activities, ranges=ranges, source=source, oddities=tuple(oddities))
