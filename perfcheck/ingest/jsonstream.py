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
``json.load`` would say); a file cut off inside the array says so.
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

from perfcheck.documents import too_deep
from perfcheck.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_CHARS = 1 << 22  # 4 MiB per read: ~20,000 trace events
SLOW_BATCH = 10_000  # elements per batch where the text gives no boundary
_WS = re.compile(r"[ \t\n\r]*")
# the end of one object of the array and the start of the next
_BOUNDARY = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*(?=\{)")
_DECODER = json.JSONDecoder()


class ArrayStream:
    """The top-level object of ``path``: ``doc`` its keys other than ``key`` (filled as
    the file is read: complete once ``batches()`` is exhausted), ``batches()`` the
    elements of the array under ``key``, a list at a time."""

    def __init__(self, path: Path, key: str, *, cut_hint: str, kind_hint: str) -> None:
        self.path, self.key, self.cut_hint, self.kind_hint = path, key, cut_hint, kind_hint
        self.doc: dict[str, Any] = {}
        self.found = False  # whether the document had the array
        self._buf, self._pos, self._eof, self._lines_before = "", 0, False, 0
        self._fh: IO[bytes] | None = None
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")

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
            raise InputError(self.path, f"cannot decompress the gzip trace ({exc})", hint=self.cut_hint) from None
        if self._pos:
            self._lines_before += self._buf.count("\n", 0, self._pos)
            self._buf, self._pos = self._buf[self._pos:], 0
        self._buf += self._text.decode(raw, final=not raw)
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
        return InputError(self.path, f"not valid JSON ({what}, column {column})", line=line,
                          hint=self.cut_hint if self._eof and at >= len(self._buf) - 1 else self.kind_hint)

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
            self._pos = end
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
                    self.found = True
                    self._pos += 1
                    yield from self._array()
                else:
                    self.doc[name] = self._value()
                following = self._peek()
                self._pos += 1
                if following == "}":
                    break
                if following != ",":
                    raise self._fail("expected ',' or '}'" if following else "the document is cut off", self._pos - 1)
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
