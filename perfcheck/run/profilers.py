"""The profilers perfcheck can run: their command lines, where they write, and
how they say that something went wrong.

Each pass writes into a directory of its own (``pass_N``, under ``rank_R`` with a
launcher); the command lines name it explicitly, so the outputs are found there:

=========  ===============================================================  =============================
profiler   command line (one pass)                                          output read
=========  ===============================================================  =============================
rocprofv3  ``rocprofv3 --kernel-trace | --pmc C ... --output-format csv``   ``*kernel_trace.csv`` (trace),
           ``-d DIR -o run -- APP``                                         ``*counter_collection.csv``
rocprof    ``rocprof [-i input.txt] --timestamp on -d DIR/data``            ``DIR/results.csv``
           ``-o DIR/results.csv APP`` (``input.txt``: one ``pmc:`` line)
ncu        ``ncu --csv --page raw --target-processes all --metrics M,...``  ``DIR/ncu.csv`` (the raw page
           ``--log-file DIR/ncu.csv APP``                                   read by perfcheck's ncu reader)
=========  ===============================================================  =============================

rocprof v1 reruns the application once per ``pmc:`` line of its input file; perfcheck
writes one line per pass and runs the passes itself, so progress and failures are
per pass for every profiler.

Error texts recognised (the tools' own wording):

* ncu: ``==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access
  NVIDIA GPU Performance Counters on the target device`` (NVIDIA's page
  https://developer.nvidia.com/ERR_NVGPUCTRPERM gives the fixes quoted in the
  message), and ``==ERROR== Failed to find metric regex:^NAME...`` for an unknown
  metric;
* rocprofv3: ``Unable to find all counters for agent N (gpu-I, gfxNNN) in [...].
  Found: [...]. Missing: [...]`` (rocprofiler-sdk tool.cpp, a warning: the run goes
  on without them, so the counters are also checked in the outputs);
* rocprof v1: ``input metric 'NAME' is not supported on this hardware: gfxNNN`` and
  ``Metrics list exceeds HW limits`` (ROCm/rocprofiler src/core/context.h).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcheck.errors import CountersNotPermitted, ProfilerError, ProfilerNotFound, UnknownCounterError, UsageError
from perfcheck.run.plan import COUNTERS, TRACE, Pass

NCU_PERMISSION_PAGE = "https://developer.nvidia.com/ERR_NVGPUCTRPERM"
# ncu --clock-control values perfcheck offers: the base-clock lock (ncu's own default)
# or none (the GPU boosts as it would without a profiler).
CLOCK_BASE, CLOCK_NONE = "base", "none"
CLOCK_CONTROLS = (CLOCK_BASE, CLOCK_NONE)


@dataclass(frozen=True)
class Invocation:
    """One pass's command line and the small input files it reads."""

    argv: list[str]
    files: dict[Path, str]  # path -> text, written before the pass runs
    directories: list[str]  # directories the pass writes into (may hold the rank token)


class Profiler:
    name: str = ""
    vendor: str = ""
    family: str = ""  # metrics.counters naming of the counters: "rocprof" | "ncu"
    install_hint: str = ""

    @property
    def executable(self) -> str:
        return self.name

    def which(self) -> str | None:
        return shutil.which(self.executable)

    def invocation(self, exe: str, step: Pass, out: str, inputs: Path, app: Sequence[str]) -> Invocation:
        """The command line of ``step`` writing into ``out`` (a directory path that may
        hold the rank token); ``inputs`` is a rank-independent directory for input files."""
        raise NotImplementedError

    def outputs(self, directory: Path, step: Pass) -> list[Path]:
        """The files ``step`` wrote into ``directory`` that perfcheck reads (the run
        directory's reader in ingest owns the table, so that reading needs no runner)."""
        from perfcheck.ingest.runs import pass_outputs

        return pass_outputs(self.name, directory, step.kind)

    def output_kind(self, step: Pass) -> str:
        from perfcheck.ingest.runs import output_kind

        return output_kind(self.name, step.kind)

    def diagnose(self, text: str, step: Pass) -> ProfilerError | None:
        """A known failure in the profiler's output ``text``, as an error (run_dir unset)."""
        return None


class Rocprofv3(Profiler):
    name, vendor, family = "rocprofv3", "amd", "rocprof"
    install_hint = "install ROCm's rocprofiler-sdk (rocprofv3 comes with ROCm 6.2+) or choose --profiler rocprof"

    def invocation(self, exe: str, step: Pass, out: str, inputs: Path, app: Sequence[str]) -> Invocation:
        what = ["--kernel-trace"] if step.kind == TRACE else ["--pmc", *step.counters]
        argv = [exe, *what, "--output-format", "csv", "-d", out, "-o", "run", "--", *app]
        return Invocation(argv, {}, [out])


    _MISSING = re.compile(
        r"Unable to find all counters for agent[^(]*\((?:gpu-\d+,\s*)?(?P<gpu>[^)]*)\)\s*in \[(?P<asked>[^\]]*)\]"
        r"\.\s*Found: \[(?P<found>[^\]]*)\](?:\.\s*Missing: \[(?P<missing>[^\]]*)\])?")

    def diagnose(self, text: str, step: Pass) -> ProfilerError | None:
        match = self._MISSING.search(text)
        if match:
            missing = _names(match.group("missing")) if match.group("missing") is not None else [
                c for c in _names(match.group("asked")) if c not in _names(match.group("found"))]
            return unknown_counters(missing, self.name, match.group("gpu").strip() or None)
        if "EXCEEDS_HW_LIMIT" in text or "exceeds the capabilities of the hardware" in text.lower():
            return _hw_limit(self.name, step)
        return None


class RocprofV1(Profiler):
    name, vendor, family = "rocprof", "amd", "rocprof"
    install_hint = "install ROCm's rocprofiler (rocprof v1) or choose --profiler rocprofv3"

    def invocation(self, exe: str, step: Pass, out: str, inputs: Path, app: Sequence[str]) -> Invocation:
        files: dict[Path, str] = {}
        argv = [exe]
        if step.kind == COUNTERS:
            # One pmc line: rocprof would rerun the application per line itself.
            input_file = inputs / f"pass_{step.index}.txt"
            files[input_file] = f"# perfcheck pass {step.index}: {step.reason}\npmc: {' '.join(step.counters)}\n"
            argv += ["-i", str(input_file)]
        # -d inside the run directory: rocprof deletes its data directory only when it
        # is the default temporary one.
        argv += ["--timestamp", "on", "-d", f"{out}/data", "-o", f"{out}/results.csv", *app]
        return Invocation(argv, files, [out])


    _UNSUPPORTED = re.compile(r"input metric '(?P<name>[^']+)' is not supported on this hardware(?::\s*(?P<gpu>\S+))?")

    def diagnose(self, text: str, step: Pass) -> ProfilerError | None:
        found = list(self._UNSUPPORTED.finditer(text))
        if found:
            return unknown_counters([m.group("name") for m in found], self.name, found[0].group("gpu"))
        if "Metrics list exceeds HW limits" in text or "Input metrics out of HW limit" in text:
            return _hw_limit(self.name, step)
        return None


class Ncu(Profiler):
    name, vendor, family = "ncu", "nvidia", "ncu"
    install_hint = "install NVIDIA Nsight Compute (ncu comes with the CUDA toolkit) and put it on PATH"

    def __init__(self, clock_control: str = CLOCK_BASE) -> None:
        self.clock_control = clock_control

    def invocation(self, exe: str, step: Pass, out: str, inputs: Path, app: Sequence[str]) -> Invocation:
        # --page raw: one wide row per kernel launch, what perfcheck's ncu reader reads;
        # --log-file keeps the table apart from the application's own stdout.
        # --clock-control stated, not left to ncu's default: "base" locks the GPU to its
        # base clock (stable numbers; ncu's default), "none" lets it boost (Nsight
        # Compute CLI guide, "Clock Control"). The run manifest and the baselines'
        # fingerprint record it.
        argv = [exe, "--csv", "--page", "raw", "--target-processes", "all", "--clock-control", self.clock_control,
                "--metrics", ",".join(step.counters), "--log-file", f"{out}/ncu.csv", *app]
        return Invocation(argv, {}, [out])


    _UNKNOWN = re.compile(r"==ERROR== Failed to find metric (?:regex:)?\^?(?P<name>[A-Za-z0-9_]+(?:\\?\.[A-Za-z0-9_]+)*)")

    def diagnose(self, text: str, step: Pass) -> ProfilerError | None:
        if "ERR_NVGPUCTRPERM" in text:
            return CountersNotPermitted(
                "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM)",
                hint="run as root or with CAP_SYS_ADMIN (CAP_PERFMON from driver R565), or let every user profile: "
                "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d, then reload the driver "
                f"(see {NCU_PERMISSION_PAGE})")
        found = [m.group("name").replace("\\.", ".") for m in self._UNKNOWN.finditer(text)]
        if found:
            return unknown_counters(found, self.name, None)
        return None


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def unknown_counters(names: Sequence[str], profiler: str, gpu: str | None) -> UnknownCounterError:
    names = list(dict.fromkeys(names)) or ["(unnamed)"]
    which = f"counter {names[0]} is" if len(names) == 1 else f"counters {', '.join(names)} are"
    on = f"this GPU ({gpu})" if gpu else "this GPU"
    lister = {"rocprofv3": "rocprofv3 -L", "rocprof": "rocprof --list-basic / --list-derived",
              "ncu": "ncu --query-metrics"}.get(profiler, profiler)
    return UnknownCounterError(f"{which} unknown to {on} under {profiler}",
                               hint=f"see `{lister}` for the names it knows; name the GPU with --arch so that perfcheck "
                               "asks only for counters its architecture has")


def _hw_limit(profiler: str, step: Pass) -> ProfilerError:
    return ProfilerError(f"{profiler} refused pass {step.index}: its counters ({', '.join(step.counters)}) exceed the "
                         "GPU's counter registers per pass", hint="please report this to perfcheck with the GPU's name")


PROFILERS: dict[str, Profiler] = {p.name: p for p in (Rocprofv3(), RocprofV1(), Ncu())}
# Tried in this order when no profiler is named: the vendor's current tool first.
_PREFERENCE = {"amd": ("rocprofv3", "rocprof"), "nvidia": ("ncu",), None: ("rocprofv3", "rocprof", "ncu")}


def get(name: str) -> Profiler:
    try:
        return PROFILERS[name]
    except KeyError:
        raise UsageError(f"unknown profiler {name!r}; choose one of: {', '.join(PROFILERS)}") from None


def candidates(vendor: str | None = None) -> tuple[str, ...]:
    """The profilers looked for, in order, when none is named."""
    return _PREFERENCE.get(vendor, _PREFERENCE[None])


def with_clock_control(profiler: Profiler, clock_control: str | None) -> tuple[Profiler, str | None]:
    """The profiler set to ``clock_control`` and the value the run manifest records:
    ncu defaults to "base"; the AMD profilers control no clock (None), and asking
    them to is a usage error rather than a setting silently ignored."""
    if clock_control is not None and clock_control not in CLOCK_CONTROLS:
        raise UsageError(f"clock_control must be one of {', '.join(CLOCK_CONTROLS)}, not {clock_control!r}")
    if isinstance(profiler, Ncu):
        value = clock_control or CLOCK_BASE
        return Ncu(value), value
    if clock_control is not None:
        raise UsageError(f"clock_control is an ncu setting; {profiler.name} does not lock clocks "
                         "(leave it out, or profile with ncu)")
    return profiler, None


def choose(name: str | None, vendor: str | None = None) -> Profiler:
    """The named profiler, else the first installed one for ``vendor``. Raises
    ProfilerNotFound when the named one, or every candidate, is not on PATH (before
    anything is created: a run that cannot start leaves nothing behind)."""
    if name:
        profiler = get(name)
        if vendor and profiler.vendor != vendor:
            raise UsageError(f"{name} profiles {profiler.vendor.upper()} GPUs, but the GPU named is {vendor.upper()}")
        if profiler.which() is None:
            raise ProfilerNotFound(f"{profiler.name} is not installed (not found on PATH)", hint=profiler.install_hint)
        return profiler
    looked_for = candidates(vendor)
    for candidate in looked_for:
        if PROFILERS[candidate].which():
            return PROFILERS[candidate]
    hints = {"rocprofv3": "rocprofv3 comes with ROCm 6.2+", "rocprof": "rocprof with older ROCm",
             "ncu": "ncu with the CUDA toolkit (Nsight Compute)"}
    raise ProfilerNotFound(f"no profiler found on PATH: looked for {', '.join(looked_for)}",
                           hint="install one (" + "; ".join(hints[c] for c in looked_for) + ") or name it with --profiler")
