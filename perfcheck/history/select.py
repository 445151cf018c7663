"""Which series a ``perfcheck history`` command works on: ``--suite``, ``--kernel``,
``--metric``, ``--machine``.

Kernel filters are the patterns of expectations (a glob on the whole name, or
``re:REGEX``); suite and machine filters are names or globs; metric filters are the
names and aliases ``perfcheck metrics`` lists (``all``: every metric). A filter that
selects no series is a UsageError (exit 2) naming the closest names, never "0
series" with exit 0: a typo in a nightly job must not keep it green forever.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfcheck.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

ALL = "all"


@dataclass(frozen=True)
class Filters:
    """The filters of one command; empty: no filter on that column."""

    suite: tuple[str, ...] = ()
    kernel: tuple[str, ...] = ()
    metric: tuple[str, ...] = ()
    machine: tuple[str, ...] = ()

    @classmethod
    def of(cls, suite: Sequence[str] | str | None = None, kernel: Sequence[str] | str | None = None,
           metric: Sequence[str] | str | None = None, machine: Sequence[str] | str | None = None) -> "Filters":
        def tup(value: Sequence[str] | str | None) -> tuple[str, ...]:
            return (value,) if isinstance(value, str) else tuple(value or ())

        return cls(tup(suite), tup(kernel), tup(metric), tup(machine))

    def metrics(self) -> tuple[str, ...]:
        """The metric filters as canonical names (aliases resolved; ``all`` drops the filter).
        An unknown name is a UsageError naming the closest."""
        from perfcheck.expect import ALIASES, known_metrics

        if not self.metric or ALL in self.metric:
            return ()
        known = known_metrics()
        out = []
        for name in self.metric:
            canonical = ALIASES.get(name, name)
            if canonical not in known:
                close = difflib.get_close_matches(name, [*known, *ALIASES], n=3)
                raise UsageError(f"--metric {name!r}: no such metric" + (
                    f"; closest: {', '.join(close)}" if close else "") + " (`perfcheck metrics` lists them all)")
            out.append(canonical)
        return tuple(dict.fromkeys(out))


def _names(patterns: Sequence[str], names: Sequence[str]) -> list[str]:
    """Names that one of ``patterns`` matches: exactly, or as a glob."""
    return [n for n in names if any(n == p or fnmatch.fnmatchcase(n, p) for p in patterns)]


def _kernels(patterns: Sequence[str], names: Sequence[str]) -> list[str]:
    from perfcheck.expect import match_kernels

    found: dict[str, None] = {}
    for pattern in patterns:
        found.update(dict.fromkeys(match_kernels(pattern, names)))
    return list(found)


def _closest(patterns: Sequence[str], names: Sequence[str], kernels: bool) -> str:
    from perfcheck.expect import closest_kernels

    close: list[str] = []
    for pattern in patterns:
        close += closest_kernels(pattern, names) if kernels else \
            difflib.get_close_matches(pattern.strip("*?"), list(names), n=3, cutoff=0.4)
    close = list(dict.fromkeys(close))[:3] or sorted(names)[:3]
    return ", ".join(repr(n) for n in close) if close else "none (the store has no series)"


def apply(frame: "pd.DataFrame", filters: Filters, everything: "pd.DataFrame | None" = None,
          where: str = "the store") -> "pd.DataFrame":
    """The rows of ``frame`` (``Store.series``) the filters select. When none are left,
    a UsageError names the first filter that selected nothing and the closest names
    (from ``everything``, the unfiltered series, when given, else ``frame``)."""
    metrics = filters.metrics()
    pool = frame if everything is None else everything
    for column, patterns, label in (("machine", filters.machine, "--machine"), ("suite", filters.suite, "--suite"),
                                    ("metric", metrics, "--metric"), ("kernel", filters.kernel, "--kernel")):
        if not patterns:
            continue
        names = sorted(pool[column].astype(str).unique()) if len(pool) else []
        chosen = _kernels(patterns, names) if column == "kernel" else _names(patterns, names)
        if not chosen:
            shown = ", ".join(repr(p) for p in patterns)
            narrowed = f" of the {len(names)} {column}{'s' if len(names) != 1 else ''} selected" if names else ""
            raise UsageError(f"{label} {shown} selects no series in {where}{narrowed}; closest: "
                             f"{_closest(patterns, names, column == 'kernel')}")
        pool = pool[pool[column].isin(chosen)]
        frame = frame[frame[column].isin(chosen)]
    if not len(frame) and len(pool):
        # the filters select series, but no values in the time window asked for
        raise UsageError(f"the filters select {pool.groupby(['machine', 'suite', 'kernel', 'metric']).ngroups} "
                         f"series in {where}, but none has runs in the window asked for (--since/--last)")
    return frame.reset_index(drop=True)


def series(store: object, filters: Filters, *, since: float | None = None, last: int | None = None,
           where: str = "the store") -> "pd.DataFrame":
    """``store.series`` restricted by ``filters`` (see ``apply``). Exact suite, machine and
    metric names go to the store's query; patterns are matched here."""
    def exact(values: Sequence[str]) -> list[str] | None:
        return list(values) if values and not any(c in v for v in values for c in "*?[") else None

    metrics = filters.metrics()
    frame = store.series(machine=exact(filters.machine), suite=exact(filters.suite),  # type: ignore[attr-defined]
                         metric=list(metrics) or None, since=since, last=last)
    if len(frame):
        return apply(frame, filters, where=where)
    # nothing selected: the unfiltered series say which filter and what is close
    everything = store.series(since=since, last=last)  # type: ignore[attr-defined]
    return apply(frame, filters, everything, where=where)
