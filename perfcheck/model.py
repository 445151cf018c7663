"""Records that flow through perfcheck: where a profile came from, what was odd
about it, the profile itself (a dispatch table) and measured peaks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported only where a frame is built
    import pandas as pd


@dataclass(frozen=True)
class Source:
    """Provenance of one profile file (or workload directory)."""

    path: str
    format: str  # reader name, e.g. "rocprofv3-kernel-trace"
    tool: str  # profiler family, e.g. "rocprofv3", "ncu"
    tool_version: str | None = None
    device: str | None = None  # marketing name when the file says it, e.g. "AMD Instinct MI300X"
    arch: str | None = None  # gfx942, sm_80, ... when the file says it
    rank: int | None = None
    # A perfcheck run under ncu: its --clock-control ("base" | "none"). Times at the
    # base and at boost clocks must never be compared, so baselines fingerprint it.
    clock_control: str | None = None

    def as_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "path": self.path,
            "format": self.format,
            "tool": self.tool,
            "tool_version": self.tool_version,
            "device": self.device,
            "arch": self.arch,
            "rank": self.rank,
        }
        if self.clock_control is not None:
            doc["clock_control"] = self.clock_control
        return doc


@dataclass(frozen=True)
class Oddity:
    """Something valid but suspicious in an input, reported as a warning with a count."""

    path: str
    what: str
    count: int = 1

    def __str__(self) -> str:
        return f"{self.path}: {self.what}" + (f" ({self.count} rows)" if self.count != 1 else "")


@dataclass(frozen=True)
class Profile:
    """One dispatch table (canonical columns, see ``perfcheck.schema``) and its sources.

    A profile read from several files (ranks, passes) lists every source; the
    ``rank`` column tells rows apart when ranks are known.
    """

    dispatches: "pd.DataFrame"
    sources: tuple[Source, ...]
    oddities: tuple[Oddity, ...] = ()
    # "kernel" when the inputs held only per-kernel statistics (rocprof --stats):
    # then ``dispatches`` has one row per kernel with calls/duration_* columns.
    level: str = "dispatch"

    @property
    def source(self) -> Source:
        return self.sources[0]


@dataclass(frozen=True)
class PeakDetail:
    """One figure a peaks file reports: which run/kernel/row it came from, in base units."""

    source: str
    name: str  # e.g. "Copy", "mixbench single-precision max", "DRAM"
    value: float
    unit: str  # base unit: "B/s", "FLOP/s"
    # A figure perfcheck measured itself (peaks measure): the spread of its repeats,
    # rates in the same unit: ``value`` is the best of ``repeats`` timed calls.
    median: float | None = None
    minimum: float | None = None
    maximum: float | None = None
    repeats: int | None = None


@dataclass(frozen=True)
class Peaks:
    """Empirical peaks measured on a machine.

    ``values`` maps peak names (see ``perfcheck.schema.PEAK_UNITS``) to base units;
    ``details`` keeps every figure the file reported so the choice can be checked.
    """

    values: dict[str, float]
    details: tuple[PeakDetail, ...]
    sources: tuple[Source, ...]
    oddities: tuple[Oddity, ...] = field(default=())
    # The clocks the peaks were measured at, when the file records them (Hz):
    # "sm_clock" and/or "mem_clock" (a machine file's [clocks] table).
    clocks: dict[str, float] = field(default_factory=dict)


# Outcomes of a check. "recorded": no baseline existed, the current value was
# recorded as the new baseline (passes, with a notice). "error": the check could
# not be evaluated (a metric whose counters were not collected, a pattern that
# matched no kernel); it fails like "failed", and its message says what to do.
PASSED, FAILED, RECORDED, ERROR = "passed", "failed", "recorded", "error"
# pytest's expected failures (``@pytest.mark.xfail``): a failed check of an xfail
# test that pytest counts as xfailed, a passed one of a (non-strict) xpassed test.
# Neither fails the run, as in pytest; a strict xpass is FAILED.
XFAILED, XPASSED = "xfailed", "xpassed"


@dataclass(frozen=True)
class Check:
    """The single outcome record every report renders (terminal, JUnit, Markdown,
    JSON, OpenMetrics, the CLI's exit status, a pytest failure)."""

    suite: str  # suite name ("" when checks come from a test function)
    kernel: str  # the kernel checked; the pattern itself when it matched none
    pattern: str  # the kernel pattern the expectation was declared for
    expression: str  # the expectation as the user wrote it
    metric: str  # canonical metric name, e.g. "hbm_bw", "occupancy_pct"
    relation: str  # ">=", "<=", ">", "<", "==", "!="
    observed: float | None  # base units (see ``unit``)
    reference: float | None  # the threshold actually compared against, base units
    unit: str  # unit of observed and reference ("s", "B/s", "%", ...)
    outcome: str  # PASSED | FAILED | RECORDED | ERROR
    origin: str  # "expectation" (absolute or % of peak) | "baseline" (relative to a stored baseline)
    message: str  # one line, values formatted with units
    baseline: float | None = None  # the stored baseline value, when origin == "baseline"
    detail: str = ""  # optional: the statistics behind a baseline decision, the ceiling used, ...
    # Where the expectation was written (a config file and its line, or a test file and
    # the line of its perf.expect call): JUnit locations, CI annotations. None: unknown.
    source_file: str | None = None
    source_line: int | None = None
    # Why the kernel changed (``perfcheck.diagnosis``), on a failed baseline-relative
    # check: what else moved against the baseline or the history. "" when not known.
    diagnosis: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome in (PASSED, RECORDED, XFAILED, XPASSED)
