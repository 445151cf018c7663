"""The commands added in this session (`compare`, `history accept`, `history copy`,
`inspect --timeline`) on bad input: each row is one mistake a user makes, and each
must end in the ground rule's one line (exit 2, ``perfcheck: error:``, naming what
is wrong; never a traceback, never exit 3). Rows marked in a comment failed before
(exit 3, exit 0 with the option ignored, or a file the user never named)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ROOT, one_line_error, profile
from perfcheck.cli import main

STENCIL = ROOT / "examples" / "stencil" / "perfcheck.toml"
HTA_TRACE = "kineto/hta-amd-mi250-rocm6.2-minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz"  # has ProfilerStep ranges
NO_STEPS = "kineto/pytorch-kineto-unittest-h100-sync-fix-pair/after_fix_trace.json"  # has none
STATS = "rocprof-v1/batched_gemm-mi300x/results.stats.csv"  # kernels only, no timeline


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Damaged and misplaced inputs, and one real store made by `history add`."""
    where = tmp_path_factory.mktemp("bad-input")
    (where / "dir").mkdir()
    (where / "dir.png").mkdir()  # where `--plot dir` would write its PNG
    (where / "file").write_text("x")  # a file where a folder belongs, and a 1-byte non-store
    (where / "empty").write_bytes(b"")
    (where / "text.sqlite").write_text("not a database\n")
    (where / "garbage.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)
    (where / "cut.json").write_text('{"suites": {"before": ')
    (where / "bad.toml").write_text("[[accepted]\n")
    results = where / "results.json"
    env = {k: os.environ.pop(k) for k in ("CI", "PERFCHECK_HISTORY") if k in os.environ}
    try:
        assert main(["check", "--config", str(STENCIL), "--suite", "before", "--json", str(results)]) in (0, 1)
        assert main(["history", "add", str(results), "--history", str(where / "h.sqlite")]) == 0
    finally:
        os.environ.update(env)
    return where


# name: (arguments, with {W} the work folder; fragments the error line holds)
ROWS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # compare
    "compare-missing-file": (("compare", "{W}/missing.json", "after", "--config", "{STENCIL}"), ("missing.json", "no such")),
    "compare-directory": (("compare", "{W}/dir", "after", "--config", "{STENCIL}"), ("{W}/dir",)),
    "compare-cut-results": (("compare", "{W}/cut.json", "after", "--config", "{STENCIL}"), ("cut.json:1", "not valid JSON")),
    "compare-empty-file": (("compare", "{W}/empty", "after", "--config", "{STENCIL}"), ("{W}/empty", "empty")),
    "compare-unknown-suite": (("compare", "befor", "after", "--config", "{STENCIL}"), ("'befor'",)),
    "compare-missing-config": (("compare", "before", "after", "--config", "{W}/missing.toml"), ("missing.toml",)),
    "compare-bad-arch": (("compare", "{P}/" + STATS, "{P}/" + STATS, "--arch", "gfx000"), ("gfx000",)),
    "compare-missing-peaks": (("compare", "{P}/" + STATS, "{P}/" + STATS, "--peaks", "{W}/missing"), ("{W}/missing",)),
    # named the temporary file of the atomic write before, not the path given
    "compare-markdown-is-a-directory": (("compare", "before", "after", "--config", "{STENCIL}", "--markdown", "{W}/dir"),
                                        ("Markdown {W}/dir:", "Is a directory")),
    "compare-roofline-is-a-file": (("compare", "before", "after", "--config", "{STENCIL}", "--roofline", "{W}/file"),
                                   ("roofline in {W}/file",)),
    # history accept
    "accept-missing-store": (("history", "accept", "*", "--reason", "r", "--history", "{W}/missing.sqlite"),
                             ("missing.sqlite", "no such history store")),
    "accept-store-is-a-directory": (("history", "accept", "*", "--reason", "r", "--history", "{W}/dir"), ("is a directory",)),
    "accept-damaged-store": (("history", "accept", "*", "--reason", "r", "--history", "{W}/garbage.sqlite"),
                             ("garbage.sqlite", "not a perfcheck history store")),
    "accept-text-store": (("history", "accept", "*", "--reason", "r", "--history", "{W}/text.sqlite"), ("text.sqlite",)),
    "accept-empty-store": (("history", "accept", "*", "--reason", "r", "--history", "{W}/empty"), ("is empty",)),
    "accept-p-out-of-range": (("history", "accept", "*", "--reason", "r", "--history", "{W}/h.sqlite", "--p", "2"), ("--p",)),
    "accept-p-nan": (("history", "accept", "*", "--reason", "r", "--history", "{W}/h.sqlite", "--p", "nan"), ("--p",)),
    "accept-window-0": (("history", "accept", "*", "--reason", "r", "--history", "{W}/h.sqlite", "--window", "0"),
                        ("--window",)),
    "accept-empty-reason": (("history", "accept", "*", "--reason", "", "--history", "{W}/h.sqlite"), ("--reason",)),
    "accept-bad-regex": (("history", "accept", "re:(", "--reason", "r", "--history", "{W}/h.sqlite"), ("re:(",)),
    "accept-unknown-metric": (("history", "accept", "*", "--reason", "r", "--history", "{W}/h.sqlite", "--metric", "nope"),
                              ("'nope'",)),
    "accept-file-is-a-directory": (("history", "accept", "*", "--reason", "r", "--history", "{W}/h.sqlite",
                                    "--accepted", "{W}/dir"), ("{W}/dir",)),
    "accept-damaged-file": (("history", "accept", "*", "--reason", "r", "--history", "{W}/h.sqlite",
                             "--accepted", "{W}/bad.toml"), ("bad.toml", "not valid TOML")),
    "accept-bad-url": (("history", "accept", "*", "--reason", "r", "--history", "mysql://host/db"), ("mysql",)),
    # history copy
    "copy-missing-source": (("history", "copy", "{W}/missing.sqlite", "{W}/c1.sqlite"), ("missing.sqlite", "no such")),
    "copy-source-is-a-directory": (("history", "copy", "{W}/dir", "{W}/c2.sqlite"), ("is a directory",)),
    "copy-damaged-source": (("history", "copy", "{W}/garbage.sqlite", "{W}/c3.sqlite"), ("garbage.sqlite",)),
    "copy-empty-source": (("history", "copy", "{W}/empty", "{W}/c4.sqlite"), ("is empty",)),
    "copy-target-is-a-directory": (("history", "copy", "{W}/h.sqlite", "{W}/dir"), ("{W}/dir", "is a directory")),
    "copy-target-is-text": (("history", "copy", "{W}/h.sqlite", "{W}/text.sqlite"), ("text.sqlite",)),
    # a 1-byte file was taken by SQLite for an empty database and overwritten by the copy
    "copy-target-is-a-1-byte-file": (("history", "copy", "{W}/h.sqlite", "{W}/file"),
                                     ("{W}/file", "not a perfcheck history store")),
    "copy-onto-itself": (("history", "copy", "{W}/h.sqlite", "{W}/h.sqlite"), ("same store",)),
    "copy-bad-url": (("history", "copy", "{W}/h.sqlite", "mysql://host/db"), ("mysql",)),
    # inspect --timeline
    "timeline-missing-file": (("inspect", "--timeline", "{W}/missing.json"), ("missing.json", "no such")),
    "timeline-directory": (("inspect", "--timeline", "{W}/dir"), ("{W}/dir",)),
    "timeline-empty-file": (("inspect", "--timeline", "{W}/empty"), ("is empty",)),
    "timeline-kernel-only-profile": (("inspect", "--timeline", "{P}/" + STATS), ("holds no timeline",)),
    "timeline-unknown-format": (("inspect", "--timeline", "{P}/" + HTA_TRACE, "--format", "nope"), ("'nope'",)),
    "timeline-no-steps": (("inspect", "--timeline", "{P}/" + NO_STEPS, "--plot", "{W}/p"), ("--plot", "'ProfilerStep'")),
    "timeline-missing-baseline": (("inspect", "--timeline", "{P}/" + HTA_TRACE, "--plot", "{W}/p",
                                   "--baseline-trace", "{W}/missing.json"), ("missing.json",)),
    # the following failed before: exit 3 (an OSError or ValueError from the chart) ...
    "timeline-plot-png-is-a-directory": (("inspect", "--timeline", "{P}/" + HTA_TRACE, "--plot", "{W}/dir"),
                                         ("step chart {W}/dir", "Is a directory")),
    "timeline-plot-under-a-file": (("inspect", "--timeline", "{P}/" + HTA_TRACE, "--plot", "{W}/file/steps"),
                                   ("step chart {W}/file/steps",)),
    "timeline-plot-empty-stem": (("inspect", "--timeline", "{P}/" + HTA_TRACE, "--plot", ""), ("--plot", "file stem")),
    # ... or exit 0 with the option silently ignored
    "timeline-baseline-without-steps": (("inspect", "--timeline", "{P}/" + HTA_TRACE, "--plot", "{W}/p",
                                         "--baseline-trace", "{P}/" + NO_STEPS), ("--baseline-trace", "baseline's timeline")),
    "timeline-step-without-plot": (("inspect", "--timeline", "{P}/" + HTA_TRACE, "--step", "ProfilerStep"),
                                   ("--step", "add --plot")),
    "timeline-baseline-without-plot": (("inspect", "--timeline", "{P}/" + HTA_TRACE, "--baseline-trace", "{P}/" + HTA_TRACE),
                                       ("--baseline-trace", "add --plot")),
    "step-without-timeline": (("inspect", "{P}/" + STATS, "--step", "ProfilerStep"), ("--step", "add --timeline")),
}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_new_commands_on_bad_input_give_one_line(cli: Callable, work: Path, row: str, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delenv("PERFCHECK_HISTORY", raising=False)
    argv, fragments = ROWS[row]
    shared = str(profile(HTA_TRACE).parents[2]) if any("{P}" in a for a in argv) else ""

    def filled(text: str) -> str:
        return text.replace("{W}", str(work)).replace("{STENCIL}", str(STENCIL)).replace("{P}", shared)

    before = (work / "file").read_bytes()
    line = one_line_error(cli(*map(filled, argv)), None, *map(filled, fragments))
    assert ".tmp" not in line  # names what the user gave, never an atomic write's temporary file
    assert (work / "file").read_bytes() == before  # nothing written over a file that is no store
