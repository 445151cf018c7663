"""Itanium C++ names demangled the way every other reader's names are spelt (GNU).

Proton writes kernel names as the driver hands them over, mangled
(``_ZN2at6native13reduce_kernel...``), while ncu, nsys and Kineto write them
demangled; ``perfcheck.ingest.names.gnu_style`` brings those to GNU's spelling. So
the same kernel gets the same key from every tool, Proton's names go through the
GNU demangler itself: ``abi::__cxa_demangle`` of the C++ runtime (libstdc++, which
is libiberty's cp-demangle, the code ``c++filt`` runs), called through ctypes.

Why no dependency: the ``cxxfilt`` package does exactly this ctypes call (and was
last released in 2021); the call is a dozen lines, and the library is on every
machine that runs pandas/pyarrow wheels (they link libstdc++). Where it cannot be
loaded, the ``c++filt`` program is used when it is on PATH; else names stay
mangled and the reader says so once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil
import subprocess
from collections.abc import Sequence
from functools import lru_cache

# An Itanium-mangled name: _Z, then an encoding (vendor prefixes such as "__Z" on
# Apple and the "_GLOBAL__" constructors are no kernel names).
MANGLED_PREFIX = "_Z"


@lru_cache(maxsize=1)
def _runtime() -> tuple[object, object] | None:
    """(__cxa_demangle, free) from the C++ runtime, or None when it cannot be loaded."""
    for name in (ctypes.util.find_library("stdc++"), "libstdc++.so.6", ctypes.util.find_library("c++")):
        if not name:
            continue
        try:
            runtime = ctypes.CDLL(name)
            demangle = runtime.__cxa_demangle
        except (OSError, AttributeError):
            continue
        # char *__cxa_demangle(const char *mangled, char *buf, size_t *n, int *status):
        # a malloc'd string the caller frees (Itanium C++ ABI, section 3.4).
        demangle.restype = ctypes.c_void_p
        demangle.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                             ctypes.POINTER(ctypes.c_int)]
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free.restype = None
        return demangle, libc.free
    return None


def _with_runtime(names: Sequence[str], demangle, free) -> list[str]:  # noqa: ANN001 - ctypes functions
    out = []
    status = ctypes.c_int()
    for name in names:
        pointer = demangle(name.encode("utf-8", errors="replace"), None, None, ctypes.byref(status))
        if pointer and status.value == 0:
            try:
                out.append(ctypes.string_at(pointer).decode("utf-8", errors="replace"))
            finally:
                free(pointer)
        else:  # status -2: not a valid mangled name; keep it as written
            out.append(name)
    return out


def _with_program(names: Sequence[str]) -> list[str] | None:
    """c++filt, one name per line (it prints what it cannot demangle unchanged)."""
    program = shutil.which("c++filt")
    if program is None:
        return None
    try:
        done = subprocess.run([program], input="\n".join(names) + "\n", capture_output=True, text=True,
                              timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split("\n")[: len(names)]
    return lines if len(lines) == len(names) else None


def demangle(names: Sequence[str]) -> tuple[list[str], bool]:
    """``names`` with every Itanium-mangled one demangled (GNU spelling), and whether
    a demangler was available; names that are not mangled come back unchanged."""
    mangled = sorted({n for n in names if n.startswith(MANGLED_PREFIX)})
    if not mangled:
        return list(names), True
    runtime = _runtime()
    done = _with_runtime(mangled, *runtime) if runtime is not None else _with_program(mangled)
    if done is None:
        return list(names), False
    table = dict(zip(mangled, done))
    return [table.get(n, n) for n in names], True
