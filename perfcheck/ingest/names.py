"""One spelling for demangled kernel names, whichever NVIDIA tool wrote them.

The tools demangle the same symbol differently. Nsight Systems and Nsight Compute
(NVIDIA's demangler, as ``cu++filt`` prints) write non-type template arguments
with a cast and anonymous namespaces as ``<unnamed>``; PyTorch's profiler (Kineto,
the GNU demangler, as ``c++filt`` prints) writes literals and ``(anonymous
namespace)``; nvprof writes ``<int=32>``. Seen in the real files:

=====================================================  ======================================================
Nsight Systems 2025.1 / Nsight Compute                 Kineto (GNU ``c++filt``)
=====================================================  ======================================================
``at::native::<unnamed>::kernel<float, (int)4, ...>``  ``at::native::(anonymous namespace)::kernel<float, 4, ...>``
``std::array<char *, (unsigned long)2>``               ``std::array<char*, 2ul>``
``[lambda(float) (instance 1)]``                       ``{lambda(float)#1}``
``at::TensorIteratorBase &``, ``operator ()()``        ``at::TensorIteratorBase&``, ``operator()()``
``Array<char *, 1>>`` (and 2023 Kineto: ``1> >``)      ``Array<char*, 1>>``
nvprof: ``matrixMulCUDA<int=32>``                      ``matrixMulCUDA<32>``
=====================================================  ======================================================

``gnu_style`` rewrites the left column into the right one, so that one kernel has
one display name across formats and a pattern written against one tool's output
matches the others'. This is display-name normalisation only: it keeps every
part of the name (clone and hash suffixes are the business of the baseline key).
What it cannot undo: NVIDIA's demangler prints a function template's parameter
list unexpanded (``(int, T2, T3)``) where GNU expands it.

Integer literal suffixes follow the Itanium C++ ABI demangling GNU uses
(``4ul``, ``4l``, ``4u``, ``4ll``, ``4ull``; ``int`` has none; ``bool`` prints
``true``/``false``); a cast to any other type is left as written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from perfcheck.documents import bounded, json_loads
from perfcheck.errors import InputError
from perfcheck.ingest.formats import ProfileScanner, Scan, Want

# GNU demangler suffix of an integer literal per type (libiberty cp-demangle.c, d_print_comp
# for DEMANGLE_COMPONENT_LITERAL: the builtin types with a print suffix).
_SUFFIX = {
    "int": "",
    "unsigned int": "u",
    "unsigned": "u",
    "long": "l",
    "unsigned long": "ul",
    "long long": "ll",
    "unsigned long long": "ull",
}
_TYPES = "|".join(sorted((re.escape(t) for t in _SUFFIX), key=len, reverse=True))
# NVIDIA: "(unsigned long)2" after "<" or ", "; nvprof: "unsigned long=2".
_CAST = re.compile(rf"(?<=[<,\s])\((?P<type>{_TYPES})\)(?P<value>-?\d+)(?=[,>\s])")
_EQUALS = re.compile(rf"(?<=[<,\s])(?P<type>{_TYPES})=(?P<value>-?\d+)(?=[,>])")
_BOOL = re.compile(r"(?<=[<,\s])\(bool\)(?P<value>[01])(?=[,>\s])")
_LAMBDA = re.compile(r"\[lambda(?P<args>\([^()]*\)) \(instance (?P<n>\d+)\)\]")
# "T1 *", "char *", "Base &", "T &&": GNU puts no space before a pointer or reference.
_POINTER = re.compile(r"(?<=[\w>\]\)]) +(?=[*&])")
_OPERATOR_CALL = re.compile(r"\boperator \(\)")
# Older GNU demanglers (Kineto 2023) close nested templates "> >", newer ones and NVIDIA's ">>".
_CLOSE = re.compile(r"(?<=>) +(?=>)")


def _literal(match: re.Match[str]) -> str:
    return match.group("value") + _SUFFIX[match.group("type")]


def gnu_style_one(name: str) -> str:
    """``name`` as the GNU demangler spells it (see the module docstring)."""
    if not any(c in name for c in "(<[=&*"):
        return name  # plain C names ("softmax_kernel", "nvjet_tst_..."): the common fast case
    name = name.replace("<unnamed>", "(anonymous namespace)")
    name = _CAST.sub(_literal, name)
    name = _EQUALS.sub(_literal, name)
    name = _BOOL.sub(lambda m: "true" if m.group("value") == "1" else "false", name)
    name = _LAMBDA.sub(lambda m: "{lambda" + m.group("args") + "#" + m.group("n") + "}", name)
    name = _OPERATOR_CALL.sub("operator()", name)
    name = _CLOSE.sub("", name)
    return _POINTER.sub("", name)



# JSON may escape half of a surrogate pair alone ("\ud800"): Python decodes it to a
# lone surrogate, which no UTF-8 writer (pandas' pyarrow strings, every report) can
# encode, so one such name made a whole trace unreadable.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def readable(value: object) -> object:
    """A string with lone surrogates shown as U+FFFD (the rest as written); lists and
    objects walked; anything else returned as it is."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if isinstance(value, list):
        return [readable(v) for v in value]
    if isinstance(value, dict):
        return {readable(k): readable(v) for k, v in value.items()}
    return value


def json_document(path: Path, data: bytes, *, cut_hint: str, kind_hint: str) -> object:
    """The JSON document in ``data`` (the bytes of ``path``) with every lone surrogate
    shown as U+FFFD; malformed JSON or text is a located InputError (``cut_hint``:
    what a cut-off file means for this tool; ``kind_hint``: which file it should be).
    The surrogate walk is done only when the bytes hold a surrogate escape at all
    (rare), so a large trace costs one scan of its bytes."""
    try:
        doc = json_loads(data, path, hint=kind_hint)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno,
                         hint=cut_hint) from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text ({exc.reason})", hint=kind_hint) from None
    if not _SURROGATE_ESCAPE.search(data):
        return doc
    with bounded(path, "JSON", hint=kind_hint):  # the walk recurses as deep as the document nests
        return readable(doc)


def gnu_style(names: pd.Series) -> pd.Series:
    """Vectorised over a name column: each distinct name is rewritten once (a trace
    has millions of dispatches of a few hundred kernels); categorical columns keep
    their codes and get rewritten categories."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        renamed = [gnu_style_one(str(c)) for c in names.cat.categories]
        if len(set(renamed)) == len(renamed):
            return names.cat.rename_categories(renamed)
        names = names.astype("string")  # two spellings of one name: merge them
    distinct = pd.unique(names.dropna())
    mapping = {n: gnu_style_one(str(n)) for n in distinct}
    return names.map(mapping).astype("string")


def gnu_named(scan: ProfileScanner) -> ProfileScanner:
    """A reader's scanner whose chunks' kernel names are spelled by ``gnu_style``:
    wraps the scanners of readers that take names as NVIDIA's tools wrote them."""

    def wrapped(path: Path, want: Want) -> Scan:
        result = scan(path, want)
        result.chunks = (_respelled(chunk) for chunk in result.chunks)
        return result

    wrapped.__name__ = getattr(scan, "__name__", "scan")
    wrapped.__doc__ = scan.__doc__
    return wrapped


def _respelled(chunk: pd.DataFrame) -> pd.DataFrame:
    if "kernel" in chunk.columns:
        chunk["kernel"] = gnu_style(chunk["kernel"])
    return chunk
