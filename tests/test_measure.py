"""perfcheck.measure: timing Python kernels into a Profile, its metrics (mem_bw on CPU,
hbm_bw on CUDA, the ``bw`` alias), CUDA event timing order (with a stand-in PyTorch
module: this machine has no GPU), cache flushing, and ``perf.measure`` in pytest."""

from __future__ import annotations

import functools
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from perfcheck import measure as measuring
from perfcheck.analysis import analyse_profile
from perfcheck.errors import UsageError
from perfcheck.expect import evaluate
from perfcheck.measure import DeviceUnavailable, measure, profile_document, profile_from_document
from perfcheck.model import ERROR, FAILED, PASSED, Peaks

pytest_plugins = ["pytester"]


def _peaks(**values: float) -> Peaks:
    return Peaks(values=dict(values), details=(), sources=())


# --- CPU ------------------------------------------------------------------------------------


def test_one_row_per_timed_call_and_warmups_not_recorded() -> None:
    calls: list[int] = []

    def kernel(x: int) -> None:
        calls.append(x)

    profile = measure(kernel, 7, repeat=5, warmup=3)
    frame = profile.dispatches
    assert calls == [7] * 8  # 3 warm-up + 5 timed calls
    assert len(frame) == 5
    assert list(frame["kernel"]) == ["kernel"] * 5
    assert list(frame["dispatch_id"]) == [0, 1, 2, 3, 4]
    # durations are exactly the timestamps' difference, in seconds
    expected = (frame["end_ns"] - frame["start_ns"]).to_numpy(dtype="float64") * 1e-9
    assert np.array_equal(frame["duration"].to_numpy(), expected)
    assert (frame["start_ns"].diff().dropna() > 0).all()  # monotonic clock, calls in order
    assert not [c for c in frame.columns if c.startswith("raw.")]  # no work declared: no counters
    source = profile.source
    assert (source.format, source.tool, source.path) == ("perf-measure", "perfcheck.measure", "perf.measure(kernel)")
    assert source.device == measuring.cpu_model()


def test_durations_measure_the_call() -> None:
    profile = measure(time.sleep, 0.002, repeat=3, warmup=0)
    durations = profile.dispatches["duration"].to_numpy()
    assert (durations >= 0.002).all() and (durations < 0.2).all()


def test_thread_clock_counts_only_this_threads_work() -> None:
    # Sleeping is time the OS gives to others: the wall clock counts it, the thread's
    # CPU clock does not (what keeps a busy neighbour out of a kernel's duration).
    wall = measure(time.sleep, 0.02, repeat=3, warmup=0)
    thread = measure(time.sleep, 0.02, repeat=3, warmup=0, clock="thread")
    assert (wall.dispatches["duration"] >= 0.02).all()
    assert (thread.dispatches["duration"] < 0.01).all()
    busy = measure(lambda: sum(range(200_000)), repeat=3, warmup=0, clock="thread")
    assert (busy.dispatches["duration"] > 0).all()
    assert busy.dispatches["start_ns"].is_monotonic_increasing  # the timeline stays wall-clock
    # a baseline timed by one clock is never compared with the other: the tool differs
    assert (wall.source.tool, thread.source.tool) == ("perfcheck.measure", "perfcheck.measure[thread]")


def test_kernel_names_and_declared_work() -> None:
    def scale(x: np.ndarray, factor: float = 2.0) -> np.ndarray:
        return x * factor

    x32 = np.ones(16, dtype=np.float32)
    named = measure(functools.partial(scale, factor=3.0), x32, repeat=2, flops=16)
    assert named.dispatches["kernel"].iloc[0] == "scale"  # partial unwrapped, "<locals>." dropped
    # the float32 array argument gives the precision of the declared FLOPs
    assert list(named.dispatches["raw.perfcheck.flops_fp32"]) == [16.0, 16.0]
    renamed = measure(scale, x32, name="my_scale", bytes=128, flops=16, precision="fp64", repeat=2)
    assert renamed.dispatches["kernel"].iloc[0] == "my_scale"
    assert list(renamed.dispatches["raw.perfcheck.mem_bytes"]) == [128.0, 128.0]
    assert "raw.perfcheck.flops_fp64" in renamed.dispatches.columns
    # mixed precisions (or none): plain flops, no precision invented
    mixed = measure(lambda a, b: None, x32, np.ones(4), flops=8, repeat=1)
    assert "raw.perfcheck.flops" in mixed.dispatches.columns
    # fn keyword arguments pass through
    seen = {}
    measure(lambda **kw: seen.update(kw), repeat=1, warmup=0, factor=5)
    assert seen == {"factor": 5}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"repeat": 0}, "repeat must be an integer >= 1"),
        ({"warmup": -1}, "warmup must be an integer >= 0"),
        ({"bytes": -1}, "bytes is -1"),
        ({"bytes": "1 GB"}, "bytes must be a number"),
        ({"flops": float("nan")}, "flops is nan"),
        ({"device": "tpu"}, "device must be 'cpu' or 'cuda'"),
        ({"precision": "fp8"}, "precision must be one of fp64, fp32, fp16"),
        ({"clock": "cpu"}, "clock must be 'wall' or 'thread'"),
        ({"clock": "thread", "device": "cuda"}, "clock='thread' is for device='cpu'"),
    ],
)
def test_bad_arguments_are_usage_errors(kwargs: dict, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(")):
        measure(lambda: None, **kwargs)
    with pytest.raises(UsageError, match="the first argument must be the function"):
        measure(42)  # type: ignore[arg-type]


def test_metrics_of_a_measured_cpu_kernel() -> None:
    n = 1 << 16
    a, b = np.ones(n), np.empty(n)
    profile = measure(np.copyto, b, a, bytes=16 * n, flops=2 * n, repeat=7)
    durations = profile.dispatches["duration"].to_numpy()
    analysis = analyse_profile(profile, peaks=_peaks(mem_bw=1e12, flop_rate_fp64=1e12))
    row = analysis.kernels.iloc[0]
    assert row["kernel"] == "copyto" and row["calls"] == 7
    assert row["mem_bytes"] == 16 * n
    # bandwidth is duration-weighted: all bytes over all time
    assert row["mem_bw"] == pytest.approx(7 * 16 * n / durations.sum(), rel=1e-12)
    assert row["mem_bw_pct"] == pytest.approx(row["mem_bw"] / 1e12 * 100, rel=1e-12)
    assert row["ai_mem"] == pytest.approx(2 * n / (16 * n))
    # the roofline uses the CPU's memory roof: min(1e12, 0.125 x 1e12)
    assert row["attainable"] == pytest.approx(0.125e12)
    assert row["bound"] == "memory" and row["roofline_ceiling"] == "mem_bw"
    assert "hbm_bw" not in analysis.kernels.columns
    assert analysis.ceilings["mem_bw"].kind == "empirical"
    assert np.array_equal(analysis.duration_samples["copyto"], durations)


def test_bw_means_mem_bw_on_cpu() -> None:
    profile = measure(lambda: None, name="k", bytes=1e6, repeat=5)
    analysis = analyse_profile(profile, peaks=_peaks(mem_bw=1e3))  # 1 kB/s: any kernel beats it
    (check,) = evaluate("s", {"k": ["bw >= 50% of peak"]}, analysis)
    assert check.outcome == PASSED and check.metric == "mem_bw"
    assert check.reference == 500.0 and check.expression == "bw >= 50% of peak"
    assert "empirical mem_bw" in check.message
    (check,) = evaluate("s", {"k": ["bw <= 1 kB/s"]}, analysis)  # units of bw are B/s
    assert check.outcome == FAILED and check.reference == 1e3


def test_undeclared_bytes_say_what_to_pass() -> None:
    analysis = analyse_profile(measure(lambda: None, name="k", repeat=2), peaks=_peaks(mem_bw=1e9))
    (check,) = evaluate("s", {"k": ["bw >= 50% of peak"]}, analysis)
    assert check.outcome == ERROR
    assert "declare the work of one call with perf.measure(..., bytes=...)" in check.message


def test_flush_runs_before_every_timed_call(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(measuring, "_cpu_flusher", lambda: lambda: events.append("flush"))
    measure(lambda: events.append("call"), repeat=3, warmup=1, flush_cache=True)
    assert events == ["call", "flush", "call", "flush", "call", "flush", "call"]


def test_cpu_flusher_sizes_its_buffer_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measuring, "last_level_cache_bytes", lambda: 1 << 20)
    flush = measuring._cpu_flusher()
    buffer = flush.__closure__[0].cell_contents  # type: ignore[union-attr, index]
    assert buffer.nbytes == 2 << 20
    flush()
    flush()
    assert int(buffer[0]) == 2 and int(buffer[-1]) == 2  # every byte read and written
    monkeypatch.setattr(measuring, "last_level_cache_bytes", lambda: None)
    assert measuring.DEFAULT_FLUSH_BYTES == 256 * 2**20


def test_cache_size_text_and_this_machine() -> None:
    assert measuring._size_text("32768K\n") == 32 * 2**20
    assert measuring._size_text("1M") == 2**20
    assert measuring._size_text("512") == 512
    assert measuring._size_text("big") is None
    size = measuring.last_level_cache_bytes()
    assert size is None or size >= 2**16


def test_profile_document_round_trip() -> None:
    profile = measure(lambda: None, name="k", bytes=64, repeat=3)
    doc = profile_document(profile)
    assert {type(v) for column in doc["columns"].values() for v in column} <= {int, float, str}
    again = profile_from_document(doc)
    assert again.dispatches.equals(profile.dispatches)
    assert again.sources == profile.sources and again.oddities == profile.oddities


# --- CUDA, with a stand-in PyTorch ---------------------------------------------------------------


class _FakeTorch(types.ModuleType):
    """Records the order of CUDA calls; each call of the timed kernel takes 1.5 ms of
    fake device time. Stands in for PyTorch only to check perfcheck's sequencing."""

    uint8 = "uint8"

    def __init__(self) -> None:
        super().__init__("torch")
        self.__version__ = "0.0-stand-in"
        self.log: list[str] = []
        self.gpu_ms = 0.0
        torch = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.at: float | None = None

            def record(self) -> None:
                self.at = torch.gpu_ms
                torch.log.append("record")

            def synchronize(self) -> None:
                torch.log.append("event-sync")

            def elapsed_time(self, end: "Event") -> float:
                torch.log.append("elapsed")
                return end.at - self.at  # type: ignore[operator]

        class Buffer:
            def add_(self, value: int) -> None:
                torch.log.append("touch")

        self.Buffer = Buffer
        self.cuda = types.SimpleNamespace(
            is_available=lambda: True,
            Event=Event,
            synchronize=lambda: self.log.append("sync"),
            get_device_name=lambda: "NVIDIA A100-SXM4-80GB",
            get_device_capability=lambda: (8, 0),
            current_device=lambda: 0,
            get_device_properties=lambda index: types.SimpleNamespace(L2_cache_size=40 * 2**20),
        )

    def empty(self, nbytes: int, dtype: str, device: str) -> object:
        self.log.append(f"buffer {nbytes}")
        return self.Buffer()

    def kernel(self) -> None:
        self.log.append("call")
        self.gpu_ms += 1.5


def test_cuda_timing_order_with_events(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    profile = measure(torch.kernel, name="k", bytes=3e9, repeat=2, warmup=1, device="cuda", flush_cache=True)
    per_call = ["touch", "sync", "record", "call", "record", "event-sync", "elapsed"]
    assert torch.log == [f"buffer {256 * 2**20}", "call", "sync", *per_call, *per_call]
    frame = profile.dispatches
    assert list(frame["duration"]) == [1.5e-3, 1.5e-3]
    assert "end_ns" not in frame.columns and frame["start_ns"].notna().all()  # device time is not host time
    assert list(frame["device_id"]) == [0, 0]
    assert list(frame["raw.perfcheck.hbm_bytes"]) == [3e9, 3e9]
    source = profile.source
    assert (source.device, source.arch) == ("NVIDIA A100-SXM4-80GB", "sm_80")
    # device memory: bw is hbm_bw, against the A100 80GB's datasheet figure
    analysis = analyse_profile(profile)
    assert analysis.target is not None and analysis.target.device.name == "a100-80gb"
    (check,) = evaluate("s", {"k": ["bw >= 80% of peak"]}, analysis)
    assert check.metric == "hbm_bw" and check.observed == pytest.approx(3e9 / 1.5e-3)
    assert check.reference == pytest.approx(0.8 * analysis.target.device.mem_bw)
    assert check.outcome == PASSED and "theoretical hbm_bw" in check.message


def test_cuda_without_pytorch_or_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(DeviceUnavailable, match="neither is installed"):
        measure(lambda: None, device="cuda")
    torch = _FakeTorch()
    torch.cuda.is_available = lambda: False
    monkeypatch.setitem(sys.modules, "torch", torch)
    with pytest.raises(DeviceUnavailable, match=r"PyTorch 0.0-stand-in sees no CUDA GPU"):
        measure(lambda: None, device="cuda")
    assert torch.log == []  # nothing ran


# --- perf.measure in pytest ----------------------------------------------------------------------


@pytest.fixture
def _modules_loaded() -> None:
    """pytester's in-process runs drop the modules a run imported; numpy cannot be
    imported twice in one process, so the outer process loads them."""
    import perfcheck.analysis  # noqa: F401
    import perfcheck.baseline  # noqa: F401
    import perfcheck.checking  # noqa: F401
    import perfcheck.ingest  # noqa: F401
    import perfcheck.measure  # noqa: F401
    import perfcheck.metrics.counters  # noqa: F401
    import perfcheck.report.markdown  # noqa: F401


def _machine_file(path: Path, mem_bw: float) -> Path:
    from perfcheck.machine import machine_from_peaks, write_machine

    write_machine(path, machine_from_peaks("box", _peaks(mem_bw=mem_bw)))
    return path


@pytest.mark.usefixtures("local_run")  # the first run records the baseline
def test_perf_measure_fixture(pytester: pytest.Pytester, _modules_loaded: None) -> None:
    fast = _machine_file(pytester.path / "slow-machine.toml", 1e3)  # any kernel beats 1 kB/s
    pytester.makepyfile(
        f"""
        import numpy as np

        def copy(src, dst):
            np.copyto(dst, src)

        def test_copy(perf):
            a, b = np.ones(1024), np.empty(1024)
            perf.measure(copy, a, b, bytes=16 * 1024, repeat=5, peaks=r"{fast}")
            assert perf.analysis.kernels["kernel"].tolist() == ["copy"]
            checks = perf.expect("copy", "bw >= 50% of peak", "duration <= baseline + 50%")
            assert [c.metric for c in checks] == ["mem_bw", "duration"]

        def test_bad_peaks(perf):
            perf.measure(copy, np.ones(4), np.empty(4), peaks="missing.toml")

        def test_gpu(perf):
            perf.measure(copy, np.ones(4), np.empty(4), device="cuda")
        """
    )
    result = pytester.runpytest("--perf", "--perf-baseline-dir", str(pytester.path / "baselines"), "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*perfcheck: error: perf.measure(peaks=...): no such file 'missing.toml'*",
        "*baseline recorded: test_perf_measure_fixture.test_copy*",
        "*SKIPPED*device='cuda'*neither is installed*",
    ])
    baselines = list((pytester.path / "baselines").rglob("*.json"))
    assert len(baselines) == 1 and '"copy"' in baselines[0].read_text()
