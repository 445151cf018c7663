"""Where a history store lives: a file path (SQLite) or a database URL (PostgreSQL).

A URL is never taken as a file path: ``Path("postgresql://u@h/db")`` would quietly
become ``postgresql:/u@h/db`` and create an SQLite file by that name. So the
settings keep a URL as a ``StoreURL``, and only ``perfcheck.history`` opens it.

A ``StoreURL`` prints with its password masked (``str``, ``repr``, f-strings), so no
message, report or log line can show the secret; the real text is ``.secret``.
Credentials may also come from the standard ``PG*`` variables or ``~/.pgpass``:
libpq reads those itself and they never pass through here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from perfcheck.errors import UsageError

# The schemes libpq accepts for a connection URI (PostgreSQL manual, 34.1.1
# "Connection Strings": "postgresql://" or "postgres://").
POSTGRES_SCHEMES = ("postgresql", "postgres")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
MASK = "***"


@dataclass(frozen=True)
class StoreURL:
    """A database URL naming a history store; prints masked."""

    secret: str = field(repr=False)

    @property
    def scheme(self) -> str:
        return self.secret.split("://", 1)[0].lower()

    @property
    def masked(self) -> str:
        return mask_password(self.secret)

    def __str__(self) -> str:
        return self.masked

    def __repr__(self) -> str:
        return f"StoreURL({self.masked!r})"


# A history store's location, as the settings hold it.
StoreLocation = Path | StoreURL


def is_url(text: str) -> bool:
    """``scheme://...``: a URL, whatever the scheme (never a file name)."""
    return bool(_SCHEME.match(text.strip()))


def store_location(text: str | Path | StoreURL, *, base: Path | None = None) -> StoreLocation:
    """A URL stays a ``StoreURL`` (only PostgreSQL's schemes are known; another
    scheme is a UsageError, not a file); anything else is a path, relative to ``base``."""
    if isinstance(text, (StoreURL, Path)):
        return text
    stripped = text.strip()
    match = _SCHEME.match(stripped)
    if match:
        if match[1].lower() not in POSTGRES_SCHEMES:
            raise UsageError(f"history store {mask_password(stripped)}: unknown URL scheme {match[1]!r}; "
                             "give a file path (SQLite) or a postgresql:// URL")
        return StoreURL(stripped)
    path = Path(stripped).expanduser()
    return path if path.is_absolute() or base is None else (base / path).resolve()


def mask_password(text: str) -> str:
    """``postgresql://user:secret@host/db?password=x`` -> the same with ``***`` for each
    password (the userinfo's and a ``password=`` parameter's)."""
    try:
        parts = urlsplit(text)
    except ValueError:  # e.g. an unbalanced [ in the host: mask everything after the scheme
        return re.sub(r"://.*", "://" + MASK, text)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":" + MASK
        netloc = f"{userinfo}@{host}"
    query = re.sub(r"(?i)(^|&)(password=)[^&]*", rf"\g<1>\g<2>{MASK}", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def masked_in(message: str, location: StoreLocation) -> str:
    """``message`` with the password of ``location`` replaced wherever it appears
    (a driver's error text may quote the connection string)."""
    if not isinstance(location, StoreURL):
        return message
    secrets = set()
    parts = urlsplit(location.secret)
    if parts.password:
        secrets.update((parts.password, unquote(parts.password)))
    for found in re.findall(r"(?i)(?:^|&)password=([^&]*)", parts.query):
        secrets.update(s for s in (found, unquote(found)) if s)
    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, MASK)
    return message.replace(location.secret, location.masked)
