"""JUnit XML: one <testsuite> per suite, one <testcase> per kernel x expectation.

Shaped for three readers at once:

* Jenkins' xUnit schema (junit-10.xsd, the one pytest's xunit2 output follows)
  allows <properties> only under <testsuite>, so per-suite context (device,
  arch, ceilings with their kind and source, the baseline file) and every
  check's figures go there, one property per check.
* GitLab's and GitHub's test-report readers show a test case's name, its failure
  message and the failure text (GitLab also <system-out>), and nothing of the
  suite's properties: the failure message is ``figures_line`` (observed,
  expected, baseline, each with its unit), the text repeats the check's own
  message and every figure, and passed/recorded cases carry the figures in
  <system-out> so a reader can see by how much they passed.

Where the expectation was declared (``Check.source_file``/``source_line``):

* flavour "xunit" (default, valid against junit-10.xsd, which allows ``file`` on
  <testsuite> but nothing on <testcase>): the suite's ``file`` is the config file,
  and the failure text says ``declared at: perfcheck.toml:24`` (mikepenz/
  action-junit-report takes the file from <testsuite file> and the line from the
  last `` FILE:N`` in the failure text) and ``at dir.Expectation(perfcheck.toml:24)``
  (dorny/test-reporter's java-junit reader takes a Java frame whose package is the
  file's directories). Without a file those readers guess one from the classname.
* flavour "gitlab": also ``file`` and ``line`` on every <testcase>; not valid against
  junit-10.xsd. GitLab's test report reads ``file`` only (lib/gitlab/ci/parsers/test/
  junit.rb: no line), mikepenz/action-junit-report both.

A failing case of a suite with a roofline plot carries ``[[ATTACHMENT|path]]`` in
its <system-out>, which GitLab's test report shows as the case's screenshot.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from perfcheck.model import ERROR, FAILED, RECORDED, XFAILED, Check
from perfcheck.report.results import (
    BaselineStatus,
    baseline_text,
    change_text,
    count_outcomes,
    device_label,
    expected_text,
    figures_line,
    inferred_action,
    observed_text,
    source_path,
    write_atomic,
)
from perfcheck.units import format_value

if TYPE_CHECKING:
    from perfcheck.analysis import Analysis

# Characters XML 1.0 cannot carry at all (ElementTree escapes <, >, & and quotes
# but writes these through, which makes the file unreadable for every parser).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(text: object) -> str:
    return _NOT_XML.sub("?", str(text))


def case_name(check: Check) -> str:
    """"<kernel> :: <expression>", the name pytest items and every report use."""
    return f"{check.kernel} :: {check.expression}"


def _classname(suite: str) -> str:
    return f"perfcheck.{suite}" if suite else "perfcheck"


def source_lines(check: Check) -> list[str]:
    """"declared at: FILE:LINE" and a Java-style frame for stack-trace readers."""
    source = source_path(check)
    if not source:
        return []
    where = source + (f":{check.source_line}" if check.source_line else "")
    lines = [f"declared at: {where}"]
    if check.source_line:
        folder, _, name = source.rpartition("/")
        package = ".".join(p for p in folder.split("/") if p not in ("", "."))
        if package:
            lines.append(f"at {package}.Expectation({name}:{check.source_line})")
    return lines


def check_details(check: Check) -> str:
    """Every figure of a check, one per line, human units first and base units after
    (the body of a failure, or the <system-out> of a passed case)."""
    lines = [
        check.message,
        "",
        f"kernel:      {check.kernel}",
        f"pattern:     {check.pattern}",
        f"expectation: {check.expression}",
        f"metric:      {check.metric}",
        f"observed:    {observed_text(check)}",
        f"expected:    {expected_text(check)}",
    ]
    if check.baseline is not None or check.origin == "baseline":
        lines.append(f"baseline:    {baseline_text(check)}")
        lines.append(f"change:      {change_text(check)}")
    lines.append(f"outcome:     {check.outcome} ({check.origin})")
    if check.detail:
        lines.append(f"detail:      {check.detail}")
    if check.diagnosis:
        lines.append(f"why:         {check.diagnosis}")
    raw = f"observed={check.observed!r} reference={check.reference!r}"
    if check.baseline is not None:
        raw += f" baseline={check.baseline!r}"
    lines.append(f"base units:  {raw} unit={check.unit or '-'}")
    lines += source_lines(check)
    return "\n".join(lines)


def _property_value(check: Check) -> str:
    text = f"{check.outcome}: {figures_line(check)}"
    if check.outcome == ERROR:
        text = f"{check.outcome}: {check.message}"
    return text


def _suite_properties(
    checks: Sequence[Check],
    analysis: "Analysis | None",
    status: BaselineStatus | None,
    extra: Mapping[str, str],
) -> list[tuple[str, str]]:
    props: list[tuple[str, str]] = [(k, str(v)) for k, v in extra.items()]
    if analysis is not None:
        props.append(("device", device_label(analysis)))
        if analysis.target is not None:
            props.append(("arch", analysis.target.arch.name))
        props.append(("target_origin", analysis.target_origin))
        for i, source in enumerate(analysis.sources):
            bits = [source.format] + ([f"version {source.tool_version}"] if source.tool_version else [])
            props.append((f"profile.{i}", f"{source.path} ({', '.join(bits)})"))
        for ceiling in analysis.ceilings.values():
            clock = ceiling.clock_text()
            value = f"{format_value(ceiling.value, ceiling.unit)}{' ' + clock if clock else ''} ({ceiling.kind}: {ceiling.source})"
            if ceiling.theoretical is not None:
                value += f"; theoretical {format_value(ceiling.theoretical.value, ceiling.theoretical.unit)}"
            props.append((f"ceiling.{ceiling.name}", value))
        for oddity in analysis.oddities:
            props.append(("warning", str(oddity)))
    action = status.action if status is not None else inferred_action(checks)
    if status is not None and status.path:
        props.append(("baseline.path", status.path))
    if action:
        props.append(("baseline.action", action))
    for check in checks:
        props.append((f"check: {case_name(check)}", _property_value(check)))
    return props


FLAVOURS = ("xunit", "gitlab")


def _testcase(parent: ET.Element, check: Check, flavour: str = "xunit", attachment: str | None = None) -> None:
    case = ET.SubElement(parent, "testcase", classname=_x(_classname(check.suite)), name=_x(case_name(check)), time="0")
    if flavour == "gitlab" and check.source_file:
        case.set("file", _x(source_path(check)))
        if check.source_line:
            case.set("line", str(check.source_line))
    details = _x(check_details(check))
    if check.outcome in (FAILED, ERROR) and attachment:
        # GitLab reads [[ATTACHMENT|path]] from a case's system-out (its own line)
        out = ET.SubElement(case, "system-out")
        out.text = _x(f"[[ATTACHMENT|{attachment}]]")
    if check.outcome == FAILED:
        kind = "perfcheck.regression" if check.origin == "baseline" else "perfcheck.expectation"
        failure = ET.SubElement(case, "failure", type=kind, message=_x(figures_line(check)))
        failure.text = details
        case.remove(failure)  # junit-10.xsd: <failure> before <system-out>
        case.insert(0, failure)
    elif check.outcome == ERROR:
        # No figures to show: the message says what went wrong and what to do.
        error = ET.SubElement(case, "error", type="perfcheck.error", message=_x(check.message))
        error.text = details
        case.remove(error)
        case.insert(0, error)
    elif check.outcome == XFAILED:
        # As pytest's own junitxml writes an xfailed test: skipped, type pytest.xfail.
        skipped = ET.SubElement(case, "skipped", type="pytest.xfail", message=_x(f"xfailed: {figures_line(check)}"))
        skipped.text = details
    elif check.outcome == RECORDED:
        out = ET.SubElement(case, "system-out")
        out.text = _x(f"baseline recorded (no stored baseline to compare with): {figures_line(check)}\n\n{check_details(check)}")
    else:
        out = ET.SubElement(case, "system-out")
        # "xpassed" for a passed check of an xfail test (pytest counts it apart)
        out.text = _x(f"{check.outcome}: {figures_line(check)}\n\n{check_details(check)}")


def junit_document(
    suites: Mapping[str, Sequence[Check]],
    *,
    analyses: Mapping[str, "Analysis"] | None = None,
    baselines: Mapping[str, BaselineStatus] | None = None,
    properties: Mapping[str, str] | None = None,
    timestamp: datetime | None = None,
    flavour: str = "xunit",
    attachments: Mapping[str, str] | None = None,
) -> ET.Element:
    """The <testsuites> element. ``properties`` (e.g. the CI job, the config file)
    are repeated in every <testsuite>: junit-10.xsd has no <properties> on <testsuites>."""
    analyses = analyses or {}
    baselines = baselines or {}
    stamp = (timestamp or datetime.now(timezone.utc)).replace(microsecond=0, tzinfo=None).isoformat()
    host = socket.gethostname()
    everything = [c for checks in suites.values() for c in checks]
    total = count_outcomes(everything)
    root = ET.Element(
        "testsuites",
        name="perfcheck",
        tests=str(total["total"]),
        failures=str(total[FAILED]),
        errors=str(total[ERROR]),
        time="0",
    )
    for name, checks in suites.items():
        counts = count_outcomes(checks)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_x(name or "perfcheck"),
            tests=str(counts["total"]),
            failures=str(counts[FAILED]),
            errors=str(counts[ERROR]),
            skipped=str(counts.get(XFAILED, 0)),
            time="0",
            timestamp=stamp,
            hostname=_x(host),
        )
        files = {source_path(c) for c in checks if c.source_file}
        if len(files) == 1:  # junit-10.xsd allows file on <testsuite> only
            suite.set("file", _x(files.pop()))
        props = _suite_properties(checks, analyses.get(name), baselines.get(name), properties or {})
        if props:
            holder = ET.SubElement(suite, "properties")
            for key, value in props:
                ET.SubElement(holder, "property", name=_x(key), value=_x(value))
        for check in checks:
            _testcase(suite, check, flavour, (attachments or {}).get(name))
    return root


def junit_xml(suites: Mapping[str, Sequence[Check]], **kwargs: object) -> str:
    root = junit_document(suites, **kwargs)  # type: ignore[arg-type]
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(
    path: str | Path,
    suites: Mapping[str, Sequence[Check]],
    *,
    analyses: Mapping[str, "Analysis"] | None = None,
    baselines: Mapping[str, BaselineStatus] | None = None,
    properties: Mapping[str, str] | None = None,
    flavour: str = "xunit",
    attachments: Mapping[str, str] | None = None,
) -> Path:
    """Write the JUnit XML report atomically; returns the path. ``attachments``:
    suite -> image path (relative to the job's directory) for failing cases."""
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown JUnit flavour {flavour!r}")
    text = junit_xml(suites, analyses=analyses, baselines=baselines, properties=properties,
                     flavour=flavour, attachments=attachments)
    return write_atomic(path, text)
