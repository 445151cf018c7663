"""What to collect for a set of expectations, and in how many passes.

Only what the expectations need is collected: a duration or (theoretical) occupancy
check needs the kernel trace alone (durations and launch resources), a bandwidth
check the byte counters of its memory level, a FLOP-rate check the FLOP counters.
The counters per quantity are the ones ``perfcheck.metrics.counters`` computes the
quantity from (``counters_for``), in the profiler's own names.

Passes:

* AMD (rocprofv3, rocprof v1): pass 1 is a kernel trace without counters, for the
  durations: counter collection serialises kernels and adds its own overhead, so
  times are taken from a run that collects none (rocprof-compute does the same: its
  workloads keep ``timestamps.csv`` apart from the ``pmc_perf*`` counter passes).
  The counters follow in as few passes as the hardware allows: each hardware block
  has a fixed number of counter registers (``AMD_BLOCK_LIMITS``), and a pass may
  not program more counters of a block than it has. Counters of one quantity share
  a pass whenever they fit in one, so no quantity mixes two runs.
* NVIDIA (ncu): one invocation with every metric in ``--metrics``; ncu itself
  replays each kernel as often as its metrics need, and measures
  ``gpu__time_duration`` in a pass of its own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from perfcheck.errors import UsageError

TRACE, COUNTERS, REPLAY = "trace", "counters", "replay"

# Counter registers per hardware block in one pass on CDNA/GCN (gfx9) GPUs:
# rocprof-compute's "Per IP block max number of simultaneous counters" (ROCm/omniperf
# src/omniperf_soc/soc_gfx908.py, soc_gfx90a.py, soc_gfx942.py: the same figures on
# every arch), which agrees with what rocprof --list-basic prints per counter
# ("block TCC has 4 counters", "block GRBM has 2 counters": ROCm/rocprofiler
# doc/rocprof.md section 2.1.1.1; "block SQ has 8 counters" on MI250X). rocprof
# refuses a pass that exceeds them ("Input metrics out of HW limit ... Metrics list
# exceeds HW limits", doc/rocprof.md 2.1.1.2.2).
AMD_BLOCK_LIMITS: dict[str, int] = {
    "SQ": 8, "TA": 2, "TD": 2, "TCP": 4, "TCC": 4, "CPC": 2, "CPF": 2, "SPI": 2, "GRBM": 2, "GDS": 4,
}
# Blocks whose counters are programmed through another block's registers:
# rocprof-compute sorts SQC (instruction/scalar cache) counters with the SQ's.
_BLOCK_ALIASES = {"SQC": "SQ"}

# rocprof derived metrics: the hardware counters they are computed from, per block.
# rocprofiler-sdk source/share/rocprofiler-sdk/derived_counters.xml: on gfx9 and
# gfx940/942 alike, FETCH_SIZE = f(TCC_EA(0)_RDREQ_32B, TCC_EA(0)_RDREQ) and
# WRITE_SIZE = f(TCC_EA(0)_WRREQ, TCC_EA(0)_WRREQ_64B): two TCC counters each, so
# both fit the TCC's four in one pass. SQ_LEVEL_WAVES_ACCUM is SQ_LEVEL_WAVES
# accumulated (rocprofiler-sdk), counted as rocprof v1's pair SQ_LEVEL_WAVES +
# SQ_ACCUM_PREV_HIRES.
AMD_DERIVED: dict[str, dict[str, int]] = {
    "FETCH_SIZE": {"TCC": 2},
    "WRITE_SIZE": {"TCC": 2},
    "SQ_LEVEL_WAVES_ACCUM": {"SQ": 2},
}

# rocprof v1 has no SQ_LEVEL_WAVES_ACCUM: its accumulator SQ_ACCUM_PREV_HIRES adds up
# the *_LEVEL counter of the same pass, so achieved occupancy needs SQ_LEVEL_WAVES
# next to it and no other level counter in that pass (Omniperf's SQ_LEVEL_WAVES.txt
# pass; perfcheck.metrics.counters reads both spellings).
_ROCPROF_V1_COUNTERS = {"achieved_occupancy_pct": ("SQ_LEVEL_WAVES", "SQ_ACCUM_PREV_HIRES", "GRBM_GUI_ACTIVE")}
_ACCUMULATOR = "SQ_ACCUM_PREV_HIRES"
_LEVEL = re.compile(r"_LEVEL(?:_|$)")

# What ncu always collects besides the metrics the expectations need: the kernel
# time, the launch resources theoretical occupancy is computed from, and the device
# (the ncu reader turns these into canonical columns; names as in ncu --page raw).
NCU_TRACE_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__block_dim_x", "launch__block_dim_y", "launch__block_dim_z",
    "launch__grid_dim_x", "launch__grid_dim_y", "launch__grid_dim_z",
    "device__attribute_display_name",
    "device__attribute_compute_capability_major",
    "device__attribute_compute_capability_minor",
)


@dataclass(frozen=True)
class Need:
    """A quantity the expectations need and the counters that give it."""

    quantity: str  # metrics.counters quantity, e.g. "hbm_bytes"; "" for counters asked for by name
    metrics: tuple[str, ...]  # the expectation metrics that need it, e.g. ("hbm_bw",)
    counters: tuple[str, ...]  # the profiler's names

    @property
    def label(self) -> str:
        return ", ".join(self.metrics) if self.metrics else "requested"


@dataclass(frozen=True)
class Pass:
    index: int  # 1-based, the order they run in
    kind: str  # TRACE | COUNTERS | REPLAY
    counters: tuple[str, ...]
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"index": self.index, "kind": self.kind, "counters": list(self.counters), "reason": self.reason}

    @classmethod
    def from_dict(cls, doc: Mapping[str, object]) -> "Pass":
        counters = tuple(str(c) for c in doc.get("counters") or ())  # type: ignore[union-attr]
        return cls(int(doc["index"]), str(doc["kind"]), counters, str(doc.get("reason", "")))  # type: ignore[call-overload]


def missing_counters(columns: Iterable[str], step: Pass) -> list[str]:
    """Counters ``step`` asked for that its outputs (their ``columns``) do not hold
    (ncu's trace metrics that are text, such as the device name, are not counters)."""
    from perfcheck.schema import raw

    have = set(columns)
    return [c for c in step.counters if c not in NCU_TRACE_METRICS and raw(c) not in have]


@dataclass(frozen=True)
class Plan:
    profiler: str
    passes: tuple[Pass, ...]
    needs: tuple[Need, ...] = field(default=())

    @property
    def counters(self) -> tuple[str, ...]:
        return tuple(c for p in self.passes for c in p.counters)

    def describe(self) -> str:
        """One line: how many passes and why, e.g. ``2 passes: 1 kernel trace ...; 2 ...``."""
        count = len(self.passes)
        parts = [f"{p.index} {p.reason}" for p in self.passes]
        return f"{count} pass{'es' if count != 1 else ''}: " + "; ".join(parts)


# --- which quantities --------------------------------------------------------------------------


def metrics_of(expectations: Mapping[str, Sequence[str]] | None) -> list[str]:
    """The metrics ``expectations`` ({pattern: [text, ...]}) check, in order; a
    malformed expectation raises its ExpectationError before anything runs."""
    from perfcheck.expect import parse

    found: list[str] = []
    for texts in (expectations or {}).values():
        for text in [texts] if isinstance(texts, str) else texts:
            for expectation in parse(text):
                found.append(expectation.metric)
    return list(dict.fromkeys(found))


def quantity_of(metric: str) -> str | None:
    """The counter quantity ``metric`` is computed from; None when the trace alone
    gives it (durations, calls, launch resources, theoretical occupancy, rank spread)."""
    from perfcheck.expect import NEEDS  # the metric -> quantity table the checks use
    from perfcheck.metrics.counters import QUANTITIES

    quantity = NEEDS.get(metric, metric)
    return quantity if quantity in QUANTITIES or quantity in NEEDS.values() else None


def needs_for(profiler: str, family: str, metrics: Iterable[str], counters: Iterable[str] = (),
              arch: str | None = None) -> list[Need]:
    """Counters per needed quantity in the profiler's names (``family``: the counter
    naming of metrics.counters, "rocprof" or "ncu"); ``counters`` are raw counters
    asked for by name. A metric this profiler cannot give is a UsageError now,
    before any run. ``flops`` becomes one need per precision so that each
    precision's counters share a pass."""
    from perfcheck import expect
    from perfcheck.metrics.counters import FLOP_QUANTITIES, QUANTITIES, counters_for

    def names_for(quantity: str) -> Sequence[str]:
        if profiler == "rocprof" and quantity in _ROCPROF_V1_COUNTERS:
            return _ROCPROF_V1_COUNTERS[quantity]
        if quantity == "flops":
            return [c for q in FLOP_QUANTITIES for c in names_for(q)]
        names = counters_for(quantity, family) if quantity in QUANTITIES else []
        return [c for c in names if _available(c, arch)]

    by_quantity: dict[str, list[str]] = {}
    for metric in metrics:
        metric = expect.ALIASES.get(metric, metric)
        # A name that means another metric per kernel ("bw": a CPU's mem_bw or a GPU's
        # hbm_bw) needs the first of its metrics this profiler can measure.
        candidates = getattr(expect, "PER_KERNEL", {}).get(metric, (metric,))
        quantities = [q for q in (quantity_of(m) for m in candidates) if q is not None]
        if not quantities:
            continue
        quantity = next((q for q in quantities if names_for(q)), quantities[-1])
        by_quantity.setdefault(quantity, []).append(metric)
    # The clocks theoretical roofs scale to (docs/clocks.md): wherever a rate against
    # a roof may be asked for, and the profiler can read the clock (ncu, which locks
    # the GPU to its base clock while it profiles), the clock is collected too.
    for clock, users in _clock_users(by_quantity).items():
        if names_for(clock) and clock not in by_quantity:
            by_quantity[clock] = users
    needs = []
    for quantity, users in by_quantity.items():
        if not names_for(quantity):
            raise UsageError(f"{', '.join(users)} needs {quantity}, which {profiler} cannot measure "
                             "(no counters give it); check it with another profiler or drop the expectation")
        parts = [q for q in FLOP_QUANTITIES if names_for(q)] if quantity == "flops" and family == "rocprof" else [quantity]
        for part in parts:
            needs.append(Need(part, tuple(dict.fromkeys(users)), tuple(names_for(part))))
    extra = tuple(dict.fromkeys(c for c in counters if c))
    if extra:
        needs.append(Need("", (), extra))
    return needs


def _clock_users(by_quantity: dict[str, list[str]]) -> dict[str, list[str]]:
    """The clock each needed quantity's roof follows: device memory the memory clock,
    FLOPs, instructions and the on-chip levels the SM clock."""
    out: dict[str, list[str]] = {}
    for quantity, users in by_quantity.items():
        if quantity in ("hbm_bytes", "hbm_read_bytes", "hbm_write_bytes"):
            out.setdefault("mem_clock", []).extend(users)
        elif quantity.startswith(("flops", "tensor_flops", "mfma_", "instructions", "l1_", "l2_", "lds_")):
            out.setdefault("sm_clock", []).extend(users)
    return {clock: list(dict.fromkeys(users)) for clock, users in out.items()}


# MFMA counters that exist only on some CDNA generations (metrics.counters: F8 on
# gfx942+, F6F4 on gfx950; gfx906 has no matrix cores). Without a known arch only
# the counters every MFMA generation has are asked for: a counter the GPU lacks
# makes the profiler refuse it.
_AMD_ONLY_ON = {
    "SQ_INSTS_VALU_MFMA_MOPS_F8": ("gfx942", "gfx950"),
    "SQ_INSTS_VALU_MFMA_MOPS_F6F4": ("gfx950",),
}
_NO_MFMA = ("gfx906",)


def _available(counter: str, arch: str | None) -> bool:
    if counter in _AMD_ONLY_ON:
        return arch in _AMD_ONLY_ON[counter]
    if counter.startswith("SQ_INSTS_VALU_MFMA_"):
        return arch not in _NO_MFMA
    return True


# --- passes --------------------------------------------------------------------------------------


def amd_blocks(counter: str) -> Counter[str]:
    """Hardware counters per block that collecting ``counter`` programs. A counter of
    an unknown block is its own block of one (collected alone rather than risk a
    pass the profiler refuses)."""
    if counter in AMD_DERIVED:
        return Counter(AMD_DERIVED[counter])
    block = counter.split("_", 1)[0].split("[", 1)[0]
    block = _BLOCK_ALIASES.get(block, block)
    return Counter({block if block in AMD_BLOCK_LIMITS else counter: 1})


def _limit(block: str) -> int:
    return AMD_BLOCK_LIMITS.get(block, 1)


def _fits(usage: Counter[str], extra: Counter[str]) -> bool:
    return all(usage[b] + n <= _limit(b) for b, n in extra.items())


def _has_level(counters: Iterable[str]) -> bool:
    return any(_LEVEL.search(c) for c in counters)


def _compatible(members: Sequence[str], group: Sequence[str]) -> bool:
    """rocprof v1's accumulator sums every level counter of its pass: a pass with it
    holds one level counter only."""
    both = [*members, *group]
    if _ACCUMULATOR not in both:
        return True
    return not (_has_level([c for c in members if c != _ACCUMULATOR]) and _has_level([c for c in group if c != _ACCUMULATOR]))


def pack_amd(groups: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[list[str], list[str]]]:
    """Counter groups (label, counters) -> passes (counters, labels), first fit by
    decreasing size. A group that alone exceeds a block's registers is split into
    single counters (which then may land in different passes)."""
    units: list[tuple[str, list[str]]] = []
    for label, counters in groups:
        counters = [c for c in dict.fromkeys(counters)]
        usage = sum((amd_blocks(c) for c in counters), Counter())
        if all(n <= _limit(b) for b, n in usage.items()):
            units.append((label, counters))
        else:
            units.extend((label, [c]) for c in counters)
    units.sort(key=lambda u: -sum(sum(amd_blocks(c).values()) for c in u[1]))  # stable: ties keep their order
    passes: list[tuple[list[str], list[str], Counter[str]]] = []
    for label, counters in units:
        need = sum((amd_blocks(c) for c in counters), Counter())
        for members, labels, usage in passes:
            fresh = [c for c in counters if c not in members]
            if _fits(usage, sum((amd_blocks(c) for c in fresh), Counter())) and _compatible(members, fresh):
                members.extend(fresh)
                usage.update(sum((amd_blocks(c) for c in fresh), Counter()))
                if label not in labels:
                    labels.append(label)
                break
        else:
            passes.append((list(counters), [label], need))
    return [(members, labels) for members, labels, _ in passes]


def plan(profiler: str, vendor: str, family: str, metrics: Iterable[str] = (), counters: Iterable[str] = (),
         arch: str | None = None) -> Plan:
    """The passes that collect what ``metrics`` (expectation metrics) and
    ``counters`` (raw counters by name) need with ``profiler`` on ``arch`` (an
    arch id such as "gfx90a"; None: not known before the run)."""
    needs = needs_for(profiler, family, metrics, counters, arch)
    if vendor == "nvidia":
        wanted = list(dict.fromkeys([*NCU_TRACE_METRICS, *(c for n in needs for c in n.counters)]))
        why = "; ".join(f"{', '.join(n.counters)} for {n.label}" for n in needs)
        reason = "ncu replays each kernel for its metrics: durations and launch resources" + (f"; {why}" if why else "")
        return Plan(profiler, (Pass(1, REPLAY, tuple(wanted), reason),), tuple(needs))
    passes = [Pass(1, TRACE, (), "kernel trace (durations, launch resources; no counters to slow kernels)")]
    for members, labels in pack_amd([(n.label, n.counters) for n in needs]):
        passes.append(Pass(len(passes) + 1, COUNTERS, tuple(members), f"{', '.join(members)} (for {'; '.join(labels)})"))
    return Plan(profiler, tuple(passes), tuple(needs))
