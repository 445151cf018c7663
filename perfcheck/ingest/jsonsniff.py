"""Sniffing JSON profiles by their structure: the keys near the top of the document.

Traces put their big metadata first: a PyTorch profiler trace of a BERT run on H100
or MI300X carries 20-30 KiB of ``deviceProperties`` / ``distributedInfo`` before
``"traceEvents"``, so a fixed window of the head misses the key that tells the
format. ``keys`` reads the file (gzip or plain) as a stream, tracks the nesting of
objects and arrays, and collects the object keys down to a depth, stopping as soon
as the keys the caller asks for have appeared, or after ``LIMIT`` bytes of JSON text:
a sniffer must stay cheap on a 2 GB trace that is something else.

Only structure is read: strings are skipped whole (a ``{`` inside a kernel name is
no object), numbers and literals are ignored, and nothing is parsed into values.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"
# JSON text read at most while sniffing (decompressed). Metadata blocks seen in real
# traces are 20-30 KiB; this leaves 30x room, and tokenising it costs about 0.3 s on a
# busy 2-core machine when a large JSON file of another kind is sniffed.
LIMIT = 1024 * 1024
_READ = 64 * 1024

# A complete string, a structural character, or a lone quote (a string that is not
# closed yet within the text read so far: wait for more).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|"', re.DOTALL)


@dataclass(frozen=True)
class Structure:
    """What the scan saw: the first character of the document ("{" or "["), every
    object key with the depth it sits at (1: a key of the top-level object; 2: of an
    object inside it, or of the objects of a top-level array), and the text read."""

    opener: str
    keys: dict[str, int]  # key -> shallowest depth it was seen at
    text: str

    def has(self, key: str, depth: int | None = None) -> bool:
        found = self.keys.get(key)
        return found is not None and (depth is None or found == depth)


def _chunks(path: Path):  # noqa: ANN202 - a generator of decoded text
    """The file's text in pieces, decompressed when it is gzip, up to ``LIMIT``."""
    total = 0
    with open(path, "rb") as fh:
        first = fh.read(_READ)
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if first.startswith(GZIP_MAGIC) else None
        decoder = _Utf8()
        raw = first
        while raw and total < LIMIT:
            try:
                # Input a bounded call left unread comes first (zlib's unconsumed_tail).
                data = inflate.decompress(inflate.unconsumed_tail + raw, LIMIT - total) if inflate is not None else raw
            except zlib.error:
                return
            total += len(data)
            yield decoder.decode(data)
            raw = fh.read(_READ)


class _Utf8:
    """Incremental UTF-8 decoding: a character split between two reads stays whole."""

    def __init__(self) -> None:
        import codecs

        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, data: bytes) -> str:
        return self._decoder.decode(data)


def keys(path: Path, until: frozenset[str] = frozenset(), depth: int = 1, brackets: str = "{[") -> Structure | None:
    """Object keys down to ``depth`` (see ``Structure``), read until every key of
    ``until`` was seen or ``LIMIT`` was reached; None when the file does not start
    like a JSON object or array (or, with ``brackets``, not with one of those:
    nothing more is read then), or cannot be read."""
    stack: list[str] = []
    found: dict[str, int] = {}
    opener = ""
    text = ""
    pos = 0
    last_string: str | None = None
    try:
        for piece in _chunks(path):
            text += piece
            if not opener:
                stripped = text.lstrip("\ufeff \t\r\n")
                if not stripped:
                    continue
                if stripped[0] not in "{[" or stripped[0] not in brackets:
                    return None
                opener = stripped[0]
            while True:
                match = _TOKEN.search(text, pos)
                if match is None:
                    pos = len(text)
                    break
                token = match.group()
                if token == '"':  # not closed in what was read: wait for the next piece
                    pos = match.start()
                    break
                pos = match.end()
                if token[0] == '"':
                    last_string = token
                    continue
                if token == ":" and last_string is not None and stack and stack[-1] == "{":
                    level = len(stack)
                    if level <= depth:
                        name = last_string[1:-1]
                        found.setdefault(name, level)
                        if until and until <= found.keys():
                            return Structure(opener, found, text)
                elif token in "{[":
                    stack.append(token)
                elif token in "}]":
                    if stack:
                        stack.pop()
                    if not stack:
                        return Structure(opener, found, text)  # the whole document was read
                last_string = None
    except OSError:
        return None
    return Structure(opener, found, text) if opener else None
