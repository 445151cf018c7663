"""Names from outside (kernels, suites, devices, metrics, units, commits, branches) in
Markdown that GitHub or GitLab renders: the one place every Markdown writer escapes
them (the check summary and PR comment, ``history report --markdown``, ``history
detect --markdown``).

Two forms, one set of rules:

* ``text``: plain text. Control characters, line and paragraph separators and bidi
  overrides become spaces (none may split a table row or reorder what a reviewer
  reads); every ASCII character with a meaning in Markdown or HTML is
  backslash-escaped, so no emphasis, link, image, raw HTML or HTML comment forms. What
  GitHub adds after Markdown (on text, so an escape does not stop it) is broken with
  an invisible U+2060 WORD JOINER: ``@name`` mentions (which notify that user),
  ``#123`` references, and bare ``http://`` / ``www.`` / ``user@host`` autolinks.
* ``html``: text inside a raw HTML block (``<summary>`` of a ``<details>``), where
  CommonMark takes the line as HTML and backslash escapes would show: HTML-escaped,
  with the same breaks for what GitHub links after rendering.
* ``code``: a code span, for names a reader copies (C++ signatures full of ``<``,
  ``*`` and ``_``): shown verbatim, nothing inside is rendered, mentioned or linked.
  A backtick inside stays a backtick: the fence is one longer than the longest run
  of backticks inside, padded with a space where the name starts or ends with one
  (CommonMark strips one space on each side).

In a table (``table=True``) GFM splits cells on ``|`` even inside a code span unless
it is escaped; outside a table the backslash would show, so it is left alone.
"""

from __future__ import annotations

import re

from perfcheck.units import shorten_middle

# C0/C1 controls, DEL, line and paragraph separators, and the bidi overrides that
# reorder what a reviewer sees: none may reach a table row.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# ASCII punctuation with a meaning in Markdown or HTML (CommonMark: any ASCII
# punctuation may be backslash-escaped, and the backslash then disappears).
_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&\"'$])")
_JOINER = "\u2060"
# GitHub's own links on rendered text (docs.github.com, "Autolinked references and
# URLs"; "About mentions"): @user and @org/team, #123, and GFM's extended autolinks.
_AFTER_MARKDOWN = re.compile(r"(?<=@)(?=[A-Za-z0-9])|(?<=#)(?=\d)|(?<=:)(?=//)|(?<=\bwww)(?=\.)", re.IGNORECASE)


def clean(value: object) -> str:
    """One line: controls to spaces, runs of spaces to one, trimmed."""
    return re.sub(r" {2,}", " ", _CONTROL.sub(" ", str(value))).strip()


def text(value: object, width: int | None = None) -> str:
    """``value`` as inert Markdown text (a table cell, a heading, a sentence)."""
    plain = clean(value)
    if width is not None:
        plain = shorten_middle(plain, width, "…")
    return _AFTER_MARKDOWN.sub(_JOINER, _SPECIAL.sub(r"\\\1", plain))


def html(value: object) -> str:
    """``value`` as inert text inside a raw HTML line."""
    from html import escape

    return _AFTER_MARKDOWN.sub(_JOINER, escape(clean(value), quote=True))


def code(value: object, width: int | None = None, *, table: bool = True) -> str:
    """``value`` as a code span that shows exactly its text."""
    plain = clean(value)
    if width is not None:
        plain = shorten_middle(plain, width, "…")
    if not plain:
        return "` `"
    if table:
        plain = plain.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", plain)), default=0) + 1)
    pad = " " if plain.startswith("`") or plain.endswith("`") else ""
    return f"{fence}{pad}{plain}{pad}{fence}"
