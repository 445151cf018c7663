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

import gzip
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest import jsonsniff
from perfcheck.ingest.formats import Format, Scan, Sniff, Want, single_chunk
from perfcheck.ingest.names import gnu_style, json_document
from perfcheck.ingest.tabular import coerce_integers, coerce_numbers, cuda_arch
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

FORMAT = "kineto"
TOOL = "kineto"
GZIP_MAGIC = b"\x1f\x8b"
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


def _load(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if data.startswith(GZIP_MAGIC):
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"cannot decompress the gzip trace ({exc})",
                         hint="is the file complete? torch.profiler writes it when the profiler stops") from None
    doc = json_document(path, data, cut_hint="is the trace complete? a cut-off trace lacks its closing brackets",
                        kind_hint="is this a Kineto trace?")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InputError(path, "no 'traceEvents' list", hint="is this a torch.profiler trace (export_chrome_trace)?")
    return doc


def _events(doc: dict[str, Any], category: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"]
            if isinstance(e, dict) and str(e.get("cat", "")).lower() == category and e.get("ph", "X") == "X"]


def _args(events: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per event: its ``args`` (nested objects kept as values), plus name/ts/dur."""
    rows = pd.DataFrame([e.get("args") if isinstance(e.get("args"), dict) else {} for e in events])
    rows["name"] = [e.get("name") for e in events]
    rows["ts"] = coerce_numbers(pd.Series([e.get("ts") for e in events], dtype="object"))
    rows["dur"] = coerce_numbers(pd.Series([e.get("dur") for e in events], dtype="object"))
    return rows


def _integers(values: pd.Series, bad: list[int]) -> pd.Series:
    out, count = coerce_integers(values)
    bad[0] += count
    return out


def _dims(values: pd.Series, bad: list[int]) -> pd.DataFrame:
    """``[x, y, z]`` lists -> three Int64 columns; anything else is missing."""
    ok = values.map(lambda v: isinstance(v, list) and len(v) == 3)
    dims = pd.DataFrame(values.where(ok).map(lambda v: v if isinstance(v, list) else [None] * 3).tolist(),
                        index=values.index, columns=["x", "y", "z"])
    return pd.DataFrame({d: _integers(dims[d], bad) for d in ("x", "y", "z")})


def _number(rows: pd.DataFrame, column: str) -> pd.Series:
    if column not in rows:
        return pd.Series(np.nan, index=rows.index)
    return coerce_numbers(rows[column]).astype("float64")


def _join_launches(doc: dict[str, Any], kernels: pd.DataFrame) -> pd.DataFrame:
    """Fill grid/block/shared memory/full name from the launching runtime call
    (AMD traces put them only there), matched on ``correlation``."""
    runtime = [e for e in _events(doc, "cuda_runtime") if isinstance(e.get("args"), dict) and "grid" in e["args"]]
    if not runtime or "correlation" not in kernels:
        return kernels
    launches = _args(runtime)
    if "correlation" not in launches:
        return kernels
    launches["correlation"] = coerce_integers(launches["correlation"])[0]
    launches = launches.dropna(subset=["correlation"]).drop_duplicates("correlation", keep="last")
    launches = launches.set_index("correlation")
    key = coerce_integers(kernels["correlation"])[0]
    out = kernels.copy()
    for column in ("grid", "block", "shared memory"):
        if column in launches:
            found = key.map(launches[column])
            out[column] = out[column].where(out[column].notna(), found) if column in out else found
    if "kernel" in launches:
        full = key.map(launches["kernel"])
        out["name"] = full.where(full.notna() & (full != ""), out["name"])
    out["launch"] = key.map(launches["name"])
    return out


def _devices(doc: dict[str, Any]) -> pd.DataFrame:
    props = [p for p in doc.get("deviceProperties") or [] if isinstance(p, dict) and isinstance(p.get("id"), int)]
    return pd.DataFrame(props).drop_duplicates("id").set_index("id") if props else pd.DataFrame()


def _arch(props: pd.Series, names: pd.Series) -> str | None:
    if str(props.get("name", "")).startswith("AMD") or props.get("warpSize") == 64:
        isa = names.str.extract(_ISA, expand=False).dropna().unique()
        return f"gfx{isa[0]}" if len(isa) == 1 else None
    return cuda_arch(props.get("computeMajor"), props.get("computeMinor"))


def _scan(path: Path, want: Want) -> Scan:
    doc = _load(path)
    oddities: list[Oddity] = []
    events = _events(doc, "kernel")
    rank = (doc.get("distributedInfo") or {}).get("rank") if isinstance(doc.get("distributedInfo"), dict) else None
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
    devices = _devices(doc)
    if not events:
        categories = sorted({str(e.get("cat")) for e in doc["traceEvents"] if isinstance(e, dict) and e.get("cat")})
        oddities.append(Oddity(str(path), "holds no kernel events (categories: " + (", ".join(categories) or "none")
                               + "); was the profiler run with ProfilerActivity.CUDA?"))
        source = Source(path=str(path), format=FORMAT, tool=TOOL, rank=rank)
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    rows = _join_launches(doc, _args(events))
    frame = pd.DataFrame(index=rows.index)
    frame["kernel"] = gnu_style(rows["name"].astype("string"))
    not_integer = [0]
    for arg, column in _IDENTITY.items():
        if arg in rows:
            frame[column] = _integers(rows[arg], not_integer)
    # ts/dur are µs; integer ns from the µs value split into whole and fraction,
    # so that epoch-based integers (1.7e15 µs) keep their precision.
    ts = rows["ts"].astype("float64")
    ts = ts.where(np.isfinite(ts))
    whole = np.floor(ts)
    # beyond 2**53 µs (285 years) a timestamp is no time; coerce_integers leaves it missing
    start = coerce_integers(whole)[0] * 1000 + coerce_integers(np.round((ts - whole) * 1000))[0]
    dur = rows["dur"].astype("float64")
    dur = dur.where(np.isfinite(dur))
    frame["start_ns"] = start
    frame["end_ns"] = start + coerce_integers(np.round(dur * 1000))[0]
    frame["duration"] = dur * 1e-6
    bad = dur.isna()
    if bad.any():
        oddities.append(Oddity(str(path), "kernel event without a finite numeric 'dur'; duration left empty",
                               int(bad.sum())))

    grid = _dims(rows["grid"], not_integer) if "grid" in rows else None
    block = _dims(rows["block"], not_integer) if "block" in rows else None
    if grid is not None and block is not None:
        # A launch has at least one block of one thread in each dimension; anything else is no geometry.
        impossible = (grid <= 0).any(axis=1) | (block <= 0).any(axis=1)
        if impossible.any():
            oddities.append(Oddity(str(path), "grid or block with a dimension below 1; launch geometry left empty",
                                   int(impossible.sum())))
            grid, block = grid.mask(impossible), block.mask(impossible)
    if grid is not None and block is not None:
        in_items = rows["launch"].isin(_WORK_ITEM_GRID) if "launch" in rows else pd.Series(False, index=rows.index)
        for d in "xyz":
            blocks = grid[d]
            items = blocks * block[d]
            frame[f"grid_{d}"] = items.where(~in_items, blocks)
            frame[f"workgroup_{d}"] = block[d]
        frame["grid_size"] = frame["grid_x"] * frame["grid_y"] * frame["grid_z"]
        frame["workgroup_size"] = block["x"] * block["y"] * block["z"]
        per_dim = [(frame[f"grid_{d}"] + block[d] - 1) // block[d] for d in "xyz"]
        frame["workgroups"] = per_dim[0] * per_dim[1] * per_dim[2]
    if "registers per thread" in rows:
        frame["registers"] = _integers(rows["registers per thread"], not_integer)
    if "shared memory" in rows:
        frame["lds_per_workgroup"] = _integers(rows["shared memory"], not_integer)
    if not_integer[0]:
        oddities.append(Oddity(str(path), "kernel arguments that are not integers (device, stream, grid, block, "
                               "registers, shared memory) left empty", not_integer[0]))

    device_ids = frame["device_id"] if "device_id" in frame else pd.Series(pd.NA, index=frame.index, dtype="Int64")
    used = sorted(int(d) for d in device_ids.dropna().unique())
    known = [d for d in used if d in devices.index]
    if used and len(known) < len(used):
        oddities.append(Oddity(str(path), "kernels on a device missing from deviceProperties: "
                               + ", ".join(str(d) for d in used if d not in devices.index)))
    if known and "warpSize" in devices:
        frame["wave_size"] = coerce_integers(device_ids.map(devices["warpSize"]))[0]
    names = sorted({str(devices.loc[d, "name"]) for d in known if "name" in devices}) if known else []
    archs = sorted({a for a in (_arch(devices.loc[d], frame["kernel"]) for d in known) if a})
    if known and not archs and "computeMajor" in devices and devices.loc[known, "computeMajor"].notna().any():
        oddities.append(Oddity(str(path), "deviceProperties computeMajor/computeMinor is no compute capability "
                                          "(not small whole numbers); architecture left unknown: name it with --arch"))

    if want.raw:
        for arg in _RAW_ARGS:
            if arg in rows:
                frame[raw(arg)] = _number(rows, arg)
        if "occupancy" in rows:
            nested = rows["occupancy"].map(lambda v: v if isinstance(v, dict) else {})
            occupancy = pd.DataFrame(nested.tolist(), index=rows.index)
            for column in occupancy.columns:
                values = pd.to_numeric(occupancy[column], errors="coerce")
                if values.notna().any():
                    frame[raw(f"occupancy.{column}")] = values.mask(values == NO_LIMIT)

    source = Source(path=str(path), format=FORMAT, tool=TOOL, tool_version=_version(doc),
                    device=", ".join(names) or None, arch=", ".join(archs) or None,
                    rank=rank)
    return Scan(source=source, chunks=single_chunk([frame]), oddities=oddities)


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
