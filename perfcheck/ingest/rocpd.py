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
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from perfcheck.errors import InputError
from perfcheck.ingest.formats import Format, Grouped, Scan, Sniff, Want
from perfcheck.ingest.sqlitefile import Configs, Reader, quote, read_ranges, sniffed_tables
from perfcheck.model import Oddity, Source
from perfcheck.schema import raw

FORMAT = "rocpd"
TOOL = "rocprofv3"
CHUNK_ROWS = 200_000
# The schema says NOT NULL; a damaged or hand-made database may not keep to it.
UNTIMED = "dispatches without a start or end timestamp: counted in calls, no duration"
MISSING_FROM_VIEW = "kernel dispatches missing from the 'kernels' view (no event, region name, symbol or agent)"

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


def _device(reader: Reader) -> tuple[str | None, str | None]:
    """Marketing name and gfx target of the GPUs that ran kernels."""
    agents = reader.rows("rocpd_info_agent", "SELECT DISTINCT product_name, name FROM rocpd_info_agent WHERE type = 'GPU'")
    if len(agents) > 1:  # a mixed node: only the agents that ran kernels count
        agents = reader.rows(
            "rocpd_info_agent",
            "SELECT DISTINCT A.product_name, A.name FROM rocpd_info_agent A WHERE A.type = 'GPU' AND EXISTS "
            "(SELECT 1 FROM rocpd_kernel_dispatch K WHERE K.agent_id = A.id AND K.guid = A.guid)")
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


_HINT = "is the file complete? rocprofv3 writes it when the application exits"

# The fast read (``sqlitefile.read_ranges``) takes the dispatch table itself; what the
# ``kernels`` view joins to each dispatch comes from the small tables, once per
# distinct kernel, agent, queue and thread. Per-row columns and launch configuration:
_SERIES = {"start": "start_ns", "\"end\"": "end_ns", "dispatch_id": "dispatch_id"}
_CONFIG = ("agent_id", "queue_id", "stream_id", "tid", "grid_size_x", "grid_size_y", "grid_size_z",
           "workgroup_size_x", "workgroup_size_y", "workgroup_size_z", "group_segment_size", "private_segment_size")
# rocpd_kernel_dispatch column -> the ``kernels`` view's name for it
_CONFIG_AS = {"grid_size_x": "grid_x", "grid_size_y": "grid_y", "grid_size_z": "grid_z",
              "workgroup_size_x": "workgroup_x", "workgroup_size_y": "workgroup_y", "workgroup_size_z": "workgroup_z",
              "group_segment_size": "lds_size", "private_segment_size": "scratch_size"}
_IN_BATCH = 500  # ids per IN (...) list, well under SQLite's bound-parameter limit


def _fast(want: Want, counters: bool) -> bool:
    """The fast read leaves out what needs a per-row join (the event's correlation
    id) and counters; a caller that wants them gets the ``kernels`` view row by row."""
    return "correlation_id" not in want and not (counters and want.raw)


class _Session:
    """Per session (guid): the small tables the ``kernels`` view joins, read once, and
    the kernel symbols (names, registers), read once per distinct kernel."""

    def __init__(self, reader: Reader, guid: str) -> None:
        self.reader, self.guid = reader, guid
        self.agents = dict(reader.rows("rocpd_info_agent", "SELECT id, logical_index FROM rocpd_info_agent WHERE guid = ?", (guid,)))
        self.pids = dict(reader.rows("rocpd_info_queue", "SELECT Q.id, P.pid FROM rocpd_info_queue Q JOIN rocpd_info_process P "
                                     "ON P.id = Q.pid AND P.guid = Q.guid WHERE Q.guid = ?", (guid,)))
        self.tids = dict(reader.rows("rocpd_info_thread", "SELECT id, tid FROM rocpd_info_thread WHERE guid = ?", (guid,)))
        self.symbols: dict[int, tuple] = {}  # kernel_id -> (name, vgpr, agpr, sgpr)

    def symbols_of(self, ids: list[int]) -> None:
        new = sorted({i for i in ids if i not in self.symbols})
        for at in range(0, len(new), _IN_BATCH):
            part = new[at:at + _IN_BATCH]
            found = self.reader.rows(
                "rocpd_info_kernel_symbol",
                f"SELECT id, display_name, arch_vgpr_count, accum_vgpr_count, sgpr_count FROM rocpd_info_kernel_symbol "
                f"WHERE guid = ? AND id IN ({', '.join('?' * len(part))})", (self.guid, *part))
            for row in found:
                self.symbols[row[0]] = row[1:]


def _config_frame(session: _Session, configs: list[tuple], path: Path,
                  columns: Sequence[str] = _CONFIG) -> tuple[pd.DataFrame, np.ndarray]:
    """The canonical columns of each distinct (kernel, launch configuration) of a range,
    and whether the ``kernels`` view would hold it (its kernel symbol, agent, queue's
    process and thread rows exist: the view joins them with INNER JOINs)."""
    session.symbols_of([c[0] for c in configs])
    table = pd.DataFrame(configs, columns=["kernel_id", *columns], dtype=object).reindex(columns=["kernel_id", *_CONFIG])
    symbol = [session.symbols.get(k) for k in table["kernel_id"]]
    rows = pd.DataFrame({
        "name": [s[0] if s else None for s in symbol],
        "dispatch_id": np.nan,
        "agent_log_index": [session.agents.get(a) for a in table["agent_id"]],
        "queue_id": table["queue_id"], "stream_id": table["stream_id"],
        "pid": [session.pids.get(q) for q in table["queue_id"]],
        "tid": [session.tids.get(t) for t in table["tid"]],
        "corr_id": np.nan, "start": np.nan, "end": np.nan,
        **{_CONFIG_AS[c]: table[c] for c in _CONFIG_AS},
        "vgpr_count": [s[1] if s else None for s in symbol],
        "accum_vgpr_count": [s[2] if s else None for s in symbol],
        "sgpr_count": [s[3] if s else None for s in symbol],
    })
    in_view = np.array([s is not None and a in session.agents and q in session.pids and t in session.tids
                        for s, a, q, t in zip(symbol, table["agent_id"], table["queue_id"], table["tid"])], dtype=bool)
    return _to_frame(rows, path), in_view


def _fast_chunks(reader: Reader, guid: str, path: Path, want: Want, slow_sql: str, dropped: list[int],
                 untimed: list[int]) -> Iterator[pd.DataFrame | Grouped]:
    session = _Session(reader, guid)

    # The stream only identifies a dispatch: read when asked for (a column costs the
    # DISTINCT scan about a twentieth).
    config = [c for c in _CONFIG if c != "stream_id" or "stream_id" in want]

    def build(new: list[tuple]) -> tuple[pd.DataFrame, np.ndarray]:
        frame, in_view = _config_frame(session, new, path, config)
        # What differs per dispatch is taken from the range, not from a configuration
        # (conform puts the columns back in order).
        return frame.drop(columns=["correlation_id", *_SERIES.values()]), in_view

    configs = Configs(build, lambda column: column in want)
    # The timestamps always (a NULL one sends its range row by row, to be counted), the
    # dispatch id when asked for: each column read costs about a tenth of the scan.
    # A grouped read takes the duration, computed by SQLite, instead of both timestamps.
    timestamps = ("start", '"end"')
    series = [c for c, canonical in _SERIES.items()
              if (c in timestamps and not want.grouped) or (c not in timestamps and canonical in want)]
    spans = {"duration": ('"end"', "start")} if want.grouped else None
    for part in read_ranges(reader, "rocpd_kernel_dispatch", "guid = ?", (guid,), key="kernel_id",
                            series=series, config=config, rowid="id", size=CHUNK_ROWS, spans=spans):
        if not part.exact:  # NULLs, text or reals somewhere in the range: the view, row by row
            for rows in reader.frames("kernels", slow_sql, (guid, part.first, part.last), CHUNK_ROWS):
                untimed[0] += int((rows["start"].isna() | rows["end"].isna()).sum())
                yield _to_frame(rows, path)
            continue
        per_row = {canonical: part.series[column] for column, canonical in _SERIES.items()
                   if column in series and canonical in want}
        if want.grouped:
            if "duration" in part.series:  # in s, as dispatch.finish derives it from the timestamps
                per_row["duration"] = part.series["duration"].astype("float64") * 1e-9
            else:  # a negative timestamp in the range: finish reports it
                per_row.update(start_ns=part.series["start"], end_ns=part.series['"end"'])
            rows, group, keep = configs.grouped(part)
            dropped[0] += int((~keep).sum())
            yield Grouped(rows, group, {name: values[keep] for name, values in per_row.items()})
            continue
        frame, keep = configs.expand(part)
        dropped[0] += int((~keep).sum())
        for canonical, values in per_row.items():
            frame[canonical] = values[keep]
        yield frame


def _scan(path: Path, want: Want) -> Scan:
    with Reader(path, "the rocpd database", _HINT) as reader:
        names = reader.tables()
        if "kernels" not in names:
            raise InputError(path, "rocpd database without the 'kernels' view",
                             hint="was it written by rocprofv3 (ROCm 7+) and closed cleanly?")
        device, arch = _device(reader)
        any_dispatch = reader.one("rocpd_kernel_dispatch", "SELECT 1 FROM rocpd_kernel_dispatch LIMIT 1") is not None
        has_counters = reader.one("rocpd_pmc_event", "SELECT 1 FROM rocpd_pmc_event LIMIT 1") is not None
        fast = _fast(want, has_counters)
        in_view = in_table = 0
        if any_dispatch and not fast:
            in_view = reader.one("kernels", "SELECT COUNT(*) FROM kernels")[0]
            in_table = reader.one("rocpd_kernel_dispatch", "SELECT COUNT(*) FROM rocpd_kernel_dispatch")[0]
        if not any_dispatch or (not fast and not in_view):
            regions = reader.one("rocpd_region", "SELECT COUNT(*) FROM rocpd_region")[0]
            copies = reader.one("rocpd_memory_copy", "SELECT COUNT(*) FROM rocpd_memory_copy")[0]
        guids = [g for (g,) in reader.rows("rocpd_info_agent", "SELECT DISTINCT guid FROM rocpd_info_agent ORDER BY guid")]
    source = Source(path=str(path), format=FORMAT, tool=TOOL, device=device, arch=arch)
    oddities: list[Oddity] = []
    if in_table > in_view:
        # The view inner-joins each dispatch to its event and region name.
        oddities.append(Oddity(str(path), MISSING_FROM_VIEW, in_table - in_view))
    if not any_dispatch or (not fast and not in_view):
        oddities.append(Oddity(str(path), f"holds no kernel dispatches ({regions} API regions, {copies} memory copies)"))
        return Scan(source=source, chunks=iter(()), oddities=oddities)
    columns = ", ".join(quote(c) for c in ["id", *_KERNEL_COLUMNS])
    range_sql = f"SELECT {columns} FROM kernels WHERE guid = ? AND id BETWEEN ? AND ? ORDER BY id"
    session_sql = _KERNELS_SQL.format(columns=columns)

    def chunks() -> Iterator[pd.DataFrame | Grouped]:
        with Reader(path, "the rocpd database", _HINT) as reading:
            try:
                for guid in guids:
                    if fast:
                        dropped, untimed = [0], [0]
                        yield from _fast_chunks(reading, guid, path, want, range_sql, dropped, untimed)
                        if dropped[0]:
                            oddities.append(Oddity(str(path), MISSING_FROM_VIEW, dropped[0]))
                        if untimed[0]:
                            oddities.append(Oddity(str(path), UNTIMED, untimed[0]))
                        continue
                    counters = _Counters(reading.connection, guid) if has_counters and want.raw else None
                    untimed = [0]
                    for rows in reading.frames("kernels", session_sql, (guid,), CHUNK_ROWS):
                        untimed[0] += int((rows["start"].isna() | rows["end"].isna()).sum())
                        frame = _to_frame(rows, path)
                        if counters is not None:
                            frame = frame.join(counters.through(rows["id"]))
                        yield frame
                    if untimed[0]:
                        oddities.append(Oddity(str(path), UNTIMED, untimed[0]))
            except (sqlite3.Error, MemoryError) as exc:
                raise reading.error(exc, "kernels") from None

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
