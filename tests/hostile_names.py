"""Names an attacker (or an unlucky C++ template) can put into a profile, a results
file or a history store, and so into every report: shared by the tests of every
writer that renders names (Markdown summary, PR comment, history digest, change-point
table). Each is here for one way it used to get through somewhere."""

from __future__ import annotations

HOSTILE_NAMES = [
    "k\r| injected | row |",                                  # a table row split by a bare CR
    "<img src=x onerror=alert(1)>kernel",                      # raw HTML with a script handler
    "<script>alert(1)</script>",
    "name with `backticks` and **stars** and [link](http://x)",
    "esc\x1b[31mred\x1b[0m and \x00nul and \u202eevil",       # terminal escapes, NUL, a bidi override
    "line\nbreak\u2028sep",                                    # a newline and a Unicode line separator
    "{lambda(int)#1}::operator()<T|U>",                        # a real template signature with a pipe
    "@someone please look",                                    # a mention notifies that user
    "@org/team",                                               # a team mention
    "![x](http://host/t.png)",                                 # an image loaded from a remote host
    "[click](javascript:alert(1))",
    "<https://evil.example/autolink>",
    "see https://evil.example/p and www.evil.example",         # GFM's extended autolinks
    "mail admin@evil.example",
    "<!-- perfcheck-comment:perfcheck -->",                    # the sticky comment's marker
    "&lt;b&gt;entity&lt;/b&gt; &amp; &#64;someone",          # entities that decode to HTML and mentions
    "```\nfenced\n```",                                        # a code fence, and backticks in a commit
    "~~strike~~ _em_ __strong__ $x^2$ #123",                   # emphasis, math, an issue reference
    "<details open><summary>x</summary>",
]
assert len(HOSTILE_NAMES) == 19
