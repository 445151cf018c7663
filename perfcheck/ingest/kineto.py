"""PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip-compressed.

``torch.profiler`` / libkineto write ``{"schemaVersion": 1, "deviceProperties":
[...], "traceEvents": [...]}``; the file may start with a newline. One row per
event whose category is ``kernel`` (compared case-insensitively: 2021-era traces
write ``Kernel``). Seen in real files:

* NVIDIA (CUPTI; A100 2023, H100 2026): kernel ``args`` hold ``device``,
  ``context``, ``stream``, ``correlation``, ``registers per thread``, ``shared
  memory`` (static + dynamic, bytes), ``blocks per SM``, ``warps per SM``, ``grid``
  and ``block`` (``[x, y, z]``, the grid in blocks) and ``est. achieved occupancy
  %`` (Kineto's estimate from the occupancy calculator, not a measurement). 2026
  traces may add a nested ``occupancy`` object (``activeBlocksPerMultiprocessor``,
  ``blockLimitRegs``, ...) in which 2147483647 (INT_MAX) means "no limit"; it is
  optional even within one version.
* AMD (roctracer, ROCm 6.2, MI250): kernel events carry only ``device``,
  ``stream``, ``correlation`` and ``kind``. Grid, block, shared memory and the
  full name are on the launching ``cuda_runtime`` event (``hipLaunchKernel``,
  ``hipExtModuleLaunchKernel``), joined on ``correlation``.
  ``hipLaunchKernel`` takes the grid in blocks, like CUDA; ``hipExtModuleLaunchKernel``
  takes the *global work size in work-items* (HIP API reference,
  hipExtModuleLaunchKernel ``globalWorkSizeX``), so its ``grid`` is not multiplied.
* ``deviceProperties`` lists every visible GPU, not the one that ran: the device
  of a kernel is its ``args.device``. ``computeMajor/Minor`` give the NVIDIA
  architecture (``sm_80``); on AMD they read 9.0 for gfx90a, so the gfx target is
  taken from Tensile kernel names (``..._ISA90a_...``) when present.
* Times: ``ts`` and ``dur`` are microseconds (integers in 2023, floats with ns
  decimals since), ``ts`` on the Unix epoch or relative to
  ``baseTimeNanoseconds``. Only ``dur`` is used for durations; ``start_ns`` is
  the file's own clock and must not be compared across files.
* ``distributedInfo.rank`` gives the rank of a distributed run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcheck.documents import bounded
from perfcheck.errors import InputError
from perfcheck.ingest import jsonsniff
from perfcheck.ingest.formats import Format, Scan, Sniff, Want
from perfcheck.ingest.jsonstream import ArrayStream, Columns
from perfcheck.ingest.names import gnu_style, readable
from perfcheck.ingest.tabular import coerce_integers, coerce_numbers, cuda_arch
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

FORMAT = "kineto"
TOOL = "kineto"
# CUDA's occupancy calculator writes INT_MAX for a resource that sets no limit.
NO_LIMIT = 2**31 - 1

_IDENTITY = {"device": "device_id", "context": "context_id", "stream": "stream_id", "correlation": "correlation_id"}
# Launch arguments passed through as raw values besides the canonical columns.
_RAW_ARGS = ("queued", "blocks per SM", "warps per SM", "est. achieved occupancy %")
# Launch calls whose grid is a global size in work-items, not a count of blocks.
_WORK_ITEM_GRID = ("hipExtModuleLaunchKernel",)
_ISA = re.compile(r"_ISA(\d{2,3}[a-z]?)_")
# Event categories only torch.profiler writes (2021 spellings capitalised).
_KINETO_CATEGORY = re.compile(r'"cat"\s*:\s*"(?:kernel|Kernel|cuda_runtime|Runtime|cpu_op|Operator|gpu_memcpy|Memcpy)"')


def _is_kineto(sniff: Sniff) -> bool:
    """By the top-level keys, read as far as they go (jsonsniff): real traces put
    20-30 KiB of deviceProperties/distributedInfo before "traceEvents"."""
    if sniff.is_dir:
        return False
    # Read until "traceEvents": Kineto writes schemaVersion and the metadata before it.
    # The text read then reaches to the end of the 64 KiB piece, past the first events.
    top = jsonsniff.keys(sniff.path, until=frozenset({"traceEvents"}), brackets="{")
    if top is None:
        return False
    # rocprof v1 results.json is a Chrome trace too, without schemaVersion (its own reader,
    # sniffed first). Early (2021) Kineto traces may lack schemaVersion: their categories tell.
    if top.has("schemaVersion", 1):
        return top.has("traceEvents", 1) or top.has("deviceProperties", 1)
    return top.has("traceEvents", 1) and _KINETO_CATEGORY.search(top.text) is not None


_CUT_HINT = "is the trace complete? a cut-off trace lacks its closing brackets"
_KIND_HINT = "is this a Kineto trace?"
MISSING = np.iinfo("int64").min  # an integer argument that is absent or no integer (coerce_integers)
# Launch arguments read as integers, and the launch shape (``[x, y, z]`` lists).
_INTEGER_ARGS = (*_IDENTITY, "registers per thread", "shared memory")
_DIMS = ("grid", "block")
# What the launching runtime call gives where the kernel event lacks it (AMD).
_JOINED = ("grid", "block", "shared memory")


def _text(value: object) -> str | None:
    """A JSON value where a name belongs, as pandas' ``astype("string")`` spells it."""
    if isinstance(value, str):
        return value
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _numbers(values: list[Any]) -> np.ndarray:
    """JSON values -> float64 (what is no number NaN). The Series' own type inference
    first: a column of numbers needs no element-wise coercion."""
    return coerce_numbers(pd.Series(values, dtype=None if values else "float64")).astype("float64").to_numpy()


def _integers(values: list[Any] | pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """JSON values -> int64 (``MISSING`` where absent or no integer), and where a
    present value was no integer (coerce_integers' count, per value)."""
    series = values if isinstance(values, pd.Series) else pd.Series(values, dtype=None if values else "float64")
    ints = coerce_integers(series)[0]
    bad = series.notna().to_numpy() & ints.isna().to_numpy()
    return ints.to_numpy(dtype="int64", na_value=MISSING), bad


def _dims(values: list[Any], name: str, out: dict[str, np.ndarray]) -> None:
    """``[x, y, z]`` lists -> three int64 columns ``name.x`` ...; anything else is
    missing. ``name.present``: a value was there (the kernel's own, even if no list,
    wins over the launch call's); ``name.bad``: how many of its three were no integer."""
    series = pd.Series(values, dtype=object)
    ok = series.map(lambda v: isinstance(v, list) and len(v) == 3)
    dims = pd.DataFrame(series.where(ok).map(lambda v: v if isinstance(v, list) else [None] * 3).tolist(),
                        columns=["x", "y", "z"])
    bad = np.zeros(len(series), dtype="uint8")  # uint8: a batch without the argument fills in 0
    for d in "xyz":
        out[f"{name}.{d}"], wrong = _integers(dims[d])
        bad += wrong
    if bad.any():
        out[f"{name}.bad"] = bad
    out[f"{name}.present"] = series.notna().to_numpy()


class _Names:
    """Names as int32 codes into one list (-1: none): a trace repeats a few hundred
    names millions of times."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def encode(self, values: list[Any]) -> np.ndarray:
        try:  # names are text: one factorize, and _text for the few distinct values
            local, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
            exact = all(isinstance(u, str) for u in uniques)
        except TypeError:  # a list or an object where a name belongs
            exact = False
        if not exact:  # 1, 1.0 and True are one key to factorize, three names to pandas' astype("string")
            local, uniques = pd.factorize(pd.Series([_text(v) for v in values], dtype=object), use_na_sentinel=True)
        to_global = np.array([self.codes.setdefault(u, len(self.codes)) for u in uniques] + [-1], dtype="int32")
        return to_global[local]

    def decoded(self) -> np.ndarray:
        """Code -> name (lone surrogates shown as U+FFFD); code -1, the last, is None."""
        return np.array([readable(n) for n in self.codes] + [None], dtype=object)


class _Trace:
    """What the kernel table needs of a trace, kept batch by batch as the events stream
    by: the kernel events' arguments as typed columns, the launching runtime calls
    that carry a grid (AMD), the keys seen in each (a key that no event has is no
    column, as ``pandas.DataFrame`` of the events' ``args`` would have none)."""

    def __init__(self, raw: bool) -> None:
        self.raw = raw
        self.names = _Names()
        self.kernels, self.launches = Columns(), Columns()
        self.kernel_keys: set[str] = set()
        self.launch_keys: set[str] = set()
        self.categories: set[str] = set()  # for the warning when there is no kernel at all
        self.occupancy: dict[str, int] = {}  # nested occupancy key -> kernels where it was an integer
        self._wanted = {*_INTEGER_ARGS, *_DIMS, "launch", *((*_RAW_ARGS, "occupancy") if raw else ())}

    def add(self, batch: list[Any]) -> None:
        kernels, launches = [], []
        for e in batch:
            if not isinstance(e, dict) or e.get("ph", "X") != "X":
                continue
            category = str(e.get("cat", "")).lower()
            if category == "kernel":
                kernels.append(e)
            elif category == "cuda_runtime" and isinstance(e.get("args"), dict) and "grid" in e["args"]:
                launches.append(e)
        if not self.kernels.size and not kernels:
            self.categories.update(str(c) for e in batch if isinstance(e, dict) and (c := e.get("cat")))
        if kernels:
            self.kernels.add(self._kernels(kernels))
        if launches:
            self.launches.add(self._launches(launches))

    def _kernels(self, events: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        args = [a if isinstance(a := e.get("args"), dict) else {} for e in events]
        keys = set().union(*args) & self._wanted
        self.kernel_keys |= keys
        out = {"name": self.names.encode([e.get("name") for e in events]),
               "ts": _numbers([e.get("ts") for e in events]), "dur": _numbers([e.get("dur") for e in events])}
        for key in keys.intersection(_INTEGER_ARGS):
            out[key], bad = _integers([a.get(key) for a in args])
            if bad.any():  # else left to the columns' fill, False: a column less in a sound batch
                out[f"{key}.bad"] = bad
        for key in keys.intersection(_DIMS):
            _dims([a.get(key) for a in args], key, out)
        for key in keys.intersection(_RAW_ARGS):
            out[key] = _numbers([a.get(key) for a in args])
        if "launch" in keys:  # an argument of that name, where no launch call is joined
            out["launch"] = np.array([a.get("launch") in _WORK_ITEM_GRID for a in args])
        if "occupancy" in keys:
            self._occupancy([o if isinstance(o := a.get("occupancy"), dict) else {} for a in args], out)
        return out

    def _occupancy(self, nested: list[dict[str, Any]], out: dict[str, np.ndarray]) -> None:
        """The nested occupancy object's values as numbers (pandas.to_numeric), and per
        key how many kernels had an integer there: a key that every kernel has as an
        integer stays an integer column, as a frame of the whole trace's objects."""
        keys: dict[str, None] = {}
        for o in nested:
            keys.update(dict.fromkeys(o))
        for key in keys:
            values = pd.to_numeric(pd.Series([o.get(key) for o in nested]), errors="coerce")
            integral = values.dtype.kind in "iu"
            self.occupancy[key] = self.occupancy.get(key, 0) + (len(nested) if integral else 0)
            out[f"occupancy.{key}"] = values.astype("float64").to_numpy()

    def _launches(self, events: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        args = [e["args"] for e in events]
        keys = set().union(*args) & {"correlation", *_JOINED, "kernel"}
        self.launch_keys |= keys
        out = {"work_items": np.array([e.get("name") in _WORK_ITEM_GRID for e in events])}
        if "correlation" in keys:
            out["correlation"] = _integers([a.get("correlation") for a in args])[0]
        for key in keys.intersection(_DIMS):
            _dims([a.get(key) for a in args], key, out)
        if "shared memory" in keys:
            out["shared memory"], bad = _integers([a.get("shared memory") for a in args])
            if bad.any():
                out["shared memory.bad"] = bad
        if "kernel" in keys:  # the full name; an empty one is none
            out["kernel"] = self.names.encode([None if (k := a.get("kernel")) == "" else k for a in args])
        return out


def _read(path: Path, want: Want) -> tuple[_Trace, dict[str, Any]]:
    """The trace's kernel table columns and its other top-level keys, read as a stream
    (perfcheck.ingest.jsonstream): memory holds one batch of decoded events and the
    columns, not the document (``json.load`` of a 1 GB trace needs about 9 GB)."""
    stream = ArrayStream(path, "traceEvents", cut_hint=_CUT_HINT, kind_hint=_KIND_HINT, strict=True,
                         gzip_hint="is the file complete? torch.profiler writes it when the profiler stops")
    trace = _Trace(want.raw)
    for batch in stream.batches():
        trace.add(batch)
    if not stream.found:
        raise InputError(path, "no 'traceEvents' list", hint="is this a torch.profiler trace (export_chrome_trace)?")
    doc = stream.doc
    if stream.surrogates:
        with bounded(path, "JSON", hint=_KIND_HINT):  # the walk recurses as deep as the document nests
            doc = readable(doc)  # type: ignore[assignment]
    return trace, doc


def _names(names: np.ndarray, codes: np.ndarray) -> pd.Series:
    """Name codes (-1: none) -> a categorical of the names the rows use (two codes
    whose names read alike once made readable are one category)."""
    used = np.unique(codes[codes >= 0])
    merged, uniques = pd.factorize(pd.Series(names[used], dtype=object))
    remap = np.full(len(names), -1, dtype=np.int64)  # the last entry: code -1, no name
    remap[used] = merged
    return pd.Series(pd.Categorical.from_codes(remap[codes], pd.Index(pd.array(list(uniques), dtype="string"))))


def _int64(values: np.ndarray) -> pd.Series:
    return pd.Series(pd.arrays.IntegerArray(values, values == MISSING))


def _part(columns: dict[str, np.ndarray], name: str, rows: int) -> np.ndarray:
    """A column; a ``.bad`` column no batch needed is all zero."""
    return columns[name] if name in columns else np.zeros(rows, dtype="uint8")


def _take(values: np.ndarray, at: np.ndarray, fill: Any) -> np.ndarray:
    """``values[at]``, ``fill`` where ``at`` is -1 (no launch call)."""
    return np.where(at >= 0, values[np.maximum(at, 0)], fill)


def _join_launches(trace: _Trace, kernels: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """Fill grid/block/shared memory/full name from the launching runtime call
    (AMD traces put them only there), matched on ``correlation``: the kernel's own
    value where it has one (of any type), else the last launch call's with its
    correlation. Returns the kernel columns so filled (with ``launch.work_items``),
    or None when there is nothing to join."""
    if not trace.launches.size or "correlation" not in trace.kernel_keys or "correlation" not in trace.launch_keys:
        return None
    launches = trace.launches.trimmed()
    correlation = _int64(launches["correlation"])
    kept = correlation[correlation.notna()]
    kept = kept[~kept.duplicated(keep="last")]
    at = _int64(kernels["correlation"]).map(pd.Series(kept.index.to_numpy(), index=kept.to_numpy()))
    at = at.to_numpy(dtype="float64", na_value=np.nan)
    at = np.where(np.isnan(at), -1, at).astype("int64")
    out = dict(kernels)
    for key in _JOINED:
        if key not in trace.launch_keys:
            continue
        parts = [f"{key}.{d}" for d in "xyz"] + [f"{key}.bad"] if key in _DIMS else [key, f"{key}.bad"]
        found = {part: _take(_part(launches, part, trace.launches.size), at, 0 if part.endswith(".bad") else MISSING)
                 for part in parts}
        if key in trace.kernel_keys:
            own = kernels[f"{key}.present"] if key in _DIMS else (
                (kernels[key] != MISSING) | _part(kernels, f"{key}.bad", len(at)))
            found = {part: np.where(own, _part(kernels, part, len(at)), found[part]) for part in parts}
        out.update(found)
    if "kernel" in trace.launch_keys:
        full = _take(launches["kernel"], at, -1)
        out["name"] = np.where(full >= 0, full, kernels["name"])
    out["launch.work_items"] = _take(launches["work_items"], at, False)
    return out


def _devices(doc: dict[str, Any]) -> pd.DataFrame:
    props = [p for p in doc.get("deviceProperties") or [] if isinstance(p, dict) and isinstance(p.get("id"), int)]
    return pd.DataFrame(props).drop_duplicates("id").set_index("id") if props else pd.DataFrame()


def _arch(props: pd.Series, names: pd.Series) -> str | None:
    if str(props.get("name", "")).startswith("AMD") or props.get("warpSize") == 64:
        isa = names.str.extract(_ISA, expand=False).dropna().unique()
        return f"gfx{isa[0]}" if len(isa) == 1 else None
    return cuda_arch(props.get("computeMajor"), props.get("computeMinor"))


def _bad(columns: dict[str, np.ndarray], key: str) -> int:
    return int(columns[f"{key}.bad"].sum()) if f"{key}.bad" in columns else 0


@dataclass(frozen=True)
class _Table:
    """The kernel table's columns (launch calls joined) and what holds for the whole
    trace; ``frame`` builds the dispatch table of a range of kernels."""

    columns: dict[str, np.ndarray]
    has: frozenset[str]  # the arguments that are columns (some kernel, or joined launch call, had them)
    names: np.ndarray  # name code -> name
    warp_size: pd.Series | None  # deviceProperties' warpSize by id, where a kernel's device is listed
    occupancy: dict[str, str]  # nested occupancy key -> its column's dtype, for the keys that hold numbers
    raw: bool

    def dims(self, lo: int, hi: int) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        """Grid and block (x, y, z) of kernels ``lo:hi``; None without both arguments."""
        if not ("grid" in self.has and "block" in self.has):
            return None
        grid, block = (pd.DataFrame({d: _int64(self.columns[f"{key}.{d}"][lo:hi]) for d in "xyz"}) for key in _DIMS)
        # A launch has at least one block of one thread in each dimension; anything else is no geometry.
        impossible = (grid <= 0).any(axis=1) | (block <= 0).any(axis=1)
        return grid.mask(impossible), block.mask(impossible)

    def frame(self, lo: int, hi: int) -> pd.DataFrame:
        columns = {name: values[lo:hi] for name, values in self.columns.items()}
        frame = pd.DataFrame(index=pd.RangeIndex(hi - lo))
        # dictionary-encoded, as the other streamed readers give names (dispatch.clean_kernel_names):
        # millions of dispatches of a few hundred kernels
        frame["kernel"] = gnu_style(_names(self.names, columns["name"]))
        for arg, column in _IDENTITY.items():
            if arg in self.has:
                frame[column] = _int64(columns[arg])
        # ts/dur are µs; integer ns from the µs value split into whole and fraction,
        # so that epoch-based integers (1.7e15 µs) keep their precision.
        ts = pd.Series(columns["ts"])
        ts = ts.where(np.isfinite(ts))
        whole = np.floor(ts)
        # beyond 2**53 µs (285 years) a timestamp is no time; coerce_integers leaves it missing
        start = coerce_integers(whole)[0] * 1000 + coerce_integers(np.round((ts - whole) * 1000))[0]
        dur = pd.Series(columns["dur"])
        dur = dur.where(np.isfinite(dur))
        frame["start_ns"] = start
        frame["end_ns"] = start + coerce_integers(np.round(dur * 1000))[0]
        frame["duration"] = dur * 1e-6
        dims = self.dims(lo, hi)
        if dims is not None:
            grid, block = dims
            in_items = pd.Series(columns["launch.work_items"] if "launch.work_items" in columns
                                 else columns["launch"] if "launch" in self.has else False, index=frame.index)
            for d in "xyz":
                blocks = grid[d]
                items = blocks * block[d]
                frame[f"grid_{d}"] = items.where(~in_items, blocks)
                frame[f"workgroup_{d}"] = block[d]
            frame["grid_size"] = frame["grid_x"] * frame["grid_y"] * frame["grid_z"]
            frame["workgroup_size"] = block["x"] * block["y"] * block["z"]
            per_dim = [(frame[f"grid_{d}"] + block[d] - 1) // block[d] for d in "xyz"]
            frame["workgroups"] = per_dim[0] * per_dim[1] * per_dim[2]
        if "registers per thread" in self.has:
            frame["registers"] = _int64(columns["registers per thread"])
        if "shared memory" in self.has:
            frame["lds_per_workgroup"] = _int64(columns["shared memory"])
        if self.warp_size is not None:
            frame["wave_size"] = coerce_integers(frame["device_id"].map(self.warp_size))[0]
        if self.raw:
            for arg in _RAW_ARGS:
                if arg in self.has:
                    frame[raw(arg)] = columns[arg]
            for key, dtype in self.occupancy.items():
                values = pd.Series(columns[f"occupancy.{key}"])
                frame[raw(f"occupancy.{readable(key)}")] = values.mask(values == NO_LIMIT).astype(dtype)
        return frame


CHUNK_ROWS = 1 << 17  # kernels per chunk: what the summary derives per dispatch stays bounded


def _scan(path: Path, want: Want) -> Scan:
    trace, doc = _read(path, want)
    oddities: list[Oddity] = []
    rank = (doc.get("distributedInfo") or {}).get("rank") if isinstance(doc.get("distributedInfo"), dict) else None
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
    devices = _devices(doc)
    if not trace.kernels.size:
        categories = sorted(readable(c) for c in trace.categories)  # type: ignore[type-var]
        oddities.append(Oddity(str(path), "holds no kernel events (categories: " + (", ".join(categories) or "none")
                               + "); was the profiler run with ProfilerActivity.CUDA?"))
        source = Source(path=str(path), format=FORMAT, tool=TOOL, rank=rank)
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    kernels = trace.kernels.trimmed()
    joined = _join_launches(trace, kernels)
    columns = joined if joined is not None else kernels
    # a column exists where any kernel had the argument, or the joined launch calls did
    has = trace.kernel_keys | (trace.launch_keys if joined is not None else set())

    # What holds for the whole trace, from the columns: the warnings (in the order the
    # readers' checks run), the devices and architectures, the columns every chunk has.
    dur = columns["dur"]
    bad = int((~np.isfinite(dur)).sum())
    if bad:
        oddities.append(Oddity(str(path), "kernel event without a finite numeric 'dur'; duration left empty", bad))
    if "grid" in has and "block" in has:
        below = np.zeros(trace.kernels.size, dtype=bool)
        for key in _DIMS:
            for d in "xyz":
                values = columns[f"{key}.{d}"]
                below |= (values != MISSING) & (values <= 0)
        if below.any():
            oddities.append(Oddity(str(path), "grid or block with a dimension below 1; launch geometry left empty",
                                   int(below.sum())))
    not_integer = sum(_bad(columns, key) for key in (*_IDENTITY, *_DIMS, "registers per thread", "shared memory")
                      if key in has)
    if not_integer:
        oddities.append(Oddity(str(path), "kernel arguments that are not integers (device, stream, grid, block, "
                               "registers, shared memory) left empty", not_integer))

    device_ids = columns["device"] if "device" in has else np.zeros(0, dtype="int64")
    used = sorted(int(d) for d in np.unique(device_ids[device_ids != MISSING]))
    known = [d for d in used if d in devices.index]
    if used and len(known) < len(used):
        oddities.append(Oddity(str(path), "kernels on a device missing from deviceProperties: "
                               + ", ".join(str(d) for d in used if d not in devices.index)))
    names = trace.names.decoded()
    used_names = pd.Series(names[np.unique(columns["name"][columns["name"] >= 0])], dtype="string")
    used_names = gnu_style(used_names)
    device_names = sorted({str(devices.loc[d, "name"]) for d in known if "name" in devices}) if known else []
    archs = sorted({a for a in (_arch(devices.loc[d], used_names) for d in known) if a})
    if known and not archs and "computeMajor" in devices and devices.loc[known, "computeMajor"].notna().any():
        oddities.append(Oddity(str(path), "deviceProperties computeMajor/computeMinor is no compute capability "
                                          "(not small whole numbers); architecture left unknown: name it with --arch"))

    occupancy = {}
    if want.raw:
        for key, integral in trace.occupancy.items():
            values = columns[f"occupancy.{key}"]
            if not np.isnan(values).all():
                # an integer in every kernel and no "no limit": an integer column, as pandas infers it
                occupancy[key] = "int64" if integral == trace.kernels.size and not (values == NO_LIMIT).any() \
                    else "float64"
    table = _Table(columns=columns, has=frozenset(has), names=names,
                   warp_size=devices["warpSize"] if known and "warpSize" in devices else None,
                   occupancy=occupancy, raw=want.raw)
    chunks = (table.frame(lo, min(lo + CHUNK_ROWS, trace.kernels.size))
              for lo in range(0, trace.kernels.size, CHUNK_ROWS))
    source = Source(path=str(path), format=FORMAT, tool=TOOL, tool_version=_version(doc),
                    device=", ".join(device_names) or None, arch=", ".join(archs) or None,
                    rank=rank)
    return Scan(source=source, chunks=chunks, oddities=oddities)


def _version(doc: dict[str, Any]) -> str | None:
    """The CUPTI version newer traces record, else the trace schema version."""
    if doc.get("cupti_version") is not None:
        return f"schema {doc.get('schemaVersion')}, CUPTI {doc['cupti_version']}"
    return f"schema {doc['schemaVersion']}" if doc.get("schemaVersion") is not None else None


FORMATS: tuple[Format, ...] = (
    Format(
        name=FORMAT,
        tool=TOOL,
        kind="profile",
        description="PyTorch profiler (Kineto) Chrome-trace JSON, plain or .gz: kernel events with launch "
                    "configuration (AMD: joined from the launch call), device from args.device",
        sniff=_is_kineto,
        scan=_scan,
    ),
)
