"""Expectations: the small language users write per kernel, and their evaluation.

Grammar (parsed by hand, never ``eval``-ed)::

    expectation := metric REL rhs
                 | bound REL metric REL bound        two-sided: "1 ms <= duration <= 2 ms"
    rhs         := bound
                 | number "%" "of" ("peak" | CEILING)   "hbm_bw >= 85% of peak"
                 | "baseline" [("+" | "-") number [UNIT]]  "duration <= baseline + 5%"
    bound       := number [UNIT]                      "2.7 ms", "75%", "0", "1.2 TB/s"
    REL         := ">=" | "<=" | ">" | "<" | "==" | "!="

Numbers with a unit are converted to the metric's base unit (``2.7 ms`` -> 0.0027 s;
``GB/s`` is 1e9 B/s, ``GiB`` 2**30 B); a unit of the wrong kind is an error that
points at it. ``occupancy >= 75%`` compares the percentage metric itself;
``hbm_bw >= 85% of peak`` compares against 85% of the kernel's ceiling for that
metric (empirical when peaks were given, else theoretical; the check says which).
Kernel patterns are globs (``EOClover*``) or regular expressions (``re:^EO.*GPU$``
or ``/^EO.*GPU$/``) matched against the whole demangled name.

``bw`` is the kernel's main-memory bandwidth, resolved per kernel when checked:
``mem_bw`` (a CPU's DRAM, ``perf.measure`` on ``device="cpu"``) when the kernel has
it, else ``hbm_bw`` (a GPU's device memory). So ``"bw >= 50% of peak"`` reads the
same for a NumPy kernel and a GPU kernel; the check names the metric it used.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from perfcheck.errors import UsageError
from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, Check
from perfcheck.schema import METRIC_UNITS, PEAK_UNITS, RANK_SPREAD_METRICS, TIMELINE_METRICS, metric_unit
from perfcheck.units import format_value

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis
    from perfcheck.baseline import Baseline

RELATIONS = (">=", "<=", "==", "!=", ">", "<")
_FLIP = {">=": "<=", "<=": ">=", ">": "<", "<": ">", "==": "==", "!=": "!="}

# Friendly names users write -> canonical metrics.
ALIASES = {
    "occupancy": "occupancy_pct",
    "achieved_occupancy": "achieved_occupancy_pct",
    "time": "duration",
    "spills": "scratch_per_thread",
    "scratch": "scratch_per_thread",
    "lds": "lds_per_workgroup",
    "shared": "lds_per_workgroup",
    # timeline metrics ("@run"), as the issue and HTA's users say them
    "gpu_busy": "gpu_busy_pct",
    "comm_share": "comm_share_pct",
}

# Names that stand for a different metric per kernel (see the module docstring):
# the first of the candidates the kernel has a value for, else the last.
PER_KERNEL: dict[str, tuple[str, ...]] = {"bw": ("mem_bw", "hbm_bw")}


def metric_unit_of(metric: str) -> str:
    """metric_unit, also for the per-kernel names (all candidates share a unit)."""
    return metric_unit(PER_KERNEL.get(metric, (metric,))[0])


_unit = metric_unit_of


def _resolve(metric: str, row: Mapping[str, object]) -> str:
    candidates = PER_KERNEL.get(metric)
    if candidates is None:
        return metric
    return next((m for m in candidates if _value(row, m) is not None), candidates[-1])


# Metrics derived by metrics.roofline and metrics.summary, beyond the quantities of
# metrics.counters and the registry in schema (checked at parse time so a typo is
# caught before any profile is read).
_DERIVED = (
    "hbm_bw", "l2_bw", "l1_bw", "lds_bw",
    "hbm_bw_pct", "l2_bw_pct", "l1_bw_pct", "lds_bw_pct",
    "ai_hbm", "ai_l2", "ai_l1", "ai_lds",
    "mem_bw", "mem_bw_pct", "ai_mem", *PER_KERNEL,
    "flop_rate", "attainable", "roofline_pct",
    "instruction_rate", "gips", "peak_gips", "gips_pct", "instruction_intensity_hbm",
    "occupancy_pct", "achieved_occupancy_pct", "waves_per_cu", "warps_per_sm", "workgroups_per_cu",
    "duration", "duration_mean", "duration_min", "duration_max", "duration_total", "calls",
    "vgpr", "agpr", "sgpr", "registers", "lds_per_workgroup", "scratch_per_thread", "workgroup_size", "grid_size",
)


def known_metrics() -> tuple[str, ...]:
    from perfcheck.metrics.counters import QUANTITIES

    return tuple(dict.fromkeys((*_DERIVED, *METRIC_UNITS, *QUANTITIES, *TIMELINE_METRICS, *RANK_SPREAD_METRICS)))


# The ceiling "of peak" refers to, per metric. flop_rate uses the kernel's own
# compute ceiling (the precision class that dominates its FLOPs).
_PEAK_OF = {
    "hbm_bw": "hbm_bw",
    "mem_bw": "mem_bw",
    "l2_bw": "l2_bw",
    "l1_bw": "l1_bw",
    "lds_bw": "lds_bw",
    "gips": "gips",
    "instruction_rate": "gips",
}
# The metrics "N% of peak" applies to.
PEAK_METRICS: tuple[str, ...] = (*_PEAK_OF, *PER_KERNEL, "flop_rate")

# Unit words -> (factor to base unit, base unit).
_UNITS: dict[str, tuple[float, str]] = {
    "%": (1.0, "%"),
    "ns": (1e-9, "s"), "us": (1e-6, "s"), "µs": (1e-6, "s"), "ms": (1e-3, "s"), "s": (1.0, "s"),
    "B": (1.0, "B"), "KB": (1e3, "B"), "kB": (1e3, "B"), "MB": (1e6, "B"), "GB": (1e9, "B"), "TB": (1e12, "B"),
    "KiB": (2.0**10, "B"), "MiB": (2.0**20, "B"), "GiB": (2.0**30, "B"), "TiB": (2.0**40, "B"),
    "B/s": (1.0, "B/s"), "KB/s": (1e3, "B/s"), "kB/s": (1e3, "B/s"), "MB/s": (1e6, "B/s"),
    "GB/s": (1e9, "B/s"), "TB/s": (1e12, "B/s"),
    "KiB/s": (2.0**10, "B/s"), "MiB/s": (2.0**20, "B/s"), "GiB/s": (2.0**30, "B/s"), "TiB/s": (2.0**40, "B/s"),
    "FLOP": (1.0, "FLOP"), "MFLOP": (1e6, "FLOP"), "GFLOP": (1e9, "FLOP"), "TFLOP": (1e12, "FLOP"),
    "FLOP/s": (1.0, "FLOP/s"), "MFLOP/s": (1e6, "FLOP/s"), "GFLOP/s": (1e9, "FLOP/s"),
    "TFLOP/s": (1e12, "FLOP/s"), "PFLOP/s": (1e15, "FLOP/s"),
    "FLOP/B": (1.0, "FLOP/B"),
    # integer matrix-core operations (mfma_iops_int8)
    "OP": (1.0, "OP"), "GOP": (1e9, "OP"), "TOP": (1e12, "OP"),
    # instructions: instruction_rate in instructions per second, gips in 10**9 of them
    "inst/s": (1.0, "inst/s"), "Minst/s": (1e6, "inst/s"), "Ginst/s": (1e9, "inst/s"), "Tinst/s": (1e12, "inst/s"),
    "GIPS": (1.0, "GIPS"),
    "inst/B": (1.0, "inst/B"),
    # latencies the analyzer reports in shader-clock cycles (vmem_latency, ...)
    "cycles": (1.0, "cycles"),
    # the clocks a kernel ran at (sm_clock, mem_clock)
    "Hz": (1.0, "Hz"), "kHz": (1e3, "Hz"), "MHz": (1e6, "Hz"), "GHz": (1e9, "Hz"),
}

# Metrics of these units are plain numbers (counts of calls, registers, instructions,
# waves; ratios such as rank_imbalance): a bare number is their value. Every other
# metric has a unit, and a threshold or allowance on it must say it.
DIMENSIONLESS = ("count", "")

# The units a "give the unit" error proposes, per base unit: the base unit first (what
# a bare number meant before units were required), then a usual one.
_SUGGESTED_UNITS: dict[str, tuple[str, ...]] = {
    "s": ("s", "ms"), "B": ("B", "MiB"), "B/s": ("B/s", "GB/s"), "FLOP": ("FLOP", "GFLOP"),
    "FLOP/s": ("FLOP/s", "TFLOP/s"), "FLOP/B": ("FLOP/B",), "OP": ("OP", "GOP"),
    "inst/s": ("inst/s", "Ginst/s"), "GIPS": ("GIPS",), "inst/B": ("inst/B",), "%": ("%",),
    "cycles": ("cycles",),
    "Hz": ("Hz", "MHz"),
}

# No metric perfcheck computes comes near this in base units (an exascale machine's
# FLOP/s is 1e18): a larger threshold is a typo, and one past a double's range is inf.
ABSURD = 1e30
# Percentages: of a ceiling, of a baseline, or a _pct metric's own value.
MAX_PERCENT = 1000.0


def units_of(unit: str) -> tuple[str, ...]:
    """The unit words a threshold on a metric in ``unit`` (its base unit) may use."""
    return tuple(word for word, (_, base) in _UNITS.items() if base == unit)


class ExpectationError(UsageError):
    """A malformed expectation. ``str()`` is one line naming the column; ``pointer``
    is the expectation with a caret under the offending character (for pytest)."""

    def __init__(self, text: str, position: int, what: str) -> None:
        self.text, self.position, self.what = text, position, what
        self.pointer = f"{text}\n{' ' * position}^"
        super().__init__(f"expectation {text!r}, column {position + 1}: {what}")


@dataclass(frozen=True)
class Expectation:
    text: str
    metric: str
    relation: str
    kind: str  # "absolute" | "of_peak" | "baseline"
    value: float | None  # absolute: threshold (base units); of_peak: fraction; baseline: relative change
    absolute_delta: float | None = None  # baseline: allowance in base units ("baseline + 0.1 ms")
    ceiling: str | None = None  # of_peak: the ceiling named ("peak" -> the metric's own)


# --- tokenizer -------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
      | (?P<rel>>=|<=|==|!=|>|<)
      | (?P<sign>[+-])
      | (?P<percent>%)
      | (?P<word>[A-Za-zµ_][A-Za-z0-9µ_.]*(?:/[A-Za-z]+)?)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            hint = " (compare with ==)" if text[pos] == "=" else ""
            raise ExpectationError(text, pos, f"unexpected character {text[pos]!r}{hint}")
        kind = match.lastgroup or ""
        start = match.start(kind)
        out.append(_Tok(kind, match.group(kind), start))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok | None:
        tok = self.peek()
        self.i += tok is not None
        return tok

    def fail(self, what: str, tok: _Tok | None = None) -> ExpectationError:
        pos = tok.pos if tok is not None else len(self.text)
        return ExpectationError(self.text, pos, what)

    def expect(self, kind: str, what: str) -> _Tok:
        tok = self.take()
        if tok is None or tok.kind != kind:
            raise self.fail(f"expected {what}" + (f", found {tok.text!r}" if tok else " at the end"), tok)
        return tok

    def metric(self) -> str:
        tok = self.expect("word", "a metric name such as hbm_bw, duration or occupancy")
        name = ALIASES.get(tok.text, tok.text)
        known = known_metrics()
        if name not in known:
            close = difflib.get_close_matches(tok.text, [*known, *ALIASES], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known metrics: {', '.join(sorted(known))}"
            raise self.fail(f"unknown metric {tok.text!r}{hint}", tok)
        return name

    def number(self, what: str) -> tuple[float, _Tok]:
        """A number token; one past a double's range (``1e999``) is an error, not inf."""
        tok = self.expect("number", what)
        value = float(tok.text)
        if not math.isfinite(value):
            raise self.fail(f"{tok.text} is not a finite number (beyond a double's range): write a finite threshold", tok)
        return value, tok

    def unit_token(self) -> _Tok | None:
        """The unit after a number, if one follows ('of' and 'baseline' are words of the grammar)."""
        nxt = self.peek()
        if nxt is not None and nxt.kind in ("percent", "word") and nxt.text not in ("of", "baseline"):
            return self.take()
        return None

    def _suggest(self, tok: _Tok, metric: str, relative: bool) -> str:
        """The expectation again with a unit after ``tok``'s number, for a missing unit."""
        unit = _unit(metric)
        end = tok.pos + len(tok.text)
        value = float(tok.text)
        options = []
        if relative:
            options.append("%")
        if unit == "%" and not relative and 0 < abs(value) <= 1:
            # "occupancy >= 0.4": the writer most likely meant a fraction
            options.append(f"{value * 100:g}%" if tok.text[0] not in "+-" else "%")
        options.extend(u for u in _SUGGESTED_UNITS.get(unit, (unit,)) if u not in options)
        shown = []
        for option in options:
            if option.endswith("%") and option != "%":  # a rewritten number ("40%")
                shown.append(self.text[: tok.pos] + option + self.text[end:])
            else:
                shown.append(self.text[:end] + ("" if option == "%" else " ") + option + self.text[end:])
        return " or ".join(repr(s) for s in dict.fromkeys(shown))

    def missing_unit(self, tok: _Tok, metric: str, relative: bool) -> ExpectationError:
        unit = _unit(metric)
        if relative:
            what = f"a baseline allowance needs % or a unit of {metric}, which is in {_describe(unit)}"
        elif unit == "%":
            what = f"{metric} is a percentage (0-100), so the number needs %"
        else:
            what = f"{metric} is in {_describe(unit)}, so the number needs a unit"
        return self.fail(f"{what}: write {self._suggest(tok, metric, relative)}", tok)

    def threshold(self, value: float, tok: _Tok, unit_tok: _Tok | None, metric: str) -> float:
        """An absolute threshold in ``metric``'s base unit: the number must carry a unit
        of the metric unless the metric is a plain count, and be a sane value."""
        if unit_tok is None:
            # 0 is 0 in every unit ("scratch_per_thread == 0": no spills)
            if _unit(metric) not in DIMENSIONLESS and value != 0:
                raise self.missing_unit(tok, metric, relative=False)
            result = value
        elif unit_tok.kind == "percent":
            if _unit(metric) != "%":
                raise self.fail(
                    f"{metric} is in {_describe(_unit(metric))}, not a percentage: write "
                    f"'{value:g}% of peak' or 'baseline + {value:g}%'"
                    + (f", or compare {metric}_pct" if f"{metric}_pct" in known_metrics() else ""),
                    unit_tok,
                )
            result = value
        else:
            result = self._convert(value, unit_tok, metric)
        if result < 0:
            raise self.fail(f"{metric} is never negative: a threshold of {tok.text} cannot mean anything", tok)
        limit = MAX_PERCENT if _unit(metric) == "%" else ABSURD
        if result > limit:
            shown = f"{MAX_PERCENT:g}%" if _unit(metric) == "%" else f"{ABSURD:g} {_unit(metric) or ''}".rstrip()
            raise self.fail(f"threshold {tok.text} is absurd for {metric} (beyond {shown}): check the number", tok)
        return result

    def quantity(self, metric: str) -> tuple[float, _Tok]:
        """number [unit] -> value in the metric's base unit."""
        value, tok = self.number("a number")
        return self.threshold(value, tok, self.unit_token(), metric), tok

    def _convert(self, value: float, unit_tok: _Tok, metric: str) -> float:
        unit = unit_tok.text
        wanted = _unit(metric)
        if unit not in _UNITS:
            words = units_of(wanted)
            hint = f"{metric} takes {', '.join(words)}" if words else "use e.g. ms, us, GB/s, KiB, TFLOP/s, %"
            raise self.fail(f"unknown unit {unit!r} ({hint})", unit_tok)
        factor, base = _UNITS[unit]
        if base != wanted:
            if base == "%":
                raise self.fail(
                    f"{metric} is in {_describe(wanted)}, not a percentage: write '{value:g}% of peak' "
                    f"or 'baseline + {value:g}%', or compare {metric}_pct",
                    unit_tok,
                )
            words = units_of(wanted)
            takes = f"; {metric} takes {', '.join(words)}" if words else "; write the number alone"
            raise self.fail(f"{unit!r} is not a unit of {metric} (which is in {_describe(wanted)}){takes}", unit_tok)
        return value * factor

    def rhs(self, metric: str, relation: str) -> Expectation:
        tok = self.peek()
        if tok is None:
            raise self.fail("expected a number, 'N% of peak' or 'baseline'")
        if tok.kind == "word" and tok.text == "baseline":
            return self.allowance(metric, relation)
        value, num = self.number("a number, 'N% of peak' or 'baseline'")
        unit = self.peek()
        if unit is not None and unit.kind == "word" and unit.text == "of":
            pct = f"{value * 100:g}" if 0 < value <= 1 else f"{value:g}"
            raise self.fail(f"a share of a ceiling is a percentage: write '{pct}% of peak'", unit)
        if unit is not None and unit.kind == "percent":
            self.take()
            of = self.peek()
            if of is not None and of.kind == "word" and of.text == "of":
                self.take()
                return self.of_peak(metric, relation, value, num)
        else:
            unit = self.unit_token()
        return Expectation(self.text, metric, relation, "absolute", self.threshold(value, num, unit, metric))

    def of_peak(self, metric: str, relation: str, value: float, num: _Tok) -> Expectation:
        target = self.expect("word", "'peak' or a ceiling name after 'of'")
        ceiling = None if target.text == "peak" else target.text
        if ceiling is not None and ceiling not in (*PEAK_UNITS, "gips"):
            close = difflib.get_close_matches(ceiling, ["peak", *PEAK_UNITS, "gips"], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.fail(f"unknown ceiling {ceiling!r}: write 'peak' or a ceiling name{hint}", target)
        if ceiling is None and metric not in PEAK_METRICS:
            raise self.fail(f"{metric} has no peak; '% of peak' applies to {', '.join(PEAK_METRICS)}", target)
        if not 0 < value <= MAX_PERCENT:
            raise self.fail(f"{num.text}% of a ceiling is absurd: give a share above 0% and at most "
                            f"{MAX_PERCENT:g}%", num)
        return Expectation(self.text, metric, relation, "of_peak", value / 100.0, ceiling=ceiling)

    def allowance(self, metric: str, relation: str) -> Expectation:
        """'baseline' [('+' | '-') number ('%' | UNIT)]; a bare number only for plain counts."""
        self.take()  # baseline
        sign_tok = self.peek()
        if sign_tok is None:
            return Expectation(self.text, metric, relation, "baseline", 0.0)
        if sign_tok.kind != "sign" and not (sign_tok.kind == "number" and sign_tok.text[0] in "+-"):
            raise self.fail("expected '+' or '-' after 'baseline'", sign_tok)
        if sign_tok.kind == "sign":
            self.take()
            sign = -1.0 if sign_tok.text == "-" else 1.0
        else:
            sign = 1.0  # "+5%" lexed as a signed number
        magnitude, num = self.number("a number after the sign")
        amount = sign * magnitude
        unit = self.unit_token()
        if unit is not None and unit.kind == "percent":
            if not -100.0 < amount <= MAX_PERCENT:
                raise self.fail(f"an allowance of {amount:+g}% is absurd: keep it above -100% "
                                f"(nothing would be left of the baseline) and at most +{MAX_PERCENT:g}%", num)
            return Expectation(self.text, metric, relation, "baseline", amount / 100.0)
        if unit is None:
            if _unit(metric) not in DIMENSIONLESS and amount != 0:
                raise self.missing_unit(num, metric, relative=True)
            delta = amount
        else:
            delta = self._convert(amount, unit, metric)
        if abs(delta) > ABSURD:
            raise self.fail(f"an allowance of {num.text} is absurd for {metric}: check the number", num)
        return Expectation(self.text, metric, relation, "baseline", 0.0, delta)

    def end(self) -> None:
        tok = self.peek()
        if tok is not None:
            raise self.fail(f"unexpected {tok.text!r} after the expectation", tok)


def _describe(unit: str) -> str:
    """A unit for messages: 's' -> 's (seconds)'."""
    names = {"s": "seconds", "B": "bytes", "B/s": "bytes per second", "%": "percent", "count": "a plain count",
             "": "plain numbers", "FLOP": "floating-point operations", "FLOP/s": "FLOP per second",
             "FLOP/B": "FLOP per byte", "inst/s": "instructions per second", "GIPS": "10**9 instructions per second",
             "inst/B": "instructions per byte", "OP": "integer operations", "Hz": "hertz"}
    name = names.get(unit)
    return f"{name} ({unit})" if name and unit not in ("count", "") else (name or unit)


def parse(text: str) -> tuple[Expectation, ...]:
    """One expectation, or two for a two-sided one (``1 ms <= duration <= 2 ms``)."""
    if not isinstance(text, str) or not text.strip():
        raise ExpectationError(str(text), 0, "empty expectation")
    p = _Parser(text)
    first = p.peek()
    if first is not None and first.kind == "number":
        # bound REL metric REL bound
        save = p.i
        p.take()
        unit = p.peek()
        if unit is not None and unit.kind in ("percent", "word"):
            p.take()
        rel1 = p.expect("rel", "a comparison (<=, <, ...)")
        metric = p.metric()
        p.i = save
        lower_value, lower_tok = p.quantity(metric)
        p.take()  # rel1
        p.metric()
        rel2 = p.expect("rel", "a second comparison")
        upper = p.rhs(metric, rel2.text)
        p.end()
        if upper.kind != "absolute":
            raise ExpectationError(text, rel2.pos, "a two-sided expectation takes plain bounds")
        if lower_value > upper.value:  # type: ignore[operator]
            raise ExpectationError(text, lower_tok.pos, "the lower bound is above the upper one: no value can pass")
        lower = Expectation(text, metric, _FLIP[rel1.text], "absolute", lower_value)
        return (lower, upper)
    metric = p.metric()
    rel = p.expect("rel", "a comparison: >=, <=, >, <, == or !=")
    expectation = p.rhs(metric, rel.text)
    p.end()
    return (expectation,)


# --- kernel patterns ---------------------------------------------------------------------

# Regular expressions run on RE2 (google-re2), whose matching time is linear in the
# name: a pattern such as ``re:(a+)+$`` cannot hang a CI job on a long template name,
# as Python's backtracking ``re`` does (exponentially there, and quadratically for a
# plain ``re:.*x`` searched in a 100,000-character name: 2.8 s). RE2 has no lookarounds
# and no backreferences; a pattern using them gets a one-line error.
_RE2_LACKS = "RE2, which perfcheck uses so that matching cannot hang, has no lookarounds or backreferences"


def _regex_body(pattern: str) -> str | None:
    if pattern.startswith("re:"):
        return pattern[3:]
    if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
        return pattern[1:-1]
    return None


def _pattern_regex(pattern: str):  # -> re.Pattern[str] | re2._Regexp
    body = _regex_body(pattern)
    if body is None:
        return re.compile(fnmatch.translate(pattern))
    try:
        import re2
    except ImportError:  # a dependency: only a broken install lacks it
        raise UsageError(f"kernel pattern {pattern!r}: regular expressions need the google-re2 package "
                         "(pip install google-re2)") from None
    options = re2.Options()
    options.log_errors = False  # RE2 would also print the error to stderr itself
    try:
        return re2.compile(body, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        reason = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        hint = f"; {_RE2_LACKS}" if re.search(r"perl operator|escape sequence: \\[1-9]", reason) else ""
        raise UsageError(f"kernel pattern {pattern!r}: invalid regular expression ({reason}){hint}") from None


# NVIDIA's demanglers (ncu, nsys, nvprof, Kineto) and rocprof write a kernel's
# signature with its return type, and a __global__ function always returns void
# (CUDA C++ Programming Guide, "__global__": "must have void return type"; HIP
# follows it): `void stencil<float>(float*, int)`. People type `stencil*`.
_RETURN_TYPE = "void "


def match_kernels(pattern: str, kernels: Sequence[str]) -> list[str]:
    """Kernels whose whole name matches ``pattern`` (glob), or that ``re:REGEX`` or
    ``/REGEX/`` finds in their name (RE2 syntax, linear-time matching). A glob also
    matches a name without its leading ``void `` (``stencil*`` matches
    ``void stencil<float>(float*)``)."""
    regex = _pattern_regex(pattern)
    if _regex_body(pattern) is not None:
        return [k for k in kernels if regex.search(k)]
    return [k for k in kernels
            if regex.fullmatch(k) or (k.startswith(_RETURN_TYPE) and regex.fullmatch(k[len(_RETURN_TYPE):]))]


def _short_name(kernel: str) -> str:
    """``void ns::stencil<double, 4>(double*, int)`` -> ``stencil``: the part of a
    demangled name people type."""
    head = kernel.split("(", 1)[0]
    while "<" in head and ">" in head:  # strip template arguments, innermost first
        stripped = re.sub(r"<[^<>]*>", "", head)
        if stripped == head:
            break
        head = stripped
    head = head.rsplit("::", 1)[-1].strip()
    return head.rsplit(" ", 1)[-1] or kernel


def closest_kernels(pattern: str, kernels: Sequence[str], n: int = 3) -> list[str]:
    """Up to ``n`` kernel names nearest to ``pattern``: names containing its literal
    part (ignoring case) first, then by similarity of their short or full names."""
    core = re.sub(r"[*?\[\]]", "", _regex_body(pattern) or pattern).lower()
    if not core or not kernels:
        return []
    containing = [k for k in kernels if core in k.lower()]
    shorts: dict[str, list[str]] = {}
    for kernel in kernels:
        shorts.setdefault(_short_name(kernel).lower(), []).append(kernel)
    similar = [k for s in difflib.get_close_matches(core, list(shorts), n=n, cutoff=0.5) for k in shorts[s]]
    similar += difflib.get_close_matches(core, [k.lower() for k in kernels], n=n, cutoff=0.5)
    by_lower = {k.lower(): k for k in kernels}
    ranked = [*containing, *(by_lower.get(k, k) for k in similar)]
    return list(dict.fromkeys(ranked))[:n]


def no_match_message(pattern: str, kernels: Sequence[str]) -> str:
    """Why ``pattern`` matched nothing and what might: the closest names and, for a
    glob, the ``*name*`` glob that matches names containing it."""
    message = f"pattern {pattern!r} matched no kernel of {len(kernels)}"
    close = closest_kernels(pattern, kernels)
    if close:
        message += "; closest: " + ", ".join(repr(k) for k in close)
    if _regex_body(pattern) is None:
        core = pattern.strip("*")
        if core and not any(c in core for c in "*?["):
            glob = f"*{core}*"
            found = len(match_kernels(glob, kernels))
            message += (f"; the glob {glob!r} matches {found} kernel{'s' if found != 1 else ''} containing it"
                        if found else f"; no name contains {core!r} (the glob {glob!r} would match names containing it; "
                        "names are case-sensitive)")
    return message


def only_kernels(analysis: "Analysis", pattern: str) -> "Analysis":
    """``analysis`` restricted to the kernels ``pattern`` matches (``inspect --kernel``);
    a pattern that matches none is an error naming the closest kernel."""
    names = [str(k) for k in analysis.kernels["kernel"]] if len(analysis.kernels) else []
    matched = set(match_kernels(pattern, names))
    if not matched:
        raise UsageError(f"--kernel: {no_match_message(pattern, names)}")
    table = analysis.kernels[analysis.kernels["kernel"].astype(str).isin(matched)].reset_index(drop=True)
    return replace(analysis, kernels=table)


# --- evaluation ---------------------------------------------------------------------------

# Per derived metric, the counter quantity it needs: for "collect ..." messages and
# for the runner, which collects only the counters the expectations need.
NEEDS = {
    "hbm_bw": "hbm_bytes", "hbm_bw_pct": "hbm_bytes", "ai_hbm": "hbm_bytes",
    "mem_bw": "mem_bytes", "mem_bw_pct": "mem_bytes", "ai_mem": "mem_bytes",
    "l2_bw": "l2_bytes", "l2_bw_pct": "l2_bytes", "ai_l2": "l2_bytes",
    "l1_bw": "l1_bytes", "l1_bw_pct": "l1_bytes", "ai_l1": "l1_bytes",
    "lds_bw": "lds_bytes", "lds_bw_pct": "lds_bytes", "ai_lds": "lds_bytes",
    "flop_rate": "flops", "roofline_pct": "flops", "attainable": "flops",
    "gips": "instructions", "instruction_rate": "instructions", "gips_pct": "instructions",
    "instruction_intensity_hbm": "instructions",
}


def _missing_message(metric: str, analysis: "Analysis") -> str:
    """Why ``metric`` is empty and what to do about it."""
    if metric in ("occupancy_pct", "waves_per_cu", "warps_per_sm", "workgroups_per_cu"):
        if analysis.target is None:
            return "the GPU is unknown: name it with --arch (or `device` in the config)"
        return "the profile has no launch resources (workgroup size, registers, LDS) for this kernel"
    if metric.startswith("duration") or metric in ("calls",):
        return "the profile has no timestamps or durations for this kernel"
    quantity = NEEDS.get(metric, metric)
    from perfcheck.metrics.counters import QUANTITIES, counters_for

    if quantity in QUANTITIES and any(s.format == "perf-measure" for s in analysis.sources):
        what = "flops=... (and precision=...)" if "flop" in quantity else "bytes=..." if "bytes" in quantity else None
        if what:
            return f"a timed function has no counters: declare the work of one call with perf.measure(..., {what})"
    if quantity in QUANTITIES:
        vendor = analysis.target.arch.vendor if analysis.target is not None else None
        vendors = [vendor] if vendor else ["amd", "nvidia"]
        hints = []
        for v in vendors:
            names = counters_for(quantity, v)
            if names:
                hints.append(f"{v}: {', '.join(names)}")
        if hints:
            return f"its counters were not collected; collect {'; '.join(hints)}"
    return "the profile does not provide it"


def _compare(observed: float, relation: str, reference: float) -> bool:
    return {
        ">=": observed >= reference,
        "<=": observed <= reference,
        ">": observed > reference,
        "<": observed < reference,
        "==": observed == reference,
        "!=": observed != reference,
    }[relation]


def _fmt(value: float | None, unit: str) -> str:
    return format_value(value, unit)


def _ceiling_for(expectation: Expectation, row: Mapping[str, object], analysis: "Analysis"):
    name = expectation.ceiling
    if name is None:
        if expectation.metric == "flop_rate":
            name = row.get("compute_ceiling") if isinstance(row.get("compute_ceiling"), str) else None
        else:
            name = _PEAK_OF.get(expectation.metric)
    return analysis.ceilings.get(name) if name else None, name


def _value(row: Mapping[str, object], metric: str) -> float | None:
    value = row.get(metric)
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def evaluate(
    suite: str,
    expectations: Mapping[str, Sequence[str]],
    analysis: "Analysis",
    baseline: "Baseline | None" = None,
    *,
    tolerances: Mapping[str, float] | None = None,
) -> list[Check]:
    """One Check per (matched kernel x expectation); a pattern that matches no kernel
    gives one ERROR check per expectation. Expectation strings are parsed first, so
    a typo fails before anything is compared."""
    from perfcheck.metrics.timeline import is_timeline_name, match_subjects

    parsed = {pattern: [(text, parse(text)) for text in texts] for pattern, texts in expectations.items()}
    table = analysis.kernels
    every = [str(k) for k in table["kernel"]] if len(table) else []
    rows = {str(r["kernel"]): r for r in table.to_dict("records")} if len(table) else {}
    # Timeline subjects (@run, range:NAME) are rows of the table, matched only by
    # timeline patterns; kernel patterns never see them.
    names = [n for n in every if not is_timeline_name(n)]
    subjects = [n for n in every if is_timeline_name(n)]
    checks: list[Check] = []
    for pattern, items in parsed.items():
        timeline = is_timeline_name(pattern)
        matched = match_subjects(pattern, subjects, match_kernels) if timeline else match_kernels(pattern, names)
        if not matched:
            message = _no_subject_message(pattern, subjects) if timeline else no_match_message(pattern, names)
            for text, parts in items:
                checks.append(
                    Check(
                        suite=suite, kernel=pattern, pattern=pattern, expression=text, metric=parts[0].metric,
                        relation=parts[0].relation, observed=None, reference=None, unit=_unit(parts[0].metric),
                        outcome=ERROR, origin="expectation",
                        message=message,
                    )
                )
            continue
        for kernel in matched:
            for text, parts in items:
                checks.append(_check_kernel(suite, pattern, kernel, text, parts, rows[kernel], analysis, baseline, tolerances or {}))
    return checks


def _no_subject_message(pattern: str, subjects: Sequence[str]) -> str:
    if not subjects:
        return (f"{pattern!r} is a timeline expectation, but no timeline was read: the suite's profiles must "
                "be Kineto traces or Nsight Systems exports (see `perfcheck inspect --timeline`)")
    if pattern == "@ranks":
        return "'@ranks' needs the timelines of several ranks (one trace per rank); this one has one rank"
    return f"{pattern!r} matches nothing in the timeline; it has: {', '.join(subjects[:8])}" + (
        ", ..." if len(subjects) > 8 else "")


def _check_kernel(
    suite: str,
    pattern: str,
    kernel: str,
    text: str,
    parts: tuple[Expectation, ...],
    row: Mapping[str, object],
    analysis: "Analysis",
    baseline: "Baseline | None",
    tolerances: Mapping[str, float],
) -> Check:
    if parts[0].metric in PER_KERNEL:
        written = parts[0].metric
        parts = tuple(replace(p, metric=_resolve(written, row)) for p in parts)
        if written in tolerances and parts[0].metric not in tolerances:
            tolerances = {**tolerances, parts[0].metric: tolerances[written]}
    first = parts[0]
    metric, unit = first.metric, metric_unit(first.metric)
    observed = _value(row, metric)
    base = dict(suite=suite, kernel=kernel, pattern=pattern, expression=text, metric=metric, unit=unit)
    if observed is None and not (first.kind == "baseline" and metric == "duration" and analysis.duration_samples.get(kernel) is not None):
        why = (f'{metric} is a timeline metric: declare it under "@run"' if metric in TIMELINE_METRICS
               and not kernel.startswith("@run") else
               f'{metric} is a spread over ranks: declare it under "@ranks" (a timeline of several ranks)'
               if metric in RANK_SPREAD_METRICS and kernel != "@ranks" else _missing_message(metric, analysis))
        return Check(**base, relation=first.relation, observed=None, reference=None, outcome=ERROR,
                     origin="baseline" if first.kind == "baseline" else "expectation",
                     message=f"{metric} is not available for this kernel: {why}")
    if first.kind == "baseline":
        return _check_baseline(base, first, observed, kernel, analysis, baseline, tolerances)
    if len(parts) == 2:  # two-sided, both absolute
        lower, upper = parts
        ok = _compare(observed, lower.relation, lower.value) and _compare(observed, upper.relation, upper.value)
        rel_text = f"{_fmt(lower.value, unit)} {_FLIP[lower.relation]} {metric} {upper.relation} {_fmt(upper.value, unit)}"
        return Check(**base, relation=f"{_FLIP[lower.relation]}..{upper.relation}", observed=observed,
                     reference=upper.value if observed > upper.value else lower.value,
                     outcome=PASSED if ok else FAILED, origin="expectation",
                     message=f"{metric} {_fmt(observed, unit)}; expected {rel_text}")
    if first.kind == "of_peak":
        ceiling, name = _ceiling_for(first, row, analysis)
        if ceiling is None:
            why = (_no_ceiling(analysis) if name else f"{metric} has no compute ceiling (no FLOPs counted)")
            return Check(**base, relation=first.relation, observed=observed, reference=None, outcome=ERROR,
                         origin="expectation", message=f"{metric} {_fmt(observed, unit)}: {why}")
        from perfcheck.metrics.roofline import clock_mismatch, kernel_ceiling

        # A datasheet figure at the clock this kernel ran at (when its row records
        # one); a measured figure as measured, with a word when its clock differs.
        ceiling = kernel_ceiling(ceiling, row)
        clock = ceiling.clock_text()
        mismatch = clock_mismatch(ceiling, _value(row, ceiling.domain) if ceiling.domain else None)
        clock_words = (f" {clock}" if clock else "") + (f" ({mismatch})" if mismatch else "")
        # gips is in 10**9 instructions per second, its ceiling (like every ceiling) in
        # instructions per second: the share is taken in the metric's own unit.
        peak = ceiling.value * (1e-9 if unit == "GIPS" else 1.0)
        reference = first.value * peak
        ok = _compare(observed, first.relation, reference)
        return Check(**base, relation=first.relation, observed=observed, reference=reference,
                     outcome=PASSED if ok else FAILED, origin="expectation",
                     message=f"{metric} {_fmt(observed, unit)} ({100 * observed / peak:.1f}% of peak); "
                     f"expected {first.relation} {_fmt(reference, unit)} = {100 * first.value:g}% of "
                     f"{ceiling.kind} {ceiling.name} {_fmt(ceiling.value, ceiling.unit)}{clock_words}",
                     detail=f"{ceiling.name}: {ceiling.kind}, {ceiling.source}" + (f"; {clock}" if clock else ""))
    ok = _compare(observed, first.relation, first.value)
    return Check(**base, relation=first.relation, observed=observed, reference=first.value,
                 outcome=PASSED if ok else FAILED, origin="expectation",
                 message=f"{metric} {_fmt(observed, unit)}; expected {first.relation} {_fmt(first.value, unit)}")


def _no_ceiling(analysis: "Analysis") -> str:
    """Why a "% of peak" has nothing to take the share of, and what to write. A profile
    that names its arch but not its device (sm_80: an A100 40 GB or 80 GB) gets the
    devices it could be: bandwidth and peak rates belong to a product, not an arch."""
    target = analysis.target
    if target is None or target.device is not None:
        return "no ceiling for it: give measured peaks with --peaks or name the GPU with --arch"
    from perfcheck.arch import devices_of

    candidates = devices_of(target.arch.name)
    if not candidates:
        return (f"no ceiling for it: the profile ran on {target.arch.name}, which has no device in perfcheck's "
                "database; give measured peaks with --peaks (perfcheck peaks measure, BabelStream, mixbench)")
    return (f"no ceiling for it: the profile says {target.arch.name} but not which device; name it with "
            f'device = "{candidates[0]}" in [tool.perfcheck] (or --arch {candidates[0]}), one of: '
            f"{', '.join(candidates)}; or give measured peaks with --peaks")


def _check_baseline(
    base: dict,
    expectation: Expectation,
    observed: float | None,
    kernel: str,
    analysis: "Analysis",
    baseline: "Baseline | None",
    tolerances: Mapping[str, float],
) -> Check:
    metric, unit = expectation.metric, base["unit"]
    entry = baseline.kernels.get(kernel) if baseline is not None else None
    if entry is None or (metric not in entry.metrics and not (metric == "duration" and "duration" in entry.samples)):
        why = "no baseline yet" if baseline is None else "no baseline for this kernel" if entry is None else f"the baseline has no {metric}"
        return Check(**base, relation=expectation.relation, observed=observed, reference=None, outcome=RECORDED,
                     origin="baseline", message=f"{metric} {_fmt(observed, unit)}: {why}; recorded as the new baseline")
    fraction = expectation.value or 0.0
    if fraction == 0.0 and expectation.absolute_delta is None and metric in tolerances:
        # "metric <= baseline" with no allowance: the configured default tolerance applies,
        # in the direction that loosens the bound.
        fraction = tolerances[metric] if expectation.relation in ("<=", "<") else -tolerances[metric]
    from perfcheck import baseline as baselines

    # A rate's noise is its duration's noise: every timing-derived metric is judged
    # with this run's per-dispatch durations (exact quantities need none).
    samples = None if baselines.is_exact(metric) else analysis.duration_samples.get(kernel)
    decision = baselines.compare(
        metric,
        expectation.relation,
        fraction,
        expectation.absolute_delta,
        observed,
        samples,
        entry,
        exact=baselines.is_exact(metric),
    )
    stored = decision.baseline
    change = ""
    if stored not in (None, 0) and decision.observed is not None:
        change = f" ({100 * (decision.observed / stored - 1):+.1f}%)"
    allowance = (
        f"baseline {'+' if fraction >= 0 else '-'} {abs(100 * fraction):g}%"
        if expectation.absolute_delta is None
        else f"baseline {'+' if expectation.absolute_delta >= 0 else '-'} {_fmt(abs(expectation.absolute_delta), unit)}"
    )
    return Check(
        **base,
        relation=expectation.relation,
        observed=decision.observed,
        reference=decision.reference,
        outcome=PASSED if decision.passed else FAILED,
        origin="baseline",
        baseline=stored,
        message=f"{metric} {_fmt(decision.observed, unit)}{change} vs baseline {_fmt(stored, unit)}; "
        f"expected {expectation.relation} {allowance} = {_fmt(decision.reference, unit)}",
        detail=decision.detail,
    )
