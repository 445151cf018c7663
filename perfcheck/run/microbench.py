"""Built-in micro-benchmarks: ``perfcheck peaks measure``.

Small, honest measurements of what this machine reaches through the same libraries
the kernels under test use, recorded as a ``Peaks`` record (``mem_bw`` or
``hbm_bw``, ``flop_rate_fp64``, ``flop_rate_fp32``) with every figure in its details
and the machine's fingerprint. For GPUs, BabelStream, mixbench or ERT remain the
recommended source (``--merge`` puts their figures in the same machine file).

Bandwidth: streaming kernels over float64 arrays each larger than the last-level
cache (STREAM's rule: at least 4x; default ``clamp(4 x LLC, 32 MiB, 512 MiB)`` on
CPU, ``max(4 x L2, 256 MiB)`` on CUDA). Bytes are counted the STREAM way
(McCalpin, "Sustainable Memory Bandwidth in Current High Performance Computers",
1995, section "The STREAM Benchmark": COPY 16 bytes and TRIAD 24 bytes per
iteration): copy ``c = a`` counts 2 words per element, triad ``a = b + s*c`` 3
words, each array read or written once. **Write-allocate traffic is not counted**
(G. Hager, "The McCalpin STREAM benchmark: How to do it right and interpret the
results", 2019): on a cache that reads a line before writing it, copy really moves
3 words and triad 4, so the figures understate the bytes the memory system carried
by up to 1/3 (copy) and 1/4 (triad), exactly as STREAM's do (stores that bypass the
cache, as a large memcpy may use, avoid that traffic). The peak is
the better of the two, each the fastest of ``repeat`` calls, as STREAM reports its
"best rate"; the spread of the calls (median, slowest, number) is kept with each
figure, and a benchmark whose median call ran more than 10% below its best is
flagged (a busy machine). A read-only reduction, ``sum`` (1 word per element), is reported as a
detail only: like BabelStream's Dot, which perfcheck's BabelStream reader also
leaves out of the peak, it has no write stream and runs faster than either.

* CPU, NumPy: the streaming kernels are NumPy ufuncs, which run on **one thread**:
  the figure is one core's bandwidth, which is what single-threaded NumPy kernels
  can reach, not the socket's (a multi-threaded STREAM or likwid-bench gets more).
  Triad runs in blocks of 2**17 elements so that ``s*c`` stays in cache and memory
  sees 3 streams, not the 5 of two whole-array passes.
* CUDA: PyTorch (``copy_``, ``torch.add(b, c, alpha=s, out=a)``: one kernel each)
  or CuPy (``copyto``, an elementwise triad kernel), timed with CUDA events.

FLOP/s:

* CPU: ``numpy.matmul`` of n x n float64 and float32 matrices (2 n**3 FLOPs; n
  doubled from 512 until one call takes 20 ms, at most 4096). This is BLAS, whose
  threads are reported: from threadpoolctl when it is installed, else the BLAS's
  environment variable, else assumed to be the usable CPUs (OpenBLAS's and MKL's
  default). A GEMM is FMA-bound at these sizes, the best vector FLOP rate NumPy
  reaches; a hand-written FMA loop cannot be expressed in NumPy without memory
  traffic.
* CUDA with CuPy: an FMA-bound elementwise kernel (8 independent FMA chains per
  thread, 2 FLOPs each): the vector (CUDA-core) rate. With PyTorch only, a GEMM,
  which cuBLAS may run on tensor cores (FP64 DMMA on A100/H100) above the vector
  rate: the detail says so, and mixbench's figure should be merged over it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from perfcheck.errors import UsageError
from perfcheck.model import Oddity, PeakDetail, Peaks, Source

FORMAT = "perfcheck-microbench"
SOURCE = "perfcheck peaks measure"
MIN_ARRAY_BYTES = 32 * 2**20
MAX_ARRAY_BYTES = 512 * 2**20
CUDA_ARRAY_BYTES = 256 * 2**20
TRIAD_BLOCK = 2**17  # elements: 1 MiB of float64, in L2/L3 between the two ufuncs
SCALAR = 3.0
MATMUL_TARGET_S = 0.02
# A benchmark whose median call is further than this below its best call ran on a
# busy machine (issue 17: three runs on a shared 2-core box gave 201, 19.8 and 221
# GFLOP/s): its figure comes with a warning.
SPREAD_WARNING = 0.10
# The words STREAM counts per element (McCalpin 1995, above), and the read-only sum.
WORDS = {"copy": 2, "triad": 3, "sum": 1}


@dataclass(frozen=True)
class Result:
    """One micro-benchmark: its best rate and how its work was counted."""

    benchmark: str  # "copy", "triad", "sum", "matmul-fp64", "fma-fp32", ...
    peak: str | None  # the peak it measures: "mem_bw", "hbm_bw", "flop_rate_fp64"; None: detail only
    value: float  # best (fastest call) rate, base units
    unit: str  # "B/s" | "FLOP/s"
    work: float  # bytes or FLOPs counted per call
    best: float  # s, the fastest call
    median: float  # s
    calls: int
    how: str  # what ran, on how many threads, how the work is counted
    worst: float | None = None  # s, the slowest call

    @property
    def spread(self) -> float:
        """How far the median call's rate falls below the best, as a fraction of the
        best (0.35: the typical call ran at 65% of the figure reported). The median,
        not the slowest call: one late call is noise, a slow median is a busy machine."""
        return 1.0 - self.best / self.median if self.median > 0 else 0.0

    def detail(self) -> PeakDetail:
        slowest = self.worst if self.worst is not None else self.median
        return PeakDetail(source=SOURCE, name=f"{self.benchmark}: {self.how}", value=self.value, unit=self.unit,
                          median=self.work / self.median, minimum=self.work / slowest, maximum=self.value,
                          repeats=self.calls)

    def as_dict(self) -> dict[str, object]:
        return {"benchmark": self.benchmark, "peak": self.peak, "value": self.value, "unit": self.unit,
                "work": self.work, "best_s": self.best, "median_s": self.median, "worst_s": self.worst,
                "calls": self.calls, "spread": self.spread, "how": self.how}


@dataclass(frozen=True)
class Measured:
    """Everything ``perfcheck peaks measure`` found."""

    device: str  # "cpu" | "cuda"
    results: tuple[Result, ...]
    fingerprint: Mapping[str, str]
    array_bytes: int  # per array of the streaming kernels
    source: Source  # what the Peaks record names as its source

    def peaks(self) -> Peaks:
        """Best figure per peak name; every benchmark in the details with the spread
        of its repeats, and a warning for each peak's benchmark whose median call ran
        more than ``SPREAD_WARNING`` below its best (a busy machine: the figure may
        not be what the machine reaches when idle)."""
        values: dict[str, float] = {}
        for r in self.results:
            if r.peak is not None and r.value > values.get(r.peak, 0.0):
                values[r.peak] = r.value
        details = tuple(r.detail() for r in self.results)
        oddities = tuple(
            Oddity(SOURCE, f"{r.benchmark} ({r.peak}): the median of {r.calls} calls ran {100 * r.spread:.0f}% below "
                   f"the best; a busy machine? measure again when it is idle, or with more --repeat")
            for r in self.results if r.peak is not None and r.spread > SPREAD_WARNING)
        return Peaks(values=values, details=details, sources=(self.source,), oddities=oddities)


# --- the machine ---------------------------------------------------------------------------


def blas_info() -> str:
    """The BLAS NumPy was built with, as numpy.show_config reports it."""
    import numpy as np

    try:
        config = np.show_config(mode="dicts")  # NumPy >= 1.26
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older NumPy prints instead, or the layout differs
        return "unknown"


_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS", "OMP_NUM_THREADS")


def blas_threads() -> tuple[int, str]:
    """Threads NumPy's BLAS uses, and how that is known."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        threadpool_info = None
    if threadpool_info is not None:
        pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        if pools:
            return int(max(p.get("num_threads", 1) for p in pools)), "threadpoolctl"
    for name in _THREAD_VARIABLES:
        value = os.environ.get(name, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value), f"${name}"
    from perfcheck.measure import usable_cpus

    return usable_cpus(), "assumed: one per usable CPU, the BLAS default; threadpoolctl would check"


def fingerprint(device: str = "cpu", backend: Any = None) -> dict[str, str]:
    """What identifies the machine the peaks belong to. No host name: two CI runners
    of one kind share a machine file, and a renamed host is the same machine."""
    import numpy as np

    from perfcheck.measure import cpu_model, usable_cpus

    threads, how = blas_threads()
    doc = {
        "cpu": cpu_model() or "unknown",
        "cpus": str(usable_cpus()),
        "machine": platform.machine() or "unknown",
        "system": platform.system() or "unknown",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": blas_info(),
        "blas_threads": str(threads),
        "blas_threads_from": how,
    }
    if backend is not None:
        doc.update({"gpu": backend.device_name(), "gpu_arch": backend.arch(),
                    "cuda_backend": f"{backend.name} {backend.version}"})
    return doc


def default_array_bytes(device: str = "cpu", backend: Any = None) -> int:
    """Bytes per array: four times the last-level cache (STREAM's rule), bounded."""
    if device == "cuda":
        l2 = backend.l2_bytes() if backend is not None else None
        return max(4 * l2, CUDA_ARRAY_BYTES) if l2 else CUDA_ARRAY_BYTES
    from perfcheck.measure import last_level_cache_bytes

    llc = last_level_cache_bytes()
    return min(max(4 * llc, MIN_ARRAY_BYTES), MAX_ARRAY_BYTES) if llc else 256 * 2**20


# --- timing -----------------------------------------------------------------------------------


def _time(fn: Callable[[], Any], repeat: int, device: str, name: str) -> tuple[float, float, float]:
    """(fastest, median, slowest) seconds of ``repeat`` calls after one warm-up, with
    perfcheck.measure's clocks and synchronisation."""
    import numpy as np

    from perfcheck.measure import measure

    profile = measure(fn, repeat=repeat, warmup=1, device=device, name=name)
    durations = profile.dispatches["duration"].to_numpy(dtype="float64", na_value=np.nan)
    durations = durations[np.isfinite(durations)]
    if not len(durations):
        raise UsageError(f"peaks measure: {name}: every call was too short for the clock; use a larger --size")
    return float(durations.min()), float(np.median(durations)), float(durations.max())


def _bandwidth(name: str, fn: Callable[[], Any], elements: int, peak: str, repeat: int, device: str,
               how: str) -> Result:
    work = WORDS[name] * 8.0 * elements
    best, median, worst = _time(fn, repeat, device, name)
    if name == "sum":
        counted = "1 word (8 B) per element; a reduction, not part of the peak"
    else:
        counted = f"{WORDS[name]} words ({WORDS[name] * 8} B) per element, STREAM count, write-allocate not counted"
    return Result(name, None if name == "sum" else peak, work / best, "B/s", work, best, median, repeat,
                  f"{how}; {counted}", worst)


# --- CPU ------------------------------------------------------------------------------------


def _cpu(array_bytes: int, repeat: int) -> list[Result]:
    import numpy as np

    n = max(array_bytes // 8, TRIAD_BLOCK)
    # np.full writes every page: no first-touch page faults inside the timed calls.
    a, b, c = np.full(n, 1.0), np.full(n, 2.0), np.full(n, 0.5)
    tmp = np.empty(TRIAD_BLOCK)
    starts = range(0, n, TRIAD_BLOCK)

    def copy() -> None:
        np.copyto(c, a)

    def triad() -> None:
        for i in starts:
            block = slice(i, i + TRIAD_BLOCK)
            scaled = tmp[: min(TRIAD_BLOCK, n - i)]
            np.multiply(c[block], SCALAR, out=scaled)
            np.add(scaled, b[block], out=a[block])

    def total() -> None:
        a.sum()

    one = "NumPy ufuncs, 1 thread"
    results = [
        _bandwidth("copy", copy, n, "mem_bw", repeat, "cpu", f"numpy.copyto, {one}"),
        _bandwidth("triad", triad, n, "mem_bw", repeat, "cpu", f"numpy multiply+add in blocks of {TRIAD_BLOCK}, {one}"),
        _bandwidth("sum", total, n, "mem_bw", repeat, "cpu", f"numpy.sum, {one}, read only"),
    ]
    threads, how = blas_threads()
    for dtype, precision in ((np.float64, "fp64"), (np.float32, "fp32")):
        results.append(_cpu_matmul(dtype, precision, repeat, f"{threads} BLAS thread(s) ({how}), {blas_info()}"))
    return results


def _cpu_matmul(dtype: Any, precision: str, repeat: int, threads: str) -> Result:
    import time

    import numpy as np

    size = 512
    while True:
        x, y = np.full((size, size), 1.0, dtype=dtype), np.full((size, size), 0.5, dtype=dtype)
        out = np.empty((size, size), dtype=dtype)
        np.matmul(x, y, out=out)  # the first call starts BLAS's threads and faults pages in
        start = time.perf_counter()
        np.matmul(x, y, out=out)
        if time.perf_counter() - start >= MATMUL_TARGET_S or size >= 4096:
            break
        size *= 2
    work = 2.0 * size**3
    calls = max(5, repeat // 2)
    best, median, worst = _time(lambda: np.matmul(x, y, out=out), calls, "cpu", f"matmul-{precision}")
    how = f"numpy.matmul n={size} {np.dtype(dtype).name}, {threads}; 2n^3 FLOPs"
    return Result(f"matmul-{precision}", f"flop_rate_{precision}", work / best, "FLOP/s", work, best, median,
                  calls, how, worst)


# --- CUDA -----------------------------------------------------------------------------------

_FMA_CHAINS, _FMA_STEPS = 8, 256


def _cuda(backend: Any, array_bytes: int, repeat: int) -> list[Result]:
    n = max(array_bytes // 8, 1)
    if backend.name == "torch":
        import torch

        make = lambda value: torch.full((n,), value, dtype=torch.float64, device="cuda")  # noqa: E731
        a, b, c = make(1.0), make(2.0), make(0.5)
        kernels = {
            "copy": (lambda: c.copy_(a), "torch copy_"),
            "triad": (lambda: torch.add(b, c, alpha=SCALAR, out=a), "torch.add(b, c, alpha=s, out=a)"),
            "sum": (lambda: a.sum(), "torch sum, read only"),
        }
    else:
        import cupy

        a, b, c = (cupy.full(n, v, dtype=cupy.float64) for v in (1.0, 2.0, 0.5))
        triad_kernel = cupy.ElementwiseKernel("T b, T c, T s", "T a", "a = b + s * c", "perfcheck_triad")
        kernels = {
            "copy": (lambda: cupy.copyto(c, a), "cupy.copyto"),
            "triad": (lambda: triad_kernel(b, c, SCALAR, a), "CuPy elementwise triad"),
            "sum": (lambda: a.sum(), "cupy sum, read only"),
        }
    results = [
        _bandwidth(name, fn, n, "hbm_bw", repeat, "cuda", f"{how}, {backend.name} {backend.version}, CUDA events")
        for name, (fn, how) in kernels.items()
    ]
    del a, b, c
    for precision in ("fp64", "fp32"):
        results.append(_cuda_flops(backend, precision, repeat))
    return results


def _cuda_flops(backend: Any, precision: str, repeat: int) -> Result:
    if backend.name == "cupy":
        import cupy

        dtype = cupy.float64 if precision == "fp64" else cupy.float32
        n = 2**22
        chains = "".join(f"T x{k} = x + {k}; " for k in range(_FMA_CHAINS))
        steps = "".join(f"x{k} = x{k} * y + z; " for k in range(_FMA_CHAINS))
        body = f"{chains} for (int i = 0; i < {_FMA_STEPS}; ++i) {{ {steps} }} out = " + " + ".join(
            f"x{k}" for k in range(_FMA_CHAINS))
        kernel = cupy.ElementwiseKernel("T x, T y, T z", "T out", body, f"perfcheck_fma_{precision}")
        x = cupy.full(n, 1.0, dtype=dtype)
        y, z = dtype(0.999), dtype(0.001)
        out = cupy.empty(n, dtype=dtype)
        work = 2.0 * _FMA_CHAINS * _FMA_STEPS * n
        best, median, worst = _time(lambda: kernel(x, y, z, out), repeat, "cuda", f"fma-{precision}")
        how = (f"CuPy elementwise kernel, {_FMA_CHAINS} independent FMA chains x {_FMA_STEPS} steps per thread, "
               f"{n} threads; 2 FLOPs per FMA (vector/CUDA-core rate)")
        return Result(f"fma-{precision}", f"flop_rate_{precision}", work / best, "FLOP/s", work, best, median,
                      repeat, how, worst)
    import torch

    dtype = torch.float64 if precision == "fp64" else torch.float32
    size = 8192 if precision == "fp32" else 4096
    x = torch.full((size, size), 1.0, dtype=dtype, device="cuda")
    y = torch.full((size, size), 0.5, dtype=dtype, device="cuda")
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32, not TF32 tensor cores
    try:
        work = 2.0 * size**3
        best, median, worst = _time(lambda: torch.matmul(x, y), max(3, repeat // 2), "cuda", f"gemm-{precision}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    how = (f"torch.matmul n={size} (cuBLAS GEMM; may run on tensor cores, e.g. FP64 DMMA on A100/H100, above the "
           "vector rate: merge mixbench's figure for the vector roof); 2n^3 FLOPs")
    return Result(f"gemm-{precision}", f"flop_rate_{precision}", work / best, "FLOP/s", work, best, median,
                  max(3, repeat // 2), how, worst)


# --- entry point ------------------------------------------------------------------------------


def measure_peaks(device: str = "cpu", *, size: int | None = None, repeat: int = 10) -> Measured:
    """Run the micro-benchmarks on ``device`` ("cpu" or "cuda"). ``size``: bytes per
    array of the streaming kernels (default: see ``default_array_bytes``)."""
    if device not in ("cpu", "cuda"):
        raise UsageError(f"peaks measure: --device must be cpu or cuda, not {device!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UsageError(f"peaks measure: --repeat must be a positive integer, not {repeat!r}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 8 * 1024):
        raise UsageError(f"peaks measure: --size must be at least 8192 bytes per array, not {size!r}")
    backend = None
    if device == "cuda":
        from perfcheck.measure import cuda_backend

        backend = cuda_backend()
    array_bytes = size if size is not None else default_array_bytes(device, backend)
    results = _cuda(backend, array_bytes, repeat) if backend is not None else _cpu(array_bytes, repeat)
    return Measured(device=device, results=tuple(results), fingerprint=fingerprint(device, backend),
                    array_bytes=array_bytes, source=_source(backend))


def _source(backend: Any) -> Source:
    """The Source the peaks carry. Only a GPU the arch database knows is named in
    it (a machine file's device must be one ``--arch`` accepts); everything else
    about the machine is in the fingerprint."""
    import perfcheck
    from perfcheck import arch as archdb

    device = arch = None
    if backend is not None:
        probe = Source(SOURCE, FORMAT, "perfcheck", device=backend.device_name(), arch=backend.arch())
        target = archdb.detect([probe])
        if target is not None:
            arch = target.arch.name
            device = probe.device if target.device is not None else None
    return Source(path=SOURCE, format=FORMAT, tool="perfcheck", tool_version=perfcheck.__version__,
                  device=device, arch=arch)


def merge(measured: Peaks, ingested: Peaks) -> Peaks:
    """perfcheck's own figures with benchmark outputs (BabelStream, mixbench, ERT, a
    machine file) merged in: for a peak both give, the ingested figure wins (they
    are the recommended source, and a GEMM is no vector FLOP roof); every figure
    of both stays in the details."""
    values = {**measured.values, **ingested.values}
    return Peaks(values=values, details=measured.details + ingested.details,
                 sources=measured.sources + ingested.sources, oddities=measured.oddities + ingested.oddities,
                 clocks={**measured.clocks, **ingested.clocks})


def summary_lines(measured: Measured) -> list[str]:
    """What was measured, and on how many threads, for the CLI's text output."""
    fp = measured.fingerprint
    lines = [f"perfcheck peaks measure: {measured.device}: {fp.get('gpu') or fp['cpu']} "
             f"({fp['cpus']} usable CPUs, {fp['machine']}), numpy {fp['numpy']}, BLAS {fp['blas']}"]
    if measured.device == "cpu":
        lines.append(f"  bandwidth: NumPy ufuncs on 1 thread (one core's bandwidth, not the socket's), "
                     f"{_mib(measured.array_bytes)} per array")
        lines.append(f"  FLOP/s: numpy.matmul through BLAS on {fp['blas_threads']} thread(s) ({fp['blas_threads_from']})")
    else:
        lines.append(f"  {fp.get('cuda_backend')}, CUDA events; {_mib(measured.array_bytes)} per array")
    return lines


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:g} MiB"
