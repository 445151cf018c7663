"""rocpd: the SQLite database rocprofv3 writes by default since ROCm 7.0.

Layout (``schema_version`` 3 in ``rocpd_metadata``, seen in a ROCm 7.x run on
MI300X): every table carries its session GUID in the name
(``rocpd_kernel_dispatch_00000797_e16d_...``); views without the suffix select
from them (``rocpd_kernel_dispatch``, ``rocpd_info_agent``, ...), and convenience
views join them (``kernels``, ``top_kernels``, ``busy``, ``counters_collection``).
Rows of merged sessions are told apart by their ``guid`` column.

Dispatches come from the ``kernels`` view, which joins each dispatch to its
kernel symbol (name, registers), agent, queue and stream. Timestamps are integer
nanoseconds; LDS and scratch sizes are bytes (the dispatch's group and private
segment sizes, dynamic LDS included). Counter values, when the run collected
any (``--pmc``), pass through as ``raw.<counter name>``.

rocmProfileData's older "rpd" files also name tables ``rocpd_*`` (``rocpd_op``,
``rocpd_api``) but have neither ``rocpd_kernel_dispatch`` nor
``rocpd_info_agent``, so they are not mistaken for this format; nor are rocprof
v1 ``results.db`` files (tables ``KERN``, ``OPS``, ``HIP``...).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Scan, Sniff, Want
from perfcheck.ingest.sqlitefile import connect_read_only, sniffed_tables, table_names
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

FORMAT = "rocpd"
TOOL = "rocprofv3"
CHUNK_ROWS = 200_000

# ``kernels`` view column -> canonical column.
_KERNEL_COLUMNS = {
    "name": "kernel",
    "dispatch_id": "dispatch_id",
    # rocprofv3's CSV writes the agent's logical index by default
    # (--agent-index relative); the same number keeps CSV and rocpd comparable.
    "agent_log_index": "device_id",
    "queue_id": "queue_id",
    "stream_id": "stream_id",
    "pid": "pid",
    "tid": "tid",
    "corr_id": "correlation_id",
    "start": "start_ns",
    "end": "end_ns",
    "grid_x": "grid_x",
    "grid_y": "grid_y",
    "grid_z": "grid_z",
    "workgroup_x": "workgroup_x",
    "workgroup_y": "workgroup_y",
    "workgroup_z": "workgroup_z",
    "lds_size": "lds_per_workgroup",
    "scratch_size": "scratch_per_thread",
    "vgpr_count": "vgpr",
    "accum_vgpr_count": "agpr",
    "sgpr_count": "sgpr",
}

# One session (guid) at a time, in dispatch-row order: per session the view is
# a plain scan of the dispatch table by rowid, so rows stream without a sort.
_KERNELS_SQL = "SELECT {columns} FROM kernels WHERE guid = ? ORDER BY id"

# Counter values per dispatch of one session, in the same order, instances of
# one counter summed -- as the database's own ``counters_collection`` view and
# rocprofv3's CSV writer do. One pass over the event table per session (it has
# no index on event_id, so a query per chunk would rescan it each time).
_COUNTERS_SQL = """
SELECT K.id AS id, I.name AS counter, SUM(E.value) AS value
FROM rocpd_pmc_event E
JOIN rocpd_info_pmc I ON I.id = E.pmc_id AND I.guid = E.guid
JOIN rocpd_kernel_dispatch K ON K.event_id = E.event_id AND K.guid = E.guid
WHERE K.guid = ?
GROUP BY K.id, I.name
ORDER BY K.id
"""




def _has(names: set[str], stem: str) -> bool:
    return stem in names or any(n.startswith(stem + "_") for n in names)


def _is_rocpd(sniff: Sniff) -> bool:
    if sniff.is_dir or not sniff.is_sqlite:
        return False
    names = sniffed_tables(sniff.path)
    if names is None:
        # A cut-off copy cannot be opened ("database disk image is malformed"),
        # but its first pages still hold the schema text: claim it, so that the
        # scan reports the damage instead of "unknown format".
        return b"rocpd_kernel_dispatch" in sniff.raw_head and b"rocpd_info_agent" in sniff.raw_head
    return _has(names, "rocpd_kernel_dispatch") and _has(names, "rocpd_info_agent")


def _failed(path: Path, exc: sqlite3.Error) -> InputError:
    return InputError(path, f"cannot read the rocpd database ({exc})",
                      hint="is the file complete? rocprofv3 writes it when the application exits")


def _device(connection: sqlite3.Connection) -> tuple[str | None, str | None]:
    """Marketing name and gfx target of the GPUs that ran kernels."""
    agents = connection.execute(
        "SELECT DISTINCT product_name, name FROM rocpd_info_agent WHERE type = 'GPU'"
    ).fetchall()
    if len(agents) > 1:  # a mixed node: only the agents that ran kernels count
        agents = connection.execute(
            "SELECT DISTINCT A.product_name, A.name FROM rocpd_info_agent A WHERE A.type = 'GPU' AND EXISTS "
            "(SELECT 1 FROM rocpd_kernel_dispatch K WHERE K.agent_id = A.id AND K.guid = A.guid)"
        ).fetchall()
    products = sorted({p for p, _ in agents if p})
    archs = sorted({a for _, a in agents if a})
    return (", ".join(products) or None, ", ".join(archs) or None)


def _to_frame(rows: pd.DataFrame, path: Path) -> pd.DataFrame:
    frame = pd.DataFrame({canonical: rows[column] for column, canonical in _KERNEL_COLUMNS.items()})
    for (column, canonical) in _KERNEL_COLUMNS.items():
        if canonical == "kernel":
            continue
        # float64, not Int64: SQLite stores what it is given (text, 1e308, inf), and a
        # product of huge integers must not wrap around; dispatch.finish empties the
        # values no count can have and casts the rest to Int64.
        values = pd.to_numeric(frame[canonical], errors="coerce").astype("float64")
        text = values.isna() & frame[canonical].notna()
        if text.any():
            row = int(np.flatnonzero(text.to_numpy())[0])
            raise InputError(path, f"{frame[canonical].iloc[row]!r} is not a number (dispatch {row + 1} of the 'kernels' view)",
                             column=column, hint="was the database written by rocprofv3?")
        frame[canonical] = values
    grid = [frame[f"grid_{d}"] for d in "xyz"]
    block = [frame[f"workgroup_{d}"] for d in "xyz"]
    frame["grid_size"] = grid[0] * grid[1] * grid[2]
    frame["workgroup_size"] = block[0] * block[1] * block[2]
    # Grid sizes count work-items; a partial last workgroup still launches.
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero workgroup size: inf, emptied by finish
        per_dim = [np.floor((g + b - 1) / b) for g, b in zip(grid, block)]
    frame["workgroups"] = per_dim[0] * per_dim[1] * per_dim[2]
    return frame


class _Counters:
    """Counter values of one session, read in step with its dispatch chunks."""

    def __init__(self, connection: sqlite3.Connection, guid: str) -> None:
        self._cursor = connection.execute(_COUNTERS_SQL, (guid,))
        self._pending: list[pd.DataFrame] = []
        self._exhausted = False

    def _fetch(self) -> bool:
        batch = self._cursor.fetchmany(CHUNK_ROWS)
        if not batch:
            self._exhausted = True
            return False
        self._pending.append(pd.DataFrame(batch, columns=["id", "counter", "value"]))
        return True

    def through(self, ids: pd.Series) -> pd.DataFrame:
        """raw.<counter> columns for dispatch rows ``ids`` (ascending), aligned to them."""
        last = int(ids.iloc[-1])
        while not self._exhausted and (not self._pending or self._pending[-1]["id"].iloc[-1] <= last):
            self._fetch()
        if not self._pending:
            return pd.DataFrame(index=ids.index)
        long = pd.concat(self._pending, ignore_index=True)
        mine = long["id"] <= last
        self._pending = [long[~mine]] if (~mine).any() else []
        long = long[mine]
        if long.empty:
            return pd.DataFrame(index=ids.index)
        wide = long.pivot(index="id", columns="counter", values="value").astype("float64")
        wide = wide[pd.unique(long["counter"])]
        wide.columns = [raw(str(c)) for c in wide.columns]
        wide = wide.reindex(ids.to_numpy())
        wide.index = ids.index
        return wide


def _scan(path: Path, want: Want) -> Scan:
    try:
        with closing(connect_read_only(path)) as connection:
            names = table_names(connection)
            if "kernels" not in names:
                raise InputError(path, "rocpd database without the 'kernels' view",
                                 hint="was it written by rocprofv3 (ROCm 7+) and closed cleanly?")
            device, arch = _device(connection)
            in_view = connection.execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
            in_table = connection.execute("SELECT COUNT(*) FROM rocpd_kernel_dispatch").fetchone()[0]
            regions = connection.execute("SELECT COUNT(*) FROM rocpd_region").fetchone()[0]
            copies = connection.execute("SELECT COUNT(*) FROM rocpd_memory_copy").fetchone()[0]
            has_counters = connection.execute("SELECT 1 FROM rocpd_pmc_event LIMIT 1").fetchone() is not None
            guids = [g for (g,) in connection.execute("SELECT DISTINCT guid FROM rocpd_info_agent ORDER BY guid")]
    except sqlite3.Error as exc:
        raise _failed(path, exc) from None
    source = Source(path=str(path), format=FORMAT, tool=TOOL, device=device, arch=arch)
    oddities: list[Oddity] = []
    if in_table > in_view:
        # The view inner-joins each dispatch to its event and region name.
        oddities.append(Oddity(str(path), "kernel dispatches missing from the 'kernels' view (no event or region name)",
                               in_table - in_view))
    if not in_view:
        oddities.append(Oddity(str(path), f"holds no kernel dispatches ({regions} API regions, {copies} memory copies)"))
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    sql = _KERNELS_SQL.format(columns=", ".join(f'"{c}"' for c in ["id", *_KERNEL_COLUMNS]))

    def chunks() -> Iterator[pd.DataFrame]:
        try:
            with closing(connect_read_only(path)) as connection:
                for guid in guids:
                    counters = _Counters(connection, guid) if has_counters and want.raw else None
                    for rows in pd.read_sql_query(sql, connection, params=(guid,), chunksize=CHUNK_ROWS):
                        frame = _to_frame(rows, path)
                        if counters is not None:
                            frame = frame.join(counters.through(rows["id"]))
                        yield frame
        except sqlite3.Error as exc:
            raise _failed(path, exc) from None

    return Scan(source=source, chunks=chunks(), oddities=oddities)


FORMATS: tuple[Format, ...] = (
    Format(
        name=FORMAT,
        tool=TOOL,
        kind="profile",
        description="rocprofv3 rocpd SQLite database (*_results.db, ROCm 7+): the 'kernels' view, counters if collected",
        sniff=_is_rocpd,
        scan=_scan,
    ),
)
