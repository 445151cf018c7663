"""The one exception tree of perfcheck.

::

    PerfcheckError                 anything perfcheck reports to a user
     +-- InputError                a file cannot be read as what it claims to be
     |    +-- UnknownFormatError   no reader recognises the file
     +-- UsageError                the command line or API was called wrongly

The CLI and the pytest plugin catch ``PerfcheckError`` and print ``str(error)``:
a single line naming the file, the line or column, what is wrong and what to do.
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
