"""GPU architecture database: occupancy constants per architecture and figures per device.

The figures live in ``perfcheck/arch/data/*.toml`` (package data), each with its source
(``/work/shared/reference/arch-specs.md`` section and source tag, or the real profile
it was read from). This module only loads, indexes and looks them up; it holds no figures.

* an *arch* (``gfx90a``, ``sm_80``) carries what occupancy needs: register files and
  granules, LDS/shared memory, wave/warp and workgroup/block slots;
* a *device* (``mi250x``, ``h100-sxm``) carries CU/SM count, clock, memory bandwidth,
  peak FLOP/s and cache sizes, and names its arch.

``lookup`` resolves what a user types (``--arch``), ``detect`` what a profile says.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from perfcheck.errors import UsageError
from perfcheck.model import Source

__all__ = ["ArchSpec", "Device", "Target", "lookup", "detect", "known", "describe"]

# How peak_gips is derived (arch-specs.md §3), shown next to the figure.
_PEAK_GIPS_SOURCE = (
    "D: compute_units x schedulers x ipc x clock_hz / 1e9 (arch-specs.md §3: "
    "Ding & Williams [S25] for NVIDIA warps, Leinhauser et al. [S26] for AMD wavefronts)"
)
_MAX_WAVES_SOURCE = "D: simds_per_cu x max_waves_per_simd (arch-specs.md §1.1)"


@dataclass(frozen=True)
class ArchSpec:
    """Occupancy constants of one GPU architecture. Vendor-specific fields are None
    on the other vendor. Sizes in bytes, register counts in 32-bit registers."""

    name: str  # "gfx90a", "sm_80"
    vendor: str  # "amd" | "nvidia"
    family: str  # "CDNA2", "Hopper"
    products: str  # human-readable list of products of this arch
    wave_size: int  # 64 (wavefront) / 32 (warp)
    schedulers: int  # wave/warp instructions issued per CU/SM per cycle (arch-specs §3)
    ipc: float  # instructions per scheduler per cycle (1)
    # AMD (arch-specs.md §1.1, §1.5)
    simds_per_cu: int | None = None
    max_waves_per_simd: int | None = None
    vgprs_per_simd_lane: int | None = None  # occupancy pool per lane: 256, or 512 unified on gfx90a+
    vgpr_granule: int | None = None
    unified_vgpr_agpr: bool | None = None  # gfx90a+: AGPRs share the 512-entry file
    max_vgprs_per_wave: int | None = None
    max_agprs_per_wave: int | None = None
    sgprs_per_simd: int | None = None
    sgpr_granule: int | None = None
    max_sgprs_per_wave: int | None = None
    sgpr_wave_thresholds: tuple[int, ...] | None = None  # LLVM: s <= t[i] -> counts[i] waves/SIMD
    sgpr_wave_counts: tuple[int, ...] | None = None  # one longer than thresholds (the "else")
    lds_per_cu: int | None = None
    max_lds_per_workgroup: int | None = None
    lds_granule: int | None = None
    max_workgroups_per_cu: int | None = None  # barrier slots, for workgroups of more than one wave
    max_workgroup_size: int | None = None
    # NVIDIA (arch-specs.md §2.1, §2.4)
    max_warps_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    registers_per_sm: int | None = None
    max_registers_per_block: int | None = None
    max_registers_per_thread: int | None = None
    register_granule: int | None = None  # registers per warp are rounded up to this
    register_subpartitions: int | None = None
    shared_per_sm: int | None = None  # default carve-out (sharedMemPerMultiprocessor)
    shared_carveouts: tuple[int, ...] | None = None  # supported shared-memory sizes per SM
    shared_granule: int | None = None
    shared_reserved_per_block: int | None = None  # driver reserve (1 KiB from cc 8.0)
    max_shared_per_block: int | None = None  # without opt-in
    max_shared_per_block_optin: int | None = None
    max_threads_per_block: int | None = None
    barriers_per_sm: int | None = None  # block barriers available per SM; 0 = no barrier limit
    # FLOPs (OPs) per clock per CU/SM, e.g. {"flop_rate_fp64": 128, "mfma_rate_fp16": 2048}
    rates: Mapping[str, float] = field(default_factory=dict, repr=False)
    sources: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def max_waves_per_cu(self) -> int | None:
        """Wavefront slots per CU (AMD)."""
        if self.simds_per_cu is None or self.max_waves_per_simd is None:
            return None
        return self.simds_per_cu * self.max_waves_per_simd


@dataclass(frozen=True)
class Device:
    """One GPU product as a profiler sees it (per GCD on MI250/MI250X). Base units."""

    name: str  # canonical id: "mi300x", "h100-sxm"
    display_name: str  # "AMD Instinct MI300X"
    aliases: tuple[str, ...]  # spellings profiles and users use
    arch: str  # "gfx942"
    compute_units: int  # CUs or SMs
    clock_hz: float  # peak engine clock (the one peak GIPS uses)
    mem_bw: float  # theoretical HBM/DRAM bandwidth, B/s
    peaks: Mapping[str, float]  # theoretical peaks by schema.PEAK_UNITS-style name, incl. "hbm_bw"
    l2_bytes: int | None
    l3_bytes: int | None
    schedulers: int  # from the arch
    ipc: float  # from the arch
    sources: Mapping[str, Any] = field(repr=False)
    memory_bytes: int | None = None
    tensor_clock_hz: float | None = None  # clock the TF32..INT8 tensor figures imply (H100/H200, §5.7)
    mem_clock_hz: float | None = None  # memory clock mem_bw holds at, where a source gives it
    note: str | None = None

    @property
    def peak_gips(self) -> float:
        """Peak wavefront (AMD) / warp (NVIDIA) giga-instructions per second (arch-specs §3)."""
        return self.compute_units * self.schedulers * self.ipc * self.clock_hz / 1e9


@dataclass(frozen=True)
class Target:
    """What a profile ran on: always an arch, a device when it is known."""

    arch: ArchSpec
    device: Device | None = None
    # Set when the device was inferred, not named: the board name a file gave is
    # unknown, but its chip (compute capability / gfx id) and product family are.
    # The analysis says it once as a warning.
    assumed: str | None = None

    @property
    def name(self) -> str:
        return self.device.name if self.device is not None else self.arch.name


# ------------------------------------------------------------------ loading


@dataclass(frozen=True)
class _Database:
    arches: Mapping[str, ArchSpec]
    devices: Mapping[str, Device]
    by_key: Mapping[str, Device]  # normalised canonical name / alias -> device
    ambiguous: Mapping[str, tuple[str, ...]]  # normalised family name -> device names


def _key(text: str) -> str:
    """Spelling-insensitive key: "AMD Instinct MI300X" == "amd-instinct-mi300x"."""
    return re.sub(r"[^a-z0-9]+", "", text.lower())


_SM_RE = re.compile(r"^(?:sm|compute)[_\s-]?(\d{2,3})[a-z]?$")
_GFX_RE = re.compile(r"^gfx[0-9a-f]{3,4}$")


def _arch_name(text: str) -> str | None:
    """Canonical arch id for an arch spelling, or None if it does not look like one.
    Target features (``gfx90a:sramecc+:xnack-``) and arch-specific suffixes
    (``sm_90a``) name the same occupancy rules."""
    text = text.strip().lower().split(":", 1)[0]
    match = _SM_RE.match(text)
    if match:
        return f"sm_{match.group(1)}"
    return text if _GFX_RE.match(text) else None


_ARCH_FIELDS = {f.name for f in fields(ArchSpec)} - {"name", "rates", "sources"}
_DEVICE_KEYS = {"display_name", "aliases", "arch", "compute_units", "clock_hz", "mem_bw", "l2_bytes",
                "l3_bytes", "memory_bytes", "tensor_clock_hz", "mem_clock_hz", "note", "peaks", "sources"}


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType({k: _frozen(v) if isinstance(v, Mapping) else v for k, v in mapping.items()})


def _make_arch(name: str, table: dict[str, Any], origin: str) -> ArchSpec:
    unknown = set(table) - _ARCH_FIELDS - {"rates", "sources"}
    if unknown:  # a typo in package data must not pass silently
        raise AssertionError(f"{origin}: arch {name}: unknown keys {sorted(unknown)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items() if k in _ARCH_FIELDS}
    return ArchSpec(name=name, rates=_frozen(table.get("rates", {})), sources=_frozen(table.get("sources", {})), **values)


def _make_device(name: str, table: dict[str, Any], arches: Mapping[str, ArchSpec], origin: str) -> Device:
    unknown = set(table) - _DEVICE_KEYS
    if unknown:
        raise AssertionError(f"{origin}: device {name}: unknown keys {sorted(unknown)}")
    arch = arches[table["arch"]]
    sources = dict(table.get("sources", {}))
    peak_sources = dict(sources.get("peaks", {}))
    peaks = dict(table.get("peaks", {}))
    # The theoretical memory bandwidth is also a peak, under the name ceilings use.
    peaks["hbm_bw"] = float(table["mem_bw"])
    peak_sources["hbm_bw"] = sources.get("mem_bw", "")
    sources["peaks"] = peak_sources
    # Issue width is a property of the architecture (arch-specs §3); the device inherits it.
    sources["schedulers"] = arch.sources.get("schedulers", "")
    sources["ipc"] = arch.sources.get("ipc", "")
    return Device(
        name=name,
        display_name=table["display_name"],
        aliases=tuple(table.get("aliases", ())),
        arch=arch.name,
        compute_units=int(table["compute_units"]),
        clock_hz=float(table["clock_hz"]),
        mem_bw=float(table["mem_bw"]),
        peaks=_frozen({k: float(v) for k, v in peaks.items()}),
        l2_bytes=table.get("l2_bytes"),
        l3_bytes=table.get("l3_bytes"),
        schedulers=arch.schedulers,
        ipc=arch.ipc,
        sources=_frozen(sources),
        memory_bytes=table.get("memory_bytes"),
        tensor_clock_hz=table.get("tensor_clock_hz"),
        mem_clock_hz=table.get("mem_clock_hz"),
        note=table.get("note"),
    )


@lru_cache(maxsize=1)
def _database() -> _Database:
    arch_tables: dict[str, tuple[dict[str, Any], str]] = {}
    device_tables: dict[str, tuple[dict[str, Any], str]] = {}
    ambiguous: dict[str, tuple[str, ...]] = {}
    data = resources.files("perfcheck.arch") / "data"
    for entry in sorted(data.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        doc = tomllib.loads(entry.read_text(encoding="utf-8"))
        for name, table in doc.get("arch", {}).items():
            arch_tables[name] = (table, entry.name)
        for name, table in doc.get("device", {}).items():
            device_tables[name] = (table, entry.name)
        for name, members in doc.get("ambiguous", {}).items():
            ambiguous[_key(name)] = tuple(members)
    arches = {name: _make_arch(name, table, origin) for name, (table, origin) in arch_tables.items()}
    devices = {name: _make_device(name, table, arches, origin) for name, (table, origin) in device_tables.items()}
    by_key: dict[str, Device] = {}
    for device in devices.values():
        for spelling in (device.name, *device.aliases):
            other = by_key.setdefault(_key(spelling), device)
            if other is not device:
                raise AssertionError(f"alias {spelling!r} names both {other.name} and {device.name}")
    for key, members in ambiguous.items():
        if key in by_key or any(m not in devices for m in members):
            raise AssertionError(f"ambiguous name {key!r} clashes with a device or names an unknown one")
    return _Database(MappingProxyType(arches), MappingProxyType(devices), MappingProxyType(by_key), MappingProxyType(ambiguous))


# ------------------------------------------------------------------ cited sources


@dataclass(frozen=True)
class Citation:
    """One document a figure cites (data/sources.toml): ``tag`` as the citations
    write it (``S22``), what the document is, which table or part of it, where it is."""

    tag: str
    document: str
    table: str
    url: str


# "[S22]", "[S23 cudaOccMaxBlocksPerMultiprocessor]", "[S29],[S22]", and the real
# profile some NVIDIA figures are read from
_TAG = re.compile(r"\[(S\d+)\b|(B200 ncu CSV)")
_SECTION = re.compile(r"§(\d+(?:\.\d+)?)")


@lru_cache(maxsize=1)
def _sources_file() -> dict[str, Any]:
    entry = resources.files("perfcheck.arch") / "data" / "sources.toml"
    return tomllib.loads(entry.read_text(encoding="utf-8"))


def citations(texts: Sequence[str]) -> list[Citation]:
    """The documents ``texts`` (citation strings) cite, each once, S1 first."""
    table = _sources_file()["sources"]
    tags: set[str] = set()
    for text in texts:
        tags.update(a or b for a, b in _TAG.findall(text))
    found = [Citation(tag, **table[tag]) for tag in tags if tag in table]
    return sorted(found, key=lambda c: (not c.tag[1:].isdigit(), int(c.tag[1:]) if c.tag[1:].isdigit() else 0, c.tag))


def reference_sections(texts: Sequence[str]) -> list[tuple[str, str]]:
    """(``§2.3``, its title) of each section of arch-specs.md ``texts`` name, in order;
    a sub-item (``§5.10``) is listed under its section's title."""
    sections: dict[str, str] = _sources_file()["sections"]
    named: set[str] = set()
    for text in texts:
        named.update(_SECTION.findall(text))

    def order(number: str) -> tuple[int, ...]:
        return tuple(int(part) for part in number.split("."))

    out = []
    for number in sorted(named, key=order):
        title = sections.get(f"§{number}") or sections.get(f"§{number.split('.')[0]}")
        if title is not None:
            out.append((f"§{number}", title))
    return out


def reference_document() -> str:
    """What "arch-specs.md" in a citation is."""
    return str(_sources_file()["reference"]["document"])


def figure_unit(key: str, table: str = "") -> str:
    """Unit of a figure of ``perfcheck arch show`` (base units): ``table`` is the nested
    table holding it (``peaks``, ``rates_per_clock``) or "" at the top of an arch or
    device. "" for plain counts and labels."""
    if table == "peaks":
        if key.endswith("_bw"):
            return "B/s"
        return "OP/s" if re.search(r"_int\d+$", key) else "FLOP/s"
    if table == "rates_per_clock":
        return "OP/clk" if re.search(r"_int\d+$", key) else "FLOP/clk"
    if key == "clock_hz":
        return "Hz"
    if key == "mem_bw":
        return "B/s"
    if key == "peak_gips":
        return "GIPS"
    if key.endswith(("_bytes", "_granule")) and key.startswith(("l2", "l3", "memory", "lds", "shared")):
        return "B"
    if key.startswith(("lds_per", "shared_per", "max_lds", "max_shared", "shared_carveouts", "shared_reserved")):
        return "B"
    return ""


# ------------------------------------------------------------------ public API


def devices_of(arch: str) -> list[str]:
    """Names of the devices of arch ``arch`` (``sm_80`` -> a100, a100-80gb), in the data
    files' order: what a profile that reveals only its arch could have run on."""
    return [name for name, device in _database().devices.items() if device.arch == arch]


def known() -> tuple[list[str], list[str]]:
    """(arch names, device names), AMD first, in the data files' order."""
    db = _database()
    return list(db.arches), list(db.devices)


def _family_arch(members: Sequence[str]) -> ArchSpec | None:
    db = _database()
    arches = {db.devices[m].arch for m in members}
    return db.arches[arches.pop()] if len(arches) == 1 else None


def lookup(name: str) -> Target:
    """Arch id (``gfx942``, ``sm_90``, ``gfx90a:xnack-``) or device name/alias
    (``mi300x``, ``AMD Instinct MI300X``, ``h100-sxm``), case- and punctuation-insensitive."""
    db = _database()
    arch_name = _arch_name(name)
    if arch_name in db.arches:
        return Target(db.arches[arch_name])
    key = _key(name)
    if key in db.by_key:
        device = db.by_key[key]
        return Target(db.arches[device.arch], device)
    if key in db.ambiguous:
        members = db.ambiguous[key]
        family = _family_arch(members)
        arch_hint = f" or the arch {family.name}" if family is not None else ""
        raise UsageError(f"{name!r} names several devices ({', '.join(members)}); name one of them{arch_hint}")
    arches, devices = known()
    spellings = {s.lower(): d.name for d in db.devices.values() for s in (d.name, *d.aliases)}
    spellings.update({a: a for a in arches})
    close = difflib.get_close_matches(name.lower(), list(spellings), n=3, cutoff=0.6)
    guess = ""
    if close:
        names = list(dict.fromkeys(spellings[c] for c in close))
        guess = f" (did you mean {' or '.join(names)}?)"
    raise UsageError(f"unknown GPU {name!r}{guess}; known arches: {', '.join(arches)}; devices: {', '.join(devices)}")


def _detect_one(source: Source) -> Target | None:
    db = _database()
    arch: ArchSpec | None = None
    arch_name = _arch_name(source.arch) if source.arch else None
    if arch_name is not None:
        arch = db.arches.get(arch_name)
    if source.device:
        key = _key(source.device)
        device = db.by_key.get(key)
        if device is not None:
            if arch_name is not None and arch_name != device.arch:
                # The file names a device but reports another ISA: trust the ISA
                # string (it comes from the code object), not the marketing name.
                return Target(arch) if arch is not None else None
            return Target(db.arches[device.arch], device)
        if arch is None and key in db.ambiguous:
            # "mi200" is an MI210 or one GCD of an MI250/MI250X: the arch is certain,
            # the CU count is not.
            arch = _family_arch(db.ambiguous[key])
        if arch is not None and key not in db.ambiguous:
            guess = _board_of(source.device, arch)
            if guess is not None:
                return Target(arch, guess, assumed=(
                    f"device {source.device!r} is not in the architecture database; taken as {guess.name} "
                    f"({guess.display_name}), the {arch.name} product its name contains; name the GPU with "
                    "--arch if that is wrong"))
    return Target(arch) if arch is not None else None


_FORM = re.compile(r"pcie|sxm\d?|nvl|oam", re.IGNORECASE)


def _other_form(name: str, device: Device) -> bool:
    """The name says a form factor the device's spellings do not ("Tesla
    V100-PCIE-16GB" against the SXM2-only v100: another clock, another product)."""
    said = {f.lower() for f in _FORM.findall(name)}
    known = {f.lower() for s in (device.display_name, *device.aliases) for f in _FORM.findall(s)}
    return bool(said) and bool(known) and not said <= known


def _board_of(name: str, arch: ArchSpec) -> Device | None:
    """The product of ``arch`` an unknown board name belongs to ("NVIDIA A100-SXM4-64GB"
    on sm_80 -> a100): the device of that arch whose canonical name is the longest
    part of the name, when exactly one is. None when no product name is in it."""
    key = _key(name)
    found = [(len(_key(d.name)), d) for d in _database().devices.values()
             if d.arch == arch.name and _key(d.name) and _key(d.name) in key and not _other_form(name, d)]
    if not found:
        return None
    longest = max(n for n, _ in found)
    best = [d for n, d in found if n == longest]
    return best[0] if len(best) == 1 else None


def detect(sources: Sequence[Source]) -> Target | None:
    """What the profile files say they ran on: the device when a name is known exactly
    (``AMD Instinct MI300X``, ``NVIDIA B200``), the arch alone when only the ISA
    (``gfx906``) or a family name (``mi200``, ``MI350``, ``Vega 20``) is given, None when
    the files say nothing known or disagree."""
    targets = [t for t in (_detect_one(s) for s in sources) if t is not None]
    if not targets:
        return None
    arches = {t.arch.name for t in targets}
    if len(arches) != 1:
        return None
    devices = {t.device.name: t.device for t in targets if t.device is not None}
    if len(devices) == 1:
        assumed = next((t.assumed for t in targets if t.assumed), None)
        if any(t.device is not None and not t.assumed for t in targets):
            assumed = None  # another file named the device exactly
        return Target(targets[0].arch, next(iter(devices.values())), assumed=assumed)
    return Target(targets[0].arch)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _arch_doc(arch: ArchSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    doc: dict[str, Any] = {}
    for f in fields(ArchSpec):
        if f.name in ("sources",):
            continue
        value = getattr(arch, f.name)
        if value is None or (f.name == "rates" and not value):
            continue
        doc["rates_per_clock" if f.name == "rates" else f.name] = _plain(value)
    sources = _plain(arch.sources)
    if "rates" in sources:
        sources["rates_per_clock"] = sources.pop("rates")
    if arch.max_waves_per_cu is not None:
        doc["max_waves_per_cu"] = arch.max_waves_per_cu
        sources["max_waves_per_cu"] = _MAX_WAVES_SOURCE
    return doc, sources


def _device_doc(device: Device) -> tuple[dict[str, Any], dict[str, Any]]:
    doc: dict[str, Any] = {}
    for f in fields(Device):
        if f.name == "sources":
            continue
        value = getattr(device, f.name)
        if value is None:
            continue
        doc[f.name] = _plain(value)
    doc["peak_gips"] = device.peak_gips
    sources = _plain(device.sources)
    sources["peak_gips"] = _PEAK_GIPS_SOURCE
    return doc, sources


def describe(target: Target) -> dict[str, Any]:
    """JSON document of ``perfcheck arch show``: every figure in base units, and under
    ``sources`` the same keys mapped to their citations."""
    arch_doc, arch_sources = _arch_doc(target.arch)
    doc: dict[str, Any] = {
        "name": target.name,
        "kind": "device" if target.device is not None else "arch",
        "vendor": target.arch.vendor,
        "peak_gips": None,
        "arch": arch_doc,
        "device": None,
    }
    sources: dict[str, Any] = {"arch": arch_sources}
    if target.device is not None:
        device_doc, device_sources = _device_doc(target.device)
        doc["device"] = device_doc
        doc["peak_gips"] = target.device.peak_gips
        sources["device"] = device_sources
        sources["peak_gips"] = _PEAK_GIPS_SOURCE
    doc["sources"] = sources
    texts = _citation_texts(sources)
    # what the citations refer to: the sections of arch-specs.md and the documents [Sn]
    doc["cited"] = {
        "reference": reference_document(),
        "sections": [{"section": number, "title": title} for number, title in reference_sections(texts)],
        "documents": [{"tag": c.tag, "document": c.document, "table": c.table, "url": c.url}
                      for c in citations(texts)],
    }
    return doc


def _citation_texts(sources: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for value in sources.values():
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, Mapping):
            out.extend(_citation_texts(value))
    return out
