"""A perfcheck run directory (``perfcheck run``, ``perf.run``, a suite's ``command``)
read as a profile: the profiler outputs of every pass merged into one dispatch
table, ranks stacked with a ``rank`` column.

The run directory and how its passes are merged are described in
``perfcheck.run.rundir`` and ``perfcheck.run.merge``; this module only registers
the format with the readers, so ``perfcheck inspect RUN_DIR`` (or ``RUN_DIR/rank_3``
for one rank) and suites' ``profiles`` read it like any other profile.
"""

from __future__ import annotations

from pathlib import Path

from perfcheck.ingest.formats import Format, Scan, Sniff, Want

MANIFEST = "perfcheck-run.json"  # perfcheck.run.rundir.MANIFEST


def _sniff(sniff: Sniff) -> bool:
    try:
        return sniff.is_dir and (sniff.path / MANIFEST).is_file()
    except OSError:
        return False


def _scan(path: Path, want: Want) -> Scan:
    from perfcheck.run.merge import scan_run

    return scan_run(path, want)


FORMATS: tuple[Format, ...] = (
    Format(
        name="perfcheck-run",
        tool="perfcheck",
        kind="profile",
        description="perfcheck run directory (perfcheck run, perf.run, a suite's command): "
        "every pass's profiler outputs merged, ranks stacked",
        sniff=_sniff,
        scan=_scan,
    ),
)
