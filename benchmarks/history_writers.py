"""Concurrent writers on the two history backends: W processes appending R runs of
V values each at the same moment, into one SQLite file (WAL, busy timeout) and into
one PostgreSQL database (a transaction per run). Prints, per backend, the runs and
values found afterwards (lost / duplicated: both must be 0), the time per append as
each writer saw it (median and worst writer), the whole batch's wall time, and the
PostgreSQL / SQLite ratio measured in the same run.

PostgreSQL: the server named by --url, else a private one started here as the tests
start it (tests/pgserver.py, fsync on: commits are durable, as on a real server).

    python benchmarks/history_writers.py [--writers 16] [--runs 50] [--values 20] [--url URL]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfcheck.history import Machine, Result, RunRecord, open_store  # noqa: E402

T0 = 1_767_225_600.0
MACHINE = "mi250x_gfx90a_rocprofv3-1.0.0"


def _writer(location: str, worker: int, runs: int, values: int, barrier, out) -> None:  # noqa: ANN001
    machine = [Machine(MACHINE, {"device": "mi250x", "arch": "gfx90a"})]
    with open_store(location) as store:
        barrier.wait()
        times = []
        for i in range(runs):
            rows = [Result(MACHINE, "nightly", f"kernel_{k}", "duration", 1e-3 * (1 + k), "s", n=100, median=1e-3,
                           spread=0.01, outcome="passed") for k in range(values)]
            start = time.perf_counter()
            store.add(RunRecord(f"w{worker:02d}-{i:04d}", T0 + i, commit=f"{i:040x}"), rows, machine)
            times.append(time.perf_counter() - start)
    out.put(times)


def measure(location: str, writers: int, runs: int, values: int) -> dict[str, float]:
    open_store(location).close()  # the schema is there before the clock starts
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(writers + 1), context.Queue()
    procs = [context.Process(target=_writer, args=(location, w, runs, values, barrier, out)) for w in range(writers)]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    per_writer = [out.get() for _ in procs]
    wall = time.perf_counter() - start
    for p in procs:
        p.join()
    with open_store(location, create=False) as store:
        stored_runs, series = store.runs(), store.series()
    expected_runs, expected_values = writers * runs, writers * runs * values
    unique_runs = stored_runs["run_id"].nunique()
    unique_values = len(series.drop_duplicates(["run_id", "machine", "suite", "kernel", "metric"]))
    means = [statistics.fmean(t) for t in per_writer]
    return {
        "runs lost": expected_runs - unique_runs, "runs duplicated": len(stored_runs) - unique_runs,
        "values lost": expected_values - unique_values, "values duplicated": len(series) - unique_values,
        "append ms (median writer)": 1e3 * statistics.median(means), "append ms (slowest writer)": 1e3 * max(means),
        "wall s": wall, "runs/s": expected_runs / wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--runs", type=int, default=50, help="runs per writer")
    parser.add_argument("--values", type=int, default=20, help="values per run")
    parser.add_argument("--url", help="a PostgreSQL database to write into (default: a private server)")
    args = parser.parse_args()
    server = None
    url = args.url
    if url is None:
        from tests import pgserver

        reason = pgserver.why_not()
        if reason:
            print(f"no PostgreSQL: {reason}", file=sys.stderr)
            return 2
        server = pgserver.start(durable=True)
        url = server.create_database("bench")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = {"SQLite (WAL)": measure(str(Path(tmp) / "h.sqlite"), args.writers, args.runs, args.values),
                       "PostgreSQL": measure(url, args.writers, args.runs, args.values)}
    finally:
        if server is not None:
            server.stop()
    print(f"{args.writers} writers x {args.runs} runs x {args.values} values, appended at once")
    names = list(results)
    print(f"{'':28}" + "".join(f"{n:>14}" for n in names) + f"{'PG/SQLite':>11}")
    for key in results[names[0]]:
        a, b = (results[n][key] for n in names)
        ratio = f"{b / a:>11.2f}" if a else f"{'-':>11}"
        print(f"{key:28}" + "".join(f"{results[n][key]:>14.4g}" for n in names) + ratio)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
