"""History of runs: a store (an SQLite file or a PostgreSQL database) of every run's
values, change-point detection over its series, and the history-aware baseline of
the gate.

Public API (stable; the dashboard and exports build on it)::

    from perfcheck.history import open_store, detect, recent_regressions, ChangePoint

    with open_store("perf-history.sqlite", create=False) as store:   # InputError if absent/not a store
    # or open_store("postgresql://user@host/db"): the same interface (history.backend.HistoryStore)
    # on a PostgreSQL server (history.pgstore); history.transfer.copy_store(src, dst) copies runs
        store.version                       # schema version (migrated on open)
        store.machines()                    # {machine slug: {device, arch, tool, tool_version}}
        runs = store.runs(since=None, limit=None)
        #   DataFrame, one row per run, oldest first: run_id, time (UTC Timestamp), commit,
        #   branch, ci_system, ci_job, ci_url, host, source, added, machines, suites, values
        frame = store.series(machine=None, suite=None, kernel=None, metric=None, since=None, last=None)
        #   DataFrame, one row per run x machine x suite x kernel x metric, sorted by
        #   machine, suite, kernel, metric, time: machine, suite, kernel, metric, unit,
        #   run_id, time (UTC Timestamp), commit, branch, ci_job, ci_url, value (base
        #   units), n, median, spread (the run's duration samples: count, median s,
        #   relative 1.4826 x MAD / median; NaN when not known), outcome (passed |
        #   failed | recorded | error | None). Group by KEY for one series each.
        for part in store.batches(machine=None, ..., last=None, rows=100_000): ...
        #   the same rows in parts of whole kernels (every series of a machine x suite x
        #   kernel), in the same order: memory stays that of one part (a year of nights)
        scan(store, p=..., min_after=..., window=..., relative=False, last=3, select=None)
        #   perfcheck.history.scan: detect + findings over a whole store part by part
        points = detect(frame, p=0.001, min_after=2, window=30, min_change_pct=0.0)
        #   list[ChangePoint], per series oldest first
        recent_regressions(points, frame, last=3)   # regressions starting in each series' last 3 runs
        findings(points, frame, recent=..., select=None | "all" | names, arches={machine: arch})
        #   perfcheck.history.findings: one Finding per kernel x change run (headline, the
        #   same change on other metrics as .also, .diagnosis: why it changed)

    ChangePoint (frozen): machine, suite, kernel, metric, unit, run_id, commit, time (Unix s),
        index (position in its series), before, after (medians, base units), change_pct,
        direction ("regression" | "improvement"), p, runs_before, runs_after;
        .regression, .as_dict() (adds time_iso)
    better(metric, unit) -> "lower" | "higher"      # the metric's better direction
    split_points(values, p=, min_after=, window=) -> list[Split(index, p)]   # one bare series

Writing (the suite runner and ``perfcheck history add`` only; checks never write)::

    store.add(RunRecord(...), [Result(machine, suite, kernel, metric, value, unit, n, median,
              spread, outcome), ...], [Machine(slug, fingerprint)]) -> AddResult(run_id, added, values)
    store.prune(keep_days=N) -> runs deleted
    read_results(path) -> ImportedRun(run, values, machines, notices)    # a check --json file; .results
    store.add(imported.run, imported.values, imported.machines)         # its rows as they are stored
    current_run() -> RunRecord                      # id, time, commit, branch, CI job from the environment

The lifecycle of a regression (``perfcheck.history.lifecycle``; docs/history.md)::

    from perfcheck.history import accepted, lifecycle, select

    entries = accepted.read("baselines/accepted.toml")     # [] when absent; InputError when broken
    found = lifecycle.states(points, frame, entries, last=3)
    #   list[State], one per change point: .point, .status (open | accepted | recovered;
    #   None for an improvement), .new (in the last 3 runs), .level, .closed_by, .accepted_by
    lifecycle.level(points_of_one_series, values, entries)  # Level(start, end, open): the accepted level's runs
    accepted.append(path, accepted.accept(open_states, reason=..., by=accepted.who(), every_metric=True))
    frame = select.series(store, select.Filters.of(suite=..., kernel="EOClover*", metric="time"))
    #   UsageError naming the closest names when a filter selects no series

The history-aware gate (``perfcheck.history.gate``) reads a store; see its docstring.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfcheck.history.changepoints import (
        IMPROVEMENT,
        KEY,
        REGRESSION,
        ChangePoint,
        Split,
        better,
        detect,
        recent_regressions,
        split_points,
    )
    from perfcheck.history.runs import ImportedRun, current_run, read_results
    from perfcheck.history.store import (
        SCHEMA_VERSION,
        AddResult,
        Machine,
        Result,
        RunRecord,
        Store,
        machine_key,
        open_store,
    )

# Each name is imported from its module when first used (PEP 562), so that writing
# a run (``history add``, the runner's append) imports neither numpy nor pandas: the
# change-point modules need numpy, and importing it was half of ``history add``.
_HOMES = {
    "perfcheck.history.changepoints": ("IMPROVEMENT", "KEY", "REGRESSION", "ChangePoint", "Split", "better", "detect",
                                       "recent_regressions", "split_points"),
    "perfcheck.history.runs": ("ImportedRun", "current_run", "read_results"),
    "perfcheck.history.store": ("SCHEMA_VERSION", "AddResult", "Machine", "Result", "RunRecord", "Store",
                                "machine_key", "open_store"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:  # also how ``from perfcheck.history import gate`` finds a submodule
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
