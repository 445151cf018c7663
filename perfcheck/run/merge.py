"""A run directory -> one dispatch table: the passes of each rank merged, the
ranks stacked with a ``rank`` column.

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

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Scan, Want
from perfcheck.model import Oddity, Profile, Source
from perfcheck.run import rundir
from perfcheck.run.plan import NCU_TRACE_METRICS, Pass
from perfcheck.run.profilers import Profiler, get
from perfcheck.schema import is_raw, raw

FORMAT = "perfcheck-run"


def read_pass(base: Path, profiler: Profiler, step: Pass) -> tuple[pd.DataFrame, list[Source], list[Oddity]]:
    """One pass's outputs under ``base`` (a run or rank directory), read and stacked."""
    from perfcheck.ingest import open_profile

    directory = rundir.pass_dir(base, step.index)
    files = profiler.outputs(directory, step)
    if not files:
        raise InputError(directory, f"pass {step.index} wrote no {profiler.output_kind(step)}",
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


def missing_counters(frame: pd.DataFrame, step: Pass) -> list[str]:
    """Counters ``step`` asked for that its outputs do not hold (ncu's trace metrics
    that are text, such as the device name, are not counters)."""
    return [c for c in step.counters if c not in NCU_TRACE_METRICS and raw(c) not in frame.columns]


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
    base: pd.DataFrame, passes: Sequence[tuple[Pass, pd.DataFrame]], where: Path
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
            oddities.append(Oddity(str(rundir.pass_dir(where, step.index)),
                                   f"pass {step.index} saw fewer launches than the trace pass: dispatches without "
                                   f"{names} (the runs launched kernels a different number of times)", unmatched_trace))
        if unmatched_pass:
            oddities.append(Oddity(str(rundir.pass_dir(where, step.index)),
                                   f"pass {step.index} saw launches the trace pass did not: their {names} left out",
                                   unmatched_pass))
        columns.append(joined[counters])
        have.update(counters)
    return pd.concat(columns, axis=1), oddities


def read_rank(base: Path, profiler: Profiler, passes: Sequence[Pass]) -> tuple[pd.DataFrame, list[Source], list[Oddity]]:
    """One rank's (or a launcher-less run's) passes, merged."""
    results = [(step, *read_pass(base, profiler, step)) for step in passes]
    trace, frame, sources, oddities = results[0][0], results[0][1], list(results[0][2]), list(results[0][3])
    merged, more = merge_passes(frame, [(step, f) for step, f, _, _ in results[1:]], base)
    for _, _, s, o in results[1:]:
        sources.extend(s)
        oddities.extend(o)
    return merged, sources, oddities + more


def _first(values: Sequence[str | None]) -> str | None:
    return next((v for v in values if v), None)


def scan_run(path: Path, want: Want | None = None) -> Scan:
    """The ``perfcheck-run`` reader: a run directory (or one rank's directory)."""
    manifest = rundir.read_manifest(path)
    if manifest["status"] != rundir.COMPLETE:
        error = manifest.get("error") or manifest["status"]
        raise InputError(path, f"this run did not complete ({error})", hint="run the command again")
    profiler = get(str(manifest["profiler"]))
    passes = [Pass.from_dict(p) for p in manifest["passes"]]  # type: ignore[union-attr]
    if manifest["layout"] == rundir.RANKS:
        ranks = [int(r) for r in manifest.get("ranks") or []]  # type: ignore[union-attr]
        bases = [(r, rundir.rank_dir(path, r)) for r in ranks]
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
        path=str(path), format=FORMAT, tool=profiler.name,
        tool_version=_first([s.tool_version for s in sources]) or manifest.get("tool_version"),  # type: ignore[arg-type]
        device=_first([s.device for s in sources]), arch=_first([s.arch for s in sources]),
        rank=int(own_rank) if own_rank is not None else None,
    )

    def chunks() -> Iterator[pd.DataFrame]:
        for frame in frames:
            if len(frame):
                yield frame.drop(columns=[c for c in frame.columns if c.startswith("_")])

    return Scan(source, chunks(), oddities)


def load_run(path: str | Path, rank: int | None = None) -> Profile:
    """The merged Profile of a run directory (or of one rank of it)."""
    from perfcheck.ingest import read_profile

    path = Path(path)
    return read_profile(rundir.rank_dir(path, rank) if rank is not None else path, format=FORMAT)
