"""A perfcheck run directory (``perfcheck run``, ``perf.run``, a suite's ``command``)
read as a profile: the profiler outputs of every pass merged into one dispatch
table, ranks stacked with a ``rank`` column.

::

    RUN_DIR/
      perfcheck-run.json       the manifest: command, profiler, passes and why, status
      inputs/pass_2.txt        profiler input files (rocprof v1 pmc: lines)
      logs/pass_1.stdout.log   each pass's output (the launcher's, profiler's, application's)
      pass_1/ ...              one pass's raw profiler outputs (no launcher), or
      rank_0/                  with a launcher: one directory per rank, holding
        perfcheck-run.json     a manifest of its own (that rank alone), and
        pass_1/ ...            that rank's outputs per pass

This module owns the directory as a file format: its layout, the manifest, which
files each profiler's pass leaves, and how the passes are merged. The runner
(``perfcheck.run``) writes such directories and imports this; ingest imports
nothing of the runner, so the flow goes one way. ``perfcheck inspect RUN_DIR`` (or
``RUN_DIR/rank_3`` for one rank) and suites' ``profiles`` read it like any other
profile.

Each pass is a separate run of the application, so its dispatches are matched to
the trace pass's by kernel and occurrence: the k-th dispatch of kernel K (in
dispatch-id order, else start time, else file order) in a counter pass is the k-th
dispatch of K in the trace. Dispatch ids alone would not do: concurrent queues
number dispatches differently from run to run, while a deterministic program
launches each kernel the same number of times in the same order. Where the
counts differ the unmatched dispatches are reported (an oddity with a count),
never paired with the wrong kernel.

The trace pass gives the timing and launch columns; counter passes add only their
``raw.*`` counters. Every output is read by perfcheck's own readers
(``open_profile``), exactly as ``perfcheck inspect`` would read it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd

from perfcheck.documents import json_loads
from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Scan, Sniff, Want
from perfcheck.model import Oddity, Source
from perfcheck.schema import is_raw

if TYPE_CHECKING:
    from perfcheck.model import Profile

FORMAT = "perfcheck-run"
MANIFEST = "perfcheck-run.json"
FORMAT_VERSION = 1
SINGLE, RANKS = "single", "ranks"  # layouts
RUNNING, COMPLETE, FAILED = "running", "complete", "failed"
TRACE, COUNTERS, REPLAY = "trace", "counters", "replay"  # pass kinds, as the manifest spells them


# --- layout ---------------------------------------------------------------------------------------


def pass_dir(base: Path, index: int) -> Path:
    return base / f"pass_{index}"


def rank_dir(run_dir: Path, rank: int | str) -> Path:
    return run_dir / f"rank_{rank}"


def read_manifest(directory: Path) -> dict[str, object]:
    path = directory / MANIFEST
    try:
        doc = json_loads(path.read_text(encoding="utf-8"), path,
                         hint="the run directory is damaged; run the command again")
    except FileNotFoundError:
        raise InputError(directory, f"not a perfcheck run directory (no {MANIFEST})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, f"cannot be read ({exc})",
                         hint="the run directory is damaged; run the command again") from None
    if not isinstance(doc, dict) or doc.get("format_version") != FORMAT_VERSION:
        version = doc.get("format_version") if isinstance(doc, dict) else "?"
        raise InputError(path, f"unsupported manifest (format_version {version})",
                         hint=f"this perfcheck reads format_version {FORMAT_VERSION}")
    for key in ("profiler", "passes", "layout", "status"):
        if key not in doc:
            raise InputError(path, f"manifest lacks {key!r}", hint="the run directory is damaged; run the command again")
    return doc


class PassLike(Protocol):
    """What reading needs of a pass (``perfcheck.run.plan.Pass`` is one)."""

    @property
    def index(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def counters(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class PassEntry:
    """A pass as the manifest records it."""

    index: int
    kind: str
    counters: tuple[str, ...]

    @classmethod
    def from_dict(cls, doc: Mapping[str, object]) -> "PassEntry":
        counters = tuple(str(c) for c in doc.get("counters") or ())  # type: ignore[union-attr]
        return cls(int(doc["index"]), str(doc["kind"]), counters)  # type: ignore[call-overload]


# --- which files a pass leaves, per profiler --------------------------------------------------------

# profiler -> (glob for a trace/replay pass, glob for a counter pass, recursive?).
# rocprofv3 may nest its files (%hostname%/%pid% by default); its -o names them run_*.
_OUTPUTS: dict[str, tuple[str, str, bool]] = {
    "rocprofv3": ("*kernel_trace.csv", "*counter_collection.csv", True),
    "rocprof": ("results.csv", "results.csv", False),
    "ncu": ("ncu.csv", "ncu.csv", False),
}
_OUTPUT_KIND = {
    "rocprofv3": ("kernel trace (*kernel_trace.csv)", "counter collection (*counter_collection.csv)"),
    "rocprof": ("results.csv", "results.csv"),
    "ncu": ("ncu.csv", "ncu.csv"),
}


def _profiler(name: str, where: Path) -> tuple[str, str, bool]:
    try:
        return _OUTPUTS[name]
    except KeyError:
        raise InputError(where / MANIFEST, f"names an unknown profiler {name!r}",
                         hint=f"this perfcheck reads runs of {', '.join(_OUTPUTS)}") from None


def pass_outputs(profiler: str, directory: Path, kind: str) -> list[Path]:
    """The files a pass of ``kind`` run under ``profiler`` wrote into ``directory``."""
    trace, counters, deep = _profiler(profiler, directory)
    pattern = counters if kind == COUNTERS else trace
    if deep:
        return sorted(directory.rglob(pattern))
    path = directory / pattern
    return [path] if path.is_file() else []


def output_kind(profiler: str, kind: str) -> str:
    """The files a pass leaves, in words (for errors)."""
    trace, counters = _OUTPUT_KIND.get(profiler, ("profiler outputs", "profiler outputs"))
    return counters if kind == COUNTERS else trace


# --- reading and merging ------------------------------------------------------------------------


def read_pass(base: Path, profiler: str, step: PassLike) -> tuple[pd.DataFrame, list[Source], list[Oddity]]:
    """One pass's outputs under ``base`` (a run or rank directory), read and stacked."""
    from perfcheck.ingest import open_profile

    directory = pass_dir(base, step.index)
    files = pass_outputs(profiler, directory, step.kind)
    if not files:
        raise InputError(directory, f"pass {step.index} wrote no {output_kind(profiler, step.kind)}",
                         hint="see the pass's logs in the run directory's logs/")
    frames: list[pd.DataFrame] = []
    sources: list[Source] = []
    oddities: list[Oddity] = []
    for path in files:
        scan = open_profile(path)
        frames.extend(chunk for chunk in scan.chunks if len(chunk.columns))
        sources.append(scan.source)
        oddities.extend(scan.oddities)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return frame, sources, oddities


def _keys(frame: pd.DataFrame) -> pd.DataFrame:
    """(kernel, occurrence) per dispatch: the k-th launch of each kernel."""
    kernel = frame["kernel"].astype("string").fillna("<unnamed>").to_numpy(dtype=object)
    by = next((c for c in ("dispatch_id", "start_ns") if c in frame.columns and frame[c].notna().all()), None)
    order = np.argsort(frame[by].to_numpy(dtype="int64"), kind="stable") if by else np.arange(len(frame))
    occurrence = np.empty(len(frame), dtype=np.int64)
    ordered = kernel[order]
    occurrence[order] = pd.Series(ordered).groupby(ordered, sort=False).cumcount().to_numpy()
    return pd.DataFrame({"_kernel": kernel, "_n": occurrence}, index=frame.index)


def merge_passes(
    base: pd.DataFrame, passes: Sequence[tuple[PassLike, pd.DataFrame]], where: Path
) -> tuple[pd.DataFrame, list[Oddity]]:
    """``base`` (the trace pass) with the ``raw.*`` counters of each counter pass."""
    if base.empty or "kernel" not in base.columns:
        return base, []
    keys = _keys(base)
    columns = [base]
    have = set(base.columns)
    oddities: list[Oddity] = []
    for step, frame in passes:
        counters = [c for c in frame.columns if is_raw(c) and c not in have]
        if frame.empty or not counters:
            continue
        right = pd.concat([_keys(frame), frame[counters]], axis=1)
        joined = keys.merge(right, on=["_kernel", "_n"], how="left", validate="one_to_one", indicator=True)
        joined.index = base.index
        unmatched_trace = int((joined["_merge"] == "left_only").sum())
        unmatched_pass = len(right) - (len(joined) - unmatched_trace)
        names = ", ".join(c[len("raw."):] for c in counters[:3]) + (", ..." if len(counters) > 3 else "")
        if unmatched_trace:
            oddities.append(Oddity(str(pass_dir(where, step.index)),
                                   f"pass {step.index} saw fewer launches than the trace pass: dispatches without "
                                   f"{names} (the runs launched kernels a different number of times)", unmatched_trace))
        if unmatched_pass:
            oddities.append(Oddity(str(pass_dir(where, step.index)),
                                   f"pass {step.index} saw launches the trace pass did not: their {names} left out",
                                   unmatched_pass))
        columns.append(joined[counters])
        have.update(counters)
    return pd.concat(columns, axis=1), oddities


def read_rank(base: Path, profiler: str, passes: Sequence[PassLike]) -> tuple[pd.DataFrame, list[Source], list[Oddity]]:
    """One rank's (or a launcher-less run's) passes, merged."""
    results = [(step, *read_pass(base, profiler, step)) for step in passes]
    frame, sources, oddities = results[0][1], list(results[0][2]), list(results[0][3])
    merged, more = merge_passes(frame, [(step, f) for step, f, _, _ in results[1:]], base)
    for _, _, s, o in results[1:]:
        sources.extend(s)
        oddities.extend(o)
    return merged, sources, oddities + more


def _first(values: Sequence[str | None]) -> str | None:
    return next((v for v in values if v), None)


def scan_run(path: Path, want: Want | None = None) -> Scan:
    """The ``perfcheck-run`` reader: a run directory (or one rank's directory)."""
    manifest = read_manifest(path)
    if manifest["status"] != COMPLETE:
        error = manifest.get("error") or manifest["status"]
        raise InputError(path, f"this run did not complete ({error})", hint="run the command again")
    profiler = str(manifest["profiler"])
    _profiler(profiler, path)
    passes = [PassEntry.from_dict(p) for p in manifest["passes"]]  # type: ignore[union-attr]
    if manifest["layout"] == RANKS:
        ranks = [int(r) for r in manifest.get("ranks") or []]  # type: ignore[union-attr]
        bases = [(r, rank_dir(path, r)) for r in ranks]
        own_rank = None
    else:
        own_rank = manifest.get("rank")
        bases = [(own_rank, path)]
    frames: list[pd.DataFrame] = []
    sources: list[Source] = []
    oddities: list[Oddity] = []
    for rank, base in bases:
        frame, found, odd = read_rank(base, profiler, passes)
        if rank is not None and len(frame):
            frame = frame.assign(rank=int(rank))
        frames.append(frame)
        sources.extend(found)
        oddities.extend(odd)
    source = Source(
        path=str(path), format=FORMAT, tool=profiler,
        tool_version=_first([s.tool_version for s in sources]) or manifest.get("tool_version"),  # type: ignore[arg-type]
        device=_first([s.device for s in sources]), arch=_first([s.arch for s in sources]),
        rank=int(own_rank) if own_rank is not None else None,  # type: ignore[call-overload]
        clock_control=_clock_control(manifest, path),
    )

    def chunks() -> Iterator[pd.DataFrame]:
        for frame in frames:
            if len(frame):
                yield frame.drop(columns=[c for c in frame.columns if c.startswith("_")])

    return Scan(source, chunks(), oddities)


def _clock_control(manifest: dict[str, object], path: Path) -> str | None:
    """The manifest's ncu clock control ("base" | "none"; absent or null: none set)."""
    value = manifest.get("clock_control")
    if value is None:
        return None
    if value not in ("base", "none"):
        raise InputError(path / MANIFEST, f"clock_control {value!r} is not 'base' or 'none'",
                         hint="the run directory is damaged; run the command again")
    return str(value)


def load_run(path: str | Path, rank: int | None = None) -> "Profile":
    """The merged Profile of a run directory (or of one rank of it)."""
    from perfcheck.ingest import read_profile

    path = Path(path)
    return read_profile(rank_dir(path, rank) if rank is not None else path, format=FORMAT)


def _sniff(sniff: Sniff) -> bool:
    try:
        return sniff.is_dir and (sniff.path / MANIFEST).is_file()
    except OSError:
        return False


FORMATS: tuple[Format, ...] = (
    Format(
        name=FORMAT,
        tool="perfcheck",
        kind="profile",
        description="perfcheck run directory (perfcheck run, perf.run, a suite's command): "
        "every pass's profiler outputs merged, ranks stacked",
        sniff=_sniff,
        scan=scan_run,
    ),
)
