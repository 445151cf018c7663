"""What the terminal perfcheck writes to allows: how wide a table may be, and
whether a progress line may be drawn.

On the ground floor: the readers' progress (through ``perfcheck.progress``) and the
text reports both ask. Values only; nothing here prints.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import IO

# A terminal that does not say how wide it is (a serial console, `script`, some CI
# log viewers that still allocate a TTY) is taken to be the classic 80 columns.
DEFAULT_COLUMNS = 80

# CI variables that mean "a log, not a person": GitHub Actions, GitLab, Buildkite,
# Jenkins, Travis, CircleCI and Azure set CI or one of these even where a TTY exists.
_CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "JENKINS_URL", "TF_BUILD")


def _is_tty(stream: IO[str] | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream (pytest's capture)
        return False


def output_width(stream: IO[str] | None, environ: Mapping[str, str] | None = None) -> int | None:
    """Columns a table written to ``stream`` may use; None: no limit (a pipe or a file,
    where a script reads whole lines). ``COLUMNS`` wins where it holds a number, on a
    terminal or not (``COLUMNS=100 perfcheck ... | less`` asks for 100); else the
    terminal's size; else 80."""
    env = os.environ if environ is None else environ
    text = env.get("COLUMNS", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    if not _is_tty(stream):
        return None
    try:
        columns = os.get_terminal_size(stream.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):
        columns = shutil.get_terminal_size((0, 0)).columns
    return columns if columns > 0 else DEFAULT_COLUMNS


def under_ci(environ: Mapping[str, str] | None = None) -> bool:
    """True when a CI system runs us (its log is no place for a redrawn line)."""
    env = os.environ if environ is None else environ
    for name in _CI_VARIABLES:
        value = env.get(name, "").strip().lower()
        if value and value not in ("0", "false", "no", "off"):
            return True
    return False


def interactive(stream: IO[str] | None, environ: Mapping[str, str] | None = None) -> bool:
    """A person watches ``stream``: a terminal, not under CI, not TERM=dumb."""
    env = os.environ if environ is None else environ
    return _is_tty(stream) and not under_ci(env) and env.get("TERM", "") != "dumb"
