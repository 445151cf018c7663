"""Ingest benchmark: `perfcheck inspect` against a bare pandas CSV read of the same file.

Two workloads, generated from real profiler output in ../shared/profiles (or
$PERFCHECK_SHARED) and deleted afterwards unless --keep:

* a rocprofv3 kernel trace of --dispatches rows (default 10 million, about 2 GB),
  made by repeating the rows of the 2025 rocprofiler-sdk kernel_trace.csv with
  increasing Dispatch_Id/Correlation_Id and advancing timestamps; baseline
  ``pandas.read_csv(path, engine="pyarrow")``. Goal: time ratio <= 1.5 and
  perfcheck's peak RSS <= 1.5 GB.
* Omniperf / rocprof-compute workload directories whose pmc_perf.csv repeats the
  three real MI200 vecCopy dispatches (about 1,000 counter columns) to each of
  --omniperf-dispatches (default 30,000 and 300,000); baselines
  ``pandas.read_csv(path)`` and ``pandas.read_csv(path, engine="pyarrow")``.
  Goal: within 2x the default-engine read, and <= 2 GB peak RSS at 300,000.
* SQLite profiles of --sqlite-dispatches dispatches (default 10 million): the real
  Nsight Systems H200 export and the real rocpd database (MI300X) copied with
  their schema, views and string tables, the real kernel rows repeated over 500
  kernel names (rocpd: names of about 180 characters, and of 3.5 KB as
  composable_kernel's GEMMs have). Baselines: SQLite's own GROUP BY kernel id
  (count/min/max/avg/sum, names joined to the groups) and read_sql + pandas (with
  the exact median). Goal: <= 1.5x the SQL GROUP BY and <= 1 GB peak RSS.

Every measurement runs in its own child process, reaped with ``os.wait4`` so the
peak RSS and the CPU time (user + system, all threads) reported are that child's
alone; on a machine shared with other work the CPU ratio moves less than the wall
one. Generation is not timed. The inspect
JSON is checked: its total calls must equal the generated dispatch count.

    python benchmarks/ingest.py [--dispatches N] [--omniperf-dispatches N [N ...]]
                                [--sqlite-dispatches N] [--workdir DIR] [--keep]
                                [--only trace|omniperf|sqlite] [--before CHECKOUT]
                                [--sqlite-files DIR]

``--sqlite-files DIR`` times the SQLite files an earlier run kept (``--keep``) in
DIR instead of generating new ones (generation takes minutes); they are only read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

ROOT = Path(__file__).resolve().parent.parent
TRACE = "profiles/rocprofv3/rocprofiler-sdk-docs-2025/kernel_trace.csv"
VCOPY = "profiles/omniperf/rocprofiler-compute-vcopy-MI200"
GB = 1e9
BLOCK_ROWS = 1_000_000  # rows generated and written at a time


def shared_dir() -> Path:
    return Path(os.environ.get("PERFCHECK_SHARED", ROOT.parent / "shared"))


def real_input(relative: str) -> Path:
    path = shared_dir() / relative
    if not path.exists():
        sys.exit(
            f"benchmarks/ingest.py: real profile data not found: {path}\n"
            "  (the benchmark replicates real profiler output; set PERFCHECK_SHARED to the "
            "directory holding profiles/)"
        )
    return path


# --------------------------------------------------------------------------- generation


def generate_trace(dest: Path, dispatches: int, seed: int = 1) -> None:
    """Repeat the real rows; ids count up from 1, timestamps advance monotonically.

    Each dispatch keeps its template row's duration jittered by up to +-5 % (so the
    median is a real median, not a constant), and starts 1-3 us after the previous
    one ended, as back-to-back launches from one thread do.
    """
    # Every column as text except the ones rewritten, so the written values are the real ones.
    real = pd.read_csv(real_input(TRACE), dtype=str, keep_default_na=False)
    template_duration = real["End_Timestamp"].astype(np.int64) - real["Start_Timestamp"].astype(np.int64)
    clock = int(real["Start_Timestamp"].astype(np.int64).min())
    # Columns the reader parses as numbers are written unquoted, as rocprofv3 does;
    # Kind, Agent_Id ("Agent 4") and Kernel_Name are quoted strings in the real file.
    quoted = {"Kind", "Agent_Id", "Kernel_Name"}
    rng = np.random.default_rng(seed)
    options = pacsv.WriteOptions(include_header=True, quoting_style="needed")
    n_templates = len(real)
    with open(dest, "wb") as out:
        for first in range(0, dispatches, BLOCK_ROWS):
            n = min(BLOCK_ROWS, dispatches - first)
            which = (np.arange(first, first + n) % n_templates).astype(np.int32)
            ids = np.arange(first + 1, first + n + 1, dtype=np.int64)
            duration = np.rint(
                template_duration.to_numpy()[which] * rng.uniform(0.95, 1.05, n)
            ).astype(np.int64)
            gap = rng.integers(1000, 3000, n, dtype=np.int64)
            start = clock + np.cumsum(gap + duration) - duration
            end = start + duration
            clock = int(end[-1])
            columns = {}
            for name in real.columns:
                if name in ("Dispatch_Id", "Correlation_Id"):
                    columns[name] = pa.array(ids)
                elif name == "Start_Timestamp":
                    columns[name] = pa.array(start)
                elif name == "End_Timestamp":
                    columns[name] = pa.array(end)
                elif name in quoted:
                    # Dictionary of the template values indexed per row: no 10M Python strings.
                    values = pa.DictionaryArray.from_arrays(pa.array(which), pa.array(real[name].tolist()))
                    columns[name] = values.cast(pa.string())
                else:
                    columns[name] = pa.array(real[name].astype(np.int64).to_numpy()[which])
            pacsv.write_csv(pa.table(columns), out, write_options=options)
            options = pacsv.WriteOptions(include_header=False, quoting_style="needed")


def generate_omniperf(dest: Path, dispatches: int) -> None:
    """Workload directory: pmc_perf.csv with the 3 real vecCopy rows repeated (Dispatch_ID
    counting from 0, as Omniperf numbers them), and the real small sibling files, with
    the per-dispatch ones (timestamps.csv, pmc_dispatch_info.csv) replicated to match."""
    source = real_input(VCOPY)
    dest.mkdir(parents=True, exist_ok=True)
    for sibling in source.iterdir():
        if sibling.is_file() and sibling.name not in ("pmc_perf.csv", "timestamps.csv", "pmc_dispatch_info.csv"):
            shutil.copyfile(sibling, dest / sibling.name)
    _replicate_by_dispatch(source / "pmc_perf.csv", dest / "pmc_perf.csv", dispatches)
    _replicate_by_dispatch(source / "pmc_dispatch_info.csv", dest / "pmc_dispatch_info.csv", dispatches)
    _replicate_timestamps(source / "timestamps.csv", dest / "timestamps.csv", dispatches)


def _split_rows(path: Path) -> tuple[bytes, list[bytes]]:
    lines = path.read_bytes().splitlines()
    return lines[0], [line for line in lines[1:] if line.strip()]


def _replicate_by_dispatch(src: Path, dest: Path, dispatches: int) -> None:
    """Rows whose first field is Dispatch_ID: repeat them with the id counting up."""
    header, rows = _split_rows(src)
    tails = [row.split(b",", 1)[1] for row in rows]  # everything after Dispatch_ID
    with open(dest, "wb") as out:
        out.write(header + b"\n")
        for first in range(0, dispatches, 10_000):
            ids = range(first, min(first + 10_000, dispatches))
            out.write(b"".join(b"%d,%s\n" % (i, tails[i % len(tails)]) for i in ids))


def _replicate_timestamps(src: Path, dest: Path, dispatches: int) -> None:
    """timestamps.csv: Dispatch_ID first, the four clocks last; the clocks are shifted
    by one round of the real dispatches per repetition so they keep advancing."""
    header, rows = _split_rows(src)
    names = header.decode().split(",")
    clocks = ["DispatchNs", "Start_Timestamp", "End_Timestamp", "CompleteNs"]
    assert names[0] == "Dispatch_ID" and names[-4:] == clocks, names
    middles = [row.split(b",", 1)[1].rsplit(b",", 4)[0] for row in rows]
    stamps = np.array([[int(v) for v in row.rsplit(b",", 4)[1:]] for row in rows], dtype=np.int64)
    period = int(stamps.max() - stamps.min()) + 10_000
    with open(dest, "wb") as out:
        out.write(header + b"\n")
        for first in range(0, dispatches, 10_000):
            ids = np.arange(first, min(first + 10_000, dispatches))
            which = ids % len(rows)
            shifted = stamps[which] + (ids // len(rows))[:, None] * period
            out.write(b"".join(
                b"%d,%s,%d,%d,%d,%d\n" % (i, middles[k], *t) for i, k, t in zip(ids.tolist(), which.tolist(), shifted.tolist())
            ))


# --------------------------------------------------------------------------- SQLite profiles
#
# Both are the real file copied (schema, views, indices, string tables and the real rows
# unchanged) with dispatches appended by SQL: the real kernel rows repeated as templates,
# each given one of NAMES kernel names, interleaved, with timestamps that keep advancing
# and the template's duration jittered by up to +-5 %. A name keeps one template, so each
# kernel has one launch configuration, as every kernel of both real files has.

NSYS = "profiles/nsys/nvidia-fuser-h200-nsys2025.1/report1.sqlite"
ROCPD = "profiles/rocprofv3/batched_gemm-mi300x-rocpd/15_results.db"
NAMES = 500
# Stride through the kernel names so that consecutive dispatches are different kernels
# (prime, coprime with NAMES).
STRIDE = 7919
# n.i counts the new dispatches, n.k is the kernel name each one gets.
_COUNTER = ("WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < ?), "
            f"n(i, k) AS (SELECT i, (i * {STRIDE}) % {NAMES} FROM c) ")


def _guid_table(connection: sqlite3.Connection, stem: str) -> str:
    (name,) = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?",
                                 (stem + "_0%",)).fetchone()
    return name


def kernel_names(template: str, length: int, count: int = NAMES) -> list[str]:
    """``count`` distinct kernel names of about ``length`` characters: the template's
    name with template arguments of the kind composable_kernel's GEMMs carry."""
    head = template.split("(")[0].split("<")[0]
    parts = ["ck::tensor_layout::gemm::RowMajor", "ck::tensor_operation::element_wise::PassThrough",
             "ck::Sequence<4, 64, 1>", "ck::BlockGemmPipelineScheduler::Intrawave", "ck::half_t", "float",
             "ck::tensor_operation::device::GemmSpecialization::MNKPadding", "ck::Sequence<1, 0, 2>"]
    names = []
    for i in range(count):
        args = [f"(int){i}"]
        k = i
        while len(head) + sum(len(a) + 2 for a in args) + 16 < length:
            args.append(parts[k % len(parts)])
            k += 3
        names.append(f"{head}<{', '.join(args)}>(int, T2, T3)")
    return names


def generate_nsys(dest: Path, dispatches: int) -> None:
    shutil.copyfile(real_input(NSYS), dest)
    dest.chmod(0o644)
    with sqlite3.connect(dest) as db:
        templates = db.execute("SELECT K.rowid, S.value FROM CUPTI_ACTIVITY_KIND_KERNEL K "
                               "JOIN StringIds S ON S.id = K.demangledName ORDER BY K.rowid").fetchall()
        first_id = db.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
        names = [f"{value.split('(')[0]}<(int){i}>(int, T2, T3)"
                 for i, (_, value) in zip(range(NAMES), [templates[i % len(templates)] for i in range(NAMES)])]
        db.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)", [(first_id + i, n) for i, n in enumerate(names)])
        columns = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
        clock = db.execute("SELECT max(\"end\") FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        rows = len(templates)
        new = {
            "start": f"{clock} + 4000 * n.i",
            "end": f"{clock} + 4000 * n.i + (T.\"end\" - T.start) % 3000 * (950 + abs(random()) % 101) / 1000 + 1",
            "correlationId": "1000000 + n.i",
            "demangledName": f"{first_id} + n.k",
            "shortName": f"{first_id} + n.k",
            "gridId": "1000000 + n.i",
        }
        select = ", ".join(new.get(c, f'T."{c}"') for c in columns)
        db.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(chr(34) + c + chr(34) for c in columns)}) "
                   f"{_COUNTER} SELECT {select} FROM n JOIN CUPTI_ACTIVITY_KIND_KERNEL T ON T.rowid = 1 + n.k % {rows}",
                   (dispatches - rows,))


def generate_rocpd(dest: Path, dispatches: int, name_length: int) -> None:
    shutil.copyfile(real_input(ROCPD), dest)
    dest.chmod(0o644)
    with sqlite3.connect(dest) as db:
        dispatch, symbol = _guid_table(db, "rocpd_kernel_dispatch"), _guid_table(db, "rocpd_info_kernel_symbol")
        kernel_of = dict(db.execute(f'SELECT id, kernel_id FROM "{dispatch}"'))  # the templates' symbols
        rows = len(kernel_of)
        used = [kernel_of[1 + i % rows] for i in range(NAMES)]
        symbol_columns = [r[1] for r in db.execute(f'PRAGMA table_info("{symbol}")') if r[1] != "id"]
        first_id = db.execute(f'SELECT max(id) + 1 FROM "{symbol}"').fetchone()[0]
        template = db.execute(f'SELECT display_name FROM "{symbol}" WHERE id = ?', (used[-1],)).fetchone()[0]
        names = kernel_names(template, name_length)
        for i, name in enumerate(names):
            select = ", ".join("?" if c in ("kernel_name", "display_name") else f'"{c}"' for c in symbol_columns)
            db.execute(f'INSERT INTO "{symbol}" (id, {", ".join(chr(34) + c + chr(34) for c in symbol_columns)}) '
                       f'SELECT ?, {select} FROM "{symbol}" WHERE id = ?', (first_id + i, name + ".kd", name, used[i]))
        columns = [r[1] for r in db.execute(f'PRAGMA table_info("{dispatch}")') if r[1] != "id"]
        clock = db.execute(f'SELECT max("end") FROM "{dispatch}"').fetchone()[0]
        new = {
            "start": f"{clock} + 70000 * n.i",
            "end": f"{clock} + 70000 * n.i + (T.\"end\" - T.start) * (950 + abs(random()) % 101) / 1000",
            "dispatch_id": f"{rows + 1} + n.i",
            "kernel_id": f"{first_id} + n.k",
        }
        select = ", ".join(new.get(c, f'T."{c}"') for c in columns)
        db.execute(f'INSERT INTO "{dispatch}" ({", ".join(chr(34) + c + chr(34) for c in columns)}) '
                   f'{_COUNTER} SELECT {select} FROM n JOIN "{dispatch}" T ON T.id = 1 + n.k % {rows}',
                   (dispatches - rows,))


# The yardsticks: SQLite itself grouping by kernel id (names joined to the groups), and
# read_sql + pandas for the exact median SQLite 3.40 does not have.
BARE_SQL = {
    "nsys": "SELECT S.value, G.* FROM (SELECT demangledName AS k, count(*), min(\"end\" - start), max(\"end\" - start), "
            "avg(\"end\" - start), sum(\"end\" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY demangledName) G "
            "JOIN StringIds S ON S.id = G.k",
    "rocpd": "SELECT S.display_name, G.* FROM (SELECT kernel_id AS k, count(*), min(\"end\" - start), max(\"end\" - start), "
             "avg(\"end\" - start), sum(\"end\" - start) FROM rocpd_kernel_dispatch GROUP BY kernel_id) G "
             "JOIN rocpd_info_kernel_symbol S ON S.id = G.k",
}
PANDAS_SQL = {
    "nsys": "SELECT demangledName AS k, \"end\" - start AS d FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "rocpd": "SELECT kernel_id AS k, \"end\" - start AS d FROM rocpd_kernel_dispatch",
}
PANDAS_NAMES = {"nsys": "SELECT id AS k, value AS name FROM StringIds",
                "rocpd": "SELECT id AS k, display_name AS name FROM rocpd_info_kernel_symbol"}


def bare_sql_run(path: Path, kind: str) -> Run:
    code = (f"import sqlite3; c = sqlite3.connect({path.resolve().as_uri() + '?mode=ro'!r}, uri=True); "
            f"print(len(c.execute({BARE_SQL[kind]!r}).fetchall()))")
    return measure([sys.executable, "-c", code])


def pandas_sql_run(path: Path, kind: str) -> Run:
    code = (f"import sqlite3, pandas as pd; c = sqlite3.connect({path.resolve().as_uri() + '?mode=ro'!r}, uri=True); "
            f"f = pd.read_sql_query({PANDAS_SQL[kind]!r}, c); "
            f"g = f.groupby('k')['d'].agg(['count', 'min', 'max', 'mean', 'sum', 'median']); "
            f"g = g.join(pd.read_sql_query({PANDAS_NAMES[kind]!r}, c).set_index('k')); print(len(g))")
    return measure([sys.executable, "-c", code])


def profile_sqlite(path: Path, kind: str, dispatches: int, label: str, rows: list[Row], before: str | None = None,
                   pandas: bool = True) -> None:
    size = path.stat().st_size
    bare = bare_sql_run(path, kind)
    ours = inspect_run(path, dispatches)
    rows.append(Row(label, size, ours, "SQL GROUP BY kernel", bare, 1.5, 1.0 * GB))
    if pandas:
        rows.append(Row(label, size, ours, "read_sql + pandas", pandas_sql_run(path, kind), None, None))
    if before:
        # Another checkout's perfcheck on the same file in the same run: "before" and
        # "after" under the same load, and the same JSON, byte for byte.
        theirs = inspect_run(path, dispatches, checkout=Path(before).resolve())
        if theirs.stdout != ours.stdout:
            sys.exit(f"benchmarks/ingest.py: WRONG RESULT: inspect --json of {path} differs from {before}'s")
        rows.append(Row(label, size, ours, "before (--before)", theirs, None, None))


# --------------------------------------------------------------------------- measurement


@dataclass
class Run:
    seconds: float
    peak_rss: int  # bytes
    # user + system CPU seconds of the process (all its threads): on a machine shared
    # with other work, wall time follows the load; CPU time much less so.
    cpu: float
    stdout: bytes


def measure(argv: list[str], cwd: Path | None = None) -> Run:
    """Run argv in a fresh process; wall time and that process's own peak RSS."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=cwd)
        # wait4 returns the rusage of this child alone (RUSAGE_CHILDREN would be a
        # maximum over every child so far).
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.returncode != 0:
            sys.exit(f"benchmarks/ingest.py: command failed ({proc.returncode}): {' '.join(argv)}\n{err}")
        out.seek(0)
        stdout = out.read()
    return Run(seconds, usage.ru_maxrss * 1024, cpu=usage.ru_utime + usage.ru_stime, stdout=stdout)  # Linux: KiB


def inspect_run(path: Path, expected_calls: int, checkout: Path | None = None) -> Run:
    """``perfcheck inspect --json`` of ``path``: this checkout's, or ``checkout``'s (its
    .venv's interpreter), run from the checkout's root (``python -m`` imports the
    package of the working directory first)."""
    python = str(checkout / ".venv" / "bin" / "python") if checkout else sys.executable
    run = measure([python, "-m", "perfcheck", "inspect", str(path.resolve()), "--json"], cwd=checkout or ROOT)
    document = json.loads(run.stdout)
    calls = sum(k["calls"] for k in document["kernels"])
    if calls != expected_calls:
        sys.exit(f"benchmarks/ingest.py: WRONG RESULT: inspect counted {calls} calls in {path}, generated {expected_calls}")
    return run


def read_csv_run(path: Path, engine: str | None) -> Run:
    arg = f", engine={engine!r}" if engine else ""
    code = f"import pandas; frame = pandas.read_csv({str(path)!r}{arg}); print(len(frame))"
    return measure([sys.executable, "-c", code])


@dataclass
class Row:
    case: str
    size: int
    ours: Run
    baseline: str
    base: Run
    ratio_goal: float | None  # None: a reference row, no goal
    rss_goal: float | None

    def cells(self) -> list[str]:
        ratio = self.ours.seconds / self.base.seconds
        if self.ratio_goal is None:
            verdict = "(reference)"
        else:
            met = ratio <= self.ratio_goal and (self.rss_goal is None or self.ours.peak_rss <= self.rss_goal)
            goal = f"<={self.ratio_goal:g}x" + (f", <={self.rss_goal / GB:g} GB" if self.rss_goal else "")
            verdict = f"{goal}: {'met' if met else 'MISSED'}"
        return [
            self.case,
            f"{self.size / GB:.2f} GB",
            f"{self.ours.seconds:.2f}",
            self.baseline,
            f"{self.base.seconds:.2f}",
            f"{ratio:.2f}",
            f"{self.ours.cpu:.2f} / {self.base.cpu:.2f} = {self.ours.cpu / self.base.cpu:.2f}",
            f"{self.ours.peak_rss / GB:.2f} GB",
            f"{self.base.peak_rss / GB:.2f} GB",
            verdict,
        ]


def print_table(rows: list[Row]) -> None:
    head = ["case", "size", "perfcheck s", "baseline", "baseline s", "ratio", "CPU s (ours / base = ratio)",
            "perfcheck RSS", "baseline RSS", "goal"]
    cells = [head] + [r.cells() for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    for i, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)  # Linux
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dispatches", type=int, default=10_000_000, help="kernel-trace rows (default 10,000,000)")
    parser.add_argument("--omniperf-dispatches", type=int, nargs="+", default=[30_000, 300_000],
                        help="pmc_perf.csv rows, one workload per number (default 30000 300000)")
    parser.add_argument("--workdir", type=Path, help="where to generate (default: a temp dir under bench-data/)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--sqlite-dispatches", type=int, default=10_000_000,
                        help="dispatches of each SQLite profile (nsys, rocpd; default 10,000,000)")
    parser.add_argument("--only", choices=["trace", "omniperf", "sqlite"], help="run one workload only")
    parser.add_argument("--sqlite-files", type=Path, metavar="DIR",
                        help="SQLite cases: time the files a run with --keep left in DIR (nsys-real.sqlite, "
                             "rocpd-180.sqlite, rocpd-3500.sqlite, of --sqlite-dispatches dispatches) instead of "
                             "generating them; they are read, never changed nor deleted")
    parser.add_argument("--no-pandas", action="store_true",
                        help="SQLite cases: leave out the read_sql + pandas reference (2 GB, a minute a file)")
    parser.add_argument("--before", metavar="CHECKOUT",
                        help="SQLite cases: also time another checkout's inspect (CHECKOUT/.venv/bin/python -m "
                             "perfcheck, run from CHECKOUT) on the same files; its JSON must be byte-identical")
    args = parser.parse_args()

    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="ingest-", dir=args.workdir))
    else:
        base = ROOT / "bench-data"
        try:
            base.mkdir(exist_ok=True)
        except OSError:
            base = Path(tempfile.gettempdir())
        workdir = Path(tempfile.mkdtemp(prefix="ingest-", dir=base))
    rows: list[Row] = []
    # Wall times follow the machine's load (other work on its cores): said with them.
    load = os.getloadavg()
    try:
        if args.only in (None, "trace"):
            path = workdir / "kernel_trace.csv"
            t0 = time.perf_counter()
            generate_trace(path, args.dispatches)
            print(f"generated {path} ({args.dispatches:,} dispatches, {path.stat().st_size / GB:.2f} GB) "
                  f"in {time.perf_counter() - t0:.1f} s", flush=True)
            base = read_csv_run(path, "pyarrow")
            ours = inspect_run(path, args.dispatches)
            rows.append(Row(f"rocprofv3 trace {args.dispatches:,}", path.stat().st_size, ours,
                            'read_csv(engine="pyarrow")', base, 1.5, 1.5 * GB))
            if not args.keep:
                path.unlink()
        if args.only in (None, "sqlite"):
            n = args.sqlite_dispatches
            cases = [("nsys", "nsys H200 schema", None), ("rocpd", "rocpd 180-char names", 180),
                     ("rocpd", "rocpd 3.5 KB names", 3500)]
            for kind, label, length in cases:
                name = f"{kind}-{length or 'real'}.sqlite"
                if args.sqlite_files:
                    path = args.sqlite_files / name
                    if not path.is_file():
                        sys.exit(f"benchmarks/ingest.py: --sqlite-files: no {path} (kept by a run with --keep)")
                    profile_sqlite(path, kind, n, f"{label} {n:,}", rows, args.before, not args.no_pandas)
                    continue
                path = workdir / name
                t0 = time.perf_counter()
                if kind == "nsys":
                    generate_nsys(path, n)
                else:
                    generate_rocpd(path, n, length)
                print(f"generated {path} ({n:,} dispatches, {path.stat().st_size / GB:.2f} GB) "
                      f"in {time.perf_counter() - t0:.1f} s", flush=True)
                profile_sqlite(path, kind, n, f"{label} {n:,}", rows, args.before, not args.no_pandas)
                if not args.keep:
                    path.unlink()
        if args.only in (None, "omniperf"):
            for n in args.omniperf_dispatches:
                directory = workdir / f"vcopy-{n}"
                t0 = time.perf_counter()
                generate_omniperf(directory, n)
                pmc = directory / "pmc_perf.csv"
                print(f"generated {directory} ({n:,} dispatches, pmc_perf.csv {pmc.stat().st_size / GB:.2f} GB) "
                      f"in {time.perf_counter() - t0:.1f} s", flush=True)
                ours = inspect_run(directory, n)
                rss_goal = 2 * GB if n >= 300_000 else None
                # The goal's yardstick is the default-engine read; the pyarrow one is for reference.
                rows.append(Row(f"omniperf vecCopy {n:,}", pmc.stat().st_size, ours, "read_csv()",
                                read_csv_run(pmc, None), 2.0, rss_goal))
                rows.append(Row(f"omniperf vecCopy {n:,}", pmc.stat().st_size, ours, 'read_csv(engine="pyarrow")',
                                read_csv_run(pmc, "pyarrow"), None, None))
                if not args.keep:
                    shutil.rmtree(directory)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept generated files in {workdir}")
    print()
    print_table(rows)
    print(f"load average (1, 5, 15 min): {', '.join(f'{v:.2f}' for v in load)} at the start, "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())} at the end; {_cores()} usable cores")


if __name__ == "__main__":
    main()
