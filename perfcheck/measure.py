"""Timing Python kernels: ``measure(fn, *args, ...) -> Profile``.

A NumPy, CuPy, PyTorch, Triton or Numba kernel called from Python has no profiler
output to read, so perfcheck times it itself and returns the same dispatch table
the readers produce: one kernel (named after ``fn`` or ``name``), one row per timed
call, canonical columns (``kernel``, ``dispatch_id``, ``start_ns``/``end_ns``,
``duration``). The same expectations and baselines then apply
(``"bw >= 80% of peak"``, ``"duration <= baseline + 5%"``).

Work. A timed function has no counters: the caller declares what one call moves
and computes (``bytes=``, ``flops=``). They are recorded per dispatch as raw
counters ``raw.perfcheck.<quantity>`` which ``metrics.counters`` maps one to one:
on ``device="cpu"`` the bytes are host main-memory bytes (``mem_bytes`` ->
``mem_bw``, ``ai_mem``, the ``mem_bw`` ceiling), on ``"cuda"`` device-memory bytes
(``hbm_bytes`` -> ``hbm_bw``). FLOPs are ``flops_fp64``/``_fp32``/``_fp16`` (the
roof of that precision) when the precision is given or can be read off the
arguments (all floating-point array arguments share one dtype), else plain ``flops``.

Clocks and synchronisation.

* CPU: ``time.perf_counter_ns`` (monotonic, the highest resolution Python has)
  right before and after each call. NumPy calls return when their work is done.
  ``clock="thread"`` times the calling thread's CPU time instead
  (``time.thread_time_ns``, CLOCK_THREAD_CPUTIME_ID): time the OS gave to other
  processes is not counted, so on a shared machine (a CI runner, two busy
  neighbours on two cores) a kernel's median moves with its own work, not with
  the load; wall-clock medians of one NumPy copy moved 2x between seconds on a
  loaded 2-core runner where thread time moved 20% (2026-11-26). Only for kernels
  that run on the calling thread (NumPy ufuncs; not BLAS or other thread pools,
  whose work would be missing). The clock is part of the fingerprint
  (``Source.tool``): a baseline timed one way is never compared with the other.
  The garbage collector is paused during the timed calls (as ``timeit`` does) so a
  collection triggered by the test's own allocations does not land in a sample.
* CUDA: device events through PyTorch (``torch.cuda.Event``) or CuPy
  (``cupy.cuda.Event``), whichever is installed (neither is a dependency; imported
  only here, only for ``device="cuda"``). Per call: synchronise the device (no
  earlier work still queued), record the start event, call, record the end event,
  wait for it, read the elapsed time. The events are on the current stream: the
  function's kernels must run there (PyTorch's and CuPy's default). Host-side
  launch overhead between the events is part of the time, as it is for the user.
  ``start_ns`` is the host clock when the call was launched; there is no
  ``end_ns``: the device interval is not on the host clock.

Warm-up calls (JIT compilation, first-touch page faults, cuBLAS handles) run
first and are not recorded. ``flush_cache=True`` evicts caches before every timed
call: on CPU by updating a buffer larger than the last-level cache (its size read
from /sys/devices/system/cpu/cpu0/cache, else sysconf, else 256 MiB), on CUDA by
writing a device buffer larger than the L2. The flush is outside the timed interval.
"""

from __future__ import annotations

import functools
import gc
import math
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from perfcheck.errors import UsageError
from perfcheck.model import Oddity, Profile, Source

FORMAT = "perf-measure"  # Source.format of a measured profile
TOOL = "perfcheck.measure"  # Source.tool: the timer, part of a baseline's fingerprint
CLOCKS = ("wall", "thread")  # wall: perf_counter_ns; thread: the calling thread's CPU time
DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp64", "fp32", "fp16")
DEFAULT_REPEAT = 20
DEFAULT_WARMUP = 2
# When the cache size cannot be read: larger than any CPU's last-level cache of
# today but one (AMD 3D V-cache parts reach 1152 MiB per socket: /sys tells).
DEFAULT_FLUSH_BYTES = 256 * 2**20

_DTYPE_PRECISION = {"float64": "fp64", "double": "fp64", "float32": "fp32", "float": "fp32",
                    "float16": "fp16", "half": "fp16"}


class DeviceUnavailable(UsageError):
    """``device="cuda"`` without PyTorch or CuPy, or without a GPU they can use.
    The pytest fixture skips the test with this message; the CLI exits 2."""


# --- the host ---------------------------------------------------------------------------


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (Linux), else ``platform.processor()``."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        # x86 writes "model name"; some arm64 kernels "Model" or "Hardware".
        if sep and key.strip() in ("model name", "Model", "Hardware") and value.strip():
            return " ".join(value.split())
    return platform.processor() or None


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask, which containers and
    taskset narrow), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _size_text(text: str) -> int | None:
    """"32768K" -> 33554432 (the kernel's cache size format)."""
    text = text.strip().upper()
    factor = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * factor if digits.isdigit() else None


def last_level_cache_bytes() -> int | None:
    """Size of the largest (last-level) cache of CPU 0, or None when unknown.

    /sys first: it is what the kernel reports for this CPU. glibc's sysconf may
    report something else: on the 2-vCPU KVM guest this was written on, /sys says
    32 MiB for L3 and ``getconf LEVEL3_CACHE_SIZE`` 320 MiB (the host's).
    """
    best: int | None = None
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        entries = sorted(root.glob("index*"))
    except OSError:
        entries = []
    for entry in entries:
        try:
            if (entry / "type").read_text().strip() == "Instruction":
                continue
            size = _size_text((entry / "size").read_text())
        except OSError:
            continue
        if size and (best is None or size > best):
            best = size
    if best is not None:
        return best
    for name in ("SC_LEVEL4_CACHE_SIZE", "SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            value = os.sysconf(name)
        except (AttributeError, ValueError, OSError):
            continue
        if value and value > 0:
            return int(value)
    return None


# --- CUDA through PyTorch or CuPy ------------------------------------------------------------


class CudaBackend:
    """The few CUDA operations perfcheck needs, through PyTorch or CuPy."""

    name: str
    version: str

    def synchronize(self) -> None:
        raise NotImplementedError

    def events(self) -> tuple[Any, Any]:
        """A (start, end) pair of timing events; ``record()`` puts one on the current stream."""
        raise NotImplementedError

    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds between two recorded events, once ``end`` has completed."""
        raise NotImplementedError

    def device_name(self) -> str:
        raise NotImplementedError

    def arch(self) -> str:
        raise NotImplementedError

    def device_index(self) -> int:
        raise NotImplementedError

    def l2_bytes(self) -> int | None:
        raise NotImplementedError

    def buffer(self, nbytes: int) -> Any:
        """A device buffer of ``nbytes`` bytes (uint8)."""
        raise NotImplementedError

    def touch(self, buffer: Any) -> None:
        """Read and write every byte of ``buffer`` (evicts the L2)."""
        raise NotImplementedError


class _Torch(CudaBackend):
    def __init__(self, torch: Any) -> None:
        self.torch, self.name, self.version = torch, "torch", str(torch.__version__)

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def events(self) -> tuple[Any, Any]:
        event = self.torch.cuda.Event
        return event(enable_timing=True), event(enable_timing=True)

    def elapsed(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.elapsed_time(end)) * 1e-3  # milliseconds

    def device_name(self) -> str:
        return str(self.torch.cuda.get_device_name())

    def arch(self) -> str:
        major, minor = self.torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"

    def device_index(self) -> int:
        return int(self.torch.cuda.current_device())

    def l2_bytes(self) -> int | None:
        props = self.torch.cuda.get_device_properties(self.device_index())
        size = getattr(props, "L2_cache_size", None)  # PyTorch >= 2.1
        return int(size) if size else None

    def buffer(self, nbytes: int) -> Any:
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device="cuda")

    def touch(self, buffer: Any) -> None:
        buffer.add_(1)


class _Cupy(CudaBackend):
    def __init__(self, cupy: Any) -> None:
        self.cp, self.name, self.version = cupy, "cupy", str(cupy.__version__)

    def synchronize(self) -> None:
        self.cp.cuda.runtime.deviceSynchronize()

    def events(self) -> tuple[Any, Any]:
        return self.cp.cuda.Event(), self.cp.cuda.Event()  # timing is on by default

    def elapsed(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(self.cp.cuda.get_elapsed_time(start, end)) * 1e-3  # milliseconds

    def _props(self) -> Mapping[str, Any]:
        runtime = self.cp.cuda.runtime
        return runtime.getDeviceProperties(runtime.getDevice())

    def device_name(self) -> str:
        name = self._props()["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def arch(self) -> str:
        props = self._props()
        return f"sm_{props['major']}{props['minor']}"

    def device_index(self) -> int:
        return int(self.cp.cuda.runtime.getDevice())

    def l2_bytes(self) -> int | None:
        size = self._props().get("l2CacheSize")
        return int(size) if size else None

    def buffer(self, nbytes: int) -> Any:
        return self.cp.empty(nbytes, dtype=self.cp.uint8)

    def touch(self, buffer: Any) -> None:
        buffer += 1


def cuda_backend() -> CudaBackend:
    """PyTorch if it sees a GPU, else CuPy if it does; DeviceUnavailable saying why not."""
    problems: list[str] = []
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        if torch.cuda.is_available():
            return _Torch(torch)
        problems.append(f"PyTorch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False)")
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        try:
            count = int(cupy.cuda.runtime.getDeviceCount())
            why = "no device"
        except Exception as exc:  # CUDARuntimeError: no driver, no device
            count, why = 0, f"{type(exc).__name__}: {exc}"
        if count > 0:
            return _Cupy(cupy)
        problems.append(f"CuPy {cupy.__version__} sees no CUDA GPU ({why})")
    if not problems:
        raise DeviceUnavailable(
            "device='cuda' times with CUDA events through PyTorch or CuPy, and neither is installed "
            "(pip install torch, or cupy-cuda12x)"
        )
    raise DeviceUnavailable(f"device='cuda': {'; '.join(problems)}")


# --- cache flushing ---------------------------------------------------------------------------


def _cpu_flusher() -> Callable[[], None]:
    import numpy as np

    llc = last_level_cache_bytes()
    size = 2 * llc if llc else DEFAULT_FLUSH_BYTES
    buffer = np.zeros(size, dtype=np.uint8)

    def flush() -> None:
        # A read-modify-write of every line: whatever the kernel left in any cache
        # level is replaced by this buffer (twice the LLC, so even a non-LRU
        # replacement policy keeps none of it).
        np.add(buffer, 1, out=buffer)

    return flush


def _cuda_flusher(backend: CudaBackend) -> Callable[[], None]:
    l2 = backend.l2_bytes()
    buffer = backend.buffer(max(4 * l2, DEFAULT_FLUSH_BYTES) if l2 else DEFAULT_FLUSH_BYTES)
    return lambda: backend.touch(buffer)


# --- measure ----------------------------------------------------------------------------------


def _kernel_name(fn: Callable[..., Any]) -> str:
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = str(getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__)
    # "Stencil.apply" stays; "test_copy.<locals>.copy" (a function defined in a test) is "copy"
    return name.rsplit("<locals>.", 1)[-1]


def _amount(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"measure: {what} must be a number (per call), not {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise UsageError(f"measure: {what} is {value!r}; it must be a finite, non-negative number per call")
    return number


def _count(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"measure: {what} must be an integer >= {minimum}, not {value!r}")
    return value


def _precision_of(args: Sequence[object], kwargs: Mapping[str, object]) -> str | None:
    """The floating-point precision all array arguments share (NumPy, CuPy, PyTorch
    dtypes), None when they have none or several."""
    found = set()
    for value in (*args, *kwargs.values()):
        dtype = getattr(value, "dtype", None)
        if dtype is None:
            continue
        name = getattr(dtype, "name", None) or str(dtype).rsplit(".", 1)[-1]
        if str(name) in _DTYPE_PRECISION:
            found.add(_DTYPE_PRECISION[str(name)])
    return found.pop() if len(found) == 1 else None


def measure(
    fn: Callable[..., Any],
    *args: Any,
    bytes: float | None = None,  # noqa: A002 - the name users write: bytes moved per call
    flops: float | None = None,
    precision: str | None = None,
    repeat: int = DEFAULT_REPEAT,
    warmup: int = DEFAULT_WARMUP,
    device: str = "cpu",
    name: str | None = None,
    flush_cache: bool = False,
    clock: str = "wall",
    **kwargs: Any,
) -> Profile:
    """Call ``fn(*args, **kwargs)`` ``warmup`` times, then time ``repeat`` calls.

    ``bytes``/``flops``: what one call moves (main memory on CPU, device memory on
    CUDA) and computes, as the caller counts it (the algorithmic minimum, e.g. 16 B
    per element for a float64 copy); percentages of peak are only as right as these.
    ``precision`` ("fp64", "fp32", "fp16") picks the FLOP roof; default: the dtype
    the floating-point array arguments share. Keyword arguments other than these
    go to ``fn`` (use functools.partial for one that clashes). ``clock`` ("wall" or
    "thread", CPU only): what a call's duration is (see the module docstring).
    """
    if not callable(fn):
        raise UsageError(f"measure: the first argument must be the function to time, not {fn!r}")
    if device not in DEVICES:
        raise UsageError(f"measure: device must be 'cpu' or 'cuda', not {device!r}")
    if clock not in CLOCKS:
        raise UsageError(f"measure: clock must be 'wall' or 'thread', not {clock!r}")
    if clock != "wall" and device != "cpu":
        raise UsageError(f"measure: clock={clock!r} is for device='cpu'; a GPU kernel is timed by device events")
    repeat = _count(repeat, "repeat", 1)
    warmup = _count(warmup, "warmup", 0)
    moved = _amount(bytes, "bytes")
    computed = _amount(flops, "flops")
    if precision is not None and precision not in PRECISIONS:
        raise UsageError(f"measure: precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    kernel = name if name else _kernel_name(fn)
    if not isinstance(kernel, str) or not kernel.strip():
        raise UsageError(f"measure: name must be a non-empty string, not {name!r}")

    backend = cuda_backend() if device == "cuda" else None  # fails before any call
    call = functools.partial(fn, *args, **kwargs)
    if device == "cpu":
        flush = _cpu_flusher() if flush_cache else None
        columns = _time_cpu(call, repeat, warmup, flush, thread=clock == "thread")
        tool = TOOL if clock == "wall" else f"{TOOL}[{clock}]"
        source = Source(path=f"perf.measure({kernel})", format=FORMAT, tool=tool,
                        device=cpu_model(), arch=platform.machine() or None)
    else:
        assert backend is not None
        flush = _cuda_flusher(backend) if flush_cache else None
        columns = _time_cuda(backend, call, repeat, warmup, flush)
        columns["device_id"] = [backend.device_index()] * repeat
        source = Source(path=f"perf.measure({kernel})", format=FORMAT, tool=TOOL,
                        device=backend.device_name(), arch=backend.arch())
    return _profile(kernel, columns, source, device=device, moved=moved, computed=computed,
                    precision=precision or (_precision_of(args, kwargs) if computed is not None else None))


def _time_cpu(call: Callable[[], Any], repeat: int, warmup: int, flush: Callable[[], None] | None,
              *, thread: bool = False) -> dict[str, list]:
    for _ in range(warmup):
        call()
    starts, ends = [0] * repeat, [0] * repeat
    used = [0] * repeat  # thread CPU time per call (thread=True)
    clock = time.perf_counter_ns
    cpu = time.thread_time_ns
    enabled = gc.isenabled()
    gc.disable()
    try:
        for i in range(repeat):
            if flush is not None:
                flush()
            starts[i] = clock()
            before = cpu() if thread else 0
            call()
            if thread:
                used[i] = cpu() - before
            ends[i] = clock()
    finally:
        if enabled:
            gc.enable()
    if thread:  # the timeline keeps the wall-clock start; the duration is CPU time
        return {"start_ns": starts, "duration": [ns * 1e-9 for ns in used]}
    return {"start_ns": starts, "end_ns": ends}


def _time_cuda(
    backend: CudaBackend, call: Callable[[], Any], repeat: int, warmup: int, flush: Callable[[], None] | None
) -> dict[str, list]:
    for _ in range(warmup):
        call()
    backend.synchronize()
    starts: list[int] = [0] * repeat
    durations: list[float] = [0.0] * repeat
    start, end = backend.events()
    for i in range(repeat):
        if flush is not None:
            flush()
        backend.synchronize()  # nothing queued before the start event but this call
        starts[i] = time.perf_counter_ns()
        start.record()
        call()
        end.record()
        durations[i] = backend.elapsed(start, end)  # waits for the end event
    return {"start_ns": starts, "duration": durations}


def _profile(
    kernel: str,
    columns: dict[str, list],
    source: Source,
    *,
    device: str,
    moved: float | None,
    computed: float | None,
    precision: str | None,
) -> Profile:
    import pandas as pd

    from perfcheck.ingest.dispatch import TimingTally, finish
    from perfcheck.metrics.counters import DECLARED_PREFIX
    from perfcheck.schema import raw

    rows = len(next(iter(columns.values())))
    frame = pd.DataFrame({"kernel": [kernel] * rows, "dispatch_id": range(rows), **columns})
    if moved is not None:
        frame[raw(f"{DECLARED_PREFIX}{'mem_bytes' if device == 'cpu' else 'hbm_bytes'}")] = moved
    if computed is not None:
        frame[raw(f"{DECLARED_PREFIX}{'flops_' + precision if precision else 'flops'}")] = computed
    tally = TimingTally()
    # The readers' finishing step: durations from the timestamps, a zero or negative
    # one (a clock too coarse for the call) left empty and counted, canonical dtypes.
    dispatches = finish(frame, tally)
    oddities: tuple[Oddity, ...] = tuple(tally.oddities(source.path))
    return Profile(dispatches=dispatches, sources=(source,), oddities=oddities)


# --- plain data ---------------------------------------------------------------------------------


def profile_document(profile: Profile) -> dict[str, Any]:
    """A measured Profile as plain data (lists, str, int, float, None): pytest-xdist
    workers send it to the controller, which writes the baselines. Small: one row per
    timed call."""
    import pandas as pd

    columns = {
        str(name): [None if value is pd.NA else value for value in series.astype(object).tolist()]
        for name, series in profile.dispatches.items()
    }
    return {
        "columns": columns,
        "sources": [source.as_dict() for source in profile.sources],
        "oddities": [{"path": o.path, "what": o.what, "count": o.count} for o in profile.oddities],
    }


def profile_from_document(doc: Mapping[str, Any]) -> Profile:
    """The Profile ``profile_document`` described."""
    import pandas as pd

    from perfcheck.schema import conform

    frame = conform(pd.DataFrame(dict(doc["columns"])))
    sources = tuple(Source(**source) for source in doc["sources"])
    oddities = tuple(Oddity(o["path"], o["what"], int(o["count"])) for o in doc["oddities"])
    return Profile(dispatches=frame, sources=sources, oddities=oddities)
