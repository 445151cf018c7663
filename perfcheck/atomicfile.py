"""Atomic file writes: a reader, or a CI step after a killed run, sees the old
file or the complete new one, never a part.

Every file perfcheck writes (baselines, machine files, reports, plots) goes
through ``write_atomic``: a temporary file in the same directory (same file
system, so the rename is atomic), flushed and fsynced, renamed over the target,
and the directory fsynced so the rename itself survives a crash. A target that is
a symbolic link is written where the link points (``through_links``): the link
stays, as it does for any program that opens the file and writes it.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import time
from collections.abc import Iterable
from pathlib import Path

TEMP_SUFFIX = ".tmp"
# ``.<name>.<pid>.<random>.tmp``, as temp_name makes them.
TEMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp$")
# A temp file this old is abandoned even if its pid is alive (another host on a
# shared file system, or a pid reused since): no write takes ten minutes.
STALE_TEMP_SECONDS = 600.0


def temp_name(path: Path) -> Path:
    """``.<name>.<pid>.<random>.tmp`` next to ``path``: hidden from ``*.json``
    globs, and traceable to the process that left it if that process was killed."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def through_links(path: str | Path) -> Path:
    """What ``path`` names once its symbolic links are followed (a chain of them too),
    or ``path`` itself where it is no link: what a write renames its temporary file or
    folder onto. A rename onto the link would replace the link itself (a site folder or
    an export that a link points at, say from a web server's root, would be left behind
    unchanged, the link gone). A loop of links is an OSError (ELOOP), as opening it is."""
    path = Path(path)
    if not path.is_symlink():
        return path
    real = Path(os.path.realpath(path))
    if real.is_symlink():  # realpath stops where the links go round
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
    if not real.parent.is_dir():  # a dangling link into no folder: said of the link, not of a temporary name
        raise OSError(errno.ENOENT, f"{os.strerror(errno.ENOENT)} (the link points into {real.parent})", str(path))
    return real


def write_atomic(path: str | Path, data: str | bytes | Iterable[str | bytes]) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically; creates parent
    directories. Returns the path. ``data`` may be an iterable of pieces, written as
    they come (an export of a whole history is larger than memory should hold). A
    symbolic link is followed (``through_links``): the file it points at is replaced,
    beside it, and the link kept."""
    given = Path(path)
    given.parent.mkdir(parents=True, exist_ok=True)
    target = through_links(given)  # a dangling link's folder is not made: that is an error, as open() says
    pieces = [data] if isinstance(data, (str, bytes)) else data
    tmp = temp_name(target)
    # 0o666 through the umask, as open() would create the file: mkstemp's 0o600
    # would make a committed baseline or a CI report unreadable to others.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            for piece in pieces:
                view = memoryview(piece.encode("utf-8") if isinstance(piece, str) else piece)
                while view:
                    view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sync_directory(target.parent)
    return given


def _sync_directory(folder: Path) -> None:
    """Make a rename in ``folder`` durable; not every platform can open a directory."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists but not ours, or the platform cannot tell: leave it
    return True


def clean_stale_temps(folder: str | Path, name: str | None = None) -> list[Path]:
    """Remove the temp files killed writers left in ``folder`` (of ``name`` only, when
    given): their pid is dead on this host, or they are older than
    STALE_TEMP_SECONDS. A live writer's temp file is never touched. Returns what was
    removed."""
    removed: list[Path] = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    now = time.time()
    for path in folder.glob(f".*{TEMP_SUFFIX}"):
        match = TEMP_RE.match(path.name)
        if match is None or (name is not None and match["name"] != name):
            continue
        try:
            if not _pid_alive(int(match["pid"])) or now - path.stat().st_mtime > STALE_TEMP_SECONDS:
                if path.is_dir() and not path.is_symlink():  # a folder being built (new_directory_beside)
                    import shutil

                    shutil.rmtree(path)
                else:
                    path.unlink()
                removed.append(path)
        except OSError:
            pass  # gone already, or not ours to remove
    return removed


def new_directory_beside(target: str | Path) -> Path:
    """An empty hidden directory next to ``target`` (same file system, so it can be
    renamed onto it: ``publish_directory``), named as ``temp_name`` names files. A
    link is followed (``through_links``): the directory is made beside what it points at."""
    given = Path(target)
    given.parent.mkdir(parents=True, exist_ok=True)
    target = through_links(given)
    clean_stale_temps(target.parent, target.name)  # what a killed run left
    path = temp_name(target)
    path.mkdir()
    return path


def publish_directory(built: Path, target: str | Path) -> Path:
    """Put the directory ``built`` (``new_directory_beside(target)``, complete) at
    ``target`` by renames, so a reader never sees a part of a site: an absent or empty
    ``target`` is replaced at once; an existing one is first renamed aside, then
    removed (between the two renames, for a moment, there is no ``target``: POSIX has
    no atomic exchange of two directories). The caller decides whether ``target``'s
    contents may go (``perfcheck.history.site`` replaces only a site it wrote). A
    symbolic link ``target`` is kept: the folder it points at is replaced (``built``
    was made beside that one). Returns ``target`` as given."""
    import shutil

    given = Path(target)
    target = through_links(given)
    for path in built.rglob("*"):  # the pages on disk before the name points at them
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    old = None
    if target.is_dir() and any(target.iterdir()):
        old = temp_name(target)
        os.replace(target, old)
    elif target.is_dir():
        target.rmdir()
    try:
        os.replace(built, target)
    except BaseException:
        if old is not None:
            os.replace(old, target)  # the old site back where it was
        raise
    _sync_directory(target.parent)  # the rename itself survives a power cut, as write_atomic's does
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return given
