"""``perfcheck history copy SRC DST``: every run of one store into another, between
backends (an SQLite file into a PostgreSQL server when a team outgrows the file, and
back for an archive or a laptop).

Idempotent as ``add`` is: runs are keyed by run id, so a run DST already has is left
alone and copying twice adds nothing; an interrupted copy is resumed by running it
again (each run is its own transaction in DST). The source is read a few runs at a
time (``backend.run_parts``: about ``RUN_ROWS`` values), so a year of nightly runs
of thousands of kernels copies in the memory of a few nights. A run keeps its id,
time, commit, CI job and values; ``added`` becomes the time it was copied (when DST got it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfcheck.history.backend import RUN_ROWS, run_parts
from perfcheck.history.store import Machine, Result, RunRecord

if TYPE_CHECKING:
    import pandas as pd

    from perfcheck.history.backend import HistoryStore

@dataclass(frozen=True)
class CopyResult:
    copied: int  # runs DST did not have
    present: int  # runs DST had already (left alone)
    values: int  # values copied


def _results(frame: "pd.DataFrame") -> dict[str, list[Result]]:
    """run id -> its values (a frame of SERIES_COLUMNS). A record per row, because
    ``add`` takes records (the interface both backends share); nothing is computed here.
    The columns are turned into Python values once each (missing: None), not row by row."""
    columns = ["run_id", "machine", "suite", "kernel", "metric", "value", "unit", "n", "median", "spread", "outcome",
               "low", "high"]
    lists = [frame[c].to_numpy(dtype=object, na_value=None).tolist() for c in columns]
    out: dict[str, list[Result]] = {}
    for (run_id, machine, suite, kernel, metric, value, unit, n, median, spread, outcome, low, high) in zip(*lists):
        out.setdefault(str(run_id), []).append(Result(
            machine, suite, kernel, metric, value, unit or "", int(n) if n is not None else None, median, spread,
            outcome, low, high))
    return out


def copy_store(source: "HistoryStore", target: "HistoryStore", *, rows: int = RUN_ROWS) -> CopyResult:
    """Copy every run of ``source`` that ``target`` does not have, oldest first, reading
    about ``rows`` values of ``source`` at a time."""
    runs = source.runs()
    machines = [Machine(slug, fingerprint) for slug, fingerprint in source.machines().items()]
    have = set(target.runs()["run_id"])
    todo = runs[~runs["run_id"].isin(have)]
    # each run's time as the source holds it: its whole seconds plus the nanoseconds left,
    # the float the stamp was made of. ``Timestamp.timestamp()`` rounds to the microsecond
    # (it moved time.time()'s runs by up to half of one), and (stamp - epoch) / 1 s divides
    # 1.8e18 ns as a float: a unit in the last place off for 7% of such times
    nanoseconds = todo["time"].dt.as_unit("ns").array.asi8  # (pandas 3 reads whole seconds as microseconds)
    seconds = dict(zip(todo["run_id"], (nanoseconds // 10**9 + (nanoseconds % 10**9) / 1e9).tolist()))
    records = {row.run_id: RunRecord(run_id=str(row.run_id), time=float(seconds[row.run_id]), commit=row.commit,
                                     branch=row.branch, ci_system=row.ci_system, ci_job=row.ci_job,
                                     ci_url=row.ci_url, host=row.host, source=row.source)
               for row in todo.astype(object).where(todo.notna(), None).itertuples(index=False)}
    copied = values = 0
    for chunk, part in run_parts(source, rows=rows, run_id=list(records)):
        done = _copy_runs(target, chunk, _results(part), records, machines)
        copied, values = copied + done[0], values + done[1]
        del part  # not held while the next part is read: memory is one part's
    return CopyResult(copied, len(runs) - copied, values)


def _copy_runs(target: "HistoryStore", chunk: list[str], results: dict[str, list[Result]],
               records: dict[str, RunRecord], machines: list[Machine]) -> tuple[int, int]:
    """``add`` each run of ``chunk`` to ``target`` (one transaction per run, oldest first:
    a copy stopped half-way keeps whole runs only; a run without values is copied too: it
    is in the chunk, not in ``results``); returns (runs added, values added)."""
    copied = values = 0
    for run_id in chunk:
        rows = results.get(run_id, [])
        used = {r.machine for r in rows}
        done = target.add(records[run_id], rows, [m for m in machines if m.machine in used])
        copied += int(done.added)
        values += done.values
    return copied, values

