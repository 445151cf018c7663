"""The accepted-regressions file: a small TOML file committed next to the baselines
(default ``baselines/accepted.toml``; the ``accepted`` setting names another), one
``[[accepted]]`` table per regression someone accepted as the new level::

    [[accepted]]
    machine = "mi100_gfx908_rocprof-1.0.0"
    suite = "after"
    kernel = "EOCloverFBCGPU(float*, float const*, int)"   # or "*": every kernel of the suite
    metric = "*"                                           # or one metric
    run = "night-06"            # the change point's first run at the new level
    commit = "0123abc..."       # that run's commit (matches too: a re-imported run keeps it)
    before = 0.00125            # base units (unit below), the levels on each side
    after = 0.001625
    unit = "s"
    change_pct = 30.0
    reason = "LDS tiling traded for registers; slower on purpose"
    date = "2026-11-26"
    who = "Jane Doe"

Accepting is a reviewed act, like a baseline update: ``perfcheck history accept``
and ``perfcheck baseline update`` append entries (the file is written whole and
atomically; what was there, comments included, is kept verbatim), and the PR that
accepts shows the diff. Only this module reads or writes the file.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.documents import toml_loads
from perfcheck.errors import InputError

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

if TYPE_CHECKING:
    from perfcheck.history.changepoints import ChangePoint
    from perfcheck.history.lifecycle import State

FILE_NAME = "accepted.toml"
ANY = "*"
_HEADER = ("# Regressions accepted as the new level of their series (perfcheck history accept,\n"
           "# perfcheck baseline update). Reviewed like the baselines; see docs/history.md.\n")
_TEXT = ("machine", "suite", "kernel", "metric", "run", "reason", "date", "who")


@dataclass(frozen=True)
class Acceptance:
    """One accepted regression: a change point of machine x suite x kernel x metric
    (kernel or metric ``*``: all of them) starting at ``run`` (or ``commit``)."""

    machine: str
    suite: str
    kernel: str
    metric: str
    run: str
    commit: str | None
    before: float
    after: float
    unit: str
    change_pct: float
    reason: str
    date: str
    who: str

    def same_series(self, cp: "ChangePoint") -> bool:
        return (cp.machine == self.machine and cp.suite == self.suite
                and self.kernel in (ANY, cp.kernel) and self.metric in (ANY, cp.metric))

    def covers(self, cp: "ChangePoint") -> bool:
        """Whether this entry accepts change point ``cp``: the same series (or ``*``)
        and the same first run, or the same commit. (``lifecycle`` also takes a change
        point a few runs away: see MATCH_RUNS there.)"""
        return self.same_series(cp) and (cp.run_id == self.run or (self.commit is not None and cp.commit == self.commit))


def read(path: str | Path) -> list[Acceptance]:
    """The entries of the file at ``path``; none when it does not exist. A broken file
    is an InputError naming the entry and the key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        doc = toml_loads(text, path, hint="fix the file or restore it from version control")
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"not valid TOML: {exc}", hint="fix the file or restore it from version control") from None
    entries = doc.get("accepted", [])
    unknown = sorted(set(doc) - {"accepted"})
    if unknown or not isinstance(entries, list):
        raise InputError(path, f"unexpected key {unknown[0]!r}" if unknown else "'accepted' must be [[accepted]] tables",
                         hint="the file holds [[accepted]] tables only")
    return [_entry(path, i + 1, e) for i, e in enumerate(entries)]


def _entry(path: Path, number: int, doc: object) -> Acceptance:
    where = f"[[accepted]] entry {number}"
    if not isinstance(doc, dict):
        raise InputError(path, f"{where} is not a table")
    for key in _TEXT:
        if not isinstance(doc.get(key), str) or not doc[key].strip():
            raise InputError(path, f"{where}: {key!r} must be a non-empty string",
                             hint="perfcheck history accept writes complete entries")
    numbers = {}
    for key in ("before", "after", "change_pct"):
        value = doc.get(key, math.nan)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(path, f"{where}: {key!r} must be a number")
        numbers[key] = float(value)
    commit = doc.get("commit")
    return Acceptance(
        machine=doc["machine"], suite=doc["suite"], kernel=doc["kernel"], metric=doc["metric"], run=doc["run"],
        commit=str(commit) if commit else None, unit=str(doc.get("unit", "")), reason=doc["reason"],
        date=doc["date"], who=doc["who"], **numbers)


def who() -> str:
    """Who accepts: ``git config user.name``, else ``$USER``, else "unknown"."""
    try:
        name = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True, timeout=10,
                              check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    return name or os.environ.get("USER") or os.environ.get("USERNAME") or "unknown"


def entry(cp: "ChangePoint", *, reason: str, by: str, kernel: str | None = None, metric: str | None = None,
          today: dt.date | None = None) -> Acceptance:
    """The entry accepting ``cp`` (``kernel``/``metric`` = ``*`` widen it)."""
    return Acceptance(
        machine=cp.machine, suite=cp.suite, kernel=kernel or cp.kernel, metric=metric or cp.metric, run=cp.run_id,
        commit=cp.commit, before=cp.before, after=cp.after, unit=cp.unit, change_pct=round(cp.change_pct, 2),
        reason=reason, date=(today or dt.datetime.now(dt.timezone.utc).date()).isoformat(), who=by)


def _toml_value(value: object) -> str:
    if isinstance(value, float):
        # TOML spells the non-finite floats nan/inf; repr is exact for the rest
        return ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")) if not math.isfinite(value) else repr(value)
    # a JSON string (ensure_ascii: control characters as \\uXXXX) is a valid TOML basic string
    return json.dumps(str(value))


def render(entries: Sequence[Acceptance]) -> str:
    """``[[accepted]]`` tables for ``entries``, in field order."""
    blocks = []
    for e in entries:
        lines = ["[[accepted]]"]
        for key in ("machine", "suite", "kernel", "metric", "run", "commit", "before", "after", "unit", "change_pct",
                    "reason", "date", "who"):
            value = getattr(e, key)
            if value is not None:
                lines.append(f"{key} = {_toml_value(value)}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def append(path: str | Path, entries: Sequence[Acceptance]) -> Path:
    """Add ``entries`` to the file (created with a header when absent), atomically:
    the file is read, checked, and written whole, so a reader never sees half an entry."""
    from perfcheck.atomicfile import write_atomic

    path = Path(path)
    read(path)  # a broken file is reported, never appended to
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = _HEADER
    if old and not old.endswith("\n"):
        old += "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, old + "\n" + render(entries))


def accept(found: Sequence["State"], *, reason: str, by: str, every_metric: bool,
           today: dt.date | None = None) -> list[Acceptance]:
    """The entries accepting the open regressions ``found``: one per change point, or,
    ``every_metric``, one per machine x suite x kernel x first run with metric ``*``
    (the derived metrics of a kernel move with it: bandwidths, rates, % of peak), its
    before -> after those of ``duration`` where that moved, else of the first metric."""
    if not every_metric:
        return [entry(s.point, reason=reason, by=by, today=today) for s in found]
    groups: dict[tuple[str, str, str, str], list["ChangePoint"]] = {}
    for state in found:
        cp = state.point
        groups.setdefault((cp.machine, cp.suite, cp.kernel, cp.run_id), []).append(cp)
    return [entry(next((cp for cp in points if cp.metric == "duration"), points[0]), reason=reason, by=by,
                  metric=ANY, today=today) for points in groups.values()]
