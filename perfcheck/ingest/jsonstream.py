"""A JSON document with one large array, read in bounded memory: a Chrome trace's
``traceEvents`` (a 1 GB Kineto trace holds millions of events; ``json.load`` of it
needs about nine times the file in memory, the decoded dicts).

``ArrayStream(path, key)`` walks the top-level object. The values of its other keys
are decoded whole (``doc``: small ones, ``distributedInfo``, ``deviceProperties``);
the array under ``key`` is handed out in batches of elements (``batches()``), a few
MB of text at a time, so memory holds one batch of decoded elements and what the
caller keeps of them. A gzip file is decompressed as it is read.

How a batch is decoded (the standard library's decoder, no new dependency): the text
read so far is cut after the last ``}`` that is followed by ``,`` and ``{`` (the
boundary between two objects of the array), and ``[`` + that text + ``]`` is one
``json.loads``. A cut that is not a boundary (the pattern inside a string or a nested
object) cannot parse as an array (its brackets or quotes do not close), and then the
batch is decoded element by element with ``JSONDecoder.raw_decode``: the answer does
not depend on where the reads fell.

Malformed JSON is a located InputError (line and column in the file, as
``json.load`` would say); a file cut off inside the array says so, and so does text
after the document (``json.load``'s "Extra data") or a second array under ``key``
(``json.load`` would keep the last one silently; a stream has handed out the first).
A UTF-8 byte order mark is skipped, as ``json.loads`` of bytes does. With
``strict=True`` bytes that are not UTF-8 are an InputError, as ``json.loads`` of the
bytes says; otherwise they read as U+FFFD.

``Columns`` holds what a caller keeps of the elements: columns appended batch by
batch into arrays that grow in place.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from perfcheck.documents import too_deep
from perfcheck.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_CHARS = 1 << 22  # 4 MiB per read: ~20,000 trace events
SLOW_BATCH = 10_000  # elements per batch where the text gives no boundary
_WS = re.compile(r"[ \t\n\r]*")
# JSON's escape of half a surrogate pair ("\ud800"), which json decodes to a lone surrogate
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# the end of one object of the array and the start of the next
_BOUNDARY = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*(?=\{)")
_DECODER = json.JSONDecoder()


class ArrayStream:
    """The top-level object of ``path``: ``doc`` its keys other than ``key`` (filled as
    the file is read: complete once ``batches()`` is exhausted), ``batches()`` the
    elements of the array under ``key``, a list at a time."""

    def __init__(self, path: Path, key: str, *, cut_hint: str, kind_hint: str, strict: bool = False,
                 gzip_hint: str | None = None) -> None:
        self.path, self.key, self.cut_hint, self.kind_hint = path, key, cut_hint, kind_hint
        self.gzip_hint = gzip_hint or cut_hint  # for a gzip stream that does not decompress
        self.doc: dict[str, Any] = {}
        self.found = False  # whether the document had the array
        # whether a value of ``doc`` was written with a surrogate escape: only then can it
        # hold a lone surrogate, and only then need a caller walk it (names.readable)
        self.surrogates = False
        self._buf, self._pos, self._start, self._eof, self._lines_before = "", 0, 0, False, 0
        self._fh: IO[bytes] | None = None
        # utf-8-sig: a byte order mark at the start is dropped, as json.loads(bytes) does
        self._text = codecs.getincrementaldecoder("utf-8-sig")(errors="strict" if strict else "replace")

    # --- reading -------------------------------------------------------------------------
    def _open(self) -> IO[bytes]:
        with open(self.path, "rb") as probe:
            gz = probe.read(2) == GZIP_MAGIC
        return gzip.open(self.path, "rb") if gz else open(self.path, "rb")  # noqa: SIM115 (closed in batches)

    def _more(self) -> bool:
        """Read the next chunk onto the buffer (the consumed part dropped); False at the end."""
        if self._eof or self._fh is None:
            return False
        try:
            raw = self._fh.read(CHUNK_CHARS)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(self.path, f"cannot decompress the gzip trace ({exc})", hint=self.gzip_hint) from None
        if self._pos:
            self._lines_before += self._buf.count("\n", 0, self._pos)
            self._buf, self._pos = self._buf[self._pos:], 0
        try:
            self._buf += self._text.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:  # strict only; worded as names.json_document words it
            raise InputError(self.path, f"not UTF-8 text ({exc.reason})", hint=self.kind_hint) from None
        self._eof = not raw
        return bool(raw) or self._pos < len(self._buf)

    def _peek(self) -> str:
        """The next character after white space ('' at the end of the file)."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                return ""

    def _fail(self, what: str, at: int) -> InputError:
        line = self._lines_before + self._buf.count("\n", 0, at) + 1
        column = at - (self._buf.rfind("\n", 0, at) + 1) + 1
        # cut off: the error is at the end of the file, or a string runs on to it
        cut = self._eof and (at >= len(self._buf) - 1 or what.startswith("Unterminated string"))
        return InputError(self.path, f"not valid JSON ({what}, column {column})", line=line,
                          hint=self.cut_hint if cut else self.kind_hint)

    def _expect(self, char: str) -> None:
        found = self._peek()
        if found != char:
            raise self._fail(f"expected {char!r}" + (f", found {found!r}" if found else " before the end of the file"),
                             self._pos)
        self._pos += 1

    def _value(self) -> Any:
        """One JSON value at the position (read on while it may be cut by the buffer's end)."""
        self._peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue
                raise self._fail(exc.msg, exc.pos) from None
            except RecursionError:  # worded as every other reader's (perfcheck.documents)
                raise too_deep(self.path, "JSON", hint=self.kind_hint) from None
            if end >= len(self._buf) and self._more():  # a number may go on in the next chunk
                continue
            # where the value's text starts in the buffer (reading more drops what was before it)
            self._start, self._pos = self._pos, end
            return value

    # --- the document --------------------------------------------------------------------
    def batches(self) -> Iterator[list[Any]]:
        try:
            self._fh = self._open()
            self._more()
            self._expect("{")
            if self._peek() == "}":
                self._pos += 1
                return
            while True:
                name = self._value()
                if not isinstance(name, str):
                    raise self._fail("expected a key", self._pos)
                self._expect(":")
                if name == self.key and self._peek() == "[":
                    if self.found:
                        raise self._fail(f"a second {self.key!r} array", self._pos)
                    self.found = True
                    self._pos += 1
                    yield from self._array()
                else:
                    self.doc[name] = self._value()
                    if not self.surrogates and _SURROGATE_ESCAPE.search(self._buf, self._start, self._pos):
                        self.surrogates = True
                following = self._peek()
                self._pos += 1
                if following == "}":
                    break
                if following != ",":
                    raise self._fail("expected ',' or '}'" if following else "the document is cut off", self._pos - 1)
            if self._peek():
                raise self._fail("Extra data", self._pos)
        finally:
            if self._fh is not None:
                self._fh.close()

    def _array(self) -> Iterator[list[Any]]:
        if self._peek() == "]":
            self._pos += 1
            return
        while True:
            # the objects up to the last boundary in the buffer, in one decode
            cut = None
            for cut in _BOUNDARY.finditer(self._buf, self._pos):
                pass
            if cut is not None and not self._eof:
                try:
                    batch = json.loads("[" + self._buf[self._pos:cut.start() + 1] + "]")
                except (json.JSONDecodeError, RecursionError):
                    batch = None
                if isinstance(batch, list):
                    self._pos = cut.end()
                    yield batch
                    if not self._more():
                        raise self._fail("the document is cut off", len(self._buf))
                    continue
            # the slow path: element by element, a batch's worth
            batch, done = [], False
            while len(batch) < SLOW_BATCH:
                batch.append(self._value())
                following = self._peek()
                self._pos += 1
                if following == "]":
                    done = True
                    break
                if following != ",":
                    raise self._fail("expected ',' or ']'" if following else "the document is cut off",
                                     self._pos - 1)
            yield batch
            if done:
                return
            self._more()


def _fill(dtype: np.dtype) -> Any:
    """The value of a row that had no value: NaN, the smallest integer, False, None."""
    if dtype.kind == "f":
        return np.nan
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return False if dtype.kind == "b" else None


class Columns:
    """Columns appended batch by batch into arrays that double when full. Why not a
    list of per-batch frames: each would keep a few small objects alive among the
    batch's freed dicts, and the allocator cannot give those pages back (a 171 MB
    trace held 750 MB that way). A column missing from a batch, or new in a later
    one, holds the fill value of its type there (``_fill``)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.size = 0

    def _capacity(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    def add(self, columns: dict[str, np.ndarray]) -> None:
        n = len(next(iter(columns.values())))
        capacity = self._capacity()
        if self.size + n > capacity:
            grown = max(2 * capacity, self.size + n)
            for name, values in self.arrays.items():
                bigger = np.empty(grown, dtype=values.dtype)
                bigger[: self.size] = values[: self.size]
                self.arrays[name] = bigger
            capacity = grown
        for name, values in columns.items():
            if name not in self.arrays:
                self.arrays[name] = np.full(capacity, _fill(values.dtype), dtype=values.dtype)
            self.arrays[name][self.size: self.size + n] = values
        for name, values in self.arrays.items():
            if name not in columns:
                values[self.size: self.size + n] = _fill(values.dtype)
        self.size += n

    def trimmed(self) -> dict[str, np.ndarray]:
        """The columns without their spare room (one column copied at a time)."""
        for name in list(self.arrays):
            self.arrays[name] = self.arrays[name][: self.size].copy()
        return self.arrays
