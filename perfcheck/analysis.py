"""From profile paths to the per-kernel table users set expectations on.

ingest (streamed chunks) -> per-dispatch work and occupancy -> per-kernel summary
-> rates, percentages of the ceilings, roofline position. The CLI's ``inspect``
and, later, checks and the pytest plugin all start here; ``analyse_profile`` does
the same for a Profile already in memory (``perf.measure``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.model import Oddity, Peaks, Profile, Source
from perfcheck.progress import Progress

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from perfcheck.arch import Target
    from perfcheck.metrics.roofline import Ceiling


@dataclass(frozen=True)
class Analysis:
    sources: tuple[Source, ...]
    oddities: tuple[Oddity, ...]
    kernels: "pd.DataFrame"  # one row per kernel, base units
    target: "Target | None"
    target_origin: str  # "given" (--arch), "detected" (from the profile), "unknown"
    ceilings: dict[str, "Ceiling"] = field(default_factory=dict)
    peaks: Peaks | None = None
    # kernel -> durations (s) of its dispatches, for noise-aware baseline comparison
    duration_samples: dict[str, "np.ndarray"] = field(default_factory=dict)


def analyse(
    paths: Sequence[str | Path],
    *,
    format: str | None = None,
    arch: str | None = None,
    peaks: Peaks | None = None,
) -> Analysis:
    """Summarise ``paths`` per kernel with every metric their counters allow.

    ``arch`` (an arch id or device name) wins over what the profile says; without
    either, metrics that need the hardware (occupancy, theoretical ceilings) are empty.
    The empirical peaks a tool wrote next to the profile (an Omniperf workload's
    roofline.csv) fill in every ceiling ``peaks`` does not give; the ceilings say
    where each came from.
    """
    from perfcheck.ingest import open_profile
    from perfcheck.metrics.summary import metrics_want

    want = metrics_want()
    scans = [open_profile(path, format, want) for path in paths]  # lazy: nothing read yet
    sources = tuple(scan.source for scan in scans)
    companions = [p for scan in scans for p in scan.companion_peaks]
    if companions:
        from perfcheck.ingest import read_peaks

        found = read_peaks(companions)
        # Ceiling by ceiling: the user's peaks win where they give a figure, the
        # workload's own (roofline.csv: L1, L2, LDS, MFMA) fill in the rest, so an
        # HBM-only machine file does not drop the cache levels' ceilings. Each
        # ceiling's source names the file its figure came from.
        peaks = found if peaks is None else Peaks(
            values={**found.values, **peaks.values}, details=peaks.details + found.details,
            sources=peaks.sources + found.sources, oddities=peaks.oddities + found.oddities,
            clocks={**found.clocks, **peaks.clocks})
    # Oddities are collected as the chunks are consumed: a reader finds some only
    # once it has read its whole file.
    oddities: list[Oddity] = []
    sizes = [_size(Path(path)) for path in paths]
    what = f"reading {Path(paths[0]).name}" if len(paths) == 1 else f"reading {len(paths)} profiles"

    def chunks(progress: Progress) -> Iterator["pd.DataFrame"]:
        # Bytes advance a file at a time (the readers stream without telling their
        # offset); rows advance with every chunk, so a multi-GB trace shows movement.
        done, rows = 0, 0
        for scan, size in zip(scans, sizes):
            for chunk in scan.chunks:
                rows += len(chunk)
                progress.update(done, rows=rows)
                yield chunk
            done += size
            progress.update(done, rows=rows)
            oddities.extend(scan.oddities)

    with Progress(what, total=sum(sizes) or None) as progress:
        return _summarise(sources, chunks(progress), oddities, arch=arch, peaks=peaks)


def _size(path: Path) -> int:
    """Bytes of a profile file, or of the files of a tool's output folder."""
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        return path.stat().st_size
    except OSError:  # the reader reports a missing or unreadable path, located
        return 0


def analyse_profile(profile: Profile, *, arch: str | None = None, peaks: Peaks | None = None) -> Analysis:
    """``analyse`` for a Profile already in memory (``perfcheck.measure``, a runner's
    merged ranks): the same per-kernel table, ceilings and duration samples."""
    return _summarise(profile.sources, iter([profile.dispatches]), list(profile.oddities), arch=arch, peaks=peaks)


def _summarise(
    sources: Sequence[Source],
    chunks: Iterable["pd.DataFrame"],
    oddities: list[Oddity],
    *,
    arch: str | None,
    peaks: Peaks | None,
) -> Analysis:
    """Shared by ``analyse`` and ``analyse_profile``: target, per-kernel summary of
    the chunks (consumed once), metrics against the ceilings. ``oddities`` may grow
    while ``chunks`` is consumed."""
    from perfcheck.arch import detect, lookup
    from perfcheck.metrics.roofline import at_profile_clocks, clock_mismatches, kernel_metrics, profile_clocks
    from perfcheck.metrics.roofline import ceilings as make_ceilings
    from perfcheck.metrics.ranks import RankSpread
    from perfcheck.metrics.summary import KernelSummary

    sources = tuple(sources)
    if arch:
        target, origin = lookup(arch), "given"
    else:
        target = detect(sources)
        origin = "detected" if target is not None else "unknown"
        if target is not None and target.assumed:
            oddities.append(Oddity(sources[0].path, target.assumed))
    summary = KernelSummary(target, work=True)
    spread = RankSpread()  # per-kernel time spread over MPI ranks (profiles of several ranks)
    for chunk in chunks:
        summary.add(chunk)
        spread.add(chunk)
    table = summary.frame()
    ceilings = make_ceilings(target, peaks)
    if len(table):
        from perfcheck.metrics.counters import QUANTITIES

        table = kernel_metrics(table, ceilings)
        # The duration-weighted sums were inputs of the rates (hbm_bytes_rate is
        # hbm_bw, flops_rate is flop_rate): the metrics carry them under their names.
        table = table.drop(columns=[f"{q}_rate" for q in QUANTITIES if f"{q}_rate" in table.columns])
        table = spread.attach(table)
        # The kernels' percentages used each kernel's own clock; the ceilings reports
        # draw once are at the profile's clock, and a peak measured at another clock
        # than the profile ran at is said once.
        clocks = profile_clocks(table)
        ceilings = at_profile_clocks(ceilings, clocks)
        oddities.extend(Oddity(where, why) for where, why in clock_mismatches(ceilings, clocks))
    return Analysis(
        sources=sources,
        oddities=tuple(oddities),
        kernels=table,
        target=target,
        target_origin=origin,
        ceilings=dict(ceilings),
        peaks=peaks,
        duration_samples=summary.duration_samples(),
    )


def with_timeline(analysis: Analysis, paths: Sequence[str | Path], *, format: str | None = None) -> Analysis:
    """``analysis`` with the timeline's subjects (``@run``, ``range:NAME``, see
    ``perfcheck.metrics.timeline.subjects``) as extra rows of its kernel table, so
    checks, baselines and the history treat them like kernels. Read only when an
    expectation names one: the kernel path never opens the timeline."""
    from dataclasses import replace

    import pandas as pd

    from perfcheck.ingest.timeline import read_timeline
    from perfcheck.metrics.timeline import subjects, timeline_metrics

    timeline = read_timeline(paths, format=format)
    rows, samples = subjects(timeline, timeline_metrics(timeline))
    kernels = pd.concat([analysis.kernels, rows], ignore_index=True) if len(analysis.kernels) else rows
    return replace(analysis, kernels=kernels, duration_samples={**analysis.duration_samples, **samples},
                   oddities=analysis.oddities + tuple(o for o in timeline.oddities if o not in analysis.oddities))
