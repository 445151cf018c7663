"""The run directory: everything a profiled run produced, kept for the user (its
layout is drawn in ``perfcheck.ingest.runs``).

The directory is a profile perfcheck reads (format ``perfcheck-run``, read by
``perfcheck.ingest.runs``, which owns the layout and the manifest's reading):
``perfcheck inspect RUN_DIR`` merges the passes (and ranks) again, and
``RUN_DIR/rank_R`` is rank R alone. This module creates and writes them. A run
directory is never deleted by perfcheck, also not when the run failed: the
manifest then says why (``status``, ``error``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from perfcheck.errors import UsageError
from perfcheck.ingest.runs import (  # noqa: F401  (the layout, re-exported for the runner)
    COMPLETE,
    FAILED,
    FORMAT_VERSION,
    MANIFEST,
    RANKS,
    RUNNING,
    SINGLE,
    pass_dir,
    rank_dir,
    read_manifest,
)

RUNS_DIR = "perfcheck-runs"  # default parent of run directories


def ranks_in(run_dir: Path) -> list[int]:
    found = []
    for child in run_dir.iterdir() if run_dir.is_dir() else ():
        match = re.fullmatch(r"rank_(\d+)", child.name)
        if match and child.is_dir():
            found.append(int(match.group(1)))
    return sorted(found)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip("-.")[:60] or "run"


def new_run_dir(parent: Path, name: str) -> Path:
    """A fresh directory under ``parent``: ``YYYYmmdd-HHMMSS-NAME`` (``-2``, ... when taken)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = parent / f"{stamp}-{_slug(name)}"
    candidate, n = base, 1
    while True:
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            n += 1
            candidate = base.with_name(f"{base.name}-{n}")


def claim(run_dir: Path) -> Path:
    """Use ``run_dir`` as given: it must be new or empty (outputs of another run are
    never overwritten or mixed in)."""
    if run_dir.exists():
        if not run_dir.is_dir():
            raise UsageError(f"run directory {run_dir} is a file")
        if any(run_dir.iterdir()):
            raise UsageError(f"run directory {run_dir} already holds files; name a new or empty directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def write_manifest(directory: Path, manifest: Mapping[str, object]) -> None:
    from perfcheck.atomicfile import write_atomic

    doc = {"format_version": FORMAT_VERSION, **manifest}
    write_atomic(directory / MANIFEST, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def default_parent(base: str | Path | None = None) -> Path:
    """``perfcheck-runs/`` under ``base`` (default: the working directory)."""
    return Path(base if base is not None else os.getcwd()) / RUNS_DIR
