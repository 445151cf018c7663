"""History at scale: a store of N nightly runs of one suite of ~2,000 kernels, each
command timed as a whole process, with its peak RSS (issue 22).

The store is built the way users build it, from results files of ``perfcheck check
--json``: the suite is a rocprofv3 kernel trace of --kernels kernels with long C++
template names, made from the rows of the real rocprofiler-sdk kernel_trace.csv in
../shared/profiles (16 metrics per kernel); one real ``check --json`` of it (untimed) is
the seed, and every night is the seed's values with seeded log-normal noise (2%),
a 20% regression of every 50th kernel from night 2N/3 on and a 10% run-wide step at
N/3 (so detect, --relative and the digest have something to find). Generation and
the store's construction are not timed; each timed command runs in a fresh process,
reaped with ``os.wait4`` (that child's own peak RSS).

Timed, in this order: ``history add`` of one more night, ``history detect``,
``detect --relative``, ``report --markdown``, ``report --html``, ``export
--openmetrics``, ``export --bencher`` (a file per night), ``check`` without a store
(the peer) and ``check --history`` (the store is read for the gate, and the run
appended).

    python benchmarks/history_scale.py [--nights 30 90 ...] [--kernels 2000]
                                       [--workdir DIR] [--keep] [--profile-detect]
                                       [--skip NAME ...] [--backend sqlite postgresql]

With ``--workdir DIR`` each built store is kept as ``DIR/h<N>.k<K>.built.sqlite`` and reused
by later runs with the same DIR, --nights and --kernels (building 365 nights takes a
quarter of an hour); every run times a fresh copy of it, since ``history add`` and
``check --history`` append to the store they are given.

``--profile-detect``: also run ``history detect`` under cProfile at the first N and
print the top functions by cumulative time.

``--backend sqlite postgresql``: also time the PostgreSQL store. A private server is
started for the benchmark (initdb and postgres as this user, or as ``postgres`` when
run as root, in a temporary folder: ``tests/pgserver.py``, which the tests use;
PostgreSQL from /usr/lib/postgresql/N/bin), the same store is made there with ``history
copy`` from the built SQLite store (timed: it is the way a team moves to the server),
then each command is run on SQLite and at once on PostgreSQL, so both meet the same
load, and the table gets a row of PostgreSQL / SQLite ratios. The server is stopped
by its PID at the end, whatever happened.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfcheck.history import open_store, read_results  # noqa: E402

TRACE = "profiles/rocprofv3/rocprofiler-sdk-docs-2025/kernel_trace.csv"
T0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC
DAY = 86400.0
MB = 1e6


def kernel_name(i: int) -> str:
    """A long C++ template name, as a real library's kernels have (~200 characters)."""
    return (f"void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_k0mk1_k0nk1_mn_xdlops_v3r{i % 7}<"
            f"ck::tensor_layout::gemm::RowMajor, ck::half_t, float, {64 << (i % 3)}, {i}, "
            f"ck::BlockGemmPipelineScheduler::Intrawave, (ck::BlockGemmPipelineVersion){i % 5}>, true, "
            f"(ck::InMemoryDataOperationEnum)0, {i % 4}>(ck::Argument) [clone .kd]")


def shared_dir() -> Path:
    return Path(os.environ.get("PERFCHECK_SHARED", ROOT.parent / "shared"))


def make_profile(dest: Path, kernels: int) -> None:
    """A rocprofv3 kernel trace: the rows of the 2025 rocprofiler-sdk kernel_trace.csv
    in ../shared/profiles, renamed to ``kernels`` kernels, two dispatches each."""
    source = shared_dir() / TRACE
    if not source.exists():
        sys.exit(f"benchmarks/history_scale.py: real profile data not found: {source} (set PERFCHECK_SHARED)")
    with open(source, newline="") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], [r for r in rows[1:] if r and r[0] == "KERNEL_DISPATCH"]
    at = {name: header.index(name) for name in ("Dispatch_Id", "Kernel_Id", "Kernel_Name", "Correlation_Id",
                                                "Start_Timestamp", "End_Timestamp")}
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    clock = 10**15
    for d in range(2 * kernels):
        row = list(body[d % len(body)])
        length = int(row[at["End_Timestamp"]]) - int(row[at["Start_Timestamp"]])
        row[at["Dispatch_Id"]] = row[at["Correlation_Id"]] = str(d + 1)
        row[at["Kernel_Id"]] = str(d % kernels + 1)
        row[at["Kernel_Name"]] = kernel_name(d % kernels)
        row[at["Start_Timestamp"]], row[at["End_Timestamp"]] = str(clock), str(clock + length)
        clock += length + 5000
        writer.writerow(row)
    dest.write_text(out.getvalue())


def make_config(work: Path) -> Path:
    config = work / "perfcheck.toml"
    config.write_text(
        "[tool.perfcheck]\n"
        'device = "mi300x"\n'
        'baseline_dir = "baselines"\n'
        "[tool.perfcheck.suites.nightly]\n"
        'profiles = ["profile.csv"]\n'
        "[tool.perfcheck.suites.nightly.expect]\n"
        # a baseline-relative check: with --history the gate reads each kernel's duration series
        '"*" = ["occupancy >= 1%", "scratch_per_thread == 0", "duration <= baseline + 10%"]\n'
    )
    return config


def perfcheck(*args: str) -> list[str]:
    return [sys.executable, "-m", "perfcheck", *args]


def night(seed_doc: dict, index: int, nights: int, rng: np.random.Generator) -> dict:
    """The seed results document as night ``index``: values with noise and the steps."""
    doc = json.loads(json.dumps(seed_doc))
    doc["run"] = {"id": f"night-{index:04d}", "time": T0 + index * DAY, "commit": f"{index:040x}", "branch": "main"}
    for entry in doc["suites"].values():
        kernels = sorted(entry["measurements"])
        wide = 1.10 if index >= nights // 3 else 1.0
        for k, kernel in enumerate(kernels):
            step = 1.20 if k % 50 == 0 and index >= 2 * nights // 3 else 1.0
            metrics = entry["measurements"][kernel]
            noise = np.exp(rng.normal(0.0, 0.02, len(metrics)))
            for (metric, value), factor in zip(list(metrics.items()), noise):
                if isinstance(value, (int, float)) and not isinstance(value, bool) and metric != "calls":
                    scale = step * wide if metric == "duration" else 1.0
                    metrics[metric] = value * factor * scale
    return doc


def build_store(store: Path, seed_doc: dict, nights: int, work: Path) -> Path:
    """N nights in the store (``Store.add``, as ``history add`` does, in this process:
    not timed); returns the results file of night N + 1 for the timed ``history add``."""
    rng = np.random.default_rng(22)
    scratch = work / "night.json"
    with open_store(store) as history:
        for index in range(nights):
            scratch.write_text(json.dumps(night(seed_doc, index, nights, rng)))
            imported = read_results(scratch)
            history.add(imported.run, imported.results, imported.machines)
    extra = work / "extra-night.json"
    extra.write_text(json.dumps(night(seed_doc, nights, nights, rng)))
    return extra


@dataclasses.dataclass(frozen=True)
class Timing:
    seconds: float
    peak_rss: int  # bytes


def measure(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0, 1), stdout: Path | None = None) -> Timing:
    """Run argv in a fresh process: wall time and that child's own peak RSS (wait4);
    its standard output goes to ``stdout`` when given."""
    with (open(stdout, "wb") if stdout else tempfile.TemporaryFile()) as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code not in ok:
            err.seek(0)
            sys.exit(f"benchmarks/history_scale.py: failed ({code}): {' '.join(argv)}\n{err.read().decode()[-2000:]}")
    return Timing(seconds, usage.ru_maxrss * 1024)  # Linux: KiB


def commands(store: str, extra: Path, config: Path, out: Path) -> dict[str, list[str]]:
    s = store
    return {
        "history add (1 file)": perfcheck("history", "add", "--history", s, str(extra)),
        "detect": perfcheck("history", "detect", "--history", s, "--json"),
        "detect --relative": perfcheck("history", "detect", "--history", s, "--json", "--relative"),
        "report --markdown": perfcheck("history", "report", "--history", s, "--markdown", str(out / "digest.md")),
        "report --html": perfcheck("history", "report", "--history", s, "--html", str(out / "site")),
        "export --openmetrics": perfcheck("history", "export", "--history", s, "--openmetrics", str(out / "om.txt")),
        "export --bencher": perfcheck("history", "export", "--history", s, "--bencher", str(out / "bencher")),
        "check (no history)": perfcheck("check", "--config", str(config), "--json", str(out / "c.json")),
        "check --history": perfcheck("check", "--config", str(config), "--json", str(out / "c.json"), "--history", s),
    }


BACKENDS = ("sqlite", "postgresql")


def start_server():  # noqa: ANN201 (tests.pgserver.Server)
    """A private PostgreSQL server for the timings (the tests' ``tests/pgserver.py``):
    fsync on, as a team's server runs, and a shared_buffers a server is given (the
    tests' 16 MB is for many small servers on a busy machine)."""
    from tests import pgserver

    reason = pgserver.why_not()
    if reason:
        sys.exit(f"benchmarks/history_scale.py: --backend postgresql: {reason}")
    return pgserver.start(durable=True, tuning={"shared_buffers": "256MB", "max_wal_size": "2GB"})


def store_bytes(store: Path) -> int:
    return sum(p.stat().st_size for p in store.parent.glob(store.name + "*"))


def html_bytes(site: Path) -> tuple[int, int, int]:
    """(the largest overview page: index.html or a suite's page, the largest page, all
    pages) of the dashboard."""
    files = [p for p in site.rglob("*") if p.is_file()] if site.exists() else []
    sizes = [p.stat().st_size for p in files] or [0]
    overview = [p.stat().st_size for p in files if p.name == "index.html" or p.name.startswith("suite-")] or [0]
    return max(overview), max(sizes), sum(sizes)


def profile_detect(store: Path, work: Path) -> None:
    stats = work / "detect.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "perfcheck", "history", "detect",
                    "--history", str(store), "--json"], stdout=subprocess.DEVNULL, check=False)
    import pstats

    print("\nhistory detect under cProfile (top 25 by cumulative time):")
    pstats.Stats(str(stats)).sort_stats("cumulative").print_stats(25)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, nargs="+", default=[30, 90])
    parser.add_argument("--kernels", type=int, default=2000)
    parser.add_argument("--workdir", type=Path, help="where the store and files go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--profile-detect", action="store_true")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME",
                        help="commands not to time, e.g. 'report --html' (its pages take minutes at scale)")
    parser.add_argument("--backend", nargs="+", choices=BACKENDS, default=["sqlite"],
                        help="the stores to time (postgresql: a private server started for the run)")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="perfcheck-history-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    server = start_server() if "postgresql" in args.backend else None
    try:
        make_profile(work / "profile.csv", args.kernels)
        config = make_config(work)
        seed = work / "seed.json"
        measure(perfcheck("check", "--config", str(config), "--json", str(seed)), work)
        seed_doc = json.loads(seed.read_text())
        values = sum(len(m) for e in seed_doc["suites"].values() for m in e["measurements"].values())
        print(f"one night: {args.kernels} kernels, {values} values; seed file {seed.stat().st_size / MB:.1f} MB")
        rows = []
        for nights in args.nights:
            store, out = work / f"h{nights}.sqlite", work / f"out{nights}"
            out.mkdir(exist_ok=True)
            built = work / f"h{nights}.k{args.kernels}.built.sqlite"
            start = time.perf_counter()
            if args.workdir and built.exists():
                extra = work / "extra-night.json"
                extra.write_text(json.dumps(night(seed_doc, nights, nights, np.random.default_rng(23))))
                print(f"{nights} nights: reusing {built}", flush=True)
            else:
                extra = build_store(built, seed_doc, nights, work)
                print(f"{nights} nights: store built in {time.perf_counter() - start:.0f} s (not timed), "
                      f"{store_bytes(built) / MB:.0f} MB", flush=True)
            for suffix in ("-wal", "-shm"):
                Path(str(store) + suffix).unlink(missing_ok=True)
            shutil.copyfile(built, store)
            if args.profile_detect and nights == args.nights[0]:
                profile_detect(store, work)
            locations = {"sqlite": str(store)} if "sqlite" in args.backend else {}
            timed: dict[str, dict[str, Timing]] = {backend: {} for backend in args.backend}
            database = f"h{nights}_{os.getpid()}"
            if server is not None:
                locations["postgresql"] = server.create_database(database)
                source = work / f"h{nights}.source.sqlite"  # history copy opens its source: never the built file
                shutil.copyfile(built, source)
                timed["postgresql"]["history copy"] = measure(
                    perfcheck("history", "copy", str(source), locations["postgresql"]), work)
                source.unlink()
                print(f"  {'history copy':24} {timed['postgresql']['history copy'].seconds:7.1f} s "
                      f"{timed['postgresql']['history copy'].peak_rss / MB:7.0f} MB   (SQLite -> PostgreSQL)", flush=True)
            for name in commands("", extra, config, out):
                if name in args.skip:
                    continue
                for backend, location in locations.items():  # one after the other: the same load on both
                    argv = commands(location, extra, config, out)[name]
                    # detect's JSON is kept beside the other outputs (--keep: to compare two versions)
                    timed[backend][name] = measure(argv, work, stdout=out / f"{name.replace(' ', '')}.{backend}.out")
                    print(f"  {name:24} {timed[backend][name].seconds:7.1f} s {timed[backend][name].peak_rss / MB:7.0f} MB"
                          f"   ({backend})", flush=True)
            overview, page, site = html_bytes(out / "site")
            sizes = {"sqlite": store_bytes(store)}
            if server is not None:
                sizes["postgresql"] = int(server.execute(f"SELECT pg_database_size('{database}')")[0][0])
            rows.append((nights, timed, sizes, overview, page, site))
            if not args.keep:
                store.unlink()
                shutil.rmtree(out)
                if not args.workdir:
                    built.unlink()
        names = list(dict.fromkeys(name for row in rows for backend in row[1].values() for name in backend))
        print("\n| nights | store | " + " | ".join(names) + " | size on disk | largest overview / page / site |")
        print("|---" * (len(names) + 4) + "|")
        for nights, timed, sizes, overview, page, site in rows:
            for backend, results in timed.items():
                cells = [f"{results[n].seconds:.1f} s, {results[n].peak_rss / MB:.0f} MB" if n in results else ""
                         for n in names]
                print(f"| {nights} | {backend} | " + " | ".join(cells) + f" | {sizes[backend] / MB:.0f} MB | "
                      f"{overview / MB:.2f} / {page / MB:.2f} / {site / MB:.1f} MB |")
            if len(timed) == 2:
                ratios = [f"{timed['postgresql'][n].seconds / timed['sqlite'][n].seconds:.2f}x"
                          if n in timed["sqlite"] and n in timed["postgresql"] else "" for n in names]
                print(f"| {nights} | PostgreSQL / SQLite | " + " | ".join(ratios) + " | | |")
        for nights, timed, *_ in rows:  # issue 22: --relative within 1.5x of detect, measured in the same run
            for backend, results in timed.items():
                if "detect" in results and "detect --relative" in results:
                    print(f"{nights} nights, {backend}: detect --relative / detect = "
                          f"{results['detect --relative'].seconds / results['detect'].seconds:.2f}x (goal <= 1.5x)")
    finally:
        if server is not None:
            server.stop()  # by its PID (SIGINT: a fast shutdown), and its folder removed
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
