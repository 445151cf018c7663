"""One escaping for every Markdown writer (perfcheck.report.mdescape): the check
summary (also the PR comment), ``history report --markdown`` and ``history detect
--markdown`` render each hostile name (tests/hostile_names.py) as inert text, in
every place a name from outside goes: suite, kernel, metric, unit, commit, branch.

Rendered as GitHub renders (CommonMark + GFM tables, raw HTML on), a document with a
hostile name must have exactly the elements of the same document with a plain name:
no extra image, link, script, emphasis or details element, no missing table cell.
What GitHub adds on rendered text (mentions, #references, bare URL autolinks) must
not match outside code spans."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from hostile_names import HOSTILE_NAMES
from perfcheck.history.changepoints import ChangePoint
from perfcheck.history.dashboard import HistoryView, markdown_digest
from perfcheck.history.listing import markdown as detect_markdown
from perfcheck.model import FAILED, Check
from perfcheck.report import mdescape
from perfcheck.report.markdown import CiContext, markdown_summary

PLAIN = "plain"


def _render(text: str) -> str:
    markdown_it = pytest.importorskip("markdown_it")
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text)


def _elements(html: str) -> list[str]:
    return re.findall(r"<(/?[A-Za-z][A-Za-z0-9]*)", html)


def _github_after_markdown(html: str) -> list[str]:
    """What GitHub would still link or notify on: mentions, #123, bare URLs, outside code."""
    outside = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    outside = re.sub(r"<[^>]+>", " ", outside)  # text only (attributes are checked by _elements)
    import html as html_module

    words = html_module.unescape(outside)
    return re.findall(r"@[A-Za-z0-9]|#\d|https?://|\bwww\.", words, flags=re.I)


def _summary(name: str) -> str:
    check = Check(name, name, name, "duration <= 1 ms", name, "<=", 0.002, 0.001, name, FAILED, "expectation",
                  f"{name} took 2 ms", baseline=0.0015)
    return markdown_summary({name: [check], "other": [check]}, context=CiContext(base=name, head=name, sha=name))


def _digest(name: str) -> str:
    times = pd.date_range("2026-11-01", periods=3, freq="D", tz="UTC")
    series = pd.DataFrame({"suite": name, "kernel": name, "metric": "duration", "unit": name, "time": times,
                           "value": [1.0, 1.2, 1.2], "commit": [name, name, name], "low": None, "high": 1.1,
                           "machine": name})
    changes = pd.DataFrame({"suite": name, "kernel": name, "metric": "duration", "time": times[1:2],
                            "before": [1.0], "after": [1.2], "change_pct": [20.0], "kind": ["regression"],
                            "machine": name, "commit": name})
    return markdown_digest(HistoryView(series, changes, title=name))


def _detect(name: str) -> str:
    from perfcheck.history.findings import Finding

    point = ChangePoint(name, name, name, name, name, name, name, 1.7e9, 3, 1.0, 1.2, 20.0, "regression", 1e-4, 5, 5)
    also = ChangePoint(name, name, name, name + "_max", name, name, name, 1.7e9, 3, 1.0, 1.2, 20.0, "regression", 1e-4, 5, 5)
    return detect_markdown([Finding(point, (also,), new=True, status="open")])


WRITERS = {"summary": _summary, "digest": _digest, "detect": _detect}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("index", range(len(HOSTILE_NAMES)))
def test_hostile_names_render_as_inert_text_in_every_markdown_writer(writer: str, index: int) -> None:
    name = HOSTILE_NAMES[index]
    text = WRITERS[writer](name)
    expected = _render(WRITERS[writer](PLAIN))
    html = _render(text)
    assert _elements(html) == _elements(expected), (name, text)
    assert not _github_after_markdown(html), (name, text)
    for line in text.splitlines():
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u2028\u202e]", line), line


def test_code_spans_keep_the_name_a_reviewer_copies() -> None:
    html = _render(mdescape.code("a`b <T|U> @x", table=False))
    assert html == "<p><code>a`b &lt;T|U&gt; @x</code></p>\n"
    # a commit with backticks cannot break out of its span
    html = _render(f"commit {mdescape.code('``x`` **bold**', table=False)}")
    assert "<strong>" not in html and "**bold**" in html


def test_plain_text_shows_as_written() -> None:
    import html as html_module

    for name in HOSTILE_NAMES:
        shown = html_module.unescape(re.sub(r"<[^>]+>", "", _render(mdescape.text(name)))).strip()
        assert shown.replace("\u2060", "") == mdescape.clean(name), name
