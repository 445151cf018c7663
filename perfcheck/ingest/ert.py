"""Empirical Roofline Tool (ERT, Berkeley Lab) results read as peaks.

Two outputs of an ERT run are read:

* ``ert-json``: the run's final ``roofline.json`` -- ``empirical.gflops.data`` and
  ``empirical.gbytes.data`` hold ``[name, value]`` ceilings (``"GFLOPs"`` or
  ``"FP64 GFLOPs"``; ``"L1"``, ``"L2"``, ``"DRAM"``, ...). Two metadata styles exist
  in ERT 1.1.0 files: the original one (ORNL Titan example shipped with ERT) keeps
  dicts (``UNAME``, ``HOSTNAME``, ``FLOPS``, ``CONFIG`` as a dict) under
  ``empirical.metadata`` and each section's ``metadata``; the later one (e.g. a
  2021 P100 run) keeps each section's metadata as a list of ``"KEY  value"``
  strings under the key ``""``, with ``CONFIG`` as the repr of a Python dict.
* ``ert-sum``: one configuration's ``sum`` text file (``FLOPS.064/GPU_Blocks.0640/
  GPU_Threads.0256/sum``): ``<GFLOP/s> [FP64 ]GFLOPs``, ``<weight> Weight``, one
  ``<GB/s> <level>`` line per memory level, then a ``META_DATA`` block of
  ``KEY  value`` lines. Several ``sum`` files concatenated (``cat */sum``, as ERT's
  own ``roofline.py`` reads them) are accepted; the highest figure of each ceiling wins.
  ``Weight`` is ERT's internal score for choosing a bandwidth set, not a peak.

Ceiling names -> peaks: ``GFLOPs`` -> ``flop_rate_fp64``/``fp32``/``fp16`` by the
precision the label (``FP64 GFLOPs``) or the config (``ERT_PRECISION``) names;
``L1``/``L2``/``L3`` -> ``l1_bw``/``l2_bw``/``l3_bw``; ``DRAM`` -> ``hbm_bw`` for a GPU
run (``ERT_GPU True`` in the config, or ``GPU_BLOCKS`` metadata), else ``mem_bw``.
Other levels (``L4``, ...) stay in ``details`` with a warning. ``FLOPS.064`` in a
result path is the FLOPs-per-element setting (``FLOPS 64`` in META_DATA), not a precision.

The ``spec`` section of roofline.json holds figures copied from the config
(``ERT_SPEC_*``), not measurements: they are listed in ``details`` as
``"<name> (spec)"`` and never become peaks. ERT records no GPU model name (the
hostname is not a device), so ``Source.device`` stays empty.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path

from perfcheck.documents import json_loads
from perfcheck.errors import InputError
from perfcheck.ingest import jsonsniff
from perfcheck.ingest.formats import Format, Sniff
from perfcheck.ingest.tabular import text_lines
from perfcheck.model import Oddity, PeakDetail, Peaks, Source

TOOL = "ert"

# ERT's GB/s and GFLOP/s are decimal: Scripts/preprocess.py (ERT 1.1.0,
# ebugger/Empirical-Roofline-Toolkit) sets ``GIGA = 1000*1000*1000`` and prints
# ``gbytes = bytes/GIGA`` and ``gflops = flops/GIGA`` divided by seconds.
GIGA_EXPONENT = 9

_FLOP_LABEL = re.compile(r"(?:(FP64|FP32|FP16|BF16)\s+)?GFLOPs", re.IGNORECASE)
_PRECISION_PEAK = {
    "FP64": "flop_rate_fp64",
    "FP32": "flop_rate_fp32",
    "FP16": "flop_rate_fp16",
    "BF16": "flop_rate_bf16",
}
_LEVEL_PEAK = {"L1": "l1_bw", "L2": "l2_bw", "L3": "l3_bw"}
# ERT 1.1.0 before ERT_PRECISION existed: Drivers/driver1.c allocates and computes
# on ``double`` buffers, so an unlabelled "GFLOPs" ceiling is double precision.
_DEFAULT_PRECISION = "FP64"

# printf's inf/nan (a zero time, a precision the device lacks) are numbers ERT can print.
_NUMBER = r"(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN]))"
_NONFINITE = re.compile(r"[-+]?(?:inf(?:inity)?|nan)", re.IGNORECASE)
_DATA_LINE = re.compile(rf"\s*({_NUMBER})\s+(\S(?:.*\S)?)\s*")
_BARE_NUMBER = re.compile(rf"\s*{_NUMBER}\s*")
_SUM_FLOP_LINE = re.compile(rf"\s*{_NUMBER}\s+(?:(?:FP64|FP32|FP16|BF16)\s+)?GFLOPs\s*", re.IGNORECASE)
_SUM_WEIGHT_LINE = re.compile(rf"\s*{_NUMBER}\s+Weight\s*")

_CeilingRow = tuple[str, object, int | None, str]  # (label, raw value, file line, JSON path or "")


# --------------------------------------------------------------------------- metadata


def _literal(text: str) -> object:
    """A metadata value as ERT's own build_database reads it: a Python literal when
    it is one (CONFIG dicts, HOSTNAME tuples), else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _metadata_from_lines(lines: Iterable[object]) -> dict[str, object]:
    """``["FLOPS          64", "CONFIG  {...}", ...]`` -> ``{"FLOPS": 64, "CONFIG": {...}}``."""
    meta: dict[str, object] = {}
    for line in lines:
        if not isinstance(line, str):
            continue
        key, _, value = line.strip().partition(" ")
        if key and key != "META_DATA":
            meta.setdefault(key, _literal(value.strip()))
    return meta


def _metadata_from_json(sections: Sequence[object]) -> dict[str, object]:
    meta: dict[str, object] = {}
    for section in sections:
        block = section.get("metadata") if isinstance(section, dict) else None
        if not isinstance(block, dict):
            continue
        for key, value in block.items():
            if key == "" and isinstance(value, list):  # later 1.1.0 style: "KEY  value" strings
                for k, v in _metadata_from_lines(value).items():
                    meta.setdefault(k, v)
            else:
                meta.setdefault(key, value)
    return meta


def _config_first(config: dict, key: str) -> object:
    value = config.get(key)
    return value[0] if isinstance(value, list) and value else value


def _is_gpu_run(meta: dict[str, object]) -> bool | None:
    config = meta.get("CONFIG")
    if isinstance(config, dict) and "ERT_GPU" in config:
        # ert_core.py tests ``ERT_GPU[0] == "True"`` and defaults it to ``[False]``.
        flag = _config_first(config, "ERT_GPU")
        return flag is True or str(flag).strip().lower() == "true"
    if "GPU_BLOCKS" in meta or "GPU_THREADS" in meta:  # driver1.c prints these for GPU builds only
        return True
    return None


def _config_precisions(meta: dict[str, object]) -> list[str]:
    config = meta.get("CONFIG")
    if not isinstance(config, dict) or "ERT_PRECISION" not in config:
        return []
    raw = config["ERT_PRECISION"]
    items = raw if isinstance(raw, list) else [raw]
    names = [p.strip().upper() for item in items for p in str(item).split(",")]
    return [n for n in names if n]


def _version(meta: dict[str, object]) -> str | None:
    version = meta.get("ERT_VERSION")
    return str(version) if version is not None else None


# --------------------------------------------------------------------------- ceilings -> peaks


def _giga(path: Path, value: object, *, label: str, line: int | None, where: str) -> float:
    """A GB/s or GFLOP/s figure in base units. Scaled in decimal arithmetic so that
    4258.4 GFLOP/s is exactly 4258.4e9, not 4258399999999.9995."""
    try:
        number = Decimal(str(value).strip()) if not isinstance(value, bool) else Decimal("NaN")
    except (InvalidOperation, ValueError):
        number = Decimal("NaN")
    printed = isinstance(value, float) or (isinstance(value, str) and bool(_NONFINITE.fullmatch(value.strip())))
    if printed and (number.is_infinite() or number.is_nan()):
        return math.nan  # inf/nan as printed (or JSON's Infinity/NaN): a missing figure, see _build
    if not number.is_finite() or number <= 0:
        raise InputError(path, f"{where + ': ' if where else ''}ceiling {label!r} has value {value!r}, not a positive number",
                         line=line, hint="is the file complete and written by ERT?")
    return float(number.scaleb(GIGA_EXPONENT))


def _build(
    path: Path,
    fmt: str,
    flops: Sequence[_CeilingRow],
    bands: Sequence[_CeilingRow],
    meta: dict[str, object],
    spec: Sequence[tuple[str, float, str]] = (),
) -> Peaks:
    src = str(path)
    values: dict[str, float] = {}
    details: list[PeakDetail] = []
    oddities: list[Oddity] = []

    def add(peak: str | None, label: str, value: float, unit: str) -> None:
        details.append(PeakDetail(source=src, name=label, value=value, unit=unit))
        if peak is not None and (peak not in values or value > values[peak]):
            values[peak] = value

    config_precisions = _config_precisions(meta)
    assumed = 0
    for label, raw, line, where in flops:
        match = _FLOP_LABEL.fullmatch(label.strip())
        value = _giga(path, raw, label=label, line=line, where=where)
        if math.isnan(value):
            # A FLOP ceiling that is inf/nan: a precision the device could not run.
            oddities.append(Oddity(src, f"ceiling {label!r} is inf/nan (a precision the device does not support?); "
                                        "no ceiling for it"))
            continue
        if match is None:
            add(None, label, value, "FLOP/s")
            oddities.append(Oddity(src, f"FLOP ceiling {label!r} is not a GFLOPs ceiling perfcheck knows; kept in details only"))
            continue
        precision = (match.group(1) or "").upper()
        if not precision and len(config_precisions) == 1:
            precision = config_precisions[0]
        if not precision and not config_precisions:
            precision = _DEFAULT_PRECISION
            assumed += 1
        peak = _PRECISION_PEAK.get(precision)
        if peak is None:
            oddities.append(Oddity(src, f"ceiling {label!r}: precision {precision or ', '.join(config_precisions)!r} "
                                        "not recognised; kept in details only"))
        add(peak, label, value, "FLOP/s")
    if assumed:
        oddities.append(Oddity(src, "FLOP precision not recorded (no ERT_PRECISION, label 'GFLOPs'); assumed FP64, "
                                    "the only precision ERT 1.1.0's driver computes in", assumed))

    gpu = _is_gpu_run(meta)
    if gpu is None and any(label.strip().upper() == "DRAM" for label, *_ in bands):
        oddities.append(Oddity(src, "run type (CPU or GPU) not recorded in the metadata; DRAM read as mem_bw (CPU main memory)"))
    for label, raw, line, where in bands:
        value = _giga(path, raw, label=label, line=line, where=where)
        if math.isnan(value):
            oddities.append(Oddity(src, f"bandwidth ceiling {label!r} is inf/nan; left out"))
            continue
        level = label.strip().upper()
        peak = _LEVEL_PEAK.get(level)
        if level == "DRAM":
            # On a GPU run ERT's "DRAM" is the device memory (HBM/GDDR); on a CPU run, main memory.
            peak = "hbm_bw" if gpu else "mem_bw"
        if peak is None:
            oddities.append(Oddity(src, f"bandwidth ceiling {label!r} has no perfcheck peak name; kept in details only"))
        add(peak, label, value, "B/s")

    for label, value, unit in spec:
        add(None, f"{label} (spec)", value, unit)

    source = Source(path=src, format=fmt, tool=TOOL, tool_version=_version(meta))
    return Peaks(values=values, details=tuple(details), sources=(source,), oddities=tuple(oddities))


# --------------------------------------------------------------------------- roofline.json


def _pairs(path: Path, section: object, where: str) -> list[_CeilingRow]:
    if section is None:
        return []
    data = section.get("data") if isinstance(section, dict) else None
    if not isinstance(data, list):
        raise InputError(path, f"{where} has no 'data' list", hint="is this ERT's roofline.json?")
    rows: list[_CeilingRow] = []
    for i, item in enumerate(data):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise InputError(path, f"{where}.data[{i}] is {item!r}, not a [name, value] pair",
                             hint="is this ERT's roofline.json?")
        rows.append((item[0], item[1], None, f"{where}.data[{i}]"))
    return rows


def _read_json(path: Path) -> Peaks:
    text = "\n".join(text_lines(path))
    if not text.strip():
        raise InputError(path, "file is empty", hint="was the ERT run cut off before it wrote roofline.json?")
    try:
        doc = json_loads(text, path, parse_float=Decimal, hint="is this ERT's roofline.json?")
    except json.JSONDecodeError as exc:
        # ERT's json.dump output ends with the closing brace; anything else was cut off.
        cut = not text.rstrip().endswith("}")
        what = "JSON ends early (the file is cut short)" if cut else f"malformed JSON ({exc.msg})"
        raise InputError(path, what, line=exc.lineno, hint="ERT writes roofline.json in one go; rerun or recopy it") from None
    empirical = doc.get("empirical") if isinstance(doc, dict) else None
    if not isinstance(empirical, dict):
        raise InputError(path, "no 'empirical' section", hint="is this ERT's roofline.json?")
    gflops, gbytes = empirical.get("gflops"), empirical.get("gbytes")
    flops = _pairs(path, gflops, "empirical.gflops")
    bands = _pairs(path, gbytes, "empirical.gbytes")
    if not flops and not bands:
        raise InputError(path, "no empirical ceilings (gflops and gbytes data are empty)",
                         hint="did the ERT run finish its post-processing?")
    meta = _metadata_from_json([empirical, gflops, gbytes])

    spec_rows: list[tuple[str, float, str]] = []
    spec = doc.get("spec")
    if isinstance(spec, dict):
        for key, unit in (("gflops", "FLOP/s"), ("gbytes", "B/s")):
            for label, raw, _, where in _pairs(path, spec.get(key), f"spec.{key}"):
                spec_rows.append((label, _giga(path, raw, label=label, line=None, where=where), unit))
    return _build(path, "ert-json", flops, bands, meta, spec_rows)


def _sniff_json(sniff: Sniff) -> bool:
    """By structure (jsonsniff): a top-level "empirical" object with "gbytes" or
    "gflops" in it, wherever the metadata puts them."""
    if sniff.is_dir or sniff.is_binary:
        return False
    top = jsonsniff.keys(sniff.path, until=frozenset({"empirical", "gbytes", "gflops"}), depth=2, brackets="{")
    return top is not None and top.has("empirical", 1) and (top.has("gbytes", 2) or top.has("gflops", 2))


# --------------------------------------------------------------------------- sum


def _read_sum(path: Path) -> Peaks:
    lines = text_lines(path)
    if not any(line.strip() for line in lines):
        raise InputError(path, "file is empty", hint="was the ERT run cut off before its post-processing?")
    flops: list[_CeilingRow] = []
    bands: list[_CeilingRow] = []
    meta_lines: list[str] = []
    in_meta = False
    seen_meta = False
    # A sum file is a few lines per configuration (20 or so); walking them is cheap.
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped == "META_DATA":
            in_meta = seen_meta = True
            continue
        match = _DATA_LINE.fullmatch(line)
        if match is None and _BARE_NUMBER.fullmatch(line):
            raise InputError(path, f"line {stripped!r} has a value but no ceiling name (cut off?)", line=number,
                             hint="the file looks truncated; rerun ERT's post-processing")
        if in_meta and match is None:
            key, _, value = stripped.partition(" ")
            if key == "CONFIG" and value.strip().startswith("{") and not isinstance(_literal(value.strip()), dict):
                raise InputError(path, "CONFIG line is cut off", line=number, hint="the file looks truncated")
            meta_lines.append(stripped)
            continue
        if match is None:
            raise InputError(path, f"unexpected line {stripped[:60]!r}; expected '<value> <ceiling name>'",
                             line=number, hint="is this an ERT sum file?")
        in_meta = False  # the next concatenated configuration starts
        value, label = match.group(1), match.group(2)
        if _SUM_WEIGHT_LINE.fullmatch(line):
            continue
        if label.upper().endswith("GFLOPS"):
            flops.append((label, value, number, ""))
        else:
            bands.append((label, value, number, ""))
    if not flops:
        raise InputError(path, "no '<GFLOP/s> GFLOPs' line", line=1,
                         hint="the file is cut short or not an ERT sum file")
    if not bands:
        raise InputError(path, "no bandwidth lines ('<GB/s> L1', '<GB/s> DRAM', ...) after the GFLOPs line",
                         line=len(lines), hint="the file is cut short; rerun ERT's post-processing")
    if not seen_meta:
        raise InputError(path, "no META_DATA block after the ceilings (ERT always writes one)", line=len(lines),
                         hint="the file is cut short; rerun ERT's post-processing")
    return _build(path, "ert-sum", flops, bands, _metadata_from_lines(meta_lines))


def _sniff_sum(sniff: Sniff) -> bool:
    if sniff.is_dir or sniff.is_binary:
        return False
    lines = sniff.lines[:200]
    if any(_SUM_FLOP_LINE.fullmatch(line) or _SUM_WEIGHT_LINE.fullmatch(line) for line in lines):
        return True
    stripped = {line.strip() for line in lines}
    return "META_DATA" in stripped and any(line.startswith("ERT_VERSION") for line in stripped)


FORMATS: tuple[Format, ...] = (
    Format(
        name="ert-json",
        tool=TOOL,
        kind="peaks",
        description="Empirical Roofline Tool roofline.json (GFLOPs, L1/L2/L3/DRAM GB/s ceilings)",
        sniff=_sniff_json,
        read_peaks=_read_json,
    ),
    Format(
        name="ert-sum",
        tool=TOOL,
        kind="peaks",
        description="Empirical Roofline Tool per-configuration 'sum' text file",
        sniff=_sniff_sum,
        read_peaks=_read_sum,
    ),
)
