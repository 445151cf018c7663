"""Atomic file writes: a reader, or a CI step after a killed run, sees the old
file or the complete new one, never a part.

Every file perfcheck writes (baselines, machine files, reports, plots) goes
through ``write_atomic``: a temporary file in the same directory (same file
system, so the rename is atomic), flushed and fsynced, renamed over the target,
and the directory fsynced so the rename itself survives a crash.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def temp_name(path: Path) -> Path:
    """``.<name>.<pid>.<random>.tmp`` next to ``path``: hidden from ``*.json``
    globs, and traceable to the process that left it if that process was killed."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically; creates parent
    directories. Returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = temp_name(target)
    # 0o666 through the umask, as open() would create the file: mkstemp's 0o600
    # would make a committed baseline or a CI report unreadable to others.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # make the rename durable; not every platform can open a directory
        dir_fd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return target
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    return target
