"""Triton Proton profiles in hatchet JSON (``proton.finalize()``, ``*.hatchet``).

Layout (Proton as of Dec 2024, tritonbench on sm_90): the file starts with a
newline, then a two-element array ``[tree, devices]``. The tree is nested nodes
``{"frame": {"name", "type"}, "metrics": {...}, "children": [...]}`` under a
``ROOT`` node; scopes (``proton.scope`` names, user functions) are inner nodes
with empty metrics, kernels are leaves. Only leaves carry metrics: ``count``
(launches), ``time (ns)`` (their summed GPU time), ``device_id`` (a string),
``device_type`` (``CUDA``/``HIP``) and, when the kernels declare them,
``flops<width>`` and ``bytes``. Inner nodes are not rolled up (ROOT says 0), so
kernels are read from the leaves only.

The same kernel runs under several scopes, so a kernel is keyed by its path below
ROOT: ``scope/.../kernel`` (``tritonbench_run_op_softmax/x_val_[4096, 256]/
naive_softmax/softmax_kernel``). Names are written as Proton got them from the
driver (mangled for CUDA C++ kernels; ``perfcheck.ingest.names`` spells demangled
ones the GNU way).

The device map (``{"CUDA": {"0": {"arch": "90", "num_sms": 132, "clock_rate":
kHz, "memory_clock_rate": kHz, "bus_width": bits}}}``) describes the GPU, not a
measured peak: ``arch`` (a string) gives the architecture, peaks come from the
architecture database.

The file holds one summed time per kernel path, not dispatches: it reads as a
kernel-level table (``calls``, ``duration_total``, ``duration_mean``), whose
median, minimum and maximum are unknown.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest import jsonsniff
from perfcheck.ingest.demangle import demangle
from perfcheck.ingest.formats import Format, Scan, Sniff, Want, single_chunk
from perfcheck.ingest.names import gnu_style, json_document
from perfcheck.ingest.tabular import coerce_integers, coerce_numbers
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

FORMAT = "proton"
TOOL = "proton"
SEPARATOR = "/"
_KNOWN = {"count", "time (ns)", "device_id", "device_type"}


_NODE_KEYS = frozenset({"frame", "metrics", "children"})
_TREE_DEPTH = 64  # nesting a sniff follows: a call tree's nodes sit two levels apart


def _is_proton(sniff: Sniff) -> bool:
    """By structure (jsonsniff): a top-level array of call-tree nodes, objects keyed
    frame, metrics and children (the root's own come after its children, so any
    node's count), however long the names before them are."""
    if sniff.is_dir or sniff.is_binary:
        return False
    top = jsonsniff.keys(sniff.path, until=_NODE_KEYS, depth=_TREE_DEPTH, brackets="[")
    return top is not None and all(top.has(k) for k in _NODE_KEYS)


def _leaves(file: Path, node: dict[str, Any], out: list[tuple[tuple[str, ...], dict[str, Any]]]) -> None:
    # Iterative walk: a deep call tree must not hit Python's recursion limit.
    stack: list[tuple[dict[str, Any], tuple[str, ...]]] = [(node, ())]
    while stack:
        current, prefix = stack.pop()
        frame = current.get("frame") if isinstance(current.get("frame"), dict) else {}
        here = (*prefix, str(frame.get("name", "")))
        children = current.get("children") or []
        if not isinstance(children, list):
            raise InputError(file, f"call-tree node {SEPARATOR.join(here)!r}: 'children' is not a list",
                             hint="is this a Proton .hatchet file, unmodified?")
        if children:
            stack.extend((c, here) for c in reversed(children) if isinstance(c, dict))
        else:
            out.append((here, current.get("metrics") if isinstance(current.get("metrics"), dict) else {}))


_CUDA_ARCH = re.compile(r"(?:sm_)?(\d{2,3}[a-z]?)")
_HIP_ARCH = re.compile(r"(?:gfx)?([0-9a-f]{3,4}[a-z]?)")


def _arch(kind: str, arch: str) -> str | None:
    """Proton writes CUDA's compute capability as digits ("90") and HIP's gfx target as
    is ("gfx90a"); anything else (a damaged map) is no architecture."""
    cuda, hip = _CUDA_ARCH.fullmatch(arch), _HIP_ARCH.fullmatch(arch)
    if kind == "CUDA" or (kind != "HIP" and arch.startswith("sm_")):
        return f"sm_{cuda.group(1)}" if cuda else None
    return f"gfx{hip.group(1)}" if hip else None


def _scan(path: Path, want: Want) -> Scan:
    doc = json_document(path, path.read_bytes(), cut_hint="is the profile complete? Proton writes it at proton.finalize()",
                        kind_hint="is this a Proton .hatchet file?")
    if not (isinstance(doc, list) and doc and isinstance(doc[0], dict) and "children" in doc[0]):
        raise InputError(path, "not a Proton hatchet document (expected [call tree, device map])",
                         hint="is this a Proton .hatchet file?")
    root, devices = doc[0], (doc[1] if len(doc) > 1 and isinstance(doc[1], dict) else {})
    oddities: list[Oddity] = []
    leaves: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    _leaves(path, root, leaves)
    # The ROOT node itself is not part of a kernel's key.
    leaves = [(p[1:] if len(p) > 1 else p, m) for p, m in leaves if "time (ns)" in m or "count" in m]
    written = {(str(kind), str(d.get("arch"))) for kind, per in devices.items() if isinstance(per, dict)
               for d in per.values() if isinstance(d, dict) and d.get("arch") is not None}
    archs = sorted({a for a in (_arch(kind, arch) for kind, arch in written) if a})
    unknown = sorted({repr(arch) for kind, arch in written if _arch(kind, arch) is None})
    if unknown:
        oddities.append(Oddity(str(path), f"device map 'arch' that names no architecture ({', '.join(unknown)}); "
                                          "left unknown: name it with --arch"))
    source = Source(path=str(path), format=FORMAT, tool=TOOL, arch=", ".join(archs) or None)
    if not leaves:
        oddities.append(Oddity(str(path), "holds no kernel timings (no leaf with 'time (ns)')"))
        return Scan(source=source, chunks=iter(()), oddities=oddities, level="kernel")
    # Leaf names come mangled from the driver for CUDA C++ kernels: demangled (GNU) so
    # that the kernel has the key ncu, nsys and Kineto give it (perfcheck.ingest.demangle).
    leaf_names, demangled = demangle([p[-1] for p, _ in leaves])
    if not demangled:
        oddities.append(Oddity(str(path), "no C++ demangler found (libstdc++ or c++filt): mangled kernel names "
                                          "kept, so they will not match other tools' names"))
    metrics = pd.DataFrame([m for _, m in leaves])
    names = pd.Series([SEPARATOR.join((*p[:-1], leaf)) for (p, _), leaf in zip(leaves, leaf_names)], dtype="string")
    missing = pd.Series(np.nan, index=metrics.index)
    calls = coerce_numbers(metrics["count"] if "count" in metrics else missing).astype("float64")
    total_ns = coerce_numbers(metrics["time (ns)"] if "time (ns)" in metrics else missing).astype("float64")
    # A leaf that never ran (count 0, time 0) is no kernel; one without a name cannot be keyed.
    idle = calls.eq(0) & total_ns.fillna(0).eq(0)
    # the leaf's own frame name, not the joined path's last piece: "operator/" is a name
    unnamed = pd.Series([p[-1] == "" for p, _ in leaves])
    if unnamed.any():
        oddities.append(Oddity(str(path), "call-tree leaf without a frame name left out", int((unnamed & ~idle).sum())))
    keep = ~(idle | unnamed)
    metrics, names, calls, total_ns = (x[keep].reset_index(drop=True) for x in (metrics, names, calls, total_ns))
    impossible = ~np.isfinite(total_ns) | total_ns.lt(0) | ~np.isfinite(calls) | calls.le(0) | (calls % 1).ne(0)
    if impossible.any():
        oddities.append(Oddity(str(path), "impossible 'count' or 'time (ns)' (negative, zero launches, not a "
                               "number); left empty", int(impossible.sum())))
        calls, total_ns = calls.mask(impossible), total_ns.mask(impossible)
    frame = pd.DataFrame({"kernel": gnu_style(names)})
    frame["calls"] = coerce_integers(calls)[0]  # impossible counts are already missing
    frame["duration_total"] = total_ns * 1e-9
    frame["duration_mean"] = (total_ns / calls) * 1e-9
    frame["duration_min"] = np.nan
    frame["duration_max"] = np.nan
    if "device_id" in metrics:
        frame["device_id"] = coerce_integers(metrics["device_id"])[0]
    if want.raw:
        for column in metrics.columns:
            if column not in _KNOWN:  # flops8/16/32/64, bytes, user metrics: as written
                frame[raw(column)] = coerce_numbers(metrics[column]).astype("float64")
    if frame["kernel"].duplicated().any():  # hatchet trees merge equal paths; a writer that did not
        oddities.append(Oddity(str(path), "kernel path repeated in the tree (rows kept apart)",
                               int(frame["kernel"].duplicated().sum())))
    return Scan(source=source, chunks=single_chunk([frame]), oddities=oddities, level="kernel")


FORMATS: tuple[Format, ...] = (
    Format(
        name=FORMAT,
        tool=TOOL,
        kind="profile",
        description="Triton Proton hatchet JSON ([call tree, device map]): per-kernel count and summed time (ns) "
                    "of the leaves, keyed by scope path, mangled names demangled",
        sniff=_is_proton,
        scan=_scan,
    ),
)
