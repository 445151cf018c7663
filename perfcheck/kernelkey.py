"""A kernel's identity across builds and toolchains: the canonical key under which
its baseline (and history) is kept, so a rebuild does not turn it into a new kernel.

The key is the kernel's (demangled) name with everything a build adds taken away:

* code-object and clone suffixes: ``.kd`` and `` [clone .kd]`` (AMD kernel
  descriptors: rocprof v1, Omniperf 1.x), `` (.kd)`` (Omniperf 2.0 on MI300X),
  `` [clone .cold]``, `` [clone .constprop.0]``, `` [clone .isra.0]`` (GCC/Clang
  clones: ``.cold`` holds the unlikely part of a split function);
* compiler hash and uniqueness suffixes: ``.llvm.1234567890`` (ThinLTO promotes
  internal symbols with the module hash), ``.__uniq.12345...`` (Clang
  ``-funique-internal-linkage-names``), ``$1`` (ptxas's numbered clones);
* nvcc's file-static prefix ``__nv_static_27__14_coords_cpp1_ii_7126c51d_``
  (``__nv_static_<n>__<len>_<file>_<hash8>_``: the translation unit's hash, which
  changes when the file does) and the ``_GLOBAL__N_<hash>`` spelling of an anonymous
  namespace;
* spelling: c++filt's (runs of white space become one space, ``", "`` between
  arguments, none inside brackets or before ``*``/``&``, ``>>`` for ``> >``: so
  ``foo<int,4>(float *)`` is ``foo<int, 4>(float*)``), ``(anonymous namespace)`` and
  ``{anonymous}`` and ``<unnamed>`` are one spelling, integer template arguments
  lose their casts and suffixes (``<(int)4>``, ``<4u>``, ``<4>`` are ``<4>``).

Lambda numbering (``{lambda()#1}``, ``{lambda(int)#2}``) is kept as the compiler
writes it: it is stable for an unchanged source order, and dropping it would merge
different lambdas of one function.

This is a ground-floor module (no perfcheck imports): baselines and history both
key on it. The display name in reports stays the profile's own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_SUFFIXES = re.compile(
    r"(?:"
    r"\s*\[clone \.[A-Za-z_][\w.]*\]"  # [clone .kd], [clone .cold], [clone .constprop.0]
    r"|\s*\(\.kd\)"  # Omniperf 2.0 on MI300X
    r"|\.kd"  # AMD kernel descriptor symbol
    r"|\.llvm\.\d+"  # ThinLTO
    r"|\.__uniq\.\d+"  # -funique-internal-linkage-names
    r"|\$\d+"  # ptxas clone numbering
    r")+$"
)
# __nv_static_<n>__<len>_<file>_<hash8>_ before a file-static (internal linkage) name.
_NV_STATIC = re.compile(r"__nv_static_\d+__(?:\d+_)?\w*?_[0-9a-f]{8}_")
_GLOBAL_N = re.compile(r"_GLOBAL__N_\w*")
_ANONYMOUS = re.compile(r"\(anonymous namespace\)|\{anonymous\}|<unnamed>")
_SPACE = re.compile(r"\s+")
# c++filt's spelling: ", " between arguments, nothing inside the brackets, "T*".
_NO_SPACE_BEFORE = re.compile(r"\s+([,)>*&])")
_NO_SPACE_AFTER = re.compile(r"([(<])\s+")
_COMMA = re.compile(r",(?=\S)")
_CLOSING = re.compile(r">\s+>")
# (int)4, (unsigned int)4u, 4u, 4ul, 4ll -> 4 inside template arguments: the first one
# (after "<") and every later one (after ", ", as _COMMA has spelled it by then).
_ARG_START = r"(?:(?<=<)|(?<=, ))"
_INT_ARG = re.compile(_ARG_START + r"\((?:unsigned |signed )?(?:char|short|int|long|long long|unsigned|size_t)\)(-?\d+)"
                      r"|" + _ARG_START + r"(-?\d+)(?:[uU](?:ll?|LL?)?|ll?|LL?)(?=[,>])")
ANONYMOUS = "(anonymous namespace)"


def kernel_key(name: str) -> str:
    """The canonical key of a kernel name (see the module docstring)."""
    key = _SPACE.sub(" ", str(name)).strip()
    previous = None
    while previous != key:  # "k [clone .cold].llvm.42" sheds both
        previous = key
        key = _SUFFIXES.sub("", key).rstrip()
    key = _NV_STATIC.sub("", key)
    key = _ANONYMOUS.sub(ANONYMOUS, key)
    key = _GLOBAL_N.sub(ANONYMOUS, key)
    key = _NO_SPACE_AFTER.sub(r"\1", _NO_SPACE_BEFORE.sub(r"\1", key))
    while _CLOSING.search(key):
        key = _CLOSING.sub(">>", key)
    key = _COMMA.sub(", ", key)
    key = _INT_ARG.sub(lambda m: m.group(1) or m.group(2), key)
    return key


def resolve(name: str, aliases: Mapping[str, str] | None = None) -> str:
    """The key ``name`` is kept under: its own key, or, when ``aliases`` (old name ->
    new name, from the config) renames it, the new name's key. Aliases are compared
    by key, so either spelling of a name works in the config."""
    key = kernel_key(name)
    if aliases:
        renamed = {kernel_key(old): kernel_key(new) for old, new in aliases.items()}
        seen = {key}
        while key in renamed and renamed[key] not in seen:  # a -> b -> c, never a loop
            key = renamed[key]
            seen.add(key)
    return key


class KernelMap(dict):  # type: ignore[type-arg]
    """Entries by kernel key: built from any mapping of kernel names (raw names of an
    older file are migrated to their keys as it is read), looked up by any spelling
    of a name. Where two stored names share a key, the entry merged from more runs
    wins (``runs``, when the entries have it)."""

    def __init__(self, entries: Mapping[str, object] | None = None,
                 aliases: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.aliases: dict[str, str] = dict(aliases or {})
        for name, entry in (entries or {}).items():
            key = resolve(name, self.aliases)
            if key in self.keys() and getattr(super().__getitem__(key), "runs", 0) >= getattr(entry, "runs", 0):
                continue
            super().__setitem__(key, entry)

    def key(self, name: object) -> str:
        return resolve(str(name), self.aliases)

    def __getitem__(self, name: object) -> object:
        return super().__getitem__(self.key(name))

    def __contains__(self, name: object) -> bool:
        return super().__contains__(self.key(name))

    def get(self, name: object, default: object = None) -> object:
        return super().get(self.key(name), default)
