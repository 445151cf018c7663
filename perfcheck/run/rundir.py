"""The run directory: everything a profiled run produced, kept for the user.

::

    RUN_DIR/
      perfcheck-run.json       the manifest: command, profiler, passes and why, status
      inputs/pass_2.txt        profiler input files (rocprof v1 pmc: lines)
      logs/pass_1.stdout.log   each pass's output (the launcher's, profiler's, application's)
      pass_1/ ...              one pass's raw profiler outputs (no launcher), or
      rank_0/                  with a launcher: one directory per rank, holding
        perfcheck-run.json     a manifest of its own (that rank alone), and
        pass_1/ ...            that rank's outputs per pass

The directory is a profile perfcheck reads (format ``perfcheck-run``):
``perfcheck inspect RUN_DIR`` merges the passes (and ranks) again, and
``RUN_DIR/rank_R`` is rank R alone. It is never deleted by perfcheck, also not when
the run failed: the manifest then says why (``status``, ``error``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from perfcheck.errors import InputError, UsageError

MANIFEST = "perfcheck-run.json"
FORMAT_VERSION = 1
SINGLE, RANKS = "single", "ranks"  # layouts
RUNNING, COMPLETE, FAILED = "running", "complete", "failed"
RUNS_DIR = "perfcheck-runs"  # default parent of run directories


def pass_dir(base: Path, index: int) -> Path:
    return base / f"pass_{index}"


def rank_dir(run_dir: Path, rank: int | str) -> Path:
    return run_dir / f"rank_{rank}"


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


def read_manifest(directory: Path) -> dict[str, object]:
    path = directory / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
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


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def default_parent(base: str | Path | None = None) -> Path:
    """``perfcheck-runs/`` under ``base`` (default: the working directory)."""
    return Path(base if base is not None else os.getcwd()) / RUNS_DIR
