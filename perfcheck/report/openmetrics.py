"""GitLab metrics report (``artifacts: reports: metrics``) in OpenMetrics text.

One gauge per metric that was checked, one sample per suite x kernel:
``perfcheck_duration_seconds{suite="stencil",kernel="EOCloverFBCGPU"} 0.002668``.
GitLab compares each line's value, as a string, with the target branch's and
lists what changed in the merge request, so values are written in base units
with full precision (the name carries the unit, as OpenMetrics asks: ``# UNIT``
must be a suffix of the family name) and lines are sorted, so an unchanged
value is an identical string. Checks that could not be evaluated have no value
and write no sample. Per suite, ``perfcheck_checks`` counts the outcomes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from perfcheck.model import ERROR, FAILED, PASSED, RECORDED, XFAILED, XPASSED, Check
from perfcheck.report.results import count_outcomes, write_atomic

# Base unit of a check -> OpenMetrics unit suffix (the spec's lower-case words;
# perfcheck's percentages are 0-100, hence "percent" rather than "ratio"). Units
# without a conventional word (FLOP/s, FLOP/B, inst/s) get no suffix and no
# ``# UNIT`` line; their HELP text names the unit.
_UNIT_SUFFIX = {
    "s": "seconds",
    "B": "bytes",
    "B/s": "bytes_per_second",
    "%": "percent",
}

_INVALID = re.compile(r"[^a-zA-Z0-9_]+")


def metric_name(metric: str, unit: str) -> str:
    """``perfcheck_<metric>[_<unit>]``, only [a-z0-9_], no doubled suffix
    ("occupancy_pct" with unit % -> perfcheck_occupancy_percent)."""
    base = _INVALID.sub("_", metric.lower()).strip("_") or "metric"
    suffix = _UNIT_SUFFIX.get(unit, "")
    if suffix == "percent" and base.endswith("_pct"):
        base = base[: -len("_pct")]
    if suffix and not base.endswith(f"_{suffix}"):
        base = f"{base}_{suffix}"
    return f"perfcheck_{base}"


# GitLab's metrics parser (lib/gitlab/ci/parsers/metrics/generic.rb) is not an
# OpenMetrics parser: per line it deletes everything from the first "#" on, splits
# the rest like a shell (Ruby's Shellwords: quotes and backslashes are syntax) and
# takes the first word as the metric's name and the second as its value. A "#" in a
# kernel name ("{lambda(int)#1}", Kokkos, RAJA, SYCL, Thrust) therefore cuts the line,
# and an unbalanced quote raises, which drops the whole report. Label values are
# therefore written from a safe alphabet: printable ASCII except # " ' \\ % ` $ and
# anything else percent-encoded as UTF-8 (%23 for #, %22 for ", %25 for %); the text
# decodes with urllib.parse.unquote. Names longer than MAX_LABEL_CHARS keep their
# start and end around a short hash, so two long names stay apart.
_SAFE_LABEL = re.compile(r"[^ !&()*+,\-./0-9:;<=>?@A-Z\[\]^_a-z{|}~]")
MAX_LABEL_CHARS = 200


def escape_label(value: str) -> str:
    """A label value GitLab's line parser and an OpenMetrics parser read the same way
    (no quote, backslash, # or control character survives; see above)."""
    encoded = _SAFE_LABEL.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode("utf-8")), value)
    if len(encoded) > MAX_LABEL_CHARS:
        import hashlib

        digest = hashlib.sha1(value.encode("utf-8")).hexdigest()[:10]
        keep = (MAX_LABEL_CHARS - len(digest) - 8) // 2
        encoded = f"{encoded[:keep]}...~{digest}~...{encoded[-keep:]}"
    return encoded


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items()) + "}"


def openmetrics_text(suites: Mapping[str, Sequence[Check]]) -> str:
    """The report text, ending with ``# EOF``."""
    # family name -> (unit suffix, metric, {sample line}); a kernel checked twice on
    # the same metric (two bounds) observes one value: one sample.
    families: dict[str, tuple[Check, dict[tuple[str, str], str]]] = {}
    for suite, checks in suites.items():
        for check in checks:
            if check.observed is None:
                continue
            name = metric_name(check.metric, check.unit)
            family = families.setdefault(name, (check, {}))
            family[1][(suite, check.kernel)] = _value(float(check.observed))
    lines: list[str] = []
    for name in sorted(families):
        first, samples = families[name]
        unit = _UNIT_SUFFIX.get(first.unit, "")
        lines.append(f"# TYPE {name} gauge")
        if unit:
            lines.append(f"# UNIT {name} {unit}")
        lines.append(f"# HELP {name} perfcheck: {first.metric} of each checked kernel, in {first.unit or 'count'}")
        for (suite, kernel), value in sorted(samples.items()):
            lines.append(f"{name}{_labels(suite=suite, kernel=kernel)} {value}")
    lines.append("# TYPE perfcheck_checks gauge")
    lines.append("# HELP perfcheck_checks perfcheck: number of checks per suite and outcome")
    # pytest's xfail outcomes only when the run has them, so other reports stay line for line as they were
    outcomes = [PASSED, FAILED, RECORDED, ERROR]
    outcomes += [o for o in (XFAILED, XPASSED) if any(c.outcome == o for cs in suites.values() for c in cs)]
    for suite in sorted(suites):
        counts = count_outcomes(suites[suite])
        for outcome in outcomes:
            lines.append(f"perfcheck_checks{_labels(suite=suite, outcome=outcome)} {counts.get(outcome, 0)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def write_openmetrics(path: str | Path, suites: Mapping[str, Sequence[Check]]) -> Path:
    """Write the metrics report atomically; returns the path."""
    return write_atomic(path, openmetrics_text(suites))
