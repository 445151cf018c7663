"""Seeded mutation fuzzing of the real profiler and benchmark outputs.

Every case copies one real input from ``../shared/profiles`` (a file, or a whole
tool output directory) into a scratch directory, mutates it with one to three
operators drawn from a seeded generator, and drives it through the CLI's own entry
point in-process, the way a user would:

* a profile: ``perfcheck inspect --json PATH``; a trace with a timeline (Kineto,
  Nsight Systems, rocpd, rocprof results.db, rocprofv3 CSV traces), half the time
  ``perfcheck inspect --timeline --json PATH`` as well, whose figures must be finite,
  non-negative and, as percentages, at most 100; JSON profiles and peaks and TOML
  machine files get the results files' hostile JSON values now and then;
* a peaks file (BabelStream, mixbench, ERT, STREAM, likwid, roofline.csv, a
  machine file): ``perfcheck peaks --json PATH`` and
  ``perfcheck inspect --json PROFILE --peaks PATH``;
* a results file (``perfcheck check --json`` of the example suite, written in the
  scratch directory), mutated also with hostile JSON values (numbers that overflow,
  64-bit overflows, impossible times, lone surrogates, deep nesting):
  ``perfcheck history add`` into a fresh store, then ``history list --json`` and
  ``history export`` of that store, which must work whatever ``add`` accepted;
* a history store (made by ``history add`` from such files), damaged as stores are
  (tables, columns, values, pages, a foreign trigger, an impossible time):
  ``history list --json``, ``history detect --json``, ``history report --markdown``
  and ``history export``.

Each case ends in exactly one outcome:

``ok``        exit 0, strict JSON on stdout (no ``NaN``/``Infinity`` tokens), every
              number finite, no negative duration/bytes/count/rate, calls >= 1,
              every peak and ceiling positive;
``error``     exit 2 and one ``perfcheck: error:`` line naming the input;
``crash``     any other exception or exit status;
``wrong``     exit 0 with output that breaks a rule of ``ok`` (a silent wrong number);
``leak``      a Python warning (pandas, numpy) or stray text reached stderr;
``hang``      the case outlasted its time bound.

``ok`` and ``error`` are the only acceptable outcomes. Run it by hand for figures::

    python tests/fuzzing.py --cases 5000 --seed 1
    python tests/fuzzing.py --case 1234 --seed 1 --keep /tmp/case  # one case, kept

The pytest face is ``tests/test_fuzz.py`` (a few hundred cases; thousands with
``PERFCHECK_FUZZ_CASES``).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import re
import shutil
import signal
import sqlite3
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PERFCHECK_SHARED", ROOT.parent / "shared"))
PROFILES = SHARED / "profiles"

# A profile to use peaks files with (small, read in milliseconds, with counters so
# that percentages of the peaks are computed).
PEAKS_PROFILE = "omniperf/rocprofiler-compute-vcopy-MI200/pmc_perf.csv"

ACCEPTABLE = ("ok", "error")
ARCHES = ("gfx906", "gfx90a", "mi300x", "a100", "h100-sxm")

# ------------------------------------------------------------------------------------
# corpus


@dataclass(frozen=True)
class Target:
    relative: str  # path under PROFILES (or a generated machine file's name)
    kind: str  # "profile" | "peaks"
    source: Path


def corpus(profiles: Path = PROFILES, scratch: Path | None = None) -> list[Target]:
    """Every real file or tool output directory some reader accepts, as the kind it
    is read as (sniffed on the unmodified input), in a stable order. With
    ``scratch``, a machine file written by ``perfcheck peaks --save`` from a real
    mixbench log joins the corpus."""
    from perfcheck.errors import PerfcheckError
    from perfcheck.ingest import detect

    paths = sorted(p for p in profiles.rglob("*") if p.is_file()) + sorted(
        p for p in profiles.rglob("*") if p.is_dir()
    )
    targets = []
    for path in paths:
        for kind in ("profile", "peaks"):
            try:
                detect(path, kind)
            except PerfcheckError:
                continue
            targets.append(Target(str(path.relative_to(profiles)), kind, path))
    if scratch is not None:
        machine = scratch / "machine" / "mulan.toml"
        machine.parent.mkdir(parents=True, exist_ok=True)
        log = profiles / "mixbench" / "pawsey-mulan-mi100" / "mixbench-log.txt"
        if log.exists():
            from perfcheck.cli import main

            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                if main(["peaks", str(log), "--save", str(machine), "--device", "mi100"]) == 0:
                    targets.append(Target("machine/mulan.toml", "peaks", machine))
        targets += history_targets(scratch)
    return targets


def history_targets(scratch: Path) -> list[Target]:
    """A results file of the example suite and a store holding three runs of it, both
    written by perfcheck itself in ``scratch`` (the project's own example data)."""
    from perfcheck.cli import main

    folder = scratch / "history"
    folder.mkdir(parents=True, exist_ok=True)
    config = ROOT / "examples" / "stencil" / "perfcheck.toml"
    files = []
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for suite in ("after", "before", "after"):
            path = folder / f"results-{len(files)}.json"
            main(["check", "--config", str(config), "--suite", suite, "--baseline-dir", str(folder / "b"),
                  "--json", str(path)])
            if path.exists():
                files.append(path)
        store = folder / "history.sqlite"
        if files and main(["history", "add", *map(str, files), "--history", str(store)]) == 0:
            with contextlib.closing(sqlite3.connect(store)) as db:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # one file: the copy is the whole store
    targets = [Target(f"history/{p.name}", "results", p) for p in files[:1]]
    if (folder / "history.sqlite").exists():
        targets.append(Target("history/history.sqlite", "store", folder / "history.sqlite"))
    return targets


# ------------------------------------------------------------------------------------
# mutation operators: bytes -> bytes (text-ish files), or on a path (SQLite, folders)

BAD_NUMBERS = (
    b"nan", b"NaN", b"inf", b"-inf", b"Infinity", b"-Infinity", b"1e308", b"-1e308", b"1e400",
    b"-1", b"-7", b"-0.5", b"0", b"", b"abc", b"99999999999999999999999", b"1,5", b"0x10",
)
NUMBER_RE = re.compile(rb"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
DELIMITERS = (b",", b";", b"\t", b" ", b"|")


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _join(lines: list[bytes]) -> bytes:
    return b"\n".join(lines)


def _fields(line: bytes) -> tuple[bytes, list[bytes]]:
    for delim in (b",", b"\t", b";"):
        if line.count(delim) >= 1:
            return delim, line.split(delim)
    return b" ", line.split(b" ")


def m_flip_bytes(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    return bytes(buf)


def m_insert_bytes(rng: random.Random, data: bytes) -> bytes:
    pos = rng.randint(0, len(data))
    junk = rng.choice([b"\x00", b"\xff\xfe", b'"', b",,,", b"\r", b"\n\n", bytes(rng.randrange(256) for _ in range(16))])
    return data[:pos] + junk + data[pos:]


def m_delete_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    pos = rng.randrange(len(data))
    return data[:pos] + data[pos + rng.randint(1, 64):]


def m_truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randint(0, len(data))] if data else data


def m_delete_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(rng.randint(1, 3)):
        if len(lines) > 1:
            del lines[rng.randrange(len(lines))]
    return _join(lines)


def m_duplicate_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    lines[i:i] = [lines[i]] * rng.randint(1, 3)
    return _join(lines)


def m_swap_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return _join(lines)


def m_blank_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(rng.randint(1, 3)):
        lines.insert(rng.randint(0, len(lines)), rng.choice([b"", b"   ", b","]))
    return _join(lines)


def m_delete_column(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    k = rng.randrange(8)
    out = []
    for line in lines:
        delim, fields = _fields(line)
        if len(fields) > k:
            del fields[k]
        out.append(delim.join(fields))
    return _join(out)


def m_swap_columns(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    a, b = rng.randrange(8), rng.randrange(8)
    out = []
    for line in lines:
        delim, fields = _fields(line)
        if len(fields) > max(a, b):
            fields[a], fields[b] = fields[b], fields[a]
        out.append(delim.join(fields))
    return _join(out)


def m_delimiter(rng: random.Random, data: bytes) -> bytes:
    old, new = rng.sample(DELIMITERS, 2)
    if rng.random() < 0.5:
        return data.replace(old, new)
    lines = _lines(data)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        lines[i] = lines[i].replace(old, new)
    return _join(lines)


def m_number_one(rng: random.Random, data: bytes) -> bytes:
    matches = list(NUMBER_RE.finditer(data))
    if not matches:
        return data
    for _ in range(rng.randint(1, 3)):
        m = rng.choice(matches)
        data = data[: m.start()] + rng.choice(BAD_NUMBERS) + data[m.end():]
        matches = list(NUMBER_RE.finditer(data))
        if not matches:
            break
    return data


def m_number_column(rng: random.Random, data: bytes) -> bytes:
    """One bad value in a whole column (or a random part of it): the value reaches
    a particular canonical column whatever the reader."""
    lines = _lines(data)
    numeric = [i for i, line in enumerate(lines) if NUMBER_RE.search(line)]
    if not numeric:
        return data
    delim, fields = _fields(lines[rng.choice(numeric)])
    k = rng.randrange(len(fields))
    bad = rng.choice(BAD_NUMBERS)
    share = rng.choice([1.0, 0.5, 0.1])
    for i in numeric:
        d, fs = _fields(lines[i])
        if d == delim and len(fs) > k and NUMBER_RE.fullmatch(fs[k].strip().strip(b'"')) and rng.random() < share:
            fs[k] = bad
            lines[i] = d.join(fs)
    return _join(lines)


def m_number_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    numeric = [i for i, line in enumerate(lines) if NUMBER_RE.search(line)]
    if not numeric:
        return data
    i = rng.choice(numeric)
    bad = rng.choice(BAD_NUMBERS)
    lines[i] = NUMBER_RE.sub(lambda m: bad, lines[i])
    return _join(lines)


def m_cr_only(rng: random.Random, data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")


def m_crlf(rng: random.Random, data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def m_bom(rng: random.Random, data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data


def m_utf16(rng: random.Random, data: bytes) -> bytes:
    return data.decode("utf-8", errors="replace").encode(rng.choice(["utf-16", "utf-16-le"]))


def m_long_field(rng: random.Random, data: bytes) -> bytes:
    """A field over the csv module's 128 KiB default limit (and pandas' buffers)."""
    lines = _lines(data)
    i = rng.randrange(len(lines))
    size = rng.choice([140 * 1024, 300 * 1024])
    body = b"x" * size
    if rng.random() < 0.5:
        body = b'"' + body + b'"'
    delim, fields = _fields(lines[i])
    fields[rng.randrange(len(fields))] = body
    lines[i] = delim.join(fields)
    return _join(lines)


def m_unbalanced_quote(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    pos = rng.randint(0, len(lines[i]))
    lines[i] = lines[i][:pos] + b'"' + lines[i][pos:]
    return _join(lines)


BYTE_OPERATORS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "flip-bytes": m_flip_bytes,
    "insert-bytes": m_insert_bytes,
    "delete-bytes": m_delete_bytes,
    "truncate": m_truncate,
    "delete-lines": m_delete_lines,
    "duplicate-lines": m_duplicate_lines,
    "swap-lines": m_swap_lines,
    "blank-lines": m_blank_lines,
    "delete-column": m_delete_column,
    "swap-columns": m_swap_columns,
    "delimiter": m_delimiter,
    "number": m_number_one,
    "number-column": m_number_column,
    "number-column-2": m_number_column,  # drawn twice as often: it reaches columns
    "number-line": m_number_line,
    "cr-only": m_cr_only,
    "crlf": m_crlf,
    "bom": m_bom,
    "utf-16": m_utf16,
    "long-field": m_long_field,
    "unbalanced-quote": m_unbalanced_quote,
}

SQL_BAD = ("NULL", "-1", "-1e308", "1e308", "9e999", "'abc'", "''", "0", "-5")


def sqlite_mutate(rng: random.Random, path: Path) -> str:
    """Drop, rename or empty a table, or put bad values into a column."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
        views = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='view'")]
        if not tables:
            return "sqlite-none"
        table = rng.choice(tables)
        op = rng.choice(["drop", "rename", "empty", "values", "values", "values", "drop-view"])
        if op == "drop-view" and not views:
            op = "values"
        if op == "drop":
            db.execute(f'DROP TABLE "{table}"')
        elif op == "rename":
            db.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_old"')
        elif op == "empty":
            db.execute(f'DELETE FROM "{table}"')
        elif op == "drop-view":
            db.execute(f'DROP VIEW "{rng.choice(views)}"')
        else:
            columns = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
            if columns:
                column = rng.choice(columns)
                bad = rng.choice(SQL_BAD)
                where = "" if rng.random() < 0.5 else " WHERE rowid % 2 = 0"
                try:
                    db.execute(f'UPDATE "{table}" SET "{column}" = {bad}{where}')
                except sqlite3.Error:
                    pass
            op = f"values({bad if columns else ''})"
        db.commit()
    return f"sqlite-{op.split('(')[0]}"


# Hostile SQLite profiles (issue 16): what a file can make its reader execute. Each
# takes a copy of a real database and the name of a table or view the reader reads.


def _rows_view(db: sqlite3.Connection, name: str) -> str:
    """Move ``name``'s rows aside (a table renamed, a view recreated under another
    name) so that a hostile view can take its name; returns where the rows are."""
    kind, sql = db.execute("SELECT type, sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    if kind == "table":
        db.execute(f'ALTER TABLE "{name}" RENAME TO "{name}_rows"')
    else:
        db.execute(f'DROP VIEW "{name}"')
        db.execute(f'CREATE VIEW "{name}_rows" AS {sql[sql.upper().index(" AS") + 3:]}')
    return f"{name}_rows"


def h_runaway(db: sqlite3.Connection, name: str) -> None:
    """Its rows, repeated by a recursive counter without end."""
    rows = _rows_view(db, name)
    db.execute(f'CREATE VIEW "{name}" AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) '
               f'SELECT "{rows}".* FROM r, "{rows}"')


def h_huge_strings(db: sqlite3.Connection, name: str) -> None:
    """Every text column 80 MB long (beyond the readers' 64 MiB limit)."""
    columns = [(r[1], r[2]) for r in db.execute(f'SELECT * FROM pragma_table_info("{name}")')]
    rows = _rows_view(db, name)
    select = ", ".join(f'hex(zeroblob(40000000)) AS "{c}"' if (t or "").upper() == "TEXT" else f'"{c}"' for c, t in columns)
    db.execute(f'CREATE VIEW "{name}" AS SELECT {select} FROM "{rows}"')


def h_wide(db: sqlite3.Connection, name: str) -> None:
    """1,500 more columns (beyond the readers' 1,000)."""
    rows = _rows_view(db, name)
    extra = ", ".join(f"{i} AS c{i}" for i in range(1500))
    db.execute(f'CREATE VIEW "{name}" AS SELECT *, {extra} FROM "{rows}"')


def h_quote_column(db: sqlite3.Connection, name: str) -> None:
    """A column whose name holds a double quote."""
    if db.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0] == "table":
        db.execute(f'ALTER TABLE "{name}" ADD COLUMN "x"" FROM sqlite_master; --" INTEGER DEFAULT 1')


def h_null_values(db: sqlite3.Connection, name: str) -> None:
    """NULL in every column of every other row (NOT NULL constraints lifted)."""
    if db.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0] != "table":
        return
    db.execute("PRAGMA writable_schema = ON")
    db.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE name = ?", (name,))
    db.commit()
    db.execute("PRAGMA writable_schema = OFF")


def h_null_values_rows(db: sqlite3.Connection, name: str) -> None:
    if db.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0] != "table":
        return
    for column in [r[1] for r in db.execute(f'SELECT * FROM pragma_table_info("{name}")') if not r[5]]:
        db.execute(f'UPDATE "{name}" SET "{column}" = NULL WHERE rowid % 2 = 0')


HOSTILE_SQLITE: dict[str, Callable[[sqlite3.Connection, str], None]] = {
    "runaway": h_runaway,
    "huge-strings": h_huge_strings,
    "wide": h_wide,
    "quote-column": h_quote_column,
}

# The tables and views each SQLite reader reads, per real file.
SQLITE_SOURCES = {
    "nsys/nvidia-fuser-h200-nsys2025.1/report1.sqlite":
        ["META_DATA_EXPORT", "CUPTI_ACTIVITY_KIND_KERNEL", "StringIds", "TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE"],
    "rocprofv3/batched_gemm-mi300x-rocpd/15_results.db":
        ["kernels", "rocpd_kernel_dispatch", "rocpd_info_agent", "rocpd_info_kernel_symbol", "rocpd_info_queue",
         "rocpd_info_thread", "rocpd_pmc_event"],
    "rocprof-v1/batched_gemm-mi300x/results.db": ["OPS", "KERN", "HIP"],
}


def hostile_sqlite(path: Path, operation: str, name: str) -> None:
    """Apply ``HOSTILE_SQLITE[operation]`` to ``name`` in the database at ``path``
    (``null`` nulls every nullable-made column of every other row)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        if operation == "null":
            h_null_values(db, name)
        else:
            HOSTILE_SQLITE[operation](db, name)
        db.commit()
    if operation == "null":
        with contextlib.closing(sqlite3.connect(path)) as db:
            h_null_values_rows(db, name)
            db.commit()


def mutate(rng: random.Random, root: Path, kind: str = "profile") -> list[str]:
    """Mutate the copy at ``root`` (a file or a directory) in place; returns the
    names of the operators applied. ``kind``: the target's kind (the JSON and store
    operators are for results files and history stores)."""
    applied: list[str] = []
    if root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.is_file())
        if files and rng.random() < 0.3:
            victim = rng.choice(files)
            victim.unlink()
            applied.append("remove-file")
            return applied
        if not files:
            return applied
        path = rng.choice(files)
    else:
        path = root
    is_sqlite = path.read_bytes()[:16] == b"SQLite format 3\x00"
    is_store = is_sqlite and kind == "store"
    is_results = kind == "results"
    # JSON profiles and peaks (Kineto, Proton, rocprof results.json, ERT) and TOML machine
    # files get the hostile JSON values too, less often than results files
    is_document = not is_sqlite and (path.suffix in (".json", ".hatchet", ".toml"))
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if is_store:
            try:
                applied.append(store_mutate(rng, path))
            except sqlite3.Error:
                applied.append("store-failed")
            continue
        if (is_results and rng.random() < 0.7) or (is_document and rng.random() < 0.3):
            name = rng.choice(sorted(JSON_OPERATORS))
            path.write_bytes(JSON_OPERATORS[name](rng, path.read_bytes()))
            applied.append(name)
            continue
        if is_sqlite and rng.random() < 0.8:
            try:
                applied.append(sqlite_mutate(rng, path))
            except sqlite3.Error:
                applied.append("sqlite-failed")
            continue
        name = rng.choice(sorted(BYTE_OPERATORS))
        path.write_bytes(BYTE_OPERATORS[name](rng, path.read_bytes()))
        applied.append(name)
    return applied


HOSTILE_JSON_NUMBERS = (b"1e400", b"-1e400", b"9" * 400, b"9223372036854775808", b"-9223372036854775809",
                        b"1e300", b"1e12", b"-1e12", b"NaN", b"Infinity", b"0", b"-0.0")


def m_json_number(rng: random.Random, data: bytes) -> bytes:
    numbers = list(re.finditer(rb'(?<=[:\[,\s])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?=[,\]}\s])', data))
    if not numbers:
        return data
    match = rng.choice(numbers)
    return data[:match.start()] + rng.choice(HOSTILE_JSON_NUMBERS) + data[match.end():]


def m_json_surrogate(rng: random.Random, data: bytes) -> bytes:
    strings = list(re.finditer(rb'"[^"\\]{1,200}"', data))
    if not strings:
        return data
    match = rng.choice(strings)
    cut = rng.randint(match.start() + 1, match.end() - 1)
    return data[:cut] + rng.choice([b"\\ud800", b"\\udfff", b"\\u0000", b"\\u202e"]) + data[cut:]


def m_json_deep(rng: random.Random, data: bytes) -> bytes:
    # a JSON member's value (": ") or a TOML key's ("= "): both decoders recurse per level
    values = list(re.finditer(rb'(?<=: |= )(?:-?\d[^,\n}]*|"[^"\n]*"|null|true|false)', data))
    if not values:
        return data
    match = rng.choice(values)
    depth = rng.choice([100, 5_000, 100_000])
    return data[:match.start()] + b"[" * depth + match.group(0) + b"]" * depth + data[match.end():]


def m_json_drop_key(rng: random.Random, data: bytes) -> bytes:
    keys = list(re.finditer(rb'"(fingerprint|run|time|id|machine|measurements|samples|checks|suites)": ', data))
    if not keys:
        return data
    match = rng.choice(keys)
    return data[:match.start() + 1] + b"x" + data[match.start() + 1:]  # the key renamed: as if missing


JSON_OPERATORS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "json-number": m_json_number, "json-number-2": m_json_number, "json-surrogate": m_json_surrogate,
    "json-deep": m_json_deep, "json-drop-key": m_json_drop_key,
}


def store_mutate(rng: random.Random, path: Path) -> str:
    """What happens to history stores: another tool's edits, a foreign trigger, an
    impossible time an older perfcheck accepted, overwritten pages."""
    op = rng.choice(["trigger", "time", "text-real", "drop-column", "pages", "user-version", "sqlite", "sqlite"])
    if op == "pages":
        data = bytearray(path.read_bytes())
        page = 4096
        for start in rng.sample(range(page, max(page + 1, len(data)), page), k=min(2, max(1, len(data) // page - 1))):
            data[start + rng.randint(0, 100):start + rng.randint(100, page)] = b"\xff" * 64
        path.write_bytes(bytes(data))
        return "store-pages"
    if op == "sqlite":
        return sqlite_mutate(rng, path)
    with contextlib.closing(sqlite3.connect(path)) as db:
        if op == "trigger":
            db.execute("CREATE TRIGGER planted AFTER INSERT ON runs BEGIN DELETE FROM results; END")
        elif op == "time":
            when = rng.choice(["1e12", "-1e12", "1e308", "'soon'"])
            db.execute(f"UPDATE runs SET time = {when} WHERE rowid = 1")
        elif op == "text-real":
            column = rng.choice(["value", "median", "spread", "low", "high", "n"])
            bad = rng.choice(["'fast'", "x'00ff'", "9e999", "-9e999"])
            db.execute(f"UPDATE results SET {column} = {bad}")
        elif op == "drop-column":
            db.execute(f"ALTER TABLE results DROP COLUMN {rng.choice(['spread', 'low', 'outcome'])}")
        else:
            db.execute(f"PRAGMA user_version = {rng.choice([0, 1, 99])}")
        db.commit()
    return f"store-{op}"


# ------------------------------------------------------------------------------------
# running and judging one case


class Hang(BaseException):
    """Raised by the alarm when a case outlasts its bound (a BaseException, so no
    ``except Exception`` in the code under test can swallow it)."""


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    def alarm(signum: int, frame: object) -> None:
        raise Hang()

    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    outcome: str  # ok | error | crash | wrong | leak | hang
    kind: str  # class of a bad outcome, for counting ("" when acceptable)
    detail: str = ""


def _strict_json(text: str) -> object:
    def refuse(token: str) -> object:
        raise ValueError(f"non-JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def _judge_inspect(doc: dict) -> list[str]:
    problems = []
    for kernel in doc.get("kernels", []):
        calls = kernel.get("calls")
        if calls is not None and (not isinstance(calls, int) or calls < 1):
            problems.append(f"calls {calls!r}")
        for name, value in kernel.get("metrics", {}).items():
            if value is None:
                continue
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                problems.append(f"metric {name} = {value!r}")
            elif value < 0:
                problems.append(f"negative {name}")
    for ceiling in doc.get("ceilings", []):
        value = ceiling.get("value")
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            problems.append(f"ceiling {ceiling.get('name')} = {value!r}")
    return problems


def _judge_peaks(doc: dict) -> list[str]:
    problems = []
    for name, value in doc.get("peaks", {}).items():
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            problems.append(f"peak {name} = {value!r}")
    for detail in doc.get("details", []):  # one figure the file reported: zero is a measurement
        value = detail.get("value")
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            problems.append(f"peak detail = {value!r}")
    return problems


def _crash_class(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "perfcheck" in f.filename]
    where = ""
    if frames:
        last = frames[-1]
        where = f" at {Path(last.filename).parent.name}/{Path(last.filename).name}:{last.name}"
    return f"{type(exc).__name__}{where}"


_WRAPPED = re.compile(r"\((TypeError|OverflowError|ValueError|KeyError|IndexError|AttributeError|ZeroDivisionError)\b")


def run_cli(argv: list[str], *, named: Path, judge: Callable[[dict], list[str]] | None, bound: float,
            ok_codes: tuple[int, ...] = (0,), said: tuple[str, ...] = ()) -> Outcome:
    """``perfcheck ARGV`` in-process, judged. ``named`` is what an error must name;
    ``judge`` None: the command prints no JSON to judge; ``ok_codes``: exit statuses
    of a success (``history detect`` exits 1 when it finds a regression); ``said``:
    the command's own progress lines on stderr (``perfcheck: digest: ...``)."""
    from perfcheck.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_debug = os.environ.get("PERFCHECK_DEBUG")
    os.environ["PERFCHECK_DEBUG"] = "1"  # internal errors propagate: we see their class
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_bound(bound):
                    code = main(argv)
            except Hang:
                return Outcome("hang", "hang", f"over {bound:g} s")
            except Exception as exc:  # noqa: BLE001 - that is what we are looking for
                return Outcome("crash", _crash_class(exc), f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        if old_debug is None:
            os.environ.pop("PERFCHECK_DEBUG", None)
        else:
            os.environ["PERFCHECK_DEBUG"] = old_debug
    leaked = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    if leaked:
        w = leaked[0]
        return Outcome("leak", f"{w.category.__name__} at {Path(w.filename).name}:{w.lineno}", str(w.message)[:200])
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    stray = [line for line in lines if not line.startswith(("perfcheck: warning: ", "perfcheck: error: ", *said))]
    if stray:
        return Outcome("leak", "stray stderr", stray[0][:200])
    errors = [line for line in lines if line.startswith("perfcheck: error: ")]
    if code == 2:
        if len(errors) != 1:
            return Outcome("crash", "exit 2 without one error line", err.getvalue()[-300:])
        if str(named) not in errors[0]:
            return Outcome("crash", "error not naming the input", errors[0][:300])
        wrapped = _WRAPPED.search(errors[0])
        # A Python exception a reader did not anticipate, turned into a one-line error by
        # the readers' safety net: acceptable, but counted (it names no line or column).
        return Outcome("error", f"wrapped {wrapped.group(1)}" if wrapped else "", errors[0][:300])
    if code not in ok_codes:
        return Outcome("crash", f"exit {code}", err.getvalue()[-300:])
    if judge is None:
        return Outcome("ok", "")
    try:
        doc = _strict_json(out.getvalue())
    except ValueError as exc:
        return Outcome("wrong", "not strict JSON", str(exc)[:200])
    problems = judge(doc)  # type: ignore[arg-type]
    if problems:
        first = re.sub(r"= .*", "", problems[0]).strip()
        return Outcome("wrong", first, "; ".join(problems[:5])[:300])
    return Outcome("ok", "")


@dataclass
class Case:
    index: int
    target: Target
    operators: list[str]
    outcomes: list[Outcome]
    seconds: float

    @property
    def worst(self) -> Outcome:
        for outcome in self.outcomes:
            if outcome.outcome not in ACCEPTABLE:
                return outcome
        return self.outcomes[0]


def run_case(targets: list[Target], index: int, seed: int, workdir: Path, *, bound: float = 20.0,
             profiles: Path = PROFILES) -> Case:
    rng = random.Random(f"{seed}:{index}")
    target = rng.choice(targets)
    case_dir = workdir / f"case{index}"
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    copy = case_dir / target.source.name
    if target.source.is_dir():
        shutil.copytree(target.source, copy)
    else:
        shutil.copyfile(target.source, copy)
    operators = mutate(rng, copy, target.kind)
    # A third of the profiles are read for a named GPU, so that damaged launch
    # resources also reach the occupancy rules and the theoretical ceilings.
    arch = ["--arch", rng.choice(ARCHES)] if rng.random() < 1 / 3 else []
    if arch:
        operators.append(f"arch={arch[1]}")
    started = time.perf_counter()
    outcomes = []
    if target.kind in ("results", "store"):
        operators[:] = [o for o in operators if not o.startswith("arch=")]
        outcomes += _history_case(target, copy, case_dir, bound)
    elif target.kind == "profile":
        outcomes.append(run_cli(["inspect", "--json", str(copy), *arch], named=copy, judge=_judge_inspect, bound=bound))
        if _has_timeline(target) and rng.random() < 0.5:
            operators.append("timeline")
            outcomes.append(run_cli(["inspect", "--timeline", "--json", str(copy)], named=copy, judge=_judge_timeline,
                                    bound=bound))
    else:
        outcomes.append(run_cli(["peaks", "--json", str(copy)], named=copy, judge=_judge_peaks, bound=bound))
        profile = profiles / PEAKS_PROFILE
        if profile.exists():
            outcomes.append(run_cli(["inspect", "--json", str(profile), "--peaks", str(copy)], named=copy,
                                    judge=_judge_inspect, bound=bound))
    return Case(index, target, operators, outcomes, time.perf_counter() - started)


def _has_timeline(target: Target) -> bool:
    """Whether the unmodified target is read by a timeline reader (inspect --timeline)."""
    from perfcheck.errors import PerfcheckError
    from perfcheck.ingest import detect
    from perfcheck.ingest.timeline import timeline_formats

    try:
        return detect(target.source, "profile").name in timeline_formats()
    except PerfcheckError:
        return False


def _judge_timeline(doc: dict) -> list[str]:
    """Every figure of the timeline is a finite, non-negative number (times, counts,
    bytes, rates), a percentage at most 100."""
    problems = []
    figures = [(d.get("metrics", {}), "device") for d in doc.get("devices", [])]
    figures += [(r.get("metrics", {}), f"range {r.get('range')!r}") for r in doc.get("ranges", [])]
    figures += [({f"{name}.{k}": v for k, v in spread.items() if k in ("min", "median", "max")}, "ranks")
                for name, spread in doc.get("ranks", {}).items() if isinstance(spread, dict)]
    for metrics, where in figures:
        for name, value in metrics.items():
            if value is None:
                continue
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                problems.append(f"{where} {name} = {value!r}")
            elif value < 0:
                problems.append(f"negative {name}")
            elif name.split(".")[0].endswith("_pct") and value > 100 + 1e-6:
                problems.append(f"{name} over 100%")
    return problems


def _judge_listing(doc: dict) -> list[str]:
    runs = doc.get("runs")
    return [] if isinstance(runs, list) else ["no runs list"]


def _judge_detect(doc: dict) -> list[str]:
    problems = []
    for point in doc.get("change_points", []):
        for name in ("before", "after", "change_pct", "p", "time"):
            value = point.get(name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                problems.append(f"change point {name} = {value!r}")
    return problems


# what history commands report on stderr besides warnings and errors
_HISTORY_SAID = ("perfcheck: notice: ", "perfcheck: digest: ", "perfcheck: Bencher: ", "perfcheck: OpenMetrics: ")


def _history_case(target: Target, copy: Path, case_dir: Path, bound: float) -> list[Outcome]:
    """A results file: added to a fresh store, whose reading and exports must then
    work (a value ``add`` accepted must never break a later command). A store: every
    reading command."""
    readers = [
        (["history", "list", "--json"], _judge_listing, (0,)),
        (["history", "detect", "--json"], _judge_detect, (0, 1)),
        (["history", "report", "--markdown", str(case_dir / "digest.md")], None, (0,)),
        (["history", "export", "--bencher", str(case_dir / "bencher"), "--openmetrics", str(case_dir / "m.txt")], None, (0,)),
    ]
    if target.kind == "results":
        store = case_dir / "fresh.sqlite"
        added = run_cli(["history", "add", str(copy), "--history", str(store)], named=copy, judge=None, bound=bound,
                        said=_HISTORY_SAID)
        if added.outcome != "ok":
            return [added]
        return [added, *(run_cli([*argv, "--history", str(store)], named=store, judge=judge, bound=bound,
                                 ok_codes=codes, said=_HISTORY_SAID) for argv, judge, codes in readers)]
    return [run_cli([*argv, "--history", str(copy)], named=copy, judge=judge, bound=bound, ok_codes=codes,
                    said=_HISTORY_SAID) for argv, judge, codes in readers]


@dataclass
class Report:
    cases: list[Case] = field(default_factory=list)

    @property
    def bad(self) -> list[Case]:
        return [c for c in self.cases if c.worst.outcome not in ACCEPTABLE]

    def counts(self) -> Counter:
        return Counter(c.worst.outcome for c in self.cases)

    def classes(self) -> Counter:
        return Counter(f"{c.worst.outcome}: {c.worst.kind}" for c in self.bad)

    def summary(self, seed: int, examples: int = 3) -> str:
        lines = [f"{len(self.cases)} cases (seed {seed}): " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts().items()))]
        wrapped = Counter(o.kind for c in self.cases for o in c.outcomes if o.outcome == "error" and o.kind)
        if wrapped:
            lines.append("  clean errors wrapping a Python exception: " + ", ".join(f"{k} {v}" for k, v in wrapped.most_common()))
            shown = [(c, o) for c in self.cases for o in c.outcomes if o.outcome == "error" and o.kind][:examples]
            for c, o in shown:
                lines.append(f"         case {c.index}: {c.target.relative} [{', '.join(c.operators)}] {o.detail[-200:]}")
        for cls, n in self.classes().most_common():
            lines.append(f"  {n:5d}  {cls}")
            shown = [c for c in self.bad if f"{c.worst.outcome}: {c.worst.kind}" == cls][:examples]
            for c in shown:
                lines.append(f"         case {c.index}: {c.target.relative} [{', '.join(c.operators)}] {c.worst.detail[:160]}")
        return "\n".join(lines)


def run(cases: int, seed: int, workdir: Path, *, start: int = 0, bound: float = 20.0, keep: bool = False,
        profiles: Path = PROFILES, progress: bool = False) -> Report:
    targets = corpus(profiles, scratch=workdir)
    report = Report()
    for index in range(start, start + cases):
        case = run_case(targets, index, seed, workdir, bound=bound, profiles=profiles)
        report.cases.append(case)
        if not keep:
            shutil.rmtree(workdir / f"case{index}", ignore_errors=True)
        if progress and (index - start + 1) % 500 == 0:
            print(f"... {index - start + 1} cases", file=sys.stderr)
    return report


def _main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="fuzz perfcheck with mutations of the real inputs")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--case", type=int, help="run only this case (with --keep to look at its input)")
    parser.add_argument("--keep", metavar="DIR", help="keep the mutated inputs in DIR")
    parser.add_argument("--bound", type=float, default=20.0, help="seconds per case before it counts as a hang")
    args = parser.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="perfcheck-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if args.case is not None:
        report = run(1, args.seed, work, start=args.case, bound=args.bound, keep=True)
        case = report.cases[0]
        print(f"case {case.index}: {case.target.relative} [{', '.join(case.operators)}] -> {work / f'case{case.index}'}")
        for outcome in case.outcomes:
            print(f"  {outcome.outcome} {outcome.kind} {outcome.detail}")
    else:
        report = run(args.cases, args.seed, work, bound=args.bound, keep=bool(args.keep), progress=True)
        print(report.summary(args.seed))
    print(f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if report.bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(_main())
