"""The one exception tree of perfcheck.

::

    PerfcheckError                 anything perfcheck reports to a user
     +-- InputError                a file cannot be read as what it claims to be
     |    +-- UnknownFormatError   no reader recognises the file
     +-- UsageError                the command line or API was called wrongly
     +-- OutOfMemory               a profile or store too large for this machine's memory
     +-- ProfilerError             profiling a command failed (perfcheck run)
          +-- ProfilerNotFound     the profiler or launcher is not installed
          |                        (a pytest item is skipped, the CLI exits 2)
          +-- CountersNotPermitted the driver refuses access to the counters
          +-- UnknownCounterError  a counter this GPU does not have
          +-- ApplicationFailed    the command exited non-zero (its stderr tail)
          +-- RunTimeout           the run outlasted its timeout (group killed)

The CLI and the pytest plugin catch ``PerfcheckError`` and print ``str(error)``:
a single line naming the file, the line or column, what is wrong and what to do.
A ``ProfilerError`` names the run directory, which is kept whatever happened.
Anything else that escapes is a bug in perfcheck.
"""

from __future__ import annotations

from pathlib import Path


class PerfcheckError(Exception):
    """Root of every error perfcheck raises on purpose."""


class UsageError(PerfcheckError):
    """Wrong arguments: an unknown option value, a missing path, ..."""


class InputError(PerfcheckError):
    """A file that cannot be read. Carries where and what to do about it.

    ``line`` is 1-based, as editors show it; ``column`` is a column name or a
    1-based field number.
    """

    def __init__(
        self,
        path: str | Path | None,
        what: str,
        *,
        line: int | None = None,
        column: str | int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.what = what
        self.line = line
        self.column = column
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: "
        if self.column is not None:
            text += f"column {self.column!r}: " if isinstance(self.column, str) else f"column {self.column}: "
        text += self.what.rstrip(".")
        if self.hint:
            text += f"; {self.hint.rstrip('.')}"
        return " ".join(text.split())


class UnknownFormatError(InputError):
    """No reader recognised the file; the message lists the formats tried."""

    def __init__(self, path: str | Path, tried: list[str], *, kind: str = "profile") -> None:
        super().__init__(
            path,
            f"not a {kind} format perfcheck recognises (tried: {', '.join(tried)})",
            hint="name the format with --format NAME (see `perfcheck formats`)",
        )
        self.tried = tried


class ProfilerError(PerfcheckError):
    """Profiling a command failed. ``str()`` is one line: what happened, what to do,
    and the run directory holding the profiler's raw outputs and logs (never deleted)."""

    def __init__(self, what: str, *, run_dir: str | Path | None = None, hint: str | None = None) -> None:
        self.what = what
        self.hint = hint
        self.run_dir = str(run_dir) if run_dir is not None else None
        text = what.rstrip(".")
        if hint:
            text += f"; {hint.rstrip('.')}"
        if self.run_dir:
            text += f"; raw outputs kept in {self.run_dir}"
        super().__init__(" ".join(text.split()))


class ProfilerNotFound(ProfilerError):
    """The profiler (or the launcher) is not on PATH: a pytest item is skipped."""


class CountersNotPermitted(ProfilerError):
    """The driver refuses access to the performance counters (NVIDIA ERR_NVGPUCTRPERM)."""


class UnknownCounterError(ProfilerError):
    """The profiler does not know a counter on this GPU."""


class ApplicationFailed(ProfilerError):
    """The profiled command exited with a non-zero status or was killed by a signal."""


class RunTimeout(ProfilerError):
    """The run outlasted its timeout; its whole process group was killed."""


class OutOfMemory(PerfcheckError):
    """Memory ran out (``MemoryError``, pyarrow's ``ArrowMemoryError``) while reading or
    summarising: the input is too large for this machine, not a bug. One line saying
    what ran out and how to ask for less."""

    def __init__(self, exc: BaseException, doing: str | None = None) -> None:
        # pyarrow's allocator names its pool; Python's MemoryError usually says nothing.
        source = "pyarrow's memory pool" if type(exc).__name__ == "ArrowMemoryError" else "memory"
        detail = f" ({exc})" if str(exc) else ""
        where = f" while running {doing}" if doing else ""
        super().__init__(f"ran out of {source}{where}{detail}; ask for less at once: a smaller selection "
                         "(history: --since, --suite, --kernel, --metric; inspect/check: fewer profiles), "
                         "or a machine with more memory")
