"""Decoding JSON and TOML documents from files perfcheck did not write, with their
nesting bounded.

Both decoders recurse once per level of nesting: CPython's ``json`` scanner (C) checks
the interpreter's recursion limit (1000 by default) and raises ``RecursionError``;
``tomllib`` is pure Python and does the same a little earlier. A file nested 100,000
deep (``[[[[...]]]]``, 200 KB) is therefore no malformed document to them but a
``RecursionError``, which no reader expected: ``perfcheck inspect`` ended in exit 3.
Every reader of JSON or TOML from outside goes through this module, so that such a
file is one located ``InputError`` like any other bad input.

No real profile, results file, baseline or config nests more than about ten levels
(Proton call trees, the deepest, follow the program's call stack), so the decoders'
own limit is the bound: checking depth before decoding would cost a pass over every
byte of a trace of hundreds of MB to refuse what the decoder refuses for free.

A document that decodes may still be deep enough (close to the limit) that a
recursive walk over it afterwards (``repr``, a ``json.dumps``, a tidy-up of its
strings) runs out of stack: such walks run under ``bounded`` too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from perfcheck.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9/3.10
    import tomli as tomllib

__all__ = ["bounded", "json_loads", "toml_loads", "too_deep"]


def too_deep(path: str | Path | None, language: str, *, hint: str | None = None) -> InputError:
    """The error for a document nested deeper than Python can decode or walk."""
    return InputError(path, f"{language} nested deeper than Python can read (over {sys.getrecursionlimit()} levels)",
                      hint=hint or "no tool writes such nesting: the file is damaged or not what it claims to be")


@contextmanager
def bounded(path: str | Path | None, language: str = "JSON", *, hint: str | None = None) -> Iterator[None]:
    """A block that decodes or walks a document from ``path``: running out of stack
    in it is ``too_deep``, not a crash."""
    try:
        yield
    except RecursionError:
        raise too_deep(path, language, hint=hint) from None


def json_loads(data: str | bytes, path: str | Path | None, *, hint: str | None = None, **options: Any) -> Any:
    """``json.loads(data, **options)`` with nesting bounded (see the module docstring).
    ``json.JSONDecodeError`` and ``UnicodeDecodeError`` pass through, for the caller
    to word with what its file should be."""
    with bounded(path, "JSON", hint=hint):
        return json.loads(data, **options)


def toml_loads(text: str, path: str | Path | None, *, hint: str | None = None) -> dict[str, Any]:
    """``tomllib.loads(text)`` with nesting bounded; ``TOMLDecodeError`` passes through."""
    with bounded(path, "TOML", hint=hint):
        return tomllib.loads(text)
